"""Model-based test of a share-partition: members acquire, acknowledge (each kind), release,
let locks run out and leave, against a model that keeps one plain record per offset.

The model knows only the rules in words: a record is AVAILABLE until acquired; acquiring adds
one to its delivery count and locks it to the member for the lock duration; ACCEPT finishes it,
REJECT and GAP archive it, RELEASE / lock expiry / the member leaving make it AVAILABLE again
unless it was delivered ``delivery_count_limit`` times (then ARCHIVED); only the holder may
acknowledge. The SPSO is the first offset not finished. A partition's acknowledgement batches
go all or none (Kafka's SharePartition.acknowledge rolls back): batches out of order are
INVALID_REQUEST, offsets below the SPSO are passed over, offsets past the last one handed out
are INVALID_REQUEST, and an offset not held (or acknowledged twice) INVALID_RECORD_STATE. After
every step the share-partition must agree with the model on every offset's state and delivery
count, and on the SPSO.
"""

from __future__ import annotations

import itertools

import attrs
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.shares.share_partition import (
    TRANSITIONS,
    AckBatch,
    AcknowledgeType,
    Event,
    RecordState,
    SharePartition,
    SharePartitionLimits,
    check_acknowledgements,
    next_state,
)

LOG_END = 12  # offsets 0..11 exist in the "log"
BATCHES = [(0, 2), (3, 3), (4, 7), (8, 11)]  # how they are batched
MEMBERS = ["a", "b"]
LIMITS = SharePartitionLimits(lock_duration_ms=1000, delivery_count_limit=3, max_record_locks=8)


@attrs.define
class ModelRecord:
    state: RecordState = RecordState.AVAILABLE
    count: int = 0
    holder: str | None = None
    deadline: int = 0


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.partition = SharePartition(0, LIMITS)
        self.model = {offset: ModelRecord() for offset in range(LOG_END)}
        self.now = 0

    def _model_back(self, record: ModelRecord) -> None:
        at_limit = record.count >= LIMITS.delivery_count_limit
        record.state = RecordState.ARCHIVED if at_limit else RecordState.AVAILABLE
        record.holder = None

    def _model_start(self) -> int:
        for offset in range(LOG_END):
            if self.model[offset].state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                return offset
        return LOG_END

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 12), whole=st.booleans())
    def acquire(self, member: str, max_records: int, whole: bool) -> None:
        acquired = self.partition.acquire(member, BATCHES, self.now, max_records, whole_batches=whole)
        got = [o for a in acquired for o in range(a.first_offset, a.last_offset + 1)]
        # The model: AVAILABLE records in batch order, while fewer than max_records were taken
        # (checked per batch when batches go whole, else per record), never reaching
        # max_record_locks past the SPSO for a never-acquired offset.
        expected: list[int] = []
        start = self._model_start()
        window_end = max([o + 1 for o, r in self.model.items() if r.count > 0] + [start])
        for first, last in BATCHES:
            if len(expected) >= max_records:
                break
            for offset in range(max(first, start), last + 1):
                if not whole and len(expected) >= max_records:
                    break
                record = self.model[offset]
                if offset >= window_end and offset - start >= LIMITS.max_record_locks:
                    break
                if record.state is RecordState.AVAILABLE:
                    expected.append(offset)
        assert got == expected
        for offset in got:
            record = self.model[offset]
            record.state, record.count = RecordState.ACQUIRED, record.count + 1
            record.holder, record.deadline = member, self.now + LIMITS.lock_duration_ms
        for a in acquired:
            offsets = range(a.first_offset, a.last_offset + 1)
            assert all(self.model[o].count == a.delivery_count for o in offsets)

    def _model_end(self) -> int:
        return max([o + 1 for o, r in self.model.items() if r.count > 0] + [self._model_start()])

    def _refusal(self, member: str, batches: list[tuple[int, int]]) -> ErrorCode | None:
        """Kafka's answer to these batches, from the model (None: all applied)."""
        if any(first < previous[1] for previous, (first, _) in itertools.pairwise(batches)):
            return ErrorCode.INVALID_REQUEST
        start, end = self._model_start(), self._model_end()
        touched: set[int] = set()
        for first, last in batches:
            if last < start:
                continue
            if start == end:
                return ErrorCode.INVALID_RECORD_STATE
            if max(first, start) >= end or last >= end:
                return ErrorCode.INVALID_REQUEST
            for offset in range(max(first, start), last + 1):
                record = self.model[offset]
                if record.state is not RecordState.ACQUIRED or record.holder != member or offset in touched:
                    return ErrorCode.INVALID_RECORD_STATE
                touched.add(offset)
        return None

    @rule(member=st.sampled_from(MEMBERS), first=st.integers(0, LOG_END - 1), length=st.integers(1, 3),
          kind=st.sampled_from([AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
                                AcknowledgeType.GAP]),
          then=st.none() | st.tuples(st.integers(-1, 2), st.integers(1, 2)))
    def acknowledge(self, member: str, first: int, length: int, kind: AcknowledgeType,
                    then: tuple[int, int] | None) -> None:
        last = min(first + length - 1, LOG_END - 1)
        batches = [(first, last)]
        if then is not None and last + then[0] < LOG_END:  # a second batch, from just before to past it
            batches.append((last + then[0], min(last + then[0] + then[1] - 1, LOG_END - 1)))
        expected = self._refusal(member, batches)
        start = self._model_start()
        try:
            acks = [AckBatch(f, la, (kind,)) for f, la in batches]
            check_acknowledgements(acks, renew_allowed=False)  # the request's form first, as fetch.py
            self.partition.acknowledge_batches(member, acks, self.now)
        except KafkaApiError as refusal:
            assert refusal.code == expected
            return
        assert expected is None
        for offset in {o for f, la in batches for o in range(max(f, start), la + 1)}:
            record = self.model[offset]
            if kind is AcknowledgeType.ACCEPT:
                record.state, record.holder = RecordState.ACKNOWLEDGED, None
            elif kind is AcknowledgeType.RELEASE:
                self._model_back(record)
            else:
                record.state, record.holder = RecordState.ARCHIVED, None

    @rule(ms=st.integers(1, 1500))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        self.partition.expire_locks(self.now)
        for record in self.model.values():
            if record.state is RecordState.ACQUIRED and record.deadline <= self.now:
                self._model_back(record)

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        self.partition.release_member(member, self.now)
        for record in self.model.values():
            if record.state is RecordState.ACQUIRED and record.holder == member:
                self._model_back(record)

    @invariant()
    def agrees_with_the_model(self) -> None:
        start = self._model_start()
        assert self.partition.start_offset == start
        assert self.partition.end_offset - self.partition.start_offset <= LIMITS.max_record_locks
        for offset in range(start, LOG_END):
            record = self.model[offset]
            assert self.partition.state_of(offset) is record.state, offset
            in_flight = self.partition.records.get(offset)
            assert (0 if in_flight is None else in_flight.delivery_count) == record.count, offset


TestSharePartitionModel = SharePartitionMachine.TestCase
TestSharePartitionModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


@pytest.mark.parametrize(("state", "event"), [(s, e) for s in RecordState for e in Event])
def test_every_pair_outside_the_table_is_invalid_record_state(state: RecordState, event: Event) -> None:
    if (state, event) in TRANSITIONS:
        assert next_state(state, event, 0, 5) is TRANSITIONS[(state, event)]
        return
    with pytest.raises(KafkaApiError) as refused:
        next_state(state, event, 0, 5)
    assert refused.value.code == ErrorCode.INVALID_RECORD_STATE


def test_a_release_at_the_delivery_limit_archives() -> None:
    assert next_state(RecordState.ACQUIRED, Event.RELEASE, 4, 5) is RecordState.AVAILABLE
    assert next_state(RecordState.ACQUIRED, Event.RELEASE, 5, 5) is RecordState.ARCHIVED
    assert next_state(RecordState.ACQUIRED, Event.LOCK_EXPIRED, 5, 5) is RecordState.ARCHIVED


@pytest.mark.parametrize(("first", "last", "types"), [
    (5, 4, [1]), (0, 2, [1, 1]), (0, 0, [9]), (0, 0, [-1]), (0, 0, [])])
def test_a_malformed_acknowledgement_is_invalid_request(first: int, last: int, types: list[int]) -> None:
    partition = SharePartition(0, LIMITS)
    partition.acquire("a", [(0, 5)], 0, 10)
    with pytest.raises(KafkaApiError) as refused:
        partition.acknowledge("a", first, last, types, 0)
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    assert all(partition.state_of(o) is RecordState.ACQUIRED for o in range(6))  # nothing applied


def test_an_acknowledgement_is_all_or_nothing() -> None:
    partition = SharePartition(0, LIMITS)
    partition.acquire("a", [(0, 2)], 0, 10)
    partition.acquire("b", [(3, 3)], 0, 10)
    with pytest.raises(KafkaApiError):
        partition.acknowledge("a", 0, 3, [1], 0)  # offset 3 is b's
    assert [partition.state_of(o) for o in range(4)] == [RecordState.ACQUIRED] * 4


def test_renew_keeps_the_record_and_restarts_its_lock() -> None:
    partition = SharePartition(0, LIMITS)
    partition.acquire("a", [(0, 0)], 0, 10)
    partition.acknowledge("a", 0, 0, [AcknowledgeType.RENEW], 900)
    assert partition.expire_locks(1500) == 0
    assert partition.expire_locks(1900) == 1


def test_records_the_log_dropped_are_passed_over() -> None:
    partition = SharePartition(0, LIMITS)
    partition.acquire("a", [(0, 3)], 0, 10)
    partition.move_start(2)
    assert partition.start_offset == 2 and sorted(partition.records) == [2, 3]


def test_record_limit_mode_stops_inside_a_batch() -> None:
    whole = SharePartition(0, LIMITS)
    assert [(a.first_offset, a.last_offset) for a in whole.acquire("a", [(0, 5)], 0, 2)] == [(0, 5)]
    limited = SharePartition(0, LIMITS)
    taken = limited.acquire("a", [(0, 5)], 0, 2, whole_batches=False)
    assert [(a.first_offset, a.last_offset) for a in taken] == [(0, 1)]
    assert limited.end_offset == 2 and limited.state_of(2) is RecordState.AVAILABLE


def test_a_partitions_batches_go_all_or_none_in_kafkas_order() -> None:
    """Kafka's SharePartition.acknowledge: a refused batch undoes the ones before it."""
    partition = SharePartition(0, LIMITS)
    partition.acquire("a", [(0, 3)], 0, 10)
    with pytest.raises(KafkaApiError) as refused:
        partition.acknowledge_batches("a", [AckBatch(0, 1, (1,)), AckBatch(3, 5, (1,))], 0)
    assert refused.value.code == ErrorCode.INVALID_REQUEST  # 4-5 were never handed out
    assert [partition.state_of(o) for o in range(4)] == [RecordState.ACQUIRED] * 4
    with pytest.raises(KafkaApiError) as twice:
        partition.acknowledge_batches("a", [AckBatch(0, 1, (1,)), AckBatch(1, 2, (1,))], 0)
    assert twice.value.code == ErrorCode.INVALID_RECORD_STATE  # offset 1 in both
    assert partition.start_offset == 0
    with pytest.raises(KafkaApiError) as backwards:
        check_acknowledgements([AckBatch(2, 3, (1,)), AckBatch(0, 1, (1,))], renew_allowed=False)
    assert backwards.value.code == ErrorCode.INVALID_REQUEST


def test_offsets_below_the_start_are_passed_over() -> None:
    """Kafka skips a batch wholly below the SPSO and acknowledges the rest of one across it."""
    partition = SharePartition(0, LIMITS)
    partition.acquire("a", [(0, 3)], 0, 10)
    partition.acknowledge_batches("a", [AckBatch(0, 1, (1,))], 0)
    assert partition.start_offset == 2
    partition.acknowledge_batches("a", [AckBatch(0, 0, (3,))], 0)  # done already: nothing changes
    partition.acknowledge_batches("a", [AckBatch(-1, 2, (1,))], 0)
    assert partition.start_offset == 3 and partition.state_of(3) is RecordState.ACQUIRED


def test_renew_only_where_the_request_may_carry_it() -> None:
    for allowed in (False, True):
        batch = AckBatch(0, 0, (AcknowledgeType.RENEW,))
        if allowed:
            check_acknowledgements([batch], renew_allowed=True)
            continue
        with pytest.raises(KafkaApiError, match="RENEW needs a v2 request with IsRenewAck") as refused:
            check_acknowledgements([batch], renew_allowed=False)
        assert refused.value.code == ErrorCode.INVALID_REQUEST
