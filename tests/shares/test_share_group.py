"""Share group membership, sans-I/O: join, heartbeat, leave, fencing, Kafka's errors, the assignor."""

from __future__ import annotations

import uuid

import pytest

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
    assert first.member_epoch == 2 and first.assignment == {T: frozenset({0})}
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
