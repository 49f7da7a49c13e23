"""The JSON decoders write what the capture rows' encoder writes for the Body decoder's output,
and ``decode_response``'s fast path decodes as its general path does.

For every message, direction and version: bodies drawn from the spec (the kafka-python
interop test's strategies, unknown tags injected), encoded by kafkapy, then decoded both
ways; and random or mutated bytes, where both ways must raise the same DecodeError (same
message, offset, field) or give the same text. Real captures are compared in
tests/capture/test_rendered.py.
"""

from __future__ import annotations

import json
import math
import os
import struct
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_codec import _filled, _has_struct
from test_fuzz import mutated
from test_interop_kafka_python import inject_unknown_tags, struct_strategy

from kafkapy.capture.rows import _error_code, _topics, to_json
from kafkapy.errors import DecodeError, EncodeError
from kafkapy.protocol import catalogue, decode_request, decode_response, encode_request, encode_response
from kafkapy.protocol.codec import (
    Response,
    _body_decoder,
    _decode_response,
    decode_request_json,
    decode_response_json,
    json_body_decoder,
    message_schema,
    request_json_decoder,
    response_json_decoder,
)
from kafkapy.protocol.error_sites import body_errors
from kafkapy.protocol.json_decoder import _float

CASES = [
    (key, kind, version)
    for key, api in sorted(catalogue().items())
    for kind in ("request", "response")
    for version in range(api.versions.low, api.versions.high + 1)
]
SETTINGS = settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
# Drawn frames per property (about one per message and version); raise it for a deeper run.
EXAMPLES = int(os.environ.get("KAFKAPY_JSON_EXAMPLES", "1500"))


def _error(exc: DecodeError) -> tuple[Any, ...]:
    return ("error", type(exc), str(exc), exc.offset, exc.field, exc.truncated, exc.api_key, exc.api_version)


def _old(kind: str, data: bytes, key: int, version: int, decode_records: bool) -> tuple[Any, ...]:
    try:
        if kind == "request":
            r: Any = decode_request(data)
            head = (r.api_key, r.api_version, r.correlation_id, r.client_id, r.header_version)
        else:
            r = decode_response(data, key, version)
            head = (r.api_key, r.api_version, r.correlation_id)
    except DecodeError as exc:
        return _error(exc)
    body = r.body
    errors = body_errors(body) if kind == "response" else None
    return ("ok", head, r.trailing_bytes, to_json(body, decode_records=decode_records), _error_code(body),
            _topics(body), errors)  # fmt: skip


# The bound decoders the capture rows use, kept across examples as the rows keep them.
BOUND = {d: (request_json_decoder(d), response_json_decoder(d)) for d in (True, False)}


def _new(kind: str, data: Any, key: int, version: int, decode_records: bool, bound: bool = False
         ) -> tuple[Any, ...]:
    try:
        if kind == "request":
            plain = partial(decode_request_json, decode_records=decode_records)
            decode = BOUND[decode_records][0] if bound else plain
            r: Any = decode(data)
            head = (r.api_key, r.api_version, r.correlation_id, r.client_id, r.header_version)
        else:
            if bound:
                r = BOUND[decode_records][1](data, key, version)
            else:
                r = decode_response_json(data, key, version, decode_records=decode_records)
            head = (r.api_key, r.api_version, r.correlation_id)
    except DecodeError as exc:
        return _error(exc)
    body = r.body
    return ("ok", head, r.trailing_bytes, body.text, body.error_code, body.topics, body.errors)


def _general_response(data: Any, key: int, version: int) -> tuple[Any, ...]:
    """decode_response's general path (compiled header schema, then the body), which its per-API
    fast path (header by hand) must equal, answers and errors alike."""
    try:
        r = _decode_response(data, key, version, _body_decoder, Response)
    except DecodeError as exc:
        return _error(exc)
    return ("ok", (r.api_key, r.api_version, r.correlation_id), r.trailing_bytes, to_json(r.body))


def _fast_response(data: Any, key: int, version: int) -> tuple[Any, ...]:
    try:
        r = decode_response(data, key, version)
    except DecodeError as exc:
        return _error(exc)
    assert type(r) is Response
    return ("ok", (r.api_key, r.api_version, r.correlation_id), r.trailing_bytes, to_json(r.body))


def _check(kind: str, data: bytes, key: int, version: int) -> tuple[Any, ...]:
    if kind == "response":
        assert _fast_response(data, key, version) == _general_response(data, key, version)
    for decode_records in (True, False):
        old = _old(kind, data, key, version, decode_records)
        assert _new(kind, data, key, version, decode_records) == old
        assert _new(kind, data, key, version, decode_records, bound=True) == old
    return old


def _encode(kind: str, key: int, version: int, body: Any) -> bytes:
    if kind == "request":
        return encode_request(key, version, 77, "client", body)
    return encode_response(key, version, 77, body)


@pytest.mark.parametrize("kind", ["request", "response"])
def test_every_message_and_version_with_defaults_and_every_struct_filled(kind: str) -> None:
    checked = 0
    for key, api in sorted(catalogue().items()):
        newest = _filled(message_schema(key, kind, api.versions.high).root)
        for version in range(api.versions.low, api.versions.high + 1):
            assert _check(kind, _encode(kind, key, version, {}), key, version)[0] == "ok"
            try:
                frame = _encode(kind, key, version, message_schema(key, kind, version).root.fit(newest))
            except EncodeError:  # a default a version cannot write (a null non-nullable records)
                continue
            assert _check(kind, frame, key, version)[0] == "ok"
            checked += 1
    assert checked > 300  # of the 341 versions per direction


def _failing(codec: Any, index: int = 0) -> Any:
    """A body of ``codec`` where every array of structs holds five (so the flat-array paths run),
    each element's ints its index and its error codes non-zero on every other element."""
    from kafkapy.protocol.primitives import Array, Fixed
    from kafkapy.protocol.schema import NullableStruct, StructCodec

    if isinstance(codec, NullableStruct):
        return _failing(codec.inner, index)
    if isinstance(codec, StructCodec):
        body = codec.default_body()
        for slot in codec.slots + codec.tagged:
            if slot.key == "error_code":
                body[slot.key] = 0 if index % 2 else 6 + index
            elif _has_struct(slot.codec):
                body[slot.key] = _failing(slot.codec, index)
            elif isinstance(slot.codec, Fixed) and slot.codec.name in ("int8", "int16", "int32", "int64"):
                body[slot.key] = index
        return body
    if isinstance(codec, Array):
        return [_failing(codec.element, i) for i in range(5)]
    raise AssertionError(codec)


def test_every_error_code_of_every_response_is_listed_where_it_sits() -> None:
    """The JSON decoders' errors equal body_errors of the Body decoder's body, on bodies with a
    non-zero code in every struct that has one (the flat-array fast paths included)."""
    listed = 0
    for key, api in sorted(catalogue().items()):
        for version in range(api.versions.low, api.versions.high + 1):
            root = message_schema(key, "response", version).root
            try:
                frame = _encode("response", key, version, _failing(root))
            except EncodeError:
                continue
            result = _check("response", frame, key, version)
            assert result[0] == "ok"
            listed += len(result[-1])
            if "error_code" in root.keys and root.slots[0].key == "error_code":
                assert result[-1][0]["code"] == 6  # the top-level code, first as it is read first
    assert listed > 3000


def test_an_error_names_its_topic_partition_and_code() -> None:
    body = {"responses": [{"name": "t", "partition_responses": [{"index": 3, "error_code": 6},
                                                                {"index": 4, "error_code": 0}]}]}
    rendered = decode_response_json(encode_response(0, 9, 1, body), 0, 9).body
    assert rendered.errors == [{"topic": "t", "partition": 3, "code": 6, "name": "NOT_LEADER_OR_FOLLOWER"}]
    join = {"error_code": 79, "member_id": "m-1", "generation_id": -1, "leader": "", "members": []}
    rendered = decode_response_json(encode_response(11, 7, 1, join), 11, 7).body
    assert rendered.errors == [{"member": "m-1", "code": 79, "name": "MEMBER_ID_REQUIRED"}]
    assert decode_request_json(encode_request(0, 9, 1, "c", {"topic_data": []})).body.errors is None


@st.composite
def _frames(draw: st.DrawFn) -> tuple[str, int, int, bytes]:
    """A frame of any message, direction and version, its body drawn from the spec; unknown tags in
    every struct of flexible versions now and then."""
    key, kind, version = draw(st.sampled_from(CASES))
    spec = message_schema(key, kind, version).spec
    flexible = spec.is_flexible(version)
    body = draw(struct_strategy(spec.fields, version, flexible), label="body")
    if flexible and draw(st.booleans()):
        tags = draw(st.sampled_from([{99: b"xyz"}, {150: b"", 300: b"\x01", 20000: bytes(range(256))}]))
        body = inject_unknown_tags(spec.fields, version, body, tags)
    return kind, key, version, _encode(kind, key, version, body)


@settings(SETTINGS, max_examples=EXAMPLES)
@given(frame=_frames())
def test_drawn_bodies_decode_to_the_same_text(frame: tuple[str, int, int, bytes]) -> None:
    kind, key, version, data = frame
    assert _check(kind, data, key, version)[0] == "ok"


@settings(SETTINGS, max_examples=EXAMPLES)
@given(frame=_frames(), data=st.data())
def test_mutated_drawn_frames_give_the_same_text_or_the_same_error(
    frame: tuple[str, int, int, bytes], data: st.DataObject
) -> None:
    kind, key, version, raw = frame
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert", "big", "tags"]))
        at = data.draw(st.integers(0, max(len(buf) - 1, 0)))
        if op == "flip" and buf:
            buf[at] ^= data.draw(st.integers(1, 255))
        elif op == "cut":
            del buf[at:]
        elif op == "insert":
            buf[at:at] = data.draw(st.binary(min_size=1, max_size=4))
        elif op == "big" and len(buf) >= at + 4:
            buf[at:at + 4] = struct.pack(">i", data.draw(st.sampled_from([2**31 - 1, -2, 0x7FFF0000, 65536])))
        elif op == "tags":  # a tag section where a zero byte was: unknown and known tags, duplicates
            zeros = [i for i, b in enumerate(buf) if b == 0]
            if zeros:
                i = data.draw(st.sampled_from(zeros))
                buf[i:i + 1] = data.draw(st.sampled_from([b"\x02\x00\x01\x01\x00\x00", b"\x01\x05\x02ab",
                                                          b"\x02\x07\x00\x07\x01\xff", b"\x01\x00\x03xyz"]))
    _check(kind, bytes(buf), key, version)


@settings(SETTINGS, max_examples=EXAMPLES)
@given(case=mutated())
def test_mutated_default_frames_give_the_same_text_or_error(case: tuple[str, int, int, bytes]) -> None:
    kind, key, version, data = case
    _check(kind, data, key, version)


@settings(SETTINGS, max_examples=EXAMPLES)
@given(case=st.sampled_from(CASES), data=st.binary(max_size=200))
def test_random_bytes_give_the_same_text_or_the_same_error(case: tuple[int, str, int], data: bytes) -> None:
    key, kind, version = case
    head = struct.pack(">hhih", key, version, 5, 1) + b"c" if kind == "request" else struct.pack(">i", 5)
    _check(kind, head + data, key, version)
    _check(kind, data, key, version)


def test_floats_are_written_as_json_dumps_writes_them() -> None:
    for value in (0.0, -0.0, 1.5, 1e300, 5e-324, 1 / 3, math.nan, math.inf, -math.inf, 2.0**53 + 1):
        assert _float(value) == json.dumps(value)


def test_float64_fields_take_the_float_writer() -> None:
    """DescribeClientQuotas' quota values are float64 (NaN and infinities included)."""
    key, version = 48, 1
    entries = [{"entity": [{"entity_type": "user", "entity_name": "u"}],
                "values": [{"key": "rate", "value": v} for v in (1.5, math.nan, -math.inf, 1e300)]}]
    frame = encode_response(key, version, 1, {"entries": entries})
    text = _check("response", frame, key, version)[3]
    assert '"value":NaN' in text and '"value":-Infinity' in text


def test_decoders_are_compiled_once() -> None:
    assert json_body_decoder(3, "response", 12) is json_body_decoder(3, "response", 12)
    assert json_body_decoder(3, "response", 12, False) is not json_body_decoder(3, "response", 12)


@pytest.mark.parametrize("version", [1, 3, 4])
def test_the_api_versions_v0_error_fallback(version: int) -> None:
    """A broker that cannot read the request's version answers with a v0 body (UNSUPPORTED_VERSION)."""
    frame = encode_response(18, 0, 9, {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0,
                                                                       "max_version": 3}]})
    outcome = _check("response", frame, 18, version)
    assert outcome[1] == (18, 0, 9) and outcome[4] == 35


def _api_keys(n: int) -> list[dict[str, int]]:
    return [{"api_key": i, "min_version": -i, "max_version": 32767 - i} for i in range(n)]


@pytest.mark.parametrize("version", [0, 3])  # without and with tag sections
@pytest.mark.parametrize("count", [0, 1, 3, 4, 5, 60, 1024, 1025])
def test_flat_arrays_read_whole_match_and_fail_alike(version: int, count: int) -> None:
    """ApiVersions' entries are ints only: from four of them on, the array is read whole when all
    its bytes (and empty tag sections) are there; otherwise, and cut anywhere, element by element."""
    body = {"api_keys": _api_keys(count)}
    frame = encode_response(18, version, 5, body)
    assert _check("response", frame, 18, version)[0] == "ok"
    for cut in {len(frame) - 1, len(frame) - 5, 12, 13, 14, 15}:
        if 0 <= cut < len(frame):
            _check("response", frame[:cut], 18, version)
    if version and count:
        tagged = inject_unknown_tags(message_schema(18, "response", version).spec.fields, version,
                                     body, {42: b"ab"})
        bad_tags = frame.replace(b"\x00\x00\x7f\xff\x00", b"\x00\x00\x7f\xff\x01", 1)  # a count, no tags
        for other in (encode_response(18, version, 5, tagged), bad_tags):
            _check("response", other, 18, version)


def test_fetch_partitions_read_whole() -> None:
    """Fetch requests' partitions (six ints and a tag section) take the whole-array read too."""
    parts = [{"partition": i, "fetch_offset": 1 << 40 | i, "partition_max_bytes": 1 << 20} for i in range(9)]
    body = {"topics": [{"topic": "t", "partitions": parts}], "max_wait_ms": 500}
    frame = encode_request(1, 12, 3, "c", body)
    outcome = _check("request", frame, 1, 12)
    assert outcome[0] == "ok" and outcome[3].count('"partition":') == 9


def test_bound_decoders_take_any_buffer_and_refuse_alike() -> None:
    """The bound decoders cache per API and version: short frames, unknown keys and versions still
    raise every time, and views and bytearrays decode as bytes do."""
    frame = encode_request(18, 3, 9, "c", {"client_software_name": "x"})
    framed = memoryview(b"??" + frame + b"!")[2:-1]
    for d in (True, False):
        for data in (frame, bytearray(frame), framed, frame[:7], frame[:4], b"\x00\x12",
                     struct.pack(">hhih", 9999, 0, 1, -1), struct.pack(">hhih", 18, 99, 1, -1), frame):
            assert _new("request", data, 18, 3, d, bound=True) == _new("request", data, 18, 3, d)
        response = encode_response(18, 3, 9, {"api_keys": _api_keys(5)})
        for data, key, version in ((response, 18, 3), (memoryview(response), 18, 3), (response, 9999, 0),
                                   (response, 18, 99), (response[:3], 18, 3), (response, 18, 3)):
            expected = _new("response", data, key, version, d)
            assert _new("response", data, key, version, d, bound=True) == expected


@pytest.mark.parametrize("names", [[None], ["t"], [], ["a", None, "a", "b"]])
def test_topic_names_of_one_and_many_topics(names: list[str | None]) -> None:
    """One topic (the common body) takes a shortcut; a null name (Metadata v12's topics by id) is
    left out there too, and the names of several are deduplicated in order."""
    frame = encode_response(3, 12, 4, {"topics": [{"name": n} for n in names]})
    outcome = _check("response", frame, 3, 12)
    assert outcome[0] == "ok" and outcome[5] == list(dict.fromkeys(n for n in names if n is not None))


@pytest.mark.parametrize("count", [0, 1, 2, 3, 64, 65, 200])
def test_int_arrays_of_any_length(count: int) -> None:
    """Int arrays are written by one template per length up to 64, by str() beyond."""
    nodes = [(-1) ** i * (i << 20) for i in range(count)]
    partition = {"partition_index": 0, "replica_nodes": nodes, "isr_nodes": nodes[:2]}
    frame = encode_response(3, 12, 4, {"topics": [{"name": "t", "partitions": [partition]}]})
    outcome = _check("response", frame, 3, 12)
    assert outcome[0] == "ok" and f'"replica_nodes":{json.dumps(nodes, separators=(",", ":"))}' in outcome[3]
