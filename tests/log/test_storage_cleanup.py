"""Retention and compaction on demand, on both backends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import BACKENDS, MakeLog, batch_at, batches_of, log_factory

from kafkapy.log import LogConfig, MemoryLog
from kafkapy.log.compaction import SegmentAge as CleanableAge
from kafkapy.log.compaction import cleaning_need
from kafkapy.log.retention import SegmentFacts, deletable_segments
from kafkapy.log.segmented import SegmentedLog
from kafkapy.log.segments import FileLog
from kafkapy.protocol.records import Compression, Record, build_record_batch

DAY = 24 * 60 * 60 * 1000


@pytest.fixture(params=BACKENDS)
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeLog]:
    yield from log_factory(request.param, tmp_path)


def segment_per_batch(make_log: MakeLog, **settings: object) -> SegmentedLog:
    """One batch per segment: with segment.bytes 1 every append after the first rolls."""
    return make_log(LogConfig(segment_bytes=1, **settings))  # type: ignore[arg-type]


def records(log: SegmentedLog) -> list[Record]:
    return [r for b in batches_of(log.read(log.log_start_offset, 1 << 30).chunks) for r in b]


def test_retention_ms_deletes_old_whole_segments_then_rolls_and_takes_the_active_one(
    make_log: MakeLog,
) -> None:
    log = segment_per_batch(make_log)
    for day in range(6):
        log.append(batch_at(log, 3, value_size=40, timestamp=day * DAY))
    assert len(log.segments) == 6
    # 4.5 days on, the segments of days 0, 1 and 2 are older than 2 days
    assert log.apply_retention(now_ms=4 * DAY + DAY // 2, config=LogConfig(retention_ms=2 * DAY)) == 3
    assert [s.base_offset for s in log.segments] == [9, 12, 15] and log.log_start_offset == 9
    # Every segment is too old, the active one too: Kafka's deleteSegments rolls a new empty active
    # segment and deletes all three, so the log is empty at its end offset.
    assert log.apply_retention(now_ms=100 * DAY, config=LogConfig(retention_ms=2 * DAY)) == 3
    assert [s.base_offset for s in log.segments] == [18]
    assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (18, 18, 0)
    assert records(log) == []
    # An empty active segment is never deleted (nor rolled again).
    assert log.apply_retention(now_ms=200 * DAY, config=LogConfig(retention_ms=2 * DAY)) == 0
    log.append(batch_at(log, 2, value_size=40, timestamp=200 * DAY))
    assert [r.offset for r in records(log)] == [18, 19]


def test_retention_bytes_zero_empties_the_log(make_log: MakeLog) -> None:
    log = segment_per_batch(make_log)
    for _ in range(3):
        log.append(batch_at(log, 3, value_size=40))
    assert log.apply_retention(now_ms=0, config=LogConfig(retention_bytes=0, retention_ms=-1)) == 3
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (9, 9, 1)


def test_young_active_segment_stays(make_log: MakeLog) -> None:
    log = segment_per_batch(make_log)
    for day in range(3):
        log.append(batch_at(log, 3, value_size=40, timestamp=day * DAY))
    assert log.apply_retention(now_ms=3 * DAY, config=LogConfig(retention_ms=DAY + DAY // 2)) == 2
    assert [s.base_offset for s in log.segments] == [6] and log.log_start_offset == 6


def test_retention_bytes_keeps_at_least_that_much(make_log: MakeLog) -> None:
    log = segment_per_batch(make_log)
    for _ in range(6):
        log.append(batch_at(log, 3, value_size=40))
    size = log.segments[0].size
    config = LogConfig(retention_bytes=2 * size + 1, retention_ms=-1)
    assert log.apply_retention(now_ms=0, config=config) == 3
    assert log.size_in_bytes >= 2 * size + 1 and len(log.segments) == 3


def test_compact_only_policy_never_deletes_by_time_or_size(make_log: MakeLog) -> None:
    log = segment_per_batch(make_log)
    for _ in range(4):
        log.append(batch_at(log, 3, value_size=40, timestamp=0))
    config = LogConfig(cleanup_policy="compact", retention_ms=1, retention_bytes=1)
    assert log.apply_retention(now_ms=DAY, config=config) == 0
    log.delete_records_before(7)  # but the log start offset still frees whole segments
    assert log.apply_retention(now_ms=DAY, config=config) == 0 and log.segments[0].base_offset == 6


def _keyed(log: SegmentedLog, pairs: list[tuple[bytes | None, bytes | None]], timestamp: int) -> None:
    data = build_record_batch(
        [(key, value, [], timestamp) for key, value in pairs],
        base_offset=log.log_end_offset,
        compression=Compression.GZIP,
        producer_id=7,
        producer_epoch=1,
        base_sequence=0,
        partition_leader_epoch=4,
    )
    log.append(bytearray(data))


def test_compaction_keeps_the_last_record_per_key_with_offsets_preserved(make_log: MakeLog) -> None:
    log = segment_per_batch(make_log, cleanup_policy="compact")
    _keyed(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], 0)
    _keyed(log, [(b"a", b"2"), (None, b"keyless"), (b"b", None)], 0)  # b deleted by a tombstone
    _keyed(log, [(b"c", b"3"), (b"d", b"3"), (b"e", b"3")], 0)
    _keyed(log, [(b"a", b"active"), (b"e", b"active")], 0)  # active segment: never compacted, not in the map
    assert len(log.segments) == 4
    before = log.log_end_offset
    assert log.compact(now_ms=1_000) == 4  # a@0, b@1, c@2, the keyless record
    kept = [(r.offset, r.key, r.value) for r in records(log)]
    assert kept == [
        (3, b"a", b"2"),
        (5, b"b", None),  # the tombstone stays for delete.retention.ms
        (6, b"c", b"3"),
        (7, b"d", b"3"),
        (8, b"e", b"3"),
        (9, b"a", b"active"),
        (10, b"e", b"active"),
    ]
    assert log.log_end_offset == before
    batch = batches_of(log.read(3, 1 << 20).chunks)[0]
    assert (batch.base_offset, batch.last_offset, batch.producer_id, batch.producer_epoch) == (3, 5, 7, 1)
    assert batch.compression == Compression.GZIP and batch.partition_leader_epoch == 4 and batch.crc_valid
    # reads, time lookups and truncation still see batch boundaries after the rewrite
    assert [b.base_offset for b in batches_of(log.read(1, 1).chunks)] == [3]
    assert log.offset_for_timestamp(0) is not None and log.offset_for_timestamp(0).offset == 3  # type: ignore[union-attr]
    # KIP-534: the cleaning that kept the tombstone stamped its batch with a delete horizon, that
    # cleaning's time plus delete.retention.ms (the records' timestamps stay: all were 0)
    assert (batch.delete_horizon_ms, batch.has_delete_horizon) == (1_000 + DAY, True)
    assert [r.timestamp for r in batch.record_list()] == [0, 0]
    assert log.compact(now_ms=DAY + 999) == 0  # before the horizon the tombstone stays
    assert [r.offset for r in records(log)] == [3, 5, 6, 7, 8, 9, 10]
    # at the horizon the tombstone goes too; running again removes nothing else
    assert log.compact(now_ms=DAY + 1_000) == 1
    assert [r.offset for r in records(log)] == [3, 6, 7, 8, 9, 10]
    assert log.compact(now_ms=DAY + 2_000) == 0


def test_min_compaction_lag_holds_young_segments_back(make_log: MakeLog) -> None:
    log = segment_per_batch(make_log, cleanup_policy="compact,delete", min_compaction_lag_ms=500)
    _keyed(log, [(b"a", b"1"), (b"a", b"2")], 0)
    _keyed(log, [(b"a", b"3"), (b"a", b"4")], 1_000)
    _keyed(log, [(b"x", b"active")], 2_000)
    assert log.compact(now_ms=1_200) == 1  # the second segment is too young: a@1 is the last a it sees
    assert [(r.offset, r.value) for r in records(log)] == [(1, b"2"), (2, b"3"), (3, b"4"), (4, b"active")]
    assert log.compact(now_ms=1_600) == 2
    assert [(r.offset, r.value) for r in records(log)] == [(3, b"4"), (4, b"active")]


def test_max_compaction_lag_forces_a_cleaning_of_dirty_segments_only(make_log: MakeLog) -> None:
    """Kafka's maxCompactionDelay looks at the dirty rolled segments' first batches: once they
    are cleaned, however old they are, the log is not overdue again until a new dirty segment
    waits too long (the clean ones counted before, and the log was cleaned every pass)."""
    lagging = LogConfig(segment_bytes=1, cleanup_policy="compact", max_compaction_lag_ms=100,
                        min_cleanable_dirty_ratio=0.99)
    log = make_log(lagging)
    _keyed(log, [(b"a", b"1"), (b"a", b"2")], 0)
    _keyed(log, [(b"b", b"1")], 1_000)
    _keyed(log, [(b"x", b"active")], 2_000)
    assert not log.compaction_overdue(now_ms=100)  # waited exactly max.compaction.lag.ms
    assert log.compaction_overdue(now_ms=1_600) and log.cleaning_need(now_ms=1_600).due(0.99)
    assert log.compact(now_ms=1_600) == 1
    assert not log.compaction_overdue(now_ms=50_000)  # all its rolled segments are clean
    assert not log.cleaning_need(now_ms=50_000).due(0.99)
    _keyed(log, [(b"b", b"2")], 3_000)  # rolls the x segment: dirty, its first batch at 2_000
    assert not log.compaction_overdue(now_ms=2_100)
    assert log.compaction_overdue(now_ms=2_101)


def test_without_min_compaction_lag_a_segment_stamped_in_the_future_is_cleaned(
        make_log: MakeLog) -> None:
    """min.compaction.lag.ms 0 holds nothing back (Kafka checks ages only when it is above 0):
    records stamped ahead of the broker's clock are compacted too."""
    log = segment_per_batch(make_log, cleanup_policy="compact")
    _keyed(log, [(b"a", b"1"), (b"a", b"2")], 10_000)
    _keyed(log, [(b"x", b"active")], 10_000)
    assert log.compact(now_ms=1_000) == 1
    assert [(r.offset, r.value) for r in records(log)] == [(1, b"2"), (2, b"active")]


def test_segments_already_clean_do_not_hold_the_dirty_ones_back(make_log: MakeLog) -> None:
    """Kafka applies min.compaction.lag.ms to the dirty segments only: a clean segment stamped
    later than the dirty ones after it does not stop their cleaning."""
    log = segment_per_batch(make_log, cleanup_policy="compact")
    _keyed(log, [(b"a", b"1"), (b"a", b"2")], 5_000)
    _keyed(log, [(b"x", b"rolls")], 0)
    assert log.compact(now_ms=6_000) == 1 and log.cleaned_to == 2
    log.set_config(LogConfig(segment_bytes=1, cleanup_policy="compact", min_compaction_lag_ms=2_000))
    _keyed(log, [(b"b", b"1"), (b"b", b"2")], 0)  # rolls the x segment; this one is dirty too
    _keyed(log, [(b"y", b"active")], 0)
    assert log.compact(now_ms=6_000) == 1  # the clean segment at 5_000 is younger than the lag
    assert [(r.offset, r.value) for r in records(log)] == [(1, b"2"), (2, b"rolls"), (4, b"2"),
                                                             (5, b"active")]


def test_a_log_start_past_the_cleaner_checkpoint_is_the_first_dirty_offset(make_log: MakeLog) -> None:
    """Kafka's cleanableOffsets: a checkpoint below the log start (retention or DeleteRecords
    passed it) counts from the log start, so the segment holding the log start is clean."""
    log = segment_per_batch(make_log, cleanup_policy="compact,delete")
    for key in (b"a", b"b", b"c", b"d"):
        _keyed(log, [(key, b"1"), (key, b"2")], 0)
    assert log.compact(now_ms=1_000) == 3 and log.cleaned_to == 6
    for key in (b"e", b"f"):
        _keyed(log, [(key, b"1")], 0)
    log.delete_records_before(7)  # inside the segment at 6, past the checkpoint
    sizes = [s.size for s in log.segments]
    assert [s.base_offset for s in log.segments] == [6, 8, 9]
    need = log.cleaning_need(now_ms=1_000)
    assert (need.clean_bytes, need.cleanable_bytes, need.count) == (sizes[0], sum(sizes[:2]), 2)


def _age(base: int, size: int, largest: int, first: int | None = None) -> CleanableAge:
    return CleanableAge(base, size, largest, largest if first is None else first)


def test_the_dirty_ratio_counts_only_what_a_cleaning_can_reach() -> None:
    """Kafka's LogToClean: cleanable bytes run from the first dirty offset to the first segment a
    cleaning may not touch (the active one, the one holding the LSO, a dirty one younger than
    min.compaction.lag.ms); the ratio is those over themselves plus the clean bytes, and must be
    above min.cleanable.dirty.ratio."""
    config = LogConfig(cleanup_policy="compact", min_compaction_lag_ms=1_000)
    segments = [_age(0, 100, 0), _age(10, 10, 0), _age(20, 200, 9_500), _age(30, 0, 9_900)]
    need = cleaning_need(segments, 10, 30, config, 10_000)
    assert (need.count, need.clean_bytes, need.cleanable_bytes) == (2, 100, 10)
    assert need.ratio == 10 / 110 and not need.due(0.5)  # the young 200 bytes count nowhere
    # an open transaction from offset 15 holds the segment holding it back, and what follows
    held = cleaning_need(segments, 10, 15, LogConfig(cleanup_policy="compact"), 10_000)
    assert (held.count, held.cleanable_bytes, held.ratio) == (1, 0, 0.0) and not held.due(0.0)
    # a checkpoint past the LSO (an open transaction began below it) never opens the way past it
    assert cleaning_need(segments, 25, 15, LogConfig(cleanup_policy="compact"), 10_000).count == 1
    # the ratio must be above the threshold: exactly at it is not enough
    even = cleaning_need([_age(0, 50, 0), _age(5, 50, 0), _age(9, 0, 0)], 5, 9,
                         LogConfig(cleanup_policy="compact"), 10_000)
    assert even.ratio == 0.5 and not even.due(0.5) and even.due(0.49)
    # an empty log is never due, even overdue
    assert not cleaning_need([_age(0, 0, 0)], 0, 0, config, 10_000).due(0.0)


def test_delete_policy_does_not_compact(make_log: MakeLog) -> None:
    log = segment_per_batch(make_log)
    _keyed(log, [(b"a", b"1"), (b"a", b"2")], 0)
    _keyed(log, [(b"x", b"active")], 0)
    assert log.compact(now_ms=DAY) == 0


def test_compacted_segments_survive_reopening(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, cleanup_policy="compact")
    log = FileLog(tmp_path / "t-0", config)
    for i in range(5):
        _keyed(log, [(b"k", b"%d" % i), (b"other%d" % i, b"x")], 0)
    log.compact(now_ms=10)
    expected = [(r.offset, r.key, r.value) for r in records(log)]
    log.close()
    again = FileLog(tmp_path / "t-0", config)  # unclean: every batch CRC-checked
    assert again.recovered_bytes == 0
    assert [(r.offset, r.key, r.value) for r in records(again)] == expected
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
    again.close()


def test_the_last_batch_below_the_cleanings_end_is_kept_empty(tmp_path: Path) -> None:
    """KAFKA-17076: a cleaning keeps the batch that ends where it stops, emptied if nothing of it
    is left, so the cleaned segments still reach the next segment's base; a crash that loses the
    (empty) active segment then reopens the log at the same end, not below it."""
    log = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=1, cleanup_policy="compact"))
    _keyed(log, [(b"a", b"1")], 0)
    _keyed(log, [(b"a", None)], 0)  # a tombstone
    log.roll()  # an empty active segment at 2
    assert log.compact(now_ms=0) == 1  # a@0; the tombstone gets its horizon
    assert log.compact(now_ms=DAY) == 1  # the tombstone goes at its horizon, its batch stays
    [emptied] = batches_of(log.read(0, 1 << 20).chunks)
    assert (emptied.base_offset, emptied.last_offset, emptied.record_count) == (1, 1, 0)
    assert emptied.crc_valid and log.log_end_offset == 2
    log.close()
    for lost in (tmp_path / "t-0").glob("00000000000000000002.*"):
        lost.unlink()
    again = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=1, cleanup_policy="compact"))
    assert again.log_end_offset == 2
    again.close()


def test_a_segment_without_timestamps_is_aged_by_its_files_last_write_across_a_restart(
        tmp_path: Path) -> None:
    """Kafka's largestTimestamp falls back to the segment file's last modification: a reopened
    log does not restart retention.ms for such segments (records converted from magic 0 carry no
    timestamp), and a cleaning keeps the old file's modification time (setLastModified)."""
    import os

    hour = 60 * 60 * 1000
    config = LogConfig(segment_bytes=1, cleanup_policy="compact,delete", retention_ms=hour)
    log = FileLog(tmp_path / "t-0", config)
    for value in (b"1", b"2", b"3"):
        _keyed(log, [(b"k", value)], -1)
    assert [s.max_timestamp for s in log.segments] == [-1, -1, -1]
    first = log.segments[0].path
    log.close()
    written = log.clock() - 2 * hour  # the first segment was last written two hours ago
    os.utime(first, ns=(written * 1_000_000, written * 1_000_000))
    again = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=1, cleanup_policy="compact"))
    assert again.segments[0].last_modified_ms == written
    assert again.compact() == 1  # k@0 goes; the file is rewritten
    assert os.stat(first).st_mtime_ns // 1_000_000 == written
    again.close()
    third = FileLog(tmp_path / "t-0", config)
    assert third.apply_retention() == 1 and third.log_start_offset == 1
    third.close()


@settings(max_examples=60, deadline=None)
@given(
    appends=st.lists(
        st.lists(
            st.tuples(st.sampled_from([b"a", b"b", b"c", b"d"]), st.one_of(st.none(), st.binary(max_size=3))),
            min_size=1,
            max_size=4,
        ),
        min_size=1,
        max_size=12,
    ),
    now=st.sampled_from([10, DAY + 10]),
)
def test_compaction_keeps_every_keys_latest_value_and_nothing_new(
    appends: list[list[tuple[bytes, bytes | None]]], now: int
) -> None:
    """Compaction leaves a subsequence of the records written, with the same latest value per key."""
    log = MemoryLog(LogConfig(segment_bytes=1, cleanup_policy="compact"))
    for pairs in appends:
        _keyed(log, list(pairs), 0)
    before = [(r.offset, r.key, r.value) for r in records(log)]
    latest = {key: value for _, key, value in before}
    log.compact(now_ms=now)
    after = [(r.offset, r.key, r.value) for r in records(log)]
    assert set(after) <= set(before) and after == sorted(after)
    assert log.log_end_offset == len(before)
    survivors = {key: value for _, key, value in after}
    for key, value in latest.items():
        if value is None and now > DAY:
            assert survivors.get(key) is None  # an expired tombstone may go, taking the key with it
        else:
            assert key in survivors and survivors[key] == value
    active = [r for r in before if r[0] >= log.active.base_offset]
    assert after[len(after) - len(active) :] == active  # the active segment is untouched


def _kafkas_three_passes(segments: list[SegmentFacts], retention_bytes: int, retention_ms: int, now: int,
                         log_start: int, log_end: int) -> int:
    """UnifiedLog.deleteOldSegments as Kafka runs it: the log-start, retention.bytes and
    retention.ms passes one after another, each a deletableSegments walk (high watermark = log end)
    whose deleting of every segment rolls a new empty active one first."""
    live, deleted = list(segments), 0

    def walk(deletable: Callable[[SegmentFacts, SegmentFacts | None], bool]) -> None:
        nonlocal live, deleted
        count = 0
        for i, segment in enumerate(live):
            following = live[i + 1] if i + 1 < len(live) else None
            upper = following.base_offset if following is not None else log_end
            stays = upper > log_end or (following is None and segment.size == 0)
            if stays or not deletable(segment, following):
                break
            count += 1
        if count == len(live):
            live.append(SegmentFacts(log_end, 0, now))
        live, deleted = live[count:], deleted + count

    walk(lambda s, following: following is not None and following.base_offset <= log_start)
    size = sum(s.size for s in live)
    if 0 <= retention_bytes <= size:
        over = [size - retention_bytes]

        def size_breached(segment: SegmentFacts, following: SegmentFacts | None) -> bool:
            if over[0] - segment.size < 0:
                return False
            over[0] -= segment.size
            return True
        walk(size_breached)
    if retention_ms >= 0:
        walk(lambda s, following: now - s.largest_timestamp > retention_ms)
    return deleted


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(0, 100), st.integers(0, 100)),
                min_size=1, max_size=6),
       st.integers(-1, 300), st.integers(-1, 100), st.integers(0, 30), st.booleans())
def test_one_walk_deletes_what_kafkas_three_passes_delete(
    raw: list[tuple[int, int, int]], retention_bytes: int, retention_ms: int, log_start: int,
    empty_active: bool,
) -> None:
    segments: list[SegmentFacts] = []
    offset = 0
    for count, size, timestamp in raw:
        segments.append(SegmentFacts(offset, size, timestamp))
        offset += count
    if empty_active:
        segments.append(SegmentFacts(offset, 0, 0))
    log_start = min(log_start, offset)
    config = LogConfig(retention_bytes=retention_bytes, retention_ms=retention_ms)
    assert deletable_segments(segments, config, 100, log_start, offset, offset) == _kafkas_three_passes(
        segments, retention_bytes, retention_ms, 100, log_start, offset)


def test_retention_stops_at_the_high_watermark() -> None:
    """Kafka's deletableSegments: a segment whose upper bound (the next base offset, or the log end
    for the active one) is past the high watermark stays, so the log start never passes it."""
    segments = [SegmentFacts(0, 10, 0), SegmentFacts(5, 10, 0), SegmentFacts(9, 10, 0)]
    expired = LogConfig(retention_ms=1)
    assert deletable_segments(segments, expired, 100, 0, high_watermark=12, log_end_offset=12) == 3
    assert deletable_segments(segments, expired, 100, 0, high_watermark=11, log_end_offset=12) == 2
    assert deletable_segments(segments, expired, 100, 0, high_watermark=8, log_end_offset=12) == 1
    assert deletable_segments(segments, expired, 100, 0, high_watermark=4, log_end_offset=12) == 0
