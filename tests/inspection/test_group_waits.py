"""broker.wait_for_group against real consumers: confluent-kafka's (classic and KIP-848) and
kafka-python's, which join only while polled, on a cluster whose coordinator may be any broker,
and aiokafka's, which join from their own tasks, with the asyncio form."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from quick_clients import HEARTBEAT_MS, KAFKA_PYTHON_CONSUMER, RDKAFKA_CONSUMER

from kafkapy.embedded import Broker
from kafkapy.inspection import GroupView

TIMEOUT_S = 20
TOPIC = "jobs"
PARTITIONS = 4


@pytest.fixture(scope="module")
def cluster() -> Iterator[Broker]:
    with Broker(brokers=3) as running:
        running.seed({TOPIC: {"partitions": PARTITIONS}})
        yield running


def confluent(cluster: Broker, group: str, client_id: str, **settings: Any) -> Any:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                         "client.id": client_id, **RDKAFKA_CONSUMER, **settings})
    consumer.subscribe([TOPIC])
    return consumer


def assigned(view: GroupView) -> list[int]:
    return sorted(p for member in view.members for p in member.assignment.get(TOPIC, ()))


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_two_confluent_consumers_polled_until_the_group_is_stable(cluster: Broker, protocol: str) -> None:
    """Each KIP-848 or classic group's coordinator is wherever its __consumer_offsets partition
    leads; asked of any broker of the cluster, the wait finds it there."""
    settings = {"group.protocol": protocol} if protocol == "consumer" else \
        {"heartbeat.interval.ms": HEARTBEAT_MS}
    members = [confluent(cluster, f"pair-{protocol}", f"{protocol}-{i}", **settings) for i in range(2)]
    try:
        for asked in cluster.brokers:
            view = asked.wait_for_group(f"pair-{protocol}", state="Stable", members=2, poll=members,
                                        timeout=TIMEOUT_S)
            assert (view.kind, view.state, len(view.members)) == (protocol, "Stable", 2)
            assert sorted(m.client_id for m in view.members) == [f"{protocol}-0", f"{protocol}-1"]
            assert assigned(view) == list(range(PARTITIONS))
            assert view.coordinator in {b.broker_id for b in cluster.brokers}
    finally:
        for member in members:
            member.close()


def test_a_kafka_python_consumer_not_polled_never_joins_and_the_timeout_says_what_was_seen(
        cluster: Broker) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(TOPIC, bootstrap_servers=cluster.bootstrap_servers, group_id="lonely",
                             client_id="lonely-0", **KAFKA_PYTHON_CONSUMER)
    try:
        with pytest.raises(AssertionError) as timed_out:
            cluster.wait_for_group("lonely", members=1, timeout=0.5)
        assert str(timed_out.value) == ("timed out after 0.5 s waiting for group 'lonely' in state Stable "
                                        "and with 1 member(s); last seen: no coordinator knows the group")
        view = cluster.wait_for_group("lonely", members=1, poll=consumer, timeout=TIMEOUT_S)
        assert [m.client_id for m in view.members] == ["lonely-0"]
        assert assigned(view) == list(range(PARTITIONS))
        # a group already there, waited for in a state it is not in: the last view, in a line
        with pytest.raises(AssertionError) as timed_out:
            cluster.wait_for_group("lonely", state="Empty", timeout=0.2)
        message = str(timed_out.value)
        assert message.startswith(
            "timed out after 0.2 s waiting for group 'lonely' in state Empty; last seen: classic group in "
            f"state Stable, generation {view.generation}, coordinator {view.coordinator}, 1 member(s): "
            "lonely-0 (")
        assert message.endswith(f") assigned {TOPIC}[0, 1, 2, 3]")
    finally:
        consumer.close()


def test_two_aiokafka_consumers_join_while_the_test_awaits(cluster: Broker) -> None:
    from aiokafka import AIOKafkaConsumer

    async def join() -> GroupView:
        consumers = [AIOKafkaConsumer(TOPIC, bootstrap_servers=cluster.bootstrap_servers, group_id="aio",
                                      client_id=f"aio-{i}", heartbeat_interval_ms=HEARTBEAT_MS)
                     for i in range(2)]
        for consumer in consumers:
            await consumer.start()
        try:
            return await cluster.wait_for_group_async("aio", members=2, timeout=TIMEOUT_S)
        finally:
            for consumer in consumers:
                await consumer.stop()

    view = asyncio.run(join())
    assert (view.state, sorted(m.client_id for m in view.members)) == ("Stable", ["aio-0", "aio-1"])
    assert assigned(view) == list(range(PARTITIONS))


def test_what_could_not_be_waited_for_is_refused_in_one_line(cluster: Broker) -> None:
    with pytest.raises(ValueError) as refused:
        cluster.wait_for_group("g", state="stable")
    assert str(refused.value) == ("state must be one of Empty, PreparingRebalance, CompletingRebalance, "
                                  "Stable, Assigning, Reconciling (Kafka's names) or None, not 'stable'")
    with pytest.raises(ValueError, match="members must be a count of at least 0 or None, not -1"):
        cluster.wait_for_group("g", members=-1)
    with pytest.raises(TypeError, match="poll takes a consumer, a callable or an iterable of them, not 5"):
        cluster.wait_for_group("g", poll=5)
    with pytest.raises(TypeError, match=r"poll takes consumers \(with a poll\(\) method\) or callables, "
                                        "not str"):
        cluster.wait_for_group("g", poll=["consumer"])
