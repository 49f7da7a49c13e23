"""The aborted-transaction index: which producers' records a read_committed consumer must skip.

Theory of operation
-------------------
When a transaction is aborted, its records stay in the log; only the ABORT marker (a control
batch) says they do not count. A read_committed consumer learns which records to drop from the
Fetch response's ``aborted_transactions``: ``(producer_id, first_offset)`` of every aborted
transaction overlapping the fetched range. It then skips that producer's batches from
``first_offset`` up to the producer's abort marker.

Each segment keeps the transactions whose ABORT marker it holds, in marker order (Kafka's
TransactionIndex, one per segment): an :class:`AbortedTxn` is ``producer_id``, ``first_offset``
(the transaction's first record here), ``last_offset`` (its marker) and ``last_stable_offset``
(the partition's LSO once the marker was written). :meth:`TxnIndex.collect` answers the
entries with ``last_offset >= fetch_offset`` and ``first_offset < upper_bound``, and says the
search is complete at the first entry whose ``last_stable_offset >= upper_bound``: a transaction
aborted later that still began below ``upper_bound`` would have held the LSO below it. Without
that entry the search goes on into the next segment.

With ``log.dirs`` the index is Kafka's ``<base offset>.txnindex`` file beside the segment, made
at its first entry: 34-byte entries ``version int16 (0), producer_id int64, first_offset int64,
last_offset int64, last_stable_offset int64``, appended, never preallocated. A torn entry at
the end (a crash mid-write) is cut off when the file is opened, as Kafka's reader ignores it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

import attrs

from kafkapy.errors import DecodeError
from kafkapy.log.background import BackgroundWriter, remove_file

__all__ = ["ABORTED_TXN_SIZE", "AbortedTxn", "TxnIndex", "decode_entries", "encode_entry"]

_ENTRY = struct.Struct(">hqqqq")  # Kafka's AbortedTxn: version, producer id, first, last, last stable offset
ABORTED_TXN_SIZE = _ENTRY.size  # 34, AbortedTxn.TOTAL_SIZE
CURRENT_VERSION = 0  # AbortedTxn.CURRENT_VERSION


@attrs.frozen
class AbortedTxn:
    """One aborted transaction of a partition, as its segment's transaction index keeps it."""

    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # the partition's LSO right after the marker


def encode_entry(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(CURRENT_VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
                       txn.last_stable_offset)


def decode_entries(data: bytes | bytearray | memoryview) -> list[AbortedTxn]:
    """The whole entries of a ``.txnindex`` file's bytes (a torn tail is ignored, as Kafka's reader
    does); DecodeError for a version Kafka would not read."""
    entries = []
    whole = len(data) - len(data) % ABORTED_TXN_SIZE
    for position in range(0, whole, ABORTED_TXN_SIZE):
        version, producer_id, first, last, stable = _ENTRY.unpack_from(data, position)
        if version > CURRENT_VERSION:
            raise DecodeError(f"Unexpected aborted transaction version {version} in transaction index, "
                              f"current version is {CURRENT_VERSION}", offset=position)
        entries.append(AbortedTxn(producer_id, first, last, stable))
    return entries


class TxnIndex:
    """One segment's aborted transactions, in memory and, given a ``path``, in Kafka's file."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._fd = -1
        if path is not None and path.exists():
            data = path.read_bytes()
            self.entries = decode_entries(data)
            self._open()
            whole = len(self.entries) * ABORTED_TXN_SIZE
            if whole != len(data):
                os.ftruncate(self._fd, whole)

    def _open(self) -> None:
        assert self.path is not None
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    @property
    def last_offset(self) -> int | None:
        return self.entries[-1].last_offset if self.entries else None

    def __iter__(self) -> Iterator[AbortedTxn]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, txn: AbortedTxn) -> None:
        """Markers come in offset order, so entries must too (Kafka refuses otherwise)."""
        last = self.last_offset
        if last is not None and txn.last_offset <= last:
            raise ValueError(f"The last offset of appended transactions must increase sequentially, but "
                             f"{txn.last_offset} is not greater than current last offset {last}")
        self.entries.append(txn)
        if self.path is not None:
            if self._fd < 0:
                self._open()  # Kafka makes the file at its first entry
            os.write(self._fd, encode_entry(txn))

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), and whether the search
        is complete (Kafka's TransactionIndex.collectAbortedTxns)."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or past ``offset`` (the log was truncated there)."""
        keep = next((i for i, txn in enumerate(self.entries) if txn.last_offset >= offset), len(self.entries))
        if keep == len(self.entries):
            return
        del self.entries[keep:]
        if self._fd >= 0:
            os.ftruncate(self._fd, keep * ABORTED_TXN_SIZE)

    def replace(self, entries: Iterable[AbortedTxn]) -> None:
        """Start over with ``entries`` (a rebuilt index)."""
        self.entries = []
        if self._fd >= 0:
            os.ftruncate(self._fd, 0)
        for txn in entries:
            self.append(txn)

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    @property
    def descriptor(self) -> int:
        """The open file's descriptor; -1 while nothing was written (no file yet)."""
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = -1

    def relocate(self, directory: Path) -> None:
        """Continue with the copy of this index's file in ``directory`` (a move between log dirs)."""
        if self.path is None:
            return
        was_open = self._fd >= 0
        self.close()
        self.path = directory / self.path.name
        if was_open:
            self._open()

    def delete(self, background: BackgroundWriter | None = None) -> None:
        self.close()
        self.entries = []
        if self.path is not None:
            remove_file(self.path, background)
