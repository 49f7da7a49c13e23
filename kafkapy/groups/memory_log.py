"""A GroupLog in memory: the coordinator's fallback until the offsets topic's log is wired in.

It keeps each partition's records in a list, in write order, and replays them as written. Brokers
of one in-process cluster share one (per metadata store, as they share their memory logs), so a
coordinator that moves to another broker of the cluster still finds its groups' records. Nothing
survives the process: for that the broker writes ``__consumer_offsets`` itself
(``kafkapy.groups.offsets_log``).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Sequence

from kafkapy.groups.partitioning import offsets_partition_for
from kafkapy.groups.records import GroupRecord

__all__ = ["MemoryGroupLog", "memory_group_log"]


class MemoryGroupLog:
    def __init__(self, partition_count: int) -> None:
        self._partition_count = partition_count
        self._records: dict[int, list[GroupRecord]] = {}

    @property
    def partition_count(self) -> int:
        return self._partition_count

    def partition_for(self, group_id: str) -> int:
        return offsets_partition_for(group_id, self._partition_count)

    async def append(self, group_id: str, records: Sequence[GroupRecord]) -> None:
        self._records.setdefault(self.partition_for(group_id), []).extend(records)

    def replay(self, partition: int) -> Iterator[GroupRecord]:
        return iter(list(self._records.get(partition, ())))

    def clear(self) -> None:
        """Every partition empty again (a broker reset)."""
        self._records.clear()


_SHARED: weakref.WeakKeyDictionary[object, MemoryGroupLog] = weakref.WeakKeyDictionary()


def memory_group_log(store: object, partition_count: int) -> MemoryGroupLog:
    """The MemoryGroupLog of ``store``, made for the first broker that asks."""
    log = _SHARED.get(store)
    if log is None or log.partition_count != partition_count:
        log = _SHARED[store] = MemoryGroupLog(partition_count)
    return log
