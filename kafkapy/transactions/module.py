"""The transactions module: the transaction coordinator's APIs on the wire.

Serves AddPartitionsToTxn (v0-3 client form, v4 batched broker form with KIP-890's
verify-only), AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions; answers
InitProducerId for transactional ids on behalf of the data plane, which serves the key
(capability TRANSACTIONAL_PRODUCERS); and gives FindCoordinator (the group coordinator's API)
the coordinator of a transactional id (capability TRANSACTION_COORDINATOR, whose seam is
kafkapy/server/txn_coordinator.py).

What it uses: the data plane's partition logs for ``__transaction_state`` (PARTITION_LOGS),
the data plane's TXN_MARKERS to write markers into the partitions this broker leads (WriteTxnMarkers to the
leaders of the others, marker_channel.py), and the store for producer-id blocks and for
creating ``__transaction_state`` (compact) on first need. A transactional id under a test's
outage (COORDINATOR_OUTAGES, kafkapy.server.coordinator_outages) is answered with the outage's
error once authorized (Kafka's order: authorization, then the coordinator).

Time: record timestamps are wall-clock milliseconds as Kafka writes them, read from the broker's
wall clock (``services.wall_clock``, which moves with the loop's clock), and the timers sleep on
the loop; a virtual loop clock moves both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

import attrs

from kafkapy.dataplane.module import TRANSACTIONAL_PRODUCERS
from kafkapy.dataplane.producer_ids import ProducerIds, half_named_producer
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.partitioning import OFFSETS_TOPIC, offsets_partition_for
from kafkapy.log.base import PartitionLog
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.codec import body_fitter
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import CLUSTER_RESOURCE
from kafkapy.server.broker_channel import BrokerChannel
from kafkapy.server.config import ConfigKey
from kafkapy.server.connection import ConnectionInfo
from kafkapy.server.coordinator_elections import CoordinatorElections
from kafkapy.server.coordinator_outages import COORDINATOR_OUTAGES, CoordinatorOutageView
from kafkapy.server.core import INTERNAL_TOPICS
from kafkapy.server.internal_topics import InternalTopic
from kafkapy.server.modules import Answer, ApiHandler, Module, RequestContext
from kafkapy.server.patterns import PatternError, compile_java
from kafkapy.server.services import (
    NO_LEADER,
    PARTITION_LOGS,
    TOPIC_CREATION,
    BrokerServices,
    PartitionLogs,
)
from kafkapy.server.txn_coordinator import TRANSACTION_COORDINATOR, Verified
from kafkapy.server.txn_markers import TXN_MARKERS, TxnMarker, TxnMarkerWriter
from kafkapy.store.base import BrokerRegistration
from kafkapy.transactions.answers import by_topic, for_version
from kafkapy.transactions.coordinator import (
    TRANSACTION_STATE_TOPIC,
    CoordinatorConfig,
    InitResult,
    TransactionCoordinator,
)
from kafkapy.transactions.from_frame import TxnFromFrame
from kafkapy.transactions.marker_channel import MarkerChannel
from kafkapy.transactions.metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TopicPartition
from kafkapy.transactions.state import TxnState
from kafkapy.transactions.state_log import LOAD_BUFFER_BYTES, TopicStateLog
from kafkapy.validators import AtLeast

__all__ = ["TransactionsModule"]

# AddPartitionsToTxn v5: v4's verify-only form from a broker that knows TRANSACTION_ABORTABLE
VERIFY_VERSION = 5


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _as_verified(code: ErrorCode) -> ErrorCode:
    """A fenced producer is told INVALID_PRODUCER_EPOCH, the code producers handle on a write
    (Kafka's AddPartitionsToTxnManager)."""
    return ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED else code

_MINUTE_MS = 60_000



class TransactionsModule(Module):
    name = "transactions"
    provides = (TRANSACTION_COORDINATOR, TRANSACTIONAL_PRODUCERS)
    wants = (PARTITION_LOGS, TXN_MARKERS, TOPIC_CREATION, COORDINATOR_OUTAGES)
    config_keys = (
        ConfigKey("transaction.state.log.num.partitions", "int", 50,
                  "Partitions of __transaction_state (Kafka's default).", AtLeast(1)),
        ConfigKey("transaction.state.log.replication.factor", "short", 1,
                  "Replicas of __transaction_state (Kafka's default is 3; kafkapy's is 1, as Kafka's "
                  "own config/server.properties sets it for one broker; like Kafka, the topic is not "
                  "made while fewer brokers are live).", AtLeast(1)),
        ConfigKey("transaction.state.log.min.isr", "int", 2,
                  "min.insync.replicas of __transaction_state (Kafka's default), capped at the topic's "
                  "replica count as Kafka caps it (effectiveMinIsr): a one-replica topic still takes writes.",
                  AtLeast(1)),
        ConfigKey("transaction.state.log.segment.bytes", "int", 100 * 1024 * 1024,
                  "segment.bytes of __transaction_state (Kafka's default, 100 MiB).", AtLeast(1)),
        ConfigKey("transaction.state.log.load.buffer.size", "int", LOAD_BUFFER_BYTES,
                  "Bytes read at a time while loading a __transaction_state partition (Kafka's default, "
                  "5 MiB; a batch larger than it is read whole).", AtLeast(1)),
        ConfigKey("transaction.max.timeout.ms", "int", 15 * _MINUTE_MS,
                  "The longest transaction.timeout.ms a producer may ask for (Kafka's default).", AtLeast(1)),
        ConfigKey("transactional.id.expiration.ms", "int", 7 * 24 * 60 * _MINUTE_MS,
                  "How long an idle transactional id is kept (Kafka's default, 7 days).", AtLeast(1)),
        ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10_000,
                  "How often timed-out transactions are aborted (Kafka's default).", AtLeast(1)),
        ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 60 * _MINUTE_MS,
                  "How often expired transactional ids are removed (Kafka's default).", AtLeast(1)),
    )

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        config = services.config
        self._producer_ids = ProducerIds(services.store, services.broker_id)
        self._timers: list[asyncio.Task[None]] = []
        self._markers: TxnMarkerWriter | None = None
        self._state_topic = InternalTopic(services, TRANSACTION_STATE_TOPIC, lambda: (
            services.config["transaction.state.log.num.partitions"],
            services.config["transaction.state.log.replication.factor"],
            {"cleanup.policy": "compact", "compression.type": "uncompressed",
             "min.insync.replicas": str(services.config["transaction.state.log.min.isr"]),
             "segment.bytes": str(services.config["transaction.state.log.segment.bytes"])}))
        self._outages: CoordinatorOutageView | None = None  # found at start
        self._channel = MarkerChannel(lambda: services.cluster.brokers,
                                      lambda: services.inter_broker_listener)
        # KIP-890's verify-only AddPartitionsToTxn to the coordinators on other brokers (a channel
        # of its own, so a verification does not queue behind markers)
        self._verifier = BrokerChannel(lambda: services.cluster.brokers,
                                       lambda: services.inter_broker_listener, "kafkapy-txn-verifier")
        self.coordinator = TransactionCoordinator(
            state_log=TopicStateLog(self._leader_log, self.now_ms, self._appended,
                                    leader_epoch=self._leader_epoch, storage_failed=self._storage_failed,
                                    append_log=self._append_log,
                                    load_buffer_bytes=config["transaction.state.log.load.buffer.size"]),
            send_markers=self._send_markers,
            new_producer_id=self._new_producer_id,
            now_ms=self.now_ms,
            leads=self._leads,
            config=CoordinatorConfig(
                partition_count=config["transaction.state.log.num.partitions"],
                max_timeout_ms=config["transaction.max.timeout.ms"],
                transactional_id_expiration_ms=config["transactional.id.expiration.ms"]),
            topic_exists=lambda topic: topic in services.cluster.topics,
            is_local=self._is_local,
            leader_epoch=self._state_leader_epoch,
            write_local_markers=self._write_here,
        )
        # Kafka's onElection/onResignation: each partition's load begins when it comes to be led here.
        self.elections = CoordinatorElections(services.cluster, TRANSACTION_STATE_TOPIC, self._led_epoch,
                                              self.coordinator.on_election, self.coordinator.on_resignation)
        self._frames = TxnFromFrame(self.add_codes, self.end_refusal, self.coordinator.end_transaction_now)

    def now_ms(self) -> int:
        return int(self.services.wall_clock() * 1000)

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        self._producer_ids.broker_id = self.services.broker_id
        outages = self.services.provider(COORDINATOR_OUTAGES, Module)
        self._outages = outages if isinstance(outages, CoordinatorOutageView) else None
        config = self.services.config
        self._timers = [
            self.services.loop.create_task(self._every(
                config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                self.coordinator.abort_timed_out)),
            self.services.loop.create_task(self._every(
                config["transaction.remove.expired.transaction.cleanup.interval.ms"],
                self.coordinator.expire_transactional_ids)),
        ]
        self.elections.start(self.services.loop)

    async def stop(self) -> None:
        self.elections.stop()
        for task in self._timers:
            task.cancel()
        self._state_topic.cancel()
        self.coordinator.cancel()
        self._channel.close()
        self._verifier.close()

    async def _every(self, interval_ms: int, work: Callable[[], Awaitable[object]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            if self.services.cluster.topics.get(TRANSACTION_STATE_TOPIC) is None:
                continue
            try:
                self.coordinator.load_led_partitions()
                await work()
            except Exception:  # a timer must outlive one bad round; it is logged
                self.services.log.exception("transaction coordinator timer failed")

    # --- what the coordinator uses ----------------------------------------------------------------

    def _partition_logs(self) -> PartitionLogs:
        return self._state_topic.partition_logs()

    def _leader_log(self, topic: str, partition: int) -> PartitionLog:
        return self._partition_logs().leader_log(topic, partition)

    def _append_log(self, topic: str, partition: int) -> PartitionLog:
        return self._partition_logs().leader_log_for_acks_all(topic, partition)

    def _leader_epoch(self, topic: str, partition: int) -> int:
        return self._partition_logs().leader_epoch(topic, partition)

    def _appended(self, topic: str, partition: int) -> None:
        self._partition_logs().appended(topic, partition)

    def _storage_failed(self, topic: str, partition: int, exc: OSError) -> KafkaApiError:
        return self._partition_logs().storage_failed(topic, partition, exc)

    def _leader_of(self, topic: str, partition: int) -> int:
        """By the topics view, with the rule Metadata answers with; KafkaApiError for an unknown one."""
        leadership = self.services.cluster.leadership(topic, partition)
        if leadership is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return leadership[0]

    def _is_local(self, tp: TopicPartition) -> bool:
        """Led here, so its marker goes through TXN_MARKERS, which never waits."""
        try:
            return self._leader_of(*tp) == self.services.broker_id
        except KafkaApiError:
            return False

    def _state_leader_epoch(self, partition: int) -> int:
        """A __transaction_state partition's leader epoch (the coordinator epoch of its markers)."""
        leadership = self.services.cluster.leadership(TRANSACTION_STATE_TOPIC, partition)
        return 0 if leadership is None else leadership[1]

    def _leads(self, partition: int) -> bool:
        """This broker leads ``partition`` and its log is online: one whose log dir failed is
        resigned (its ids unloaded, NOT_COORDINATOR), as after Kafka's log dir event."""
        try:
            if self._leader_of(TRANSACTION_STATE_TOPIC, partition) != self.services.broker_id:
                return False
            return not self._partition_logs().is_offline(TRANSACTION_STATE_TOPIC, partition)
        except KafkaApiError:
            return False

    def _led_epoch(self, partition: int) -> int | None:
        """The partition's leader epoch if this broker leads it and can serve it; else None."""
        return self._state_leader_epoch(partition) if self._leads(partition) else None

    async def _new_producer_id(self) -> int:
        ids = self._producer_ids
        return ids.next_id() if not ids.needs_block else await asyncio.to_thread(ids.next_id)

    async def _send_markers(self, marker: TxnMarker) -> Mapping[TopicPartition, ErrorCode]:
        """Through TXN_MARKERS for the partitions led here, WriteTxnMarkers to the leaders of the
        others (concurrently); a partition without a leader is tried again later."""
        by_leader: dict[int, list[TopicPartition]] = {}
        results: dict[TopicPartition, ErrorCode] = {}
        for topic, partition in marker.partitions:
            try:
                leader = self._leader_of(topic, partition)
            except KafkaApiError as exc:
                results[(topic, partition)] = exc.code
                continue
            by_leader.setdefault(leader, []).append((topic, partition))
        if len(by_leader) == 1 and not results:  # one leader (usually this broker): no gather, no task
            (leader,) = by_leader
            return await self._send_to(leader, marker)
        sends = [self._send_to(leader, attrs.evolve(marker, partitions=tuple(found)))
                 for leader, found in by_leader.items()]
        for answered in await asyncio.gather(*sends):
            results.update(answered)
        return results

    async def _send_to(self, leader: int, marker: TxnMarker) -> Mapping[TopicPartition, ErrorCode]:
        if leader == NO_LEADER:
            return dict.fromkeys(marker.partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if leader != self.services.broker_id:
            return await self._channel.write(leader, marker)
        return self._write_here(marker)

    def _write_here(self, marker: TxnMarker) -> Mapping[TopicPartition, ErrorCode]:
        """The marker into partitions this broker leads, through TXN_MARKERS (a plain call); one
        whose leadership moved answers NOT_LEADER_OR_FOLLOWER, and the coordinator tries it again
        through ``_send_markers``."""
        if self._markers is None:
            found = self.services.provider(TXN_MARKERS, Module)
            self._markers = found if isinstance(found, TxnMarkerWriter) else None
        writer = self._markers
        if writer is None:
            return dict.fromkeys(marker.partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        written = writer.write_markers([marker])
        return {(topic, partition): code for (producer_id, topic, partition), code in written.items()
                if producer_id == marker.producer_id}

    # --- FindCoordinator (TRANSACTION_COORDINATOR) ---------------------------------------------------

    async def find_transaction_coordinator(
            self, transactional_id: str) -> tuple[ErrorCode, BrokerRegistration | None]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        cluster = self.services.cluster
        # Made on the first FindCoordinator that needs it, as Kafka makes it. Kafka answers that one
        # COORDINATOR_NOT_AVAILABLE and librdkafka asks again 500 ms later; here the answer waits
        # for the topic instead, as the group coordinator's does, so a transactional producer's
        # first init_transactions takes no retry.
        if not await self._state_topic.ensure():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        partition = self.coordinator.partition_for(transactional_id)
        leadership = cluster.leadership(TRANSACTION_STATE_TOPIC, partition)
        live = {broker.broker_id: broker for broker in cluster.brokers}
        leader = NO_LEADER if leadership is None else leadership[0]
        if leader not in live:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if leader == self.services.broker_id and not self._leads(partition):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None  # its log dir failed here (docs/log.md)
        if leader == self.services.broker_id:
            self.coordinator.load_soon(partition)
        return ErrorCode.NONE, live[leader]

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Collection[TopicPartition]) -> Mapping[TopicPartition, ErrorCode]:
        """TRANSACTION_COORDINATOR: TxnOffsetCommit's check, the verify-only AddPartitionsToTxn's."""
        return self.coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)

    def verify_for_append(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Collection[TopicPartition]) -> Verified | Awaitable[Verified]:
        """TRANSACTION_COORDINATOR: KIP-890's check before a transaction's first batch in a
        partition, in place when this broker coordinates the id, else asked of the coordinator."""
        here = self.verify_in_place(transactional_id, producer_id, producer_epoch, partitions)
        if here is not None:
            return here
        leadership = self.services.cluster.leadership(TRANSACTION_STATE_TOPIC,
                                                      self.coordinator.partition_for(transactional_id))
        leader = NO_LEADER if leadership is None else leadership[0]
        if all(broker.broker_id != leader for broker in self.services.cluster.brokers):
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return self._verify_remotely(leader, transactional_id, producer_id, producer_epoch, partitions)

    def verify_in_place(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        partitions: Collection[TopicPartition]) -> Verified | None:
        """TRANSACTION_COORDINATOR: ``verify_for_append`` when this broker coordinates the id (what
        Produce's fast path from the frame may use without waiting), else None, nothing asked."""
        leadership = self.services.cluster.leadership(TRANSACTION_STATE_TOPIC,
                                                      self.coordinator.partition_for(transactional_id))
        if leadership is None or leadership[0] != self.services.broker_id:
            return None
        outage = self._outage(transactional_id)
        if outage is not None:
            return dict.fromkeys(partitions, outage)
        codes = self.coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        return {tp: _as_verified(code) for tp, code in codes.items()}

    async def _verify_remotely(self, broker_id: int, transactional_id: str, producer_id: int,
                               producer_epoch: int, partitions: Collection[TopicPartition]) -> Verified:
        """A verify-only AddPartitionsToTxn (the brokers' batched form) to the coordinator."""
        by_name: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_name.setdefault(topic, []).append(partition)
        body = {"transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                                  "producer_epoch": producer_epoch, "verify_only": True,
                                  "topics": [{"name": t, "partitions": p} for t, p in by_name.items()]}]}
        answer = await self._verifier.request(broker_id, ApiKey.ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, body)
        if answer is None:
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        top = _code(answer["error_code"])
        if top != ErrorCode.NONE:  # a broker refused CLUSTER_ACTION: the client learns only "not verified"
            return dict.fromkeys(partitions, ErrorCode.INVALID_TXN_STATE
                                 if top == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else top)
        found: dict[TopicPartition, ErrorCode] = {}
        for txn in answer["results_by_transaction"] or ():
            for topic in txn["topic_results"] or ():
                for result in topic["results_by_partition"] or ():
                    found[(topic["name"], result["partition_index"])] = _as_verified(
                        _code(result["partition_error_code"]))
        return {tp: found.get(tp, ErrorCode.NONE) for tp in partitions}

    # --- APIs -------------------------------------------------------------------------------------

    def apis(self) -> Mapping[int, ApiHandler]:
        # AddPartitionsToTxn and AddOffsetsToTxn are plain functions (the state log is a plain
        # call). EndTxn in place (ApiHandler.in_place): with every partition led here nothing in
        # it waits, so it costs no task and no extra loop steps; markers to another broker, which
        # do wait, go on in the worker. AddPartitionsToTxn v0-v3 and EndTxn are also answered
        # from the frame (kafkapy.transactions.from_frame), with the same code in between.
        return {
            # v5 (KIP-890) is v4's verify-only form from a broker that knows TRANSACTION_ABORTABLE,
            # which the coordinator answers at every version, as Kafka's does.
            ApiKey.ADD_PARTITIONS_TO_TXN: ApiHandler(VersionRange(0, 5), self.add_partitions_to_txn,
                                                     from_frame=self._frames.add_partitions),
            ApiKey.ADD_OFFSETS_TO_TXN: ApiHandler(VersionRange(0, 4), self.add_offsets_to_txn),
            ApiKey.END_TXN: ApiHandler(VersionRange(0, 4), self.end_txn, in_place=True,
                                       from_frame=self._frames.end_txn),
            ApiKey.DESCRIBE_TRANSACTIONS: ApiHandler(VersionRange(0, 0), self.describe_transactions),
            ApiKey.LIST_TRANSACTIONS: ApiHandler(VersionRange(0, 2), self.list_transactions),
        }

    def _allowed(self, conn: ConnectionInfo, operation: str, resource_type: str, name: str) -> bool:
        return self.services.authorizer.authorize(conn.principal, conn.client_address[0], operation,
                                                  resource_type, name)

    def _may_write(self, conn: ConnectionInfo, transactional_id: str) -> bool:
        """Kafka's WRITE on the TransactionalId resource, which every producer request needs."""
        return self._allowed(conn, "WRITE", "TRANSACTIONAL_ID", transactional_id)

    def _outage(self, transactional_id: str) -> ErrorCode | None:
        return None if self._outages is None else self._outages.transaction_outage(transactional_id)

    @staticmethod
    def _for_version(ctx: RequestContext, code: ErrorCode) -> ErrorCode:
        return for_version(ApiKey(ctx.api_key), ctx.api_version, code)

    async def init_transactional_producer(self, ctx: RequestContext, request: Request) -> Answer:
        """InitProducerId with a transactional id (the data plane hands these over)."""
        body = request.body
        asked = (body.get("producer_id", NO_PRODUCER_ID), body.get("producer_epoch", NO_PRODUCER_EPOCH))
        expected = None if asked[0] == NO_PRODUCER_ID else asked
        outage = self._outage(body["transactional_id"])
        if not self._may_write(ctx.connection, body["transactional_id"]):
            result = InitResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        elif half_named_producer(*asked):
            result = InitResult(ErrorCode.INVALID_REQUEST)
        elif outage is not None:
            result = InitResult(outage)
        else:
            result = await self.coordinator.init_producer_id(
                body["transactional_id"], body["transaction_timeout_ms"], expected)
        return body_fitter(ApiKey.INIT_PRODUCER_ID, "response", ctx.api_version)(
            {"throttle_time_ms": 0, "error_code": self._for_version(ctx, result.error),
             "producer_id": result.producer_id, "producer_epoch": result.producer_epoch})

    def _add(self, ctx: RequestContext, transactional_id: str, producer_id: int, epoch: int,
             topics: list[Mapping[str, Any]], verify_only: bool) -> list[dict[str, Any]]:
        """One transaction's AddPartitionsToTxn: its per-topic, per-partition results."""
        partitions = [(t["name"], p) for t in topics for p in t.get("partitions") or ()]
        codes = self.add_codes(ctx.connection, transactional_id, producer_id, epoch, partitions, verify_only,
                               from_broker=ctx.api_version >= 4)
        return [{"name": topic, "results_by_partition": [
                    {"partition_index": partition, "partition_error_code": self._for_version(ctx, code)}
                    for partition, code in found]}
                for topic, found in by_topic(codes)]

    def add_codes(self, conn: ConnectionInfo, transactional_id: str, producer_id: int, epoch: int,
                  partitions: list[TopicPartition], verify_only: bool,
                  from_broker: bool = False) -> dict[TopicPartition, ErrorCode]:
        """One transaction's AddPartitionsToTxn, the partitions in request order: each one's
        code (before ``for_version``), duplicates once. Shared with the path from the frame.

        Kafka's KafkaApis: a client (v0-3) needs WRITE on the transactional id; then each partition
        is checked, WRITE on its topic for a client (an internal topic counts as not writable: a
        transaction never holds one), then that it exists. If any failed, each failed one gets
        its own code and the others OPERATION_NOT_ATTEMPTED; only then does the coordinator look.
        A broker's batched form (v4+, CLUSTER_ACTION checked already) skips the authorization."""
        if not from_broker and not self._may_write(conn, transactional_id):
            return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        topics = self.services.cluster.topics
        failed: dict[TopicPartition, ErrorCode] = {}
        writable: dict[str, bool] = {}
        for tp in partitions:
            topic, partition = tp
            if not from_broker and topic not in writable:
                writable[topic] = (topic not in INTERNAL_TOPICS
                                   and self._allowed(conn, "WRITE", "TOPIC", topic))
            if not from_broker and not writable[topic]:
                failed[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic not in topics or partition not in topics[topic].partitions:
                failed[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if failed:
            return {tp: failed.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions}
        outage = self._outage(transactional_id)
        if outage is not None:
            return dict.fromkeys(partitions, outage)
        if verify_only:
            return self.coordinator.verify_partitions(transactional_id, producer_id, epoch, partitions)
        return dict.fromkeys(partitions, self.coordinator.add_partitions(transactional_id, producer_id, epoch,
                                                                         partitions))

    def add_partitions_to_txn(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        fit = body_fitter(ApiKey.ADD_PARTITIONS_TO_TXN, "response", ctx.api_version)
        if ctx.api_version <= 3:
            results = self._add(ctx, body["v3_and_below_transactional_id"],
                                body["v3_and_below_producer_id"], body["v3_and_below_producer_epoch"],
                                body["v3_and_below_topics"] or [], False)
            return fit({"throttle_time_ms": 0, "results_by_topic_v3_and_below": results})
        if not self._allowed(ctx.connection, "CLUSTER_ACTION", "CLUSTER", CLUSTER_RESOURCE):
            # v4+ is the brokers' batched form (KIP-890): only brokers may send it.
            return fit({"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        "results_by_transaction": []})
        answered = []
        for txn in body["transactions"] or []:
            results = self._add(ctx, txn["transactional_id"], txn["producer_id"], txn["producer_epoch"],
                                txn["topics"] or [], txn["verify_only"])
            answered.append({"transactional_id": txn["transactional_id"], "topic_results": results})
        return fit({"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": answered})

    def offsets_partition(self, group_id: str) -> TopicPartition:
        """The group's __consumer_offsets partition, the one AddOffsetsToTxn adds."""
        count = self.services.config.get("offsets.topic.num.partitions", 50)  # the groups module's key
        return OFFSETS_TOPIC, offsets_partition_for(group_id, count)

    def add_offsets_to_txn(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        outage = self._outage(body["transactional_id"])
        if not self._may_write(ctx.connection, body["transactional_id"]):
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not self._allowed(ctx.connection, "READ", "GROUP", body["group_id"]):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif outage is not None:
            code = outage
        else:
            code = self.coordinator.add_partitions(
                body["transactional_id"], body["producer_id"], body["producer_epoch"],
                [self.offsets_partition(body["group_id"])])
        return {"throttle_time_ms": 0, "error_code": self._for_version(ctx, code)}

    async def end_txn(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        code = self.end_refusal(ctx.connection, body["transactional_id"])
        if code is None:
            code = await self.coordinator.end_transaction(body["transactional_id"], body["producer_id"],
                                                          body["producer_epoch"], body["committed"])
        return body_fitter(ApiKey.END_TXN, "response", ctx.api_version)(
            {"throttle_time_ms": 0, "error_code": self._for_version(ctx, code)})

    def end_refusal(self, conn: ConnectionInfo, transactional_id: str) -> ErrorCode | None:
        """Why EndTxn is refused before the coordinator looks (authorization, then an outage), or
        None. Shared with the path from the frame."""
        if not self._may_write(conn, transactional_id):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return self._outage(transactional_id)

    def describe_transactions(self, ctx: RequestContext, request: Request) -> Answer:
        states = []
        for transactional_id in request.body["transactional_ids"] or []:
            if self._allowed(ctx.connection, "DESCRIBE", "TRANSACTIONAL_ID", transactional_id):
                code, metadata = self.coordinator.describe(transactional_id)
            else:
                code, metadata = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
            state: dict[str, Any] = {"error_code": code, "transactional_id": transactional_id,
                                     "transaction_state": "", "transaction_timeout_ms": 0,
                                     "transaction_start_time_ms": -1, "producer_id": NO_PRODUCER_ID,
                                     "producer_epoch": NO_PRODUCER_EPOCH, "topics": []}
            if metadata is not None:
                by_topic: dict[str, list[int]] = {}
                for topic, partition in sorted(metadata.partitions):
                    by_topic.setdefault(topic, []).append(partition)
                # Kafka's KafkaApis: only the topics the principal may DESCRIBE are shown.
                by_topic = {topic: partitions for topic, partitions in by_topic.items()
                            if self._allowed(ctx.connection, "DESCRIBE", "TOPIC", topic)}
                state.update(transaction_state=metadata.state.kafka_name,
                             transaction_timeout_ms=metadata.timeout_ms,
                             transaction_start_time_ms=metadata.start_ms, producer_id=metadata.producer_id,
                             producer_epoch=metadata.producer_epoch,
                             topics=[{"topic": t, "partitions": p} for t, p in by_topic.items()])
            states.append(state)
        return {"throttle_time_ms": 0, "transaction_states": states}

    def list_transactions(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        fit = body_fitter(ApiKey.LIST_TRANSACTIONS, "response", ctx.api_version)
        names = body.get("state_filters") or []
        known = [TxnState.from_kafka_name(name) for name in names]
        unknown = [name for name, state in zip(names, known, strict=True) if state is None]
        pattern = body.get("transactional_id_pattern")
        try:
            matcher = compile_java(pattern, fallback=False) if pattern else None
        except PatternError as exc:
            self.services.log.info("ListTransactions pattern %r: %s", pattern, exc)
            return fit({"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REGULAR_EXPRESSION,
                        "unknown_state_filters": [], "transaction_states": []})
        code, listed = self.coordinator.list(
            states={state for state in known if state is not None} if names else None,
            producer_ids=set(body.get("producer_id_filters") or ()),
            min_duration_ms=body.get("duration_filter", -1),
            matches=lambda name: ((matcher is None or matcher.matches(name))
                                  and self._allowed(ctx.connection, "DESCRIBE", "TRANSACTIONAL_ID", name)))
        if code != ErrorCode.NONE:  # Kafka's answer while a partition loads: the code alone
            return fit({"throttle_time_ms": 0, "error_code": code, "unknown_state_filters": [],
                        "transaction_states": []})
        listed.sort(key=lambda m: m.transactional_id)
        return fit({"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "unknown_state_filters": unknown,
                    "transaction_states": [{"transactional_id": m.transactional_id,
                                            "producer_id": m.producer_id,
                                            "transaction_state": m.state.kafka_name} for m in listed]})
