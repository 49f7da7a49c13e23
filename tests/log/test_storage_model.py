"""Model-based test: random appends, reads, truncations, DeleteRecords, retention (the active segment
too, as Kafka) and crashes against a plain list of acknowledged batches. No acknowledged batch is lost,
reads start at the batch holding the offset and return whole batches, the first one even past
max_bytes."""

from __future__ import annotations

import shutil
import struct
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from storage_helpers import Acked, batches_of, deleted_before, truncated

from kafkapy.log import LogConfig, MemoryLog, OffsetOutOfRange
from kafkapy.log.segmented import SegmentedLog
from kafkapy.log.segments import FileLog, segment_name
from kafkapy.protocol.records import build_record_batch

CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=150, retention_ms=-1)


class LogMachine(RuleBasedStateMachine):
    backend = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kafkapy-log-model-"))
        self.clock = 0
        self.log = self._open()
        self.batches: list[Acked] = []
        self.start = 0
        self.end = 0

    def _open(self) -> SegmentedLog:
        if self.backend == "memory":
            return MemoryLog(CONFIG, clock=lambda: self.clock)
        return FileLog(
            self.tmp / "t-0", CONFIG, log_start_offset=getattr(self, "start", 0), clock=lambda: self.clock
        )

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- rules ---------------------------------------------------------------------------------

    @rule(count=st.integers(1, 6), value_size=st.integers(0, 200), stamp=st.integers(0, 10_000))
    def append(self, count: int, value_size: int, stamp: int) -> None:
        data = build_record_batch(
            [(b"k%d" % i, b"v" * value_size, [], stamp + i) for i in range(count)],
            base_offset=self.log.log_end_offset,
        )
        self.clock += 1
        info = self.log.append(bytearray(data))
        assert (info.first_offset, info.last_offset) == (self.end, self.end + count - 1)
        self.batches.append(Acked(self.end, self.end + count - 1, data))
        self.end += count

    @rule(where=st.floats(-0.2, 1.2), max_bytes=st.integers(0, 3_000), min_one=st.booleans())
    def read(self, where: float, max_bytes: int, min_one: bool) -> None:
        offset = self.start + round(where * (self.end - self.start))
        if not self.start <= offset <= self.end:
            try:
                self.log.read(offset, max_bytes, min_one_batch=min_one)
            except OffsetOutOfRange:
                return
            raise AssertionError(f"read at {offset} outside [{self.start}, {self.end}] succeeded")
        result = self.log.read(offset, max_bytes, min_one_batch=min_one)
        got = batches_of(result.chunks)
        expected = [b for b in self.batches if b.last >= offset]
        assert [bytes(b.raw) for b in got] == [b.data for b in expected[: len(got)]]
        if got:
            assert got[0].base_offset <= offset or got[0].base_offset == expected[0].base
            assert result.size <= max_bytes or (len(got) == 1 and min_one)
        if expected and len(got) < len(expected):
            # stopped early only because the next batch would not fit
            taken = sum(len(b.data) for b in expected[: len(got)])
            assert taken + len(expected[len(got)].data) > max_bytes
        assert (result.high_watermark, result.log_start_offset) == (self.end, self.start)

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
        assert self.log.delete_records_before(offset) == offset
        self.start = offset
        self.batches = deleted_before(self.batches, offset)

    @rule(keep_bytes=st.integers(0, 3_000))
    def retention(self, keep_bytes: int) -> None:
        segments = self.log.segments
        # what stays unless retention.bytes takes it: all but the segments below the log start
        live_before = sum(s.size for s, n in zip(segments, [*segments[1:], None], strict=True)
                          if n is None or n.base_offset > self.start)
        self.log.apply_retention(self.clock, LogConfig(retention_ms=-1, retention_bytes=keep_bytes))
        assert self.log.log_start_offset >= self.start
        self.start = self.log.log_start_offset
        self.batches = [b for b in self.batches if b.last >= self.start]
        # Kafka's rule: at least retention.bytes stay, and deletion stops only at a segment whose
        # removal would leave less; the active segment is no exception (a roll comes first).
        size = self.log.size_in_bytes
        assert size >= min(keep_bytes, live_before)
        oldest = self.log.segments[0]
        assert oldest.size == 0 or size - oldest.size < keep_bytes
        if keep_bytes == 0:
            assert self.log.log_start_offset == self.log.log_end_offset

    @rule()
    def retention_expires_everything(self) -> None:
        """retention.ms passed for every record: the log empties to its end offset, as Kafka's does."""
        self.log.apply_retention(self.clock + 10**6, LogConfig(retention_ms=1))
        self.start = self.end
        self.batches = []
        assert len(self.log.segments) == 1 and self.log.size_in_bytes == 0

    @precondition(lambda self: self.backend == "file")
    @rule(tear=st.integers(0, 60))
    def crash_and_reopen(self, tear: int) -> None:
        """kill -9: descriptors go without a flush; a batch being written may be left half done."""
        for segment in self.log.segments:
            segment.close()
        if tear:
            torn = build_record_batch([(b"torn", b"x" * 40)], base_offset=self.end)
            with open(self.tmp / "t-0" / segment_name(self.log.active.base_offset, ".log"), "ab") as out:
                out.write(torn[:tear])
        self.log = self._open()

    # -- invariants ------------------------------------------------------------------------------

    @invariant()
    def offsets_agree(self) -> None:
        assert (self.log.log_start_offset, self.log.log_end_offset) == (self.start, self.end)

    @invariant()
    def everything_acknowledged_is_there(self) -> None:
        got = batches_of(self.log.read(self.start, 1 << 30).chunks) if self.start < self.end else []
        assert [bytes(b.raw) for b in got] == [b.data for b in self.batches]
        assert all(struct.unpack_from(">q", b.data)[0] == b.base for b in self.batches)


class FileLogMachine(LogMachine):
    backend = "file"


MODEL_SETTINGS = settings(
    max_examples=40, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestMemoryLogModel = LogMachine.TestCase
TestMemoryLogModel.settings = MODEL_SETTINGS
TestFileLogModel = FileLogMachine.TestCase
TestFileLogModel.settings = MODEL_SETTINGS
