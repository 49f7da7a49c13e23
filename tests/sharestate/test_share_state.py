"""The share coordinator's sans-I/O state and its records: batches merged as a per-offset model
says, records that round-trip through Kafka's layouts, and a shard rebuilt from the records it
wrote equal to the live one (what a coordinator taking over a state partition relies on)."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.partitioning import java_string_hash
from kafkapy.sharestate.records import ShareStateRecordError, decode_record, encode_record
from kafkapy.sharestate.state import (
    RecordType,
    ShareStateRecord,
    ShareStateShard,
    ShareStateValue,
    StateBatch,
    combine_batches,
    coordinator_key,
    overlay_each,
    state_partition_for,
)

TOPIC_ID = uuid.UUID("0b3b5c8e-7a52-4d3e-9c3f-1c2d3e4f5a6b")
KEY = ("workers", TOPIC_ID, 3)

batches = st.builds(lambda first, length, state, count: StateBatch(first, first + length, state, count),
                    st.integers(0, 60), st.integers(0, 8), st.sampled_from([0, 2, 4]), st.integers(0, 5))


def _per_offset(layers: list[list[StateBatch]], start: int) -> dict[int, tuple[int, int]]:
    model: dict[int, tuple[int, int]] = {}
    for layer in layers:
        for batch in layer:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                model[offset] = (batch.delivery_state, batch.delivery_count)
    return {offset: value for offset, value in model.items() if offset >= start}


def _expand(combined: tuple[StateBatch, ...]) -> dict[int, tuple[int, int]]:
    return {offset: (b.delivery_state, b.delivery_count) for b in combined
            for offset in range(b.first_offset, b.last_offset + 1)}


@given(st.lists(st.lists(batches, max_size=4), max_size=5), st.integers(0, 40))
def test_combine_batches_is_newer_wins_per_offset(layers: list[list[StateBatch]], start: int) -> None:
    combined: tuple[StateBatch, ...] = ()
    for layer in layers:
        for batch in layer:  # within one write, later batches win too
            combined = combine_batches(combined, [batch], 0)
    combined = combine_batches(combined, (), start)
    assert _expand(combined) == _per_offset(layers, start)
    # Sorted, disjoint, and touching neighbours with the same state and count are joined.
    for before, after in itertools.pairwise(combined):
        assert before.last_offset < after.first_offset
        if before.last_offset + 1 == after.first_offset:
            assert ((before.delivery_state, before.delivery_count)
                    != (after.delivery_state, after.delivery_count))


values = st.builds(ShareStateValue, st.integers(0, 0xFFFF), st.integers(-1, 1 << 20),
                   st.integers(-1, 1 << 20), st.integers(-1, 1 << 40),
                   st.lists(batches, max_size=4).map(tuple))


@given(st.sampled_from(RecordType), st.text(min_size=1, max_size=20), st.uuids(), st.integers(0, 1 << 20),
       st.one_of(st.none(), values))
def test_records_round_trip(kind: RecordType, group: str, topic_id: uuid.UUID, partition: int,
                            value: ShareStateValue | None) -> None:
    if value is not None and kind is RecordType.UPDATE:
        value = ShareStateValue(value.snapshot_epoch, -1, value.leader_epoch, value.start_offset,
                                value.batches)
    record = ShareStateRecord(kind, (group, topic_id, partition), value)
    key, data = encode_record(record)
    assert key[:2] == int(kind).to_bytes(2, "big")  # the record type leads the key, as Kafka writes it
    assert (data is None) == (value is None)
    if data is not None:
        assert data[:2] == b"\x00\x00"  # value version 0
    assert decode_record(key, data) == record


def test_snapshot_value_layout_is_kafkas() -> None:
    """Kafka 4.1's ShareSnapshotValue: version, then (flexible v0) int32 snapshot, state and leader
    epochs, int64 start offset, int64 create and write timestamps, a compact array of (int64,
    int64, int8, int16) batches, empty tagged fields. (Kafka 4.0's early access had a uint16
    snapshot epoch and no timestamps.)"""
    value = ShareStateValue(1, 2, 3, 4, (StateBatch(4, 5, 2, 1),), create_timestamp=5, write_timestamp=6)
    record = ShareStateRecord(RecordType.SNAPSHOT, KEY, value)
    _, encoded = encode_record(record)
    assert encoded == bytes.fromhex("0000" "00000001" "00000002" "00000003" "0000000000000004"
                                    "0000000000000005" "0000000000000006" "02"
                                    "0000000000000004" "0000000000000005" "02" "0001" "00" "00")
    assert decode_record(*encode_record(record)).value == value


def test_update_value_layout_is_kafkas_and_reads_a_delivery_complete_count() -> None:
    """Kafka 4.1's ShareUpdateValue: int32 snapshot epoch, int32 leader epoch, int64 start offset,
    the batches; Kafka 4.2 adds DeliveryCompleteCount as tag 0, which a reader passes over."""
    value = ShareStateValue(7, -1, 3, 9, (StateBatch(9, 9, 0, 2),))
    record = ShareStateRecord(RecordType.UPDATE, KEY, value)
    key, encoded = encode_record(record)
    assert encoded == bytes.fromhex("0000" "00000007" "00000003" "0000000000000009" "02"
                                    "0000000000000009" "0000000000000009" "00" "0002" "00" "00")
    tagged = encoded[:-1] + bytes.fromhex("01" "00" "04" "00000005")  # one tagged field: tag 0, 4 bytes
    assert decode_record(key, tagged).value == value


_SNAPSHOT_KEY = encode_record(ShareStateRecord(RecordType.SNAPSHOT, KEY, None))[0]


@pytest.mark.parametrize(("key", "value"), [(b"\x00", None), (b"\x00\x07abc", None),
                                            (_SNAPSHOT_KEY, b"\x00\x09"), (_SNAPSHOT_KEY, b"\x00\x00\x01")])
def test_unreadable_records_are_one_clear_error(key: bytes, value: bytes | None) -> None:
    with pytest.raises(ShareStateRecordError):
        decode_record(key, value)


def test_partition_for_is_kafkas_hash_of_the_coordinator_key() -> None:
    text = coordinator_key(KEY)
    assert text == "workers:CztcjnpSTT6cPxwtPk9aaw:3"  # the topic id as Kafka prints it
    assert state_partition_for(KEY, 50) == abs(java_string_hash(text)) % 50


operations = st.lists(st.one_of(
    st.tuples(st.just("initialize"), st.integers(0, 3), st.integers(0, 50)),
    st.tuples(st.just("write"), st.integers(-1, 3), st.integers(-1, 4), st.integers(-1, 50),
              st.lists(batches, max_size=3)),
    st.tuples(st.just("read"), st.integers(-1, 4)),
    st.tuples(st.just("delete"),)), max_size=30)


@settings(max_examples=200)
@given(operations, st.integers(1, 4))
def test_a_shard_rebuilt_from_its_records_equals_the_live_one(ops: list[tuple[Any, ...]],
                                                               every: int) -> None:
    live = ShareStateShard(snapshot_every=every)
    written: list[tuple[bytes, bytes | None]] = []
    for op in ops:
        try:
            if op[0] == "initialize":
                record: ShareStateRecord | None = live.initialize(KEY, op[1], op[2])
            elif op[0] == "write":
                record = live.write(KEY, op[1], op[2], op[3], op[4])
            elif op[0] == "read":
                _, record = live.read(KEY, op[1])
            else:
                record = live.delete(KEY)
        except KafkaApiError as refusal:
            assert refusal.code in (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH,
                                    ErrorCode.INVALID_REQUEST)
            continue
        if record is None:
            continue
        written.append(encode_record(record))
        live.replay(record)
    rebuilt = ShareStateShard(snapshot_every=every)
    for key, value in written:
        rebuilt.replay(decode_record(key, value))
    assert rebuilt.states == live.states
    # A load replays at most ``every`` updates past the key's last snapshot.
    kinds = [key[:2] for key, value in written if value is not None]
    run = 0
    for kind in kinds:
        run = run + 1 if kind == b"\x00\x01" else 0
        assert run <= every


def test_fencing() -> None:
    shard = ShareStateShard(snapshot_every=500)
    shard.replay(shard.initialize(KEY, 2, 0))
    with pytest.raises(KafkaApiError) as older_state:
        shard.write(KEY, 1, 0, -1, ())
    assert older_state.value.code == ErrorCode.FENCED_STATE_EPOCH
    _, record = shard.read(KEY, 4)
    assert record is not None and record.kind is RecordType.UPDATE
    shard.replay(record)
    with pytest.raises(KafkaApiError) as older_leader:
        shard.write(KEY, 2, 3, -1, ())
    assert older_leader.value.code == ErrorCode.FENCED_LEADER_EPOCH
    with pytest.raises(KafkaApiError) as no_group:
        shard.write(("", TOPIC_ID, 0), 0, 0, -1, ())
    assert no_group.value.code == ErrorCode.INVALID_GROUP_ID


def _disjoint(layer: list[StateBatch]) -> list[StateBatch]:
    """The layer's batches with every overlap cut out (sorted), as a leader's write is."""
    kept: list[StateBatch] = []
    for batch in sorted(layer, key=lambda b: b.first_offset):
        if kept and batch.first_offset <= kept[-1].last_offset:
            continue
        kept.append(batch)
    return kept


@given(st.lists(batches, max_size=6), st.lists(batches, max_size=6), st.integers(0, 40))
def test_the_one_pass_merge_equals_laying_one_update_at_a_time(
        current: list[StateBatch], updates: list[StateBatch], start: int) -> None:
    """The fast path (sorted, disjoint sides) against the plain one, per offset and as batches."""
    kept = combine_batches((), _disjoint(current), 0)
    changes = _disjoint(updates)
    assert combine_batches(kept, changes, start) == combine_batches(overlay_each(kept, changes), (), start)


@given(st.binary(max_size=64), st.one_of(st.none(), st.binary(max_size=96)))
def test_garbage_is_one_clear_error_never_a_traceback(key: bytes, value: bytes | None) -> None:
    try:
        decoded = decode_record(key, value)
    except ShareStateRecordError:
        return
    assert decoded.kind in RecordType  # a record after all: it round-trips
    again = encode_record(decoded)
    assert decode_record(*again) == decoded
