"""Records as JSON: the one-pass writer against the two-pass reference, per record.

``kafkapy.protocol.records_json.records_json`` writes magic-2 batches
straight from their bytes; ``_records_json_reference`` (kept for the tests)
decodes them to Record objects and formats those, as kafkapy did before.
Both run here on the same ``Records`` values, interleaved (see
:func:`benchmarks.measure`), after a check that they give identical text.
The ratio is what the full-decode capture path gains on its records. A third
column times ``records_json_at``, which the JSON decoders call: the same
writer on the field where it lies in the body, with no copy and no Records.

Records fields are memoryviews into the body, as the codec hands them out.
The batches:

* the capture benchmark's: 10 records, keys ``key-N``, 100 random bytes,
  one header ``trace: abc`` (the recipe of ``benchmarks/capture.py``);
* a consumer's Fetch: 100 records, null keys, no headers, 300-byte JSON-ish
  values, timestamps a few ms apart;
* the same, lz4-compressed (both sides inflate the same way);
* 100 records with three tracing headers of distinct values each.
"""

from __future__ import annotations

import datetime
import json
import random
from collections.abc import Callable

from benchmarks import Options, Report, machine_note, measure, render_table, revision
from kafkapy.protocol import Records, build_record_batch
from kafkapy.protocol.records_json import _records_json_reference, records_json, records_json_at

TITLE = "Records as JSON"

BASE_TIMESTAMP = 1_767_225_600_000  # 2026-01-01T00:00:00Z, as in the other benchmarks


def _cases() -> list[tuple[str, int, Records, bytes]]:
    """(label, record count, records field, the body holding it at offset 40) of each batch."""
    rnd = random.Random(7)
    capture_mix = build_record_batch(
        [(f"key-{i}".encode(), rnd.randbytes(100), [("trace", b"abc")]) for i in range(10)],
        base_offset=0, base_timestamp=BASE_TIMESTAMP,
    )
    events = [
        {
            "key": None,
            "value": json.dumps({"user": rnd.randrange(10**6), "page": f"/p/{rnd.randrange(999)}",
                                 "pad": "x" * rnd.randrange(180, 260)}).encode(),
            "timestamp": BASE_TIMESTAMP + 3 * i + rnd.randrange(3),
        }
        for i in range(100)
    ]
    fetch = build_record_batch(events, base_offset=1_000_000)
    fetch_lz4 = build_record_batch(events, base_offset=1_000_000, compression="lz4")
    traced = build_record_batch(
        [
            (f"order-{i}".encode(), rnd.randbytes(150),
             [("traceparent", f"00-{rnd.getrandbits(128):032x}-{rnd.getrandbits(64):016x}-01".encode()),
              ("content-type", b"application/json"), ("retry", None)])
            for i in range(100)
        ],
        base_offset=500, base_timestamp=BASE_TIMESTAMP,
    )
    out = []
    for label, count, batch in (
        ("capture mix batch (key, 100 B value, 1 header)", 10, capture_mix),
        ("Fetch batch (null key, ~260 B value, no headers)", 100, fetch),
        ("the same, lz4", 100, fetch_lz4),
        ("traced batch (key, 150 B value, 3 headers)", 100, traced),
    ):
        # As the codec hands them out: a view into a larger body.
        body = b"\x00" * 40 + batch + b"\x00" * 8
        out.append((label, count, Records(memoryview(body)[40 : 40 + len(batch)]), body))
    return out


HEADERS = ["batch", "records", "bytes", "old us/record", "new us/record", "speed-up", "(CPU)",
           "old CPU us/record", "new CPU us/record", "in place CPU us/record"]


def run(options: Options) -> Report:
    rows = []
    for label, count, records, body in _cases():
        old = _records_json_reference(records)
        stop = 40 + len(records)
        if records_json(records) != old or records_json_at(body, 40, stop) != old or old.startswith(
            '{"undecodable'
        ):
            raise AssertionError(f"{label}: the writers disagree, or the batch does not decode")
        fns: dict[str, Callable[[], object]] = {
            "old": lambda r=records: _records_json_reference(r),
            "new": lambda r=records: records_json(r),
            "at": lambda b=body, e=stop: records_json_at(b, 40, e),
        }
        t = measure(fns, options)
        o, n = t["old"], t["new"]
        rows.append([
            label, str(count), f"{len(records):,}",
            f"{o.median * 1e6 / count:.2f}", f"{n.median * 1e6 / count:.2f}",
            f"{o.median / n.median:.2f}x", f"{o.cpu / n.cpu:.2f}x",
            f"{o.cpu * 1e6 / count:.2f}", f"{n.cpu * 1e6 / count:.2f}", f"{t['at'].cpu * 1e6 / count:.2f}",
        ])
    repeats, block = (1, 0.01) if options.quick else (options.repeats, options.block_seconds)
    method = (f"{repeats} interleaved timed blocks per writer, each ~{block:g} s; us/record from the "
              "median wall-clock block and the median CPU-time block (CPU leaves out time spent "
              "descheduled, the steadier figure on a shared machine). speed-up = old time / new time. "
              "old: decode to Record objects, then format (the reference the tests hold the new one "
              "to); new: `records_json`, one pass over the bytes; in place: `records_json_at` on the body "
              "that holds the field, as the JSON decoders call it.")
    setting = f"{machine_note()}; kafkapy {revision()}"
    text = "\n\n".join([setting, method.replace("`", ""), render_table(HEADERS, rows)])
    markdown = "\n\n".join([
        f"Measured {datetime.date.today().isoformat()} with `python -m benchmarks records_json "
        f"--write-docs`: {setting}. Before timing, both writers must give identical text.",
        method,
        render_table(HEADERS, rows, markdown=True),
    ])
    return Report(text, markdown)
