"""A classic group's membership: members, generation, leader, and the protocol they agree on.

Pure data and the rules that read it (Kafka's ClassicGroup): which protocols every member
supports, the vote that picks one, who may join (``group.max.size``), whether everyone has
rejoined. The coordinator (coordinator.py) decides when things happen; the state moves go
through the table in state.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from kafkapy.errors import ErrorCode
from kafkapy.groups.records import GroupMetadataValue, MemberMetadata
from kafkapy.groups.retention import CONSUMER_PROTOCOL_TYPE, subscribed_topics_of
from kafkapy.groups.state import GroupState, transition

__all__ = ["CLASSIC", "ClassicGroup", "JoinRequest", "JoinResult", "Member", "SyncResult"]

CLASSIC = "classic"  # the group type ListGroups v5 answers (KIP-848 groups are "consumer")


@attrs.frozen
class JoinRequest:
    """A JoinGroup as the coordinators take it: a classic group's, or a classic member's of a
    consumer group (KIP-848's migration), which reads the same fields."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = False  # JoinGroup v4+ (KIP-394)
    skip_assignment_supported: bool = True  # JoinGroup v9+ (KIP-814)


@attrs.frozen
class JoinResult:
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (member id, instance id, metadata)
    skip_assignment: bool = False


@attrs.frozen
class SyncResult:
    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@attrs.define(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's order of preference
    assignment: bytes = b""
    awaiting_join: Callable[[JoinResult], None] | None = None
    awaiting_sync: Callable[[SyncResult], None] | None = None
    is_new: bool = False  # joined in this rebalance (KIP-394's longer first-join deadline)

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        return list(protocols) == self.protocols

    def vote(self, candidates: set[str]) -> str:
        """The first of this member's protocols that everyone supports."""
        return next(name for name, _ in self.protocols if name in candidates)

    def to_record(self, protocol: str | None) -> MemberMetadata:
        return MemberMetadata(self.member_id, self.group_instance_id, self.client_id, self.client_host,
                              self.rebalance_timeout_ms, self.session_timeout_ms,
                              self.metadata_for(protocol) if protocol else b"", self.assignment)


@attrs.define(eq=False)
class ClassicGroup:
    group_id: str
    partition: int  # of __consumer_offsets: the coordinator leads it
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = attrs.Factory(dict)
    pending_members: set[str] = attrs.Factory(set)  # KIP-394: ids handed out, first join not yet back
    static_members: dict[str, str] = attrs.Factory(dict)  # group.instance.id -> member id
    pending_sync: set[str] = attrs.Factory(set)  # members yet to SyncGroup this generation
    group_type: str = CLASSIC
    # The topics the members subscribed to when this generation began (None: unknown), which
    # OffsetDelete and offset retention go by until the next one, as Kafka's subscribedTopics.
    subscribed: frozenset[str] | None = None

    def move_to(self, target: GroupState, now_ms: int) -> None:
        self.state = transition(self.state, target)
        self.state_timestamp_ms = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    # --- membership ---------------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        if member is None:
            return None
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static(self, old_id: str, new_id: str) -> Member:
        """A static member rejoined under a new member id (KIP-345): same place, new id."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        assert member.group_instance_id is not None
        self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    @property
    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def all_joined(self) -> bool:
        """Every member rejoined and no KIP-394 member id is still out: the join can complete."""
        return self.awaiting_join_count == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def elect_joined_leader(self) -> bool:
        """Kafka's maybeElectNewJoinedLeader: a leader that did not rejoin hands over to the first
        member that did. False when nobody rejoined (the join cannot complete yet)."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join is not None:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join is not None), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def can_admit(self, member_id: str, max_size: int) -> bool:
        """Kafka's acceptJoiningMember: group.max.size counts members (or rejoins in a rebalance)."""
        if self.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if self.state is GroupState.PREPARING_REBALANCE:
            member = self.members.get(member_id)
            return (member is not None and member.awaiting_join is not None) or \
                self.awaiting_join_count < max_size
        return member_id in self.members or len(self.members) < max_size

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocols ----------------------------------------------------------------------------

    def supported_protocols(self) -> set[str]:
        """The protocols every member lists."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Kafka's supportsProtocols: a new member must share the type and one protocol with all."""
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.supported_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its first choice among the protocols all support; most votes
        wins (ties: the name first in the leader's list, then alphabetical, so it is deterministic)."""
        candidates = self.supported_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        leader = self.members.get(self.leader_id or "")
        order = {name: i for i, (name, _) in enumerate(leader.protocols)} if leader else {}
        return min(votes, key=lambda name: (-votes[name], order.get(name, len(order)), name))

    def note_subscriptions(self) -> None:
        """Kafka's computeSubscribedTopics, run as a generation begins (and on load): a consumer
        group's topics from its members' metadata for the chosen protocol; nothing for an empty
        one; None when they cannot be read or the group is not a consumer group."""
        self.subscribed = subscribed_topics_of(
            self.protocol_type, self.protocol_name,
            [m.metadata_for(self.protocol_name or "") for m in self.members.values()])

    def is_subscribed(self, topic: str) -> bool:
        """Kafka's isSubscribedToTopic: a consumer group whose topics are unknown counts as
        subscribed to every topic; another protocol type's group to none."""
        if self.subscribed is not None:
            return topic in self.subscribed
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # --- records ------------------------------------------------------------------------------

    def to_record(self) -> GroupMetadataValue:
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "", generation=self.generation_id,
            protocol=self.protocol_name, leader=self.leader_id,
            current_state_timestamp=self.state_timestamp_ms,
            members=tuple(m.to_record(self.protocol_name) for m in self.members.values()))

    def describe(self) -> dict[str, Any]:
        """DescribeGroups' entry: member metadata and assignments only once Stable, as Kafka."""
        stable = self.state is GroupState.STABLE
        return {
            "error_code": ErrorCode.NONE, "error_message": None, "group_id": self.group_id,
            "group_state": self.state.value, "protocol_type": self.protocol_type or "",
            "protocol_data": (self.protocol_name or "") if stable else "",
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "member_metadata": m.metadata_for(self.protocol_name) if stable and
                         self.protocol_name else b"",
                         "member_assignment": m.assignment if stable else b""}
                        for m in self.members.values()],
        }

