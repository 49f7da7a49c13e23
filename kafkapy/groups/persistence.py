"""The seam between the group coordinator and where its records are kept.

The coordinator decides; a ``GroupLog`` makes the decision durable in ``__consumer_offsets``
(the group's partition, Kafka's rule in ``partitioning``) and hands the records back when a
broker becomes that partition's leader, so the coordinator can rebuild its groups from them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

import attrs

from kafkapy.groups.records import GroupRecord

__all__ = ["GroupLog", "OpenTxnRecords"]


@attrs.frozen
class OpenTxnRecords:
    """What a replay found of a transaction with no marker yet: a producer's transactional
    records (TxnOffsetCommit's), pending until its COMMIT or ABORT marker is written."""

    producer_id: int
    records: tuple[GroupRecord, ...]


class GroupLog(Protocol):
    @property
    def partition_count(self) -> int:
        """``offsets.topic.num.partitions``: how many partitions the groups are spread over."""

    def partition_for(self, group_id: str) -> int: ...

    async def append(self, group_id: str, records: Sequence[GroupRecord]) -> None:
        """Write ``records`` to the group's partition as one batch, returning once they are as
        durable as an acks=all Produce. Raises KafkaApiError (COORDINATOR_NOT_AVAILABLE while
        the partition cannot be written, NOT_COORDINATOR when this broker does not lead it)."""

    def replay(self, partition: int) -> Iterator[GroupRecord | OpenTxnRecords]:
        """Every record of ``partition`` in log order, tombstones included, for a coordinator
        loading the partition's groups (later records win); a committed transaction's records
        at its marker, an aborted one's never, an open one's last, as OpenTxnRecords."""
