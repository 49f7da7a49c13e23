"""KIP-848's online migration between classic and consumer groups that have members.

Kafka 4.0's coordinator converts a group from one kind to the other while its consumers run,
under the broker's ``group.consumer.migration.policy`` (:class:`MigrationPolicy`):

* **upgrade**: a ConsumerGroupHeartbeat joining a classic group of protocol type ``consumer``
  that has members turns it into a consumer group (:func:`consumer_group_records`). Each classic
  member becomes a member of the consumer group at the classic generation, subscribed to the
  topics of its ConsumerProtocolSubscription and holding the partitions of its last
  ConsumerProtocolAssignment (also its target); the joining member's heartbeat then bumps the
  group epoch, so the classic members are asked to rejoin and get the server-side assignor's
  partitions through JoinGroup/SyncGroup (``ConsumerGroups.classic_join`` and friends).
* **downgrade**: when the last member using ConsumerGroupHeartbeat leaves (or is fenced) and
  only classic members remain, the consumer group becomes a classic group again
  (:func:`classic_group_value`): its members keep their ids and protocols, each with its target
  assignment encoded as a ConsumerProtocolAssignment, and the classic group rebalances at once.

Both are records in ``__consumer_offsets`` written with the operation that caused them: the old
kind's tombstones, then the new kind's records, so a coordinator loading the partition ends with
the kind that was written last.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kafkapy.groups.assignors import Assignment, TopicId
from kafkapy.groups.group import ClassicGroup, Member
from kafkapy.groups.reconciliation import ConsumerMember, MemberState
from kafkapy.groups.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecord,
    to_topic_partitions,
)
from kafkapy.groups.retention import CONSUMER_PROTOCOL_TYPE
from kafkapy.protocol.consumer_protocol import (
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    protocol_version,
)

__all__ = ["MIGRATION_POLICY_KEY", "MigrationPolicy", "UpgradeRefused", "check_upgrade",
           "classic_group_value", "consumer_group_records", "consumer_group_tombstones",
           "member_metadata_record"]

MIGRATION_POLICY_KEY = "group.consumer.migration.policy"


class MigrationPolicy(enum.Enum):
    """Kafka's ConsumerGroupMigrationPolicy: which conversions of non-empty groups are allowed."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @classmethod
    def parse(cls, name: str | None) -> MigrationPolicy:
        """Case-blind, as Kafka's config; the config's validator refuses anything else."""
        return cls((name or cls.DISABLED.value).lower())

    @property
    def upgrade(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


class UpgradeRefused(ValueError):
    """The classic group cannot be converted (why, for the log); the heartbeat is refused with
    GROUP_ID_NOT_FOUND, as Kafka's validateOnlineUpgrade leaves the group classic."""


def check_upgrade(group: ClassicGroup, policy: MigrationPolicy, consumer_max_size: int) -> None:
    """Kafka's validateOnlineUpgrade, in its order."""
    if not policy.upgrade:
        raise UpgradeRefused("the online upgrade is disabled")
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise UpgradeRefused("the group does not use the consumer embedded protocol")
    if len(group.members) > consumer_max_size:
        raise UpgradeRefused("the group size exceeds the consumer group maximum size")


def _classic_metadata(member: Member) -> ClassicMemberMetadata:
    protocols = tuple(ClassicProtocol(name, metadata) for name, metadata in member.protocols)
    return ClassicMemberMetadata(member.session_timeout_ms, protocols)


def consumer_group_records(group: ClassicGroup, topics: Mapping[str, TopicId]) -> list[GroupRecord]:
    """The records that turn a classic group with members into a consumer group (Kafka's
    convertToConsumerGroup): the classic group's tombstone, then per member its metadata, the
    group epoch (the classic generation), each member's target, the assignment epoch, and each
    member's current assignment (Stable at the generation). Partitions of topics that no longer
    exist are left out. UpgradeRefused when a member's subscription or assignment does not parse
    (Kafka: "the embedded consumer protocol is malformed"), which includes the empty assignment of
    a member in the middle of a rebalance: the joining member retries once the group is Stable."""
    group_id, generation = group.group_id, group.generation_id
    members: list[tuple[ConsumerMember, Assignment]] = []
    for member in group.members.values():
        metadata = member.metadata_for(group.protocol_name) if group.protocol_name else b""
        if not metadata and member.protocols:
            metadata = member.protocols[0][1]
        try:
            subscription = decode_subscription(metadata)
            if not member.assignment:  # reset by a rebalance, or never synced: Kafka cannot read it
                raise ConsumerProtocolError(f"member {member.member_id} has no assignment")
            assigned_names = decode_assignment(member.assignment)
        except ConsumerProtocolError as exc:
            raise UpgradeRefused(f"the embedded consumer protocol is malformed: {exc}") from None
        assigned = {topics[name]: parts for name, parts in assigned_names.items() if name in topics}
        members.append((ConsumerMember(
            member.member_id, instance_id=member.group_instance_id, rack_id=subscription.rack_id,
            client_id=member.client_id, client_host=member.client_host,
            subscribed_topic_names=subscription.topics, rebalance_timeout_ms=member.rebalance_timeout_ms,
            member_epoch=generation, previous_member_epoch=generation, state=MemberState.STABLE,
            assigned=assigned, classic=_classic_metadata(member)), assigned))
    records = [GroupRecord(GroupMetadataKey(group_id), None)]
    records += [member_metadata_record(group_id, member) for member, _ in members]
    records.append(GroupRecord(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(generation)))
    records += [GroupRecord(ConsumerGroupTargetAssignmentMemberKey(group_id, member.member_id),
                            ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(target)))
                for member, target in members]
    records.append(GroupRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id),
                               ConsumerGroupTargetAssignmentMetadataValue(generation)))
    records += [GroupRecord(ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id),
                            ConsumerGroupCurrentMemberAssignmentValue(
                                member_epoch=generation, previous_member_epoch=generation,
                                state=int(MemberState.STABLE),
                                assigned_partitions=to_topic_partitions(target)))
                for member, target in members]
    return records


def member_metadata_record(group_id: str, member: ConsumerMember) -> GroupRecord:
    """A member's ConsumerGroupMemberMetadata record (a classic member's with its classic metadata)."""
    return GroupRecord(
        ConsumerGroupMemberMetadataKey(group_id, member.member_id),
        ConsumerGroupMemberMetadataValue(
            instance_id=member.instance_id, rack_id=member.rack_id, client_id=member.client_id,
            client_host=member.client_host, subscribed_topic_names=member.subscribed_topic_names,
            subscribed_topic_regex=member.subscribed_topic_regex,
            rebalance_timeout_ms=member.rebalance_timeout_ms, server_assignor=member.server_assignor,
            classic_member_metadata=member.classic))


def consumer_group_tombstones(group_id: str, member_ids: list[str]) -> list[GroupRecord]:
    """A consumer group's tombstones in Kafka's createGroupTombstoneRecords order: current
    assignments, targets, the assignment epoch, members, subscription metadata, group epoch."""
    return [*(GroupRecord(ConsumerGroupCurrentMemberAssignmentKey(group_id, m), None) for m in member_ids),
            *(GroupRecord(ConsumerGroupTargetAssignmentMemberKey(group_id, m), None) for m in member_ids),
            GroupRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id), None),
            *(GroupRecord(ConsumerGroupMemberMetadataKey(group_id, m), None) for m in member_ids),
            GroupRecord(ConsumerGroupPartitionMetadataKey(group_id), None),
            GroupRecord(ConsumerGroupMetadataKey(group_id), None)]


def classic_group_value(group_id: str, group_epoch: int, members: list[ConsumerMember],
                        targets: Mapping[str, Assignment], topic_names: Mapping[TopicId, str],
                        now_ms: int) -> GroupMetadataValue:
    """The classic group a consumer group of classic members becomes (Kafka's
    ClassicGroup.fromConsumerGroup): generation = the group epoch, protocol type ``consumer``,
    the protocol the members' votes pick, the first member leading, and each member's target
    assignment as a ConsumerProtocolAssignment at its subscription's version."""
    classic = ClassicGroup(group_id, 0, generation_id=group_epoch, protocol_type=CONSUMER_PROTOCOL_TYPE,
                           state_timestamp_ms=now_ms)
    for consumer in members:
        assert consumer.classic is not None
        classic.add(Member(consumer.member_id, consumer.instance_id, consumer.client_id, consumer.client_host,
                           consumer.rebalance_timeout_ms, consumer.classic.session_timeout_ms,
                           CONSUMER_PROTOCOL_TYPE,
                           [(p.name, p.metadata) for p in consumer.classic.supported_protocols]))
    protocol = classic.select_protocol()
    classic.protocol_name = protocol
    for member in classic.members.values():
        target = targets.get(member.member_id, {})
        by_name = {topic_names[t]: parts for t, parts in target.items() if t in topic_names}
        member.assignment = encode_assignment(by_name, protocol_version(member.metadata_for(protocol)))
    return classic.to_record()
