"""Log compaction: keep the last record of every key, as Kafka's LogCleaner does.

Theory of operation
-------------------
Compaction looks at the *cleanable* segments: the rolled ones, oldest first,
up to the first whose largest timestamp is younger than
``min.compaction.lag.ms`` (Kafka's first uncleanable offset). Pass one maps
every key in them to its last offset; pass two rewrites each segment keeping a
record only if it is that last offset. The active segment is never touched,
so a key whose newest record sits there keeps its older one until the next
roll, as in Kafka.

Batches are rewritten with ``build_record_batch``, keeping base offset,
producer id, epoch and base sequence, partition leader epoch, codec and
timestamp type; records keep their offsets and timestamps (a compacted batch
has offset gaps, as Kafka's do). A batch nothing was removed from is kept as
its original bytes. Control and transactional batches are kept whole until
transactions land. Records without a key are dropped, as Kafka's cleaner
drops them.

Tombstones (null values) are kept while their segment's largest timestamp is
within ``delete.retention.ms`` of now, then removed, so a consumer that was
behind still sees the delete.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kafkapy.log.topic_config import LogConfig
from kafkapy.protocol.records import LOG_APPEND_TIME, RecordBatch, build_record_batch

__all__ = ["build_offset_map", "clean_batches", "cleanable_segments"]


def cleanable_segments(largest_timestamps: Sequence[int], config: LogConfig, now_ms: int) -> int:
    """How many of the oldest segments compaction may rewrite; the last (active) one never."""
    count = 0
    for largest in largest_timestamps[:-1]:
        if now_ms - largest < config.min_compaction_lag_ms:
            break
        count += 1
    return count


def _compactable(batch: RecordBatch) -> bool:
    return not (batch.is_control or batch.is_transactional)


def build_offset_map(batches: Iterable[RecordBatch]) -> dict[bytes, int]:
    """Every key's last offset (Kafka's SkimpyOffsetMap, exact rather than hashed)."""
    last: dict[bytes, int] = {}
    for batch in batches:
        if _compactable(batch):
            for record in batch.record_list():
                if record.key is not None:
                    last[record.key] = record.offset
    return last


def clean_batches(
    batches: Iterable[RecordBatch], offset_map: dict[bytes, int], *, drop_tombstones: bool
) -> tuple[bytes, int]:
    """The segment's batches with superseded records removed, and how many records went."""
    out = bytearray()
    removed = 0
    for batch in batches:
        if not _compactable(batch):
            out += batch.raw
            continue
        records = batch.record_list()
        kept = [
            record
            for record in records
            if record.key is not None
            and offset_map.get(record.key) == record.offset
            and not (drop_tombstones and record.value is None)
        ]
        removed += len(records) - len(kept)
        if len(kept) == len(records):
            out += batch.raw
        elif kept:
            out += build_record_batch(
                kept,
                base_offset=batch.base_offset,
                compression=batch.compression,
                producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence,
                timestamp_type=batch.timestamp_type,
                partition_leader_epoch=batch.partition_leader_epoch,
                max_timestamp=batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None,
            )
    return bytes(out), removed
