"""The records a KIP-848 consumer group writes to ``__consumer_offsets``, as this package's values.

One class per Kafka record schema (``group-coordinator/src/main/resources/common/message/
ConsumerGroup*Key/Value.json``), with Kafka's field names in snake case, so the mapping to the
shared record values in :mod:`kafkapy.groups.records` (and from there to bytes) is one class to one
class, field to field. A record whose ``value`` is ``None`` is a tombstone: the key's state is gone.

The group emits these in the order Kafka does and rebuilds itself from them
(:meth:`kafkapy.groups.consumer_group.ConsumerGroups.replay`), so what is written is all there is.
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

from kafkapy.groups.assignors import Assignment, TopicId

__all__ = [
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupRecord",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "TopicMetadata",
]


@attrs.frozen
class ConsumerGroupMetadataKey:
    group_id: str


@attrs.frozen
class ConsumerGroupMetadataValue:
    """The group epoch: bumped whenever a member joins, leaves or changes its subscription, or a
    subscribed topic changes."""

    epoch: int


@attrs.frozen
class TopicMetadata:
    topic_id: TopicId
    topic_name: str
    num_partitions: int


@attrs.frozen
class ConsumerGroupPartitionMetadataKey:
    group_id: str


@attrs.frozen
class ConsumerGroupPartitionMetadataValue:
    """The subscribed topics as the last assignment saw them; a difference bumps the group epoch."""

    topics: tuple[TopicMetadata, ...]


@attrs.frozen
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str


@attrs.frozen
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@attrs.frozen
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@attrs.frozen
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@attrs.frozen
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@attrs.frozen
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: Assignment = attrs.field(eq=True, hash=False)


@attrs.frozen
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@attrs.frozen
class ConsumerGroupCurrentMemberAssignmentValue:
    """Where the member is in its reconciliation: ``state`` is the MemberState byte (Kafka's
    ``MemberState.value()``: 0 stable, 1 unrevoked, 2 unreleased)."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: Assignment = attrs.field(eq=True, hash=False)
    partitions_pending_revocation: Assignment = attrs.field(eq=True, hash=False)


ConsumerGroupKey: TypeAlias = (
    ConsumerGroupMetadataKey | ConsumerGroupPartitionMetadataKey | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey)
ConsumerGroupValue: TypeAlias = (
    ConsumerGroupMetadataValue | ConsumerGroupPartitionMetadataValue | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue)


@attrs.frozen
class ConsumerGroupRecord:
    """One record: a key and its value, or a tombstone (``value=None``)."""

    key: ConsumerGroupKey
    value: ConsumerGroupValue | None
