"""`kafkapy produce`/`consume`/`topics` against kafkapy's own broker: the same commands the mock
cluster tests drive, plus what the mock cannot answer (ListOffsets by timestamp)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest
from records_cli import TIMEOUT_S, json_lines, kafkapy

from kafkapy.embedded import Broker


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_through_kafkapy(kafka_broker: Broker, codec: str) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    wrote = kafkapy("produce", "-b", bootstrap, "-t", f"rt-{codec}", "-p", "0", "-K", ":", "-Z",
                    "-H", "h=v", "-z", codec, stdin=b"k:v\nk2:\n:\xff\n")
    assert wrote.returncode == 0, wrote.stderr.decode()
    records = json_lines(kafkapy("consume", "-b", bootstrap, "-t", f"rt-{codec}", "-p", "0", "-e", "-J"))
    assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in records] == [
        (0, "k", "v", [{"key": "h", "value": "v"}]), (1, "k2", None, [{"key": "h", "value": "v"}]),
        (2, None, {"base64": "/w=="}, [{"key": "h", "value": "v"}])]


def test_offsets_by_timestamp_and_describe(kafka_broker: Broker) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    before = int(time.time() * 1000)
    assert kafkapy("produce", "-b", bootstrap, "-t", "ts", "-p", "0", stdin=b"a\nb\n").returncode == 0
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    assert kafkapy("produce", "-b", bootstrap, "-t", "ts", "-p", "0", stdin=b"c\n").returncode == 0
    values = [r["value"] for r in json_lines(kafkapy("consume", "-b", bootstrap, "-t", "ts", "-p", "0",
                                                     "-o", f"s@{middle}", "-e", "-J"))]
    assert values == ["c"]
    values = [r["value"] for r in json_lines(kafkapy("consume", "-b", bootstrap, "-t", "ts", "-p", "0",
                                                     "-o", f"s@{before}", "-e", "-J"))]
    assert values == ["a", "b", "c"]
    described = json.loads(kafkapy("topics", "-b", bootstrap, "--describe", "--topic", "ts",
                                   "--json").stdout)
    (partition, *_) = described["topics"][0]["partitions"]
    assert (partition["earliest_offset"], partition["latest_offset"]) == (0, 3)


KCAT = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.mark.skipif(KCAT is None, reason="KCAT NOT INSTALLED: kcat interop tests SKIPPED")
def test_kcat_and_kafkapy_commands_through_kafkapy(kafka_broker: Broker) -> None:
    """kcat writes, kafkapy consume reads; kafkapy produce writes, kcat reads: one broker, kafkapy's."""
    assert KCAT is not None
    bootstrap = kafka_broker.bootstrap_servers
    wrote = subprocess.run([KCAT, "-P", "-b", bootstrap, "-t", "kc", "-p", "0", "-K", ":", "-H", "h=1"],
                           input=b"a:1\nb:2\n", capture_output=True, timeout=TIMEOUT_S)
    assert wrote.returncode == 0, wrote.stderr.decode()
    assert kafkapy("produce", "-b", bootstrap, "-t", "kc", "-p", "0", "-K", ":",
                   stdin=b"c:3\n").returncode == 0
    ours = json_lines(kafkapy("consume", "-b", bootstrap, "-t", "kc", "-p", "0", "-e", "-J"))
    assert [(r["key"], r["value"]) for r in ours] == [("a", "1"), ("b", "2"), ("c", "3")]
    assert ours[0]["headers"] == [{"key": "h", "value": "1"}]
    theirs = subprocess.run([KCAT, "-C", "-b", bootstrap, "-t", "kc", "-p", "0", "-e", "-J"],
                            capture_output=True, timeout=TIMEOUT_S)
    assert theirs.returncode == 0, theirs.stderr.decode()
    assert [(r["key"], r["payload"]) for r in map(json.loads, theirs.stdout.splitlines())] == [
        ("a", "1"), ("b", "2"), ("c", "3")]


@pytest.mark.parametrize("acks", ["0", "1", "-1"])
def test_produce_acks(kafka_broker: Broker, acks: str) -> None:
    """--acks 0 sends Produce requests that get no answer (waiting for one would take the whole
    --timeout and fail); 1 and -1 are answered. Either way the records are stored."""
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"acks{acks.replace('-', 'm')}"
    started = time.monotonic()
    # A wait for an answer that never comes would use up the whole timeout and fail; the margin is
    # wide so that only that (not a loaded machine) trips the elapsed-time check.
    wrote = kafkapy("produce", "-b", bootstrap, "-t", topic, "-p", "0", "--acks", acks, "--timeout", "30",
                    stdin=b"a\nb\n")
    assert wrote.returncode == 0, wrote.stderr.decode()
    assert time.monotonic() - started < 30
    records = json_lines(kafkapy("consume", "-b", bootstrap, "-t", topic, "-p", "0", "-e", "-J"))
    assert [r["value"] for r in records] == ["a", "b"]


def test_consume_read_committed_as_kcat_reads(kafka_broker: Broker) -> None:
    """confluent-kafka commits one transaction, aborts one and leaves one open, with plain records
    in between: --isolation-level read_committed prints what kcat (librdkafka's read_committed
    default) prints, stopping at the last stable offset; the default prints every data record."""
    from confluent_kafka import Producer

    bootstrap, topic = kafka_broker.bootstrap_servers, "rc"
    kafka_broker.seed({topic: {"partitions": 1}})
    plain = Producer({"bootstrap.servers": bootstrap})
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cli-rc"})
    transactional.init_transactions(TIMEOUT_S)

    def in_transaction(value: bytes) -> None:
        transactional.begin_transaction()
        transactional.produce(topic, value, partition=0)
        transactional.flush(TIMEOUT_S)  # stored before an abort (which drops what is queued)

    def plain_record(value: bytes) -> None:
        plain.produce(topic, value, partition=0)
        plain.flush(TIMEOUT_S)

    in_transaction(b"c1")
    transactional.commit_transaction(TIMEOUT_S)
    in_transaction(b"a1")
    transactional.abort_transaction(TIMEOUT_S)
    plain_record(b"p1")
    in_transaction(b"o1")  # left open: the last stable offset stays at its first offset
    plain_record(b"p2")

    def ours(*extra: str) -> list[str]:
        return [r["value"] for r in json_lines(kafkapy("consume", "-b", bootstrap, "-t", topic, "-e", "-J",
                                                       *extra))]

    assert ours() == ["c1", "a1", "p1", "o1", "p2"]
    assert ours("--isolation-level", "read_uncommitted") == ["c1", "a1", "p1", "o1", "p2"]
    assert ours("--isolation-level", "read_committed") == ["c1", "p1"]
    assert ours("--isolation-level", "read_committed", "-o", "end") == []
    assert ours("--isolation-level", "read_committed", "-o", "-1") == ["p1"]  # one before the LSO
    if KCAT is not None:
        theirs = subprocess.run([KCAT, "-C", "-b", bootstrap, "-t", topic, "-e", "-f", "%s\\n"],
                                capture_output=True, timeout=TIMEOUT_S)
        assert theirs.returncode == 0, theirs.stderr.decode()
        assert theirs.stdout.decode().split() == ["c1", "p1"]
    transactional.commit_transaction(TIMEOUT_S)
    assert ours("--isolation-level", "read_committed") == ["c1", "p1", "o1", "p2"]
