"""one_record_batch, the hand-built fast path, held equal to build_record_batch byte for byte:
the same bytes for every input, and the same error where the general path refuses one."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.errors import EncodeError
from kafkapy.protocol.one_record_batch import one_record_batch
from kafkapy.protocol.records import CREATE_TIME, LOG_APPEND_TIME, Records, build_record_batch

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT16 = st.integers(-(1 << 15), (1 << 15) - 1)
BLOB = st.none() | st.binary(max_size=300)  # past 63 bytes the record's lengths take two varint bytes


def _both(key: Any, value: Any, **fields: Any) -> tuple[bytes | str, bytes | str]:
    """Each path's bytes, or its error's type and message."""
    results: list[bytes | str] = []
    for build in (lambda: one_record_batch(key, value, **fields),
                  lambda: build_record_batch([(key, value)], **fields)):
        try:
            results.append(build())
        except EncodeError as exc:
            results.append(f"EncodeError: {exc}")
    return results[0], results[1]


@settings(max_examples=300)
@given(key=BLOB, value=BLOB, base_offset=INT64, base_timestamp=INT64, producer_id=INT64,
       producer_epoch=INT16, base_sequence=INT32, is_transactional=st.booleans(), is_control=st.booleans(),
       timestamp_type=st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]), partition_leader_epoch=INT32)
def test_the_same_bytes_as_build_record_batch(key: bytes | None, value: bytes | None, **fields: Any) -> None:
    fast, general = _both(key, value, **fields)
    assert fast == general
    assert isinstance(fast, bytes)
    (batch,) = Records(fast).batches()
    (record,) = batch.records()
    assert (record.key, record.value, record.timestamp) == (key, value, fields["base_timestamp"])


@settings(max_examples=200)
@given(key=st.none() | st.binary(max_size=8) | st.builds(bytearray, st.binary(max_size=8)),
       value=st.none() | st.binary(max_size=8) | st.builds(memoryview, st.binary(max_size=8)),
       base_offset=st.integers(-(1 << 64), 1 << 64), base_timestamp=st.integers(-(1 << 64), 1 << 64),
       producer_id=st.integers(-(1 << 64), 1 << 64), producer_epoch=st.integers(-(1 << 16), 1 << 16),
       base_sequence=st.integers(-(1 << 32), 1 << 32), timestamp_type=st.integers(-1, 2))
def test_the_same_answer_for_odd_buffers_and_fields_out_of_range(key: Any, value: Any, **fields: Any) -> None:
    """Values past the fields' widths, buffers that are not bytes, unknown timestamp types: the
    general path's bytes or its EncodeError, whichever it gives."""
    fast, general = _both(key, value, **fields)
    assert fast == general


def test_a_field_out_of_range_is_the_general_paths_error() -> None:
    with pytest.raises(EncodeError, match="batch header field out of range"):
        one_record_batch(b"k", b"v", base_offset=0, base_timestamp=0, producer_epoch=1 << 15)
    with pytest.raises(EncodeError, match="base_timestamp does not fit int64"):
        one_record_batch(b"k", b"v", base_offset=0, base_timestamp=1 << 63)
