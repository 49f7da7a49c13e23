"""Offset retention of classic and standalone groups, with real confluent-kafka consumers.

Kafka's rules (kafkapy.groups.retention): an Empty group's offsets expire
``offsets.retention.minutes`` after it became Empty, a standalone consumer's (assign + commit, no
JoinGroup) after each commit, and a Stable consumer group keeps the offsets of topics its members
subscribe to. The retention pass is run at a chosen wall time on the broker's loop; its timer
would run it every ``offsets.retention.check.interval.ms``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient

from kafkapy.embedded import Broker
from kafkapy.groups.module import GroupsModule
from kafkapy.groups.retention import DEFAULT_OFFSETS_RETENTION_MINUTES, retention_ms
from kafkapy.testing import wait_until

TOPIC = "r"


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"offsets.topic.num.partitions": 3}) as running:
        producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap_servers})
        for i in range(4):
            producer.produce(TOPIC, value=b"%d" % i, partition=0)
        assert producer.flush(10) == 0
        yield running


def member(broker: Broker, group: str) -> confluent_kafka.Consumer:
    """A subscribed member that read everything and committed it."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 4 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
    assert seen == 4
    consumer.commit(asynchronous=False)
    return consumer


def standalone_commit(broker: Broker, group: str) -> None:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, 0, 2)], asynchronous=False)
    finally:
        consumer.close()


def committed(broker: Broker, group: str) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        (found,) = consumer.committed([confluent_kafka.TopicPartition(TOPIC, 0)], timeout=10)
        return int(found.offset)
    finally:
        consumer.close()


def listed(broker: Broker) -> set[str]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    result = admin.list_consumer_groups().result(10)
    return {g.group_id for g in result.valid}


def test_expiry_by_kafkas_rules(broker: Broker) -> None:
    assert broker.runtime is not None and broker._loop is not None
    module = next(m for m in broker.runtime.modules if isinstance(m, GroupsModule))

    def retention_pass(now_ms: int) -> None:
        assert broker._loop is not None
        asyncio.run_coroutine_threadsafe(module.expire_offsets(now_ms), broker._loop).result(10)

    live = member(broker, "live")
    try:
        member(broker, "left").close()  # the group is Empty from here
        standalone_commit(broker, "solo")
        assert {committed(broker, g) for g in ("live", "left", "solo")} == {4, 2}
        assert {"live", "left", "solo"} <= listed(broker)

        retention_pass(module.timers.wall_ms())
        assert [committed(broker, g) for g in ("live", "left", "solo")] == [4, 4, 2], "nothing is old yet"

        week_later = module.timers.wall_ms() + retention_ms(DEFAULT_OFFSETS_RETENTION_MINUTES) + 1
        retention_pass(week_later)
        wait_until(lambda: committed(broker, "left") == committed(broker, "solo") == -1001, timeout=10)
        wait_until(lambda: "left" not in listed(broker) and "solo" not in listed(broker), timeout=10)
        assert committed(broker, "live") == 4, "a Stable group keeps the offsets of topics it subscribes to"
        assert "live" in listed(broker)
    finally:
        live.close()
