"""record_batch_steps (up-conversion's builder, in slices or in one go) against build_record_batch:
the same bytes for any records it takes, in any slices, and the same EncodeError."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.errors import EncodeError
from kafkapy.protocol.compression import Compression
from kafkapy.protocol.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    Record,
    build_record_batch,
    record_batch_steps,
)
from kafkapy.protocol.steps import all_at_once

_records = st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=30)),
                              st.one_of(st.none(), st.binary(max_size=300)),
                              st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**41))),
                    min_size=1, max_size=20)


def _outcome(fn: Any) -> Any:
    try:
        return bytes(fn())
    except EncodeError as exc:
        return str(exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sent=_records, codec=st.sampled_from(list(Compression)),
       timestamp_type=st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]),
       every=st.one_of(st.none(), st.integers(1, 5)),
       chunk=st.one_of(st.none(), st.sampled_from([8, 64, 4096])))
def test_record_batch_steps_equals_build_record_batch(
        sent: list[tuple[bytes | None, bytes | None, int]], codec: Compression, timestamp_type: int,
        every: int | None, chunk: int | None) -> None:
    records = [Record(i, ts, key, value) for i, (key, value, ts) in enumerate(sent)]
    expected = _outcome(lambda: build_record_batch(records, compression=codec, timestamp_type=timestamp_type,
                                                   base_timestamp=records[0].timestamp))
    got = _outcome(lambda: all_at_once(record_batch_steps(records, codec, timestamp_type=timestamp_type,
                                                          every=every, chunk=chunk))[0])
    assert got == expected
