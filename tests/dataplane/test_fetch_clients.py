"""Real consumers read what the seeded logs hold through FetchHandler: kafka-python (assign and
seek), confluent-kafka (librdkafka), aiokafka and kcat. Long polls wake on an append made while
the consumer waits (the wake-up latency is measured), byte limits never stall a consumer, and
the clients' fetch sessions (KIP-227) are served.

Every client call is bounded (10-30 s), so a broker that stops answering fails a test quickly.
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
from fetch_seeding import on_loop, seeded

from kafkapy.embedded import Broker
from kafkapy.testing import wait_until

TIMEOUT_S = 20
RECORDS = [(b"k%d" % i, b"value-%d" % i) for i in range(10)]


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1}) as running:
        on_loop(running, lambda: seeded(running).create_topic("t", 1))
        wait_until(lambda: "t" in seeded(running).services.cluster.topics, what="t in the cluster view")
        yield running


def append(broker: Broker, records: list[tuple[bytes | None, bytes | None]], **options: Any) -> int:
    return on_loop(broker, lambda: seeded(broker).append("t", 0, records, **options))


def seed(broker: Broker) -> None:
    append(broker, RECORDS[:4])
    append(broker, RECORDS[4:7], compression="gzip")
    append(broker, RECORDS[7:])


def waiting(broker: Broker) -> bool:
    return seeded(broker).has_waiters("t", 0)


# --- kafka-python --------------------------------------------------------------------------

def kafka_python_consumer(broker: Broker, **settings: Any) -> Any:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False,
                             request_timeout_ms=TIMEOUT_S * 1000, **settings)
    consumer.assign([TopicPartition("t", 0)])
    consumer.seek(TopicPartition("t", 0), 0)
    return consumer


def kafka_python_read(consumer: Any, count: int) -> list[tuple[int, bytes | None, bytes | None]]:
    got: list[tuple[int, bytes | None, bytes | None]] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            got += [(r.offset, r.key, r.value) for r in records]
    return got


def test_kafka_python_consumes_with_assign_and_seek(broker: Broker) -> None:
    seed(broker)
    consumer = kafka_python_consumer(broker)
    try:
        got = kafka_python_read(consumer, len(RECORDS))
        append(broker, [(b"k", b"more")])
        more = kafka_python_read(consumer, 1)  # fetched incrementally, in the session
    finally:
        consumer.close()
    assert got == [(i, k, v) for i, (k, v) in enumerate(RECORDS)]
    assert more == [(len(RECORDS), b"k", b"more")]
    # kafka-python fetches in a KIP-227 session from Fetch v7 on: a full fetch, then incremental ones.
    [session] = seeded(broker).fetch.sessions.sessions.values()
    assert session.epoch >= 2


def test_kafka_python_is_never_stalled_by_a_batch_larger_than_its_limits(broker: Broker) -> None:
    big = b"x" * 20000
    append(broker, [(None, big)])
    append(broker, [(None, b"after")])
    consumer = kafka_python_consumer(broker, max_partition_fetch_bytes=1024, fetch_max_bytes=1024)
    try:
        got = kafka_python_read(consumer, 2)
    finally:
        consumer.close()
    assert [value for _, _, value in got] == [big, b"after"]


def test_kafka_python_sees_offset_out_of_range(broker: Broker) -> None:
    from kafka import TopicPartition
    from kafka.errors import OffsetOutOfRangeError

    seed(broker)
    consumer = kafka_python_consumer(broker, auto_offset_reset="none")  # raise instead of resetting
    try:
        consumer.seek(TopicPartition("t", 0), 1000)
        with pytest.raises(OffsetOutOfRangeError):
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=500)
    finally:
        consumer.close()


def test_kafka_python_long_poll_wakes_on_append(broker: Broker) -> None:
    consumer = kafka_python_consumer(broker, fetch_max_wait_ms=15000)
    read: dict[str, Any] = {}

    def poll() -> None:  # kafka-python fetches only inside poll(): keep polling meanwhile
        read["got"] = kafka_python_read(consumer, 1)
        read["at"] = time.monotonic()

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        wait_until(lambda: waiting(broker), what="kafka-python's fetch waiting")
        appended_at = time.monotonic()
        append(broker, [(b"k", b"late")])
        reader.join(TIMEOUT_S)
        got, latency = read["got"], read["at"] - appended_at
    finally:
        reader.join(TIMEOUT_S)
        consumer.close()
    print(f"kafka-python long-poll wake-up: {latency * 1000:.1f} ms")
    assert [value for _, _, value in got] == [b"late"]
    assert latency < 5  # woken by the append, not by fetch_max_wait_ms (15 s)


# --- confluent-kafka (librdkafka) ----------------------------------------------------------

def confluent_consumer(broker: Broker, **settings: Any) -> Any:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "fetch-tests",
                         "enable.auto.commit": False, **settings})
    consumer.assign([TopicPartition("t", 0, 0)])
    return consumer


def confluent_read(consumer: Any, count: int) -> list[tuple[int, bytes | None, bytes | None]]:
    got: list[tuple[int, bytes | None, bytes | None]] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None, message.error()
        got.append((message.offset(), message.key(), message.value()))
    return got


def test_confluent_kafka_consumes_with_assign(broker: Broker) -> None:
    seed(broker)
    consumer = confluent_consumer(broker)
    try:
        got = confluent_read(consumer, len(RECORDS))
    finally:
        consumer.close()
    assert got == [(i, k, v) for i, (k, v) in enumerate(RECORDS)]


def test_confluent_kafka_long_poll_wakes_on_append(broker: Broker) -> None:
    seed(broker)
    consumer = confluent_consumer(broker, **{"fetch.wait.max.ms": 15000})
    try:
        assert len(confluent_read(consumer, len(RECORDS))) == len(RECORDS)
        wait_until(lambda: waiting(broker), what="librdkafka's fetch waiting")
        appended_at = time.monotonic()
        append(broker, [(b"k", b"late")])
        got = confluent_read(consumer, 1)
        latency = time.monotonic() - appended_at
        sessions = dict(seeded(broker).fetch.sessions.sessions)
    finally:
        consumer.close()
    print(f"confluent-kafka long-poll wake-up: {latency * 1000:.1f} ms; sessions {len(sessions)}")
    assert got == [(len(RECORDS), b"k", b"late")]
    assert latency < 5  # woken by the append, not by fetch.wait.max.ms (15 s)
    # librdkafka 2.16 sends session_epoch -1 on every Fetch (it has no KIP-227 client side): the
    # full, sessionless fetch is served and no session is kept for it.
    assert sessions == {}


# --- aiokafka -------------------------------------------------------------------------------

def test_aiokafka_consumes_with_assign_and_seek(broker: Broker) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    seed(broker)

    async def consume() -> list[tuple[int, bytes | None, bytes | None]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False,
                                    request_timeout_ms=TIMEOUT_S * 1000)
        await consumer.start()
        try:
            consumer.assign([TopicPartition("t", 0)])
            consumer.seek(TopicPartition("t", 0), 0)
            got = []
            async with asyncio.timeout(TIMEOUT_S):
                while len(got) < len(RECORDS):
                    message = await consumer.getone()
                    got.append((message.offset, message.key, message.value))
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(consume()) == [(i, k, v) for i, (k, v) in enumerate(RECORDS)]


# --- kcat ------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_consumes_from_an_offset(broker: Broker) -> None:
    seed(broker)
    result = subprocess.run(["kcat", "-C", "-b", broker.bootstrap_servers, "-t", "t", "-p", "0", "-o", "3",
                             "-e", "-f", "%o %k %s\n"], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"{i} {k.decode()} {v.decode()}"
                                          for i, (k, v) in enumerate(RECORDS) if i >= 3]
