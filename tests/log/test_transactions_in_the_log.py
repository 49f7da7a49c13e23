"""Transactions in the partition log: the LSO held back by open transactions, end-transaction
markers, the aborted-transaction index (Kafka's .txnindex) and its search, truncation and
recovery, on both backends."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import BACKENDS, MakeLog, log_factory

from kafkapy.errors import DecodeError, ErrorCode
from kafkapy.log import LogConfig, LogManager
from kafkapy.log.end_txn_marker import append_end_txn_marker
from kafkapy.log.producer_state import ProducerStateError, ProducerStateManager, decode_snapshot
from kafkapy.log.segmented import SegmentedLog
from kafkapy.log.segments import FileLog
from kafkapy.log.txn_index import ABORTED_TXN_SIZE, AbortedTxn, TxnIndex, decode_entries, encode_entry
from kafkapy.protocol.records import CREATE_TIME, RecordBatch, Records, build_record_batch

SMALL_SEGMENTS = LogConfig(segment_bytes=300)


@pytest.fixture(params=BACKENDS)
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeLog]:
    yield from log_factory(request.param, tmp_path)


class Partition:
    """A log and its producer table, appended to as the data plane does."""

    def __init__(self, log: SegmentedLog, state: ProducerStateManager | None = None) -> None:
        self.log = log
        self.state = state or ProducerStateManager()
        log.unstable_offset_source = lambda: self.state.first_unstable_offset
        self.sequences: dict[int, int] = {}

    def data(self, producer_id: int = -1, *, transactional: bool = False, count: int = 1) -> int:
        sequence = -1
        if producer_id >= 0:
            sequence = self.sequences.get(producer_id, 0)
            self.sequences[producer_id] = sequence + count
        batch = bytearray(build_record_batch(
            [{"value": b"x" * 20, "timestamp": 1_000}] * count, base_offset=self.log.log_end_offset,
            producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1, base_sequence=sequence,
            is_transactional=transactional))
        assert self.state.check_and_update(RecordBatch(batch)) is None
        self.log.append(batch)
        return RecordBatch(batch).base_offset

    def marker(self, producer_id: int, *, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
        offset = self.log.log_end_offset
        append_end_txn_marker(self.log, self.state, producer_id=producer_id, producer_epoch=epoch,
                              committed=commit, coordinator_epoch=coordinator_epoch, leader_epoch=0,
                              now_ms=2_000, timestamp_type=CREATE_TIME)
        return offset


# --- the entry layout and the file ----------------------------------------------------------


def test_an_entry_is_kafkas_34_byte_aborted_txn() -> None:
    txn = AbortedTxn(producer_id=7, first_offset=10, last_offset=20, last_stable_offset=15)
    expected = (b"\x00\x00" + (7).to_bytes(8, "big") + (10).to_bytes(8, "big") + (20).to_bytes(8, "big")
                + (15).to_bytes(8, "big"))
    assert encode_entry(txn) == expected and ABORTED_TXN_SIZE == 34
    assert decode_entries(expected * 2) == [txn, txn]


def test_a_torn_entry_is_cut_and_a_newer_version_refused(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    entry = encode_entry(AbortedTxn(1, 0, 3, 4))
    path.write_bytes(entry + entry[:10])
    index = TxnIndex(path)
    assert list(index) == [AbortedTxn(1, 0, 3, 4)]
    assert path.read_bytes() == entry
    index.close()
    with pytest.raises(DecodeError, match="version 1"):
        decode_entries(struct.pack(">h", 1) + entry[2:])


@given(st.binary(max_size=200))
def test_any_bytes_decode_as_entries_or_a_decode_error(raw: bytes) -> None:
    try:
        entries = decode_entries(raw)
    except DecodeError:
        return
    assert len(entries) == len(raw) // ABORTED_TXN_SIZE


def test_entries_must_follow_marker_order() -> None:
    index = TxnIndex()
    index.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError, match="increase sequentially"):
        index.append(AbortedTxn(2, 1, 5, 6))


def test_the_txnindex_file_is_made_at_the_first_abort_beside_the_marker_segment(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "t-0", SMALL_SEGMENTS)
    p = Partition(log)
    first = p.data(1, transactional=True)
    p.marker(1, commit=True)  # a commit leaves no entry
    assert not list((tmp_path / "t-0").glob("*.txnindex"))
    for _ in range(4):
        p.data()
    start = p.data(2, transactional=True, count=2)
    p.data()
    p.data(3, transactional=True)
    abort_at = p.marker(2, commit=False)
    assert len(log.segments) > 1
    holder = log.segments[-1]
    assert holder.base_offset <= abort_at
    assert first == 0
    # The LSO after the abort is producer 3's open transaction, which began before the marker.
    entry = AbortedTxn(2, start, abort_at, abort_at - 1)
    assert (tmp_path / "t-0" / f"{holder.base_offset:020d}.txnindex").read_bytes() == encode_entry(entry)
    made = [path.name for path in (tmp_path / "t-0").glob("*.txnindex")]
    assert made == [f"{holder.base_offset:020d}.txnindex"]
    log.close()


# --- the LSO --------------------------------------------------------------------------------


def test_the_lso_is_the_first_offset_of_the_earliest_open_transaction(make_log: MakeLog) -> None:
    p = Partition(make_log())
    p.data()
    assert p.log.last_stable_offset == p.log.high_watermark == 1
    p.data(1, transactional=True)  # offset 1
    p.data(2, transactional=True)  # offset 2
    p.data()
    assert (p.log.last_stable_offset, p.log.high_watermark) == (1, 4)
    p.marker(2, commit=False)  # offset 4; producer 1 still holds the LSO
    assert p.log.last_stable_offset == 1
    p.marker(1, commit=True)  # offset 5
    assert p.log.last_stable_offset == p.log.high_watermark == 6
    assert p.log.collect_aborted_txns(0, 6) == [AbortedTxn(2, 2, 4, 1)]
    # read_committed reads stop at the LSO: nothing past the open transaction's first batch
    p.data(3, transactional=True)
    p.data()
    result = p.log.read(0, 1 << 20, max_offset=p.log.last_stable_offset, aborted_transactions=True)
    assert result.last_stable_offset == 6
    assert Records(b"".join(bytes(c) for c in result.chunks)).batches().__next__().base_offset == 0
    assert sum(1 for _ in Records(b"".join(bytes(c) for c in result.chunks)).batches()) == 6
    assert result.aborted_transactions == (AbortedTxn(2, 2, 4, 1),)


def test_the_lso_never_falls_below_the_log_start(make_log: MakeLog) -> None:
    p = Partition(make_log())
    p.data(1, transactional=True)
    p.data()
    p.data()
    p.log.delete_records_before(2)
    assert p.log.last_stable_offset == 2  # Kafka's maybeIncrementFirstUnstableOffset


def test_markers_from_an_old_epoch_or_coordinator_are_refused_and_write_nothing(make_log: MakeLog) -> None:
    p = Partition(make_log())
    p.data(1, transactional=True)
    p.marker(1, commit=True, epoch=1, coordinator_epoch=3)
    end = p.log.log_end_offset
    with pytest.raises(ProducerStateError) as stale:
        p.marker(1, commit=False, epoch=0, coordinator_epoch=3)
    assert stale.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(ProducerStateError) as zombie:
        p.marker(1, commit=False, epoch=1, coordinator_epoch=2)
    assert zombie.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert p.log.log_end_offset == end


def test_the_marker_is_kafkas_control_batch(make_log: MakeLog) -> None:
    p = Partition(make_log())
    p.data(5, transactional=True)
    at = p.marker(5, commit=False, coordinator_epoch=9)
    [batch] = list(Records(b"".join(bytes(c) for c in p.log.read(at, 1 << 20).chunks)).batches())
    assert isinstance(batch, RecordBatch)
    assert (batch.is_control, batch.is_transactional, batch.producer_id, batch.producer_epoch,
            batch.base_sequence, batch.base_offset) == (True, True, 5, 0, -1, at)
    assert batch.attributes & 0x30 == 0x30
    [record] = batch.record_list()
    # key: version 0, type 0 (ABORT); value: version 0, coordinator epoch 9
    assert (record.key, record.value, record.timestamp) == (b"\0\0\0\0", b"\0\0\0\0\0\x09", 2_000)


def test_truncation_drops_the_entries_of_markers_it_cuts(make_log: MakeLog) -> None:
    p = Partition(make_log(SMALL_SEGMENTS))
    p.data(1, transactional=True)
    first_abort = p.marker(1, commit=False)
    for _ in range(5):
        p.data()
    p.data(1, transactional=True)
    second_abort = p.marker(1, commit=False)
    assert len(p.log.collect_aborted_txns(0, p.log.log_end_offset)) == 2
    p.log.truncate_to(second_abort)
    assert [t.last_offset for t in p.log.collect_aborted_txns(0, p.log.log_end_offset)] == [first_abort]


# --- the search against brute force ---------------------------------------------------------

ops = st.lists(st.tuples(st.sampled_from(["plain", "txn", "commit", "abort"]), st.integers(1, 3),
                         st.integers(1, 3)), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=ops, data=st.data())
def test_collect_finds_exactly_the_aborted_transactions_overlapping_a_range(
        make_log: MakeLog, steps: list[tuple[str, int, int]], data: st.DataObject) -> None:
    """Over segments, the early stop at an entry whose LSO passes the range loses nothing."""
    log = make_log(SMALL_SEGMENTS)
    p = Partition(log)
    open_txns: set[int] = set()
    for kind, producer, count in steps:
        if kind == "plain":
            p.data(count=count)
        elif kind == "txn":
            p.data(producer, transactional=True, count=count)
            open_txns.add(producer)
        elif producer in open_txns:
            p.marker(producer, commit=kind == "commit")
            open_txns.discard(producer)
    every = [txn for segment in log.segments for txn in segment.txn_index]
    end = log.log_end_offset
    for _ in range(10):
        start = data.draw(st.integers(0, end))
        upper = data.draw(st.integers(start, end))
        assert log.collect_aborted_txns(start, upper) == [
            t for t in every if t.last_offset >= start and t.first_offset < upper]


# --- recovery -------------------------------------------------------------------------------


def _recovered(manager: LogManager) -> tuple[SegmentedLog, ProducerStateManager]:
    """The partition as the data plane finds it at start: producer state rebuilt from the
    snapshot and the log's tail (LogHome.recover_producer_states)."""
    from kafkapy.dataplane.partitions import LogHome

    home = LogHome(manager, producer_id_expiration_ms=24 * 3600 * 1000)
    home.recover_producer_states()
    return manager.logs["t", 0], home.producers["t", 0]


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_a_restart_rebuilds_open_transactions_the_lso_and_the_index(tmp_path: Path, clean: bool) -> None:
    manager = LogManager([tmp_path], default_config=SMALL_SEGMENTS)
    manager.get_or_create("t", 0)
    log, state = _recovered(manager)
    p = Partition(log, state)
    p.data(1, transactional=True)
    p.marker(1, commit=False)
    for _ in range(6):
        p.data()
    open_at = p.data(2, transactional=True)
    p.data(3, transactional=True)
    last_abort = p.marker(3, commit=False)
    p.data()
    before = (log.last_stable_offset, log.collect_aborted_txns(0, log.log_end_offset), log.log_end_offset)
    assert before[0] == open_at and len(before[1]) == 2
    assert len(log.segments) > 2
    if clean:
        manager.close()
    else:
        # kill -9: no clean-shutdown marker, no final snapshot; and the newest segment's index
        # file lost: its marker is past the last snapshot (taken at the last roll), so the
        # replay of the log's tail restores the entry
        holder = log.segments[log._segment_index(last_abort)]
        assert holder is log.segments[-1]
        for segment in log.segments:
            segment.close()
        (tmp_path / "t-0" / f"{holder.base_offset:020d}.txnindex").unlink()
    reopened = LogManager([tmp_path], default_config=SMALL_SEGMENTS)
    log2, state2 = _recovered(reopened)
    assert (log2.last_stable_offset, log2.collect_aborted_txns(0, log2.log_end_offset),
            log2.log_end_offset) == before
    assert state2.first_unstable_offset == open_at
    reopened.close()


def test_a_marker_that_rolls_the_segment_is_snapshotted_as_not_yet_applied(tmp_path: Path) -> None:
    """The roll's snapshot is taken at the marker's offset, so it must hold the transaction still
    open: the replay from it applies the marker (and restores its index entry)."""
    manager = LogManager([tmp_path], default_config=SMALL_SEGMENTS)
    manager.get_or_create("t", 0)
    log, state = _recovered(manager)
    p = Partition(log, state)
    first = p.data(1, transactional=True, count=3)
    while log.active.size + 80 <= SMALL_SEGMENTS.segment_bytes:
        p.data()
    at = p.marker(1, commit=False)
    assert log.active.base_offset == at  # the marker opened a new segment
    offset, data = log.latest_snapshot() or (None, b"")
    assert offset == at
    [entry] = [e for e in decode_snapshot(data) if e.producer_id == 1]
    assert entry.current_txn_first_offset == first
    for segment in log.segments:
        segment.close()
    (tmp_path / "t-0" / f"{at:020d}.txnindex").unlink()
    reopened = LogManager([tmp_path], default_config=SMALL_SEGMENTS)
    log2, _ = _recovered(reopened)
    assert log2.collect_aborted_txns(0, log2.log_end_offset) == [AbortedTxn(1, first, at, at + 1)]
    reopened.close()


RECOVERY_SEGMENTS = LogConfig(segment_bytes=900)  # rolls every ten batches or so: several markers a segment


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=ops, clean=st.booleans(), lose_newest_index=st.booleans())
def test_recovery_after_random_transactions_gives_the_same_partition(
        tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int, int]], clean: bool,
        lose_newest_index: bool) -> None:
    """Whatever was written, a reopen (clean, or a crash that may also lose the newest segment's
    index file: its entries are past the last roll's snapshot) rebuilds the same LSO, open
    transactions and aborted-transaction index."""
    directory = tmp_path_factory.mktemp("recovery")
    manager = LogManager([directory], default_config=RECOVERY_SEGMENTS)
    manager.get_or_create("t", 0)
    log, state = _recovered(manager)
    p = Partition(log, state)
    open_txns: set[int] = set()
    for kind, producer, count in steps:
        if kind == "plain":
            p.data(count=count)
        elif kind == "txn":
            p.data(producer, transactional=True, count=count)
            open_txns.add(producer)
        elif producer in open_txns:
            p.marker(producer, commit=kind == "commit")
            open_txns.discard(producer)
    before = (log.last_stable_offset, log.collect_aborted_txns(0, log.log_end_offset), log.log_end_offset,
              dict(state.ongoing))
    newest = log.segments[-1].base_offset
    if clean:
        manager.close()
    else:
        for segment in log.segments:
            segment.close()
        if lose_newest_index:
            (directory / "t-0" / f"{newest:020d}.txnindex").unlink(missing_ok=True)
    reopened = LogManager([directory], default_config=RECOVERY_SEGMENTS)
    log2, state2 = _recovered(reopened)
    assert (log2.last_stable_offset, log2.collect_aborted_txns(0, log2.log_end_offset), log2.log_end_offset,
            state2.ongoing) == before
    reopened.close()


def test_a_crash_replays_producer_state_over_every_unflushed_segment(tmp_path: Path) -> None:
    """After a kill -9 the producer state comes from the last snapshot at or below the base of
    the segment holding the recovery point (Kafka's recoverSegment deletes the snapshots above),
    so the replay restores an aborted transaction's index entry that an unflushed segment lost,
    even when a later roll's snapshot is there."""
    manager = LogManager([tmp_path], default_config=SMALL_SEGMENTS)
    manager.get_or_create("t", 0)
    log, state = _recovered(manager)
    p = Partition(log, state)
    p.data(1, transactional=True)
    first_abort = p.marker(1, commit=False)
    for _ in range(6):
        p.data()
    before = (log.collect_aborted_txns(0, log.log_end_offset), log.log_end_offset)
    assert len(before[0]) == 1
    holder = log.segments[log._segment_index(first_abort)]
    assert holder is not log.segments[-1] and len(list((tmp_path / "t-0").glob("*.snapshot"))) > 1
    for segment in log.segments:
        segment.close()
    # the recovery-point checkpoint still says 0 (its timer had not run), and the marker
    # segment's index file never reached the disk
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 0\n")
    (tmp_path / "t-0" / f"{holder.base_offset:020d}.txnindex").unlink()
    reopened = LogManager([tmp_path], default_config=SMALL_SEGMENTS)
    log2, _ = _recovered(reopened)
    assert (log2.collect_aborted_txns(0, log2.log_end_offset), log2.log_end_offset) == before
    reopened.close()
