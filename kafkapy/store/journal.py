"""The durable store's files: an append-only journal of changes and a snapshot that compacts it.

Theory of operation
-------------------
Two files in the metadata directory (Kafka's ``metadata.log.dir``), named so that neither Kafka's
log loading nor kafkapy's takes them for a partition: both load directories only, and these are
files whose names have no ``-<partition>`` ending.

* ``kafkapy-metadata.snapshot``: the whole state at one sequence number, written to a ``.tmp``
  file, fsynced and renamed over the old one (kafkapy.log.checkpoint.write_atomically), so it is
  always whole. Its first line is a header (format, version, cluster id, the last sequence number
  it holds), its last an end line counting the entries between; anything else is refused.
* ``kafkapy-metadata.journal``: one line per change made since, each written to the file before
  the change is made, so a change a caller was told of outlives the process (a SIGKILL too). It is
  fsynced as the partition logs are, by the flush policy: ``flush_messages`` changes or
  ``flush_ms`` since the last fsync (Kafka's log.flush.interval.messages and .ms, by default never:
  the OS writes back), on a snapshot, and on close. ``flush_messages=1`` fsyncs every change
  before it is made, as Kafka's KRaft metadata log does; that costs a disk flush per change.

Each line is ``<crc32c of the JSON, 8 hex digits> <JSON>\\n``, and each journal entry carries a
sequence number one above the last. On open, the snapshot is read, then the journal's entries
above the snapshot's number (lower ones are a compaction's leftovers: the snapshot was renamed in
and the crash came before the journal was emptied). A bad line (its checksum, JSON, or no newline)
with no good line after it is a write torn by a crash: it and everything after are cut, as Kafka's
log recovery truncates at the first invalid batch; a process dies between two whole writes, so
only the last can be torn (after an OS crash, only what the flush policy fsynced is sure). A bad
line with a good one after it, or a gap in the numbers, is damage: the open is refused with one
line naming the file and the byte.

A snapshot is written when the journal has grown to ``max(snapshot_bytes, the last snapshot's
size)``: Kafka's ``metadata.log.max.record.bytes.between.snapshots`` bounds the journal, and the
second term pays each snapshot's O(state) with as many bytes of changes, so N changes cost O(N).

The directory is locked (``flock`` on the journal) while open: a second process, or a second
store in this one, over the same directory is refused rather than interleaving its writes.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from kafkapy.log.checkpoint import fsync_directory
from kafkapy.protocol.crc32c import crc32c_copying
from kafkapy.store.base import CorruptMetadata, StoreError

__all__ = ["JOURNAL_FILE", "SNAPSHOT_FILE", "MetadataJournal"]

SNAPSHOT_FILE = "kafkapy-metadata.snapshot"
JOURNAL_FILE = "kafkapy-metadata.journal"
FORMAT = "kafkapy-metadata"
VERSION = 1
# Kafka's default of metadata.log.max.record.bytes.between.snapshots (KRaftConfigs).
DEFAULT_SNAPSHOT_BYTES = 20 * 1024 * 1024
NEVER = (1 << 63) - 1  # Java's Long.MAX_VALUE: Kafka's default for the flush intervals

log = logging.getLogger(__name__)
T = TypeVar("T")


def encode_line(obj: dict[str, Any]) -> bytes:
    payload = json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()
    return b"%08x %s\n" % (crc32c_copying(payload), payload)


def decode_line(line: bytes) -> dict[str, Any] | None:
    """The JSON object of a whole line (its newline included); None if it is not one, intact."""
    if len(line) < 11 or line[8:9] != b" " or not line.endswith(b"\n"):
        return None
    payload = line[9:-1]
    try:
        if int(line[:8], 16) != crc32c_copying(payload):
            return None
        obj = json.loads(payload)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _read_at(path: str, offset: int, obj: dict[str, Any], read: Callable[[dict[str, Any]], T]) -> T:
    try:
        return read(obj)
    except StoreError as exc:
        raise CorruptMetadata(path, f"the entry at byte {offset}: {exc}") from None


def _lines(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, line) for each line of ``data``, the last without a newline if it has none."""
    found, start = [], 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        found.append((start, data[start:end]))
        start = end
    return found


class MetadataJournal:
    """The snapshot and journal of one metadata directory (module docstring)."""

    def __init__(self, directory: Path | str, snapshot_bytes: int = DEFAULT_SNAPSHOT_BYTES, *,
                 flush_messages: int = NEVER, flush_ms: int = NEVER) -> None:
        self.directory = Path(directory)
        self.snapshot_path = self.directory / SNAPSHOT_FILE
        self.journal_path = self.directory / JOURNAL_FILE
        self.snapshot_bytes = snapshot_bytes
        self.flush_messages = flush_messages
        self.flush_ms = flush_ms
        self._unflushed = 0  # changes written since the last fsync
        self._last_flush = time.monotonic()
        self._fd: int | None = None
        self._seq = 0  # the last sequence number written
        self._journal_size = 0
        self._last_snapshot_size = 0

    # --- open and replay -------------------------------------------------------------------------

    def open(self, new_cluster_id: str, read: Callable[[dict[str, Any]], T]) -> tuple[str, list[T]]:
        """Lock the directory and read it: the cluster id and every change stored, in order, each
        made by ``read`` from its JSON object (a StoreError of ``read`` is damage too). A new
        directory starts with ``new_cluster_id`` and no changes. CorruptMetadata for damage."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.journal_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # Kafka's line (MetaPropertiesEnsemble.verify), with the reason
            raise StoreError(f"Encountered I/O error in metadata log directory {self.directory}. Cannot "
                             f"continue. ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreError(f"metadata.log.dir {self.directory} is in use by another broker or process "
                             f"(its {JOURNAL_FILE} is locked)") from None
        try:
            if self.snapshot_path.exists():
                cluster_id, changes = self._read_snapshot(read)
            else:
                cluster_id, changes = new_cluster_id, []
                if os.fstat(fd).st_size:
                    raise CorruptMetadata(str(self.journal_path), f"a journal without its {SNAPSHOT_FILE}")
                self._write_snapshot_file(cluster_id, [])
            changes.extend(self._read_journal(fd, read))
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"metadata.log.dir {self.directory}: {exc}") from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._cluster_id = cluster_id
        return cluster_id, changes

    def _read_snapshot(self, read: Callable[[dict[str, Any]], T]) -> tuple[str, list[T]]:
        path = str(self.snapshot_path)
        data = self.snapshot_path.read_bytes()
        self._last_snapshot_size = len(data)
        objects, offsets = [], []
        for offset, line in _lines(data):
            obj = decode_line(line)
            if obj is None:
                raise CorruptMetadata(path, f"the line at byte {offset} is corrupt (checksum, JSON or "
                                            f"newline): a snapshot is written whole, so it was damaged")
            objects.append(obj)
            offsets.append(offset)
        if not objects or objects[0].get("format") != FORMAT:
            raise CorruptMetadata(path, f"not a {FORMAT} snapshot (no header)")
        header, body = objects[0], objects[1:]
        if header.get("version") != VERSION:
            raise CorruptMetadata(path, f"version {header.get('version')!r}, this kafkapy reads {VERSION}")
        if not body or body[-1].get("end") != len(body) - 1:
            raise CorruptMetadata(path, "it does not end with its entry count: a snapshot is written whole, "
                                        "so it was damaged")
        cluster_id, seq = header.get("cluster_id"), header.get("last_seq")
        if not isinstance(cluster_id, str) or not cluster_id or not isinstance(seq, int):
            raise CorruptMetadata(path, "its header lacks the cluster id or the sequence number")
        self._seq = seq
        return cluster_id, [_read_at(path, offset, obj, read) for offset, obj in zip(offsets[1:], body[:-1])]

    def _read_journal(self, fd: int, read: Callable[[dict[str, Any]], T]) -> list[T]:
        path = str(self.journal_path)
        size = os.fstat(fd).st_size
        data = os.pread(fd, size, 0)
        changes: list[T] = []
        torn_at: int | None = None
        for offset, line in _lines(data):
            obj = decode_line(line)
            if obj is None or not isinstance(obj.get("seq"), int):
                if torn_at is None:
                    torn_at = offset
                continue
            if torn_at is not None:
                raise CorruptMetadata(path, f"the entry at byte {torn_at} is corrupt and entries follow it "
                                            f"(a crash tears only the last): the journal was damaged")
            seq = obj.pop("seq")
            if seq <= self._seq and not changes:
                continue  # already in the snapshot (a compaction's leftover)
            if seq != self._seq + 1:
                raise CorruptMetadata(path, f"the entry at byte {offset} is number {seq}, "
                                            f"not {self._seq + 1}: entries are missing")
            self._seq = seq
            changes.append(_read_at(path, offset, obj, read))
        if torn_at is not None:
            log.warning("%s: cut %d bytes of a write torn by a crash at byte %d (the change it held "
                        "was never acknowledged)", path, size - torn_at, torn_at)
            os.ftruncate(fd, torn_at)
            os.fsync(fd)
            size = torn_at
        self._journal_size = size
        return changes

    # --- writes ----------------------------------------------------------------------------------

    def wants_snapshot(self) -> bool:
        return self._journal_size >= max(self.snapshot_bytes, self._last_snapshot_size)

    def append(self, change: dict[str, Any]) -> None:
        """Write one change (and fsync it when the flush policy says so); StoreError (the journal as
        it was) if it cannot be."""
        fd = self._open_fd()
        line = encode_line({**change, "seq": self._seq + 1})
        try:
            written = os.pwrite(fd, line, self._journal_size)
            if written != len(line):
                raise OSError(f"short write ({written} of {len(line)} bytes)")
            if self._unflushed + 1 >= self.flush_messages or \
                    (time.monotonic() - self._last_flush) * 1000 >= self.flush_ms:
                self._flush(fd)
            else:
                self._unflushed += 1
        except OSError as exc:
            try:  # the journal as it was, so the next write does not follow a torn one
                os.ftruncate(fd, self._journal_size)
            except OSError:
                self.close()  # nothing more is written after a line that may be torn
            raise StoreError(f"metadata journal {self.journal_path}: {exc}") from None
        self._seq += 1
        self._journal_size += len(line)

    def write_snapshot(self, changes: Iterable[dict[str, Any]]) -> None:
        """The whole state (as ``changes``) in a new snapshot at the last sequence number; then the
        journal is emptied. StoreError if it cannot be written (the old snapshot and journal stay)."""
        fd = self._open_fd()
        try:
            self._write_snapshot_file(self._cluster_id, changes)
            os.ftruncate(fd, 0)
            os.fsync(fd)
        except OSError as exc:
            raise StoreError(f"metadata snapshot {self.snapshot_path}: {exc}") from None
        self._journal_size = 0
        self._unflushed = 0

    def _flush(self, fd: int) -> None:
        os.fsync(fd)
        self._unflushed = 0
        self._last_flush = time.monotonic()

    def _write_snapshot_file(self, cluster_id: str, changes: Iterable[dict[str, Any]]) -> None:
        tmp = self.snapshot_path.with_name(SNAPSHOT_FILE + ".tmp")
        header = {"format": FORMAT, "version": VERSION, "cluster_id": cluster_id, "last_seq": self._seq}
        count = 0
        with open(tmp, "wb") as out:
            out.write(encode_line(header))
            for change in changes:
                out.write(encode_line(change))
                count += 1
            out.write(encode_line({"end": count}))
            out.flush()
            os.fsync(out.fileno())
            self._last_snapshot_size = out.tell()
        os.replace(tmp, self.snapshot_path)
        fsync_directory(self.directory)

    def _open_fd(self) -> int:
        if self._fd is None:
            raise StoreError(f"metadata journal {self.journal_path} is closed")
        return self._fd

    def close(self) -> None:
        """Flush what the policy left unflushed (a clean stop leaves everything on disk) and
        release the directory (its lock goes with the descriptor)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                if self._unflushed:
                    os.fsync(fd)
            except OSError as exc:
                log.error("metadata journal %s: the last changes may not be on disk: %s",
                          self.journal_path, exc)
            finally:
                os.close(fd)
