"""Idempotent producer state: the rule table, duplicates, epochs, expiry, Kafka's snapshot bytes,
recovery by replay, and a RuleBasedStateMachine holding the manager equal to a plain model of
Kafka's rules (ProducerAppendInfo / ProducerStateEntry / UnifiedLog's duplicate check)."""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass, field

import google_crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkapy.errors import ErrorCode
from kafkapy.log.append import assign_offsets, validate_records
from kafkapy.log.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    SEQUENCE_RULES,
    BatchMetadata,
    CorruptSnapshotError,
    ProducerBatch,
    ProducerStateEntry,
    ProducerStateError,
    ProducerStateManager,
    classify,
    decode_snapshot,
    encode_snapshot,
    snapshot_file_name,
)
from kafkapy.log.topic_config import LogConfig
from kafkapy.protocol.records import RecordBatch, build_record_batch

INT32_MAX = 2**31 - 1
NOW = 1_767_225_600_000


def pb(
    pid: int, epoch: int, seq: int, first: int, count: int = 1, ts: int = NOW, txn: bool = False
) -> ProducerBatch:
    return ProducerBatch(pid, epoch, seq, first, first + count - 1, ts, txn)


def code_of(manager: ProducerStateManager, batch: ProducerBatch) -> ErrorCode:
    with pytest.raises(ProducerStateError) as info:
        manager.check_and_update(batch)
    return info.value.code


# --- the rule table ----------------------------------------------------------------


def test_the_rule_table_is_total_and_every_row_is_used() -> None:
    used = set()
    for epoch, known, seq, last in itertools.product((-1, 0, 1, 2), (False, True), (0, 1, 5), (-1, 0, 4)):
        entry = ProducerStateEntry(9, producer_epoch=1 if known else -1)
        if last >= 0:
            entry.batches.append(BatchMetadata(last, 100, 0, NOW))
        verdict = classify(entry, pb(9, epoch, seq, 200))
        current = entry.producer_epoch
        relation = "older" if epoch < current else "newer" if epoch > current else "same"
        facts = (known, seq == 0, seq == last + 1)
        rows = [i for i, (rel, *pattern, _) in enumerate(SEQUENCE_RULES)
                if rel.value == relation and all(p is None or p == f for p, f in zip(pattern, facts))]
        assert rows and SEQUENCE_RULES[rows[0]][-1] is verdict
        used.add(rows[0])
    assert used == set(range(len(SEQUENCE_RULES)))


def test_sequences_wrap_at_int32_max() -> None:
    manager = ProducerStateManager()
    manager.check_and_update(pb(1, 0, INT32_MAX - 1, 0, count=3))  # INT32_MAX-1, INT32_MAX, 0
    assert manager.producers[1].last_seq == 1 - 1
    manager.check_and_update(pb(1, 0, 1, 3))
    batch = pb(1, 0, INT32_MAX - 1, 0, count=3)
    assert manager.check_and_update(batch) == BatchMetadata(0, 2, 2, NOW)
    assert BatchMetadata(0, 2, 2, NOW).first_seq == INT32_MAX - 1


def test_duplicate_of_any_of_the_last_five_batches_gets_its_original_offsets() -> None:
    manager = ProducerStateManager()
    for i in range(6):
        assert manager.check_and_update(pb(7, 3, i * 2, 100 + i * 2, count=2)) is None
    # The first batch has been pushed out: its retry is out of order, the others are duplicates.
    assert code_of(manager, pb(7, 3, 0, 500, count=2)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    for i in range(1, 6):
        dup = manager.check_and_update(pb(7, 3, i * 2, 900, count=2))
        assert dup is not None and (dup.first_offset, dup.last_offset) == (100 + i * 2, 101 + i * 2)
    assert manager.map_end_offset == 112


def test_epochs_fence_and_reset_sequences() -> None:
    manager = ProducerStateManager()
    manager.check_and_update(pb(1, 5, 0, 0))
    manager.check_and_update(pb(1, 5, 1, 1))
    assert code_of(manager, pb(1, 4, 2, 2)) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert code_of(manager, pb(1, 6, 2, 2)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert code_of(manager, pb(1, 5, 3, 2)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    manager.check_and_update(pb(1, 6, 0, 2))
    entry = manager.producers[1]
    assert (entry.producer_epoch, entry.last_seq, len(entry.batches)) == (6, 0, 1)
    # A retry from the old epoch is no longer a duplicate: it is fenced.
    assert code_of(manager, pb(1, 5, 1, 3)) is ErrorCode.INVALID_PRODUCER_EPOCH


def test_an_unknown_or_expired_producer_is_accepted_at_any_sequence_as_current_kafka_does() -> None:
    manager = ProducerStateManager(producer_id_expiration_ms=1000)
    assert manager.check_and_update(pb(3, 0, 42, 0, ts=NOW)) is None
    assert manager.remove_expired(NOW + 999) == []
    assert manager.remove_expired(NOW + 1000) == [3]
    assert manager.check_and_update(pb(3, 0, 77, 1, ts=NOW + 2000)) is None
    assert ProducerStateManager().producer_id_expiration_ms == DEFAULT_PRODUCER_ID_EXPIRATION_MS == 86_400_000


def test_an_open_transaction_is_kept_from_expiry_and_needs_transactional_writes() -> None:
    manager = ProducerStateManager(producer_id_expiration_ms=10)
    manager.check_and_update(pb(4, 0, 0, 50, txn=True))
    assert manager.producers[4].current_txn_first_offset == 50
    assert code_of(manager, pb(4, 0, 1, 51)) is ErrorCode.INVALID_TXN_STATE
    manager.check_and_update(pb(4, 0, 1, 51, txn=True))
    assert manager.producers[4].current_txn_first_offset == 50
    assert manager.remove_expired(NOW + 10**9) == []
    done = manager.complete_transaction(4, 0, 2, 52, NOW + 5, aborted=True)
    assert done is not None and (done.first_offset, done.last_offset, done.is_aborted) == (50, 52, True)
    with pytest.raises(ProducerStateError) as info:
        manager.complete_transaction(4, 0, 1, 53, NOW, aborted=False)
    assert info.value.code is ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert manager.remove_expired(NOW + 5 + 10) == [4]


def test_batches_without_a_producer_id_pass_through() -> None:
    manager = ProducerStateManager()
    assert manager.check_and_update(pb(-1, -1, -1, 0, count=3)) is None
    assert manager.producers == {} and manager.map_end_offset == 3


_batches = st.lists(st.tuples(st.sampled_from([-1, 5, 6]), st.sampled_from([0, 0, 1, 2]),
                              st.integers(0, 12), st.integers(1, 3), st.booleans()), max_size=25)


@settings(max_examples=400, deadline=None)
@given(_batches)
def test_would_append_then_record_checked_is_check_and_update(batches: list[tuple[int, int, int, int, bool]]
                                                              ) -> None:
    """Produce's fast path for several partitions asks ``would_append`` of each batch first and
    records the ones taken with ``record_checked``: together they must be ``check_and_update``."""
    checked, split = ProducerStateManager(), ProducerStateManager()
    offset = 0
    for producer_id, epoch, sequence, count, transactional in batches:
        batch = pb(producer_id, epoch, -1 if producer_id < 0 else sequence, offset, count,
                   txn=transactional and producer_id >= 0)
        taken = split.would_append(batch)
        try:
            accepted = checked.check_and_update(batch) is None
        except ProducerStateError:
            accepted = False
        assert taken == accepted, batch
        if taken:
            split.record_checked(batch)
            offset += count
        assert split.producers == checked.producers
        assert (split.map_end_offset, split.first_unstable_offset) == (
            checked.map_end_offset, checked.first_unstable_offset)


def test_the_append_path_end_to_end_with_kafkapy_built_batches() -> None:
    manager = ProducerStateManager()
    log_end = 0
    stored = []
    for seq, retry in ((0, False), (2, False), (2, True), (4, False)):
        data = bytearray(build_record_batch([(b"k", b"a"), (b"k", b"b")], producer_id=11, producer_epoch=0,
                                            base_sequence=seq, base_timestamp=NOW))
        plan = validate_records(data, LogConfig(), NOW)
        assign_offsets(data, plan, base_offset=log_end, leader_epoch=0)
        duplicate = manager.check_and_update(RecordBatch(data))
        assert (duplicate is not None) == retry
        if duplicate is None:
            stored.append(bytes(data))
            log_end += plan.record_count
        else:
            assert (duplicate.first_offset, duplicate.last_offset) == (2, 3)
    assert log_end == 6 and manager.producers[11].last_seq == 5


def test_kafka_python_idempotent_batches_retries_and_an_epoch_bump() -> None:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    def batch(epoch: int, seq: int, n: int, codec: int) -> bytearray:
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                            producer_id=77, producer_epoch=epoch, base_sequence=seq,
                                            batch_size=1 << 20)
        for i in range(n):
            builder.append(i, timestamp=NOW, key=b"k%d" % i, value=b"v" * 64, headers=[])
        return bytearray(builder.build())

    manager = ProducerStateManager()
    log_end = 0
    outcomes = []
    for epoch, seq, n, codec in [(0, 0, 3, 0), (0, 3, 2, 3), (0, 0, 3, 4), (0, 7, 1, 0), (1, 0, 2, 1),
                                 (0, 5, 1, 0)]:
        data = batch(epoch, seq, n, codec)
        plan = validate_records(data, LogConfig(), NOW)
        assign_offsets(data, plan, base_offset=log_end, leader_epoch=0)
        try:
            duplicate = manager.check_and_update(RecordBatch(data))
        except ProducerStateError as exc:
            outcomes.append(exc.code.name)
            continue
        if duplicate is None:
            outcomes.append(("appended", log_end))
            log_end += n
        else:
            outcomes.append(("duplicate", duplicate.first_offset, duplicate.last_offset))
    assert outcomes == [("appended", 0), ("appended", 3), ("duplicate", 0, 2), "OUT_OF_ORDER_SEQUENCE_NUMBER",
                        ("appended", 5), "INVALID_PRODUCER_EPOCH"]


# --- snapshots -----------------------------------------------------------------------


def test_snapshot_bytes_are_kafkas_layout() -> None:
    entry = ProducerStateEntry(1234, 7, 3, NOW, 900)
    entry.batches.append(BatchMetadata(41, 1000, 4, NOW))
    empty = ProducerStateEntry(99, 0, -1, NOW - 1)
    data = encode_snapshot([entry, empty])
    body = struct.pack(">i", 2) + struct.pack(">qhiqiqiq", 1234, 7, 41, 1000, 4, NOW, 3, 900) + struct.pack(
        ">qhiqiqiq", 99, 0, -1, -1, 0, NOW - 1, -1, -1)
    crc = google_crc32c.value(body)
    assert data == struct.pack(">hI", 1, crc) + body
    loaded = decode_snapshot(data)
    assert loaded == [entry, empty]
    assert snapshot_file_name(1000) == "00000000000000001000.snapshot"


@pytest.mark.parametrize("damage", ["version", "crc", "short", "long", "header"])
def test_corrupt_snapshots_are_refused(damage: str) -> None:
    data = bytearray(encode_snapshot([ProducerStateEntry(1, 0, -1, NOW)]))
    if damage == "version":
        data[1] = 2
    elif damage == "crc":
        data[-1] ^= 1
    elif damage == "short":
        del data[-3:]
    elif damage == "long":
        data += b"\x00"
    else:
        del data[4:]
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(data)


@dataclass
class DictStore:
    snapshots: dict[int, bytes] = field(default_factory=dict)

    def write_snapshot(self, offset: int, data: bytes) -> None:
        self.snapshots[offset] = data

    def latest_snapshot(self) -> tuple[int, bytes] | None:
        return max(self.snapshots.items()) if self.snapshots else None

    def remove_snapshot(self, offset: int) -> None:
        self.snapshots.pop(offset, None)


def _log(batches: list[tuple[int, int, int, int]]) -> list[bytes]:
    """(pid, epoch, seq, count) per batch, stamped at consecutive offsets."""
    out, offset = [], 0
    for pid, epoch, seq, count in batches:
        out.append(build_record_batch([(b"k", b"v")] * count, base_offset=offset, producer_id=pid,
                                      producer_epoch=epoch, base_sequence=seq, base_timestamp=NOW))
        offset += count
    return out


def test_recovery_loads_the_snapshot_and_replays_the_rest_or_replays_everything_if_corrupt() -> None:
    log = _log([(1, 0, 0, 2), (2, 0, 0, 1), (1, 0, 2, 2), (1, 1, 0, 1), (2, 0, 1, 3)])

    def batches_from(offset: int) -> list[RecordBatch]:
        return [b for b in map(RecordBatch, log) if b.base_offset >= offset]

    live = ProducerStateManager()
    store = DictStore()
    for raw in log[:3]:
        live.check_and_update(RecordBatch(raw))
    assert live.take_snapshot(store) == 5 and live.take_snapshot(store) is None
    for raw in log[3:]:
        live.check_and_update(RecordBatch(raw))

    recovered = ProducerStateManager()
    recovered.recover(store, batches_from, NOW)
    assert recovered.map_end_offset == live.map_end_offset == 9
    for pid in (1, 2):
        assert recovered.producers[pid].producer_epoch == live.producers[pid].producer_epoch
        assert recovered.producers[pid].last_seq == live.producers[pid].last_seq
        assert recovered.producers[pid].batches[-1] == live.producers[pid].batches[-1]

    store.snapshots[5] = store.snapshots[5][:-1] + b"\x00"
    rebuilt = ProducerStateManager()
    rebuilt.recover(store, batches_from, NOW)
    assert rebuilt.producers == live.producers


def test_a_corrupt_snapshot_is_removed_and_the_next_older_one_loaded() -> None:
    """Kafka's loadFromSnapshot: a torn newest snapshot (a machine crash before its fsync) is
    deleted and the one before it loaded, so only the log after that one is replayed, and a
    producer known only to that snapshot (its batches gone with the log start) is still known."""
    log = _log([(1, 0, 0, 2), (2, 0, 0, 1), (1, 0, 2, 2), (3, 0, 0, 1), (2, 0, 1, 3)])
    replayed_from = []

    def batches_from(offset: int) -> list[RecordBatch]:
        replayed_from.append(offset)
        return [b for b in map(RecordBatch, log) if b.base_offset >= offset]

    live = ProducerStateManager()
    store = DictStore()
    for raw in log[:3]:
        live.check_and_update(RecordBatch(raw))
    live.take_snapshot(store)  # at 5
    for raw in log[3:]:
        live.check_and_update(RecordBatch(raw))
    live.take_snapshot(store)  # at 9
    store.snapshots[9] = store.snapshots[9][:-1] + b"\x00"
    recovered = ProducerStateManager()
    recovered.recover(store, batches_from, NOW, log_start_offset=3)
    assert replayed_from == [5] and sorted(store.snapshots) == [5]
    assert sorted(recovered.producers) == [1, 2, 3]  # pid 1 (its batches below 5) from the snapshot
    for pid in (1, 2, 3):
        assert recovered.producers[pid].last_seq == live.producers[pid].last_seq
        assert recovered.producers[pid].batches[-1] == live.producers[pid].batches[-1]


def test_snapshots_at_or_below_the_log_start_are_removed_and_the_log_replayed_from_its_start() -> None:
    """Kafka's truncateAndReload: a snapshot at or below the log start no longer describes the
    log; it goes, and the producers are those of the batches from the log start on."""
    log = _log([(1, 0, 0, 2), (2, 0, 0, 1), (1, 0, 2, 2), (3, 0, 0, 1)])
    store = DictStore()
    live = ProducerStateManager()
    for raw in log[:2]:
        live.check_and_update(RecordBatch(raw))
    live.take_snapshot(store)  # at 3
    recovered = ProducerStateManager()
    recovered.recover(store, lambda offset: [b for b in map(RecordBatch, log) if b.base_offset >= offset],
                      NOW, log_start_offset=3)
    assert not store.snapshots
    assert sorted(recovered.producers) == [1, 3]  # pid 2 wrote only below the log start
    assert recovered.producers[1].last_seq == 3 and recovered.map_end_offset == 6


def test_replay_applies_end_transaction_markers() -> None:
    data = build_record_batch([(b"k", b"v")], producer_id=5, producer_epoch=0, base_sequence=0,
                              is_transactional=True, base_timestamp=NOW)
    marker = build_record_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x07")], base_offset=1,
                                producer_id=5, producer_epoch=0, is_transactional=True, is_control=True,
                                base_timestamp=NOW)
    manager = ProducerStateManager()
    manager.replay([RecordBatch(data)])
    assert manager.producers[5].current_txn_first_offset == 0
    manager.replay([RecordBatch(marker)])
    entry = manager.producers[5]
    assert (entry.current_txn_first_offset, entry.coordinator_epoch, manager.map_end_offset) == (None, 7, 2)


# --- the model-based test ------------------------------------------------------------


@dataclass
class ModelProducer:
    epoch: int
    batches: list[tuple[int, int, int, int]]  # (first_seq, last_seq, first_offset, last_offset)
    txn_first: int | None
    coordinator_epoch: int
    last_ts: int


class ProducerStateMachine(RuleBasedStateMachine):
    """Every step runs on the manager and on a dict model written straight from Kafka's rules."""

    def __init__(self) -> None:
        super().__init__()
        self.manager = ProducerStateManager(producer_id_expiration_ms=1000)
        self.model: dict[int, ModelProducer] = {}
        self.log_end = 0
        self.now = NOW
        self.store = DictStore()  # the partition's directory: it outlives restarts

    def _expired(self) -> list[int]:
        return sorted(pid for pid, p in self.model.items()
                      if p.txn_first is None and self.now - p.last_ts >= 1000)

    def _expected(
        self, pid: int, epoch: int, seq: int, count: int, txn: bool
    ) -> ErrorCode | tuple[int, int] | None:
        p = self.model.get(pid)
        if p is None:
            return None
        last_seq = seq + count - 1
        if epoch == p.epoch:
            for first_seq, end_seq, first_offset, last_offset in p.batches:
                if (first_seq, end_seq) == (seq, last_seq):
                    return (first_offset, last_offset)
        if epoch < p.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if p.epoch != -1:
            if epoch > p.epoch and seq != 0:
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            if epoch == p.epoch and seq != (p.batches[-1][1] + 1 if p.batches else 0):
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        if p.txn_first is not None and not txn:
            return ErrorCode.INVALID_TXN_STATE
        return None

    @rule(pid=st.integers(1, 3), epoch_move=st.sampled_from([0, 0, 0, 1, -1]),
          seq_kind=st.sampled_from(["next", "next", "zero", "retry", "random"]),
          count=st.integers(1, 3), txn=st.booleans(), random_seq=st.integers(0, 12), pick=st.integers(0, 4))
    def send(self, pid: int, epoch_move: int, seq_kind: str, count: int, txn: bool, random_seq: int,
             pick: int) -> None:
        p = self.model.get(pid)
        epoch = max(0, (p.epoch if p else 0) + epoch_move)
        if seq_kind == "next":
            seq = p.batches[-1][1] + 1 if p and p.batches else 0
        elif seq_kind == "retry" and p and p.batches:
            first_seq, last_seq, _, _ = p.batches[pick % len(p.batches)]
            seq, count = first_seq, last_seq - first_seq + 1
        elif seq_kind == "zero":
            seq = 0
        else:
            seq = random_seq
        txn = txn and (p is None or p.txn_first is not None or pick == 0)
        expected = self._expected(pid, epoch, seq, count, txn)
        batch = pb(pid, epoch, seq, self.log_end, count, ts=self.now, txn=txn)
        if isinstance(expected, ErrorCode):
            assert code_of(self.manager, batch) is expected
            return
        result = self.manager.check_and_update(batch)
        if isinstance(expected, tuple):
            assert result is not None and (result.first_offset, result.last_offset) == expected
            return
        assert result is None
        if p is None:
            p = self.model[pid] = ModelProducer(-1, [], None, -1, self.now)
        if epoch != p.epoch:
            p.batches.clear()
            p.epoch = epoch
        p.batches = [*p.batches, (seq, seq + count - 1, self.log_end, self.log_end + count - 1)][-5:]
        p.last_ts = self.now
        if txn and p.txn_first is None:
            p.txn_first = self.log_end
        self.log_end += count

    @rule(pid=st.integers(1, 3), epoch_move=st.sampled_from([0, 1, -1]), coordinator_epoch=st.integers(0, 3),
          aborted=st.booleans())
    def end_transaction(self, pid: int, epoch_move: int, coordinator_epoch: int, aborted: bool) -> None:
        p = self.model.get(pid)
        epoch = max(0, (p.epoch if p else 0) + epoch_move)
        if p is not None and (epoch < p.epoch or coordinator_epoch < p.coordinator_epoch):
            with pytest.raises(ProducerStateError) as info:
                self.manager.complete_transaction(pid, epoch, coordinator_epoch, self.log_end, self.now,
                                                  aborted=aborted)
            assert info.value.code is (ErrorCode.INVALID_PRODUCER_EPOCH if epoch < p.epoch
                                       else ErrorCode.TRANSACTION_COORDINATOR_FENCED)
            return
        done = self.manager.complete_transaction(pid, epoch, coordinator_epoch, self.log_end, self.now,
                                                 aborted=aborted)
        if p is None:
            p = self.model[pid] = ModelProducer(-1, [], None, -1, self.now)
        assert (done.first_offset if done else None) == p.txn_first
        if epoch != p.epoch:
            p.batches.clear()
            p.epoch = epoch
        p.txn_first, p.coordinator_epoch, p.last_ts = None, coordinator_epoch, self.now
        self.log_end += 1

    @rule(ms=st.integers(0, 1500))
    def time_passes_and_expiry_runs(self, ms: int) -> None:
        self.now += ms
        gone = self._expired()
        assert sorted(self.manager.remove_expired(self.now)) == gone
        for pid in gone:
            del self.model[pid]

    @precondition(lambda self: self.model)
    @rule()
    def restart_from_a_snapshot(self) -> None:
        """A snapshot keeps each producer's last batch only, as Kafka's does."""
        self.manager.take_snapshot(self.store)
        fresh = ProducerStateManager(producer_id_expiration_ms=1000)
        fresh.recover(self.store, lambda offset: [], self.now)
        self.manager = fresh
        for pid in self._expired():
            del self.model[pid]
        for p in self.model.values():
            p.batches = p.batches[-1:]

    @invariant()
    def manager_matches_model(self) -> None:
        assert set(self.manager.producers) == set(self.model)
        for pid, p in self.model.items():
            entry = self.manager.producers[pid]
            assert entry.producer_epoch == p.epoch
            assert entry.current_txn_first_offset == p.txn_first
            retained = [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in entry.batches]
            assert retained == p.batches


TestProducerStateMachine = ProducerStateMachine.TestCase
TestProducerStateMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                             suppress_health_check=[HealthCheck.too_slow])


def test_the_docs_show_the_rule_table_the_code_runs() -> None:
    from pathlib import Path

    from kafkapy.log.producer_state import rules_markdown

    docs = (Path(__file__).resolve().parents[2] / "docs" / "log-append.md").read_text()
    assert rules_markdown() in docs


entries = st.builds(
    lambda pid, epoch, coord, ts, txn, last: _entry(pid, epoch, coord, ts, txn, last),
    st.integers(0, 2**63 - 1), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1), st.one_of(st.none(), st.integers(0, 2**63 - 1)),
    st.one_of(st.none(), st.tuples(st.integers(0, INT32_MAX), st.integers(0, 2**63 - 1),
                                   st.integers(0, INT32_MAX), st.just(0))),
)


def _entry(pid: int, epoch: int, coord: int, ts: int, txn: int | None,
           last: tuple[int, int, int, int] | None) -> ProducerStateEntry:
    entry = ProducerStateEntry(pid, epoch, coord, ts, txn)
    if last is not None:
        # The format keeps one timestamp per producer: the last batch's, which add_batch also
        # makes the producer's last_timestamp.
        entry.batches.append(BatchMetadata(last[0], last[1], last[2], ts))
    return entry


@settings(max_examples=200, deadline=None)
@given(st.lists(entries, max_size=6))
def test_snapshots_round_trip(items: list[ProducerStateEntry]) -> None:
    assert decode_snapshot(encode_snapshot(items)) == items


_ONE_ENTRY = encode_snapshot([_entry(1, 0, 0, 0, None, None)])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=120), st.binary(max_size=60).map(lambda tail: _ONE_ENTRY + tail),
                 st.integers(0, len(_ONE_ENTRY) - 1).map(lambda cut: _ONE_ENTRY[:cut])))
def test_any_bytes_decode_as_a_snapshot_or_corrupt_snapshot_error(raw: bytes) -> None:
    try:
        decoded = decode_snapshot(raw)
    except CorruptSnapshotError as exc:
        assert exc.reason
    else:  # only whole, CRC-valid snapshots get here: 10 header bytes and 46 per entry
        assert len(raw) == 10 + 46 * len(decoded)
