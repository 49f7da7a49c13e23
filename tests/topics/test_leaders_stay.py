"""Leaders stay where they are, as in Kafka: on a three-broker in-process cluster with real clients,
the leader's broker stops (one leader change), comes back (no change: it rejoins the ISR only),
and leadership returns to it only through a preferred election: confluent-kafka's
``elect_leaders``, or the controller's auto rebalance (``auto.leader.rebalance.enable``) when the
virtual clock passes ``leader.imbalance.check.interval.seconds``; disabled, it never returns. A
producer and a consumer run across all of it and lose nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from leadership_clients import metadata_leader
from quick_clients import RDKAFKA_CLIENT

from kafkapy import VirtualClock
from kafkapy.embedded import Broker
from kafkapy.testing import wait_until

TIMEOUT_S = 30
TOPIC = "stays"


def leadership(cluster: Broker) -> tuple[int, int, tuple[int, ...]]:
    """(leader, leader epoch, ISR) of partition 0 in every running broker's view (they agree)."""
    seen = set()
    for member in cluster.brokers:
        if member.runtime is not None:
            state = member.runtime.cluster.partition_states[TOPIC, 0]
            seen.add((state.leader, state.leader_epoch, tuple(state.isr)))
    [agreed] = seen
    return agreed


class Stream:
    """An idempotent confluent-kafka producer and an assigned confluent-kafka consumer on
    partition 0, bootstrapped from every broker of the cluster."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition

        common = {"bootstrap.servers": bootstrap, **RDKAFKA_CLIENT, "retry.backoff.ms": 50}
        self.producer = Producer({**common, "enable.idempotence": True, "linger.ms": 5})
        self.consumer = Consumer({**common, "group.id": "stays-reader", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(TOPIC, 0, 0)])
        self.sent: list[bytes] = []
        self.got: list[bytes] = []

    def produce(self, count: int) -> None:
        errors: list[Any] = []
        values = [b"v%d" % (len(self.sent) + i) for i in range(count)]
        for value in values:
            self.producer.produce(TOPIC, value=value, partition=0,
                                  on_delivery=lambda err, msg: errors.append(err) if err else None)
        assert self.producer.flush(TIMEOUT_S) == 0
        assert errors == []
        self.sent += values

    def consume(self) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while len(self.got) < len(self.sent) and time.monotonic() < deadline:
            message = self.consumer.poll(0.2)
            if message is not None and message.error() is None:
                self.got.append(message.value() or b"")
        assert self.got == self.sent  # every record, once, in order

    def close(self) -> None:
        self.consumer.close()


def fail_over(cluster: Broker, stream: Stream) -> tuple[int, int, int]:
    """Stop partition 0's leader and start it again with the stream running: one leader change,
    none on the return. Answers (the old leader's index, its id, the epoch it led in)."""
    leader, epoch, _ = leadership(cluster)
    assert (leader, epoch) == (cluster.runtime.cluster.topics[TOPIC].partitions[0][0], 0)  # type: ignore[union-attr]
    index = next(i for i, m in enumerate(cluster.brokers) if m.broker_id == leader)
    stream.produce(20)
    cluster.stop_broker(index)
    moved, moved_epoch, isr = leadership(cluster)
    assert moved != leader and moved_epoch == epoch + 1 and leader not in isr  # one change
    stream.produce(20)
    stream.consume()
    cluster.start_broker(index)
    assert leadership(cluster)[:2] == (moved, epoch + 1)  # it stays where the failover put it
    wait_until(lambda: leader in leadership(cluster)[2], TIMEOUT_S, "the old leader back in the ISR")
    assert metadata_leader(cluster.bootstrap_servers, TOPIC) == (moved, epoch + 1)
    stream.produce(20)
    stream.consume()
    return index, leader, epoch


@pytest.fixture
def stream_on() -> Iterator[Any]:
    streams: list[Stream] = []

    def make(cluster: Broker, replicas: tuple[int, ...] | None = None) -> Stream:
        if replicas is None:
            cluster.seed({TOPIC: {"partitions": 1, "replication_factor": 3}})
        else:
            assert cluster.store is not None
            cluster.store.create_topic(TOPIC, {0: replicas})
            wait_until(lambda: all(m.runtime is not None and (TOPIC, 0) in m.runtime.cluster.partition_states
                                   for m in cluster.brokers), TIMEOUT_S, "the topic's state")
        streams.append(Stream(cluster.bootstrap_servers))
        return streams[-1]

    yield make
    for stream in streams:
        stream.close()


def test_a_preferred_election_moves_the_leader_back(stream_on: Any) -> None:
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    with Broker({"auto.leader.rebalance.enable": False}, brokers=3) as cluster:
        stream = stream_on(cluster)
        _, leader, epoch = fail_over(cluster, stream)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **RDKAFKA_CLIENT})
        elected = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)]).result(TIMEOUT_S)
        assert [error for error in elected.values()] == [None]
        wait_until(lambda: leadership(cluster)[:2] == (leader, epoch + 2), TIMEOUT_S, "the preferred leader")
        stream.produce(20)
        stream.consume()
        assert len(stream.got) == 80


def test_the_auto_rebalance_moves_it_back_when_the_clock_passes_the_check_interval(stream_on: Any) -> None:
    clock = VirtualClock()
    with Broker(brokers=3, clock=clock) as cluster:
        stream = stream_on(cluster)
        _, leader, epoch = fail_over(cluster, stream)
        clock.advance(4)  # the controller's first check is 5 s after it became the controller
        time.sleep(0.5)
        assert leadership(cluster)[:2] != (leader, epoch + 2)
        clock.advance(296)  # leader.imbalance.check.interval.seconds, 300 by default
        wait_until(lambda: leadership(cluster)[:2] == (leader, epoch + 2), TIMEOUT_S, "the rebalance")
        assert metadata_leader(cluster.bootstrap_servers, TOPIC) == (leader, epoch + 2)
        stream.produce(20)
        stream.consume()
        assert len(stream.got) == 80


def test_with_the_auto_rebalance_disabled_it_never_moves_back(stream_on: Any) -> None:
    clock = VirtualClock()
    with Broker({"auto.leader.rebalance.enable": False}, brokers=3, clock=clock) as cluster:
        stream = stream_on(cluster)
        _, leader, epoch = fail_over(cluster, stream)
        for _ in range(4):
            clock.advance(300)
        time.sleep(0.5)
        moved = leadership(cluster)[:2]
        assert moved[0] != leader and moved[1] == epoch + 1
        stream.produce(20)
        stream.consume()
        assert len(stream.got) == 80


def test_a_check_interval_of_ones_own(stream_on: Any) -> None:
    """leader.imbalance.check.interval.seconds: after the first check (5 s in), the next comes that
    much later on the broker's clock, not before. The broker that stops is not the controller:
    a new controller checks 5 s after it takes over, as Kafka's does."""
    clock = VirtualClock()
    with Broker({"leader.imbalance.check.interval.seconds": 60}, brokers=3, clock=clock) as cluster:
        controller = cluster.runtime.cluster.controller_id  # type: ignore[union-attr]
        others = [m.broker_id for m in cluster.brokers if m.broker_id != controller]
        stream = stream_on(cluster, (*others, controller))
        clock.advance(5)  # the first check: nothing to move
        _, leader, epoch = fail_over(cluster, stream)
        clock.advance(59)
        time.sleep(0.5)
        assert leadership(cluster)[:2] != (leader, epoch + 2)
        clock.advance(1)
        wait_until(lambda: leadership(cluster)[:2] == (leader, epoch + 2), TIMEOUT_S, "the rebalance")
        stream.produce(20)
        stream.consume()


def test_a_partition_without_in_sync_replicas_waits_for_one_or_an_unclean_election() -> None:
    """Replicas [1, 2]: 2 goes, then 1 (the last in sync, kept in the ISR as Kafka keeps it). 2
    comes back out of sync and leads only through an unclean election: the topic's
    unclean.leader.election.enable (at creation, or set later through IncrementalAlterConfigs),
    or ElectLeaders' unclean kind; a topic without either waits, LEADER_NOT_AVAILABLE."""
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    with Broker({"auto.leader.rebalance.enable": False}, brokers=3) as cluster:
        names = ("waits", "unclean-at-creation", "unclean-later", "elected-unclean")
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers,
                                 request_timeout_ms=TIMEOUT_S * 1000)
        try:
            admin.create_topics([NewTopic(name, replica_assignments={0: [1, 2]}, topic_configs={
                "unclean.leader.election.enable": str(name == "unclean-at-creation").lower()})
                for name in names])
            view = cluster.brokers[0]
            assert view.runtime is not None
            states = lambda: view.runtime.cluster.partition_states  # type: ignore[union-attr]  # noqa: E731
            wait_until(lambda: all((name, 0) in states() for name in names), TIMEOUT_S, "the states")
            cluster.stop_broker(2)
            cluster.stop_broker(1)
            assert {(states()[n, 0].leader, states()[n, 0].isr) for n in names} == {(-1, (1,))}
            cluster.start_broker(2)
            led = lambda name: states()[name, 0].leader  # noqa: E731
            assert (led("waits"), led("unclean-at-creation")) == (-1, 2)
            resource = ConfigResource(ConfigResourceType.TOPIC, "unclean-later",
                                      configs={"unclean.leader.election.enable": "true"})
            admin.alter_configs([resource])
            wait_until(lambda: led("unclean-later") == 2, TIMEOUT_S, "the unclean election the config allows")
        finally:
            admin.close()
        elector = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **RDKAFKA_CLIENT})
        unclean = elector.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("elected-unclean", 0)])
        assert list(unclean.result(TIMEOUT_S).values()) == [None]
        wait_until(lambda: led("elected-unclean") == 2, TIMEOUT_S, "the unclean election")
        assert (led("waits"), states()["waits", 0].isr) == (-1, (1,))
        assert metadata_leader(cluster.bootstrap_servers.split(",")[0], "waits")[0] == -1
