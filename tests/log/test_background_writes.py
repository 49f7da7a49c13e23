"""The log dirs' background writer (kafkapy.log.background): a rolled segment's flush, the producer
snapshot's fsync and the periodic checkpoints happen off the loop, and nothing claims more than
is durable meanwhile.

The writer's thread is held with a gate (a task waiting on an Event) so that what the loop sees
while a flush is pending is observable, then released."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import batch_at

from kafkapy.log import LogConfig, LogManager
from kafkapy.log.checkpoint import read_offsets
from kafkapy.log.manager import RECOVERY_POINT_CHECKPOINT
from kafkapy.log.segmented import SegmentedLog

SMALL_SEGMENTS = LogConfig(segment_bytes=300)


class Gate:
    """Holds a LogManager's background writer until released."""

    def __init__(self, logs: LogManager) -> None:
        assert logs.background is not None
        self.open = threading.Event()
        logs.background.submit("the test's gate", lambda: self.open.wait(30))

    def release(self) -> None:
        self.open.set()


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager([tmp_path], broker_id=1, default_config=SMALL_SEGMENTS)
    yield manager
    manager.close()


def roll_once(log: SegmentedLog) -> None:
    log.append(batch_at(log, 2, value_size=100))
    log.append(batch_at(log, 2, value_size=100))  # past segment.bytes: the first segment rolls
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_a_rolled_segment_counts_as_recovered_only_once_its_flush_is_done(logs: LogManager) -> None:
    log = logs.get_or_create("t", 0)
    gate = Gate(logs)
    roll_once(log)
    assert log.recovery_point == 0  # the flush waits behind the gate: nothing more is durable yet
    gate.release()
    assert logs.background is not None
    logs.background.drain()
    assert log.recovery_point == 2


def test_a_checkpoint_not_waited_for_is_written_after_what_was_pending(logs: LogManager,
                                                                       tmp_path: Path) -> None:
    log = logs.get_or_create("t", 0)
    logs.checkpoint_recovery_points()
    gate = Gate(logs)
    roll_once(log)
    logs.checkpoint_recovery_points(wait=False)  # its offsets are read now: the flush is pending
    assert read_offsets(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 0}
    gate.release()
    assert logs.background is not None
    logs.background.drain()
    assert read_offsets(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 0}  # what it read
    logs.checkpoint_recovery_points()  # waited for: after the pending flush, so it names it
    assert read_offsets(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 2}


def test_a_waited_checkpoint_waits_for_the_pending_flushes_first(logs: LogManager, tmp_path: Path) -> None:
    log = logs.get_or_create("t", 0)
    gate = Gate(logs)
    roll_once(log)
    threading.Timer(0.2, gate.release).start()
    logs.checkpoint_recovery_points()
    assert read_offsets(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 2}


def test_a_flush_pending_across_a_truncation_does_not_move_the_recovery_point(
        logs: LogManager) -> None:
    """The flush was of offsets 0-1 as they were; after the truncation those offsets are new,
    unflushed batches, so the late flush must not move the recovery point over them."""
    log = logs.get_or_create("t", 0)
    gate = Gate(logs)
    roll_once(log)
    log.truncate_to(1)
    log.append(batch_at(log, 3))
    gate.release()
    assert logs.background is not None
    logs.background.drain()
    assert log.log_end_offset == 3 and log.recovery_point == 0


def test_the_snapshot_written_at_a_roll_is_there_before_its_fsync(logs: LogManager, tmp_path: Path) -> None:
    log = logs.get_or_create("t", 0)
    log.snapshot_source = lambda: b"not a real snapshot"
    gate = Gate(logs)
    roll_once(log)
    assert log.latest_snapshot() == (2, b"not a real snapshot")
    gate.release()


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.one_of(st.tuples(st.just("append"), st.integers(1, 4), st.integers(10, 120)),
                                st.tuples(st.just("truncate"), st.integers(0, 30), st.just(0)),
                                st.tuples(st.just("checkpoint"), st.just(0), st.just(0))),
                      max_size=25))
def test_the_background_writer_leaves_the_files_the_plain_path_leaves(
        tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int, int]]) -> None:
    """The contract of the fast path: the same steps, once writing in the background and once in
    place (no writer), leave byte-identical directories after a clean close."""
    trees = []
    for in_background in (True, False):
        root = tmp_path_factory.mktemp("background" if in_background else "plain")
        logs = LogManager([root], broker_id=1, default_config=SMALL_SEGMENTS, clock=lambda: 1_000)
        log = logs.get_or_create("t", 0)
        if not in_background:
            log.background = None
        for step, count, size in steps:
            if step == "append":
                log.append(batch_at(log, count, value_size=size), now_ms=1_000)
            elif step == "truncate":
                log.truncate_to(min(count, log.log_end_offset))
            else:
                logs.checkpoint()
        logs.close()
        trees.append({str(path.relative_to(root)): path.read_bytes()
                      for path in sorted(root.rglob("*")) if path.is_file()})
    assert trees[0] == trees[1]


def test_a_new_log_opens_without_writing_and_its_empty_epoch_file_reads_back(tmp_path: Path) -> None:
    """A new partition's log has nothing to recover or flush: it makes Kafka's empty
    leader-epoch-checkpoint (Kafka's CheckpointFile creates it so) and reads it back as no epochs."""
    from kafkapy.log.epochs import LEADER_EPOCH_CHECKPOINT
    from kafkapy.log.segments import FileLog

    log = FileLog(tmp_path / "t-0")
    epochs = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    assert epochs.exists() and epochs.stat().st_size == 0
    assert log.recovery_point == 0
    log.close()
    reopened = FileLog(tmp_path / "t-0")
    assert reopened.epochs.entries == [] and reopened.log_end_offset == 0
    reopened.close()


def test_removed_segments_are_renamed_deleted_and_the_writer_unlinks_them(logs: LogManager,
                                                                          tmp_path: Path) -> None:
    """As Kafka's retention and DeleteRecords: the segment files go ``.deleted`` at once and are
    unlinked in the background; a log opened over leftovers (a stop before the unlink) removes them."""
    from kafkapy.log.segments import FileLog

    log = logs.get_or_create("t", 0)
    roll_once(log)
    gate = Gate(logs)
    assert log.delete_records_before(2) == 2  # the first segment is below the new log start
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    assert "00000000000000000000.log.deleted" in names and "00000000000000000000.log" not in names
    assert log.log_start_offset == 2
    leftovers = FileLog(tmp_path / "t-0-copy")  # what a restart finds: the same files, unlinked at open
    for path in (tmp_path / "t-0").iterdir():
        (tmp_path / "t-0-copy" / path.name).write_bytes(path.read_bytes())
    leftovers.close()
    reopened = FileLog(tmp_path / "t-0-copy")
    assert not any(p.name.endswith(".deleted") for p in (tmp_path / "t-0-copy").iterdir())
    reopened.close()
    gate.release()
    assert logs.background is not None
    logs.background.drain()
    assert not any(p.name.endswith(".deleted") for p in (tmp_path / "t-0").iterdir())


def test_a_deleted_partition_dir_is_renamed_delete_and_removed_in_the_background(logs: LogManager,
                                                                               tmp_path: Path) -> None:
    log = logs.get_or_create("t", 0)
    roll_once(log)
    gate = Gate(logs)
    assert logs.delete_topic("t") == [0]
    assert not (tmp_path / "t-0").exists()
    [doomed] = [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert doomed.name.startswith("t-0.") and (doomed / "00000000000000000000.log").exists()
    again = logs.get_or_create("t", 0)  # the topic made again meanwhile: a new, empty log
    assert again.log_end_offset == 0
    assert logs.remove_deleted() == []  # file.delete.delay.ms (60 s) has not passed
    assert logs.remove_deleted(logs.clock() + logs.delete_delay_ms) == [doomed]
    assert doomed.exists()  # removed by the background writer, held here
    gate.release()
    assert logs.background is not None
    logs.background.drain()
    assert not doomed.exists() and (tmp_path / "t-0").is_dir()


def test_a_delete_dir_left_by_a_stop_is_queued_when_the_log_dir_opens(tmp_path: Path) -> None:
    """As Kafka's loadLogs queues it: removed file.delete.delay.ms after the open."""
    logs = LogManager([tmp_path], broker_id=1, default_config=SMALL_SEGMENTS)
    roll_once(logs.get_or_create("t", 0))
    gate = Gate(logs)
    logs.delete_topic("t")  # and the broker stops within the delay
    [doomed] = [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    reopened = LogManager([tmp_path], broker_id=1)
    assert reopened.get("t", 0) is None and [path for path, _ in reopened.to_delete] == [doomed]
    assert reopened.remove_deleted(reopened.clock() + reopened.delete_delay_ms) == [doomed]
    assert reopened.background is not None
    reopened.background.drain()
    assert not doomed.exists()
    reopened.close()
    gate.release()
    logs.close()


def test_a_truncated_epoch_cache_is_written_later_and_never_over_a_newer_epoch(logs: LogManager,
                                                                             tmp_path: Path) -> None:
    """Kafka's truncateFrom*AsyncFlush: a truncation of the leader-epoch cache is written by the
    background writer; a new epoch is written at once, and the older truncation still pending
    does not replace it on disk."""
    from kafkapy.log.checkpoint import read_checkpoint
    from kafkapy.log.epochs import LEADER_EPOCH_CHECKPOINT

    log = logs.get_or_create("t", 0)
    for epoch in (1, 2):
        log.append(batch_at(log, 2, epoch=epoch))
    epochs = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    assert read_checkpoint(epochs, 2) == [["1", "0"], ["2", "2"]]
    gate = Gate(logs)
    log.delete_records_before(3)  # the cache now starts at 3: the file waits for the writer
    assert read_checkpoint(epochs, 2) == [["1", "0"], ["2", "2"]]
    log.append(batch_at(log, 1, epoch=5))  # a new epoch: on disk before append returns
    assert read_checkpoint(epochs, 2) == [["2", "3"], ["5", "4"]]
    gate.release()
    assert logs.background is not None
    logs.background.drain()
    assert read_checkpoint(epochs, 2) == [["2", "3"], ["5", "4"]]


def test_a_failed_fsync_still_closes_every_duplicate(tmp_path: Path) -> None:
    """A flush's duplicates are all closed even when one fsync fails (a disk error must not leak
    descriptors); the failure is still raised to the writer, which logs it."""
    import os

    from kafkapy.log.background import fsync_and_close

    path = tmp_path / "f"
    path.write_bytes(b"x")
    fd = os.open(path, os.O_RDONLY)
    first, last = os.dup(fd), os.dup(fd)
    dead = os.dup(fd)
    os.close(dead)  # fsync of a closed descriptor fails with EBADF
    with pytest.raises(OSError):
        fsync_and_close([first, dead, last])
    for closed in (first, last):
        with pytest.raises(OSError):
            os.fstat(closed)
    os.close(fd)


def test_a_failed_write_is_logged_and_the_writer_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    """Nobody reads the writer's futures: a disk error is logged as a warning and a defect with its
    traceback, and later work still runs."""
    from kafkapy.log.background import BackgroundWriter

    writer = BackgroundWriter()
    ran: list[str] = []

    def disk_full() -> None:
        raise OSError(28, "No space left on device")

    def defect() -> None:
        raise KeyError("a bug")

    try:
        with caplog.at_level("WARNING", logger="kafkapy.log.background"):
            writer.submit("a checkpoint", disk_full)
            writer.submit("a flush", defect)
            writer.submit("the next write", lambda: ran.append("next"))
            writer.drain()
    finally:
        writer.close()
    assert ran == ["next"]
    [full, bug] = caplog.records
    assert full.levelname == "WARNING" and "a checkpoint" in full.getMessage() and full.exc_info is None
    assert bug.levelname == "ERROR" and "a flush" in bug.getMessage()
    assert bug.exc_info is not None and bug.exc_info[0] is KeyError
