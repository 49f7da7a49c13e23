"""__transaction_state records: Kafka's layout byte for byte, round trips, and clear errors."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.transactions.metadata import TxnMetadata
from kafkapy.transactions.records import (
    TransactionLogError,
    _decode,
    _value_v0_fields,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    record_json,
    spec_encode_key,
    spec_encode_value,
)
from kafkapy.transactions.state import TxnState


def test_key_is_version_then_string() -> None:
    assert encode_key("tx") == b"\x00\x00" + b"\x00\x02tx"
    assert decode_key(b"\x00\x00\x00\x02tx") == "tx"


def test_value_v0_bytes_worked_by_hand() -> None:
    """Derived from the spec: int16 version, int64 producer id, int16 epoch, int32 timeout, int8
    status, partitions (int32 count; per topic an int16-length string and an int32 array), then the
    two int64 timestamps."""
    metadata = TxnMetadata("t", producer_id=5, producer_epoch=1, timeout_ms=60_000, state=TxnState.ONGOING,
                           last_update_ms=100, start_ms=50,
                           partitions=frozenset({("b", 2), ("a", 1), ("a", 0)}))
    expected = (struct.pack(">hqhib", 0, 5, 1, 60_000, 1)
                + struct.pack(">i", 2)
                + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 1)
                + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 2)
                + struct.pack(">qq", 100, 50))
    assert encode_value(metadata) == expected
    assert decode_value("t", expected) == metadata


def test_empty_writes_null_partitions_and_none_is_a_tombstone() -> None:
    metadata = TxnMetadata("t", 7, 0, 1000, TxnState.EMPTY, last_update_ms=1)
    data = encode_value(metadata)
    assert data is not None
    assert data[2 + 8 + 2 + 4 + 1:][:4] == struct.pack(">i", -1)  # a null array
    assert decode_value("t", data) == metadata
    assert encode_value(None) is None and decode_value("t", None) is None


def test_version_1_with_tagged_fields_is_read() -> None:
    metadata = TxnMetadata("t", 9, 3, 1000, TxnState.COMPLETE_COMMIT, last_update_ms=5, start_ms=4,
                           previous_producer_id=8)
    data = encode_value(metadata, version=1)
    assert data is not None and data[:2] == b"\x00\x01"
    assert decode_value("t", data) == metadata


def test_record_json_is_kafkas_transaction_log_formatter_shape() -> None:
    """Kafka 4's TransactionLogMessageFormatter: key and value each {"version", "data"}, fields by
    the JSON converters' names (the spec's, first letter lower)."""
    metadata = TxnMetadata("etl", producer_id=5, producer_epoch=1, timeout_ms=60_000, state=TxnState.ONGOING,
                           last_update_ms=100, start_ms=50,
                           partitions=frozenset({("b", 2), ("a", 1), ("a", 0)}))
    assert record_json(encode_key("etl"), encode_value(metadata)) == {
        "key": {"version": 0, "data": {"transactionalId": "etl"}},
        "value": {"version": 0, "data": {
            "producerId": 5, "producerEpoch": 1, "transactionTimeoutMs": 60_000, "transactionStatus": 1,
            "transactionPartitions": [{"topic": "a", "partitionIds": [0, 1]},
                                      {"topic": "b", "partitionIds": [2]}],
            "transactionLastUpdateTimestampMs": 100, "transactionStartTimestampMs": 50}}}
    v1 = record_json(encode_key("etl"), encode_value(metadata, version=1))["value"]
    assert v1["version"] == 1 and v1["data"]["producerId"] == 5
    # Tagged fields only when not at their defaults, as Kafka's generated converters write them.
    assert not {"previousProducerId", "nextProducerId", "clientTransactionVersion"} & set(v1["data"])
    bumped = TxnMetadata("etl", 9, 3, 1000, TxnState.COMPLETE_COMMIT, last_update_ms=5, start_ms=4,
                         previous_producer_id=8)
    tagged = record_json(encode_key("etl"), encode_value(bumped, version=1))["value"]["data"]
    assert tagged["previousProducerId"] == 8 and "nextProducerId" not in tagged


def test_record_json_of_a_tombstone_and_of_versions_it_has_no_schema_for() -> None:
    assert record_json(encode_key("gone"), None) == {
        "key": {"version": 0, "data": {"transactionalId": "gone"}}, "value": None}
    assert record_json(b"\x00\x07\x00\x01t", b"\x00\x09...") == {  # a later release's, as Kafka prints it
        "key": {"version": 7, "data": "unknown"}, "value": {"version": 9, "data": "unknown"}}
    with pytest.raises(TransactionLogError, match="too short"):
        record_json(b"\x00", None)
    with pytest.raises(TransactionLogError, match="TransactionLogKey v0"):
        record_json(b"\x00\x00\x00\x05tx", None)


@pytest.mark.parametrize(("data", "message"), [
    (b"\x00\x05\x00\x01t", "TransactionLogKey version 5"),
    (b"\x00", "too short"),
    (b"\x00\x00\x00\x05tx", "TransactionLogKey v0"),
])
def test_bad_keys_give_one_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(TransactionLogError, match=message):
        decode_key(data)


def test_unknown_status_is_refused() -> None:
    data = encode_value(TxnMetadata("t", 1, 0, 1000, TxnState.EMPTY, 0))
    assert data is not None
    bad = data[:16] + b"\x09" + data[17:]
    with pytest.raises(TransactionLogError, match="unknown transaction status 9"):
        decode_value("t", bad)


partitions = st.frozensets(st.tuples(st.text(min_size=1, max_size=10), st.integers(0, 1000)), max_size=6)
metadata = st.builds(
    TxnMetadata, transactional_id=st.text(max_size=20), producer_id=st.integers(0, 2**63 - 1),
    producer_epoch=st.integers(0, 2**15 - 1), timeout_ms=st.integers(1, 2**31 - 1),
    state=st.sampled_from([s for s in TxnState if s is not TxnState.EMPTY]),
    last_update_ms=st.integers(0, 2**62),
    start_ms=st.integers(-1, 2**62), partitions=partitions)


@given(metadata, st.sampled_from([0, 1]))
def test_round_trip(value: TxnMetadata, version: int) -> None:
    assert decode_key(encode_key(value.transactional_id)) == value.transactional_id
    assert decode_value(value.transactional_id, encode_value(value, version)) == value


@given(st.binary(max_size=64))
def test_garbage_gives_transaction_log_error_or_a_value(data: bytes) -> None:
    try:
        value = decode_value("t", data)
    except TransactionLogError:
        return
    assert isinstance(value, TxnMetadata)


# --- the hand-written encoders (what every state change writes) against the spec codec ----------

any_state = st.sampled_from(list(TxnState))
wide_metadata = st.builds(
    TxnMetadata, transactional_id=st.text(max_size=40), producer_id=st.integers(-(2**64), 2**64),
    producer_epoch=st.integers(-(2**16), 2**16), timeout_ms=st.integers(-(2**32), 2**32), state=any_state,
    last_update_ms=st.integers(-(2**64), 2**64), start_ms=st.integers(-(2**64), 2**64),
    partitions=st.frozensets(st.tuples(st.text(max_size=12), st.integers(-(2**32), 2**32)), max_size=8))


def _outcome(encode: Callable[[], object]) -> object:
    try:
        return encode()
    except Exception as exc:  # the two paths must fail alike, whatever the failure
        return f"{type(exc).__name__}: {exc}"


@given(st.one_of(metadata, wide_metadata))
def test_hand_encoded_value_v0_is_the_spec_codecs_byte_for_byte(value: TxnMetadata) -> None:
    """In range the bytes are equal; out of any field's range both give the spec codec's error."""
    assert _outcome(lambda: encode_value(value)) == _outcome(lambda: spec_encode_value(value, 0))
    assert _outcome(lambda: encode_value(value)) == _outcome(lambda: encode_value(value))  # cached alike


@given(st.text(max_size=40) | st.integers(32_760, 32_800).map(lambda n: "a" * n))
def test_hand_encoded_key_is_the_spec_codecs_byte_for_byte(transactional_id: str) -> None:
    """Including ids around the int16 length limit (32,767 bytes), past which both refuse."""
    fast = _outcome(lambda: encode_key(transactional_id))
    assert fast == _outcome(lambda: spec_encode_key(transactional_id))


def test_hand_encoders_take_the_spec_path_for_what_struct_cannot_hold() -> None:
    huge_topic = TxnMetadata("t", 1, 0, 1000, TxnState.ONGOING, 0, 0, frozenset({("x" * 40_000, 0)}))
    assert _outcome(lambda: encode_value(huge_topic)) == _outcome(lambda: spec_encode_value(huge_topic, 0))
    assert isinstance(_outcome(lambda: encode_value(huge_topic)), str)  # refused, as the codec refuses it
    version_1 = TxnMetadata("t", 1, 0, 1000, TxnState.ONGOING, 0, 0, previous_producer_id=3)
    assert encode_value(version_1, version=1) == spec_encode_value(version_1, 1)


# --- the hand-written value v0 reader (what a load reads) against the spec codec ------------------

def _damaged(data: bytes, cut: int, flips: list[tuple[int, int]], extra: bytes) -> bytes:
    damaged = bytearray(data[:cut] if cut < len(data) else data)
    for at, byte in flips:
        if damaged:
            damaged[at % len(damaged)] = byte
    return bytes(damaged) + extra


@given(st.one_of(metadata, wide_metadata, metadata.map(lambda m: TxnMetadata(
           m.transactional_id, m.producer_id, m.producer_epoch, m.timeout_ms, TxnState.EMPTY, 0, -1))),
       st.integers(0, 200), st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=3),
       st.binary(max_size=3), st.booleans())
def test_hand_read_value_v0_is_the_spec_codecs(value: TxnMetadata, cut: int, flips: list[tuple[int, int]],
                                               extra: bytes, damage: bool) -> None:
    """A value v0 as written, or cut, with bytes changed or appended: whatever the hand reader
    reads is what the spec codec reads; it reads every value kafkapy writes, and gives way to the
    codec (None) for the rest."""
    try:
        data = spec_encode_value(value, 0)
    except Exception:  # out of a field's range: nothing to read
        return
    if damage:
        data = _damaged(data, cut, flips, extra)
    fast = _value_v0_fields(data)
    if not damage:
        assert fast is not None
    if fast is not None:
        assert fast == _decode("TransactionLogValue", data)[1]


@given(st.binary(max_size=80))
def test_hand_read_of_any_bytes_is_the_spec_codecs_or_none(data: bytes) -> None:
    fast = _value_v0_fields(b"\x00\x00" + data)
    if fast is not None:
        assert fast == _decode("TransactionLogValue", b"\x00\x00" + data)[1]
