"""__transaction_state's replay in slices gives the state the one-go replay gives, and both the
state a plain fold of the records gives: any mix of values (both value versions), tombstones,
records of versions this broker does not read, null keys, several records a batch, read in any
buffer size and sliced at any record count."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.log import LogManager
from kafkapy.protocol.records import build_record_batch
from kafkapy.protocol.steps import all_at_once
from kafkapy.transactions.coordinator import TRANSACTION_STATE_TOPIC
from kafkapy.transactions.metadata import TxnMetadata
from kafkapy.transactions.records import decode_value, encode_key, encode_value
from kafkapy.transactions.state import TxnState
from kafkapy.transactions.state_log import TopicStateLog

IDS = ("a", "b", "c", "d", "é")
NOW = 1_700_000_000_000
UNKNOWN_VERSION = struct.pack(">h", 99)

Record = tuple[bytes | None, bytes | None]
KINDS = ("value", "value_v1", "tombstone", "unknown_key", "unknown_value", "null_key")

metadata = st.builds(
    TxnMetadata, st.sampled_from(IDS), st.integers(0, 1 << 40), st.integers(0, 100),
    st.integers(1, 60_000), st.sampled_from([TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT,
                                              TxnState.PREPARE_ABORT, TxnState.COMPLETE_COMMIT]),
    st.integers(NOW, NOW + 10_000), st.integers(-1, NOW),
    st.frozensets(st.tuples(st.sampled_from(["orders", "audit"]), st.integers(0, 3)), max_size=3))


@st.composite
def records(draw: st.DrawFn) -> Record:
    kind = draw(st.sampled_from(KINDS))
    if kind in ("value", "value_v1"):
        found = draw(metadata)
        return encode_key(found.transactional_id), encode_value(found, 1 if kind == "value_v1" else 0)
    transactional_id = draw(st.sampled_from(IDS))
    if kind == "tombstone":
        return encode_key(transactional_id), None
    if kind == "unknown_key":
        return UNKNOWN_VERSION + b"\x00\x01x", b"anything"
    if kind == "unknown_value":
        return encode_key(transactional_id), UNKNOWN_VERSION + b"\x00"
    return None, b"no key"


def fold(batches: list[list[Record]]) -> dict[str, TxnMetadata]:
    """What the partition says, record by record: a plain model of the replay."""
    ids: dict[str, TxnMetadata] = {}
    for batch in batches:
        for key, value in batch:
            if key is None or key.startswith(UNKNOWN_VERSION) or (value or b"").startswith(UNKNOWN_VERSION):
                continue
            transactional_id = next(i for i in IDS if encode_key(i) == key)
            decoded = decode_value(transactional_id, value)
            if decoded is None:
                ids.pop(transactional_id, None)
            else:
                ids[transactional_id] = decoded
    return ids


def written(batches: list[list[Record]]) -> TopicStateLog:
    logs = LogManager()
    log = logs.get_or_create(TRANSACTION_STATE_TOPIC, 0)
    for batch in batches:
        log.append(build_record_batch(batch, base_offset=log.log_end_offset, base_timestamp=NOW))
    return TopicStateLog(logs.get_or_create, lambda: NOW)


@settings(max_examples=200, deadline=None)
@given(batches=st.lists(st.lists(records(), min_size=1, max_size=4), max_size=40),
       slice_records=st.integers(1, 7), read_bytes=st.integers(1, 2000))
def test_a_replay_in_slices_gives_the_one_go_state(batches: list[list[Record]], slice_records: int,
                                                   read_bytes: int) -> None:
    state_log = written(batches)
    expected = fold(batches)
    assert state_log.replay(0) == expected
    sliced, yields = all_at_once(state_log.replay_in_slices(0, slice_records=slice_records,
                                                            read_bytes=read_bytes))
    assert sliced == expected
    assert yields == sum(map(len, batches)) // slice_records  # one yield per full slice, null keys too


def test_an_empty_partition_replays_to_nothing_without_yielding() -> None:
    assert all_at_once(written([]).replay_in_slices(0, slice_records=1)) == ({}, 0)
