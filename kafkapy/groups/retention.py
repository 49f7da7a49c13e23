"""Which committed offsets expire: Kafka's offset retention (KIP-211, KIP-496), as a pure function.

Theory of operation
-------------------
Every ``offsets.retention.check.interval.ms`` (Kafka's default 600000, ten minutes) the
coordinator asks, per group, which of its offsets have expired, writes a tombstone for each, and
deletes an Empty group once none are left. The answer depends on the group (Kafka's
``offsetExpirationCondition``), which picks the *base* time an offset's age is counted from:

======================================  =================================================
group                                   offsets expire, ``offsets.retention.minutes`` after
======================================  =================================================
standalone (committed, never joined)    their commit
classic, Empty                          the group became Empty (its current state
                                        timestamp; the commit, for pre-v2 group metadata)
classic "consumer", Stable, topics      their commit, for topics no member subscribes to
known                                   (KIP-496)
classic, any other state                never (the group is rebalancing or its
                                        subscriptions are unknown)
KIP-848 consumer group                  their commit, for topics no member subscribes to
======================================  =================================================

An offset committed with an explicit expiry (OffsetCommit v2-v4's retention time, stored as a v1
OffsetCommitValue) expires at that time instead. Offsets of topics the group subscribes to never
expire while it does, nor does an offset with a transactional commit pending. ``all_expired`` is
Kafka's "remove the group" answer: every offset went and no transaction is open.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

import attrs

from kafkapy.errors import DecodeError
from kafkapy.groups.records import NO_EXPIRE_TIMESTAMP, GroupRecord, OffsetCommitKey, OffsetCommitValue
from kafkapy.protocol.schema import MessageSchema
from kafkapy.protocol.specs import standard_and_project_specs

__all__ = ["CONSUMER_PROTOCOL_TYPE", "DEFAULT_OFFSETS_RETENTION_CHECK_INTERVAL_MS",
           "DEFAULT_OFFSETS_RETENTION_MINUTES", "ClassicGroupFacts", "ConsumerGroupFacts", "Expiry",
           "StandaloneGroupFacts", "expire_offsets", "expiry_tombstones", "is_offset_expired", "retention_ms",
           "subscribed_topics_of"]

DEFAULT_OFFSETS_RETENTION_MINUTES = 10080  # Kafka's offsets.retention.minutes: 7 days
DEFAULT_OFFSETS_RETENTION_CHECK_INTERVAL_MS = 600_000  # Kafka's offsets.retention.check.interval.ms
CONSUMER_PROTOCOL_TYPE = "consumer"  # the protocol type of consumers (others: connect, streams' own)

TopicPartition = tuple[str, int]
_VERSION_SIZE = 2  # the int16 version every consumer protocol subscription starts with


def retention_ms(minutes: int) -> int:
    """``offsets.retention.minutes`` in ms, as Kafka's GroupCoordinatorConfig computes it."""
    return minutes * 60 * 1000


@attrs.frozen
class StandaloneGroupFacts:
    """A group that only commits offsets (assign(), no JoinGroup): no protocol type."""


@attrs.frozen
class ClassicGroupFacts:
    """What a classic group's offset retention depends on."""

    protocol_type: str
    empty: bool  # in state Empty
    stable: bool  # in state Stable
    # when it entered its state; None when unknown (pre-v2 group metadata, which decodes it as -1)
    current_state_timestamp: int | None
    # subscribed_topics_of(...): None when unknown (then a consumer group's offsets never expire),
    # frozenset() for an Empty consumer group, which subscribes to nothing
    subscribed_topics: frozenset[str] | None


@attrs.frozen
class ConsumerGroupFacts:
    """A KIP-848 consumer group: the topics its members subscribe to (names and regex matches)."""

    subscribed_topics: frozenset[str]


GroupFacts = StandaloneGroupFacts | ClassicGroupFacts | ConsumerGroupFacts
BaseTimestamp = Callable[[OffsetCommitValue], int]


@attrs.frozen
class Expiry:
    expired: tuple[TopicPartition, ...]  # the offsets to delete now (a tombstone each)
    all_expired: bool  # nothing is left and no transaction is open: an Empty group can go


def _base_timestamp(group: GroupFacts) -> BaseTimestamp | None:
    """Kafka's offsetExpirationCondition: what an offset's age counts from, None for never."""
    if isinstance(group, ClassicGroupFacts):
        if group.empty:
            became_empty = group.current_state_timestamp
            if became_empty is None:
                return lambda offset: offset.commit_timestamp
            return lambda offset: became_empty
        if group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None \
                and group.stable:
            return lambda offset: offset.commit_timestamp
        return None
    return lambda offset: offset.commit_timestamp


def _subscribed(group: GroupFacts, topic: str) -> bool:
    """Kafka's isSubscribedToTopic: a classic consumer group whose topics are unknown counts as
    subscribed to all of them, so nothing of it expires."""
    if isinstance(group, ConsumerGroupFacts):
        return topic in group.subscribed_topics
    if isinstance(group, ClassicGroupFacts):
        if group.subscribed_topics is not None:
            return topic in group.subscribed_topics
        return group.protocol_type == CONSUMER_PROTOCOL_TYPE
    return False


def is_offset_expired(offset: OffsetCommitValue, base_timestamp: int, now_ms: int, retention: int) -> bool:
    """An explicit expiry wins (pre-KIP-211 commits); otherwise ``retention`` ms past the base."""
    if offset.expire_timestamp != NO_EXPIRE_TIMESTAMP:
        return now_ms >= offset.expire_timestamp
    return now_ms - base_timestamp >= retention


def expire_offsets(group: GroupFacts, offsets: Mapping[TopicPartition, OffsetCommitValue], now_ms: int,
                   retention: int, *, pending_transactional: Collection[TopicPartition] = (),
                   open_transactions: bool = False) -> Expiry:
    """The offsets of ``group`` that have expired at ``now_ms`` (Kafka's cleanupExpiredOffsets).
    ``retention`` is ``retention_ms(offsets.retention.minutes)``."""
    base = _base_timestamp(group)
    if base is None:
        return Expiry((), False)
    expired = []
    everything = True
    for (topic, partition), offset in offsets.items():
        if (not _subscribed(group, topic) and (topic, partition) not in pending_transactional
                and is_offset_expired(offset, base(offset), now_ms, retention)):
            expired.append((topic, partition))
        else:
            everything = False
    return Expiry(tuple(expired), everything and not open_transactions)


def expiry_tombstones(group_id: str, expiry: Expiry) -> list[GroupRecord]:
    """The records that make an expiry durable: one offset tombstone per expired partition (the
    coordinator adds the group's own tombstone when it deletes an Empty group)."""
    return [GroupRecord(OffsetCommitKey(group_id, topic, partition), None)
            for topic, partition in expiry.expired]


@functools.cache
def _subscription_v0() -> Callable[[bytes, int, int], tuple[Mapping[str, Any], int]]:
    spec = next(s for s in standard_and_project_specs() if s.name == "ConsumerProtocolSubscription")
    decode: Callable[[bytes, int, int], tuple[Mapping[str, Any], int]] = \
        MessageSchema(spec, 0).compiled_codec()[0]
    return decode


def subscribed_topics_of(protocol_type: str | None, protocol: str | None,
                         subscriptions: Iterable[bytes]) -> frozenset[str] | None:
    """The topics a classic group's members subscribe to (Kafka's computeSubscribedTopics), from
    each member's metadata for the chosen ``protocol``: a version, then the subscription, read at
    v0, the prefix every version keeps. None when unknown: not a consumer group, no protocol chosen
    yet, or metadata that does not parse. An empty group subscribes to nothing."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    members = list(subscriptions)
    if not members:
        return frozenset()
    if protocol is None:
        return None
    decode = _subscription_v0()
    topics: set[str] = set()
    for metadata in members:
        data = bytes(metadata)
        if len(data) < _VERSION_SIZE:
            return None
        try:
            body, _ = decode(data, _VERSION_SIZE, len(data))
        except DecodeError:  # metadata a client made up: Kafka logs it and treats the topics as unknown
            return None
        topics.update(body["topics"] or ())
    return frozenset(topics)
