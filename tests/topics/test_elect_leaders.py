"""ElectLeaders from confluent-kafka's and kafka-python's admin clients against a three-broker
cluster in one process: a preferred replica that leads needs no election, one that is down cannot
be elected, an unclean election is not needed while a replica leads, and an election over all
partitions lists only the partitions it could not leave alone."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from quick_clients import RDKAFKA_CLIENT

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.store import MemoryStore
from kafkapy.testing import wait_until
from kafkapy.topics.elections import ElectionType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket

TIMEOUT_S = 20
TOPIC = "elected"


@pytest.fixture
def cluster() -> Iterator[Broker]:
    with Broker({"observer.class.names": "kafkapy.observers.RequestHistory"}, brokers=3) as running:
        running.seed({TOPIC: {"partitions": 3, "replication_factor": 3}})
        yield running


def leader(cluster: Broker, partition: int) -> int:
    leadership = cluster.runtime.cluster.leadership(TOPIC, partition)  # type: ignore[union-attr]
    return -1 if leadership is None else leadership[0]


def _codes(results: dict[object, object]) -> dict[int, ErrorCode]:
    """confluent-kafka's {TopicPartition: KafkaError | None} as {partition: error code}."""
    return {tp.partition: ErrorCode.NONE if error is None else ErrorCode(error.code())  # type: ignore[attr-defined]
            for tp, error in results.items()}


def test_confluent_preferred_and_unclean_elections(cluster: Broker) -> None:
    from confluent_kafka import ElectionType as Kind
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    view = cluster.runtime.cluster  # type: ignore[union-attr]
    replicas = {p: view.topics[TOPIC].partitions[p] for p in range(3)}
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **RDKAFKA_CLIENT})
    asked = [TopicPartition(TOPIC, p) for p in range(3)] + [TopicPartition(TOPIC, 7)]
    preferred = admin.elect_leaders(Kind.PREFERRED, asked).result(TIMEOUT_S)
    assert _codes(preferred) == {0: ErrorCode.ELECTION_NOT_NEEDED, 1: ErrorCode.ELECTION_NOT_NEEDED,
                                 2: ErrorCode.ELECTION_NOT_NEEDED, 7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert admin.elect_leaders(Kind.PREFERRED, None).result(TIMEOUT_S) == {}  # nothing to do

    # The preferred replica of partition 0 goes down: another replica leads, and the preferred
    # one cannot be elected until it is back; an unclean election is not needed (a replica leads).
    down = replicas[0][0]
    cluster.stop_broker(down)
    wait_until(lambda: all(leader(cluster, p) not in (down, -1) for p in range(3)), TIMEOUT_S,
               "every partition led by a live replica")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **RDKAFKA_CLIENT})
    after = admin.elect_leaders(Kind.PREFERRED, None).result(TIMEOUT_S)
    moved = {p for p in range(3) if replicas[p][0] == down}
    assert _codes(after) == {p: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE for p in moved}
    unclean = admin.elect_leaders(Kind.UNCLEAN, asked[:3]).result(TIMEOUT_S)
    assert set(_codes(unclean).values()) == {ErrorCode.ELECTION_NOT_NEEDED}


def test_kafka_python_elections_and_the_wire(cluster: Broker) -> None:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        response = admin.elect_leaders(0, {TOPIC: [0, 1, 2]}, raise_errors=False)
        [result] = response.replica_election_results
        codes = {p.partition_id: p.error_code for p in result.partition_result}
        assert codes == dict.fromkeys(range(3), ErrorCode.ELECTION_NOT_NEEDED)
        assert response.error_code == ErrorCode.NONE
        unknown = admin.elect_leaders(1, {"no-such-topic": [0]}, raise_errors=False)
        [missing] = unknown.replica_election_results[0].partition_result
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        admin.close()
    assert ApiKey.ELECT_LEADERS in {entry.api_key for entry in cluster.history()}


# --- over raw sockets: the refusals and the oldest version --------------------------------------

def _elect(conn: KafkaSocket, version: int, partitions: dict[str, list[int]] | None,
           election_type: int = ElectionType.PREFERRED) -> tuple[int | None, dict[tuple[str, int], int]]:
    """(top-level error code, or None on v0; {(topic, partition): error code})."""
    asked = None if partitions is None else [{"topic": t, "partitions": ps} for t, ps in partitions.items()]
    request = {"election_type": election_type, "topic_partitions": asked, "timeout_ms": 1000}
    body = conn.call(ApiKey.ELECT_LEADERS, version, request).body
    results = {(r["topic"], p["partition_id"]): p["error_code"]
               for r in body["replica_election_results"] for p in r["partition_result"]}
    return body.get("error_code"), results


def test_v0_an_unknown_election_type_and_a_missing_permission() -> None:
    with Broker({"broker.id": 1}) as broker, KafkaSocket(broker.bootstrap_servers) as conn:
        broker.seed({"t": {"partitions": 2}})
        assert _elect(conn, 0, {"t": [0, 1]}) == (None, {("t", 0): ErrorCode.ELECTION_NOT_NEEDED,
                                                         ("t", 1): ErrorCode.ELECTION_NOT_NEEDED})
        assert _elect(conn, 2, {"t": [0]}, election_type=5) == (
            ErrorCode.INVALID_REQUEST, {("t", 0): ErrorCode.INVALID_REQUEST})
    refusing = {"broker.id": 1, "authorizer.class.name": "allowlist", "allowlist.rules": "*@*:DESCRIBE"}
    with Broker(refusing) as broker, KafkaSocket(broker.bootstrap_servers) as conn:
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert _elect(conn, 1, {"t": [0]}) == (denied, {("t", 0): denied})
        assert _elect(conn, 2, None) == (denied, {})


def test_a_partition_named_twice_is_one_result() -> None:
    """Kafka reads ElectLeaders' partitions as a set (ElectLeadersRequest.topicPartitions)."""
    with Broker({"broker.id": 1}) as broker, KafkaSocket(broker.bootstrap_servers) as conn:
        broker.seed({"t": {"partitions": 2}})
        request = {"election_type": ElectionType.PREFERRED, "timeout_ms": 1000, "topic_partitions": [
            {"topic": "t", "partitions": [0, 0, 1]}, {"topic": "t", "partitions": [1]}]}
        body = conn.call(ApiKey.ELECT_LEADERS, 2, request).body
        assert [(r["topic"], [p["partition_id"] for p in r["partition_result"]])
                for r in body["replica_election_results"]] == [("t", [0, 1])]


def test_only_the_controller_elects() -> None:
    store = MemoryStore()
    with Broker({"broker.id": 1}, store=store) as first, \
            Broker({"broker.id": 2}, store=store.peer()) as second:
        store.create_topic("t", {0: (1,)})
        wait_until(lambda: "t" in first.runtime.cluster.topics, TIMEOUT_S, "the topic")  # type: ignore[union-attr]
        refused = ErrorCode.NOT_CONTROLLER
        with KafkaSocket(second.bootstrap_servers) as conn:
            assert _elect(conn, 2, {"t": [0]}) == (refused, {("t", 0): refused})
        with KafkaSocket(first.bootstrap_servers) as conn:
            assert _elect(conn, 2, {"t": [0]}) == (ErrorCode.NONE, {("t", 0): ErrorCode.ELECTION_NOT_NEEDED})
