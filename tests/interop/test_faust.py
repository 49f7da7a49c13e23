"""A Faust stream processor (faust-streaming, on aiokafka) against the embedded broker: the kind of
application test authors bring, not a client call at a time.

tests/interop/faust_wordcount.py counts words in a table whose changelog topic it reads back on
start, and sends running counts to "counts", as a worker process. At least once, repartitioning the
words by key through an internal topic, it counts every word once and commits the group's offsets.
Exactly once (words keyed at the source), a worker SIGKILLed with its transactions open is
replaced by a new one that finds the old transactions aborted (fenced by its transactional
producers), its table rebuilt from the committed changelog only, and the counts continue with
every running count sent exactly once for read_committed readers.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkapy.embedded import Broker
from kafkapy.testing import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.skipif(importlib.util.find_spec("faust") is None,
                                reason="faust-streaming is not installed (pip install -e '.[test]')")

WORKER = Path(__file__).with_name("faust_wordcount.py")
GROUP, CLIENT_ID = "wordcount", "wordcount-worker"  # as faust_wordcount.py names them
TIMEOUT_S = 60.0
WORDS = [b"a", b"b", b"a", b"c", b"a", b"b"] * 25  # 150 words: a 75, b 50, c 25


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1}) as running:
        running.seed({"words": {"partitions": 2}, "counts": {"partitions": 1}})
        yield running


class Worker:
    """One Faust worker process; ``ready()`` waits for Faust's "Ready" line in its log."""

    def __init__(self, bootstrap: str, guarantee: str, commit_interval_s: float, tmp: Path, name: str,
                 route: str = "keyed") -> None:
        self.log = tmp / f"{name}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(WORKER), bootstrap, guarantee, str(commit_interval_s), str(tmp / name),
                 route],
                cwd=tmp, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def ready(self) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            if "[^Worker]: Ready" in self.log.read_text(errors="replace"):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        pytest.fail(f"the Faust worker was not ready within {TIMEOUT_S} s:\n{self.tail()}")

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])

    def stop(self, how: signal.Signals = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(how)
            try:
                self.process.wait(TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(TIMEOUT_S)


def produce(bootstrap: str, words: list[bytes]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for word in words:
        producer.produce("words", word, key=word)
    assert producer.flush(TIMEOUT_S) == 0


def read_counts(bootstrap: str, isolation: str, done: Callable[[list[dict[str, object]]], bool],
                timeout_s: float = TIMEOUT_S) -> list[dict[str, object]]:
    """Every running count in "counts" from the start, read until ``done`` says so (or the time is
    up: the caller's assertion then shows what was read)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{isolation}",
                                         "isolation.level": isolation, "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition("counts", 0, 0)])
        seen: list[dict[str, object]] = []
        deadline = time.monotonic() + timeout_s
        while not done(seen) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.append(json.loads(message.value()))
        return seen
    finally:
        consumer.close()


def running_counts(seen: list[dict[str, object]]) -> dict[str, list[object]]:
    by_word: dict[str, list[object]] = {}
    for entry in seen:
        by_word.setdefault(str(entry["w"]), []).append(entry["n"])
    return by_word


def every_count_once(words: list[bytes]) -> dict[str, list[object]]:
    return {word.decode(): list(range(1, total + 1)) for word, total in Counter(words).items()}


def test_a_faust_word_count_counts_every_word(broker: Broker, tmp_path: Path) -> None:
    worker = Worker(broker.bootstrap_servers, "at_least_once", 0.5, tmp_path, "worker", route="group_by")
    try:
        worker.ready()
        produce(broker.bootstrap_servers, WORDS)
        expected = every_count_once(WORDS)
        seen = read_counts(broker.bootstrap_servers, "read_uncommitted",
                           lambda seen: len(seen) >= len(WORDS))
        assert running_counts(seen) == expected, worker.tail()

        def words_committed() -> int:
            group = broker.group(GROUP)
            offsets = group.committed() if group is not None else {}
            return sum(offset for (topic, _), offset in offsets.items() if topic == "words")

        # Faust commits what it consumed (every commit interval): all of "words", both partitions
        wait_until(lambda: words_committed() == len(WORDS), TIMEOUT_S,
                   "the group's offsets at the end of words")
    finally:
        worker.stop()


@pytest.mark.slow  # Faust's recovery notices aborted changelog records after two 5 s idle polls
def test_a_killed_exactly_once_faust_worker_is_replaced_with_every_word_counted_once(
        broker: Broker, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers
    first = Worker(bootstrap, "exactly_once", 600, tmp_path, "first")  # its transactions stay open
    try:
        first.ready()
        produce(bootstrap, WORDS)
        sent = read_counts(bootstrap, "read_uncommitted", lambda seen: len(seen) >= len(WORDS))
        assert running_counts(sent) == every_count_once(WORDS), first.tail()
        # the table's changelog writes wait in open transactions
        wait_until(lambda: {topic for txn in broker.transactions() if txn.state == "Ongoing"
                            for topic, _ in txn.partitions} == {"wordcount-word-counts-changelog"},
                   TIMEOUT_S, "the changelog's writes in open transactions")
        first_epochs = {txn.transactional_id: txn.producer_epoch for txn in broker.transactions()}
    finally:
        first.stop(signal.SIGKILL)
    assert broker.expire_session(GROUP, client_id=CLIENT_ID)  # now, not at its session timeout

    second = Worker(bootstrap, "exactly_once", 0.5, tmp_path, "second")
    try:
        second.ready()
        produce(bootstrap, WORDS)
        # Faust sends to "counts" outside its transactions, so every running count stays visible:
        # the first worker's, then the second's. The second found the first's transactions aborted
        # (its producers fenced them), rebuilt its table from the committed changelog (nothing),
        # and counted the first 150 words again (their offsets were never committed) and then the
        # next 150. Had it read the aborted changelog, or the first words' offsets as committed,
        # its counts would not start again at 1 or would stop short.
        once, twice = every_count_once(WORDS), every_count_once(WORDS * 2)
        expected = {word: once[word] + twice[word] for word in once}
        seen = read_counts(bootstrap, "read_uncommitted", lambda seen: running_counts(seen) == expected)
        assert running_counts(seen) == expected, second.tail()
        # and it did so as the same transactional ids, each a producer epoch later
        epochs = {txn.transactional_id: txn.producer_epoch for txn in broker.transactions()}
        assert all(epochs[txn_id] > epoch for txn_id, epoch in first_epochs.items()), (first_epochs, epochs)
    finally:
        second.stop()
