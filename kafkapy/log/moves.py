"""Moving a partition's log to another directory of ``log.dirs`` (AlterReplicaLogDirs).

Theory of operation
-------------------
Kafka moves a replica between log dirs through a *future log*: a directory
``<topic>-<partition>.<uuid>-future`` in the target dir that catches up with the current log
while appends go on, then, under the partition's lock, is renamed to ``<topic>-<partition>``
while the old directory is renamed to ``<topic>-<partition>.<uuid>-delete`` and deleted.

Kafka's future log is filled by its ReplicaAlterLogDirsThread, a fetcher appending batches.
kafkapy copies the files instead, as they are, so the moved directory is byte for byte the
one it replaces:

- a :class:`CopyPlan`, taken on the broker's loop, names every segment file with the size it
  has then (its stored bytes; the rest of a growing active segment is not written yet) and the
  log end offset those sizes reach;
- :func:`copy_segments`, run in a thread, makes each ``.log`` of the future directory the
  planned prefix of the current one: only the missing tail is copied (segment files only
  grow, compaction being paused and a rewrite restarting the copy), segments retention
  removed are dropped, every file written is fsynced. Passes repeat until one copies little;
- :func:`finish_copy`, on the loop in the step that swaps, copies the last tail and the small
  files whole (``.index``, ``.timeindex``, ``.txnindex``, producer ``.snapshot`` files,
  ``leader-epoch-checkpoint``, ``partition.metadata``) and fsyncs them.

A future directory found at start (the broker stopped mid-move) is resumed: its copied
prefix is checked against the current log's bytes (``verify``), cut where they differ, and
the copy goes on, as Kafka recovers a future log and resumes fetching into it.
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path

import attrs

from kafkapy.log.checkpoint import fsync_directory
from kafkapy.log.segments import FileLog

__all__ = [
    "DELETE_SUFFIX",
    "FUTURE_SUFFIX",
    "CopyPlan",
    "FutureLog",
    "copy_pass",
    "copy_segments",
    "delete_dir_name",
    "finish_copy",
    "future_dir_name",
    "parse_moved_dir",
]

FUTURE_SUFFIX = "-future"  # Kafka's UnifiedLog.FutureDirSuffix
DELETE_SUFFIX = "-delete"  # Kafka's UnifiedLog.DeleteDirSuffix
_CHUNK = 1 << 20  # bytes a copy moves between checks of its stop flag


def _moved_dir_name(topic: str, partition: int, suffix: str) -> str:
    """Kafka's UnifiedLog.logDirNameWithSuffix: ``<topic>-<partition>.<uuid, no dashes><suffix>``."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{suffix}"


def future_dir_name(topic: str, partition: int) -> str:
    return _moved_dir_name(topic, partition, FUTURE_SUFFIX)


def delete_dir_name(topic: str, partition: int) -> str:
    return _moved_dir_name(topic, partition, DELETE_SUFFIX)


def future_dir_name_length(topic: str, partition: int) -> int:
    """How long the future directory's name is (Kafka refuses a move past 255, KAFKA-4893)."""
    return len(topic) + len(str(partition)) + 2 + 32 + len(FUTURE_SUFFIX)


def parse_moved_dir(name: str) -> tuple[str, int, str] | None:
    """(topic, partition, suffix) of a ``-future`` or ``-delete`` directory's name, else None."""
    for suffix in (FUTURE_SUFFIX, DELETE_SUFFIX):
        if name.endswith(suffix):
            stem, dot, tag = name[: -len(suffix)].rpartition(".")
            topic, dash, partition = stem.rpartition("-")
            if dot and dash and topic and partition.isdigit() and tag.isalnum():
                return topic, int(partition), suffix
    return None


@attrs.define(eq=False)
class FutureLog:
    """A move under way: the future directory in ``log_dir`` and how far its copy has come."""

    topic: str
    partition: int
    log_dir: Path  # where the partition is going
    path: Path  # its ``-future`` directory there
    resumed: bool = False  # found at start: what it holds is checked before the copy goes on
    size: int = 0  # bytes copied (what DescribeLogDirs says the future replica holds)
    log_end_offset: int = 0  # the offset the copied bytes reach
    # The log's rewrite count the copy is a prefix of (None before the first pass): a rewrite
    # since makes the next pass start over.
    rewrites: int | None = None
    stop: threading.Event = attrs.Factory(threading.Event)  # set to end the move early


@attrs.frozen
class CopyPlan:
    """What a copy pass makes the future directory hold: each segment file's planned size."""

    source: Path
    future: Path
    sizes: Mapping[str, int]  # ``.log`` file name -> bytes
    log_end_offset: int  # where the planned bytes end
    rewrites: int  # the log's rewrite count when planned: a later one makes the copy stale

    @classmethod
    def of(cls, log: FileLog, future: Path) -> CopyPlan:
        """The plan for ``log`` as it is now (call it on the loop that appends to it)."""
        sizes = {}
        for segment in log.segments:
            sizes[f"{segment.base_offset:020d}.log"] = segment.size
        return cls(log.directory, future, sizes, log.log_end_offset, log.rewrites)

    @property
    def size(self) -> int:
        return sum(self.sizes.values())


def _copy_range(source: int, dest: int, start: int, end: int, stop: threading.Event | None) -> None:
    position = start
    while position < end:
        if stop is not None and stop.is_set():
            raise InterruptedError("the move was stopped")
        want = min(_CHUNK, end - position)
        data = os.pread(source, want, position)
        if len(data) != want:
            raise OSError(f"{want} bytes expected at {position}, {len(data)} read")
        view = memoryview(data)
        while view:
            written = os.pwrite(dest, view, position)
            view = view[written:]
            position += written


def _first_difference(source: int, dest: int, size: int) -> int:
    """Where the copy ``dest`` (``size`` bytes) stops matching ``source``, chunk-wise."""
    position = 0
    while position < size:
        want = min(_CHUNK, size - position)
        theirs, ours = os.pread(source, want, position), os.pread(dest, want, position)
        if theirs != ours:
            return position
        position += want
    return size


def copy_segments(plan: CopyPlan, *, verify: bool = False, stop: threading.Event | None = None) -> int:
    """Make the future directory's ``.log`` files the planned prefixes of the current ones;
    answers the bytes copied. Safe in a thread while the loop appends: it reads only bytes the
    plan says are written. ``verify`` first checks what is already there against the source
    (a copy resumed after a restart) and keeps only the matching prefix."""
    copied = 0
    for stale in plan.future.glob("*.log"):
        if stale.name not in plan.sizes:  # retention removed the segment meanwhile
            stale.unlink()
    for name, size in plan.sizes.items():
        try:
            source = os.open(plan.source / name, os.O_RDONLY)
        except FileNotFoundError:  # deleted by retention since the plan: the next plan drops it
            continue
        try:
            dest = os.open(plan.future / name, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                have = os.fstat(dest).st_size
                if have > size:  # a rewrite the plan's count has not caught: start the file over
                    have = 0
                if verify and have:
                    have = _first_difference(source, dest, have)
                if have != os.fstat(dest).st_size:
                    os.ftruncate(dest, have)
                if have < size:
                    _copy_range(source, dest, have, size, stop)
                    copied += size - have
                    os.fsync(dest)
            finally:
                os.close(dest)
        finally:
            os.close(source)
    fsync_directory(plan.future)
    return copied


def copy_pass(future: FutureLog, plan: CopyPlan) -> int:
    """One catch-up pass (in a thread, or on the loop): what :func:`copy_segments` does, from
    scratch if the log was rewritten since the last pass, checking what is there first if the
    future directory was found at start; answers the bytes copied."""
    if future.rewrites is not None and future.rewrites != plan.rewrites:
        for path in future.path.iterdir():
            path.unlink()
    verify = future.resumed and future.rewrites is None
    copied = copy_segments(plan, verify=verify, stop=future.stop)
    future.rewrites = plan.rewrites
    return copied


def finish_copy(log: FileLog, future: FutureLog) -> None:
    """The last step of a copy, on the loop with appends held: the segments' last bytes, then
    every other file of the partition directory whole; all fsynced. Afterwards the future
    directory is a byte-identical copy of the log's."""
    copy_pass(future, CopyPlan.of(log, future.path))
    wanted = set()
    for path in log.directory.iterdir():
        if path.is_dir() or path.suffix == ".log":
            wanted.add(path.name)
            continue
        wanted.add(path.name)
        target = future.path / path.name
        shutil.copyfile(path, target)
        fd = os.open(target, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    for path in future.path.iterdir():
        if path.name not in wanted:
            path.unlink()
    fsync_directory(future.path)
