"""Real clients in consumer groups against the coordinator: kafka-python, confluent-kafka (range,
roundrobin, cooperative-sticky), aiokafka and kcat's balanced consumer.

Three consumers of one group on a six-partition topic get two partitions each; when one leaves,
the other two take its partitions; committed offsets outlive the group going empty; consumers
that commit after each poll see every message exactly once across a rebalance; a static member
that restarts within its session timeout causes no rebalance, and one away during another's
rebalance keeps its share of the next generation. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_python_groups import PolledMember, close_all

from kafkapy.embedded import Broker
from kafkapy.testing import wait_until

TIMEOUT_S = 30
TOPIC = "t"
PARTITIONS = 6


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1, "group.min.session.timeout.ms": 1000}) as running:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        admin = KafkaAdminClient(bootstrap_servers=running.bootstrap_servers)
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
        finally:
            admin.close()
        yield running


def produce(broker: Broker, count: int, start: int = 0) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(start, start + count):
        producer.produce(TOPIC, value=str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT_S) == 0


def groups_module(broker: Broker) -> Any:
    from kafkapy.groups import GroupsModule

    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, GroupsModule))


# --- confluent-kafka ---------------------------------------------------------------------------

class ConfluentMember:
    """A librdkafka consumer polled on a thread of its own, recording what it is assigned and
    every message it sees; it commits synchronously after each message."""

    def __init__(self, broker: Broker, group: str, strategy: str, **extra: Any) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                  "partition.assignment.strategy": strategy, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False, "session.timeout.ms": 6000,
                                  "heartbeat.interval.ms": 500, **extra})
        self.consumer.subscribe([TOPIC])
        self.seen: list[int] = []
        self.parts: set[int] = set()
        self.refused: list[int] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        # Everything on this thread: librdkafka's calls from a second thread wait for poll().
        from confluent_kafka import KafkaException

        unsaved = None  # a message whose commit was refused (a rebalance under way): tried again
        while not self.stop.is_set():
            message = self.consumer.poll(0.1)
            self.parts = {tp.partition for tp in self.consumer.assignment()}
            if message is not None and not message.error():
                self.seen.append(int(message.value() or b""))
                unsaved = message
            if unsaved is not None and unsaved.partition() in self.parts:
                try:
                    self.consumer.commit(message=unsaved, asynchronous=False)
                    unsaved = None
                except KafkaException as exc:
                    self.refused.append(exc.args[0].code())
        self.consumer.close()

    def assignment(self) -> set[int]:
        return self.parts

    def close(self) -> None:
        self.stop.set()
        self.thread.join(TIMEOUT_S)


def balanced(members: list[Any], each: int) -> bool:
    assigned = [m.assignment() for m in members]
    return all(len(a) == each for a in assigned) and \
        set().union(*assigned) == set(range(PARTITIONS)) and sum(map(len, assigned)) == PARTITIONS


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_confluent_three_members_split_six_partitions_and_take_over(broker: Broker, strategy: str) -> None:
    produce(broker, 60)
    members = [ConfluentMember(broker, f"g-{strategy}", strategy) for _ in range(3)]
    try:
        wait_until(lambda: balanced(members, 2), TIMEOUT_S, "three members with two partitions each")
        members[0].close()
        rest = members[1:]
        wait_until(lambda: balanced(rest, 3), TIMEOUT_S, "two members with three partitions each")
        produce(broker, 60, start=60)
        wait_until(lambda: len(set(members[0].seen) | set(rest[0].seen) | set(rest[1].seen)) == 120,
                   TIMEOUT_S, "all 120 messages consumed")
    finally:
        for member in members:
            if not member.stop.is_set():
                member.close()
    seen = members[0].seen + members[1].seen + members[2].seen
    assert set(seen) == set(range(120)), "a message was lost"
    if strategy != "cooperative-sticky":
        # Eager: every partition is revoked before the rebalance, after the last synchronous
        # commit, so nothing is read twice. (Cooperative members keep reading while a rebalance
        # refuses their commits with REBALANCE_IN_PROGRESS, as Kafka's do.)
        assert sorted(seen) == list(range(120)), "commit-after-each-message consumers saw a message twice"


def test_confluent_fourth_member_triggers_rebalance(broker: Broker) -> None:
    members = [ConfluentMember(broker, "g4", "range") for _ in range(3)]
    try:
        wait_until(lambda: balanced(members, 2), TIMEOUT_S, "three members with two partitions each")
        members.append(ConfluentMember(broker, "g4", "range"))
        wait_until(lambda: sorted(len(m.assignment()) for m in members) == [1, 1, 2, 2], TIMEOUT_S,
                   "four members sharing six partitions")
    finally:
        for member in members:
            member.close()


def test_committed_offsets_survive_the_group_going_empty(broker: Broker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    produce(broker, 30)
    first = ConfluentMember(broker, "g-empty", "range")
    try:
        wait_until(lambda: len(first.seen) == 30, TIMEOUT_S, "30 messages consumed")
    finally:
        first.close()
    again = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g-empty"})
    try:
        committed = again.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=TIMEOUT_S)
    finally:
        again.close()
    assert [tp.offset for tp in committed] == [5] * PARTITIONS
    produce(broker, 6, start=30)
    second = ConfluentMember(broker, "g-empty", "range")
    try:
        wait_until(lambda: len(second.seen) == 6, TIMEOUT_S, "the 6 new messages consumed")
        time.sleep(0.5)
    finally:
        second.close()
    assert sorted(second.seen) == list(range(30, 36)), "the second member started past the commits"


def test_static_member_restart_causes_no_rebalance(broker: Broker) -> None:
    produce(broker, 12)
    static = {"session.timeout.ms": 10000}
    members = [ConfluentMember(broker, "g-static", "range", **{"group.instance.id": f"i{n}"}, **static)
               for n in range(2)]
    try:
        wait_until(lambda: balanced(members, 3), TIMEOUT_S, "two static members with three partitions each")
        module = groups_module(broker)
        generation = module.coordinator.groups["g-static"].generation_id
        before = members[0].assignment()
        members[0].close()  # a static member leaves no LeaveGroup behind (KIP-345)
        members[0] = ConfluentMember(broker, "g-static", "range", **{"group.instance.id": "i0"}, **static)
        wait_until(lambda: members[0].assignment() == before, TIMEOUT_S, "the restarted member's partitions")
        assert module.coordinator.groups["g-static"].generation_id == generation
        assert members[1].assignment() == set(range(PARTITIONS)) - before
    finally:
        for member in members:
            member.close()


# --- kafka-python ------------------------------------------------------------------------------

class KafkaPythonMember(PolledMember):
    def __init__(self, broker: Broker, group: str, **extra: Any) -> None:
        from kafka import KafkaConsumer

        config = {"session_timeout_ms": 6000, **extra}
        super().__init__(KafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                       auto_offset_reset="earliest", enable_auto_commit=False,
                                       heartbeat_interval_ms=500, **config), decode=int)

    def assignment(self) -> set[int]:
        return self.parts


def kafka_python_split_and_take_over(broker: Broker, group: str) -> None:
    """Three kafka-python members split six partitions two each; one leaves and the other two take
    three each; every message is read exactly once (each member commits after each poll)."""
    produce(broker, 60)
    members = [KafkaPythonMember(broker, group) for _ in range(3)]
    try:
        wait_until(lambda: balanced(members, 2), TIMEOUT_S, "three members with two partitions each")
        members[0].close()
        wait_until(lambda: balanced(members[1:], 3), TIMEOUT_S, "two members with three partitions each")
        wait_until(lambda: len(set(members[0].seen + members[1].seen + members[2].seen)) == 60, TIMEOUT_S,
                   "all 60 messages consumed")
    finally:
        for member in members:
            member.close()
    assert sorted(members[0].seen + members[1].seen + members[2].seen) == list(range(60))


def test_kafka_python_group_splits_and_takes_over(broker: Broker) -> None:
    kafka_python_split_and_take_over(broker, "g-kp")


def test_kafka_python_group_survives_sync_answers_slower_than_its_polls(broker: Broker) -> None:
    """Every SyncGroup answer held 0.5 s, longer than the members' 100 ms polls, so each round
    outlives the poll that started it, as it now and then does on a loaded machine. The leader's
    own rejoin (its topic metadata arrives after its first assignment) then meets the kafka-python
    hole keep_pending_join_needed closes: without it this failed in each of 5 runs."""
    from kafkapy.faults import Delay, FaultRule
    from kafkapy.protocol.api_keys import ApiKey

    slow_sync = broker.faults.add(FaultRule(Delay(0.5), api=ApiKey.SYNC_GROUP))
    kafka_python_split_and_take_over(broker, "g-kp-slow-sync")
    assert slow_sync.fired >= 5  # two generations' SyncGroups at least: three members', then two


def test_a_static_member_away_during_a_rebalance_keeps_its_share(broker: Broker) -> None:
    """KIP-345 with kafka-python: a static member that is away (closed: static members send no
    LeaveGroup) when a new member's join starts a rebalance is kept past the join deadline, so
    the new generation still gives it its share (the two others get two partitions each, not
    three), as Kafka's completeClassicGroupJoin keeps it; its session or its missed SyncGroup
    removes it later."""
    static = {"session_timeout_ms": 30000, "max_poll_interval_ms": 3000}  # rebalance timeout 3 s
    members = [KafkaPythonMember(broker, "g-kp-static", group_instance_id=f"i{n}", **static)
               for n in range(2)]
    try:
        wait_until(lambda: balanced(members, 3), TIMEOUT_S, "two static members with three partitions each")
        members[0].close()
        members[0] = KafkaPythonMember(broker, "g-kp-static", **static)  # a dynamic newcomer
        wait_until(lambda: [len(m.assignment()) for m in members] == [2, 2], TIMEOUT_S,
                   "two partitions each: the absent static member's two are kept for it")
    finally:
        close_all(members)


# --- aiokafka ----------------------------------------------------------------------------------

def test_aiokafka_group_consumes_and_commits(broker: Broker) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    produce(broker, 18)

    async def consume() -> tuple[list[int], dict[int, int | None]]:
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap_servers, group_id="g-aio",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        seen: list[int] = []

        async def until_all() -> None:
            while len(seen) < 18:
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    seen.extend(int(r.value) for r in records)
                await consumer.commit()
        try:
            await asyncio.wait_for(until_all(), TIMEOUT_S)
            committed = {p: await consumer.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
        finally:
            await consumer.stop()
        return seen, committed

    seen, committed = asyncio.run(consume())
    assert sorted(seen) == list(range(18))
    assert committed == dict.fromkeys(range(PARTITIONS), 3)


# --- kcat --------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_balanced_consumer(broker: Broker) -> None:
    produce(broker, 12)
    result = subprocess.run(["kcat", "-b", broker.bootstrap_servers, "-G", "g-kcat", "-o", "beginning", "-e",
                             "-f", "%p %s\n", TOPIC], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    values = sorted(int(line.split()[1]) for line in result.stdout.splitlines())
    assert values == list(range(12))



@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_a_killed_member_is_taken_over_after_its_session_timeout(broker: Broker) -> None:
    """A member that dies without a LeaveGroup (kcat -G, SIGKILL): the coordinator notices by its
    session timeout alone, and the other two take its partitions."""
    members = [ConfluentMember(broker, "g-killed", "range") for _ in range(2)]
    doomed = subprocess.Popen(["kcat", "-b", broker.bootstrap_servers, "-G", "g-killed", "-q",
                               "-X", "session.timeout.ms=2000", "-X", "heartbeat.interval.ms=200",
                               "-X", "partition.assignment.strategy=range", TOPIC],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: sorted(len(m.assignment()) for m in members) == [2, 2], TIMEOUT_S,
                   "three members (two here, kcat) with two partitions each")
        doomed.kill()
        killed_at = time.monotonic()
        wait_until(lambda: balanced(members, 3), TIMEOUT_S, "the two survivors with three partitions each")
        taken_over = time.monotonic() - killed_at
    finally:
        doomed.kill()
        doomed.wait(TIMEOUT_S)
        for member in members:
            member.close()
    # the session (2 s) must run out first; then one rebalance (the survivors' heartbeats, 0.5 s)
    assert 1.5 < taken_over < 2 + 6, taken_over
