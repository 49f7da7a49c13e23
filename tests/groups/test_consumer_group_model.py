"""Model-based test of KIP-848 consumer groups: members join, heartbeat (acknowledging what they
were told or not yet), leave (dynamic or static), fall silent and time out, while topics grow.

Safety, after every step: no partition may be held by two members at once, judged by what each
member may be using (what it owns plus what it was last told it owns), and the coordinator's view
of each member matches what the member was told. Liveness, on demand: once every member heartbeats
a few rounds, every subscribed partition is owned by exactly one member and the group is settled.
"""

from __future__ import annotations

import itertools
from typing import ClassVar

from consumer_sim import GROUP, SimConsumer, parts, topic_id
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.consumer_group import ConsumerGroup, ConsumerGroupConfig, ConsumerGroups, TopicInfo
from kafkapy.groups.reconciliation import MemberState

SUBSCRIPTIONS: list[tuple[tuple[str, ...] | None, str | None]] = [
    (("t",), None), (("t", "u"), None), (None, "u|t"), (("u",), None)]
#: What a client may be told when the coordinator refuses it; anything else is a bug.
EXPECTED_REFUSALS = {ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.FENCED_MEMBER_EPOCH,
                     ErrorCode.UNKNOWN_MEMBER_ID}


class ConsumerGroupMachine(RuleBasedStateMachine):
    CLIENTS: ClassVar[int] = 5

    def __init__(self) -> None:
        super().__init__()
        self.topics: dict[str, TopicInfo] = {}
        self.groups = ConsumerGroups(lambda: self.topics, ConsumerGroupConfig())
        self.now = 0
        self.clients: list[SimConsumer] = []
        self.ids = itertools.count()

    @initialize(t=st.integers(1, 6), u=st.integers(1, 3), subscriptions=st.lists(
        st.sampled_from(range(len(SUBSCRIPTIONS))), min_size=CLIENTS, max_size=CLIENTS),
        static=st.lists(st.booleans(), min_size=CLIENTS, max_size=CLIENTS),
        assignor=st.sampled_from(["uniform", "range", None]))
    def setup(self, t: int, u: int, subscriptions: list[int], static: list[bool],
              assignor: str | None) -> None:
        self.topics.update(t=TopicInfo(topic_id("t"), t), u=TopicInfo(topic_id("u"), u))
        for i, (choice, is_static) in enumerate(zip(subscriptions, static)):
            names, regex = SUBSCRIPTIONS[choice]
            self.clients.append(SimConsumer(self.groups, f"c{i}", names, regex=regex,
                                            instance_id=f"i{i}" if is_static else None, assignor=assignor,
                                            rebalance_timeout_ms=20_000))

    @property
    def group(self) -> ConsumerGroup | None:
        return self.groups.groups.get(GROUP)

    def live(self) -> list[SimConsumer]:
        return [c for c in self.clients if c.joined]

    def _heartbeat(self, client: SimConsumer, *, ack: bool = True, report_owned: bool = True) -> None:
        try:
            client.heartbeat(self.now, ack=ack, report_owned=report_owned)
        except KafkaApiError as exc:
            assert exc.code in EXPECTED_REFUSALS, exc
            client.drop()

    @rule(i=st.integers(0, CLIENTS - 1))
    def join(self, i: int) -> None:
        client = self.clients[i]
        if client.joined:
            return
        if client.instance_id is not None:
            client.member_id = f"c{i}-{next(self.ids)}"  # a restarted static consumer has a new member id
        self._heartbeat(client)

    @rule(i=st.integers(0, CLIENTS - 1), ack=st.booleans(), report_owned=st.booleans())
    def heartbeat(self, i: int, ack: bool, report_owned: bool) -> None:
        client = self.clients[i]
        if client.joined:
            self._heartbeat(client, ack=ack, report_owned=report_owned)

    @rule(i=st.integers(0, CLIENTS - 1), static=st.booleans())
    def leave(self, i: int, static: bool) -> None:
        client = self.clients[i]
        if client.joined:
            client.leave(self.now, static=static and client.instance_id is not None)

    @rule(ms=st.sampled_from([1_000, 10_000, 25_000, 50_000]))
    def tick(self, ms: int) -> None:
        """Time passes; the coordinator fences whoever timed out, and those consumers notice."""
        self.now += ms
        self.groups.expire(self.now)
        group = self.group
        for client in self.live():
            if group is None or client.member_id not in group.members:
                client.drop()

    @rule(topic=st.sampled_from(["t", "u"]), more=st.integers(1, 2))
    def grow(self, topic: str, more: int) -> None:
        info = self.topics[topic]
        self.topics[topic] = TopicInfo(info.topic_id, info.partitions + more)

    @rule()
    def settle(self) -> None:
        """Every live consumer heartbeats and acknowledges, round after round: the group must get
        to a settled state where every subscribed partition has exactly one owner. A static member
        that left (-2) keeps its partitions for its return, so it is first given its session
        timeout to come back, and does not."""
        if not self.live():
            return
        group = self.group
        if group is not None and any(m.member_epoch == -2 for m in group.members.values()):
            session = self.groups.config.session_timeout_ms
            self.now += session - 1_000
            for client in self.live():
                self._heartbeat(client)
            self.tick(1_000)
        for _ in range(8):
            for client in self.live():
                self._heartbeat(client)
        group = self.group
        assert group is not None
        for client in self.live():
            member = group.members[client.member_id]
            assert member.state is MemberState.STABLE and member.member_epoch == group.assignment_epoch
            assert client.owned == client.told == dict(member.assigned)
        subscribed = {(info.topic_id, p) for name, info in self.topics.items()
                      if any(name in self.groups.resolve(m) for m in group.members.values())
                      for p in range(info.partitions)}
        held = [tp for m in group.members.values() for tp in parts(m.assigned)]
        assert sorted(held) == sorted(subscribed)

    @invariant()
    def no_partition_is_held_by_two_members(self) -> None:
        seen: dict[object, str] = {}
        for client in self.live():
            for tp in client.may_hold():
                assert tp not in seen, f"{tp} held by {seen[tp]} and {client.member_id}"
                seen[tp] = client.member_id

    @invariant()
    def the_coordinator_knows_what_each_member_was_told(self) -> None:
        group = self.group
        for client in self.live():
            assert group is not None
            member = group.members[client.member_id]
            assert client.told == dict(member.assigned)
            assert parts(client.owned) <= parts(member.assigned) | parts(member.pending_revocation)


ConsumerGroupMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=50, deadline=None)
TestConsumerGroupModel = ConsumerGroupMachine.TestCase
