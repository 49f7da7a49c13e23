"""librdkafka's KIP-848 consumer (``group.protocol=consumer``) against the groups module.

The whole path a real client takes: FindCoordinator, ConsumerGroupHeartbeat (joins, the server
assignor's split, revoke-then-assign on a member leaving and joining), OffsetCommit/OffsetFetch v9
with member epochs, every record consumed once; and the group's records and offsets in
``__consumer_offsets``, so a broker restarted on the same ``log.dirs`` hands them back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from six_partitions import MESSAGES, PARTITIONS, broker_settings, create_topic, groups_module, produce

from kafkapy.embedded import Broker
from kafkapy.testing import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")

TIMEOUT_S = 30


def _fill(running: Broker) -> None:
    create_topic(running, TIMEOUT_S)
    produce(running, b"m", TIMEOUT_S)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker(broker_settings(tmp_path)) as running:
        _fill(running)
        yield running


def consumer(broker: Broker, name: str) -> Any:
    c = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap_servers, "group.id": "g", "group.protocol": "consumer",
        "client.id": name, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["t"])
    return c


def poll_until(consumers: list[Any], done: Callable[[], bool], seen: dict[bytes, str]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, f"timed out; assignments {[c.assignment() for c in consumers]}"
        for c in consumers:
            message = c.poll(0.05)
            if message is None or message.error():
                continue
            value = message.value()
            assert value not in seen, f"{value!r} consumed twice"
            seen[value] = c.memberid()
            c.commit(message=message, asynchronous=False)


def assigned(c: Any) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_three_librdkafka_consumers_split_six_partitions_and_take_over_a_leaver_s(broker: Broker) -> None:
    consumers = [consumer(broker, f"c{i}") for i in range(3)]
    seen: dict[bytes, str] = {}
    try:
        poll_until(consumers, lambda: sorted(len(assigned(c)) for c in consumers) == [2, 2, 2]
                   and len(seen) == MESSAGES, seen)
        assert set().union(*(assigned(c) for c in consumers)) == set(range(PARTITIONS))
        # The first member may have read everything before the others joined; records produced once
        # the split stands are each read by the member that owns their partition.
        produce(broker, b"n", TIMEOUT_S)
        poll_until(consumers, lambda: len(seen) == 2 * MESSAGES, seen)
        readers = {member for value, member in seen.items() if value.startswith(b"n")}
        assert len(readers) == 3, "every member consumed its own partitions"

        module = groups_module(broker)
        wait_until(lambda: (g := module.consumer.get("g")) is not None and g.state.value == "Stable",
                   timeout=TIMEOUT_S, what="a stable group")

        leaver = consumers.pop()
        leaver.close()
        poll_until(consumers, lambda: sorted(len(assigned(c)) for c in consumers) == [3, 3], seen)
        assert set().union(*(assigned(c) for c in consumers)) == set(range(PARTITIONS))

        consumers.append(consumer(broker, "c3"))
        poll_until(consumers, lambda: sorted(len(assigned(c)) for c in consumers) == [2, 2, 2], seen)
        assert set().union(*(assigned(c) for c in consumers)) == set(range(PARTITIONS))
        assert len(seen) == 2 * MESSAGES
    finally:
        for c in consumers:
            c.close()


def test_committed_offsets_and_the_group_survive_a_restart_with_log_dirs(tmp_path: Path) -> None:
    seen: dict[bytes, str] = {}
    with Broker(broker_settings(tmp_path)) as running:
        _fill(running)
        first = consumer(running, "c0")
        try:
            poll_until([first], lambda: len(seen) == MESSAGES, seen)
        finally:
            first.close()
        group = groups_module(running).consumer.get("g")
        assert group is not None and group.state.value == "Empty"
        epoch = group.group_epoch
    with Broker(broker_settings(tmp_path)) as running:
        module = groups_module(running)
        # the topic kept by the store (metadata.log.dir), its log from the same dirs
        again = consumer(running, "c1")
        try:
            poll_until([again], lambda: len(assigned(again)) == PARTITIONS, seen)
            committed = again.committed([confluent_kafka.TopicPartition("t", p) for p in range(PARTITIONS)],
                                        timeout=TIMEOUT_S)
            assert [tp.offset for tp in committed] == [MESSAGES // PARTITIONS] * PARTITIONS
            settle = time.monotonic() + 1.0
            poll_until([again], lambda: time.monotonic() > settle, seen)  # asserts nothing comes twice
            assert len(seen) == MESSAGES
        finally:
            again.close()
        group = module.consumer.get("g")
        assert group is not None and group.group_epoch > epoch, "the group's epoch went on from its records"


def test_classic_consumers_stopped_then_restarted_on_the_consumer_protocol_keep_their_offsets(
        tmp_path: Path) -> None:
    """The offline upgrade: a group's classic consumers stop, and the same group id comes back with
    ``group.protocol=consumer``. As Kafka 4.0's getOrMaybeCreateConsumerGroup, the joining heartbeat
    replaces the Empty classic group (its metadata tombstoned), its committed offsets carry on, and
    after a restart the id is still the consumer group's, with the offsets."""
    seen: dict[bytes, str] = {}
    with Broker(broker_settings(tmp_path)) as running:
        _fill(running)
        classic = confluent_kafka.Consumer({
            "bootstrap.servers": running.bootstrap_servers, "group.id": "g", "group.protocol": "classic",
            "client.id": "old", "auto.offset.reset": "earliest", "enable.auto.commit": False})
        classic.subscribe(["t"])
        try:
            poll_until([classic], lambda: len(seen) == MESSAGES, seen)
        finally:
            classic.close()
        module = groups_module(running)
        assert module.coordinator.groups["g"].protocol_type == "consumer"
        produce(running, b"n", TIMEOUT_S)
        upgraded = consumer(running, "new")
        try:
            poll_until([upgraded], lambda: len(seen) == 2 * MESSAGES, seen)  # only the new records
            group = module.consumer.get("g")
            assert group is not None and "g" not in module.coordinator.groups
        finally:
            upgraded.close()
    with Broker(broker_settings(tmp_path)) as running:
        module = groups_module(running)
        again = consumer(running, "again")
        _owns_every_partition_at_the_committed_offsets(again, seen)
        assert module.consumer.get("g") is not None and "g" not in module.coordinator.groups


def _owns_every_partition_at_the_committed_offsets(restarted: Any, seen: dict[bytes, str]) -> None:
    """After the restart: the group's one consumer owns every partition and finds both rounds'
    records committed (the offsets outlived the protocol change and the broker)."""
    try:
        poll_until([restarted], lambda: len(assigned(restarted)) == PARTITIONS, seen)
        committed = restarted.committed([confluent_kafka.TopicPartition("t", p) for p in range(PARTITIONS)],
                                        timeout=TIMEOUT_S)
        assert [tp.offset for tp in committed] == [2 * MESSAGES // PARTITIONS] * PARTITIONS
    finally:
        restarted.close()


def test_consumer_protocol_members_stopped_then_restarted_as_classic_keep_their_offsets(
        tmp_path: Path) -> None:
    """The offline downgrade: as Kafka's maybeDeleteEmptyConsumerGroup, a classic member joining
    the Empty consumer group replaces it and keeps its committed offsets, also after a restart."""
    seen: dict[bytes, str] = {}

    def classic_consumer(running: Broker) -> Any:
        c = confluent_kafka.Consumer({
            "bootstrap.servers": running.bootstrap_servers, "group.id": "g", "group.protocol": "classic",
            "client.id": "old", "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe(["t"])
        return c

    with Broker(broker_settings(tmp_path)) as running:
        _fill(running)
        modern = consumer(running, "new")
        try:
            poll_until([modern], lambda: len(seen) == MESSAGES, seen)
        finally:
            modern.close()
        module = groups_module(running)
        produce(running, b"n", TIMEOUT_S)
        downgraded = classic_consumer(running)
        try:
            poll_until([downgraded], lambda: len(seen) == 2 * MESSAGES, seen)  # only the new records
            assert module.consumer.get("g") is None and "g" in module.coordinator.groups
        finally:
            downgraded.close()
    with Broker(broker_settings(tmp_path)) as running:
        again = classic_consumer(running)
        _owns_every_partition_at_the_committed_offsets(again, seen)
