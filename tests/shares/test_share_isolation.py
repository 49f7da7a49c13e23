"""share.isolation.level=read_committed on a share-partition over a real partition log.

The model test appends plain records and transactions of several producers (committed, aborted,
left open) to a log with its producer state, as the data plane does, and fetches through
``acquire_from_log`` as a share fetch does, accepting or releasing what it gets. The model knows
only the rule in words: a read_committed group gets each record of a plain batch or a committed
transaction once accepted, never one of an aborted transaction or a marker, and nothing at or past
the last stable offset (the first offset of the earliest open transaction); once drained, the
start offset is the last stable offset. read_uncommitted gets every data record below the high
watermark."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkapy.log import MemoryLog
from kafkapy.log.end_txn_marker import append_end_txn_marker
from kafkapy.log.producer_state import ProducerStateManager
from kafkapy.log.txn_index import AbortedTxn
from kafkapy.protocol.records import CREATE_TIME, RecordBatch, build_record_batch
from kafkapy.shares.fetch import acquire_from_log
from kafkapy.shares.isolation import BatchHeader, undeliverable
from kafkapy.shares.share_partition import (
    AcknowledgeType,
    Acquired,
    RecordState,
    SharePartition,
    SharePartitionLimits,
)

PRODUCERS = (1, 2, 3)
# The delivery limit is another test's subject (test_share_partition_model): high enough here
# that releasing never archives.
LIMITS = SharePartitionLimits(lock_duration_ms=1000, delivery_count_limit=1_000_000, max_record_locks=10_000)
_MEMBER = "m"


class TxnLog:
    """A partition log and its producer state, appended to as the data plane appends."""

    def __init__(self) -> None:
        self.log = MemoryLog()
        self.state = ProducerStateManager()
        self.log.unstable_offset_source = lambda: self.state.first_unstable_offset
        self.sequences: dict[int, int] = {}

    def data(self, count: int, producer_id: int = -1) -> range:
        sequence = -1
        if producer_id >= 0:
            sequence = self.sequences.get(producer_id, 0)
            self.sequences[producer_id] = sequence + count
        first = self.log.log_end_offset
        batch = bytearray(build_record_batch(
            [{"value": b"v%d" % (first + i), "timestamp": 1_000} for i in range(count)], base_offset=first,
            producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1, base_sequence=sequence,
            is_transactional=producer_id >= 0))
        assert self.state.check_and_update(RecordBatch(batch)) is None
        self.log.append(batch)
        return range(first, first + count)

    def end(self, producer_id: int, *, commit: bool) -> int:
        offset = self.log.log_end_offset
        append_end_txn_marker(self.log, self.state, producer_id=producer_id, producer_epoch=0,
                              committed=commit, coordinator_epoch=0, leader_epoch=0, now_ms=2_000,
                              timestamp_type=CREATE_TIME)
        return offset


def _offsets(acquired: list[Acquired]) -> list[int]:
    return [o for a in acquired for o in range(a.first_offset, a.last_offset + 1)]


class ReadCommittedMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.txn_log = TxnLog()
        self.partition = SharePartition(0, LIMITS)
        self.visible: set[int] = set()  # what read_committed may deliver once below the LSO
        self.open: dict[int, list[int]] = {}  # producer -> its open transaction's offsets
        self.accepted: set[int] = set()
        self.now = 0

    def _lso(self) -> int:
        firsts = [offsets[0] for offsets in self.open.values() if offsets]
        return min(firsts, default=self.txn_log.log.log_end_offset)

    @rule(count=st.integers(1, 3))
    def plain(self, count: int) -> None:
        self.visible.update(self.txn_log.data(count))

    @rule(producer=st.sampled_from(PRODUCERS), count=st.integers(1, 3))
    def transactional(self, producer: int, count: int) -> None:
        self.open.setdefault(producer, []).extend(self.txn_log.data(count, producer))

    @precondition(lambda self: bool(self.open))
    @rule(data=st.data(), commit=st.booleans())
    def end(self, data: st.DataObject, commit: bool) -> None:
        producer = data.draw(st.sampled_from(sorted(self.open)))
        offsets = self.open.pop(producer)
        self.txn_log.end(producer, commit=commit)
        if commit:
            self.visible.update(offsets)

    @rule(max_records=st.integers(1, 8), whole=st.booleans(), release=st.booleans(),
          max_bytes=st.sampled_from([1, 200, 1 << 20]))
    def fetch(self, max_records: int, whole: bool, release: bool, max_bytes: int) -> None:
        self.now += 1
        acquired, spans, _ = acquire_from_log(self.partition, self.txn_log.log, _MEMBER, self.now,
                                              max_records, max_bytes, whole_batches=whole,
                                              read_committed=True)
        got = _offsets(acquired)
        lso = self._lso()
        assert all(offset in self.visible and offset < lso for offset in got), (got, self.visible, lso)
        assert not set(got) & self.accepted, "an accepted record came again"
        assert all(any(first <= o <= last for first, last, _ in spans) for o in got)
        kind = AcknowledgeType.RELEASE if release else AcknowledgeType.ACCEPT
        for a in acquired:
            self.partition.acknowledge(_MEMBER, a.first_offset, a.last_offset, [kind], self.now)
        if not release:
            self.accepted.update(got)

    @invariant()
    def nothing_visible_is_passed_over_and_nothing_unstable_is_touched(self) -> None:
        start = self.partition.start_offset
        assert start <= self._lso()
        assert {o for o in self.visible if o < start} <= self.accepted
        assert self.partition.end_offset <= self._lso()

    def teardown(self) -> None:
        for _ in range(10_000):
            self.now += 1
            acquired, _, _ = acquire_from_log(self.partition, self.txn_log.log, _MEMBER, self.now, 100,
                                              1 << 20, whole_batches=True, read_committed=True)
            if not acquired:
                break
            for a in acquired:
                self.partition.acknowledge(_MEMBER, a.first_offset, a.last_offset, [AcknowledgeType.ACCEPT],
                                           self.now)
            self.accepted.update(_offsets(acquired))
        lso = self._lso()
        assert self.accepted == {o for o in self.visible if o < lso}
        assert self.partition.start_offset == lso == self.txn_log.log.last_stable_offset


ReadCommittedMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
TestReadCommitted = ReadCommittedMachine.TestCase


def test_read_uncommitted_gets_every_data_record_and_the_markers_below_the_high_watermark() -> None:
    txn_log = TxnLog()
    txn_log.data(2, producer_id=1)
    aborted_marker = txn_log.end(1, commit=False)
    txn_log.data(1)
    txn_log.data(2, producer_id=2)  # left open
    partition = SharePartition(0, LIMITS)
    acquired, _, archived = acquire_from_log(partition, txn_log.log, _MEMBER, 0, 100, 1 << 20,
                                             whole_batches=True, read_committed=False)
    assert _offsets(acquired) == list(range(txn_log.log.high_watermark)) and not archived
    assert aborted_marker == 2


def test_an_aborted_run_at_the_start_is_archived_unseen_and_the_fetch_reads_on_past_it() -> None:
    txn_log = TxnLog()
    for _ in range(3):
        txn_log.data(2, producer_id=1)
    txn_log.end(1, commit=False)  # offsets 0-5 aborted, the marker at 6
    plain = txn_log.data(1)
    partition = SharePartition(0, LIMITS)
    # A max_bytes of 1 reads one batch at a time: the fetch keeps reading past the aborted ones.
    acquired, _, archived = acquire_from_log(partition, txn_log.log, _MEMBER, 0, 100, 1,
                                             whole_batches=True, read_committed=True)
    assert _offsets(acquired) == list(plain) and archived
    assert partition.start_offset == 7 and partition.state_of(6) is RecordState.ARCHIVED
    # What the coordinator would be sent: the archived offsets left the window.
    assert [b.first_offset for b in partition.persisted_batches()] == [7]


def test_an_open_transaction_holds_delivery_at_its_first_offset_until_it_commits() -> None:
    txn_log = TxnLog()
    txn_log.data(1)
    txn = txn_log.data(2, producer_id=1)
    later = txn_log.data(1)
    partition = SharePartition(0, LIMITS)

    def fetch() -> list[int]:
        acquired, _, _ = acquire_from_log(partition, txn_log.log, _MEMBER, 0, 100, 1 << 20,
                                          whole_batches=True, read_committed=True)
        for a in acquired:
            partition.acknowledge(_MEMBER, a.first_offset, a.last_offset, [AcknowledgeType.ACCEPT], 0)
        return _offsets(acquired)

    assert fetch() == [0]
    assert fetch() == []  # the LSO is the transaction's first offset
    marker = txn_log.end(1, commit=True)
    assert fetch() == [*txn, *later]
    assert partition.start_offset == marker + 1 == txn_log.log.high_watermark



@pytest.mark.parametrize(("batch", "skipped"), [
    (BatchHeader(3, 4, 7, 0x10), True),  # pid 7's data inside its aborted transaction 2..5
    (BatchHeader(6, 6, 7, 0x10), False),  # pid 7's data after its ABORT marker (a later transaction)
    (BatchHeader(1, 1, 7, 0x10), False),  # before it began
    (BatchHeader(3, 4, 8, 0x10), False),  # another producer's
    (BatchHeader(3, 4, 7, 0x00), False),  # not transactional (idempotent only)
    (BatchHeader(5, 5, 7, 0x30), True),  # a control batch: always
    (BatchHeader(9, 9, 9, 0x30), True),
])
def test_which_batches_a_read_committed_group_is_never_given(batch: BatchHeader, skipped: bool) -> None:
    aborted = [AbortedTxn(producer_id=7, first_offset=2, last_offset=5, last_stable_offset=6)]
    assert (undeliverable([batch], aborted) == {(batch.first_offset, batch.last_offset)}) is skipped
