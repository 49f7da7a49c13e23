"""Real clients behaving well record no violation in strict mode: kafka-python's and librdkafka's
consumer groups (classic, and librdkafka's KIP-848 consumer) joining, committing and rebalancing,
and confluent-kafka's idempotent producer, also while it retries through injected errors."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from quick_clients import (
    HEARTBEAT_MS,
    KAFKA_PYTHON_CLIENT,
    KAFKA_PYTHON_CONSUMER,
    RDKAFKA_CLIENT,
    RDKAFKA_CONSUMER,
)

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.faults import ErrorAnswer, FaultRule
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.strict import StrictModule
from kafkapy.testing import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

TIMEOUT_S = 30
TOPIC = "strict-clients"
PARTITIONS = 6
MESSAGES = 60


@pytest.fixture
def broker() -> Iterator[Broker]:
    settings = {"group.min.session.timeout.ms": 1000,
                # KIP-848 members heartbeat as the broker says, and each rebalance step waits for the
                # next heartbeat: Kafka's 5 s would make each step 5 s
                "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
                "group.consumer.min.heartbeat.interval.ms": HEARTBEAT_MS,  # Kafka requires min <= it
                "observer.class.names": "kafkapy.observers.RequestHistory"}
    with Broker(settings, strict=True) as running:
        running.seed({TOPIC: {"partitions": PARTITIONS, "records": [
            {"value": str(i), "partition": i % PARTITIONS} for i in range(MESSAGES)]}})
        yield running


def clean(broker: Broker) -> None:
    assert list(broker.violations) == [], broker.violations.report()


class Member:
    """A consumer polled on a thread of its own that commits after every poll that returned
    records (kafka-python) or every message (confluent-kafka), recording its partitions."""

    def __init__(self, make: Any, poll: Any) -> None:
        self._make = make  # on the member's thread: a client is made and used on one thread
        self.consumer: Any = None
        self._poll = poll
        self.seen: list[int] = []
        self.parts: set[int] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.consumer = self._make()
        while not self.stop.is_set():
            self._poll(self)
        self.consumer.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(TIMEOUT_S)


def kafka_python_member(broker: Broker, group: str) -> Member:
    def make() -> Any:
        consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                       client_id="kp-member", auto_offset_reset="earliest",
                                       enable_auto_commit=False, **KAFKA_PYTHON_CONSUMER,
                                       # long: on a loaded machine kafka-python's heartbeats lag
                                       # (its net loop warns it is blocked), and a member timed out
                                       # while it still believes it holds its partitions stalls
                                       # the test; members here leave explicitly
                                       session_timeout_ms=30000)
        assert consumer.partitions_for_topic(TOPIC)  # so its first assignment has the partitions
        consumer.subscribe([TOPIC])
        return consumer

    def poll(member: Member) -> None:
        batches = member.consumer.poll(100)
        for records in batches.values():
            member.seen.extend(int(r.value) for r in records)
        if batches:
            try:
                member.consumer.commit(timeout_ms=1000)  # bounded: a commit retried through a
                # rebalance must not keep this member from polling, which is how it rejoins
            except (kafka.errors.CommitFailedError, kafka.errors.RebalanceInProgressError,
                    kafka.errors.KafkaTimeoutError):
                pass  # a rebalance under way: the next poll rejoins, the next commit covers these
        member.parts = {tp.partition for tp in member.consumer.assignment()}

    return Member(make, poll)


def confluent_member(broker: Broker, group: str, **settings: Any) -> Member:
    def make() -> Any:
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": broker.bootstrap_servers, "group.id": group, "client.id": "rdkafka-member",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, **RDKAFKA_CONSUMER, **settings})
        consumer.subscribe([TOPIC])
        return consumer

    def poll(member: Member) -> None:
        message = member.consumer.poll(0.1)
        member.parts = {tp.partition for tp in member.consumer.assignment()}
        if message is not None and not message.error():
            member.seen.append(int(message.value() or b""))
            try:
                member.consumer.commit(message=message, asynchronous=False)
            except confluent_kafka.KafkaException:
                pass  # refused during a rebalance; a later commit covers it

    return Member(make, poll)


def wait_balanced(broker: Broker, members: list[Member], each: int, stage: str) -> None:
    def balanced(assigned: list[set[int]]) -> bool:
        return all(len(a) == each for a in assigned) and set().union(*assigned) == set(range(PARTITIONS))

    broker.wait_for_sync(lambda: [set(m.parts) for m in members], balanced, timeout=TIMEOUT_S,
                         what=f"{len(members)} members with {each} partitions each ({stage})")


def rebalance_through(broker: Broker, group: str, start: Any) -> None:
    """One member, a second and a third joining, one leaving; every message consumed; no violation, while
    strict mode knew the members' partitions (so the commits were judged)."""
    # One at a time: two kafka-python consumers started at the same instant sometimes end with one
    # holding every partition and the other none for good (seen about once in 15 runs, with
    # strict mode off too), which is not what this test is about.
    members = [start()]
    everyone = list(members)
    try:
        wait_balanced(broker, members, PARTITIONS, "the first joined")
        members.append(start())
        everyone.append(members[-1])
        wait_balanced(broker, members, 3, "a second joined")
        members.append(start())
        everyone.append(members[-1])
        wait_balanced(broker, members, 2, "a third joined")
        members.pop(0).close()
        wait_balanced(broker, members, 3, "the first left")
        wait_until(lambda: set().union(*(m.seen for m in everyone)) == set(range(MESSAGES)), TIMEOUT_S,
                   "every message consumed")
        known = strict_module(broker).interceptor.groups.assignments(group)
        assert set().union(*known.values()) == {(TOPIC, p) for p in range(PARTITIONS)}
    finally:
        for member in members:  # told together, their last polls run out together
            member.stop.set()
        for member in members:
            member.close()
    clean(broker)
    assert any(e.api_key == ApiKey.OFFSET_COMMIT and e.error_code == ErrorCode.NONE for e in broker.history())


def strict_module(broker: Broker) -> StrictModule:
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, StrictModule))


def test_kafka_python_group_join_commit_rebalance(broker: Broker) -> None:
    rebalance_through(broker, "strict-kp", lambda: kafka_python_member(broker, "strict-kp"))


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_librdkafka_classic_group_join_commit_rebalance(broker: Broker, strategy: str) -> None:
    rebalance_through(broker, f"strict-rd-{strategy}", lambda: confluent_member(
        broker, f"strict-rd-{strategy}", **{"partition.assignment.strategy": strategy,
                                            "session.timeout.ms": 6000,
                                            "heartbeat.interval.ms": HEARTBEAT_MS}))


def test_librdkafka_kip848_group_join_commit_rebalance(broker: Broker) -> None:
    rebalance_through(broker, "strict-848",
                      lambda: confluent_member(broker, "strict-848", **{"group.protocol": "consumer"}))


def idempotent_producer(broker: Broker) -> Any:
    return confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5,
                                     "enable.idempotence": True, "client.id": "rdkafka-idempotent",
                                     **RDKAFKA_CLIENT})


def test_confluent_idempotent_produce(broker: Broker) -> None:
    producer = idempotent_producer(broker)
    for i in range(500):
        producer.produce(TOPIC, value=b"p%d" % i, partition=i % PARTITIONS)
        if i % 50 == 0:
            producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    stored = [r for r in broker.records(TOPIC) if r.producer_id >= 0]
    assert len(stored) == 500
    clean(broker)


def test_confluent_idempotent_produce_retrying_through_errors(broker: Broker) -> None:
    producer = idempotent_producer(broker)
    with broker.faults.injected(FaultRule(ErrorAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER), api=ApiKey.PRODUCE,
                                          times=2)) as handle:
        for i in range(200):
            producer.produce(TOPIC, value=b"r%d" % i, partition=i % 2)
        assert producer.flush(TIMEOUT_S) == 0
    assert handle.fired == 2
    by_partition = {p: [r.sequence for r in broker.records(TOPIC, p) if r.producer_id >= 0] for p in (0, 1)}
    assert by_partition == {0: list(range(100)), 1: list(range(100))}  # each record once, in order
    clean(broker)


def test_kafka_python_idempotent_produce(broker: Broker) -> None:
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True,
                                   client_id="kp-idempotent", **KAFKA_PYTHON_CLIENT)
    try:
        for i in range(100):
            producer.send(TOPIC, value=b"k%d" % i, partition=i % PARTITIONS)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    while len([r for r in broker.records(TOPIC) if r.producer_id >= 0]) < 100:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    clean(broker)
