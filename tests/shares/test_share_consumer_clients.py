"""confluent-kafka's ShareConsumer (librdkafka 2.16, KIP-932) against kafkapy: every record a real
Producer wrote is consumed, acknowledged and committed; two consumers of one group on one
partition split the records between them exactly once; a released record comes again with a
higher delivery count, a rejected one never; a consumer that closes holding records, or whose
locks run out on virtual time, hands them to the other."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kafkapy import VirtualClock
from kafkapy.embedded import Broker
from kafkapy.testing import BrokerFactory

ck = pytest.importorskip("confluent_kafka")

TOPIC = "jobs"


@pytest.fixture
def broker(kafka_broker_factory: BrokerFactory) -> Iterator[Broker]:
    broker = kafka_broker_factory({"share.auto.offset.reset": "earliest"})
    broker.seed({TOPIC: {"partitions": 1}})
    yield broker


def _produce(broker: Broker, values: list[bytes]) -> None:
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for value in values:
        producer.produce(TOPIC, value)
    assert producer.flush(10) == 0


def _consumer(broker: Broker, group: str = "workers", **extra: Any) -> Any:
    consumer = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                 "share.acknowledgement.mode": "explicit", **extra})
    consumer.subscribe([TOPIC])
    return consumer


def _poll(consumer: Any, timeout: float = 0.5) -> list[Any]:
    messages = [m for m in consumer.poll(timeout) if m.error() is None]
    return messages


def _drain(consumers: list[Any], want: int, seconds: float = 20.0,
           kind: Any = None) -> dict[int, list[Any]]:
    """Poll the consumers in turn, acknowledging each record (ACCEPT unless told), until ``want``
    records came, or ``seconds`` passed."""
    got: dict[int, list[Any]] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + seconds
    while sum(len(v) for v in got.values()) < want and time.monotonic() < deadline:
        for index, consumer in enumerate(consumers):
            for message in _poll(consumer, 0.2):
                got[index].append(message)
                consumer.acknowledge(message, kind or ck.AcknowledgeType.ACCEPT)
    return got


def test_a_share_consumer_reads_acknowledges_and_commits_every_record(broker: Broker) -> None:
    values = [f"job-{i}".encode() for i in range(20)]
    _produce(broker, values)
    consumer = _consumer(broker)
    try:
        got = _drain([consumer], len(values))[0]
        assert sorted(m.value() for m in got) == sorted(values)
        assert all(m.delivery_count() == 1 for m in got)
        committed = consumer.commit_sync(10)
        assert all(error is None for error in committed.values())
        assert _poll(consumer, 1.0) == []  # all accepted: nothing comes again
    finally:
        consumer.close()


def test_two_consumers_on_one_partition_get_every_record_exactly_once(broker: Broker) -> None:
    first, second = _consumer(broker), _consumer(broker)
    try:
        _drain([first, second], 0, seconds=0)  # both subscribed before the records exist
        for _ in range(10):
            _poll(first, 0.1)
            _poll(second, 0.1)
        values = [f"job-{i}".encode() for i in range(200)]
        for chunk in range(0, 200, 10):  # many small batches, so both consumers get some
            _produce(broker, values[chunk:chunk + 10])
        got = _drain([first, second], len(values))
        seen = [m.value() for ms in got.values() for m in ms]
        assert got[0] and got[1], "one partition, shared: both members got records"
        assert sorted(seen) == sorted(values)  # every record, none twice
        first.commit_sync(10)
        second.commit_sync(10)
        assert _poll(first, 0.5) == [] and _poll(second, 0.5) == []
    finally:
        first.close()
        second.close()


def test_a_released_record_comes_again_and_a_rejected_one_never(broker: Broker) -> None:
    _produce(broker, [b"release-me", b"reject-me", b"accept-me"])
    consumer = _consumer(broker)
    try:
        deadline = time.monotonic() + 20
        deliveries: dict[bytes, list[int]] = {}
        while time.monotonic() < deadline and len(deliveries.get(b"release-me", [])) < 2:
            for message in _poll(consumer, 0.2):
                deliveries.setdefault(message.value(), []).append(message.delivery_count())
                kinds = {b"release-me": ck.AcknowledgeType.RELEASE, b"reject-me": ck.AcknowledgeType.REJECT}
                kind = kinds.get(message.value(), ck.AcknowledgeType.ACCEPT)
                if message.value() == b"release-me" and len(deliveries[b"release-me"]) == 2:
                    kind = ck.AcknowledgeType.ACCEPT
                consumer.acknowledge(message, kind)
        assert deliveries[b"release-me"] == [1, 2]
        for _ in range(4):
            for message in _poll(consumer, 0.2):
                consumer.acknowledge(message)
                deliveries.setdefault(message.value(), []).append(message.delivery_count())
        assert deliveries[b"reject-me"] == [1] and deliveries[b"accept-me"] == [1]
    finally:
        consumer.close()


def test_records_a_closed_consumer_held_go_to_the_other(broker: Broker) -> None:
    _produce(broker, [f"job-{i}".encode() for i in range(5)])
    quitter = _consumer(broker)
    held: list[Any] = []
    deadline = time.monotonic() + 20
    while not held and time.monotonic() < deadline:
        held = _poll(quitter, 0.2)
    assert held, "the first consumer got nothing"
    quitter.close()  # nothing acknowledged: its share session closes, its records go back
    survivor = _consumer(broker)
    try:
        got = _drain([survivor], 5)[0]
        again = {m.value(): m.delivery_count() for m in got}
        assert sorted(again) == [f"job-{i}".encode() for i in range(5)]
        assert all(again[m.value()] == 2 for m in held)
    finally:
        survivor.close()


_HOLDER = """
import sys, time
from confluent_kafka import ShareConsumer
consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": "workers",
                          "share.acknowledgement.mode": "explicit"})
consumer.subscribe([sys.argv[2]])
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    held = [m for m in consumer.poll(0.2) if m.error() is None]
    if held:
        print(len(held), flush=True)
        time.sleep(60)  # holding them, acknowledging nothing, until killed
"""


def test_records_a_crashed_consumer_held_come_back_when_its_connection_drops(broker: Broker) -> None:
    """Kafka 4.2's ShareSessionCache ends a share session with the connection that opened it
    and releases its member's records then: a consumer killed (SIGKILL: no last ShareAcknowledge,
    no leave heartbeat) hands its records on at once, long before its locks (30 s) or its group
    session (45 s) run out."""
    _produce(broker, [f"job-{i}".encode() for i in range(5)])
    with subprocess.Popen([sys.executable, "-c", _HOLDER, broker.bootstrap_servers, TOPIC],
                          stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None
            assert int(holder.stdout.readline() or 0) > 0, "the holding consumer got nothing"
        finally:
            holder.kill()
            holder.wait(10)
    killed_at = time.monotonic()
    survivor = _consumer(broker)
    try:
        got = _drain([survivor], 5, seconds=12)[0]
        assert time.monotonic() - killed_at < 15
        again = {m.value(): m.delivery_count() for m in got}
        assert sorted(again) == [f"job-{i}".encode() for i in range(5)]
        assert 2 in again.values()  # what the killed consumer held, delivered a second time
    finally:
        survivor.close()


def test_on_a_cluster_each_partition_is_fetched_from_its_leader(kafka_broker_factory: BrokerFactory) -> None:
    """Three brokers, three partitions led by different brokers: membership on the coordinator,
    share-partitions on each leader, and every record delivered once."""
    cluster = kafka_broker_factory({"share.auto.offset.reset": "earliest"}, brokers=3)
    cluster.seed({TOPIC: {"partitions": 3, "replication_factor": 1,
                          "records": [{"value": f"job-{i}"} for i in range(30)]}})
    consumers = [_consumer(cluster), _consumer(cluster)]
    try:
        got = _drain(consumers, 30)
        seen = sorted((m.partition(), m.offset()) for ms in got.values() for m in ms)
        assert len(seen) == 30 and len(set(seen)) == 30
        assert {m.partition() for ms in got.values() for m in ms} == {0, 1, 2}
    finally:
        for consumer in consumers:
            consumer.close()


def test_the_broker_shows_each_records_state_and_delivery_count(broker: Broker) -> None:
    _produce(broker, [b"accept-me", b"reject-me", b"hold-me"])
    consumer = _consumer(broker, **{"client.id": "inspected"})
    try:
        held: list[Any] = []
        deadline = time.monotonic() + 20
        while len(held) < 3 and time.monotonic() < deadline:
            held += _poll(consumer, 0.2)
        kinds = {b"accept-me": ck.AcknowledgeType.ACCEPT, b"reject-me": ck.AcknowledgeType.REJECT}
        for message in held:
            if message.value() in kinds:
                consumer.acknowledge(message, kinds[message.value()])
        consumer.commit_sync(10)
        (partition,) = broker.share_partitions("workers")
        assert (partition.topic, partition.partition) == (TOPIC, 0)
        assert [partition.state_of(o) for o in range(3)] == ["ARCHIVED", "ARCHIVED", "ACQUIRED"]
        assert partition.start_offset == 2  # 0 accepted and 1 rejected: both done
        (record,) = partition.records
        assert (record.offset, record.delivery_count) == (2, 1) and record.member_id is not None
        (group,) = broker.share_groups("workers")
        assert group.state == "Stable" and [m.client_id for m in group.members] == ["inspected"]
        assert group.members[0].assignment == {TOPIC: (0,)} and group.members[0].member_id == record.member_id
    finally:
        consumer.close()


def test_a_silent_consumers_locks_run_out_on_virtual_time_and_the_other_gets_its_records(
        kafka_clock: VirtualClock, kafka_broker_factory: BrokerFactory) -> None:
    """The first consumer takes every record and acknowledges none; once the clock passes
    group.share.record.lock.duration.ms (30 s) the second gets them, delivered a second time."""
    broker = kafka_broker_factory({"share.auto.offset.reset": "earliest"})
    broker.seed({TOPIC: {"partitions": 1, "records": [{"value": f"job-{i}"} for i in range(5)]}})
    silent = _consumer(broker)
    held: list[Any] = []
    deadline = time.monotonic() + 20
    while len(held) < 5 and time.monotonic() < deadline:
        held += _poll(silent, 0.2)
        kafka_clock.advance(0.5)  # answers the long polls of a fetch that found nothing
    assert sorted(m.value() for m in held) == [f"job-{i}".encode() for i in range(5)]
    other = _consumer(broker)
    try:
        got: list[Any] = []
        steps = 0
        while len(got) < 5 and steps < 80:
            got += _poll(other, 0.1)
            kafka_clock.advance(0.5)
            steps += 1
        assert kafka_clock.time() >= 30  # not before the locks ran out
        assert sorted(m.value() for m in got) == [f"job-{i}".encode() for i in range(5)]
        assert {m.delivery_count() for m in got} == {2}
    finally:
        other.close()
        silent.close()
