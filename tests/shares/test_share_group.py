"""Share group membership, sans-I/O: join, heartbeat, leave, fencing, Kafka's errors, the assignor."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.shares.share_group import (
    ShareGroupConfig,
    ShareGroups,
    ShareGroupState,
    ShareHeartbeat,
    simple_assignment,
)

T = uuid.UUID(int=7)
U = uuid.UUID(int=8)


def _groups(partitions: int = 1, max_size: int = 200) -> ShareGroups:
    config = ShareGroupConfig(session_timeout_ms=45_000, heartbeat_interval_ms=5_000, max_size=max_size)
    return ShareGroups(config, lambda: {"t": (T, partitions), "u": (U, 2)})


def _join(groups: ShareGroups, member: str, topics: tuple[str, ...] = ("t",), now: int = 0) -> int:
    result = groups.heartbeat(ShareHeartbeat("g", member, 0, subscribed_topic_names=topics), now)
    return result.member_epoch


def test_a_member_joins_gets_the_partitions_and_heartbeats_at_its_epoch() -> None:
    groups = _groups(partitions=2)
    result = groups.heartbeat(ShareHeartbeat("g", "m1", 0, subscribed_topic_names=("t",)), 0)
    assert result.member_epoch == 1 and result.heartbeat_interval_ms == 5_000
    assert result.assignment == {T: frozenset({0, 1})}
    assert groups.groups["g"].state is ShareGroupState.STABLE
    again = groups.heartbeat(ShareHeartbeat("g", "m1", 1), 1000)
    assert again.member_epoch == 1 and again.assignment is None  # unchanged: not sent again


def test_a_second_member_bumps_the_epoch_and_both_share_a_single_partition() -> None:
    groups = _groups(partitions=1)
    _join(groups, "m1")
    assert _join(groups, "m2") == 2
    first = groups.heartbeat(ShareHeartbeat("g", "m1", 1), 10)
    # m1 moves to epoch 2 keeping partition 0: Kafka sends no assignment that did not change
    assert first.member_epoch == 2 and first.assignment is None
    assert groups.groups["g"].members["m1"].assignment == {T: frozenset({0})}
    assert groups.groups["g"].target["m2"] == {T: frozenset({0})}


def test_leave_and_fencing_remove_the_member_and_bump_the_epoch() -> None:
    groups = _groups()
    _join(groups, "m1")
    _join(groups, "m2", now=40_000)
    left = groups.heartbeat(ShareHeartbeat("g", "m2", -1), 41_000)
    assert left.left and left.member_epoch == -1
    assert list(groups.groups["g"].members) == ["m1"]
    assert groups.next_deadline() == 45_000
    assert groups.expire(44_999) == []
    assert groups.expire(45_000) == [("g", "m1")]
    assert groups.groups["g"].state is ShareGroupState.EMPTY and groups.groups["g"].group_epoch == 4


@pytest.mark.parametrize(("request_", "code"), [
    (ShareHeartbeat("", "m", 0, subscribed_topic_names=("t",)), ErrorCode.INVALID_REQUEST),
    (ShareHeartbeat("g", "", 0, subscribed_topic_names=("t",)), ErrorCode.INVALID_REQUEST),
    (ShareHeartbeat("g", "m", 0), ErrorCode.INVALID_REQUEST),  # joining needs topics
    (ShareHeartbeat("g", "m", -2), ErrorCode.INVALID_REQUEST),
    (ShareHeartbeat("g", "stranger", 1), ErrorCode.UNKNOWN_MEMBER_ID),
    (ShareHeartbeat("g", "stranger", -1), ErrorCode.UNKNOWN_MEMBER_ID),
    (ShareHeartbeat("g", "m1", 7), ErrorCode.FENCED_MEMBER_EPOCH),
])
def test_kafkas_errors(request_: ShareHeartbeat, code: ErrorCode) -> None:
    groups = _groups()
    _join(groups, "m1")
    with pytest.raises(KafkaApiError) as refused:
        groups.heartbeat(request_, 0)
    assert refused.value.code == code


def test_group_max_size() -> None:
    groups = _groups(max_size=1)
    _join(groups, "m1")
    with pytest.raises(KafkaApiError) as refused:
        _join(groups, "m2")
    assert refused.value.code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_changing_the_subscription_changes_the_assignment() -> None:
    groups = _groups()
    _join(groups, "m1")
    result = groups.heartbeat(ShareHeartbeat("g", "m1", 1, subscribed_topic_names=("u",)), 0)
    assert result.member_epoch == 2 and result.assignment == {U: frozenset({0, 1})}


def test_the_simple_assignment_covers_every_partition_and_every_member() -> None:
    partitions = [(T, i) for i in range(3)]
    spread = simple_assignment(["a", "b"], partitions, lambda m, t: True)
    assert spread["a"][T] | spread["b"][T] == {0, 1, 2} and not spread["a"][T] & spread["b"][T]
    crowded = simple_assignment(["a", "b", "c", "d"], partitions[:1], lambda m, t: True)
    assert all(crowded[m] == {T: frozenset({0})} for m in "abcd")
    assert simple_assignment(["a"], partitions, lambda m, t: False) == {"a": {}}


def test_a_topic_made_after_the_join_reaches_the_member_at_its_next_heartbeat() -> None:
    topics: dict[str, tuple[uuid.UUID, int]] = {}
    groups = ShareGroups(ShareGroupConfig(), lambda: topics)
    joined = groups.heartbeat(ShareHeartbeat("g", "m1", 0, subscribed_topic_names=("later",)), 0)
    assert joined.member_epoch == 1 and joined.assignment == {}
    topics["later"] = (T, 2)
    beat = groups.heartbeat(ShareHeartbeat("g", "m1", 1), 100)
    assert beat.member_epoch == 2 and beat.assignment == {T: frozenset({0, 1})}
    assert groups.heartbeat(ShareHeartbeat("g", "m1", 2), 200).assignment is None


def test_the_simple_assignment_shares_each_partition_evenly_and_keeps_what_members_held() -> None:
    partitions = [(T, 0), (T, 1)]
    three = simple_assignment(["a", "b", "c"], partitions, lambda m, t: True)
    sharing = {p: sum(p in three[m].get(T, frozenset()) for m in "abc") for p in (0, 1)}
    assert sharing == {0: 2, 1: 2}  # ceil(3 members / 2 partitions) each
    counts = sorted(len(three[m].get(T, frozenset())) for m in "abc")
    assert counts == [1, 1, 2]  # balanced: counts differ by at most one
    held = {"a": {T: frozenset({1})}, "b": {T: frozenset({0})}}
    sticky = simple_assignment(["a", "b"], partitions, lambda m, t: True, previous=held)
    assert sticky == {"a": {T: frozenset({1})}, "b": {T: frozenset({0})}}


def test_members_with_one_subscription_are_balanced_over_all_its_topics() -> None:
    both = [(T, 0), (U, 0)]
    same = simple_assignment(["a", "b"], both, lambda m, t: True)
    assert sorted(sum(len(p) for p in same[m].values()) for m in "ab") == [1, 1]
    differ = simple_assignment(["a", "b"], both, lambda m, t: m == "a" or t == U)
    assert differ["a"] == {T: frozenset({0}), U: frozenset({0})} and differ["b"] == {U: frozenset({0})}


@settings(max_examples=300, deadline=None)
@given(members=st.integers(1, 7), partitions=st.integers(1, 7), data=st.data())
def test_the_simple_assignment_shares_and_balances_and_stays_close_from_any_previous(
        members: int, partitions: int, data: st.DataObject) -> None:
    """From nothing: every partition shared by exactly ceil(members / partitions) members, counts
    differing by at most one. From any previous assignment (stickiness first): every partition
    still consumed, none over-shared, no member over its share; like Kafka's builder, a slight
    shortfall is accepted where keeping what members held leaves no member free to take it."""
    names = [f"m{i}" for i in range(members)]
    tps = [(T, i) for i in range(partitions)]
    sharing = -(-members // partitions)
    most = -(-sharing * partitions // members)

    def shape(target: dict[str, dict[uuid.UUID, frozenset[int]]]) -> tuple[list[int], list[int]]:
        counts = [len(target[m].get(T, frozenset())) for m in names]
        holders = [sum(i in target[m].get(T, frozenset()) for m in names) for i in range(partitions)]
        return counts, holders

    counts, holders = shape(simple_assignment(names, tps, lambda m, t: True))
    assert holders == [sharing] * partitions and max(counts) - min(counts) <= 1
    previous = {m: {T: frozenset(data.draw(st.sets(st.integers(0, partitions + 1)), label=m))} for m in names}
    target = simple_assignment(names, tps, lambda m, t: True, previous=previous)
    counts, holders = shape(target)
    assert all(1 <= h <= sharing for h in holders) and max(counts) <= most
    assert all(target[m].get(T, frozenset()) <= frozenset(range(partitions)) for m in names)
