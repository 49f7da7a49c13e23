"""Replica placement as Kafka does it (AdminUtils.assignReplicasToBrokers): round-robin over the
brokers, and, when every broker has a rack, over the brokers alternated by rack, each partition's
replicas in as many racks as there are (Kafka's rack-aware assignment)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["assign_replicas", "partition_label", "placement_for_new_partitions", "rack_alternated"]

# The broker's own generator: an embedded broker must not move the global ``random`` state of the
# process it runs in (a test seeding ``random`` would get other numbers whenever a topic is made).
_PLACEMENT_RANDOM = random.Random()


def partition_label(broker_id: int, partition: int) -> str:
    """How seed 001's coordinator messages name a partition: ``<brokerId>-<partition>``."""
    return f"{broker_id}-{partition}"


def _replica_index(first: int, shift: int, j: int, count: int) -> int:
    return (first + 1 + (shift + j) % (count - 1)) % count


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """The brokers in Kafka's rack-alternated order: the lowest id of each rack in rack-name
    order, then the next of each, and so on (racks that run out are skipped)."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    return [queue[depth] for depth in range(max(map(len, queues), default=0))
            for queue in queues if depth < len(queue)]


def assign_replicas(brokers: Iterable[int], partitions: int, replication_factor: int, *,
                    start_index: int = -1, start_partition: int = 0,
                    rng: random.Random | None = None,
                    racks: Mapping[int, str | None] | None = None) -> dict[int, tuple[int, ...]]:
    """Kafka's round-robin: partition p's first replica is broker ``(p + start) % n`` of the sorted
    live brokers; the followers follow at a shift that grows by one every n partitions, so that
    replicas spread evenly. A negative ``start_index`` picks the start (and first shift) at random,
    as Kafka does. ``replication_factor`` must be between 1 and the number of brokers.

    When ``racks`` gives every broker a rack, Kafka's rack-aware variant: the same round-robin over
    the rack-alternated list (``rack_alternated``), the shift in steps of the number of racks, and
    a follower skipped while its rack already has a replica and another rack has none, or while it
    has one and another broker has none. With some brokers rackless Kafka's ZooKeeper brokers
    refuse to place replicas; kafkapy places them without racks, as Kafka's KRaft placer copes."""
    ids = sorted(set(brokers))
    count = len(ids)
    if not 1 <= replication_factor <= count:
        raise ValueError(f"replication factor {replication_factor} with {count} brokers")
    rack_of = {broker: rack for broker in ids if (rack := (racks or {}).get(broker)) is not None}
    order = rack_alternated(rack_of) if racks is not None and len(rack_of) == count else ids
    rack_count = len(set(rack_of.values())) if order is not ids else 1
    pick = rng or _PLACEMENT_RANDOM
    start = start_index if start_index >= 0 else pick.randrange(count)
    shift = start_index if start_index >= 0 else pick.randrange(count)
    result: dict[int, tuple[int, ...]] = {}
    for partition in range(max(0, start_partition), max(0, start_partition) + partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start) % count
        if order is ids:
            replicas = [ids[first]]
            replicas += [ids[_replica_index(first, shift, j, count)] for j in range(replication_factor - 1)]
        else:
            replicas = _rack_aware_replicas(order, rack_of, rack_count, first, shift, replication_factor)
        result[partition] = tuple(replicas)
    return result


def _rack_aware_replicas(order: Sequence[int], rack_of: Mapping[int, str], rack_count: int, first: int,
                         shift: int, replication_factor: int) -> list[int]:
    """One partition's replicas under Kafka's rack-aware rule (assign_replicas' docstring)."""
    count = len(order)
    replicas = [order[first]]
    racks_used, brokers_used = {rack_of[order[first]]}, {order[first]}
    candidate = 0
    for _ in range(replication_factor - 1):
        while True:
            broker = order[_replica_index(first, shift * rack_count, candidate, count)]
            candidate += 1
            rack = rack_of[broker]
            if ((rack not in racks_used or len(racks_used) == rack_count)
                    and (broker not in brokers_used or len(brokers_used) == count)):
                replicas.append(broker)
                racks_used.add(rack)
                brokers_used.add(broker)
                break
    return replicas


def placement_for_new_partitions(brokers: Sequence[int], existing: Mapping[int, tuple[int, ...]],
                                 new_count: int, racks: Mapping[int, str | None] | None = None
                                 ) -> dict[int, tuple[int, ...]]:
    """Where CreatePartitions puts the added partitions without an explicit assignment: Kafka
    (AdminZkClient.addPartitions) continues the round-robin from where partition 0's leader sits
    in the broker list sorted by id (an index Kafka then uses in the rack-alternated list too),
    at partition 0's replication factor."""
    ids = sorted(set(brokers))
    first_leader = existing[0][0] if existing.get(0) else (ids[0] if ids else -1)
    start = next((i for i, b in enumerate(ids) if b >= first_leader), 0)
    factor = len(existing[0]) if 0 in existing else 1
    return assign_replicas(ids, new_count - len(existing), factor, start_index=start,
                           start_partition=len(existing), racks=racks)
