"""A share group as Kafka's ShareGroup* records in ``__consumer_offsets``, and back (KIP-932).

Theory of operation
-------------------
Kafka's group coordinator writes a share group's state as one record per fact, keyed so that a
later record replaces an earlier one: the group epoch (ShareGroupMetadata), each member's
metadata, target assignment and current assignment (ShareGroupMemberMetadata,
ShareGroupTargetAssignmentMember, ShareGroupCurrentMemberAssignment), the assignment epoch
(ShareGroupTargetAssignmentMetadata), and the share-partitions whose state was initialized
(ShareGroupStatePartitionMetadata). A key with a null value (a tombstone) says the fact is gone.

kafkapy keeps the same facts as values (``records_of``: what the group is now, as a map from key
to value) and writes only the difference from what it wrote last (``changes``: the keys whose
value changed, then tombstones for the keys gone, members' before the group's, as Kafka's
createGroupTombstoneRecords orders them). ``replay`` folds records, in log order, back into
groups and the maps they were written from, so a coordinator that loads a partition goes on
writing differences from exactly what the log holds.

What kafkapy does not track it writes as Kafka's defaults: MetadataHash 0 (no KIP-1101 hash, so
Kafka would recompute the assignment) and state STABLE (a share member has nothing to revoke).

Sans I/O: values in, records out.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

import attrs

from kafkapy.groups.records import (
    GroupRecord,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareGroupValue,
    TopicPartitionsInfo,
    from_topic_partitions,
    to_topic_partitions,
)
from kafkapy.shares.share_group import ShareGroup, ShareGroupState, ShareMember

__all__ = ["STABLE_MEMBER_STATE", "Initialized", "Loaded", "Written", "changes", "records_of", "replay"]

STABLE_MEMBER_STATE = 0  # Kafka's MemberState.STABLE
#: A group's facts as last written: key -> value.
Written = dict[ShareGroupKey, ShareGroupValue]
#: The share-partitions with initialized state: topic id -> (topic name, partitions).
Initialized = dict[uuid.UUID, tuple[str, frozenset[int]]]
# The order tombstones go in: a member's facts before the group's, the epoch record last.
_TOMBSTONE_ORDER: dict[type[object], int] = {
    ShareGroupCurrentMemberAssignmentKey: 0, ShareGroupTargetAssignmentMemberKey: 1,
    ShareGroupMemberMetadataKey: 2, ShareGroupTargetAssignmentMetadataKey: 3,
    ShareGroupStatePartitionMetadataKey: 4, ShareGroupMetadataKey: 5}

_KEYS = (ShareGroupCurrentMemberAssignmentKey, ShareGroupTargetAssignmentMemberKey,
         ShareGroupMemberMetadataKey, ShareGroupTargetAssignmentMetadataKey,
         ShareGroupStatePartitionMetadataKey, ShareGroupMetadataKey)
_VALUES = (ShareGroupCurrentMemberAssignmentValue, ShareGroupTargetAssignmentMemberValue,
           ShareGroupMemberMetadataValue, ShareGroupTargetAssignmentMetadataValue,
           ShareGroupStatePartitionMetadataValue, ShareGroupMetadataValue)


@attrs.frozen
class Loaded:
    """What a replay rebuilt of one group: the group, its initialized share-partitions, and the
    facts the log holds for it (the baseline of the next ``changes``)."""

    group: ShareGroup
    initialized: Initialized
    written: Written


def records_of(group: ShareGroup, initialized: Initialized | None = None) -> Written:
    """The group's facts now, as Kafka's records would state them."""
    group_id = group.group_id
    facts: Written = {
        ShareGroupMetadataKey(group_id): ShareGroupMetadataValue(group.group_epoch, 0),
        ShareGroupTargetAssignmentMetadataKey(group_id): ShareGroupTargetAssignmentMetadataValue(
            group.assignment_epoch)}
    for member_id, member in sorted(group.members.items()):
        facts[ShareGroupMemberMetadataKey(group_id, member_id)] = ShareGroupMemberMetadataValue(
            member.rack_id, member.client_id, member.client_host, tuple(member.subscribed_topic_names))
        target = to_topic_partitions(group.target.get(member_id, {}))
        facts[ShareGroupTargetAssignmentMemberKey(group_id, member_id)] = \
            ShareGroupTargetAssignmentMemberValue(target)
        current = to_topic_partitions(member.assignment)
        facts[ShareGroupCurrentMemberAssignmentKey(group_id, member_id)] = \
            ShareGroupCurrentMemberAssignmentValue(member.member_epoch, member.previous_member_epoch,
                                                   STABLE_MEMBER_STATE, current)
    if initialized:
        facts[ShareGroupStatePartitionMetadataKey(group_id)] = ShareGroupStatePartitionMetadataValue(
            initialized_topics=tuple(TopicPartitionsInfo(topic_id, name, tuple(sorted(parts)))
                                     for topic_id, (name, parts) in sorted(initialized.items()) if parts))
    return facts


def changes(written: Mapping[ShareGroupKey, ShareGroupValue], now: Mapping[ShareGroupKey, ShareGroupValue]
            ) -> list[GroupRecord]:
    """The records that take the log from ``written`` to ``now``: changed facts, then tombstones."""
    records = [GroupRecord(key, value) for key, value in now.items() if written.get(key) != value]
    gone = sorted((key for key in written if key not in now), key=lambda key: _TOMBSTONE_ORDER[type(key)])
    records.extend(GroupRecord(key, None) for key in gone)
    return records


def replay(records: Iterable[GroupRecord], session_deadline_ms: int) -> dict[str, Loaded]:
    """The share groups ``records`` (in log order) leave, each member's session running to
    ``session_deadline_ms``. A group whose epoch record is gone (deleted) is not among them."""
    facts: dict[str, Written] = {}
    for record in records:
        key, value = record.key, record.value
        if not isinstance(key, _KEYS) or not (value is None or isinstance(value, _VALUES)):
            continue  # another group type's record
        group_facts = facts.setdefault(key.group_id, {})
        if value is None:
            group_facts.pop(key, None)
        else:
            group_facts[key] = value
    return {group_id: loaded for group_id, written in facts.items()
            if (loaded := _rebuilt(group_id, written, session_deadline_ms)) is not None}


def _rebuilt(group_id: str, written: Written, session_deadline_ms: int) -> Loaded | None:
    epoch = written.get(ShareGroupMetadataKey(group_id))
    if not isinstance(epoch, ShareGroupMetadataValue):
        return None
    group = ShareGroup(group_id, group_epoch=epoch.epoch)
    initialized: Initialized = {}
    for key, value in written.items():
        if isinstance(value, ShareGroupTargetAssignmentMetadataValue):
            group.assignment_epoch = value.assignment_epoch
        elif isinstance(key, ShareGroupMemberMetadataKey) \
                and isinstance(value, ShareGroupMemberMetadataValue):
            member = _member(group, key.member_id)
            member.rack_id, member.client_id = value.rack_id, value.client_id
            member.client_host = value.client_host
            member.subscribed_topic_names = tuple(value.subscribed_topic_names)
        elif isinstance(key, ShareGroupTargetAssignmentMemberKey) \
                and isinstance(value, ShareGroupTargetAssignmentMemberValue):
            group.target[key.member_id] = dict(from_topic_partitions(value.topic_partitions))
        elif isinstance(key, ShareGroupCurrentMemberAssignmentKey) \
                and isinstance(value, ShareGroupCurrentMemberAssignmentValue):
            member = _member(group, key.member_id)
            member.member_epoch = value.member_epoch
            member.previous_member_epoch = value.previous_member_epoch
            member.assignment = dict(from_topic_partitions(value.assigned_partitions))
        elif isinstance(value, ShareGroupStatePartitionMetadataValue):
            for topic in value.initialized_topics:
                name, parts = initialized.get(topic.topic_id, (topic.topic_name, frozenset()))
                initialized[topic.topic_id] = (name, parts | frozenset(topic.partitions))
    # A member needs its metadata (Kafka writes it first); an assignment left without one is a
    # fragment of a member being removed, not a member.
    for member_id in [m for m in group.members if ShareGroupMemberMetadataKey(group_id, m) not in written]:
        del group.members[member_id]
    for member_id in [m for m in group.target if m not in group.members]:
        del group.target[member_id]
    for member in group.members.values():
        member.session_deadline_ms = session_deadline_ms
    group.state = ShareGroupState.STABLE if group.members else ShareGroupState.EMPTY
    return Loaded(group, initialized, dict(written))


def _member(group: ShareGroup, member_id: str) -> ShareMember:
    member = group.members.get(member_id)
    if member is None:
        member = group.members[member_id] = ShareMember(member_id, 0, ())
    return member
