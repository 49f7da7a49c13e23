"""AlterReplicaLogDirs: how long a 100 MB partition takes to move between log dirs, and how long
the swap holds the broker's loop (every append waits that long), with a producer throughout.

The log is seeded with ``SEED_MB`` of 100 KB batches, untimed: in one segment (Kafka's default
segment.bytes is 1 GB), then again in segments of ``SMALL_SEGMENT`` bytes (about a hundred).
Then a producer appends a 1 KB batch (acks=1) every ``PRODUCE_EVERY`` seconds over the wire, a
probe on the loop (a callback every millisecond) notes the largest gap between two of its runs,
and the partition is moved to the other dir. Reported: the move's wall time (request to swap),
the swap's own time (``LogDirs.last_swap_seconds``: the last tail and the changed small files
copied and fsynced, two renames, every segment's files reopened), the largest loop gap during
the move next to the one over the same time without a move, and the slowest Produce answer
during the move.
"""

from __future__ import annotations

import datetime
import tempfile
import threading
import time
from pathlib import Path

from benchmarks import LoopGaps, Options, Report, machine_note, render_table, revision
from kafkapy.client import SimpleClient
from kafkapy.dataplane import DataPlaneModule
from kafkapy.embedded import Broker, _find_module
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch

TITLE = "Moving a partition between log dirs"

SEED_MB, QUICK_SEED_MB = 100, 2
SMALL_SEGMENT = 1_000_000  # 100 segments of 100 MB (quick: 2 MB in segments of 250 KB)
PRODUCE_EVERY = 0.005


def _produce_body(value: bytes) -> dict[str, object]:
    return {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
            "topic_data": [{"name": "moving", "partition_data": [
                {"index": 0, "records": build_record_batch([{"value": value}])}]}]}


def _measure(seed_mb: int, segment_bytes: int | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        with Broker({"broker.id": 1, "log.dirs": f"{a},{b}"}) as broker:
            assert broker.runtime is not None and broker.store is not None
            config = {"segment.bytes": str(segment_bytes)} if segment_bytes else None
            broker.store.create_topic("moving", {0: (1,)}, config=config)
            module = _find_module(broker.runtime, DataPlaneModule)
            assert module is not None
            while "moving" not in broker.runtime.cluster.topics or (
                    segment_bytes and module.log_config("moving").segment_bytes != segment_bytes):
                time.sleep(0.01)
            big = build_record_batch([{"value": b"v" * 1000} for _ in range(100)])
            for _ in range(seed_mb * 1_000_000 // len(big)):
                code = broker.call_on_loop(lambda _: module.append_batch("moving", 0, big))
                assert code == ErrorCode.NONE, code
            logs = module.partitions.logs
            source = logs.dir_of("moving", 0)
            target = b if source == a else a
            loop = broker._loop
            assert loop is not None
            stop = threading.Event()
            slowest = [0.0]

            def produce() -> None:
                with SimpleClient(broker.bootstrap_servers) as client:
                    while not stop.is_set():
                        started = time.perf_counter()
                        client.request(ApiKey.PRODUCE, 9, _produce_body(b"p" * 1000))
                        slowest[0] = max(slowest[0], time.perf_counter() - started)
                        time.sleep(PRODUCE_EVERY)

            producer = threading.Thread(target=produce)
            producer.start()
            try:
                time.sleep(0.5)
                baseline = LoopGaps(loop)
                baseline.start()
                time.sleep(2.0)
                quiet_gap = baseline.stop()
                slowest[0] = 0.0
                probe = LoopGaps(loop)
                probe.start()
                started = time.perf_counter()
                with SimpleClient(broker.bootstrap_servers) as client:
                    answer = client.request(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [
                        {"path": str(target), "topics": [{"name": "moving", "partitions": [0]}]}]})
                assert answer["results"][0]["partitions"][0]["error_code"] == 0, answer
                handler = module.log_dirs_handler
                while handler.last_swap_seconds is None:  # set once the swap's loop step is done
                    time.sleep(0.005)
                moved = time.perf_counter() - started
                time.sleep(0.1)  # the probe's next tick measures the gap the swap made
                gap = probe.stop()
            finally:
                stop.set()
                producer.join()
            swap = module.log_dirs_handler.last_swap_seconds
            assert swap is not None
            log = logs.get("moving", 0)
            assert log is not None
            return {"move": moved, "swap": swap, "gap": gap, "quiet_gap": quiet_gap,
                    "produce": slowest[0], "segments": len(log.segments)}


def run(options: Options) -> Report:
    seed_mb = QUICK_SEED_MB if options.quick else SEED_MB
    small = SMALL_SEGMENT // 4 if options.quick else SMALL_SEGMENT
    headers = ["log", "move s", "swap ms", "largest loop gap ms", "without a move ms", "slowest Produce ms"]
    rows = []
    for segment_bytes in (None, small):
        found = _measure(seed_mb, segment_bytes)
        segments = int(found["segments"])
        rows.append([f"{seed_mb} MB, {segments} segment{'s' if segments != 1 else ''}",
                     f"{found['move']:.3f}", f"{found['swap'] * 1000:.3f}", f"{found['gap'] * 1000:.3f}",
                     f"{found['quiet_gap'] * 1000:.3f}", f"{found['produce'] * 1000:.3f}"])
    note = f"{machine_note()}; {revision()}; {datetime.date.today().isoformat()}"
    return Report(text=render_table(headers, rows) + "\n" + note,
                  markdown=render_table(headers, rows, markdown=True) + "\n\n" + note)
