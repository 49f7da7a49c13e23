"""The PartitionLog contract, run against every backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import BACKENDS, MakeLog, batch_at, batches_of, joined, log_factory

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    EpochEndOffset,
    LogConfig,
    MemoryLog,
    OffsetOutOfRange,
    TimestampAndOffset,
)
from kafkapy.log.segmented import Segment, SegmentedLog
from kafkapy.protocol.records import build_record_batch


@pytest.fixture(params=BACKENDS)
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeLog]:
    yield from log_factory(request.param, tmp_path)


@pytest.fixture
def log(make_log: MakeLog) -> SegmentedLog:
    return make_log()


def test_append_answers_offsets_and_timestamps(log: SegmentedLog) -> None:
    info = log.append(batch_at(log, 3, timestamp=500))
    assert (info.first_offset, info.last_offset, info.max_timestamp) == (0, 2, 502)
    assert info.offset_of_max_timestamp == 2 and info.log_append_time == -1
    assert log.log_end_offset == log.high_watermark == log.last_stable_offset == 3
    info = log.append(batch_at(log, 2))
    assert (info.first_offset, info.last_offset) == (3, 4)


def test_append_rejects_offsets_that_do_not_continue_the_log(log: SegmentedLog) -> None:
    log.append(batch_at(log, 2))
    with pytest.raises(ValueError, match="does not continue"):
        log.append(bytearray(build_record_batch([(b"k", b"v")], base_offset=5)))
    with pytest.raises(ValueError, match="does not continue"):
        two = build_record_batch([(b"k", b"v")], base_offset=2) + build_record_batch(
            [(b"k", b"v")], base_offset=9
        )
        log.append(bytearray(two))
    with pytest.raises(ValueError):
        log.append(bytearray(build_record_batch([(b"k", b"v")], base_offset=2))[:-3])
    assert log.log_end_offset == 2 and log.size_in_bytes == len(batch_at(log, 2))


def test_memory_backend_keeps_the_buffer_it_was_handed() -> None:
    log = MemoryLog()
    data = batch_at(log, 2)
    log.append(data)
    chunk = log.read(0, 1 << 20).chunks[0]
    assert isinstance(chunk, memoryview) and chunk.obj is data


def test_read_starts_at_the_batch_holding_the_offset_and_returns_whole_batches(log: SegmentedLog) -> None:
    sizes = []
    for _ in range(4):
        data = batch_at(log, 3, value_size=50)
        sizes.append(len(data))
        log.append(data)
    result = log.read(4, sizes[1] + sizes[2] - 1)
    assert [b.base_offset for b in batches_of(result.chunks)] == [3]
    result = log.read(5, sizes[1] + sizes[2])
    assert [b.base_offset for b in batches_of(result.chunks)] == [3, 6]
    assert (result.high_watermark, result.log_start_offset, result.last_stable_offset) == (12, 0, 12)
    assert result.size == sizes[1] + sizes[2]


def test_first_batch_is_whole_even_past_max_bytes_unless_asked_not_to(log: SegmentedLog) -> None:
    log.append(batch_at(log, 3, value_size=200))
    assert len(batches_of(log.read(0, 1).chunks)) == 1
    assert log.read(0, 1, min_one_batch=False).chunks == []


def test_read_stops_before_max_offset_and_at_log_end(log: SegmentedLog) -> None:
    for _ in range(3):
        log.append(batch_at(log, 2))
    assert [b.base_offset for b in batches_of(log.read(0, 1 << 20, max_offset=4).chunks)] == [0, 2]
    assert log.read(6, 1 << 20).chunks == []


@pytest.mark.parametrize("offset", [-1, 7])
def test_read_outside_the_log_is_offset_out_of_range(log: SegmentedLog, offset: int) -> None:
    log.append(batch_at(log, 6))
    with pytest.raises(OffsetOutOfRange) as caught:
        log.read(offset, 100)
    assert caught.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_offset_for_timestamp_and_the_special_timestamps(log: SegmentedLog) -> None:
    log.append(batch_at(log, 3, timestamp=100, epoch=1))  # 100..102
    log.append(batch_at(log, 3, timestamp=200, epoch=2))  # 200..202
    log.append(batch_at(log, 2, timestamp=150, epoch=2))  # 150..151, a late producer
    assert log.offset_for_timestamp(101) == TimestampAndOffset(101, 1, 1)
    assert log.offset_for_timestamp(103) == TimestampAndOffset(200, 3, 2)
    assert log.offset_for_timestamp(202) == TimestampAndOffset(202, 5, 2)
    assert log.offset_for_timestamp(203) is None
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == TimestampAndOffset(-1, 8, 2)
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == TimestampAndOffset(-1, 0, 1)
    assert log.offset_for_timestamp(EARLIEST_LOCAL_TIMESTAMP) == TimestampAndOffset(-1, 0, 1)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == TimestampAndOffset(202, 5, 2)
    assert log.latest_offset() == log.offset_for_timestamp(LATEST_TIMESTAMP)
    assert (
        log.earliest_offset() == log.earliest_local_offset() == log.offset_for_timestamp(EARLIEST_TIMESTAMP)
    )
    assert log.max_timestamp_offset() == log.offset_for_timestamp(MAX_TIMESTAMP)
    # KIP-1005's latest tiered offset, with no remote storage: Kafka's -1 in epoch -1.
    assert log.offset_for_timestamp(LATEST_TIERED_TIMESTAMP) == TimestampAndOffset(-1, -1, -1)
    # Any other negative timestamp is searched for as Kafka's UnifiedLog does: every record is at
    # or after it, so the first one answers.
    assert log.offset_for_timestamp(-7) == log.offset_for_timestamp(-(2**63)) == TimestampAndOffset(100, 0, 1)


def test_timestamp_lookup_walks_many_segments_and_index_entries(make_log: MakeLog) -> None:
    log = make_log(LogConfig(segment_bytes=2_000, index_interval_bytes=300))
    for i in range(60):
        log.append(batch_at(log, 2, timestamp=1_000 + 10 * i, value_size=60))
    assert len(log.segments) > 5 and any(len(s.time_timestamps) > 1 for s in log.segments)
    for i in range(60):
        base = 1_000 + 10 * i
        assert log.offset_for_timestamp(base + 1) == TimestampAndOffset(base + 1, 2 * i + 1)
        if i < 59:
            assert log.offset_for_timestamp(base + 2) == TimestampAndOffset(base + 10, 2 * i + 2)
    assert log.offset_for_timestamp(1_000 + 10 * 59 + 2) is None


def test_leader_epoch_end_offsets(log: SegmentedLog) -> None:
    log.append(batch_at(log, 2, epoch=0))
    log.append(batch_at(log, 2, epoch=3))
    log.append(batch_at(log, 2, epoch=3))
    log.append(batch_at(log, 2, epoch=5))
    assert log.epochs.entries == [(0, 0), (3, 2), (5, 6)]
    assert log.end_offset_for_epoch(5) == EpochEndOffset(5, 8)
    assert log.end_offset_for_epoch(3) == EpochEndOffset(3, 6)
    assert log.end_offset_for_epoch(4) == EpochEndOffset(3, 6)
    assert log.end_offset_for_epoch(0) == EpochEndOffset(0, 2)
    assert log.end_offset_for_epoch(6) == EpochEndOffset(-1, -1)
    assert log.end_offset_for_epoch(-1) == EpochEndOffset(-1, -1)


def test_truncate_to_drops_whole_batches_and_epochs(log: SegmentedLog) -> None:
    log.append(batch_at(log, 3, epoch=1))
    log.append(batch_at(log, 3, epoch=2))
    log.append(batch_at(log, 3, epoch=3))
    log.truncate_to(6)
    assert log.log_end_offset == 6 and log.epochs.entries == [(1, 0), (2, 3)]
    log.truncate_to(4)  # inside a batch: the whole batch goes
    assert log.log_end_offset == 3
    assert [b.base_offset for b in batches_of(log.read(0, 1 << 20).chunks)] == [0]
    log.append(batch_at(log, 1, epoch=4))
    assert log.log_end_offset == 4 and log.epochs.entries == [(1, 0), (4, 3)]


def test_truncate_below_log_start_restarts_the_log_there(log: SegmentedLog) -> None:
    log.append(batch_at(log, 5))
    log.delete_records_before(3)
    log.truncate_to(2)
    assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (2, 2, 0)
    log.append(batch_at(log, 1))
    assert log.log_end_offset == 3


def test_delete_records_advances_the_log_start(log: SegmentedLog) -> None:
    log.append(batch_at(log, 4, epoch=1))
    log.append(batch_at(log, 4, epoch=2))
    assert log.delete_records_before(5) == 5
    assert log.delete_records_before(2) == 5  # never backwards
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == TimestampAndOffset(-1, 5, 2)
    assert log.epochs.entries == [(2, 5)]
    with pytest.raises(OffsetOutOfRange):
        log.read(4, 100)
    # the batch holding offset 5 comes back whole; the client skips offsets below the log start
    assert [b.base_offset for b in batches_of(log.read(5, 1 << 20).chunks)] == [4]
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(9)
    assert log.delete_records_before(8) == 8


def test_delete_records_drops_whole_segments_but_not_the_active_one(make_log: MakeLog) -> None:
    log = make_log(LogConfig(segment_bytes=300))
    for _ in range(6):
        log.append(batch_at(log, 2, value_size=100))
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6, 8, 10]
    log.delete_records_before(5)
    assert [s.base_offset for s in log.segments] == [4, 6, 8, 10]
    log.delete_records_before(12)
    assert [s.base_offset for s in log.segments] == [10] and log.log_start_offset == 12
    assert log.read(12, 100).chunks == []


def test_segments_roll_by_bytes_time_and_index_size(make_log: MakeLog) -> None:
    clock = [0]
    log = make_log(LogConfig(segment_bytes=1_000, segment_ms=60_000), clock=lambda: clock[0])
    sizes = [len(batch_at(log, 1, value_size=300))]
    log.append(batch_at(log, 1, value_size=300, timestamp=0))
    log.append(batch_at(log, 1, value_size=300, timestamp=0))
    log.append(batch_at(log, 1, value_size=300, timestamp=0))
    assert len(log.segments) == 2 and log.segments[0].size == 2 * sizes[0]
    log.append(batch_at(log, 1, value_size=1, timestamp=60_001))  # segment.ms by the first batch's timestamp
    assert [s.base_offset for s in log.segments] == [0, 2, 3]
    # 24 index bytes: 3 offset entries (8 bytes), 2 time entries (12); equal timestamps add one time entry
    small = make_log(LogConfig(segment_index_bytes=24, index_interval_bytes=1))
    for _ in range(6):
        small.append(batch_at(small, 1))
    assert [len(s.index_offsets) for s in small.segments] == [3, 1]
    assert [s.base_offset for s in small.segments] == [0, 4]


def test_segment_jitter_ms_rolls_each_segment_that_much_earlier(make_log: MakeLog,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's randomSegmentJitter: each new segment draws a jitter below min(segment.jitter.ms,
    segment.ms) and rolls once segment.ms less that has passed."""
    import kafkapy.log.segmented as segmented

    drawn: list[int] = []

    def draw(bound: int) -> int:
        drawn.append(bound)
        return 400

    monkeypatch.setattr(segmented.random, "randrange", draw)
    log = make_log(LogConfig(segment_ms=1_000, segment_jitter_ms=5_000))
    assert log.active.roll_jitter_ms == 400 and drawn == [1_000]  # the jitter is capped by segment.ms
    log.append(batch_at(log, 1, timestamp=0))
    log.append(batch_at(log, 1, timestamp=600))  # waited 600: not past 1_000 - 400
    assert len(log.segments) == 1
    log.append(batch_at(log, 1, timestamp=601))
    assert [s.base_offset for s in log.segments] == [0, 2] and log.active.roll_jitter_ms == 400
    assert make_log(LogConfig(segment_ms=1_000)).active.roll_jitter_ms == 0 and len(drawn) == 2


def test_a_compacted_log_rolls_by_max_compaction_lag_ms(make_log: MakeLog) -> None:
    """Kafka's LogConfig.maxSegmentMs: with compact in cleanup.policy, the active segment rolls
    once max.compaction.lag.ms (when shorter than segment.ms) has passed, so the cleaner can reach
    its records within that lag; a delete-only log keeps segment.ms."""
    for policy, rolled in (("compact", [0, 2]), ("compact,delete", [0, 2]), ("delete", [0])):
        log = make_log(LogConfig(cleanup_policy=policy, max_compaction_lag_ms=1_000))
        log.append(batch_at(log, 1, timestamp=0))
        log.append(batch_at(log, 1, timestamp=1_000))
        log.append(batch_at(log, 1, timestamp=1_001))
        assert [s.base_offset for s in log.segments] == rolled, policy


def test_snapshots_hooks_at_roll_and_close(make_log: MakeLog) -> None:
    log = make_log(LogConfig(segment_bytes=200))
    states = iter([b"one", b"two", b"three"])
    log.snapshot_source = lambda: next(states)
    log.append(batch_at(log, 1, value_size=150))
    log.append(batch_at(log, 1, value_size=150))
    log.append(batch_at(log, 1, value_size=150))
    assert log.latest_snapshot() == (2, b"two")
    log.truncate_to(1)  # snapshots past the new end go
    assert log.latest_snapshot() == (1, b"one")
    log.close()
    log.close()  # idempotent
    assert log.latest_snapshot() == (1, b"three")


def test_log_config_from_kafka_names() -> None:
    config = LogConfig.from_topic_config(
        {"cleanup.policy": "compact,delete", "retention.ms": "-1", "segment.bytes": 1024, "unrelated": "x"}
    )
    assert config.compacts and config.deletes and config.retention_ms == -1 and config.segment_bytes == 1024
    assert LogConfig().segment_ms == 604_800_000 and LogConfig().flush_messages == (1 << 63) - 1
    with pytest.raises(KafkaApiError) as refused:
        LogConfig.from_topic_config({"cleanup.policy": "shred"})
    assert refused.value.code is ErrorCode.INVALID_CONFIG


def test_joined_helper_sanity() -> None:
    assert joined([b"a", memoryview(b"b")]) == b"ab"


def test_append_with_the_header_read_already_equals_append_without(make_log: MakeLog) -> None:
    """Produce hands the log the header it has read (``header=``): the log's state afterwards is
    the one a plain append gives, and a header that is not the data's one batch is refused."""
    from kafkapy.protocol.records import RecordBatch

    plain, given = make_log(), make_log()
    for count, timestamp, epoch in ((3, 500, 0), (1, 400, 0), (2, 900, 2)):
        data = batch_at(plain, count, timestamp=timestamp, epoch=epoch)
        assert plain.append(bytearray(data), now_ms=1_000) == given.append(
            data, now_ms=1_000, header=RecordBatch(data))
    for log_state in (plain, given):
        assert log_state.log_end_offset == 6
    assert joined(plain.read(0, 1 << 20).chunks) == joined(given.read(0, 1 << 20).chunks)
    assert plain.offset_for_timestamp(450) == given.offset_for_timestamp(450)
    assert plain.end_offset_for_epoch(0) == given.end_offset_for_epoch(0)
    assert plain.max_timestamp_offset() == given.max_timestamp_offset()
    stale = batch_at(given, 1)
    elsewhere = bytearray(stale)
    elsewhere[:8] = (2).to_bytes(8, "big")  # the same batch at base offset 2
    with pytest.raises(ValueError, match="does not continue"):
        given.append(stale, header=RecordBatch(elsewhere))
    with pytest.raises(ValueError, match="not the one batch"):
        given.append(stale + stale, header=RecordBatch(stale))
    assert given.log_end_offset == 6


def _bookkeeping(segment: Segment) -> tuple[object, ...]:
    """What a segment keeps about its batches, besides their bytes."""
    return (segment.base_offset, segment.size, segment.next_offset, list(segment.offsets),
            list(segment.positions), segment.max_timestamp, segment.offset_of_max_timestamp,
            segment.rolling_timestamp, segment.last_modified_ms, list(segment.index_offsets),
            list(segment.index_positions), list(segment.time_timestamps), list(segment.time_offsets))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.sampled_from([-1, 0, 400, 500, 900]), st.integers(-1, 3)),
                min_size=1, max_size=12),
       st.sampled_from([150, 400, 1 << 20]), st.integers(1, 4))
def test_append_of_one_read_header_equals_the_plain_append_on_random_logs(
        batches: list[tuple[int, int, int]], segment_bytes: int, flush_messages: int) -> None:
    """The one-header path (``append_one``) against the plain append, over random batch sizes,
    timestamps (none among them), leader epochs (some going back), rolls and flushes: the same
    answers and the same log afterwards."""
    from kafkapy.protocol.records import RecordBatch

    config = LogConfig(segment_bytes=segment_bytes, flush_messages=flush_messages)
    plain, given = MemoryLog(config, clock=lambda: 1_000), MemoryLog(config, clock=lambda: 1_000)
    for i, (count, timestamp, epoch) in enumerate(batches):
        data = batch_at(plain, count, timestamp=timestamp, epoch=epoch)
        now = 1_000 + 7 * i  # each append at its own time: what a segment notes of it shows
        assert plain.append(bytearray(data), now_ms=now) == given.append(
            data, now_ms=now, header=RecordBatch(data))
    assert joined(plain.read(0, 1 << 20).chunks) == joined(given.read(0, 1 << 20).chunks)
    assert [_bookkeeping(s) for s in plain.segments] == [_bookkeeping(s) for s in given.segments]
    assert plain.recovery_point == given.recovery_point
    assert plain.max_timestamp_offset() == given.max_timestamp_offset()
    for epoch in range(-1, 4):
        assert plain.end_offset_for_epoch(epoch) == given.end_offset_for_epoch(epoch)
    for timestamp in (-1, 0, 450, 901):
        assert plain.offset_for_timestamp(timestamp) == given.offset_for_timestamp(timestamp)
