"""The records the group coordinator keeps in ``__consumer_offsets``, as Python values.

Kafka's own key and value schemas (OffsetCommitKey/Value, GroupMetadataKey/Value, the KIP-848
records and the KIP-932 share group records) in the shape the coordinator works with; their
bytes are the codec's business (``kafkapy.groups.record_codec``). A value of ``None`` is a
tombstone: the key's state is gone (an offset deleted or expired, a group deleted), and
compaction will drop the key.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

import attrs

__all__ = [
    "NO_EXPIRE_TIMESTAMP",
    "SHARE_GROUP_KEYS",
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
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "GroupRecord",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "PartitionRacks",
    "ShareGroupCurrentMemberAssignmentKey",
    "ShareGroupCurrentMemberAssignmentValue",
    "ShareGroupKey",
    "ShareGroupMemberMetadataKey",
    "ShareGroupMemberMetadataValue",
    "ShareGroupMetadataKey",
    "ShareGroupMetadataValue",
    "ShareGroupStatePartitionMetadataKey",
    "ShareGroupStatePartitionMetadataValue",
    "ShareGroupTargetAssignmentMemberKey",
    "ShareGroupTargetAssignmentMemberValue",
    "ShareGroupTargetAssignmentMetadataKey",
    "ShareGroupTargetAssignmentMetadataValue",
    "ShareGroupValue",
    "TopicInfo",
    "TopicMetadata",
    "TopicPartitions",
    "TopicPartitionsInfo",
    "from_topic_partitions",
    "to_topic_partitions",
]

NO_EXPIRE_TIMESTAMP = -1  # commits since KIP-211 carry no expiry of their own


@attrs.frozen
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@attrs.frozen
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = NO_EXPIRE_TIMESTAMP


@attrs.frozen
class GroupMetadataKey:
    group: str


@attrs.frozen
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@attrs.frozen
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...] = ()


# --- KIP-848 consumer groups: one record per fact, so a heartbeat rewrites only what changed ---------
# Field names are the snake_case of Kafka's, as the codec's specs (protocol_specs/records/) name them.


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
    topics: tuple[TopicMetadata, ...] = ()


@attrs.frozen
class ClassicProtocol:
    name: str
    metadata: bytes


@attrs.frozen
class ClassicMemberMetadata:
    """A member of a consumer group that joined with JoinGroup (KIP-848's upgrade path)."""

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
    state: int  # Kafka's MemberState value
    assigned_partitions: tuple[TopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[TopicPartitions, ...] = ()


# --- KIP-932 share groups (record types 10-15; Kafka 4.1's layouts, type 9 is no longer written) ---


@attrs.frozen
class ShareGroupMemberMetadataKey:
    group_id: str
    member_id: str


@attrs.frozen
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...] = ()


@attrs.frozen
class ShareGroupMetadataKey:
    group_id: str


@attrs.frozen
class ShareGroupMetadataValue:
    epoch: int  # the group epoch
    metadata_hash: int = 0  # KIP-1101's subscribed-topics hash; 0: none computed


@attrs.frozen
class ShareGroupTargetAssignmentMetadataKey:
    group_id: str


@attrs.frozen
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@attrs.frozen
class ShareGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@attrs.frozen
class ShareGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...] = ()


@attrs.frozen
class ShareGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@attrs.frozen
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState value
    assigned_partitions: tuple[TopicPartitions, ...] = ()


@attrs.frozen
class TopicPartitionsInfo:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@attrs.frozen
class TopicInfo:
    topic_id: uuid.UUID
    topic_name: str


@attrs.frozen
class ShareGroupStatePartitionMetadataKey:
    group_id: str


@attrs.frozen
class ShareGroupStatePartitionMetadataValue:
    initializing_topics: tuple[TopicPartitionsInfo, ...] = ()
    initialized_topics: tuple[TopicPartitionsInfo, ...] = ()
    deleting_topics: tuple[TopicInfo, ...] = ()


ShareGroupKey: TypeAlias = (ShareGroupMemberMetadataKey | ShareGroupMetadataKey
                            | ShareGroupTargetAssignmentMetadataKey | ShareGroupTargetAssignmentMemberKey
                            | ShareGroupCurrentMemberAssignmentKey | ShareGroupStatePartitionMetadataKey)
ShareGroupValue: TypeAlias = (ShareGroupMemberMetadataValue | ShareGroupMetadataValue
                              | ShareGroupTargetAssignmentMetadataValue
                              | ShareGroupTargetAssignmentMemberValue
                              | ShareGroupCurrentMemberAssignmentValue
                              | ShareGroupStatePartitionMetadataValue)
#: The share group keys, for a loader that hands them to the share groups' owner.
SHARE_GROUP_KEYS: tuple[type[Any], ...] = (
    ShareGroupMemberMetadataKey, ShareGroupMetadataKey, ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMemberKey, ShareGroupCurrentMemberAssignmentKey,
    ShareGroupStatePartitionMetadataKey)


GroupKey: TypeAlias = (OffsetCommitKey | GroupMetadataKey | ConsumerGroupMetadataKey
                       | ConsumerGroupPartitionMetadataKey | ConsumerGroupMemberMetadataKey
                       | ConsumerGroupTargetAssignmentMetadataKey | ConsumerGroupTargetAssignmentMemberKey
                       | ConsumerGroupCurrentMemberAssignmentKey | ShareGroupKey)
GroupValue: TypeAlias = (OffsetCommitValue | GroupMetadataValue | ConsumerGroupMetadataValue
                         | ConsumerGroupPartitionMetadataValue | ConsumerGroupMemberMetadataValue
                         | ConsumerGroupTargetAssignmentMetadataValue
                         | ConsumerGroupTargetAssignmentMemberValue
                         | ConsumerGroupCurrentMemberAssignmentValue | ShareGroupValue)


@attrs.frozen
class GroupRecord:
    """One ``__consumer_offsets`` record: a key and its value, or a tombstone (``value=None``)."""

    key: GroupKey
    value: GroupValue | None


def to_topic_partitions(assignment: Mapping[uuid.UUID, Iterable[int]]) -> tuple[TopicPartitions, ...]:
    """An assignment as written: topics and partitions sorted, empty topics left out."""
    return tuple(TopicPartitions(topic, tuple(sorted(parts)))
                 for topic, parts in sorted(assignment.items()) if parts)


def from_topic_partitions(written: Iterable[TopicPartitions]) -> dict[uuid.UUID, frozenset[int]]:
    merged: dict[uuid.UUID, frozenset[int]] = {}
    for entry in written:
        merged[entry.topic_id] = merged.get(entry.topic_id, frozenset()) | frozenset(entry.partitions)
    return {topic: parts for topic, parts in merged.items() if parts}
