"""The share coordinator module: KIP-932's share-partition state APIs on the wire.

Serves InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
DeleteShareGroupState (86) and ReadShareGroupStateSummary (87), all v0, the inter-broker APIs a
share-partition leader (and the group coordinator) uses to keep share-partition state in
``__share_group_state``; and answers FindCoordinator's key type SHARE (capability
SHARE_COORDINATOR, kafkapy/server/share_coordinator.py). The decisions are coordinator.py's and
state.py's; this file is the wire, the checks before them, and making the topic.

Checks, in Kafka's order (KafkaApis, ShareCoordinatorShard): CLUSTER_ACTION on the cluster (these
are brokers' APIs; otherwise every partition is CLUSTER_AUTHORIZATION_FAILED), then per partition
the key (INVALID_GROUP_ID, INVALID_REQUEST), the coordinator (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE while the topic is being made), a topic id or partition the cluster
does not have (UNKNOWN_TOPIC_OR_PARTITION), and the epochs (FENCED_STATE_EPOCH,
FENCED_LEADER_EPOCH).

``__share_group_state`` is made on first need (a FindCoordinator of key type SHARE, or one of
these APIs), through the topics module's internal-topic path, as Kafka's auto topic creation
makes it: ``share.coordinator.state.topic.num.partitions`` partitions,
``share.coordinator.state.topic.replication.factor`` replicas, the configs of
``coordinator.share_state_topic_configs``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.base import PartitionLog
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.codec import body_fitter
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import CLUSTER_RESOURCE
from kafkapy.server.broker_channel import BrokerChannel
from kafkapy.server.config import ConfigKey
from kafkapy.server.coordinator_elections import CoordinatorElections
from kafkapy.server.internal_topics import InternalTopic
from kafkapy.server.modules import Answer, ApiHandler, Module, RequestContext
from kafkapy.server.services import (
    NO_LEADER,
    PARTITION_LOGS,
    TOPIC_CREATION,
    BrokerServices,
    PartitionLogs,
)
from kafkapy.server.share_coordinator import SHARE_COORDINATOR
from kafkapy.sharestate.coordinator import (
    LOAD_BUFFER_BYTES,
    SHARE_STATE_TOPIC,
    ShareCoordinator,
    share_state_topic_configs,
)
from kafkapy.sharestate.persister import SharePersister
from kafkapy.sharestate.state import (
    DEFAULT_LEADER_EPOCH,
    NO_EPOCH,
    UNINITIALIZED_START_OFFSET,
    SharePartitionKey,
    ShareStateValue,
    StateBatch,
    check_key,
    state_partition_for,
)
from kafkapy.store.base import BrokerRegistration, decode_uuid
from kafkapy.validators import AtLeast

__all__ = ["ShareCoordinatorModule", "parse_coordinator_key"]

STATE_API_VERSIONS = VersionRange(0, 0)



def parse_coordinator_key(key: str) -> SharePartitionKey:
    """``group:topicId:partition`` (Kafka's SharePartitionKey.getInstance): INVALID_REQUEST for
    anything else."""
    tokens = key.split(":")
    try:
        if len(tokens) != 3 or not tokens[0]:
            raise ValueError("three non-empty parts")
        topic_id = decode_uuid(tokens[1])
        partition = int(tokens[2])
        if partition < 0:
            raise ValueError("a partition >= 0")
    except ValueError as exc:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                            f"Share coordinator key {key!r} is not group:topicId:partition ({exc}).",
                            ) from None
    return tokens[0], topic_id, partition


class ShareCoordinatorModule(Module):
    name = "share-coordinator"
    provides = (SHARE_COORDINATOR,)
    wants = (PARTITION_LOGS, TOPIC_CREATION)
    config_keys = (
        ConfigKey("share.coordinator.state.topic.num.partitions", "int", 50,
                  "Partitions of __share_group_state (Kafka's default).", AtLeast(1)),
        ConfigKey("share.coordinator.state.topic.replication.factor", "short", 1,
                  "Replicas of __share_group_state (Kafka's default is 3; kafkapy's is 1, as for "
                  "__transaction_state; a cluster of N brokers defaults to min(N, 3)).", AtLeast(1)),
        ConfigKey("share.coordinator.state.topic.min.isr", "short", 2,
                  "min.insync.replicas of __share_group_state (Kafka's default); capped at the topic's "
                  "replica count as Kafka caps it (effectiveMinIsr).", AtLeast(1)),
        ConfigKey("share.coordinator.state.topic.segment.bytes", "int", 100 * 1024 * 1024,
                  "segment.bytes of __share_group_state (Kafka's default, 100 MiB).", AtLeast(1)),
        ConfigKey("share.coordinator.load.buffer.size", "int", LOAD_BUFFER_BYTES,
                  "Bytes read at a time while loading a __share_group_state partition (Kafka's default, "
                  "5 MiB; a batch larger than it is read whole).", AtLeast(1)),
        ConfigKey("share.coordinator.snapshot.update.records.per.snapshot", "int", 500,
                  "ShareUpdate records per share-partition before the next write is a ShareSnapshot "
                  "(Kafka's default).", AtLeast(1)),
    )

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self._state_topic = InternalTopic(services, SHARE_STATE_TOPIC, lambda: (
            services.config["share.coordinator.state.topic.num.partitions"],
            services.config["share.coordinator.state.topic.replication.factor"],
            share_state_topic_configs(services.config["share.coordinator.state.topic.segment.bytes"],
                                      services.config["share.coordinator.state.topic.min.isr"])))
        self.coordinator = ShareCoordinator(
            leader_log=self._leader_log, leader_epoch=self._led_epoch, partition_count=self._partition_count,
            snapshot_every=services.config["share.coordinator.snapshot.update.records.per.snapshot"],
            now_ms=lambda: int(services.wall_clock() * 1000), appended=self._appended,
            storage_failed=self._storage_failed, append_log=self._append_log,
            load_buffer_bytes=services.config["share.coordinator.load.buffer.size"])
        # Kafka's scheduleLoadOperation/scheduleUnloadOperation on leadership changes
        self.elections = CoordinatorElections(services.cluster, SHARE_STATE_TOPIC, self._epoch_here,
                                              self.coordinator.on_election, self.coordinator.on_resignation)
        self._channel = BrokerChannel(
            lambda: services.cluster.brokers, lambda: services.inter_broker_listener,
            client_id="kafkapy-share-partition-leader")
        #: What share-partition leaders (the shares module) use to reach the key's coordinator.
        self.persister = SharePersister(self.coordinator, lambda: services.broker_id, self._locate,
                                        self._channel, self.ensure_state_topic)

    async def start(self) -> None:
        self.elections.start(self.services.loop)

    async def stop(self) -> None:
        self.elections.stop()
        self._state_topic.cancel()
        self._channel.close()
        self.coordinator.close()

    def apis(self) -> Mapping[int, ApiHandler]:
        return {
            ApiKey.INITIALIZE_SHARE_GROUP_STATE: ApiHandler(STATE_API_VERSIONS, self.initialize_state),
            ApiKey.READ_SHARE_GROUP_STATE: ApiHandler(STATE_API_VERSIONS, self.read_state),
            ApiKey.WRITE_SHARE_GROUP_STATE: ApiHandler(STATE_API_VERSIONS, self.write_state),
            ApiKey.DELETE_SHARE_GROUP_STATE: ApiHandler(STATE_API_VERSIONS, self.delete_state),
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: ApiHandler(STATE_API_VERSIONS, self.read_state_summary),
        }

    # --- what the coordinator uses ----------------------------------------------------------------

    def _partition_logs(self) -> PartitionLogs:
        return self._state_topic.partition_logs()

    def _leader_log(self, topic: str, partition: int) -> PartitionLog:
        return self._partition_logs().leader_log(topic, partition)

    def _append_log(self, topic: str, partition: int) -> PartitionLog:
        return self._partition_logs().leader_log_for_acks_all(topic, partition)

    def _appended(self, topic: str, partition: int) -> None:
        self._partition_logs().appended(topic, partition)

    def _storage_failed(self, topic: str, partition: int, exc: OSError) -> KafkaApiError:
        return self._partition_logs().storage_failed(topic, partition, exc)

    def _partition_count(self) -> int:
        """The topic's own count once it exists (Kafka reads it from metadata), the config before."""
        info = self.services.cluster.topics.get(SHARE_STATE_TOPIC)
        if info is not None and info.partitions:
            return len(info.partitions)
        count: int = self.services.config["share.coordinator.state.topic.num.partitions"]
        return count

    def _led_epoch(self, partition: int) -> int | None:
        """The leader epoch of a state partition this broker leads; None when another broker leads
        it (or none does). COORDINATOR_NOT_AVAILABLE while the topic does not exist (it is made)."""
        if SHARE_STATE_TOPIC not in self.services.cluster.topics:
            self._state_topic.request()
            raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                "The share coordinator is not available.")
        return self._epoch_here(partition)

    def _epoch_here(self, partition: int) -> int | None:
        """``_led_epoch`` of a partition of the topic as it exists (the elections' question)."""
        leadership = self.services.cluster.leadership(SHARE_STATE_TOPIC, partition)
        if leadership is None or leadership[0] != self.services.broker_id:
            return None
        try:
            if self._partition_logs().is_offline(SHARE_STATE_TOPIC, partition):
                return None  # its log dir failed: resigned, as after Kafka's log dir event
        except KafkaApiError:  # no data plane: nothing to serve it from
            return None
        return leadership[1]

    def _locate(self, key: SharePartitionKey) -> int | None:
        """The broker leading the key's state partition (the topic is made if need be); None
        while there is none."""
        cluster = self.services.cluster
        if SHARE_STATE_TOPIC not in cluster.topics:
            self._state_topic.request()
            return None
        leadership = cluster.leadership(SHARE_STATE_TOPIC, state_partition_for(key, self._partition_count()))
        if leadership is None or leadership[0] == NO_LEADER:
            return None
        return leadership[0]

    # --- FindCoordinator (SHARE_COORDINATOR) ------------------------------------------------------

    async def find_share_coordinator(self, key: str) -> tuple[ErrorCode, BrokerRegistration | None]:
        try:
            share_key = parse_coordinator_key(key)
        except KafkaApiError:
            return ErrorCode.INVALID_REQUEST, None
        cluster = self.services.cluster
        # Made on first need, and answered once made (as the transaction coordinator's FindCoordinator).
        if not await self._state_topic.ensure():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        partition = state_partition_for(share_key, self._partition_count())
        leadership = cluster.leadership(SHARE_STATE_TOPIC, partition)
        leader = NO_LEADER if leadership is None else leadership[0]
        live = {broker.broker_id: broker for broker in cluster.brokers}
        if leader not in live:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if leader == self.services.broker_id and self._led_epoch(partition) is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None  # its log dir failed here (docs/log.md)
        return ErrorCode.NONE, live[leader]

    async def ensure_state_topic(self) -> bool:
        """``__share_group_state`` exists in this broker's view (made now if need be)."""
        return await self._state_topic.ensure()

    # --- the five APIs ------------------------------------------------------------------------------

    def _authorized(self, ctx: RequestContext) -> bool:
        conn = ctx.connection
        return self.services.authorizer.authorize(conn.principal, conn.client_address[0], "CLUSTER_ACTION",
                                                  "CLUSTER", CLUSTER_RESOURCE)

    def _known(self, topic_id: uuid.UUID, partition: int) -> None:
        """UNKNOWN_TOPIC_OR_PARTITION for a share-partition of a topic the cluster does not have."""
        for info in self.services.cluster.topics.values():
            if info.topic_id == topic_id:
                if partition in info.partitions:
                    return
                break
        raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            "This server does not host this topic-partition.")

    def _each(self, ctx: RequestContext, request: Request,
              serve: Callable[[SharePartitionKey, Mapping[str, Any]], dict[str, Any]],
              refused: Callable[[ErrorCode, str | None], dict[str, Any]]) -> Answer:
        """The per-partition loop every one of the five shares: a result row per partition asked."""
        body = request.body
        allowed = self._authorized(ctx)
        results = []
        for topic in body.get("topics") or []:
            rows = []
            for data in topic.get("partitions") or []:
                row: dict[str, Any] = {"partition": data["partition"]}
                if not allowed:
                    row |= refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
                else:
                    try:
                        row |= {"error_code": ErrorCode.NONE, "error_message": None}
                        row |= serve((body.get("group_id") or "", topic["topic_id"], data["partition"]), data)
                    except KafkaApiError as refusal:
                        row |= refused(refusal.code, refusal.message)
                rows.append(row)
            results.append({"topic_id": topic["topic_id"], "partitions": rows})
        return body_fitter(ApiKey(ctx.api_key), "response", ctx.api_version)({"results": results})

    @staticmethod
    def _error(code: ErrorCode, message: str | None) -> dict[str, Any]:
        return {"error_code": code, "error_message": message}

    @staticmethod
    def _read_error(code: ErrorCode, message: str | None) -> dict[str, Any]:
        return {"error_code": code, "error_message": message, "state_epoch": 0,
                "start_offset": UNINITIALIZED_START_OFFSET, "state_batches": []}

    def initialize_state(self, ctx: RequestContext, request: Request) -> Answer:
        def serve(key: SharePartitionKey, data: Mapping[str, Any]) -> dict[str, Any]:
            self._check(key)
            self.coordinator.initialize(key, data["state_epoch"], data["start_offset"])
            return {}
        return self._each(ctx, request, serve, self._error)

    def read_state(self, ctx: RequestContext, request: Request) -> Answer:
        def serve(key: SharePartitionKey, data: Mapping[str, Any]) -> dict[str, Any]:
            self._check(key)
            return _state_row(self.coordinator.read(key, data["leader_epoch"]), batches=True)
        return self._each(ctx, request, serve, self._read_error)

    def write_state(self, ctx: RequestContext, request: Request) -> Answer:
        def serve(key: SharePartitionKey, data: Mapping[str, Any]) -> dict[str, Any]:
            self._check(key)
            batches = tuple(StateBatch(b["first_offset"], b["last_offset"], b["delivery_state"],
                                       b["delivery_count"]) for b in data.get("state_batches") or ())
            self.coordinator.write(key, data["state_epoch"], data["leader_epoch"], data["start_offset"],
                                   batches)
            return {}
        return self._each(ctx, request, serve, self._error)

    def delete_state(self, ctx: RequestContext, request: Request) -> Answer:
        def serve(key: SharePartitionKey, data: Mapping[str, Any]) -> dict[str, Any]:
            check_key(key)  # no topic check: a deleted topic's share-partitions are what gets deleted
            self.coordinator.delete(key)
            return {}
        return self._each(ctx, request, serve, self._error)

    def read_state_summary(self, ctx: RequestContext, request: Request) -> Answer:
        def serve(key: SharePartitionKey, data: Mapping[str, Any]) -> dict[str, Any]:
            self._check(key)
            state = self.coordinator.summary(key, data.get("leader_epoch", NO_EPOCH))
            row = _state_row(state, batches=False)
            # Kafka 4.1's v0 LeaderEpoch: the epoch kept, 0 (PartitionFactory's default) for none
            kept = state.leader_epoch
            row["leader_epoch"] = DEFAULT_LEADER_EPOCH if kept == NO_EPOCH else kept
            return row

        def refused(code: ErrorCode, message: str | None) -> dict[str, Any]:
            return {"error_code": code, "error_message": message, "state_epoch": 0,
                    "leader_epoch": DEFAULT_LEADER_EPOCH, "start_offset": UNINITIALIZED_START_OFFSET}
        return self._each(ctx, request, serve, refused)

    def _check(self, key: SharePartitionKey) -> None:
        """Kafka's order: the key's own form first, then the topic."""
        check_key(key)
        self._known(key[1], key[2])


def _state_row(state: ShareStateValue, *, batches: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"state_epoch": state.state_epoch, "start_offset": state.start_offset}
    if batches:
        row["state_batches"] = [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                 "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                                for b in state.batches]
    return row
