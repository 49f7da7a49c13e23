"""The share coordinator's state of its ``__share_group_state`` partitions, sans I/O (Kafka's
ShareCoordinatorShard).

Theory of operation
-------------------
Each share-partition (group id, topic id, partition) has one ``ShareStateValue``: its start offset
(SPSO) and the in-flight offset ranges past it that are not plain "AVAILABLE, never delivered"
(``StateBatch``: first and last offset, delivery state, delivery count), with three epochs:

* the *state epoch*, set by InitializeShareGroupState: a write that holds an older one is
  FENCED_STATE_EPOCH (the state was started again under it);
* the *leader epoch* of the share-partition leader that last read or wrote it: a write or read
  from an older leader is FENCED_LEADER_EPOCH (a leader that lost the partition cannot overwrite
  what the new one persisted);
* the *snapshot epoch*, which counts the snapshots.

Every operation returns the record to append and changes nothing itself: the caller appends the
record to the key's ``__share_group_state`` partition and then ``replay``s it, the one path that
changes state, the same path loading takes. So a failed append leaves the state as it was, and a
coordinator that loads the partition ends where the one that wrote it was.

A write becomes a ShareUpdate record carrying only what changed (start offset -1 when it did not
move), until ``snapshot_every`` updates followed the last snapshot
(``share.coordinator.snapshot.update.records.per.snapshot``); then it becomes a ShareSnapshot of
the whole merged state with the next snapshot epoch, so a load never replays more than that many
updates per key past a snapshot. Merging (Kafka's PersisterStateBatchCombiner): a newer range
wins over the offsets it covers, ranges below the start offset go, and touching ranges with the
same state and count join; in one pass when both sides are sorted and disjoint, as a leader's
writes and the kept states are.
"""

from __future__ import annotations

import enum
import itertools
import uuid
from collections.abc import Iterable, Sequence

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.partitioning import java_string_hash
from kafkapy.store.base import encode_uuid

__all__ = ["DEFAULT_LEADER_EPOCH", "NO_EPOCH", "NO_TIMESTAMP", "UNINITIALIZED_START_OFFSET", "RecordType",
           "SharePartitionKey", "ShareStateRecord", "ShareStateShard", "ShareStateValue", "StateBatch",
           "check_key", "combine_batches", "coordinator_key", "overlay_each", "state_partition_for"]

SharePartitionKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)
NO_EPOCH = -1  # a write's "leave the epoch as it is", an update record's state epoch
UNINITIALIZED_START_OFFSET = -1  # Kafka's PartitionFactory: the share-partition never started
DEFAULT_STATE_EPOCH = 0  # Kafka's PartitionFactory.DEFAULT_STATE_EPOCH: what a read of nothing answers
NO_TIMESTAMP = -1  # a snapshot's create/write time not known (or an update's, which has none)
DEFAULT_LEADER_EPOCH = 0  # Kafka's PartitionFactory: a summary of nothing stored answers it
_INT32_MIN = -(1 << 31)


@attrs.frozen
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int  # SharePartition's RecordState ids: 0 available, 2 acknowledged, 4 archived
    delivery_count: int


@attrs.frozen
class ShareStateValue:
    """Kafka's ShareGroupOffset: what a ShareSnapshot holds (an update fills what changed)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = ()
    #: A snapshot's CreateTimestamp (when the state was initialized) and WriteTimestamp (when the
    #: snapshot was written), epoch ms, as Kafka 4.1 writes them; -1 unknown (an update has none).
    create_timestamp: int = NO_TIMESTAMP
    write_timestamp: int = NO_TIMESTAMP


class RecordType(enum.IntEnum):
    """A ``__share_group_state`` record's type: the int16 its key starts with."""

    SNAPSHOT = 0  # ShareSnapshotKey / ShareSnapshotValue: the whole state
    UPDATE = 1  # ShareUpdateKey / ShareUpdateValue: what changed since the snapshot


@attrs.frozen
class ShareStateRecord:
    """One record: a snapshot or an update of ``key``; ``value`` None is a tombstone. An update's
    value carries state epoch -1 (its schema has none)."""

    kind: RecordType
    key: SharePartitionKey
    value: ShareStateValue | None


def coordinator_key(key: SharePartitionKey) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: ``group:topicId:partition``, the topic id as
    Kafka prints it; FindCoordinator's key for key type SHARE."""
    group_id, topic_id, partition = key
    return f"{group_id}:{encode_uuid(topic_id)}:{partition}"


def state_partition_for(key: SharePartitionKey | str, partition_count: int) -> int:
    """Kafka's ShareCoordinatorService.partitionFor: ``Utils.abs(key.hashCode()) % partitions``
    over the coordinator key (``abs(MIN_VALUE)`` is 0 there)."""
    text = key if isinstance(key, str) else coordinator_key(key)
    hashed = java_string_hash(text)
    return (0 if hashed == _INT32_MIN else abs(hashed)) % partition_count


def combine_batches(current: Iterable[StateBatch], updates: Iterable[StateBatch],
                    start_offset: int) -> tuple[StateBatch, ...]:
    """``updates`` laid over ``current`` (newer wins where they overlap, and among ``updates``
    the later), cut at ``start_offset``, sorted, touching equal neighbours joined.

    Both are sorted and disjoint in every write a share-partition leader sends (its window) and
    in every kept state (this function's answer), so they are merged in one pass
    (``_overlay_sorted``); anything else is laid one update at a time (``overlay_each``, the
    plain path a hypothesis test holds the fast one equal to)."""
    kept, changes = list(current), list(updates)
    if _sorted_disjoint(kept) and _sorted_disjoint(changes):
        laid = _overlay_sorted(kept, changes)
    else:
        laid = overlay_each(kept, changes)
    return _normalized(laid, start_offset)


def overlay_each(current: Sequence[StateBatch], updates: Sequence[StateBatch]) -> list[StateBatch]:
    """The plain overlay: each update cuts the offsets it covers out of what is there."""
    batches = list(current)
    for update in updates:
        kept: list[StateBatch] = []
        for batch in batches:
            if batch.last_offset < update.first_offset or batch.first_offset > update.last_offset:
                kept.append(batch)
                continue
            if batch.first_offset < update.first_offset:
                kept.append(attrs.evolve(batch, last_offset=update.first_offset - 1))
            if batch.last_offset > update.last_offset:
                kept.append(attrs.evolve(batch, first_offset=update.last_offset + 1))
        kept.append(update)
        batches = kept
    return batches


def _sorted_disjoint(batches: Sequence[StateBatch]) -> bool:
    return all(before.last_offset < after.first_offset for before, after in itertools.pairwise(batches))


def _overlay_sorted(current: Sequence[StateBatch], updates: Sequence[StateBatch]) -> list[StateBatch]:
    """``overlay_each`` for sorted, disjoint inputs, in one pass over both."""
    laid: list[StateBatch] = []
    pending = list(current)
    index = 0
    for update in updates:
        while index < len(pending) and pending[index].first_offset < update.first_offset:
            batch = pending[index]
            if batch.last_offset < update.first_offset:
                laid.append(batch)
                index += 1
            else:  # it runs into the update: its head stays, the rest is looked at below
                laid.append(attrs.evolve(batch, last_offset=update.first_offset - 1))
                pending[index] = attrs.evolve(batch, first_offset=update.first_offset)
                break
        while index < len(pending) and pending[index].first_offset <= update.last_offset:
            batch = pending[index]
            if batch.last_offset <= update.last_offset:
                index += 1  # covered
            else:
                pending[index] = attrs.evolve(batch, first_offset=update.last_offset + 1)
                break
        laid.append(update)
    laid.extend(pending[index:])
    return laid


def _normalized(batches: Iterable[StateBatch], start_offset: int) -> tuple[StateBatch, ...]:
    clipped = sorted((attrs.evolve(b, first_offset=max(b.first_offset, start_offset))
                      for b in batches if b.last_offset >= start_offset), key=lambda b: b.first_offset)
    joined: list[StateBatch] = []
    for batch in clipped:
        last = joined[-1] if joined else None
        if (last is not None and last.last_offset + 1 == batch.first_offset
                and last.delivery_state == batch.delivery_state
                and last.delivery_count == batch.delivery_count):
            joined[-1] = attrs.evolve(last, last_offset=batch.last_offset)
        else:
            joined.append(batch)
    return tuple(joined)


def _check_batches(batches: Sequence[StateBatch]) -> None:
    for batch in batches:
        if batch.first_offset < 0 or batch.last_offset < batch.first_offset or batch.delivery_count < 0:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                f"Invalid state batch {batch.first_offset}-{batch.last_offset}.")


class ShareStateShard:
    """The share-partitions of the ``__share_group_state`` partitions this coordinator loaded."""

    def __init__(self, snapshot_every: int) -> None:
        self.snapshot_every = snapshot_every
        self.states: dict[SharePartitionKey, ShareStateValue] = {}
        self._updates: dict[SharePartitionKey, int] = {}  # updates since the key's last snapshot

    # -- the one path that changes state --------------------------------------------------------

    def replay(self, record: ShareStateRecord) -> None:
        key, value = record.key, record.value
        if value is None:
            self.states.pop(key, None)
            self._updates.pop(key, None)
            return
        if record.kind is RecordType.SNAPSHOT:
            self.states[key] = value
            self._updates[key] = 0
            return
        current = self.states.get(key)
        if current is None:
            return  # an update without its snapshot (trimmed away): nothing to lay it over
        start = value.start_offset
        if start == UNINITIALIZED_START_OFFSET:
            start = current.start_offset
        self.states[key] = ShareStateValue(
            snapshot_epoch=current.snapshot_epoch, state_epoch=current.state_epoch,
            leader_epoch=max(current.leader_epoch, value.leader_epoch),
            start_offset=start, batches=combine_batches(current.batches, value.batches, start),
            create_timestamp=current.create_timestamp, write_timestamp=current.write_timestamp)
        self._updates[key] = self._updates.get(key, 0) + 1

    def adopt(self, loaded: ShareStateShard) -> None:
        """The keys another shard replayed (a state partition loaded apart) join this one."""
        self.states.update(loaded.states)
        self._updates.update(loaded._updates)

    def forget(self, keys: Iterable[SharePartitionKey]) -> None:
        """A state partition this coordinator no longer leads: its keys go."""
        for key in list(keys):
            self.states.pop(key, None)
            self._updates.pop(key, None)

    # -- operations: each returns the record to append, or raises with Kafka's error ----------

    def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int,
                   now_ms: int = NO_TIMESTAMP) -> ShareStateRecord:
        """InitializeShareGroupState: a snapshot with the next snapshot epoch, no in-flight
        ranges, created and written ``now_ms``; FENCED_STATE_EPOCH when the stored state epoch is
        newer."""
        check_key(key)
        current = self.states.get(key)
        if current is not None and current.state_epoch > state_epoch:
            raise KafkaApiError(ErrorCode.FENCED_STATE_EPOCH,
                                f"State epoch {state_epoch} is older than the stored {current.state_epoch}.")
        return ShareStateRecord(RecordType.SNAPSHOT, key, ShareStateValue(
            snapshot_epoch=0 if current is None else current.snapshot_epoch + 1, state_epoch=state_epoch,
            leader_epoch=0, start_offset=start_offset, create_timestamp=now_ms, write_timestamp=now_ms))

    def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: Sequence[StateBatch], now_ms: int = NO_TIMESTAMP) -> ShareStateRecord:
        """WriteShareGroupState: an update, or a snapshot (written ``now_ms``) as the module
        docstring says."""
        check_key(key)
        _check_batches(batches)
        current = self.states.get(key)
        self._fence(key, leader_epoch)
        if current is not None and current.state_epoch > state_epoch:
            raise KafkaApiError(ErrorCode.FENCED_STATE_EPOCH,
                                f"State epoch {state_epoch} is older than the stored {current.state_epoch}.")
        if current is None:
            start = max(start_offset, 0) if start_offset != UNINITIALIZED_START_OFFSET else 0
            return ShareStateRecord(RecordType.SNAPSHOT, key, ShareStateValue(
                snapshot_epoch=0, state_epoch=max(state_epoch, DEFAULT_STATE_EPOCH),
                leader_epoch=leader_epoch, start_offset=start,
                batches=combine_batches((), batches, start), create_timestamp=now_ms, write_timestamp=now_ms))
        return self._change(key, current, state_epoch, leader_epoch, start_offset, tuple(batches), now_ms)

    def _change(self, key: SharePartitionKey, current: ShareStateValue, state_epoch: int, leader_epoch: int,
                start_offset: int, batches: tuple[StateBatch, ...], now_ms: int) -> ShareStateRecord:
        """An update, or once ``snapshot_every`` updates followed the last snapshot, a snapshot."""
        if self._updates.get(key, 0) >= self.snapshot_every:
            start = current.start_offset if start_offset == UNINITIALIZED_START_OFFSET else start_offset
            return ShareStateRecord(RecordType.SNAPSHOT, key, ShareStateValue(
                snapshot_epoch=current.snapshot_epoch + 1,
                state_epoch=current.state_epoch if state_epoch == NO_EPOCH else state_epoch,
                leader_epoch=current.leader_epoch if leader_epoch == NO_EPOCH else leader_epoch,
                start_offset=start, batches=combine_batches(current.batches, batches, start),
                create_timestamp=current.create_timestamp, write_timestamp=now_ms))
        return ShareStateRecord(RecordType.UPDATE, key, ShareStateValue(
            snapshot_epoch=current.snapshot_epoch, state_epoch=NO_EPOCH,
            leader_epoch=current.leader_epoch if leader_epoch == NO_EPOCH else leader_epoch,
            start_offset=start_offset, batches=batches))

    def read(self, key: SharePartitionKey, leader_epoch: int,
             now_ms: int = NO_TIMESTAMP) -> tuple[ShareStateValue, ShareStateRecord | None]:
        """ReadShareGroupState: the state (start offset -1, state epoch 0 when none is stored), and
        an update to append when ``leader_epoch`` is newer than the stored one, so the old leader
        is fenced from now on, also after a reload."""
        check_key(key)
        self._fence(key, leader_epoch)
        current = self.states.get(key)
        if current is None:
            return ShareStateValue(0, DEFAULT_STATE_EPOCH, NO_EPOCH, UNINITIALIZED_START_OFFSET), None
        record = None
        if leader_epoch > current.leader_epoch:
            record = self._change(key, current, NO_EPOCH, leader_epoch, UNINITIALIZED_START_OFFSET, (),
                                  now_ms)
        return current, record

    def summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateValue:
        """ReadShareGroupStateSummary: the state without changing anything."""
        check_key(key)
        self._fence(key, leader_epoch)
        current = self.states.get(key)
        return current if current is not None else ShareStateValue(
            0, DEFAULT_STATE_EPOCH, NO_EPOCH, UNINITIALIZED_START_OFFSET)

    def delete(self, key: SharePartitionKey) -> ShareStateRecord | None:
        """DeleteShareGroupState: a tombstone, or nothing to write when nothing is stored."""
        check_key(key)
        if key not in self.states:
            return None
        return ShareStateRecord(RecordType.SNAPSHOT, key, None)

    def _fence(self, key: SharePartitionKey, leader_epoch: int) -> None:
        current = self.states.get(key)
        if current is not None and leader_epoch != NO_EPOCH and current.leader_epoch > leader_epoch:
            raise KafkaApiError(
                ErrorCode.FENCED_LEADER_EPOCH,
                f"Leader epoch {leader_epoch} is older than the stored {current.leader_epoch}.")


def check_key(key: SharePartitionKey) -> None:
    """Kafka's checks before any operation: a group id, a topic id, a partition >= 0."""
    group_id, topic_id, partition = key
    if not group_id:
        raise KafkaApiError(ErrorCode.INVALID_GROUP_ID, "A share group id must not be empty.")
    if topic_id.int == 0:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, "A topic id must be given.")
    if partition < 0:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Partition {partition} is negative.")
