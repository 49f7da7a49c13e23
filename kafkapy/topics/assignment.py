"""Replica placement as Kafka does it without racks (AdminUtils.assignReplicasToBrokers)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["assign_replicas", "partition_label", "placement_for_new_partitions"]

# The broker's own generator: an embedded broker must not move the global ``random`` state of the
# process it runs in (a test seeding ``random`` would get other numbers whenever a topic is made).
_PLACEMENT_RANDOM = random.Random()


def partition_label(broker_id: int, partition: int) -> str:
    """How seed 001's coordinator messages name a partition: ``<brokerId>-<partition>``."""
    return f"{broker_id}-{partition}"


def _replica_index(first: int, shift: int, j: int, count: int) -> int:
    return (first + 1 + (shift + j) % (count - 1)) % count


def assign_replicas(brokers: Iterable[int], partitions: int, replication_factor: int, *,
                    start_index: int = -1, start_partition: int = 0,
                    rng: random.Random | None = None) -> dict[int, tuple[int, ...]]:
    """Kafka's round-robin: partition p's first replica is broker ``(p + start) % n`` of the sorted
    live brokers; the followers follow at a shift that grows by one every n partitions, so that
    replicas spread evenly. A negative ``start_index`` picks the start (and first shift) at random,
    as Kafka does. ``replication_factor`` must be between 1 and the number of brokers."""
    ids = sorted(set(brokers))
    count = len(ids)
    if not 1 <= replication_factor <= count:
        raise ValueError(f"replication factor {replication_factor} with {count} brokers")
    pick = rng or _PLACEMENT_RANDOM
    start = start_index if start_index >= 0 else pick.randrange(count)
    shift = start_index if start_index >= 0 else pick.randrange(count)
    result: dict[int, tuple[int, ...]] = {}
    for partition in range(max(0, start_partition), max(0, start_partition) + partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start) % count
        replicas = [ids[first]]
        replicas += [ids[_replica_index(first, shift, j, count)] for j in range(replication_factor - 1)]
        result[partition] = tuple(replicas)
    return result


def placement_for_new_partitions(brokers: Sequence[int], existing: Mapping[int, tuple[int, ...]],
                                 new_count: int) -> dict[int, tuple[int, ...]]:
    """Where CreatePartitions puts the added partitions without an explicit assignment: Kafka
    (AdminZkClient.addPartitions) continues the round-robin from where partition 0's leader sits
    in the broker list, at partition 0's replication factor."""
    ids = sorted(set(brokers))
    first_leader = existing[0][0] if existing.get(0) else (ids[0] if ids else -1)
    start = next((i for i, b in enumerate(ids) if b >= first_leader), 0)
    factor = len(existing[0]) if 0 in existing else 1
    return assign_replicas(ids, new_count - len(existing), factor, start_index=start,
                           start_partition=len(existing))
