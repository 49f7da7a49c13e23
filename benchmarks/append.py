"""Append validation: ``validate_records`` + ``assign_offsets`` per MB, against copying the bytes.

Copying the batch (``bytearray(raw)``) is the floor any broker pays to own a
request's bytes; the other column is that same copy plus every check Kafka makes
on append and the in-place offset stamp (kafkapy.log.append).  Kafka decodes
every record on this path (structure, keys, timestamps and the true max timestamp
come from there), so the cost scales with records, not bytes: rows give both
per MB of batch and per record.  Validation walks the records with
``RecordBatch.scan`` (every structural check, nothing built); the last column is
what decoding them with ``record_list`` would cost instead, for scale.  Batches
are what a producer sends: 100-byte values with 10-byte keys, 16 KiB (the
producer's default ``batch.size``) and about 1 MB (just under
``max.message.bytes``), uncompressed and with lz4/zstd.
"""

from __future__ import annotations

from collections.abc import Callable

from benchmarks import Options, Report, machine_note, measure, render_table, revision
from kafkapy.log.append import assign_offsets, validate_records
from kafkapy.log.topic_config import LogConfig
from kafkapy.protocol.records import LOG_APPEND_TIME, RecordBatch, build_record_batch

TITLE = "Append validation"

NOW = 1_767_225_600_000
_VALUE = bytes(range(100))


def _batch(records: int, codec: str) -> bytes:
    return build_record_batch([(b"key-%06d" % i, _VALUE, [], NOW + i) for i in range(records)],
                              compression=codec)


def _validate_and_assign(raw: bytes, config: LogConfig) -> Callable[[], object]:
    log_append_time = NOW if config.message_timestamp_type == LOG_APPEND_TIME else None

    def run() -> object:
        data = bytearray(raw)
        plan = validate_records(data, config, NOW)
        return assign_offsets(data, plan, base_offset=1_000_000, leader_epoch=3,
                              log_append_time_ms=log_append_time)

    return run


def run(options: Options) -> Report:
    cases = [
        ("16 KiB, none", 135, "none", LogConfig()),
        ("16 KiB, lz4", 135, "lz4", LogConfig()),
        ("~1 MB, none", 8000, "none", LogConfig()),
        ("~1 MB, none, LogAppendTime", 8000, "none", LogConfig(message_timestamp_type=LOG_APPEND_TIME)),
        ("~1 MB, none, compacted (key check)", 8000, "none", LogConfig(cleanup_policy="compact")),
        ("~1 MB of records, lz4", 8000, "lz4", LogConfig()),
        ("~1 MB of records, zstd", 8000, "zstd", LogConfig()),
    ]
    headers = ["batch", "bytes", "records", "copy ms/MB", "validate+assign ms/MB", "µs/record", "x copy",
               "record_list µs/record"]
    rows = []
    for label, count, codec, config in cases:
        raw = _batch(count, codec)
        batch = RecordBatch(raw)
        timings = measure({"copy": lambda raw=raw: bytearray(raw),
                           "validate": _validate_and_assign(raw, config),
                           "decode": lambda batch=batch: batch.record_list(check_crc=False)}, options)
        mb = len(raw) / 1e6
        copy, full = timings["copy"].cpu, timings["validate"].cpu
        rows.append([label, f"{len(raw):,}", f"{count:,}", f"{copy * 1e3 / mb:.3f}", f"{full * 1e3 / mb:.1f}",
                     f"{full * 1e6 / count:.2f}", f"{full / copy:,.0f}",
                     f"{timings['decode'].cpu * 1e6 / count:.2f}"])
    note = (f"Process CPU time per call, median of {options.repeats} blocks; {machine_note()}; "
            f"kafkapy {revision()}.")
    return Report(text=render_table(headers, rows) + "\n" + note,
                  markdown=render_table(headers, rows, markdown=True) + "\n\n" + note)
