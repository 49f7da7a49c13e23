"""The topics module: CreateTopics (19), DeleteTopics (20), CreatePartitions (37), ElectLeaders (43),
AlterPartitionReassignments (45) and ListPartitionReassignments (46).

Kafka's ZooKeeper-mode controller behavior: only the controller applies changes (the others
answer NOT_CONTROLLER), every topic gets its own result, placement is Kafka's round-robin over
the live brokers, and a change is answered once this broker's topics view (fed by the store's
watch) shows it, or with REQUEST_TIMED_OUT when ``timeout_ms`` runs out first (at once for a
timeout of 0: the change is then still under way, as Kafka answers).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafkapy.configs.broker_log import LOCAL_RETENTION_KEYS
from kafkapy.configs.module import TOPIC_CONFIGS_CAPABILITY, ConfigsModule
from kafkapy.configs.topics import BROKER_LOG_KEYS
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.protocol import fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.primitives import ZERO_UUID
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import CLUSTER_RESOURCE
from kafkapy.server.config import ConfigKey
from kafkapy.server.modules import ApiHandler, Module, RequestContext
from kafkapy.server.policies import CreateTopicRequest, PolicyViolation, load_policy
from kafkapy.server.services import INITIAL_LEADER_EPOCH, NO_LEADER, TOPIC_CREATION, EpochOwed
from kafkapy.store.base import (
    StoreError,
    TopicAlreadyExists,
    TopicInfo,
    UnknownTopic,
    check_topic_name,
)
from kafkapy.store.onloop import watching
from kafkapy.topics.assignment import assign_replicas, placement_for_new_partitions
from kafkapy.topics.elections import ELECTION_MESSAGES, ElectionType, election_outcome
from kafkapy.topics.reassignment import plan_reassignment
from kafkapy.validators import AtLeast

if TYPE_CHECKING:
    from kafkapy.protocol import Request
    from kafkapy.server.services import BrokerServices

__all__ = ["TopicsModule"]

log = logging.getLogger(__name__)



_WAIT_CAP_S = 30.0  # never hold a request longer than this, whatever timeout_ms says
# Kafka's controller refuses an operation that would write more metadata records than this
# (QuorumController.MAX_RECORDS_PER_USER_OP), whole, before planning any of it: so a request for
# two billion partitions is one clear error, not the broker's memory.
MAX_RECORDS_PER_USER_OP = 10_000
_TOO_LARGE = (ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
# KRaft's metadata log: Kafka refuses to create a topic of that name (KafkaApis, ControllerApis).
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
_REASSIGNMENT_TIMEOUT_MS = 60_000  # AlterPartitionReassignments' TimeoutMs default (Kafka's schema)



def _collides(name: str, existing: Mapping[str, TopicInfo]) -> str | None:
    """Kafka refuses a name that differs from an existing one only by '.' versus '_' (metric names)."""
    key = name.replace(".", "_")
    for other in existing:
        if other != name and other.replace(".", "_") == key:
            return other
    return None


def _check_assignment(assignment: Mapping[int, Sequence[int]], live: set[int], first: int) -> None:
    """Explicit replica lists: partitions numbered on from ``first``, non-empty, no duplicate broker,
    one replication factor, live brokers only (INVALID_REPLICA_ASSIGNMENT otherwise)."""
    ids = sorted(assignment)
    if ids != list(range(first, first + len(ids))):
        raise KafkaApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"Partitions should be a consecutive {first}-based integer sequence, got {ids}.")
    sizes = {len(replicas) for replicas in assignment.values()}
    for partition in ids:
        replicas = assignment[partition]
        if not replicas:
            raise KafkaApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                f"Partition {partition} has no replicas.")
        if len(set(replicas)) != len(replicas):
            raise KafkaApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                f"Duplicate replica assignment found: {partition} -> {list(replicas)}.")
        unknown = sorted(set(replicas) - live)
        if unknown:
            raise KafkaApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
    if len(sizes) > 1:
        raise KafkaApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            "All partitions should have the same number of replicas.")


class TopicsModule(Module):
    name = "topics"
    provides = (TOPIC_CREATION,)  # create_topics_with_defaults, for auto topic creation
    wants = (TOPIC_CONFIGS_CAPABILITY,)  # CreateTopics' configs are checked and stored through it
    config_keys = (
        ConfigKey("num.partitions", "int", 1,
                  "Partitions of a topic created with num_partitions -1 (Kafka's default).", AtLeast(1)),
        ConfigKey("default.replication.factor", "int", 1,
                  "Replication factor of a topic created with replication_factor -1 (Kafka's default).",
                  AtLeast(1)),
        ConfigKey("create.topic.policy.class.name", "class", None,
                  "Kafka's CreateTopicPolicy: a class (pkg.mod:Class) whose validate(request) may refuse "
                  "a topic to be created, answered POLICY_VIOLATION (kafkapy.server.policies)."),
        ConfigKey("delete.topic.enable", "boolean", True,
                  "Whether DeleteTopics may delete topics; when false every topic of one is refused "
                  "(TOPIC_DELETION_DISABLED, INVALID_REQUEST before v3), as Kafka's broker answers."),
        # The broker's topic defaults (log.retention.hours, log.segment.bytes, ...): declared here,
        # where a topic is made, so server.properties may set them; configs/topics.py reads them.
        *BROKER_LOG_KEYS,
        *LOCAL_RETENTION_KEYS,
    )

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self._lock = asyncio.Lock()  # one change at a time on the controller
        policy_key = "create.topic.policy.class.name"
        self._policy = load_policy(policy_key, services.config[policy_key] or "", services.config.values)
        self._racks: dict[int, str | None] = {}  # the live brokers' racks, as the last snapshot read them

    def apis(self) -> Mapping[int, ApiHandler]:
        return {
            ApiKey.CREATE_TOPICS: ApiHandler(VersionRange(0, 7), self.create_topics),
            ApiKey.DELETE_TOPICS: ApiHandler(VersionRange(0, 6), self.delete_topics),
            ApiKey.CREATE_PARTITIONS: ApiHandler(VersionRange(0, 3), self.create_partitions),
            ApiKey.ELECT_LEADERS: ApiHandler(VersionRange(0, 2), self.elect_leaders),
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: ApiHandler(VersionRange(0, 1),
                                                             self.alter_partition_reassignments),
            ApiKey.LIST_PARTITION_REASSIGNMENTS: ApiHandler(VersionRange(0, 0),
                                                            self.list_partition_reassignments),
        }

    # --- shared -------------------------------------------------------------------------------

    def _not_controller(self, ctx: RequestContext) -> str | None:
        controller = self.services.cluster.controller_id
        if controller == self.services.broker_id:
            return None
        return (f"This is not the correct controller for this cluster: broker {self.services.broker_id} "
                f"is not the controller (the controller is broker {controller}).")

    def _allowed(self, ctx: RequestContext, operation: str, resource_type: str, name: str) -> bool:
        conn = ctx.connection
        return self.services.authorizer.authorize(conn.principal, conn.client_address[0], operation,
                                               resource_type, name)

    async def _snapshot_or_fail(self, pending: list[tuple[dict[str, Any], Any]]
                                ) -> tuple[dict[str, TopicInfo], set[int], list[tuple[dict[str, Any], Any]]]:
        """The store's topics and live brokers; if the store cannot answer, every pending result
        fails with UNKNOWN_SERVER_ERROR naming the store's error, and nothing is left pending."""
        try:
            existing, live = await self._snapshot()
        except StoreError as exc:
            for result, _ in pending:
                result.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                              error_message=f"metadata store: {exc}")
            return {}, set(), []
        return existing, live, pending

    async def _snapshot(self) -> tuple[dict[str, TopicInfo], set[int]]:
        """The store's topics and live broker ids (fresh, not the watched view)."""
        store = self.services.store
        topics = await asyncio.to_thread(store.topics)
        brokers = await asyncio.to_thread(store.brokers)
        # Their racks too, for Kafka's rack-aware placement (read with the same snapshot).
        self._racks = {b.broker_id: b.rack for b in brokers}
        return topics, {b.broker_id for b in brokers}

    async def _settled(self, done: Callable[[Mapping[str, TopicInfo]], bool], timeout_ms: int) -> bool:
        """Wait until this broker's topics view shows a change (True), or timeout_ms passes (False).
        A watch of the store's topics wakes the wait; it is set after the broker's own, so when it
        sees the change the broker's view (what Metadata answers from) already has it."""
        if timeout_ms <= 0:
            return False
        if done(self.services.cluster.topics):
            return True
        async with watching(self.services.loop, self.services.store.watch_topics) as topics:
            return await topics.wait_for(done, min(timeout_ms / 1000, _WAIT_CAP_S))

    # --- CreateTopics (19) --------------------------------------------------------------------

    async def create_topics(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        body = request.body
        items: list[Mapping[str, Any]] = list(body.get("topics") or [])
        validate_only = bool(body.get("validate_only", False))
        timeout_ms = int(body.get("timeout_ms", 0))
        results: list[dict[str, Any]] = [{"name": item["name"], "topic_id": ZERO_UUID,
                                          "error_code": ErrorCode.NONE,
                                          "error_message": None, "num_partitions": -1,
                                          "replication_factor": -1, "configs": []} for item in items]
        refused = self._not_controller(ctx)
        counts = Counter(item["name"] for item in items)
        cluster_ok = refused is None and self._allowed(ctx, "CREATE", "CLUSTER", CLUSTER_RESOURCE)
        pending: list[tuple[dict[str, Any], Mapping[str, Any]]] = []
        for item, result in zip(items, results):
            if refused is not None:
                result.update(error_code=ErrorCode.NOT_CONTROLLER, error_message=refused)
            elif item["name"] == CLUSTER_METADATA_TOPIC:
                result.update(error_code=ErrorCode.INVALID_REQUEST, error_message=(
                    f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."))
            elif counts[item["name"]] > 1:
                result.update(error_code=ErrorCode.INVALID_REQUEST,
                              error_message="Found multiple entries for this topic.")
            elif not cluster_ok and not self._allowed(ctx, "CREATE", "TOPIC", item["name"]):
                result.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                              error_message="Authorization failed.")
            else:
                pending.append((result, item))
        created: dict[str, int] = {}
        if pending:
            async with self._lock:
                existing, live, pending = await self._snapshot_or_fail(pending)
                if self._topic_records(pending, existing) > MAX_RECORDS_PER_USER_OP:
                    for result, _ in pending:
                        result.update(error_code=_TOO_LARGE[0], error_message=_TOO_LARGE[1])
                    pending = []
                for result, item in pending:
                    try:
                        info = self._plan_topic(item, existing, live)
                        overrides = self._topic_configs(item)
                        self._check_policy(item, info, overrides)
                        if not validate_only:
                            info = await asyncio.to_thread(self.services.store.create_topic, info.name,
                                                           info.partitions, info.topic_id, overrides)
                            if self._configs is not None:
                                self._configs.topics.created(info.name, overrides)
                            existing[info.name] = info
                            created[info.name] = len(info.partitions)
                            log.info("created topic %s (%s) with %d partitions: %s", info.name,
                                     info.topic_id, len(info.partitions), dict(info.partitions))
                    except KafkaApiError as exc:
                        result.update(error_code=exc.code, error_message=exc.message)
                        continue
                    except TopicAlreadyExists:
                        result.update(error_code=ErrorCode.TOPIC_ALREADY_EXISTS,
                                      error_message=f"Topic '{item['name']}' already exists.")
                        continue
                    except StoreError as exc:
                        result.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                                      error_message=f"metadata store: {exc}")
                        continue
                    result.update(topic_id=info.topic_id, num_partitions=len(info.partitions),
                                  replication_factor=len(info.partitions[0]))
                    self._report_configs(ctx, result, overrides)
        if created and not await self._settled(
                lambda view: all(name in view for name in created), timeout_ms):
            for result in results:
                name = result["name"]
                if name in created and (timeout_ms <= 0 or name not in self.services.cluster.topics):
                    result.update(error_code=ErrorCode.REQUEST_TIMED_OUT,
                                  error_message="The topic is being created; it is not in metadata yet.")
        return fit_body(ApiKey.CREATE_TOPICS, "response", ctx.api_version,
                        {"throttle_time_ms": 0, "topics": results})

    async def create_topics_with_defaults(self, names: Collection[str]) -> dict[str, ErrorCode]:
        """Create topics with num.partitions and default.replication.factor on any broker (Kafka's
        auto-creation, not a CreateTopics request: no controller check, no wait for the view).
        A coordinator's state topic (``__consumer_offsets``, ...) is made as its module makes it
        (its partitions, replication factor and configs), as Kafka's AutoTopicCreationManager
        does. Per name: NONE, TOPIC_ALREADY_EXISTS, or the code CreateTopics would answer."""
        results: dict[str, ErrorCode] = {}
        async with self._lock:
            try:
                existing, live = await self._snapshot()
            except StoreError:
                return dict.fromkeys(names, ErrorCode.UNKNOWN_SERVER_ERROR)
            for name in names:
                try:
                    item: dict[str, Any] = {"name": name}
                    overrides: dict[str, str] = {}
                    shape = self.services.internal_topic_shape(name)
                    if shape is not None:
                        partitions, factor, configs = shape
                        item.update(num_partitions=partitions, replication_factor=factor)
                        if self._configs is not None:
                            overrides = self._topic_configs(
                                {"configs": [{"name": k, "value": v} for k, v in configs.items()]})
                    info = self._plan_topic(item, existing, live)
                    self._check_policy(item, info, overrides)
                    info = await asyncio.to_thread(self.services.store.create_topic, info.name,
                                                   info.partitions, info.topic_id, overrides)
                    if self._configs is not None and overrides:
                        self._configs.topics.created(info.name, overrides)
                except KafkaApiError as exc:
                    results[name] = exc.code
                    continue
                except TopicAlreadyExists:
                    results[name] = ErrorCode.TOPIC_ALREADY_EXISTS
                    continue
                except StoreError:
                    results[name] = ErrorCode.UNKNOWN_SERVER_ERROR
                    continue
                existing[info.name] = info
                results[name] = ErrorCode.NONE
                log.info("auto-created topic %s (%s) with %d partitions", info.name, info.topic_id,
                         len(info.partitions))
        return results

    async def create_internal_topic(self, name: str, num_partitions: int, replication_factor: int,
                                    configs: Mapping[str, str], *, kind: str = "internal topic") -> ErrorCode:
        """One topic of its own size and configs on any broker, for a module's internal topic
        (``__consumer_offsets``, made by the group coordinator) or a test's seeded one (``kind``
        says which in the log). NONE, TOPIC_ALREADY_EXISTS, or the code CreateTopics would answer."""
        async with self._lock:
            try:
                existing, live = await self._snapshot()
                info = self._plan_topic({"name": name, "num_partitions": num_partitions,
                                         "replication_factor": replication_factor}, existing, live)
                given = [{"name": k, "value": v} for k, v in configs.items()]
                overrides = self._topic_configs({"configs": given}) if self._configs is not None else {}
                info = await asyncio.to_thread(self.services.store.create_topic, info.name, info.partitions,
                                               info.topic_id, overrides)
            except KafkaApiError as exc:
                return exc.code
            except TopicAlreadyExists:
                return ErrorCode.TOPIC_ALREADY_EXISTS
            except StoreError:
                return ErrorCode.UNKNOWN_SERVER_ERROR
            if self._configs is not None:
                self._configs.topics.created(info.name, overrides)
        log.info("created %s %s (%s) with %d partitions", kind, name, info.topic_id, num_partitions)
        return ErrorCode.NONE

    @property
    def _configs(self) -> ConfigsModule | None:
        return self.services.provider(TOPIC_CONFIGS_CAPABILITY, ConfigsModule)

    def _topic_configs(self, item: Mapping[str, Any]) -> dict[str, str]:
        """The entry's configs, checked as Kafka's LogConfig checks them (INVALID_CONFIG if not)."""
        given = {c["name"]: c.get("value") for c in item.get("configs") or []}
        configs = self._configs
        if configs is None:
            if given:
                raise KafkaApiError(ErrorCode.INVALID_CONFIG,
                                    "Topic configs need the configs module, which this broker does not run.")
            return {}
        return configs.topics.check_create(given)

    def _check_policy(self, item: Mapping[str, Any], info: TopicInfo, configs: Mapping[str, str]) -> None:
        """``create.topic.policy.class.name``'s verdict on a planned topic: KafkaApiError
        POLICY_VIOLATION with the policy's message, UNKNOWN_SERVER_ERROR if the policy fails."""
        if self._policy is None:
            return
        assigned = bool(item.get("assignments"))
        request = CreateTopicRequest(
            topic=info.name, num_partitions=None if assigned else len(info.partitions),
            replication_factor=None if assigned else len(info.partitions[0]),
            replicas_assignments=dict(info.partitions) if assigned else None, configs=dict(configs))
        try:
            self._policy.validate(request)
        except PolicyViolation as exc:
            raise KafkaApiError(ErrorCode.POLICY_VIOLATION, str(exc)) from None
        except Exception as exc:
            log.exception("create.topic.policy.class.name failed on topic %s", info.name)
            raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                f"the create topic policy failed: {exc!r}") from None

    def _report_configs(self, ctx: RequestContext, result: dict[str, Any],
                        overrides: Mapping[str, str]) -> None:
        """CreateTopics v5+ answers with the new topic's configs, as DescribeConfigs would show
        them, when the caller may describe them; else, as Kafka, TOPIC_AUTHORIZATION_FAILED in
        their place, and neither the partition count nor the replication factor (-1 both)."""
        configs = self._configs
        if configs is None or ctx.api_version < 5:
            return
        if not self._allowed(ctx, "DESCRIBE_CONFIGS", "TOPIC", result["name"]):
            result.update(topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, num_partitions=-1,
                          replication_factor=-1)
            return
        result["configs"] = [
            {"name": e["name"], "value": e["value"], "read_only": e["read_only"],
             "config_source": e["config_source"], "is_sensitive": e["is_sensitive"]}
            for e in configs.topics.entries(overrides, False, False, 1)
        ]

    def _topic_records(self, pending: Sequence[tuple[dict[str, Any], Mapping[str, Any]]],
                       existing: Mapping[str, TopicInfo]) -> int:
        """The metadata records creating the new topics of ``pending`` writes, as Kafka's
        controller counts them: one for the topic, one a partition, one a config."""
        total = 0
        for _, item in pending:
            if item["name"] in existing:
                continue
            assignments = item.get("assignments") or []
            partitions = item.get("num_partitions", -1)
            if assignments:
                partitions = len(assignments)
            elif partitions == -1:
                partitions = self.services.config["num.partitions"]
            total += 1 + max(partitions, 0) + len(item.get("configs") or ())
        return total

    def _plan_topic(self, item: Mapping[str, Any], existing: Mapping[str, TopicInfo],
                    live: set[int]) -> TopicInfo:
        """The topic a CreateTopics entry asks for, checked as Kafka checks it (KafkaApiError if not)."""
        name: str = item["name"]
        try:
            check_topic_name(name)
        except StoreError as exc:
            raise KafkaApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from None
        if name in existing:
            raise KafkaApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        other = _collides(name, existing)
        if other is not None:
            raise KafkaApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                f"Topic '{name}' collides with existing topic: {other}")
        partitions: int = item.get("num_partitions", -1)
        factor: int = item.get("replication_factor", -1)
        assignments = item.get("assignments") or []
        if assignments:
            if partitions != -1 or factor != -1:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                    "Both numPartitions or replicationFactor and replicasAssignments were "
                                    "set. Both cannot be used at the same time.")
            explicit: dict[int, tuple[int, ...]] = {}
            for entry in assignments:
                explicit[entry["partition_index"]] = tuple(entry.get("broker_ids") or ())
            if len(explicit) != len(assignments):
                raise KafkaApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                    "Duplicate partition index in the assignment.")
            _check_assignment(explicit, live, 0)
            return TopicInfo(name, uuid.uuid4(), explicit)
        config = self.services.config
        if partitions == -1:
            partitions = config["num.partitions"]
        if factor == -1:
            factor = config["default.replication.factor"]
        if partitions <= 0:
            raise KafkaApiError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if factor <= 0:
            raise KafkaApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                "Replication factor must be larger than 0.")
        if factor > len(live):
            raise KafkaApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                f"Replication factor: {factor} larger than available brokers: {len(live)}.")
        return TopicInfo(name, uuid.uuid4(), assign_replicas(live, partitions, factor, racks=self._racks))

    # --- DeleteTopics (20) --------------------------------------------------------------------

    async def delete_topics(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        body = request.body
        timeout_ms = int(body.get("timeout_ms", 0))
        if ctx.api_version >= 6:
            wanted = [(t.get("name"), t.get("topic_id") or ZERO_UUID) for t in body.get("topics") or []]
        else:
            wanted = [(name, ZERO_UUID) for name in body.get("topic_names") or []]
        results: list[dict[str, Any]] = [{"name": name, "topic_id": topic_id, "error_code": ErrorCode.NONE,
                                          "error_message": None} for name, topic_id in wanted]
        refused = self._not_controller(ctx)
        if refused is not None:
            for result in results:
                result.update(error_code=ErrorCode.NOT_CONTROLLER, error_message=refused)
            return self._delete_response(ctx, results)
        if not self.services.config["delete.topic.enable"]:
            disabled = ErrorCode.INVALID_REQUEST if ctx.api_version < 3 else ErrorCode.TOPIC_DELETION_DISABLED
            for result in results:
                result.update(error_code=disabled)
            return self._delete_response(ctx, results)
        known = self.services.cluster.topics
        by_id = {info.topic_id: info for info in known.values()}
        doomed: list[tuple[dict[str, Any], str]] = []
        for result in results:
            name, topic_id = result["name"], result["topic_id"]
            if name is not None and topic_id != ZERO_UUID:
                result.update(error_code=ErrorCode.INVALID_REQUEST,
                              error_message="Topic name and topic ID can not both be specified.")
                continue
            if name is None and topic_id == ZERO_UUID:
                result.update(error_code=ErrorCode.INVALID_REQUEST,
                              error_message="Neither topic name nor id were specified.")
                continue
            if name is None:
                found = by_id.get(topic_id)
                if found is None:
                    result.update(error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                  error_message=f"Topic id {topic_id} does not exist.")
                    continue
                if not self._allowed(ctx, "DESCRIBE", "TOPIC", found.name):
                    # Kafka does not hide the id (ids are not secret), only the name behind it
                    result.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  error_message="Authorization failed.")
                    continue
                name = result["name"] = found.name
            if not self._allowed(ctx, "DELETE", "TOPIC", name):
                result.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                              error_message="Authorization failed.")
                continue
            doomed.append((result, name))
        deleted: set[str] = set()
        if doomed:
            async with self._lock:
                for result, name in doomed:
                    if name in deleted:
                        continue
                    try:
                        await asyncio.to_thread(self.services.store.delete_topic, name)
                    except UnknownTopic:
                        result.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      error_message=f"Topic '{name}' does not exist.")
                        continue
                    except StoreError as exc:
                        result.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                                      error_message=f"metadata store: {exc}")
                        continue
                    deleted.add(name)
                    log.info("deleted topic %s", name)
            for result, name in doomed:  # the same topic asked for twice shares the outcome
                if name in deleted and result["error_code"] == ErrorCode.NONE and \
                        result["topic_id"] == ZERO_UUID:
                    info = known.get(name)
                    if info is not None and ctx.api_version >= 6:
                        result["topic_id"] = info.topic_id
        if deleted and not await self._settled(lambda view: not deleted & view.keys(), timeout_ms):
            for result in results:
                name = result["name"]
                if name in deleted and (timeout_ms <= 0 or name in self.services.cluster.topics):
                    result.update(error_code=ErrorCode.REQUEST_TIMED_OUT,
                                  error_message="The topic is being deleted; it is still in metadata.")
        return self._delete_response(ctx, results)

    @staticmethod
    def _delete_response(ctx: RequestContext, results: list[dict[str, Any]]) -> Mapping[str, Any]:
        return fit_body(ApiKey.DELETE_TOPICS, "response", ctx.api_version,
                        {"throttle_time_ms": 0, "responses": results})

    # --- CreatePartitions (37) ----------------------------------------------------------------

    async def create_partitions(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        body = request.body
        items: list[Mapping[str, Any]] = list(body.get("topics") or [])
        validate_only = bool(body.get("validate_only", False))
        timeout_ms = int(body.get("timeout_ms", 0))
        counts = Counter(item["name"] for item in items)
        firsts = {item["name"]: item for item in reversed(items)}  # the first entry of each name
        results: dict[str, dict[str, Any]] = {name: {"name": name, "error_code": ErrorCode.NONE,
                                                     "error_message": None}
                                              for name in counts}
        refused = self._not_controller(ctx)
        pending: list[tuple[dict[str, Any], Mapping[str, Any]]] = []
        for name, result in results.items():
            if refused is not None:
                result.update(error_code=ErrorCode.NOT_CONTROLLER, error_message=refused)
            elif counts[name] > 1:
                result.update(error_code=ErrorCode.INVALID_REQUEST,
                              error_message="Duplicate topic in request.")
            elif not self._allowed(ctx, "ALTER", "TOPIC", name):
                result.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                              error_message="Authorization failed.")
            else:
                pending.append((result, firsts[name]))
        grown: dict[str, int] = {}
        if pending:
            async with self._lock:
                existing, live, pending = await self._snapshot_or_fail(pending)
                added_count = sum(max(int(item["count"]) - len(existing[item["name"]].partitions), 0)
                                  for _, item in pending if item["name"] in existing)
                if added_count > MAX_RECORDS_PER_USER_OP:
                    for result, _ in pending:
                        result.update(error_code=_TOO_LARGE[0], error_message=_TOO_LARGE[1])
                    pending = []
                for result, item in pending:
                    name = item["name"]
                    try:
                        added = self._plan_partitions(item, existing.get(name), live)
                        if not validate_only:
                            await asyncio.to_thread(self.services.store.add_partitions, name, added)
                            grown[name] = int(item["count"])
                            log.info("added partitions to topic %s: %s", name, added)
                    except KafkaApiError as exc:
                        result.update(error_code=exc.code, error_message=exc.message)
                    except UnknownTopic:
                        result.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      error_message=f"The topic '{name}' does not exist.")
                    except StoreError as exc:
                        result.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                                      error_message=f"metadata store: {exc}")
        if grown and not await self._settled(
                lambda view: all(n in view and len(view[n].partitions) >= c for n, c in grown.items()),
                timeout_ms):
            view = self.services.cluster.topics
            for name in grown:
                if timeout_ms <= 0 or name not in view or len(view[name].partitions) < grown[name]:
                    results[name].update(error_code=ErrorCode.REQUEST_TIMED_OUT,
                                         error_message="The partitions are being added; not in metadata yet.")
        return fit_body(ApiKey.CREATE_PARTITIONS, "response", ctx.api_version,
                        {"throttle_time_ms": 0, "results": list(results.values())})

    async def elect_leaders(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        """Kafka's ElectLeaders: CLUSTER ALTER, the controller only, a result per requested
        partition; for all partitions (null), every topic with only the partitions whose election
        did something or failed, as Kafka's controller answers. The elections that apply are
        written by the controller's leadership; the answer comes once this broker's view shows
        them, or after ``timeout_ms`` with REQUEST_TIMED_OUT for those it does not show yet
        (Kafka's DelayedElectLeader)."""
        body = request.body
        asked: list[Mapping[str, Any]] | None = body.get("topic_partitions")
        requested: list[tuple[str, list[int]]] | None = None
        if asked is not None:
            # Kafka reads the partitions as a set: a partition (or topic) named twice is one
            # election and one result.
            unique: dict[str, dict[int, None]] = {}
            for item in asked:
                unique.setdefault(item["topic"], {}).update(dict.fromkeys(int(p) for p in item["partitions"]))
            requested = [(topic, list(partitions)) for topic, partitions in unique.items()]
        raw_kind = int(body.get("election_type", ElectionType.PREFERRED))
        timeout_ms = int(body.get("timeout_ms", _REASSIGNMENT_TIMEOUT_MS))
        refusal: tuple[ErrorCode, str] | None = None
        if not self._allowed(ctx, "ALTER", "CLUSTER", CLUSTER_RESOURCE):
            refusal = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed."
        elif raw_kind not in set(ElectionType):
            refusal = ErrorCode.INVALID_REQUEST, f"Unknown election type {raw_kind}"
        elif (not_controller := self._not_controller(ctx)) is not None:
            refusal = ErrorCode.NOT_CONTROLLER, not_controller
        cluster = self.services.cluster
        topics = cluster.topics
        elected: dict[tuple[str, int], dict[str, Any]] = {}

        def result(topic: str, partition: int) -> dict[str, Any]:
            code, message = refusal or self._elect(ElectionType(raw_kind), topic, partition, topics)
            found = {"partition_id": partition, "error_code": code, "error_message": message}
            if code == ErrorCode.NONE:
                elected[topic, partition] = found
            return found

        if requested is not None:
            results = [{"topic": topic, "partition_result": [result(topic, p) for p in partitions]}
                       for topic, partitions in requested]
        elif refusal is not None:
            results = []  # all partitions refused: no partition to name; the top-level code says why
        else:
            results = [{"topic": topic, "partition_result": [
                r for p in sorted(topics[topic].partitions)
                if (r := result(topic, p))["error_code"] != ErrorCode.ELECTION_NOT_NEEDED]}
                for topic in sorted(topics)]
        if elected:
            kind = ElectionType(raw_kind)
            self.services.elect_leaders(kind.election, list(elected))
            for key in await self._elections_seen(kind, elected, timeout_ms):
                elected[key].update(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=None)
        top = ErrorCode.NONE if refusal is None else refusal[0]
        return fit_body(ApiKey.ELECT_LEADERS, "response", ctx.api_version,
                        {"throttle_time_ms": 0, "error_code": top, "replica_election_results": results})

    async def _elections_seen(self, kind: ElectionType, keys: Collection[tuple[str, int]],
                              timeout_ms: int) -> list[tuple[str, int]]:
        """Wait until this broker's view shows each election done (preferred: the first replica
        leads; unclean: a replica leads), or ``timeout_ms`` passes; answers those not shown."""
        cluster = self.services.cluster

        def missing() -> list[tuple[str, int]]:
            left = []
            for topic, partition in keys:
                info = cluster.topics.get(topic)
                replicas = info.partitions.get(partition) if info is not None else None
                found = cluster.leadership(topic, partition)
                if replicas is None or found is None:
                    continue  # deleted meanwhile: nothing to wait for
                done = found[0] == replicas[0] if kind is ElectionType.PREFERRED else found[0] != NO_LEADER
                if not done:
                    left.append((topic, partition))
            return left

        if not missing() or timeout_ms <= 0:
            return missing()
        async with watching(self.services.loop, self.services.store.watch_partition_states) as states:
            await states.wait_for(lambda _: not missing(), min(timeout_ms / 1000, _WAIT_CAP_S))
        return missing()

    def _elect(self, kind: ElectionType, topic: str, partition: int,
               topics: Mapping[str, TopicInfo]) -> tuple[ErrorCode, str | None]:
        info = topics.get(topic)
        replicas = None if info is None else info.partitions.get(partition)
        cluster = self.services.cluster
        leadership = cluster.leadership(topic, partition)
        if replicas is None or leadership is None:
            what = f"topic as {topic}" if info is None else f"partition as {topic}-{partition}"
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such {what}"
        state = cluster.partition_states.get((topic, partition))
        live = cluster.live_replicas_of(topic, partition)  # a replica in a failed log dir is down
        isr = [r for r in replicas if r in live] if state is None else state.isr
        code = election_outcome(kind, replicas, live, leadership[0], isr)
        return code, ELECTION_MESSAGES.get(code)

    def _plan_partitions(self, item: Mapping[str, Any], topic: TopicInfo | None,
                         live: set[int]) -> dict[int, tuple[int, ...]]:
        """The partitions a CreatePartitions entry adds, checked as Kafka checks them."""
        name = item["name"]
        if topic is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        old = len(topic.partitions)
        count = int(item["count"])
        if count < old:
            raise KafkaApiError(ErrorCode.INVALID_PARTITIONS,
                                f"Topic currently has {old} partitions, which is higher than the requested "
                                f"{count}.")
        if count == old:
            raise KafkaApiError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
        assignments = item.get("assignments")
        if assignments is None:
            factor = len(topic.partitions[0]) if 0 in topic.partitions else 1
            if factor > len(live):
                raise KafkaApiError(ErrorCode.INVALID_REPLICATION_FACTOR, f"Replication factor: {factor} "
                                    f"larger than available brokers: {len(live)}.")
            return placement_for_new_partitions(sorted(live), topic.partitions, count,
                                                racks=self._racks)
        if len(assignments) != count - old:
            raise KafkaApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                f"Increasing the number of partitions by {count - old} but "
                                f"{len(assignments)} assignments provided.")
        added = {old + i: tuple(entry.get("broker_ids") or ()) for i, entry in enumerate(assignments)}
        _check_assignment(added, live, old)
        factor = len(topic.partitions[0]) if 0 in topic.partitions else len(added[old])
        if any(len(replicas) != factor for replicas in added.values()):
            raise KafkaApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                f"Inconsistent replication factor between partitions, partition 0 has "
                                f"{factor} while the new partitions have "
                                f"{sorted({len(r) for r in added.values()})}.")
        return added

    # --- AlterPartitionReassignments (45), ListPartitionReassignments (46) ------------------------

    def _reassignment_refusal(self, ctx: RequestContext, operation: str) -> tuple[ErrorCode, str] | None:
        """Why the whole request is refused, as Kafka answers before looking at a partition:
        CLUSTER ``operation`` missing, then this broker not being the controller (ZooKeeper mode;
        kafka-python's and KafkaJS's admins then refresh the controller and ask it again)."""
        if not self._allowed(ctx, operation, "CLUSTER", CLUSTER_RESOURCE):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed."
        not_controller = self._not_controller(ctx)
        if not_controller is not None:
            return ErrorCode.NOT_CONTROLLER, not_controller
        return None

    async def alter_partition_reassignments(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        """Kafka's AlterPartitionReassignments, each reassignment finished at once
        (kafkapy.topics.reassignment): the target replicas written through the store, and the next
        leader epoch owed to each moved partition (the controller's leadership writes it); answered
        once this broker's view shows both, or when ``timeout_ms`` runs out (the reassignment is
        then written, not yet seen here)."""
        body = request.body
        allow_change = bool(body.get("allow_replication_factor_change", True))
        timeout_ms = int(body.get("timeout_ms", _REASSIGNMENT_TIMEOUT_MS))
        asked: list[tuple[str, list[tuple[int, tuple[int, ...] | None]]]] = [
            (topic["name"], [(int(p["partition_index"]),
                              None if p.get("replicas") is None else tuple(int(r) for r in p["replicas"]))
                             for p in topic.get("partitions") or []])
            for topic in body.get("topics") or []]
        results: list[tuple[str, list[dict[str, Any]]]] = [
            (name, [{"partition_index": index, "error_code": ErrorCode.NONE, "error_message": None}
                    for index, _ in partitions]) for name, partitions in asked]
        refusal = self._reassignment_refusal(ctx, "ALTER")
        moved: dict[tuple[str, int], tuple[tuple[int, ...], int]] = {}
        if refusal is not None:
            for _, partition_results in results:
                for result in partition_results:
                    result.update(error_code=refusal[0], error_message=refusal[1])
        elif asked:
            async with self._lock:
                moved = await self._reassign(asked, results, allow_change)
        if moved:
            await self._reassignments_seen(moved, timeout_ms)
        top_code, top_message = refusal or (ErrorCode.NONE, None)
        return fit_body(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "response", ctx.api_version, {
            "throttle_time_ms": 0, "allow_replication_factor_change": allow_change,
            "error_code": top_code, "error_message": top_message,
            "responses": [{"name": name, "partitions": partition_results}
                          for name, partition_results in results]})

    async def _reassign(self, asked: Sequence[tuple[str, Sequence[tuple[int, tuple[int, ...] | None]]]],
                        results: Sequence[tuple[str, Sequence[dict[str, Any]]]], allow_change: bool
                        ) -> dict[tuple[str, int], tuple[tuple[int, ...], int]]:
        """Check and write the reassignments (the controller's lock held); fill in each result and
        return the partitions whose replicas changed, with their new replicas and the leader epoch
        they are completed in (the one after the epoch they had)."""
        store = self.services.store
        flat = [result for _, partition_results in results for result in partition_results]
        try:
            existing, registered = await self._snapshot()
            before = await asyncio.to_thread(store.partition_states)
        except StoreError as exc:
            for result in flat:
                result.update(error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                              error_message=f"metadata store: {exc}")
            return {}
        planned: dict[str, dict[int, tuple[int, ...]]] = {}
        waiting: dict[str, list[dict[str, Any]]] = {}  # the results a topic's write decides
        for (name, partitions), (_, partition_results) in zip(asked, results):
            for (index, target), result in zip(partitions, partition_results):
                try:
                    replicas = plan_reassignment(name, existing.get(name), index, target, registered,
                                                 allow_change)
                except KafkaApiError as exc:
                    result.update(error_code=exc.code, error_message=exc.message)
                    continue
                if replicas is not None:
                    planned.setdefault(name, {})[index] = replicas
                    waiting.setdefault(name, []).append(result)
        moved: dict[tuple[str, int], tuple[int, ...]] = {}
        for name, replicas_by_index in planned.items():
            try:
                await asyncio.to_thread(store.reassign_partitions, name, replicas_by_index)
            except StoreError as exc:
                code, message = (
                    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
                    if isinstance(exc, UnknownTopic)
                    else (ErrorCode.UNKNOWN_SERVER_ERROR, f"metadata store: {exc}"))
                for result in waiting[name]:
                    result.update(error_code=code, error_message=message)
                continue
            log.info("reassigned %s: %s", name, {p: list(r) for p, r in replicas_by_index.items()})
            moved.update({(name, index): replicas for index, replicas in replicas_by_index.items()})
        owed = {(name, index): EpochOwed(existing[name].partitions[index], replicas,
                                         before[name, index].leader_epoch + 1)
                for (name, index), replicas in moved.items() if (name, index) in before}
        self.services.owe_leader_epochs(owed)
        return {key: (replicas, owed[key].leader_epoch if key in owed else INITIAL_LEADER_EPOCH)
                for key, replicas in moved.items()}

    async def _reassignments_seen(self, moved: Mapping[tuple[str, int], tuple[tuple[int, ...], int]],
                                  timeout_ms: int) -> bool:
        """Wait until this broker's view shows every moved partition with its new replicas and a
        leader among them in the completed epoch (or a later one), or ``timeout_ms`` passes
        (False). The topics first, then the states: each wait looks at the view at once, so news
        that came before it is not missed."""
        cluster = self.services.cluster

        def replicas_shown(view: Mapping[str, TopicInfo]) -> bool:
            return all(t in view and view[t].partitions.get(p) == r for (t, p), (r, _) in moved.items())

        def leaders_shown(_: object) -> bool:
            return replicas_shown(cluster.topics) and all(
                (found := cluster.leadership(t, p)) is not None and found[0] in r and found[1] >= epoch
                for (t, p), (r, epoch) in moved.items())

        loop = self.services.loop
        deadline = loop.time() + min(timeout_ms / 1000, _WAIT_CAP_S)
        if not await self._settled(replicas_shown, timeout_ms):
            return False
        remaining = deadline - loop.time()
        if leaders_shown(None):
            return True
        if remaining <= 0:
            return False
        async with watching(loop, self.services.store.watch_partition_states) as states:
            return await states.wait_for(leaders_shown, remaining)

    def list_partition_reassignments(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        """Kafka's ListPartitionReassignments: the ongoing reassignments of the partitions named (or
        all). kafkapy finishes each at once (kafkapy.topics.reassignment), so none is ever ongoing
        and the answer lists no partition; unknown topics and partitions are left out, as Kafka's."""
        refusal = self._reassignment_refusal(ctx, "DESCRIBE")
        code, message = refusal or (ErrorCode.NONE, None)
        return fit_body(ApiKey.LIST_PARTITION_REASSIGNMENTS, "response", ctx.api_version,
                        {"throttle_time_ms": 0, "error_code": code, "error_message": message, "topics": []})
