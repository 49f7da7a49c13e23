"""Topic ids named from what the capture taught: Fetch v13+ (and the other messages that carry ids
alone) get the names of Metadata v10+ answers seen before them, in their bodies, ``topics``,
``errors`` and the ``--topic`` filter."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from typing import Any

from kafkapy.capture.rows import COLUMNS, decode_capture
from kafkapy.capture.topic_names import _API_KEY, _API_VERSION, _ERRORS, _REQUEST, _RESPONSE, _TOPICS
from kafkapy.errors import ErrorCode
from kafkapy.protocol import build_record_batch, encode_request, encode_response
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.catalogue import catalogue
from kafkapy.protocol.codec import message_schema
from kafkapy.protocol.topic_ids import NAME_KEYS, add_topic_names, topic_id_messages, topic_id_shape
from tests.capture.test_rows import _pcap

ORDERS = uuid.UUID("6f1c4f5e-3a2b-4c1d-9e8f-0123456789ab")
PAYMENTS = uuid.UUID("0a0b0c0d-0e0f-4a1b-8c2d-3e4f5a6b7c8d")


def _metadata(corr: int) -> tuple[bytes, bytes]:
    request = encode_request(ApiKey.METADATA, 12, corr, "c1",
                             {"topics": None, "allow_auto_topic_creation": False})
    topics = [{"error_code": 0, "name": name, "topic_id": topic_id, "is_internal": False, "partitions": [],
               "topic_authorized_operations": -2147483648}
              for name, topic_id in (("orders", ORDERS), ("payments", PAYMENTS))]
    response = encode_response(ApiKey.METADATA, 12, corr, {
        "throttle_time_ms": 0, "brokers": [], "cluster_id": "x", "controller_id": 1, "topics": topics})
    return request, response


def _fetch(corr: int) -> tuple[bytes, bytes]:
    partition = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 9, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}
    request = encode_request(ApiKey.FETCH, 13, corr, "c1", {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic_id": ORDERS, "partitions": [partition]}],
        "forgotten_topics_data": [], "rack_id": ""})
    answer = {"partition_index": 0, "error_code": ErrorCode.OFFSET_OUT_OF_RANGE, "high_watermark": 3,
              "last_stable_offset": 3, "log_start_offset": 0, "aborted_transactions": None,
              "preferred_read_replica": -1, "records": build_record_batch([(b"k", b"v", [])])}
    response = encode_response(ApiKey.FETCH, 13, corr, {
        "throttle_time_ms": 0, "error_code": 0, "session_id": 0,
        "responses": [{"topic_id": ORDERS, "partitions": [answer]}]})
    return request, response


def _capture(*exchanges: tuple[bytes, bytes]) -> bytes:
    return _pcap([(from_client, frame) for request, response in exchanges
                  for from_client, frame in ((True, request), (False, response))])


def _rows(data: bytes, **kw: Any) -> list[dict[str, Any]]:
    return list(decode_capture(io.BytesIO(data), capture="mem", **kw))


def test_fetch_v13_gets_the_names_a_metadata_answer_taught() -> None:
    rows = _rows(_capture(_fetch(1), _metadata(2), _fetch(3)))
    before, metadata, after = rows
    assert metadata["api_name"] == "Metadata" and metadata["topics"] == []
    # a name learnt later does not reach the row already written (rows stream)
    assert before["topics"] == [] and "topic_name" not in before["request"]
    assert before["errors"] == [{"topic_id": str(ORDERS), "partition": 0, "code": 1,
                                 "name": "OFFSET_OUT_OF_RANGE"}]
    assert after["topics"] == ["orders"]
    request = json.loads(after["request"])
    assert request["topics"][0]["topic_id"] == str(ORDERS)  # the id stays, the name beside it
    assert request["topics"][0]["topic_name"] == "orders"
    assert list(request["topics"][0])[:2] == ["topic_id", "topic_name"]
    response = json.loads(after["response"])
    assert response["responses"][0]["topic_name"] == "orders"
    assert response["responses"][0]["partitions"][0]["records"][0]["value"] == "dg=="  # records intact
    assert after["errors"] == [{"topic": "orders", "topic_id": str(ORDERS), "partition": 0, "code": 1,
                                "name": "OFFSET_OUT_OF_RANGE"}]


def test_the_topic_filter_finds_fetch_v13_by_the_name_learnt() -> None:
    data = _capture(_metadata(1), _fetch(2))
    assert [r["api_name"] for r in _rows(data, topic="orders")] == ["Fetch"]
    assert _rows(data, topic="payments") == []
    assert [r["api_name"] for r in _rows(data, topic="orders", bodies=["Fetch", "Metadata"])] == ["Fetch"]
    # without Metadata's body nothing is learnt, so nothing is named
    assert _rows(data, topic="orders", bodies=["Fetch"]) == []


def test_an_id_inside_a_string_is_not_taken_for_one() -> None:
    text = json.dumps({"key": f'"topic_id":"{ORDERS}"', "topic_id": str(ORDERS)}, separators=(",", ":"))
    named, found = add_topic_names(text, {str(ORDERS): 'a "quoted" topic'})
    assert json.loads(named) == {"key": f'"topic_id":"{ORDERS}"', "topic_id": str(ORDERS),
                                 "topic_name": 'a "quoted" topic'}
    assert found == ['a "quoted" topic']
    assert add_topic_names(text, {}) == (text, [])


def test_the_shapes_read_from_the_specs_are_those_of_the_schemas() -> None:
    """topic_id_shape reads the specs' fields (cheap, no schema built); the schemas of every
    message and version agree, and none mixes ids alone with ids beside names."""
    from kafkapy.protocol.schema import NullableStruct, StructCodec

    def structs(codec: Any) -> Iterator[StructCodec]:
        codec = codec.inner if isinstance(codec, NullableStruct) else codec
        codec = getattr(codec, "element", codec)  # an array's
        if isinstance(codec, StructCodec):
            yield codec
            for slot in codec.slots + codec.tagged:
                yield from structs(slot.codec)

    for key, api in catalogue().items():
        for kind in ("request", "response"):
            for version in range(api.versions.low, api.versions.high + 1):
                kinds = {"named" if any(k in s.keys for k in NAME_KEYS) else "ids"
                         for s in structs(message_schema(key, kind, version).root) if "topic_id" in s.keys}
                assert len(kinds) <= 1, (api.name, kind, version)
                assert topic_id_shape(key, kind, version) == (kinds.pop() if kinds else "none")
                assert ((key, version) in topic_id_messages()) == any(
                    topic_id_shape(key, k, version) != "none" for k in ("request", "response"))
    assert topic_id_shape(ApiKey.FETCH, "request", 13) == "ids"
    assert topic_id_shape(ApiKey.FETCH, "request", 12) == "none"
    assert topic_id_shape(ApiKey.METADATA, "response", 10) == "named"


def test_column_positions() -> None:
    assert [COLUMNS[i] for i in (_API_KEY, _API_VERSION, _REQUEST, _RESPONSE, _ERRORS, _TOPICS)] == [
        "api_key", "api_version", "request", "response", "errors", "topics"]
