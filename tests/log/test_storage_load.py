"""Opening a partition directory that a stop left mid-operation, as Kafka's LogLoader opens it:
an interrupted segment swap, and batches the leader-epoch-checkpoint never heard of."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from storage_helpers import batch_at, batches_of, joined

from kafkapy.log import LogConfig
from kafkapy.log.manager import CLEAN_SHUTDOWN_FILE, LogManager
from kafkapy.log.producer_state import ProducerStateManager
from kafkapy.log.segments import FileLog, segment_name
from kafkapy.protocol.records import RecordBatch, build_record_batch

CONFIG = LogConfig(segment_bytes=1_000)


def _three_segments(directory: Path) -> tuple[list[int], list[bytes]]:
    """A closed log of four segments; answers their bases and every batch written."""
    log = FileLog(directory, CONFIG)
    written = []
    while len(log.segments) < 4:
        data = batch_at(log, 3, value_size=60, timestamp=5_000 + log.log_end_offset)
        written.append(bytes(data))
        log.append(data)
    log.close()
    return [s.base_offset for s in log.segments], written


def everything(log: FileLog) -> bytes:
    return joined(log.read(log.log_start_offset, 1 << 40).chunks)


@pytest.mark.parametrize("old_segments", ["still there", "already renamed .deleted"])
def test_an_interrupted_compaction_swap_is_completed(tmp_path: Path, old_segments: str) -> None:
    """Kafka's cleaner stopped after renaming its cleaned segment ``.swap`` (and maybe after
    renaming the segments it replaces ``.deleted``): the ``.swap`` holds offsets no other file
    may hold any more, so it becomes the segment and the files it replaces go."""
    directory = tmp_path / "t-0"
    bases, written = _three_segments(directory)
    covered = b"".join((directory / segment_name(b, ".log")).read_bytes() for b in bases[:2])
    kept = batches_of([covered])[1::2]  # the cleaned segment: every other batch, offsets kept
    swap = b"".join(bytes(batch.raw) for batch in kept)
    (directory / segment_name(0, ".log.swap")).write_bytes(swap)
    (directory / segment_name(0, ".index.swap")).write_bytes(b"")
    (directory / segment_name(bases[1], ".snapshot")).write_bytes(b"stale")
    if old_segments == "already renamed .deleted":
        for base in bases[:2]:
            for suffix in (".log", ".index", ".timeindex"):
                path = directory / segment_name(base, suffix)
                path.rename(path.with_name(path.name + ".deleted"))
    log = FileLog(directory, CONFIG)
    assert [s.base_offset for s in log.segments] == [0, *bases[2:]]
    assert (log.log_start_offset, log.log_end_offset) == (0, batches_of([written[-1]])[0].last_offset + 1)
    rest = b"".join((directory / segment_name(b, ".log")).read_bytes() for b in bases[2:])
    assert everything(log) == swap + rest
    names = {path.name for path in directory.iterdir()}
    assert not any(name.endswith((".swap", ".deleted")) for name in names)
    assert segment_name(bases[1], ".log") not in names
    assert segment_name(bases[1], ".snapshot") not in names  # Kafka removes the files in the range
    log.close()


def test_a_swap_of_an_unfinished_split_is_dropped(tmp_path: Path) -> None:
    """KAFKA-6264: a ``.swap`` at or above a ``.cleaned`` file's offset is an unfinished split;
    it goes, as the ``.cleaned`` file does, and the original segments stay."""
    directory = tmp_path / "t-0"
    bases, written = _three_segments(directory)
    (directory / segment_name(bases[1], ".log.cleaned")).write_bytes(b"partial")
    first = (directory / segment_name(bases[1], ".log")).read_bytes()
    (directory / segment_name(bases[1], ".log.swap")).write_bytes(first[: len(written[0])])
    log = FileLog(directory, CONFIG)
    assert [s.base_offset for s in log.segments] == bases
    assert everything(log) == b"".join(written)
    assert not any(p.name.endswith((".swap", ".cleaned")) for p in directory.iterdir())
    log.close()


def test_recovery_learns_leader_epochs_from_the_batches_it_checks(tmp_path: Path) -> None:
    """A crash between a batch's write and its new epoch's checkpoint entry (or a lost
    leader-epoch-checkpoint): recovery assigns the epochs of the batches it checks, as Kafka's
    LogSegment.recover does, so OffsetForLeaderEpoch knows the epoch the log holds."""
    directory = tmp_path / "t-0"
    log = FileLog(directory, CONFIG)
    for epoch in (0, 0, 2, 2, 5):
        log.append(batch_at(log, 3, value_size=60, epoch=epoch))
    assert log.epochs.entries == [(0, 0), (2, 6), (5, 12)]
    recovery_point = log.segments[-1].base_offset
    log.close()
    (directory / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n2 6\n")  # epoch 5 never made it
    again = FileLog(directory, CONFIG, recovery_point=recovery_point)
    assert again.epochs.entries == [(0, 0), (2, 6), (5, 12)]
    assert again.end_offset_for_epoch(2).end_offset == 12
    assert (directory / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 6\n5 12\n"
    again.close()
    (directory / "leader-epoch-checkpoint").unlink()  # gone: every batch checked tells its epoch
    whole = FileLog(directory, CONFIG)
    assert whole.epochs.entries == [(0, 0), (2, 6), (5, 12)]
    whole.close()


def test_a_torn_producer_snapshot_file_is_deleted_and_the_older_one_used(tmp_path: Path) -> None:
    """The producer state of a directory whose newest snapshot was torn by a machine crash comes
    from the snapshot before it (Kafka's loadFromSnapshot), and the torn file is deleted."""
    directory = tmp_path / "t-0"
    log = FileLog(directory, CONFIG)
    state = ProducerStateManager()
    log.snapshot_source = state.snapshot
    for seq in range(0, 30, 3):
        data = build_record_batch([(b"k", b"v" * 60)] * 3, base_offset=log.log_end_offset,
                                  producer_id=7, producer_epoch=0, base_sequence=seq)
        state.check_and_update(RecordBatch(data))
        log.append(data)
    log.close()
    snapshots = sorted(directory.glob("*.snapshot"))
    assert len(snapshots) >= 2
    snapshots[-1].write_bytes(snapshots[-1].read_bytes()[:20])  # torn
    again = FileLog(directory, CONFIG, recovery_point=log.log_end_offset, clean_shutdown=True)
    replayed_from = []

    def batches_from(offset: int) -> list[RecordBatch]:
        replayed_from.append(offset)
        return [b for b in batches_of(again.read(again.log_start_offset, 1 << 40).chunks)
                if b.last_offset >= offset]

    recovered = ProducerStateManager()
    recovered.recover(again, batches_from, 0)
    assert replayed_from == [int(snapshots[-2].stem)]
    assert not snapshots[-1].exists() and snapshots[-2].exists()
    assert recovered.producers[7].last_seq == 29
    again.close()


def test_stray_producer_snapshots_are_removed_at_open(tmp_path: Path) -> None:
    """Each close snapshots the producer state at the log end; Kafka's removeStraySnapshots keeps,
    of the snapshots not at a segment's base, only the newest (and it only past the last base), so
    restarts do not pile them up."""
    directory = tmp_path / "t-0"
    for restart in range(4):
        log = FileLog(directory, CONFIG, recovery_point=1 << 40, clean_shutdown=restart > 0)
        log.snapshot_source = lambda: b""
        for _ in range(2):
            log.append(batch_at(log, 3, value_size=60))
        log.close()
    log = FileLog(directory, CONFIG, recovery_point=1 << 40, clean_shutdown=True)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 2
    kept = sorted(int(path.stem) for path in directory.glob("*.snapshot"))
    assert kept == [*bases[1:], log.log_end_offset]  # each roll's, and the last close's
    log.close()


@pytest.mark.parametrize("damage", ["garbage", "missing", "half an entry"])
def test_a_damaged_index_after_a_clean_shutdown_is_rebuilt(tmp_path: Path, damage: str) -> None:
    """Kafka rebuilds an index that fails its sanity check (or is missing) even after a clean
    shutdown; kafkapy rewrites every index at open, to what appending wrote."""
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=1_000, index_interval_bytes=200)
    log = FileLog(directory, config)
    while len(log.segments) < 3:
        log.append(batch_at(log, 3, value_size=60, timestamp=5_000 + log.log_end_offset))
    log.close()
    written = {p.name: p.read_bytes() for p in directory.glob("*index")}
    assert sum(bool(data) for data in written.values()) >= 4  # the rolled segments have entries
    for name in written:
        path = directory / name
        if damage == "garbage":
            path.write_bytes(b"\xff" * 29)
        elif damage == "missing":
            path.unlink()
        else:
            path.write_bytes(path.read_bytes()[:-3])
    again = FileLog(directory, config, recovery_point=log.log_end_offset, clean_shutdown=True)
    assert {p.name: p.read_bytes() for p in directory.glob("*index")} == written
    assert again.offset_for_timestamp(5_000 + 10) is not None
    again.close()


def test_the_clean_shutdown_marker_is_kafkas(tmp_path: Path) -> None:
    """``.kafka_cleanshutdown`` holds what Kafka's CleanShutdownFileHandler writes (version 0 and
    the broker epoch, -1 from a ZooKeeper-mode broker), so a Kafka broker reads it back."""
    logs = LogManager([tmp_path])
    logs.get_or_create("t", 0).append(build_record_batch([(b"k", b"v")]))
    logs.close()
    marker = tmp_path / CLEAN_SHUTDOWN_FILE
    assert json.loads(marker.read_text()) == {"version": 0, "brokerEpoch": -1}
    again = LogManager([tmp_path])  # read as a clean shutdown, and consumed
    assert not marker.exists() and again.logs[("t", 0)].recovery_point == 1
    again.close()


def test_epochs_and_snapshots_past_the_log_end_are_trimmed_at_open(tmp_path: Path) -> None:
    """A directory whose leader-epoch-checkpoint and producer snapshots got ahead of its log (the
    log's tail lost): the epochs starting at or past the log end go, and the file is rewritten,
    as Kafka's LogLoader truncateFromEnd does; snapshots past the log end go."""
    directory = tmp_path / "t-0"
    log = FileLog(directory, CONFIG)
    for epoch in (0, 0, 1, 1):
        log.append(batch_at(log, 3, value_size=60, epoch=epoch))
    log.close()
    (directory / "leader-epoch-checkpoint").write_text("0\n4\n0 0\n1 6\n4 12\n7 40\n")
    for offset in (12, 13, 40):
        (directory / segment_name(offset, ".snapshot")).write_bytes(b"")
    again = FileLog(directory, CONFIG, recovery_point=12, clean_shutdown=True)
    assert again.log_end_offset == 12
    assert again.epochs.entries == [(0, 0), (1, 6)]
    assert (directory / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 6\n"
    assert sorted(int(p.stem) for p in directory.glob("*.snapshot")) == [12]
    assert again.end_offset_for_epoch(4).end_offset == -1  # unknown past the latest epoch
    again.close()
