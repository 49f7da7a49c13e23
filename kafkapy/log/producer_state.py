"""Per-partition idempotent producer state: sequence checks, duplicates, expiry, snapshots.

Theory of operation
-------------------
An idempotent producer numbers its batches per partition (``base_sequence``,
counting records) under a ``(producer_id, producer_epoch)`` it got from
InitProducerId.  For each producer id the partition keeps a
:class:`ProducerStateEntry`: the epoch, the sequence and offset ranges of the last
five batches (``NUM_BATCHES_TO_RETAIN``, the producer's
``max.in.flight.requests.per.connection`` limit), the last timestamp, and for
transactions the coordinator epoch and the first offset of the open transaction.

A client batch arrives after :func:`kafkapy.log.append.assign_offsets`, so its
offsets are known.  :meth:`ProducerStateManager.check_and_update` first looks for
a retained batch of the same epoch with the same sequence range -- a retry of a
batch already in the log, answered with its original offsets and never appended
again -- and otherwise classifies the batch against the entry with
:data:`SEQUENCE_RULES`, the rule table below (first matching row wins), which is
Kafka's ``ProducerAppendInfo.checkProducerEpoch``/``checkSequence`` (apache/kafka
1eb7644, Oct 2024) written as data:

===========  ===============  ============  =============  =========================
batch epoch  producer epoch   seq == 0      seq follows    verdict
             known
===========  ===============  ============  =============  =========================
older        any              any           any            INVALID_PRODUCER_EPOCH
newer        no               any           any            accept
newer        yes              yes           any            accept (epoch bump)
newer        yes              no            any            OUT_OF_ORDER_SEQUENCE_NUMBER
same         no               any           any            accept
same         yes              any           yes            accept
same         yes              any           no             OUT_OF_ORDER_SEQUENCE_NUMBER
===========  ===============  ============  =============  =========================

"Known" means the entry has an epoch at all: an unknown (or expired) producer id
is accepted at any sequence, which is current Kafka's rule since KIP-360; brokers
no longer answer UNKNOWN_PRODUCER_ID on the produce path.  "Follows" is
``seq == last_seq + 1``, wrapping from 2**31-1 to 0; an entry without batches has
``last_seq == -1``, so it needs 0.  An accepted batch of a new epoch drops the
retained batches.  A non-transactional batch while a transaction is open is
INVALID_TXN_STATE.

Transactions.  A producer's first transactional batch opens its transaction in the
partition (``current_txn_first_offset``); the table keeps the open ones by first
offset, and the earliest is :attr:`ProducerStateManager.first_unstable_offset`, which
holds the partition's last stable offset back.  An end-transaction marker (a control
batch written for the coordinator, :meth:`ProducerStateManager.complete_transaction`)
closes it: an older producer epoch is INVALID_PRODUCER_EPOCH and an older coordinator
epoch TRANSACTION_COORDINATOR_FENCED; a marker for a producer with no open
transaction completes nothing (Kafka emits no CompletedTxn for an empty transaction).
An aborted one becomes an :class:`~kafkapy.log.txn_index.AbortedTxn` whose last
stable offset is the next open transaction's first offset, else the marker's offset + 1
(Kafka's ``lastStableOffset(completedTxn)``).  With one replica the high watermark is
the log end at once, so Kafka's "unreplicated" completed transactions never hold the
LSO here.

Producers idle for ``producer.id.expiration.ms`` (Kafka's default one day,
measured from the last batch's max timestamp) and without an open transaction are
forgotten by :meth:`ProducerStateManager.remove_expired`, which the broker calls
periodically (Kafka: every ``producer.id.expiration.check.interval.ms``).

Snapshots are Kafka's ``<20-digit offset>.snapshot`` files
(``ProducerSnapshot.json`` version 1): ``version int16, crc uint32`` (CRC-32C of
everything after it), then an int32 count of entries of ``producer_id int64,
epoch int16, last_sequence int32, last_offset int64, offset_delta int32,
timestamp int64, coordinator_epoch int32, current_txn_first_offset int64``.  An
entry keeps only its last batch, so after a restart only a retry of the last batch
is recognised as a duplicate, as in Kafka.  Recovery loads the newest snapshot and
replays the log's batches from its offset without sequence checks (Kafka's
replication origin).
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

import attrs

from kafkapy.errors import DecodeError, ErrorCode, KafkaApiError
from kafkapy.log.compaction import LastRecord
from kafkapy.log.txn_index import AbortedTxn
from kafkapy.protocol.records import RecordBatch, crc32c

__all__ = [
    "ABORT",
    "COMMIT",
    "CONTROL_RECORD_KEY",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "END_TXN_MARKER_VALUE",
    "NUM_BATCHES_TO_RETAIN",
    "SEQUENCE_RULES",
    "BatchMetadata",
    "CompletedTxn",
    "CorruptSnapshotError",
    "ProducerBatch",
    "ProducerStateEntry",
    "ProducerStateError",
    "ProducerStateManager",
    "SnapshotStore",
    "Verdict",
    "decode_snapshot",
    "encode_snapshot",
    "increment_sequence",
    "rules_markdown",
    "snapshot_file_name",
]

NUM_BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 24 * 60 * 60 * 1000  # producer.id.expiration.ms
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
_INT32_MAX = (1 << 31) - 1

_SNAPSHOT_VERSION = 1  # ProducerSnapshot.json validVersions
_SNAPSHOT_HEAD = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_CRC_FROM = 6  # the CRC covers everything after version and crc
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from 2**31-1 to 0 (DefaultRecordBatch.incrementSequence)."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def _decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return _INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


class ProducerStateError(KafkaApiError):
    """A batch the producer state refuses, with Kafka's error code."""


class CorruptSnapshotError(DecodeError):
    """Snapshot bytes that fail the version, layout or CRC check; recovery then replays the log."""


@attrs.frozen
class BatchMetadata:
    """One retained batch: Kafka's BatchMetadata (last sequence, last offset, offset delta, timestamp)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return _decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@attrs.frozen
class ProducerBatch:
    """The producer fields of one batch whose offsets are assigned, which is all the state reads."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int
    is_transactional: bool = False

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.last_offset - self.first_offset)

    @classmethod
    def of(cls, batch: RecordBatch) -> ProducerBatch:
        return cls(
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            first_offset=batch.base_offset,
            last_offset=batch.last_offset,
            max_timestamp=batch.max_timestamp,
            is_transactional=batch.is_transactional,
        )


@attrs.frozen
class CompletedTxn:
    """A transaction closed by a marker: what the transaction index will record."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@attrs.define
class ProducerStateEntry:
    """Everything a partition remembers about one producer id (Kafka's ProducerStateEntry)."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batches: deque[BatchMetadata] = attrs.field(factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def update_epoch(self, epoch: int) -> None:
        """A new epoch starts the sequence over, so the retained batches mean nothing any more."""
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        self.update_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def find_duplicate(self, batch: ProducerBatch) -> BatchMetadata | None:
        if batch.producer_epoch != self.producer_epoch:
            return None
        first, last = batch.base_sequence, batch.last_sequence
        return next((b for b in self.batches if b.first_seq == first and b.last_seq == last), None)


# --- the sequence rule table -------------------------------------------------------


class EpochRelation(enum.Enum):
    OLDER = "older"
    SAME = "same"
    NEWER = "newer"


class Verdict(enum.Enum):
    ACCEPT = "accept"
    INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"
    OUT_OF_ORDER_SEQUENCE_NUMBER = "OUT_OF_ORDER_SEQUENCE_NUMBER"


# (batch epoch vs entry, entry epoch known, seq == 0, seq follows last) -> verdict; None matches
# anything and the first matching row wins.  The module docstring shows the same table.
SEQUENCE_RULES: tuple[tuple[EpochRelation, bool | None, bool | None, bool | None, Verdict], ...] = (
    (EpochRelation.OLDER, None, None, None, Verdict.INVALID_PRODUCER_EPOCH),
    (EpochRelation.NEWER, False, None, None, Verdict.ACCEPT),
    (EpochRelation.NEWER, True, True, None, Verdict.ACCEPT),
    (EpochRelation.NEWER, True, False, None, Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (EpochRelation.SAME, False, None, None, Verdict.ACCEPT),
    (EpochRelation.SAME, True, None, True, Verdict.ACCEPT),
    (EpochRelation.SAME, True, None, False, Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER),
)


def rules_markdown() -> str:
    """:data:`SEQUENCE_RULES` as the markdown table docs/log-append.md shows (a test keeps them equal)."""

    def cell(value: bool | None) -> str:
        return "any" if value is None else "yes" if value else "no"

    lines = [
        "| batch epoch | entry has an epoch | seq == 0 | seq follows the last | verdict |",
        "|:---|:---|:---|:---|:---|",
    ]
    for relation, known, zero, follows, verdict in SEQUENCE_RULES:
        shown = "accept" if verdict is Verdict.ACCEPT else f"`{verdict.value}`"
        lines.append(f"| {relation.value} | {cell(known)} | {cell(zero)} | {cell(follows)} | {shown} |")
    return "\n".join(lines)


def classify(entry: ProducerStateEntry, batch: ProducerBatch) -> Verdict:
    """Look the batch up in :data:`SEQUENCE_RULES`."""
    if batch.producer_epoch < entry.producer_epoch:
        relation = EpochRelation.OLDER
    elif batch.producer_epoch > entry.producer_epoch:
        relation = EpochRelation.NEWER
    else:
        relation = EpochRelation.SAME
    known = entry.producer_epoch != NO_PRODUCER_EPOCH
    seq = batch.base_sequence
    zero = seq == 0
    last = entry.last_seq
    follows = seq == last + 1 or (seq == 0 and last == _INT32_MAX)
    facts = (known, zero, follows)
    for rel, *pattern, verdict in SEQUENCE_RULES:
        if rel is relation and all(p is None or p == f for p, f in zip(pattern, facts)):
            return verdict
    raise AssertionError(f"SEQUENCE_RULES has no row for {relation} {facts}")  # the table is total


# --- snapshots ---------------------------------------------------------------------


def snapshot_file_name(offset: int) -> str:
    """Kafka's name for a producer snapshot taken at ``offset`` (LogFileUtils.producerSnapshotFile)."""
    return f"{offset:020d}.snapshot"


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """Kafka's producer snapshot file contents for these entries."""
    body = bytearray()
    count = 0
    for e in entries:
        body += _SNAPSHOT_ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
        count += 1
    out = bytearray(_SNAPSHOT_HEAD.pack(_SNAPSHOT_VERSION, 0, count)) + body
    crc = crc32c(memoryview(out)[_SNAPSHOT_CRC_FROM:])
    struct.pack_into(">I", out, 2, crc)
    return bytes(out)


def decode_snapshot(data: bytes | bytearray | memoryview) -> list[ProducerStateEntry]:
    """Entries of a snapshot file; CorruptSnapshotError if it is not one Kafka would load."""
    raw = bytes(data)
    if len(raw) < _SNAPSHOT_HEAD.size:
        raise CorruptSnapshotError(f"snapshot of {len(raw)} bytes is shorter than its header", offset=0)
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(raw, 0)
    if version != _SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}", offset=0)
    if count < 0 or len(raw) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(
            f"snapshot says {count} entries but holds {len(raw) - _SNAPSHOT_HEAD.size} bytes of them",
            offset=6,
        )
    computed = crc32c(raw[_SNAPSHOT_CRC_FROM:])
    if computed != crc:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}",
            offset=2,
        )
    entries = []
    for pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch, txn_first in (
        _SNAPSHOT_ENTRY.iter_unpack(raw[_SNAPSHOT_HEAD.size :])
    ):
        entry = ProducerStateEntry(
            pid, epoch, coordinator_epoch, timestamp, txn_first if txn_first >= 0 else None
        )
        if last_offset >= 0:
            entry.batches.append(BatchMetadata(last_seq, last_offset, delta, timestamp))
        entries.append(entry)
    return entries


class SnapshotStore(Protocol):
    """Where snapshots live: the segment backend's files, or nowhere for the memory backend."""

    def write_snapshot(self, offset: int, data: bytes) -> None: ...

    def latest_snapshot(self) -> tuple[int, bytes] | None: ...

    def remove_snapshot(self, offset: int) -> None: ...


# --- the manager -------------------------------------------------------------------

# The EndTransactionMarker record: the key is ControlRecordType's (version, type: 0 ABORT, 1 COMMIT),
# the value EndTransactionMarker's (version, coordinator epoch); both versions 0. end_txn_marker.py
# writes what this reads.
CONTROL_RECORD_KEY = struct.Struct(">hh")
END_TXN_MARKER_VALUE = struct.Struct(">hi")
ABORT, COMMIT = 0, 1


class ProducerStateManager:
    """One partition's producer table (Kafka's ProducerStateManager, without files of its own).

    ``map_end_offset`` is the next offset the table has seen; a snapshot is
    named after it, and recovery replays the log from there.
    """

    def __init__(self, *, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        self.last_snapshot_offset = 0
        self.ongoing: dict[int, int] = {}  # open transactions: first offset -> producer id
        self.first_unstable_offset: int | None = None  # min(ongoing), kept as it changes
        # KIP-890: per producer id, the guard of a verification with the transaction coordinator
        # in flight (Kafka's VerificationStateEntry); gone once a transactional batch or a marker
        # of that producer is recorded, so a verification that an abort overtook is worth nothing.
        self.verifying: dict[int, object] = {}

    def in_transaction(self, producer_id: int) -> bool:
        """Whether the producer has an open transaction here (Kafka's hasOngoingTransaction: any
        epoch): its batches need no verification with the coordinator."""
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None

    def verification_guard(self, producer_id: int) -> object:
        """The guard of the producer's verification, made when none is in flight."""
        guard = self.verifying.get(producer_id)
        if guard is None:
            guard = self.verifying[producer_id] = object()
        return guard

    def last_records(self) -> dict[int, LastRecord]:
        """Each active producer's last data offset and epoch: the batches compaction must keep."""
        return {pid: LastRecord(entry.last_data_offset if entry.batches else None, entry.producer_epoch)
                for pid, entry in self.producers.items()}

    def _open_txn(self, producer_id: int, first_offset: int) -> None:
        self.ongoing[first_offset] = producer_id
        if self.first_unstable_offset is None or first_offset < self.first_unstable_offset:
            self.first_unstable_offset = first_offset

    def _close_txn(self, first_offset: int) -> None:
        self.ongoing.pop(first_offset, None)
        if first_offset == self.first_unstable_offset:
            self.first_unstable_offset = min(self.ongoing) if self.ongoing else None

    def _rebuild_ongoing(self) -> None:
        self.ongoing = {}
        self.first_unstable_offset = None
        for entry in self.producers.values():
            if entry.current_txn_first_offset is not None:
                self._open_txn(entry.producer_id, entry.current_txn_first_offset)

    def aborted_entry(self, completed: CompletedTxn) -> AbortedTxn:
        """The transaction index entry of an aborted transaction just completed: the last stable
        offset is the next open transaction's first offset, else the marker's offset + 1."""
        stable = self.first_unstable_offset
        return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                          completed.last_offset + 1 if stable is None else stable)

    # -- the append path ------------------------------------------------------------

    def would_append(self, batch: ProducerBatch | RecordBatch) -> bool:
        """Whether ``check_and_update`` would take the batch as new (neither a duplicate nor
        refused), recording nothing: a request's fast path checks every partition before it
        appends to any."""
        if batch.producer_id < 0:
            return True
        info = batch if isinstance(batch, ProducerBatch) else ProducerBatch.of(batch)
        entry = self.producers.get(info.producer_id)
        if entry is not None and entry.find_duplicate(info) is not None:
            return False
        current = entry if entry is not None else ProducerStateEntry(info.producer_id)
        return classify(current, info) is Verdict.ACCEPT and not (
            current.current_txn_first_offset is not None and not info.is_transactional)

    def check_and_update(self, batch: ProducerBatch | RecordBatch) -> BatchMetadata | None:
        """Check a client batch whose offsets are assigned and record it.

        Returns None when the batch is new (append it), or the retained metadata
        of the batch it duplicates (answer with those offsets, append nothing).
        Raises ProducerStateError with Kafka's code otherwise; nothing is
        recorded then.  Batches without a producer id pass untouched.
        """
        if batch.producer_id < 0:  # not idempotent: only the map's end moves (nothing built for it)
            self.map_end_offset = max(self.map_end_offset, batch.last_offset + 1)
            return None
        info = batch if isinstance(batch, ProducerBatch) else ProducerBatch.of(batch)
        entry = self.producers.get(info.producer_id)
        if entry is not None:
            duplicate = entry.find_duplicate(info)
            if duplicate is not None:
                return duplicate
        current = entry if entry is not None else ProducerStateEntry(info.producer_id)
        verdict = classify(current, info)
        if verdict is Verdict.INVALID_PRODUCER_EPOCH:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {info.producer_id} at offset {info.first_offset} is "
                f"{info.producer_epoch}, "
                f"which is smaller than the last seen epoch {current.producer_epoch}",
            )
        if verdict is Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER:
            raise ProducerStateError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for producer {info.producer_id} at offset "
                f"{info.first_offset}: "
                f"{info.base_sequence} (incoming seq. number), epoch {info.producer_epoch}, "
                f"{current.last_seq} (current end sequence number) in epoch {current.producer_epoch}",
            )
        if current.current_txn_first_offset is not None and not info.is_transactional:
            raise ProducerStateError(
                ErrorCode.INVALID_TXN_STATE,
                f"Expected transactional write from producer {info.producer_id} at offset "
                f"{info.first_offset}",
            )
        self._record(current, info)
        return None

    def record_checked(self, batch: ProducerBatch | RecordBatch) -> None:
        """Record a batch :meth:`would_append` took as new in this same loop step, its offsets
        now assigned: what :meth:`check_and_update` records, without its checks again."""
        if batch.producer_id < 0:
            self.map_end_offset = max(self.map_end_offset, batch.last_offset + 1)
            return
        info = batch if isinstance(batch, ProducerBatch) else ProducerBatch.of(batch)
        entry = self.producers.get(info.producer_id)
        self._record(entry if entry is not None else ProducerStateEntry(info.producer_id), info)

    def _record(self, entry: ProducerStateEntry, info: ProducerBatch) -> None:
        entry.add_batch(
            info.producer_epoch,
            info.last_sequence,
            info.last_offset,
            info.last_offset - info.first_offset,
            info.max_timestamp,
        )
        if info.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = info.first_offset
            self._open_txn(info.producer_id, info.first_offset)
            if self.verifying:
                self.verifying.pop(info.producer_id, None)
        self.producers[info.producer_id] = entry
        self.map_end_offset = max(self.map_end_offset, info.last_offset + 1)

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                     offset: int) -> None:
        """Raise what :meth:`complete_transaction` would refuse the marker with, changing nothing:
        so the marker is appended only once it is known to be accepted."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {producer_id} at offset {offset} is {producer_epoch}, "
                f"which is smaller than the last seen epoch {entry.producer_epoch}",
            )
        if entry.coordinator_epoch > coordinator_epoch:
            raise ProducerStateError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"Invalid coordinator epoch for producerId {producer_id} at offset {offset}: "
                f"{coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)",
            )

    def complete_transaction(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        offset: int,
        timestamp: int,
        *,
        aborted: bool,
        strict: bool = True,
    ) -> CompletedTxn | None:
        """Apply an end-transaction marker at ``offset`` (ProducerAppendInfo.appendEndTxnMarker).

        ``strict=False`` is the replay of markers already in the log: stale
        epochs are applied rather than refused, as Kafka's replication origin does.
        """
        entry = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        if strict:
            self.check_marker(producer_id, producer_epoch, coordinator_epoch, offset)
        completed = (
            CompletedTxn(producer_id, entry.current_txn_first_offset, offset, aborted)
            if entry.current_txn_first_offset is not None
            else None
        )
        entry.update_epoch(producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        if self.verifying:
            self.verifying.pop(producer_id, None)
        if entry.current_txn_first_offset is not None:
            self._close_txn(entry.current_txn_first_offset)
        entry.current_txn_first_offset = None
        entry.last_timestamp = timestamp
        self.producers[producer_id] = entry
        self.map_end_offset = max(self.map_end_offset, offset + 1)
        return completed

    # -- expiry ---------------------------------------------------------------------

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= (
            self.producer_id_expiration_ms
        )

    def remove_expired(self, now_ms: int) -> list[int]:
        """Forget producers idle for producer.id.expiration.ms; returns their ids."""
        gone = [pid for pid, entry in self.producers.items() if self.is_expired(entry, now_ms)]
        for pid in gone:
            del self.producers[pid]
        return gone

    # -- snapshots and recovery -------------------------------------------------------

    def snapshot(self) -> bytes:
        return encode_snapshot(self.producers.values())

    def take_snapshot(self, store: SnapshotStore) -> int | None:
        """Write a snapshot at ``map_end_offset`` unless one is there already; returns its offset."""
        if self.map_end_offset <= self.last_snapshot_offset:
            return None
        store.write_snapshot(self.map_end_offset, self.snapshot())
        self.last_snapshot_offset = self.map_end_offset
        return self.map_end_offset

    def load_snapshot(self, offset: int, data: bytes, now_ms: int) -> None:
        """Replace the table with a snapshot's entries, dropping those already expired."""
        entries = decode_snapshot(data)
        self.producers = {e.producer_id: e for e in entries if not self.is_expired(e, now_ms)}
        self.map_end_offset = self.last_snapshot_offset = offset
        self._rebuild_ongoing()

    def replay(self, batches: Iterable[RecordBatch],
               on_aborted: Callable[[AbortedTxn], object] | None = None) -> None:
        """Rebuild from batches already in the log: no sequence checks, markers applied leniently.
        ``on_aborted`` sees each ABORT marker's index entry, so the caller can restore the
        transaction index (Kafka rebuilds it when recovering a segment)."""
        for batch in batches:
            if batch.producer_id >= 0:
                if batch.is_control:
                    completed = self._replay_marker(batch)
                    if completed is not None and completed.is_aborted and on_aborted is not None:
                        on_aborted(self.aborted_entry(completed))
                else:
                    info = ProducerBatch.of(batch)
                    entry = self.producers.get(info.producer_id) or ProducerStateEntry(info.producer_id)
                    self._record(entry, info)
            self.map_end_offset = max(self.map_end_offset, batch.next_offset)

    def _replay_marker(self, batch: RecordBatch) -> CompletedTxn | None:
        records = batch.record_list(check_crc=False)
        if not records:  # a marker whose transaction was cleaned away
            return None
        key, value = records[0].key or b"", records[0].value or b""
        if len(key) < CONTROL_RECORD_KEY.size or len(value) < END_TXN_MARKER_VALUE.size:
            raise DecodeError("control record too short for an end-transaction marker", field="records")
        _version, kind = CONTROL_RECORD_KEY.unpack_from(key)
        _value_version, coordinator_epoch = END_TXN_MARKER_VALUE.unpack_from(value)
        return self.complete_transaction(
            batch.producer_id,
            batch.producer_epoch,
            coordinator_epoch,
            batch.base_offset,
            batch.max_timestamp if records[0].timestamp is None else records[0].timestamp,
            aborted=kind == ABORT,
            strict=False,
        )

    def recover(
        self,
        store: SnapshotStore,
        batches_from: Callable[[int], Iterator[RecordBatch] | Iterable[RecordBatch]],
        now_ms: int,
        *,
        log_start_offset: int = 0,
        on_aborted: Callable[[AbortedTxn], object] | None = None,
    ) -> None:
        """Load the newest usable snapshot and replay the log after it, as Kafka's
        truncateAndReload and loadFromSnapshot: a snapshot at or below the log start is removed
        (the log no longer holds what it summed up), and so is a corrupt one (a machine crash
        before its fsync), the next older one being tried; with none left, the whole log is
        replayed from its start."""
        self.producers = {}
        self.ongoing = {}
        self.first_unstable_offset = None
        self.map_end_offset = self.last_snapshot_offset = log_start_offset
        latest = store.latest_snapshot()
        while latest is not None:
            offset, data = latest
            if offset > log_start_offset:
                try:
                    self.load_snapshot(offset, data, now_ms)
                    break
                except CorruptSnapshotError:
                    self.producers = {}
                    self._rebuild_ongoing()
                    self.map_end_offset = self.last_snapshot_offset = log_start_offset
            store.remove_snapshot(offset)
            latest = store.latest_snapshot()
        self.replay(batches_from(self.map_end_offset), on_aborted)
