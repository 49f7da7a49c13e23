"""Shared helpers for the partition-log storage tests: batches with assigned offsets."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import attrs

from kafkapy.log import LogConfig, MemoryLog
from kafkapy.log.segmented import SegmentedLog, now_ms
from kafkapy.log.segments import FileLog
from kafkapy.protocol.records import RecordBatch, Records, build_record_batch


def batch_at(
    log: SegmentedLog,
    count: int = 1,
    *,
    timestamp: int = 1_000,
    value_size: int = 10,
    epoch: int = -1,
    keys: list[bytes | None] | None = None,
    values: list[bytes | None] | None = None,
) -> bytearray:
    """A batch of ``count`` records whose offsets continue ``log``, as the append path hands it over."""
    items = [
        (
            keys[i] if keys else b"k%d" % i,
            values[i] if values else bytes([65 + i % 26]) * value_size,
            [],
            timestamp + i,
        )
        for i in range(count)
    ]
    return bytearray(build_record_batch(items, base_offset=log.log_end_offset, partition_leader_epoch=epoch))


def joined(chunks: list[memoryview | bytes]) -> bytes:
    return b"".join(bytes(chunk) for chunk in chunks)


def batches_of(chunks: list[memoryview | bytes]) -> list[RecordBatch]:
    out = []
    for batch in Records(joined(chunks)).batches(strict=True):
        assert isinstance(batch, RecordBatch)
        out.append(batch)
    return out


BACKENDS = ["memory", "file"]
MakeLog = Callable[..., SegmentedLog]


def log_factory(backend: str, tmp_path: Path) -> Iterator[MakeLog]:
    """Body of each test module's ``make_log`` fixture: opens logs of ``backend``, closes them after."""
    opened: list[SegmentedLog] = []

    def make(config: LogConfig | None = None, clock: Callable[[], int] = now_ms) -> SegmentedLog:
        log: SegmentedLog
        if backend == "memory":
            log = MemoryLog(config, clock=clock)
        else:
            log = FileLog(tmp_path / f"topic-{len(opened)}", config, clock=clock)
        opened.append(log)
        return log

    yield make
    for log in opened:
        log.close()


@attrs.define
class Acked:
    """An acknowledged batch as a model log remembers it."""

    base: int
    last: int
    data: bytes


def truncated(batches: list[Acked], start: int, offset: int) -> tuple[list[Acked], int | None]:
    """The model after ``truncate_to(offset)``: the batches kept and the new log end (None if
    nothing went). The batch holding ``offset`` goes whole; one straddling the log start empties
    the log."""
    removed = [b for b in batches if b.last >= offset]
    if not removed:
        return batches, None
    return batches[: len(batches) - len(removed)], max(removed[0].base, start)


def deleted_before(batches: list[Acked], offset: int) -> list[Acked]:
    """The model's batches after ``delete_records_before(offset)``."""
    return [b for b in batches if b.last >= offset]
