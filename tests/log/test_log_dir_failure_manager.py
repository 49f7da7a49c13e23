"""LogManager's half of KIP-112: a failed log dir's logs dropped and closed as they are, its
partitions KAFKA_STORAGE_ERROR, nothing more written there, the other dirs untouched; failures
the background writer meets handled on the owner's thread; the last dir failing is fatal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from storage_helpers import batch_at, joined

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.manager import CLEAN_SHUTDOWN_FILE, AllLogDirsFailed, LogManager


def _two_dirs(tmp_path: Path) -> tuple[LogManager, Path, Path, dict[tuple[str, int], bytes]]:
    a, b = tmp_path / "a", tmp_path / "b"
    logs = LogManager([a, b])
    written = {}
    for partition in range(4):
        log = logs.get_or_create("t", partition)
        data = batch_at(log, 2)
        log.append(data)
        written["t", partition] = data
    logs.checkpoint()
    return logs, a, b, written


def test_a_failed_dir_is_dropped_and_nothing_more_is_written_there(tmp_path: Path) -> None:
    logs, a, b, written = _two_dirs(tmp_path)
    in_b = sorted(k for k in written if logs.dir_of(*k) == b)
    assert in_b and len(in_b) < len(written)
    checkpoint = b / "recovery-point-offset-checkpoint"
    before = checkpoint.read_bytes()
    assert logs.fail_dir(b, OSError("an I/O error")) == in_b
    assert logs.fail_dir(b) == []  # once
    for key in in_b:
        assert logs.get(*key) is None and logs.offline_partitions[key] == b
        with pytest.raises(KafkaApiError) as refused:
            logs.get_or_create(*key)
        assert refused.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    new = logs.get_or_create("new", 0)
    assert logs.dir_of("new", 0) == a and new is not None
    [offline] = [d for d in logs.describe_log_dirs() if not d.online]
    assert offline.path == str(b.absolute())
    logs.close()
    assert (a / CLEAN_SHUTDOWN_FILE).exists() and not (b / CLEAN_SHUTDOWN_FILE).exists()
    assert checkpoint.read_bytes() == before
    again = LogManager([a, b])
    try:
        for key, data in written.items():
            assert joined(again.get(*key).read(0, 1 << 20).chunks) == data  # type: ignore[union-attr]
    finally:
        again.close()


def test_a_failure_on_the_background_writer_is_handled_on_the_owner_thread(tmp_path: Path) -> None:
    logs, _, b, _ = _two_dirs(tmp_path)
    woken: list[bool] = []
    logs.on_failure_reported = lambda: woken.append(True)
    assert logs.background is not None
    path = b / "somewhere"

    def fails() -> None:
        raise OSError(5, os.strerror(5), str(path))
    logs.background.submit(f"writing {path}", fails, path)
    logs.background.drain()
    assert woken == [True] and logs.failures_reported and b not in logs.offline_dirs
    gone = logs.handle_reported_failures()
    assert gone and all(logs.offline_partitions[k] == b for k in gone)
    assert not logs.failures_reported and logs.offline_dirs == {b}
    logs.close()


def test_the_last_dir_failing_is_fatal(tmp_path: Path) -> None:
    logs, a, b, _ = _two_dirs(tmp_path)
    logs.fail_dir(a)
    with pytest.raises(AllLogDirsFailed) as fatal:
        logs.fail_dir(b)
    assert str(fatal.value) == f"Shutdown broker because all log dirs in {a}, {b} have failed"
    logs.close()


def test_a_dir_whose_segment_cannot_be_opened_is_offline_at_load(tmp_path: Path) -> None:
    """A segment file that is a directory: its open fails, and the dir is offline, the broker up."""
    logs, a, b, written = _two_dirs(tmp_path)
    logs.close()
    [victim] = [k for k in written if (b / f"{k[0]}-{k[1]}").is_dir()][:1]
    segment = b / f"{victim[0]}-{victim[1]}" / "00000000000000000000.log"
    segment.unlink()
    segment.mkdir()
    again = LogManager([a, b])
    try:
        assert again.offline_dirs == {b}
        assert victim in again.offline_partitions and again.unlisted_offline == []
        for key, data in written.items():
            log = again.get(*key)
            if (a / f"{key[0]}-{key[1]}").is_dir():
                assert log is not None and joined(log.read(0, 1 << 20).chunks) == data
            else:
                assert log is None and again.offline_partitions[key] == b
    finally:
        again.close()
