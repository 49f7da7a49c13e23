"""Share groups' membership (KIP-932's ShareGroupHeartbeat), sans-I/O.

Theory of operation
-------------------
A member joins with epoch 0 and a member id it generated, names the topics it subscribes to,
heartbeats with its current epoch, and leaves with epoch -1. Every change of membership or of
subscriptions bumps the group epoch and recomputes the target assignment with the simple
assignor (``simple_assignment``: balanced and sticky, as Kafka's). Unlike a consumer group there
is nothing to revoke first (a partition may be shared), so a member's epoch and assignment jump
straight to the group's on its next heartbeat.

A member's session lasts ``group.share.session.timeout.ms`` from its last heartbeat; one whose
session ran out is fenced (removed, group epoch bumped) by :meth:`ShareGroups.expire`, which the
I/O side calls at :meth:`ShareGroups.next_deadline` (kafkapy.shares.module). Kafka's errors, in
its GroupMetadataManager's order: a malformed request, INVALID_REQUEST; a heartbeat (epoch > 0)
or leave for a group that does not exist, GROUP_ID_NOT_FOUND; a member the group does not know
when the group is full, GROUP_MAX_SIZE_REACHED; otherwise a member it does not know,
UNKNOWN_MEMBER_ID; an epoch other than the member's or, since the answer bumping it may have
been lost, its previous one, FENCED_MEMBER_EPOCH (so a member that joined again with epoch 0
after its epoch moved on is fenced too).

Group states are Kafka's ShareGroup.ShareGroupState, as a table: EMPTY while no member is in the
group, STABLE while any is.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping, Sequence

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError

__all__ = ["JOIN_EPOCH", "LEAVE_EPOCH", "STATE_TRANSITIONS", "ShareGroup", "ShareGroupConfig",
           "ShareGroupState", "ShareGroups", "ShareHeartbeat", "ShareHeartbeatResult", "ShareMember",
           "simple_assignment", "validate_heartbeat"]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
Assignment = Mapping[uuid.UUID, frozenset[int]]


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


#: (state, whether members remain) -> next state, after a join, heartbeat, leave or fence.
STATE_TRANSITIONS: dict[tuple[ShareGroupState, bool], ShareGroupState] = {
    (ShareGroupState.EMPTY, True): ShareGroupState.STABLE,
    (ShareGroupState.EMPTY, False): ShareGroupState.EMPTY,
    (ShareGroupState.STABLE, True): ShareGroupState.STABLE,
    (ShareGroupState.STABLE, False): ShareGroupState.EMPTY,
}


@attrs.frozen
class ShareGroupConfig:
    #: Kafka's names and defaults (GroupCoordinatorConfig / ShareGroupConfig).
    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size


@attrs.define
class ShareMember:
    member_id: str
    member_epoch: int
    subscribed_topic_names: tuple[str, ...]
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    assignment: dict[uuid.UUID, frozenset[int]] = attrs.field(factory=dict)
    session_deadline_ms: int = 0
    #: The epoch before the member's last move; a heartbeat at it is still accepted (Kafka's
    #: previousMemberEpoch: -1 for a member that never had one).
    previous_member_epoch: int = LEAVE_EPOCH


@attrs.define
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    state: ShareGroupState = ShareGroupState.EMPTY
    members: dict[str, ShareMember] = attrs.field(factory=dict)
    target: dict[str, dict[uuid.UUID, frozenset[int]]] = attrs.field(factory=dict)


@attrs.frozen
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@attrs.frozen
class ShareHeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None  # None when unchanged since the member's last heartbeat
    left: bool = False


TopicPartition = tuple[uuid.UUID, int]
Target = dict[str, dict[uuid.UUID, frozenset[int]]]


def simple_assignment(members: Sequence[str], partitions: Sequence[TopicPartition],
                      subscribed: Callable[[str, uuid.UUID], bool],
                      previous: Mapping[str, Mapping[uuid.UUID, frozenset[int]]] | None = None) -> Target:
    """Kafka's simple share assignor, as its homogeneous builder describes its aims: every
    partition is shared by ``ceil(members / partitions)`` members, the members' partition
    counts differ by at most one (balance), and what a member held in ``previous`` stays with
    it where balance allows (stickiness). Members subscribing to the same topics are assigned
    together over all those topics' partitions; when subscriptions differ, each topic is
    assigned over its own subscribers. Deterministic: members and partitions in sorted order."""
    members = sorted(members)
    subscriptions = {m: frozenset(t for t, _ in partitions if subscribed(m, t)) for m in members}
    units: list[tuple[list[str], list[TopicPartition]]]
    if len(set(subscriptions.values())) <= 1:
        common = subscriptions[members[0]] if members else frozenset()
        units = [(members, sorted(p for p in partitions if p[0] in common))]
    else:
        units = [([m for m in members if topic in subscriptions[m]],
                  sorted(p for p in partitions if p[0] == topic))
                 for topic in sorted({t for t, _ in partitions})]
    held: dict[str, set[TopicPartition]] = {m: set() for m in members}
    for takers, unit in units:
        for member, taken in _balanced(takers, unit, previous or {}).items():
            held[member] |= taken
    result: Target = {}
    for member, taken in held.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic, index in taken:
            by_topic.setdefault(topic, set()).add(index)
        result[member] = {t: frozenset(p) for t, p in by_topic.items()}
    return result


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _balanced(members: Sequence[str], partitions: Sequence[TopicPartition],
              previous: Mapping[str, Mapping[uuid.UUID, frozenset[int]]]) -> dict[str, set[TopicPartition]]:
    """One unit of the simple assignor. Each partition gets ``sharing`` members and each member
    ``base`` or ``base + 1`` partitions, the extra ones going to the members that held the most
    before; each member keeps what it held while that fits, and the rest is dealt to the members
    needing the most, round-robin among equals."""
    if not members or not partitions:
        return {m: set() for m in members}
    sharing = _ceil_div(len(members), len(partitions))
    base, extra = divmod(sharing * len(partitions), len(members))
    kept = {m: sorted(p for p in ((t, i) for t, indexes in previous.get(m, {}).items() for i in indexes)
                      if p in set(partitions)) for m in members}
    by_holding = sorted(members, key=lambda m: (-len(kept[m]), members.index(m)))
    need = {m: base + (1 if rank < extra else 0) for rank, m in enumerate(by_holding)}
    holders: dict[TopicPartition, set[str]] = {p: set() for p in partitions}
    taken: dict[str, set[TopicPartition]] = {m: set() for m in members}
    for member in by_holding:  # stickiness, within balance
        for partition in kept[member]:
            if len(holders[partition]) < sharing and need[member] > 0:
                holders[partition].add(member)
                taken[member].add(partition)
                need[member] -= 1
    turn = 0  # round-robin among the members that need the same number more
    for partition in partitions:
        while len(holders[partition]) < sharing:
            candidates = [i for i, m in enumerate(members) if need[m] > 0 and m not in holders[partition]]
            if not candidates:
                break  # Kafka's builder, too, accepts a slight imbalance here
            index = max(candidates, key=lambda i: (need[members[i]], -((i - turn) % len(members))))
            member = members[index]
            turn = index + 1
            holders[partition].add(member)
            taken[member].add(partition)
            need[member] -= 1
    return taken


class ShareGroups:
    def __init__(self, config: ShareGroupConfig,
                 topics: Callable[[], Mapping[str, tuple[uuid.UUID, int]]]) -> None:
        self.config = config
        # A group's own (session timeout, heartbeat interval), from its GROUP config resource.
        self.overrides: Callable[[str], tuple[int, int] | None] | None = None
        self.groups: dict[str, ShareGroup] = {}
        self._topics = topics  # name -> (topic id, partition count), the cluster's view now

    def timeouts(self, group_id: str) -> tuple[int, int]:
        """The group's (session timeout, heartbeat interval): its own when set, else the broker's."""
        own = self.overrides(group_id) if self.overrides is not None else None
        return own if own is not None else (self.config.session_timeout_ms, self.config.heartbeat_interval_ms)

    def heartbeat(self, request: ShareHeartbeat, now_ms: int) -> ShareHeartbeatResult:
        validate_heartbeat(request)
        group = self.groups.get(request.group_id)
        if request.member_epoch == LEAVE_EPOCH:
            return self._leave(group, request)
        if group is None:
            if request.member_epoch != JOIN_EPOCH:
                raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND,
                                    f"Share group {request.group_id} not found.")
            group = self.groups[request.group_id] = ShareGroup(request.group_id)
        member = group.members.get(request.member_id)
        if member is None and len(group.members) >= self.config.max_size:
            raise KafkaApiError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum "
                                f"capacity of {self.config.max_size} members.")
        if member is None:
            if request.member_epoch != JOIN_EPOCH:
                raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {request.member_id} is not a "
                                    f"member of group {request.group_id}.")
            member = group.members[request.member_id] = ShareMember(
                request.member_id, JOIN_EPOCH, request.subscribed_topic_names or ())
            group.group_epoch += 1
        else:
            _check_epoch(member, request.member_epoch)
        member.client_id, member.client_host = request.client_id, request.client_host
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        names = request.subscribed_topic_names
        if names is not None and tuple(names) != member.subscribed_topic_names:
            member.subscribed_topic_names = tuple(names)
            group.group_epoch += 1
        session_timeout_ms, heartbeat_interval_ms = self.timeouts(group.group_id)
        member.session_deadline_ms = now_ms + session_timeout_ms
        self._refresh_target(group)
        held = member.assignment
        if member.member_epoch != group.group_epoch:
            member.previous_member_epoch, member.member_epoch = member.member_epoch, group.group_epoch
            member.assignment = dict(group.target.get(member.member_id, {}))
        # Kafka sends the assignment to a member joining (epoch 0), to a full request (one naming
        # its topics, as a member sends after an error) and when it changed; else it leaves it out.
        sent: Assignment | None = None
        if request.member_epoch == JOIN_EPOCH or names is not None or member.assignment != held:
            sent = member.assignment
        group.state = STATE_TRANSITIONS[(group.state, bool(group.members))]
        return ShareHeartbeatResult(member.member_id, member.member_epoch, heartbeat_interval_ms, sent)

    def _leave(self, group: ShareGroup | None, request: ShareHeartbeat) -> ShareHeartbeatResult:
        if group is None:
            raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} not found.")
        if request.member_id not in group.members:
            raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID,
                                f"Member {request.member_id} is not a member of group {request.group_id}.")
        self._remove(group, request.member_id)
        return ShareHeartbeatResult(request.member_id, LEAVE_EPOCH, 0, None, left=True)

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        del group.members[member_id]
        group.group_epoch += 1
        group.state = STATE_TRANSITIONS[(group.state, bool(group.members))]
        self._refresh_target(group)

    def _refresh_target(self, group: ShareGroup) -> None:
        """The target assignment follows the group epoch (and topics created meanwhile)."""
        topics = self._topics()
        ids = {name: topic_id for name, (topic_id, _) in topics.items()}
        partitions = [(topic_id, index) for topic_id, count in topics.values() for index in range(count)]
        subscribed = {m.member_id: {ids[n] for n in m.subscribed_topic_names if n in ids}
                      for m in group.members.values()}
        target = simple_assignment(sorted(group.members), partitions, lambda m, t: t in subscribed[m],
                                   previous=group.target)
        if target != group.target:
            if group.assignment_epoch == group.group_epoch:  # a topic changed, not the members
                group.group_epoch += 1
            group.target = target
        group.assignment_epoch = group.group_epoch

    # -- sessions ---------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return min((m.session_deadline_ms for g in self.groups.values() for m in g.members.values()),
                   default=None)

    def expire(self, now_ms: int) -> list[tuple[str, str]]:
        """Fence the members whose session ran out; answers (group id, member id) of each."""
        fenced = []
        for group in self.groups.values():
            for member in [m for m in group.members.values() if m.session_deadline_ms <= now_ms]:
                self._remove(group, member.member_id)
                fenced.append((group.group_id, member.member_id))
        return fenced

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members


def _check_epoch(member: ShareMember, received: int) -> None:
    """Kafka's throwIfShareGroupMemberEpochIsInvalid: the member's epoch, or its previous one (the
    answer that moved it on may have been lost); anything else is fenced."""
    if received > member.member_epoch:
        raise KafkaApiError(ErrorCode.FENCED_MEMBER_EPOCH, f"The share group member has a greater member "
                            f"epoch ({received}) than the one known by the group coordinator "
                            f"({member.member_epoch}). The member must abandon all its partitions and "
                            "rejoin.")
    if received < member.member_epoch and received != member.previous_member_epoch:
        raise KafkaApiError(ErrorCode.FENCED_MEMBER_EPOCH, f"The share group member has a smaller member "
                            f"epoch ({received}) than the one known by the group coordinator "
                            f"({member.member_epoch}), and it does not match the previous member epoch "
                            f"({member.previous_member_epoch}). The member must abandon all its partitions "
                            "and rejoin.")


def _blank(value: str | None) -> bool:
    """Kafka's throwIfEmptyString: set, but empty or only whitespace."""
    return value is not None and not value.strip()


def validate_heartbeat(request: ShareHeartbeat) -> None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid (GroupCoordinatorService), in its order."""
    if not request.member_id or _blank(request.member_id):
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    if not request.group_id or _blank(request.group_id):
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if _blank(request.rack_id):
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
    if request.member_epoch == JOIN_EPOCH and not request.subscribed_topic_names:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    if request.member_epoch < LEAVE_EPOCH:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
