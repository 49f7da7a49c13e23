"""Model-based test of a share-partition: members acquire, acknowledge (each kind), release,
let locks run out and leave, against a model that keeps one plain record per offset.

The model knows only the rules in words: a record is AVAILABLE until acquired; acquiring adds
one to its delivery count and locks it to the member for the lock duration; ACCEPT finishes it,
REJECT and GAP archive it, RELEASE / lock expiry / the member leaving make it AVAILABLE again
unless it was delivered ``delivery_count_limit`` times (then ARCHIVED); only the holder may
acknowledge. The SPSO is the first offset not finished. After every step the share-partition
must agree with the model on every offset's state and delivery count, and on the SPSO.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.shares.share_partition import (
    TRANSITIONS,
    AcknowledgeType,
    Event,
    RecordState,
    SharePartition,
    SharePartitionLimits,
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

    @rule(member=st.sampled_from(MEMBERS), first=st.integers(0, LOG_END - 1), length=st.integers(1, 3),
          kind=st.sampled_from([AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
                                AcknowledgeType.GAP]))
    def acknowledge(self, member: str, first: int, length: int, kind: AcknowledgeType) -> None:
        last = min(first + length - 1, LOG_END - 1)
        held = all(self.model[o].state is RecordState.ACQUIRED and self.model[o].holder == member
                   for o in range(first, last + 1))
        try:
            self.partition.acknowledge(member, first, last, [kind], self.now)
        except KafkaApiError as refusal:
            assert not held and refusal.code == ErrorCode.INVALID_RECORD_STATE
            return
        assert held
        for offset in range(first, last + 1):
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
    (5, 4, [1]), (-1, 0, [1]), (0, 2, [1, 1]), (0, 0, [9]), (0, 0, [])])
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
