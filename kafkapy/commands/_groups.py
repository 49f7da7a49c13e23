"""The admin client behind ``kafkapy groups``: what kafka-consumer-groups.sh asks a cluster.

Groups live on their coordinators, so every group request goes to the broker FindCoordinator
names; ListGroups goes to every broker (each answers for the groups it coordinates), and log-end
offsets come from the partition leaders, through :class:`PartitionClient`.

The versions stop before the batched forms (FindCoordinator v4+, OffsetFetch v8+) that the
command does not need, so one body serves every version in range.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from kafkapy.client import ClientError, SimpleClient
from kafkapy.commands._partitions import BASE_VERSIONS, PartitionClient, check_error, error_code
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.schema import Body

__all__ = ["MOVED", "CommittedOffset", "GroupClient", "GroupDescription", "GroupListing", "MemberDescription",
           "decode_assignment"]

_GROUP_KEY_TYPE = 0  # FindCoordinator's key_type for a consumer group (1 is a transactional id)
_ADMIN_GENERATION = -1  # an OffsetCommit from outside the group (kafka-consumer-groups.sh's reset)
# Errors meaning "ask again, maybe elsewhere": the coordinator moved, or is still loading.
MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
_GROUP_VERSIONS: Mapping[ApiKey, tuple[int, int]] = {
    **BASE_VERSIONS,
    ApiKey.FIND_COORDINATOR: (1, 3),
    ApiKey.LIST_GROUPS: (0, 5),  # v5: the group types (--list --type)
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.OFFSET_FETCH: (2, 7),
    ApiKey.OFFSET_COMMIT: (2, 8),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
}


@dataclasses.dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str  # "" from a broker older than ListGroups v4
    group_type: str = ""  # "classic", "consumer", "share"; "" from a broker older than ListGroups v5


@dataclasses.dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[tuple[str, int], ...]  # (topic, partition), decoded for protocol type "consumer"


@dataclasses.dataclass(frozen=True)
class GroupDescription:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]
    coordinator: int


@dataclasses.dataclass(frozen=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    metadata: str | None


def decode_assignment(data: bytes) -> tuple[tuple[str, int], ...]:
    """The partitions in a classic consumer's ConsumerProtocolAssignment (any version: every
    version starts with the same topic list; what follows it is ignored)."""
    if not data:
        return ()
    try:
        offset = 2  # int16 version
        (topic_count,) = struct.unpack_from(">i", data, offset)
        offset += 4
        owned: list[tuple[str, int]] = []
        for _ in range(max(topic_count, 0)):
            (name_length,) = struct.unpack_from(">h", data, offset)
            offset += 2
            topic = data[offset:offset + name_length].decode()
            offset += name_length
            (partition_count,) = struct.unpack_from(">i", data, offset)
            offset += 4
            partitions = struct.unpack_from(f">{max(partition_count, 0)}i", data, offset)
            offset += 4 * max(partition_count, 0)
            owned.extend((topic, p) for p in partitions)
    except (struct.error, UnicodeDecodeError):
        return ()  # not a consumer assignment after all: show no partitions rather than fail
    return tuple(owned)


class GroupClient(PartitionClient):
    """Group admin requests routed to each group's coordinator."""

    versions: ClassVar[Mapping[ApiKey, tuple[int, int]]] = _GROUP_VERSIONS

    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "kafkapy-groups",
                 security: Mapping[str, Any] | None = None) -> None:
        super().__init__(bootstrap, timeout, client_id, security)
        self._coordinators: dict[str, int] = {}

    def coordinator(self, group_id: str) -> int:
        """The node id of the group's coordinator, waiting out COORDINATOR_NOT_AVAILABLE."""
        known = self._coordinators.get(group_id)
        if known is not None:
            return known

        def attempt() -> int:
            body = self._request(self._bootstrap, ApiKey.FIND_COORDINATOR,
                                 {"key": group_id, "key_type": _GROUP_KEY_TYPE})
            check_error(body["error_code"], f"find the coordinator of group {group_id!r}")
            node: int = body["node_id"]
            host, port = body["host"], body["port"]
            self._addresses[node] = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            return node

        node = self._retrying(attempt)
        self._coordinators[group_id] = node
        return node

    def address(self, node: int) -> str:
        """``host:port`` of a broker met so far (a coordinator, a partition leader), ``?`` if none."""
        return self._addresses.get(node, "?")

    def _forget(self) -> None:
        super()._forget()
        self._coordinators.clear()  # NOT_COORDINATOR: the group has moved

    def _at_coordinator(self, group_id: str) -> SimpleClient:
        return self._broker(self.coordinator(group_id))

    def list_groups(self, states: Sequence[str] = (), types: Sequence[str] = ()) -> list[GroupListing]:
        """Every group of every broker (each broker lists the groups it coordinates); ``types``
        filters by group type (ListGroups v5+, KIP-848's ``classic``, ``consumer``, ``share``)."""
        self.topics([])  # learns every broker's address
        found: dict[str, GroupListing] = {}
        for node in sorted(self._addresses):
            def attempt(node: int = node) -> Body:  # a retriable error is retried, as Kafka's admin does
                body = self._request(self._broker(node), ApiKey.LIST_GROUPS,
                                     {"states_filter": list(states), "types_filter": list(types)})
                check_error(body["error_code"], f"list groups on broker {node}")
                return body

            body = self._retrying(attempt)
            for group in body["groups"]:
                state = group.get("group_state", "")
                if states and state and state not in states:
                    continue  # a broker older than v4 ignores the filter
                if types and group.get("group_type", types[0]) not in types:
                    continue
                found[group["group_id"]] = GroupListing(group["group_id"], group["protocol_type"], state,
                                                        group.get("group_type", ""))
        return sorted(found.values(), key=lambda g: g.group_id)

    def describe_group(self, group_id: str) -> GroupDescription:
        """ConsumerGroupDescribe first, as Kafka's admin client asks since KIP-848; DescribeGroups
        for a classic group (GROUP_ID_NOT_FOUND there) or a broker without KIP-848."""
        def attempt() -> GroupDescription:
            node = self.coordinator(group_id)
            if self._serves(self._broker(node), ApiKey.CONSUMER_GROUP_DESCRIBE):
                described = self._describe_consumer_group(group_id, node)
                if described is not None:
                    return described
            body = self._request(self._broker(node), ApiKey.DESCRIBE_GROUPS,
                                 {"groups": [group_id], "include_authorized_operations": False})
            (group,) = body["groups"]
            error = error_code(group["error_code"])
            if error in MOVED:
                check_error(error, f"describe group {group_id!r}")
            consumer = group["protocol_type"] in ("consumer", "")
            members = tuple(
                MemberDescription(m["member_id"], m.get("group_instance_id"), m["client_id"],
                                  m["client_host"],
                                  decode_assignment(m["member_assignment"]) if consumer else ())
                for m in group["members"])
            return GroupDescription(group_id, error, group["group_state"], group["protocol_type"],
                                    group["protocol_data"], members, node)

        return self._retrying(attempt)

    def _serves(self, connection: SimpleClient, api_key: ApiKey) -> bool:
        try:
            self._version(connection, api_key)
        except ClientError:
            return False
        return True

    def _describe_consumer_group(self, group_id: str, node: int) -> GroupDescription | None:
        """A KIP-848 group as ConsumerGroupDescribe answers it; None when it is no such group."""
        body = self._request(self._broker(node), ApiKey.CONSUMER_GROUP_DESCRIBE,
                             {"group_ids": [group_id], "include_authorized_operations": False})
        (group,) = body["groups"]
        error = error_code(group["error_code"])
        if error is ErrorCode.GROUP_ID_NOT_FOUND:
            return None
        if error in MOVED:
            check_error(error, f"describe group {group_id!r}")
        members = tuple(
            MemberDescription(m["member_id"], m.get("instance_id"), m["client_id"], m["client_host"],
                              tuple((tp["topic_name"], p) for tp in m["assignment"]["topic_partitions"]
                                    for p in sorted(tp["partitions"])))
            for m in group["members"])
        return GroupDescription(group_id, error, group["group_state"], "consumer", group["assignor_name"],
                                members, node)

    def committed(self, group_id: str) -> list[CommittedOffset]:
        """Every committed offset of the group (OffsetFetch with all topics)."""
        return self._retrying(lambda: self._committed(group_id))

    def _committed(self, group_id: str) -> list[CommittedOffset]:
        body = self._request(self._at_coordinator(group_id), ApiKey.OFFSET_FETCH,
                             {"group_id": group_id, "topics": None, "require_stable": False})
        check_error(body.get("error_code", 0), f"fetch the offsets of group {group_id!r}")
        offsets = []
        for topic in body["topics"]:
            for p in topic["partitions"]:
                check_error(p["error_code"], f"offset of {topic['name']}-{p['partition_index']}")
                if p["committed_offset"] >= 0:
                    offsets.append(CommittedOffset(topic["name"], p["partition_index"], p["committed_offset"],
                                                   p.get("metadata")))
        return sorted(offsets, key=lambda c: (c.topic, c.partition))

    def commit(self, group_id: str,
               offsets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], ErrorCode]:
        """Commit ``offsets`` as an outsider (no generation), as the reset does."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({
                "partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
                "committed_metadata": ""})
        def attempt() -> Body:
            body = self._request(self._at_coordinator(group_id), ApiKey.OFFSET_COMMIT, request)
            for topic in body["topics"]:
                for p in topic["partitions"]:
                    if error_code(p["error_code"]) in MOVED:
                        check_error(p["error_code"], f"commit for group {group_id!r}")
            return body

        request = {
            "group_id": group_id, "generation_id_or_member_epoch": _ADMIN_GENERATION, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": topic, "partitions": parts} for topic, parts in by_topic.items()]}
        body = self._retrying(attempt)
        return {(topic["name"], p["partition_index"]): error_code(p["error_code"])
                for topic in body["topics"] for p in topic["partitions"]}

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            results.update(self._retrying(functools.partial(self._delete, group_id)))
        return results

    def _delete(self, group_id: str) -> dict[str, ErrorCode]:
        body = self._request(self._at_coordinator(group_id), ApiKey.DELETE_GROUPS,
                             {"groups_names": [group_id]})
        results = {}
        for result in body["results"]:
            error = error_code(result["error_code"])
            if error in MOVED:
                check_error(error, f"delete group {group_id!r}")
            results[result["group_id"]] = error
        return results

    def delete_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]]
                       ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        """OffsetDelete: the group's error, and each partition's (Kafka refuses a partition of a topic
        the group's members are subscribed to with GROUP_SUBSCRIBED_TO_TOPIC)."""
        by_topic: dict[str, list[dict[str, int]]] = {}
        for topic, partition in sorted(set(partitions)):
            by_topic.setdefault(topic, []).append({"partition_index": partition})
        request = {"group_id": group_id,
                   "topics": [{"name": topic, "partitions": parts} for topic, parts in by_topic.items()]}

        def attempt() -> Body:
            body = self._request(self._at_coordinator(group_id), ApiKey.OFFSET_DELETE, request)
            if error_code(body["error_code"]) in MOVED:
                check_error(body["error_code"], f"delete offsets of group {group_id!r}")
            return body

        body = self._retrying(attempt)
        by_partition = {(topic["name"], p["partition_index"]): error_code(p["error_code"])
                        for topic in body["topics"] for p in topic["partitions"]}
        return error_code(body["error_code"]), by_partition
