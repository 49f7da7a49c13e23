"""A blocking, leader-routed client for the record commands (produce, consume, topics).

Why not kafka-python, a dependency already: it cannot bootstrap from librdkafka's
mock cluster (it fails to decode the mock's ApiVersions answer to a version the
mock lacks), and the commands need byte-exact control anyway (null keys and
values, raw headers, explicit offsets).  kafkapy already has every piece: the
request codec, :func:`~kafkapy.protocol.records.build_record_batch`, the
``Records`` reader and :class:`~kafkapy.client.SimpleClient`.  What this module
adds is the part a Kafka client owns: Metadata to find each partition's leader,
one connection per broker, an API version chosen per broker from its
ApiVersions answer, and retries of the errors Kafka calls retriable (a topic
just auto-created has no leader for a moment).

Versions: each API has a range this module writes bodies for; the version used
is the newest in both that range and the broker's (ApiVersions v0, which every
broker answers).  The ranges stop before the versions that name topics by id
(Fetch v13+) so one body serves all of them.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from kafkapy.client import ClientError, SimpleClient
from kafkapy.errors import ErrorCode
from kafkapy.log.producer_state import ABORT, CONTROL_RECORD_KEY
from kafkapy.protocol import api_name
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.codec import fit_body
from kafkapy.protocol.records import Batch, Record, RecordBatch, Records
from kafkapy.protocol.schema import Body

__all__ = ["BASE_VERSIONS", "NO_REPLICA", "RETRIED", "FetchedPartition", "IsolationLevel", "PartitionClient",
           "PartitionInfo", "Retry", "TopicInfo", "check_error", "error_code", "fetched_partition"]

# (oldest, newest) version whose body this module writes. The oldest is the first with what we
# need: Metadata v4 allow_auto_topic_creation, Produce v3 / Fetch v4 record batches (magic 2),
# ListOffsets v1 a single offset per partition.
BASE_VERSIONS: Mapping[ApiKey, tuple[int, int]] = {
    ApiKey.METADATA: (4, 9),
    ApiKey.PRODUCE: (3, 8),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 5),
}
EARLIEST, LATEST = -2, -1  # ListOffsets' special timestamps (Kafka's ListOffsetsRequest)
NO_REPLICA = -1  # replica_id of a consumer, not a follower
_NO_ACKS = 0  # Produce acks=0: the broker sends no answer
NO_OFFSET = -1  # the base offset of a batch sent with acks=0 (nothing said it was stored)
_RETRY_BACKOFF = 0.1  # seconds; librdkafka's retry.backoff.ms is 100
RETRIED = frozenset({ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT,
                      ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
                      ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                      ErrorCode.NOT_COORDINATOR})

T = TypeVar("T")
C = TypeVar("C", bound="PartitionClient")


class IsolationLevel(enum.IntEnum):
    """Kafka's IsolationLevel, as Fetch and ListOffsets (v2+) carry it."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class Retry(Exception):
    """A retriable Kafka error: refresh metadata and try again until the deadline."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclasses.dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: ErrorCode


@dataclasses.dataclass(frozen=True)
class TopicInfo:
    name: str
    error: ErrorCode
    partitions: tuple[PartitionInfo, ...]
    internal: bool = False  # Metadata's is_internal: __consumer_offsets, __transaction_state


@dataclasses.dataclass
class FetchedPartition:
    """One partition of a Fetch answer: its data records from ``offset`` on, and where to go next."""

    records: list[Record]
    next_offset: int
    high_watermark: int
    end_offset: int  # where a consumer at the isolation level asked stops: the HW, or the LSO


def error_code(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class BrokerRefused(ClientError):
    """A broker's final error answer: the one-line message, and the code for callers that
    handle one error apart (find-hanging's TRANSACTIONAL_ID_NOT_FOUND)."""

    def __init__(self, message: str, code: ErrorCode) -> None:
        super().__init__(message)
        self.code = code


def check_error(code: int, what: str) -> None:
    error = error_code(code)
    if error is ErrorCode.NONE:
        return
    message = f"{what}: {error.name}"
    if error in RETRIED:
        raise Retry(message)
    raise BrokerRefused(message, error)


class PartitionClient:
    """Metadata, Produce, ListOffsets and Fetch, each sent to the partition's leader."""

    versions: ClassVar[Mapping[ApiKey, tuple[int, int]]] = BASE_VERSIONS  # a subclass adds its APIs

    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "kafkapy-cli",
                 security: Mapping[str, Any] | None = None) -> None:
        self.timeout = timeout
        self.client_id = client_id
        self.security = dict(security or {})  # SimpleClient's ssl_context and authenticate, for every broker
        self._bootstrap = SimpleClient(bootstrap, timeout, client_id, **self.security)
        self._addresses: dict[int, str] = {}
        self._connections: dict[int, SimpleClient] = {}
        self._versions: dict[int, dict[int, int]] = {}  # id(connection) -> api key -> newest version
        self._leaders: dict[tuple[str, int], int] = {}
        self.controller_id = -1  # as the last Metadata answer named them
        self.live_brokers: frozenset[int] = frozenset()

    def __enter__(self: C) -> C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._bootstrap.close()
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    # --- connections and versions --------------------------------------------------------

    def _version(self, connection: SimpleClient, api_key: ApiKey) -> int:
        versions = self._versions.get(id(connection))
        if versions is None:
            body = connection.request(ApiKey.API_VERSIONS, 0, {})
            check_error(body["error_code"], "ApiVersions")
            versions = {k["api_key"]: k["max_version"] for k in body["api_keys"]}
            self._versions[id(connection)] = versions
        oldest, newest = self.versions[api_key]
        served = versions.get(api_key)
        where = f"{connection.host}:{connection.port}"
        if served is None:
            raise ClientError(f"{where} does not serve {api_name(api_key)} (api key {int(api_key)})")
        if served < oldest:
            raise ClientError(f"{where} serves {api_name(api_key)} only up to v{served}; v{oldest}+ needed")
        return min(served, newest)

    def _request(self, connection: SimpleClient, api_key: ApiKey, body: Mapping[str, Any]) -> Body:
        version = self._version(connection, api_key)
        return connection.request(api_key, version, fit_body(api_key, "request", version, body))

    def _broker(self, node_id: int) -> SimpleClient:
        connection = self._connections.get(node_id)
        if connection is None:
            address = self._addresses.get(node_id)
            if address is None:
                raise Retry(f"broker {node_id} is not in the metadata")
            connection = self._connections[node_id] = SimpleClient(address, self.timeout, self.client_id,
                                                                   **self.security)
        return connection

    def _retrying(self, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` until it raises no retriable error, refreshing leaders between tries."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return attempt()
            except Retry as retry:
                if time.monotonic() >= deadline:
                    raise ClientError(f"{retry.message} (still after {self.timeout:g}s)") from None
                self._forget()
                time.sleep(_RETRY_BACKOFF)

    def _forget(self) -> None:
        """Drop what a retriable error may have made stale: who leads what."""
        self._leaders.clear()

    # --- metadata ------------------------------------------------------------------------

    def controller(self) -> SimpleClient:
        """The connection to the controller fresh Metadata names, for the requests only it applies; the
        bootstrap broker's when Metadata names none it lists (librdkafka's mock names none it has),
        which then answers for itself (or NOT_CONTROLLER, for the caller to retry)."""
        self.topics([])
        if self.controller_id in self.live_brokers:
            return self._broker(self.controller_id)
        return self._bootstrap

    def topics(self, names: Sequence[str] | None = None, auto_create: bool = False) -> list[TopicInfo]:
        """Every topic (``names`` None) or the named ones, as Metadata describes them."""
        topics = None if names is None else [{"name": name} for name in names]
        body = self._request(self._bootstrap, ApiKey.METADATA,
                             {"topics": topics, "allow_auto_topic_creation": auto_create})
        for broker in body["brokers"]:
            host = broker["host"]
            self._addresses[broker["node_id"]] = f"[{host}]:{broker['port']}" if ":" in host else \
                f"{host}:{broker['port']}"
        self.controller_id = body.get("controller_id", -1)
        self.live_brokers = frozenset(broker["node_id"] for broker in body["brokers"])
        found = []
        for topic in body["topics"]:
            partitions = tuple(sorted(
                (PartitionInfo(p["partition_index"], p["leader_id"], p.get("leader_epoch", -1),
                               tuple(p["replica_nodes"]), tuple(p["isr_nodes"]), error_code(p["error_code"]))
                 for p in topic["partitions"]), key=lambda p: p.partition))
            for p in partitions:
                self._leaders[(topic["name"], p.partition)] = p.leader
            found.append(TopicInfo(topic["name"], error_code(topic["error_code"]), partitions,
                                   bool(topic.get("is_internal", False))))
        return sorted(found, key=lambda t: t.name)

    def partitions(self, topic: str, auto_create: bool = False) -> list[int]:
        """The partition numbers of ``topic``, waiting out a topic still being created."""

        def attempt() -> list[int]:
            (info,) = self.topics([topic], auto_create)
            if info.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not auto_create:
                raise ClientError(f"topic {topic!r}: {info.error.name}")  # nothing will create it
            check_error(info.error, f"topic {topic!r}")
            if not info.partitions:
                raise Retry(f"topic {topic!r} has no partitions yet")
            return [p.partition for p in info.partitions]

        return self._retrying(attempt)

    def _leader(self, topic: str, partition: int) -> SimpleClient:
        return self._broker(self._leader_id(topic, partition))

    def _leader_id(self, topic: str, partition: int) -> int:
        leader = self._leaders.get((topic, partition))
        if leader is None:
            described = self.topics([topic])
            leader = self._leaders.get((topic, partition))
            if leader is None:
                if any(info.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for info in described):
                    # No such topic: nothing will make it, so fail now, as Kafka's admin client
                    # fails a partition whose topic Metadata does not know (PartitionLeaderStrategy).
                    raise ClientError(f"{topic}-{partition}: {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.name}")
                raise Retry(f"{topic}-{partition}: UNKNOWN_TOPIC_OR_PARTITION")
        if leader < 0:
            raise Retry(f"{topic}-{partition}: LEADER_NOT_AVAILABLE")
        return leader

    # --- records -------------------------------------------------------------------------

    def produce(self, topic: str, partition: int, batch: bytes, acks: int = -1) -> int:
        """Append one record batch; returns its base offset, or NO_OFFSET with acks 0: the broker
        answers nothing then (and closes the connection if the batch failed, which the next
        request on it finds)."""

        def attempt() -> int:
            asked = {"acks": acks, "timeout_ms": int(self.timeout * 1000), "transactional_id": None,
                     "topic_data": [{"name": topic,
                                     "partition_data": [{"index": partition, "records": batch}]}]}
            leader = self._leader(topic, partition)
            if acks == _NO_ACKS:
                version = self._version(leader, ApiKey.PRODUCE)
                leader.send(ApiKey.PRODUCE, version, fit_body(ApiKey.PRODUCE, "request", version, asked))
                return NO_OFFSET
            body = self._request(leader, ApiKey.PRODUCE, asked)
            (answer,) = body["responses"][0]["partition_responses"]
            check_error(answer["error_code"], f"produce to {topic}-{partition}")
            base_offset: int = answer["base_offset"]
            return base_offset

        return self._retrying(attempt)

    def list_offset(self, topic: str, partition: int, timestamp: int,
                    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED) -> int:
        """The offset for ``timestamp``: EARLIEST, LATEST (the last stable offset at
        READ_COMMITTED), or the first at or after a time (-1 if none)."""

        def attempt() -> int:
            body = self._request(self._leader(topic, partition), ApiKey.LIST_OFFSETS, {
                "replica_id": NO_REPLICA, "isolation_level": isolation,
                "topics": [{"name": topic, "partitions": [{"partition_index": partition,
                                                          "timestamp": timestamp}]}]})
            (answer,) = body["topics"][0]["partitions"]
            check_error(answer["error_code"], f"list offsets of {topic}-{partition}")
            offset: int = answer["offset"]
            return offset

        return self._retrying(attempt)

    def fetch(self, topic: str, positions: Mapping[int, int], max_wait_ms: int,
              max_bytes: int = 1 << 20,
              isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED) -> dict[int, FetchedPartition]:
        """One Fetch per leader for the partitions at these ``positions``; data records only (at
        READ_COMMITTED, none of an aborted transaction's)."""

        def attempt() -> dict[int, FetchedPartition]:
            by_leader: dict[int, list[int]] = {}
            for partition in positions:
                self._leader(topic, partition)
                by_leader.setdefault(self._leaders[(topic, partition)], []).append(partition)
            wait = max_wait_ms if len(by_leader) == 1 else min(max_wait_ms, 100)
            fetched: dict[int, FetchedPartition] = {}
            for leader, partitions in by_leader.items():
                body = self._request(self._broker(leader), ApiKey.FETCH, {
                    "replica_id": NO_REPLICA, "max_wait_ms": wait, "min_bytes": 1, "max_bytes": max_bytes,
                    "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
                    "topics": [{"topic": topic, "partitions": [
                        {"partition": p, "fetch_offset": positions[p], "partition_max_bytes": max_bytes,
                         "log_start_offset": -1, "current_leader_epoch": -1} for p in partitions]}]})
                check_error(body.get("error_code", 0), f"fetch from {topic}")
                for response in body["responses"]:
                    for answer in response["partitions"]:
                        p = answer["partition_index"]
                        check_error(answer["error_code"], f"fetch {topic}-{p} at offset {positions[p]}")
                        committed = isolation is IsolationLevel.READ_COMMITTED
                        fetched[p] = fetched_partition(
                            answer["records"], positions[p], answer["high_watermark"],
                            answer["last_stable_offset"] if committed else None,
                            answer["aborted_transactions"] or ())
            return fetched

        return self._retrying(attempt)


def fetched_partition(records: Records | None, position: int, high_watermark: int,
                      last_stable_offset: int | None = None,
                      aborted_transactions: Iterable[Mapping[str, int]] = ()) -> FetchedPartition:
    """The data records at or after ``position``; a batch may start before it, control batches
    (transaction markers) are skipped but still move the position on. With a
    ``last_stable_offset`` (read_committed), the batches of the aborted transactions listed are
    skipped too, as Kafka's consumer skips them: a producer's transactional batches from an
    aborted transaction's first offset until its ABORT marker."""
    aborted = sorted(aborted_transactions, key=lambda txn: txn["first_offset"])
    aborting: set[int] = set()  # producers inside an aborted transaction here
    found: list[Record] = []
    next_offset = position
    for batch in _batches(records):
        if isinstance(batch, RecordBatch):
            next_offset = max(next_offset, batch.next_offset)
            while aborted and aborted[0]["first_offset"] <= batch.last_offset:
                aborting.add(aborted.pop(0)["producer_id"])
            if batch.is_control:
                if batch.producer_id in aborting and _is_abort_marker(batch):
                    aborting.discard(batch.producer_id)
                continue
            if batch.is_transactional and batch.producer_id in aborting:
                continue
        found.extend(r for r in batch if r.offset >= position)
        if not isinstance(batch, RecordBatch) and found:
            next_offset = max(next_offset, found[-1].offset + 1)
    end = high_watermark if last_stable_offset is None else last_stable_offset
    return FetchedPartition(found, next_offset, high_watermark, end)


def _is_abort_marker(batch: RecordBatch) -> bool:
    key = next(iter(batch)).key or b""
    return len(key) >= CONTROL_RECORD_KEY.size and CONTROL_RECORD_KEY.unpack_from(key)[1] == ABORT


def _batches(records: Records | None) -> Iterable[Batch]:
    return () if records is None else records
