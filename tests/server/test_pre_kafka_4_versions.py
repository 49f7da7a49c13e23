"""The request versions Kafka 2.8-3.9 served below Kafka 4's minimums (KIP-896), other than the
message formats (tests/dataplane/test_legacy_formats.py): OffsetCommit v0-v1 and OffsetFetch v0
(v0's offsets in ZooKeeper's /consumers znodes), OffsetForLeaderEpoch v0-v1, DescribeLogDirs v0,
the ACL APIs' v0. Each answers in its own version's shape, with what a later version answers."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.store.base import StoreError
from kafkapy.store.memory import MemoryStore

TIMEOUT_S = 20
ANY_RESOURCE = 1  # ResourceType ANY (a filter only)
RESOURCE_TOPIC = 2
OPERATION_READ, OPERATION_ANY = 3, 1
PERMISSION_ALLOW, PERMISSION_ANY = 3, 1
PATTERN_PREFIXED = 4


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker() as running:
        yield running


def produce_one(broker: Broker, topic: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    producer.send(topic, value=b"v", partition=0).get(timeout=TIMEOUT_S)
    producer.close(timeout=TIMEOUT_S)


def consume_and_commit(broker: Broker, api_version: tuple[int, ...], group: str) -> None:
    """An old kafka-python consumer reads t's one record, commits, and reads its commit back."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer("t", bootstrap_servers=broker.bootstrap_servers, api_version=api_version,
                             group_id=group, auto_offset_reset="earliest", consumer_timeout_ms=5000)
    try:
        assert [m.offset for m in consumer] == [0]
        consumer.commit()
        assert consumer.committed(TopicPartition("t", 0)) == 1
    finally:
        consumer.close()


def test_kafka_python_0_8_2_consumer_commits_with_offset_commit_v1(broker: Broker) -> None:
    """kafka-python on api_version (0, 8, 2) commits with OffsetCommit v1 and no group membership
    (generation -1), as a 0.8.2 consumer did against Kafka-kept offsets."""
    produce_one(broker, "t")
    consume_and_commit(broker, (0, 8, 2), "old")
    [committed] = broker.group("old").offsets
    assert (committed.topic, committed.partition, committed.offset) == ("t", 0, 1)


@pytest.mark.parametrize("store", ["memory", "zookeeper"])
def test_kafka_python_0_8_1_consumer_keeps_its_offsets_in_zookeepers_znodes(
        store: str, request: pytest.FixtureRequest) -> None:
    """kafka-python on api_version (0, 8, 1) commits with OffsetCommit v0 and reads back with
    OffsetFetch v0, which Kafka 2.8-3.9 answered from ZooKeeper: the offset is at
    /consumers/<group>/offsets/<topic>/<partition>, and __consumer_offsets knows nothing of it."""
    config = {"zookeeper.connect": request.getfixturevalue("zk_connect")} if store == "zookeeper" else {}
    with Broker(config) as broker:
        produce_one(broker, "t")
        consume_and_commit(broker, (0, 8, 1), "zk")
        assert broker.store.offsets("zk") == {("t", 0): 1}
        if store == "zookeeper":
            from kazoo.client import KazooClient

            zk = KazooClient(hosts=config["zookeeper.connect"])
            zk.start(timeout=TIMEOUT_S)
            try:
                assert zk.get("/consumers/zk/offsets/t/0")[0] == b"1"
            finally:
                zk.stop()
                zk.close()
        with SimpleClient(broker.bootstrap_servers) as client:
            deadline = time.monotonic() + TIMEOUT_S
            while True:  # the first lookup makes __consumer_offsets, which the coordinator then loads
                client.request(ApiKey.FIND_COORDINATOR, 0, {"key": "zk"})
                newer = client.request(ApiKey.OFFSET_FETCH, 1, {
                    "group_id": "zk", "topics": [{"name": "t", "partition_indexes": [0]}]})
                if newer["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE:
                    break
                assert time.monotonic() < deadline, newer
                time.sleep(0.05)
            unknown = client.request(ApiKey.OFFSET_COMMIT, 0, {
                "group_id": "zk", "topics": [{"name": "nowhere", "partitions": [
                    {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]}]})
    assert newer["topics"][0]["partitions"][0]["committed_offset"] == -1  # a v1+ fetch reads elsewhere
    assert unknown["topics"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_offset_commit_v1_keeps_the_clients_commit_time(broker: Broker) -> None:
    produce_one(broker, "t")
    commit_time = 1_600_000_000_000
    with SimpleClient(broker.bootstrap_servers) as client:
        deadline = time.monotonic() + TIMEOUT_S
        while True:  # the group coordinator loads __consumer_offsets first
            found = client.request(ApiKey.FIND_COORDINATOR, 0, {"key": "stamped"})
            if found["error_code"] == ErrorCode.NONE or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        answer = client.request(ApiKey.OFFSET_COMMIT, 1, {
            "group_id": "stamped", "generation_id_or_member_epoch": -1, "member_id": "",
            "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 1, "commit_timestamp": commit_time,
                 "committed_metadata": "m"}]}]})
    assert answer["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    [committed] = broker.group("stamped").offsets
    assert (committed.offset, committed.metadata, committed.commit_timestamp) == (1, "m", commit_time)


@pytest.mark.parametrize("version", [0, 1])
def test_offset_for_leader_epoch_v0_and_v1(broker: Broker, version: int) -> None:
    produce_one(broker, "t")
    with SimpleClient(broker.bootstrap_servers) as client:
        answer = client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, {
            "topics": [{"topic": "t", "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
    [partition] = answer["topics"][0]["partitions"]
    assert (partition["error_code"], partition["end_offset"]) == (ErrorCode.NONE, 1)
    assert ("leader_epoch" in partition) == (version == 1)


def test_describe_log_dirs_v0(broker: Broker) -> None:
    produce_one(broker, "t")
    with SimpleClient(broker.bootstrap_servers) as client:
        answer = client.request(ApiKey.DESCRIBE_LOG_DIRS, 0, {"topics": None})
    [result] = answer["results"]
    sizes = {(t["name"], p["partition_index"]): p["partition_size"]
             for t in result["topics"] for p in t["partitions"]}
    assert result["error_code"] == ErrorCode.NONE and sizes[("t", 0)] > 0


def _binding(name: str, principal: str, **pattern: Any) -> dict[str, Any]:
    return {"resource_type": RESOURCE_TOPIC, "resource_name": name, **pattern, "principal": principal,
            "host": "*", "operation": OPERATION_READ, "permission_type": PERMISSION_ALLOW}


def _filter(**pattern: Any) -> dict[str, Any]:
    return {"resource_type_filter": ANY_RESOURCE, "resource_name_filter": None, **pattern,
            "principal_filter": None, "host_filter": None, "operation": OPERATION_ANY,
            "permission_type": PERMISSION_ANY}


def test_acl_apis_v0_see_and_set_literal_patterns_only() -> None:
    """v0 has no pattern type: what it creates is LITERAL, and its filters match LITERAL only, so
    a PREFIXED ACL made through v1 is neither listed nor deleted by v0 (Kafka 2.8-3.9 alike)."""
    with Broker({"authorizer.class.name": "acl", "super.users": "User:ANONYMOUS"}) as broker, \
            SimpleClient(broker.bootstrap_servers) as client:
        created = client.request(ApiKey.CREATE_ACLS, 0, {"creations": [_binding("orders", "User:old")]})
        assert created["results"][0]["error_code"] == ErrorCode.NONE
        prefixed = client.request(ApiKey.CREATE_ACLS, 1, {"creations": [
            _binding("ord", "User:new", resource_pattern_type=PATTERN_PREFIXED)]})
        assert prefixed["results"][0]["error_code"] == ErrorCode.NONE

        described = client.request(ApiKey.DESCRIBE_ACLS, 0, _filter())
        assert described["error_code"] == ErrorCode.NONE
        listed = [(r["resource_name"], [a["principal"] for a in r["acls"]]) for r in described["resources"]]
        assert listed == [("orders", ["User:old"])]

        deleted = client.request(ApiKey.DELETE_ACLS, 0, {"filters": [_filter()]})
        assert [m["resource_name"] for m in deleted["filter_results"][0]["matching_acls"]] == ["orders"]
        left = client.request(ApiKey.DESCRIBE_ACLS, 1, _filter(pattern_type_filter=1))  # ANY pattern type
        assert [(r["resource_name"], r["pattern_type"]) for r in left["resources"]] == [
            ("ord", PATTERN_PREFIXED)]


# Group ids that cannot be a znode of their own under /consumers (as in tests/coordination).
UNFIT_GROUP_IDS = ["coordinator", "", ".", "..", "a/b", "nul\x00", "del\x7f", "private\ue000",
                   "emoji\U0001f600"]


@pytest.mark.parametrize("store", ["memory", "zookeeper"])
def test_v0_offsets_refuse_a_group_id_that_is_no_znode_of_its_own(
        store: str, request: pytest.FixtureRequest) -> None:
    """A v0 commit writes /consumers/<group>/offsets/...: for ``coordinator`` that is inside the
    seed-001 election node (ephemeral: no children), and ZooKeeper refuses a path with ``.``,
    ``..``, an empty name or its reserved characters (Kafka answered those UNKNOWN_SERVER_ERROR,
    from the thrown path check). Both v0 requests answer INVALID_GROUP_ID per partition instead,
    on either store, and nothing is written; a partition that does not exist keeps its own answer."""
    config: dict[str, Any] = {"kafkapy.modules": "coordination"}
    if store == "zookeeper":
        config["zookeeper.connect"] = request.getfixturevalue("zk_connect")
    with Broker(config) as broker:
        produce_one(broker, "t")
        with SimpleClient(broker.bootstrap_servers) as client:
            for group in UNFIT_GROUP_IDS:
                commit = client.request(ApiKey.OFFSET_COMMIT, 0, {"group_id": group, "topics": [
                    {"name": "t", "partitions": [
                        {"partition_index": 0, "committed_offset": 7, "committed_metadata": ""},
                        {"partition_index": 9, "committed_offset": 7, "committed_metadata": ""}]}]})
                assert [p["error_code"] for p in commit["topics"][0]["partitions"]] == [
                    ErrorCode.INVALID_GROUP_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION], group
                fetch = client.request(ApiKey.OFFSET_FETCH, 0, {
                    "group_id": group, "topics": [{"name": "t", "partition_indexes": [0, 9]}]})
                assert [(p["committed_offset"], p["error_code"]) for p in fetch["topics"][0]["partitions"]] \
                    == [(-1, ErrorCode.INVALID_GROUP_ID), (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)], group
            # the election node is still the coordinator's, and a fit id still commits
            assert broker.store.coordinator_id() == broker.broker_id
            fine = client.request(ApiKey.OFFSET_COMMIT, 0, {"group_id": "coordinators", "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7,
                                              "committed_metadata": ""}]}]})
            assert fine["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
        assert broker.store.offsets("coordinators") == {("t", 0): 7}
        assert broker.store.offsets("coordinator") == broker.store.offsets("a") == {}  # a/b: none in a


@pytest.mark.parametrize("store", ["memory", "zookeeper"])
def test_offset_fetch_v0_says_unknown_partition_for_no_committed_offset(
        store: str, request: pytest.FixtureRequest) -> None:
    """Kafka 2.8-3.9 answered a v0 fetch with OffsetFetchResponse.UNKNOWN_PARTITION (offset -1,
    UNKNOWN_TOPIC_OR_PARTITION) both for a partition that does not exist and for one whose offset
    znode is absent; kafka-python's old consumer logs "have you committed any offsets yet?" on it.
    A v1+ fetch answers -1 with no error instead (the coordinator's)."""
    config = {"zookeeper.connect": request.getfixturevalue("zk_connect")} if store == "zookeeper" else {}
    with Broker(config) as broker:
        produce_one(broker, "t")
        with SimpleClient(broker.bootstrap_servers) as client:
            def fetched() -> list[tuple[str, int, int, int]]:
                answer = client.request(ApiKey.OFFSET_FETCH, 0, {"group_id": "old", "topics": [
                    {"name": "t", "partition_indexes": [0, 9]},
                    {"name": "nowhere", "partition_indexes": [0]}]})
                return [(t["name"], p["partition_index"], p["committed_offset"], p["error_code"])
                        for t in answer["topics"] for p in t["partitions"]]

            unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert fetched() == [("t", 0, -1, unknown), ("t", 9, -1, unknown), ("nowhere", 0, -1, unknown)]
            commit = client.request(ApiKey.OFFSET_COMMIT, 0, {"group_id": "old", "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 3,
                                              "committed_metadata": ""}]}]})
            assert commit["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
            assert fetched() == [("t", 0, 3, ErrorCode.NONE), ("t", 9, -1, unknown),
                                 ("nowhere", 0, -1, unknown)]


class FailingOffsets(MemoryStore):
    """A store whose /consumers offsets cannot be reached (as ZooKeeper gone)."""

    def offsets(self, group: str) -> dict[tuple[str, int], int]:
        raise StoreError(f"offsets of {group} unreachable")

    def commit_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        raise StoreError(f"offsets of {group} unreachable")


def test_v0_offsets_answer_a_failing_store_per_partition() -> None:
    """Kafka caught whatever its ZooKeeper calls threw and answered it per partition
    (UNKNOWN_SERVER_ERROR for a ZooKeeper error); the handler failing closed the connection."""
    with Broker(store=FailingOffsets()) as broker:
        produce_one(broker, "t")
        with SimpleClient(broker.bootstrap_servers) as client:
            commit = client.request(ApiKey.OFFSET_COMMIT, 0, {"group_id": "old", "topics": [
                {"name": "t", "partitions": [
                    {"partition_index": 0, "committed_offset": 3, "committed_metadata": ""},
                    {"partition_index": 9, "committed_offset": 3, "committed_metadata": ""}]}]})
            assert [p["error_code"] for p in commit["topics"][0]["partitions"]] == [
                ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
            fetch = client.request(ApiKey.OFFSET_FETCH, 0, {
                "group_id": "old", "topics": [{"name": "t", "partition_indexes": [0, 9]}]})
            assert [(p["committed_offset"], p["error_code"]) for p in fetch["topics"][0]["partitions"]] == [
                (-1, ErrorCode.UNKNOWN_SERVER_ERROR), (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
