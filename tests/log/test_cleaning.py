"""Compaction in three steps (kafkapy.log.cleaning): planned on the loop, cleaned on another thread,
swapped in on the loop only if the log still is as planned. The contract: cleaning on a thread
leaves exactly what ``compact()`` leaves; anything that changed the planned segments meanwhile
drops the result."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import BACKENDS, MakeLog, batch_at, batches_of, log_factory

from kafkapy.log import LogConfig
from kafkapy.log.cleaning import CompactionPlan
from kafkapy.log.segmented import SegmentedLog
from kafkapy.protocol.records import build_record_batch

COMPACTED = LogConfig(segment_bytes=1, cleanup_policy=("compact",))  # every append after the first rolls


@pytest.fixture(params=BACKENDS)
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeLog]:
    yield from log_factory(request.param, tmp_path)


def keyed(log: SegmentedLog, pairs: list[tuple[bytes, bytes | None]]) -> None:
    log.append(bytearray(build_record_batch([(key, value, [], 1_000) for key, value in pairs],
                                            base_offset=log.log_end_offset)))


def stored(log: SegmentedLog) -> bytes:
    return b"".join(bytes(chunk) for chunk in log.read(log.log_start_offset, 1 << 30).chunks)


def clean_on_a_thread(plan: CompactionPlan) -> None:
    worker = threading.Thread(target=plan.clean)
    worker.start()
    worker.join(30)
    assert not worker.is_alive()


def table(log: SegmentedLog, rounds: int = 4) -> None:
    for i in range(rounds):
        keyed(log, [(b"a", b"a%d" % i), (b"b", b"b%d" % i)])


@settings(max_examples=40, deadline=None)
@given(appends=st.lists(st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c"]),
                                           st.one_of(st.none(), st.binary(max_size=6))),
                                 min_size=1, max_size=4), min_size=1, max_size=10))
def test_cleaning_on_a_thread_leaves_what_compact_leaves(
        tmp_path_factory: pytest.TempPathFactory, appends: list[list[tuple[bytes, bytes | None]]]) -> None:
    results = []
    for backend in BACKENDS:
        for threaded in (True, False):
            opened = log_factory(backend, tmp_path_factory.mktemp("log"))
            make = next(opened)
            log = make(COMPACTED, clock=lambda: 10_000)
            for pairs in appends:
                keyed(log, pairs)
            if threaded:
                plan = log.plan_compaction()
                removed = 0
                if plan is not None:
                    clean_on_a_thread(plan)
                    removed = log.finish_compaction(plan)
            else:
                removed = log.compact()
            results.append((removed, stored(log), log.cleaned_to, log.log_end_offset))
            next(opened, None)  # runs the factory past its yield: the logs it opened are closed
    assert all(result == results[0] for result in results)


def test_appends_while_cleaning_are_kept_and_the_cleaning_applies(make_log: MakeLog) -> None:
    log = make_log(COMPACTED)
    table(log)
    plan = log.plan_compaction()
    assert plan is not None
    keyed(log, [(b"a", b"late")])  # the active segment grows; the planned ones do not change
    clean_on_a_thread(plan)
    assert log.finish_compaction(plan) > 0
    values = [r.value for batch in batches_of(log.read(0, 1 << 30).chunks) for r in batch]
    assert values[-1] == b"late" and b"a0" not in values


@pytest.mark.parametrize("change", ["truncate", "truncate-and-refill", "delete-records", "compact-meanwhile",
                                    "paused"])
def test_a_cleaning_whose_segments_changed_meanwhile_is_dropped(make_log: MakeLog, change: str) -> None:
    log = make_log(COMPACTED)
    table(log)
    plan = log.plan_compaction()
    assert plan is not None
    if change == "truncate":
        log.truncate_to(4)
        keyed(log, [(b"x", b"y")])
    elif change == "truncate-and-refill":
        # the planned segment at 4 emptied and written again to the same size with other values:
        # only the log's count of rewrites tells it apart
        sizes = [segment.size for segment in log.segments]
        log.truncate_to(4)
        keyed(log, [(b"a", b"a9"), (b"b", b"b9")])
        keyed(log, [(b"c", b"c9")])
        assert [segment.size for segment in log.segments][:3] == sizes[:3]
    elif change == "delete-records":
        log.delete_records_before(2)
    elif change == "compact-meanwhile":
        log.compact()
    else:
        log.cleaning_paused = True  # a move between log dirs copies the files as they are
    before, cleaned_to = stored(log), log.cleaned_to
    clean_on_a_thread(plan)
    assert log.finish_compaction(plan) == 0
    assert stored(log) == before and log.cleaned_to == cleaned_to


def test_a_file_segment_deleted_after_the_plan_is_still_read_whole(tmp_path: Path) -> None:
    """The view reads through its own descriptor: the segment's closing (retention, a deleted
    topic) or a new file taking its descriptor number changes nothing for the cleaning."""
    from kafkapy.log.segments import FileLog

    log = FileLog(tmp_path / "t-0", COMPACTED)
    table(log)
    plan = log.plan_compaction()
    assert plan is not None
    log.delete_records_before(log.segments[2].base_offset)  # the first two planned segments go
    other = FileLog(tmp_path / "t-1", COMPACTED)  # new files: descriptor numbers are reused
    for _ in range(3):
        other.append(batch_at(other, 2, value_size=50))
    clean_on_a_thread(plan)
    assert plan.cleaned is not None and len(plan.cleaned) == len(plan.views)
    assert log.finish_compaction(plan) == 0  # dropped: the log no longer holds those segments
    other.close()
    log.close()


@pytest.mark.parametrize("dropped", [False, True], ids=["swapped", "dropped"])
def test_a_file_logs_cleaned_segments_are_written_on_the_thread_and_only_renamed_in_the_swap(
        tmp_path: Path, dropped: bool) -> None:
    """The swap's loop step does no writing or fsync of segment data: the cleaner's thread wrote
    each cleaned segment beside its original and fsynced it; the swap renames it over, and a
    dropped result leaves no file behind."""
    from kafkapy.log.segments import FileLog

    log = FileLog(tmp_path / "t-0", COMPACTED)
    table(log)
    plan = log.plan_compaction()
    assert plan is not None
    clean_on_a_thread(plan)
    prepared = sorted(p.name for p in (tmp_path / "t-0").glob("*.cleaned"))
    changed = [c for c in plan.cleaned or [] if c.changed]
    assert changed and len(prepared) == len(changed)
    if dropped:
        log.truncate_to(4)
    removed = log.finish_compaction(plan)
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
    assert (removed == 0) == dropped
    if not dropped:
        assert removed == sum(c.removed for c in changed)
        log.close()
        reopened = FileLog(tmp_path / "t-0", COMPACTED)  # what was renamed in is what reads back
        assert stored(reopened).startswith(b"".join(c.data for c in plan.cleaned or []))
        reopened.close()
    else:
        log.close()
