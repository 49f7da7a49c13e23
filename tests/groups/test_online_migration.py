"""KIP-848's online migration, sans I/O: the records of an upgrade and of a downgrade, the classic
members' timers inside a consumer group, and a mixed group rebuilt from its records."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from consumer_sim import GROUP, SimConsumer, parts, topic_id, topics

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.consumer_group import (
    ConsumerGroupConfig,
    ConsumerGroups,
    HeartbeatRequest,
)
from kafkapy.groups.group import ClassicGroup, JoinRequest, Member
from kafkapy.groups.migration import (
    MigrationPolicy,
    UpgradeRefused,
    check_upgrade,
    consumer_group_records,
)
from kafkapy.groups.reconciliation import MemberState
from kafkapy.groups.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecord,
)
from kafkapy.groups.state import GroupState
from kafkapy.protocol.consumer_protocol import (
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)

T = topic_id("t")
SESSION_MS, REBALANCE_MS = 6000, 3000
SUBSCRIPTION = encode_subscription(Subscription(("t",), version=1))


def classic_group(*members: str, generation: int = 3, protocol_type: str = "consumer") -> ClassicGroup:
    """A Stable classic group of ``members``, the first owning partitions 0-3 of t, the others none."""
    group = ClassicGroup(GROUP, 0, GroupState.STABLE, generation_id=generation, protocol_type=protocol_type,
                         protocol_name="range")
    for i, member_id in enumerate(members):
        assignment = encode_assignment({"t": range(4)} if i == 0 else {}, 1)
        group.add(Member(member_id, None, "cli", "/127.0.0.1", REBALANCE_MS, SESSION_MS, protocol_type,
                         [("range", SUBSCRIPTION)], assignment=assignment))
    return group


def upgraded(groups: ConsumerGroups, *classic: str, now_ms: int = 0) -> tuple[SimConsumer, list[GroupRecord]]:
    """The classic group of ``classic`` members upgraded by a consumer-protocol member "m"'s join."""
    records = consumer_group_records(classic_group(*classic), {"t": T})
    modern = SimConsumer(groups, "m")
    result = groups.heartbeat(modern.request(), now_ms, records)
    modern.epoch = result.response.member_epoch
    return modern, list(result.records)


def rejoin(groups: ConsumerGroups, member_id: str, now_ms: int = 0, **fields: Any) -> Any:
    request = JoinRequest(GROUP, member_id, None, "cli", "/127.0.0.1", SESSION_MS, REBALANCE_MS,
                                 "consumer", (("range", SUBSCRIPTION),), **fields)
    return groups.classic_join(request, now_ms)[0]


def test_the_upgrade_records_are_kafka_s_and_keep_each_member_s_partitions() -> None:
    records = consumer_group_records(classic_group("a", "b"), {"t": T})
    kinds = [type(r.key) for r in records]
    assert kinds == [GroupMetadataKey, ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataKey,
                     ConsumerGroupMetadataKey, ConsumerGroupTargetAssignmentMemberKey,
                     ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMetadataKey,
                     ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentKey]
    assert records[0].value is None, "the classic group's tombstone comes first"
    groups = ConsumerGroups(lambda: topics(t=4))
    for record in records:
        groups.replay(record)
    group = groups.groups[GROUP]
    assert (group.group_epoch, group.assignment_epoch) == (3, 3)
    a, b = group.members["a"], group.members["b"]
    assert (a.member_epoch, a.state, parts(a.assigned)) == (3, MemberState.STABLE, {(T, p) for p in range(4)})
    assert parts(group.target_of("a")) == parts(a.assigned) and parts(b.assigned) == set()
    assert a.classic is not None and a.classic.session_timeout_ms == SESSION_MS
    assert [(p.name, p.metadata) for p in a.classic.supported_protocols] == [("range", SUBSCRIPTION)]


@pytest.mark.parametrize(("policy", "protocol_type", "size", "refused"), [
    (MigrationPolicy.BIDIRECTIONAL, "consumer", 2, None),
    (MigrationPolicy.DOWNGRADE, "consumer", 2, "disabled"),
    (MigrationPolicy.DISABLED, "consumer", 2, "disabled"),
    (MigrationPolicy.UPGRADE, "connect", 2, "consumer embedded protocol"),
    (MigrationPolicy.UPGRADE, "consumer", 1, "maximum size"),  # group.consumer.max.size 1, two members
])
def test_validate_online_upgrade(policy: MigrationPolicy, protocol_type: str, size: int,
                                 refused: str | None) -> None:
    group = classic_group("a", "b", protocol_type=protocol_type)
    if refused is None:
        check_upgrade(group, policy, size)
        return
    with pytest.raises(UpgradeRefused, match=refused):
        check_upgrade(group, policy, size)


def test_a_malformed_subscription_refuses_the_upgrade() -> None:
    group = classic_group("a")
    group.members["a"].protocols = [("range", b"\x00")]
    with pytest.raises(UpgradeRefused, match="malformed"):
        consumer_group_records(group, {"t": T})


def test_a_classic_member_is_asked_to_rejoin_and_gets_the_assignor_s_share() -> None:
    groups = ConsumerGroups(lambda: topics(t=4))
    modern, _ = upgraded(groups, "a")
    group = groups.groups[GROUP]
    assert group.group_epoch == 4 and groups.classic_heartbeat(GROUP, "a", None, 3, 0) == \
        ErrorCode.REBALANCE_IN_PROGRESS
    answer = rejoin(groups, "a")
    assert answer.generation_id == 4 and answer.protocol_name == "range"
    assignment = decode_assignment(groups.classic_sync(GROUP, "a", None, 4, "consumer", "range", 0))
    assert len(assignment["t"]) == 2
    assert groups.classic_heartbeat(GROUP, "a", None, 4, 0) == ErrorCode.NONE
    modern.heartbeat()
    modern.heartbeat()
    assert parts(modern.owned) == {(T, p) for p in range(4)} - {(T, p) for p in assignment["t"]}


def test_classic_member_timers_fence_it_without_a_heartbeat_join_or_sync() -> None:
    groups = ConsumerGroups(lambda: topics(t=4), ConsumerGroupConfig(session_timeout_ms=60_000))
    modern, _ = upgraded(groups, "a", "b", now_ms=0)
    modern.heartbeat(1000)
    # a: told to rejoin at 1000, never does: fenced after its rebalance timeout
    assert groups.classic_heartbeat(GROUP, "a", None, 3, 1000) == ErrorCode.REBALANCE_IN_PROGRESS
    # b: rejoins at 1000 but never syncs: fenced after its rebalance timeout too
    rejoin(groups, "b", 1000)
    groups.expire(1000 + REBALANCE_MS - 1)
    assert set(groups.groups[GROUP].members) == {"a", "b", "m"}
    modern.heartbeat(1000 + REBALANCE_MS - 1)
    groups.expire(1000 + REBALANCE_MS)
    assert set(groups.groups[GROUP].members) == {"m"}
    # a classic member's session is its own (6 s here), renewed by its heartbeats
    modern2 = SimConsumer(groups, "m2")
    modern2.heartbeat(30_000)
    rejoin(groups, "c", 30_000)
    groups.classic_sync(GROUP, "c", None, groups.groups[GROUP].members["c"].member_epoch, None, None, 30_000)
    groups.expire(30_000 + SESSION_MS - 1)
    assert "c" in groups.groups[GROUP].members
    groups.expire(30_000 + SESSION_MS)
    assert "c" not in groups.groups[GROUP].members


def test_a_downgrade_is_the_consumer_group_s_tombstones_then_the_classic_group() -> None:
    groups = ConsumerGroups(lambda: topics(t=4), wall_ms=lambda: 1234)
    upgraded(groups, "a", "b")
    for member_id in ("a", "b"):
        rejoin(groups, member_id)
    group = groups.groups[GROUP]
    targets = {m: {p for ps in group.target_of(m).values() for p in ps} for m in ("a", "b")}
    epoch = group.group_epoch
    records = groups.heartbeat(HeartbeatRequest(GROUP, "m", -1), 0).records
    assert GROUP not in groups.groups
    assert [type(r.key) for r in records][-3:] == [
        ConsumerGroupPartitionMetadataKey, ConsumerGroupMetadataKey, GroupMetadataKey]
    assert all(r.value is None for r in records[:-1])
    value = records[-1].value
    assert isinstance(value, GroupMetadataValue)
    assert (value.protocol_type, value.generation, value.protocol, value.leader,
            value.current_state_timestamp) == ("consumer", epoch, "range", "a", 1234)
    assert {m.member_id: set(decode_assignment(m.assignment).get("t", ())) for m in value.members} == targets
    assert {m.member_id: (m.session_timeout_ms, m.subscription) for m in value.members} == {
        "a": (SESSION_MS, SUBSCRIPTION), "b": (SESSION_MS, SUBSCRIPTION)}
    assert groups.next_deadline() is None, "the consumer group's timers went with it"


def test_a_session_expiry_of_the_last_consumer_protocol_member_downgrades_too() -> None:
    groups = ConsumerGroups(lambda: topics(t=4), ConsumerGroupConfig(session_timeout_ms=45_000))
    upgraded(groups, "a")
    assert groups.classic_heartbeat(GROUP, "a", None, 3, 40_000) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoin(groups, "a", 40_000)
    records = groups.expire(45_000)
    assert GROUP not in groups.groups and isinstance(records[-1].value, GroupMetadataValue)


def test_a_mixed_group_rebuilt_from_its_records_equals_the_group() -> None:
    groups = ConsumerGroups(lambda: topics(t=4))
    journal: list[GroupRecord] = []
    _, records = upgraded(groups, "a", "b")
    journal += records
    for member_id in ("a", "b"):
        request = JoinRequest(GROUP, member_id, None, "cli", "/127.0.0.1", SESSION_MS, REBALANCE_MS,
                                     "consumer", (("range", SUBSCRIPTION),))
        journal += groups.classic_join(request, 0)[1]
    rebuilt = ConsumerGroups(lambda: topics(t=4))
    rebuilt.load(journal, 0)
    mine, theirs = groups.groups[GROUP], rebuilt.groups[GROUP]
    assert (theirs.group_epoch, theirs.assignment_epoch, theirs.members, theirs.targets) == (
        mine.group_epoch, mine.assignment_epoch, mine.members, mine.targets)


def test_a_refused_join_changes_nothing() -> None:
    groups = ConsumerGroups(lambda: topics(t=4), ConsumerGroupConfig(max_size=2))
    upgraded(groups, "a")
    before = groups.groups[GROUP].copy()
    with pytest.raises(KafkaApiError) as full:
        rejoin(groups, "newcomer")
    assert full.value.code == ErrorCode.GROUP_MAX_SIZE_REACHED
    with pytest.raises(KafkaApiError) as fenced:
        groups.classic_sync(GROUP, "m", None, 4, None, None, 0)
    assert fenced.value.code == ErrorCode.UNKNOWN_MEMBER_ID
    assert groups.groups[GROUP].members == before.members


def test_a_classic_static_member_taking_the_last_consumer_member_s_place_downgrades_without_rebalance(
        ) -> None:
    """Kafka's validateOnlineDowngradeWithReplacedMemberId: the instance comes back with JoinGroup
    (a client switched back to the classic protocol): the group becomes classic at once, the new
    member id holding the old one's target."""
    groups = ConsumerGroups(lambda: topics(t=4), new_member_id=lambda: "new")
    records = consumer_group_records(classic_group("a"), {"t": T})
    modern = SimConsumer(groups, "m", instance_id="i1")
    modern.epoch = groups.heartbeat(modern.request(), 0, records).response.member_epoch
    rejoin(groups, "a")
    group = groups.groups[GROUP]
    target = {p for ps in group.target_of("m").values() for p in ps}
    request = JoinRequest(GROUP, "", "i1", "cli", "/127.0.0.1", SESSION_MS, REBALANCE_MS, "consumer",
                                 (("range", SUBSCRIPTION),))
    answer, written = groups.classic_join(request, 0)
    assert GROUP not in groups.groups and answer.member_id == "new"
    value = written[-1].value
    assert isinstance(value, GroupMetadataValue) and value.generation == group.group_epoch
    assert [m.member_id for m in value.members] == ["a", "new"] and value.leader == "a"
    assert set(decode_assignment(value.members[1].assignment).get("t", ())) == target
    assert value.members[1].group_instance_id == "i1"


def test_a_consumer_protocol_member_takes_over_a_classic_static_member_s_instance() -> None:
    """Kafka releases the instance id of a classic member to a ConsumerGroupHeartbeat at once (a
    client switching protocols); between consumer-protocol members it must have left first."""
    groups = ConsumerGroups(lambda: topics(t=4))
    group = classic_group("a")
    group.members["a"].group_instance_id = "i1"
    group.static_members["i1"] = "a"
    records = consumer_group_records(group, {"t": T})
    modern = SimConsumer(groups, "m")
    groups.heartbeat(modern.request(), 0, records)
    held = groups.groups[GROUP].members["a"].assigned
    switched = SimConsumer(groups, "a2", instance_id="i1")
    switched.heartbeat(0)
    members = groups.groups[GROUP].members
    assert "a" not in members and members["a2"].classic is None and members["a2"].instance_id == "i1"
    assert parts(members["a2"].assigned) <= parts(held)
    with pytest.raises(KafkaApiError) as unreleased:
        SimConsumer(groups, "a3", instance_id="i1").heartbeat(0)
    assert unreleased.value.code == ErrorCode.UNRELEASED_INSTANCE_ID


def test_no_upgrade_while_a_member_has_no_assignment() -> None:
    """A classic member whose assignment a rebalance reset (empty bytes) cannot be converted: as
    in Kafka, whose ConsumerProtocol cannot read an empty assignment, the upgrade waits."""
    group = classic_group("a", "b")
    group.members["b"].assignment = b""
    with pytest.raises(UpgradeRefused, match="no assignment"):
        consumer_group_records(group, {"t": T})


def test_a_subscription_sent_in_another_order_bumps_nothing() -> None:
    """Kafka keeps a member's topics as a set: a classic member rejoining (or a heartbeat) with the
    same topics reordered is no new subscription, so nobody rebalances."""
    groups = ConsumerGroups(lambda: topics(t=4, u=2))
    two = encode_subscription(Subscription(("t", "u"), version=1))
    records = consumer_group_records(classic_group("a"), {"t": T, "u": topic_id("u")})
    modern = SimConsumer(groups, "m", subscribe=("u", "t"))
    modern.epoch = groups.heartbeat(modern.request(), 0, records).response.member_epoch
    request = JoinRequest(GROUP, "a", None, "cli", "/127.0.0.1", SESSION_MS, REBALANCE_MS, "consumer",
                                 (("range", two),))
    groups.classic_join(request, 0)
    epoch = groups.groups[GROUP].group_epoch
    reordered = encode_subscription(Subscription(("u", "t"), version=1))
    groups.classic_join(attrs.evolve(request, protocols=(("range", reordered),)), 0)
    beat = attrs.evolve(modern.request(), subscribed_topic_names=("t", "u"))
    groups.heartbeat(beat, 0)
    assert groups.groups[GROUP].group_epoch == epoch
