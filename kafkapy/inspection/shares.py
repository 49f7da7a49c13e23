"""What the shares modules hold, as frozen values: ``broker.share_groups()`` and
``broker.share_partitions()`` for tests.

Read on the broker's loop, so a view is one consistent moment and never a live object. Topics
are shown by name (the share state keeps their ids). A share group is read from the broker that
coordinates it; a share-partition from the broker that leads its partition, where ShareFetch
keeps it.
"""

from __future__ import annotations

import types
import uuid
from collections.abc import Collection, Mapping

import attrs

from kafkapy.shares.module import ShareModule
from kafkapy.shares.share_partition import RecordState

__all__ = ["InFlightRecord", "ShareGroupView", "ShareMemberView", "SharePartitionView", "share_group_views",
           "share_partition_views"]


@attrs.frozen
class ShareMemberView:
    member_id: str
    member_epoch: int
    client_id: str
    subscribed: tuple[str, ...]
    assignment: Mapping[str, tuple[int, ...]]  # topic name -> partitions


@attrs.frozen
class ShareGroupView:
    group_id: str
    coordinator: int  # the broker id holding it
    state: str  # Kafka's names: Empty, Stable
    group_epoch: int
    members: tuple[ShareMemberView, ...]


@attrs.frozen
class InFlightRecord:
    offset: int
    state: str  # AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED
    delivery_count: int
    member_id: str | None  # the holder while ACQUIRED


@attrs.frozen
class SharePartitionView:
    group_id: str
    topic: str
    partition: int
    leader: int  # the broker id holding it
    start_offset: int  # SPSO: every record before it is done
    end_offset: int  # SPEO: the first offset never acquired
    records: tuple[InFlightRecord, ...]  # the window between them, in offset order

    def state_of(self, offset: int) -> str:
        """A record's state: ARCHIVED before the window (done), AVAILABLE after it."""
        if offset < self.start_offset:
            return RecordState.ARCHIVED.name
        return next((r.state for r in self.records if r.offset == offset), RecordState.AVAILABLE.name)


def share_group_views(module: ShareModule, broker_id: int, names: Mapping[uuid.UUID, str],
                      wanted: Collection[str] | None) -> list[ShareGroupView]:
    views = []
    for group in module.groups.groups.values():
        if wanted is not None and group.group_id not in wanted:
            continue
        members = tuple(ShareMemberView(
            m.member_id, m.member_epoch, m.client_id, m.subscribed_topic_names,
            types.MappingProxyType({names.get(t, str(t)): tuple(sorted(p)) for t, p in sorted(
                m.assignment.items(), key=lambda item: names.get(item[0], str(item[0])))}))
            for m in sorted(group.members.values(), key=lambda m: m.member_id))
        views.append(ShareGroupView(group.group_id, broker_id, group.state.value, group.group_epoch, members))
    return views


def share_partition_views(module: ShareModule, broker_id: int, names: Mapping[uuid.UUID, str],
                          group_id: str | None) -> list[SharePartitionView]:
    views = []
    for (group, topic_id, index), partition in module.partitions.items():
        if group_id is not None and group != group_id:
            continue
        records = tuple(InFlightRecord(offset, r.state.name, r.delivery_count, r.member_id)
                        for offset, r in sorted(partition.records.items()))
        views.append(SharePartitionView(group, names.get(topic_id, str(topic_id)), index, broker_id,
                                        partition.start_offset, partition.end_offset, records))
    return views
