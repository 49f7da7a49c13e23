"""Topics on the ZooKeeper store: created through a broker, written where Kafka keeps them
(/brokers/topics/<topic>), and seen by every broker of the cluster."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from kazoo.client import KazooClient

from kafkapy.embedded import Broker

TIMEOUT_S = 10
TIMEOUT_MS = TIMEOUT_S * 1000


def eventually(check: Callable[[], bool], timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.05)


def test_topics_live_in_zookeeper(zk_connect: str) -> None:
    from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic

    with Broker({"zookeeper.connect": zk_connect, "broker.id": 1}) as first, \
            Broker({"zookeeper.connect": zk_connect, "broker.id": 2}) as second:
        assert first.runtime is not None and second.runtime is not None
        eventually(lambda: len(first.runtime.cluster.brokers) == 2)  # type: ignore[union-attr]
        admin = KafkaAdminClient(bootstrap_servers=second.bootstrap_servers, client_id="kafkapy-topics",
                                 request_timeout_ms=TIMEOUT_MS, bootstrap_timeout_ms=TIMEOUT_MS)
        try:
            # kafka-python sends these to the controller (broker 1) whichever broker it bootstrapped from
            admin.create_topics([NewTopic("zk-topic", 3, 2)], timeout_ms=TIMEOUT_MS)
            admin.create_partitions({"zk-topic": NewPartitions(4)}, timeout_ms=TIMEOUT_MS)
            admin.create_topics([NewTopic("zk-gone", 1, 1)], timeout_ms=TIMEOUT_MS)
            admin.delete_topics(["zk-gone"], timeout_ms=TIMEOUT_MS)
            # The answering broker learns of the deletion through its ZooKeeper watch, as a Kafka
            # broker learns it from the controller: the listing converges, not at once.
            eventually(lambda: admin.list_topics() == ["zk-topic"])
        finally:
            admin.close()
        for broker in (first, second):
            eventually(lambda b=broker: set(b.runtime.cluster.topics) == {"zk-topic"})  # type: ignore[misc]
            assert len(broker.runtime.cluster.topics["zk-topic"].partitions) == 4  # type: ignore[union-attr]
        zk = KazooClient(hosts=zk_connect)
        zk.start(timeout=TIMEOUT_S)
        try:
            assert zk.get_children("/brokers/topics") == ["zk-topic"]
            data, _ = zk.get("/brokers/topics/zk-topic")
            stored = json.loads(data)
            assert sorted(stored["partitions"]) == ["0", "1", "2", "3"]
            assert all(len(replicas) == 2 and set(replicas) == {1, 2}
                       for replicas in stored["partitions"].values())
        finally:
            zk.stop()
            zk.close()


def test_a_timed_create_or_delete_answers_once_metadata_shows_it(zk_connect: str) -> None:
    """CreateTopics/DeleteTopics/CreatePartitions with a timeout answer when the change reached this
    broker's view (woken by a store watch, not a poll), so Metadata on the same connection right
    after shows it, every time."""
    import sys
    from pathlib import Path

    from kafkapy.protocol.api_keys import ApiKey

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
    from server_wire import KafkaSocket

    def names(conn: KafkaSocket) -> dict[str, int]:
        topics = conn.call(ApiKey.METADATA, 12, {"topics": None}).body["topics"]
        return {t["name"]: len(t["partitions"]) for t in topics}

    with Broker({"zookeeper.connect": zk_connect, "broker.id": 1}) as broker, \
            KafkaSocket(broker.bootstrap_servers) as conn:
        for i in range(8):
            name = f"t{i}"
            body = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                                "configs": []}], "timeout_ms": TIMEOUT_MS, "validate_only": False}
            created = conn.call(ApiKey.CREATE_TOPICS, 7, body).body["topics"]
            assert created[0]["error_code"] == 0
            assert names(conn).get(name) == 1
            grown = conn.call(ApiKey.CREATE_PARTITIONS, 3, {
                "topics": [{"name": name, "count": 2, "assignments": None}], "timeout_ms": TIMEOUT_MS,
                "validate_only": False}).body["results"]
            assert grown[0]["error_code"] == 0
            assert names(conn).get(name) == 2
            deleted = conn.call(ApiKey.DELETE_TOPICS, 5, {"topic_names": [name], "timeout_ms": TIMEOUT_MS}
                                ).body["responses"]
            assert deleted[0]["error_code"] == 0
            assert name not in names(conn)


def test_a_reassignment_is_written_at_kafkas_znodes(zk_connect: str) -> None:
    """kafka-python's admin, bootstrapped from the broker that is not the controller, moves a
    partition from broker 1 to broker 2: the controller writes the finished reassignment to
    /brokers/topics/<topic> (no adding or removing replicas left: it finished at once) and the
    next leader epoch to the partition's state znode, and the other broker's Metadata shows both."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    def described(bootstrap: str) -> tuple[list[int], int, int] | None:
        """None while this broker has not seen the topic yet (UNKNOWN_TOPIC_OR_PARTITION: no
        partitions listed)."""
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
        try:
            [topic] = admin.describe_topics(["zk-moved"])
        finally:
            admin.close()
        if not topic["partitions"]:
            return None
        [partition] = topic["partitions"]
        return list(partition["replica_nodes"]), partition["leader_id"], partition["leader_epoch"]

    with Broker({"zookeeper.connect": zk_connect, "broker.id": 1}) as first, \
            Broker({"zookeeper.connect": zk_connect, "broker.id": 2}) as second:
        assert first.runtime is not None and second.runtime is not None
        eventually(lambda: len(first.runtime.cluster.brokers) == 2)  # type: ignore[union-attr]
        assert first.runtime.cluster.controller_id == 1
        admin = KafkaAdminClient(bootstrap_servers=second.bootstrap_servers, request_timeout_ms=TIMEOUT_MS)
        try:
            admin.create_topics([NewTopic("zk-moved", replica_assignments={0: [1]})], timeout_ms=TIMEOUT_MS)
            eventually(lambda: described(second.bootstrap_servers) == ([1], 1, 0))
            tp = TopicPartition("zk-moved", 0)
            assert admin.alter_partition_reassignments({tp: [2]}, timeout_ms=TIMEOUT_MS) == {tp: None}
            assert admin.list_partition_reassignments() == {}
        finally:
            admin.close()
        eventually(lambda: described(second.bootstrap_servers) == ([2], 2, 1))
        zk = KazooClient(hosts=zk_connect)
        zk.start(timeout=TIMEOUT_S)
        try:
            stored = json.loads(zk.get("/brokers/topics/zk-moved")[0])
            assert (stored["partitions"], stored["adding_replicas"], stored["removing_replicas"]) == (
                {"0": [2]}, {}, {})
            state = json.loads(zk.get("/brokers/topics/zk-moved/partitions/0/state")[0])
            assert (state["leader"], state["leader_epoch"], state["isr"]) == (2, 1, [2])
        finally:
            zk.stop()
            zk.close()
