"""ConsumerGroupHeartbeat (key 68) and ConsumerGroupDescribe (key 69), v0-1, over ConsumerGroups.

Version notes: v1 (KIP-1082) makes the client generate its member id and adds
``SubscribedTopicRegex`` to the heartbeat and ``MemberType`` to describe's members. Both APIs
are flexible from v0.

The handlers turn decoded bodies into :class:`kafkapy.groups.consumer_group.HeartbeatRequest`
values and the results back into response bodies. Before a heartbeat is answered its records
are handed to ``persist`` (the coordinator's ``__consumer_offsets`` writer); if that fails, the
group is put back as it was and the error is the answer, so a client is never told what was not
made durable. Operations on one group run one at a time for that reason.

Which broker coordinates which group (NOT_COORDINATOR), ACLs and FindCoordinator are the group
coordinator module's; it registers :meth:`ConsumerGroupHandlers.apis` and drives
:meth:`ConsumerGroupHandlers.expire` at :meth:`ConsumerGroupHandlers.next_deadline`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.assignors import ASSIGNORS, Assignment, TopicId, freeze
from kafkapy.groups.consumer_group import (
    ClassicJoinAnswer,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroups,
    HeartbeatRequest,
    HeartbeatResponse,
)
from kafkapy.groups.group import JoinRequest
from kafkapy.groups.migration import MIGRATION_POLICY_KEY, MigrationPolicy
from kafkapy.groups.records import GroupMetadataKey, GroupMetadataValue, GroupRecord
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import AUTHORIZED_OPERATIONS_OMITTED
from kafkapy.server.config import ConfigError, ConfigKey
from kafkapy.server.modules import ApiHandler, RequestContext
from kafkapy.validators import AtLeast, OneOf

__all__ = ["CONSUMER_GROUP_CONFIG_KEYS", "CONSUMER_GROUP_VERSIONS", "ConsumerGroupHandlers", "Persist",
           "consumer_group_config"]

CONSUMER_GROUP_VERSIONS = VersionRange(0, 1)
MEMBER_TYPE_CLASSIC = 0  # ConsumerGroupDescribe v1's MemberType: a member that joined with JoinGroup
MEMBER_TYPE_CONSUMER = 1  # ... and one that joined with ConsumerGroupHeartbeat

#: Kafka's CoordinatorRuntime: a timer's failed write is tried again this much later.
RETRY_BACKOFF_MS = 500
_COORDINATOR_GONE = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)

#: Kafka's class names for its assignors, accepted in ``group.consumer.assignors`` as the short names.
_ASSIGNOR_CLASSES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
                     "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}

REBALANCE_PROTOCOLS_KEY = "group.coordinator.rebalance.protocols"
_GROUP_TYPES = ("consumer", "classic", "share", "unknown")  # Kafka's Group.GroupType, its validator's list


def _rebalance_protocols_problem(protocols: list[str]) -> str | None:
    """Kafka's checks (GroupCoordinatorConfig's validator, then KafkaConfig): known group types,
    and classic never left out."""
    unknown = [p for p in protocols if p.lower() not in _GROUP_TYPES]
    if unknown:
        return f"must be a list of {', '.join(_GROUP_TYPES)}"
    if "classic" not in (p.lower() for p in protocols):
        return "Disabling the 'CLASSIC' protocol is not supported."
    return None


CONSUMER_GROUP_CONFIG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(REBALANCE_PROTOCOLS_KEY, "list", "classic,consumer",
              "Kafka 4.0's default: the group types served; without consumer, ConsumerGroupHeartbeat "
              "answers UNSUPPORTED_VERSION, as Kafka's does. share has no effect: kafkapy serves share "
              "groups always.", _rebalance_protocols_problem),
    ConfigKey("group.consumer.session.timeout.ms", "int", 45_000,
              "Kafka's default: a consumer-protocol member not heard from for this long is fenced",
              AtLeast(1)),
    ConfigKey("group.consumer.heartbeat.interval.ms", "int", 5_000,
              "Kafka's default: how often consumer-protocol members are told to heartbeat", AtLeast(1)),
    ConfigKey("group.consumer.max.size", "int", 2**31 - 1,
              "Kafka's default (no limit): more members get GROUP_MAX_SIZE_REACHED", AtLeast(1)),
    ConfigKey("group.consumer.assignors", "list", "uniform,range",
              "Server-side assignors, short names or Kafka's class names; the first is the default"),
    ConfigKey(MIGRATION_POLICY_KEY, "string", MigrationPolicy.BIDIRECTIONAL.value,
              "Kafka's default: which online conversions of groups with members are made: bidirectional, "
              "upgrade (classic to consumer), downgrade (consumer to classic) or disabled (case-blind)",
              # CaseInsensitiveValidString: its message lists them in the order of Kafka's HashSet
              OneOf(("disabled", "downgrade", "upgrade", "bidirectional"), ignore_case=True)),
)


def consumer_group_config(config: Mapping[str, Any]) -> ConsumerGroupConfig:
    """The broker's ``group.consumer.*`` settings as the groups take them."""
    defaults = {key.name: key.default for key in CONSUMER_GROUP_CONFIG_KEYS}

    def setting(name: str) -> Any:
        value = config.get(name)
        return defaults[name] if value is None else value

    names = setting("group.consumer.assignors")
    listed = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if n.strip()]
    assignors = tuple(_ASSIGNOR_CLASSES.get(n, n) for n in listed)
    unknown = [n for n in assignors if n not in ASSIGNORS]
    if unknown or not assignors:
        raise ConfigError(f"invalid value {names!r} for group.consumer.assignors: known assignors are "
                          f"{', '.join(ASSIGNORS)}")
    return ConsumerGroupConfig(session_timeout_ms=int(setting("group.consumer.session.timeout.ms")),
                               heartbeat_interval_ms=int(setting("group.consumer.heartbeat.interval.ms")),
                               max_size=int(setting("group.consumer.max.size")), assignors=assignors,
                               migration_policy=MigrationPolicy.parse(setting(MIGRATION_POLICY_KEY)),
                               classic_max_size=int(config.get("group.max.size") or 2**31 - 1))


#: Makes a group's records durable, raising KafkaApiError when it cannot.
Persist = Callable[[str, Sequence[GroupRecord]], Awaitable[None]]


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


async def _nowhere(group_id: str, records: Sequence[GroupRecord]) -> None:
    """Keeps nothing: for tests and brokers without an offsets topic."""


class ConsumerGroupHandlers:
    def __init__(self, groups: ConsumerGroups, *, persist: Persist = _nowhere,
                 clock: Callable[[], int] = monotonic_ms,
                 on_downgrade: Callable[[str, GroupMetadataValue, bool], None] | None = None) -> None:
        self.groups = groups
        self._persist = persist
        self._clock = clock
        # Called once the records of a downgrade are written: the classic group to install, and
        # whether it rebalances (not when a classic static member took the last consumer-protocol
        # member's place: Kafka's convertToClassicGroup with a joining member).
        self._on_downgrade = on_downgrade
        self._locks: dict[str, asyncio.Lock] = {}

    def apis(self) -> dict[int, ApiHandler]:
        return {ApiKey.CONSUMER_GROUP_HEARTBEAT: ApiHandler(CONSUMER_GROUP_VERSIONS, self.handle_heartbeat),
                ApiKey.CONSUMER_GROUP_DESCRIBE: ApiHandler(CONSUMER_GROUP_VERSIONS, self.handle_describe)}

    async def handle_heartbeat(self, context: RequestContext, request: Request) -> Mapping[str, Any]:
        host = context.connection.client_address[0]
        return await self.heartbeat(request.body, context.api_version, client_id=context.client_id or "",
                                    client_host=f"/{host}")

    def handle_describe(self, context: RequestContext, request: Request) -> Mapping[str, Any]:
        return self.describe(request.body, context.api_version)

    # -- ConsumerGroupHeartbeat -------------------------------------------------------------------

    async def heartbeat(self, body: Mapping[str, Any], version: int, *, client_id: str = "",
                        client_host: str = "", upgrade: Sequence[GroupRecord] = ()) -> dict[str, Any]:
        """``upgrade``: the records converting a classic group with members, written with the
        heartbeat's (KIP-848's online upgrade); if they cannot be, the refusal is the answer."""
        try:
            request = _heartbeat_request(body, version, client_id, client_host)
            async with self._lock(request.group_id):
                before = self._snapshot(request.group_id)
                timers = self.groups.timers_of(request.group_id)
                result = self.groups.heartbeat(request, self._clock(), upgrade)
                try:
                    await self._durable(request.group_id, result.records, before)
                except KafkaApiError:
                    # A heartbeat not written renewed no session and fenced no one: a static
                    # member it would have replaced keeps its deadline.
                    self.groups.restore_timers(request.group_id, timers)
                    raise
        except KafkaApiError as refusal:
            return {"throttle_time_ms": 0, "error_code": refusal.code, "error_message": refusal.message,
                    "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}
        return _heartbeat_response(result.response)

    def check_heartbeat(self, body: Mapping[str, Any], version: int) -> None:
        """Raise the KafkaApiError a malformed heartbeat gets, before anything else is touched."""
        self.groups.validate(_heartbeat_request(body, version, "", ""))

    # -- classic members of a consumer group (KIP-848's migration) --------------------------------

    async def classic_join(self, request: JoinRequest) -> ClassicJoinAnswer:
        """A JoinGroup for a consumer group with members; KafkaApiError when refused."""
        async with self._lock(request.group_id):
            before = self._snapshot(request.group_id)
            timers = self.groups.timers_of(request.group_id)
            answer, records = self.groups.classic_join(request, self._clock())
            try:
                await self._durable(request.group_id, records, before, rebalance=False)
            except KafkaApiError:
                self.groups.restore_timers(request.group_id, timers)
                raise
            return answer

    async def classic_sync(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                           protocol_type: str | None, protocol_name: str | None) -> bytes:
        async with self._lock(group_id):
            return self.groups.classic_sync(group_id, member_id, instance_id, generation_id, protocol_type,
                                            protocol_name, self._clock())

    def classic_heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                          generation_id: int) -> ErrorCode:
        """Writes nothing, so it needs no turn of the group's lock."""
        return self.groups.classic_heartbeat(group_id, member_id, instance_id, generation_id, self._clock())

    async def classic_leave(self, group_id: str, leaving: Sequence[tuple[str, str | None]]
                            ) -> list[tuple[str, ErrorCode]]:
        """Per member its id and code; a group whose leave cannot be written answers that error
        for everyone who would have left."""
        async with self._lock(group_id):
            before = self._snapshot(group_id)
            timers = self.groups.timers_of(group_id)
            answers, records = self.groups.classic_leave(group_id, leaving)
            try:
                await self._durable(group_id, records, before)
            except KafkaApiError as failure:
                self.groups.restore_timers(group_id, timers)
                failed = ErrorCode(failure.code)
                return [(m, failed if code == ErrorCode.NONE else code) for m, code in answers]
            return answers

    # -- timers -----------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self.groups.next_deadline()

    async def expire(self) -> None:
        """Fence the members whose session or rebalance timeout passed, and persist that. A group
        whose fencing cannot be written is put back with those deadlines RETRY_BACKOFF_MS ahead,
        as Kafka's coordinator timers retry a failed write (not once the coordinator moved:
        its new coordinator starts the timers when it loads the group)."""
        now = self._clock()
        for group_id in self.groups.timed_groups():
            async with self._lock(group_id):
                before = self._snapshot(group_id)
                saved = self.groups.timers_of(group_id)
                records = self.groups.expire_group(group_id, now)
                try:
                    await self._durable(group_id, records, before)
                except KafkaApiError as failure:
                    if failure.code not in _COORDINATOR_GONE:
                        self.groups.retry_expiry(group_id, saved, now, RETRY_BACKOFF_MS)

    # -- ConsumerGroupDescribe --------------------------------------------------------------------

    def describe(self, body: Mapping[str, Any], version: int) -> dict[str, Any]:
        names = self.groups.topic_names()
        described = []
        for group_id in body.get("group_ids") or ():
            try:
                group = self.groups.describe(group_id)
            except KafkaApiError as refusal:
                described.append({"error_code": refusal.code, "error_message": refusal.message,
                                  "group_id": group_id, "group_state": "", "group_epoch": 0,
                                  "assignment_epoch": 0, "assignor_name": "", "members": [],
                                  "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
                continue
            described.append(self._described_group(group, names, version))
        return {"throttle_time_ms": 0, "groups": described}

    def _described_group(self, group: ConsumerGroup, names: Mapping[TopicId, str],
                         version: int) -> dict[str, Any]:
        members = []
        for member in group.members.values():
            entry: dict[str, Any] = {
                "member_id": member.member_id, "instance_id": member.instance_id, "rack_id": member.rack_id,
                "member_epoch": member.member_epoch, "client_id": member.client_id,
                "client_host": member.client_host,
                "subscribed_topic_names": list(member.subscribed_topic_names),
                "subscribed_topic_regex": member.subscribed_topic_regex,
                "assignment": _described_assignment(member.assigned, names),
                "target_assignment": _described_assignment(group.target_of(member.member_id), names)}
            if version >= 1:
                entry["member_type"] = (MEMBER_TYPE_CLASSIC if member.uses_classic_protocol
                                        else MEMBER_TYPE_CONSUMER)
            members.append(entry)
        return {"error_code": ErrorCode.NONE, "error_message": None, "group_id": group.group_id,
                "group_state": group.state.value, "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch,
                "assignor_name": self.groups.preferred_assignor(group.members.values()), "members": members,
                "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}

    # -- one group at a time, undone when it cannot be made durable -------------------------------

    def _lock(self, group_id: str) -> asyncio.Lock:
        lock = self._locks.get(group_id)
        if lock is None:
            lock = self._locks[group_id] = asyncio.Lock()
        return lock

    def _snapshot(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.groups.get(group_id)
        return None if group is None else group.copy()

    async def _durable(self, group_id: str, records: Sequence[GroupRecord],
                       before: ConsumerGroup | None, *, rebalance: bool = True) -> None:
        if not records:
            return
        try:
            await self._persist(group_id, records)
        except KafkaApiError:
            if before is None:
                self.groups.groups.pop(group_id, None)
            else:
                self.groups.groups[group_id] = before
            raise
        for record in records:  # a downgrade: the classic group takes over once it is written
            if isinstance(record.key, GroupMetadataKey) and isinstance(record.value, GroupMetadataValue) \
                    and self._on_downgrade is not None:
                self._on_downgrade(group_id, record.value, rebalance)


def _heartbeat_request(body: Mapping[str, Any], version: int, client_id: str,
                       client_host: str) -> HeartbeatRequest:
    names = body.get("subscribed_topic_names")
    owned = body.get("topic_partitions")
    return HeartbeatRequest(
        group_id=body["group_id"], member_id=body["member_id"], member_epoch=body["member_epoch"],
        instance_id=body.get("instance_id"), rack_id=body.get("rack_id"),
        rebalance_timeout_ms=body.get("rebalance_timeout_ms", -1),
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=body.get("subscribed_topic_regex"),
        server_assignor=body.get("server_assignor"),
        topic_partitions=None if owned is None else _assignment(owned),
        client_id=client_id, client_host=client_host, api_version=version)


def _assignment(topic_partitions: Sequence[Mapping[str, Any]]) -> Assignment:
    merged: dict[TopicId, set[int]] = {}
    for entry in topic_partitions:
        merged.setdefault(entry["topic_id"], set()).update(entry["partitions"])
    return freeze(merged)


def _heartbeat_response(response: HeartbeatResponse) -> dict[str, Any]:
    assignment = None
    if response.assignment is not None:
        assignment = {"topic_partitions": [{"topic_id": topic, "partitions": sorted(parts)}
                                           for topic, parts in sorted(response.assignment.items())]}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "member_id": response.member_id, "member_epoch": response.member_epoch,
            "heartbeat_interval_ms": response.heartbeat_interval_ms, "assignment": assignment}


def _described_assignment(assignment: Assignment, names: Mapping[TopicId, str]) -> dict[str, Any]:
    """A topic deleted since it was assigned is left out, as Kafka's describe skips the topic ids
    its metadata no longer knows (until the member's next heartbeat revokes them)."""
    return {"topic_partitions": [
        {"topic_id": topic, "topic_name": names[topic], "partitions": sorted(parts)}
        for topic, parts in sorted(assignment.items()) if topic in names]}
