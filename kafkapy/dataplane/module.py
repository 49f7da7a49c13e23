"""The data-plane module: the APIs that read and write partition logs.

Produce (produce.py), InitProducerId for idempotent producers, DescribeProducers, ListOffsets,
OffsetForLeaderEpoch and DeleteRecords here, Fetch from kafkapy.dataplane.fetch
when that file is present, DescribeLogDirs and AlterReplicaLogDirs from
kafkapy.dataplane.log_dirs. Partitions (partitions.py) says which partitions this broker leads
and holds their logs. Auto topic creation (Kafka's ``auto.create.topics.enable``) is offered to
the core's Metadata handler as the capability AUTO_TOPIC_CREATION and used by Produce; topics
are made through the topics module's create path (capability TOPIC_CREATION).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from kafkapy.configs.module import DYNAMIC_CONFIGS, ConfigsModule, DynamicConfigs
from kafkapy.dataplane.fetch import FETCH_CONFIG_KEYS, FETCH_VERSIONS, FetchHandler
from kafkapy.dataplane.log_dirs import ALTER_REPLICA_LOG_DIRS_VERSIONS, DESCRIBE_LOG_DIRS_VERSIONS, LogDirs
from kafkapy.dataplane.maintenance import LONG_MAX, MAINTENANCE_CONFIG_KEYS, LogMaintenance
from kafkapy.dataplane.markers import WRITE_TXN_MARKERS_VERSIONS, MarkerWriter
from kafkapy.dataplane.partitions import LogHome, Partitions, memory_home, topic_partitions
from kafkapy.dataplane.produce import ProduceHandler
from kafkapy.dataplane.produce_frame import ProduceFromFrame
from kafkapy.dataplane.producer_ids import ProducerIds, half_named_producer
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log import LogConfig, LogManager
from kafkapy.log.base import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_OFFSET,
    NO_TIMESTAMP,
    UNDEFINED_EPOCH,
    TimestampAndOffset,
)
from kafkapy.log.manager import configured_log_dirs
from kafkapy.log.topic_config import InvalidTopicConfig
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.codec import body_fitter
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import CLUSTER_RESOURCE, AllowAll, ResourceTypeAuthorizer
from kafkapy.server.config import ConfigError, ConfigKey
from kafkapy.server.conformance import conforms
from kafkapy.server.core import INTERNAL_TOPICS
from kafkapy.server.modules import Answer, ApiHandler, FromFrame, Module, RequestContext
from kafkapy.server.services import (
    AUTO_TOPIC_CREATION,
    PARTITION_LOGS,
    TOPIC_CONFIGS_CAPABILITY,
    TOPIC_CREATION,
    BrokerServices,
    PartitionLogs,
)
from kafkapy.server.topic_deletions import TopicDeletions
from kafkapy.server.txn_coordinator import TRANSACTION_COORDINATOR, TransactionCoordinatorLocator
from kafkapy.server.txn_markers import TXN_MARKERS, TxnMarker
from kafkapy.store.base import StoreError
from kafkapy.store.durable import DurableStore
from kafkapy.validators import AtLeast

__all__ = ["TRANSACTIONAL_PRODUCERS", "DataPlaneModule", "TopicCreation", "TransactionalProducers"]

_log = logging.getLogger("kafkapy.dataplane")
_HOUR_MS = 60 * 60 * 1000
NO_PRODUCER_EPOCH = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1  # IsolationLevel
CONSUMER_REPLICA_ID = -1  # Kafka's ListOffsetsRequest.CONSUMER_REPLICA_ID
DEBUGGING_REPLICA_ID = -2  # Kafka's ListOffsetsRequest.DEBUGGING_REPLICA_ID: any replica answers it
# The first ListOffsets version that takes each special timestamp (Kafka's ReplicaManager
# timestampMinSupportedVersion); an older version, or a negative timestamp not listed, is answered
# UNSUPPORTED_VERSION for that partition.
SPECIAL_TIMESTAMP_VERSIONS: Mapping[int, int] = {
    LATEST_TIMESTAMP: 1, EARLIEST_TIMESTAMP: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL_TIMESTAMP: 8,
    LATEST_TIERED_TIMESTAMP: 9, EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11}
_EARLIEST = (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP)  # answered whatever the isolation level


@runtime_checkable
class TopicCreation(Protocol):
    async def create_topics_with_defaults(self, names: Collection[str]) -> dict[str, ErrorCode]:
        """Create each topic with num.partitions and default.replication.factor; per name NONE,
        TOPIC_ALREADY_EXISTS or the reason it was refused."""


# The transaction coordinator: InitProducerId with a transactional id is its to answer.
TRANSACTIONAL_PRODUCERS = "transactional-producers"


@runtime_checkable
class TransactionalProducers(Protocol):
    def init_transactional_producer(self, ctx: RequestContext, request: Request) -> Awaitable[Answer]: ...


@runtime_checkable
class TopicConfigs(Protocol):
    def log_config(self, topic: str) -> LogConfig: ...


@runtime_checkable
class WatchedTopicConfigs(Protocol):
    def watch_log_configs(self, callback: Callable[[str, LogConfig], None]) -> Callable[[], None]: ...


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], object]) -> None:
    """``callback`` on ``loop`` from any thread; nothing once the loop is closed."""
    try:
        loop.call_soon_threadsafe(callback)
    except RuntimeError:  # closed
        pass


def _each_partition(topics: Any, topic_key: str, partition_key: str, blank: Mapping[str, Any],
                    answer: Callable[[str, Mapping[str, Any]], Mapping[str, Any]],
                    storage_failed: Callable[[str, int, OSError], KafkaApiError]) -> list[dict[str, Any]]:
    """Kafka's per-partition answer: every partition asked gets its own result, ``blank`` filled in by
    ``answer``, and a KafkaApiError becomes that partition's error_code (the others are unaffected).
    An OSError is the partition's log failing: ``storage_failed`` takes its dir offline and says
    what to answer (KAFKA_STORAGE_ERROR)."""
    answered = []
    for topic in topics or []:
        name = topic[topic_key]
        results = []
        for asked in topic.get("partitions") or []:
            result = {partition_key: asked[partition_key], "error_code": ErrorCode.NONE, **blank}
            try:
                result.update(answer(name, asked))
            except KafkaApiError as exc:
                result["error_code"] = exc.code
            except OSError as exc:
                result["error_code"] = storage_failed(name, asked[partition_key], exc).code
            results.append(result)
        answered.append({topic_key: name, "partitions": results})
    return answered


# The keys this module lets change at run time: of Kafka's LogCleaner.ReconfigurableConfigs the one
# kafkapy's cleaner reads (it has one cleaner thread and no dedupe buffer or I/O throttle), and
# KIP-854's producer.id.expiration.ms and KIP-890's transaction.partition.verification.enable.
VERIFICATION_KEY = "transaction.partition.verification.enable"
DATAPLANE_DYNAMIC_KEYS = frozenset({"log.cleaner.backoff.ms", "producer.id.expiration.ms", VERIFICATION_KEY})


class DataPlaneModule(Module):
    name = "dataplane"
    provides = (AUTO_TOPIC_CREATION, PARTITION_LOGS, TXN_MARKERS)
    wants = (TOPIC_CREATION, TOPIC_CONFIGS_CAPABILITY, DYNAMIC_CONFIGS)
    config_keys = (
        ConfigKey("log.dirs", "list", None,
                  "Directories for segment files (Kafka's layout); unset: log.dir, else logs in memory."),
        ConfigKey("log.dir", "string", None,
                  "One directory for segment files when log.dirs is unset (Kafka's default is "
                  "/tmp/kafka-logs; kafkapy keeps logs in memory when neither is set)."),
        ConfigKey("auto.create.topics.enable", "boolean", True,
                  "Create a topic on a Produce to it or a Metadata request allowing auto-creation "
                  "(Kafka's default: true)."),
        ConfigKey("producer.id.expiration.ms", "int", 24 * _HOUR_MS,
                  "How long a partition remembers an idle idempotent producer (Kafka's default, 1 day).",
                  AtLeast(1)),
        ConfigKey(VERIFICATION_KEY, "boolean", True,
                  "KIP-890 part 1: a transaction's first batch in a partition is checked with the "
                  "transaction coordinator before it is appended (Kafka 3.6+'s default: true)."),
        *FETCH_CONFIG_KEYS,
        *MAINTENANCE_CONFIG_KEYS,
    )

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self._partitions: Partitions | None = None
        self._producer_ids: ProducerIds | None = None
        self._produce: ProduceHandler | None = None
        self._verifier: TransactionCoordinatorLocator | None = None  # see _txn_verifier
        self._verifier_looked_up = False
        self._produce_frames: ProduceFromFrame | None = None
        self._markers: MarkerWriter | None = None
        self._creating: set[asyncio.Task[Any]] = set()
        self._owns_logs = False
        self._publishing: asyncio.Task[None] | None = None  # _publish_offline's writer
        self._publish_again = False
        self._fetch: FetchHandler | None = None
        self._log_dirs: LogDirs | None = None
        self._configs_provider: Module | None = None  # log_config's cache of its provider check
        self._topic_configs: TopicConfigs | None = None
        self._maintenance: LogMaintenance | None = None
        self._unwatch_configs: Callable[[], None] | None = None
        self._topic_deletions: TopicDeletions | None = None
        config = services.config
        # Kafka's defaults under the broker's log.* settings: what a topic without overrides gets
        # when no configs module answers for it.
        try:
            self.default_log_config = LogConfig.from_topic_config({}, config.values)
        except InvalidTopicConfig as exc:
            raise ConfigError(f"invalid broker log settings: {exc.message}") from None

    @property
    def _allows_all(self) -> bool:
        """No authorizer configured (Kafka's default): the data plane asks nothing."""
        return isinstance(self.services.authorizer, AllowAll)

    @property
    def log_dirs(self) -> list[str]:
        config = self.services.config
        return configured_log_dirs(config["log.dirs"], config["log.dir"])

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        services = self.services
        expiration = services.config["producer.id.expiration.ms"]
        wall = services.wall_clock  # record timestamps, time-based roll and retention: a virtual clock's too

        def wall_ms() -> int:
            return int(wall() * 1000)
        if self.log_dirs:
            # meta.properties pins a directory to its cluster only when the cluster has a lasting
            # identity (a store that keeps its metadata: ZooKeeper, or on disk beside the logs; or
            # cluster.id set): an in-memory store makes a new one each run.
            kept = services.store.keeps_metadata()
            lasting = kept or bool(services.config["cluster.id"])
            try:
                # Topic ids outlive the broker only in such a store; in memory a topic made again on
                # restart has a new one, which its logs on disk then take.
                # Kept on disk without ZooKeeper (Kafka's KRaft mode), a partition log whose topic id
                # the metadata does not hold is a stray (a deleted topic's: a topic's logs are
                # dropped lazily) and is set aside, else a topic made again under its name would
                # find it and be refused. On ZooKeeper Kafka refuses such a log (no stray check).
                held = await asyncio.to_thread(topic_partitions, services.store) \
                    if isinstance(services.store, DurableStore) else None
                logs = await asyncio.to_thread(
                    LogManager, self.log_dirs, broker_id=services.broker_id,
                    cluster_id=services.cluster.cluster_id if lasting else None,
                    default_config=self.default_log_config, clock=wall_ms, lasting_topic_ids=kept,
                    is_stray=None if held is None else
                    lambda topic, partition, topic_id: (topic_id, partition) not in held)
                home = LogHome(logs, producer_id_expiration_ms=expiration)
                if held is not None:  # each log left is of a topic the metadata holds
                    home.remember_topic_ids()
                await asyncio.to_thread(home.recover_producer_states)
            except (ValueError, OSError) as exc:  # MetaPropertiesMismatch is a ValueError
                raise ConfigError(f"log.dirs {','.join(self.log_dirs)}: {exc}") from None
            self._owns_logs = True
        else:
            home = memory_home(services.store, lambda: LogHome(
                LogManager(default_config=self.default_log_config, clock=wall_ms),
                producer_id_expiration_ms=expiration))
        self._partitions = Partitions(home, services.cluster, lambda: services.broker_id, self.log_config,
                                      shared=not self._owns_logs, loop=services.loop,
                                      transaction_verification=services.config[VERIFICATION_KEY])
        self._producer_ids = ProducerIds(services.store, services.broker_id)
        # With no authorizer configured nothing is asked on Produce's path (None: allow all).
        self._produce = ProduceHandler(self._partitions, self.log_config, self._start_auto_create, wall_ms,
                                       authorize=None if self._allows_all else services.authorizer.authorize,
                                       verifier=self._txn_verifier)
        self._produce_frames = ProduceFromFrame(self._produce, lambda: services.broker_id)
        self._markers = MarkerWriter(self._partitions, self.log_config, services.authorizer.authorize,
                                     wall_ms)
        self._fetch = FetchHandler(self._partitions, services,
                                   authorize=None if self._allows_all else services.authorizer.authorize,
                                   compression_type=lambda topic: self.log_config(topic).compression_type)
        partitions = self._partitions
        self._log_dirs = LogDirs(partitions, self._allowed)
        self._log_dirs.resume()  # moves between log dirs a stop interrupted
        config = services.config
        self._maintenance = LogMaintenance(
            lambda: partitions.logs, lock=partitions.home.lock,
            maintains=(lambda key: True) if self._owns_logs else self._leads,
            retention_check_interval_ms=config["log.retention.check.interval.ms"],
            cleaner_enable=config["log.cleaner.enable"], cleaner_backoff_ms=config["log.cleaner.backoff.ms"],
            clock=services.clock, producers=lambda: partitions.home.producers,
            producer_expiration_check_ms=config["producer.id.expiration.check.interval.ms"],
            # the topics module declares this one (a broker default of flush.ms); Kafka's default
            flush_scheduler_interval_ms=config.get("log.flush.scheduler.interval.ms") or LONG_MAX,
            recovery_point_checkpoint_ms=config["log.flush.offset.checkpoint.interval.ms"],
            log_start_checkpoint_ms=config["log.flush.start.offset.checkpoint.interval.ms"],
            high_watermark_checkpoint_ms=config["replica.high.watermark.checkpoint.interval.ms"],
            storage_failed=partitions.storage_failed)
        if self._owns_logs:
            # Kafka's LogDirFailureHandler: a failure the background writer meets is handled on
            # the loop; when no log dir is left the broker stops, as Kafka halts it.
            handle = functools.partial(_call_soon, services.loop, partitions.handle_reported_failures)
            partitions.logs.on_failure_reported = handle
            partitions.on_all_dirs_failed = services.fail
            # KIP-112: the controller learns which replicas are offline here (kafkapy.store's
            # LogDirStore), as Kafka's broker writes a log dir event for its controller.
            partitions.logs.on_offline = functools.partial(_call_soon, services.loop, self._publish_offline)
            if partitions.logs.offline_partitions:  # dirs that failed at start
                self._publish_offline()
        self._maintenance.start(services.loop)
        if self._owns_logs:
            partitions.logs.on_deletion_queued = self._maintenance.schedule_deletions
            self._maintenance.schedule_deletions()  # the -delete directories found at load
            # Kafka's broker deletes a deleted topic's logs as soon as it learns of the deletion
            # (renamed -delete now, removed file.delete.delay.ms later), not when the name is next
            # used: a long-running broker whose users delete topics would keep their files.
            self._topic_deletions = TopicDeletions(services.cluster, self._drop_deleted_topics)
            self._topic_deletions.start(services.loop)
        configs = services.provider(TOPIC_CONFIGS_CAPABILITY, Module)
        if isinstance(configs, WatchedTopicConfigs):
            # A log keeps the LogConfig it was made with unless told: segment.bytes/ms, retention
            # and cleanup.policy changes reach the existing logs here.
            self._unwatch_configs = configs.watch_log_configs(partitions.logs.set_topic_config)
            # Logs read from log.dirs were opened with the static defaults: each takes its topic's
            # config now (overrides, dynamic broker defaults), before a retention pass reads it.
            for topic in partitions.logs.topics():
                partitions.logs.set_topic_config(topic, self.log_config(topic))
        dynamic = services.provider(DYNAMIC_CONFIGS, ConfigsModule)
        if dynamic is not None:  # Kafka's LogCleaner and DynamicProducerStateManagerConfig keys
            await dynamic.register(DynamicConfigs(DATAPLANE_DYNAMIC_KEYS, frozenset(), lambda settings: None,
                                                  self._apply_dynamic))

    def _txn_verifier(self) -> TransactionCoordinatorLocator | None:
        """Who checks a transaction's first batch (KIP-890): the transaction coordinator module,
        looked up once (the modules are fixed when the broker starts; an isinstance against the
        runtime-checkable protocol costs some 18 us, too much for each transaction's Produce)."""
        if self._verifier_looked_up:
            return self._verifier
        found = self.services.provider(TRANSACTION_COORDINATOR, Module)
        self._verifier = found if isinstance(found, TransactionCoordinatorLocator) else None
        self._verifier_looked_up = True
        return self._verifier

    async def _apply_dynamic(self, settings: Mapping[str, Any]) -> None:
        """log.cleaner.backoff.ms, producer.id.expiration.ms and
        transaction.partition.verification.enable, at once: the cleaner's next pass, every
        partition's producer table (Kafka's ProducerStateManagerConfig is shared too), Produce."""
        if self._partitions is not None:  # Produce's and the coordinators' transactional writes
            self._partitions.transaction_verification = str(settings[VERIFICATION_KEY]).lower() == "true"
        if self._maintenance is not None:
            self._maintenance.set_cleaner_backoff_ms(int(settings["log.cleaner.backoff.ms"]))
        if self._partitions is not None:
            home = self._partitions.home
            expiration = int(settings["producer.id.expiration.ms"])
            home.producer_id_expiration_ms = expiration
            for state in list(home.producers.values()):
                state.producer_id_expiration_ms = expiration

    @property
    def partitions(self) -> Partitions:
        """The partition registry (for inspection: tests, the toolkit); set once started."""
        if self._partitions is None:
            raise RuntimeError("the data plane has not started")
        return self._partitions

    def partition_logs(self) -> PartitionLogs:
        """PARTITION_LOGS: the partitions this broker leads, for modules keeping state in a topic."""
        return self.partitions

    @property
    def fetch_handler(self) -> FetchHandler:
        """The Fetch handler and its KIP-227 session cache (for inspection); set once started."""
        if self._fetch is None:
            raise RuntimeError("the data plane has not started")
        return self._fetch

    def _leads(self, key: tuple[str, int]) -> bool:
        try:
            return self.partitions.leader_of(*key) == self.services.broker_id
        except KafkaApiError:
            return False

    @property
    def maintenance(self) -> LogMaintenance:
        """Retention and compaction (periodic, and on demand for tests); set once started."""
        if self._maintenance is None:
            raise RuntimeError("the data plane has not started")
        return self._maintenance

    def _publish_offline(self) -> None:
        """Publish this broker's offline replicas (on the loop): one writer at a time, each write
        the whole set as it is then, so the last one written is the latest."""
        if self._publishing is not None and not self._publishing.done():
            self._publish_again = True
            return
        self._publishing = self.services.loop.create_task(self._publish_offline_loop())

    async def _publish_offline_loop(self) -> None:
        services = self.services
        assert self._partitions is not None
        logs = self._partitions.logs
        self._publish_again = True
        while self._publish_again:
            self._publish_again = False
            offline = frozenset(logs.offline_partitions)
            try:
                await asyncio.to_thread(services.store.set_offline_replicas, services.broker_id, offline)
            except StoreError as exc:  # the dir stays offline here; the controller does not hear
                _log.error("could not publish the offline replicas %s: %s", sorted(offline), exc)
                return
            _log.info("published %d offline replicas for the controller", len(offline))

    def _drop_deleted_topics(self, deleted: Mapping[str, uuid.UUID]) -> None:
        """Topics the cluster view lost (gone, or back under a new id), each with the id it had:
        their logs are dropped. Topics deleted while this broker was down are the stray check's at
        load."""
        if self._partitions is None:
            return
        for topic, topic_id in deleted.items():
            if self._partitions.home.drop_deleted_topic(topic, topic_id):
                _log.info("the logs of deleted topic %s (id %s) are scheduled for deletion", topic, topic_id)

    async def stop(self) -> None:
        if self._topic_deletions is not None:
            self._topic_deletions.stop()
            self._topic_deletions = None
        if self._publishing is not None:
            self._publishing.cancel()
        if self._maintenance is not None:
            self._maintenance.stop()
        if self._unwatch_configs is not None:
            self._unwatch_configs()
            self._unwatch_configs = None
        for task in list(self._creating):
            task.cancel()
        if self._log_dirs is not None:
            await self._log_dirs.stop()
        if self._owns_logs and self._partitions is not None:
            await asyncio.to_thread(self._partitions.logs.close)

    def log_config(self, topic: str) -> LogConfig:
        """The topic's LogConfig as appends and new logs use it: the configs module's answer, or
        the broker's defaults when no module answers for topic configs."""
        configs = self.services.provider(TOPIC_CONFIGS_CAPABILITY, Module)
        if configs is not self._configs_provider:  # a Protocol isinstance costs microseconds
            self._configs_provider = configs
            self._topic_configs = configs if isinstance(configs, TopicConfigs) else None
        topic_configs = self._topic_configs
        return topic_configs.log_config(topic) if topic_configs is not None else self.default_log_config


    def apis(self) -> Mapping[int, ApiHandler]:
        handlers: dict[int, ApiHandler] = {
            ApiKey.PRODUCE: ApiHandler(VersionRange(0, 13), self.produce, from_frame=self.produce_from_frame),
            ApiKey.INIT_PRODUCER_ID: ApiHandler(VersionRange(0, 6), self.init_producer_id),
            ApiKey.DESCRIBE_PRODUCERS: ApiHandler(VersionRange(0, 0), self.describe_producers),
            ApiKey.LIST_OFFSETS: ApiHandler(VersionRange(0, 11), self.list_offsets),
            ApiKey.OFFSET_FOR_LEADER_EPOCH: ApiHandler(VersionRange(0, 4), self.offset_for_leader_epoch),
            ApiKey.DELETE_RECORDS: ApiHandler(VersionRange(0, 2), self.delete_records),
            ApiKey.DESCRIBE_LOG_DIRS: ApiHandler(DESCRIBE_LOG_DIRS_VERSIONS, self.describe_log_dirs),
            ApiKey.ALTER_REPLICA_LOG_DIRS: ApiHandler(ALTER_REPLICA_LOG_DIRS_VERSIONS,
                                                      self.alter_replica_log_dirs),
            ApiKey.WRITE_TXN_MARKERS: ApiHandler(WRITE_TXN_MARKERS_VERSIONS, self.write_txn_markers),
        }
        handlers[ApiKey.FETCH] = ApiHandler(FETCH_VERSIONS, self.fetch)
        return handlers

    def fetch(self, ctx: RequestContext, request: Request) -> Answer | Awaitable[Answer]:
        """FetchHandler.handle (kafkapy/dataplane/fetch.py) once the module has started."""
        if self._fetch is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "the data plane has not started")
        return self._fetch.handle(ctx, request)

    # --- transaction markers (TXN_MARKERS, WriteTxnMarkers) ------------------------------------

    def write_markers(self, markers: Sequence[TxnMarker]) -> Mapping[tuple[int, str, int], ErrorCode]:
        """TXN_MARKERS (kafkapy.server.txn_markers.TxnMarkerWriter), for the transaction coordinator."""
        if self._markers is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "the data plane has not started")
        return self._markers.write_markers(markers)

    def watch_txn_markers(self, callback: Callable[[TxnMarker, str, int], None]) -> Callable[[], None]:
        """TxnMarkerEvents (kafkapy.server.txn_markers): told of each marker written here."""
        if self._markers is None:
            raise RuntimeError("the data plane has not started")
        return self._markers.watch(callback)

    def write_txn_markers(self, ctx: RequestContext, request: Request) -> Answer:
        if self._markers is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "the data plane has not started")
        return self._markers.handle(ctx, request)

    # --- auto topic creation ------------------------------------------------------------------

    async def auto_create_topics(self, names: Collection[str]) -> dict[str, ErrorCode]:
        """Kafka's auto-creation for Metadata: per name, LEADER_NOT_AVAILABLE while it is being
        created (or was just made by someone else), or why it cannot be; {} when disabled."""
        creation = self.services.provider(TOPIC_CREATION, Module)
        if not (self.services.config["auto.create.topics.enable"] and conforms(creation, TopicCreation)
                and names):
            return {}
        results = await creation.create_topics_with_defaults(names)
        return {name: ErrorCode.LEADER_NOT_AVAILABLE
                if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS) else code
                for name, code in results.items()}

    def _start_auto_create(self, topic: str) -> None:
        """Produce to a missing topic: create it in the background (the partition is answered
        UNKNOWN_TOPIC_OR_PARTITION meanwhile, and the producer retries)."""
        if not self.services.config["auto.create.topics.enable"]:
            return
        task = self.services.loop.create_task(self.auto_create_topics([topic]))
        self._creating.add(task)
        task.add_done_callback(self._creating.discard)

    # --- Produce, InitProducerId, DescribeProducers ---------------------------------------------

    def produce(self, ctx: RequestContext, request: Request) -> Answer | Awaitable[Answer]:
        if self._produce is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "the data plane has not started")
        return self._produce.handle(ctx, request)

    def produce_from_frame(self, api_version: int) -> FromFrame | None:
        """Produce's fast path from the frame (kafkapy.dataplane.produce_frame) for one version,
        once the module has started (before, the plain path answers, and refuses)."""
        if self._produce_frames is None:
            return None
        return self._produce_frames.for_version(api_version)

    def append_batch(self, topic: str, partition: int, batch: bytes) -> ErrorCode:
        """A record batch appended to a partition this broker leads, through Produce's own path
        (for seeding in process); NONE or the code a Produce would answer."""
        if self._produce is None:
            raise RuntimeError("the data plane has not started")
        version = self.apis()[ApiKey.PRODUCE].versions.high
        return ErrorCode(self._produce.append(topic, partition, batch, version)["error_code"])

    def init_producer_id(self, ctx: RequestContext, request: Request) -> Answer | Awaitable[Answer]:
        """Idempotent producers here; a transactional id goes to the transaction coordinator
        (TRANSACTIONAL_PRODUCERS), or without one gets NOT_COORDINATOR, as from a broker that is
        not theirs."""
        fit = body_fitter(ApiKey.INIT_PRODUCER_ID, "response", ctx.api_version)
        if request.body.get("transactional_id") is not None:
            coordinator = self.services.provider(TRANSACTIONAL_PRODUCERS, Module)
            if conforms(coordinator, TransactionalProducers):
                return coordinator.init_transactional_producer(ctx, request)
            return fit({"throttle_time_ms": 0, "error_code": ErrorCode.NOT_COORDINATOR,
                        "producer_id": NO_OFFSET, "producer_epoch": NO_PRODUCER_EPOCH})
        if not self._allows_all and not self._may_write_idempotently(ctx):
            return fit({"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        "producer_id": NO_OFFSET, "producer_epoch": NO_PRODUCER_EPOCH})
        if half_named_producer(request.body.get("producer_id", NO_OFFSET),
                               request.body.get("producer_epoch", NO_PRODUCER_EPOCH)):
            return fit({"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
                        "producer_id": NO_OFFSET, "producer_epoch": NO_PRODUCER_EPOCH})
        ids = self._producer_ids
        assert ids is not None

        def answer(producer_id: int) -> Answer:
            return fit({"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id,
                        "producer_epoch": 0})

        if not ids.needs_block:
            return answer(ids.next_id())

        async def from_new_block() -> Answer:
            return answer(await asyncio.to_thread(ids.next_id))
        return from_new_block()

    def _may_write_idempotently(self, ctx: RequestContext) -> bool:
        """Kafka's InitProducerId without a transactional id: IDEMPOTENT_WRITE on the CLUSTER, or
        WRITE on some topic (authorizeByResourceType, when the authorizer can tell)."""
        if self._allowed(ctx, "IDEMPOTENT_WRITE", "CLUSTER", CLUSTER_RESOURCE):
            return True
        authorizer = self.services.authorizer
        conn = ctx.connection
        return conforms(authorizer, ResourceTypeAuthorizer) and authorizer.authorize_any(
            conn.principal, conn.client_address[0], "WRITE", "TOPIC")

    def describe_producers(self, ctx: RequestContext, request: Request) -> Answer:
        """READ on the topic (Kafka's handleDescribeProducersRequest), else TOPIC_AUTHORIZATION_FAILED;
        any replica answers, as Kafka's (the admin clients' broker_id / --broker-id)."""
        topics = []
        for topic in request.body.get("topics") or []:
            name = topic["name"]
            results = []
            readable = self._allows_all or self._allowed(ctx, "READ", "TOPIC", name)
            for index in topic.get("partition_indexes") or []:
                result: dict[str, Any] = {"partition_index": index, "error_code": ErrorCode.NONE,
                                          "error_message": None, "active_producers": []}
                if not readable:
                    result.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    results.append(result)
                    continue
                try:
                    state = self.partitions.replica_producer_state(name, index)
                except KafkaApiError as exc:
                    result.update(error_code=exc.code)
                except OSError as exc:  # reading the log for its producers: the log's dir failed
                    result.update(error_code=self.partitions.storage_failed(name, index, exc).code)
                else:
                    result["active_producers"] = [
                        {"producer_id": entry.producer_id, "producer_epoch": entry.producer_epoch,
                         "last_sequence": entry.last_seq, "last_timestamp": entry.last_timestamp,
                         "coordinator_epoch": entry.coordinator_epoch,
                         "current_txn_start_offset": -1 if entry.current_txn_first_offset is None
                         else entry.current_txn_first_offset}
                        for entry in (state.producers.values() if state is not None else ())]
                results.append(result)
            topics.append({"name": name, "partitions": results})
        return {"throttle_time_ms": 0, "topics": topics}

    # --- ListOffsets, OffsetForLeaderEpoch, DeleteRecords, the log dirs ----------------------

    def _describable(self, ctx: RequestContext, name: str) -> None:
        """TOPIC_AUTHORIZATION_FAILED unless the principal may DESCRIBE the topic (ListOffsets,
        OffsetForLeaderEpoch from a consumer, as Kafka asks)."""
        if not self._allows_all and not self._allowed(ctx, "DESCRIBE", "TOPIC", name):
            raise KafkaApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)

    def list_offsets(self, ctx: RequestContext, request: Request) -> Answer:
        """ListOffsets v1+ (Kafka's handleListOffsetRequestV1AndAbove and ReplicaManager.fetchOffset),
        per partition in this order: DESCRIBE on the topic, a partition named twice
        (INVALID_REQUEST, answered once), a special timestamp this version does not take
        (UNSUPPORTED_VERSION), the current leader epoch, leadership, then the lookup. Only a
        consumer (replica id -1) is held to its isolation level; a debugging request (-2) may be
        answered by any replica."""
        if ctx.api_version == 0:
            return self._list_offsets_v0(ctx, request)
        version = ctx.api_version
        body = request.body
        replica_id = body.get("replica_id", CONSUMER_REPLICA_ID)
        read_committed = (replica_id == CONSUMER_REPLICA_ID
                          and body.get("isolation_level", READ_UNCOMMITTED) == READ_COMMITTED)
        # A partition named twice is answered once, INVALID_REQUEST (Kafka keeps one result per
        # partition); a topic named twice is answered as one.
        unique: dict[str, dict[str, Any]] = {}
        seen: set[tuple[str, int]] = set()
        duplicates: set[tuple[str, int]] = set()
        for topic in body.get("topics") or []:
            merged = unique.setdefault(topic["name"], {"name": topic["name"], "partitions": []})
            for asked in topic.get("partitions") or []:
                key = (topic["name"], asked["partition_index"])
                if key in seen:
                    duplicates.add(key)
                else:
                    seen.add(key)
                    merged["partitions"].append(asked)

        def answer(name: str, asked: Mapping[str, Any]) -> dict[str, Any]:
            self._describable(ctx, name)
            index = asked["partition_index"]
            timestamp = asked["timestamp"]
            if (name, index) in duplicates:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST, "the partition is named more than once")
            if timestamp < 0 and SPECIAL_TIMESTAMP_VERSIONS.get(timestamp, version + 1) > version:
                raise KafkaApiError(ErrorCode.UNSUPPORTED_VERSION,
                                    f"ListOffsets v{version} does not take the timestamp {timestamp}")
            partitions = self.partitions
            partitions.check_leader_epoch(name, index, asked.get("current_leader_epoch", UNDEFINED_EPOCH))
            log = (partitions.replica_log(name, index) if replica_id == DEBUGGING_REPLICA_ID
                   else partitions.leader_log(name, index))
            found: TimestampAndOffset | None
            if read_committed and timestamp == LATEST_TIMESTAMP:  # the LSO, with the latest epoch
                found = TimestampAndOffset(NO_TIMESTAMP, log.last_stable_offset,
                                           log.latest_offset().leader_epoch)
            else:
                found = log.offset_for_timestamp(timestamp)
                # Kafka's Partition.fetchOffsetForTimestamp: nothing a consumer of this isolation
                # level could not read yet (the high watermark is the log end here).
                if (found is not None and read_committed and timestamp not in _EARLIEST
                        and found.offset >= log.last_stable_offset):
                    found = None
            if found is None:
                return {}
            return {"timestamp": found.timestamp, "offset": found.offset, "leader_epoch": found.leader_epoch}

        topics = _each_partition(list(unique.values()), "name", "partition_index", {
            "timestamp": NO_TIMESTAMP, "offset": NO_OFFSET, "leader_epoch": UNDEFINED_EPOCH}, answer,
            self.partitions.storage_failed)
        return body_fitter(ApiKey.LIST_OFFSETS, "response", version)(
            {"throttle_time_ms": 0, "topics": topics})

    def _list_offsets_v0(self, ctx: RequestContext, request: Request) -> Answer:
        """ListOffsets v0 (Kafka's handleListOffsetRequestV0): a list of offsets per partition,
        segment starts by time (``PartitionLog.legacy_offsets_before``), only -1 and -2 of the
        special timestamps; a consumer (replica id -1) is never told of an offset past the high
        watermark, which takes the place of those; a debugging request (-2) may be answered by
        any replica."""
        replica_id = request.body.get("replica_id", CONSUMER_REPLICA_ID)
        from_consumer = replica_id == CONSUMER_REPLICA_ID

        def answer(name: str, asked: Mapping[str, Any]) -> dict[str, Any]:
            self._describable(ctx, name)
            timestamp = asked["timestamp"]
            if timestamp < EARLIEST_TIMESTAMP:
                raise KafkaApiError(ErrorCode.UNSUPPORTED_VERSION,
                                    "ListOffsets v0 takes only the timestamps -1 and -2 of the special ones")
            partitions, index = self.partitions, asked["partition_index"]
            log = (partitions.replica_log(name, index) if replica_id == DEBUGGING_REPLICA_ID
                   else partitions.leader_log(name, index))
            offsets = log.legacy_offsets_before(timestamp, asked["max_num_offsets"])
            high_watermark = log.high_watermark
            if from_consumer and any(offset > high_watermark for offset in offsets):
                offsets = [high_watermark, *(offset for offset in offsets if offset <= high_watermark)]
            return {"old_style_offsets": offsets}

        topics = _each_partition(request.body.get("topics"), "name", "partition_index",
                                 {"old_style_offsets": []}, answer, self.partitions.storage_failed)
        return body_fitter(ApiKey.LIST_OFFSETS, "response", ctx.api_version)({"topics": topics})

    def offset_for_leader_epoch(self, ctx: RequestContext, request: Request) -> Answer:
        """Kafka's handleOffsetForLeaderEpochRequest: CLUSTER_ACTION on the cluster (a follower)
        answers for every topic, else DESCRIBE on each (a consumer, KIP-320); then
        current_leader_epoch, leadership, and the log's end offset for the epoch (-1, -1 for one newer than
        any here)."""
        cluster_action = self._allows_all or self._allowed(ctx, "CLUSTER_ACTION", "CLUSTER", CLUSTER_RESOURCE)

        def answer(name: str, asked: Mapping[str, Any]) -> dict[str, Any]:
            if not cluster_action:
                self._describable(ctx, name)
            self.partitions.check_leader_epoch(name, asked["partition"],
                                               asked.get("current_leader_epoch", UNDEFINED_EPOCH))
            log = self.partitions.leader_log(name, asked["partition"])
            found = log.end_offset_for_epoch(asked["leader_epoch"])
            return {"leader_epoch": found.leader_epoch, "end_offset": found.end_offset}

        topics = _each_partition(request.body.get("topics"), "topic", "partition", {
            "leader_epoch": UNDEFINED_EPOCH, "end_offset": NO_OFFSET}, answer,
            self.partitions.storage_failed)
        return body_fitter(ApiKey.OFFSET_FOR_LEADER_EPOCH, "response", ctx.api_version)(
            {"throttle_time_ms": 0, "topics": topics})

    def delete_records(self, ctx: RequestContext, request: Request) -> Answer:
        """Kafka's handleDeleteRecordsRequest and Partition.deleteRecordsOnLeader, per partition in
        this order: DELETE on the topic, the partition's existence, an internal topic
        (INVALID_TOPIC_EXCEPTION), leadership, a cleanup.policy without delete (POLICY_VIOLATION),
        then the offset: -1 means the high watermark (DeleteRecordsRequest.HIGH_WATERMARK), another
        negative one or one past the high watermark is OFFSET_OUT_OF_RANGE."""
        def answer(name: str, asked: Mapping[str, Any]) -> dict[str, Any]:
            if not self._allowed(ctx, "DELETE", "TOPIC", name):
                raise KafkaApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            if name in INTERNAL_TOPICS:  # Kafka's ReplicaManager: the coordinators' records stay
                info = self.partitions.cluster.topics.get(name)
                if info is None or asked["partition_index"] not in info.partitions:
                    raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                raise KafkaApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                    f"Cannot delete records of internal topic {name}")
            log = self.partitions.leader_log(name, asked["partition_index"])
            if not log.config.deletes:  # Kafka's Partition.deleteRecordsOnLeader: compact alone keeps all
                raise KafkaApiError(ErrorCode.POLICY_VIOLATION,
                                    f"Records of partition {name}-{asked['partition_index']} can not "
                                    "be deleted due to the configured policy")
            offset = asked["offset"]
            if offset == NO_OFFSET:
                offset = log.high_watermark
            elif offset < 0:
                raise KafkaApiError(ErrorCode.OFFSET_OUT_OF_RANGE)
            return {"low_watermark": log.delete_records_before(offset)}

        topics = _each_partition(request.body.get("topics"), "name", "partition_index",
                                 {"low_watermark": NO_OFFSET}, answer, self.partitions.storage_failed)
        return {"throttle_time_ms": 0, "topics": topics}

    def _allowed(self, ctx: RequestContext, operation: str, resource_type: str, name: str) -> bool:
        conn = ctx.connection
        return self.services.authorizer.authorize(conn.principal, conn.client_address[0], operation,
                                                  resource_type, name)

    @property
    def log_dirs_handler(self) -> LogDirs:
        """DescribeLogDirs, AlterReplicaLogDirs and the moves under way; set once started."""
        if self._log_dirs is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "the data plane has not started")
        return self._log_dirs

    def describe_log_dirs(self, ctx: RequestContext, request: Request) -> Answer:
        return self.log_dirs_handler.describe(ctx, request)

    def alter_replica_log_dirs(self, ctx: RequestContext, request: Request) -> Answer:
        return self.log_dirs_handler.alter(ctx, request)
