"""One share-partition (KIP-932): which records of a topic-partition a share group still owes.

Theory of operation
-------------------
A share group consumes a partition through its *share-partition*: a window of offsets from the
share-partition start offset (SPSO) up to the end offset (SPEO, the first offset never yet
acquired). Offsets below the SPSO are finished; offsets at or past the SPEO have never been
handed out (AVAILABLE, delivered 0 times). Inside the window each offset has an in-flight record:
its state, how often it was delivered, and, while ACQUIRED, the member holding it and when its
acquisition lock runs out.

Every state change is a row of ``TRANSITIONS`` (Kafka's SharePartition.RecordState), keyed by the
record's state and what happened to it. One rule sits beside the table, as in Kafka: a record
going back to AVAILABLE (released, its lock expired, its member gone) whose delivery count has
reached ``group.share.delivery.count.limit`` is ARCHIVED instead, so a poison record stops.

A read_committed group's fetch archives the records it must never be given (an aborted
transaction's data, control batches: kafkapy.shares.isolation) straight from AVAILABLE, so they
are never delivered and the SPSO moves past them.

After every change the SPSO moves over the ACKNOWLEDGED and ARCHIVED records at the window's
start, and their entries go. ``group.share.partition.max.record.locks`` bounds the window
(SPEO - SPSO), so a member that never acknowledges cannot make the window grow without end.

The window is what the share coordinator keeps (``__share_group_state``, kafkapy.sharestate):
``persisted_batches`` gives it as state batches covering every offset from the SPSO to the SPEO,
an ACQUIRED record as the AVAILABLE one it was before the fetch that holds it (Kafka persists
acknowledgements and releases, not acquisitions), and ``restored`` builds a share-partition from
them again: a new leader starts where the old one's last persisted change left the records.

The class is sans-I/O: time comes in as ``now_ms`` arguments, batch offsets as ranges read from
the log by the caller (kafkapy.shares.module), and errors are KafkaApiError with Kafka's codes.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Sequence

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.sharestate.state import StateBatch

__all__ = ["ACKNOWLEDGE_EVENTS", "TRANSITIONS", "AckBatch", "AcknowledgeType", "Acquired", "Event",
           "InFlight", "RecordState", "SharePartition", "SharePartitionLimits", "check_acknowledgements",
           "next_state"]


class RecordState(enum.Enum):
    """Kafka's SharePartition.RecordState (the ids it writes to ``__share_group_state``)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """The AcknowledgeTypes of ShareFetch and ShareAcknowledge (KIP-932; RENEW comes with v2)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class Event(enum.Enum):
    ACQUIRE = "acquire"
    ACCEPT = "accept"
    RELEASE = "release"
    REJECT = "reject"
    GAP = "gap"
    RENEW = "renew"
    LOCK_EXPIRED = "lock expired"  # the acquisition lock ran out, or the member holding it left
    UNDELIVERABLE = "undeliverable"  # read_committed: an aborted transaction's data, or a control batch


_S, _E = RecordState, Event
#: (state, event) -> next state. A pair not listed is an illegal transition (INVALID_RECORD_STATE).
TRANSITIONS: dict[tuple[RecordState, Event], RecordState] = {
    (_S.AVAILABLE, _E.ACQUIRE): _S.ACQUIRED,
    (_S.AVAILABLE, _E.UNDELIVERABLE): _S.ARCHIVED,  # never acquired, never delivered (isolation.py)
    (_S.ACQUIRED, _E.ACCEPT): _S.ACKNOWLEDGED,
    (_S.ACQUIRED, _E.REJECT): _S.ARCHIVED,
    (_S.ACQUIRED, _E.GAP): _S.ARCHIVED,  # an offset compaction removed: nothing to deliver
    (_S.ACQUIRED, _E.RELEASE): _S.AVAILABLE,  # ARCHIVED at the delivery limit (next_state)
    (_S.ACQUIRED, _E.LOCK_EXPIRED): _S.AVAILABLE,  # likewise
    (_S.ACQUIRED, _E.RENEW): _S.ACQUIRED,  # the lock starts again
}
#: What each acknowledge type does to an ACQUIRED record.
ACKNOWLEDGE_EVENTS: dict[AcknowledgeType, Event] = {
    AcknowledgeType.GAP: Event.GAP, AcknowledgeType.ACCEPT: Event.ACCEPT,
    AcknowledgeType.RELEASE: Event.RELEASE, AcknowledgeType.REJECT: Event.REJECT,
    AcknowledgeType.RENEW: Event.RENEW}
_FINISHED = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})
_PERSISTED = frozenset(state.value for state in (RecordState.AVAILABLE, *_FINISHED))


def next_state(state: RecordState, event: Event, delivery_count: int, delivery_limit: int) -> RecordState:
    """The table's answer, with Kafka's delivery-limit rule; KafkaApiError(INVALID_RECORD_STATE)
    for a pair the table does not list."""
    target = TRANSITIONS.get((state, event))
    if target is None:
        raise KafkaApiError(ErrorCode.INVALID_RECORD_STATE,
                            f"A record in state {state.name} cannot take {event.value}.")
    if target is RecordState.AVAILABLE and delivery_count >= delivery_limit:
        return RecordState.ARCHIVED
    return target


@attrs.define
class InFlight:
    state: RecordState
    delivery_count: int
    member_id: str | None = None  # the holder while ACQUIRED
    lock_deadline_ms: int = 0  # while ACQUIRED


@attrs.frozen
class Acquired:
    """An AcquiredRecords entry of a ShareFetch response: offsets and their delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@attrs.frozen
class SharePartitionLimits:
    #: Kafka's defaults (ShareGroupConfig): group.share.record.lock.duration.ms,
    #: group.share.delivery.count.limit, group.share.partition.max.record.locks (2000; earlier releases 200).
    lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000


class SharePartition:
    def __init__(self, start_offset: int, limits: SharePartitionLimits) -> None:
        self.start_offset = start_offset  # SPSO
        self.end_offset = start_offset  # SPEO
        self.limits = limits
        self.records: dict[int, InFlight] = {}  # offset -> in-flight record, for SPSO <= offset < SPEO

    @classmethod
    def restored(cls, start_offset: int, batches: Iterable[StateBatch],
                 limits: SharePartitionLimits) -> SharePartition:
        """The share-partition a coordinator's state describes; offsets of the window no batch
        covers are AVAILABLE, never delivered; an ACQUIRED state (never written) reads as AVAILABLE."""
        partition = cls(start_offset, limits)
        for batch in batches:
            state = RecordState.AVAILABLE
            if batch.delivery_state in _PERSISTED:
                state = RecordState(batch.delivery_state)
            for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
                partition.records[offset] = InFlight(state, batch.delivery_count)
        partition.end_offset = max([start_offset, *(offset + 1 for offset in partition.records)])
        for offset in range(start_offset, partition.end_offset):
            partition.records.setdefault(offset, InFlight(RecordState.AVAILABLE, 0))
        partition._advance_start()
        return partition

    def persisted_batches(self) -> list[StateBatch]:
        """The window as the share coordinator keeps it: every offset from the SPSO to the SPEO,
        as ranges of one state and delivery count; an ACQUIRED record as the AVAILABLE record it
        was before this acquisition."""
        batches: list[StateBatch] = []
        for offset in range(self.start_offset, self.end_offset):
            record = self.records[offset]
            if record.state is RecordState.ACQUIRED:
                state, count = RecordState.AVAILABLE.value, record.delivery_count - 1
            else:
                state, count = record.state.value, record.delivery_count
            last = batches[-1] if batches else None
            if last is not None and (last.delivery_state, last.delivery_count) == (state, count):
                batches[-1] = StateBatch(last.first_offset, offset, state, count)
            else:
                batches.append(StateBatch(offset, offset, state, count))
        return batches

    # -- queries -------------------------------------------------------------------------------

    def state_of(self, offset: int) -> RecordState:
        """ARCHIVED covers everything the window has passed (acknowledged or not, it is done)."""
        if offset < self.start_offset:
            return RecordState.ARCHIVED
        record = self.records.get(offset)
        return RecordState.AVAILABLE if record is None else record.state

    def next_available(self) -> int:
        """The first offset a fetch could acquire: a released record in the window, else the SPEO."""
        for offset in range(self.start_offset, self.end_offset):
            if self.records[offset].state is RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def next_lock_deadline(self) -> int | None:
        deadlines = [r.lock_deadline_ms for r in self.records.values() if r.state is RecordState.ACQUIRED]
        return min(deadlines, default=None)

    # -- changes -------------------------------------------------------------------------------

    def move_start(self, log_start_offset: int) -> None:
        """Records the log no longer holds (retention, DeleteRecords) are archived unseen."""
        if log_start_offset <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start_offset, self.end_offset)):
            self.records.pop(offset, None)
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)

    def acquire(self, member_id: str, batches: Iterable[tuple[int, int]], now_ms: int,
                max_records: int, *, whole_batches: bool = True,
                undeliverable: Collection[tuple[int, int]] = ()) -> list[Acquired]:
        """Acquire for ``member_id`` the AVAILABLE records of the log ``batches`` (their
        (first, last) offsets, in order, as read), at most ``max_records`` of them, except that
        with ``whole_batches`` (ShareFetch's batch-optimized mode, the default) a batch begun is
        taken whole; never past ``max_record_locks`` in flight. The AVAILABLE records of the
        batches in ``undeliverable`` (a read_committed group's aborted and control batches) are
        archived instead, counting against no limit but the locks. Returns the acquired ranges,
        split where the delivery count changes."""
        deadline = now_ms + self.limits.lock_duration_ms
        taken: list[tuple[int, int]] = []  # (offset, delivery count)
        archived = False
        for first, last in batches:
            if len(taken) >= max_records:
                break
            event = Event.UNDELIVERABLE if (first, last) in undeliverable else Event.ACQUIRE
            for offset in range(max(first, self.start_offset), last + 1):
                if event is Event.ACQUIRE and not whole_batches and len(taken) >= max_records:
                    break
                if offset >= self.end_offset:
                    if offset - self.start_offset >= self.limits.max_record_locks:
                        break
                    self.records[offset] = InFlight(RecordState.AVAILABLE, 0)
                    self.end_offset = offset + 1
                record = self.records[offset]
                if record.state is not RecordState.AVAILABLE:
                    continue
                record.state = next_state(record.state, event, record.delivery_count,
                                          self.limits.delivery_count_limit)
                if event is Event.UNDELIVERABLE:
                    archived = True
                    continue
                record.delivery_count += 1
                record.member_id, record.lock_deadline_ms = member_id, deadline
                taken.append((offset, record.delivery_count))
        if archived:
            self._advance_start()
        return _ranges(taken)

    def acknowledge(self, member_id: str, first_offset: int, last_offset: int,
                    types: Sequence[int], now_ms: int) -> None:
        """One AcknowledgementBatch, checked as a request's (RENEW allowed) and applied whole."""
        batch = AckBatch(first_offset, last_offset, tuple(types))
        check_acknowledgements([batch], renew_allowed=True)
        self.acknowledge_batches(member_id, [batch], now_ms)

    def acknowledge_batches(self, member_id: str, batches: Sequence[AckBatch], now_ms: int) -> None:
        """A partition's AcknowledgementBatches (checked by ``check_acknowledgements``), all or
        nothing, as Kafka's SharePartition.acknowledge rolls back every change on a refusal.
        Offsets below the SPSO are done already and passed over (a batch wholly below it changes
        nothing); an offset past the last one handed out is INVALID_REQUEST; one not ACQUIRED by
        this member (or acknowledged twice in the request) INVALID_RECORD_STATE."""
        planned: list[tuple[int, Event]] = []
        touched: set[int] = set()
        for batch in batches:
            if batch.last_offset < self.start_offset:
                continue
            if self.start_offset == self.end_offset:
                raise KafkaApiError(ErrorCode.INVALID_RECORD_STATE, "Batch record not found. The request "
                                    "batch offsets are not found in the cache.")
            first = max(batch.first_offset, self.start_offset)
            if first >= self.end_offset:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST, "Batch record not found. The first offset "
                                    "in request is past acquired records.")
            if batch.last_offset >= self.end_offset:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST, "Batch record not found. The last offset "
                                    "in request is past acquired records.")
            for offset in range(first, batch.last_offset + 1):
                record = self.records[offset]
                if record.state is not RecordState.ACQUIRED or record.member_id != member_id \
                        or offset in touched:
                    raise KafkaApiError(ErrorCode.INVALID_RECORD_STATE,
                                        f"Offset {offset} is not acquired by member {member_id}.")
                touched.add(offset)
                planned.append((offset, ACKNOWLEDGE_EVENTS[batch.type_of(offset)]))
        for offset, event in planned:
            self._apply(offset, event, now_ms)
        self._advance_start()

    def expire_locks(self, now_ms: int) -> int:
        """Acquired records whose lock ran out go back (or, at the limit, are archived)."""
        expired = [o for o, r in self.records.items()
                   if r.state is RecordState.ACQUIRED and r.lock_deadline_ms <= now_ms]
        for offset in expired:
            self._apply(offset, Event.LOCK_EXPIRED, now_ms)
        self._advance_start()
        return len(expired)

    def release_member(self, member_id: str, now_ms: int) -> int:
        """A member's share session closed or it left the group: what it holds goes back."""
        held = [o for o, r in self.records.items()
                if r.state is RecordState.ACQUIRED and r.member_id == member_id]
        for offset in held:
            self._apply(offset, Event.LOCK_EXPIRED, now_ms)
        self._advance_start()
        return len(held)

    def _apply(self, offset: int, event: Event, now_ms: int) -> None:
        record = self.records[offset]
        record.state = next_state(record.state, event, record.delivery_count,
                                  self.limits.delivery_count_limit)
        if record.state is RecordState.ACQUIRED:  # renewed
            record.lock_deadline_ms = now_ms + self.limits.lock_duration_ms
        else:
            record.member_id, record.lock_deadline_ms = None, 0

    def _advance_start(self) -> None:
        while self.start_offset < self.end_offset and self.records[self.start_offset].state in _FINISHED:
            del self.records[self.start_offset]
            self.start_offset += 1


@attrs.frozen
class AckBatch:
    """One AcknowledgementBatch of a ShareFetch or ShareAcknowledge: one type for the whole range,
    or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]

    def type_of(self, offset: int) -> AcknowledgeType:
        kind = self.types[0] if len(self.types) == 1 else self.types[offset - self.first_offset]
        return AcknowledgeType(kind)


def check_acknowledgements(batches: Sequence[AckBatch], *, renew_allowed: bool) -> None:
    """Kafka's KafkaApis.validateAcknowledgementBatches for one partition, before anything is
    applied: INVALID_REQUEST for a range backwards, batches out of order or overlapping more than
    a shared last offset, no types, a type count that is neither 1 nor one per offset, an unknown
    type, or RENEW where the request may not carry it (``renew_allowed``: v2 with IsRenewAck)."""
    highest = AcknowledgeType.RENEW if renew_allowed else AcknowledgeType.REJECT
    previous_last = -1
    for batch in batches:
        span = f"{batch.first_offset}-{batch.last_offset}"
        if batch.first_offset > batch.last_offset:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Invalid acknowledgement range {span}.")
        if batch.first_offset < previous_last:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Acknowledgement range {span} overlaps or "
                                "comes before the one before it.")
        if not batch.types or (len(batch.types) > 1
                               and batch.last_offset - batch.first_offset != len(batch.types) - 1):
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"{len(batch.types)} acknowledge types for "
                                f"the offsets {span}.")
        if any(kind < AcknowledgeType.GAP or kind > highest for kind in batch.types):
            renew = not renew_allowed and AcknowledgeType.RENEW in batch.types
            reason = "RENEW needs a v2 request with IsRenewAck" if renew else "Unknown acknowledge type"
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"{reason} in {list(batch.types)}.")
        previous_last = batch.last_offset


def _ranges(taken: Sequence[tuple[int, int]]) -> list[Acquired]:
    ranges: list[Acquired] = []
    for offset, count in taken:
        last = ranges[-1] if ranges else None
        if last is not None and last.last_offset + 1 == offset and last.delivery_count == count:
            ranges[-1] = Acquired(last.first_offset, offset, count)
        else:
            ranges.append(Acquired(offset, offset, count))
    return ranges
