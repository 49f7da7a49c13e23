"""Checkpoint files and the leader-epoch cache: Kafka's text layout, garbage refused with one error."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from storage_helpers import batch_at

from kafkapy.log import LogConfig
from kafkapy.log.checkpoint import CheckpointCorrupt, read_checkpoint, read_offsets, write_offsets
from kafkapy.log.epochs import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from kafkapy.log.segments import FileLog

topics = st.text(st.sampled_from("abcXYZ019._-"), min_size=1, max_size=20)


@settings(max_examples=60, deadline=None)
@given(
    offsets=st.dictionaries(st.tuples(topics, st.integers(0, 1000)), st.integers(0, 2**63 - 1), max_size=8)
)
def test_offset_checkpoints_round_trip_in_kafkas_layout(
    tmp_path_factory: pytest.TempPathFactory, offsets: dict[tuple[str, int], int]
) -> None:
    path = tmp_path_factory.mktemp("cp") / "recovery-point-offset-checkpoint"
    write_offsets(path, offsets)
    lines = path.read_text().splitlines()
    assert lines[:2] == ["0", str(len(offsets))]
    assert read_offsets(path) == offsets
    assert not path.with_name(path.name + ".tmp").exists()


_numbers = st.integers(-(2**70), 2**70).map(str) | st.sampled_from(["1_0", "+3", " 7", "\u0663", "9" * 5000])
_checkpoint_lines = st.lists(st.lists(_numbers | st.text("abc.-", min_size=1, max_size=4), min_size=1,
                                      max_size=4).map(" ".join), max_size=5)


@settings(max_examples=200, deadline=None)
@given(text=st.text(st.sampled_from("0123456789 -\nab\t"), max_size=80).map(str.encode)
       | st.binary(max_size=40)
       | st.tuples(st.sampled_from(["0", "1", "00"]), _numbers, _checkpoint_lines).map(
           lambda parts: "\n".join([parts[0], parts[1], *parts[2]]).encode()))
@example(text=b"0\n1\n\xff 0 1\n")  # not UTF-8: was a UnicodeDecodeError from the epoch cache
@example(text=b"0\n1\nt 0 9223372036854775808\n")  # past Long.MAX_VALUE: Kafka refuses the file
@example(text=b"0\n1\nt 2147483648 0\n")  # past Integer.MAX_VALUE
def test_garbage_checkpoints_parse_or_raise_checkpoint_corrupt(
    tmp_path_factory: pytest.TempPathFactory, text: bytes
) -> None:
    """Any bytes: entries Java's parseInt/parseLong would read (so the broker can encode them
    again), or one CheckpointCorrupt."""
    directory = tmp_path_factory.mktemp("cp")
    (directory / "offsets").write_bytes(text)
    (directory / LEADER_EPOCH_CHECKPOINT).write_bytes(text)
    try:
        offsets = read_offsets(directory / "offsets")
    except CheckpointCorrupt as corrupt:
        assert "\n" not in str(corrupt) and len(str(corrupt)) < 300
    else:
        assert all(-(2**31) <= p < 2**31 and -(2**63) <= o < 2**63 for (_, p), o in offsets.items())
    try:
        epochs = LeaderEpochCache.read(directory).entries
    except CheckpointCorrupt as corrupt:
        assert "\n" not in str(corrupt) and len(str(corrupt)) < 300
    else:
        assert all(-(2**31) <= e < 2**31 and -(2**63) <= o < 2**63 for e, o in epochs)


def test_missing_checkpoint_is_empty(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / "absent", 3) == []


def test_leader_epoch_checkpoint_file(tmp_path: Path) -> None:
    cache = LeaderEpochCache([(0, 0), (2, 10), (5, 30)])
    cache.write(tmp_path)
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n3\n0 0\n2 10\n5 30\n"
    assert LeaderEpochCache.read(tmp_path).entries == cache.entries


def test_leader_epoch_cache_trims_at_both_ends() -> None:
    cache = LeaderEpochCache([(0, 0), (2, 10), (5, 30)])
    assert not cache.assign(4, 40)  # older than the latest epoch: ignored
    assert (
        cache.epoch_for_offset(9) == 0 and cache.epoch_for_offset(10) == 2 and cache.epoch_for_offset(99) == 5
    )
    cache.truncate_from_start(15)
    assert cache.entries == [(2, 15), (5, 30)]
    cache.truncate_from_end(30)
    assert cache.entries == [(2, 15)]
    cache.assign(7, 12)  # a new leader whose history starts before the old epoch's: the old one goes
    assert cache.entries == [(7, 12)]


def test_flush_messages_and_flush_ms_move_the_recovery_point(tmp_path: Path) -> None:
    clock = [0]
    log = FileLog(tmp_path / "t-0", LogConfig(flush_messages=4), clock=lambda: clock[0])
    log.append(batch_at(log, 3))
    assert log.recovery_point == 0
    log.append(batch_at(log, 1))
    assert log.recovery_point == 4
    timed = FileLog(tmp_path / "t-1", LogConfig(flush_ms=1_000), clock=lambda: clock[0])
    timed.append(batch_at(timed, 1))
    assert timed.recovery_point == 0
    clock[0] = 1_000
    timed.append(batch_at(timed, 1))
    assert timed.recovery_point == 2
    default = FileLog(tmp_path / "t-2", clock=lambda: clock[0])  # Kafka's defaults: never, leave it to the OS
    clock[0] = 10**12
    default.append(batch_at(default, 5))
    assert default.recovery_point == 0
    for opened in (log, timed, default):
        opened.close()
    assert default.recovery_point == 5  # close flushes


def test_a_roll_flushes_the_old_segment_and_moves_the_recovery_point(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
    log.append(batch_at(log, 2, value_size=100))
    assert log.recovery_point == 0
    log.append(batch_at(log, 2, value_size=100))  # rolls: the first segment is complete
    assert [s.base_offset for s in log.segments] == [0, 2] and log.recovery_point == 2
    log.close()


@pytest.mark.parametrize(("written", "restored"), [(3, 3), (1, 2), (99, 2)],
                         ids=["kept", "below-log-start", "past-log-end"])
def test_cleaner_offset_checkpoint_is_read_back_as_kafka_trusts_it(
    tmp_path: Path, written: int, restored: int
) -> None:
    """Kafka's cleanableOffsets: a checkpointed offset below the log start or past the log end is
    invalid, and the log is dirty again from its start."""
    from kafkapy.log import LogManager
    from kafkapy.log.manager import CLEANER_OFFSET_CHECKPOINT

    logs = LogManager([tmp_path])
    log = logs.get_or_create("c", 0, LogConfig(segment_bytes=1, cleanup_policy=("compact",)))
    for _ in range(5):
        log.append(batch_at(log))
    log.delete_records_before(2)
    log.cleaned_to = 4
    logs.get_or_create("plain", 0)  # never cleaned: no entry
    logs.close()
    assert read_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT, 3) == [["c", "0", "4"]]
    write_offsets(tmp_path / CLEANER_OFFSET_CHECKPOINT, {("c", 0): written})
    again = LogManager([tmp_path])
    try:
        assert again.logs[("c", 0)].cleaned_to == restored
        assert again.logs[("plain", 0)].cleaned_to == 0
    finally:
        again.close()
