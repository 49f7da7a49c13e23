"""Fetch (v0 to the newest): consumers read record batches, long-polling for new ones.

Theory of operation
-------------------
A request names partitions and offsets (all of them, or, in a KIP-227 fetch session, only what
changed: kafkapy.dataplane.fetch_sessions decides what is read and what the response lists).
Each partition is read from its leader's log (``PartitionSource.leader_log``) up to the high
watermark, whole batches only, as the log stores them: the response carries them as
``RecordChunks`` and is written with ``transport.writelines`` (a ChunkedResponse), never joined
here.

Byte limits are Kafka's (ReplicaManager.readFromLog): each partition reads at most
``partition_max_bytes`` and at most what is left of the response's ``max_bytes`` (itself capped
by the broker's ``fetch.max.bytes``), and from v3 (KIP-74) the first batch of the first partition
that has data goes whole even when it is larger than both, so that a consumer always makes
progress. Fetch v0-v2 hold ``partition_max_bytes`` as a hard limit (Kafka's hardMaxBytesLimit):
a first batch larger than it is read as the partial batch Kafka reads, which converts to nothing,
so the partition answers no records (the old consumer's cue to raise its fetch size), its bytes
counted as read for ``min_bytes``.

The response goes at once when it holds ``min_bytes``, when a partition answers an error, when
``max_wait_ms`` is 0, or when nothing can be read. Otherwise the request waits (Kafka's
DelayedFetch): a callback on every partition read (``PartitionSource.on_append``, called on the
loop right after an append) wakes it, and so does any change of the cluster view (brokers, topics,
partition states: ``ClusterView.on_change``); it reads again, and it answers once ``min_bytes`` are
there, once a partition answers an error (it moved to another leader, its epoch changed, its topic
went), or once ``max_wait_ms`` has passed, whichever comes first. No loop polls, and a request
answered at once sets no timer.

With an authorizer configured, a consumer needs READ on each topic and a follower CLUSTER_ACTION
on the CLUSTER (Kafka's handleFetchRequest); the others are answered TOPIC_AUTHORIZATION_FAILED.

A consumer's Fetch v11+ may be served by any replica (KIP-392; Kafka's fetchOnlyLeader is false
for it): ``PartitionSource.replica_log``, which holds the records where the brokers share their
logs. With Kafka's RackAwareReplicaSelector (``replica.selector.class``) the leader answers a
consumer naming a rack_id with ``preferred_read_replica`` instead of records when an in-sync
replica in that rack is not itself, at once, and the consumer goes there.

Fetch v0-v3 cannot carry record batches: what they read is converted to magic-0 (v0-v1) or
magic-1 (v2-v3) messages (``kafkapy.log.message_format.down_convert``), control batches left out;
a zstd batch answers the partition UNSUPPORTED_COMPRESSION_TYPE, as Kafka 3.x does.

isolation_level: READ_UNCOMMITTED reads up to the high watermark and answers
``aborted_transactions`` null. READ_COMMITTED reads up to the last stable offset (the first offset
of the earliest open transaction) and lists the aborted transactions overlapping the batches it
returns, ``(producer_id, first_offset)``, from the segments' transaction indexes, so the consumer
can drop their records (the log's read, kafkapy.log.txn_index).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from kafkapy.dataplane.fetch_sessions import (
    NO_SESSION,
    FetchContext,
    FetchSessionCache,
    PartitionKey,
    SessionPartition,
)
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.base import PartitionLog
from kafkapy.log.message_format import DownConversionRefused, down_convert, fetch_magic
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.catalogue import get_api
from kafkapy.protocol.chunks import RecordChunks
from kafkapy.protocol.codec import fit_body
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import CLUSTER_RESOURCE
from kafkapy.server.config import ConfigKey
from kafkapy.server.modules import ApiHandler, ChunkedResponse, RequestContext
from kafkapy.server.wakeup import Wakeup
from kafkapy.validators import AtLeast

if TYPE_CHECKING:
    from kafkapy.protocol import Request
    from kafkapy.server.services import BrokerServices, ClusterView



def _newest_fetch() -> int:
    api = get_api(ApiKey.FETCH)
    assert api is not None, "the catalogue has Fetch"
    return api.versions.high


__all__ = ["FETCH_CONFIG_KEYS", "FETCH_VERSIONS", "FIRST_RECORD_BATCH_VERSION", "FetchHandler",
           "PartitionSource", "cluster_endpoints", "node_endpoints"]

FETCH_VERSIONS = VersionRange(0, _newest_fetch())  # v0-v3 get the old message formats (down-converted)
FIRST_RECORD_BATCH_VERSION = 4  # Fetch v4 carries the batches as stored; v0-v3 get them converted
FIRST_MAX_BYTES_VERSION = 3  # KIP-74: max_bytes, and a first batch larger than the limits goes whole
FIRST_ZSTD_VERSION = 10  # KIP-110: an older Fetch of a zstd topic is refused
FIRST_RACK_VERSION = 11  # KIP-392: rack_id, preferred_read_replica, reads from followers
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
READ_COMMITTED = 1  # IsolationLevel.READ_COMMITTED
FIRST_TOPIC_ID_VERSION = 13  # topics named by id from Fetch v13 (KIP-516)
FIRST_SESSION_VERSION = 7  # KIP-227
FIRST_CURRENT_LEADER_VERSION = 16  # KIP-951: current_leader and node_endpoints filled on leader errors
NO_LEADER_EPOCH = -1


def _known_selector(value: Any) -> str | None:
    return None if value in (None, "", RACK_AWARE_SELECTOR) else (
        f"kafkapy has Kafka's {RACK_AWARE_SELECTOR} only (or none: the leader serves every fetch)")


FETCH_CONFIG_KEYS = (
    ConfigKey("fetch.max.bytes", "int", 57671680,
              "Kafka's default: the most a Fetch response carries, whatever the request asks", AtLeast(1024)),
    ConfigKey("max.incremental.fetch.session.cache.slots", "int", 1000,
              "Kafka's default: the most KIP-227 fetch sessions the broker keeps", AtLeast(0)),
    ConfigKey("replica.selector.class", "string", None,
              "KIP-392: Kafka's RackAwareReplicaSelector sends a consumer with a client.rack to an in-sync "
              "replica in its rack; unset (Kafka's default) the leader serves every fetch.", _known_selector),
)
LAST_VERSION_WITHOUT_STORAGE_ERROR = 5  # Fetch v0-v5 get KAFKA_STORAGE_ERROR as NOT_LEADER_OR_FOLLOWER
_LEADER_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})
# What Kafka's handleFetchRequest answers before reading (the partition is not passed on to the
# read, so it does not make the request answer at once): no such topic id, no READ, no such
# topic or partition in the metadata.
_BEFORE_READ = frozenset({ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                          ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})


class PartitionSource(Protocol):
    def leader_log(self, topic: str, partition: int) -> PartitionLog:
        """The log of a partition this broker leads; raises KafkaApiError(UNKNOWN_TOPIC_OR_PARTITION)
        or KafkaApiError(NOT_LEADER_OR_FOLLOWER)."""
    def replica_log(self, topic: str, partition: int) -> PartitionLog:
        """The log of a partition this broker holds a replica of, for a consumer's Fetch v11+
        (KIP-392); raises KafkaApiError like leader_log for one it holds no records of."""
    @property
    def shares_logs(self) -> bool:
        """Whether this broker's followers hold their leaders' records."""
    def leader_epoch(self, topic: str, partition: int) -> int: ...
    def check_leader_epoch(self, topic: str, partition: int, current: int) -> None:
        """KIP-320: raises KafkaApiError(FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH) for a
        ``current`` epoch (-1: none) other than the partition's, on a broker holding a replica;
        asked before leadership."""
    def leadership(self, topic: str, partition: int) -> tuple[int, int]:
        """(leader, leader epoch) as Metadata answers them; raises KafkaApiError like leader_log."""
    def topic_id(self, topic: str) -> uuid.UUID | None: ...
    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...
    def on_append(self, topic: str, partition: int, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (on the loop, synchronously, right after the append) each time the
        partition's high watermark moves; returns a function that removes it."""
    def storage_failed(self, topic: str, partition: int, exc: OSError) -> KafkaApiError:
        """An I/O error reading the partition's log: its log dir goes offline; answers the
        KAFKA_STORAGE_ERROR to give."""


# What a request's topic key resolves to when the principal may not READ the topic: no topic can
# have this name (Kafka's legal characters exclude NUL), and _read_one tells it by identity.
_DENIED = "\x00topic authorization failed"
_ZSTD_REFUSED = "\x00zstd topic, fetch older than v10"  # the same, for a zstd topic and an old Fetch


def node_endpoints(services: BrokerServices, ctx: RequestContext, node_ids: set[int]) -> list[dict[str, Any]]:
    """KIP-951's node endpoints: where, on the request's listener, each of ``node_ids`` is reached
    (the leaders a client is pointed at by its partitions' NOT_LEADER_OR_FOLLOWER)."""
    return cluster_endpoints(services.cluster, ctx, node_ids)


def cluster_endpoints(cluster: ClusterView, ctx: RequestContext, node_ids: set[int]) -> list[dict[str, Any]]:
    """``node_endpoints`` from the cluster view alone (Produce's handler holds no services)."""
    endpoints = []
    for broker in cluster.brokers:
        endpoint = broker.endpoint(ctx.connection.listener)
        if broker.broker_id in node_ids and endpoint is not None:
            endpoints.append({"node_id": broker.broker_id, "host": endpoint.host, "port": endpoint.port,
                              "rack": broker.rack})
    return endpoints


def _error_data(index: int, code: ErrorCode) -> dict[str, Any]:
    """A partition answered with an error: Kafka's unknown offsets (-1) and no records."""
    return {"partition_index": index, "error_code": code, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1, "records": b""}


def _diverging_epoch(log: PartitionLog, p: SessionPartition) -> dict[str, int] | None:
    """Fetch v12+ (KIP-595): a fetcher that names the epoch of the last batch it holds learns where
    that epoch ends here when its position is past that end, or when only an older epoch is
    known here, and gets no records: the log it read diverged and it must truncate (Kafka's
    Partition.readRecords). OFFSET_OUT_OF_RANGE when no end offset is known for the epoch at all
    (newer than any epoch here)."""
    end = log.end_offset_for_epoch(p.last_fetched_epoch)
    if end.leader_epoch == NO_LEADER_EPOCH or end.end_offset < 0:
        raise KafkaApiError(ErrorCode.OFFSET_OUT_OF_RANGE,
                            f"no end offset is known for the last fetched epoch {p.last_fetched_epoch}")
    if end.leader_epoch < p.last_fetched_epoch or end.end_offset < p.fetch_offset:
        return {"epoch": end.leader_epoch, "end_offset": end.end_offset}
    return None


def _replica_id(body: Mapping[str, Any]) -> int:
    """The fetcher's replica id (-1 for a consumer): v15+ carries it in replica_state (KIP-903)."""
    state = body.get("replica_state")
    return int(state["replica_id"] if state is not None else body.get("replica_id", -1))


class _Read:
    """One read of every partition of a request, with the byte budget it used, whether it must be
    answered now whatever its size (a partition's error, a diverging epoch or a preferred read
    replica), and the partitions that failed before any read (``unread``)."""

    __slots__ = ("answer_now", "bytes", "results", "unread")

    def __init__(self) -> None:
        self.results: list[tuple[SessionPartition, dict[str, Any], int]] = []
        self.bytes = 0
        self.answer_now = False
        self.unread: set[PartitionKey] = set()


class _How(NamedTuple):
    """How one request reads, the same for each of its partitions and each of its reads."""

    read_committed: bool
    to_magic: int | None  # Fetch v0-v3: the old message format to convert to
    hard_max_bytes: bool  # Fetch v0-v2: no first batch goes whole past partition_max_bytes (KIP-74: v3)
    any_replica: bool  # a consumer's Fetch v11+ (KIP-392): a follower may serve it
    client_rack: str  # the consumer's rack_id (v11+), "" for none
    listener: str  # the request's listener, where a preferred read replica must be reachable


class FetchHandler:
    """Serves Fetch for the partitions a PartitionSource leads."""

    def __init__(self, source: PartitionSource, services: BrokerServices,
                 sessions: FetchSessionCache | None = None, *,
                 authorize: Callable[[str, str, str, str, str], bool] | None = None,
                 compression_type: Callable[[str], str] | None = None) -> None:
        self.source = source
        self.services = services
        # A topic's compression.type, for refusing a zstd topic to Fetch < v10; None: never refused.
        self.compression_type = compression_type
        self.rack_aware = services.config.get("replica.selector.class") == RACK_AWARE_SELECTOR
        # (principal, host, operation, resource type, name); None: allow all (no authorizer configured)
        self.authorize = authorize
        config = services.config
        self.fetch_max_bytes = int(config.get("fetch.max.bytes", FETCH_CONFIG_KEYS[0].default))
        clock = services.clock
        self.sessions = sessions or FetchSessionCache(
            int(config.get("max.incremental.fetch.session.cache.slots", FETCH_CONFIG_KEYS[1].default)),
            clock_ms=lambda: int(clock() * 1000))

    def api(self) -> ApiHandler:
        return ApiHandler(FETCH_VERSIONS, self.handle)

    async def handle(self, ctx: RequestContext, request: Request) -> ChunkedResponse:
        body = request.body
        version = ctx.api_version
        uses_ids = version >= FIRST_TOPIC_ID_VERSION
        names: dict[str | uuid.UUID, str | None] = {}
        # One entry per partition, as Kafka's FetchRequest.fetchData (a LinkedHashMap): a partition
        # named again keeps its first place and takes the later fields.
        requested: dict[PartitionKey, SessionPartition] = {}
        for topic in body["topics"]:
            for p in topic["partitions"]:
                partition = self._partition(topic, p, uses_ids, names)
                requested[partition.key] = partition
        fetch = list(requested.values())
        if version >= FIRST_SESSION_VERSION:
            forgotten: list[PartitionKey] = [
                (topic["topic_id"] if uses_ids else topic["topic"], index)
                for topic in body.get("forgotten_topics_data") or () for index in topic["partitions"]]
            context = self.sessions.new_context(body["session_id"], body["session_epoch"], fetch, forgotten,
                                                uses_topic_ids=uses_ids)
        else:
            context = FetchContext(self.sessions, fetch)  # sessionless, as FINAL_EPOCH with id 0
        if context.error != ErrorCode.NONE:
            return ChunkedResponse(fit_body(ApiKey.FETCH, "response", version, {
                "error_code": context.error, "session_id": NO_SESSION, "responses": []}))
        for p in context.partitions:  # partitions named by a session's earlier requests
            topic_key = p.key[0]
            if topic_key not in names:
                names[topic_key] = self.source.topic_name(topic_key) if isinstance(topic_key, uuid.UUID) \
                    else topic_key
        if self.authorize is not None:
            self._authorize(ctx, body, names)
        consumer = _replica_id(body) < 0
        # Kafka's FetchIsolation.of: a follower reads to the log end whatever isolation_level says
        how = _How(read_committed=consumer and body.get("isolation_level", 0) == READ_COMMITTED,
                   to_magic=fetch_magic(version),
                   hard_max_bytes=version < FIRST_MAX_BYTES_VERSION,
                   any_replica=consumer and version >= FIRST_RACK_VERSION,
                   client_rack=(body.get("rack_id") or "") if consumer else "",
                   listener=ctx.connection.listener)
        max_bytes = min(body.get("max_bytes", self.fetch_max_bytes), self.fetch_max_bytes)
        if version < FIRST_ZSTD_VERSION and self.compression_type is not None:
            self._refuse_zstd_topics(names)
        read = self._read_all(context.partitions, names, max_bytes, how, None)
        max_wait_ms, min_bytes = body["max_wait_ms"], body["min_bytes"]
        # (the set of keys made only when some partition failed before its read: a hot path)
        every_one_unread = not context.partitions or (
            bool(read.unread) and len(read.unread) >= len({p.key for p in context.partitions}))
        if not (read.bytes >= min_bytes or read.answer_now or max_wait_ms <= 0 or every_one_unread
                or self._behind_a_segment(context.partitions, names, how)):
            read = await self._wait(context.partitions, names, max_bytes, how, min_bytes, max_wait_ms / 1000,
                                    frozenset(read.unread))
        response = self._response(ctx, body, context, read, names, how.read_committed)
        return ChunkedResponse(fit_body(ApiKey.FETCH, "response", ctx.api_version, response))

    def _preferred_read_replica(self, topic: str, partition: int, how: _How) -> int | None:
        """KIP-392, on the leader only (Kafka's findPreferredReadReplica with its
        RackAwareReplicaSelector): among the leader and the in-sync followers reachable on the
        request's listener, those in the consumer's rack; the leader if it is one of them (None:
        read here), else the lowest id of them (their logs are the leader's, equally caught up).
        None too where followers hold no records (kafkapy replicates nothing between brokers that
        keep their own logs)."""
        leader, _ = self.source.leadership(topic, partition)
        if leader != self.services.broker_id or not self.source.shares_logs:
            return None
        brokers = {b.broker_id: b for b in self.services.cluster.brokers}
        in_rack = [replica for replica in [leader, *self.services.cluster.in_sync_replicas(topic, partition)]
                   if replica in brokers and brokers[replica].rack == how.client_rack
                   and brokers[replica].endpoint(how.listener) is not None]
        return None if not in_rack or leader in in_rack else min(in_rack)

    def _refuse_zstd_topics(self, names: dict[str | uuid.UUID, str | None]) -> None:
        """Kafka's maybeConvertFetchedData: a Fetch older than v10 (KIP-110) gets
        UNSUPPORTED_COMPRESSION_TYPE for a topic whose compression.type is zstd, whatever its
        batches hold."""
        assert self.compression_type is not None
        for key, name in list(names.items()):
            if name is not None and name is not _DENIED and self.compression_type(name) == "zstd":
                names[key] = _ZSTD_REFUSED

    def _authorize(self, ctx: RequestContext, body: Mapping[str, Any],
                   names: dict[str | uuid.UUID, str | None]) -> None:
        """Kafka's handleFetchRequest: a consumer needs READ on each topic, a follower (a replica
        id of 0 or more) CLUSTER_ACTION on the CLUSTER; the rest is TOPIC_AUTHORIZATION_FAILED."""
        assert self.authorize is not None
        conn = ctx.connection
        if _replica_id(body) >= 0:
            allowed = self.authorize(conn.principal, conn.client_address[0], "CLUSTER_ACTION", "CLUSTER",
                                     CLUSTER_RESOURCE)
            if not allowed:
                names.update({key: _DENIED for key, name in names.items() if name is not None})
            return
        address = conn.client_address[0]
        for key, name in list(names.items()):
            if name is not None and not self.authorize(conn.principal, address, "READ", "TOPIC", name):
                names[key] = _DENIED

    @staticmethod
    def _partition(topic: Mapping[str, Any], p: Mapping[str, Any], uses_ids: bool,
                   names: dict[str | uuid.UUID, str | None]) -> SessionPartition:
        key = topic["topic_id"] if uses_ids else topic["topic"]
        return SessionPartition((key, p["partition"]), p["fetch_offset"], max(0, p["partition_max_bytes"]),
                                p.get("current_leader_epoch", NO_LEADER_EPOCH), p.get("log_start_offset", -1),
                                p.get("last_fetched_epoch", -1))

    async def _wait(self, partitions: Sequence[SessionPartition], names: Mapping[str | uuid.UUID, str | None],
                    max_bytes: int, how: _How, min_bytes: int, max_wait: float,
                    unread: frozenset[PartitionKey]) -> _Read:
        """Kafka's DelayedFetch: read again on each append to a partition of the request, and on
        each change of the cluster (a partition that moved to another leader or was deleted then
        answers its error at once, as DelayedFetch.tryComplete does), until ``min_bytes`` are
        there, a partition answers an error, ``max_wait`` seconds passed, or the broker stops."""
        loop = self.services.loop
        deadline = loop.time() + max_wait
        appended = Wakeup()
        removers = []
        for p in partitions:
            name = names.get(p.key[0])
            if name is not None:
                removers.append(self.source.on_append(name, p.key[1], appended.set))
        removers.append(self.services.cluster.wake_on_change(loop, appended))
        removers.append(self.services.on_stop(appended.set))
        try:
            while (left := deadline - loop.time()) > 0:
                if not await appended.wait(left) or self.services.stopping:
                    break
                appended.clear()
                read = self._read_all(partitions, names, max_bytes, how, unread)
                if (read.bytes >= min_bytes or read.answer_now
                        or self._behind_a_segment(partitions, names, how)):
                    return read
        finally:
            for remove in removers:
                remove()
        return self._read_all(partitions, names, max_bytes, how, unread)

    def _behind_a_segment(self, partitions: Sequence[SessionPartition],
                          names: Mapping[str | uuid.UUID, str | None], how: _How) -> bool:
        """Kafka's DelayedFetch completes a fetch at once (case F) when a partition's position is in
        an older segment than the last offset it may read: Kafka read only to that segment's end.
        Asked only of a fetch that would wait."""
        source = self.source
        for p in partitions:
            topic = names.get(p.key[0])
            if topic is None or topic is _DENIED or topic is _ZSTD_REFUSED:
                continue
            try:
                index = p.key[1]
                log = source.replica_log(topic, index) if how.any_replica else source.leader_log(topic, index)
            except KafkaApiError:
                continue
            end = log.last_stable_offset if how.read_committed else log.high_watermark
            if log.log_start_offset <= p.fetch_offset < end and \
                    log.segment_base(p.fetch_offset) < log.segment_base(end - 1):
                return True
        return False

    def _read_all(self, partitions: Sequence[SessionPartition], names: Mapping[str | uuid.UUID, str | None],
                  max_bytes: int, how: _How, unread: frozenset[PartitionKey] | None) -> _Read:
        """``unread``: the partitions the request's first read found failing before any read
        (None: this is that read). As in Kafka's handleFetchRequest, such a partition (an unknown
        topic id, topic or partition, a topic the principal may not read) is set aside, answered
        with its error whenever the others are: it neither hurries nor holds the answer. One that
        fails so only later (its topic deleted during the wait) answers at once."""
        read = _Read()
        for p in partitions:
            data, size = self._read_one(p, names.get(p.key[0]), max_bytes - read.bytes,
                                        min_one_batch=read.bytes == 0, how=how)
            read.results.append((p, data, size))
            read.bytes += size
            if data["error_code"] in _BEFORE_READ and (unread is None or p.key in unread):
                read.unread.add(p.key)
                continue
            # Kafka's fetchMessages answers at once for an error, a diverging epoch (the fetcher
            # must truncate first) or a preferred read replica (the consumer goes there); its
            # DelayedFetch completes at once for a position past what the isolation level may
            # read (case F: a read_committed fetch beyond the last stable offset).
            read.answer_now = read.answer_now or data["error_code"] != ErrorCode.NONE or \
                "diverging_epoch" in data or "preferred_read_replica" in data or \
                p.fetch_offset > data["last_stable_offset" if how.read_committed else "high_watermark"]
        return read

    def _read_one(self, p: SessionPartition, topic: str | None, budget: int, *, min_one_batch: bool,
                  how: _How) -> tuple[dict[str, Any], int]:
        index = p.key[1]
        if topic is None:
            return _error_data(index, ErrorCode.UNKNOWN_TOPIC_ID), 0
        if topic is _DENIED:
            return _error_data(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED), 0
        if topic is _ZSTD_REFUSED:
            return _error_data(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE), 0
        try:
            source = self.source
            source.check_leader_epoch(topic, index, p.current_leader_epoch)  # before leadership, as Kafka
            log = source.replica_log(topic, index) if how.any_replica else source.leader_log(topic, index)
            if p.last_fetched_epoch != NO_LEADER_EPOCH:
                diverging = _diverging_epoch(log, p)
                if diverging is not None:
                    return {"partition_index": index, "error_code": ErrorCode.NONE,
                            "high_watermark": log.high_watermark,
                            "last_stable_offset": log.last_stable_offset,
                            "log_start_offset": log.log_start_offset, "diverging_epoch": diverging,
                            "records": b""}, 0
            if how.client_rack and self.rack_aware:
                preferred = self._preferred_read_replica(topic, index, how)
                if preferred is not None:  # Kafka skips the read: the consumer goes there instead
                    return {"partition_index": index, "error_code": ErrorCode.NONE,
                            "high_watermark": log.high_watermark,
                            "last_stable_offset": log.last_stable_offset,
                            "log_start_offset": log.log_start_offset, "preferred_read_replica": preferred,
                            "records": b""}, 0
            limit = min(p.max_bytes, max(budget, 0))
            read_committed = how.read_committed
            max_offset = log.last_stable_offset if read_committed else log.high_watermark
            result = log.read(p.fetch_offset, limit, max_offset=max_offset,
                              min_one_batch=min_one_batch and not how.hard_max_bytes,
                              aborted_transactions=read_committed)
            counted = None
            if how.hard_max_bytes and not result.chunks and limit > 0 and log.read(
                    p.fetch_offset, 1, max_offset=max_offset).chunks:
                # A first batch larger than the limit: Kafka reads its first ``limit`` bytes, a
                # partial batch that converts to no message at all, and counts them as read.
                counted = limit
        except KafkaApiError as refusal:
            return _error_data(index, ErrorCode(refusal.code)), 0
        except OSError as exc:  # the log's dir failed under the read (Kafka's LogDirFailureChannel)
            return _error_data(index, ErrorCode(self.source.storage_failed(topic, index, exc).code)), 0
        chunks = result.chunks
        if how.to_magic is not None and chunks:  # Fetch v0-v3: the old message formats (down-conversion)
            try:
                chunks = [down_convert(chunks, to_magic=how.to_magic, fetch_offset=p.fetch_offset)]
            except DownConversionRefused as refused:
                return _error_data(index, refused.code), 0
        records = RecordChunks(chunks)
        data = {"partition_index": index, "error_code": ErrorCode.NONE,
                "high_watermark": result.high_watermark, "last_stable_offset": result.last_stable_offset,
                "log_start_offset": result.log_start_offset, "records": records}
        if result.aborted_transactions is not None:
            data["aborted_transactions"] = [{"producer_id": txn.producer_id, "first_offset": txn.first_offset}
                                            for txn in result.aborted_transactions]
        return data, records.size if counted is None else counted

    def _response(self, ctx: RequestContext, body: Mapping[str, Any], context: FetchContext, read: _Read,
                  names: Mapping[str | uuid.UUID, str | None], read_committed: bool) -> dict[str, Any]:
        version = ctx.api_version
        session_id, listed = context.respond(read.results)
        field = "topic_id" if version >= FIRST_TOPIC_ID_VERSION else "topic"
        # In the order read; a topic's partitions share an entry only when they come one after
        # another (Kafka's FetchResponse.toMessage keeps the request's order so).
        responses: list[dict[str, Any]] = []
        last_key: str | uuid.UUID | None = None
        partitions: list[dict[str, Any]] = []
        leaders: set[int] = set()
        for p, data in listed:
            if (data["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
                    and version <= LAST_VERSION_WITHOUT_STORAGE_ERROR):
                # Kafka's maybeDownConvertStorageError: an older client may not know the code (it
                # would not retry), while NOT_LEADER_OR_FOLLOWER makes it refresh its metadata
                data["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            if read_committed and data["error_code"] == ErrorCode.NONE:
                data.setdefault("aborted_transactions", [])
            elif not read_committed:
                data["aborted_transactions"] = None
            if version >= FIRST_CURRENT_LEADER_VERSION and data["error_code"] in _LEADER_ERRORS:
                leader = self._current_leader(names.get(p.key[0]), p.key[1])
                if leader is not None:
                    data["current_leader"] = leader
                    leaders.add(leader["leader_id"])
            if not responses or p.key[0] != last_key:
                last_key, partitions = p.key[0], []
                responses.append({field: last_key, "partitions": partitions})
            partitions.append(data)
        response: dict[str, Any] = {
            "throttle_time_ms": 0, "error_code": ErrorCode.NONE, "session_id": session_id,
            "responses": responses}
        if leaders:
            response["node_endpoints"] = node_endpoints(self.services, ctx, leaders)
        return response

    def _current_leader(self, topic: str | None, partition: int) -> dict[str, int] | None:
        """KIP-951: who leads the partition now and in which epoch, so a client need not ask
        Metadata first (leader -1 while a move is not written yet, as Kafka's LeaderAndIsr says)."""
        if topic is None:
            return None
        try:
            leader, epoch = self.source.leadership(topic, partition)
        except KafkaApiError:
            return None
        return {"leader_id": leader, "leader_epoch": epoch}

