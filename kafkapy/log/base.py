"""The PartitionLog interface and the values that cross it.

A partition log is the ordered list of record batches of one partition. The
Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords and
DescribeLogDirs handlers (a later round) talk to it only through
:class:`PartitionLog`, so the in-memory and segment-file backends are
interchangeable.

The log trusts its caller for record contents: ``kafkapy.log.append`` has
validated the batches and assigned their offsets before ``append`` is called.
The log checks only what it relies on itself: magic-2 framing and offsets
contiguous from ``log_end_offset`` (a ValueError otherwise, a caller bug).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.txn_index import AbortedTxn
from kafkapy.protocol.records import Buffer, RecordBatch

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_PENDING_UPLOAD_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "NO_OFFSET",
    "NO_TIMESTAMP",
    "UNDEFINED_EPOCH",
    "AppendInfo",
    "EpochEndOffset",
    "OffsetOutOfRange",
    "PartitionLog",
    "ReadResult",
    "TimestampAndOffset",
]

# ListOffsets' special timestamps (Kafka's ListOffsetsRequest constants; -3 is KIP-734, -4 KIP-405,
# -5 KIP-1005, -6 KIP-1023). The log searches any other negative timestamp like a real one, as
# Kafka's UnifiedLog does; the ListOffsets handler refuses those first (UNSUPPORTED_VERSION).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6

NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP
NO_OFFSET = -1  # Kafka's UNDEFINED_EPOCH_OFFSET and ListOffsets' "no such offset"
UNDEFINED_EPOCH = -1  # RecordBatch.NO_PARTITION_LEADER_EPOCH


class OffsetOutOfRange(KafkaApiError):
    """A read or DeleteRecords outside [log_start_offset, log_end_offset]: Fetch answers
    OFFSET_OUT_OF_RANGE for the partition, the consumer then resets its position."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        super().__init__(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"offset {offset} is outside the log's range [{log_start_offset}, {log_end_offset}]",
        )


@attrs.frozen
class AppendInfo:
    """What Produce's response needs from an append (Kafka's LogAppendInfo, reduced).

    ``offset_of_max_timestamp`` is the last offset of the batch holding the max
    timestamp (Kafka's "shallow" offset), found without decoding records.
    ``log_append_time`` is the batches' max timestamp when they carry
    LogAppendTime, else -1, as ProduceResponse's log_append_time_ms.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int


@attrs.frozen
class ReadResult:
    """Whole batches from the one containing the fetch offset, ready for ``transport.writelines``.

    ``chunks`` are views of (memory backend) or bytes read from (segment files)
    the stored batches; adjacent batches of one stored buffer come as one chunk.
    ``aborted_transactions`` (asked for by read_committed reads) are those overlapping the
    batches returned, from the segments' transaction indexes; None when not asked for.
    """

    chunks: list[memoryview | bytes]
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    aborted_transactions: tuple[AbortedTxn, ...] | None = None

    @property
    def size(self) -> int:
        return sum(len(chunk) if isinstance(chunk, bytes) else chunk.nbytes for chunk in self.chunks)


@attrs.frozen
class TimestampAndOffset:
    """One ListOffsets answer: Kafka's FileRecords.TimestampAndOffset."""

    timestamp: int
    offset: int
    leader_epoch: int = UNDEFINED_EPOCH


@attrs.frozen
class EpochEndOffset:
    """One OffsetForLeaderEpoch answer: the largest epoch <= the requested one and its end offset."""

    leader_epoch: int
    end_offset: int


class PartitionLog(Protocol):
    """One partition's log; both backends implement it and pass one shared test suite."""

    @property
    def log_start_offset(self) -> int: ...

    def segment_base(self, offset: int) -> int:
        """The base offset of the segment holding ``offset`` (Fetch's DelayedFetch rule)."""
        ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int:
        """The offset below which records are acknowledged and readable by consumers.

        No replication yet: the only replica is the leader, so the high
        watermark follows the log end offset as soon as an append returns.
        """
        ...

    @property
    def last_stable_offset(self) -> int:
        """The read_committed limit: the first offset of the earliest open transaction (never below
        the log start offset), else the high watermark."""
        ...

    unstable_offset_source: Callable[[], int | None] | None
    """The first offset of the earliest open transaction, or None; set by the producer state's owner."""

    @property
    def size_in_bytes(self) -> int: ...

    def append(self, data: Buffer, *, now_ms: int | None = None,
               header: RecordBatch | None = None) -> AppendInfo:
        """Store batches whose offsets are already assigned, contiguous from log_end_offset;
        ``header``, when given, is ``data``'s one batch, read already by the caller."""
        ...

    def read(
        self, fetch_offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True,
        aborted_transactions: bool = False,
    ) -> ReadResult: ...

    def add_aborted_txn(self, txn: AbortedTxn) -> None:
        """Record an aborted transaction whose ABORT marker was just appended."""
        ...

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound)."""
        ...

    def latest_offset(self) -> TimestampAndOffset: ...

    def earliest_offset(self) -> TimestampAndOffset: ...

    def earliest_local_offset(self) -> TimestampAndOffset: ...

    def max_timestamp_offset(self) -> TimestampAndOffset | None: ...

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: a special timestamp (-1..-6) or the first record at or after ``timestamp``."""
        ...

    def legacy_offsets_before(self, timestamp: int, max_num_offsets: int) -> list[int]:
        """ListOffsets v0: up to ``max_num_offsets`` segment starts (and the log end) by the
        time each was last written, newest first."""
        ...

    def end_offset_for_epoch(self, leader_epoch: int) -> EpochEndOffset: ...

    def truncate_to(self, offset: int) -> None: ...

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset; answers the new low watermark."""
        ...

    def write_snapshot(self, offset: int, data: bytes) -> None:
        """Keep a producer-state snapshot taken at ``offset`` (producer_state's format)."""
        ...

    def latest_snapshot(self) -> tuple[int, bytes] | None:
        """The newest producer-state snapshot at or below the log end offset, for rebuilding state."""
        ...

    snapshot_source: Callable[[], bytes] | None
    """Called at segment roll and close to snapshot producer state; set by whoever owns it."""

    def flush(self) -> None: ...

    def close(self) -> None: ...
