"""The public codec API: headers, errors, trailing bytes, version rules."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kafkapy.errors import DecodeError, EncodeError
from kafkapy.protocol import (
    UnknownApiError,
    UnsupportedVersionError,
    api_name,
    catalogue,
    decode_request,
    decode_request_header,
    decode_request_json,
    decode_response,
    decode_response_json,
    encode_request,
    encode_response,
    message_schema,
)
from kafkapy.protocol.catalogue import request_header_version, response_header_version


def test_catalogue_covers_kafka_python_and_project_specs() -> None:
    apis = catalogue()
    assert api_name(3) == "Metadata" and api_name(18) == "ApiVersions"
    assert api_name(31337) == "Unknown(31337)"
    assert apis[0].versions.low == 0 and apis[0].kafka_versions.low == 3  # Produce v0-2 still decode
    assert {a.source for a in apis.values()} >= {"kafka-python"}


def test_header_versions_follow_kafka_rules() -> None:
    assert request_header_version(3, 8) == 1 and request_header_version(3, 9) == 2
    assert response_header_version(3, 9) == 1
    assert response_header_version(18, 3) == 0  # ApiVersions responses always use header v0
    assert request_header_version(7, 0) == 0  # ControlledShutdown v0


def test_request_round_trip_keeps_header_fields() -> None:
    frame = encode_request(3, 12, 42, "client-a", {"topics": None, "allow_auto_topic_creation": False})
    request = decode_request(frame)
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (3, 12, 42,
                                                                                                   "client-a")
    assert request.body.topics is None and request.header_version == 2
    assert encode_request(3, 12, 42, "client-a", request.body) == frame


def test_null_client_id() -> None:
    assert decode_request(encode_request(18, 0, 1, None, {})).client_id is None


def test_trailing_bytes_are_accepted_and_counted() -> None:
    """librdkafka's Metadata v13 request carries 3 trailing bytes; Java ignores them."""
    frame = encode_request(3, 13, 5, "rdkafka", {"topics": []}) + b"\x00\x00\x00"
    request = decode_request(frame)
    assert request.trailing_bytes == 3 and request.body.topics == []


def test_truncated_frame_names_api_version_and_offset() -> None:
    frame = encode_request(3, 1, 5, "c", {"topics": [{"name": "topic-a"}]})
    with pytest.raises(DecodeError) as info:
        decode_request(frame[:-3])
    err = info.value
    assert err.truncated and err.api_key == 3 and err.api_version == 1 and err.offset is not None
    assert "Metadata (key 3)" in str(err) and "v1" in str(err) and "byte offset" in str(err)


def test_frame_cut_inside_a_run_of_fixed_fields_names_the_field_cut() -> None:
    """Fetch v11 opens with seven fixed-width fields, read as one struct; a frame cut (a capture's
    snap length) inside session_epoch must name it at its own offset and size, not the run's
    first field (replica_id) with the run's 25 bytes, in the Body and the JSON decoders alike."""
    frame = encode_request(1, 11, 5, "rdkafka", {"replica_id": -1, "max_wait_ms": 500})
    cut = frame[:41]  # header 17 bytes, then 24 of the run's 25
    for decode in (decode_request, decode_request_json):
        with pytest.raises(DecodeError) as info:
            decode(cut)
        err = info.value
        assert (err.field, err.offset, err.truncated) == ("session_epoch", 38, True)
        assert str(err).startswith("needed 4 bytes for session_epoch but only 3 remain")


def test_an_array_count_beyond_the_bytes_left_is_called_elements_not_bytes() -> None:
    """ApiVersions v3 cut by a snap length: its api_keys count (66) is more than the 43 bytes
    left. The error called the count 'needed 66 bytes', when 66 entries take 462; it says
    elements now, on both paths and in the JSON decoder."""
    frame = encode_response(18, 3, 1, {"api_keys": [
        {"api_key": key, "min_version": 0, "max_version": 3} for key in range(66)]})
    said = "api_keys holds 66 elements, more than the 43 bytes that remain could hold"
    for decode in (decode_response, decode_response_json):
        with pytest.raises(DecodeError, match=said) as info:
            decode(frame[:50], 18, 3)
        assert info.value.truncated and info.value.offset == 7
    with pytest.raises(DecodeError, match=said):
        message_schema(18, "response", 3).root.read(memoryview(frame[4:50]), 0, 46)  # header: 4 bytes


def test_a_request_given_with_its_size_prefix_says_so() -> None:
    """A frame handed over with its 4-byte size prefix read as Produce at a version equal to the
    size ('Produce v17 is outside the versions kafkapy knows'), which told a proxy's author nothing
    of the mistake; the error now says the bytes open with their size."""
    frame = encode_request(3, 12, 1, "me", {"topics": None})
    prefixed = struct.pack(">i", len(frame)) + frame
    for decode in (decode_request, decode_request_json):
        with pytest.raises(UnsupportedVersionError, match=r"open with their own size prefix \(17\)"):
            decode(prefixed)
    with pytest.raises(DecodeError) as info:  # a frame without it that fails says nothing of it
        decode_request(frame[:-1])
    assert "size prefix" not in str(info.value)


def test_short_header() -> None:
    with pytest.raises(DecodeError, match="at least 8 bytes"):
        decode_request(b"\x00\x03\x00")


def test_unknown_api_and_unsupported_version() -> None:
    frame = struct.pack(">hhih", 31337, 0, 9, -1)
    assert decode_request_header(frame).correlation_id == 9
    with pytest.raises(UnknownApiError):
        decode_request(frame)
    with pytest.raises(UnsupportedVersionError):
        decode_request(struct.pack(">hhih", 3, 999, 9, -1))
    with pytest.raises(UnknownApiError):
        encode_request(31337, 0, 1, None, {})


def test_api_versions_error_falls_back_to_v0_body() -> None:
    """A broker that cannot parse ApiVersions vN answers with a v0 body and error 35."""
    frame = encode_response(18, 0, 7, {"error_code": 35, "api_keys": [
        {"api_key": 18, "min_version": 0, "max_version": 4}]})
    response = decode_response(frame, 18, 4)
    assert response.api_version == 0 and response.body.error_code == 35
    assert response.body.api_keys[0].max_version == 4


def test_unknown_field_and_field_of_other_version_are_refused() -> None:
    with pytest.raises(EncodeError, match="no field 'topicz'"):
        encode_request(3, 12, 1, "c", {"topicz": []})
    with pytest.raises(EncodeError, match="exists only in versions"):
        encode_request(3, 1, 1, "c", {"topics": [], "allow_auto_topic_creation": False})
    # A field of another version holding its default is harmless.
    encode_request(3, 1, 1, "c", {"topics": [], "allow_auto_topic_creation": True})


def test_encode_error_names_the_field() -> None:
    with pytest.raises(EncodeError) as info:
        encode_request(3, 1, 1, "c", {"topics": [{"name": 12}]})
    assert info.value.field == "topics.name"
    with pytest.raises(EncodeError):
        encode_response(18, 3, 1, {"error_code": 70000})


@pytest.mark.parametrize(("body", "field"), [
    # a bool field was written as the value's truth: "false" went out as true, None as false
    ({"topics": None, "allow_auto_topic_creation": "false"}, "allow_auto_topic_creation"),
    ({"topics": None, "allow_auto_topic_creation": None}, "allow_auto_topic_creation"),
    ({"topics": None, "include_topic_authorized_operations": 2}, "include_topic_authorized_operations"),
    # a malformed UUID string was a bare ValueError, with no field named
    ({"topics": [{"topic_id": "not-a-uuid", "name": "t"}]}, "topics.topic_id"),
    ({"topics": [{"topic_id": 5, "name": "t"}]}, "topics.topic_id"),
])
def test_a_bool_or_uuid_field_of_another_type_is_an_encode_error_naming_it(body: Any, field: str) -> None:
    with pytest.raises(EncodeError) as info:
        encode_request(3, 12, 1, "c", body)
    assert info.value.field == field
    schema = message_schema(3, "request", 12)
    with pytest.raises(EncodeError) as info:  # the interpreted path alike
        schema.root.write(body, bytearray())
    assert info.value.field == field


def test_bools_are_written_from_true_false_and_0_1() -> None:
    for value, wire in ((True, True), (False, False), (1, True), (0, False)):
        body = decode_request(encode_request(3, 12, 1, "c", {"topics": None,
                                                             "allow_auto_topic_creation": value})).body
        assert body.allow_auto_topic_creation is wire


def test_unknown_tagged_fields_survive_a_round_trip() -> None:
    body = {"error_code": 0, "api_keys": [], "throttle_time_ms": 0, "_unknown_tags": {7: b"abc", 99: b""}}
    frame = encode_response(18, 3, 1, body)
    decoded = decode_response(frame, 18, 3)
    assert decoded.body["_unknown_tags"] == {7: b"abc", 99: b""}
    assert encode_response(18, 3, 1, decoded.body) == frame


def test_tagged_fields_absent_take_defaults() -> None:
    decoded = decode_response(encode_response(18, 3, 1, {}), 18, 3)
    assert decoded.body.finalized_features_epoch == -1 and decoded.body.supported_features == []


def test_schema_is_a_construct_with_core_and_compiled_paths() -> None:
    schema = message_schema(3, "response", 12)
    body = {"brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}], "cluster_id": "c",
            "controller_id": 1, "topics": []}
    built = schema.build(body)
    parsed = schema.parse(built)
    assert parsed.brokers[0].host == "h" and schema.build(parsed) == built
    compiled = schema.compile()
    assert compiled.parse(built) == parsed and compiled.build(parsed) == built
    decode, _ = schema.compiled_codec()
    assert decode(memoryview(built), 0, len(built))[0] == parsed
    assert message_schema(3, "response", 12) is schema  # built once, cached


def test_fit_body_drops_fields_a_version_lacks() -> None:
    from kafkapy.protocol import fit_body

    newest = {"throttle_time_ms": 5, "cluster_id": "c", "controller_id": 1, "topics": [],
              "brokers": [{"node_id": 1, "host": "h", "port": 1, "rack": "r"}]}
    old = fit_body(3, "response", 0, newest)
    assert old == {"brokers": [{"node_id": 1, "host": "h", "port": 1}], "topics": []}
    assert decode_response(encode_response(3, 0, 1, old), 3, 0).body == old


def _filled(codec: Any) -> Any:
    """A value for ``codec`` with every nested struct present: arrays of structs hold one (and a
    null where the element may be null), nullable structs are set, so ``fit`` has work at every level."""
    from kafkapy.protocol.primitives import Array
    from kafkapy.protocol.schema import NullableStruct, StructCodec

    if isinstance(codec, NullableStruct):
        return _filled(codec.inner)
    if isinstance(codec, StructCodec):
        body = codec.default_body()
        for slot in codec.slots + codec.tagged:
            body[slot.key] = _filled(slot.codec) if _has_struct(slot.codec) else body[slot.key]
        body["not_a_field"] = 1  # no version has it: fit must drop it too
        return body
    if isinstance(codec, Array):
        return [_filled(codec.element), None] if isinstance(codec.element, NullableStruct) else \
            [_filled(codec.element)]
    raise AssertionError(codec)


def _has_struct(codec: Any) -> bool:
    from kafkapy.protocol.primitives import Array
    from kafkapy.protocol.schema import NullableStruct, StructCodec

    if isinstance(codec, Array):
        return _has_struct(codec.element)
    return isinstance(codec, (StructCodec, NullableStruct))


@pytest.mark.parametrize("kind", ["request", "response"])
def test_compiled_fit_equals_the_interpreted_fit_for_every_message_and_version(kind: str) -> None:
    from kafkapy.protocol.catalogue import catalogue

    for key, api in catalogue().items():
        newest = _filled(message_schema(key, kind, api.versions.high).root)
        for version in range(api.versions.low, api.versions.high + 1):
            schema = message_schema(key, kind, version)
            expected = schema.root.fit(newest)
            fitted = schema.compiled_fit()(newest)
            assert fitted == expected, (api.name, version)
            assert "not_a_field" not in fitted
            exact = schema.root.fit(expected)  # nothing to drop: the one-copy path
            assert schema.compiled_fit()(exact) == exact and schema.compiled_fit()(exact) is not exact
