"""The partition log as a list of segments, independent of where segment bytes live.

Theory of operation
-------------------
A log is a list of segments ordered by base offset; only the last, the
*active* segment, is appended to. Each segment keeps, in memory, a dense batch
table (base offset and byte position of every batch, 16 bytes a batch) and
Kafka's two sparse indexes: an offset index entry ``(last offset, position)``
and a time index entry ``(max timestamp so far, its offset)`` whenever more than
``index.interval.bytes`` were written since the previous entry, as Kafka's
LogSegment.recover adds them: per batch, so an index rebuilt by recovery equals
the one written while appending. (Kafka's LogSegment.append checks once per
append of several batches; both forms are valid sparse indexes.)

Reads bisect the batch table for the batch holding the fetch offset and hand
back whole batches as the backend's buffers. ListOffsets by timestamp does what
Kafka does: the first segment whose max timestamp reaches the target, the time
index entry below it, then a walk of batch headers and one batch's records.

A segment rolls (Kafka's LogSegment.shouldRoll) when the append would pass
``segment.bytes``, when ``segment.ms`` (for a compacted log, ``max.compaction.lag.ms``
if that is shorter) less the segment's jitter (drawn at its
creation below ``segment.jitter.ms``) passed since its first batch's max
timestamp (its creation time without one), when an index is full, or when the
new offsets no longer fit a relative int32.

:class:`Segment` subclasses store bytes (memory.py: the buffers handed in;
segments.py: files); :class:`SegmentedLog` subclasses create, delete and
persist segments.
"""

from __future__ import annotations

import bisect
import random
import threading
import time
import uuid
from array import array
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kafkapy.log.background import BackgroundWriter, fsync_and_close
from kafkapy.log.base import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_OFFSET,
    NO_TIMESTAMP,
    UNDEFINED_EPOCH,
    AppendInfo,
    EpochEndOffset,
    OffsetOutOfRange,
    PartitionLog,
    ReadResult,
    TimestampAndOffset,
)
from kafkapy.log.cleaning import CompactionPlan, SegmentView
from kafkapy.log.compaction import (
    CleaningNeed,
    LastRecord,
    SegmentAge,
    cleaning_need,
)
from kafkapy.log.epochs import LeaderEpochCache
from kafkapy.log.retention import SegmentFacts, deletable_segments
from kafkapy.log.topic_config import LogConfig
from kafkapy.log.txn_index import AbortedTxn, TxnIndex
from kafkapy.protocol.records import LOG_APPEND_TIME, Buffer, RecordBatch, Records

__all__ = ["Segment", "SegmentedLog", "now_ms"]

_INT32_MAX = (1 << 31) - 1
OFFSET_INDEX_ENTRY = 8  # relative offset int32, position int32
TIME_INDEX_ENTRY = 12  # timestamp int64, relative offset int32


def now_ms() -> int:
    return int(time.time() * 1000)


def roll_jitter_ms(config: LogConfig) -> int:
    """segment.jitter.ms as Kafka's LogConfig.randomSegmentJitter draws it for each new segment:
    uniform below the smaller of it and segment.ms, so logs made together do not all roll at once."""
    bound = min(config.segment_jitter_ms, config.segment_ms)
    return random.randrange(bound) if bound > 0 else 0


class Segment:
    """One segment's batch table and indexes; subclasses say where its bytes are."""

    def __init__(self, base_offset: int, config: LogConfig, created_ms: int) -> None:
        self.base_offset = base_offset
        self.next_offset = base_offset
        self.size = 0
        self.offsets = array("q")  # base offset of every batch
        self.positions = array("q")  # where every batch starts
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = NO_OFFSET
        self.rolling_timestamp: int | None = None  # the first batch's max timestamp (segment.ms)
        self.created_ms = created_ms
        self.last_modified_ms = created_ms
        self.roll_jitter_ms = roll_jitter_ms(config)
        self.index_interval_bytes = config.index_interval_bytes
        self.max_offset_entries = config.segment_index_bytes // OFFSET_INDEX_ENTRY
        self.max_time_entries = config.segment_index_bytes // TIME_INDEX_ENTRY
        self.index_offsets = array("q")  # offset index: absolute last offsets
        self.index_positions = array("q")
        self.time_timestamps = array("q")  # time index
        self.time_offsets = array("q")
        self._bytes_since_index = 0
        self.txn_index = TxnIndex()  # the transactions aborted by markers in this segment

    # -- storage, supplied by subclasses -------------------------------------------------

    def _store(self, data: Buffer, nbytes: int) -> None:
        raise NotImplementedError

    def load(self, start: int, end: int) -> list[memoryview | bytes]:
        """The stored bytes [start, end) as one or more chunks."""
        raise NotImplementedError

    def _truncate_storage(self, size: int) -> None:
        raise NotImplementedError

    def _replace_storage(self, data: bytes, prepared: object = None) -> None:
        """Store ``data`` in place of the segment's bytes; ``prepared`` is what ``prepare_replacement``
        made of the same data beforehand (on the cleaner's thread), if anything."""
        raise NotImplementedError

    def prepare_replacement(self, data: bytes) -> object:
        """What can be done for a replacement before the swap, anywhere (a file written and
        fsynced beside the segment); None when there is nothing to do ahead."""
        return None

    def discard_replacement(self, prepared: object) -> None:
        """A prepared replacement that will not be swapped in."""

    def _index_entry_added(self, last_offset: int, position: int) -> None:
        """Hook: an offset index entry was added (files append it)."""

    def _time_entry_added(self, timestamp: int, offset: int) -> None:
        """Hook: a time index entry was added (files append it)."""

    def _indexes_reset(self) -> None:
        """Hook: the indexes are about to be rebuilt from the batches."""

    def flush(self) -> None:
        """Make the segment's bytes and indexes durable; nothing to do in memory."""

    def duplicate_descriptors(self) -> list[int]:
        """What a background flush fsyncs (kafkapy.log.background); nothing in memory."""
        return []

    def close(self) -> None:
        """Release what the segment holds open."""

    def delete(self, background: BackgroundWriter | None = None) -> None:
        """Remove the segment's storage (with a background writer, its files are renamed
        ``.deleted`` here and removed there)."""

    # -- the batch table -----------------------------------------------------------------

    @property
    def batch_count(self) -> int:
        return len(self.offsets)

    def batch_end(self, i: int) -> int:
        return self.positions[i + 1] if i + 1 < len(self.positions) else self.size

    def batch(self, i: int) -> RecordBatch:
        """Batch ``i`` read through records.py's one reader."""
        start = self.positions[i]
        chunks = self.load(start, self.batch_end(i))
        return RecordBatch(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    def last_offset_of(self, i: int) -> int:
        return self.batch(i).last_offset

    def batches(self) -> Iterator[RecordBatch]:
        for i in range(len(self.offsets)):
            yield self.batch(i)

    def batch_ranges(self) -> list[tuple[int, int]]:
        return [(self.positions[i], self.batch_end(i)) for i in range(len(self.positions))]

    def view(self) -> SegmentView:
        """The segment as it is now, readable from another thread whatever happens to it after
        (kafkapy.log.cleaning)."""
        raise NotImplementedError

    def find_batch(self, offset: int) -> int | None:
        """The first batch whose last offset is >= ``offset``, or None past the segment's end."""
        if offset >= self.next_offset or not self.offsets:
            return None
        i = bisect.bisect_right(self.offsets, offset) - 1
        if i < 0:
            return 0
        if self.last_offset_of(i) >= offset:
            return i
        return i + 1 if i + 1 < len(self.offsets) else None

    def append(self, data: Buffer, nbytes: int, batches: list[RecordBatch], now: int) -> None:
        position = self.size
        self._store(data, nbytes)
        for batch in batches:
            self.note_batch(batch, position)
            position += batch.size_in_bytes
        self.size = position
        self.last_modified_ms = now

    def append_one(self, data: Buffer, nbytes: int, batch: RecordBatch, now: int) -> None:
        """``append`` of the one batch that is all of ``data``, without a list around it."""
        position = self.size
        self._store(data, nbytes)
        self.note_batch(batch, position)
        self.size = position + nbytes
        self.last_modified_ms = now

    def note_batch(self, batch: RecordBatch, position: int) -> None:
        """Add a stored batch to the table and, past index.interval.bytes, to the indexes."""
        base_offset, max_timestamp = batch.base_offset, batch.max_timestamp
        last_offset = base_offset + batch.last_offset_delta
        self.offsets.append(base_offset)
        self.positions.append(position)
        if self.rolling_timestamp is None:
            self.rolling_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self._bytes_since_index > self.index_interval_bytes:
            self.index_offsets.append(last_offset)
            self.index_positions.append(position)
            self._index_entry_added(last_offset, position)
            self._maybe_time_entry()
            self._bytes_since_index = 0
        self._bytes_since_index += batch.size_in_bytes
        self.next_offset = last_offset + 1

    def _maybe_time_entry(self) -> None:
        """Kafka's TimeIndex.maybeAppend: only a timestamp larger than the last entry's."""
        if self.max_timestamp < 0:
            return
        if self.time_timestamps and self.max_timestamp <= self.time_timestamps[-1]:
            return
        self.time_timestamps.append(self.max_timestamp)
        self.time_offsets.append(self.offset_of_max_timestamp)
        self._time_entry_added(self.max_timestamp, self.offset_of_max_timestamp)

    def on_inactive(self) -> None:
        """A new segment took over: the time index gets the final max timestamp, as Kafka's does."""
        self._maybe_time_entry()

    def indexes_full(self) -> bool:
        return (
            len(self.index_offsets) >= self.max_offset_entries
            or len(self.time_timestamps) >= self.max_time_entries
        )

    def rebuild(self, active: bool) -> None:
        """Replay the kept batches, one at a time, into a fresh table and indexes (after truncation)."""
        positions, size = list(self.positions), self.size
        self.reset_table()
        for k, position in enumerate(positions):
            end = positions[k + 1] if k + 1 < len(positions) else size
            chunks = self.load(position, end)
            self.note_batch(RecordBatch(chunks[0] if len(chunks) == 1 else b"".join(chunks)), position)
        self.size = size
        if not active:
            self.on_inactive()

    def reset_table(self) -> None:
        self._indexes_reset()
        self.offsets = array("q")
        self.positions = array("q")
        self.index_offsets = array("q")
        self.index_positions = array("q")
        self.time_timestamps = array("q")
        self.time_offsets = array("q")
        self._bytes_since_index = 0
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = NO_OFFSET
        self.rolling_timestamp = None

    def truncate_to(self, offset: int, active: bool) -> None:
        """Drop every batch whose last offset is >= ``offset``."""
        self.txn_index.truncate_to(offset)
        i = self.find_batch(offset)
        if i is None:
            return
        keep = i
        self._truncate_storage(self.positions[keep])
        self.size = self.positions[keep]
        del self.offsets[keep:]
        del self.positions[keep:]
        self.rebuild(active)

    def replace(self, data: bytes, active: bool, prepared: object = None) -> None:
        """Swap in rewritten batches (compaction), offsets preserved."""
        self._replace_storage(data, prepared)
        self.reset_table()
        position = 0
        for batch in Records(data).batches(strict=True):
            assert isinstance(batch, RecordBatch)
            self.note_batch(batch, position)
            position += batch.size_in_bytes
        self.size = position
        if not active:
            self.on_inactive()

    def time_lookup(self, timestamp: int) -> int:
        """The offset to start a timestamp search from (Kafka's TimeIndex.lookup)."""
        i = bisect.bisect_right(self.time_timestamps, timestamp) - 1
        return self.time_offsets[i] if i >= 0 else self.base_offset

    def retention_timestamp(self) -> int:
        """What retention.ms compares: the max timestamp, or the last write when batches carry none."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms


class SegmentedLog:
    """A PartitionLog over segments; backends supply segment creation and persistence."""

    def __init__(self, config: LogConfig | None = None, *, clock: Callable[[], int] = now_ms) -> None:
        self.config = config or LogConfig()
        self.clock = clock
        self.segments: list[Segment] = []
        self.epochs = LeaderEpochCache()
        self._log_start_offset = 0
        self.recovery_point = 0
        self._last_flush_ms = clock()
        self.snapshot_source: Callable[[], bytes] | None = None
        # The producer state's earliest open transaction (its first offset), which holds the LSO
        # back; set by whoever keeps the producer state beside this log.
        self.unstable_offset_source: Callable[[], int | None] | None = None
        # The producer table's active producers, whose last batches compaction keeps; set by the
        # same owner. Without it compaction keeps no emptied batch for anyone.
        self.producers_source: Callable[[], Mapping[int, LastRecord]] | None = None
        # Where the last compaction stopped (Kafka's cleaner checkpoint): below it the log is clean.
        self.cleaned_to = 0
        self.topic_id: uuid.UUID | None = None  # KIP-516: the topic this log belongs to, once known
        self.closed = False
        # A move between log dirs copies the segment files as they are: meanwhile compaction
        # waits (Kafka's abortAndPauseCleaning), and ``rewrites`` counts the changes to stored
        # bytes other than appends and whole segments dropped from the front (truncation,
        # compaction), after which a copy taken before is stale.
        self.cleaning_paused = False
        self.rewrites = 0
        # Logs under log.dirs flush a rolled segment and fsync producer snapshots on their log
        # manager's background writer, as Kafka schedules them; None: here, at once.
        self.background: BackgroundWriter | None = None
        # The background writer moves the recovery point once a rolled segment is durable, while
        # the loop may truncate: both change it (and read ``rewrites``) under this lock.
        self._recovery_lock = threading.Lock()

    # -- backend hooks -------------------------------------------------------------------

    def _new_segment(self, base_offset: int, now: int) -> Segment:
        raise NotImplementedError

    def _epochs_changed(self, *, truncated: bool = False) -> None:
        """Hook: persist the leader-epoch cache. A new epoch is durable before the append that
        brought it returns; a truncation of the cache may be written later (Kafka's
        truncateFrom*AsyncFlush: a file holding a few more entries than the log is trimmed on load)."""

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        """The log belongs to ``topic_id`` from now on (files: partition.metadata is written)."""
        self.topic_id = topic_id

    def write_snapshot(self, offset: int, data: bytes) -> None:
        raise NotImplementedError

    def latest_snapshot(self) -> tuple[int, bytes] | None:
        raise NotImplementedError

    def remove_snapshot(self, offset: int) -> None:
        """Forget the snapshot at ``offset`` (one recovery found unusable); none there is fine."""
        raise NotImplementedError

    def _drop_snapshots(self, *, below: int | None = None, above: int | None = None) -> None:
        raise NotImplementedError

    # -- offsets -------------------------------------------------------------------------

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.active.next_offset

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """Kafka's UnifiedLog.lastStableOffset: the earliest open transaction's first offset (not
        below the log start, as maybeIncrementFirstUnstableOffset keeps it), capped by the HW."""
        high_watermark = self.high_watermark
        source = self.unstable_offset_source
        first_unstable = source() if source is not None else None
        if first_unstable is None:
            return high_watermark
        return min(max(first_unstable, self._log_start_offset), high_watermark)

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def set_config(self, config: LogConfig) -> None:
        """New topic configs apply to later rolls, retention and compaction (index sizes: new segments)."""
        self.config = config

    # -- append --------------------------------------------------------------------------

    def append(self, data: Buffer, *, now_ms: int | None = None,
               header: RecordBatch | None = None) -> AppendInfo:
        """Store ``data`` as it is; its batches must continue the log's offsets exactly.

        ``header``: ``data`` is this one batch, whose header the caller has read already (Produce
        has), so the log need not frame ``data`` again; its offset and size are still checked.
        """
        expected = self.log_end_offset
        if header is not None:
            if header.size_in_bytes != (data.nbytes if isinstance(data, memoryview) else len(data)):
                raise ValueError("the header given is not the one batch of the data")
            if header.base_offset != expected:
                raise ValueError(
                    f"batch base offset {header.base_offset} does not continue the log at {expected}")
            return self.append_one(data, header, self.clock() if now_ms is None else now_ms)
        batches: list[RecordBatch] = []
        for batch in Records(data).batches(strict=True):
            if not isinstance(batch, RecordBatch):
                raise ValueError("the log stores magic 2 record batches only")
            if batch.base_offset != expected:
                raise ValueError(
                    f"batch base offset {batch.base_offset} does not continue the log at {expected}"
                )
            expected = batch.last_offset + 1
            batches.append(batch)
        if not batches:
            raise ValueError("nothing to append")
        nbytes = sum(batch.size_in_bytes for batch in batches)
        now = self.clock() if now_ms is None else now_ms
        max_timestamp, offset_of_max = NO_TIMESTAMP, batches[0].last_offset
        for batch in batches:
            if batch.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = batch.max_timestamp, batch.last_offset
        segment = self._maybe_roll(nbytes, max_timestamp, expected - 1, now)
        segment.append(data, nbytes, batches, now)
        epochs_changed = False
        for batch in batches:
            epochs_changed |= self.epochs.assign(batch.partition_leader_epoch, batch.base_offset)
        if epochs_changed:
            self._epochs_changed()
        self.maybe_flush(now)
        append_time = max_timestamp if batches[-1].timestamp_type == LOG_APPEND_TIME else NO_TIMESTAMP
        return AppendInfo(batches[0].base_offset, expected - 1, max_timestamp, offset_of_max, append_time)

    def append_one(self, data: Buffer, batch: RecordBatch, now: int) -> AppendInfo:
        """``append`` of one batch whose header is read and checked (what every Produce appends):
        the same bookkeeping, without the lists and loops over batches. The caller guarantees
        what ``append(header=)`` checks: ``batch`` is the header of all of ``data``, and its base
        offset is the log end offset (Produce's fast path from the frame stamps it so)."""
        self.store_one(data, batch, now)
        last_offset = batch.base_offset + batch.last_offset_delta
        max_timestamp = batch.max_timestamp if batch.max_timestamp > NO_TIMESTAMP else NO_TIMESTAMP
        append_time = max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else NO_TIMESTAMP
        return AppendInfo(batch.base_offset, last_offset, max_timestamp, last_offset, append_time)

    def store_one(self, data: Buffer, batch: RecordBatch, now: int) -> None:
        """``append_one`` without its AppendInfo, for callers that answer from the header they
        hold (Produce: an object fewer per request)."""
        size = batch.size_in_bytes
        last_offset = batch.base_offset + batch.last_offset_delta
        max_timestamp = batch.max_timestamp if batch.max_timestamp > NO_TIMESTAMP else NO_TIMESTAMP
        self._maybe_roll(size, max_timestamp, last_offset, now).append_one(data, size, batch, now)
        if self.epochs.assign(batch.partition_leader_epoch, batch.base_offset):
            self._epochs_changed()
        self.maybe_flush(now)

    def _maybe_roll(self, nbytes: int, max_timestamp: int, last_offset: int, now: int) -> Segment:
        """Kafka's LogSegment.shouldRoll; time waited is the new records' max timestamp minus the
        segment's first batch's, or wall-clock time since creation when batches carry no timestamp."""
        segment = self.active
        if segment.size == 0:
            return segment
        rolling = segment.rolling_timestamp
        waited = now - segment.created_ms if rolling is None or rolling < 0 else max_timestamp - rolling
        if (
            segment.size > self.config.segment_bytes - nbytes
            or waited > self.config.max_segment_ms - segment.roll_jitter_ms
            or segment.indexes_full()
            or last_offset - segment.base_offset > _INT32_MAX
        ):
            return self.roll(now)
        return segment

    def roll(self, now: int | None = None) -> Segment:
        """Start a new active segment at the log end offset (Kafka flushes the old one on roll)."""
        now = self.clock() if now is None else now
        old = self.active
        if old.size == 0:
            return old
        old.on_inactive()
        # Every rolled segment is flushed, and the recovery point moves to its end once it is.
        background = self.background
        if background is None:
            old.flush()
            self._advance_recovery_point(old.next_offset, self.rewrites)
        else:
            descriptors, through, rewrites = old.duplicate_descriptors(), old.next_offset, self.rewrites

            def flush_rolled() -> None:
                fsync_and_close(descriptors)
                self._advance_recovery_point(through, rewrites)
            background.submit(f"flushing a rolled segment of {self}", flush_rolled, self.storage_path())
        self.segments.append(self._new_segment(self.log_end_offset, now))
        if self.snapshot_source is not None:
            self.write_snapshot(self.log_end_offset, self.snapshot_source())
        return self.active

    def maybe_flush(self, now: int) -> bool:
        """Flush if flush.messages records are unflushed or flush.ms passed since the last flush."""
        unflushed = self.log_end_offset - self.recovery_point
        if unflushed >= self.config.flush_messages or (
            unflushed and now - self._last_flush_ms >= self.config.flush_ms
        ):
            self.flush(now)
            return True
        return False

    def flush(self, now: int | None = None) -> None:
        """Make every appended batch durable and move the recovery point to the log end."""
        for segment in self.segments:
            if segment.next_offset > self.recovery_point or segment is self.active:
                segment.flush()
        with self._recovery_lock:
            self.recovery_point = self.log_end_offset
        self._last_flush_ms = self.clock() if now is None else now

    def _rewriting(self) -> None:
        """Stored bytes are about to change other than by an append: a flush asked for before
        (still on the background writer) no longer moves the recovery point."""
        with self._recovery_lock:
            self.rewrites += 1

    def _advance_recovery_point(self, through: int, rewrites: int) -> None:
        """The log is durable up to ``through`` (a flush done, maybe on the background writer):
        the recovery point moves there, unless a truncation or rewrite came since the flush was
        asked for (``rewrites`` then differs) and made that offset mean something else."""
        with self._recovery_lock:
            if rewrites == self.rewrites:
                self.recovery_point = max(self.recovery_point, min(through, self.log_end_offset))

    # -- read ----------------------------------------------------------------------------

    def _segment_index(self, offset: int) -> int:
        return max(bisect.bisect_right(self.segments, offset, key=lambda segment: segment.base_offset) - 1, 0)

    def segment_base(self, offset: int) -> int:
        """The base offset of the segment holding ``offset`` (the first one for an offset before it)."""
        return self.segments[self._segment_index(offset)].base_offset

    def read(
        self, fetch_offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True,
        aborted_transactions: bool = False,
    ) -> ReadResult:
        """Whole batches from the one holding ``fetch_offset``, up to ``max_bytes``.

        ``max_offset`` (exclusive; the high watermark for consumers) stops before
        the first batch that starts at or past it. ``aborted_transactions`` (read_committed)
        also lists the aborted transactions overlapping what was read: from ``fetch_offset`` to
        the offset after the last batch returned (Kafka bounds it by the next sparse offset-index
        entry, so it may list a few more).
        """
        end_offset = self.log_end_offset
        if not self._log_start_offset <= fetch_offset <= end_offset:
            raise OffsetOutOfRange(fetch_offset, self._log_start_offset, end_offset)
        limit = end_offset if max_offset is None else min(max_offset, end_offset)
        chunks: list[memoryview | bytes] = []
        total = 0
        upper_bound = fetch_offset  # the offset after the last batch taken
        for s in range(self._segment_index(fetch_offset), len(self.segments)):
            segment = self.segments[s]
            first = segment.find_batch(fetch_offset)
            if first is None:
                continue
            # Batches [first, stop) start below the limit; of those, take as many as fit in the
            # budget (batch k fits when batch k+1 starts within it): two bisections, no walk.
            stop = bisect.bisect_left(segment.offsets, limit, lo=first)
            start = segment.positions[first]
            budget_end = start + max_bytes - total
            fitting = bisect.bisect_right(segment.positions, budget_end, lo=first) - 1
            if fitting >= first and segment.batch_end(fitting) <= budget_end:
                fitting += 1
            if fitting == first and not chunks and min_one_batch:
                fitting = first + 1  # the first batch goes whole whatever max_bytes says
            taken = min(stop, fitting)
            if taken > first:
                end = segment.batch_end(taken - 1)
                chunks.extend(segment.load(start, end))
                total += end - start
                upper_bound = segment.offsets[taken] if taken < segment.batch_count else segment.next_offset
            if taken < segment.batch_count:
                break
        aborted = None
        if aborted_transactions:
            aborted = tuple(self.collect_aborted_txns(fetch_offset, upper_bound)) if chunks else ()
        return ReadResult(chunks, self.high_watermark, self._log_start_offset, self.last_stable_offset,
                          aborted)

    # -- the aborted-transaction index -------------------------------------------------------

    def add_aborted_txn(self, txn: AbortedTxn) -> None:
        """Kafka's LogSegment.updateTxnIndex: the entry goes to the segment holding the marker."""
        self.segments[self._segment_index(txn.last_offset)].txn_index.append(txn)

    def restore_aborted_txn(self, txn: AbortedTxn) -> bool:
        """Recovery's replay of an ABORT marker: add the entry unless its segment's index has it
        (written before a crash); answers whether it was missing."""
        index = self.segments[self._segment_index(txn.last_offset)].txn_index
        last = index.last_offset
        if last is not None and txn.last_offset <= last:
            return False
        index.append(txn)
        return True

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Kafka's UnifiedLog.collectAbortedTransactions: from the segment holding ``fetch_offset``
        on, until an index says the search is complete."""
        found: list[AbortedTxn] = []
        for segment in self.segments[self._segment_index(fetch_offset):]:
            txns, complete = segment.txn_index.collect(fetch_offset, upper_bound)
            found.extend(txns)
            if complete:
                break
        return found

    # -- ListOffsets and OffsetForLeaderEpoch ---------------------------------------------

    def latest_offset(self) -> TimestampAndOffset:
        """ListOffsets -1: the high watermark, with the latest leader epoch."""
        return TimestampAndOffset(NO_TIMESTAMP, self.high_watermark, self.epochs.latest_epoch)

    def earliest_offset(self) -> TimestampAndOffset:
        """ListOffsets -2: the log start offset, with the epoch it was written in."""
        offset = self._log_start_offset
        return TimestampAndOffset(NO_TIMESTAMP, offset, self.epochs.epoch_for_offset(offset))

    def earliest_local_offset(self) -> TimestampAndOffset:
        """ListOffsets -4 (KIP-405): the first offset stored locally; all of it, without tiered storage."""
        return self.earliest_offset()

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """Kafka's UnifiedLog.fetchOffsetByTimestamp, without remote storage: the special
        timestamps, and any other (a negative one too, as Kafka) searched for."""
        special = {
            LATEST_TIMESTAMP: self.latest_offset,
            EARLIEST_TIMESTAMP: self.earliest_offset,
            EARLIEST_LOCAL_TIMESTAMP: self.earliest_local_offset,
            MAX_TIMESTAMP: self.max_timestamp_offset,
            LATEST_TIERED_TIMESTAMP: self.latest_tiered_offset,
            # KIP-1023: the first offset not yet in remote storage; none without tiered storage
            EARLIEST_PENDING_UPLOAD_TIMESTAMP: self.latest_tiered_offset,
        }.get(timestamp)
        if special is not None:
            return special()
        for segment in self.segments:
            if segment.max_timestamp < timestamp:
                continue
            first = segment.find_batch(max(segment.time_lookup(timestamp), self._log_start_offset))
            for i in range(first if first is not None else segment.batch_count, segment.batch_count):
                batch = segment.batch(i)
                if batch.max_timestamp < timestamp:
                    continue
                for record in batch.record_list():
                    stamp = (
                        batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else record.timestamp
                    )
                    if stamp is not None and stamp >= timestamp and record.offset >= self._log_start_offset:
                        return TimestampAndOffset(
                            stamp, record.offset, self.epochs.epoch_for_offset(record.offset)
                        )
        return None

    def legacy_offsets_before(self, timestamp: int, max_num_offsets: int) -> list[int]:
        """ListOffsets v0 (Kafka's UnifiedLog.legacyFetchOffsetsBefore): segment base offsets (at
        least the log start) by the time each segment was last written, and the log end offset
        if the active segment holds anything; -1 asks for the newest first, -2 for the earliest
        only, any other timestamp for those last written at or before it. Descending, at most
        ``max_num_offsets``."""
        stops = [(max(segment.base_offset, self._log_start_offset), segment.last_modified_ms)
                 for segment in self.segments]
        if self.segments[-1].size > 0:
            stops.append((self.log_end_offset, self.clock()))
        if timestamp == LATEST_TIMESTAMP:
            start = len(stops) - 1
        elif timestamp == EARLIEST_TIMESTAMP:
            start = 0
        else:
            start = len(stops) - 1
            while start >= 0 and stops[start][1] > timestamp:
                start -= 1
        found = [stops[i][0] for i in range(start, max(start - max_num_offsets, -1), -1)]
        return sorted(found, reverse=True)

    def latest_tiered_offset(self) -> TimestampAndOffset:
        """ListOffsets -5 (KIP-1005): the highest offset in remote storage; with none, Kafka's
        answer is offset -1 in epoch -1."""
        return TimestampAndOffset(NO_TIMESTAMP, NO_OFFSET, UNDEFINED_EPOCH)

    def max_timestamp_offset(self) -> TimestampAndOffset | None:
        """ListOffsets -3 (KIP-734): the record with the largest timestamp (the first of equals)."""
        best: Segment | None = None
        for segment in self.segments:
            if segment.max_timestamp >= 0 and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return None
        i = best.find_batch(best.offset_of_max_timestamp)
        assert i is not None
        batch = best.batch(i)
        # Kafka's RecordBatch.offsetOfMaxTimestamp: the first record bearing the batch's largest
        # timestamp; under LogAppendTime every record bears it, so the batch's first record.
        append_time = batch.timestamp_type == LOG_APPEND_TIME
        offset = next((r.offset for r in batch.record_list()
                       if append_time or r.timestamp == batch.max_timestamp), None)
        if offset is None:  # a batch compaction emptied: Kafka finds nothing either
            return None
        return TimestampAndOffset(batch.max_timestamp, offset, self.epochs.epoch_for_offset(offset))

    def end_offset_for_epoch(self, leader_epoch: int) -> EpochEndOffset:
        return self.epochs.end_offset_for(leader_epoch, self.log_end_offset)

    def start_leader_epoch(self, leader_epoch: int) -> None:
        """A leader takes the partition in ``leader_epoch``: the epoch starts at the log end now,
        before any batch of it is written (Kafka's makeLeader, maybeAssignEpochStartOffset), so
        OffsetForLeaderEpoch answers for the current epoch at once. Older epochs change nothing."""
        if self.epochs.assign(leader_epoch, self.log_end_offset):
            self._epochs_changed()

    # -- truncation and deletion -----------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Kafka's UnifiedLog.truncateTo: drop every batch whose last offset is >= ``offset``.

        A batch straddling ``offset`` goes too, so the log end may land below ``offset``.
        """
        if offset >= self.log_end_offset:
            return
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        self._rewriting()
        while len(self.segments) > 1 and self.active.base_offset > offset:
            self.segments.pop().delete(self.background)
        self.active.truncate_to(offset, active=True)
        if self.log_end_offset < self._log_start_offset:
            # Only a batch straddling the log start was left to cut: nothing readable remains.
            self.truncate_fully_and_start_at(self._log_start_offset)
            return
        if self.epochs.truncate_from_end(self.log_end_offset):
            self._epochs_changed(truncated=True)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.cleaned_to = min(self.cleaned_to, self.log_end_offset)  # what comes again is dirty
        self._drop_snapshots(above=self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and continue it at ``offset`` (a follower far behind, or a reset)."""
        self._rewriting()
        for segment in self.segments:
            segment.delete(self.background)
        self.segments = [self._new_segment(offset, self.clock())]
        self._log_start_offset = offset
        self.recovery_point = offset
        self.cleaned_to = offset
        self.epochs.clear()
        self._epochs_changed()
        self._drop_snapshots(above=offset - 1)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: the log starts at ``offset`` from now on; whole segments below it go."""
        if not self._log_start_offset <= offset <= self.high_watermark:
            if offset < self._log_start_offset and offset >= 0:
                return self._log_start_offset
            raise OffsetOutOfRange(offset, self._log_start_offset, self.high_watermark)
        self._advance_log_start(offset)
        return self._log_start_offset

    def _advance_log_start(self, offset: int) -> None:
        if offset <= self._log_start_offset:
            return
        self._log_start_offset = offset
        if self.epochs.truncate_from_start(offset):
            self._epochs_changed(truncated=True)
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            self.segments.pop(0).delete(self.background)
        self._drop_snapshots(below=self.segments[0].base_offset)

    # -- retention and compaction ------------------------------------------------------------

    def apply_retention(self, now_ms: int | None = None, config: LogConfig | None = None) -> int:
        """Delete the old segments retention allows (retention.py), the active one too after a roll;
        answers how many went."""
        config = config or self.config
        now = self.clock() if now_ms is None else now_ms
        facts = [SegmentFacts(s.base_offset, s.size, s.retention_timestamp()) for s in self.segments]
        count = deletable_segments(facts, config, now, self._log_start_offset, self.high_watermark,
                                   self.log_end_offset)
        if count == len(self.segments):
            self.roll(now)  # Kafka's deleteSegments: a log keeps one segment, a new empty active one
        if count:
            gone, self.segments = self.segments[:count], self.segments[count:]
            for segment in gone:
                segment.delete(self.background)
            self._advance_log_start(self.segments[0].base_offset)
        return count

    def compact(self, now_ms: int | None = None, config: LogConfig | None = None) -> int:
        """cleanup.policy compact: rewrite the cleanable segments (compaction.py), the three steps
        of kafkapy.log.cleaning in a row; answers records removed."""
        plan = self.plan_compaction(now_ms, config)
        if plan is None:
            return 0
        plan.clean()
        return self.finish_compaction(plan)

    def plan_compaction(self, now_ms: int | None = None,
                        config: LogConfig | None = None) -> CompactionPlan | None:
        """Step 1 (on the loop): what a cleaning works from; None when nothing is cleanable."""
        config = config or self.config
        if not config.compacts or self.cleaning_paused:
            return None
        now = self.clock() if now_ms is None else now_ms
        count = self.cleaning_need(now, config).count
        if not count:
            return None
        cleanable = self.segments[:count]
        start, end = cleanable[0].base_offset, self.segments[count].base_offset
        last_records = dict(self.producers_source()) if self.producers_source is not None else {}
        return CompactionPlan([segment.view() for segment in cleanable], end,
                              self.collect_aborted_txns(start, end), last_records, now,
                              config.delete_retention_ms, self.rewrites)

    def finish_compaction(self, plan: CompactionPlan) -> int:
        """Step 3 (on the loop): the cleaned segments in place of the ones planned, if the log
        still holds those as they were; answers records removed (0 for a plan dropped)."""
        plan.release()
        cleanable = self.segments[:len(plan.views)]
        unchanged = (plan.cleaned is not None and not self.closed and not self.cleaning_paused
                     and plan.rewrites == self.rewrites and len(cleanable) == len(plan.views)
                     and all(segment is view.segment and segment.size == view.size
                             for segment, view in zip(cleanable, plan.views, strict=True)))
        if not unchanged or plan.cleaned is None:
            plan.discard()
            return 0
        self.cleaned_to = max(self.cleaned_to, plan.end)
        removed = 0
        for segment, cleaned, prepared in zip(cleanable, plan.cleaned, plan.prepared, strict=True):
            if cleaned.changed:
                self._rewriting()
                segment.replace(cleaned.data, active=False, prepared=prepared)
                kept = [txn for txn in segment.txn_index if txn.last_offset in cleaned.kept_markers]
                if len(kept) != len(segment.txn_index):
                    segment.txn_index.replace(kept)
                removed += cleaned.removed
        return removed

    def cleaning_need(self, now_ms: int | None = None, config: LogConfig | None = None, *,
                      first_dirty: int | None = None) -> CleaningNeed:
        """What a cleaning could do now (compaction.py's ``cleaning_need``): dirty from
        ``first_dirty`` (by default ``cleaned_to``), never past the last stable offset. A first
        dirty offset below the log start or past the log end is the log start (Kafka's
        cleanableOffsets: retention or DeleteRecords passed the cleaner checkpoint)."""
        config = config or self.config
        first_dirty = self.cleaned_to if first_dirty is None else first_dirty
        if not self._log_start_offset <= first_dirty <= self.log_end_offset:
            first_dirty = self._log_start_offset
        now = self.clock() if now_ms is None else now_ms
        ages = [SegmentAge(s.base_offset, s.size, s.retention_timestamp(), s.rolling_timestamp)
                for s in self.segments]
        return cleaning_need(ages, first_dirty, self.last_stable_offset, config, now)

    def compaction_overdue(self, now_ms: int, config: LogConfig | None = None) -> bool:
        """max.compaction.lag.ms (the cleaner's must-clean rule): a dirty rolled segment's first
        batch is older than that, and there is something a cleaning may reach."""
        config = config or self.config
        need = self.cleaning_need(now_ms, config)
        return config.compacts and need.overdue and need.cleanable_bytes > 0

    def storage_path(self) -> Path | None:
        """The directory holding the log's files (what a background write's failure names);
        None in memory."""
        return None

    def close(self) -> None:
        """Snapshot producer state at the log end, flush, release; a second call does nothing."""
        if self.closed:
            return
        self.closed = True
        if self.snapshot_source is not None:
            self.write_snapshot(self.log_end_offset, self.snapshot_source())
        self.active.on_inactive()  # Kafka's LogSegment.close adds the final time index entry
        self.flush()
        for segment in self.segments:
            segment.close()


if TYPE_CHECKING:
    _CONFORMS: type[PartitionLog] = SegmentedLog  # mypy holds both backends to the interface
