"""Log maintenance off the broker's loop, against in place on it (kafkapy before), in one run.

**Writes.** Produce latency under log.dirs, with the fsyncs of rolled segments, producer snapshots
and periodic checkpoints written off the broker's loop (the default) against written in place on
the loop.

A confluent-kafka producer (acks=all, linger.ms=0) sends one 10 KB record and flushes, over and
over, for ``SECONDS`` per block, to an embedded broker with ``log.dirs`` whose topic rolls a
segment every ``SEGMENT_BYTES`` (about every 100 records) and whose high-watermark checkpoint is
written every second. Each block is a fresh broker and directory; the two variants alternate
(A B, B A, ...) so that a burst of noise from the other core hits both. "in place" is the same
broker with its log manager's writer removed (``LogManager.background = None`` before the topic
exists), so every fsync happens in the loop step that asks for it. Reported per variant: the
median over the blocks of each latency percentile, and the largest gap between runs of a
callback the loop should run every millisecond.

**Cleaning.** The periodic cleaner's pass over a compacted in-memory log of ``CLEAN_RECORDS``
100-byte records over ``CLEAN_KEYS`` keys in 1 MB segments (appended untimed): planned on the loop,
cleaned on the cleaner's thread and swapped in on the loop (the default), against the whole
cleaning in the loop's step (the pass as a virtual clock runs it). Reported: the pass's wall time
(from the timer's step to the swap) and the loop's largest gap meanwhile, median over the blocks.
"""

from __future__ import annotations

import datetime
import functools
import statistics
import tempfile
import time

from benchmarks import LoopGaps, Options, Report, machine_note, render_table, revision
from kafkapy.dataplane import DataPlaneModule
from kafkapy.embedded import Broker, _find_module

TITLE = "Log maintenance off the loop: fsyncs, checkpoints and the cleaner"

SECONDS, QUICK_SECONDS = 5.0, 0.5
BLOCKS, QUICK_BLOCKS = 6, 2
SEGMENT_BYTES = 1 << 20
VALUE = b"x" * 10_000
BACKGROUND, IN_PLACE = "background writer", "in place (on the loop)"
CLEAN_RECORDS, QUICK_CLEAN_RECORDS, CLEAN_KEYS = 200_000, 20_000, 20_000
THREAD = "cleaner thread"


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
        gaps = LoopGaps(broker._loop)
        gaps.start()
        latencies: list[float] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.perf_counter()
            producer.produce("rolls", value=VALUE)
            producer.flush(30)
            latencies.append(time.perf_counter() - started)
        return latencies, gaps.stop()


def _cleaning(variant: str, records: int) -> tuple[float, float]:
    """(the cleaning's wall time, the loop's largest gap meanwhile) for one broker."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafkapy.protocol.records import build_record_batch

    with Broker({"log.cleaner.backoff.ms": 3_600_000}) as broker:  # the pass is run below, once
        assert broker.runtime is not None and broker._loop is not None
        module = _find_module(broker.runtime, DataPlaneModule)
        assert module is not None
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        config = {"segment.bytes": str(SEGMENT_BYTES), "cleanup.policy": "compact"}
        admin.create_topics([NewTopic("table", 1, 1, config=config)])["table"].result(30)
        while module.log_config("table").segment_bytes != SEGMENT_BYTES:
            time.sleep(0.01)
        for first in range(0, records, 100):
            data = build_record_batch([(b"key-%d" % ((first + i) % CLEAN_KEYS), b"v" * 100, [], 1_000)
                                       for i in range(100)])
            append = functools.partial(module.append_batch, "table", 0, data)
            broker.call_on_loop(lambda _, append=append: append())
        log = module.partitions.logs.get("table", 0)
        assert log is not None
        maintenance = module._maintenance
        maintenance._wait = variant == IN_PLACE
        gaps = LoopGaps(broker._loop)
        gaps.start()
        time.sleep(0.05)
        started = time.perf_counter()
        broker.call_on_loop(lambda _: maintenance._cleaner_pass())
        while log.cleaned_to == 0:
            time.sleep(0.001)
        took = time.perf_counter() - started
        time.sleep(0.02)
        return took, gaps.stop()


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
    records = QUICK_CLEAN_RECORDS if options.quick else CLEAN_RECORDS
    cleanings: dict[str, list[tuple[float, float]]] = {THREAD: [], IN_PLACE: []}
    for block in range(blocks):
        for variant in (THREAD, IN_PLACE) if block % 2 == 0 else (IN_PLACE, THREAD):
            cleanings[variant].append(_cleaning(variant, records))
    clean_headers = ["cleaning", "records", "pass ms", "largest loop gap ms"]
    clean_rows = [[variant, f"{records:,}",
                   f"{statistics.median(t for t, _ in cleanings[variant]) * 1000:.1f}",
                   f"{statistics.median(g for _, g in cleanings[variant]) * 1000:.1f}"]
                  for variant in (THREAD, IN_PLACE)]
    note = (f"{machine_note()}; {revision()}; {datetime.date.today().isoformat()}; {blocks} blocks of "
            f"{seconds:g} s per variant, alternating; medians over the blocks")
    text = render_table(headers, rows) + "\n\n" + render_table(clean_headers, clean_rows)
    markdown = (render_table(headers, rows, markdown=True) + "\n\n"
                + render_table(clean_headers, clean_rows, markdown=True))
    return Report(text=text + "\n" + note, markdown=markdown + "\n\n" + note)
