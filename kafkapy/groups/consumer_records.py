"""The records a KIP-848 consumer group writes to ``__consumer_offsets``, as values.

One class per Kafka record schema (``group-coordinator/src/main/resources/common/message/
ConsumerGroup*Key/Value.json``), Kafka's field names in snake case. They are, name for name and
field for field, the KIP-848 classes the offsets-topic work adds to :mod:`kafkapy.groups.records`
(which this package may not edit in parallel): once both are in one tree, this module's imports
become imports from ``kafkapy.groups.records`` (``GroupRecord`` for ``ConsumerGroupRecord``) and the
file goes. Assignments are written as sorted ``TopicPartitions`` tuples, as Kafka writes them; the
group works with :data:`kafkapy.groups.assignors.Assignment` maps (``to_topic_partitions`` and
``from_topic_partitions`` convert). A record whose ``value`` is ``None`` is a tombstone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import TypeAlias

import attrs

__all__ = [
    "ClassicMemberMetadata",
    "ClassicProtocol",
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
    "PartitionRacks",
    "TopicMetadata",
    "TopicPartitions",
    "from_topic_partitions",
    "to_topic_partitions",
]


@attrs.frozen
class ConsumerGroupMetadataKey:
    group_id: str


@attrs.frozen
class ConsumerGroupMetadataValue:
    epoch: int  # the group epoch


@attrs.frozen
class PartitionRacks:
    partition: int
    racks: tuple[str, ...] = ()


@attrs.frozen
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    partition_metadata: tuple[PartitionRacks, ...] = ()  # unused since Kafka 4.0: written empty


@attrs.frozen
class ConsumerGroupPartitionMetadataKey:
    group_id: str


@attrs.frozen
class ConsumerGroupPartitionMetadataValue:
    """The subscribed topics as the last assignment saw them; a difference bumps the group epoch."""

    topics: tuple[TopicMetadata, ...] = ()


@attrs.frozen
class ClassicProtocol:
    name: str
    metadata: bytes


@attrs.frozen
class ClassicMemberMetadata:
    """A member that joined with JoinGroup (KIP-848's upgrade path; never written here)."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...] = ()


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
    classic_member_metadata: ClassicMemberMetadata | None = None


@attrs.frozen
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@attrs.frozen
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@attrs.frozen
class TopicPartitions:
    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@attrs.frozen
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@attrs.frozen
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...] = ()


@attrs.frozen
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@attrs.frozen
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState value: 0 stable, 1 unrevoked, 2 unreleased
    assigned_partitions: tuple[TopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[TopicPartitions, ...] = ()


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


def to_topic_partitions(assignment: Mapping[uuid.UUID, Iterable[int]]) -> tuple[TopicPartitions, ...]:
    """An assignment as written: topics and partitions sorted, empty topics left out."""
    return tuple(TopicPartitions(topic, tuple(sorted(parts)))
                 for topic, parts in sorted(assignment.items()) if parts)


def from_topic_partitions(written: Iterable[TopicPartitions]) -> dict[uuid.UUID, frozenset[int]]:
    merged: dict[uuid.UUID, frozenset[int]] = {}
    for entry in written:
        merged[entry.topic_id] = merged.get(entry.topic_id, frozenset()) | frozenset(entry.partitions)
    return {topic: parts for topic, parts in merged.items() if parts}
