"""Partition reassignments (KIP-455) as kafkapy runs them: checked as Kafka checks them, finished at once.

Theory of operation
-------------------
Kafka moves a partition's replicas in phases: the target replicas join the replica list as
``adding_replicas`` (and the old ones not in the target are ``removing_replicas``), they catch up
and join the ISR, then the controller drops the removing ones, moves the leader if it was among
them, and bumps the leader epoch. ListPartitionReassignments shows a partition while it is between
the first and the last step.

In one kafkapy process the brokers of a cluster share their logs, so a new replica has caught up
the moment it is named: there is no phase to wait in, and a reassignment is written finished in
one step (the store's ``reassign_partitions``, on ZooKeeper Kafka's /brokers/topics/<topic> with
empty ``adding_replicas`` and ``removing_replicas``), followed by the state Kafka's controller
writes when it completes one: the next leader epoch, whether or not the leader changed (so a
replica or client still on the old assignment is fenced), owed to the controller's leadership
(kafkapy.server.leadership, the one writer of partition states). No reassignment is ever
ongoing, so ListPartitionReassignments answers none, and cancelling one is
NO_REASSIGNMENT_IN_PROGRESS.

The leader follows Kafka's controller (kafkapy.server.leadership): a target that keeps a live
leader keeps it, whatever the order (the new first replica leads after a preferred-leader
election: ElectLeaders, or the auto rebalance); a target without the leader, or with a dead one,
elects its first live in-sync replica.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.store.base import TopicInfo

__all__ = ["plan_reassignment"]


def plan_reassignment(name: str, topic: TopicInfo | None, partition: int, target: Sequence[int] | None,
                      registered: Collection[int], allow_replication_factor_change: bool = True
                      ) -> tuple[int, ...] | None:
    """The replica list to write for one ReassignablePartition, or None when it already has it.
    KafkaApiError with Kafka's code and message (its KRaft controller's, in its order) otherwise:
    UNKNOWN_TOPIC_OR_PARTITION, NO_REASSIGNMENT_IN_PROGRESS for a cancel (``target`` None: nothing
    is ever in progress here), INVALID_REPLICATION_FACTOR (KIP-860: the size changes and that is not
    allowed), INVALID_REPLICA_ASSIGNMENT (empty, a broker that is not registered, one named twice)."""
    if topic is None:
        raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
    current = topic.partitions.get(partition)
    if current is None:
        raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            f"Unable to find partition {name}:{partition}.")
    if target is None:
        raise KafkaApiError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                            "No partition reassignment is in progress.")
    if not allow_replication_factor_change and len(target) != len(current):
        raise KafkaApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                            f"The replication factor is changed from {len(current)} to {len(target)}")
    if not target:
        raise KafkaApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            "The manual partition assignment includes an empty replica list.")
    previous: int | None = None
    for broker in sorted(target):
        if broker not in registered:
            raise KafkaApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment "
                                f"includes broker {broker}, but no such broker is registered.")
        if broker == previous:
            raise KafkaApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment "
                                f"includes the broker {broker} more than once.")
        previous = broker
    wanted = tuple(target)
    return None if wanted == tuple(current) else wanted

