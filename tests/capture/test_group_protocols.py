"""The consumer protocol's bytes in JoinGroup, SyncGroup and DescribeGroups rows, decoded beside
them: on the real captures of a Java consumer, on older versions that do not say their protocol
type, and on bytes that are not a subscription (the row stays whole)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from kafkapy.capture import Frame, FrameReader
from kafkapy.capture.group_protocols import _API_KEY, _REQUEST, _RESPONSE, _TOPICS, GroupProtocols, _dumps
from kafkapy.capture.rows import COLUMNS, decode_capture
from kafkapy.capture.topic_names import TopicNames
from kafkapy.protocol import decode_request_json, encode_request, encode_response
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.consumer_protocol import Subscription, encode_assignment, encode_subscription
from tests.capture.test_rows import _pcap

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
SUBSCRIBED = encode_subscription(Subscription(("orders", "payments"), {"orders": frozenset({1})},
                                              rack_id="r1", version=3))
ASSIGNED = encode_assignment({"orders": [0, 1]}, 1)


def _rows(data: bytes, **kw: Any) -> list[dict[str, Any]]:
    return list(decode_capture(io.BytesIO(data), capture="mem", **kw))


def _stripped(value: Any) -> Any:
    """A body without the decoded fields: what it was before them."""
    if isinstance(value, dict):
        return {k: _stripped(v) for k, v in value.items() if not k.endswith("_decoded")}
    if isinstance(value, list):
        return [_stripped(v) for v in value]
    return value


def test_a_java_consumers_join_and_sync_show_their_subscription_and_assignment() -> None:
    [join] = decode_capture(CAPTURES / "11-join-group-v7.pcap")
    [sync] = decode_capture(CAPTURES / "14-sync-group-v5.pcap")
    protocols = json.loads(join["request"])["protocols"]
    assert [p["name"] for p in protocols] == ["range", "cooperative-sticky"]
    assert list(protocols[0]) == ["name", "metadata", "metadata_decoded"]
    assert protocols[0]["metadata_decoded"] == {"version": 1, "topics": ["zqy-topic1"], "user_data": None,
                                                "owned_partitions": []}
    assert join["topics"] == ["zqy-topic1"]
    expected = {"version": 1, "assigned_partitions": [{"topic": "zqy-topic1", "partitions": [0, 1, 2]}],
                "user_data": None}
    assert json.loads(sync["request"])["assignments"][0]["assignment_decoded"] == expected
    assert json.loads(sync["response"])["assignment_decoded"] == expected
    assert sync["topics"] == ["zqy-topic1"]
    # the raw bytes stay, and the rest of the body is written as the decoder wrote it
    [request] = [e for e in FrameReader(CAPTURES / "11-join-group-v7.pcap")
                 if type(e) is Frame and e.from_client]
    original = decode_request_json(request.body).body.text
    assert _dumps(_stripped(json.loads(join["request"]))) == original
    found = decode_capture(CAPTURES / "14-sync-group-v5.pcap", topic="zqy-topic1")
    assert [r["api_name"] for r in found] == ["SyncGroup"]


def _exchange(key: int, version: int, corr: int, request: dict[str, Any], response: dict[str, Any]
              ) -> list[tuple[bool, bytes]]:
    return [(True, encode_request(key, version, corr, "c1", request)),
            (False, encode_response(key, version, corr, response))]


def _join(corr: int, group: str, protocol_type: str, metadata: bytes) -> list[tuple[bool, bytes]]:
    return _exchange(ApiKey.JOIN_GROUP, 3, corr, {
        "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "m",
        "protocol_type": protocol_type, "protocols": [{"name": "range", "metadata": metadata}],
    }, {"throttle_time_ms": 0, "error_code": 0, "generation_id": 1, "protocol_name": "range", "leader": "m",
        "member_id": "m", "members": [{"member_id": "m", "metadata": metadata}]})


def _sync(corr: int, group: str, assignment: bytes) -> list[tuple[bool, bytes]]:
    return _exchange(ApiKey.SYNC_GROUP, 3, corr, {
        "group_id": group, "generation_id": 1, "member_id": "m", "group_instance_id": None,
        "assignments": [{"member_id": "m", "assignment": assignment}],
    }, {"throttle_time_ms": 0, "error_code": 0, "assignment": assignment})


def test_a_sync_group_v3_is_decoded_when_its_groups_join_said_consumer() -> None:
    rows = _rows(_pcap([*_join(1, "billing", "consumer", SUBSCRIBED), *_sync(2, "billing", ASSIGNED),
                        *_sync(3, "unseen", ASSIGNED),  # no JoinGroup of this group in the capture
                        *_join(4, "workers", "connect", SUBSCRIBED), *_sync(5, "workers", ASSIGNED)]))
    join, sync, unseen, connect_join, connect_sync = rows
    member = json.loads(join["response"])["members"][0]
    assert member["metadata_decoded"] == {"version": 3, "topics": ["orders", "payments"], "user_data": None,
                                          "owned_partitions": [{"topic": "orders", "partitions": [1]}],
                                          "generation_id": -1, "rack_id": "r1"}
    assert join["topics"] == ["orders", "payments"]
    assert json.loads(sync["response"])["assignment_decoded"]["assigned_partitions"] == [
        {"topic": "orders", "partitions": [0, 1]}]
    assert sync["topics"] == ["orders"]
    for row in (unseen, connect_join, connect_sync):  # not known to be the consumer protocol's bytes
        assert "_decoded" not in row["request"] + row["response"] and row["topics"] == []
    joined = _pcap([*_join(1, "billing", "consumer", SUBSCRIBED), *_sync(2, "billing", ASSIGNED)])
    assert [r["correlation_id"] for r in _rows(joined, topic="payments")] == [1]


def test_bytes_that_are_no_subscription_stay_and_say_why() -> None:
    rows = _rows(_pcap([*_join(1, "g", "consumer", b"\x00\x01\xff\xff"), *_join(2, "g", "consumer", b""),
                        *_sync(3, "g", b"\x00")]))
    garbled, empty, short = rows
    assert all(r["status"] == "ok" for r in rows)
    protocol = json.loads(garbled["request"])["protocols"][0]
    assert protocol["metadata"] == "AAH//w=="
    error = protocol["metadata_decoded"]["error"]
    assert error.startswith("malformed ConsumerProtocolSubscription") and "\n" not in error
    assert json.loads(empty["request"])["protocols"][0]["metadata_decoded"] is None
    not_one = {"error": "not a ConsumerProtocolAssignment"}
    assert json.loads(short["response"])["assignment_decoded"] == not_one


def test_describe_groups_members_of_a_consumer_group() -> None:
    group = {"error_code": 0, "group_id": "g", "group_state": "Stable", "protocol_type": "consumer",
             "protocol_data": "range", "members": [{"member_id": "m", "group_instance_id": None,
                                                    "client_id": "c", "client_host": "/h",
                                                    "member_metadata": SUBSCRIBED,
                                                    "member_assignment": ASSIGNED}],
             "authorized_operations": -2147483648}
    other = {**group, "group_id": "w", "protocol_type": "connect"}
    [row] = _rows(_pcap(_exchange(ApiKey.DESCRIBE_GROUPS, 5, 1, {"groups": ["g", "w"],
                                                                  "include_authorized_operations": False},
                                  {"throttle_time_ms": 0, "groups": [group, other]})))
    described = json.loads(row["response"])["groups"]
    member = described[0]["members"][0]
    assert list(member)[4:] == ["member_metadata", "member_metadata_decoded", "member_assignment",
                                "member_assignment_decoded"]
    assert member["member_assignment_decoded"]["assigned_partitions"][0]["topic"] == "orders"
    assert "member_metadata_decoded" not in described[1]["members"][0]
    assert row["topics"] == ["orders", "payments"]


def test_each_api_has_one_annotator_and_the_positions_hold() -> None:
    assert not set(TopicNames().handlers()) & set(GroupProtocols().handlers())
    assert [COLUMNS[i] for i in (_API_KEY, _REQUEST, _RESPONSE, _TOPICS)] == [
        "api_key", "request", "response", "topics"]
