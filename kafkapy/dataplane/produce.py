"""Produce (0), v0 up to the newest in the catalogue.

Produce v0-v2 may carry the message formats before record batches (magic 0 and 1); each
partition's messages are converted to one record batch first (``kafkapy.log.message_format``),
which then goes through the steps below like any other. A conversion longer than one slice
(``CONVERSION_SLICE_MESSAGES``) goes on in slices as a long record walk does (below); a converted
timestamp that Kafka's MemoryRecordsBuilder throws on (negative, not -1) is answered
UNKNOWN_SERVER_ERROR, as Kafka answers it.

Each partition of a request is appended on its own, so one partition's rejection leaves the
others alone (Kafka's ReplicaManager.appendToLocalLog):

1. a partition whose log dir failed: KAFKA_STORAGE_ERROR; leadership (``Partitions.leader_log``):
   UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER;
2. the records checked as Kafka checks them (``kafkapy.log.append.validate_records``), and a
   batch whose codec is not the topic's ``compression.type`` (unless ``producer``) rebuilt with
   it and checked again, as Kafka's LogValidator recompresses;
3. offsets and the leader epoch written into the batch in place (``assign_offsets``);
4. idempotent producers (``ProducerStateManager.check_and_update``): a retried batch is
   answered with the offsets it got the first time and not appended again;
5. the batch stored as it is (``PartitionLog.append``), and whoever waits on the partition
   woken (``Partitions.appended``, for Fetch's long polls). An OSError there (or anywhere above)
   takes the log's dir offline (``Partitions.storage_failed``): KAFKA_STORAGE_ERROR, for this
   request and every later one to that dir's partitions.

Authorization (KafkaApis.handleProduceRequest), only with an authorizer other than AllowAll (the
module passes ``authorize`` None then, and nothing is asked): a partition of a topic the
principal may not WRITE is answered TOPIC_AUTHORIZATION_FAILED and left alone.

Before any append, in Kafka's order: transactional records without an authorized
transactional id (the whole request), transactional batches of more than one producer id and
epoch among the partitions Kafka hands to its ReplicaManager (the whole request
INVALID_PRODUCER_ID_MAPPING: ``transactional_producers``), an unknown topic id (v13), no WRITE,
no such topic or partition, acks other than -1, 0, 1 (INVALID_REQUIRED_ACKS), an internal topic.

Internal topics (``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``) hold
the coordinators' own records: a client's Produce to one is answered INVALID_TOPIC_EXCEPTION (or
UNKNOWN_TOPIC_OR_PARTITION while it does not exist: it is never auto-created here), as Kafka's
ReplicaManager refuses appends to internal topics to every client but the one whose client id is
``__admin_client``.

Transactional batches (KafkaApis.handleProduceRequest): a request holding one needs a
``transactional_id`` the principal may WRITE, else every partition is answered
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing is stored. The producer state then opens the
producer's transaction in the partition at the batch's offset, which holds the last stable
offset there until the coordinator's marker (markers.py) closes it. Before that first batch of a
transaction in a partition, KIP-890 part 1 (``transaction.partition.verification.enable``) asks
the producer's transaction coordinator whether the partition is in its transaction (``_verify``):
in place when the coordinator is on this broker, else the handler's answer is an awaitable that
waits for the coordinator's broker; a partition not in the transaction is refused.

acks: 0 sends no answer (as Kafka, a failed partition then closes the connection, so the
producer refreshes its metadata), 1 and -1 answer once the batch is in the log: with one
replica per partition the high watermark is the log end as soon as the append returns, so
acks=-1 has nothing more to wait for. Other values: INVALID_REQUIRED_ACKS for every partition.
An acks=-1 write to a partition with fewer in-sync replicas than its ``min.insync.replicas``
(capped at its replication factor) is refused NOT_ENOUGH_REPLICAS before anything is checked or
stored, as Kafka's Partition.appendRecordsToLeader refuses it: in an in-process cluster the ISR
shrinks as brokers stop.

The handler is a plain function (no coroutine per request): it never waits, but for a transaction's
first batch whose coordinator is another broker (above), and for a batch of more records than one
slice of the record walk (``kafkapy.log.append.WALK_SLICE_RECORDS``): its records are checked a
slice at a time (``validation_steps``), the event loop serving every other connection between two
slices, and that partition, with every one after it in the request, is appended after its walk
(docs/log-append.md, "The record walk is sliced"). So is a batch whose payload inflates beyond
``INFLATE_SLICE_BYTES`` (4 MiB: 8 KB of zstd may inflate to 256 MiB, hundreds of milliseconds
of C in one go): ``validate_records`` stops there and raises ``InflationIsLong``, and ``validation_steps``
inflates it again, in steps of that size, with the walk. A topic that does
not exist is created in the background when auto-creation is on (``auto_create``), and the
partition answered UNKNOWN_TOPIC_OR_PARTITION, which producers retry after a metadata refresh.
"""

from __future__ import annotations

import asyncio
import inspect
import struct
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Generator, Iterator, Mapping
from typing import Any, cast

import attrs

from kafkapy.dataplane.fetch import cluster_endpoints
from kafkapy.dataplane.partitions import Partitions
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.append import (
    WALK_SLICE_RECORDS,
    AppendPlan,
    InflationIsLong,
    RecordsRejected,
    assign_offsets,
    compression_level,
    produce_batch,
    produce_inflate_limit,
    recompressed,
    recompression_steps,
    recompression_target,
    validate_records,
    validation_steps,
    walk_is_long,
)
from kafkapy.log.message_format import (
    CONVERSION_SLICE_MESSAGES,
    ConversionIsLong,
    UpConverted,
    up_conversion_steps,
)
from kafkapy.log.topic_config import LogConfig
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.codec import body_fitter
from kafkapy.protocol.compression import INFLATE_SLICE_BYTES
from kafkapy.protocol.produce_response import body_steps
from kafkapy.protocol.records import (
    TRANSACTIONAL_BIT,
    V2_ATTRIBUTES_AT,
    V2_HEADER_SIZE,
    V2_MAGIC_AT,
    RecordBatch,
    Records,
)
from kafkapy.protocol.steps import all_at_once
from kafkapy.server.connection import CloseConnection
from kafkapy.server.core import INTERNAL_TOPICS
from kafkapy.server.modules import Answer, EncodedResponse, RequestContext
from kafkapy.server.slices import in_slices
from kafkapy.server.txn_coordinator import TransactionCoordinatorLocator

__all__ = ["FIRST_FITTED_ANSWER_VERSION", "FIRST_TOPIC_ID_VERSION", "VALID_ACKS", "ProduceHandler"]

VALID_ACKS = (-1, 0, 1)  # Kafka's ProduceRequest: all in-sync replicas, none, the leader
ACKS_ALL = -1
FIRST_TOPIC_ID_VERSION = 13  # KIP-516: Produce v13 names topics by id
FIRST_BATCH_ONLY_VERSION = 3  # Produce v0-v2 may carry magic-0/1 messages (kafkapy.log.message_format)
# From v8 (KIP-467: record_errors, error_message) the answers built here hold exactly the
# response's fields, so they are sent unfitted; tests/dataplane/test_produce_answer_shape.py
# holds them equal to their fitted form.
FIRST_FITTED_ANSWER_VERSION = 8
FIRST_CURRENT_LEADER_VERSION = 10  # KIP-951: current_leader and node_endpoints on NOT_LEADER_OR_FOLLOWER
NO_OFFSET = -1  # base_offset, log_append_time_ms and log_start_offset of a failed partition
_ATTRIBUTES_LOW_BYTE = V2_ATTRIBUTES_AT + 1  # attributes are a big-endian int16; the bits sit in this byte
MAGIC_V2 = 2
V2_PRODUCER_ID_AT = 43  # a v2 batch header's producer id (int64), then its epoch (int16)
_PRODUCER = struct.Struct(">qh")


# Kafka's InvalidPidMappingException from ReplicaManager.handleProduceAppend, every partition's message
SEVERAL_PRODUCERS = "Transactional records contained more than one producer ID"
ADMIN_CLIENT_ID = "__admin_client"  # Kafka's AdminUtils.ADMIN_CLIENT_ID: may append to internal topics


def too_few_in_sync(partitions: Partitions, topic: str, index: int, config: LogConfig) -> bool:
    """Whether an acks=all write must be refused NOT_ENOUGH_REPLICAS: fewer in-sync replicas than
    ``min.insync.replicas``, capped at the replication factor (``Partitions.min_in_sync``).
    Asked only when the setting is above 1, which the leader alone always meets."""
    if config.min_insync_replicas <= 1:
        return False
    needed = partitions.min_in_sync(topic, index, config)
    return len(partitions.cluster.in_sync_replicas(topic, index)) < needed


def has_transactional_records(topic_data: Any) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords, from the batch headers alone (Produce v3+
    carries one batch per partition; anything unreadable is left for validation to refuse)."""
    for topic in topic_data:
        for partition in topic["partition_data"]:
            records = partition["records"]
            raw = records.raw if records is not None else b""
            if (len(raw) > _ATTRIBUTES_LOW_BYTE and raw[V2_MAGIC_AT] == MAGIC_V2
                    and raw[_ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_BIT):
                return True
    return False


class ProduceHandler:
    def __init__(self, partitions: Partitions, append_config: Callable[[str], LogConfig],
                 auto_create: Callable[[str], None], clock_ms: Callable[[], int] | None = None, *,
                 authorize: Callable[[str, str, str, str, str], bool] | None = None,
                 verifier: Callable[[], TransactionCoordinatorLocator | None] | None = None) -> None:
        self.partitions = partitions
        self.append_config = append_config
        self.auto_create = auto_create  # starts creating a missing topic (no-op when disabled)
        # (principal, host, operation, resource type, name); None: allow all (no authorizer configured)
        self.authorize = authorize
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        # KIP-890 part 1: who verifies, the TRANSACTION_COORDINATOR provider (None when no
        # coordinator module runs here); whether, ``verification_enabled``
        self.verifier = verifier or (lambda: None)
        # One long check at a time, broker-wide: each may hold its batch inflated (up to
        # MAX_INFLATED_BYTES) and rebuilt, so several connections' bombs at once would hold that
        # many times the memory; queued, each holds only the bytes that arrived.
        self._long_checks = asyncio.Lock()

    @property
    def verification_enabled(self) -> bool:
        """transaction.partition.verification.enable, as the partitions hold it (dynamic)."""
        return self.partitions.transaction_verification

    def handle(self, ctx: RequestContext, request: Request) -> Answer | Awaitable[Answer]:
        body = request.body
        refused = None
        if has_transactional_records(body["topic_data"]):
            refused = self._transactional_refusal(ctx, body)
            if refused is None and len(self.transactional_producers(ctx, body)) > 1:
                return self._answer(ctx, body, ErrorCode.INVALID_PRODUCER_ID_MAPPING, SEVERAL_PRODUCERS)
            if refused is None and self.verification_enabled:
                verifying = self._verify(ctx, body)
                if verifying is not None:
                    return verifying
        return self._answer(ctx, body, refused)

    def _verify(self, ctx: RequestContext, body: Any) -> Answer | Awaitable[Answer] | None:
        """KIP-890 part 1 (Kafka's ReplicaManager.handleProduceAppend): the partitions where the
        producer has no open transaction yet are checked with its transaction coordinator before
        anything is appended; those not in its transaction are refused. None when no partition
        needs it (the common case: one lookup in the partition's producer table) or no coordinator
        module runs here to ask."""
        pending = self._unverified(ctx, body)
        if not pending:
            return None
        verifier = self.verifier()
        if verifier is None:
            return None
        producer_id, epoch = next(iter(pending.values()))[:2]
        answered = verifier.verify_for_append(body["transactional_id"], producer_id, epoch, list(pending))
        version = ctx.api_version
        if not inspect.isawaitable(answered):
            return self._answer(ctx, body, None, None, _refusals(answered, version))
        # The coordinator is another broker: each partition's guard is taken now; a marker or a
        # first transactional batch of the producer meanwhile drops it, and the append is refused.
        guards = {tp: (state, state.verification_guard(pid)) for tp, (pid, _, state) in pending.items()}

        async def after() -> Answer:
            refusals = _refusals(await answered, version)
            for tp, (state, guard) in guards.items():
                if tp not in refusals and not state.in_transaction(producer_id) \
                        and state.verifying.get(producer_id) is not guard:
                    refusals[tp] = (ErrorCode.INVALID_TXN_STATE, None)
            answer = self._answer(ctx, body, None, None, refusals)
            return await answer if inspect.isawaitable(answer) else answer
        return after()

    def transactional_producers(self, ctx: RequestContext, body: Any) -> set[tuple[int, int]]:
        """The (producer id, epoch) of the transactional batches Kafka's
        ReplicaManager.handleProduceAppend is handed: those of partitions of a topic the principal
        may WRITE, that the cluster view holds, whose records pass ProduceRequest.validateRecords
        (one whole batch of magic 2). More than one refuses the whole request; an internal topic,
        invalid acks or a partition led elsewhere are judged only after, so they count."""
        producers: set[tuple[int, int]] = set()
        for name, index, raw in self._transactional_batches(ctx, body):
            if not self._exists(name, index):
                continue
            try:
                batch = produce_batch(raw, ctx.api_version)
            except RecordsRejected:
                continue  # refused on its own by the append
            if batch.producer_id >= 0:  # Kafka's RecordBatch.hasProducerId
                producers.add((batch.producer_id, batch.producer_epoch))
        return producers

    def _transactional_batches(self, ctx: RequestContext, body: Any) -> Iterator[tuple[str, int, Any]]:
        """(topic, partition, records) of each partition of a topic the principal may WRITE whose
        records open with a transactional batch header."""
        partitions = self.partitions
        by_id = ctx.api_version >= FIRST_TOPIC_ID_VERSION
        for topic_data in body["topic_data"]:
            name = partitions.topic_name(topic_data["topic_id"]) if by_id else topic_data["name"]
            if name is None or (self.authorize is not None and not self.authorize(
                    ctx.connection.principal, ctx.connection.client_address[0], "WRITE", "TOPIC", name)):
                continue
            for partition_data in topic_data["partition_data"]:
                records = partition_data["records"]
                raw = records.raw if records is not None else b""
                if (len(raw) > V2_HEADER_SIZE and raw[V2_MAGIC_AT] == MAGIC_V2
                        and raw[_ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_BIT):
                    yield name, partition_data["index"], raw

    def verified_here(self, transactional_id: str | None, producer_id: int, epoch: int,
                      partitions: Collection[tuple[str, int]]) -> bool:
        """Whether the transaction coordinator is this broker and finds every one of
        ``partitions`` in the producer's transaction: the fast path from the frame may then append
        a transaction's first batches itself (any refusal, and a coordinator elsewhere, are the
        plain path's to answer)."""
        verifier = self.verifier()
        if verifier is None or transactional_id is None:
            return False
        found = verifier.verify_in_place(transactional_id, producer_id, epoch, partitions)
        return found is not None and all(code == ErrorCode.NONE for code in found.values())

    def _unverified(self, ctx: RequestContext, body: Any) -> dict[tuple[str, int], tuple[int, int, Any]]:
        """The partitions of a transactional Produce that would be appended and whose producer has
        no open transaction there: (producer id, epoch, producer table) of each."""
        if body["acks"] not in VALID_ACKS:
            return {}
        pending: dict[tuple[str, int], tuple[int, int, Any]] = {}
        partitions = self.partitions
        for name, index, raw in self._transactional_batches(ctx, body):
            if name in INTERNAL_TOPICS:
                continue
            try:
                log = partitions.leader_log(name, index)
            except KafkaApiError:
                continue  # the append answers it
            state = partitions.home.producer_state(name, index, log)
            producer_id, epoch = _PRODUCER.unpack_from(raw, V2_PRODUCER_ID_AT)
            if not state.in_transaction(producer_id):
                pending[(name, index)] = (producer_id, epoch, state)
        return pending

    def _answer(self, ctx: RequestContext, body: Any, refused: ErrorCode | None,
                refused_message: str | None = None,
                unverified: dict[tuple[str, int], tuple[ErrorCode, str | None]] | None = None
                ) -> Answer | Awaitable[Answer]:
        version = ctx.api_version
        acks = body["acks"]
        now_ms = self.clock_ms()
        by_id = version >= FIRST_TOPIC_ID_VERSION
        failed = False
        leaders: set[int] = set()
        responses: list[dict[str, Any]] = []
        later: list[_Later] = []  # appends whose record walk is long, and every append after one
        for topic_data in body["topic_data"]:
            name: str | None
            if by_id:
                topic_id: uuid.UUID = topic_data["topic_id"]
                name = self.partitions.topic_name(topic_id)
            else:
                name = topic_data["name"]
            denied = name is not None and self.authorize is not None and not self.authorize(
                ctx.connection.principal, ctx.connection.client_address[0], "WRITE", "TOPIC", name)
            answers: list[dict[str, Any]] = []
            for partition_data in topic_data["partition_data"]:
                index = partition_data["index"]
                if refused is not None:
                    answer = _failed(index, refused, refused_message)
                elif denied:
                    answer = _failed(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                elif name is None:
                    answer = _failed(index, ErrorCode.UNKNOWN_TOPIC_ID)
                elif (acks not in VALID_ACKS or name in INTERNAL_TOPICS) and not self._exists(name, index):
                    answer = _failed(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)  # Kafka asks this first
                elif acks not in VALID_ACKS:
                    answer = _failed(index, ErrorCode.INVALID_REQUIRED_ACKS)
                elif name in INTERNAL_TOPICS and ctx.client_id != ADMIN_CLIENT_ID:
                    answer = _failed(index, ErrorCode.INVALID_TOPIC_EXCEPTION)
                elif unverified and (name, index) in unverified:
                    answer = _failed(index, *unverified[(name, index)])
                elif later or (version >= FIRST_BATCH_ONLY_VERSION and (records := partition_data["records"])
                               is not None and walk_is_long(records.raw)):
                    # a long record walk (magic 0 and 1 messages, below v3: a long conversion, below)
                    later.append(_Later(answers, len(answers), name, index, partition_data["records"]))
                    answers.append(_failed(index, ErrorCode.NONE))  # its place, filled in after the walk
                    continue
                else:
                    try:
                        answer = self._append(name, index, partition_data["records"], version, now_ms, acks,
                                              inflate_in_one_go_at_most=INFLATE_SLICE_BYTES)
                    except InflationIsLong:  # a long inflation: checked in slices too, from the start
                        later.append(_Later(answers, len(answers), name, index, partition_data["records"]))
                        answers.append(_failed(index, ErrorCode.NONE))
                        continue
                    except ConversionIsLong as long:  # magic 0 and 1 messages: converted in slices from there
                        later.append(_Later(answers, len(answers), name, index, partition_data["records"],
                                            long.steps))
                        answers.append(_failed(index, ErrorCode.NONE))
                        continue
                failed = failed or answer["error_code"] != ErrorCode.NONE
                if answer["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    self._name_current_leader(answer, name, version, leaders)
                answers.append(answer)
            key = "topic_id" if by_id else "name"
            responses.append({key: topic_data[key], "partition_responses": answers})
        if later:
            return self._answer_later(ctx, responses, later, acks, failed, leaders)
        return self._finish(ctx, responses, acks, failed, leaders)

    def _name_current_leader(self, answer: dict[str, Any], name: str | None, version: int,
                             leaders: set[int]) -> None:
        """KIP-951: a NOT_LEADER_OR_FOLLOWER answer names the partition's current leader (and the
        response its endpoint), from v10."""
        if name is not None and version >= FIRST_CURRENT_LEADER_VERSION:
            answer["current_leader"] = self._current_leader(name, answer["index"])
            leaders.add(answer["current_leader"]["leader_id"])

    async def _answer_later(self, ctx: RequestContext, responses: list[dict[str, Any]], later: list[_Later],
                            acks: int, failed: bool, leaders: set[int]) -> Answer:
        """The request's answer once its long record walks are done: each is checked in slices
        (``validation_steps``) between which the event loop serves every other connection, then
        appended, in the request's order (each append after the one before it, as Kafka appends
        a request's partitions). This connection's next requests wait meanwhile, as behind any
        request that waits, so its answers keep their order."""
        version = ctx.api_version
        named = 0
        for step in later:
            answer = await self._append_in_slices(step.topic, step.index, step.records, version, acks,
                                                  step.conversion)
            step.answers[step.at] = answer
            failed = failed or answer["error_code"] != ErrorCode.NONE
            if answer["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                self._name_current_leader(answer, step.topic, version, leaders)
            named += len(answer["record_errors"])
        body = self._finish(ctx, responses, acks, failed, leaders)
        if body is None or named <= WALK_SLICE_RECORDS:
            return body
        # An answer naming very many faulty records (50 MB for a million): encoded in slices too.
        data = await in_slices(body_steps(version, body, WALK_SLICE_RECORDS))
        return body if data is None else EncodedResponse(body, data)

    def _finish(self, ctx: RequestContext, responses: list[dict[str, Any]], acks: int, failed: bool,
                leaders: set[int]) -> Mapping[str, Any] | None:
        """The Produce response around the partitions' answers, ``leaders`` those named in them
        (KIP-951's endpoints); acks=0's silence, or closed connection when a partition ``failed``."""
        version = ctx.api_version
        if acks == 0:
            if failed:  # Kafka closes the connection: the producer learns only by reconnecting
                raise CloseConnection
            return None
        answer = {"responses": responses, "throttle_time_ms": 0}
        endpoints = cluster_endpoints(self.partitions.cluster, ctx, leaders) if leaders else []
        if endpoints:
            answer["node_endpoints"] = endpoints
        if version >= FIRST_FITTED_ANSWER_VERSION:
            return answer  # the version's own shape: fitting would copy it unchanged
        return body_fitter(ApiKey.PRODUCE, "response", version)(answer)

    def _exists(self, topic: str, index: int) -> bool:
        """Whether the cluster view has the partition (Kafka's metadataCache.contains, which
        handleProduceRequest asks before acks and before any append)."""
        info = self.partitions.cluster.topics.get(topic)
        return info is not None and index in info.partitions

    def _current_leader(self, topic: str, index: int) -> dict[str, int]:
        """KIP-951 (Kafka's getCurrentLeader): who leads the partition now and in which epoch, so
        the producer need not ask Metadata first; -1 and -1 when the view has no such partition."""
        try:
            leader, epoch = self.partitions.leadership(topic, index)
        except KafkaApiError:
            leader, epoch = -1, -1
        return {"leader_id": leader, "leader_epoch": epoch}

    def _transactional_refusal(self, ctx: RequestContext, body: Any) -> ErrorCode | None:
        """TRANSACTIONAL_ID_AUTHORIZATION_FAILED for transactional records without a transactional
        id the principal may WRITE (Kafka refuses the whole request before any append); asked of
        a request holding transactional records."""
        transactional_id = body.get("transactional_id")
        if transactional_id is not None and (self.authorize is None or self.authorize(
                ctx.connection.principal, ctx.connection.client_address[0], "WRITE", "TRANSACTIONAL_ID",
                transactional_id)):
            return None
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    def append(self, topic: str, index: int, batch: bytes, version: int) -> dict[str, Any]:
        """One batch appended as a Produce of ``version`` would append it (seeding a broker in
        process): the same checks, offsets and producer state; the partition's answer."""
        return self._append(topic, index, Records(batch), version, self.clock_ms())

    async def _append_in_slices(self, topic: str, index: int, records: Any, version: int, acks: int,
                                conversion: Generator[None, None, UpConverted | None] | None = None
                                ) -> dict[str, Any]:
        """:meth:`_append` of a batch whose record walk is long: its records are checked first, a
        slice at a time (``validation_steps``), yielding to the event loop between slices, and
        rebuilt with the topic's codec if it asks another; then :meth:`_append` makes its checks
        in Kafka's order with that verdict in place of its own, against the partition as it is
        then (leadership, producer state, log end), and appends. Timestamps are checked against
        the time the walk began; a log-append time is the time of the append. One such check runs
        at a time on this broker (``_long_checks``); the others wait their turn, the loop serving
        everything else meanwhile. Produce v0-v2: the messages are up-converted in slices first,
        going on with ``conversion`` (begun in place, :class:`ConversionIsLong`) if given."""
        checked: tuple[bytearray, AppendPlan] | KafkaApiError | _NoWholeMessage
        named = None
        async with self._long_checks:
            config = self.append_config(topic)
            now_ms = self.clock_ms()
            converted: UpConverted | None = None
            try:
                if version < FIRST_BATCH_ONLY_VERSION:
                    converted = await in_slices(conversion or _conversion(records.raw, config))
                if version < FIRST_BATCH_ONLY_VERSION and converted is None:
                    checked = NO_WHOLE_MESSAGE
                else:
                    data = bytearray(records.raw if converted is None else converted.batch)
                    checked = await self._checked_in_slices(data, converted, config, now_ms, version)
            except RecordsRejected as rejected:
                checked = _builder_refusal(converted, rejected) or rejected
                if checked is rejected:
                    named = await in_slices(_record_error_answer_steps(rejected.record_errors))
            except KafkaApiError as refused:  # Kafka's builder's refusal
                checked = refused
        return self._append(topic, index, records, version, self.clock_ms(), acks, checked, named)

    @staticmethod
    async def _checked_in_slices(data: bytearray, converted: UpConverted | None, config: LogConfig,
                                 now_ms: int, version: int) -> tuple[bytearray, AppendPlan]:
        """The batch checked in slices, then refused as Kafka's builder refuses an up-converted
        negative timestamp, then rebuilt (in slices) with the topic's codec if it asks another and
        checked again; RecordsRejected, or KafkaApiError for the builder's refusal."""
        plan = await in_slices(validation_steps(data, config, now_ms, produce_version=version))
        if (refusal := _builder_refusal(converted, None)) is not None:
            raise refusal
        target = recompression_target(config, data[_ATTRIBUTES_LOW_BYTE])
        if target is not None:  # the topic's codec, not the producer's: rebuilt, checked again
            data = await in_slices(recompression_steps(data, plan, target, compression_level(config, target),
                                                       produce_inflate_limit(config.max_message_bytes)))
            plan = await in_slices(validation_steps(data, config, now_ms, produce_version=version))
        return data, plan

    def _append(self, topic: str, index: int, records: Any, version: int, now_ms: int, acks: int = 1,
                checked: tuple[bytearray, AppendPlan] | KafkaApiError | _NoWholeMessage | None = None,
                named: list[dict[str, Any]] | None = None,
                inflate_in_one_go_at_most: int | None = None) -> dict[str, Any]:
        """One partition's append (steps 1 to 5 above). ``checked``: the records' verdict, reached
        already (:meth:`_append_in_slices`), taken at its place among the checks instead of
        checking them here; ``named``: a rejected verdict's record errors as the answer gives
        them, made already too. ``inflate_in_one_go_at_most``: a record batch (v3+) whose payload
        inflates beyond that many bytes raises InflationIsLong, before anything is appended, for
        the caller to check it in slices (:meth:`_append_in_slices`), and so does a v0-v2 message
        set whose up-conversion takes more than one slice (ConversionIsLong, which carries the
        conversion begun)."""
        partitions = self.partitions
        try:
            if topic not in partitions.cluster.topics:
                self.auto_create(topic)
            log = partitions.leader_log(topic, index)
            state = partitions.home.producer_state(topic, index, log)
            config = self.append_config(topic)
            if acks == ACKS_ALL and too_few_in_sync(partitions, topic, index, config):
                raise KafkaApiError(ErrorCode.NOT_ENOUGH_REPLICAS)
            if records is None:
                raise RecordsRejected(ErrorCode.INVALID_RECORD, "The produce request has no records.")
            if isinstance(checked, KafkaApiError):
                raise checked
            if isinstance(checked, _NoWholeMessage):  # nothing appended, as Kafka answers it
                return _answer(index, NO_OFFSET, NO_OFFSET, log.log_start_offset)
            if checked is not None:
                data, plan = checked
            else:
                # The one copy, made first: the checks read it (the CRC of a writable buffer and the
                # walk over it need no copy of their own), its header is stamped in place (offsets,
                # epoch), and the log keeps it as it is.
                raw = records.raw
                converted = None
                if version < FIRST_BATCH_ONLY_VERSION:  # magic 0 or 1 messages, stored as a record batch
                    converted = _up_converted(raw, config, in_one_slice=inflate_in_one_go_at_most is not None)
                    if converted is None:  # no whole message: nothing appended, as Kafka answers it
                        return _answer(index, NO_OFFSET, NO_OFFSET, log.log_start_offset)
                    raw = converted.batch
                    inflate_in_one_go_at_most = None  # converted in one slice: inflates little
                data = bytearray(raw)
                try:
                    plan = validate_records(data, config, now_ms, produce_version=version,
                                            inflate_in_one_go_at_most=inflate_in_one_go_at_most)
                except RecordsRejected as rejected:
                    raise _builder_refusal(converted, rejected) or rejected from None
                if (refusal := _builder_refusal(converted, None)) is not None:
                    raise refusal
                target = recompression_target(config, data[_ATTRIBUTES_LOW_BYTE])
                if target is not None:  # the topic's codec, not the producer's: rebuilt, checked again
                    data = recompressed(data, plan, target, compression_level(config, target),
                                        produce_inflate_limit(config.max_message_bytes))
                    plan = validate_records(data, config, now_ms, produce_version=version)
            assigned = assign_offsets(data, plan, base_offset=log.log_end_offset,
                                      leader_epoch=partitions.leader_epoch(topic, index),
                                      log_append_time_ms=now_ms if plan.log_append_time else None)
            batch = RecordBatch(data)  # the stamped header, read once for producer state and the log
            duplicate = state.check_and_update(batch)
            if duplicate is not None:  # a retry: the offsets it got the first time, nothing stored
                # and, as Kafka's UnifiedLog answers a duplicate, the batch's timestamp then
                # (its append time under LogAppendTime) as log_append_time_ms
                return _answer(index, duplicate.first_offset, duplicate.timestamp, log.log_start_offset)
            log.append(data, now_ms=now_ms, header=batch)
            partitions.appended(topic, index)
            return _answer(index, assigned.first_offset, assigned.log_append_time_ms, log.log_start_offset)
        except RecordsRejected as rejected:
            answer = _failed(index, rejected.code)
            if rejected.record_errors:  # Kafka sends a message only with record errors
                answer["record_errors"] = named if named is not None and rejected is checked else \
                    _record_error_answers(rejected.record_errors)
                answer["error_message"] = f"{rejected.message} ({topic}-{index})"
            return answer
        except KafkaApiError as refused:
            return _failed(index, refused.code)
        except OSError as exc:  # the log's dir failed under the append: KAFKA_STORAGE_ERROR
            return _failed(index, partitions.storage_failed(topic, index, exc).code)


@attrs.frozen
class _Later:
    """A partition whose append waits for a long record walk: where its answer goes, and what to
    append."""

    answers: list[dict[str, Any]]  # its topic's partition answers
    at: int  # its place among them
    topic: str
    index: int
    records: Any
    conversion: Generator[None, None, UpConverted | None] | None = None  # a v0-v2 up-conversion begun


class _NoWholeMessage:
    """The verdict on a v0-v2 message set holding no whole message: nothing to append."""


NO_WHOLE_MESSAGE = _NoWholeMessage()


def _conversion(raw: Any, config: LogConfig) -> Generator[None, None, UpConverted | None]:
    """A v0-v2 partition's messages up-converted in slices of the loop's size."""
    return up_conversion_steps(raw, max_message_bytes=config.max_message_bytes,
                               every=CONVERSION_SLICE_MESSAGES, chunk=INFLATE_SLICE_BYTES)


def _up_converted(raw: Any, config: LogConfig, *, in_one_slice: bool) -> UpConverted | None:
    """A v0-v2 partition's messages up-converted (``up_conversion_steps``): in one go, or, with
    ``in_one_slice``, its first slice here and ConversionIsLong carrying the rest if it has more."""
    steps = _conversion(raw, config)
    if not in_one_slice:
        return all_at_once(steps)[0]
    try:
        next(steps)
    except StopIteration as done:
        return cast(UpConverted | None, done.value)
    raise ConversionIsLong(steps)


def _builder_refusal(converted: UpConverted | None, verdict: RecordsRejected | None) -> KafkaApiError | None:
    """Kafka's MemoryRecordsBuilder's refusal of an up-converted negative timestamp, when it comes
    before ``verdict`` (UpConverted.builder_refusal); None for a record batch sent as one."""
    return None if converted is None else converted.builder_refusal(verdict)


def _record_error_answer_steps(errors: list[tuple[int, str]]) -> Generator[None, None, list[dict[str, Any]]]:
    """The record errors of a rejection as Produce v8+ answers them, ``WALK_SLICE_RECORDS`` at a
    time (a million of them take a fifth of a second)."""
    answers: list[dict[str, Any]] = []
    for first in range(0, len(errors), WALK_SLICE_RECORDS):
        if first:
            yield
        answers += _record_error_answers(errors[first:first + WALK_SLICE_RECORDS])
    return answers


def _record_error_answers(errors: list[tuple[int, str]]) -> list[dict[str, Any]]:
    return [{"batch_index": i, "batch_index_error_message": message} for i, message in errors]


def _answer(index: int, base_offset: int, log_append_time_ms: int, log_start_offset: int) -> dict[str, Any]:
    return {"index": index, "error_code": ErrorCode.NONE, "base_offset": base_offset,
            "log_append_time_ms": log_append_time_ms, "log_start_offset": log_start_offset,
            "record_errors": [], "error_message": None}


def _failed(index: int, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"index": index, "error_code": code, "base_offset": NO_OFFSET, "log_append_time_ms": NO_OFFSET,
            "log_start_offset": NO_OFFSET, "record_errors": [], "error_message": message}


# What the coordinator may answer that a producer would not retry well: worded as NOT_ENOUGH_REPLICAS,
# which it retries without a metadata refresh (Kafka's ReplicaManager.handleProduceAppend).
_RETRIED_AS_NOT_ENOUGH_REPLICAS = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
FIRST_TRANSACTION_ABORTABLE_VERSION = 11  # KIP-890: Produce v11+ clients know TRANSACTION_ABORTABLE


def _refusals(codes: Mapping[tuple[str, int], ErrorCode],
              version: int) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
    """The verification's refusals as Produce answers them: (code, error message) per partition."""
    refusals: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
    for tp, code in codes.items():
        if code == ErrorCode.NONE:
            continue
        if code == ErrorCode.TRANSACTION_ABORTABLE and version < FIRST_TRANSACTION_ABORTABLE_VERSION:
            code = ErrorCode.INVALID_TXN_STATE
        if code == ErrorCode.INVALID_TXN_STATE:
            refusals[tp] = (code, "Partition was not added to the transaction")
        elif code in _RETRIED_AS_NOT_ENOUGH_REPLICAS:
            refusals[tp] = (ErrorCode.NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been added "
                            f"to the transaction. Underlying error: {code.name}")
        else:
            refusals[tp] = (code, None)
    return refusals

