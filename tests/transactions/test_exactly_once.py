"""Exactly-once end to end with real clients against a default broker (issue 17's proof).

* confluent-kafka, kafka-python and aiokafka transactional producers commit and abort
  transactions that hold records and consumer offsets (send_offsets_to_transaction: AddOffsetsToTxn
  then TxnOffsetCommit); read_committed consumers see only the committed records,
  read_uncommitted ones every record, and the group's committed offset is the committed one;
* a consume-transform-produce loop (confluent-kafka, in a child process) is SIGKILLed with a
  transaction open and restarted: every output is there exactly once for read_committed;
* a transaction left open past transaction.timeout.ms is aborted by the coordinator, and
  read_committed consumers read on past it.

Fencing by a second producer with the same transactional.id is test_transactions_clients.py's."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkapy.embedded import Broker
from kafkapy.store import MemoryStore

from .test_transactions_wire import coordinator_ready

confluent_kafka = pytest.importorskip("confluent_kafka")

TIMEOUT_S = 20.0
GROUP = "pipeline"


@pytest.fixture
def broker() -> Iterator[Broker]:
    store = MemoryStore()
    with Broker({"broker.id": 1, "transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3,
                 "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200}, store=store) as running:
        for topic in ("in", "out"):
            store.create_topic(topic, {0: (1,), 1: (1,)})
        coordinator_ready(running)
        yield running


def read(bootstrap: str, topic: str, isolation: str, expected: int, settle_s: float = 1.0) -> list[bytes]:
    """Both partitions from the start: at least ``expected`` values (or TIMEOUT_S), then whatever
    else arrives within ``settle_s``."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}", "isolation.level": isolation,
        "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in (0, 1)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        settle: float | None = None
        while time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) >= expected:
                settle = settle or time.monotonic() + settle_s
                if time.monotonic() > settle:
                    break
        return values
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "isolation.level": "read_committed"})
    try:
        found = consumer.committed([confluent_kafka.TopicPartition(topic, p) for p in (0, 1)], timeout=10)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def test_confluent_transactions_with_offsets(broker: Broker) -> None:
    bootstrap = broker.bootstrap_servers
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "cf"})
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                                         "enable.auto.commit": False})
    try:
        producer.init_transactions(20)
        offsets = [confluent_kafka.TopicPartition("in", 0, 5), confluent_kafka.TopicPartition("in", 1, 3)]
        producer.begin_transaction()
        for i in range(4):
            producer.produce("out", value=b"kept-%d" % i, partition=i % 2)
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 20)
        producer.commit_transaction(20)
        producer.begin_transaction()
        producer.produce("out", value=b"dropped", partition=0)
        assert producer.flush(10) == 0  # in the log before the abort (librdkafka purges what is queued)
        producer.send_offsets_to_transaction([confluent_kafka.TopicPartition("in", 0, 99)],
                                             consumer.consumer_group_metadata(), 20)
        producer.abort_transaction(20)
    finally:
        consumer.close()
    assert sorted(read(bootstrap, "out", "read_committed", 4)) == [b"kept-%d" % i for i in range(4)]
    assert sorted(read(bootstrap, "out", "read_uncommitted", 5)) == [b"dropped",
                                                                     *(b"kept-%d" % i for i in range(4))]
    assert committed(bootstrap, GROUP, "in") == {0: 5, 1: 3}


def test_kafka_python_transactions_with_offsets(broker: Broker) -> None:
    kafka = pytest.importorskip("kafka")
    from kafka.structs import OffsetAndMetadata, TopicPartition

    bootstrap = broker.bootstrap_servers
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(4):
            producer.send("out", value=b"kept-%d" % i, partition=i % 2)
        producer.send_offsets_to_transaction({TopicPartition("in", 0): OffsetAndMetadata(7, "", -1)}, GROUP)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send("out", value=b"dropped", partition=1)
        producer.flush()
        producer.send_offsets_to_transaction({TopicPartition("in", 0): OffsetAndMetadata(70, "", -1)}, GROUP)
        producer.abort_transaction()
    finally:
        producer.close()
    assert sorted(read(bootstrap, "out", "read_committed", 4)) == [b"kept-%d" % i for i in range(4)]
    assert len(read(bootstrap, "out", "read_uncommitted", 5)) == 5
    assert committed(bootstrap, GROUP, "in")[0] == 7


def test_aiokafka_transactions_with_offsets(broker: Broker) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.structs import TopicPartition

    bootstrap = broker.bootstrap_servers

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(4):
                    await producer.send("out", b"kept-%d" % i, partition=i % 2)
                await producer.send_offsets_to_transaction({TopicPartition("in", 1): 11}, GROUP)
            await producer.begin_transaction()
            await (await producer.send("out", b"dropped", partition=0))
            await producer.send_offsets_to_transaction({TopicPartition("in", 1): 110}, GROUP)
            await producer.abort_transaction()
        finally:
            await producer.stop()
    asyncio.run(run())
    assert sorted(read(bootstrap, "out", "read_committed", 4)) == [b"kept-%d" % i for i in range(4)]
    assert len(read(bootstrap, "out", "read_uncommitted", 5)) == 5
    assert committed(bootstrap, GROUP, "in")[1] == 11


# The consume-transform-produce loop, run as its own process so that it can be SIGKILLed.
PIPELINE = r'''
import os, sys, time
import confluent_kafka as ck

bootstrap, total, stall_after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "etl", "enable.auto.commit": False,
                        "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
consumer.assign([ck.TopicPartition("in", 0), ck.TopicPartition("in", 1)])  # from the committed offsets
producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "etl-tx"})
producer.init_transactions(30)
done = 0
transactions = 0
while True:
    positions = {tp.partition: tp.offset for tp in consumer.position(consumer.assignment())}
    if sum(max(o, 0) for o in positions.values()) >= total:
        break
    messages = [m for m in consumer.consume(5, 0.5) if m.error() is None]
    if not messages:
        continue
    producer.begin_transaction()
    for m in messages:
        producer.produce("out", value=b"T" + m.value(), partition=m.partition())
    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                         consumer.consumer_group_metadata(), 30)
    transactions += 1
    if stall_after and transactions > stall_after:
        producer.flush(10)
        print("OPEN", flush=True)  # records written, offsets sent, no commit: kill me now
        time.sleep(600)
    producer.commit_transaction(30)
print("DONE", flush=True)
consumer.close()
'''


def run_pipeline(bootstrap: str, total: int, stall_after: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", PIPELINE, bootstrap, str(total), str(stall_after)],
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])


def test_a_killed_consume_transform_produce_loop_restarts_exactly_once(broker: Broker) -> None:
    bootstrap = broker.bootstrap_servers
    inputs = [b"%d-%03d" % (i % 2, i) for i in range(60)]
    source = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(inputs):
        source.produce("in", value=value, partition=i % 2)
    assert source.flush(10) == 0
    first = run_pipeline(bootstrap, len(inputs), stall_after=3)
    try:
        assert first.stdout is not None
        assert first.stdout.readline().strip() == "OPEN"
        os.kill(first.pid, signal.SIGKILL)
    finally:
        first.kill()
        first.communicate(timeout=10)  # and its stdout pipe closed
    # The dead loop's open transaction holds records of "out": uncommitted, not yet aborted. The
    # read_uncommitted reader waits for more than read_committed saw (up to its timeout), not for
    # a fixed half second after its first record: a loaded machine's fetches can come later.
    seen_committed = read(bootstrap, "out", "read_committed", 1, settle_s=0.5)
    assert len(read(bootstrap, "out", "read_uncommitted", len(seen_committed) + 1, settle_s=0.5)) > len(
        seen_committed)
    second = run_pipeline(bootstrap, len(inputs), stall_after=0)
    out, _ = second.communicate(timeout=120)
    assert second.returncode == 0 and out.strip() == "DONE"
    outputs = read(bootstrap, "out", "read_committed", len(inputs))
    assert sorted(outputs) == sorted(b"T" + value for value in inputs)  # each exactly once
    assert committed(bootstrap, "etl", "in") == {0: 30, 1: 30}


def test_a_transaction_open_past_its_timeout_is_aborted(broker: Broker) -> None:
    bootstrap = broker.bootstrap_servers
    stuck = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "stuck",
                                      "transaction.timeout.ms": 1500})
    stuck.init_transactions(20)
    stuck.begin_transaction()
    stuck.produce("out", value=b"never", partition=0)
    assert stuck.flush(10) == 0
    plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    plain.produce("out", value=b"after", partition=0)
    assert plain.flush(10) == 0
    started = time.monotonic()
    # read_committed stops at the open transaction until the coordinator aborts it (1.5 s on).
    values = read(bootstrap, "out", "read_committed", 1, settle_s=0.5)
    assert values == [b"after"]
    assert time.monotonic() - started > 1.0
    with pytest.raises(confluent_kafka.KafkaException) as raised:  # its transaction is gone
        stuck.commit_transaction(10)
    assert raised.value.args[0].code() in (confluent_kafka.KafkaError._FENCED,
                                    confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH,
                                    confluent_kafka.KafkaError.PRODUCER_FENCED,
                                    confluent_kafka.KafkaError.INVALID_TXN_STATE)
