"""What a partition's log holds, as decoded records: for tests that assert on what was written.

Reads go through the data plane's partition logs (the same ``read`` Fetch uses) and the one
batch reader (kafkapy.protocol.records), so what a test sees is what a consumer would be sent,
control and aborted records included, plus what only the broker knows: each record's producer
id, sequence and transaction flags.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from kafkapy.dataplane.partitions import Partitions
from kafkapy.protocol.records import RecordBatch, Records

__all__ = ["StoredRecord", "stored_records"]

_READ_ALL = 1 << 62  # max_bytes for a read that returns the whole log


@attrs.frozen
class StoredRecord:
    """One record as the log holds it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int | None
    producer_id: int  # -1: not from an idempotent or transactional producer
    producer_epoch: int
    sequence: int  # -1 without a producer id
    is_transactional: bool
    is_control: bool  # a transaction marker (its key says commit or abort)


def stored_records(partitions: Partitions, topic: str, partition: int | None = None,
                   from_offset: int = 0) -> list[StoredRecord]:
    """The records of ``topic`` (one partition, or every partition in turn) at or after
    ``from_offset``; an unknown topic or partition has none."""
    info = partitions.cluster.topics.get(topic)
    if info is None:
        return []
    indexes = sorted(info.partitions) if partition is None else [partition]
    return [record for index in indexes
            for record in _partition_records(partitions, topic, index, from_offset)]


def _partition_records(partitions: Partitions, topic: str, partition: int,
                       from_offset: int) -> Iterator[StoredRecord]:
    log = partitions.logs.get(topic, partition)
    if log is None or from_offset >= log.log_end_offset:
        return
    start = max(from_offset, log.log_start_offset)
    read = log.read(start, _READ_ALL)
    for batch in Records(b"".join(read.chunks)).batches():
        if not isinstance(batch, RecordBatch):
            continue  # the log stores magic 2 only; anything else is not this broker's
        for record in batch.record_list():
            if record.offset < from_offset:
                continue
            sequence = batch.base_sequence
            if sequence >= 0:
                sequence += record.offset - batch.base_offset
            yield StoredRecord(topic, partition, record.offset, record.key, record.value,
                               tuple((key, value) for key, value in record.headers), record.timestamp,
                               batch.producer_id, batch.producer_epoch, sequence, batch.is_transactional,
                               batch.is_control)
