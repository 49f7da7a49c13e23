"""The groups module: Kafka's group coordinator on the wire.

FindCoordinator (all versions, batched keys from v4), JoinGroup, SyncGroup, Heartbeat, LeaveGroup
(batched members from v3), OffsetCommit, OffsetFetch (several groups from v8; v0 of both in the
metadata store's /consumers znodes: zookeeper_offsets.py), DescribeGroups,
ListGroups (state and type filters), DeleteGroups and OffsetDelete. OffsetCommit v1's
per-partition commit time, when not -1, is the commit's. The decisions are the
coordinator's (coordinator.py); this file turns requests into its calls and its answers into
responses, and owns what touches the broker:

* ``__consumer_offsets``: made (compacted, ``offsets.topic.num.partitions``) through the topics
  module the first time a coordinator is looked up, as Kafka does;
* which groups this broker coordinates: those whose partition of it (partitioning.py) this broker
  leads. Another broker's group gets NOT_COORDINATOR; while a partition's records are replayed
  into the coordinator (GroupLog.replay), its groups get COORDINATOR_LOAD_IN_PROGRESS;
* outages a test asked for (COORDINATOR_OUTAGES, kafkapy.server.coordinator_outages): a group
  id under one is answered, once authorized, as Kafka answers while its partition is not served;
* the GroupLog the coordinator writes through (persistence.py): ``__consumer_offsets`` itself
  (offsets_log.py) when the data plane offers its partition logs (PARTITION_LOGS), else a log in
  memory (memory_log.py).
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections.abc import Awaitable, Callable, Collection, Generator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from kafkapy.configs.module import DYNAMIC_CONFIGS, ConfigsModule
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.consumer_group import JOIN_GROUP_MEMBER_EPOCH, TopicInfo
from kafkapy.groups.consumer_handlers import CONSUMER_GROUP_CONFIG_KEYS, REBALANCE_PROTOCOLS_KEY
from kafkapy.groups.consumer_service import ConsumerGroupService
from kafkapy.groups.coordinator import ClassicCoordinator, GroupConfig, JoinRequest
from kafkapy.groups.group import JoinResult, SyncResult
from kafkapy.groups.group_configs import (
    GROUP_BOUND_KEYS,
    GroupConfigs,
    check_broker_group_settings,
    timeout_overrides,
)
from kafkapy.groups.memory_log import MemoryGroupLog, memory_group_log
from kafkapy.groups.migration import UpgradeRefused, check_upgrade, consumer_group_records
from kafkapy.groups.offsets import NO_OFFSET, OffsetEntry, commit_refusal
from kafkapy.groups.offsets_log import DEFAULT_LOAD_BUFFER_BYTES, OffsetsTopicLog
from kafkapy.groups.partitioning import OFFSETS_TOPIC
from kafkapy.groups.persistence import GroupLog, OpenTxnRecords
from kafkapy.groups.records import SHARE_GROUP_KEYS, GroupMetadataKey, GroupRecord
from kafkapy.groups.retention import (
    CONSUMER_PROTOCOL_TYPE,
    DEFAULT_OFFSETS_RETENTION_CHECK_INTERVAL_MS,
    DEFAULT_OFFSETS_RETENTION_MINUTES,
    retention_ms,
)
from kafkapy.groups.state import GroupState
from kafkapy.groups.timers import Timers
from kafkapy.groups.txn_offsets import TXN_OFFSET_COMMIT_VERSIONS, TxnOffsetCommits
from kafkapy.groups.zookeeper_offsets import ZooKeeperOffsets
from kafkapy.protocol import Request, fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import CLUSTER_RESOURCE, authorized_operations
from kafkapy.server.config import ConfigKey
from kafkapy.server.conformance import conforms
from kafkapy.server.coordinator_elections import CoordinatorElections
from kafkapy.server.coordinator_outages import (
    COORDINATOR_OUTAGES,
    CoordinatorOutageView,
    find_coordinator_error,
)
from kafkapy.server.internal_topics import InternalTopic
from kafkapy.server.modules import Answer, ApiHandler, Module, RequestContext
from kafkapy.server.operations import ResourceType
from kafkapy.server.partition_loads import PartitionLoads
from kafkapy.server.services import (
    NO_LEADER,
    PARTITION_LOGS,
    TOPIC_CREATION,
    BrokerServices,
    PartitionLogs,
    PartitionLogsProvider,
)
from kafkapy.server.share_coordinator import SHARE_COORDINATOR, ShareCoordinatorLocator
from kafkapy.server.topic_deletions import TopicDeletions
from kafkapy.server.txn_coordinator import TRANSACTION_COORDINATOR, TransactionCoordinatorLocator
from kafkapy.server.txn_markers import TXN_MARKERS, TxnMarkerEvents
from kafkapy.validators import AtLeast

__all__ = ["GROUP_COORDINATOR", "CoordinatorKeyType", "ForeignGroups", "GroupsModule"]

T = TypeVar("T")

# The capability: the group coordinator, for tools (the groups CLI) and tests.
GROUP_COORDINATOR = "group-coordinator"

NO_NODE = -1
NO_EPOCH = -1
DEFAULT_COMMIT_TIMESTAMP = -1  # OffsetCommit v1: the broker stamps the commit (Kafka's DEFAULT_TIMESTAMP)
# OffsetCommit and OffsetFetch name topics by id from v10 (KIP-848's follow-up, Kafka 4.1).
FIRST_TOPIC_ID_OFFSETS_VERSION = 10
NO_TOPIC_ID = uuid.UUID(int=0)
FIRST_SHARE_FIND_COORDINATOR_VERSION = 6  # key type SHARE came with v6 (KIP-932)
FIRST_SKIP_ASSIGNMENT_JOIN_VERSION = 9  # JoinGroup answers skip_assignment from v9 (KIP-814)
_LOAD_YIELD_EVERY = 1000  # records replayed between yields to the loop while loading


class CoordinatorKeyType(enum.IntEnum):
    """FindCoordinator's key_type (Kafka's FindCoordinatorRequest.CoordinatorType)."""

    GROUP = 0
    TRANSACTION = 1
    SHARE = 2


class ForeignGroups(Protocol):
    """A group type another module serves in the one group-id namespace (share groups): the
    groups module refuses its ids to classic and consumer members, lists its groups in
    ListGroups and deletes them in DeleteGroups."""

    def holds_group(self, group_id: str) -> bool: ...

    def listed_groups(self, states: Collection[str], types: Collection[str]) -> list[dict[str, Any]]:
        """ListGroups rows, filtered by lower-cased states and types."""
        ...

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of one of its groups: NONE, or why not (NON_EMPTY_GROUP); it may wait
        (a share group's state is deleted where its share coordinator keeps it)."""
        ...

    def load_records(self, partition: int, records: Sequence[GroupRecord]) -> None:
        """A ``__consumer_offsets`` partition this broker now coordinates was replayed: its
        records of this group type (share groups' ShareGroup* records), in log order."""
        ...

    def unload(self, partition: int) -> None:
        """This broker no longer coordinates the partition: its groups of this type go."""
        ...


def _settle(future: asyncio.Future[T]) -> Callable[[T], None]:
    """A callback that completes ``future`` once (a client gone meanwhile cancelled it)."""
    def settle(value: T) -> None:
        if not future.done():
            future.set_result(value)
    return settle


CONFIG_KEYS = (
    ConfigKey("group.initial.rebalance.delay.ms", "int", 3000,
              "How long the first rebalance of an empty group waits for more members (Kafka's default "
              "3000; the embedded Broker and the pytest fixtures set 0).", AtLeast(0)),
    ConfigKey("group.min.session.timeout.ms", "int", 6000,
              "The smallest session timeout a member may ask for (Kafka's default).", AtLeast(0)),
    ConfigKey("group.max.session.timeout.ms", "int", 1800000,
              "The largest session timeout a member may ask for (Kafka's default, 30 minutes).",
              AtLeast(0)),
    ConfigKey("group.max.size", "int", 2147483647,
              "The most members a classic group may have (Kafka's default: no limit).", AtLeast(1)),
    ConfigKey("offsets.topic.num.partitions", "int", 50,
              "Partitions of __consumer_offsets, fixed once it is created (Kafka's default).", AtLeast(1)),
    ConfigKey("offsets.topic.replication.factor", "short", 1,
              "Replication factor of __consumer_offsets (Kafka's default is 3; kafkapy's is 1, as "
              "Kafka's own config/server.properties sets it for one broker).", AtLeast(1)),
    ConfigKey("offsets.topic.segment.bytes", "int", 104857600,
              "segment.bytes of __consumer_offsets (Kafka's default, 100 MiB).", AtLeast(14)),
    ConfigKey("offsets.topic.compression.codec", "int", 0,
              "Codec of the coordinator's batches in __consumer_offsets: 0 none, 1 gzip, 2 snappy, 3 lz4, "
              "4 zstd (Kafka's default: 0).", AtLeast(0)),
    ConfigKey("offsets.load.buffer.size", "int", DEFAULT_LOAD_BUFFER_BYTES,
              "Bytes read at a time while loading a __consumer_offsets partition (Kafka's default, 5 MiB; "
              "a batch larger than it is read whole).", AtLeast(1)),
    ConfigKey("offset.metadata.max.bytes", "int", 4096,
              "The longest metadata string an offset commit may carry (Kafka's default).", AtLeast(0)),
    ConfigKey("offsets.retention.minutes", "int", DEFAULT_OFFSETS_RETENTION_MINUTES,
              "How long a committed offset outlives its group's interest in it (Kafka's default, 7 days).",
              AtLeast(1)),
    ConfigKey("offsets.retention.check.interval.ms", "long", DEFAULT_OFFSETS_RETENTION_CHECK_INTERVAL_MS,
              "How often expired offsets are looked for (Kafka's default, 10 minutes).", AtLeast(1)),
    *CONSUMER_GROUP_CONFIG_KEYS,
    *GROUP_BOUND_KEYS,
)


class GroupsModule(Module):
    name = "groups"
    provides = (GROUP_COORDINATOR,)
    wants = (TOPIC_CREATION, PARTITION_LOGS, TRANSACTION_COORDINATOR, TXN_MARKERS, COORDINATOR_OUTAGES,
             DYNAMIC_CONFIGS, SHARE_COORDINATOR)
    config_keys = CONFIG_KEYS

    def __init__(self, services: BrokerServices, group_log: GroupLog | None = None) -> None:
        super().__init__(services)
        config = services.config
        check_broker_group_settings(config.values)  # the share group keys too, when their module is loaded
        self._consumer_protocol_enabled = "consumer" in (p.lower() for p in config[REBALANCE_PROTOCOLS_KEY])
        self.group_config = GroupConfig(
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            max_size=config["group.max.size"],
            offset_metadata_max_bytes=config["offset.metadata.max.bytes"])
        self.group_log: GroupLog = group_log if group_log is not None else memory_group_log(
            services.store, config["offsets.topic.num.partitions"])
        self.timers = Timers(services.clock,
                             lambda delay, callback: services.loop.call_later(delay, callback),
                             services.wall_clock)
        self._own_log = group_log is None  # replaced by the offsets topic's log at start, if served
        # The data plane's logs under that log: a partition whose log dir failed is resigned.
        self._partition_logs: PartitionLogs | None = None
        self.zookeeper_offsets = ZooKeeperOffsets(  # OffsetCommit v0 and OffsetFetch v0
            services.store, self._allowed, self._partition_exists, config["offset.metadata.max.bytes"])
        self.coordinator = ClassicCoordinator(self.group_config, self.timers, self._persist,
                                              partition_for=lambda group: self.group_log.partition_for(group),
                                              log=services.log,
                                              other_type=lambda group: self.consumer.get(group) is not None)
        consumer_settings = {key.name: config[key.name] for key in CONSUMER_GROUP_CONFIG_KEYS}
        consumer_settings["group.max.size"] = config["group.max.size"]  # a downgrade's limit
        # GROUP config resources: this module owns them; consumer groups (here) and share groups
        # (kafkapy.shares) read a group's values from them.
        self.group_configs = GroupConfigs(services)
        self.consumer = ConsumerGroupService(consumer_settings, self.timers, self._topic_infos, self._write,
                                             lambda group: self.group_log.partition_for(group),
                                             self.coordinator.offsets, self._spawn,
                                             overrides=timeout_overrides(self.group_configs, "consumer"),
                                             on_downgrade=self.coordinator.adopt)
        # Kafka's runtime: a partition led here is loading, then loaded, under its leader epoch.
        self._loaded: dict[int, int] = {}  # partition -> the epoch it was loaded under
        self._loads: PartitionLoads[list[GroupRecord | OpenTxnRecords]] = PartitionLoads(
            OFFSETS_TOPIC, self._still_led, self._install, services.log)
        self.elections = CoordinatorElections(services.cluster, OFFSETS_TOPIC, self._led_epoch,
                                              self._on_election, self._unload)
        self.topic_deletions = TopicDeletions(services.cluster,
                                              lambda gone: self._on_topics_deleted(frozenset(gone)))
        self._tasks: set[asyncio.Task[Any]] = set()
        self._offsets_topic = InternalTopic(services, OFFSETS_TOPIC, lambda: (
            config["offsets.topic.num.partitions"], config["offsets.topic.replication.factor"],
            {"cleanup.policy": "compact", "segment.bytes": str(config["offsets.topic.segment.bytes"]),
             "compression.type": "producer"}))
        self.txn_offsets = TxnOffsetCommits(
            coordinator=self.coordinator, group_log=lambda: self.group_log,
            check_coordinator=self.check_coordinator, check_member=self._check_txn_member,
            allowed=self._allowed, partition_exists=self._partition_exists,
            verifier=lambda: services.provider(TRANSACTION_COORDINATOR, Module),
            is_loaded=lambda partition: partition in self._loaded,
            is_loading=lambda partition: self._loads.epoch_of(partition) is not None,
            max_metadata_bytes=config["offset.metadata.max.bytes"])
        self._stop_markers: Callable[[], None] | None = None
        self._unstop: Callable[[], None] | None = None
        self._outages: CoordinatorOutageView | None = None  # found at start
        self._resets = 0  # forget_everything() calls: a write queued before one is dropped
        # Other group types sharing the one group-id namespace (share groups: kafkapy.shares).
        self.foreign_groups: list[ForeignGroups] = []

    def apis(self) -> Mapping[int, ApiHandler]:
        return {
            ApiKey.FIND_COORDINATOR: ApiHandler(VersionRange(0, 6), self.find_coordinator),
            ApiKey.JOIN_GROUP: ApiHandler(VersionRange(0, 9), self.join_group),
            ApiKey.SYNC_GROUP: ApiHandler(VersionRange(0, 5), self.sync_group),
            ApiKey.HEARTBEAT: ApiHandler(VersionRange(0, 4), self.heartbeat),
            ApiKey.LEAVE_GROUP: ApiHandler(VersionRange(0, 5), self.leave_group),
            ApiKey.OFFSET_COMMIT: ApiHandler(VersionRange(0, 10), self.offset_commit),
            ApiKey.OFFSET_FETCH: ApiHandler(VersionRange(0, 10), self.offset_fetch),
            ApiKey.DESCRIBE_GROUPS: ApiHandler(VersionRange(0, 6), self.describe_groups),
            ApiKey.LIST_GROUPS: ApiHandler(VersionRange(0, 5), self.list_groups),
            ApiKey.DELETE_GROUPS: ApiHandler(VersionRange(0, 2), self.delete_groups),
            ApiKey.OFFSET_DELETE: ApiHandler(VersionRange(0, 0), self.offset_delete),
            ApiKey.TXN_OFFSET_COMMIT: ApiHandler(TXN_OFFSET_COMMIT_VERSIONS, self.txn_offsets.handle),
            **self.consumer.apis(self.consumer_group_heartbeat, self.consumer_group_describe),
        }

    async def start(self) -> None:
        """Follow leadership of ``__consumer_offsets`` (Kafka's scheduleLoadOperation and
        scheduleUnloadOperation): load the partitions this broker comes to lead, from the first
        pass (a restart over log.dirs) on, and drop those it stops leading."""
        await self.group_configs.start()
        configs = self.services.provider(DYNAMIC_CONFIGS, ConfigsModule)
        if configs is not None:
            configs.register_resource(self.group_configs.owner())
        logs = self.services.provider(PARTITION_LOGS, Module)
        if self._own_log and isinstance(logs, PartitionLogsProvider):
            # __consumer_offsets itself: offsets and groups survive a restart with log.dirs
            config = self.services.config
            self._partition_logs = logs.partition_logs()
            self.group_log = OffsetsTopicLog(self._partition_logs, config["offsets.topic.num.partitions"],
                                             compression=config["offsets.topic.compression.codec"],
                                             clock_ms=self.timers.wall_ms,
                                             load_buffer_bytes=config["offsets.load.buffer.size"])

        outages = self.services.provider(COORDINATOR_OUTAGES, Module)
        self._outages = outages if isinstance(outages, CoordinatorOutageView) else None
        markers = self.services.provider(TXN_MARKERS, Module)
        if isinstance(markers, TxnMarkerEvents):  # transactional offsets end with their markers
            self._stop_markers = markers.watch_txn_markers(self.txn_offsets.on_marker)
        self._schedule_retention()

        self.elections.start(self.services.loop)
        self.topic_deletions.start(self.services.loop)
        # A broker stopping resigns its groups as Kafka's controlled shutdown moves them away:
        # joins and syncs waiting on other members are answered NOT_COORDINATOR now (their
        # clients look for the next coordinator), not held for the stop's grace.
        self._unstop = self.services.on_stop(self.coordinator.answer_waiting_not_coordinator)

    def _schedule_retention(self) -> None:
        """Every ``offsets.retention.check.interval.ms``: expired offsets go, classic,
        standalone and consumer groups' alike (Kafka's rules in kafkapy.groups.retention)."""
        config = self.services.config

        def check() -> None:
            self._spawn(self.expire_offsets(self.timers.wall_ms()))
            self._schedule_retention()
        self.timers.set(("offsets", "retention"), config["offsets.retention.check.interval.ms"], check)

    async def expire_offsets(self, now_ms: int) -> None:
        """One retention pass at ``now_ms`` (epoch ms; also for tests and tools)."""
        retention = retention_ms(self.services.config["offsets.retention.minutes"])

        def loaded(partition: int) -> bool:
            return partition in self._loaded
        self.coordinator.expire_offsets(loaded, now_ms, retention, self.txn_offsets.pending.is_pending)
        await self.consumer.expire_offsets(loaded, now_ms, retention)

    def _on_topics_deleted(self, topics: frozenset[str]) -> None:
        """The groups coordinated here forget the offsets of deleted topics, pending ones too
        (Kafka's onPartitionsDeleted), so OffsetFetch, lag tools and offset retention no longer
        see partitions that are gone, and a topic made again under the name starts unconsumed."""
        def loaded(partition: int) -> bool:
            return partition in self._loaded
        self.txn_offsets.pending.forget_topics(topics)
        pending = self.txn_offsets.pending.groups()
        self.coordinator.remove_offsets_of_topics(loaded, topics, lambda group: group in pending)
        self._spawn(self.consumer.remove_offsets_of_topics(loaded, topics))

    async def stop(self) -> None:
        self.group_configs.stop()
        self.elections.stop()
        self.topic_deletions.stop()
        self._loads.stop_all()
        if self._stop_markers is not None:
            self._stop_markers()
        if self._unstop is not None:
            self._unstop()
        self.timers.cancel_all()
        for task in list(self._tasks):
            task.cancel()
        self._offsets_topic.cancel()

    def _spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        task = self.services.loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _allowed(self, ctx: RequestContext, operation: str, resource_type: str, name: str) -> bool:
        conn = ctx.connection
        return self.services.authorizer.authorize(conn.principal, conn.client_address[0], operation,
                                                  resource_type, name)

    # --- persistence --------------------------------------------------------------------------

    def _persist(self, group_id: str, records: Sequence[GroupRecord],
                 done: Callable[[ErrorCode], None]) -> None:
        """The coordinator's writes: through the GroupLog, then ``done`` with the outcome."""
        resets = self._resets

        async def write() -> None:
            if resets != self._resets:  # queued before a reset: its group is gone, and stays gone
                done(ErrorCode.NOT_COORDINATOR)
                return
            try:
                await self.group_log.append(group_id, records)
                code = ErrorCode.NONE
            except KafkaApiError as exc:
                code = exc.code
            except Exception:
                self.services.log.exception("writing group %s's records failed", group_id)
                code = ErrorCode.UNKNOWN_SERVER_ERROR
            done(code)
        self._spawn(write())

    async def _write(self, group_id: str, records: Sequence[GroupRecord]) -> None:
        """The consumer groups' writes: through the GroupLog, KafkaApiError when they fail."""
        try:
            await self.group_log.append(group_id, records)
        except KafkaApiError:
            raise
        except Exception:
            self.services.log.exception("writing group %s's records failed", group_id)
            raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR) from None

    def _topic_infos(self) -> dict[str, TopicInfo]:
        return {name: TopicInfo(info.topic_id, len(info.partitions))
                for name, info in self.services.cluster.topics.items()}

    # --- reset (kafkapy.embedded's Broker.reset) -------------------------------------------------

    def forget_everything(self) -> None:
        """Every group (classic and KIP-848), member, committed and pending transactional offset,
        and group timer goes; the partitions this broker leads stay loaded, now empty. The caller
        empties ``__consumer_offsets`` itself (or a memory GroupLog is cleared here), so nothing
        comes back on a reload. A client still connected hears Kafka's answers for a group the
        coordinator does not know; a write queued before this runs is answered NOT_COORDINATOR."""
        self._resets += 1
        self.coordinator.forget_all()
        self.consumer.forget_all()
        self.txn_offsets.pending.drop(lambda group: True)
        self.timers.cancel_all()
        self._schedule_retention()
        if isinstance(self.group_log, MemoryGroupLog):
            self.group_log.clear()

    # --- which groups are ours ----------------------------------------------------------------

    def _offsets_leader(self, partition: int) -> int:
        """By the stored leadership, as Metadata and the data plane answer, so the coordinator and
        the partition's log move together."""
        leadership = self.services.cluster.leadership(OFFSETS_TOPIC, partition)
        return NO_LEADER if leadership is None else leadership[0]

    def _leads(self, partition: int) -> bool:
        """This broker leads ``partition`` and its log is online: a partition whose log dir failed
        is resigned at once (Kafka's controller moves its leadership away after the log dir
        event, and the coordinator unloads it), its groups' clients told NOT_COORDINATOR."""
        if self._offsets_leader(partition) != self.services.broker_id:
            return False
        logs = self._partition_logs
        return logs is None or not logs.is_offline(OFFSETS_TOPIC, partition)

    def check_coordinator(self, group_id: str) -> None:
        """Returns if this broker coordinates ``group_id`` now; else KafkaApiError with
        NOT_COORDINATOR (another broker leads its partition, or none exists yet) or
        COORDINATOR_LOAD_IN_PROGRESS (its partition is being loaded), or an outage's error."""
        outage = self._outage(group_id)
        if outage is not None:
            raise KafkaApiError(outage, f"The coordinator of group {group_id} is unavailable "
                                        "(a test's outage).")
        self._check_partition(group_id)

    def _check_partition(self, group_id: str) -> None:
        """check_coordinator without the outages: this broker leads the group's partition, loaded."""
        partition = self.group_log.partition_for(group_id)
        epoch = self._led_epoch(partition)
        if epoch is None:
            self._unload(partition)
            raise KafkaApiError(ErrorCode.NOT_COORDINATOR,
                                f"This is not the correct coordinator for group {group_id}.")
        if self._loaded.get(partition) == epoch:
            return
        if self._loads.epoch_of(partition) == epoch:
            if self._loads.take_slice(partition, epoch):
                return  # queued behind others, and short: loaded by this request's slice
        elif self._begin_load(partition, epoch, in_place=True):
            return  # led here before the election's pass ran, and short: loaded in place
        raise KafkaApiError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                            f"The coordinator is loading the groups of {OFFSETS_TOPIC}-{partition}.")

    async def expire_session(self, group_id: str, *, member_id: str | None = None,
                             client_id: str | None = None) -> list[str]:
        """End now the session of member ``member_id`` of ``group_id``, or of every member whose
        client id is ``client_id``, as a session timeout would (a test's fault): a classic member
        is removed and its group rebalances, a consumer-protocol (KIP-848) member is fenced.
        Answers the member ids expired. KafkaApiError: NOT_COORDINATOR (or
        COORDINATOR_LOAD_IN_PROGRESS) off the coordinator, GROUP_ID_NOT_FOUND without such a
        group, UNKNOWN_MEMBER_ID when no member matches."""
        if (member_id is None) == (client_id is None):
            raise ValueError("give member_id or client_id (one of them)")
        self._check_partition(group_id)
        classic = self.coordinator.groups.get(group_id)
        consumer = self.consumer.get(group_id)
        members: Mapping[str, Any] = (consumer.members if consumer is not None
                                      else classic.members if classic is not None else {})
        if consumer is None and classic is None:
            raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id!r} does not exist here")
        chosen = [m for m, member in members.items()
                  if m == member_id or (client_id is not None and member.client_id == client_id)]
        if not chosen:
            who = f"member {member_id!r}" if member_id is not None else f"client id {client_id!r}"
            raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID,
                                f"group {group_id!r} has no {who} (members: {sorted(members)})")
        if consumer is not None:
            await self.consumer.expire_sessions(group_id, chosen)
            return chosen
        return self.coordinator.expire_sessions(group_id, chosen)

    def _outage(self, group_id: str) -> ErrorCode | None:
        return None if self._outages is None else self._outages.group_outage(group_id)

    def loaded_partitions(self) -> list[int]:
        """The ``__consumer_offsets`` partitions this broker has loaded (a module that registers
        in ``foreign_groups`` after them replays them itself)."""
        return sorted(self._loaded)

    def coordinates_now(self, group_id: str) -> bool:
        """This broker leads the group's partition and has loaded it (inspection; no side effects,
        unlike check_coordinator)."""
        partition = self.group_log.partition_for(group_id)
        return self._leads(partition) and partition in self._loaded

    def _led_epoch(self, partition: int) -> int | None:
        """The partition's leader epoch if this broker leads it and can serve it; else None."""
        leadership = self.services.cluster.leadership(OFFSETS_TOPIC, partition)
        if leadership is None or not self._leads(partition):
            return None
        return leadership[1]

    def _still_led(self, partition: int, epoch: int) -> bool:
        return self._led_epoch(partition) == epoch

    def _on_election(self, partition: int, epoch: int, in_place: bool = True) -> None:
        """Kafka's scheduleLoadOperation: this broker leads ``partition`` under ``epoch`` now, and
        the partition's load begins (nothing to do if it is loaded or loading under that epoch)."""
        if self._loaded.get(partition) != epoch and self._loads.epoch_of(partition) != epoch:
            self._begin_load(partition, epoch, in_place=in_place)

    def _begin_load(self, partition: int, epoch: int, *, in_place: bool) -> bool:
        """What was loaded of the partition goes and its replay begins: the first slice now if
        ``in_place`` (True, and installed, when that finished it), else all of it in the background,
        the partition's groups answering COORDINATOR_LOAD_IN_PROGRESS meanwhile."""
        self._unload(partition)
        steps = self._replay_in_slices(partition)
        if not in_place:
            self._loads.schedule(partition, epoch, steps)
            return False
        try:
            records = self._loads.begin(partition, epoch, steps)
        except Exception:  # an unreadable partition: logged; the next request begins again
            self.services.log.exception("loading %s-%d failed", OFFSETS_TOPIC, partition)
            return False
        if records is None:
            return False
        self._install(partition, epoch, records)
        return True

    def _replay_in_slices(self, partition: int) -> Generator[None, None, list[GroupRecord | OpenTxnRecords]]:
        """The partition's records (GroupLog.replay), yielding every _LOAD_YIELD_EVERY of them."""
        records: list[GroupRecord | OpenTxnRecords] = []
        for record in self.group_log.replay(partition):
            records.append(record)
            if len(records) % _LOAD_YIELD_EVERY == 0:
                yield
        return records

    def _install(self, partition: int, epoch: int, records: list[GroupRecord | OpenTxnRecords]) -> None:
        """A replayed partition's groups into the coordinators."""
        # Share groups' records (KIP-932) are the share groups' owner's, not the classic or
        # consumer coordinator's.
        settled = [r for r in records if isinstance(r, GroupRecord)]
        foreign = [r for r in settled if isinstance(r.key, SHARE_GROUP_KEYS)]
        settled = [r for r in settled if not isinstance(r.key, SHARE_GROUP_KEYS)]
        for other in self.foreign_groups:
            other.load_records(partition, foreign)
        self.consumer.load(settled)
        self.coordinator.load(partition, settled)
        self.txn_offsets.load(partition, (r for r in records if isinstance(r, OpenTxnRecords)))
        self._loaded[partition] = epoch
        self.services.log.debug("loaded the groups of %s-%d (%d records) at epoch %d", OFFSETS_TOPIC,
                                partition, len(records), epoch)

    def _unload(self, partition: int) -> None:
        """Kafka's scheduleUnloadOperation: the partition's groups and any load under way go."""
        self._loads.stop(partition)
        if self._loaded.pop(partition, None) is None:
            return
        self.coordinator.unload(partition)
        self.txn_offsets.unload(partition)
        self.consumer.unload(partition)
        for other in self.foreign_groups:
            other.unload(partition)
        self.services.log.info("no longer the coordinator of %s-%d", OFFSETS_TOPIC, partition)

    # --- FindCoordinator ----------------------------------------------------------------------

    async def find_coordinator(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        version = ctx.api_version
        key_type = body.get("key_type", CoordinatorKeyType.GROUP)
        keys: list[str] = list(body.get("coordinator_keys") or []) if version >= 4 else [body["key"]]
        found = [await self._coordinator_for(ctx, key_type, key) for key in keys]
        if version >= 4:
            return fit_body(ApiKey.FIND_COORDINATOR, "response", version,
                            {"throttle_time_ms": 0, "coordinators": found})
        only = found[0]
        return fit_body(ApiKey.FIND_COORDINATOR, "response", version, {
            "throttle_time_ms": 0, "error_code": only["error_code"], "error_message": only["error_message"],
            "node_id": only["node_id"], "host": only["host"], "port": only["port"]})

    async def _coordinator_for(self, ctx: RequestContext, key_type: int, key: str) -> dict[str, Any]:
        def refused(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
            return {"key": key, "node_id": NO_NODE, "host": "", "port": -1, "error_code": code,
                    "error_message": message}

        if key_type == CoordinatorKeyType.TRANSACTION:
            return await self._transaction_coordinator_for(ctx, key, refused)
        if key_type == CoordinatorKeyType.SHARE:
            return await self._share_coordinator_for(ctx, key, refused)
        if key_type != CoordinatorKeyType.GROUP:
            return refused(ErrorCode.INVALID_REQUEST, f"Unsupported key type {key_type}.")
        if not self._allowed(ctx, "DESCRIBE", "GROUP", key):
            return refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if find_coordinator_error(self._outage(key)) != ErrorCode.NONE:
            return refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
        if not await self._offsets_topic.ensure():
            return refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
        partition = self.group_log.partition_for(key)
        leader = self._offsets_leader(partition)
        broker = next((b for b in self.services.cluster.brokers if b.broker_id == leader), None)
        endpoint = broker.endpoint(ctx.connection.listener) if broker is not None else None
        if leader == NO_LEADER or endpoint is None:
            return refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
        if leader == self.services.broker_id and not self._leads(partition):
            # its log dir failed here: no coordinator until leadership moves (docs/log.md)
            return refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
        epoch = self._led_epoch(partition) if leader == self.services.broker_id else None
        if epoch is not None:  # led here before the election's pass ran: load now, for the first request
            self._on_election(partition, epoch)
        return {"key": key, "node_id": leader, "host": endpoint.host, "port": endpoint.port,
                "error_code": ErrorCode.NONE, "error_message": None}

    async def _transaction_coordinator_for(self, ctx: RequestContext, key: str,
                                           refused: Callable[..., dict[str, Any]]) -> dict[str, Any]:
        """Key type TRANSACTION: the transaction coordinator (TRANSACTION_COORDINATOR) names the
        broker; DESCRIBE on the TransactionalId first, as Kafka checks it."""
        locator = self.services.provider(TRANSACTION_COORDINATOR, Module)
        if not conforms(locator, TransactionCoordinatorLocator):
            return refused(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                           "This broker runs no transaction coordinator.")
        if not self._allowed(ctx, "DESCRIBE", "TRANSACTIONAL_ID", key):
            return refused(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        outage = None if self._outages is None else self._outages.transaction_outage(key)
        if find_coordinator_error(outage) != ErrorCode.NONE:
            return refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
        code, broker = await locator.find_transaction_coordinator(key)
        endpoint = broker.endpoint(ctx.connection.listener) if broker is not None else None
        if code != ErrorCode.NONE or broker is None or endpoint is None:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE if code == ErrorCode.NONE else code
            return refused(code, "The coordinator is not available." if code != ErrorCode.INVALID_REQUEST
                           else "A transactional id must not be empty.")
        return {"key": key, "node_id": broker.broker_id, "host": endpoint.host, "port": endpoint.port,
                "error_code": ErrorCode.NONE, "error_message": None}

    async def _share_coordinator_for(self, ctx: RequestContext, key: str,
                                     refused: Callable[..., dict[str, Any]]) -> dict[str, Any]:
        """Key type SHARE (KIP-932, FindCoordinator v6+): the share coordinator (SHARE_COORDINATOR)
        names the leader of the key's ``__share_group_state`` partition. Brokers ask it, so it
        needs CLUSTER_ACTION, as Kafka's KafkaApis checks."""
        if ctx.api_version < FIRST_SHARE_FIND_COORDINATOR_VERSION:
            return refused(ErrorCode.INVALID_REQUEST,
                           f"Key type SHARE needs FindCoordinator v{FIRST_SHARE_FIND_COORDINATOR_VERSION}.")
        locator = self.services.provider(SHARE_COORDINATOR, Module)
        if not conforms(locator, ShareCoordinatorLocator):
            return refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, "This broker runs no share coordinator.")
        if not self._allowed(ctx, "CLUSTER_ACTION", "CLUSTER", CLUSTER_RESOURCE):
            return refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        code, broker = await locator.find_share_coordinator(key)
        endpoint = broker.endpoint(ctx.connection.listener) if broker is not None else None
        if code != ErrorCode.NONE or broker is None or endpoint is None:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE if code == ErrorCode.NONE else code
            return refused(code, "The coordinator is not available." if code != ErrorCode.INVALID_REQUEST
                           else f"Share coordinator key {key!r} is not group:topicId:partition.")
        return {"key": key, "node_id": broker.broker_id, "host": endpoint.host, "port": endpoint.port,
                "error_code": ErrorCode.NONE, "error_message": None}

    # --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup --------------------------------------------

    def _group_request(self, ctx: RequestContext, group_id: str, operation: str = "READ", *,
                       named: bool = False) -> None:
        """The checks every request about one group starts with (Kafka's order: authorization,
        then the group id, then coordinator). ``named``: the API refuses an empty group id with
        INVALID_GROUP_ID, as Kafka's GroupCoordinatorService does for JoinGroup, SyncGroup,
        Heartbeat, LeaveGroup and OffsetDelete (OffsetCommit, OffsetFetch, DescribeGroups and
        DeleteGroups still take the empty id, for old clients)."""
        if not self._allowed(ctx, operation, "GROUP", group_id):
            raise KafkaApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if named and not group_id:
            raise KafkaApiError(ErrorCode.INVALID_GROUP_ID, "The group id must not be empty.")
        self.check_coordinator(group_id)

    async def join_group(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        version = ctx.api_version
        self._group_request(ctx, body["group_id"], named=True)
        self.coordinator.check_session_timeout(body["session_timeout_ms"])  # before a consumer group goes
        session = body["session_timeout_ms"]
        rebalance = body.get("rebalance_timeout_ms", -1) if version >= 1 else -1
        protocols = tuple((p["name"], bytes(p["metadata"])) for p in body.get("protocols") or [])
        join = JoinRequest(
            group_id=body["group_id"], member_id=body["member_id"],
            group_instance_id=body.get("group_instance_id"), client_id=ctx.client_id or "",
            client_host="/" + ctx.connection.client_address[0], session_timeout_ms=session,
            rebalance_timeout_ms=session if rebalance < 0 else rebalance,
            protocol_type=body["protocol_type"], protocols=protocols,
            require_known_member_id=version >= 4,
            skip_assignment_supported=version >= FIRST_SKIP_ASSIGNMENT_JOIN_VERSION)
        if await self._claim_for_classic(body["group_id"]):
            return await self._join_consumer_group(ctx, body, join)
        answer: asyncio.Future[JoinResult] = self.services.loop.create_future()
        self.coordinator.join(join, _settle(answer))
        result = await answer
        return fit_body(ApiKey.JOIN_GROUP, "response", version, {
            "throttle_time_ms": 0, "error_code": result.error_code, "generation_id": result.generation_id,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name if result.protocol_name is not None or version >= 7 else "",
            "leader": result.leader, "skip_assignment": result.skip_assignment, "member_id": result.member_id,
            "members": [{"member_id": m, "group_instance_id": i, "metadata": metadata}
                        for m, i, metadata in result.members]})

    async def _join_consumer_group(self, ctx: RequestContext, body: Mapping[str, Any],
                                   join: JoinRequest) -> Answer:
        """JoinGroup for a consumer group with members: the member lives in the consumer group
        (KIP-848's migration). The answer names no leader and no members: every classic member
        syncs as a follower, and SyncGroup gives it what the server-side assignor chose."""
        version = ctx.api_version
        answer: dict[str, Any] = {"throttle_time_ms": 0, "generation_id": -1, "protocol_type": None,
                                  "protocol_name": None if version >= 7 else "", "leader": "",
                                  "skip_assignment": False, "member_id": body["member_id"], "members": []}
        try:
            joined = await self.consumer.classic_join(join)
        except KafkaApiError as refusal:  # Kafka's error response: no member id
            answer.update(error_code=refusal.code, member_id="")
        else:
            if joined.member_id_required:
                answer.update(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id=joined.member_id)
            else:
                answer.update(error_code=ErrorCode.NONE, generation_id=joined.generation_id,
                              protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=joined.protocol_name,
                              member_id=joined.member_id)
        return fit_body(ApiKey.JOIN_GROUP, "response", version, answer)

    async def sync_group(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        self._group_request(ctx, body["group_id"], named=True)
        if self.consumer.get(body["group_id"]) is not None:
            return await self._sync_consumer_group(ctx, body)
        answer: asyncio.Future[SyncResult] = self.services.loop.create_future()
        assignments = [(a["member_id"], bytes(a["assignment"])) for a in body.get("assignments") or []]
        self.coordinator.sync(body["group_id"], body["generation_id"], body["member_id"],
                              body.get("group_instance_id"), body.get("protocol_type"),
                              body.get("protocol_name"), assignments, _settle(answer))
        result = await answer
        return fit_body(ApiKey.SYNC_GROUP, "response", ctx.api_version, {
            "throttle_time_ms": 0, "error_code": result.error_code, "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name, "assignment": result.assignment})

    async def _sync_consumer_group(self, ctx: RequestContext, body: Mapping[str, Any]) -> Answer:
        """SyncGroup of a classic member of a consumer group: its assignment, encoded as its
        ConsumerProtocol version; the leader's assignments, if any were sent, are ignored."""
        answer: dict[str, Any] = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
                                  "protocol_type": body.get("protocol_type"),
                                  "protocol_name": body.get("protocol_name"), "assignment": b""}
        try:
            answer["assignment"] = await self.consumer.classic_sync(
                body["group_id"], body["member_id"], body.get("group_instance_id"), body["generation_id"],
                body.get("protocol_type"), body.get("protocol_name"))
        except KafkaApiError as refusal:
            answer.update(error_code=refusal.code, protocol_type=None, protocol_name=None)
        return fit_body(ApiKey.SYNC_GROUP, "response", ctx.api_version, answer)

    def heartbeat(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        self._group_request(ctx, body["group_id"], named=True)
        if self.consumer.get(body["group_id"]) is not None:  # a classic member of a consumer group
            code = self.consumer.classic_heartbeat(body["group_id"], body["member_id"],
                                                   body.get("group_instance_id"), body["generation_id"])
            return {"throttle_time_ms": 0, "error_code": code}
        self.coordinator.heartbeat(body["group_id"], body["generation_id"], body["member_id"],
                                   body.get("group_instance_id"))
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE}

    async def leave_group(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        version = ctx.api_version
        self._group_request(ctx, body["group_id"], named=True)
        leaving = [(m["member_id"], m.get("group_instance_id")) for m in body.get("members") or []] \
            if version >= 3 else [(body["member_id"], None)]
        if self.consumer.get(body["group_id"]) is not None:  # classic members of a consumer group
            left = await self.consumer.classic_leave(body["group_id"], leaving)
            codes = [code for _, code in left]
            leaving = [(member_id, instance_id) for (member_id, _), (_, instance_id) in zip(left, leaving)]
        else:
            codes = self.coordinator.leave(body["group_id"], leaving)
        if version < 3:
            return fit_body(ApiKey.LEAVE_GROUP, "response", version,
                            {"throttle_time_ms": 0, "error_code": codes[0]})
        return fit_body(ApiKey.LEAVE_GROUP, "response", version, {
            "throttle_time_ms": 0, "error_code": ErrorCode.NONE,
            "members": [{"member_id": m, "group_instance_id": i, "error_code": code}
                        for (m, i), code in zip(leaving, codes)]})

    # --- KIP-848: ConsumerGroupHeartbeat, ConsumerGroupDescribe (consumer_service.py) ----------

    async def consumer_group_heartbeat(self, ctx: RequestContext, request: Request) -> Answer:
        if not self._consumer_protocol_enabled:  # Kafka's KafkaApis.isConsumerGroupProtocolEnabled
            return self.consumer.refused_heartbeat(KafkaApiError(ErrorCode.UNSUPPORTED_VERSION))
        group_id = request.body["group_id"]
        upgrade: list[GroupRecord] = []
        try:
            if group_id:  # an empty id is the handler's INVALID_REQUEST
                self._group_request(ctx, group_id)
                upgrade = await self._claim_for_consumer(group_id, request.body, ctx.api_version)
        except KafkaApiError as refusal:
            return self.consumer.refused_heartbeat(refusal)
        if not upgrade:
            return await self.consumer.heartbeat(ctx, request.body)
        # KIP-848's online upgrade: the classic group gives way, and comes back if the upgrade
        # and the heartbeat cannot be written together.
        released = self.coordinator.release_for_upgrade(group_id)
        answer = await self.consumer.heartbeat(ctx, request.body, upgrade)
        if answer["error_code"] != ErrorCode.NONE:
            self.coordinator.adopt(group_id, released)
        else:
            self.services.log.info("group %s: upgraded to a consumer group with %d classic member(s)",
                                   group_id, len(released.members))
        return answer

    def consumer_group_describe(self, ctx: RequestContext, request: Request) -> Answer:
        described = []
        for group_id in request.body.get("group_ids") or []:
            try:
                if not self._allowed(ctx, "DESCRIBE", "GROUP", group_id):
                    raise KafkaApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
                self.check_coordinator(group_id)
                if self.consumer.get(group_id) is None and self.coordinator.groups.get(group_id) is not None:
                    raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND,
                                        f"Group {group_id} is not a consumer group.")
                described.append(self.consumer.describe(group_id, ctx.api_version))
            except KafkaApiError as refusal:
                described.append(self.consumer.refused_describe(group_id, refusal))
        if request.body.get("include_authorized_operations"):
            self._add_authorized_operations(ctx, described)
        return {"throttle_time_ms": 0, "groups": described}

    def _add_authorized_operations(self, ctx: RequestContext, described: list[dict[str, Any]]) -> None:
        """KIP-430, as Kafka's KafkaApis: each group described without error gets the operations
        the principal may do on it; refused ones keep the default."""
        conn = ctx.connection
        for group in described:
            if group["error_code"] == ErrorCode.NONE:
                group["authorized_operations"] = authorized_operations(
                    self.services.authorizer, conn.principal, conn.client_address[0], ResourceType.GROUP,
                    group["group_id"])

    def foreign_group(self, group_id: str) -> bool:
        """The id names a group of a type this module does not serve (a share group)."""
        return any(other.holds_group(group_id) for other in self.foreign_groups)

    def _check_txn_member(self, group_id: str, generation_or_epoch: int, member_id: str,
                          instance_id: str | None) -> None:
        """TxnOffsetCommit's member check, by the group's type: a KIP-848 consumer group's member
        and epoch (a stale epoch is ILLEGAL_GENERATION, as Kafka answers), else the classic group's."""
        consumer_group = self.consumer.get(group_id)
        if consumer_group is None:
            self.coordinator.check_txn_offset_commit(group_id, generation_or_epoch, member_id, instance_id)
            return
        try:
            self.consumer.check_commit(consumer_group, member_id, generation_or_epoch, 0, transactional=True)
        except KafkaApiError as refusal:
            if refusal.code != ErrorCode.STALE_MEMBER_EPOCH:
                raise
            raise KafkaApiError(ErrorCode.ILLEGAL_GENERATION, str(refusal)) from None

    async def _claim_for_consumer(self, group_id: str, body: Mapping[str, Any], version: int
                                  ) -> list[GroupRecord]:
        """A joining heartbeat (epoch 0) takes over an Empty classic group, as Kafka's
        ``getOrMaybeCreateConsumerGroup`` does: its metadata gets a tombstone, its committed offsets
        stay and are the consumer group's (the offline upgrade: stop the classic consumers, start
        them with ``group.protocol=consumer``). A classic group with members is converted with
        the heartbeat (the online upgrade, ``group.consumer.migration.policy`` permitting): the
        answer is the records that convert it, for the heartbeat to write with its own. Any other
        heartbeat, a refused upgrade, or a share group's id is GROUP_ID_NOT_FOUND. A malformed
        join is refused first and drops nothing."""
        not_consumer = KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND,
                                     f"Group {group_id} is not a consumer group.")
        if self.foreign_group(group_id):
            raise not_consumer
        classic = self.coordinator.groups.get(group_id)
        if classic is None:
            return []
        if body["member_epoch"] != JOIN_GROUP_MEMBER_EPOCH:
            raise not_consumer
        if classic.members or classic.state is not GroupState.EMPTY:
            self.consumer.handlers.check_heartbeat(body, version)
            try:
                check_upgrade(classic, self.consumer.groups.config.migration_policy,
                              self.consumer.groups.config.max_size)
                topics = {name: info.topic_id for name, info in self._topic_infos().items()}
                return consumer_group_records(classic, topics)
            except UpgradeRefused as why:
                self.services.log.info("group %s: cannot upgrade the classic group to a consumer group: %s",
                                       group_id, why)
                raise not_consumer from None
        self.consumer.handlers.check_heartbeat(body, version)
        await self._write(group_id, [GroupRecord(GroupMetadataKey(group_id), None)])
        # Another join may have taken it meanwhile (consumers started together): then it is gone,
        # which is fine; a classic member that joined meanwhile keeps it.
        still_there = self.coordinator.groups.get(group_id) is not None
        if still_there and not self.coordinator.forget_empty_group(group_id):
            raise not_consumer
        return []

    async def _claim_for_classic(self, group_id: str) -> bool:
        """A classic JoinGroup for a consumer group: an empty one is deleted first, its committed
        offsets kept for the classic group (Kafka's downgrade, maybeDeleteEmptyConsumerGroup); for
        a non-empty one the answer is True: the member joins the consumer group (Kafka's
        classicGroupJoinToConsumerGroup, whatever the migration policy). A share group's id is
        INCONSISTENT_GROUP_PROTOCOL (Kafka's classicGroupJoin on a group of another type)."""
        if self.foreign_group(group_id):
            raise KafkaApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Group {group_id} is a share group.")
        consumer_group = self.consumer.get(group_id)
        if consumer_group is None:
            return False
        if consumer_group.members:
            return True
        await self.consumer.delete(group_id, keep_offsets=True)
        return False

    # --- OffsetCommit, OffsetFetch, OffsetDelete ------------------------------------------------

    def _partition_exists(self, topic: str, partition: int) -> bool:
        info = self.services.cluster.topics.get(topic)
        return info is not None and partition in info.partitions

    def _topic_name(self, by_id: bool, topic: Mapping[str, Any]) -> str | None:
        """The topic an OffsetCommit/OffsetFetch entry names: by id from v10 (None for an id no
        topic has), else by name."""
        if by_id:
            return self.services.cluster.topic_name(topic["topic_id"])
        return str(topic["name"])

    def _topic_id(self, name: str) -> uuid.UUID:
        info = self.services.cluster.topics.get(name)
        return info.topic_id if info is not None else NO_TOPIC_ID

    async def offset_commit(self, ctx: RequestContext, request: Request) -> Answer:
        """Kafka's order (KafkaApis, then the coordinator): no READ on the group fails every
        partition; partitions of unreadable or unknown topics are answered at once and, if none
        is left, the group is not looked at; the group's checks (or the write) fail every other
        partition, over-long metadata included; only then is that OFFSET_METADATA_TOO_LARGE."""
        if ctx.api_version == 0:
            return await self.zookeeper_offsets.commit(ctx, request)
        body = request.body
        group_id = body["group_id"]
        if not self._allowed(ctx, "READ", "GROUP", group_id):
            return self._offset_commit_refused(ctx, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        codes: dict[tuple[str, int], ErrorCode] = {}
        entries: list[OffsetEntry] = []
        too_large: list[tuple[str, int]] = []  # refused by the coordinator, after the group's checks
        max_metadata = self.group_config.offset_metadata_max_bytes
        by_id = ctx.api_version >= FIRST_TOPIC_ID_OFFSETS_VERSION
        unknown_ids: list[dict[str, Any]] = []  # v10+: topics named by an id no topic has
        for topic in body.get("topics") or []:
            name = self._topic_name(by_id, topic)
            if name is None:
                unknown_ids.append({"topic_id": topic["topic_id"], "partitions": [
                    {"partition_index": p["partition_index"], "error_code": ErrorCode.UNKNOWN_TOPIC_ID}
                    for p in topic.get("partitions") or []]})
                continue
            readable = self._allowed(ctx, "READ", "TOPIC", name)
            for p in topic.get("partitions") or []:
                key = (name, p["partition_index"])
                metadata = p.get("committed_metadata") or ""
                refusal = commit_refusal(readable, self._partition_exists(*key), metadata, max_metadata)
                if refusal is ErrorCode.OFFSET_METADATA_TOO_LARGE:
                    too_large.append(key)
                    codes[key] = refusal
                elif refusal is not None:
                    codes[key] = refusal
                else:
                    codes[key] = ErrorCode.NONE
                    commit_timestamp = p.get("commit_timestamp", DEFAULT_COMMIT_TIMESTAMP)  # v1 only
                    entries.append(OffsetEntry(
                        name, key[1], p["committed_offset"], p.get("committed_leader_epoch", NO_EPOCH),
                        metadata, None if commit_timestamp == DEFAULT_COMMIT_TIMESTAMP else commit_timestamp))
        written = ErrorCode.NONE
        try:
            if entries or too_large:  # else Kafka answers without asking the coordinator
                self.check_coordinator(group_id)  # the group's ACL was checked above
                consumer_group = self.consumer.get(group_id)
                if consumer_group is not None:
                    self.consumer.check_commit(consumer_group, body.get("member_id", ""),
                                               body.get("generation_id_or_member_epoch", -1), ctx.api_version)
                    await self.consumer.commit_offsets(group_id, entries, self.timers.wall_ms())
                else:
                    outcome: asyncio.Future[ErrorCode] = self.services.loop.create_future()
                    self.coordinator.commit_offsets(group_id, body.get("generation_id_or_member_epoch", -1),
                                                    body.get("member_id", ""), body.get("group_instance_id"),
                                                    entries, _settle(outcome), version=ctx.api_version)
                    written = await outcome
        except KafkaApiError as exc:
            written = exc.code
        for entry in entries:
            codes[(entry.topic, entry.partition)] = written
        if written != ErrorCode.NONE:
            for key in too_large:
                codes[key] = written
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (name, partition), code in codes.items():
            by_topic.setdefault(name, []).append({"partition_index": partition, "error_code": code})
        answered = [{"name": n, "topic_id": self._topic_id(n) if by_id else NO_TOPIC_ID, "partitions": p}
                    for n, p in by_topic.items()]
        return fit_body(ApiKey.OFFSET_COMMIT, "response", ctx.api_version, {
            "throttle_time_ms": 0, "topics": answered + unknown_ids})

    def _offset_commit_refused(self, ctx: RequestContext, body: Mapping[str, Any], code: ErrorCode) -> Answer:
        """Every partition of the OffsetCommit answered ``code`` (Kafka's getErrorResponse)."""
        by_id = ctx.api_version >= FIRST_TOPIC_ID_OFFSETS_VERSION
        topics = [{"name": topic.get("name", ""),
                   "topic_id": topic.get("topic_id", NO_TOPIC_ID) if by_id else NO_TOPIC_ID,
                   "partitions": [{"partition_index": p["partition_index"], "error_code": code}
                                  for p in topic.get("partitions") or []]}
                  for topic in body.get("topics") or []]
        return fit_body(ApiKey.OFFSET_COMMIT, "response", ctx.api_version,
                        {"throttle_time_ms": 0, "topics": topics})

    def _fetch_group(self, ctx: RequestContext, group_id: str, topics: Sequence[Mapping[str, Any]] | None,
                     require_stable: bool = False, member_id: str | None = None, member_epoch: int = -1,
                     by_id: bool = False) -> tuple[ErrorCode, list[dict[str, Any]]]:
        """One group's OffsetFetch answer: (group error, topics). A partition never committed is
        offset -1; with the group's error every partition asked carries it too (v0-1 style).
        ``require_stable`` (KIP-447): UNSTABLE_OFFSET_COMMIT where a transaction's offsets wait.
        ``by_id`` (v10+): topics are named by id, answered by id; an unknown id is UNKNOWN_TOPIC_ID,
        and "every committed partition" leaves out topics that no longer exist (they have no id)."""
        unknown_ids: list[dict[str, Any]] = []
        asked: list[tuple[str, list[int]]] | None = None
        if topics is not None:
            asked = []
            for t in topics:
                partitions = list(t.get("partition_indexes") or [])
                name = self._topic_name(by_id, t)
                if name is None:
                    unknown_ids.append({"topic_id": t["topic_id"], "partitions": [
                        {"partition_index": p, "committed_offset": NO_OFFSET, "metadata": "",
                         "committed_leader_epoch": NO_EPOCH, "error_code": ErrorCode.UNKNOWN_TOPIC_ID}
                        for p in partitions]})
                    continue
                asked.append((name, partitions))
        try:
            self._group_request(ctx, group_id, "DESCRIBE")
            consumer_group = self.consumer.get(group_id)
            if consumer_group is not None:
                self.consumer.check_fetch(consumer_group, member_id, member_epoch)
            else:
                self.coordinator.classic_group(group_id)
            error = ErrorCode.NONE
        except KafkaApiError as exc:
            error = exc.code
        by_topic: dict[str, list[dict[str, Any]]] = {}
        if error != ErrorCode.NONE:
            for name, partitions in asked or []:
                by_topic[name] = [{"partition_index": p, "committed_offset": NO_OFFSET,
                                   "committed_leader_epoch": NO_EPOCH, "metadata": "", "error_code": error}
                                  for p in partitions]
        else:
            for name, partition, value in self.coordinator.offsets.committed(group_id, asked):
                if not self._allowed(ctx, "DESCRIBE", "TOPIC", name):
                    if asked is None:
                        continue  # "all offsets" leaves out the topics the caller may not see
                    row = {"committed_offset": NO_OFFSET, "committed_leader_epoch": NO_EPOCH, "metadata": "",
                           "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
                elif require_stable and self.txn_offsets.pending.is_pending(group_id, name, partition):
                    row = {"committed_offset": NO_OFFSET, "committed_leader_epoch": NO_EPOCH, "metadata": "",
                           "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT}
                elif value is None:
                    row = {"committed_offset": NO_OFFSET, "committed_leader_epoch": NO_EPOCH, "metadata": "",
                           "error_code": ErrorCode.NONE}
                else:
                    row = {"committed_offset": value.offset, "committed_leader_epoch": value.leader_epoch,
                           "metadata": value.metadata, "error_code": ErrorCode.NONE}
                by_topic.setdefault(name, []).append({"partition_index": partition, **row})
        if not by_id:
            return error, [{"name": n, "partitions": p} for n, p in by_topic.items()]
        answered = [{"topic_id": self._topic_id(n), "partitions": p} for n, p in by_topic.items()]
        return error, [t for t in answered if t["topic_id"] != NO_TOPIC_ID] + unknown_ids

    def offset_fetch(self, ctx: RequestContext, request: Request) -> Answer | Awaitable[Answer]:
        """require_stable (v7+): partitions with transactional offsets pending answer
        UNSTABLE_OFFSET_COMMIT, which the consumer retries (KIP-447)."""
        if ctx.api_version == 0:
            return self.zookeeper_offsets.fetch(ctx, request)
        body = request.body
        stable = bool(body.get("require_stable", False))
        version = ctx.api_version
        if version >= 8:
            groups = []
            for asked in body.get("groups") or []:
                error, topics = self._fetch_group(ctx, asked["group_id"], asked.get("topics"), stable,
                                                  asked.get("member_id"), asked.get("member_epoch", -1),
                                                  by_id=version >= FIRST_TOPIC_ID_OFFSETS_VERSION)
                groups.append({"group_id": asked["group_id"], "topics": topics, "error_code": error})
            return fit_body(ApiKey.OFFSET_FETCH, "response", version,
                            {"throttle_time_ms": 0, "groups": groups})
        error, topics = self._fetch_group(ctx, body["group_id"], body.get("topics"), stable)
        return fit_body(ApiKey.OFFSET_FETCH, "response", version,
                        {"throttle_time_ms": 0, "topics": topics, "error_code": error})

    async def offset_delete(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        group_id = body["group_id"]
        self._group_request(ctx, group_id, "DELETE", named=True)
        asked: list[tuple[str, int]] = []
        codes: dict[tuple[str, int], ErrorCode] = {}
        for topic in body.get("topics") or []:
            readable = self._allowed(ctx, "READ", "TOPIC", topic["name"])
            for p in topic.get("partitions") or []:
                key = (topic["name"], p["partition_index"])
                if not readable:
                    codes[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif not self._partition_exists(*key):
                    codes[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    asked.append(key)
        consumer_group = self.consumer.get(group_id)
        if consumer_group is not None:
            codes.update(await self.consumer.delete_offsets(consumer_group, asked))
        else:
            outcome: asyncio.Future[dict[tuple[str, int], ErrorCode]] = self.services.loop.create_future()
            self.coordinator.delete_offsets(group_id, asked, _settle(outcome))
            codes.update(await outcome)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (name, partition), code in codes.items():
            by_topic.setdefault(name, []).append({"partition_index": partition, "error_code": code})
        return {"error_code": ErrorCode.NONE, "throttle_time_ms": 0,
                "topics": [{"name": n, "partitions": p} for n, p in by_topic.items()]}

    # --- DescribeGroups, ListGroups, DeleteGroups -----------------------------------------------

    def describe_group(self, group_id: str, version: int = 6) -> dict[str, Any]:
        """One group as DescribeGroups answers it (also the admin's view from Python)."""
        blank: dict[str, Any] = {"group_id": group_id, "error_message": None, "group_state": "",
                                 "protocol_type": "", "protocol_data": "", "members": []}
        try:
            self.check_coordinator(group_id)
            consumer_group = self.consumer.get(group_id)
            if consumer_group is not None:
                return self.consumer.described_as_classic(consumer_group)
            group = self.coordinator.classic_group(group_id)
        except KafkaApiError as exc:
            return {**blank, "error_code": exc.code, "error_message": exc.message}
        if group is None:
            if version >= 6:  # a share group's id: Kafka's classicGroup lookup refuses it by type
                message = (f"Group {group_id} is not a classic group." if self.foreign_group(group_id)
                           else f"Group {group_id} not found.")
                return {**blank, "error_code": ErrorCode.GROUP_ID_NOT_FOUND,
                        "group_state": GroupState.DEAD.value, "error_message": message}
            return {**blank, "error_code": ErrorCode.NONE, "group_state": GroupState.DEAD.value}
        return group.describe()

    def describe_groups(self, ctx: RequestContext, request: Request) -> Answer:
        described = []
        for group_id in request.body.get("groups") or []:
            if not self._allowed(ctx, "DESCRIBE", "GROUP", group_id):
                described.append({"group_id": group_id, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                  "error_message": None, "group_state": "", "protocol_type": "",
                                  "protocol_data": "", "members": []})
                continue
            described.append(self.describe_group(group_id, ctx.api_version))
        if ctx.api_version >= 3 and request.body.get("include_authorized_operations"):
            self._add_authorized_operations(ctx, described)
        return fit_body(ApiKey.DESCRIBE_GROUPS, "response", ctx.api_version,
                        {"throttle_time_ms": 0, "groups": described})

    def list_group_states(self, states: Collection[str] = (), types: Collection[str] = ()
                          ) -> tuple[ErrorCode, list[dict[str, Any]]]:
        """The groups this broker coordinates, filtered as ListGroups v4/v5 filter (case-blind)."""
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        listed = []
        for group in self.coordinator.groups.values():
            if group.partition not in self._loaded or group.state is GroupState.DEAD:
                continue
            if wanted_states and group.state.value.lower() not in wanted_states:
                continue
            if wanted_types and group.group_type not in wanted_types:
                continue
            listed.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                           "group_state": group.state.value, "group_type": group.group_type})
        listed += self.consumer.listed(lambda partition: partition in self._loaded,
                                       wanted_states, wanted_types)
        for other in self.foreign_groups:
            listed += other.listed_groups(wanted_states, wanted_types)
        loading = bool(self._loads.partitions())
        return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NONE), listed

    def list_groups(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        error, listed = self.list_group_states(body.get("states_filter") or (),
                                               body.get("types_filter") or ())
        if not self._allowed(ctx, "DESCRIBE", "CLUSTER", CLUSTER_RESOURCE):
            listed = [g for g in listed if self._allowed(ctx, "DESCRIBE", "GROUP", g["group_id"])]
        return fit_body(ApiKey.LIST_GROUPS, "response", ctx.api_version,
                        {"throttle_time_ms": 0, "error_code": error, "groups": listed})

    async def delete_group(self, group_id: str) -> ErrorCode:
        """One group deleted (it must be empty); the admin's call from Python as well."""
        try:
            self.check_coordinator(group_id)
            for other in self.foreign_groups:
                if other.holds_group(group_id):
                    return await other.delete_group(group_id)
            if self.consumer.get(group_id) is not None:
                await self.consumer.delete(group_id)
                return ErrorCode.NONE
            outcome: asyncio.Future[ErrorCode] = self.services.loop.create_future()
            self.coordinator.delete_group(group_id, _settle(outcome))
            return await outcome
        except KafkaApiError as exc:
            return exc.code

    async def delete_groups(self, ctx: RequestContext, request: Request) -> Answer:
        results = []
        for group_id in request.body.get("groups_names") or []:
            if not self._allowed(ctx, "DELETE", "GROUP", group_id):
                code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            else:
                code = await self.delete_group(group_id)
            results.append({"group_id": group_id, "error_code": code})
        return {"throttle_time_ms": 0, "results": results}

