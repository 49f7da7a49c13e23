"""The admin client behind ``kafkapy share-groups``: what kafka-share-groups.sh asks a cluster
about KIP-932 share groups.

A share group lives on its coordinator (FindCoordinator key type 0, as a consumer group), so
ShareGroupDescribe and the three offsets APIs go there; ListGroups v5 with the ``share`` type
filter goes to every broker. A share group's "offset" on a partition is its share-partition start
offset (SPSO), which DescribeShareGroupOffsets answers, v1 with the lag.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from kafkapy.commands._groups import MOVED, GroupClient, GroupListing
from kafkapy.commands._partitions import check_error, error_code
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.schema import Body

__all__ = ["SHARE", "Outcome", "ShareGroupClient", "ShareGroupDescription", "ShareMember",
           "SharePartitionOffset"]

SHARE = "share"  # ListGroups' group type of a share group
_UNKNOWN = -1  # DescribeShareGroupOffsets' uninitialized start offset, unknown lag or leader epoch


@dataclasses.dataclass(frozen=True)
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    assignment: tuple[tuple[str, int], ...]  # (topic, partition), sorted
    subscribed: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class ShareGroupDescription:
    group_id: str
    error: ErrorCode
    message: str | None
    state: str
    group_epoch: int
    assignment_epoch: int
    members: tuple[ShareMember, ...]
    coordinator: int
    coordinator_address: str


@dataclasses.dataclass(frozen=True)
class SharePartitionOffset:
    topic: str
    partition: int
    start_offset: int | None  # None: the group holds no state for it yet
    leader_epoch: int | None
    lag: int | None  # None: unknown, or a broker without DescribeShareGroupOffsets v1


@dataclasses.dataclass(frozen=True)
class Outcome:
    """An admin request's answer: the group's error with the broker's message, and each item's."""

    error: ErrorCode
    message: str | None
    items: dict[str, tuple[ErrorCode, str | None]]


def _known(value: int) -> int | None:
    return None if value < 0 else value


class ShareGroupClient(GroupClient):
    """Share group admin requests routed to each group's coordinator."""

    versions: ClassVar[Mapping[ApiKey, tuple[int, int]]] = {
        **GroupClient.versions,
        ApiKey.LIST_GROUPS: (5, 5),  # the group type filter
        ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),  # v0 was Kafka 4.0's early access
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),  # v1 adds the lag
        ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
        ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    }

    def list_share_groups(self, states: Sequence[str] = ()) -> list[GroupListing]:
        return self.list_groups(states, (SHARE,))

    def describe_share_group(self, group_id: str) -> ShareGroupDescription:
        def attempt() -> ShareGroupDescription:
            node = self.coordinator(group_id)
            body = self._request(self._broker(node), ApiKey.SHARE_GROUP_DESCRIBE,
                                 {"group_ids": [group_id], "include_authorized_operations": False})
            (group,) = body["groups"]
            error = error_code(group["error_code"])
            if error in MOVED:
                check_error(error, f"describe share group {group_id!r}")
            members = tuple(sorted(
                (ShareMember(m["member_id"], m["client_id"], m["client_host"], m["member_epoch"],
                             tuple(sorted((tp["topic_name"], p) for tp in m["assignment"]["topic_partitions"]
                                          for p in tp["partitions"])),
                             tuple(m["subscribed_topic_names"]))
                 for m in group["members"]), key=lambda m: m.member_id))
            return ShareGroupDescription(group_id, error, group.get("error_message"), group["group_state"],
                                         group["group_epoch"], group["assignment_epoch"], members, node,
                                         self._addresses.get(node, "?"))

        return self._retrying(attempt)

    def share_offsets(self, group_id: str, topics: Sequence[str] = ()
                      ) -> tuple[ErrorCode, str | None, list[SharePartitionOffset]]:
        """Every share-partition the group holds state for: those the request with topics null
        answers (Kafka's admin client asks so), then every partition of their topics and of
        ``topics``, asked by name. A kafkapy coordinator answers the null form from the
        share-partitions it has seen (docs/share-groups.md, "Not (yet) done"), which in a cluster
        can miss some whose leader is another broker; asked by name, it reads each from the share
        coordinator."""
        error, message, rows = self._described_offsets(group_id, None)
        wanted = sorted({r.topic for r in rows} | set(topics))
        if error is ErrorCode.NONE and wanted:
            named: list[dict[str, Any]] = [{"topic_name": t, "partitions": self.partitions(t)}
                                           for t in wanted]
            error, message, more = self._described_offsets(group_id, named)
            found = {(r.topic, r.partition): r for r in rows}
            found.update({(r.topic, r.partition): r for r in more if r.start_offset is not None})
            rows = list(found.values())
        return error, message, sorted(rows, key=lambda r: (r.topic, r.partition))

    def _described_offsets(self, group_id: str, topics: list[dict[str, Any]] | None
                           ) -> tuple[ErrorCode, str | None, list[SharePartitionOffset]]:
        def attempt() -> Body:
            body = self._request(self._at_coordinator(group_id), ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
                                 {"groups": [{"group_id": group_id, "topics": topics}]})
            if error_code(body["groups"][0]["error_code"]) in MOVED:
                check_error(body["groups"][0]["error_code"], f"describe offsets of share group {group_id!r}")
            return body

        (group,) = self._retrying(attempt)["groups"]
        rows = [SharePartitionOffset(topic["topic_name"], p["partition_index"], _known(p["start_offset"]),
                                     _known(p["leader_epoch"]), _known(p.get("lag", _UNKNOWN)))
                for topic in group["topics"] for p in topic["partitions"]
                if error_code(p["error_code"]) is ErrorCode.NONE]
        return error_code(group["error_code"]), group.get("error_message"), rows

    def alter_share_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int]) -> Outcome:
        """AlterShareGroupOffsets: the group's error, and each ``topic-partition``'s."""
        by_topic: dict[str, list[dict[str, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({"partition_index": partition, "start_offset": offset})
        request = {"group_id": group_id,
                   "topics": [{"topic_name": t, "partitions": parts} for t, parts in by_topic.items()]}
        body = self._retrying(lambda: self._at_group(group_id, ApiKey.ALTER_SHARE_GROUP_OFFSETS, request))
        return Outcome(error_code(body["error_code"]), body.get("error_message"),
                       {f"{t['topic_name']}-{p['partition_index']}": (error_code(p["error_code"]),
                                                                      p.get("error_message"))
                        for t in body["responses"] for p in t["partitions"]})

    def delete_share_offsets(self, group_id: str, topics: Sequence[str]) -> Outcome:
        """DeleteShareGroupOffsets: the group's error, and each topic's."""
        request = {"group_id": group_id, "topics": [{"topic_name": t} for t in sorted(set(topics))]}
        body = self._retrying(lambda: self._at_group(group_id, ApiKey.DELETE_SHARE_GROUP_OFFSETS, request))
        return Outcome(error_code(body["error_code"]), body.get("error_message"),
                       {t["topic_name"]: (error_code(t["error_code"]), t.get("error_message"))
                        for t in body["responses"]})

    def _at_group(self, group_id: str, api_key: ApiKey, request: Mapping[str, object]) -> Body:
        body = self._request(self._at_coordinator(group_id), api_key, request)
        if error_code(body["error_code"]) in MOVED:
            check_error(body["error_code"], f"share group {group_id!r}")
        return body
