"""The server-side assignors of KIP-848 consumer groups: ``uniform`` (Kafka's default) and ``range``.

Theory of operation. With the consumer protocol the coordinator, not a group leader, computes each
member's *target assignment* whenever the group epoch moves past the assignment epoch. An assignor
sees every member's subscription (topic ids) and its previous target, plus each subscribed topic's
partition count, and returns a full new target. It is a pure function: the group
(:mod:`kafkapy.groups.consumer_group`) decides when to call it and reconciles members towards it.

``uniform`` spreads partitions so that member loads differ by at most one, and keeps as much of
the previous target as balance allows (stickiness), because every moved partition costs a
revoke-then-assign round trip. Like Kafka it has two builders: when every member subscribes to the
same topics (homogeneous) a quota pass is enough; otherwise (heterogeneous) partitions go to the
least-loaded *eligible* member and are then moved while some eligible member has two fewer.

``range`` gives each member a contiguous range of every topic it subscribes to, members ordered
static-first (by instance id) then by member id, so topics with equal partition counts are
co-partitioned: the member that gets partition 3 of one topic gets partition 3 of the others.
Like Kafka 4.0's it ignores the previous target: it is deterministic, so an unchanged group gets
the same ranges again.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Protocol

import attrs

__all__ = ["ASSIGNORS", "DEFAULT_ASSIGNOR", "Assignment", "Assignor", "MemberSpec", "RangeAssignor",
           "Targets", "TopicId", "UniformAssignor", "freeze", "partitions_of"]

TopicId = uuid.UUID
#: Topic id -> partition numbers. Never mutated once built; empty topics are left out.
Assignment = Mapping[TopicId, frozenset[int]]
#: Member id -> its new target, as an assignor returns it.
Targets = dict[str, dict[TopicId, frozenset[int]]]


def freeze(assignment: Mapping[TopicId, Iterable[int]]) -> dict[TopicId, frozenset[int]]:
    """The canonical form: frozensets, no empty topics, so two equal assignments compare equal."""
    return {topic: frozenset(parts) for topic, parts in assignment.items() if parts}


def partitions_of(assignment: Assignment) -> set[tuple[TopicId, int]]:
    return {(topic, p) for topic, parts in assignment.items() for p in parts}


@attrs.frozen
class MemberSpec:
    """What an assignor knows of a member: its subscription resolved to topic ids, its previous
    target (for stickiness) and its static instance id (range orders static members first)."""

    subscribed: frozenset[TopicId]
    current: Assignment = attrs.field(factory=dict)
    instance_id: str | None = None


class Assignor(Protocol):
    @property
    def name(self) -> str: ...

    def assign(self, members: Mapping[str, MemberSpec],
               partition_counts: Mapping[TopicId, int]) -> Targets:
        """Every member's new target. Topics missing from ``partition_counts`` (not created yet,
        or deleted) get no partitions; every partition of a subscribed topic goes to exactly one
        member subscribed to it."""


def _is_homogeneous(members: Mapping[str, MemberSpec]) -> bool:
    subscriptions = {spec.subscribed for spec in members.values()}
    return len(subscriptions) <= 1


def _retained(members: Mapping[str, MemberSpec], partition_counts: Mapping[TopicId, int]
              ) -> dict[str, list[tuple[TopicId, int]]]:
    """Each member's previous partitions that it may keep: still subscribed, still existing, and
    not claimed by a member earlier in id order (a previous target never overlaps, but a replayed
    or hand-made one might)."""
    claimed: set[tuple[TopicId, int]] = set()
    kept: dict[str, list[tuple[TopicId, int]]] = {}
    for member_id in sorted(members):
        spec = members[member_id]
        mine: list[tuple[TopicId, int]] = []
        for topic in sorted(spec.current):
            if topic not in spec.subscribed:
                continue
            count = partition_counts.get(topic, 0)
            for p in sorted(spec.current[topic]):
                if 0 <= p < count and (topic, p) not in claimed:
                    claimed.add((topic, p))
                    mine.append((topic, p))
        kept[member_id] = mine
    return kept


def _to_assignments(owned: Mapping[str, Iterable[tuple[TopicId, int]]]) -> Targets:
    result: Targets = {}
    for member_id, pairs in owned.items():
        by_topic: dict[TopicId, set[int]] = {}
        for topic, p in pairs:
            by_topic.setdefault(topic, set()).add(p)
        result[member_id] = freeze(by_topic)
    return result


class UniformAssignor:
    """Kafka's ``uniform`` assignor (``org.apache.kafka.coordinator.group.assignor.UniformAssignor``):
    balanced within one partition, sticky."""

    name = "uniform"

    def assign(self, members: Mapping[str, MemberSpec],
               partition_counts: Mapping[TopicId, int]) -> Targets:
        if not members:
            return {}
        if _is_homogeneous(members):
            return self.assign_homogeneous(members, partition_counts)
        return self.assign_heterogeneous(members, partition_counts)

    @staticmethod
    def assign_homogeneous(members: Mapping[str, MemberSpec],
                           partition_counts: Mapping[TopicId, int]) -> Targets:
        """One quota pass. Every member may hold ``total // n`` partitions and ``total % n`` of them
        one more; the extra slots go to the members that already hold the most, so a balanced
        previous target is kept whole."""
        topics = sorted(next(iter(members.values())).subscribed & partition_counts.keys())
        total = sum(partition_counts[topic] for topic in topics)
        base_quota, extra_slots = divmod(total, len(members))
        kept = _retained(members, partition_counts)
        by_load = sorted(members, key=lambda m: (-len(kept[m]), m))
        quota = {m: base_quota + (1 if i < extra_slots else 0) for i, m in enumerate(by_load)}
        owned = {m: kept[m][:quota[m]] for m in sorted(members)}
        taken = {tp for pairs in owned.values() for tp in pairs}
        free = iter([(topic, p) for topic in topics for p in range(partition_counts[topic])
                     if (topic, p) not in taken])
        for member_id in sorted(members):
            missing = quota[member_id] - len(owned[member_id])
            owned[member_id].extend(next(free) for _ in range(missing))
        return _to_assignments(owned)

    @staticmethod
    def assign_heterogeneous(members: Mapping[str, MemberSpec],
                             partition_counts: Mapping[TopicId, int]) -> Targets:
        """Keep what is still valid, give each free partition to the least-loaded member subscribed
        to its topic (topics with the fewest subscribers first, as they have the least choice),
        then move partitions while an eligible member holds two fewer than the owner. Each move
        lowers the sum of squared loads, so the loop ends."""
        kept = _retained(members, partition_counts)
        owner: dict[tuple[TopicId, int], str] = {tp: m for m, pairs in kept.items() for tp in pairs}
        load = {m: len(pairs) for m, pairs in kept.items()}
        subscribers: dict[TopicId, list[str]] = {}
        for member_id in sorted(members):
            for topic in members[member_id].subscribed:
                if topic in partition_counts:
                    subscribers.setdefault(topic, []).append(member_id)

        def least_loaded(topic: TopicId) -> str:
            return min(subscribers[topic], key=lambda m: (load[m], m))

        for topic in sorted(subscribers, key=lambda t: (len(subscribers[t]), t)):
            for p in range(partition_counts[topic]):
                if (topic, p) not in owner:
                    chosen = least_loaded(topic)
                    owner[(topic, p)] = chosen
                    load[chosen] += 1

        moved = True
        while moved:
            moved = False
            for tp in sorted(owner, key=lambda tp: (-load[owner[tp]], owner[tp], tp)):
                current = owner[tp]
                target = least_loaded(tp[0])
                if load[target] < load[current] - 1:
                    owner[tp] = target
                    load[current] -= 1
                    load[target] += 1
                    moved = True
        owned: dict[str, list[tuple[TopicId, int]]] = {m: [] for m in members}
        for tp, member_id in owner.items():
            owned[member_id].append(tp)
        return _to_assignments(owned)


class RangeAssignor:
    """Kafka's server-side ``range`` assignor
    (``org.apache.kafka.coordinator.group.assignor.RangeAssignor``): per topic, the subscribers in
    order each take ``partitions // subscribers`` consecutive partitions, the first
    ``partitions % subscribers`` of them one more."""

    name = "range"

    def assign(self, members: Mapping[str, MemberSpec],
               partition_counts: Mapping[TopicId, int]) -> Targets:
        ordered = sorted(members, key=lambda m: _range_order(m, members[m]))
        result: Targets = {m: {} for m in members}
        subscribed = {topic for spec in members.values() for topic in spec.subscribed}
        topics = sorted(subscribed & partition_counts.keys())
        for topic in topics:
            subscribers = [m for m in ordered if topic in members[m].subscribed]
            base, extra = divmod(partition_counts[topic], len(subscribers))
            start = 0
            for i, member_id in enumerate(subscribers):
                end = start + base + (1 if i < extra else 0)
                if end > start:
                    result[member_id][topic] = frozenset(range(start, end))
                start = end
        return result


def _range_order(member_id: str, spec: MemberSpec) -> tuple[int, str]:
    """Static members first, by instance id (they come back under the same id, so their ranges
    stay put across restarts), then dynamic members by member id."""
    if spec.instance_id is not None:
        return (0, spec.instance_id)
    return (1, member_id)


#: ``group.consumer.assignors``' default in Kafka 4.0 is "uniform,range"; the first is the default.
ASSIGNORS: Mapping[str, Assignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
DEFAULT_ASSIGNOR = "uniform"
