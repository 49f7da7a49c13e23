"""The log dirs' background writer: Produce latency under log.dirs, with the fsyncs of rolled
segments, producer snapshots and periodic checkpoints written off the broker's loop (the default)
against written in place on the loop (kafkapy before the writer), in one run.

A confluent-kafka producer (acks=all, linger.ms=0) sends one 10 KB record and flushes, over and
over, for ``SECONDS`` per block, to an embedded broker with ``log.dirs`` whose topic rolls a
segment every ``SEGMENT_BYTES`` (about every 100 records) and whose high-watermark checkpoint is
written every second. Each block is a fresh broker and directory; the two variants alternate
(A B, B A, ...) so that a burst of noise from the other core hits both. "in place" is the same
broker with its log manager's writer removed (``LogManager.background = None`` before the topic
exists), so every fsync happens in the loop step that asks for it. Reported per variant: the
median over the blocks of each latency percentile, and the largest gap between runs of a
callback the loop should run every millisecond.
"""

from __future__ import annotations

import asyncio
import datetime
import statistics
import tempfile
import time

from benchmarks import Options, Report, machine_note, render_table, revision
from kafkapy.dataplane import DataPlaneModule
from kafkapy.embedded import Broker, _find_module

TITLE = "Log dirs: Produce latency with fsyncs off the loop"

SECONDS, QUICK_SECONDS = 5.0, 0.5
BLOCKS, QUICK_BLOCKS = 6, 2
SEGMENT_BYTES = 1 << 20
VALUE = b"x" * 10_000
BACKGROUND, IN_PLACE = "background writer", "in place (on the loop)"


class _Gaps:
    """The largest gap between runs of a callback asked for every millisecond."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.largest, self._last = loop, 0.0, time.perf_counter()
        self._handle: asyncio.TimerHandle | None = None

    def _tick(self) -> None:
        now = time.perf_counter()
        self.largest = max(self.largest, now - self._last)
        self._last = now
        self._handle = self.loop.call_later(0.001, self._tick)

    def start(self) -> None:
        self._last = time.perf_counter()
        self.loop.call_soon_threadsafe(self._tick)

    def stop(self) -> float:
        if self._handle is not None:
            self.loop.call_soon_threadsafe(self._handle.cancel)
        return self.largest


def _block(variant: str, seconds: float) -> tuple[list[float], float]:
    """(each produce's latency in seconds, the loop's largest gap) for one broker."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    with tempfile.TemporaryDirectory() as tmp, \
            Broker({"log.dirs": tmp, "replica.high.watermark.checkpoint.interval.ms": 1000}) as broker:
        assert broker.runtime is not None and broker._loop is not None
        module = _find_module(broker.runtime, DataPlaneModule)
        assert module is not None
        if variant == IN_PLACE:
            module.partitions.logs.background = None
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("rolls", 1, 1, config={"segment.bytes": str(SEGMENT_BYTES)})])[
            "rolls"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "linger.ms": 0,
                             "log_level": 0})
        producer.produce("rolls", value=VALUE)  # connections and metadata, outside the clock
        producer.flush(30)
        gaps = _Gaps(broker._loop)
        gaps.start()
        latencies: list[float] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.perf_counter()
            producer.produce("rolls", value=VALUE)
            producer.flush(30)
            latencies.append(time.perf_counter() - started)
        return latencies, gaps.stop()


def _percentile(ordered: list[float], fraction: float) -> float:
    return ordered[min(int(fraction * len(ordered)), len(ordered) - 1)]


def run(options: Options) -> Report:
    seconds = QUICK_SECONDS if options.quick else SECONDS
    blocks = QUICK_BLOCKS if options.quick else BLOCKS
    order = [BACKGROUND, IN_PLACE]
    samples: dict[str, list[dict[str, float]]] = {variant: [] for variant in order}
    for block in range(blocks):
        for variant in order if block % 2 == 0 else order[::-1]:
            latencies, gap = _block(variant, seconds)
            latencies.sort()
            found = {key: _percentile(latencies, fraction)
                     for key, fraction in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999))}
            samples[variant].append({"n": len(latencies), **found, "max": latencies[-1], "gap": gap})
    headers = ["variant", "produces/block", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "largest loop gap ms"]
    rows = []
    for variant in order:
        median = {key: statistics.median(s[key] for s in samples[variant]) for key in samples[variant][0]}
        rows.append([variant, f"{median['n']:.0f}", *(f"{median[k] * 1000:.2f}"
                                                      for k in ("p50", "p99", "p99.9", "max", "gap"))])
    note = (f"{machine_note()}; {revision()}; {datetime.date.today().isoformat()}; {blocks} blocks of "
            f"{seconds:g} s per variant, alternating; medians over the blocks")
    return Report(text=render_table(headers, rows) + "\n" + note,
                  markdown=render_table(headers, rows, markdown=True) + "\n\n" + note)
