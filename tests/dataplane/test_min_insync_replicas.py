"""acks=all and min.insync.replicas, as Kafka's Partition.appendRecordsToLeader: a partition with
fewer in-sync replicas than its min.insync.replicas (capped at its replication factor) refuses an
acks=all write NOT_ENOUGH_REPLICAS and stores nothing; acks=1 is not affected. In an in-process
cluster the ISR shrinks as brokers stop and grows as they come back, so a test can show what its
producer does when the cluster loses replicas. Both Produce paths answer alike."""

from __future__ import annotations

import pytest
from kafka import KafkaProducer
from kafka.errors import NotEnoughReplicasError
from quick_clients import KAFKA_PYTHON_CLIENT

from kafkapy.embedded import Broker
from kafkapy.server.fastpaths import FastPaths
from kafkapy.testing import wait_until

TIMEOUT_S = 20.0
TOPICS = {"two": {"partitions": 2, "replication_factor": 3, "config": {"min.insync.replicas": "2"}},
          "capped": {"partitions": 1, "replication_factor": 1, "config": {"min.insync.replicas": "3"}}}


def send(bootstrap: str, topic: str, acks: int | str, partition: int = 0) -> None:
    """One record with kafka-python, no retries: a refusal is raised as kafka-python names it."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, retries=0, **KAFKA_PYTHON_CLIENT)
    try:
        producer.send(topic, b"v", partition=partition).get(TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)


def isr(broker: Broker, topic: str, partition: int = 0) -> list[int]:
    assert broker.runtime is not None
    return broker.runtime.cluster.in_sync_replicas(topic, partition)


@pytest.mark.parametrize("fast_paths", [FastPaths(), FastPaths(from_frame=False)],
                         ids=["from-frame", "plain"])
def test_acks_all_needs_min_insync_replicas(fast_paths: FastPaths) -> None:
    with Broker(brokers=3, fast_paths=fast_paths) as cluster:
        cluster.seed(TOPICS)
        send(cluster.bootstrap_servers, "two", "all")
        send(cluster.bootstrap_servers, "capped", "all")  # 3 is capped at its 1 replica
        for index in (1, 2):
            cluster.stop_broker(index)
        wait_until(lambda: len(isr(cluster, "two")) == 1 == len(isr(cluster, "two", 1)))
        before = len(cluster.records("two"))
        for partition in (0, 1):
            with pytest.raises(NotEnoughReplicasError):
                send(cluster.bootstrap_servers, "two", "all", partition)
        assert len(cluster.records("two")) == before  # nothing stored
        send(cluster.bootstrap_servers, "two", 1)
        cluster.start_broker(1)
        wait_until(lambda: len(isr(cluster, "two")) == 2)
        send(cluster.bootstrap_servers, "two", "all")
        assert len(cluster.records("two")) == before + 2
