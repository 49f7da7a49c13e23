"""confluent-kafka's ShareConsumer (librdkafka 2.16) across a share-partition leader's move, a
share coordinator's move, and a restart: the group's progress is kept by the share coordinator in
``__share_group_state``, so the new leader (or coordinator) goes on where the old one was. With
share.auto.offset.reset=latest (the default) a new leader that started again would skip the
records produced meanwhile; with earliest it would deliver the accepted ones again. Neither
happens."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.sharestate.state import coordinator_key
from kafkapy.testing import wait_until

ck = pytest.importorskip("confluent_kafka")

TOPIC = "jobs"
GROUP = "workers"


def _produce(bootstrap: str, values: list[bytes]) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    for value in values:
        producer.produce(TOPIC, value)
    assert producer.flush(10) == 0


def _drain(consumer: Any, want: int, seconds: float = 30.0) -> list[bytes]:
    """Poll, accepting every record, until ``want`` came (or ``seconds`` passed)."""
    got: list[bytes] = []
    deadline = time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        for message in consumer.poll(0.3):
            if message.error() is None:
                got.append(message.value())
                consumer.acknowledge(message, ck.AcknowledgeType.ACCEPT)
    return got


def _offsets(client: SimpleClient) -> list[int] | None:
    """DescribeShareGroupOffsets on the group's coordinator: the share-partition start offsets;
    None while the coordinator is still loading its partition after a move (callers wait)."""
    answer = client.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, {"groups": [
        {"group_id": GROUP, "topics": [{"topic_name": TOPIC, "partitions": [0]}]}]})
    group = answer["groups"][0]
    if group["error_code"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        return None
    assert group["error_code"] == ErrorCode.NONE, group
    return [p["start_offset"] for t in group["topics"] for p in t["partitions"]]


def _group_coordinator(cluster: Broker) -> SimpleClient:
    with SimpleClient(cluster.bootstrap_servers) as client:
        def found() -> bool:
            answer = client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": CoordinatorKeyType.GROUP,
                                                                 "coordinator_keys": [GROUP]})
            return bool(answer["coordinators"][0]["error_code"] == ErrorCode.NONE)
        wait_until(found, what="the group coordinator")
        node = client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": CoordinatorKeyType.GROUP,
                                                           "coordinator_keys": [GROUP]})["coordinators"][0]
    return SimpleClient(f"{node['host']}:{node['port']}")


def _leader(cluster: Broker) -> int:
    with SimpleClient(cluster.bootstrap_servers) as client:
        answer = client.request(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                                      "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False})
    leader: int = answer["topics"][0]["partitions"][0]["leader_id"]
    return leader


@pytest.fixture
def cluster() -> Iterator[Broker]:
    # share.auto.offset.reset stays latest (the default): a share-partition started again skips.
    with Broker(brokers=3, config={"share.coordinator.state.topic.num.partitions": 3}) as running:
        running.seed({TOPIC: {"partitions": 1, "replication_factor": 3}})
        yield running


def _share_coordinator(cluster: Broker) -> int:
    """The broker leading the share-partition's ``__share_group_state`` partition."""
    with SimpleClient(cluster.bootstrap_servers) as client:
        answer = client.request(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                                      "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False})
        key = coordinator_key((GROUP, answer["topics"][0]["topic_id"], 0))
        found = client.request(ApiKey.FIND_COORDINATOR, 6, {"key_type": CoordinatorKeyType.SHARE,
                                                            "coordinator_keys": [key]})["coordinators"][0]
    assert found["error_code"] == ErrorCode.NONE
    node: int = found["node_id"]
    return node


@pytest.mark.parametrize("stopped", ["partition leader", "share coordinator"])
def test_the_new_leader_goes_on_where_the_old_one_was(cluster: Broker, stopped: str) -> None:
    consumer = ck.ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP,
                                 "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([TOPIC])
    try:
        # The first fetch starts the share-partition at the end of the (empty) log.
        with _group_coordinator(cluster) as admin:
            wait_until(lambda: len(consumer.poll(0.2)) == 0 and _offsets(admin) == [0],
                       what="the share-partition started")
        first = [f"before-{i}".encode() for i in range(10)]
        _produce(cluster.bootstrap_servers, first)
        assert sorted(_drain(consumer, len(first))) == sorted(first)
        assert all(error is None for error in consumer.commit_sync(10).values())
        with _group_coordinator(cluster) as admin:
            assert _offsets(admin) == [10]

        # Records the consumer has not seen yet, then the leader goes.
        second = [f"after-{i}".encode() for i in range(10)]
        _produce(cluster.bootstrap_servers, second)
        gone = _leader(cluster) if stopped == "partition leader" else _share_coordinator(cluster)
        cluster.stop_broker(gone)  # ids are 0..2, the indexes of cluster.brokers
        assert gone not in (_leader(cluster), _share_coordinator(cluster))

        got = _drain(consumer, len(second), seconds=60.0)
        assert sorted(got) == sorted(second)  # nothing skipped, nothing accepted before again
        assert all(error is None for error in consumer.commit_sync(10).values())
        assert [m for m in consumer.poll(1.0) if m.error() is None] == []
        with _group_coordinator(cluster) as admin:  # it may still be loading after the move
            wait_until(lambda: _offsets(admin) is not None, 10, "the moved coordinator loaded")
            assert _offsets(admin) == [20]
    finally:
        consumer.close()


def test_a_restart_on_zookeeper_with_log_dirs_keeps_the_groups_progress(zk_connect: str,
                                                                        tmp_path: Path) -> None:
    config = {"zookeeper.connect": zk_connect, "log.dirs": str(tmp_path), "broker.id": 1}
    with Broker(config) as broker:
        broker.seed({TOPIC: {"partitions": 1}})
        consumer = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": GROUP,
                                     "share.acknowledgement.mode": "explicit"})
        consumer.subscribe([TOPIC])
        try:
            with _group_coordinator(broker) as admin:
                wait_until(lambda: len(consumer.poll(0.2)) == 0 and _offsets(admin) == [0],
                           what="the share-partition started")
            _produce(broker.bootstrap_servers, [f"v{i}".encode() for i in range(10)])
            seen: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(seen) < 10 and time.monotonic() < deadline:
                for message in consumer.poll(0.3):
                    if message.error() is None:
                        seen.append(message.value())
                        # The first five done, the rest released for another try.
                        kind = ck.AcknowledgeType.ACCEPT if int(message.value()[1:]) < 5 else \
                            ck.AcknowledgeType.RELEASE
                        consumer.acknowledge(message, kind)
            assert sorted(seen) == sorted(f"v{i}".encode() for i in range(10))
            assert all(error is None for error in consumer.commit_sync(10).values())
        finally:
            consumer.close()
        _produce(broker.bootstrap_servers, [f"v{i}".encode() for i in range(10, 15)])
        with _group_coordinator(broker) as admin:
            before = _offsets(admin)
        assert before == [5]

    with Broker(config) as broker:  # the same ZooKeeper and log.dirs: topic ids and logs kept
        with _group_coordinator(broker) as admin:
            assert _offsets(admin) == before
        consumer = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": GROUP,
                                     "share.acknowledgement.mode": "explicit"})
        consumer.subscribe([TOPIC])
        try:
            counts: dict[bytes, int] = {}
            deadline = time.monotonic() + 30
            while len(counts) < 10 and time.monotonic() < deadline:
                for message in consumer.poll(0.3):
                    if message.error() is None:
                        counts[message.value()] = message.delivery_count()
                        consumer.acknowledge(message, ck.AcknowledgeType.ACCEPT)
            # Nothing accepted before comes again; the released records come with their count.
            assert counts == {**{f"v{i}".encode(): 2 for i in range(5, 10)},
                              **{f"v{i}".encode(): 1 for i in range(10, 15)}}
            assert all(error is None for error in consumer.commit_sync(10).values())
        finally:
            consumer.close()
        with _group_coordinator(broker) as admin:
            assert _offsets(admin) == [15]
