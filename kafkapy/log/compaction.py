"""Log compaction: keep the last record of every key, as Kafka's LogCleaner does.

Theory of operation
-------------------
Compaction looks at the *cleanable* segments: the rolled ones, oldest first,
up to the first dirty one (at or past the cleaner checkpoint) whose largest
timestamp is younger than ``min.compaction.lag.ms``, and never past the last
stable offset (Kafka's first uncleanable offset: an open transaction's records
are not settled). :func:`cleaning_need` also says, as Kafka's cleaner manager
does, whether a log is due: its cleanable bytes over its clean plus cleanable
ones above ``min.cleanable.dirty.ratio``, or a dirty segment older than
``max.compaction.lag.ms`` and something to clean.
Pass one maps every key in them to its last offset; pass two rewrites each
segment keeping a record only if it is that last offset. The active segment
is never touched, so a key whose newest record sits there keeps its older one
until the next roll, as in Kafka.

Batches are rewritten with ``build_record_batch``, keeping base offset,
producer id, epoch and base sequence, partition leader epoch, codec,
timestamp type and the transactional flag; records keep their offsets and
timestamps (a compacted batch has offset gaps, as Kafka's do). A batch
nothing was removed from is kept as its original bytes. Records without a key
are dropped, as Kafka's cleaner drops them.

Transactions. Both passes walk the batches in offset order with a
:class:`TransactionWalk`, fed the aborted transactions of the range from the
transaction index. A committed transaction's records are compacted like any
others; an aborted one's are all removed, and never count as a key's last
value. An ABORT marker stays while any record of its transaction is still in
the log, a COMMIT marker while the pass read a batch of its transaction;
after that a marker goes like a tombstone (below). An aborted transaction
leaves the transaction index with its last batch, as Kafka rebuilds the index
of a cleaned segment: its marker may stay a while, but a read_committed
consumer has nothing of it left to skip. The batch
that holds an active producer's last sequence (or, when its last entry is a
marker, that marker) is kept even when emptied, as a header without records,
so the producer's sequence and epoch survive the cleaning and a restart; so is
the batch ending at the first offset the cleaning does not reach, as Kafka
keeps it since KAFKA-17076, so that the cleaned segments still end there.

Tombstones (null values) and markers that may go are timed from the cleaning
that first finds them, as KIP-534 has Kafka do: that cleaning rewrites their
batch with a delete horizon (now + ``delete.retention.ms``, in the header's
base timestamp with the delete-horizon attribute bit; the records' timestamps
stay), and a cleaning at or after the horizon removes them. So a consumer that
was behind still sees the delete for ``delete.retention.ms``, however old the
tombstone's own timestamp.
"""

from __future__ import annotations

import bisect
import collections
import struct
from collections.abc import Iterable, Mapping, Sequence

import attrs

from kafkapy.log.topic_config import LogConfig
from kafkapy.log.txn_index import AbortedTxn
from kafkapy.protocol.records import LOG_APPEND_TIME, Record, RecordBatch, build_record_batch

__all__ = ["CleanedSegment", "CleaningNeed", "LastRecord", "SegmentAge", "TransactionWalk",
           "build_offset_map", "clean_batches", "cleaning_need"]

_CONTROL_KEY = struct.Struct(">hh")  # ControlRecordType's key: version, type
_ABORT, _COMMIT = 0, 1  # ControlRecordType


@attrs.frozen
class SegmentAge:
    """What the choice of cleanable segments needs of a segment."""

    base_offset: int
    size: int
    largest_timestamp: int  # Kafka's largestTimestamp: the max timestamp, else the last write
    first_batch_timestamp: int | None  # the first batch's max timestamp (max.compaction.lag.ms)


@attrs.frozen
class CleaningNeed:
    """How dirty a compacted log is (Kafka's LogToClean): how many of its oldest segments a
    cleaning may rewrite, the bytes below the first dirty offset and the cleanable bytes from
    there, and whether ``max.compaction.lag.ms`` forces a cleaning."""

    count: int
    clean_bytes: int
    cleanable_bytes: int
    overdue: bool

    @property
    def ratio(self) -> float:
        """Cleanable bytes over clean plus cleanable ones (segments held back count in neither)."""
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    def due(self, min_cleanable_dirty_ratio: float) -> bool:
        """Kafka's grabFilthiestCompactedLog test: an overdue segment with something to clean, or
        a ratio strictly above ``min.cleanable.dirty.ratio``; never an empty log."""
        if self.clean_bytes + self.cleanable_bytes == 0:
            return False
        return (self.overdue and self.cleanable_bytes > 0) or self.ratio > min_cleanable_dirty_ratio


def _floor(segments: Sequence[SegmentAge], offset: int) -> int:
    """The index of the segment holding ``offset`` (the first segment for an offset below all)."""
    index = bisect.bisect_right(segments, offset, key=lambda segment: segment.base_offset) - 1
    return max(index, 0)


def cleaning_need(segments: Sequence[SegmentAge], first_dirty: int, last_stable: int,
                  config: LogConfig, now_ms: int) -> CleaningNeed:
    """Kafka's cleanableOffsets and calculateCleanableBytes. A cleaning stops before the active
    segment, before the segment holding the last stable offset, and, with
    ``min.compaction.lag.ms`` above 0, before the first dirty segment younger than that; segments
    already clean (below ``first_dirty``) never hold it back, whatever their timestamps. The
    ratio counts only what a cleaning could reach, so a log whose new writes are all held back
    is not cleaned again for them."""
    rolled = segments[:-1]
    dirty = rolled[_floor(segments, first_dirty):] if rolled else []
    uncleanable = segments[-1].base_offset
    lag = max(config.min_compaction_lag_ms, 0)
    if lag > 0:
        young = next((s for s in dirty if s.largest_timestamp > now_ms - lag), None)
        if young is not None:
            uncleanable = min(uncleanable, young.base_offset)
    # Kafka never lets the bound fall below the first dirty offset; nor past the last stable
    # offset here, even when a checkpoint claims the log clean beyond it.
    uncleanable = min(max(first_dirty, uncleanable), last_stable)
    # The first segment not cleaned: the rolled one holding that offset, else the active one.
    count = min(_floor(segments, uncleanable), len(segments) - 1)
    bound = segments[count].base_offset
    clean_bytes = sum(s.size for s in segments if s.base_offset < first_dirty)
    cleanable_bytes = sum(s.size for s in segments[_floor(segments, min(first_dirty, bound)):count])
    firsts = [s.first_batch_timestamp for s in dirty
              if s.first_batch_timestamp is not None and s.first_batch_timestamp > 0]
    overdue = bool(firsts) and min(firsts) < now_ms - max(config.max_compaction_lag_ms, 0)
    return CleaningNeed(count, clean_bytes, cleanable_bytes, overdue)


@attrs.frozen
class LastRecord:
    """What the producer table knows of an active producer (Kafka's LastRecord): the last offset
    of its last data batch (None when it has none), and its epoch."""

    last_data_offset: int | None
    producer_epoch: int


class TransactionWalk:
    """Which transactions a pass is inside, as it reads the batches in offset order (Kafka's
    CleanedTransactionMetadata). One walk per pass."""

    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._pending = collections.deque(sorted(aborted, key=lambda txn: txn.first_offset))
        self._aborted_open: dict[int, bool] = {}  # producer id -> a batch of it was read
        self._committed_open: set[int] = set()

    def _enter(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            self._aborted_open.setdefault(self._pending.popleft().producer_id, False)

    def data_batch(self, batch: RecordBatch) -> bool:
        """Whether the batch belongs to an aborted transaction (its records all go)."""
        self._enter(batch.last_offset)
        if not batch.is_transactional:
            return False
        if batch.producer_id in self._aborted_open:
            self._aborted_open[batch.producer_id] = True
            return True
        self._committed_open.add(batch.producer_id)
        return False

    def marker(self, batch: RecordBatch) -> bool:
        """Whether this control batch may go (once past delete.retention.ms): its transaction
        has no record left in the log."""
        self._enter(batch.last_offset)
        records = batch.record_list()
        if not records:  # a marker already emptied by an earlier cleaning
            return True
        key = records[0].key or b""
        kind = _CONTROL_KEY.unpack_from(key)[1] if len(key) >= _CONTROL_KEY.size else None
        if kind == _ABORT:
            return not self._aborted_open.pop(batch.producer_id, False)
        if kind == _COMMIT:
            was_read = batch.producer_id in self._committed_open
            self._committed_open.discard(batch.producer_id)
            return not was_read
        return False  # a control type we do not know: keep it


def build_offset_map(batches: Iterable[RecordBatch], walk: TransactionWalk | None = None) -> dict[bytes, int]:
    """Every key's last offset (Kafka's SkimpyOffsetMap, exact rather than hashed); markers and
    aborted records never count."""
    walk = walk or TransactionWalk()
    last: dict[bytes, int] = {}
    for batch in batches:
        if batch.is_control:
            walk.marker(batch)  # it ends a transaction: later batches of its producer are not in it
            continue
        if walk.data_batch(batch):
            continue
        for record in batch.record_list():
            if record.key is not None:
                last[record.key] = record.offset
    return last


@attrs.frozen
class CleanedSegment:
    """A segment's batches after cleaning, how many records went, and the offsets of the markers
    whose transactions still have a batch in the log (the transaction index keeps only the
    entries of those)."""

    data: bytes
    removed: int  # records
    kept_markers: frozenset[int]
    changed: bool  # a batch went or was rewritten (an emptied one going removes no record)


def _emptied(batch: RecordBatch) -> bytes:
    """The batch as a header without records, still spanning its offsets (Kafka's empty header:
    no compression, no base timestamp, the max timestamp kept)."""
    return build_record_batch(
        (),
        base_offset=batch.base_offset,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        timestamp_type=batch.timestamp_type,
        partition_leader_epoch=batch.partition_leader_epoch,
        base_timestamp=-1,
        max_timestamp=batch.max_timestamp,
        last_offset_delta=batch.last_offset_delta,
    )


def _holds_last_of_producer(batch: RecordBatch, last_records: Mapping[int, LastRecord]) -> bool:
    last = last_records.get(batch.producer_id) if batch.producer_id >= 0 else None
    if last is None:
        return False
    if last.last_data_offset is not None:
        return batch.last_offset == last.last_data_offset
    return batch.is_control and batch.producer_epoch == last.producer_epoch


def _rebuilt(batch: RecordBatch, kept: list[Record], delete_horizon_ms: int | None) -> bytes:
    """The batch with only ``kept``, still ending at its original last offset, as Kafka's cleaner
    writes a magic-2 batch it keeps part of: the producer's last sequence (base sequence plus the
    last offset delta) and the offset the next batch follows stay what they were."""
    return build_record_batch(
        kept,
        base_offset=batch.base_offset,
        compression=batch.compression,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        timestamp_type=batch.timestamp_type,
        partition_leader_epoch=batch.partition_leader_epoch,
        max_timestamp=batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None,
        last_offset_delta=batch.last_offset_delta,
        delete_horizon_ms=delete_horizon_ms,
    )


def _past_horizon(batch: RecordBatch, now_ms: int) -> bool:
    """Whether a cleaning stamped this batch's horizon and it has come (Kafka compares with <=)."""
    horizon = batch.delete_horizon_ms
    return horizon is not None and horizon <= now_ms


def clean_batches(
    batches: Iterable[RecordBatch],
    offset_map: dict[bytes, int],
    *,
    now_ms: int,
    delete_retention_ms: int,
    walk: TransactionWalk | None = None,
    last_records: Mapping[int, LastRecord] | None = None,
    round_end: int | None = None,
) -> CleanedSegment:
    """The segment's batches with superseded, deleted and aborted records removed. ``walk``
    carries the transactions across the segments of one pass; ``now_ms`` is the cleaning's time,
    which the delete horizons it stamps (now + ``delete_retention_ms``) and finds are held to.
    ``round_end`` is the first offset the pass does not clean: the batch ending just below it is
    kept even when emptied (KAFKA-17076), so the cleaned segments still reach that offset and a
    log whose next segment is lost in a crash does not come back with a shorter end.

    Per batch, as Kafka's filter decides: all records kept and nothing to stamp, the original
    bytes; some kept, or a horizon to stamp (tombstones, or a marker that may go, in a batch
    without one), a rebuilt batch; none, an empty header if it holds its producer's last entry,
    else nothing."""
    walk = walk or TransactionWalk()
    last_records = last_records or {}
    out = bytearray()
    removed = 0
    kept_markers: set[int] = set()
    changed = False
    for batch in batches:
        kept: list[Record] | None = None  # None: every record stays
        may_go = False  # a tombstone kept, or a marker whose transaction is done: needs a horizon
        if batch.is_control:
            may_go = walk.marker(batch)
            if may_go and _past_horizon(batch, now_ms):
                kept = []
            elif batch.record_count and not may_go:
                # Kafka's cleaned transaction index holds an aborted transaction only while some
                # batch of it is left: a marker kept for its horizon alone has no entry.
                kept_markers.add(batch.base_offset)
        elif walk.data_batch(batch):  # an aborted transaction's
            kept = []
        else:
            records = batch.record_list()
            expired = _past_horizon(batch, now_ms)
            kept = [record for record in records
                    if record.key is not None
                    and offset_map.get(record.key) == record.offset
                    and not (expired and record.value is None)]
            may_go = any(record.value is None for record in kept)
            if len(kept) == len(records):
                kept = None
        stamp = may_go and not batch.has_delete_horizon and batch.record_count > 0
        if kept is None and batch.record_count and not stamp:
            out += batch.raw
            continue
        if kept is None:
            kept = batch.record_list()
        removed += batch.record_count - len(kept)
        if kept:
            horizon = now_ms + delete_retention_ms if stamp else batch.delete_horizon_ms
            out += _rebuilt(batch, kept, horizon)
        elif not (_holds_last_of_producer(batch, last_records) or batch.last_offset + 1 == round_end):
            changed = True  # the batch goes
            continue
        elif batch.record_count:
            out += _emptied(batch)
        else:
            out += batch.raw  # already empty: as it was
            continue
        changed = True
    return CleanedSegment(bytes(out), removed, frozenset(kept_markers), changed)
