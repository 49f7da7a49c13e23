"""The uniform and range assignors' properties, checked on generated groups."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.groups.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    MemberSpec,
    RangeAssignor,
    TopicId,
    UniformAssignor,
)

TOPICS = [uuid.UUID(int=i + 1) for i in range(4)]
Result = Mapping[str, Mapping[TopicId, frozenset[int]]]
Group = tuple[dict[str, MemberSpec], dict[TopicId, int]]


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool) -> Group:
    counts = {t: draw(st.integers(1, 9)) for t in draw(st.lists(st.sampled_from(TOPICS), min_size=1,
                                                                 max_size=4, unique=True))}
    member_ids = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=1, max_size=6,
                               unique=True))
    shared = frozenset(draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True)))
    members: dict[str, MemberSpec] = {}
    for member_id in member_ids:
        subscribed = shared if homogeneous else frozenset(
            draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True)))
        # A previous target of any shape, even overlapping or out of range: the assignor must cope.
        current = {t: frozenset(draw(st.lists(st.integers(0, 10), max_size=4))) for t in
                   draw(st.lists(st.sampled_from(TOPICS), max_size=2, unique=True))}
        members[member_id] = MemberSpec(subscribed, {t: p for t, p in current.items() if p})
    return members, counts


def check_exactly_once(members: Mapping[str, MemberSpec], counts: Mapping[TopicId, int],
                       result: Result) -> None:
    assert set(result) == set(members)
    owners: dict[tuple[TopicId, int], list[str]] = {}
    for member_id, assignment in result.items():
        for topic, parts in assignment.items():
            assert parts, "empty topics are left out"
            assert topic in members[member_id].subscribed
            for p in parts:
                owners.setdefault((topic, p), []).append(member_id)
    wanted = {(t, p) for spec in members.values() for t in spec.subscribed if t in counts
              for p in range(counts[t])}
    assert set(owners) == wanted
    assert all(len(who) == 1 for who in owners.values())


def load(result: Result, member_id: str) -> int:
    return sum(len(parts) for parts in result[member_id].values())


def check_balanced(members: Mapping[str, MemberSpec], result: Result) -> None:
    """No partition could move to a member subscribed to its topic that holds two fewer."""
    for owner, assignment in result.items():
        for topic in assignment:
            for other, spec in members.items():
                if topic in spec.subscribed:
                    assert load(result, other) >= load(result, owner) - 1, (owner, other, topic)


def sticky_input(members: Mapping[str, MemberSpec], result: Result) -> dict[str, MemberSpec]:
    return {m: MemberSpec(spec.subscribed, result[m], spec.instance_id) for m, spec in members.items()}


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_homogeneous_is_complete_balanced_within_one_and_sticky(
        group: Group) -> None:
    members, counts = group
    result = UniformAssignor().assign(members, counts)
    check_exactly_once(members, counts, result)
    loads = [load(result, m) for m in members]
    assert max(loads) - min(loads) <= 1
    assert UniformAssignor().assign(sticky_input(members, result), counts) == result


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=True), st.data())
def test_uniform_homogeneous_moves_nothing_of_the_others_when_a_member_leaves(
        group: Group, data: st.DataObject) -> None:
    members, counts = group
    settled = sticky_input(members, UniformAssignor().assign(members, counts))
    if len(settled) < 2:
        return
    leaver = data.draw(st.sampled_from(sorted(settled)))
    remaining = {m: spec for m, spec in settled.items() if m != leaver}
    after = UniformAssignor().assign(remaining, counts)
    check_exactly_once(remaining, counts, after)
    for member_id, spec in remaining.items():
        for topic, parts in spec.current.items():
            assert parts <= after[member_id].get(topic, frozenset())


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=False))
def test_uniform_heterogeneous_is_complete_balanced_and_sticky(
        group: Group) -> None:
    members, counts = group
    result = UniformAssignor().assign(members, counts)
    check_exactly_once(members, counts, result)
    check_balanced(members, result)
    assert UniformAssignor().assign(sticky_input(members, result), counts) == result


@settings(max_examples=200, deadline=None)
@given(groups(homogeneous=True))
def test_the_heterogeneous_builder_keeps_the_same_promises_on_homogeneous_groups(
        group: Group) -> None:
    """The two builders need not agree partition for partition (Kafka's do not either), but either
    may serve a homogeneous group: complete, within one, sticky."""
    members, counts = group
    result = UniformAssignor.assign_heterogeneous(members, counts)
    check_exactly_once(members, counts, result)
    loads = [load(result, m) for m in members]
    assert max(loads) - min(loads) <= 1
    assert UniformAssignor.assign_heterogeneous(sticky_input(members, result), counts) == result


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=False))
def test_range_gives_contiguous_ranges_in_member_order(
        group: Group) -> None:
    members, counts = group
    result = RangeAssignor().assign(members, counts)
    check_exactly_once(members, counts, result)
    for topic, count in counts.items():
        subscribers = sorted(m for m, spec in members.items() if topic in spec.subscribed)
        ranges = [sorted(result[m].get(topic, frozenset())) for m in subscribers]
        flat = [p for r in ranges for p in r]
        assert flat == list(range(count)) if subscribers else flat == []
        sizes = [len(r) for r in ranges]
        assert sizes == sorted(sizes, reverse=True) and (not sizes or sizes[0] - sizes[-1] <= 1)
    assert RangeAssignor().assign(sticky_input(members, result), counts) == result


@settings(max_examples=200, deadline=None)
@given(groups(homogeneous=True))
def test_range_co_partitions_topics_of_equal_size(group: Group) -> None:
    members, _ = group
    topics = sorted(next(iter(members.values())).subscribed)
    counts = dict.fromkeys(topics, 6)
    result = RangeAssignor().assign(members, counts)
    for assignment in result.values():
        assert len({assignment.get(t, frozenset()) for t in topics}) == 1


def test_range_puts_static_members_first_by_instance_id() -> None:
    topic = TOPICS[0]
    members = {
        "a-dynamic": MemberSpec(frozenset([topic])),
        "z-static": MemberSpec(frozenset([topic]), instance_id="i1"),
        "m-static": MemberSpec(frozenset([topic]), instance_id="i2"),
    }
    result = RangeAssignor().assign(members, {topic: 3})
    assert result == {"z-static": {topic: frozenset([0])}, "m-static": {topic: frozenset([1])},
                      "a-dynamic": {topic: frozenset([2])}}


def test_uniform_spreads_three_members_over_six_partitions_two_each() -> None:
    topic = TOPICS[0]
    members = {m: MemberSpec(frozenset([topic])) for m in ("a", "b", "c")}
    result = UniformAssignor().assign(members, {topic: 6})
    assert sorted(len(a[topic]) for a in result.values()) == [2, 2, 2]


def test_a_topic_that_does_not_exist_gets_nothing_and_breaks_nothing() -> None:
    known, unknown = TOPICS[0], TOPICS[1]
    members = {"a": MemberSpec(frozenset([known, unknown])), "b": MemberSpec(frozenset([unknown]))}
    for name in ("uniform", "range"):
        result = ASSIGNORS[name].assign(members, {known: 2})
        assert result == {"a": {known: frozenset([0, 1])}, "b": {}}


def test_uniform_is_kafkas_default() -> None:
    assert DEFAULT_ASSIGNOR == "uniform" and list(ASSIGNORS) == ["uniform", "range"]
