"""Real consumers against transactional data: confluent-kafka (librdkafka), kafka-python and aiokafka with
isolation.level read_committed skip aborted transactions and stop at the last stable offset, and
read_uncommitted sees every record. The transactions are written with kafkapy's codec (Produce
with transactional batches, WriteTxnMarkers) until the transaction coordinator lands."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.records import build_record_batch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_transactions import create, init_producer_id, produce, txn_batch, write_markers

TIMEOUT_S = 20.0
Consume = Callable[[str, str, int], list[bytes]]


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    # the transactions are written as a coordinator would, without one: KIP-890's verification off
    with Broker({"broker.id": 1, "transaction.partition.verification.enable": False}) as running:
        yield running


def _scenario(broker: Broker, topic: str) -> Callable[[], None]:
    """a, A's x1 x2 (aborted), b, B's y (committed), C's z (open), c. Answers C's commit."""
    create(broker, topic)
    with SimpleClient(broker.bootstrap_servers) as client:
        a, b, c = (init_producer_id(client) for _ in range(3))

        def plain(value: bytes) -> None:
            assert produce(client, topic, build_record_batch([{"value": value}]))["error_code"] == 0

        plain(b"a")
        produce(client, topic, txn_batch(a, [b"x1"], 0), transactional_id="ta")
        produce(client, topic, txn_batch(b, [b"y"], 0), transactional_id="tb")
        produce(client, topic, txn_batch(a, [b"x2"], 1), transactional_id="ta")
        assert write_markers(client, topic, a, commit=False, partitions=[0]) == {0: ErrorCode.NONE}
        plain(b"b")
        assert write_markers(client, topic, b, commit=True, partitions=[0]) == {0: ErrorCode.NONE}
        produce(client, topic, txn_batch(c, [b"z"], 0), transactional_id="tc")
        plain(b"c")

    def commit_c() -> None:
        with SimpleClient(broker.bootstrap_servers) as client:
            assert write_markers(client, topic, c, commit=True, partitions=[0]) == {0: ErrorCode.NONE}
    return commit_c


def confluent(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}-{isolation}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        end = time.monotonic() + 1.0  # nothing more arrives
        while time.monotonic() < end:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


def kafka_python(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                             enable_auto_commit=False, auto_offset_reset="earliest", group_id=None)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        settle = None
        while time.monotonic() < deadline:
            for records in consumer.poll(200).values():
                values.extend(r.value for r in records)
            if len(values) >= expected:
                settle = settle or time.monotonic() + 1.0
                if time.monotonic() > settle:
                    break
        return values
    finally:
        consumer.close()


def aiokafka(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[bytes]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                    enable_auto_commit=False, auto_offset_reset="earliest", group_id=None)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            values: list[bytes] = []
            deadline = time.monotonic() + TIMEOUT_S
            settle = None
            while time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    values.extend(r.value for r in records)
                if len(values) >= expected:
                    settle = settle or time.monotonic() + 1.0
                    if time.monotonic() > settle:
                        break
            return values
        finally:
            await consumer.stop()
    return asyncio.run(run())


@pytest.mark.parametrize("consume", [confluent, kafka_python, aiokafka],
                         ids=["confluent-kafka", "kafka-python", "aiokafka"])
def test_real_consumers_read_committed_and_uncommitted(broker: Broker, consume: Consume) -> None:
    """Each consumer's view is also what ``broker.records(isolation=...)`` gives for it."""
    topic = f"txn-{consume.__name__}"
    commit_c = _scenario(broker, topic)

    def inspected(isolation: str) -> list[bytes | None]:
        return [r.value for r in broker.records(topic, isolation=isolation)]

    uncommitted = consume(broker.bootstrap_servers, topic, "read_uncommitted", 7)
    assert uncommitted == [b"a", b"x1", b"y", b"x2", b"b", b"z", b"c"] == inspected("read_uncommitted")
    committed = consume(broker.bootstrap_servers, topic, "read_committed", 3)
    assert committed == [b"a", b"y", b"b"] == inspected("read_committed")
    commit_c()
    committed = consume(broker.bootstrap_servers, topic, "read_committed", 5)
    assert committed == [b"a", b"y", b"b", b"z", b"c"] == inspected("read_committed")
