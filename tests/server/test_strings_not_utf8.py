"""Strings whose bytes are not UTF-8 are served as Kafka serves them.

Kafka reads every STRING with Java's ``new String(bytes, UTF_8)``: malformed bytes become U+FFFD
and the request goes on. A group id or transactional id holding U+FFFD is just an id; a topic
name holding it fails topic-name validation (INVALID_TOPIC_EXCEPTION for that topic); a client id
holding it is a client id. The connection stays open and serves the next request. kafka-python
and confluent-kafka cannot send such bytes (both encode a str as UTF-8; confluent-kafka sends
``str()`` of bytes), so these tests write the frames themselves: kafkapy's encoder writes a
surrogate escape (``"\\udcff"``) as the byte it stands for. kcat passes its arguments' bytes
through: tests/interop/test_kcat_not_utf8.py.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import pytest
from error_log import ErrorCollector
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_wire import KafkaSocket

from kafkapy import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol import build_record_batch, decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.strings import decode_string
from kafkapy.server.fastpaths import FastPaths

TOPIC = "t"
GROUP = "group-\udcff\udcfe"  # the bytes b"group-\xff\xfe" on the wire
GROUP_AS_KAFKA_READS_IT = "group-\ufffd\ufffd"
TRANSACTIONAL_ID = "txn-\udced\udca0\udc80"  # a surrogate written in UTF-8: one U+FFFD in Java
TRANSACTIONAL_ID_AS_KAFKA_READS_IT = "txn-\ufffd"
BAD_TOPIC = "topic-\udcc3"
SOFTWARE = {"client_software_name": "kafkapy-tests", "client_software_version": "1"}


@pytest.fixture(scope="module")
def broker(errors: ErrorCollector) -> Iterator[Broker]:
    # No join waits long: the first join of a group is not delayed, a rebalance waits 200 ms at most.
    with Broker({"observer.class.names": "kafkapy.observers.RequestHistory",
                 "group.initial.rebalance.delay.ms": "0"}) as running:
        running.seed({TOPIC: {"partitions": 1}})
        yield running


def _served_next(conn: KafkaSocket) -> None:
    """The connection is still open and serves the next request."""
    assert conn.call(ApiKey.API_VERSIONS, 3, SOFTWARE).body["error_code"] == ErrorCode.NONE


def test_a_group_id_that_is_not_utf8_is_a_group_id(broker: Broker, errors: ErrorCollector) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        found = conn.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [GROUP]}).body
        assert [(c["key"], c["error_code"]) for c in found["coordinators"]] == [
            (GROUP_AS_KAFKA_READS_IT, ErrorCode.NONE)]
        join = {"group_id": GROUP, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
                "member_id": "", "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}]}
        first = conn.call(ApiKey.JOIN_GROUP, 9, join).body
        assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
        joined = conn.call(ApiKey.JOIN_GROUP, 9, {**join, "member_id": first["member_id"]}).body
        assert joined["error_code"] == ErrorCode.NONE and joined["leader"] == first["member_id"]
        _served_next(conn)
    group = broker.group(GROUP_AS_KAFKA_READS_IT)
    assert group is not None and [m.member_id for m in group.members] == [first["member_id"]]
    assert errors.messages == []


@pytest.mark.parametrize("fast_paths", [FastPaths(), FastPaths.none()], ids=["fast paths", "plain paths"])
def test_a_transactional_id_that_is_not_utf8_is_a_transactional_id(fast_paths: FastPaths,
                                                                   errors: ErrorCollector) -> None:
    """Two transactions of one transactional producer: InitProducerId, then AddPartitionsToTxn v3,
    two transactional Produce v9 and EndTxn v3 in each. A broker with no observers answers the second
    request of a key and version from the frame (kafkapy.dataplane.produce_frame, whose KIP-890
    check asks the coordinator about the transactional id, and kafkapy.transactions.from_frame)."""
    with Broker(fast_paths=fast_paths) as running, KafkaSocket(running.bootstrap_servers) as conn:
        running.seed({TOPIC: {"partitions": 1}})
        found = conn.call(ApiKey.FIND_COORDINATOR, 4,
                          {"key_type": 1, "coordinator_keys": [TRANSACTIONAL_ID]})
        assert found.body["coordinators"][0]["error_code"] == ErrorCode.NONE
        init = conn.call(ApiKey.INIT_PRODUCER_ID, 4,
                         {"transactional_id": TRANSACTIONAL_ID, "transaction_timeout_ms": 60_000}).body
        assert init["error_code"] == ErrorCode.NONE and init["producer_id"] >= 0
        producer = {"producer_id": init["producer_id"], "producer_epoch": init["producer_epoch"]}
        sequence = 0
        for _ in range(2):
            added = conn.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
                "v3_and_below_transactional_id": TRANSACTIONAL_ID,
                **{f"v3_and_below_{name}": value for name, value in producer.items()},
                "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]}).body
            assert [(r["name"], [p["partition_error_code"] for p in r["results_by_partition"]])
                    for r in added["results_by_topic_v3_and_below"]] == [(TOPIC, [ErrorCode.NONE])]
            for _ in range(2):
                batch = build_record_batch([{"value": b"v"}], base_sequence=sequence, is_transactional=True,
                                           **producer)
                sequence += 1
                produced = conn.call(ApiKey.PRODUCE, 9, {
                    "transactional_id": TRANSACTIONAL_ID, "acks": -1, "timeout_ms": 1000,
                    "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}).body
                assert produced["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.NONE
            ended = conn.call(ApiKey.END_TXN, 3, {"transactional_id": TRANSACTIONAL_ID, **producer,
                                                  "committed": True}).body
            assert ended["error_code"] == ErrorCode.NONE
        _served_next(conn)
        view = running.transaction(TRANSACTIONAL_ID_AS_KAFKA_READS_IT)
        assert view is not None and view.producer_id == init["producer_id"]
        assert len(running.records(TOPIC)) == 4 + 2  # the records and the two COMMIT markers
    assert errors.messages == []


def test_a_topic_name_that_is_not_utf8_is_an_invalid_topic(broker: Broker,
                                                            errors: ErrorCollector) -> None:
    """INVALID_TOPIC_EXCEPTION for that topic alone; the name comes back as Kafka read it."""
    bad_as_read = decode_string(BAD_TOPIC.encode("utf-8", "surrogateescape"))
    with KafkaSocket(broker.bootstrap_servers) as conn:
        topics = [{"name": name, "num_partitions": 1, "replication_factor": 1}
                  for name in (BAD_TOPIC, "fine")]
        created = conn.call(ApiKey.CREATE_TOPICS, 7, {"timeout_ms": 5000, "topics": topics}).body
        assert [(t["name"], t["error_code"]) for t in created["topics"]] == [
            (bad_as_read, ErrorCode.INVALID_TOPIC_EXCEPTION), ("fine", ErrorCode.NONE)]
        for version in (1, 12):  # request header v1 and v2; v12 asks to create it
            body: dict[str, Any] = {"topics": [{"name": BAD_TOPIC}, {"name": TOPIC}]}
            if version >= 4:
                body["allow_auto_topic_creation"] = True
            answer = conn.call(ApiKey.METADATA, version, body).body
            assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [
                (bad_as_read, ErrorCode.INVALID_TOPIC_EXCEPTION), (TOPIC, ErrorCode.NONE)]
        _served_next(conn)
    assert errors.messages == []


@pytest.mark.parametrize("version", [3, 9])  # non-flexible and flexible: the fast path reads both
def test_produce_to_a_topic_name_that_is_not_utf8(broker: Broker, errors: ErrorCollector,
                                                  version: int) -> None:
    batch = build_record_batch([{"key": b"k", "value": b"v"}])
    topic_data = [{"name": name, "partition_data": [{"index": 0, "records": batch}]}
                  for name in (BAD_TOPIC, TOPIC)]
    with KafkaSocket(broker.bootstrap_servers) as conn:
        answer = conn.call(ApiKey.PRODUCE, version,
                           {"acks": 1, "timeout_ms": 1000, "topic_data": topic_data})
        codes = {t["name"]: t["partition_responses"][0]["error_code"] for t in answer.body["responses"]}
        assert codes == {decode_string(BAD_TOPIC.encode("utf-8", "surrogateescape")):
                         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, TOPIC: ErrorCode.NONE}
        _served_next(conn)
    assert errors.messages == []


def test_a_client_id_that_is_not_utf8_is_a_client_id(broker: Broker, errors: ErrorCollector) -> None:
    """The request header's client id, read by hand (kafkapy.protocol.header) and by the schema
    (a v2 header with tagged fields)."""
    plain = encode_request(ApiKey.METADATA, 12, 41, "c", {"topics": None})
    assert plain[8:11] == b"\x00\x01c" and plain[11] == 0  # client id, then the header's tags
    by_hand = plain[:8] + struct.pack(">h", 3) + b"c\xff\xfe" + plain[11:]
    tagged = plain[:8] + struct.pack(">h", 3) + b"c\xff\xfe" + b"\x01\x05\x01x" + plain[12:]  # tag 5
    with KafkaSocket(broker.bootstrap_servers) as conn:
        for frame in (by_hand, tagged):
            conn.send_body(frame)
            assert decode_response(conn.read_frame(), ApiKey.METADATA, 12).correlation_id == 41
        _served_next(conn)
    assert len(broker.history(client_id="c\ufffd\ufffd")) == 2
    assert errors.messages == []


# --- any string of a request: random bytes never close the connection ---------------------------

def _templates() -> list[tuple[ApiKey, int, dict[str, Any]]]:
    """Requests of the APIs that carry ids and names, their strings to be replaced by random bytes."""
    join = {"group_id": "g", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 200, "member_id": "m",
            "group_instance_id": "i", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]}
    sync = {"group_id": "g", "generation_id": 1, "member_id": "m", "protocol_type": "consumer",
            "protocol_name": "range", "assignments": [{"member_id": "m", "assignment": b""}]}
    committed = {"partition_index": 0, "committed_offset": 1, "committed_metadata": "md"}
    commit = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
              "topics": [{"name": "t", "partitions": [committed]}]}
    heartbeat = {"group_id": "g", "member_id": "m", "member_epoch": 0, "rebalance_timeout_ms": 1000,
                 "subscribed_topic_names": ["t"], "server_assignor": "uniform", "topic_partitions": []}
    producer = {"transactional_id": "x", "producer_id": 0, "producer_epoch": 0}
    add_partitions = {"v3_and_below_transactional_id": "x", "v3_and_below_producer_id": 0,
                      "v3_and_below_producer_epoch": 0,
                      "v3_and_below_topics": [{"name": "t", "partitions": [0]}]}
    create = {"timeout_ms": 1000, "topics": [{"name": "t2", "num_partitions": 1, "replication_factor": 1,
                                              "configs": [{"name": "retention.ms", "value": "1000"}]}]}
    list_offsets = {"replica_id": -1, "topics": [{"name": "t", "partitions": [{"partition_index": 0,
                                                                               "timestamp": -1}]}]}
    topic_data = [{"name": "t", "partition_data": [
        {"index": 0, "records": build_record_batch([{"key": b"k", "value": b"v"}])}]}]
    fetch = {"max_wait_ms": 0, "min_bytes": 1, "rack_id": "r", "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}]}]}
    configs = {"resources": [{"resource_type": 2, "resource_name": "t",
                              "configuration_keys": ["retention.ms"]}]}
    offsets = {"groups": [{"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}]}
    produce = {"acks": 1, "timeout_ms": 1000, "topic_data": topic_data}
    return [
        (ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}),
        (ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["x", "y"]}),
        (ApiKey.JOIN_GROUP, 9, {**join, "member_id": ""}),
        (ApiKey.JOIN_GROUP, 9, join),
        (ApiKey.SYNC_GROUP, 5, sync),
        (ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"}),
        (ApiKey.LEAVE_GROUP, 5, {"group_id": "g", "members": [{"member_id": "m", "reason": "r"}]}),
        (ApiKey.OFFSET_COMMIT, 8, commit),
        (ApiKey.OFFSET_FETCH, 8, offsets),
        (ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g", "h"]}),
        (ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]}),
        (ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, heartbeat),
        (ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "x", "transaction_timeout_ms": 60_000}),
        (ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions),
        (ApiKey.ADD_OFFSETS_TO_TXN, 3, {**producer, "group_id": "g"}),
        (ApiKey.END_TXN, 3, {**producer, "committed": True}),
        (ApiKey.CREATE_TOPICS, 7, create),
        (ApiKey.DELETE_TOPICS, 6, {"timeout_ms": 1000, "topics": [{"name": "t3", "topic_id": None}]}),
        (ApiKey.METADATA, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True}),
        (ApiKey.LIST_OFFSETS, 7, list_offsets),
        (ApiKey.PRODUCE, 9, {**produce, "transactional_id": None}),
        (ApiKey.PRODUCE, 3, {**produce, "transactional_id": "x"}),
        (ApiKey.FETCH, 12, fetch),
        (ApiKey.DESCRIBE_CONFIGS, 4, configs),
        (ApiKey.API_VERSIONS, 3, dict(SOFTWARE)),
    ]


TEMPLATES = _templates()
not_utf8 = st.binary(min_size=1, max_size=8).map(lambda data: data.decode("utf-8", "surrogateescape"))


def _with_strings(value: Any, draw: st.DrawFn) -> Any:
    """``value`` with each of its strings kept or replaced by random bytes (as surrogate escapes)."""
    if isinstance(value, str):
        return draw(st.just(value) | not_utf8)
    if isinstance(value, dict):
        return {key: _with_strings(inner, draw) for key, inner in value.items()}
    if isinstance(value, list):
        return [_with_strings(inner, draw) for inner in value]
    return value


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_bytes_in_any_string_never_close_the_connection(broker: Broker, errors: ErrorCollector,
                                                               data: st.DataObject) -> None:
    api_key, version, template = data.draw(st.sampled_from(TEMPLATES), label="request")
    body = _with_strings(template, data.draw)
    client_id = data.draw(st.just("fuzz") | not_utf8, label="client id")
    with KafkaSocket(broker.bootstrap_servers) as conn:
        conn.send_body(encode_request(api_key, version, 99, client_id, body))
        assert decode_response(conn.read_frame(), api_key, version).correlation_id == 99
        _served_next(conn)
    assert errors.messages == [], f"{api_key.name} v{version}: {errors.messages}"
