"""KIP-848 consumer groups: joins, revoke-then-assign, fencing, static members, timeouts, regex,
and a group rebuilt from its records equal to the group that wrote them."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from consumer_sim import GROUP, SimConsumer, parts, topic_id, topics

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroups,
    GroupState,
    TopicInfo,
)
from kafkapy.groups.reconciliation import MemberState
from kafkapy.groups.records import GroupRecord

T = topic_id("t")


def make(topic_map: dict[str, TopicInfo], config: ConsumerGroupConfig | None = None) -> ConsumerGroups:
    return ConsumerGroups(lambda: topic_map, config)


def settle(*consumers: SimConsumer, now_ms: int = 0, rounds: int = 6) -> None:
    for _ in range(rounds):
        for consumer in consumers:
            consumer.heartbeat(now_ms)


def group_of(groups: ConsumerGroups) -> ConsumerGroup:
    return groups.groups[GROUP]


def snapshot(group: ConsumerGroup) -> tuple[object, ...]:
    return (group.group_epoch, group.assignment_epoch, group.members, group.targets,
            group.subscription_metadata, {m: sorted(parts(a.assigned)) for m, a in group.members.items()})


def test_three_members_on_six_partitions_get_two_each() -> None:
    groups = make(topics(t=6))
    consumers = [SimConsumer(groups, f"m{i}") for i in range(3)]
    settle(*consumers)
    assert sorted(len(parts(c.owned)) for c in consumers) == [2, 2, 2]
    assert set().union(*(parts(c.owned) for c in consumers)) == {(T, p) for p in range(6)}
    group = group_of(groups)
    assert group.state is GroupState.STABLE
    assert {m.member_epoch for m in group.members.values()} == {group.assignment_epoch} == {group.group_epoch}


def test_a_partition_moves_only_after_its_old_owner_revoked_it() -> None:
    groups = make(topics(t=4))
    a, b = SimConsumer(groups, "a"), SimConsumer(groups, "b")
    settle(a)
    assert parts(a.owned) == {(T, p) for p in range(4)}
    epoch_a = a.epoch

    joined = b.heartbeat()
    assert joined.assignment == {}, "everything is still held by a"
    assert group_of(groups).members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert group_of(groups).state is GroupState.RECONCILING

    told = a.heartbeat(ack=False)  # a learns it must give two up; it keeps its epoch meanwhile
    assert told.member_epoch == epoch_a and len(parts(told.assignment)) == 2
    assert group_of(groups).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert b.heartbeat().assignment is None, "a has not let go yet"
    a.heartbeat(ack=False)  # still holding them: nothing moves
    assert b.heartbeat().assignment is None

    a.heartbeat()  # acknowledges: owned is now the two it keeps
    assert a.epoch > epoch_a
    given = b.heartbeat()
    assert given.assignment is not None and len(parts(given.assignment)) == 2
    assert not parts(a.told) & parts(b.told)
    settle(a, b)
    assert group_of(groups).state is GroupState.STABLE


def test_a_leaving_member_s_partitions_go_to_the_others() -> None:
    groups = make(topics(t=6))
    a, b, c = (SimConsumer(groups, m) for m in "abc")
    settle(a, b, c)
    epoch = group_of(groups).group_epoch
    assert c.leave().member_epoch == -1
    assert group_of(groups).group_epoch == epoch + 1 and "c" not in group_of(groups).members
    settle(a, b)
    assert sorted(len(parts(x.owned)) for x in (a, b)) == [3, 3]


def test_the_session_timeout_fences_a_silent_member() -> None:
    groups = make(topics(t=2))
    a, b = SimConsumer(groups, "a"), SimConsumer(groups, "b")
    settle(a, b, now_ms=0)
    assert groups.next_deadline() == 45_000
    a.heartbeat(now_ms=40_000)
    assert groups.expire(44_999) == ()
    records = groups.expire(45_000)
    assert records and "b" not in group_of(groups).members and "a" in group_of(groups).members
    settle(a, now_ms=45_000)
    assert parts(a.owned) == {(T, 0), (T, 1)}
    with pytest.raises(KafkaApiError) as fenced:
        b.heartbeat(now_ms=45_000)  # b only learns it is out when it comes back
    assert fenced.value.code is ErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() -> None:
    groups = make(topics(t=2))
    a = SimConsumer(groups, "a", rebalance_timeout_ms=1_000)
    settle(a)
    SimConsumer(groups, "b").heartbeat(now_ms=100)
    a.heartbeat(now_ms=200, ack=False)
    assert group_of(groups).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert groups.expire(1_199) == ()
    assert groups.expire(1_200)
    assert "a" not in group_of(groups).members


def test_a_member_that_revokes_in_time_is_not_fenced_by_the_rebalance_timeout() -> None:
    groups = make(topics(t=2))
    a = SimConsumer(groups, "a", rebalance_timeout_ms=1_000)
    settle(a)
    b = SimConsumer(groups, "b")
    b.heartbeat(now_ms=100)
    a.heartbeat(now_ms=200, ack=False)
    a.heartbeat(now_ms=300)
    assert groups.expire(5_000) == ()


INVALID = ErrorCode.INVALID_REQUEST
BAD_REGEX = ErrorCode.INVALID_REGULAR_EXPRESSION


@pytest.mark.parametrize(("change", "code", "message"), [
    ({"member_id": ""}, ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
    ({"group_id": ""}, ErrorCode.INVALID_REQUEST, "GroupId can't be empty."),
    ({"instance_id": ""}, ErrorCode.INVALID_REQUEST, "InstanceId can't be empty."),
    ({"rack_id": ""}, ErrorCode.INVALID_REQUEST, "RackId can't be empty."),
    ({"rebalance_timeout_ms": -1}, INVALID, "RebalanceTimeoutMs must be provided in first request."),
    ({"topic_partitions": None}, INVALID, "TopicPartitions must be empty when (re-)joining."),
    ({"topic_partitions": {T: frozenset([0])}}, ErrorCode.INVALID_REQUEST,
     "TopicPartitions must be empty when (re-)joining."),
    ({"subscribed_topic_names": None}, ErrorCode.INVALID_REQUEST,
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    ({"member_epoch": -3}, ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid."),
    ({"member_epoch": -2}, ErrorCode.INVALID_REQUEST, "InstanceId can't be null."),
    ({"server_assignor": "sticky"}, ErrorCode.UNSUPPORTED_ASSIGNOR,
     "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
    ({"subscribed_topic_names": None, "subscribed_topic_regex": "t("}, BAD_REGEX, None),
    ({"subscribed_topic_names": None, "subscribed_topic_regex": "(?!x)t"}, BAD_REGEX, None),
    ({"subscribed_topic_names": None, "subscribed_topic_regex": r"(t)\1"}, BAD_REGEX, None),
    # re.compile raised OverflowError for this one (the handler failed); RE2 alone would read it as text
    ({"subscribed_topic_names": None, "subscribed_topic_regex": "t{4294967296}"}, BAD_REGEX,
     "SubscribedTopicRegex `t{4294967296}` is not a valid regular expression: invalid repeat count."),
    ({"subscribed_topic_names": None, "subscribed_topic_regex": "t++"}, BAD_REGEX,
     "SubscribedTopicRegex `t++` is not a valid regular expression: invalid nested repetition operator."),
])
def test_bad_heartbeats_get_kafkas_error_and_change_nothing(change: dict[str, Any], code: ErrorCode,
                                                             message: str | None) -> None:
    groups = make(topics(t=1))
    good = SimConsumer(groups, "m").request()
    with pytest.raises(KafkaApiError) as refused:
        groups.heartbeat(attrs.evolve(good, **change), 0)
    assert refused.value.code is code
    if message is not None:
        assert refused.value.message == message
    assert groups.groups == {} and groups.next_deadline() is None


def test_v0_joins_may_leave_the_member_id_to_the_coordinator() -> None:
    groups = ConsumerGroups(lambda: topics(t=1))
    request = attrs.evolve(SimConsumer(groups, "").request(), api_version=0)
    response = groups.heartbeat(request, 0).response
    assert len(response.member_id) == 22 and response.member_epoch == 1


def test_fencing_by_epoch() -> None:
    groups = make(topics(t=2))
    a = SimConsumer(groups, "a")
    settle(a)
    with pytest.raises(KafkaApiError) as unknown_group:
        groups.heartbeat(attrs.evolve(a.request(), group_id="other"), 0)
    assert unknown_group.value.code is ErrorCode.GROUP_ID_NOT_FOUND
    assert unknown_group.value.message == "Consumer group other not found."
    with pytest.raises(KafkaApiError) as unknown_group_leave:
        groups.heartbeat(attrs.evolve(a.request(), group_id="other", member_epoch=-1), 0)
    assert unknown_group_leave.value.message == "Group other not found."
    with pytest.raises(KafkaApiError) as unknown_member:
        groups.heartbeat(attrs.evolve(a.request(), member_id="nobody"), 0)
    assert unknown_member.value.code is ErrorCode.UNKNOWN_MEMBER_ID
    with pytest.raises(KafkaApiError) as ahead:
        groups.heartbeat(attrs.evolve(a.request(), member_epoch=a.epoch + 1), 0)
    assert ahead.value.code is ErrorCode.FENCED_MEMBER_EPOCH and "greater" in str(ahead.value.message)

    SimConsumer(groups, "b").heartbeat()
    a.heartbeat()  # revoke one: a stays at its epoch
    previous = a.epoch
    a.heartbeat()  # acknowledged: a moves on, its old epoch becomes the previous one
    assert group_of(groups).members["a"].previous_member_epoch == previous
    lost = attrs.evolve(a.request(), member_epoch=previous)  # as if the last response was lost
    assert groups.heartbeat(lost, 0).response.member_epoch == a.epoch
    superset = attrs.evolve(lost, topic_partitions={T: frozenset([0, 1])})
    with pytest.raises(KafkaApiError) as behind:
        groups.heartbeat(superset, 0)
    assert behind.value.code is ErrorCode.FENCED_MEMBER_EPOCH and "smaller" in str(behind.value.message)


def test_a_known_member_rejoining_at_epoch_0_keeps_its_place() -> None:
    groups = make(topics(t=2))
    a = SimConsumer(groups, "a")
    settle(a)
    epoch, owned = a.epoch, dict(a.owned)
    a.epoch = 0
    response = a.heartbeat()
    assert response.member_epoch == epoch and response.assignment == owned


def test_a_static_member_that_comes_back_in_time_takes_its_partitions_without_a_rebalance() -> None:
    groups = make(topics(t=4))
    a = SimConsumer(groups, "a1", instance_id="i-a")
    b = SimConsumer(groups, "b", instance_id="i-b")
    settle(a, b)
    before = dict(a.owned)
    group_epoch = group_of(groups).group_epoch
    assert a.leave(static=True).member_epoch == -2
    held = group_of(groups).members["a1"]
    assert held.member_epoch == -2 and held.assigned == before
    settle(b)
    assert len(parts(b.owned)) == 2, "the leaving static member's partitions are kept for it"

    intruder = SimConsumer(groups, "x", instance_id="i-b")
    with pytest.raises(KafkaApiError) as unreleased:
        intruder.heartbeat()
    assert unreleased.value.code is ErrorCode.UNRELEASED_INSTANCE_ID

    back = SimConsumer(groups, "a2", instance_id="i-a")
    response = back.heartbeat()
    assert response.assignment == before
    assert group_of(groups).group_epoch == group_epoch, "no rebalance"
    assert "a1" not in group_of(groups).members

    with pytest.raises(KafkaApiError) as fenced:
        groups.heartbeat(attrs.evolve(back.request(), member_id="a1"), 0)
    assert fenced.value.code is ErrorCode.FENCED_INSTANCE_ID


def test_a_static_member_gone_for_longer_than_its_session_loses_its_partitions() -> None:
    groups = make(topics(t=4))
    a, b = SimConsumer(groups, "a", instance_id="i-a"), SimConsumer(groups, "b")
    settle(a, b)
    a.leave(static=True)
    b.heartbeat(now_ms=30_000)
    groups.expire(45_000)
    assert "a" not in group_of(groups).members
    settle(b, now_ms=45_000)
    assert len(parts(b.owned)) == 4


def test_a_regex_subscribes_to_matching_topics_and_to_new_ones_as_they_appear() -> None:
    topic_map = topics(t1=2, t2=1, u=3)
    groups = make(topic_map)
    a = SimConsumer(groups, "a", subscribe=None, regex="t.*")
    settle(a)
    assert {t for t, _ in parts(a.owned)} == {topic_id("t1"), topic_id("t2")}
    topic_map.update(topics(t3=2, __consumer_offsets=50))
    settle(a)
    assert {t for t, _ in parts(a.owned)} == {topic_id("t1"), topic_id("t2"), topic_id("t3")}


def test_topic_growth_bumps_the_group_epoch_and_assigns_the_new_partitions() -> None:
    topic_map = topics(t=2)
    groups = make(topic_map)
    a = SimConsumer(groups, "a")
    settle(a)
    epoch = group_of(groups).group_epoch
    topic_map["t"] = TopicInfo(T, 3)
    settle(a)
    assert group_of(groups).group_epoch == epoch + 1 and parts(a.owned) == {(T, 0), (T, 1), (T, 2)}


def test_topic_deletion_and_creation_bump_the_group_epoch() -> None:
    """Kafka bumps the group epoch when the subscribed topics' metadata changes: a topic deleted
    (its partitions revoked), a subscribed one created, one created again under a new id."""
    topic_map = topics(t=2)
    groups = make(topic_map)
    a = SimConsumer(groups, "a", subscribe=("t", "u"))
    settle(a)
    epoch = group_of(groups).group_epoch
    topic_map.update(topics(u=1))  # subscribed before it existed
    settle(a)
    assert group_of(groups).group_epoch == epoch + 1 and (topic_id("u"), 0) in parts(a.owned)

    del topic_map["u"]
    told = a.heartbeat(ack=False)
    assert group_of(groups).group_epoch == epoch + 2
    assert group_of(groups).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert told.assignment is not None and parts(told.assignment) == {(T, 0), (T, 1)}
    settle(a)
    assert group_of(groups).state is GroupState.STABLE and parts(a.owned) == {(T, 0), (T, 1)}

    again = TopicInfo(topic_id("u-again"), 1)  # the same name, a new topic id
    topic_map["u"] = again
    settle(a)
    assert group_of(groups).group_epoch == epoch + 3 and (again.topic_id, 0) in parts(a.owned)


def test_the_assignor_most_members_ask_for_is_used() -> None:
    groups = make(topics(x=2, y=2))
    consumers = [SimConsumer(groups, m, subscribe=("x", "y"), assignor="range") for m in "ab"]
    settle(*consumers)
    assert [c.owned for c in consumers] == [{topic_id("x"): frozenset([0]), topic_id("y"): frozenset([0])},
                                            {topic_id("x"): frozenset([1]), topic_id("y"): frozenset([1])}]


def test_the_group_size_limit() -> None:
    groups = make(topics(t=1), ConsumerGroupConfig(max_size=1))
    settle(SimConsumer(groups, "a"))
    with pytest.raises(KafkaApiError) as full:
        SimConsumer(groups, "b").heartbeat()
    assert full.value.code is ErrorCode.GROUP_MAX_SIZE_REACHED


def test_a_group_rebuilt_from_its_records_equals_the_group_that_wrote_them() -> None:
    topic_map = topics(t=5, u=3)
    groups = make(topic_map)
    written: list[GroupRecord] = []
    a = SimConsumer(groups, "a", subscribe=("t", "u"), journal=written)
    b = SimConsumer(groups, "b", instance_id="i-b", journal=written)
    c = SimConsumer(groups, "c", subscribe=None, regex="u", journal=written)
    settle(a, b, c)
    d = SimConsumer(groups, "d", journal=written)
    d.heartbeat()
    a.heartbeat(ack=False)
    b.leave(static=True)
    c.leave()
    rebuilt = ConsumerGroups(lambda: topic_map)
    rebuilt.load(written, now_ms=0)
    assert snapshot(group_of(rebuilt)) == snapshot(group_of(groups))
    assert group_of(rebuilt).state is group_of(groups).state
    for member in group_of(groups).members:
        for tp in parts(group_of(groups).members[member].assigned):
            assert group_of(rebuilt).holder(*tp) == member


def test_loading_a_partition_renews_only_its_own_groups_sessions() -> None:
    """A second partition loaded later must not give the members of the first a fresh session."""
    topic_map = topics(t=2)
    written: list[GroupRecord] = []
    SimConsumer(make(topic_map), "a", journal=written).heartbeat()
    other = [GroupRecord(_regrouped(r.key, "h"), r.value) for r in written]
    rebuilt = ConsumerGroups(lambda: topic_map)
    rebuilt.load(written, now_ms=0)
    rebuilt.load(other, now_ms=10_000)
    session = rebuilt.config.session_timeout_ms
    assert rebuilt.session_deadline(GROUP, "a") == session
    assert rebuilt.session_deadline("h", "a") == 10_000 + session


def test_a_loaded_member_that_never_revokes_is_fenced_by_its_rebalance_timeout() -> None:
    """Kafka's onLoaded restarts the rebalance timeout of a member in UNREVOKED_PARTITIONS: a member
    that keeps heartbeating without letting go must not hold the others back on the new coordinator."""
    topic_map = topics(t=2)
    written: list[GroupRecord] = []
    groups = make(topic_map)
    a = SimConsumer(groups, "a", rebalance_timeout_ms=1_000, journal=written)
    settle(a)
    SimConsumer(groups, "b", journal=written).heartbeat()
    a.heartbeat(ack=False)
    assert group_of(groups).members["a"].state is MemberState.UNREVOKED_PARTITIONS

    rebuilt = make(topic_map)
    rebuilt.load(written, now_ms=10_000)
    assert rebuilt.next_deadline() == 11_000
    a.groups = rebuilt
    a.heartbeat(now_ms=10_500, ack=False)  # still holding what it must give up
    assert rebuilt.expire(10_999) == ()
    assert rebuilt.expire(11_000)
    assert "a" not in group_of(rebuilt).members


def _regrouped(key: object, group_id: str) -> Any:
    """The same record key for another group (every KIP-848 key has a group_id)."""
    return attrs.evolve(key, group_id=group_id)  # type: ignore[misc]
