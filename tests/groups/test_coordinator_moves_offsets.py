"""Committed offsets across moves of the group coordinator (the __consumer_offsets partition's
leader), with a real consumer (confluent-kafka): what the second coordinator committed is what
the first one answers once it leads again."""

from __future__ import annotations

import time

import pytest

from kafkapy.embedded import Broker

confluent_kafka = pytest.importorskip("confluent_kafka")

OFFSETS = "__consumer_offsets"
TOPIC = "events"
TIMEOUT_S = 20


def committed_offset(consumer: confluent_kafka.Consumer, partition: confluent_kafka.TopicPartition) -> int:
    """committed() answers NOT_COORDINATOR once after a move, as against Kafka: librdkafka looks
    the coordinator up again for the next call."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            [committed] = consumer.committed([partition], timeout=TIMEOUT_S)
            return int(committed.offset)
        except confluent_kafka.KafkaException as exc:
            moved = exc.args[0].code() == confluent_kafka.KafkaError.NOT_COORDINATOR
            if not moved or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _consumer(bootstrap: str) -> confluent_kafka.Consumer:
    return confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "movers",
                                     "enable.auto.commit": False})


def test_offsets_committed_on_the_other_coordinator_survive_the_move_back() -> None:
    """Each commit and the read come from a consumer of their own, so no consumer that talked to
    the first coordinator is sent back to it: it must notice the move by itself."""
    with Broker({"offsets.topic.num.partitions": 1}, brokers=2) as cluster:
        cluster.seed({TOPIC: {"partitions": 1}})
        runtime = cluster.runtime
        assert runtime is not None
        consumers = []
        try:
            first_committer = _consumer(cluster.bootstrap_servers)
            consumers.append(first_committer)
            first_committer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, 0, 5)], asynchronous=False)
            first, epoch = runtime.cluster.leadership(OFFSETS, 0)  # type: ignore[misc]
            group = cluster.group("movers")
            assert group is not None and group.committed() == {(TOPIC, 0): 5}

            cluster.move_leader(OFFSETS, 0, to=1 - first)
            second_committer = _consumer(cluster.bootstrap_servers)
            consumers.append(second_committer)
            second_committer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, 0, 7)], asynchronous=False)
            cluster.move_leader(OFFSETS, 0, to=first)
            assert runtime.cluster.leadership(OFFSETS, 0) == (first, epoch + 2)
            reader = _consumer(cluster.bootstrap_servers)
            consumers.append(reader)
            assert committed_offset(reader, confluent_kafka.TopicPartition(TOPIC, 0)) == 7
            group = cluster.group("movers")
            assert group is not None and group.committed() == {(TOPIC, 0): 7}
        finally:
            for consumer in consumers:
                consumer.close()
