"""Real producers against kafkapy: what they were acknowledged is what the log holds (read back
broker-side) and what ListOffsets reports. Fetch is the fetch branch's, so nothing here consumes."""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

import pytest

from kafkapy.dataplane import DataPlaneModule
from kafkapy.embedded import Broker
from kafkapy.log import LogManager
from kafkapy.log.checkpoint import read_offsets
from kafkapy.log.segmented import SegmentedLog
from kafkapy.protocol.records import RecordBatch
from kafkapy.testing import wait_until

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
TIMEOUT_S = 20


def stored(log: SegmentedLog) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    """Every record of the log as (key, value, headers), read through the project's batch reader."""
    records = []
    for segment in log.segments:
        for batch in segment.batches():
            assert isinstance(batch, RecordBatch)
            for record in batch.record_list():
                headers = [(key, value) for key, value in record.headers]
                records.append((record.key, record.value, headers))
    return records


def log_of(broker: Broker, topic: str, partition: int = 0) -> SegmentedLog:
    assert broker.runtime is not None
    [module] = [m for m in broker.runtime.modules if isinstance(m, DataPlaneModule)]
    log = module.partitions.logs.get(topic, partition)
    assert log is not None
    return log


def expected(n: int) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    return [(f"k{i}".encode(), None if i % 5 == 4 else f"value-{i}".encode() * 3, [("h", str(i).encode())])
            for i in range(n)]


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_producer(codec: str | None) -> None:
    from kafka import KafkaProducer
    from kafka.structs import TopicPartition

    with Broker() as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type=codec,
                                 acks="all", request_timeout_ms=TIMEOUT_S * 1000)
        try:
            futures = [producer.send("kp", key=k, value=v, headers=h, partition=0)
                       for k, v, h in expected(20)]
            producer.flush(TIMEOUT_S)
            offsets = [f.get(TIMEOUT_S).offset for f in futures]
        finally:
            producer.close(TIMEOUT_S)
        assert offsets == list(range(20))
        assert stored(log_of(broker, "kp")) == expected(20)
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers,
                                 request_timeout_ms=TIMEOUT_S * 1000)
        try:
            tp = TopicPartition("kp", 0)
            assert consumer.end_offsets([tp]) == {tp: 20}  # ListOffsets -1
            assert consumer.beginning_offsets([tp]) == {tp: 0}  # ListOffsets -2
        finally:
            consumer.close()


@pytest.mark.parametrize("idempotence", [True, False])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_producer(codec: str, idempotence: bool) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    with Broker() as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec,
                             "enable.idempotence": idempotence, "acks": "all", "linger.ms": 5})
        delivered: list[int] = []
        errors: list[Any] = []

        def report(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                delivered.append(msg.offset())

        for key, value, headers in expected(30):
            producer.produce("ck", key=key, value=value, headers=headers, partition=0, on_delivery=report)
        assert producer.flush(TIMEOUT_S) == 0
        assert errors == [] and sorted(delivered) == list(range(30))
        assert stored(log_of(broker, "ck")) == expected(30)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused"})
        try:
            assert consumer.get_watermark_offsets(TopicPartition("ck", 0), timeout=TIMEOUT_S) == (0, 30)
        finally:
            consumer.close()


def test_aiokafka_producer() -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> list[int]:
        async with Broker() as broker:
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True,
                                        compression_type="gzip", acks="all")
            await producer.start()
            try:
                sent = [await producer.send_and_wait("ak", key=k, value=v, headers=h, partition=0)
                        for k, v, h in expected(10)]
            finally:
                await producer.stop()
            assert stored(log_of(broker, "ak")) == expected(10)
            return [meta.offset for meta in sent]

    assert asyncio.run(run()) == list(range(10))


def test_acks_zero_with_kafka_python() -> None:
    from kafka import KafkaProducer

    with Broker() as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=0)
        try:
            for i in range(5):
                producer.send("zero", value=f"v{i}".encode(), partition=0)
            producer.flush(TIMEOUT_S)
        finally:
            producer.close(TIMEOUT_S)
        # acks=0: flush returns once sent, so the broker may still be appending.
        [module] = [m for m in broker.runtime.modules if isinstance(m, DataPlaneModule)]  # type: ignore[union-attr]
        deadline = time.monotonic() + TIMEOUT_S
        while (log := module.partitions.logs.get("zero", 0)) is None or log.log_end_offset < 5:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        values = [value for _, value, _ in stored(log_of(broker, "zero"))]
        assert values == [f"v{i}".encode() for i in range(5)]


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat_produces_lists_and_queries_offsets() -> None:
    assert KCAT is not None
    with Broker() as broker:
        lines = "".join(f"key{i}:value{i}\n" for i in range(7))
        subprocess.run([KCAT, "-b", broker.bootstrap_servers, "-P", "-t", "kc", "-p", "0", "-K:"],
                       input=lines.encode(), check=True, timeout=TIMEOUT_S)
        assert [(k, v) for k, v, _ in stored(log_of(broker, "kc"))] == \
            [(f"key{i}".encode(), f"value{i}".encode()) for i in range(7)]
        listed = subprocess.run([KCAT, "-b", broker.bootstrap_servers, "-L", "-t", "kc"], capture_output=True,
                                text=True, check=True, timeout=TIMEOUT_S).stdout
        assert 'topic "kc" with 1 partitions' in listed
        # -Q: the offset of the first message at or after a timestamp; -1 (end) for the future
        queried = subprocess.run([KCAT, "-b", broker.bootstrap_servers, "-Q", "-t", "kc:0:0"],
                                 capture_output=True, text=True, check=True, timeout=TIMEOUT_S).stdout
        assert re.search(r"kc \[0\]\s+offset 0", queried), queried
        future = str(int(time.time() * 1000) + 3_600_000)
        queried = subprocess.run([KCAT, "-b", broker.bootstrap_servers, "-Q", "-t", f"kc:0:{future}"],
                                 capture_output=True, text=True, check=True, timeout=TIMEOUT_S).stdout
        assert re.search(r"kc \[0\]\s+offset -1", queried), queried


LISTENING = re.compile(r"listening on \w+://([^\s:]+):(\d+)")


def _serve(log_dir: Path, *overrides: str) -> tuple[subprocess.Popen[str], str]:
    extra = [arg for override in overrides for arg in ("--override", override)]
    proc = subprocess.Popen([sys.executable, "-m", "kafkapy.cli", "serve", "--override",
                             "listeners=PLAINTEXT://127.0.0.1:0", "--override", "broker.id=1",
                             "--override", f"log.dirs={log_dir}", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        match = LISTENING.search(line)
        if match:
            # The rest of its log is read (a full pipe would block the broker's next write) and
            # the pipe closed once the process exits, however the test ends it.
            threading.Thread(target=_drain, args=(proc.stderr,), daemon=True).start()
            return proc, f"{match.group(1)}:{match.group(2)}"
        if not line and proc.poll() is not None:
            break
    proc.kill()
    _, rest = proc.communicate(TIMEOUT_S)  # waited for, and its pipe closed: no ResourceWarning later
    pytest.fail("kafkapy serve did not start listening: " + rest)


def _drain(stream: TextIO) -> None:
    with stream:
        for _ in stream:
            pass


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "kill-9"])
def test_serve_with_log_dirs_keeps_every_acknowledged_record(tmp_path: Path, stop: signal.Signals) -> None:
    from kafka import KafkaProducer

    # Flushed every 100 messages, and by the flush scheduler 100 ms after a write (the batches the
    # client makes may leave fewer than 100 after the last count flush); the recovery point
    # checkpointed every 200 ms (log.flush.offset.checkpoint.interval.ms): a kill -9 finds it on
    # disk, no clean shutdown needed.
    proc, address = _serve(tmp_path, "log.flush.interval.messages=100", "log.flush.interval.ms=100",
                           "log.flush.scheduler.interval.ms=100",
                           "log.flush.offset.checkpoint.interval.ms=200")
    try:
        producer = KafkaProducer(bootstrap_servers=address, acks="all", linger_ms=5)
        futures = [producer.send("durable", value=f"v{i}".encode(), partition=0) for i in range(200)]
        producer.flush(TIMEOUT_S)
        assert sorted(f.get(TIMEOUT_S).offset for f in futures) == list(range(200))
        producer.close(TIMEOUT_S)
        checkpoint = tmp_path / "recovery-point-offset-checkpoint"
        wait_until(lambda: checkpoint.exists() and read_offsets(checkpoint).get(("durable", 0)) == 200,
                   what="the recovery point checkpointed by its timer")
        proc.send_signal(stop)
        proc.wait(TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(TIMEOUT_S)
    assert (tmp_path / "durable-0" / "00000000000000000000.log").exists()
    assert (tmp_path / ".kafka_cleanshutdown").exists() == (stop == signal.SIGTERM)
    # again under kafkapy serve: ListOffsets sees them all
    proc, address = _serve(tmp_path)
    try:
        from kafka import KafkaConsumer
        from kafka.structs import TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=address, request_timeout_ms=TIMEOUT_S * 1000)
        try:
            tp = TopicPartition("durable", 0)
            assert consumer.end_offsets([tp]) == {tp: 200}
        finally:
            consumer.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(TIMEOUT_S)
    logs = LogManager([tmp_path], broker_id=1)
    try:
        log = logs.get("durable", 0)
        assert log is not None
        assert [value for _, value, _ in stored(log)] == [f"v{i}".encode() for i in range(200)]
    finally:
        logs.close()
