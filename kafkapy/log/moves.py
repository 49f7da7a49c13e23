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
- the other files (``.index``, ``.timeindex``, ``.txnindex``, producer ``.snapshot`` files,
  ``leader-epoch-checkpoint``, ``partition.metadata``) are small and copied whole. Those named
  by an offset below the active segment's base (the rolled segments' indexes, older snapshots)
  are settled: nothing but a rewrite (which starts the copy over) or their deletion changes
  them, so the passes copy them once, noting the size and modification time they had.
  :func:`finish_copy`, on the loop in the step that swaps, copies the last tail, the settled
  files new or changed since, and the others whole (the active segment's indexes, newer
  snapshots, the two small metadata files), so the swap's step does not grow with the number
  of segments.

A future directory found at start (the broker stopped mid-move) is resumed: its copied
prefix is checked against the current log's bytes (``verify``), cut where they differ, and
the copy goes on, as Kafka recovers a future log and resumes fetching into it.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path

import attrs

from kafkapy.log.background import DELETED_SUFFIX
from kafkapy.log.checkpoint import fsync_directory
from kafkapy.log.segments import FileLog

__all__ = [
    "DELETE_SUFFIX",
    "FUTURE_SUFFIX",
    "STRAY_SUFFIX",
    "CopyPlan",
    "FutureLog",
    "copy_pass",
    "copy_segments",
    "delete_dir_name",
    "finish_copy",
    "future_dir_name",
    "parse_moved_dir",
    "stray_dir_name",
]

FUTURE_SUFFIX = "-future"  # Kafka's UnifiedLog.FutureDirSuffix
DELETE_SUFFIX = "-delete"  # Kafka's UnifiedLog.DeleteDirSuffix
STRAY_SUFFIX = "-stray"  # Kafka's UnifiedLog.StrayDirSuffix
_CHUNK = 1 << 20  # bytes a copy moves between checks of its stop flag


def _moved_dir_name(topic: str, partition: int, suffix: str) -> str:
    """Kafka's UnifiedLog.logDirNameWithSuffix: ``<topic>-<partition>.<uuid, no dashes><suffix>``."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{suffix}"


def future_dir_name(topic: str, partition: int) -> str:
    return _moved_dir_name(topic, partition, FUTURE_SUFFIX)


def delete_dir_name(topic: str, partition: int) -> str:
    return _moved_dir_name(topic, partition, DELETE_SUFFIX)


def stray_dir_name(topic: str, partition: int) -> str:
    return _moved_dir_name(topic, partition, STRAY_SUFFIX)


def future_dir_name_length(topic: str, partition: int) -> int:
    """How long the future directory's name is (Kafka refuses a move past 255, KAFKA-4893)."""
    return len(topic) + len(str(partition)) + 2 + 32 + len(FUTURE_SUFFIX)


def parse_moved_dir(name: str) -> tuple[str, int, str] | None:
    """(topic, partition, suffix) of a ``-future`` or ``-delete`` directory's name, else None."""
    for suffix in (FUTURE_SUFFIX, DELETE_SUFFIX):
        if name.endswith(suffix):
            stem, dot, tag = name[: -len(suffix)].rpartition(".")
            topic, dash, partition = stem.rpartition("-")
            if dot and dash and topic and partition.isdecimal() and tag.isalnum():
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
    # The small files copied whole: name -> (size, mtime_ns) their source had then.
    copied: dict[str, tuple[int, int]] = attrs.Factory(dict)
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

    @property
    def active_base(self) -> int:
        """The base offset of the newest segment planned (the one appends go to)."""
        return max((int(name[: -len(".log")]) for name in self.sizes), default=0)


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


def _stamp(stat: os.stat_result) -> tuple[int, int]:
    return stat.st_size, stat.st_mtime_ns


def _copy_whole(source: Path, dest: Path) -> tuple[int, int] | None:
    """Copy a small file and fsync the copy; answers the source's stamp, or None if the source
    changed while it was read (then the copy is not to be trusted)."""
    fd = os.open(source, os.O_RDONLY)
    try:
        before = os.fstat(fd)
        data = os.pread(fd, before.st_size, 0)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(out, view):]
        os.fsync(out)
    finally:
        os.close(out)
    stamp = _stamp(before)
    return stamp if stamp == _stamp(after) and len(data) == before.st_size else None


_SETTLED_SUFFIXES = (".index", ".timeindex", ".txnindex", ".snapshot")


def _settled(path: Path, active_base: int) -> bool:
    """Named by an offset below the active segment's base: unchanged since (short of a rewrite)."""
    return path.suffix in _SETTLED_SUFFIXES and path.stem.isdecimal() and int(path.stem) < active_base


def copy_small_files(source: Path, future: FutureLog, active_base: int, *, final: bool) -> set[str]:
    """Copy the non-segment files of ``source``: the settled ones not copied yet (or changed
    since, by their stamp) and, when ``final``, all others whole; answers the names found."""
    found = set()
    for path in source.iterdir():
        name = path.name
        settled = _settled(path, active_base)
        if path.suffix in (".log", DELETED_SUFFIX, ".cleaned") or (not settled and not final):
            continue  # segments are copy_segments'; .deleted and .cleaned files are on their way
        try:
            stamp = _stamp(os.stat(path))
            found.add(name)
            if settled and future.copied.get(name) == stamp:
                continue
            copied = _copy_whole(path, future.path / name)
        except FileNotFoundError:  # deleted meanwhile (retention, a replaced snapshot)
            found.discard(name)
            continue
        if copied is None:
            future.copied.pop(name, None)
        else:
            future.copied[name] = copied
    return found


def copy_pass(future: FutureLog, plan: CopyPlan) -> int:
    """One catch-up pass (in a thread, or on the loop): what :func:`copy_segments` does, from
    scratch if the log was rewritten since the last pass, checking what is there first if the
    future directory was found at start; answers the bytes copied."""
    if future.rewrites is not None and future.rewrites != plan.rewrites:
        for path in future.path.iterdir():
            path.unlink()
        future.copied.clear()
    verify = future.resumed and future.rewrites is None
    copied = copy_segments(plan, verify=verify, stop=future.stop)
    copy_small_files(plan.source, future, plan.active_base, final=False)
    future.rewrites = plan.rewrites
    return copied


def finish_copy(log: FileLog, future: FutureLog) -> None:
    """The last step of a copy, on the loop with appends held: the segments' last bytes, then
    every other file of the partition directory that changed since its copy; all fsynced.
    Afterwards the future directory is a byte-identical copy of the log's."""
    plan = CopyPlan.of(log, future.path)
    copy_pass(future, plan)
    wanted = set(plan.sizes) | copy_small_files(log.directory, future, plan.active_base, final=True)
    for path in future.path.iterdir():
        if path.name not in wanted:
            path.unlink()
            future.copied.pop(path.name, None)
    fsync_directory(future.path)
