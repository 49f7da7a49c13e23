"""KIP-848 consumer groups, sans I/O: ConsumerGroupHeartbeat in, a response and records out.

Theory of operation. A group has a *group epoch*, bumped whenever its membership or what it
subscribes to changes, and a *target assignment* computed by a server-side assignor at an
*assignment epoch*. A heartbeat does three things, as Kafka's ``GroupMetadataManager`` does:

1. It creates or updates the member (epoch 0 joins; -1 leaves; -2 is a static member's leave that
   keeps its partitions until its session expires, so a restart under the same
   ``group.instance.id`` takes them back without a rebalance). A changed subscription, a new
   member or changed topics bump the group epoch.
2. If the group epoch is past the assignment epoch, the assignor computes a new target for every
   member, sticky to the previous one.
3. The member is reconciled towards its target (:mod:`kafkapy.groups.reconciliation`): revoke
   first, then assign only partitions no one else still holds.

Nothing here mutates state directly: each operation computes the records Kafka would write to
``__consumer_offsets`` (:mod:`kafkapy.groups.records`) and then *replays* them, the same
code that rebuilds groups when a coordinator loads its partition. So a group rebuilt from what was
written equals the group that wrote it, and an operation that fails changes nothing.

Timers are not records: each member has a session deadline (``group.consumer.session.timeout.ms``)
renewed by every heartbeat, and a member asked to revoke has until its rebalance timeout to do so.
:meth:`ConsumerGroups.expire` fences members whose deadline passed; the I/O side calls it at
:meth:`ConsumerGroups.next_deadline`.

Classic members (KIP-848's online migration, :mod:`kafkapy.groups.migration`) live in a group
beside the others: ``classic_join``, ``classic_sync``, ``classic_heartbeat`` and ``classic_leave``
are JoinGroup, SyncGroup, Heartbeat and LeaveGroup for them, going through the same steps as a
heartbeat; when the last member using ConsumerGroupHeartbeat goes, the group's records become a
classic group's (``_downgrade``).
"""

from __future__ import annotations

import base64
import enum
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError, KafkaPyError
from kafkapy.groups.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, Assignment, MemberSpec, TopicId
from kafkapy.groups.group import JoinRequest
from kafkapy.groups.migration import (
    MigrationPolicy,
    classic_group_value,
    consumer_group_tombstones,
    member_metadata_record,
)
from kafkapy.groups.reconciliation import NO_OWNER, ConsumerMember, MemberState, reconcile
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
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupRecord,
    OffsetCommitKey,
    TopicMetadata,
    from_topic_partitions,
    to_topic_partitions,
)
from kafkapy.groups.retention import CONSUMER_PROTOCOL_TYPE
from kafkapy.protocol.consumer_protocol import ConsumerProtocolError, decode_subscription, encode_assignment
from kafkapy.protocol.consumer_protocol import protocol_version as consumer_protocol_version
from kafkapy.server.core import INTERNAL_TOPICS
from kafkapy.server.patterns import PatternError, Regex, compile_re2

__all__ = [
    "INTERNAL_TOPICS",
    "JOIN_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "ConsumerGroup",
    "ConsumerGroupConfig",
    "ConsumerGroups",
    "GroupState",
    "GroupStateError",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "HeartbeatResult",
    "TopicInfo",
]

JOIN_GROUP_MEMBER_EPOCH: Final = 0
LEAVE_GROUP_MEMBER_EPOCH: Final = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH: Final = -2
#: The v1 rule (KIP-1082): the client generates its member id; v0 may leave it empty on join.
CLIENT_GENERATED_MEMBER_ID_VERSION: Final = 1
#: Never matched by a subscription regex: kafkapy's choice, like the classic consumer's
#: ``exclude.internal.topics=true``.


class GroupStateError(KafkaPyError):
    """The group's own bookkeeping broke (two members holding one partition): a bug, never the
    client's fault."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


class GroupState(enum.Enum):
    """Kafka's ``ConsumerGroup.ConsumerGroupState``, the names ConsumerGroupDescribe reports."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@attrs.frozen
class TopicInfo:
    topic_id: TopicId
    partitions: int


@attrs.frozen
class ConsumerGroupConfig:
    """Kafka 4.0's broker defaults."""

    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    max_size: int = 2**31 - 1  # group.consumer.max.size
    assignors: tuple[str, ...] = tuple(ASSIGNORS)  # group.consumer.assignors; the first is the default
    migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL  # group.consumer.migration.policy
    classic_max_size: int = 2**31 - 1  # group.max.size: a downgrade past it is not made


@attrs.frozen
class HeartbeatRequest:
    """ConsumerGroupHeartbeatRequest's fields (``None`` = unchanged since the last heartbeat), plus
    who sent it and at which version."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: Assignment | None = attrs.field(default=None, hash=False)
    client_id: str = ""
    client_host: str = ""
    api_version: int = CLIENT_GENERATED_MEMBER_ID_VERSION


@attrs.frozen
class HeartbeatResponse:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = attrs.field(default=None, hash=False)


@attrs.frozen
class HeartbeatResult:
    response: HeartbeatResponse
    records: tuple[GroupRecord, ...]


@attrs.frozen
class ClassicJoinAnswer:
    member_id: str
    generation_id: int = -1  # the member epoch
    protocol_name: str | None = None
    member_id_required: bool = False  # KIP-394: come back with this member id


def _invalid(message: str) -> KafkaApiError:
    return KafkaApiError(ErrorCode.INVALID_REQUEST, message)


def kafka_member_id() -> str:
    """A new member id the way Kafka's ``Uuid.randomUuid().toString()`` prints one: URL-safe
    base64 of 16 random bytes, unpadded."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ConsumerGroup:
    """One group's state, changed only by :meth:`apply` (a record at a time)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.targets: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self._holders: dict[tuple[TopicId, int], tuple[str, int]] = {}

    @property
    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return GroupState.RECONCILING
        return GroupState.STABLE

    def copy(self) -> ConsumerGroup:
        """An independent copy (members and targets are immutable values, so the maps suffice)."""
        clone = ConsumerGroup(self.group_id)
        clone.group_epoch, clone.assignment_epoch = self.group_epoch, self.assignment_epoch
        clone.members, clone.targets = dict(self.members), dict(self.targets)
        clone.subscription_metadata, clone._holders = dict(self.subscription_metadata), dict(self._holders)
        return clone

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def partition_epoch(self, topic: TopicId, partition: int) -> int:
        """The epoch of the member holding the partition (assigned or pending revocation), or
        NO_OWNER."""
        holder = self._holders.get((topic, partition))
        return NO_OWNER if holder is None else holder[1]

    def holder(self, topic: TopicId, partition: int) -> str | None:
        holder = self._holders.get((topic, partition))
        return None if holder is None else holder[0]

    def target_of(self, member_id: str) -> Assignment:
        return self.targets.get(member_id, {})

    # -- classic members (KIP-848's migration) ----------------------------------------------------

    def supports_classic_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Kafka's ``supportsClassicProtocols``: a classic member may join if its protocol type
        is ``consumer`` and one of its protocols is offered by every classic member already in."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE:
            return False
        offered = set(names)
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        if not self.members:
            return bool(offered)
        for metadata in classic:
            offered &= {p.name for p in metadata.supported_protocols}
        return bool(offered)

    def all_classic_except(self, member_id: str) -> bool:
        """Kafka's ``allMembersUseClassicProtocolExcept``: ``member_id`` is the last member using
        ConsumerGroupHeartbeat."""
        member = self.members.get(member_id)
        return member is not None and not member.uses_classic_protocol and all(
            m.uses_classic_protocol for m_id, m in self.members.items() if m_id != member_id)

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Kafka's ``waitingOnUnreleasedPartition``: some partition of the member's target that it
        lacks is still held by another member."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        return any(p not in member.assigned.get(topic, frozenset())
                   and self.partition_epoch(topic, p) != NO_OWNER
                   for topic, parts in self.target_of(member.member_id).items() for p in parts)

    def apply(self, key: object, value: object) -> None:
        """Replay one record of this group (Kafka's ``GroupMetadataManager.replay``)."""
        if isinstance(key, ConsumerGroupMetadataKey):
            if isinstance(value, ConsumerGroupMetadataValue):
                self.group_epoch = value.epoch
        elif isinstance(key, ConsumerGroupPartitionMetadataKey):
            topics = value.topics if isinstance(value, ConsumerGroupPartitionMetadataValue) else ()
            self.subscription_metadata = {t.topic_name: t for t in topics}
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            self._apply_member_metadata(key.member_id, value)
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
                self.assignment_epoch = value.assignment_epoch
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
                self.targets[key.member_id] = from_topic_partitions(value.topic_partitions)
            else:
                self.targets.pop(key.member_id, None)
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
            self._apply_current_assignment(key.member_id, value)

    def _apply_member_metadata(self, member_id: str, value: object) -> None:
        if not isinstance(value, ConsumerGroupMemberMetadataValue):
            self._release(member_id)
            self.members.pop(member_id, None)
            return
        member = self.members.get(member_id) or ConsumerMember(member_id)
        self.members[member_id] = attrs.evolve(
            member, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
            client_host=value.client_host, subscribed_topic_names=value.subscribed_topic_names,
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms, server_assignor=value.server_assignor,
            classic=value.classic_member_metadata)

    def _apply_current_assignment(self, member_id: str, value: object) -> None:
        member = self.members.get(member_id) or ConsumerMember(member_id)
        self._release(member_id)
        if isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
            member = attrs.evolve(
                member, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                state=MemberState(value.state), assigned=from_topic_partitions(value.assigned_partitions),
                pending_revocation=from_topic_partitions(value.partitions_pending_revocation))
        else:
            member = attrs.evolve(member, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                  previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                  state=MemberState.STABLE, assigned={}, pending_revocation={})
        self.members[member_id] = member
        for held in (member.assigned, member.pending_revocation):
            for topic, parts in held.items():
                for p in parts:
                    other = self._holders.get((topic, p))
                    if other is not None and other[0] != member_id:
                        raise GroupStateError(f"partition {topic}-{p} of group {self.group_id} is held by "
                                              f"{other[0]} and would be given to {member_id}")
                    self._holders[(topic, p)] = (member_id, member.member_epoch)

    def _release(self, member_id: str) -> None:
        for tp in [tp for tp, (who, _) in self._holders.items() if who == member_id]:
            del self._holders[tp]


#: A group's deadlines as ``ConsumerGroups.timers_of`` saves them: session, rebalance (with the
#: epoch), join and sync, each member id -> deadline.
SavedTimers = tuple[dict[str, int], dict[str, tuple[int, int]], dict[str, int], dict[str, int]]


class _Timers:
    """Per group, each member's session deadline and, while it is asked to revoke, its rebalance
    deadline with the epoch it was asked at. A classic member of the group (KIP-848's migration)
    has no rebalance deadline but a join deadline, once told to rejoin, and a sync deadline, once
    it joined (Kafka's consumerGroupJoinKey and consumerGroupSyncKey timers)."""

    def __init__(self) -> None:
        self.session: dict[str, dict[str, int]] = {}
        self.rebalance: dict[str, dict[str, tuple[int, int]]] = {}
        self.join: dict[str, dict[str, int]] = {}
        self.sync: dict[str, dict[str, int]] = {}

    def all(self) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, tuple[int, int]]],
                           dict[str, dict[str, int]], dict[str, dict[str, int]]]:
        return self.session, self.rebalance, self.join, self.sync

    def renew_session(self, group_id: str, member_id: str, deadline: int) -> None:
        self.session.setdefault(group_id, {})[member_id] = deadline

    def start_rebalance(self, group_id: str, member_id: str, deadline: int, epoch: int) -> None:
        self.rebalance.setdefault(group_id, {})[member_id] = (deadline, epoch)

    def stop_rebalance(self, group_id: str, member_id: str) -> None:
        self.rebalance.get(group_id, {}).pop(member_id, None)

    def start_join(self, group_id: str, member_id: str, deadline: int) -> None:
        """Only if none runs (Kafka's scheduleIfAbsent): repeated heartbeats do not push it back."""
        self.join.setdefault(group_id, {}).setdefault(member_id, deadline)

    def start_sync(self, group_id: str, member_id: str, deadline: int) -> None:
        self.sync.setdefault(group_id, {})[member_id] = deadline

    def stop(self, timers: dict[str, dict[str, int]], group_id: str, member_id: str) -> None:
        timers.get(group_id, {}).pop(member_id, None)

    def cancel(self, group_id: str, member_id: str) -> None:
        self.session.get(group_id, {}).pop(member_id, None)
        self.stop_rebalance(group_id, member_id)
        self.stop(self.join, group_id, member_id)
        self.stop(self.sync, group_id, member_id)

    def cancel_group(self, group_id: str) -> None:
        for timers in self.all():
            timers.pop(group_id, None)

    def earliest(self) -> int | None:
        sessions = (d for members in self.session.values() for d in members.values())
        rebalances = (d for members in self.rebalance.values() for d, _ in members.values())
        joins = (d for kind in (self.join, self.sync) for members in kind.values() for d in members.values())
        return min((*sessions, *rebalances, *joins), default=None)


class ConsumerGroups:
    """The consumer groups of one coordinator: heartbeats, leaves, timeouts, describe, replay."""

    def __init__(self, topics: Callable[[], Mapping[str, TopicInfo]],
                 config: ConsumerGroupConfig | None = None,
                 new_member_id: Callable[[], str] = kafka_member_id,
                 overrides: Callable[[str], tuple[int, int] | None] | None = None,
                 wall_ms: Callable[[], int] = lambda: 0) -> None:
        self.config = config or ConsumerGroupConfig()
        self._wall_ms = wall_ms  # epoch ms, for the state timestamp of a group downgraded to classic
        # A group's own (session timeout, heartbeat interval), from its GROUP config resource.
        self._overrides = overrides
        self._topics = topics
        self._new_member_id = new_member_id
        self.groups: dict[str, ConsumerGroup] = {}
        self._timers = _Timers()

    def timeouts(self, group_id: str) -> tuple[int, int]:
        """The group's (session timeout, heartbeat interval): its own when it sets them, else the
        broker's (Kafka's GroupConfigManager, asked at each heartbeat)."""
        own = self._overrides(group_id) if self._overrides is not None else None
        return own if own is not None else (self.config.session_timeout_ms, self.config.heartbeat_interval_ms)

    def clear(self) -> None:
        """Every group and member deadline gone (a broker reset: the log is emptied too)."""
        self.groups.clear()
        self._timers = _Timers()

    # -- replay ---------------------------------------------------------------------------------

    def replay(self, record: GroupRecord) -> None:
        """Apply one record; a group appears with its first record and goes with its metadata
        tombstone. Classic groups' records and offsets are the classic coordinator's."""
        if isinstance(record.key, (OffsetCommitKey, GroupMetadataKey)):
            return
        group_id = record.key.group_id
        if isinstance(record.key, ConsumerGroupMetadataKey) and record.value is None:
            self.groups.pop(group_id, None)
            return
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ConsumerGroup(group_id)
        group.apply(record.key, record.value)

    def load(self, records: Iterable[GroupRecord], now_ms: int) -> None:
        """Rebuild from a partition's records, giving every member of its groups a fresh session
        (the groups of partitions loaded before keep theirs), and a member that was asked to
        revoke a fresh rebalance timeout at its epoch (Kafka's ``onLoaded``): without it, a member
        that heartbeats but never lets go would hold its partitions from the others for ever."""
        loaded: set[str] = set()
        for record in records:
            self.replay(record)
            if not isinstance(record.key, (OffsetCommitKey, GroupMetadataKey)):
                loaded.add(record.key.group_id)
        for group_id in sorted(loaded):
            group = self.groups.get(group_id)
            for member_id, member in group.members.items() if group is not None else ():
                self._timers.renew_session(group_id, member_id, now_ms + self.timeouts(group_id)[0])
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._timers.start_rebalance(group_id, member_id, now_ms + member.rebalance_timeout_ms,
                                                 member.member_epoch)

    def _commit(self, records: Sequence[GroupRecord]) -> tuple[GroupRecord, ...]:
        for record in records:
            self.replay(record)
        return tuple(records)

    # -- heartbeat ------------------------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest, now_ms: int,
                  upgrade: Sequence[GroupRecord] = ()) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat. Raises KafkaApiError with Kafka's code for every refusal,
        having changed nothing. ``upgrade``: the records that turn a classic group with members
        into this consumer group (``migration.consumer_group_records``), replayed first and
        written with the heartbeat's own; the converted members' sessions start now, at their
        classic session timeouts."""
        if not upgrade:
            return self._heartbeat(request, now_ms)
        self.validate(request)
        self._commit(upgrade)
        group_id = request.group_id
        try:
            result = self._heartbeat(request, now_ms)
        except KafkaApiError:
            self.groups.pop(group_id, None)
            self._timers.cancel_group(group_id)
            raise
        group = self.groups.get(group_id)
        for member in group.members.values() if group is not None else ():
            if member.classic is not None:
                deadline = now_ms + member.classic.session_timeout_ms
                self._timers.renew_session(group_id, member.member_id, deadline)
        return HeartbeatResult(result.response, (*upgrade, *result.records))

    def _heartbeat(self, request: HeartbeatRequest, now_ms: int) -> HeartbeatResult:
        self.validate(request)
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(request)
        joining = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self.groups.get(request.group_id)
        if group is None:
            if not joining:
                # Kafka's getOrMaybeCreateConsumerGroup words it so; a leave's lookup says "Group".
                raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND,
                                    f"Consumer group {request.group_id} not found.")
            group = ConsumerGroup(request.group_id)
        member_id = request.member_id or self._new_member_id()
        if len(group.members) >= self.config.max_size and member_id not in group.members:
            raise KafkaApiError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its "
                                f"maximum capacity of {self.config.max_size} members.")
        records: list[GroupRecord] = []
        member, replaced = self._member_for(group, request, member_id, records)
        is_new = member_id not in group.members and replaced is None

        updated = _updated_member(member, request)
        if updated.subscribed_topic_regex != member.subscribed_topic_regex and updated.subscribed_topic_regex:
            _compile_regex(updated.subscribed_topic_regex)
        reconciled, changed = self._update_and_reconcile(group, member, updated, replaced, is_new,
                                                         request.topic_partitions, records)
        committed = self._commit(records)

        if replaced is not None:
            self._timers.cancel(group.group_id, replaced)
        session_timeout_ms, heartbeat_interval_ms = self.timeouts(group.group_id)
        self._timers.renew_session(group.group_id, member_id, now_ms + session_timeout_ms)
        if changed:
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                deadline = now_ms + reconciled.rebalance_timeout_ms
                self._timers.start_rebalance(group.group_id, member_id, deadline, reconciled.member_epoch)
            else:
                self._timers.stop_rebalance(group.group_id, member_id)

        # A full heartbeat (every optional field set, as after an error) always gets the assignment.
        full_request = joining or (request.rebalance_timeout_ms != -1 and request.topic_partitions is not None
                                   and request.subscribed_topic_names is not None)
        send_assignment = full_request or reconciled.assigned != member.assigned
        return HeartbeatResult(
            HeartbeatResponse(member_id, reconciled.member_epoch, heartbeat_interval_ms,
                              reconciled.assigned if send_assignment else None),
            committed)

    def _update_and_reconcile(self, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
                              replaced: str | None, is_new: bool, owned: Assignment | None,
                              records: list[GroupRecord]) -> tuple[ConsumerMember, bool]:
        """Steps 1-3 of a heartbeat or a classic member's JoinGroup (Kafka's, in its order): the
        member's record when it changed, the group epoch bumped for a new member or a changed
        subscription, a new target assignment when the epoch moved past it, then the member's
        reconciliation towards its target. Appends the records; answers the reconciled member and
        whether its assignment state changed."""
        member_id = updated.member_id
        bump = is_new
        if updated != member:
            records.append(member_metadata_record(group.group_id, updated))
            bump = bump or (updated.subscribed_topic_names != member.subscribed_topic_names
                            or updated.subscribed_topic_regex != member.subscribed_topic_regex)

        others = {m: v for m, v in group.members.items() if m != member_id and m != replaced}
        members = {**others, member_id: updated}
        metadata = self._subscription_metadata(members.values())
        if metadata != group.subscription_metadata:
            records.append(_partition_metadata_record(group.group_id, metadata))
            bump = True
        group_epoch = group.group_epoch + 1 if bump else group.group_epoch
        if bump:
            records.append(GroupRecord(ConsumerGroupMetadataKey(group.group_id),
                                               ConsumerGroupMetadataValue(group_epoch)))

        targets = {m: group.target_of(m) for m in members}
        if replaced is not None:
            targets[member_id] = group.target_of(replaced)
        assignment_epoch = group.assignment_epoch
        if group_epoch > assignment_epoch:
            new_targets = self._assign(members, targets, metadata)
            for m, target in sorted(new_targets.items()):
                if target != targets.get(m) or m not in group.targets:
                    records.append(_target_record(group.group_id, m, target))
            targets, assignment_epoch = new_targets, group_epoch
            records.append(GroupRecord(ConsumerGroupTargetAssignmentMetadataKey(group.group_id),
                                               ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch)))

        reconciled = reconcile(updated, assignment_epoch, targets.get(member_id, {}), group.partition_epoch,
                               owned)
        changed = _assignment_state(reconciled) != _assignment_state(updated) or is_new
        if changed:
            records.append(_current_assignment_record(group.group_id, reconciled))
        return reconciled, changed

    def validate(self, request: HeartbeatRequest) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``, message for message; it
        looks at no group, so a caller may ask before it changes anything for the heartbeat."""
        epoch = request.member_epoch
        if (request.api_version >= CLIENT_GENERATED_MEMBER_ID_VERSION or epoch > 0
                or epoch == LEAVE_GROUP_MEMBER_EPOCH) and request.member_id == "":
            raise _invalid("MemberId can't be empty.")
        if request.group_id == "":
            raise _invalid("GroupId can't be empty.")
        if request.instance_id == "":
            raise _invalid("InstanceId can't be empty.")
        if request.rack_id == "":
            raise _invalid("RackId can't be empty.")
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            if request.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.topic_partitions is None or request.topic_partitions:
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                raise _invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                               "(re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if request.instance_id is None:
                raise _invalid("InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _invalid("MemberEpoch is invalid.")
        if request.server_assignor is not None and request.server_assignor not in self.config.assignors:
            raise KafkaApiError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {request.server_assignor} "
                                f"is not supported. Supported assignors: {', '.join(self.config.assignors)}.")

    def _member_for(self, group: ConsumerGroup, request: HeartbeatRequest, member_id: str,
                    records: list[GroupRecord]) -> tuple[ConsumerMember, str | None]:
        """The member this heartbeat speaks for, and the id of the static member it replaces."""
        joining = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        if request.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID,
                                        f"Member {member_id} is not a member of group {group.group_id}.")
                return ConsumerMember(member_id), None
            if not joining:
                _check_epoch(member, request.member_epoch, request.topic_partitions)
            return member, None
        existing = group.static_member(request.instance_id)
        if joining:
            if existing is None:
                return group.members.get(member_id) or ConsumerMember(member_id), None
            # A classic member's instance is taken over at once (it may be switching protocols).
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and existing.classic is None:
                raise KafkaApiError(ErrorCode.UNRELEASED_INSTANCE_ID, f"Static member {member_id} with "
                                    f"instance id {request.instance_id} cannot join the group because the "
                                    f"instance id is owned by {existing.member_id} member.")
            # The instance comes back: a copy under the new id inherits its partitions and target.
            replacement = attrs.evolve(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            if existing.member_id != member_id:
                records.extend(_removal_records(group.group_id, existing.member_id))
                records.append(member_metadata_record(group.group_id, replacement))
                records.append(_target_record(group.group_id, member_id, group.target_of(existing.member_id)))
            records.append(_current_assignment_record(group.group_id, replacement))
            return replacement, existing.member_id if existing.member_id != member_id else None
        if existing is None:
            raise _unknown_instance(request.instance_id)
        if existing.member_id != member_id:
            raise _fenced_instance(member_id, request.instance_id, existing.member_id)
        _check_epoch(existing, request.member_epoch, request.topic_partitions)
        return existing, None

    def _leave(self, request: HeartbeatRequest) -> HeartbeatResult:
        group = self.groups.get(request.group_id)
        if group is None:
            raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} not found.")
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID,
                                    f"Member {request.member_id} is not a member of group {group.group_id}.")
        else:
            static = group.static_member(request.instance_id)
            if static is None:
                raise _unknown_instance(request.instance_id)
            if static.member_id != request.member_id:
                raise _fenced_instance(request.member_id, request.instance_id, static.member_id)
            member = static
            if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Keeps its partitions (and its target) until its session expires or it returns.
                leaving = attrs.evolve(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                       pending_revocation={})
                records = self._commit([_current_assignment_record(group.group_id, leaving)])
                return HeartbeatResult(HeartbeatResponse(member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH),
                                       records)
        records = self._fence(group, member.member_id)
        return HeartbeatResult(HeartbeatResponse(member.member_id, request.member_epoch), records)

    def _fence(self, group: ConsumerGroup, member_id: str) -> tuple[GroupRecord, ...]:
        """Remove a member and bump the group epoch; the next heartbeat of anyone reassigns. When
        it is the last member using ConsumerGroupHeartbeat and classic members remain, the group
        becomes a classic group instead (the online downgrade), if the policy allows."""
        if self._downgrade_allowed(group, member_id):
            return self._downgrade(group, member_id)
        records = _removal_records(group.group_id, member_id)
        remaining = [m for m_id, m in group.members.items() if m_id != member_id]
        metadata = self._subscription_metadata(remaining)
        if metadata != group.subscription_metadata:
            records.append(_partition_metadata_record(group.group_id, metadata))
        records.append(GroupRecord(ConsumerGroupMetadataKey(group.group_id),
                                           ConsumerGroupMetadataValue(group.group_epoch + 1)))
        self._timers.cancel(group.group_id, member_id)
        return self._commit(records)

    def _downgrade_allowed(self, group: ConsumerGroup, leaving: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember, in its order."""
        return (group.all_classic_except(leaving) and len(group.members) > 1
                and self.config.migration_policy.downgrade
                and len(group.members) - 1 <= self.config.classic_max_size)

    def _replacement_downgrade_allowed(self, group: ConsumerGroup, replaced: str) -> bool:
        """Kafka's validateOnlineDowngradeWithReplacedMemberId, in its order."""
        return (group.all_classic_except(replaced) and self.config.migration_policy.downgrade
                and len(group.members) <= self.config.classic_max_size)

    def _downgrade(self, group: ConsumerGroup, leaving: str) -> tuple[GroupRecord, ...]:
        """The consumer group's tombstones, then the classic group it becomes (Kafka's
        convertToClassicGroup): the caller hands that GroupMetadata record to the classic
        coordinator once it is written, which rebalances the group."""
        remaining = [m for m_id, m in group.members.items() if m_id != leaving]
        value = classic_group_value(group.group_id, group.group_epoch, remaining, group.targets,
                                    self.topic_names(), self._wall_ms())
        records = consumer_group_tombstones(group.group_id, list(group.members))
        records.append(GroupRecord(GroupMetadataKey(group.group_id), value))
        self._timers.cancel_group(group.group_id)
        return self._commit(records)

    # -- classic members in a consumer group (KIP-848's migration) ------------------------------

    def classic_join(self, request: JoinRequest, now_ms: int
                     ) -> tuple[ClassicJoinAnswer, tuple[GroupRecord, ...]]:
        """A JoinGroup for a consumer group with members (Kafka's classicGroupJoinToConsumerGroup):
        the member joins or updates itself as a consumer-group member from its ConsumerProtocol
        subscription, the group epoch moves as a heartbeat's would, and the member is reconciled
        towards its target with the partitions the subscription says it still owns (none for an
        eager client, which revoked everything before rejoining). The answer's generation is the
        member's epoch; its assignment comes with SyncGroup."""
        group = self._non_empty(request.group_id)
        unknown = request.member_id == ""
        member_id = request.member_id or self._new_member_id()
        if len(group.members) >= self.config.max_size and (unknown or member_id not in group.members):
            raise KafkaApiError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its "
                                f"maximum capacity of {self.config.max_size} members.")
        if not group.supports_classic_protocols(request.protocol_type, (n for n, _ in request.protocols)):
            raise KafkaApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                f"Member {member_id}'s protocols are not supported.")
        if unknown and request.require_known_member_id and request.group_instance_id is None:
            return ClassicJoinAnswer(member_id, member_id_required=True), ()
        records: list[GroupRecord] = []
        member, replaced = self._classic_joiner(group, request, member_id, unknown, records)
        is_new = member_id not in group.members and replaced is None
        try:
            subscription = decode_subscription(request.protocols[0][1])
        except ConsumerProtocolError as exc:
            raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "Malformed embedded consumer protocol in "
                                f"subscription deserialization: {exc}.") from None
        topics = self._topics()
        owned = {topics[name].topic_id: parts for name, parts in subscription.owned.items() if name in topics}
        updated = attrs.evolve(
            member,
            instance_id=(request.group_instance_id if request.group_instance_id is not None
                         else member.instance_id),
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(member.rebalance_timeout_ms if request.rebalance_timeout_ms == -1
                                  else request.rebalance_timeout_ms),
            subscribed_topic_names=_same_topics(member.subscribed_topic_names, subscription.topics),
            client_id=request.client_id,
            client_host=request.client_host,
            classic=ClassicMemberMetadata(request.session_timeout_ms,
                                          tuple(ClassicProtocol(n, m) for n, m in request.protocols)))
        reconciled, _ = self._update_and_reconcile(group, member, updated, replaced, is_new, owned, records)
        group_id = group.group_id
        instance_id = request.group_instance_id
        static = group.static_member(instance_id) if instance_id is not None else None
        if static is not None and self._replacement_downgrade_allowed(group, static.member_id):
            # The static member that was the last to use ConsumerGroupHeartbeat comes back with
            # JoinGroup: the group becomes classic, the newcomer in its place with its partitions.
            remaining = [m for m_id, m in group.members.items() if m_id != static.member_id]
            targets = {**group.targets, member_id: group.target_of(static.member_id)}
            value = classic_group_value(group_id, group.group_epoch, [*remaining, reconciled], targets,
                                        self.topic_names(), self._wall_ms())
            ids = [member_id if m == static.member_id else m for m in group.members]
            records += consumer_group_tombstones(group_id, ids)
            records.append(GroupRecord(GroupMetadataKey(group_id), value))
            self._timers.cancel_group(group_id)
            return (ClassicJoinAnswer(member_id, reconciled.member_epoch, request.protocols[0][0]),
                    self._commit(records))
        committed = self._commit(records)
        if replaced is not None:
            self._timers.cancel(group_id, replaced)
        self._timers.stop(self._timers.join, group_id, member_id)
        self._timers.renew_session(group_id, member_id, now_ms + request.session_timeout_ms)
        self._timers.start_sync(group_id, member_id, now_ms + reconciled.rebalance_timeout_ms)
        return ClassicJoinAnswer(member_id, reconciled.member_epoch, request.protocols[0][0]), committed

    def _classic_joiner(self, group: ConsumerGroup, request: JoinRequest, member_id: str,
                        unknown: bool, records: list[GroupRecord]) -> tuple[ConsumerMember, str | None]:
        """The member a JoinGroup speaks for, and the static member it replaces: a static member
        joining without a member id takes over its instance's partitions and target under the new
        id, whatever protocol the old one used (Kafka's getOrMaybeSubscribeStaticConsumerGroupMember)."""
        if request.group_instance_id is None:
            return group.members.get(member_id) or ConsumerMember(member_id), None
        existing = group.static_member(request.group_instance_id)
        if existing is None:
            if not unknown:
                raise _unknown_instance(request.group_instance_id)
            return group.members.get(member_id) or ConsumerMember(member_id), None
        if not unknown:
            if existing.member_id != member_id:
                raise _fenced_instance(member_id, request.group_instance_id, existing.member_id)
            return existing, None
        replacement = attrs.evolve(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        records.extend(_removal_records(group.group_id, existing.member_id))
        records.append(member_metadata_record(group.group_id, replacement))
        records.append(_target_record(group.group_id, member_id, group.target_of(existing.member_id)))
        records.append(_current_assignment_record(group.group_id, replacement))
        return replacement, existing.member_id

    def classic_sync(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                     protocol_type: str | None, protocol_name: str | None, now_ms: int) -> bytes:
        """A classic member's SyncGroup (Kafka's classicGroupSyncToConsumerGroup): its assigned
        partitions as a ConsumerProtocolAssignment, at its subscription's version; REBALANCE_IN_PROGRESS
        when the group moved on since it joined (it must join again, within its rebalance timeout)."""
        group = self._non_empty(group_id)
        member = self._classic_member(group, member_id, instance_id)
        assert member.classic is not None
        _check_generation(member, generation_id)
        first = member.classic.supported_protocols[0]
        if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise KafkaApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"The protocol type {protocol_type} "
                                f"from member {member.member_id} request is not equal to the group protocol "
                                f"type {CONSUMER_PROTOCOL_TYPE}.")
        if protocol_name is not None and protocol_name != first.name:
            raise KafkaApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"The protocol name {protocol_name} "
                                f"from member {member.member_id} request is not equal to the protocol name "
                                f"{first.name} returned in the join response.")
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._timers.start_join(group_id, member.member_id, now_ms + member.rebalance_timeout_ms)
            raise KafkaApiError(ErrorCode.REBALANCE_IN_PROGRESS, f"A new rebalance is triggered in group "
                                f"{group_id} and member {member.member_id} should rejoin to catch up.")
        self._timers.stop(self._timers.sync, group_id, member.member_id)
        self._timers.renew_session(group_id, member.member_id, now_ms + member.classic.session_timeout_ms)
        names = self.topic_names()
        by_name = {names[t]: parts for t, parts in member.assigned.items() if t in names}
        return encode_assignment(by_name, consumer_protocol_version(first.metadata))

    def classic_heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                          now_ms: int) -> ErrorCode:
        """A classic member's Heartbeat (Kafka's classicGroupHeartbeatToConsumerGroup): its session
        goes on; REBALANCE_IN_PROGRESS, with a join deadline, when it must rejoin: the group epoch
        moved past it, it must revoke partitions, or partitions it waits for were released."""
        group = self._non_empty(group_id)
        member = self._classic_member(group, member_id, instance_id)
        assert member.classic is not None
        _check_generation(member, generation_id)
        self._timers.renew_session(group_id, member.member_id, now_ms + member.classic.session_timeout_ms)
        state = member.state
        released = state is MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased(member)
        if member.member_epoch < group.group_epoch or state is MemberState.UNREVOKED_PARTITIONS or released:
            self._timers.start_join(group_id, member.member_id, now_ms + member.rebalance_timeout_ms)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def classic_leave(self, group_id: str, leaving: Sequence[tuple[str, str | None]]
                      ) -> tuple[list[tuple[str, ErrorCode]], tuple[GroupRecord, ...]]:
        """A LeaveGroup for classic members of a consumer group (Kafka's
        classicGroupLeaveToConsumerGroup): per member its id and NONE, or why not; those that
        left are removed and the group epoch bumped once."""
        group = self._non_empty(group_id)
        answers: list[tuple[str, ErrorCode]] = []
        gone: list[str] = []
        records: list[GroupRecord] = []
        for member_id, instance_id in leaving:
            try:
                if instance_id is None:
                    member = self._classic_member(group, member_id, None)
                else:
                    static = group.static_member(instance_id)
                    if static is None:
                        raise _unknown_instance(instance_id)
                    if member_id and static.member_id != member_id:  # an admin names the instance only
                        raise _fenced_instance(member_id, instance_id, static.member_id)
                    member = self._classic_member(group, static.member_id, None)
            except KafkaApiError as refusal:
                answers.append((member_id, ErrorCode(refusal.code)))
                continue
            records.extend(_removal_records(group_id, member.member_id))
            self._timers.cancel(group_id, member.member_id)
            gone.append(member.member_id)
            answers.append((member.member_id, ErrorCode.NONE))
        if records:
            metadata = self._subscription_metadata(m for m_id, m in group.members.items() if m_id not in gone)
            if metadata != group.subscription_metadata:
                records.append(_partition_metadata_record(group_id, metadata))
            records.append(GroupRecord(ConsumerGroupMetadataKey(group_id),
                                       ConsumerGroupMetadataValue(group.group_epoch + 1)))
        return answers, self._commit(records)

    def _non_empty(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None or not group.members:
            raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {group_id} not found.")
        return group

    @staticmethod
    def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember, then throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID,
                                    f"Member {member_id} is not a member of group {group.group_id}.")
        else:
            static = group.static_member(instance_id)
            if static is None:
                raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member with instance id {instance_id} "
                                    f"is not a member of group {group.group_id}.")
            if static.member_id != member_id:
                raise _fenced_instance(member_id, instance_id, static.member_id)
            member = static
        if member.classic is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID,
                                f"Member {member.member_id} does not use the classic protocol.")
        return member

    # -- timers ---------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self._timers.earliest()

    def expire(self, now_ms: int) -> tuple[GroupRecord, ...]:
        """Fence every member whose session expired, or who did not revoke within its rebalance
        timeout (only if it is still at the epoch it was asked at)."""
        return tuple(record for group_id in self.timed_groups()
                     for record in self.expire_group(group_id, now_ms))

    def end_session(self, group_id: str, member_id: str, now_ms: int) -> None:
        """The member's session deadline is now: the next ``expire`` fences it (a test's fault)."""
        self._timers.renew_session(group_id, member_id, now_ms)

    def timers_of(self, group_id: str) -> SavedTimers:
        """A copy of the group's deadlines, to put back if the records an ``expire_group`` (or a
        heartbeat) wrote could not be made durable."""
        session, rebalance, join, sync = self._timers.all()
        return (dict(session.get(group_id, {})), dict(rebalance.get(group_id, {})),
                dict(join.get(group_id, {})), dict(sync.get(group_id, {})))

    def restore_timers(self, group_id: str, saved: SavedTimers) -> None:
        """The group's deadlines as ``timers_of`` saved them."""
        self._timers.cancel_group(group_id)
        session, rebalance, join, sync = saved
        if session:
            self._timers.session[group_id] = dict(session)
        if rebalance:
            self._timers.rebalance[group_id] = dict(rebalance)
        if join:
            self._timers.join[group_id] = dict(join)
        if sync:
            self._timers.sync[group_id] = dict(sync)

    def retry_expiry(self, group_id: str, saved: SavedTimers, now_ms: int, backoff_ms: int) -> None:
        """Put back the deadlines ``timers_of`` saved; those that had passed fire again
        ``backoff_ms`` from now (Kafka's coordinator timers retry a failed write so)."""
        def again(deadline: int) -> int:
            return deadline if deadline > now_ms else now_ms + backoff_ms

        session, rebalance, join, sync = saved
        for member_id, deadline in session.items():
            self._timers.renew_session(group_id, member_id, again(deadline))
        for member_id, (deadline, epoch) in rebalance.items():
            self._timers.start_rebalance(group_id, member_id, again(deadline), epoch)
        for member_id, deadline in join.items():
            self._timers.start_join(group_id, member_id, again(deadline))
        for member_id, deadline in sync.items():
            self._timers.start_sync(group_id, member_id, again(deadline))

    def timed_groups(self) -> list[str]:
        """The groups with a member whose session, rebalance, join or sync timeout runs."""
        return sorted(set().union(*(timers.keys() for timers in self._timers.all())))

    def expire_group(self, group_id: str, now_ms: int) -> tuple[GroupRecord, ...]:
        """Fence each member whose deadline passed, one at a time: a fencing may turn the group
        into a classic group (the online downgrade), after which nothing more is fenced here."""
        records: list[GroupRecord] = []
        while (group := self.groups.get(group_id)) is not None:
            late = self._late_member(group, now_ms)
            if late is None:
                break
            records.extend(self._fence(group, late))
        if group is None:
            self._timers.cancel_group(group_id)
        for timers in self._timers.all():
            if not timers.get(group_id, True):
                del timers[group_id]
        return tuple(records)

    def _late_member(self, group: ConsumerGroup, now_ms: int) -> str | None:
        """The first member (by id) past a deadline that fences it; deadlines of members that are
        gone, or of a revocation the member has since completed, are dropped on the way."""
        group_id = group.group_id
        for member_id, deadline in sorted(self._timers.session.get(group_id, {}).items()):
            if member_id not in group.members:
                self._timers.cancel(group_id, member_id)
            elif deadline <= now_ms:
                return member_id
        for member_id, (deadline, epoch) in sorted(self._timers.rebalance.get(group_id, {}).items()):
            if deadline > now_ms:
                continue
            member = group.members.get(member_id)
            if member is not None and member.member_epoch == epoch:
                return member_id
            self._timers.stop_rebalance(group_id, member_id)
        for timers in (self._timers.join, self._timers.sync):
            for member_id, deadline in sorted(timers.get(group_id, {}).items()):
                if member_id not in group.members:
                    self._timers.stop(timers, group_id, member_id)
                elif deadline <= now_ms:
                    return member_id
        return None

    # -- assignment -----------------------------------------------------------------------------

    def resolve(self, member: ConsumerMember, topics: Mapping[str, TopicInfo] | None = None) -> set[str]:
        """The existing topics a member subscribes to: its names plus its regex's matches."""
        topics = self._topics() if topics is None else topics
        names = {name for name in member.subscribed_topic_names if name in topics}
        if member.subscribed_topic_regex:
            pattern = _compile_regex(member.subscribed_topic_regex)
            names.update(name for name in topics if name not in INTERNAL_TOPICS and pattern.matches(name))
        return names

    def _subscription_metadata(self, members: Iterable[ConsumerMember]) -> dict[str, TopicMetadata]:
        topics = self._topics()
        names = set().union(*(self.resolve(m, topics) for m in members))
        return {name: TopicMetadata(topics[name].topic_id, name, topics[name].partitions)
                for name in sorted(names)}

    def _assign(self, members: Mapping[str, ConsumerMember], targets: Mapping[str, Assignment],
                metadata: Mapping[str, TopicMetadata]) -> dict[str, Assignment]:
        topics = self._topics()
        specs = {m_id: MemberSpec(frozenset(metadata[name].topic_id for name in self.resolve(member, topics)
                                            if name in metadata),
                                  targets.get(m_id, {}), member.instance_id)
                 for m_id, member in members.items()}
        counts = {t.topic_id: t.num_partitions for t in metadata.values()}
        assignor = ASSIGNORS[self.preferred_assignor(members.values())]
        return dict(assignor.assign(specs, counts))

    def preferred_assignor(self, members: Iterable[ConsumerMember]) -> str:
        """The assignor most members ask for (Kafka's ``computePreferredServerAssignor``), ties to
        the first by name; the configured default when none asks."""
        votes = Counter(m.server_assignor for m in members if m.server_assignor is not None)
        if not votes:
            return self.config.assignors[0] if self.config.assignors else DEFAULT_ASSIGNOR
        return min(votes, key=lambda name: (-votes[name], name))

    # -- describe -------------------------------------------------------------------------------

    def describe(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return group

    def topic_names(self) -> dict[TopicId, str]:
        return {info.topic_id: name for name, info in self._topics().items()}

    def session_deadline(self, group_id: str, member_id: str) -> int | None:
        return self._timers.session.get(group_id, {}).get(member_id)


def _compile_regex(regex: str) -> Regex:
    """A subscription regex on RE2, refused as Kafka refuses what RE2/J cannot compile."""
    try:
        return compile_re2(regex)
    except PatternError as exc:
        raise KafkaApiError(ErrorCode.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{regex}` is not a "
                            f"valid regular expression: {exc.description}.") from None


def _check_generation(member: ConsumerMember, generation_id: int) -> None:
    """A classic member's generation is its member epoch (Kafka's throwIfGenerationIdUnmatched)."""
    if generation_id != member.member_epoch:
        raise KafkaApiError(ErrorCode.ILLEGAL_GENERATION, f"The request generation id {generation_id} is not "
                            f"equal to the member epoch {member.member_epoch} of member {member.member_id}.")


def _check_epoch(member: ConsumerMember, received: int, owned: Assignment | None) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: ahead is always fenced; behind only
    passes at the previous epoch with owned partitions within the current assignment (the
    response that moved it on was lost)."""

    def fenced(relation: str) -> KafkaApiError:
        return KafkaApiError(ErrorCode.FENCED_MEMBER_EPOCH, f"The consumer group member has a {relation} "
                             f"member epoch ({received}) than the one known by the group coordinator "
                             f"({member.member_epoch}). The member must abandon all its partitions and "
                             "rejoin.")

    if received > member.member_epoch:
        raise fenced("greater")
    if received < member.member_epoch:
        within = owned is not None and all(parts <= member.assigned.get(t, frozenset())
                                           for t, parts in owned.items())
        if received != member.previous_member_epoch or not within:
            raise fenced("smaller")


def _updated_member(member: ConsumerMember, request: HeartbeatRequest) -> ConsumerMember:
    """The member with what the heartbeat changed (``None``/-1 fields mean unchanged)."""
    def pick(sent: str | None, kept: str | None) -> str | None:
        return kept if sent is None else sent

    topic_names = request.subscribed_topic_names
    return attrs.evolve(
        member,
        instance_id=pick(request.instance_id, member.instance_id),
        rack_id=pick(request.rack_id, member.rack_id),
        rebalance_timeout_ms=(member.rebalance_timeout_ms if request.rebalance_timeout_ms == -1
                              else request.rebalance_timeout_ms),
        server_assignor=pick(request.server_assignor, member.server_assignor),
        subscribed_topic_names=(member.subscribed_topic_names if topic_names is None
                                else _same_topics(member.subscribed_topic_names, topic_names)),
        subscribed_topic_regex=pick(request.subscribed_topic_regex, member.subscribed_topic_regex),
        client_id=request.client_id, client_host=request.client_host, classic=None)


def _same_topics(kept: tuple[str, ...], sent: Sequence[str]) -> tuple[str, ...]:
    """The subscription sent, or the one kept when it names the same topics in another order:
    Kafka holds a member's topics as a set, so a reordering changes nothing (no epoch bump)."""
    return kept if set(kept) == set(sent) else tuple(sent)


def _unknown_instance(instance_id: str) -> KafkaApiError:
    return KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")


def _fenced_instance(member_id: str, instance_id: str, owner: str) -> KafkaApiError:
    return KafkaApiError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                         f"{instance_id} was fenced by member {owner}.")


def _assignment_state(member: ConsumerMember) -> tuple[int, int, MemberState, Assignment, Assignment]:
    return (member.member_epoch, member.previous_member_epoch, member.state, member.assigned,
            member.pending_revocation)


def _partition_metadata_record(group_id: str, metadata: Mapping[str, TopicMetadata]) -> GroupRecord:
    return GroupRecord(ConsumerGroupPartitionMetadataKey(group_id),
                               ConsumerGroupPartitionMetadataValue(tuple(metadata.values())))


def _target_record(group_id: str, member_id: str, target: Assignment) -> GroupRecord:
    return GroupRecord(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
                               ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(target)))


def _current_assignment_record(group_id: str, member: ConsumerMember) -> GroupRecord:
    return GroupRecord(
        ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=member.member_epoch, previous_member_epoch=member.previous_member_epoch,
            state=int(member.state), assigned_partitions=to_topic_partitions(member.assigned),
            partitions_pending_revocation=to_topic_partitions(member.pending_revocation)))


def _removal_records(group_id: str, member_id: str) -> list[GroupRecord]:
    """Kafka's order: current assignment, target, then the member itself."""
    return [GroupRecord(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
            GroupRecord(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
            GroupRecord(ConsumerGroupMemberMetadataKey(group_id, member_id), None)]
