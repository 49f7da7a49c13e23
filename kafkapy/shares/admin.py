"""Share groups' admin APIs: ShareGroupDescribe (77) v1, DescribeShareGroupOffsets (90) v0-1,
AlterShareGroupOffsets (91) v0 and DeleteShareGroupOffsets (92) v0.

Version notes: DescribeShareGroupOffsets v1 adds each partition's ``Lag``.

DescribeShareGroupOffsets treats what has no state as absence of data, as Kafka's
GroupCoordinatorService does: a group, topic or partition with nothing kept answers start offset
-1 and lag -1 without an error (as OffsetFetch answers a partition with no committed offset).

A share group's "offset" on a partition is its share-partition's start offset (SPSO): every
record before it is done. Describe answers -1 for a partition the group never fetched (Kafka's
uninitialized start offset). Alter and Delete need an empty group (NON_EMPTY_GROUP), as Kafka's:
an active member could hold records the change would pull from under it. Alter starts the
share-partition again at the given offset with nothing in flight (for an id no group has, kafkapy
makes an empty share group to hold it, so offsets can be set before the first member joins);
Delete forgets it, so the next fetch starts at ``share.auto.offset.reset``.

The rows are computed here from the groups and share-partitions the module hands in; checks of
authorization and of the coordinator are the module's. With a share coordinator (kafkapy.sharestate)
the module reads the share-partitions it describes from there (``stored``), so every broker
answers the same, also for a group whose members have not joined again since a restart; Alter and
Delete answer what to change (``changes``) and the module writes it there.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.server.auth import AUTHORIZED_OPERATIONS_OMITTED
from kafkapy.shares.fetch import ShareKey
from kafkapy.shares.share_group import ShareGroup, ShareGroups
from kafkapy.shares.share_partition import RecordState, SharePartition, SharePartitionLimits

__all__ = ["NO_START_OFFSET", "SIMPLE_ASSIGNOR", "ShareAdmin"]

NO_START_OFFSET = -1  # Kafka's uninitialized start offset (and unknown lag)
NO_LEADER_EPOCH = -1
SIMPLE_ASSIGNOR = "simple"  # the name Kafka's SimpleAssignor reports


class ShareAdmin:
    def __init__(self, groups: ShareGroups, partitions: dict[ShareKey, SharePartition],
                 limits: SharePartitionLimits, topics: Callable[[], Mapping[str, tuple[uuid.UUID, int]]],
                 high_watermark: Callable[[str, int], int | None]) -> None:
        self._groups = groups
        self._partitions = partitions
        self._limits = limits
        self._topics = topics  # name -> (topic id, partition count)
        self._high_watermark = high_watermark  # None when this broker cannot read the partition

    # -- ShareGroupDescribe -------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> dict[str, Any]:
        group = self._group(group_id)
        names = {topic_id: name for name, (topic_id, _) in self._topics().items()}
        return {"error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id,
                "group_state": group.state.value, "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch, "assignor_name": SIMPLE_ASSIGNOR,
                "members": [{"member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                             "client_id": m.client_id, "client_host": m.client_host,
                             "subscribed_topic_names": list(m.subscribed_topic_names),
                             "assignment": {"topic_partitions": [
                                 {"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(p)}
                                 for t, p in sorted(m.assignment.items())]}}
                            for m in group.members.values()],
                "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}

    @staticmethod
    def refused_describe(group_id: str, refusal: KafkaApiError) -> dict[str, Any]:
        return {"error_code": refusal.code, "error_message": refusal.message, "group_id": group_id,
                "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
                "members": [], "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}

    def _group(self, group_id: str) -> ShareGroup:
        group = self._groups.groups.get(group_id)
        if group is None:
            raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return group

    def _empty_group(self, group_id: str, *, create: bool) -> ShareGroup:
        group = self._groups.groups.get(group_id)
        if group is None and create:
            group = self._groups.groups[group_id] = ShareGroup(group_id)
        if group is None:
            raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if group.members:
            raise KafkaApiError(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
        return group

    # -- DescribeShareGroupOffsets ----------------------------------------------------------------

    def describe_offsets(self, group_id: str, topics: Sequence[Mapping[str, Any]] | None, version: int,
                         stored: Mapping[ShareKey, SharePartition] | None = None) -> dict[str, Any]:
        """One group's row; ``topics`` None asks for every partition the group holds state for.
        ``stored``: the share-partitions as the share coordinator keeps them, instead of this
        broker's."""
        held_here = self._partitions if stored is None else stored
        known = self._topics()
        if topics is None:
            by_id = {topic_id: name for name, (topic_id, _) in known.items()}
            held: dict[str, list[int]] = {}
            for g, topic_id, index in sorted(held_here, key=lambda k: (str(k[1]), k[2])):
                if g == group_id and topic_id in by_id:
                    held.setdefault(by_id[topic_id], []).append(index)
            topics = [{"topic_name": name, "partitions": indexes} for name, indexes in held.items()]
        rows = []
        for topic in topics:
            name = topic["topic_name"]
            found = known.get(name)
            partitions = []
            for index in topic["partitions"]:
                row = {"partition_index": index, "start_offset": NO_START_OFFSET,
                       "leader_epoch": NO_LEADER_EPOCH, "error_code": ErrorCode.NONE, "error_message": None}
                if version >= 1:
                    row["lag"] = NO_START_OFFSET
                if found is not None:  # no topic, no partition, no state: -1, no error (Kafka's)
                    partition = held_here.get((group_id, found[0], index))
                    if partition is not None:
                        row["start_offset"] = partition.start_offset
                        if version >= 1:
                            row["lag"] = self._lag(name, index, partition)
                partitions.append(row)
            rows.append({"topic_name": name, "topic_id": found[0] if found else uuid.UUID(int=0),
                         "partitions": partitions})
        return {"group_id": group_id, "topics": rows, "error_code": ErrorCode.NONE, "error_message": None}

    def _lag(self, topic: str, index: int, partition: SharePartition) -> int:
        """Records after the SPSO not yet finished: the high watermark less the SPSO,
        less those acknowledged or archived out of order; -1 when the log is not readable here."""
        high_watermark = self._high_watermark(topic, index)
        if high_watermark is None:
            return NO_START_OFFSET
        done = sum(1 for r in partition.records.values()
                   if r.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED))
        return max(high_watermark - partition.start_offset - done, 0)

    # -- AlterShareGroupOffsets / DeleteShareGroupOffsets -----------------------------------------

    def alter_offsets(self, group_id: str, topics: Sequence[Mapping[str, Any]],
                      changes: dict[ShareKey, int] | None = None) -> list[dict[str, Any]]:
        """The rows; with ``changes`` the new start offsets go there for the module to write,
        instead of into this broker's share-partitions."""
        self._empty_group(group_id, create=True)
        known = self._topics()
        rows = []
        for topic in topics:
            name = topic["topic_name"]
            found = known.get(name)
            partitions = []
            for p in topic["partitions"]:
                code, message = ErrorCode.NONE, None
                if found is None or not 0 <= p["partition_index"] < found[1]:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    message = "This server does not host this topic-partition."
                elif p["start_offset"] < 0:
                    code, message = ErrorCode.INVALID_REQUEST, f"Invalid start offset {p['start_offset']}."
                elif changes is not None:
                    changes[(group_id, found[0], p["partition_index"])] = p["start_offset"]
                else:
                    self._partitions[(group_id, found[0], p["partition_index"])] = SharePartition(
                        p["start_offset"], self._limits)
                partitions.append({"partition_index": p["partition_index"], "error_code": code,
                                   "error_message": message})
            rows.append({"topic_name": name, "topic_id": found[0] if found else uuid.UUID(int=0),
                         "partitions": partitions})
        return rows

    def check_deletable(self, group_id: str) -> None:
        """GROUP_ID_NOT_FOUND or NON_EMPTY_GROUP, before anything of DeleteShareGroupOffsets."""
        self._empty_group(group_id, create=False)

    def delete_offsets(self, group_id: str, topics: Sequence[Mapping[str, Any]],
                       changes: list[ShareKey] | None = None,
                       held: Collection[str] | None = None) -> list[dict[str, Any]]:
        """The rows; every share-partition of each topic goes (listed in ``changes`` too, for the
        module to delete where the share coordinator keeps them). A topic not in ``held`` (None:
        all are) has no state of the group: Kafka's UNKNOWN_TOPIC_OR_PARTITION ("There is no
        offset information to delete.")."""
        self._empty_group(group_id, create=False)
        known = self._topics()
        rows = []
        for topic in topics:
            name = topic["topic_name"]
            found = known.get(name)
            if found is None:
                rows.append({"topic_name": name, "topic_id": uuid.UUID(int=0),
                             "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "error_message": "This server does not host this topic."})
                continue
            if held is not None and name not in held:
                rows.append({"topic_name": name, "topic_id": found[0],
                             "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "error_message": "There is no offset information to delete."})
                continue
            for key in [k for k in self._partitions if k[0] == group_id and k[1] == found[0]]:
                del self._partitions[key]
            if changes is not None:
                changes.extend((group_id, found[0], index) for index in range(found[1]))
            rows.append({"topic_name": name, "topic_id": found[0], "error_code": ErrorCode.NONE,
                         "error_message": None})
        return rows
