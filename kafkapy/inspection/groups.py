"""What the group coordinators hold, as frozen values: ``broker.groups()`` for tests.

Read on the broker's loop from each broker's group coordinator (the one that leads the group's
partition of ``__consumer_offsets``), so a view is one consistent moment and never a live
object: changing it changes nothing in the broker. Classic groups' member metadata and
assignments are bytes the clients made; where the protocol type is ``consumer`` they are read
as Kafka's ConsumerProtocolSubscription/Assignment (the v0 prefix every version keeps), so a
test sees topics and partitions. KIP-848 groups keep their assignment by topic id; it is shown
by topic name.
"""

from __future__ import annotations

import functools
import types
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from kafkapy.errors import DecodeError
from kafkapy.groups.consumer_group import ConsumerGroup
from kafkapy.groups.group import CLASSIC, ClassicGroup
from kafkapy.groups.module import GroupsModule
from kafkapy.groups.records import OffsetCommitValue
from kafkapy.groups.retention import CONSUMER_PROTOCOL_TYPE
from kafkapy.protocol.schema import MessageSchema
from kafkapy.protocol.specs import standard_and_project_specs

__all__ = ["CommittedOffset", "GroupMemberView", "GroupView", "group_views"]

CONSUMER = "consumer"  # a KIP-848 group's kind (ListGroups v5's group_type)
_VERSION_SIZE = 2  # the int16 version that heads the consumer protocol's bytes
Assigned = Mapping[str, tuple[int, ...]]
Decoder = Callable[[bytes, int, int], tuple[Mapping[str, Any], int]]
Offsets = tuple["CommittedOffset", ...]


def _frozen_map(items: Mapping[str, tuple[int, ...]]) -> Assigned:
    return types.MappingProxyType(dict(sorted(items.items())))


@attrs.frozen
class CommittedOffset:
    """One partition's offset as the coordinator holds it. ``pending``: written inside a
    transaction not yet ended (OffsetFetch does not show it), by ``producer_id``."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int  # -1: not given
    metadata: str
    commit_timestamp: int  # epoch ms, as written to __consumer_offsets
    pending: bool = False
    producer_id: int = -1


@attrs.frozen
class GroupMemberView:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    subscription: tuple[str, ...]  # topic names, sorted; () when the metadata cannot be read
    assignment: Assigned = attrs.field(hash=False)  # topic -> partitions, sorted
    member_epoch: int | None = None  # KIP-848 members only
    subscription_regex: str | None = None  # KIP-848 members only


@attrs.frozen
class GroupView:
    """One group. ``kind`` is "classic" or "consumer" (KIP-848); a group that only holds offsets
    (a consumer outside group management commits) is classic with protocol type "" and no
    members. ``generation`` is the classic generation, or the KIP-848 group epoch; ``protocol``
    the classic group's chosen protocol (the assignor, for consumers), or the KIP-848 assignor."""

    group_id: str
    kind: str
    protocol_type: str
    state: str  # Kafka's name: Empty, PreparingRebalance, Stable, Assigning, Reconciling, ...
    generation: int
    protocol: str | None
    leader: str | None  # classic only
    members: tuple[GroupMemberView, ...]
    offsets: tuple[CommittedOffset, ...]  # committed, by topic and partition
    pending_offsets: tuple[CommittedOffset, ...]  # transactional, not yet committed or aborted
    coordinator: int  # the broker id that coordinates it
    # Its partition of __consumer_offsets (Kafka's hash of the id modulo offsets.topic.num.partitions),
    # whose leader is the coordinator: broker.move_coordinator(group=...) moves that leadership.
    state_partition: int
    assignment_epoch: int | None = None  # KIP-848 only

    def committed(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> committed offset: what OffsetFetch answers."""
        return {(o.topic, o.partition): o.offset for o in self.offsets}

    def member(self, member_id: str) -> GroupMemberView | None:
        return next((m for m in self.members if m.member_id == member_id), None)


@functools.cache
def _decoder(name: str) -> Decoder:
    spec = next(s for s in standard_and_project_specs() if s.name == name)
    decode: Decoder = MessageSchema(spec, 0).compiled_codec()[0]
    return decode


def _consumer_protocol(name: str, data: bytes) -> Mapping[str, Any] | None:
    """The v0 prefix of a ConsumerProtocolSubscription/Assignment; None if it is not one."""
    if len(data) < _VERSION_SIZE:
        return None
    try:
        body, _ = _decoder(name)(data, _VERSION_SIZE, len(data))
    except DecodeError:
        return None
    return body


def subscription_topics(data: bytes) -> tuple[str, ...]:
    body = _consumer_protocol("ConsumerProtocolSubscription", bytes(data))
    return tuple(sorted(body["topics"] or ())) if body is not None else ()


def assignment_partitions(data: bytes) -> Assigned:
    body = _consumer_protocol("ConsumerProtocolAssignment", bytes(data))
    if body is None:
        return _frozen_map({})
    assigned: dict[str, tuple[int, ...]] = {}
    for topic in body["assigned_partitions"] or ():
        assigned[topic["topic"]] = tuple(sorted({*assigned.get(topic["topic"], ()), *topic["partitions"]}))
    return _frozen_map(assigned)


def _offsets(module: GroupsModule, group_id: str) -> tuple[Offsets, Offsets]:
    store = module.coordinator.offsets
    committed = []
    for topic, partition in store.partitions(group_id):
        value = store.get(group_id, topic, partition)
        if value is not None:
            committed.append(_offset(topic, partition, value))
    pending = tuple(_offset(topic, partition, value, producer_id)
                    for producer_id, topic, partition, value in module.txn_offsets.pending.of_group(group_id))
    return tuple(committed), pending


def _offset(topic: str, partition: int, value: OffsetCommitValue,
            producer_id: int | None = None) -> CommittedOffset:
    return CommittedOffset(topic, partition, value.offset, value.leader_epoch, value.metadata,
                           value.commit_timestamp, producer_id is not None,
                           -1 if producer_id is None else producer_id)


def _classic(module: GroupsModule, group: ClassicGroup, broker_id: int) -> GroupView:
    consumer = group.protocol_type == CONSUMER_PROTOCOL_TYPE
    members = []
    for m in group.members.values():
        metadata = m.metadata_for(group.protocol_name) if group.protocol_name else \
            (m.protocols[0][1] if m.protocols else b"")
        members.append(GroupMemberView(
            m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
            m.rebalance_timeout_ms, subscription_topics(metadata) if consumer else (),
            assignment_partitions(m.assignment) if consumer else _frozen_map({})))
    offsets, pending = _offsets(module, group.group_id)
    return GroupView(group.group_id, CLASSIC, group.protocol_type or "", group.state.value,
                     group.generation_id, group.protocol_name, group.leader_id, tuple(members), offsets,
                     pending, broker_id, module.group_log.partition_for(group.group_id))


def _consumer(module: GroupsModule, group: ConsumerGroup, broker_id: int,
              names: Mapping[uuid.UUID, str]) -> GroupView:
    groups = module.consumer.groups
    session_ms = groups.config.session_timeout_ms
    members = tuple(GroupMemberView(  # a classic member (KIP-848's migration) has its own session
        m.member_id, m.instance_id, m.client_id, m.client_host,
        m.classic.session_timeout_ms if m.classic is not None else session_ms, m.rebalance_timeout_ms,
        tuple(sorted(m.subscribed_topic_names)),
        _frozen_map({names.get(topic_id, str(topic_id)): tuple(sorted(parts))
                     for topic_id, parts in m.assigned.items()}),
        m.member_epoch, m.subscribed_topic_regex) for m in group.members.values())
    offsets, pending = _offsets(module, group.group_id)
    return GroupView(group.group_id, CONSUMER, CONSUMER_PROTOCOL_TYPE, group.state.value, group.group_epoch,
                     groups.preferred_assignor(group.members.values()), None, members, offsets, pending,
                     broker_id, module.group_log.partition_for(group.group_id), group.assignment_epoch)


def group_views(module: GroupsModule, topic_names: Mapping[uuid.UUID, str],
                wanted: Iterable[str] | None = None) -> list[GroupView]:
    """The groups ``module``'s broker coordinates now (``wanted`` ones only, if given), sorted by
    id: classic and KIP-848 groups, and groups that hold only offsets (committed or pending)."""
    coordinator = module.coordinator
    ids = set(coordinator.groups) | set(module.consumer.groups.groups) | set(coordinator.offsets.groups()) \
        | module.txn_offsets.pending.groups()
    if wanted is not None:
        ids &= set(wanted)
    broker_id = module.services.broker_id
    views = []
    for group_id in sorted(ids):
        if not module.coordinates_now(group_id):
            continue
        consumer_group = module.consumer.get(group_id)
        classic = coordinator.groups.get(group_id)
        if consumer_group is not None:
            views.append(_consumer(module, consumer_group, broker_id, topic_names))
        elif classic is not None:
            views.append(_classic(module, classic, broker_id))
        else:  # offsets alone (a group made again after a load, before its first request)
            offsets, pending = _offsets(module, group_id)
            views.append(GroupView(group_id, CLASSIC, "", "Empty", 0, None, None, (), offsets, pending,
                                   broker_id, module.group_log.partition_for(group_id)))
    return views
