"""The segment-file backend: Kafka's layout on disk, reopening, and crash recovery with real torn files."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import batch_at, batches_of, joined

from kafkapy.log import LogConfig
from kafkapy.log.checkpoint import read_checkpoint
from kafkapy.log.segments import FileLog, segment_name

REPO = Path(__file__).resolve().parents[2]


def fill(log: FileLog, batches: int, records: int = 3, value_size: int = 100) -> list[bytes]:
    written = []
    for i in range(batches):
        data = batch_at(log, records, value_size=value_size, timestamp=10_000 + 10 * i, epoch=i // 4)
        written.append(bytes(data))
        log.append(data)
    return written


def everything(log: FileLog) -> bytes:
    return joined(log.read(log.log_start_offset, 1 << 40).chunks)


def test_layout_is_kafkas(tmp_path: Path) -> None:
    directory = tmp_path / "orders-3"
    log = FileLog(directory, LogConfig(segment_bytes=3_000, index_interval_bytes=500))
    written = fill(log, 20)
    log.close()
    names = sorted(path.name for path in directory.iterdir())
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 2
    expected = {segment_name(b, suffix) for b in bases for suffix in (".log", ".index", ".timeindex")}
    assert set(names) == expected | {"leader-epoch-checkpoint"}
    assert segment_name(42, ".log") == "00000000000000000042.log"
    # the .log files are the batches exactly as appended, in order
    on_disk = b"".join((directory / segment_name(b, ".log")).read_bytes() for b in bases)
    assert on_disk == b"".join(written)
    # .index: relative offset int32 and position int32; every entry points at a batch holding that offset
    for segment in log.segments:
        raw = (directory / segment_name(segment.base_offset, ".index")).read_bytes()
        entries = list(struct.iter_unpack(">ii", raw))
        assert entries and len(raw) == 8 * len(entries)
        data = (directory / segment_name(segment.base_offset, ".log")).read_bytes()
        for relative, position in entries:
            batch = batches_of([data[position:]])[0]
            assert batch.base_offset <= segment.base_offset + relative <= batch.last_offset
            assert position > 500  # index.interval.bytes: no entry for the first bytes
        times = list(
            struct.iter_unpack(
                ">qi", (directory / segment_name(segment.base_offset, ".timeindex")).read_bytes()
            )
        )
        # rolled or closed, a segment's time index ends with its max timestamp, as Kafka's does
        assert times == sorted(times) and times[-1] == (
            segment.max_timestamp,
            segment.offset_of_max_timestamp - segment.base_offset,
        )
    assert read_checkpoint(directory / "leader-epoch-checkpoint", 2) == [
        ["0", "0"],
        ["1", "12"],
        ["2", "24"],
        ["3", "36"],
        ["4", "48"],
    ]


def test_reopen_after_clean_close_keeps_everything(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=3_000, index_interval_bytes=500)
    log = FileLog(tmp_path / "t-0", config)
    written = fill(log, 20)
    log.delete_records_before(7)
    log.close()
    indexes = {p.name: p.read_bytes() for p in (tmp_path / "t-0").glob("*index")}
    again = FileLog(
        tmp_path / "t-0", config, recovery_point=log.log_end_offset, log_start_offset=7, clean_shutdown=True
    )
    assert (again.log_start_offset, again.log_end_offset) == (7, 60)
    assert everything(again) == b"".join(written)[len(written[0]) * 2 :]
    assert again.epochs.entries == log.epochs.entries
    # indexes rebuilt at open equal those written while appending and closing (each time index,
    # the active one's too, ends with its segment's max timestamp)
    rebuilt = {p.name: p.read_bytes() for p in (tmp_path / "t-0").glob("*index")}
    assert rebuilt == {name: data for name, data in indexes.items() if name in rebuilt}
    again.append(batch_at(again, 2))
    assert again.log_end_offset == 62
    again.close()


def _torn(tmp_path: Path, damage: str) -> tuple[list[bytes], Path]:
    log = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=2_000))
    written = fill(log, 12)
    log.close()
    last = tmp_path / "t-0" / segment_name(log.segments[-1].base_offset, ".log")
    data = bytearray(last.read_bytes())
    tail = len(written[-1])
    if damage == "truncated mid-batch":
        del data[-tail // 2 :]
    elif damage == "flipped CRC-covered byte":
        data[-5] ^= 0xFF
    elif damage == "zeroed tail":
        data[-tail:] = bytes(tail)
    elif damage == "zeros appended":
        data += bytes(4096)
    last.write_bytes(data)
    return written, tmp_path / "t-0"


@pytest.mark.parametrize("damage", ["truncated mid-batch", "flipped CRC-covered byte", "zeroed tail"])
def test_recovery_cuts_a_torn_tail_to_the_last_whole_valid_batch(tmp_path: Path, damage: str) -> None:
    written, directory = _torn(tmp_path, damage)
    log = FileLog(directory, LogConfig(segment_bytes=2_000))
    assert everything(log) == b"".join(written[:-1])
    assert log.log_end_offset == 33 and log.recovered_bytes > 0
    assert log.recovery_point == 33
    log.append(batch_at(log, 3))  # the log continues where the valid batches end
    assert log.log_end_offset == 36
    log.close()


def test_recovery_drops_zeros_after_the_last_batch(tmp_path: Path) -> None:
    written, directory = _torn(tmp_path, "zeros appended")
    log = FileLog(directory, LogConfig(segment_bytes=2_000))
    assert everything(log) == b"".join(written) and log.recovered_bytes == 4096
    log.close()


def test_clean_shutdown_skips_crc_checks_below_the_recovery_point(tmp_path: Path) -> None:
    _, directory = _torn(tmp_path, "flipped CRC-covered byte")
    trusted = FileLog(directory, LogConfig(segment_bytes=2_000), recovery_point=36, clean_shutdown=True)
    assert trusted.log_end_offset == 36 and trusted.recovered_bytes == 0
    trusted.close()


def test_a_torn_middle_segment_takes_the_later_segments_with_it(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=2_000))
    written = fill(log, 12)
    log.close()
    bases = [s.base_offset for s in log.segments]
    middle = tmp_path / "t-0" / segment_name(bases[1], ".log")
    middle.write_bytes(middle.read_bytes()[:-7])
    again = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=2_000))
    assert [s.base_offset for s in again.segments] == bases[:2]
    assert everything(again) == b"".join(written)[: sum(s.size for s in log.segments[:2]) - len(written[0])]
    assert not (tmp_path / "t-0" / segment_name(bases[2], ".log")).exists()
    again.close()


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from kafkapy.log import LogConfig
    from kafkapy.log.segments import FileLog
    from kafkapy.protocol.records import build_record_batch

    log = FileLog(Path(sys.argv[1]), LogConfig(segment_bytes=16 * 1024, flush_messages=int(sys.argv[2])))
    i = 0
    while True:
        data = bytearray(build_record_batch(
            [(b"key-%d" % i, b"v" * (i % 700), [], 1000 + i)], base_offset=log.log_end_offset
        ))
        info = log.append(data)
        print(info.last_offset, log.recovery_point, flush=True)
        i += 1
    """
)


@pytest.mark.parametrize(
    ("flush_messages", "appends"),
    [
        (1, 300),  # an fsync per append: slow, so fewer
        ((1 << 63) - 1, 3000),  # Kafka's default: never fsync, the page cache holds what was written
    ],
)
def test_kill_9_mid_stream_loses_no_appended_batch(tmp_path: Path, flush_messages: int, appends: int) -> None:
    """A writer appending as fast as it can is killed by SIGKILL; every append that returned is there."""
    directory = tmp_path / "t-0"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(directory), str(flush_messages)],
        stdout=subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert writer.stdout is not None
    acknowledged = -1
    while acknowledged < appends:  # however slow the disk's fsyncs; a writer that dies ends the wait
        line = writer.stdout.readline()
        if not line:
            break
        acknowledged = int(line.split()[0])
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    with writer.stdout:
        for line in writer.stdout.read().splitlines():  # appends that returned before the kill
            acknowledged = int(line.split()[0])
    assert acknowledged >= appends - 1, "the writer did not get going"
    log = FileLog(directory, LogConfig(segment_bytes=16 * 1024))
    assert len(log.segments) > 3
    assert log.log_end_offset >= acknowledged + 1
    records = [r for batch in batches_of(log.read(0, 1 << 40).chunks) for r in batch]
    assert [r.offset for r in records] == list(range(log.log_end_offset))
    assert all(r.key == b"key-%d" % r.offset and r.value == b"v" * (r.offset % 700) for r in records)
    log.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    where=st.floats(0, 1, exclude_max=True),
    garbage=st.binary(min_size=1, max_size=80),
    overwrite=st.booleans(),
)
def test_any_damage_reopens_to_valid_batches_and_keeps_those_before_it(
    tmp_path_factory: pytest.TempPathFactory, where: float, garbage: bytes, overwrite: bool
) -> None:
    """Random bytes written over or into a segment: opening never fails, and keeps every batch before them."""
    directory = tmp_path_factory.mktemp("damaged") / "t-0"
    log = FileLog(directory, LogConfig(segment_bytes=1 << 20))
    written = fill(log, 6, value_size=20)
    log.close()
    path = directory / segment_name(0, ".log")
    data = bytearray(path.read_bytes())
    at = int(where * len(data))
    data[at : at + (len(garbage) if overwrite else 0)] = garbage
    path.write_bytes(bytes(data))
    again = FileLog(directory, LogConfig(segment_bytes=1 << 20))
    held = batches_of(again.read(0, 1 << 30).chunks)
    assert all(batch.crc_valid for batch in held)
    intact, size = 0, 0
    while intact < len(written) and size + len(written[intact]) <= at:
        size += len(written[intact])
        intact += 1
    assert [bytes(b.raw) for b in held[:intact]] == written[:intact]
    assert again.log_end_offset == (held[-1].last_offset + 1 if held else 0)
    again.close()


def test_recovery_cutting_below_the_log_start_restarts_the_log_there(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "t-0")
    fill(log, 3)  # offsets 0..8 in one segment
    log.delete_records_before(7)
    log.close()
    path = tmp_path / "t-0" / segment_name(0, ".log")
    path.write_bytes(path.read_bytes()[:-10])  # the batch holding offsets 6..8 is torn
    again = FileLog(tmp_path / "t-0", log_start_offset=7)
    assert (again.log_start_offset, again.log_end_offset, again.size_in_bytes) == (7, 7, 0)
    again.append(batch_at(again, 1))
    assert again.log_end_offset == 8
    again.close()
