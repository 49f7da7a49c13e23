"""The shares module: KIP-932 share groups ("queues for Kafka") on the wire.

ShareGroupHeartbeat (76) v1, ShareFetch (78) v1-2 and ShareAcknowledge (79) v1-2, the versions of
kafkapy's specs (v0 was Kafka 4.0's early access and is not served; librdkafka 2.16 sends v1), and
the admin APIs of admin.py. What it owns, and where the decisions are:

* membership: share_group.py (join, heartbeat, leave, the simple assignor, session expiry). The
  heartbeat goes to the group coordinator found by FindCoordinator, as a consumer group's does:
  this module asks the groups module (GROUP_COORDINATOR) for its coordinator check and for the one
  group-id namespace (a classic or consumer group's id is GROUP_ID_NOT_FOUND here, and the groups
  module asks this one back: see ``GroupsModule.foreign_group``);
* ShareFetch and ShareAcknowledge: fetch.py (share sessions, share-partitions, reading the
  partition logs, acquisition locks);
* ShareGroupDescribe and the offsets APIs: admin.py.

Timers (the broker's clock, so a VirtualClock drives them): one for members' sessions here, one for
acquisition locks in fetch.py, each set to the earliest deadline after every change.

Share-partition state is kept by the share coordinator (kafkapy.sharestate, ``__share_group_state``)
when its module runs, so it survives leader moves and restarts; membership is in memory (Kafka keeps
it in ``__consumer_offsets``): a restart forgets the groups, whose members join again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.group_configs import timeout_overrides
from kafkapy.groups.module import GROUP_COORDINATOR, GroupsModule
from kafkapy.groups.offset_reset import parse_share_offset_reset
from kafkapy.groups.records import GroupRecord
from kafkapy.groups.timers import Timers
from kafkapy.protocol import Request, fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import authorized_operations
from kafkapy.server.config import ConfigKey
from kafkapy.server.connection import ConnectionInfo
from kafkapy.server.core import INTERNAL_TOPICS
from kafkapy.server.modules import Answer, ApiHandler, Module, RequestContext
from kafkapy.server.operations import ResourceType
from kafkapy.server.services import PARTITION_LOGS, BrokerServices, PartitionLogsProvider
from kafkapy.server.share_coordinator import SHARE_COORDINATOR
from kafkapy.shares.admin import NO_START_OFFSET, ShareAdmin
from kafkapy.shares.fetch import (
    SHARE_ACKNOWLEDGE_VERSIONS,
    SHARE_FETCH_VERSIONS,
    ShareFetcher,
    ShareKey,
    ShareLogs,
)
from kafkapy.shares.group_records import Initialized, Written, changes, records_of, replay
from kafkapy.shares.sessions import valid_member_id
from kafkapy.shares.share_group import (
    LEAVE_EPOCH,
    ShareGroupConfig,
    ShareGroups,
    ShareHeartbeat,
    ShareHeartbeatResult,
    validate_heartbeat,
)
from kafkapy.shares.share_partition import SharePartition, SharePartitionLimits
from kafkapy.sharestate.module import ShareCoordinatorModule
from kafkapy.sharestate.state import NO_EPOCH, UNINITIALIZED_START_OFFSET
from kafkapy.validators import AtLeast, Between

__all__ = ["SHARE_CONFIG_KEYS", "ShareModule"]

SHARE_GROUP_HEARTBEAT_VERSIONS = VersionRange(1, 1)
SHARE_GROUP_DESCRIBE_VERSIONS = VersionRange(1, 1)
DESCRIBE_SHARE_GROUP_OFFSETS_VERSIONS = VersionRange(0, 1)
ALTER_SHARE_GROUP_OFFSETS_VERSIONS = VersionRange(0, 0)
DELETE_SHARE_GROUP_OFFSETS_VERSIONS = VersionRange(0, 0)
SHARE = "share"  # ListGroups' group type and protocol type of a share group
_SESSION_TIMER = ("share-groups", "sessions")



def _reset(value: Any) -> str | None:
    try:
        parse_share_offset_reset(value)
    except ValueError as refused:
        return f"must be earliest, latest or by_duration:<PnDTnHnMn.nS> ({refused})"
    return None


SHARE_CONFIG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("group.share.session.timeout.ms", "int", 45_000,
              "Kafka's default: a share group member not heard from for this long is fenced", AtLeast(1)),
    ConfigKey("group.share.heartbeat.interval.ms", "int", 5_000,
              "Kafka's default: how often share group members are told to heartbeat", AtLeast(1)),
    ConfigKey("group.share.max.size", "int", 200,
              "Kafka's default: more members get GROUP_MAX_SIZE_REACHED", Between(1, 1000)),
    ConfigKey("group.share.record.lock.duration.ms", "int", 30_000,
              "Kafka's default: how long an acquired record stays locked to its member",
              Between(1_000, 3_600_000)),
    ConfigKey("group.share.delivery.count.limit", "int", 5,
              "Kafka's default: a record delivered this often is archived instead of released",
              Between(2, 10)),
    ConfigKey("group.share.partition.max.record.locks", "int", 2000,
              "Kafka's default (earlier releases: 200): the most in-flight records of one share-partition",
              Between(100, 10_000)),
    ConfigKey("group.share.max.share.sessions", "int", 2000,
              "Kafka's default: the most share sessions this broker holds (SHARE_SESSION_LIMIT_REACHED "
              "past it); at least group.share.max.size", AtLeast(1)),
    ConfigKey("share.auto.offset.reset", "string", "latest",
              "Where a share group starts on a partition it never consumed, for groups that do not set "
              "their own (Kafka has it only as a group config, default latest): earliest, latest or "
              "by_duration:<ISO-8601 duration>", _reset),
)

class ShareModule(Module):
    name = "shares"
    wants = (GROUP_COORDINATOR, PARTITION_LOGS, SHARE_COORDINATOR)
    config_keys = SHARE_CONFIG_KEYS

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        config = services.config
        self.timers = Timers(services.clock,
                             lambda delay, callback: services.loop.call_later(delay, callback),
                             services.wall_clock)
        self.groups = ShareGroups(ShareGroupConfig(
            session_timeout_ms=config["group.share.session.timeout.ms"],
            heartbeat_interval_ms=config["group.share.heartbeat.interval.ms"],
            max_size=config["group.share.max.size"]), self._topic_infos)
        limits = SharePartitionLimits(
            lock_duration_ms=config["group.share.record.lock.duration.ms"],
            delivery_count_limit=config["group.share.delivery.count.limit"],
            max_record_locks=config["group.share.partition.max.record.locks"])
        self.fetcher = ShareFetcher(services, self.timers, limits, config["share.auto.offset.reset"],
                                    self._allowed)
        self.fetcher.sessions.max_sessions = config["group.share.max.share.sessions"]
        self.partitions = self.fetcher.partitions  # the share-partitions (for inspection and admin)
        self._coordinator: GroupsModule | None = None
        self.admin = ShareAdmin(self.groups, self.partitions, limits, self._topic_infos,
                                self.fetcher.high_watermark)
        # The ShareGroup* records last written to __consumer_offsets per group (group_records.py),
        # and one writer at a time per group, so each write is the difference from the last.
        self._written: dict[str, Written] = {}
        # Each group's share-partitions whose state the share coordinator keeps, as this broker
        # (its coordinator) saw them initialized: its ShareGroupStatePartitionMetadata.
        self._initialized: dict[str, Initialized] = {}
        self._group_locks: dict[str, asyncio.Lock] = {}
        self._group_writes: set[asyncio.Task[None]] = set()

    def apis(self) -> Mapping[int, ApiHandler]:
        return {ApiKey.SHARE_GROUP_HEARTBEAT: ApiHandler(SHARE_GROUP_HEARTBEAT_VERSIONS, self.heartbeat),
                ApiKey.SHARE_FETCH: ApiHandler(SHARE_FETCH_VERSIONS, self.fetcher.share_fetch),
                ApiKey.SHARE_ACKNOWLEDGE: ApiHandler(SHARE_ACKNOWLEDGE_VERSIONS,
                                                     self.fetcher.share_acknowledge),
                ApiKey.SHARE_GROUP_DESCRIBE: ApiHandler(SHARE_GROUP_DESCRIBE_VERSIONS, self.describe),
                ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: ApiHandler(DESCRIBE_SHARE_GROUP_OFFSETS_VERSIONS,
                                                                self.describe_offsets),
                ApiKey.ALTER_SHARE_GROUP_OFFSETS: ApiHandler(ALTER_SHARE_GROUP_OFFSETS_VERSIONS,
                                                             self.alter_offsets),
                ApiKey.DELETE_SHARE_GROUP_OFFSETS: ApiHandler(DELETE_SHARE_GROUP_OFFSETS_VERSIONS,
                                                              self.delete_offsets)}

    async def start(self) -> None:
        coordinator = self.services.provider(GROUP_COORDINATOR, Module)
        if isinstance(coordinator, GroupsModule):
            self._coordinator = coordinator
            coordinator.foreign_groups.append(self)
            for partition in coordinator.loaded_partitions():  # loaded before this module started
                replayed = coordinator.group_log.replay(partition)
                self.load_records(partition, [r for r in replayed if isinstance(r, GroupRecord)])
            # GROUP config resources: a group's own share.* values over the broker-wide ones.
            self.fetcher.group_setting = coordinator.group_configs.value
            self.groups.overrides = timeout_overrides(coordinator.group_configs, "share")
        share_coordinator = self.services.provider(SHARE_COORDINATOR, Module)
        if isinstance(share_coordinator, ShareCoordinatorModule):
            # Share-partition state kept by the share coordinator (kafkapy.sharestate), so it
            # survives leader moves and restarts.
            self.fetcher.persister = share_coordinator.persister
            self.fetcher.on_initialized = self._share_partition_initialized
        logs = self.services.provider(PARTITION_LOGS, Module)
        if isinstance(logs, PartitionLogsProvider):
            partitions = logs.partition_logs()
            if isinstance(partitions, ShareLogs):  # the data plane's Partitions
                self.fetcher.logs = partitions

    def on_close(self, connection: ConnectionInfo) -> None:
        """The share sessions the connection opened end with it (Kafka's ShareSessionCache)."""
        self.fetcher.connection_closed(connection.id)

    async def stop(self) -> None:
        self.timers.cancel_all()
        self.fetcher.cancel_writes()
        for task in list(self._group_writes):
            task.cancel()

    # -- the group records in __consumer_offsets (group_records.py) -------------------------------

    async def _write_group(self, group_id: str) -> None:
        """Write what changed of the group since its last write (tombstones once it is gone),
        before the change is answered; KafkaApiError when the coordinator's partition refused it
        (the difference is written again with the next change)."""
        coordinator = self._coordinator
        if coordinator is None:
            return
        lock = self._group_locks.setdefault(group_id, asyncio.Lock())
        async with lock:
            group = self.groups.groups.get(group_id)
            now = records_of(group, self._initialized.get(group_id)) if group is not None else {}
            records = changes(self._written.get(group_id, {}), now)
            if records:
                await coordinator.group_log.append(group_id, records)
            if now:
                self._written[group_id] = now
            else:
                self._written.pop(group_id, None)
                self._group_locks.pop(group_id, None)

    def _write_group_later(self, group_id: str) -> None:
        """A change no request waits for (a session ran out): written in the background."""
        task = self.services.loop.create_task(self._write_group_quietly(group_id))
        self._group_writes.add(task)
        task.add_done_callback(self._group_writes.discard)

    async def _write_group_quietly(self, group_id: str) -> None:
        try:
            await self._write_group(group_id)
        except KafkaApiError as refusal:
            self.services.log.info("share group %r not written: %s", group_id, refusal.code.name)

    def load_records(self, partition: int, records: Sequence[GroupRecord]) -> None:
        """The coordinator loaded a ``__consumer_offsets`` partition: its share groups come back
        from their records, each member's session starting now (as consumer groups' do)."""
        now = self.timers.now_ms()
        for group_id, loaded in replay(records, now).items():
            if group_id in self.groups.groups:
                continue  # served here already: what memory holds is newer than the log
            for member in loaded.group.members.values():
                member.session_deadline_ms = now + self.groups.timeouts(group_id)[0]
            self.groups.groups[group_id] = loaded.group
            self._written[group_id] = loaded.written
            self._initialized[group_id] = dict(loaded.initialized)
        self._schedule_sessions()

    def unload(self, partition: int) -> None:
        """Another broker coordinates the partition's groups now: they go from here."""
        coordinator = self._coordinator
        if coordinator is None:
            return
        partition_for = coordinator.group_log.partition_for
        for group_id in [g for g in self.groups.groups if partition_for(g) == partition]:
            del self.groups.groups[group_id]
            self._written.pop(group_id, None)
            self._initialized.pop(group_id, None)
        self._schedule_sessions()

    def _share_partition_initialized(self, key: ShareKey) -> None:
        """The share coordinator keeps ``key``'s state now: recorded with the group when this
        broker coordinates it (a partition leader elsewhere tells its coordinator nothing)."""
        group_id, topic_id, partition = key
        coordinator = self._coordinator
        if coordinator is None or group_id not in self.groups.groups \
                or not coordinator.coordinates_now(group_id):
            return
        name, partitions = self._initialized.get(group_id, {}).get(topic_id, (None, frozenset()))
        if partition in partitions:
            return
        name = name or next((n for n, (t, _) in self._topic_infos().items() if t == topic_id), None)
        if name is None:
            return
        self._initialized.setdefault(group_id, {})[topic_id] = (name, partitions | {partition})
        self._write_group_later(group_id)

    def _initialized_keys(self, group_id: str) -> set[ShareKey]:
        return {(group_id, topic_id, index)
                for topic_id, (_, partitions) in self._initialized.get(group_id, {}).items()
                for index in partitions}

    # -- the one namespace (kafkapy.groups.module.ForeignGroups) ---------------------------------

    def holds_group(self, group_id: str) -> bool:
        return group_id in self.groups.groups

    def listed_groups(self, states: Collection[str], types: Collection[str]) -> list[dict[str, Any]]:
        """ListGroups v5's rows: group type and protocol type "share" (Kafka's ShareGroup)."""
        if types and SHARE not in types:
            return []
        return [{"group_id": g.group_id, "protocol_type": SHARE, "group_state": g.state.value,
                 "group_type": SHARE}
                for g in self.groups.groups.values() if not states or g.state.value.lower() in states]

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups: an empty share group goes, with its share-partitions, also where the
        share coordinator keeps them (every partition of every topic but the internal ones: the
        coordinator lists nothing by group, and Kafka's record of the initialized ones, in
        ``__consumer_offsets``, is not kept here)."""
        group = self.groups.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups.groups[group_id]
        self._initialized.pop(group_id, None)
        try:
            await self._write_group(group_id)  # its records' tombstones
        except KafkaApiError as refusal:
            return refusal.code
        keys = {k for k in self.partitions if k[0] == group_id}
        persister = self.fetcher.persister
        if persister is not None:
            keys.update((group_id, info.topic_id, index)
                        for name, info in self.services.cluster.topics.items()
                        if name not in INTERNAL_TOPICS for index in info.partitions)
        for key in keys:
            self.fetcher.forget_partition(key)
            if persister is not None:
                try:
                    await persister.delete(key)
                except KafkaApiError as refusal:
                    return refusal.code
        return ErrorCode.NONE

    def forget_everything(self) -> None:
        """Every share group, session and share-partition goes (kafkapy.embedded's reset)."""
        self.groups.groups.clear()
        self._written.clear()
        self._initialized.clear()
        self.fetcher.forget_all()
        self.timers.cancel_all()

    def _allowed(self, ctx: RequestContext, operation: str, resource_type: str, name: str) -> bool:
        conn = ctx.connection
        return self.services.authorizer.authorize(conn.principal, conn.client_address[0], operation,
                                                  resource_type, name)

    def _topic_infos(self) -> dict[str, tuple[uuid.UUID, int]]:
        return {name: (info.topic_id, len(info.partitions))
                for name, info in self.services.cluster.topics.items()}

    # -- ShareGroupHeartbeat ----------------------------------------------------------------------

    async def heartbeat(self, ctx: RequestContext, request: Request) -> Answer:
        """Kafka's order (KafkaApis, then GroupCoordinatorService, then GroupMetadataManager):
        READ on the group, a member id of 1 to 36 characters, DESCRIBE on every subscribed topic,
        the request's own validity, the coordinator and the one namespace, then membership."""
        body = request.body
        group_id = body["group_id"]
        names = body.get("subscribed_topic_names")
        try:
            if not self._allowed(ctx, "READ", "GROUP", group_id):
                raise KafkaApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
            if not valid_member_id(body["member_id"]):
                raise KafkaApiError(ErrorCode.INVALID_REQUEST, "Invalid member id in the request.")
            if names and not all(self._allowed(ctx, "DESCRIBE", "TOPIC", name) for name in set(names)):
                raise KafkaApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            heartbeat = ShareHeartbeat(group_id=group_id, member_id=body["member_id"],
                                       member_epoch=body["member_epoch"], rack_id=body.get("rack_id"),
                                       subscribed_topic_names=None if names is None else tuple(names),
                                       client_id=ctx.client_id or "",
                                       client_host="/" + ctx.connection.client_address[0])
            validate_heartbeat(heartbeat)
            self._check_namespace(group_id)
            result = self.groups.heartbeat(heartbeat, self.timers.now_ms())
        except KafkaApiError as refusal:
            return {"throttle_time_ms": 0, "error_code": refusal.code, "error_message": refusal.message,
                    "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}
        if result.left:
            self.fetcher.member_gone(group_id, result.member_id, end_session=False)
        self._schedule_sessions()
        try:
            await self._write_group(group_id)  # as Kafka answers once the records are written
        except KafkaApiError as refusal:
            return {"throttle_time_ms": 0, "error_code": refusal.code, "error_message": refusal.message,
                    "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}
        return _heartbeat_response(result)

    def _check_namespace(self, group_id: str) -> None:
        """The coordinator's checks, then the one namespace: a classic or consumer group's id
        is not a share group's (Kafka's GroupMetadataManager.shareGroup: GROUP_ID_NOT_FOUND)."""
        coordinator = self._coordinator
        if coordinator is None:
            return
        coordinator.check_coordinator(group_id)
        if coordinator.coordinator.groups.get(group_id) is not None or coordinator.consumer.get(group_id):
            raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")

    def _schedule_sessions(self) -> None:
        deadline = self.groups.next_deadline()
        if deadline is None:
            self.timers.cancel(_SESSION_TIMER)
            return
        self.timers.set(_SESSION_TIMER, deadline - self.timers.now_ms(), self._sessions_expired)

    def _sessions_expired(self) -> None:
        fenced = self.groups.expire(self.timers.now_ms())
        for group_id, member_id in fenced:
            self.fetcher.member_gone(group_id, member_id, end_session=True)
        for group_id in sorted({group_id for group_id, _ in fenced}):
            self._write_group_later(group_id)
        self._schedule_sessions()

    # -- admin: ShareGroupDescribe, Describe/Alter/DeleteShareGroupOffsets (admin.py) --------------

    async def _stored(self, group_id: str, topics: Sequence[Mapping[str, Any]] | None
                      ) -> dict[ShareKey, SharePartition] | None:
        """The group's share-partitions as the share coordinator keeps them (None without one):
        those of ``topics``, or, for every topic, those this broker has loaded (the coordinator
        lists nothing by group). A partition it never initialized is left out (-1)."""
        persister = self.fetcher.persister
        if persister is None:
            return None
        known = self._topic_infos()
        if topics is None:  # those loaded here and those the group's records list
            listed = {k for k in self.partitions if k[0] == group_id} | self._initialized_keys(group_id)
            keys = sorted(listed, key=lambda k: (str(k[1]), k[2]))
        else:
            keys = [(group_id, known[t["topic_name"]][0], index) for t in topics if t["topic_name"] in known
                    for index in t["partitions"] if 0 <= index < known[t["topic_name"]][1]]
        stored: dict[ShareKey, SharePartition] = {}
        for key in keys:
            state = await persister.read(key, NO_EPOCH)
            if state.start_offset != UNINITIALIZED_START_OFFSET:
                stored[key] = SharePartition.restored(state.start_offset, state.batches,
                                                      self.fetcher.limits_of(group_id))
        return stored

    def _group_request(self, ctx: RequestContext, group_id: str, operation: str) -> None:
        """Kafka's order: authorization, then the coordinator and the namespace."""
        if not self._allowed(ctx, operation, "GROUP", group_id):
            raise KafkaApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        self._check_namespace(group_id)

    def _topic_access(self, ctx: RequestContext, topics: Sequence[Mapping[str, Any]], operation: str = "READ"
                      ) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
        """The topics ``operation`` is allowed on, and those it is not (TOPIC_AUTHORIZATION_FAILED)."""
        allowed: list[Mapping[str, Any]] = []
        denied: list[Mapping[str, Any]] = []
        for topic in topics:
            (allowed if self._allowed(ctx, operation, "TOPIC", topic["topic_name"]) else denied).append(topic)
        return allowed, denied

    def describe(self, ctx: RequestContext, request: Request) -> Answer:
        described = []
        for group_id in request.body.get("group_ids") or []:
            try:
                self._group_request(ctx, group_id, "DESCRIBE")
                group = self.admin.describe_group(group_id)
            except KafkaApiError as refusal:
                described.append(self.admin.refused_describe(group_id, refusal))
                continue
            assigned = {tp["topic_name"] for member in group["members"]
                        for tp in member["assignment"]["topic_partitions"]}
            if not all(self._allowed(ctx, "DESCRIBE", "TOPIC", name) for name in assigned):
                # Kafka's KafkaApis: the client may not see topics it cannot describe
                described.append(self.admin.refused_describe(group_id, KafkaApiError(
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    "The group has described topic(s) that the client is not authorized to describe.")))
                continue
            if request.body.get("include_authorized_operations"):  # KIP-430, for a group described
                conn = ctx.connection
                group["authorized_operations"] = authorized_operations(
                    self.services.authorizer, conn.principal, conn.client_address[0], ResourceType.GROUP,
                    group_id)
            described.append(group)
        return {"throttle_time_ms": 0, "groups": described}

    async def describe_offsets(self, ctx: RequestContext, request: Request) -> Answer:
        """Kafka 4.2's DescribeShareGroupOffsets: DESCRIBE on the group, then, for named topics,
        the share coordinator's summary with no look at the group (a group or topic or partition
        with no state is start offset -1, no error) and TOPIC_AUTHORIZATION_FAILED rows for the
        topics not describable; for all topics (``topics`` null), the group's coordinator lists
        the share-partitions it knows initialized, the describable ones answered."""
        groups = []
        for asked in request.body.get("groups") or []:
            group_id = asked["group_id"]
            topics = asked.get("topics")
            try:
                if not self._allowed(ctx, "DESCRIBE", "GROUP", group_id):
                    raise KafkaApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
                if topics is None:
                    if self._coordinator is not None:
                        self._coordinator.check_coordinator(group_id)
                    row = self.admin.describe_offsets(group_id, None, ctx.api_version,
                                                      await self._stored(group_id, None))
                    row["topics"] = [t for t in row["topics"]
                                     if self._allowed(ctx, "DESCRIBE", "TOPIC", t["topic_name"])]
                else:
                    allowed, denied = self._topic_access(ctx, topics, "DESCRIBE")
                    row = self.admin.describe_offsets(group_id, allowed, ctx.api_version,
                                                      await self._stored(group_id, allowed))
                    row["topics"] += [_refused_topic(t, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for t in denied]
                groups.append(row)
            except KafkaApiError as refusal:
                groups.append({"group_id": group_id, "topics": [], "error_code": refusal.code,
                               "error_message": refusal.message})
        return fit_body(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, "response", ctx.api_version,
                        {"throttle_time_ms": 0, "groups": groups})

    async def alter_offsets(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        persister = self.fetcher.persister
        changes: dict[ShareKey, int] | None = None if persister is None else {}
        try:
            self._group_request(ctx, body["group_id"], "READ")
            allowed, denied = self._topic_access(ctx, body.get("topics") or [])
            rows = self.admin.alter_offsets(body["group_id"], allowed, changes)
            await self._write_group(body["group_id"])  # a group made here to hold the offsets
        except KafkaApiError as refusal:
            return {"throttle_time_ms": 0, "error_code": refusal.code, "error_message": refusal.message,
                    "responses": []}
        if persister is not None and changes:
            failed: dict[ShareKey, KafkaApiError] = {}
            for key, start in changes.items():
                try:
                    # Kafka's alter: the state starts again under the next state epoch, which
                    # fences a share-partition leader still holding the old one.
                    kept = await persister.summary(key)
                    await persister.initialize(key, kept.state_epoch + 1, start)
                    self._share_partition_initialized(key)
                except KafkaApiError as refusal:
                    failed[key] = refusal
                self.fetcher.forget_partition(key)
            _mark_failures(rows, body["group_id"], failed)
        rows += [{"topic_name": t["topic_name"], "topic_id": uuid.UUID(int=0), "partitions": [
            {"partition_index": p["partition_index"], "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
             "error_message": None} for p in t["partitions"]]} for t in denied]
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": rows}

    async def _topics_with_state(self, group_id: str, topics: Sequence[Mapping[str, Any]]) -> set[str]:
        """The named topics of which the group keeps some share-partition's state (at the share
        coordinator when one runs, else here)."""
        known = self._topic_infos()
        persister = self.fetcher.persister
        held: set[str] = set()
        for topic in topics:
            name = topic["topic_name"]
            if name not in known:
                continue
            keys = [(group_id, known[name][0], index) for index in range(known[name][1])]
            for key in keys:
                if key in self.partitions or (persister is not None and (
                        await persister.summary(key)).start_offset != UNINITIALIZED_START_OFFSET):
                    held.add(name)
                    break
        return held

    async def delete_offsets(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        persister = self.fetcher.persister
        changes: list[ShareKey] | None = None if persister is None else []
        try:
            self._group_request(ctx, body["group_id"], "DELETE")
            self.admin.check_deletable(body["group_id"])
            allowed, denied = self._topic_access(ctx, body.get("topics") or [])
            held = await self._topics_with_state(body["group_id"], allowed)
            rows = self.admin.delete_offsets(body["group_id"], allowed, changes, held)
        except KafkaApiError as refusal:
            return {"throttle_time_ms": 0, "error_code": refusal.code, "error_message": refusal.message,
                    "responses": []}
        for key in changes or ():
            assert persister is not None
            try:
                await persister.delete(key)
            except KafkaApiError as refusal:
                for row in rows:
                    if row["topic_id"] == key[1] and row["error_code"] == ErrorCode.NONE:
                        row["error_code"], row["error_message"] = refusal.code, refusal.message
            self.fetcher.forget_partition(key)
        initialized = self._initialized.get(body["group_id"], {})
        forgotten = [initialized.pop(topic_id) for topic_id in {key[1] for key in changes or ()}
                     if topic_id in initialized]
        if forgotten:
            await self._write_group_quietly(body["group_id"])
        rows += [{"topic_name": t["topic_name"], "topic_id": uuid.UUID(int=0),
                  "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "error_message": None} for t in denied]
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": rows}


def _refused_topic(topic: Mapping[str, Any], code: ErrorCode) -> dict[str, Any]:
    """A DescribeShareGroupOffsets topic row refused whole: every partition -1 with the error."""
    return {"topic_name": topic["topic_name"], "topic_id": uuid.UUID(int=0), "partitions": [
        {"partition_index": index, "start_offset": NO_START_OFFSET, "leader_epoch": NO_EPOCH,
         "lag": NO_START_OFFSET, "error_code": code, "error_message": None} for index in topic["partitions"]]}


def _mark_failures(rows: list[dict[str, Any]], group_id: str,
                   failed: Mapping[ShareKey, KafkaApiError]) -> None:
    """The coordinator's refusals on the Alter rows of the share-partitions they were for."""
    for row in rows:
        for partition in row["partitions"]:
            refusal = failed.get((group_id, row["topic_id"], partition["partition_index"]))
            if refusal is not None:
                partition["error_code"], partition["error_message"] = refusal.code, refusal.message


def _heartbeat_response(result: ShareHeartbeatResult) -> dict[str, Any]:
    assignment = None
    if result.assignment is not None:
        assignment = {"topic_partitions": [{"topic_id": topic, "partitions": sorted(parts)}
                                           for topic, parts in sorted(result.assignment.items())]}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "member_id": result.member_id,
            "member_epoch": result.member_epoch if result.member_epoch != LEAVE_EPOCH else LEAVE_EPOCH,
            "heartbeat_interval_ms": result.heartbeat_interval_ms, "assignment": assignment}
