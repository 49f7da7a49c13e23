"""Compaction of a log that holds transactions, as Kafka's cleaner does it: aborted records go
and never count as a key's value, committed ones compact like any others, markers outlive
their transactions' records, an active producer's last batch is kept (emptied), and nothing at
or past the last stable offset is touched."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st
from storage_helpers import batches_of

from kafkapy.log import LogConfig, MemoryLog
from kafkapy.log.end_txn_marker import append_end_txn_marker
from kafkapy.log.producer_state import ProducerStateManager
from kafkapy.log.segmented import SegmentedLog
from kafkapy.protocol.records import CREATE_TIME, RecordBatch, build_record_batch

DAY = 24 * 60 * 60 * 1000
PLAIN = -1  # no producer id


class TxnLog:
    """A compacted log (one batch per segment) with the producer table the data plane keeps."""

    def __init__(self) -> None:
        self.log: SegmentedLog = MemoryLog(LogConfig(segment_bytes=1, cleanup_policy="compact"))
        self.state = ProducerStateManager()
        self.log.unstable_offset_source = lambda: self.state.first_unstable_offset
        self.log.producers_source = self.state.last_records
        self.sequences: dict[int, int] = {}

    def write(self, pairs: list[tuple[bytes, bytes | None]], producer_id: int = PLAIN,
              transactional: bool = False) -> None:
        sequence = self.sequences.get(producer_id, 0) if producer_id >= 0 else -1
        data = build_record_batch([(key, value, [], 0) for key, value in pairs],
                                  base_offset=self.log.log_end_offset, producer_id=producer_id,
                                  producer_epoch=0 if producer_id >= 0 else -1, base_sequence=sequence,
                                  is_transactional=transactional)
        batch = RecordBatch(data)
        assert self.state.check_and_update(batch) is None
        self.log.append(bytearray(data), now_ms=0)
        if producer_id >= 0:
            self.sequences[producer_id] = sequence + len(pairs)

    def end(self, producer_id: int, committed: bool) -> None:
        append_end_txn_marker(self.log, self.state, producer_id=producer_id, producer_epoch=0,
                              committed=committed, coordinator_epoch=0, leader_epoch=0, now_ms=0,
                              timestamp_type=CREATE_TIME)

    def batches(self) -> list[RecordBatch]:
        return batches_of(self.log.read(self.log.log_start_offset, 1 << 30).chunks)

    def records(self, committed_only: bool = False) -> list[tuple[int, bytes | None, bytes | None]]:
        """What a consumer reads: read_committed skips the aborted transactions Fetch lists."""
        aborted = {(t.producer_id, t.first_offset, t.last_offset)
                   for t in self.log.collect_aborted_txns(0, self.log.log_end_offset)}
        out = []
        for batch in self.batches():
            if batch.is_control:
                continue
            if committed_only and any(pid == batch.producer_id and first <= batch.base_offset <= last
                                      for pid, first, last in aborted):
                continue
            out.extend((r.offset, r.key, r.value) for r in batch.record_list())
        return out


def test_aborted_records_go_and_never_count_as_a_keys_value() -> None:
    log = TxnLog()
    log.write([(b"k", b"committed-1")], producer_id=5, transactional=True)
    log.end(5, committed=True)
    log.write([(b"k", b"aborted")], producer_id=5, transactional=True)
    log.end(5, committed=False)
    log.write([(b"other", b"x")])  # the active segment
    assert log.log.compact(now_ms=10) == 1  # only the aborted record; committed-1 stays k's value
    assert log.records() == [(0, b"k", b"committed-1"), (4, b"other", b"x")]


def test_committed_transactional_records_compact_like_any_others() -> None:
    log = TxnLog()
    log.write([(b"k", b"plain-1")])
    log.write([(b"k", b"txn-2")], producer_id=5, transactional=True)
    log.end(5, committed=True)
    log.write([(b"other", b"x")])
    assert log.log.compact(now_ms=10) == 1
    assert log.records() == [(1, b"k", b"txn-2"), (3, b"other", b"x")]


def test_an_abort_marker_outlives_its_records_and_its_index_entry() -> None:
    log = TxnLog()
    log.write([(b"k", b"aborted")], producer_id=5, transactional=True)  # offset 0
    log.end(5, committed=False)  # offset 1
    log.write([(b"k", b"plain")], producer_id=6)  # offset 2: producer 6 is idempotent only
    log.write([(b"other", b"x")])  # 3, the active segment
    assert [t.producer_id for t in log.log.collect_aborted_txns(0, 4)] == [5]
    # The pass that removes the aborted record keeps the marker, even past delete.retention.ms.
    assert log.log.compact(now_ms=DAY + 10) == 1
    assert [(b.base_offset, b.is_control, b.record_count) for b in log.batches()][:2] == [
        (0, False, 0),  # producer 5's last data batch: kept, emptied, for its sequence
        (1, True, 1),
    ]
    assert [t.producer_id for t in log.log.collect_aborted_txns(0, 4)] == [5]
    # While the emptied batch stands for the active producer, its transaction is still read and
    # the marker stays (as Kafka's cleaner keeps it).
    assert log.log.compact(now_ms=DAY + 20) == 0
    assert [t.producer_id for t in log.log.collect_aborted_txns(0, 4)] == [5]
    # Once producer 5 expires, its emptied batch goes; the pass after that finds no batch of the
    # transaction: the marker may go, so it gets its delete horizon (KIP-534: that cleaning's time
    # plus delete.retention.ms, however old the marker), and goes at it. Its index entry goes at
    # once, as Kafka rebuilds a cleaned segment's index from the transactions with batches left.
    del log.state.producers[5]
    assert log.log.compact(now_ms=DAY + 30) == 0 and log.batches()[0].base_offset == 1
    assert log.batches()[0].delete_horizon_ms is None
    assert [t.producer_id for t in log.log.collect_aborted_txns(0, 4)] == [5]
    assert log.log.compact(now_ms=DAY + 40) == 0
    marker = log.batches()[0]
    assert (marker.is_control, marker.delete_horizon_ms, marker.record_count) == (True, 2 * DAY + 40, 1)
    assert marker.crc_valid
    assert log.log.collect_aborted_txns(0, 4) == []
    assert log.log.compact(now_ms=2 * DAY + 39) == 0  # before the horizon: the marker is still there
    assert [b.base_offset for b in log.batches()] == [1, 2, 3]
    assert log.log.compact(now_ms=2 * DAY + 40) == 1
    assert [b.base_offset for b in log.batches()] == [2, 3]


def test_a_marker_is_kept_while_younger_than_delete_retention_ms() -> None:
    log = TxnLog()
    log.write([(b"k", b"aborted")], producer_id=5, transactional=True)
    log.end(5, committed=False)
    log.write([(b"other", b"x")])
    log.log.compact(now_ms=10)
    assert log.log.compact(now_ms=20) == 0  # its records are gone, but the horizon is a day
    assert [t.producer_id for t in log.log.collect_aborted_txns(0, 3)] == [5]


def test_an_emptied_batch_keeps_its_offsets_and_the_producers_sequence() -> None:
    log = TxnLog()
    log.write([(b"a", b"1"), (b"b", b"1")], producer_id=9)  # offsets 0-1, sequences 0-1
    log.write([(b"a", b"2"), (b"b", b"2")])  # 2-3 supersede both
    log.write([(b"other", b"x")])
    log.log.compact(now_ms=10)
    first = log.batches()[0]
    assert (first.base_offset, first.last_offset, first.record_count) == (0, 1, 0)
    assert (first.producer_id, first.base_sequence) == (9, 0) and first.crc_valid
    # The producer's table rebuilt from the compacted log still knows its last sequence.
    rebuilt = ProducerStateManager()
    rebuilt.replay(log.batches())
    assert rebuilt.producers[9].last_seq == 1
    # A producer no longer active has no such claim: its superseded batch goes whole.
    del log.state.producers[9]
    log.write([(b"a", b"3"), (b"b", b"3")])
    log.write([(b"more", b"y")])
    log.log.compact(now_ms=20)
    assert 0 not in [b.base_offset for b in log.batches()]


def test_a_partly_kept_batch_still_ends_at_its_last_offset() -> None:
    """Kafka's cleaner keeps a magic-2 batch's last offset when it drops some of its records, so
    the producer's last sequence and the next batch's offset do not move back."""
    log = TxnLog()
    log.write([(b"a", b"1"), (b"b", b"1")], producer_id=9)  # offsets 0-1, sequences 0-1
    log.write([(b"b", b"2")])  # 2 supersedes b@1, the producer batch's last record
    log.write([(b"other", b"x")])
    log.log.compact(now_ms=10)
    first = log.batches()[0]
    assert (first.base_offset, first.last_offset, first.record_count) == (0, 1, 1)
    assert [record.offset for record in first.record_list()] == [0] and first.crc_valid
    rebuilt = ProducerStateManager()
    rebuilt.replay(log.batches())
    assert rebuilt.producers[9].last_seq == 1


def test_nothing_at_or_past_the_last_stable_offset_is_cleaned() -> None:
    log = TxnLog()
    log.write([(b"k", b"1")])  # 0
    log.write([(b"k", b"open")], producer_id=5, transactional=True)  # 1: an open transaction
    log.write([(b"k", b"3")])  # 2
    log.write([(b"other", b"x")])  # 3
    assert log.log.last_stable_offset == 1
    assert log.log.compact(now_ms=10) == 0  # segment 0 alone is below the LSO; k@0 is its last k
    log.end(5, committed=False)
    log.write([(b"more", b"y")])
    assert log.log.compact(now_ms=10) == 2  # k@0 (superseded by k@2) and the aborted k@1
    assert [value for _, key, value in log.records() if key == b"k"] == [b"3"]


PAIRS = st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c"]), st.sampled_from([b"1", b"2", None])),
                 min_size=1, max_size=3)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("plain"), PAIRS),
        st.tuples(st.just("txn"), st.sampled_from([5, 6]), PAIRS),  # left open until an "end"
        st.tuples(st.just("end"), st.sampled_from([5, 6]), st.booleans()),
        st.tuples(st.just("whole txn"), st.sampled_from([5, 6]), PAIRS, st.booleans()),
        st.tuples(st.just("compact"), st.sampled_from([10, DAY + 10])),
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(ops=OPS)
@example(ops=[("whole txn", 5, [(b"a", b"1")], False), ("whole txn", 5, [(b"a", b"2")], True),
              ("plain", [(b"b", b"1")]), ("compact", 10)])  # a marker ends the aborted transaction
@example(ops=[("plain", [(b"a", b"1"), (b"b", None)]), ("plain", [(b"a", b"1")]), ("compact", 10),
              ("compact", DAY + 10)])  # the expired tombstone was a batch's last record
def test_a_read_committed_consumer_sees_the_same_latest_values_after_any_compaction(ops: list) -> None:  # type: ignore[type-arg]
    """Against a model: a read_committed consumer's latest value of every key (bar expired
    tombstones) is the same after compaction, aborted records never come back, and offsets only
    ever disappear."""
    log = TxnLog()
    open_txns: set[int] = set()
    for op in ops:
        kind = op[0]
        if kind == "plain":
            log.write(op[1])
        elif kind == "txn":
            log.write(op[2], producer_id=op[1], transactional=True)
            open_txns.add(op[1])
        elif kind == "whole txn" and op[1] not in open_txns:
            log.write(op[2], producer_id=op[1], transactional=True)
            log.end(op[1], committed=op[3])
        elif kind == "end" and op[1] in open_txns:
            log.end(op[1], committed=op[2])
            open_txns.discard(op[1])
        elif kind == "compact":
            before = log.records(committed_only=True)
            stable = log.log.last_stable_offset
            latest = {key: value for offset, key, value in before if offset < stable}
            offsets_before = {offset for offset, _, _ in log.records()}
            batches_before = log.batches()
            ends_before = {batch.last_offset for batch in batches_before}
            aborted_before = log.log.collect_aborted_txns(0, log.log.log_end_offset)
            log.log.compact(now_ms=op[1])
            # KAFKA-17076: the batch ending where the cleaning stopped is still there
            cleaned_to = log.log.cleaned_to
            if cleaned_to - 1 in ends_before:
                assert cleaned_to - 1 in {batch.last_offset for batch in log.batches()}
            # a cleaning keeps an aborted transaction in the index exactly when it read a batch
            # of it (Kafka's cleaned index), or did not reach its marker
            aborted_after = log.log.collect_aborted_txns(0, log.log.log_end_offset)
            for txn in aborted_before:
                read = any(not batch.is_control and batch.producer_id == txn.producer_id
                           and txn.first_offset <= batch.base_offset < txn.last_offset
                           for batch in batches_before)
                assert (txn in aborted_after) == (read or txn.last_offset >= cleaned_to), txn
            after = log.records(committed_only=True)
            survivors = {key: value for offset, key, value in after if offset < stable}
            for key, value in latest.items():
                if value is None and op[1] > DAY:
                    assert survivors.get(key) is None
                else:
                    assert survivors.get(key, "missing") == value, (key, before, after)
            assert {offset for offset, _, _ in log.records()} <= offsets_before
            assert [r for r in after if r[0] >= stable] == [r for r in before if r[0] >= stable]


def test_the_cleaner_checkpoint_stops_where_the_cleaning_stopped() -> None:
    """cleaned_to (Kafka's cleaner-offset-checkpoint) is the first offset the pass did not clean:
    the segments held back by an open transaction stay dirty for the next pass to pick."""
    log = TxnLog()
    log.write([(b"k", b"1")])  # 0
    log.write([(b"k", b"open")], producer_id=5, transactional=True)  # 1
    log.write([(b"k", b"3")])  # 2
    log.write([(b"other", b"x")])  # 3, active
    log.log.compact(now_ms=10)
    assert log.log.cleaned_to == 1  # not the active segment's 3: offsets 1-2 were not cleaned
    log.end(5, committed=True)
    log.write([(b"more", b"y")])
    log.log.compact(now_ms=10)
    assert log.log.cleaned_to == 5
    log.log.truncate_to(2)
    assert log.log.cleaned_to == 2  # what is written again is dirty
