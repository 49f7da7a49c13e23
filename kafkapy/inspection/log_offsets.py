"""Where a partition's log stands: ``broker.log_offsets()``, the offsets that decide what a
consumer at each isolation level may read.

An exactly-once test asks what a read_committed consumer will see and why: the last stable offset
(below the first offset of the oldest open transaction, so nothing from there on is delivered
yet), the high watermark (read_uncommitted's limit) and the aborted transactions a read_committed
Fetch lists, whose records a consumer drops. ``broker.records(isolation=...)`` gives the records
those offsets select; this gives the offsets themselves, read from the same partition logs.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from kafkapy.dataplane.partitions import Partitions
from kafkapy.errors import KafkaApiError
from kafkapy.inspection.records import check_partition

__all__ = ["AbortedTransaction", "LogOffsets", "log_offsets"]


@attrs.frozen
class AbortedTransaction:
    """One aborted transaction of a partition, as a read_committed Fetch lists it (with its marker)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


@attrs.frozen
class LogOffsets:
    """One partition's log offsets, in order: start <= last stable <= high watermark <= end."""

    topic: str
    partition: int
    log_start_offset: int
    last_stable_offset: int  # read_committed reads below it (ListOffsets LATEST at READ_COMMITTED)
    high_watermark: int  # read_uncommitted reads below it
    log_end_offset: int
    aborted_transactions: tuple[AbortedTransaction, ...]  # from the log start, oldest first


def log_offsets(partitions: Partitions, topic: str, partition: int | None = None) -> Iterator[LogOffsets]:
    """The offsets of the partitions of ``topic`` that ``partitions``' broker leads (one, or every
    one in turn), read from the leader's log as ListOffsets and Fetch read them (a partition
    nothing was written to yet is all zeros). A topic not made yet has none; a partition it has
    not is UNKNOWN_TOPIC_OR_PARTITION (kafkapy.inspection.records)."""
    info = partitions.cluster.topics.get(topic)
    if info is None:
        return
    if partition is not None:
        check_partition(topic, partition, info.partitions)
    for index in sorted(info.partitions) if partition is None else [partition]:
        try:
            log = partitions.leader_log(topic, index)
        except KafkaApiError:  # not led here (its leader answers), or offline
            continue
        aborted = log.collect_aborted_txns(log.log_start_offset, log.log_end_offset)
        yield LogOffsets(topic, index, log.log_start_offset, log.last_stable_offset, log.high_watermark,
                         log.log_end_offset,
                         tuple(AbortedTransaction(txn.producer_id, txn.first_offset, txn.last_offset)
                               for txn in sorted(aborted, key=lambda txn: txn.first_offset)))
