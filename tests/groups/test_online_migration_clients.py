"""KIP-848's online migration with real clients: classic consumers and consumer-protocol consumers
in one group while they run (Kafka 4.0's ``group.consumer.migration.policy``, bidirectional by
default).

The classic members are librdkafka with ``group.protocol=classic`` (eager ``range``, and
``cooperative-sticky``), kafka-python and aiokafka; the consumer-protocol members librdkafka with
``group.protocol=consumer``. Each step ends with every partition owned by exactly one consumer and
every record consumed once, the offsets committed along the way carrying over: records are
produced once a step has settled, and each is committed as it is read, so a member that started
from anything but the committed offsets would read one again (at-least-once delivery makes a
record read during a rebalance legitimately readable twice, which would prove nothing).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from six_partitions import MESSAGES, PARTITIONS, broker_settings, create_topic, groups_module, produce

from kafkapy.embedded import Broker
from kafkapy.testing import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_api = pytest.importorskip("confluent_kafka.admin")

TIMEOUT_S = 40


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker(broker_settings(tmp_path)) as running:
        create_topic(running, TIMEOUT_S)
        yield running


class Librdkafka:
    """A librdkafka consumer of group "g", classic or consumer protocol."""

    def __init__(self, broker: Broker, name: str, protocol: str, strategy: str = "range",
                 static: bool = False) -> None:
        settings: dict[str, Any] = {
            "bootstrap.servers": broker.bootstrap_servers, "group.id": "g", "group.protocol": protocol,
            "client.id": name, "auto.offset.reset": "earliest", "enable.auto.commit": False}
        if protocol == "classic":
            settings.update({"partition.assignment.strategy": strategy, "session.timeout.ms": 6000,
                             "heartbeat.interval.ms": 300})
        if static:
            settings["group.instance.id"] = name
        self.name = name
        self.client = confluent_kafka.Consumer(settings)
        self.client.subscribe(["t"])

    def poll(self, seen: dict[bytes, str]) -> None:
        message = self.client.poll(0.05)
        if message is None or message.error():
            return
        value = message.value()
        assert value not in seen, f"{value!r} consumed twice ({seen[value]} and {self.name})"
        seen[value] = self.name
        self.client.commit(message=message, asynchronous=False)

    def owned(self) -> set[int]:
        return {tp.partition for tp in self.client.assignment()}

    def close(self) -> None:
        self.client.close()


class KafkaPython:
    """A kafka-python (classic protocol, eager range) consumer of group "g"."""

    def __init__(self, broker: Broker, name: str) -> None:
        kafka = pytest.importorskip("kafka")
        self.name = name
        self.client = kafka.KafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers, group_id="g", client_id=name,
            auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
            heartbeat_interval_ms=300)
        # the topic's metadata first: a leader that assigns before it knows the topic assigns nothing
        wait_until(lambda: self.client.partitions_for_topic("t"), what="kafka-python's metadata of t")
        self.client.subscribe(["t"])

    def poll(self, seen: dict[bytes, str]) -> None:
        batches = self.client.poll(timeout_ms=50, max_records=20)
        for records in batches.values():
            for record in records:
                assert record.value not in seen, f"{record.value!r} consumed twice ({seen[record.value]} " \
                                                 f"and {self.name})"
                seen[record.value] = self.name
        if batches:
            self.client.commit()

    def owned(self) -> set[int]:
        return {tp.partition for tp in self.client.assignment()}

    def close(self) -> None:
        self.client.close()


class AioKafka:
    """An aiokafka (classic protocol) consumer of group "g", on its own event loop in a thread:
    it records what it reads (committing after each batch) and what it owns."""

    def __init__(self, broker: Broker, name: str, seen: dict[bytes, str]) -> None:
        pytest.importorskip("aiokafka")
        self.name = name
        self.seen = seen
        self._owned: set[int] = set()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._run(broker),), daemon=True)
        self._thread.start()
        assert self._started.wait(TIMEOUT_S), "aiokafka did not start"

    async def _run(self, broker: Broker) -> None:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer("t", bootstrap_servers=broker.bootstrap_servers, group_id="g",
                                    client_id=self.name, auto_offset_reset="earliest",
                                    enable_auto_commit=False, session_timeout_ms=6000,
                                    heartbeat_interval_ms=300)
        await consumer.start()
        self._started.set()
        try:
            while not self._stop.is_set():
                batches = await consumer.getmany(timeout_ms=50)
                for records in batches.values():
                    for record in records:
                        if record.value in self.seen:
                            self._error = AssertionError(f"{record.value!r} consumed twice "
                                                         f"({self.seen[record.value]} and {self.name})")
                        self.seen[record.value] = self.name
                if batches:
                    await consumer.commit()
                self._owned = {tp.partition for tp in consumer.assignment()}
        except BaseException as exc:  # reported to the test's thread by poll()
            self._error = exc
        finally:
            await consumer.stop()

    def poll(self, seen: dict[bytes, str]) -> None:
        assert seen is self.seen
        time.sleep(0.01)  # its own thread reads; this one only waits a little
        if self._error is not None:
            raise self._error

    def owned(self) -> set[int]:
        return set(self._owned)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT_S)


Consumer = Librdkafka | KafkaPython | AioKafka


def poll_until(consumers: list[Consumer], done: Callable[[], bool], seen: dict[bytes, str]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, f"timed out; owned {[(c.name, c.owned()) for c in consumers]}"
        for c in consumers:
            c.poll(seen)


def split(consumers: list[Consumer], sizes: list[int]) -> Callable[[], bool]:
    """Settled: the members own ``sizes`` partitions (in any order), each partition one owner."""
    def done() -> bool:
        owned = [c.owned() for c in consumers]
        return sorted(len(o) for o in owned) == sorted(sizes) and \
            set().union(*owned) == set(range(PARTITIONS)) and sum(len(o) for o in owned) == PARTITIONS
    return done


def consume_round(broker: Broker, consumers: list[Consumer], seen: dict[bytes, str], prefix: bytes) -> None:
    """MESSAGES more records, each consumed once, by the consumer owning its partition."""
    before = len(seen)
    produce(broker, prefix, TIMEOUT_S)
    poll_until(consumers, lambda: len(seen) == before + MESSAGES, seen)


def member_types(broker: Broker) -> dict[str, int]:
    """ConsumerGroupDescribe v1 of "g" through librdkafka's admin: client id -> member type
    (0 classic, 1 consumer)."""
    module = groups_module(broker)
    described = module.consumer.describe("g", 1)
    return {m["client_id"]: m["member_type"] for m in described["members"]}


@pytest.mark.parametrize(("strategy", "static"), [("range", False), ("cooperative-sticky", False),
                                                  ("range", True)])
def test_a_classic_group_is_upgraded_online_and_downgraded_when_its_last_consumer_member_leaves(
        broker: Broker, strategy: str, static: bool) -> None:
    """Eager and cooperative classic members; static ones (group.instance.id) keep their instance
    ids through both conversions."""
    module = groups_module(broker)
    seen: dict[bytes, str] = {}
    classic = [Librdkafka(broker, f"classic{i}", "classic", strategy, static) for i in range(2)]
    consumers: list[Consumer] = list(classic)
    try:
        poll_until(consumers, split(consumers, [3, 3]), seen)
        consume_round(broker, consumers, seen, b"a")
        assert "g" in module.coordinator.groups and module.consumer.get("g") is None

        # (1) the upgrade: a consumer-protocol member joins the running classic group
        modern = Librdkafka(broker, "modern", "consumer")
        consumers.append(modern)
        poll_until(consumers, split(consumers, [2, 2, 2]), seen)
        group = module.consumer.get("g")
        assert group is not None and "g" not in module.coordinator.groups
        assert member_types(broker) == {"classic0": 0, "classic1": 0, "modern": 1}
        instances = {m.client_id: m.instance_id for m in group.members.values()}
        assert instances == ({"classic0": "classic0", "classic1": "classic1", "modern": None} if static
                             else dict.fromkeys(instances))
        listed = module.list_group_states()[1]
        assert [(g["group_id"], g["group_type"]) for g in listed] == [("g", "consumer")]
        consume_round(broker, consumers, seen, b"b")
        assert {seen[b"b%d" % i] for i in range(MESSAGES)} == {"classic0", "classic1", "modern"}

        # (2) the downgrade: the last consumer-protocol member leaves; the classic members rebalance
        consumers.remove(modern)
        modern.close()
        poll_until(consumers, split(consumers, [3, 3]), seen)
        downgraded = module.coordinator.groups["g"]
        assert module.consumer.get("g") is None and downgraded.protocol_type == "consumer"
        assert sorted(downgraded.static_members) == (["classic0", "classic1"] if static else [])
        consume_round(broker, consumers, seen, b"c")
        assert len(seen) == 3 * MESSAGES
        assert sorted(module.coordinator.offsets.get("g", "t", p).offset for p in range(PARTITIONS)) == \
            [3 * MESSAGES // PARTITIONS] * PARTITIONS
    finally:
        for c in consumers:
            c.close()


def test_kafka_python_and_librdkafka_members_share_a_consumer_group(broker: Broker) -> None:
    """A kafka-python consumer upgraded with its group, then a classic member joining the consumer
    group: JoinGroup/SyncGroup/Heartbeat against the server-side assignor, offsets committed with
    the member epoch as generation."""
    module = groups_module(broker)
    seen: dict[bytes, str] = {}
    produce(broker, b"a", TIMEOUT_S)  # first, so kafka-python's leader knows the topic when it assigns
    consumers: list[Consumer] = [KafkaPython(broker, "kp")]
    try:
        poll_until(consumers, lambda: split(consumers, [6])() and len(seen) == MESSAGES, seen)
        consumers.append(Librdkafka(broker, "modern", "consumer"))
        poll_until(consumers, split(consumers, [3, 3]), seen)
        assert module.consumer.get("g") is not None
        consumers.append(Librdkafka(broker, "late", "classic"))  # a classic member joins the consumer group
        poll_until(consumers, split(consumers, [2, 2, 2]), seen)
        assert member_types(broker) == {"kp": 0, "modern": 1, "late": 0}
        consume_round(broker, consumers, seen, b"b")
        assert {seen[b"b%d" % i] for i in range(MESSAGES)} == {"kp", "modern", "late"}
    finally:
        for c in consumers:
            c.close()
    committed = module.coordinator.offsets
    assert sorted(committed.get("g", "t", p).offset for p in range(PARTITIONS)) == [20] * PARTITIONS


def test_with_the_migration_disabled_a_running_classic_group_stays_classic(tmp_path: Path) -> None:
    with Broker(broker_settings(tmp_path, **{"group.consumer.migration.policy": "disabled"})) as running:
        create_topic(running, TIMEOUT_S)
        produce(running, b"a", TIMEOUT_S)
        module = groups_module(running)
        seen: dict[bytes, str] = {}
        classic = Librdkafka(running, "classic0", "classic")
        try:
            poll_until([classic], lambda: split([classic], [6])() and len(seen) == MESSAGES, seen)
            modern = Librdkafka(running, "modern", "consumer")
            try:
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline:
                    classic.poll(seen)
                    modern.poll(seen)
                assert modern.owned() == set() and classic.owned() == set(range(PARTITIONS))
                assert module.consumer.get("g") is None and "g" in module.coordinator.groups
            finally:
                modern.close()
        finally:
            classic.close()


def test_a_mixed_group_comes_back_from_consumer_offsets_after_a_restart(tmp_path: Path) -> None:
    seen: dict[bytes, str] = {}
    with Broker(broker_settings(tmp_path)) as running:
        create_topic(running, TIMEOUT_S)
        produce(running, b"a", TIMEOUT_S)
        consumers: list[Consumer] = [Librdkafka(running, "classic0", "classic")]
        poll_until(consumers, lambda: split(consumers, [6])() and len(seen) == MESSAGES, seen)
        consumers.append(Librdkafka(running, "modern", "consumer"))
        poll_until(consumers, split(consumers, [3, 3]), seen)
        before = groups_module(running).consumer.get("g")
        assert before is not None
        members = {m.member_id: (m.member_epoch, m.assigned, m.classic) for m in before.members.values()}
        running.close()  # the members are still in the group when the broker goes
        for c in consumers:
            c.close()
    with Broker(broker_settings(tmp_path)) as running:  # the topic is kept (the metadata journal)
        module = groups_module(running)
        admin = admin_api.AdminClient({"bootstrap.servers": running.bootstrap_servers})

        def described() -> Any:
            try:
                return admin.describe_consumer_groups(["g"])["g"].result(timeout=TIMEOUT_S)
            except confluent_kafka.KafkaException:
                return None  # the coordinator is still loading
        description = wait_until(described, timeout=TIMEOUT_S, what="the group's partition loaded")
        assert {m.client_id for m in description.members} == {"classic0", "modern"}
        after = module.consumer.get("g")
        assert after is not None and "g" not in module.coordinator.groups
        loaded = {m.member_id: (m.member_epoch, m.assigned, m.classic) for m in after.members.values()}
        assert loaded == members


def test_an_aiokafka_member_stays_through_an_upgrade_and_a_downgrade(broker: Broker) -> None:
    module = groups_module(broker)
    seen: dict[bytes, str] = {}
    produce(broker, b"a", TIMEOUT_S)
    consumers: list[Consumer] = [AioKafka(broker, "aio", seen)]
    try:
        poll_until(consumers, lambda: split(consumers, [6])() and len(seen) == MESSAGES, seen)
        modern = Librdkafka(broker, "modern", "consumer")
        consumers.append(modern)
        poll_until(consumers, split(consumers, [3, 3]), seen)
        assert member_types(broker) == {"aio": 0, "modern": 1}
        consume_round(broker, consumers, seen, b"b")
        assert {seen[b"b%d" % i] for i in range(MESSAGES)} == {"aio", "modern"}
        consumers.remove(modern)
        modern.close()
        poll_until(consumers, split(consumers, [6]), seen)
        assert module.consumer.get("g") is None and "g" in module.coordinator.groups
        consume_round(broker, consumers, seen, b"c")
    finally:
        for c in consumers:
            c.close()
