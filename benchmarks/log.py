"""Partition logs: resident memory per GB held by the memory backend, and append/read rates.

The memory backend keeps the buffers Produce hands it, so holding N bytes of
batches should cost N bytes plus bookkeeping (16 bytes a batch, a list slot
and an int per buffer). Each size is measured in a fresh interpreter
(``python -c``) that reads its own VmRSS before and after appending 1 GiB of
batches, so nothing else in the process muddies the number; the target is
issue 15's "1 GB of records costs at most 1.15 GB of RSS".
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from benchmarks import Options, Report, machine_note, measure, render_table

TITLE = "Partition logs (memory backend): RSS per GB held, append and read"

ROOT = Path(__file__).resolve().parent.parent
GIB = 1 << 30

# Run in a child interpreter: argv = total bytes, batch bytes. Prints JSON.
_HOLD = textwrap.dedent(
    """
    import json, struct, sys, time
    from kafkapy.log import MemoryLog
    from kafkapy.protocol.records import build_record_batch

    def rss():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))

    total, batch_bytes = int(sys.argv[1]), int(sys.argv[2])
    records = max(1, batch_bytes // 1024)
    value = b"v" * (batch_bytes // records - 80)
    template = build_record_batch([(b"key-%d" % i, value) for i in range(records)])
    log = MemoryLog()
    before = rss()
    started = time.perf_counter()
    held = 0
    while held < total:
        data = bytearray(template)  # one fresh buffer per Produce, as a socket read gives
        struct.pack_into(">q", data, 0, log.log_end_offset)
        log.append(data)
        held += len(data)
    seconds = time.perf_counter() - started
    after = rss()
    print(json.dumps({"held": held, "grown": after - before, "batches": log.log_end_offset // records,
                      "batch_bytes": len(template), "append_seconds": seconds}))
    """
)


def hold(total: int, batch_bytes: int) -> dict[str, float]:
    """Append ``total`` bytes of ``batch_bytes`` batches in a fresh interpreter; its RSS growth and more."""
    out = subprocess.run(
        [sys.executable, "-c", _HOLD, str(total), str(batch_bytes)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(out.stdout)
    result["rss_per_byte_held"] = result["grown"] / result["held"]
    return result


def run(options: Options) -> Report:
    total = (GIB // 16) if options.quick else GIB
    rows = []
    for batch_bytes in (1024, 16 * 1024, 1024 * 1024):
        r = hold(total, batch_bytes)
        rows.append(
            [
                f"{int(r['batch_bytes']):,}",
                f"{r['held'] / GIB:.2f}",
                f"{r['rss_per_byte_held']:.3f}",
                f"{r['held'] / r['append_seconds'] / 1e6:,.0f}",
                f"{r['batches'] / r['append_seconds']:,.0f}",
            ]
        )
    header = ["batch bytes", "GiB held", "RSS / bytes held", "append MB/s", "appends/s"]
    timings = _read_timings(options)
    read_header = ["read (max_bytes 1 MiB)", "µs/call"]
    text = render_table(header, rows) + "\n\n" + render_table(read_header, timings)
    markdown = (
        render_table(header, rows, markdown=True)
        + "\n\n"
        + render_table(read_header, timings, markdown=True)
        + "\n\n"
        + machine_note()
    )
    return Report(text=text, markdown=markdown)


def _read_timings(options: Options) -> list[list[str]]:
    from kafkapy.log import MemoryLog
    from kafkapy.protocol.records import build_record_batch

    log = MemoryLog()
    template = build_record_batch([(b"k", b"v" * 1000)] * 16)
    for _ in range(2000):
        data = bytearray(template)
        data[0:8] = log.log_end_offset.to_bytes(8, "big")
        log.append(data)
    end = log.log_end_offset
    positions = iter(range(10**9))
    timings = measure(
        {
            "memory read at a random batch": lambda: log.read((next(positions) * 7919) % end, 1 << 20),
        },
        options,
    )
    return [[name, f"{t.median * 1e6:.1f}"] for name, t in timings.items()]
