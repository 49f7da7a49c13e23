"""Model-based test of share-group membership (KIP-932's ShareGroupHeartbeat, kafkapy.shares.share_group):
members join, heartbeat with their epoch or a wrong one, change subscriptions, leave and time out
while topics appear and grow, against a model that knows only the rules in words.

The rules (Kafka's GroupMetadataManager): a join (epoch 0) needs subscriptions; any other epoch,
and leaving, needs the group to exist (GROUP_ID_NOT_FOUND); a member the group does not have is
refused GROUP_MAX_SIZE_REACHED while the group is full (group.share.max.size), else
UNKNOWN_MEMBER_ID unless it joins; a member the group has must send its epoch or, the answer
that moved it on having perhaps been lost, its previous one (FENCED_MEMBER_EPOCH otherwise, a
join at epoch 0 included). A member's session ends session.timeout.ms after its last heartbeat.
A share group has no revocation: a heartbeat brings the member to the group epoch with the
group's target assignment, so a member just answered holds exactly its target; the answer
carries it on a join, on a full request (one naming the topics) and when it changed. After
every step: the group is Stable exactly while it has members, its epoch never goes back, the
target shares out only partitions that exist of topics the member subscribes to, and a refused
heartbeat changed nothing at all.
"""

from __future__ import annotations

import copy
import uuid

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.shares.share_group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    ShareGroupConfig,
    ShareGroups,
    ShareGroupState,
    ShareHeartbeat,
)

GROUP = "g"
MEMBERS = ["m1", "m2", "m3", "m4"]
TOPICS = ["a", "b", "c"]
CONFIG = ShareGroupConfig(session_timeout_ms=1000, heartbeat_interval_ms=100, max_size=3)
subscriptions = st.lists(st.sampled_from([*TOPICS, "missing"]), min_size=1, max_size=3, unique=True)


class ShareGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.topics: dict[str, tuple[uuid.UUID, int]] = {"a": (uuid.UUID(int=1), 2)}
        self.groups = ShareGroups(CONFIG, lambda: self.topics)
        self.now = 0
        self.epochs: dict[str, int] = {}  # member -> the epoch its last answer gave it (the model)
        self.previous: dict[str, int] = {}  # member -> the epoch it held before its last move
        self.held: dict[str, object] = {}  # member -> the assignment its last answer left it holding
        self.group_made = False
        self.deadlines: dict[str, int] = {}
        self.subscribed: dict[str, tuple[str, ...]] = {}
        self.last_epoch = 0

    # --- the protocol ---------------------------------------------------------------------------

    def _heartbeat(self, member: str, epoch: int, subs: tuple[str, ...] | None,
                   expected: ErrorCode | None) -> None:
        before = copy.deepcopy(self.groups.groups)
        request = ShareHeartbeat(GROUP, member, epoch, subscribed_topic_names=subs)
        try:
            result = self.groups.heartbeat(request, self.now)
        except KafkaApiError as refused:
            assert refused.code == expected, (refused.code, expected)
            assert self.groups.groups == before  # a refused heartbeat changes nothing
            return
        assert expected is None, f"accepted, but Kafka answers {expected!r}"
        group = self.groups.groups[GROUP]
        if epoch == LEAVE_EPOCH:
            assert result.left and result.member_epoch == LEAVE_EPOCH and member not in group.members
            self._forget(member)
            return
        held = group.members[member]
        assert result.member_epoch == held.member_epoch == group.group_epoch
        assert held.assignment == group.target.get(member, {})  # no revocation in a share group
        if epoch == JOIN_EPOCH or subs is not None or held.assignment != self.held.get(member):
            assert result.assignment == held.assignment
        else:
            assert result.assignment is None
        if result.member_epoch != self.epochs.get(member):
            self.previous[member] = self.epochs.get(member, JOIN_EPOCH)
        self.epochs[member] = result.member_epoch
        self.held[member] = copy.deepcopy(held.assignment)
        self.group_made = True
        self.deadlines[member] = self.now + CONFIG.session_timeout_ms
        if subs is not None:
            self.subscribed[member] = subs

    def _expected(self, member: str, epoch: int) -> ErrorCode | None:
        """Kafka's answer to a heartbeat (not a leave) with well-formed fields."""
        if not self.group_made and epoch != JOIN_EPOCH:
            return ErrorCode.GROUP_ID_NOT_FOUND
        own = self.epochs.get(member)
        if own is None:
            if len(self.epochs) >= CONFIG.max_size:
                return ErrorCode.GROUP_MAX_SIZE_REACHED
            return None if epoch == JOIN_EPOCH else ErrorCode.UNKNOWN_MEMBER_ID
        return None if epoch in (own, self.previous[member]) else ErrorCode.FENCED_MEMBER_EPOCH

    def _forget(self, member: str) -> None:
        for facts in (self.epochs, self.previous, self.held, self.deadlines, self.subscribed):
            facts.pop(member, None)

    @rule(member=st.sampled_from(MEMBERS), subs=subscriptions | st.just(()))
    def join(self, member: str, subs: list[str]) -> None:
        expected = ErrorCode.INVALID_REQUEST if not subs else self._expected(member, JOIN_EPOCH)
        self._heartbeat(member, JOIN_EPOCH, tuple(subs), expected)

    @rule(member=st.sampled_from(MEMBERS), subs=st.none() | subscriptions,
          which=st.sampled_from(["own", "previous", "older", "newer"]))
    def heartbeat(self, member: str, subs: list[str] | None, which: str) -> None:
        own = self.epochs.get(member)
        epoch = {"own": own or 1, "previous": self.previous.get(member, 1), "older": (own or 2) - 1,
                 "newer": (own or 0) + 1}[which]
        if epoch <= JOIN_EPOCH:
            epoch = (own or 0) + 1
        self._heartbeat(member, epoch, None if subs is None else tuple(subs), self._expected(member, epoch))

    @rule(member=st.sampled_from(MEMBERS))
    def leave(self, member: str) -> None:
        expected = (ErrorCode.GROUP_ID_NOT_FOUND if not self.group_made
                    else None if member in self.epochs else ErrorCode.UNKNOWN_MEMBER_ID)
        self._heartbeat(member, LEAVE_EPOCH, None, expected)

    @rule(ms=st.integers(1, 1500))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        fenced = self.groups.expire(self.now)
        ended = {m for m, deadline in self.deadlines.items() if deadline <= self.now}
        assert {m for _, m in fenced} == ended and all(g == GROUP for g, _ in fenced)
        for member in ended:
            self._forget(member)

    @precondition(lambda self: len(self.topics) < len(TOPICS))
    @rule()
    def topic_created(self) -> None:
        name = TOPICS[len(self.topics)]
        self.topics[name] = (uuid.UUID(int=len(self.topics) + 1), 1)

    @rule(topic=st.sampled_from(TOPICS))
    def partitions_added(self, topic: str) -> None:
        if topic in self.topics:
            topic_id, count = self.topics[topic]
            self.topics[topic] = (topic_id, count + 1)

    # --- what always holds ----------------------------------------------------------------------

    @invariant()
    def the_group_agrees_with_the_model(self) -> None:
        group = self.groups.groups.get(GROUP)
        if group is None:
            assert not self.epochs
            return
        assert set(group.members) == set(self.epochs)
        assert group.state == (ShareGroupState.STABLE if group.members else ShareGroupState.EMPTY)
        assert group.group_epoch >= self.last_epoch
        self.last_epoch = group.group_epoch
        for member, held in group.members.items():
            assert held.member_epoch <= group.group_epoch
            assert held.session_deadline_ms == self.deadlines[member]
            assert held.subscribed_topic_names == self.subscribed[member]

    @invariant()
    def the_target_shares_only_what_members_subscribe_to(self) -> None:
        group = self.groups.groups.get(GROUP)
        if group is None:
            return
        ids = {topic_id: (name, count) for name, (topic_id, count) in self.topics.items()}
        assert set(group.target) <= set(group.members)
        for member, assignment in group.target.items():
            for topic_id, partitions in assignment.items():
                name, count = ids[topic_id]
                assert name in self.subscribed[member] and partitions <= set(range(count))


TestShareGroupModel = ShareGroupMachine.TestCase
TestShareGroupModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
