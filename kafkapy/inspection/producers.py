"""The idempotent and transactional producers each partition knows: ``broker.producers()``.

Read from the producer table of each partition's leader (the one Produce checks sequences
against and DescribeProducers answers from), so a test sees the epoch, the last sequence and
any open transaction's first offset exactly as the broker will judge the producer's next batch.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from kafkapy.dataplane.partitions import Partitions
from kafkapy.errors import KafkaApiError
from kafkapy.inspection.records import check_partition

__all__ = ["ProducerView", "producer_views"]


@attrs.frozen
class ProducerView:
    """One producer as one partition's table holds it (DescribeProducers' fields)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    last_sequence: int  # -1 before its first batch of this epoch
    last_timestamp: int
    coordinator_epoch: int  # of the last transaction marker; -1 with none
    current_txn_start_offset: int | None  # the open transaction's first offset here; None with none


def producer_views(partitions: Partitions, topic: str | None = None,
                   partition: int | None = None) -> Iterator[ProducerView]:
    """The producers of the partitions ``partitions``' broker leads (of ``topic``, of one
    ``partition``), by topic, partition and producer id. A topic not made yet has none; a
    partition it has not is UNKNOWN_TOPIC_OR_PARTITION (kafkapy.inspection.records)."""
    for name in sorted(partitions.cluster.topics) if topic is None else [topic]:
        info = partitions.cluster.topics.get(name)
        if info is None:
            continue
        if partition is not None and topic is not None:
            check_partition(name, partition, info.partitions)
        for index in sorted(info.partitions) if partition is None else [partition]:
            try:
                state = partitions.producer_state(name, index)
            except KafkaApiError:  # not led here (its leader answers), or no such partition
                continue
            for entry in sorted(state.producers.values(), key=lambda e: e.producer_id):
                yield ProducerView(name, index, entry.producer_id, entry.producer_epoch, entry.last_seq,
                                   entry.last_timestamp, entry.coordinator_epoch,
                                   entry.current_txn_first_offset)
