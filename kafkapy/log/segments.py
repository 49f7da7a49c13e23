"""The segment-file backend: one partition directory in Kafka's own on-disk layout.

Theory of operation
-------------------
A partition directory ``<topic>-<partition>`` holds, per segment, Kafka's three
files named by the segment's base offset as 20 digits:

- ``.log``: the record batches, byte for byte as stored (Kafka's FileRecords);
- ``.index``: entries ``relative offset int32, position int32`` (8 bytes);
- ``.timeindex``: entries ``timestamp int64, relative offset int32`` (12 bytes);

plus ``.txnindex`` (the aborted transactions whose markers the segment holds,
txn_index.py; made at its first entry), ``leader-epoch-checkpoint``, the
producer-state ``<offset>.snapshot`` files and, once the topic id is known,
``partition.metadata`` (partition_metadata.py). Index files are not preallocated:
Kafka reads such a file as holding ``length / entry size`` entries.

Durability. ``append`` writes with ``pwrite`` before returning, so an appended
batch is in the kernel's page cache and survives the broker process dying
(``kill -9``); it survives the machine failing only once flushed (``fsync``):
at ``flush.messages`` / ``flush.ms`` (Kafka's defaults: never), on segment
roll, on ``flush()`` and on ``close()``. That is Kafka's rule too: acks=all
means "written to every in-sync replica's log", not "fsynced".

Recovery. Opening a directory walks the batch headers of every segment to
rebuild the in-memory batch table and rewrites both index files from it. From
the segment holding the recovery point on (every segment after an unclean
shutdown) each batch is also checked as Kafka's LogSegment.recover does: whole,
CRC-32C valid, offsets increasing; its leader epoch is assigned to the epoch
cache as Kafka's recovery assigns it. The first bad batch and everything after it
are cut off; later segments are deleted, and transaction index entries past the
new log end go with them. An interrupted segment swap is completed first.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import threading
import uuid
from array import array
from collections.abc import Callable
from pathlib import Path

from kafkapy.errors import DecodeError
from kafkapy.log.background import BackgroundWriter, fsync_path, remove_file
from kafkapy.log.checkpoint import fsync_directory, write_checkpoint
from kafkapy.log.cleaning import SegmentView, file_reader
from kafkapy.log.epochs import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from kafkapy.log.partition_metadata import read_partition_metadata, write_partition_metadata
from kafkapy.log.segmented import Segment, SegmentedLog, now_ms
from kafkapy.log.topic_config import LogConfig
from kafkapy.log.txn_index import TxnIndex
from kafkapy.protocol.records import Buffer, RecordBatch

__all__ = ["FileLog", "FileSegment", "segment_name"]

_log = logging.getLogger(__name__)
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT32_MAX = (1 << 31) - 1
# Kafka's leftovers of an interrupted clean, swap or delete (kafkapy writes the ones but .swap);
# a .swap is put in place first when it completes a swap (settle_interrupted_swaps).
_LEFTOVER_SUFFIXES = (".cleaned", ".tmp", ".deleted", ".swap")


def segment_name(base_offset: int, suffix: str) -> str:
    """Kafka's file name: the base offset as 20 zero-padded digits (LogFileUtils.filenamePrefixFromOffset)."""
    return f"{base_offset:020d}{suffix}"


def _write_all(fd: int, data: Buffer, position: int) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


class FileSegment(Segment):
    """A segment stored as ``.log``, ``.index`` and ``.timeindex`` files."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, created_ms: int) -> None:
        super().__init__(base_offset, config, created_ms)
        self.path = directory / segment_name(base_offset, ".log")
        self.index_path = directory / segment_name(base_offset, ".index")
        self.time_index_path = directory / segment_name(base_offset, ".timeindex")
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._index_fd = os.open(self.index_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._time_fd = os.open(self.time_index_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.txn_index = TxnIndex(directory / segment_name(base_offset, ".txnindex"))
        # Reads must know where the batch holding an offset ends without reading it from disk:
        # files keep every batch's last offset too (8 more bytes a batch).
        self.last_offsets = array("q")

    def note_batch(self, batch: RecordBatch, position: int) -> None:
        super().note_batch(batch, position)
        self.last_offsets.append(batch.last_offset)

    def reset_table(self) -> None:
        super().reset_table()
        self.last_offsets = array("q")

    def last_offset_of(self, i: int) -> int:
        return self.last_offsets[i]

    def rebuild(self, active: bool) -> None:
        """Re-walk the (truncated) file through an mmap rather than a read per batch."""
        self.load_batches(verify=False)
        if not active:
            self.on_inactive()

    # -- storage ---------------------------------------------------------------------------

    def _store(self, data: Buffer, nbytes: int) -> None:
        _write_all(self._fd, data, self.size)

    def load(self, start: int, end: int) -> list[memoryview | bytes]:
        data = os.pread(self._fd, end - start, start)
        if len(data) != end - start:
            raise OSError(f"{self.path}: {end - start} bytes expected at {start}, {len(data)} read")
        return [data]

    def _truncate_storage(self, size: int) -> None:
        os.ftruncate(self._fd, size)

    def _replace_storage(self, data: bytes, prepared: object = None) -> None:
        """Write the cleaned segment beside the old one (or take the one the cleaner's thread
        wrote and fsynced: ``prepared``), then rename it over: all or nothing."""
        cleaned = prepared if isinstance(prepared, Path) else self.prepare_replacement(data)
        fd = os.open(cleaned, os.O_RDWR)
        # The cleaned file keeps the old one's last modification (Kafka's setLastModified), so a
        # cleaning restarts neither retention nor ListOffsets v0 for it after a restart.
        mtime_ns = self.last_modified_ms * 1_000_000
        os.utime(fd, ns=(mtime_ns, mtime_ns))
        os.replace(cleaned, self.path)
        fsync_directory(self.path.parent)
        os.close(self._fd)
        self._fd = fd

    def prepare_replacement(self, data: bytes) -> Path:
        """``<segment>.log.<uuid>.cleaned`` holding ``data``, fsynced (a name of its own, so a
        cleaning on the cleaner's thread and one on demand never share a file; a leftover goes
        when the log opens again)."""
        cleaned = self.path.with_name(f"{self.path.name}.{uuid.uuid4().hex}.cleaned")
        fd = os.open(cleaned, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        return cleaned

    def discard_replacement(self, prepared: object) -> None:
        if isinstance(prepared, Path):
            prepared.unlink(missing_ok=True)

    def _index_entry_added(self, last_offset: int, position: int) -> None:
        os.write(self._index_fd, _OFFSET_ENTRY.pack(last_offset - self.base_offset, position))

    def _time_entry_added(self, timestamp: int, offset: int) -> None:
        os.write(self._time_fd, _TIME_ENTRY.pack(timestamp, offset - self.base_offset))

    def _indexes_reset(self) -> None:
        os.ftruncate(self._index_fd, 0)
        os.ftruncate(self._time_fd, 0)

    def flush(self) -> None:
        for fd in (self._fd, self._index_fd, self._time_fd):
            os.fsync(fd)
        self.txn_index.flush()

    def view(self) -> SegmentView:
        """Read through a duplicate of the file's descriptor: a segment closed, compacted or
        deleted meanwhile leaves the view reading the file it had. The cleaned bytes are written
        and fsynced beside it on the cleaner's thread, so the swap only renames."""
        read, release = file_reader(self._fd)
        return SegmentView(self, self.size, self.batch_ranges(), read, release,
                           self.prepare_replacement, self.discard_replacement)

    def duplicate_descriptors(self) -> list[int]:
        """Duplicates of the files' descriptors, for a flush on the background writer that must
        not depend on this segment staying open (kafkapy.log.background)."""
        fds = [self._fd, self._index_fd, self._time_fd, self.txn_index.descriptor]
        return [os.dup(fd) for fd in fds if fd >= 0]

    def close(self) -> None:
        for fd in (self._fd, self._index_fd, self._time_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._index_fd = self._time_fd = -1
        self.txn_index.close()

    def delete(self, background: BackgroundWriter | None = None) -> None:
        self.close()
        self.txn_index.delete(background)
        for path in (self.path, self.index_path, self.time_index_path):
            remove_file(path, background)

    def relocate(self, directory: Path) -> None:
        """Continue in ``directory``, which holds byte-identical copies of this segment's files
        (a move between log dirs): the same batch table, the files there opened instead."""
        self.close()
        self.path = directory / self.path.name
        self.index_path = directory / self.index_path.name
        self.time_index_path = directory / self.time_index_path.name
        self._fd = os.open(self.path, os.O_RDWR, 0o644)
        self._index_fd = os.open(self.index_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._time_fd = os.open(self.time_index_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.txn_index.relocate(directory)

    # -- recovery ----------------------------------------------------------------------------

    def load_batches(self, *, verify: bool, epochs: LeaderEpochCache | None = None) -> int:
        """Rebuild the batch table and indexes from the file; answers the bytes cut off.

        ``verify`` checks each batch as Kafka's recovery does and cuts the file at
        the first that fails; without it a walk stops only where framing does.
        ``epochs`` learns each checked batch's leader epoch, as Kafka's LogSegment.recover
        assigns them: a batch written just before a crash may have beaten its epoch's entry
        to the leader-epoch-checkpoint.
        """
        self.reset_table()
        file_size = os.fstat(self._fd).st_size
        valid = 0
        if file_size:
            mapped = mmap.mmap(self._fd, file_size, access=mmap.ACCESS_READ)
            view = memoryview(mapped)
            try:
                valid = self._walk(view, file_size, verify, epochs)
            finally:
                view.release()
                mapped.close()
        self.size = valid
        if valid < file_size:
            os.ftruncate(self._fd, valid)
        return file_size - valid

    def _walk(self, view: memoryview, file_size: int, verify: bool,
              epochs: LeaderEpochCache | None) -> int:
        position = 0
        expected = self.base_offset
        while position < file_size:
            try:
                batch = RecordBatch(view, position)
            except DecodeError:
                break
            if verify and (
                batch.base_offset < expected
                or batch.last_offset - self.base_offset > _INT32_MAX
                or not batch.crc_valid
            ):
                break
            self.note_batch(batch, position)
            if verify and epochs is not None:
                epochs.assign(batch.partition_leader_epoch, batch.base_offset)
            expected = batch.last_offset + 1
            position += batch.size_in_bytes
            del batch  # no view into the mapping may outlive it
        return position


def _offset_in_name(name: str) -> int | None:
    """The offset a file of a partition directory is named by (the digits before its first dot,
    as Kafka's LogFileUtils.offsetFromFile reads it); None for the others."""
    prefix = name.partition(".")[0]
    return int(prefix) if prefix.isdecimal() else None


def _next_offset_of(path: Path) -> int | None:
    """The offset after the last whole batch of a segment file (None when it holds no batch)."""
    size = path.stat().st_size
    if not size:
        return None
    next_offset = None
    with open(path, "rb") as file, mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)
        try:
            position = 0
            while position < size:
                try:
                    batch = RecordBatch(view, position)
                except DecodeError:
                    break
                next_offset, position = batch.last_offset + 1, position + batch.size_in_bytes
                del batch  # no view into the mapping may outlive it
        finally:
            view.release()
    return next_offset


def settle_interrupted_swaps(directory: Path) -> None:
    """Finish what a compaction (or a segment split) stopped between its renames had started, as
    Kafka's LogLoader does before it loads any segment. Kafka replaces segments by renaming the
    cleaned one ``.cleaned`` -> ``.swap``, then the old segments ``.deleted``, then the ``.swap``
    to its final name: a ``.swap`` found here holds the only copy of its offsets once the old
    segments went, so it is put in place, and the old files its offsets cover are removed. A
    ``.swap`` at or above a ``.cleaned`` file's offset belongs to a split that never finished: it
    goes, and the originals stay."""
    files = [path for path in directory.iterdir() if path.is_file()]
    cleaned = [path for path in files if path.name.endswith(".cleaned")]
    swaps = [path for path in files if path.name.endswith(".swap")]
    if not swaps:
        return
    cleaned_offsets = [o for o in map(_offset_in_name, (path.name for path in cleaned)) if o is not None]
    lowest_cleaned = min(cleaned_offsets, default=None)
    valid = []
    for swap in swaps:
        offset = _offset_in_name(swap.name)
        if offset is None:
            continue
        if lowest_cleaned is not None and offset >= lowest_cleaned:
            swap.unlink()
        else:
            valid.append(swap)
    for path in cleaned:
        path.unlink(missing_ok=True)
    low = high = None
    for swap in valid:
        if not swap.name.endswith(".log.swap"):
            continue
        base = _offset_in_name(swap.name)
        assert base is not None
        end = _next_offset_of(swap)
        end = base if end is None else end
        low = base if low is None else min(low, base)
        high = end if high is None else max(high, end)
    if low is not None and high is not None:
        for path in directory.iterdir():
            offset = _offset_in_name(path.name)
            if (path.is_file() and not path.name.endswith(".swap") and offset is not None
                    and low <= offset < high):
                path.unlink()  # a file of a segment the swapped one replaces (or a snapshot there)
    for swap in valid:
        os.replace(swap, swap.with_name(swap.name.removesuffix(".swap")))
    fsync_directory(directory)


class FileLog(SegmentedLog):
    """A partition log in one directory of ``log.dirs``.

    ``recovery_point`` is where the last flush ended (the log dir's
    recovery-point-offset-checkpoint); after an unclean shutdown everything
    from it on is checked. A directory opened on its own (no checkpoint) is
    checked whole.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        super().__init__(config, clock=clock)
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.recovered_bytes = 0  # what recovery cut off, for the log and for tests
        # leader-epoch-checkpoint writes, numbered: the file only ever moves to a newer one
        self._epochs_generation = self._epochs_written = 0
        self._epochs_lock = threading.Lock()
        settle_interrupted_swaps(directory)
        for leftover in directory.iterdir():
            orphan_index = (
                leftover.suffix in (".index", ".timeindex", ".txnindex")
                and not leftover.with_suffix(".log").exists()
            )
            if leftover.suffix in _LEFTOVER_SUFFIXES or orphan_index:
                leftover.unlink()
        self.epochs = LeaderEpochCache.read(directory)
        self.topic_id = read_partition_metadata(directory)
        self._load(recovery_point, log_start_offset, clean_shutdown)

    def _load(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool) -> None:
        bases = sorted(int(path.stem) for path in self.directory.glob("*.log") if path.stem.isdecimal())
        now = self.clock()
        segments: list[Segment] = []
        epochs_read = list(self.epochs.entries)
        first_checked: int | None = None  # the base of the first segment recovery checks
        for k, base in enumerate(bases):
            segment = FileSegment(self.directory, base, self.config, now)
            next_base = bases[k + 1] if k + 1 < len(bases) else None
            verify = not clean_shutdown and (next_base is None or next_base > recovery_point)
            if verify and first_checked is None:
                first_checked = base
            cut = segment.load_batches(verify=verify, epochs=self.epochs)
            # Kafka's LogSegment.lastModified is the file's: retention of a segment without
            # timestamps, and ListOffsets v0, count from the last write, not from this open.
            segment.last_modified_ms = os.stat(segment.path).st_mtime_ns // 1_000_000
            segments.append(segment)
            if cut:
                self.recovered_bytes += cut
                for later in bases[k + 1 :]:  # Kafka deletes the unflushed segments after a torn one
                    FileSegment(self.directory, later, self.config, now).delete()
                break
        # Each time index ends with its segment's max timestamp, the active one's too: Kafka's
        # close appended it and its recovery appends it (LogSegment.recover); later appends add
        # entries only past it, as after a roll.
        for loaded in segments:
            loaded.on_inactive()
        for kept in segments:  # markers cut off by recovery take their index entries along
            kept.txn_index.truncate_to(kept.next_offset)
        if not segments:
            segments = [self._new_segment(max(log_start_offset, 0), now)]
        self.segments = segments
        self._log_start_offset = max(log_start_offset, segments[0].base_offset)
        if self._log_start_offset > self.log_end_offset:  # recovery cut below the log start: nothing readable
            self.truncate_fully_and_start_at(self._log_start_offset)
        end = self.log_end_offset
        self.epochs.truncate_from_end(end)
        self.epochs.truncate_from_start(self._log_start_offset)
        # After an unclean stop, the producer state must be replayed over every segment recovery
        # checked (Kafka's recoverSegment reloads it at each one's base, deleting the snapshots
        # above): the replay restores their transaction index entries a crash may have lost.
        self._drop_snapshots(above=end if first_checked is None else min(end, first_checked))
        self._remove_stray_snapshots()
        if clean_shutdown:
            self.recovery_point = min(max(recovery_point, self._log_start_offset), end)
        elif not bases:
            self.recovery_point = end  # a new log: nothing written, nothing to make durable
        else:
            self.flush()
        if self.epochs.entries != epochs_read:
            self._epochs_changed()
        else:  # Kafka's CheckpointFile makes the file, empty, when there is none: no fsync to wait for
            (self.directory / LEADER_EPOCH_CHECKPOINT).touch()

    def _new_segment(self, base_offset: int, now: int) -> Segment:
        return FileSegment(self.directory, base_offset, self.config, now)

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        if topic_id != self.topic_id:
            write_partition_metadata(self.directory, topic_id)
        super().assign_topic_id(topic_id)

    def _epochs_changed(self, *, truncated: bool = False) -> None:
        """Written at once (a new epoch, as Kafka's assign flushes), or, for a truncation, on the
        background writer. Each write carries its generation, and one never replaces a newer one
        on disk: a truncation still pending when a new epoch is written at once is skipped."""
        self._epochs_generation += 1
        generation, entries, directory = self._epochs_generation, self.epochs.entries, self.directory
        background = self.background if truncated else None
        if background is None:
            self._write_epochs(directory, entries, generation)
        else:
            background.submit(f"writing {directory}/{LEADER_EPOCH_CHECKPOINT}",
                              lambda: self._write_epochs(directory, entries, generation), directory)

    def _write_epochs(self, directory: Path, entries: list[tuple[int, int]], generation: int) -> None:
        with self._epochs_lock:
            if generation < self._epochs_written or not directory.is_dir():
                return  # a newer write is on disk, or the log was deleted or moved meanwhile
            write_checkpoint(directory / LEADER_EPOCH_CHECKPOINT, entries)
            self._epochs_written = generation

    # -- producer-state snapshots ---------------------------------------------------------------

    def _snapshot_offsets(self) -> list[int]:
        return sorted(int(path.stem) for path in self.directory.glob("*.snapshot") if path.stem.isdecimal())

    def write_snapshot(self, offset: int, data: bytes) -> None:
        """Written whole under a temporary name and renamed. With a background writer the fsyncs
        happen there, as Kafka's roll defers the snapshot's flush to its scheduler: until then a
        crash of the machine (not of the process) may leave it torn, and a torn snapshot is
        refused on load and the producer state replayed from the log instead."""
        path = self.directory / segment_name(offset, ".snapshot")
        tmp = path.with_name(path.name + ".tmp")
        background = self.background
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            if background is None:
                os.fsync(out.fileno())
        os.replace(tmp, path)
        if background is None:
            fsync_directory(self.directory)
            return
        directory = self.directory

        def sync_snapshot() -> None:
            fsync_path(path)
            fsync_path(directory)
        background.submit(f"syncing {path}", sync_snapshot, path)

    def latest_snapshot(self) -> tuple[int, bytes] | None:
        usable = [offset for offset in self._snapshot_offsets() if offset <= self.log_end_offset]
        if not usable:
            return None
        return usable[-1], (self.directory / segment_name(usable[-1], ".snapshot")).read_bytes()

    def _remove_stray_snapshots(self) -> None:
        """Kafka's removeStraySnapshots at load: a snapshot not at a segment's base offset (each
        close writes one at the log end) goes, but for the newest, kept while it is past the last
        segment's base; so snapshots do not pile up in the active segment, one per restart."""
        bases = {segment.base_offset for segment in self.segments}
        strays = [offset for offset in self._snapshot_offsets() if offset not in bases]
        newest = strays[-1] if strays and strays[-1] > self.active.base_offset else None
        for offset in strays:
            if offset != newest:
                self.remove_snapshot(offset)

    def remove_snapshot(self, offset: int) -> None:
        (self.directory / segment_name(offset, ".snapshot")).unlink(missing_ok=True)

    def _drop_snapshots(self, *, below: int | None = None, above: int | None = None) -> None:
        for offset in self._snapshot_offsets():
            if (below is not None and offset < below) or (above is not None and offset > above):
                (self.directory / segment_name(offset, ".snapshot")).unlink(missing_ok=True)

    def relocate(self, directory: Path) -> None:
        """Continue in ``directory``, a byte-identical copy of this log's (the future log of a move
        between log dirs, renamed into place): every segment reopens its files there."""
        for segment in self.segments:
            assert isinstance(segment, FileSegment)
            segment.relocate(directory)
        self.directory = directory

    def storage_path(self) -> Path | None:
        return self.directory

    def close_handlers(self) -> None:
        """Kafka's UnifiedLog.closeHandlers, for a log whose dir failed: every file closed as it
        is, nothing flushed, snapshotted or written again (a restart recovers the log)."""
        self.closed = True
        self.background = None
        for segment in self.segments:
            try:
                segment.close()
            except OSError as exc:  # the descriptor is what failed: closed or not, it is let go
                _log.debug("closing a segment of %s: %s", self, exc)

    def delete(self, doomed: Path) -> bool:
        """Close the log (its topic was deleted) and rename its directory to ``doomed`` (a
        ``-delete`` name), as Kafka renames a deleted log's directory at once: the partition's name
        is then free, and the LogManager removes the directory later. Answers whether there was a
        directory to rename."""
        self.closed = True
        for segment in self.segments:
            segment.close()
        try:
            os.replace(self.directory, doomed)
        except FileNotFoundError:
            return False
        fsync_directory(doomed.parent)
        self.directory = doomed
        return True
