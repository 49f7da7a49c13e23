"""A share-partition written to the share coordinator after every change, as its leader writes
it, and read back by a new leader equals the live one (hypothesis over random acquisitions,
acknowledgements, releases and lock expiries): what a leader move or a restart relies on."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.errors import KafkaApiError
from kafkapy.shares.share_partition import AcknowledgeType, RecordState, SharePartition, SharePartitionLimits
from kafkapy.sharestate.records import decode_record, encode_record
from kafkapy.sharestate.state import ShareStateShard

KEY = ("workers", uuid.UUID(int=7), 0)
LIMITS = SharePartitionLimits(lock_duration_ms=1000, delivery_count_limit=3, max_record_locks=40)
MEMBERS = ("a", "b")

steps = st.lists(st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(1, 6), st.integers(1, 10)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.integers(0, 30), st.integers(0, 4),
              st.sampled_from([AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT])),
    st.tuples(st.just("release"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("expire"), st.integers(0, 1500)),
), max_size=40)


def _view(partition: SharePartition) -> tuple[Any, ...]:
    return partition.start_offset, partition.end_offset, tuple(partition.persisted_batches())


@settings(max_examples=200, deadline=None)
@given(steps, st.integers(1, 5))
def test_what_a_leader_persists_is_what_the_next_one_loads(ops: list[tuple[Any, ...]], every: int) -> None:
    live = SharePartition(0, LIMITS)
    coordinator = ShareStateShard(snapshot_every=every)
    initialized = coordinator.initialize(KEY, 0, 0)
    coordinator.replay(initialized)
    written = [encode_record(initialized)]
    last_written = _view(live)
    now, log_batches = 0, []  # the log: (first, last) offsets of its batches
    for op in ops:
        try:
            if op[0] == "acquire":
                _, member, batch, records = op
                end = log_batches[-1][1] + 1 if log_batches else 0
                log_batches.append((end, end + batch - 1))  # a producer appended a batch
                start = live.next_available()
                live.acquire(member, [b for b in log_batches if b[1] >= start], now, records)
                continue  # Kafka persists no acquisition
            if op[0] == "ack":
                _, member, first, length, kind = op
                live.acknowledge(member, first, first + length, [kind], now)
            elif op[0] == "release":
                live.release_member(op[1], now)
            else:
                now += op[1]
                live.expire_locks(now)
        except KafkaApiError:
            continue  # refused whole: nothing changed, nothing to write
        record = coordinator.write(KEY, 0, 0, live.start_offset, live.persisted_batches())
        written.append(encode_record(record))
        coordinator.replay(record)
        # The new leader reads what the coordinator keeps now: every record in the state it had,
        # an acquired one as the AVAILABLE record it was before that fetch.
        kept = coordinator.states[KEY]
        restored = SharePartition.restored(kept.start_offset, kept.batches, LIMITS)
        assert _view(restored) == _view(live)
        for offset in range(live.start_offset, live.end_offset + 2):
            state = live.state_of(offset)
            expected = RecordState.AVAILABLE if state is RecordState.ACQUIRED else state
            assert restored.state_of(offset) is expected
        last_written = _view(live)
    # And a coordinator that loads the state partition from its records sees the same.
    reloaded = ShareStateShard(snapshot_every=every)
    for key, value in written:
        reloaded.replay(decode_record(key, value))
    kept = reloaded.states[KEY]
    assert _view(SharePartition.restored(kept.start_offset, kept.batches, LIMITS)) == last_written


def test_accepted_and_rejected_ranges_stay_done_and_released_ones_keep_their_count() -> None:
    live = SharePartition(0, LIMITS)
    live.acquire("a", [(0, 5)], 0, 10)
    live.acknowledge("a", 1, 1, [AcknowledgeType.ACCEPT], 0)
    live.acknowledge("a", 2, 2, [AcknowledgeType.REJECT], 0)
    live.acknowledge("a", 3, 3, [AcknowledgeType.RELEASE], 0)
    restored = SharePartition.restored(live.start_offset, live.persisted_batches(), LIMITS)
    assert [(o, restored.state_of(o), restored.records[o].delivery_count) for o in range(0, 6)] == [
        (0, RecordState.AVAILABLE, 0), (1, RecordState.ACKNOWLEDGED, 1), (2, RecordState.ARCHIVED, 1),
        (3, RecordState.AVAILABLE, 1), (4, RecordState.AVAILABLE, 0), (5, RecordState.AVAILABLE, 0)]
    assert restored.acquire("b", [(0, 5)], 0, 10)[0].first_offset == 0  # held by a: comes again
