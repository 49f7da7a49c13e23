"""ElectLeaders from confluent-kafka's and kafka-python's admin clients against a three-broker
cluster in one process: a preferred replica that leads needs no election, one that is down cannot
be elected, an unclean election is not needed while a replica leads, and an election over all
partitions lists only the partitions it could not leave alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from quick_clients import RDKAFKA_CLIENT

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import wait_until

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
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    view = cluster.runtime.cluster  # type: ignore[union-attr]
    replicas = {p: view.topics[TOPIC].partitions[p] for p in range(3)}
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **RDKAFKA_CLIENT})
    asked = [TopicPartition(TOPIC, p) for p in range(3)] + [TopicPartition(TOPIC, 7)]
    preferred = admin.elect_leaders(ElectionType.PREFERRED, asked).result(TIMEOUT_S)
    assert _codes(preferred) == {0: ErrorCode.ELECTION_NOT_NEEDED, 1: ErrorCode.ELECTION_NOT_NEEDED,
                                 2: ErrorCode.ELECTION_NOT_NEEDED, 7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert admin.elect_leaders(ElectionType.PREFERRED, None).result(TIMEOUT_S) == {}  # nothing to do

    # The preferred replica of partition 0 goes down: another replica leads, and the preferred
    # one cannot be elected until it is back; an unclean election is not needed (a replica leads).
    down = replicas[0][0]
    cluster.stop_broker(down)
    wait_until(lambda: all(leader(cluster, p) not in (down, -1) for p in range(3)), TIMEOUT_S,
               "every partition led by a live replica")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **RDKAFKA_CLIENT})
    after = admin.elect_leaders(ElectionType.PREFERRED, None).result(TIMEOUT_S)
    moved = {p for p in range(3) if replicas[p][0] == down}
    assert _codes(after) == {p: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE for p in moved}
    unclean = admin.elect_leaders(ElectionType.UNCLEAN, asked[:3]).result(TIMEOUT_S)
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
