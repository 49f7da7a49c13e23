"""The coordinators' own writes wait on every in-sync replica, as Kafka's coordinators append to
their state topics with acks=-1: while a state partition has fewer in-sync replicas than its
topic's min.insync.replicas (capped at its replication factor), a write is refused
NOT_ENOUGH_REPLICAS, which the coordinator's client sees as COORDINATOR_NOT_AVAILABLE (retriable);
reads go on. In an in-process cluster the ISR shrinks as brokers stop and grows as they return."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.sharestate.coordinator import SHARE_STATE_TOPIC
from kafkapy.sharestate.state import coordinator_key
from kafkapy.testing import wait_until

TIMEOUT_S = 30.0


def _coordinator_address(cluster: Broker, key_type: CoordinatorKeyType, key: str) -> str:
    """Where the key's coordinator is, once one answers (the state topic may be in the making)."""
    found: dict[str, Any] = {}

    def answered() -> bool:
        with SimpleClient(cluster.bootstrap_servers) as client:
            found.update(client.request(ApiKey.FIND_COORDINATOR, 6, {
                "key_type": key_type, "coordinator_keys": [key]})["coordinators"][0])
        return bool(found["error_code"] == ErrorCode.NONE)

    wait_until(answered, TIMEOUT_S, f"the coordinator of {key!r}")
    return f"{found['host']}:{found['port']}"


def _isr(cluster: Broker, topic: str, partition: int = 0) -> list[int]:
    assert cluster.runtime is not None
    return cluster.runtime.cluster.in_sync_replicas(topic, partition)


def _while_two_brokers_are_down(cluster: Broker, state_topic: str, write: Callable[[], ErrorCode],
                                read: Callable[[], object] | None = None) -> None:
    """``write`` succeeds with three replicas in sync, is refused COORDINATOR_NOT_AVAILABLE with
    one (``read`` still answers what it did before), and succeeds again with two."""
    assert write() == ErrorCode.NONE
    before = read() if read is not None else None
    for index in (1, 2):
        cluster.stop_broker(index)
    wait_until(lambda: len(_isr(cluster, state_topic)) == 1, TIMEOUT_S, "the state partition's ISR to shrink")
    assert write() == ErrorCode.COORDINATOR_NOT_AVAILABLE
    if read is not None:
        assert read() == before
    cluster.start_broker(1)
    wait_until(lambda: len(_isr(cluster, state_topic)) == 2, TIMEOUT_S, "the ISR to grow")
    assert write() == ErrorCode.NONE


def test_a_transaction_coordinator_writes_only_with_transaction_state_log_min_isr_in_sync() -> None:
    """InitProducerId writes the id's state to __transaction_state (min ISR 2 by
    transaction.state.log.min.isr's default, three replicas here)."""
    config = {"transaction.state.log.replication.factor": 3, "transaction.state.log.num.partitions": 1}
    with Broker(config, brokers=3) as cluster:
        names = iter(f"tx-{n}" for n in range(10))

        def init_producer_id() -> ErrorCode:
            transactional_id = next(names)
            address = _coordinator_address(cluster, CoordinatorKeyType.TRANSACTION, transactional_id)
            with SimpleClient(address) as client:
                answer = client.request(ApiKey.INIT_PRODUCER_ID, 4, {
                    "transactional_id": transactional_id, "transaction_timeout_ms": 60_000,
                    "producer_id": -1, "producer_epoch": -1})
            return ErrorCode(answer["error_code"])

        _while_two_brokers_are_down(cluster, "__transaction_state", init_producer_id)


def test_a_group_coordinator_commits_offsets_only_with_min_insync_replicas_in_sync() -> None:
    """OffsetCommit writes to __consumer_offsets, which takes the broker's min.insync.replicas
    (2 here); OffsetFetch reads on while commits are refused."""
    config = {"offsets.topic.replication.factor": 3, "offsets.topic.num.partitions": 1,
              "min.insync.replicas": 2}
    with Broker(config, brokers=3) as cluster:
        cluster.seed({"events": {"partitions": 1, "replication_factor": 3, "records": []}})
        offsets = iter(range(10, 100, 10))

        def commit() -> ErrorCode:
            address = _coordinator_address(cluster, CoordinatorKeyType.GROUP, "g")
            with SimpleClient(address) as client:
                answer = client.request(ApiKey.OFFSET_COMMIT, 2, {
                    "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                    "retention_time_ms": -1, "topics": [{"name": "events", "partitions": [
                        {"partition_index": 0, "committed_offset": next(offsets),
                         "committed_metadata": ""}]}]})
            return ErrorCode(answer["topics"][0]["partitions"][0]["error_code"])

        def committed() -> tuple[int, int]:
            address = _coordinator_address(cluster, CoordinatorKeyType.GROUP, "g")
            with SimpleClient(address) as client:
                answer = client.request(ApiKey.OFFSET_FETCH, 1, {
                    "group_id": "g", "topics": [{"name": "events", "partition_indexes": [0]}]})
            row = answer["topics"][0]["partitions"][0]
            return row["error_code"], row["committed_offset"]

        _while_two_brokers_are_down(cluster, "__consumer_offsets", commit, committed)


def test_a_share_coordinator_writes_only_with_its_state_topics_min_isr_in_sync() -> None:
    """InitializeShareGroupState writes to __share_group_state (min ISR 2 by
    share.coordinator.state.topic.min.isr's default, three replicas here)."""
    config = {"share.coordinator.state.topic.replication.factor": 3,
              "share.coordinator.state.topic.num.partitions": 1}
    with Broker(config, brokers=3) as cluster:
        cluster.seed({"q": {"partitions": 1, "replication_factor": 3, "records": []}})
        with SimpleClient(cluster.bootstrap_servers) as client:
            topic_id: uuid.UUID = client.request(ApiKey.METADATA, 12, {
                "topics": [{"name": "q", "topic_id": None}], "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False})["topics"][0]["topic_id"]
        epochs = iter(range(1, 10))

        def initialize() -> ErrorCode:
            key = coordinator_key(("workers", topic_id, 0))
            address = _coordinator_address(cluster, CoordinatorKeyType.SHARE, key)
            with SimpleClient(address) as client:
                answer = client.request(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, {
                    "group_id": "workers", "topics": [{"topic_id": topic_id, "partitions": [
                        {"partition": 0, "state_epoch": next(epochs), "start_offset": 0}]}]})
            return ErrorCode(answer["results"][0]["partitions"][0]["error_code"])

        _while_two_brokers_are_down(cluster, SHARE_STATE_TOPIC, initialize)
