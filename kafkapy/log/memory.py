"""The memory backend, the default: batches kept as the very buffers Produce handed in.

``append`` keeps a reference to the caller's buffer (no copy, no decoding
beyond batch headers) and ``read`` answers with memoryviews into those buffers,
so the bytes a producer sent are the bytes a consumer receives, held once.
The caller hands the buffer over: it must not change it afterwards.

Bookkeeping costs 16 bytes per batch (batch table) plus a list slot and an
int per appended buffer; segments exist only so retention and compaction work
on whole segments, as they do on disk.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable

from kafkapy.log.background import BackgroundWriter
from kafkapy.log.cleaning import SegmentView
from kafkapy.log.segmented import Segment, SegmentedLog, now_ms
from kafkapy.log.topic_config import LogConfig
from kafkapy.protocol.records import Buffer

__all__ = ["MemoryLog", "MemorySegment"]

_VIEW_CONFIG = LogConfig()  # a view only reads: its index settings are never used


class MemorySegment(Segment):
    """A segment whose bytes are a list of appended buffers."""

    def __init__(self, base_offset: int, config: LogConfig, created_ms: int) -> None:
        super().__init__(base_offset, config, created_ms)
        self.buffers: list[Buffer] = []
        self.buffer_starts = array("q")

    def _store(self, data: Buffer, nbytes: int) -> None:
        self.buffers.append(data)
        self.buffer_starts.append(self.size)

    def view(self) -> SegmentView:
        """The buffers it holds now (stored bytes are never changed in place: a compaction or a
        truncation replaces the list), read as ``load`` reads them."""
        frozen = MemorySegment(self.base_offset, _VIEW_CONFIG, self.created_ms)
        frozen.buffers, frozen.buffer_starts = list(self.buffers), array("q", self.buffer_starts)
        frozen.size = self.size

        def read(start: int, end: int) -> bytes | memoryview:
            chunks = frozen.load(start, end)
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        return SegmentView(self, self.size, self.batch_ranges(), read, lambda: None)

    def load(self, start: int, end: int) -> list[memoryview | bytes]:
        chunks: list[memoryview | bytes] = []
        i = bisect.bisect_right(self.buffer_starts, start) - 1
        while start < end:
            buffer_start = self.buffer_starts[i]
            buffer_end = self.buffer_starts[i + 1] if i + 1 < len(self.buffer_starts) else self.size
            stop = min(end, buffer_end)
            view = memoryview(self.buffers[i])
            if view.format != "B" or view.ndim != 1:
                view = view.cast("B")
            chunks.append(view[start - buffer_start : stop - buffer_start])
            start = stop
            i += 1
        return chunks

    def _truncate_storage(self, size: int) -> None:
        # Buffers are never resized (readers may hold views): drop whole ones, and the
        # segment's size hides the tail of a buffer that was cut.
        keep = bisect.bisect_left(self.buffer_starts, size)
        del self.buffers[keep:]
        del self.buffer_starts[keep:]

    def _replace_storage(self, data: bytes, prepared: object = None) -> None:
        self.buffers = [data]
        self.buffer_starts = array("q", [0])

    def delete(self, background: BackgroundWriter | None = None) -> None:
        self.buffers = []
        self.buffer_starts = array("q")


class MemoryLog(SegmentedLog):
    """A partition log held in memory; producer-state snapshots are kept in a dict."""

    def __init__(
        self, config: LogConfig | None = None, *, start_offset: int = 0, clock: Callable[[], int] = now_ms
    ) -> None:
        super().__init__(config, clock=clock)
        self._snapshots: dict[int, bytes] = {}
        self.segments = [self._new_segment(start_offset, self.clock())]
        self._log_start_offset = start_offset
        self.recovery_point = start_offset

    def _new_segment(self, base_offset: int, now: int) -> Segment:
        return MemorySegment(base_offset, self.config, now)

    def write_snapshot(self, offset: int, data: bytes) -> None:
        self._snapshots[offset] = data

    def latest_snapshot(self) -> tuple[int, bytes] | None:
        usable = [offset for offset in self._snapshots if offset <= self.log_end_offset]
        return (max(usable), self._snapshots[max(usable)]) if usable else None

    def remove_snapshot(self, offset: int) -> None:
        self._snapshots.pop(offset, None)

    def _drop_snapshots(self, *, below: int | None = None, above: int | None = None) -> None:
        for offset in list(self._snapshots):
            if (below is not None and offset < below) or (above is not None and offset > above):
                del self._snapshots[offset]
