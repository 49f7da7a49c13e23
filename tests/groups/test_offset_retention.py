"""Offset retention as Kafka decides it (KIP-211: from when the group became Empty; standalone
consumers and unsubscribed topics from the commit; KIP-496), and the subscribed-topics reader."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.groups.records import NO_EXPIRE_TIMESTAMP, GroupRecord, OffsetCommitKey, OffsetCommitValue
from kafkapy.groups.retention import (
    DEFAULT_OFFSETS_RETENTION_CHECK_INTERVAL_MS,
    DEFAULT_OFFSETS_RETENTION_MINUTES,
    ClassicGroupFacts,
    ConsumerGroupFacts,
    Expiry,
    StandaloneGroupFacts,
    expire_offsets,
    expiry_tombstones,
    retention_ms,
    subscribed_topics_of,
)
from kafkapy.protocol.schema import MessageSchema
from kafkapy.protocol.specs import standard_and_project_specs

WEEK_MS = 7 * 24 * 60 * 60 * 1000
RETENTION = retention_ms(DEFAULT_OFFSETS_RETENTION_MINUTES)
T0 = 1_700_000_000_000


def committed(at: int, expire: int = NO_EXPIRE_TIMESTAMP) -> OffsetCommitValue:
    return OffsetCommitValue(offset=1, leader_epoch=0, metadata="", commit_timestamp=at,
                             expire_timestamp=expire)


def classic(*, empty: bool = False, stable: bool = False, since: int | None = T0,
            topics: frozenset[str] | None = None, protocol_type: str = "consumer") -> ClassicGroupFacts:
    return ClassicGroupFacts(protocol_type, empty, stable, since, topics)


def test_kafkas_defaults() -> None:
    assert RETENTION == WEEK_MS
    assert DEFAULT_OFFSETS_RETENTION_CHECK_INTERVAL_MS == 600_000


def test_a_standalone_consumers_offsets_expire_a_retention_after_their_commit() -> None:
    offsets = {("t", 0): committed(T0), ("t", 1): committed(T0 + 1000)}
    group = StandaloneGroupFacts()
    assert expire_offsets(group, offsets, T0 + RETENTION - 1, RETENTION) == Expiry((), False)
    assert expire_offsets(group, offsets, T0 + RETENTION, RETENTION) == Expiry((("t", 0),), False)
    assert expire_offsets(group, offsets, T0 + RETENTION + 1000, RETENTION) == \
        Expiry((("t", 0), ("t", 1)), True)


def test_an_empty_groups_offsets_count_from_when_it_became_empty_not_from_the_commit() -> None:
    """KIP-211: a group that committed long ago but emptied recently keeps its offsets."""
    offsets = {("t", 0): committed(T0 - 10 * WEEK_MS)}
    became_empty = T0
    group = classic(empty=True, since=became_empty, topics=subscribed_topics_of("consumer", None, []))
    assert expire_offsets(group, offsets, T0 + RETENTION - 1, RETENTION).expired == ()
    assert expire_offsets(group, offsets, T0 + RETENTION, RETENTION) == Expiry((("t", 0),), True)


def test_an_empty_group_from_old_metadata_counts_from_the_commit() -> None:
    group = classic(empty=True, since=None, topics=frozenset())
    offsets = {("t", 0): committed(T0), ("t", 1): committed(T0 + WEEK_MS)}
    assert expire_offsets(group, offsets, T0 + RETENTION, RETENTION) == Expiry((("t", 0),), False)


def test_a_group_with_members_keeps_its_offsets_unless_stable_with_known_topics() -> None:
    offsets = {("t", 0): committed(T0), ("gone", 0): committed(T0)}
    late = T0 + 10 * WEEK_MS
    for group in (classic(), classic(stable=True), classic(stable=True, protocol_type="connect",
                                                          topics=frozenset({"t"}))):
        assert expire_offsets(group, offsets, late, RETENTION) == Expiry((), False), group
    # KIP-496: Stable, subscriptions known: offsets of topics nobody subscribes to go.
    stable = classic(stable=True, topics=frozenset({"t"}))
    assert expire_offsets(stable, offsets, late, RETENTION) == Expiry((("gone", 0),), False)


def test_a_kip848_group_expires_only_unsubscribed_topics_by_commit_time() -> None:
    group = ConsumerGroupFacts(frozenset({"t"}))
    offsets = {("t", 0): committed(T0), ("old", 0): committed(T0), ("old", 1): committed(T0 + WEEK_MS)}
    assert expire_offsets(group, offsets, T0 + RETENTION, RETENTION) == Expiry((("old", 0),), False)


def test_an_explicit_expiry_wins_over_the_retention() -> None:
    offsets = {("t", 0): committed(T0, expire=T0 + 5), ("t", 1): committed(T0)}
    group = StandaloneGroupFacts()
    assert expire_offsets(group, offsets, T0 + 5, RETENTION) == Expiry((("t", 0),), False)


def test_pending_transactions_hold_offsets_and_the_group() -> None:
    offsets = {("t", 0): committed(T0), ("t", 1): committed(T0)}
    group = StandaloneGroupFacts()
    late = T0 + 2 * WEEK_MS
    assert expire_offsets(group, offsets, late, RETENTION, pending_transactional={("t", 1)}) == \
        Expiry((("t", 0),), False)
    assert expire_offsets(group, offsets, late, RETENTION, open_transactions=True) == \
        Expiry((("t", 0), ("t", 1)), False)


def test_an_expiry_becomes_offset_tombstones() -> None:
    expiry = expire_offsets(StandaloneGroupFacts(), {("t", 0): committed(T0), ("u", 2): committed(T0)},
                            T0 + RETENTION, RETENTION)
    assert expiry_tombstones("g", expiry) == [GroupRecord(OffsetCommitKey("g", "t", 0), None),
                                             GroupRecord(OffsetCommitKey("g", "u", 2), None)]


def test_a_group_without_offsets_can_go() -> None:
    assert expire_offsets(classic(empty=True, topics=frozenset()), {}, T0, RETENTION) == Expiry((), True)


groups = st.one_of(
    st.just(StandaloneGroupFacts()),
    st.builds(ClassicGroupFacts, st.sampled_from(["consumer", "connect"]), st.booleans(), st.booleans(),
              st.none() | st.integers(T0 - WEEK_MS, T0 + WEEK_MS),
              st.none() | st.frozensets(st.sampled_from("abc"))),
    st.builds(ConsumerGroupFacts, st.frozensets(st.sampled_from("abc"))),
)
offset_maps = st.dictionaries(
    st.tuples(st.sampled_from("abcd"), st.integers(0, 3)),
    st.builds(committed, st.integers(T0 - 2 * WEEK_MS, T0 + 2 * WEEK_MS),
              st.sampled_from([NO_EXPIRE_TIMESTAMP, T0, T0 + WEEK_MS])), max_size=8)


@given(groups, offset_maps, st.integers(T0 - WEEK_MS, T0 + 4 * WEEK_MS), st.integers(0, 2 * WEEK_MS))
@settings(max_examples=300, deadline=None)
def test_expiry_only_grows_with_time_and_all_expired_means_all(
        group: object, offsets: dict[tuple[str, int], OffsetCommitValue], now: int, later: int) -> None:
    assert isinstance(group, StandaloneGroupFacts | ClassicGroupFacts | ConsumerGroupFacts)
    now_answer = expire_offsets(group, offsets, now, RETENTION)
    later_answer = expire_offsets(group, offsets, now + later, RETENTION)
    assert set(now_answer.expired) <= set(later_answer.expired) <= set(offsets)
    if now_answer.all_expired:
        assert set(now_answer.expired) == set(offsets)
    elif offsets:
        assert set(now_answer.expired) != set(offsets)
    subscribed = group.subscribed_topics if not isinstance(group, StandaloneGroupFacts) else frozenset()
    assert not any(topic in (subscribed or ()) for topic, _ in later_answer.expired)


# --- the classic group's subscribed topics -------------------------------------------------------

def subscription(version: int, topics: list[str]) -> bytes:
    spec = next(s for s in standard_and_project_specs() if s.name == "ConsumerProtocolSubscription")
    out = bytearray(struct.pack(">h", version))
    MessageSchema(spec, version).root.write(
        MessageSchema(spec, version).root.fit({"topics": topics, "user_data": None, "owned_partitions": [],
                                               "generation_id": 3, "rack_id": "r"}), out)
    return bytes(out)


def test_subscribed_topics_read_every_subscription_version_by_its_v0_prefix() -> None:
    members = [subscription(0, ["a"]), subscription(1, ["b"]), subscription(3, ["a", "c"])]
    assert subscribed_topics_of("consumer", "range", members) == frozenset({"a", "b", "c"})


def test_subscribed_topics_are_unknown_when_kafka_cannot_tell() -> None:
    assert subscribed_topics_of("connect", "range", [subscription(0, ["a"])]) is None
    assert subscribed_topics_of("consumer", None, [subscription(0, ["a"])]) is None
    assert subscribed_topics_of("consumer", "range", [b"\x00"]) is None
    assert subscribed_topics_of("consumer", "range", [b"\x00\x00\x00\x00\x00\x05ab"]) is None
    assert subscribed_topics_of("consumer", None, []) == frozenset()


@given(st.lists(st.binary(max_size=30), min_size=1, max_size=3))
@settings(max_examples=300, deadline=None)
def test_garbage_subscriptions_are_unknown_topics_never_an_error(members: list[bytes]) -> None:
    found = subscribed_topics_of("consumer", "range", members)
    assert found is None or isinstance(found, frozenset)
