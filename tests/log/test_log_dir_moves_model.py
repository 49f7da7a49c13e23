"""Model-based test of moves between log dirs: appends, truncations, DeleteRecords and retention
interleaved with a move's steps (its start, catch-up passes, the swap, a cancel) and with crashes
that leave a future directory (torn or not) to resume. Against a plain list of acknowledged
batches: none is lost or duplicated, and after a swap the new directory holds the log's files."""

from __future__ import annotations

import shutil
import struct
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from storage_helpers import Acked, batches_of, deleted_before, truncated

from kafkapy.log import LogConfig
from kafkapy.log.manager import LogManager
from kafkapy.log.moves import CopyPlan, copy_pass
from kafkapy.log.segments import FileLog
from kafkapy.protocol.records import build_record_batch

CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=150, retention_ms=-1)


class MoveMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kafkapy-move-model-"))
        self.dirs = [self.tmp / "a", self.tmp / "b"]
        self.clock = 0
        self.logs = self._open()
        self.logs.get_or_create("t", 0)
        self.batches: list[Acked] = []
        self.start = 0
        self.end = 0

    def _open(self) -> LogManager:
        return LogManager(self.dirs, default_config=CONFIG, clock=lambda: self.clock)

    @property
    def log(self) -> FileLog:
        log = self.logs.get("t", 0)
        assert isinstance(log, FileLog)
        return log

    @property
    def moving(self) -> bool:
        return ("t", 0) in self.logs.futures

    def teardown(self) -> None:
        self.logs.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- the log changing ----------------------------------------------------------------------

    @rule(count=st.integers(1, 6), value_size=st.integers(0, 200), leader_epoch=st.integers(0, 2))
    def append(self, count: int, value_size: int, leader_epoch: int) -> None:
        epoch = max(leader_epoch, self.log.epochs.latest_epoch)  # new epochs rewrite the checkpoint
        data = build_record_batch([(b"k%d" % i, b"v" * value_size, [], 1000 + i) for i in range(count)],
                                  base_offset=self.end, partition_leader_epoch=epoch)
        self.clock += 1
        self.log.append(bytearray(data))
        self.batches.append(Acked(self.end, self.end + count - 1, data))
        self.end += count

    @rule(where=st.floats(0, 1))
    def truncate(self, where: float) -> None:
        offset = self.start + round(where * (self.end - self.start))
        self.log.truncate_to(offset)
        self.batches, end = truncated(self.batches, self.start, offset)
        if end is not None:
            self.end = end

    @rule(where=st.floats(0, 1))
    def delete_records(self, where: float) -> None:
        offset = self.start + round(where * (self.end - self.start))
        self.log.delete_records_before(offset)
        self.start = offset
        self.batches = deleted_before(self.batches, offset)

    @rule(keep_bytes=st.integers(0, 3_000))
    def retention(self, keep_bytes: int) -> None:
        self.log.apply_retention(self.clock, LogConfig(retention_ms=-1, retention_bytes=keep_bytes))
        self.start = self.log.log_start_offset
        self.batches = [b for b in self.batches if b.last >= self.start]

    # -- the move ------------------------------------------------------------------------------

    @rule()
    def snapshot(self) -> None:
        """A producer-state snapshot at the log end (written at rolls, and by take_snapshot)."""
        self.log.write_snapshot(self.end, b"state at %d" % self.end)

    @precondition(lambda self: not self.moving)
    @rule()
    def start_move(self) -> None:
        here = self.logs.dir_of("t", 0)
        target = next(d for d in self.dirs if d != here)
        future = self.logs.start_move("t", 0, target)
        assert future is not None and future.path.parent == target and future.path.is_dir()

    @precondition(lambda self: self.moving)
    @rule()
    def catch_up(self) -> None:
        """One pass of the mover's thread (here in between the log's changes, not during them)."""
        future = self.logs.futures[("t", 0)]
        plan = CopyPlan.of(self.log, future.path)
        copy_pass(future, plan)
        for name, size in plan.sizes.items():
            assert (future.path / name).stat().st_size == size

    @precondition(lambda self: self.moving)
    @rule()
    def swap(self) -> None:
        future = self.logs.futures[("t", 0)]
        source = self.logs.dir_of("t", 0)
        assert source is not None
        # what the background writer has pending (a truncated leader-epoch-checkpoint) lands first;
        # files renamed .deleted (retention's, unlinked by that writer) stay behind
        assert self.logs.background is not None
        self.logs.background.drain()
        before = {p.name: p.read_bytes() for p in (source / "t-0").iterdir() if p.suffix != ".deleted"}
        doomed = self.logs.swap("t", 0)
        assert {p.name: p.read_bytes() for p in (future.log_dir / "t-0").iterdir()} == before
        assert self.logs.dir_of("t", 0) == future.log_dir and not future.path.exists()
        assert self.log.directory == future.log_dir / "t-0" and not (source / "t-0").exists()
        for segment in self.log.segments:  # the files there are the log's
            assert (self.log.directory / f"{segment.base_offset:020d}.log").stat().st_size == segment.size
        shutil.rmtree(doomed)

    @precondition(lambda self: self.moving)
    @rule()
    def cancel(self) -> None:
        future = self.logs.futures[("t", 0)]
        self.logs.cancel_move("t", 0)
        assert not future.path.exists() and not self.moving

    @rule(tear=st.integers(0, 60))
    def crash_and_reopen(self, tear: int) -> None:
        """kill -9 (descriptors go without a flush) after the log-start checkpoint's timer ran (a
        DeleteRecords after it would come back, as in Kafka); a future copy may end torn."""
        self.logs.checkpoint_log_start_offsets()  # after what the background writer had pending
        future = self.logs.futures.get(("t", 0))
        for segment in self.log.segments:
            segment.close()
        if future is not None and tear:
            copied = sorted(future.path.glob("*.log"))
            if copied:
                with open(copied[-1], "ab") as out:
                    out.write(b"\xff" * tear)
        self.logs = self._open()
        if future is not None:
            assert self.logs.futures[("t", 0)].path == future.path

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def offsets_agree(self) -> None:
        assert (self.log.log_start_offset, self.log.log_end_offset) == (self.start, self.end)

    @invariant()
    def everything_acknowledged_is_there_once(self) -> None:
        got = batches_of(self.log.read(self.start, 1 << 30).chunks) if self.start < self.end else []
        assert [bytes(b.raw) for b in got] == [b.data for b in self.batches]
        assert all(struct.unpack_from(">q", b.data)[0] == b.base for b in self.batches)

    @invariant()
    def one_current_directory(self) -> None:
        assert [d for d in self.dirs if (d / "t-0").is_dir()] == [self.logs.dir_of("t", 0)]


TestMoveModel = MoveMachine.TestCase
TestMoveModel.settings = settings(max_examples=40, stateful_step_count=30, deadline=None,
                                  suppress_health_check=[HealthCheck.too_slow])
