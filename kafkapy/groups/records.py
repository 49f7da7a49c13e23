"""The records the group coordinator keeps in ``__consumer_offsets``, as Python values.

Kafka's own key and value schemas (OffsetCommitKey/Value, GroupMetadataKey/Value, and the KIP-848
records) in the shape the coordinator works with; their bytes are the codec's business
(``kafkapy.groups.record_codec``). A value of ``None`` is a tombstone: the key's state is gone
(an offset deleted or expired, a group deleted), and compaction will drop the key.
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

__all__ = ["NO_EXPIRE_TIMESTAMP", "GroupMetadataKey", "GroupMetadataValue", "GroupRecord", "MemberMetadata",
           "OffsetCommitKey", "OffsetCommitValue"]

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


GroupKey: TypeAlias = OffsetCommitKey | GroupMetadataKey
GroupValue: TypeAlias = OffsetCommitValue | GroupMetadataValue


@attrs.frozen
class GroupRecord:
    """One ``__consumer_offsets`` record: a key and its value, or a tombstone (``value=None``)."""

    key: GroupKey
    value: GroupValue | None
