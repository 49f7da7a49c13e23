"""Garbage in gives a decoded value or DecodeError, never anything else (h11's one invariant).

Also checks that the compiled and interpreted paths of every message schema
accept and reject the same inputs.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.errors import DecodeError
from kafkapy.protocol import (
    catalogue,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from kafkapy.protocol.catalogue import response_header_version
from kafkapy.protocol.codec import message_schema
from kafkapy.protocol.schema import MessageSchema


def _default_frames() -> list[tuple[str, int, int, bytes]]:
    frames = []
    for key, api in sorted(catalogue().items()):
        for version in (api.versions.low, api.versions.high):
            frames.append(("request", key, version, encode_request(key, version, 77, "fuzz", {})))
            frames.append(("response", key, version, encode_response(key, version, 77, {})))
    return frames


FRAMES = _default_frames()


def _header_size(kind: str, key: int, version: int) -> int:
    if kind == "request":
        return decode_request_header(encode_request(key, version, 77, "fuzz", {})).header_size
    return 4 if response_header_version(key, version) == 0 else 5


def _decode(kind: str, key: int, version: int, data: bytes) -> Any:
    if kind == "request":
        return decode_request(data)
    return decode_response(data, key, version)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=300))
def test_random_bytes_only_raise_decode_error(data: bytes) -> None:
    try:
        decode_request(data)
    except DecodeError as exc:
        assert not exc.reason.startswith("internal"), exc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=st.sampled_from(FRAMES), data=st.binary(max_size=200))
def test_random_bodies_only_raise_decode_error(frame: tuple[str, int, int, bytes], data: bytes) -> None:
    kind, key, version, valid = frame
    head = valid[:8] if kind == "request" else valid[:4]
    try:
        _decode(kind, key, version, head + data)
    except DecodeError as exc:
        assert not exc.reason.startswith("internal"), exc


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, int, int, bytes]:
    kind, key, version, valid = draw(st.sampled_from(FRAMES))
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "big"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif op == "cut":
            del data[at:]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif op == "big" and len(data) >= at + 4:
            data[at:at + 4] = struct.pack(">i", draw(st.sampled_from([2**31 - 1, -2, 0x7FFF0000, 65536])))
    return kind, key, version, bytes(data)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated())
def test_mutated_frames_only_raise_decode_error(case: tuple[str, int, int, bytes]) -> None:
    kind, key, version, data = case
    try:
        _decode(kind, key, version, data)
    except DecodeError as exc:
        assert not exc.reason.startswith("internal"), exc


def _outcome(fn: Any, data: bytes) -> Any:
    try:
        return fn(memoryview(data), 0, len(data))
    except DecodeError as exc:
        # the field too: an error must name the same field on both paths
        return ("DecodeError", exc.truncated, exc.field)


SCHEMAS: list[MessageSchema] = [
    message_schema(key, kind, version)
    for key in (0, 1, 3, 18, 19, 32, 48, 57)
    for kind in ("request", "response")
    for version in sorted({catalogue()[key].versions.low, catalogue()[key].versions.high,
                           (catalogue()[key].versions.low + catalogue()[key].versions.high) // 2})
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: f"{s.spec.name}-v{s.version}")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=120), prefix=st.sampled_from([b"", b"\x00", b"\x00\x00\x00\x01"]))
def test_compiled_and_interpreted_paths_agree(schema: MessageSchema, data: bytes, prefix: bytes) -> None:
    decode, _ = schema.compiled_codec()
    interpreted = _outcome(schema.root.read, prefix + data)
    assert _outcome(decode, prefix + data) == interpreted


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated())
def test_compiled_and_interpreted_paths_agree_on_mutated_bodies(case: tuple[str, int, int, bytes]) -> None:
    kind, key, version, data = case
    schema = message_schema(key, kind, version)
    decode, _ = schema.compiled_codec()
    # Skip the header (its own schemas are covered by the frame-level tests above).
    body = data[_header_size(kind, key, version):]
    assert _outcome(decode, body) == _outcome(schema.root.read, body)


# --- the hand-read request header ------------------------------------------------------------------


def _reference_request(data: bytes) -> Any:
    """decode_request the long way: the header through the compiled RequestHeader schema."""
    try:
        header = decode_request_header(data)
        decode_body, _ = message_schema(header.api_key, "request", header.api_version).compiled_codec()
        body, stop = decode_body(data, header.header_size, len(data))
    except DecodeError:
        return "DecodeError"
    return (header.api_key, header.api_version, header.correlation_id, header.client_id, body,
            len(data) - stop, header.header_version)


def _request_outcome(data: bytes) -> Any:
    try:
        return tuple(decode_request(data))
    except DecodeError:
        return "DecodeError"


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated())
def test_the_hand_read_header_agrees_with_the_header_schema(case: tuple[str, int, int, bytes]) -> None:
    kind, _, _, data = case
    if kind == "request":
        assert _request_outcome(data) == _reference_request(data)


@pytest.mark.parametrize("client_id", ["", "a-client", None, "ünïcode"])
@pytest.mark.parametrize("key,version", [(18, 3), (18, 0), (3, 12), (3, 1), (7, 0)])
def test_the_hand_read_header_reads_every_header_version(key: int, version: int,
                                                         client_id: str | None) -> None:
    data = encode_request(key, version, 77, client_id, {})
    assert _request_outcome(data) == _reference_request(data)
    assert decode_request(data).client_id == (client_id if key != 7 else None)  # v0 header: no client id


def test_tags_in_a_request_header_are_read_the_long_way() -> None:
    plain = encode_request(18, 3, 5, "tagged", {"client_software_name": "a", "client_software_version": "1"})
    at = 8 + 2 + len("tagged")  # the header's tag section: one byte, no tags
    assert plain[at] == 0
    tagged = plain[:at] + b"\x01\x05\x02ab" + plain[at + 1:]  # one unknown tag (5), two bytes
    assert tuple(decode_request(tagged)) == tuple(decode_request(plain))
    assert _request_outcome(tagged) == _reference_request(tagged)
