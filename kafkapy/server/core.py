"""The core module: the APIs every kafkapy broker serves.

ApiVersions (18), Metadata (3), DescribeCluster (60) and BrokerMetadata
(1010, the KIP-35 draft in seed 002); SaslHandshake (17) and SaslAuthenticate (36)
once a connection is authenticated, or on a listener without SASL (the exchange
before that is the connection's: kafkapy.server.sasl.authenticator).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Mapping
from typing import Any, Final

import attrs

import kafkapy
from kafkapy.errors import ErrorCode
from kafkapy.protocol import Request, fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.codec import encode_response_body
from kafkapy.protocol.primitives import ZERO_UUID
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_RESOURCE,
    AllowAll,
    authorized_operations,
)
from kafkapy.server.conformance import conforms
from kafkapy.server.modules import ApiHandler, EncodedResponse, Module, RequestContext
from kafkapy.server.operations import ResourceType
from kafkapy.server.services import (
    AUTO_TOPIC_CREATION,
    NO_LEADER,
    TOPIC_CONFIGS_CAPABILITY,
    AutoTopicCreation,
    BrokerServices,
    BrokerSettings,
    partition_isr,
    partition_leadership,
)
from kafkapy.store.base import BrokerRegistration, PartitionStates, TopicInfo, topic_name_problem

__all__ = ["INTERNAL_TOPICS", "PROTOCOL_HISTORY", "PROTOCOL_VERSION", "PROTOCOL_VERSION_MIN", "CoreModule",
           "client_information", "valid_client_software"]

log = logging.getLogger(__name__)

# The KIP-35 draft's global ProtocolVersion: one number for the whole set of request types and
# versions a broker serves. kafkapy bumps it whenever a request type or version is added; the
# history is in docs/broker.md, and tests/server/test_protocol_version.py pins the set it stands for.
PROTOCOL_VERSION = 23
PROTOCOL_VERSION_MIN = 1
# What each ProtocolVersion stands for: (api key, min version, max version) served by the built-in
# modules, each version the one before it with what it added (and, for a version bump, what it
# replaced). A test compares the live broker against the newest entry.
_K = ApiKey
_PROTOCOL_CHANGES: tuple[tuple[frozenset[tuple[int, int, int]], frozenset[tuple[int, int, int]]], ...] = (
    # 1: the core (Metadata, ApiVersions, DescribeCluster, the KIP-35 draft's BrokerMetadata)
    (frozenset({(_K.METADATA, 0, 13), (_K.API_VERSIONS, 0, 4), (_K.DESCRIBE_CLUSTER, 0, 2),
                (_K.BROKER_METADATA, 0, 0)}), frozenset()),
    # 2: + quotas (Describe/AlterClientQuotas) and features (UpdateFeatures, DeleteFeatures)
    (frozenset({(_K.DESCRIBE_CLIENT_QUOTAS, 0, 1), (_K.ALTER_CLIENT_QUOTAS, 0, 1), (_K.UPDATE_FEATURES, 0, 2),
                (_K.DELETE_FEATURES, 0, 0)}), frozenset()),
    # 3: + topics (CreateTopics, DeleteTopics, CreatePartitions); Metadata lists real topics
    (frozenset({(_K.CREATE_TOPICS, 0, 7), (_K.DELETE_TOPICS, 0, 6), (_K.CREATE_PARTITIONS, 0, 3)}),
     frozenset()),
    # 4: + configs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs) for BROKER resources
    (frozenset({(_K.DESCRIBE_CONFIGS, 0, 4), (_K.ALTER_CONFIGS, 0, 2), (_K.INCREMENTAL_ALTER_CONFIGS, 0, 1)}),
     frozenset()),
    # 5: + the data plane
    (frozenset({(_K.PRODUCE, 3, 13), (_K.FETCH, 4, 18), (_K.LIST_OFFSETS, 1, 11), (_K.DELETE_RECORDS, 0, 2),
                (_K.INIT_PRODUCER_ID, 0, 6), (_K.OFFSET_FOR_LEADER_EPOCH, 2, 4), (_K.DESCRIBE_LOG_DIRS, 1, 5),
                (_K.DESCRIBE_PRODUCERS, 0, 0)}), frozenset()),
    # 6: + WriteTxnMarkers (the data plane writes end-transaction markers)
    (frozenset({(_K.WRITE_TXN_MARKERS, 0, 2)}), frozenset()),
    # 7: + groups
    (frozenset({(_K.FIND_COORDINATOR, 0, 6), (_K.JOIN_GROUP, 0, 9), (_K.SYNC_GROUP, 0, 5),
                (_K.HEARTBEAT, 0, 4), (_K.LEAVE_GROUP, 0, 5), (_K.OFFSET_COMMIT, 2, 9),
                (_K.OFFSET_FETCH, 1, 9), (_K.DESCRIBE_GROUPS, 0, 6), (_K.LIST_GROUPS, 0, 5),
                (_K.DELETE_GROUPS, 0, 2), (_K.OFFSET_DELETE, 0, 0)}), frozenset()),
    # 8: + transactions
    (frozenset({(_K.ADD_PARTITIONS_TO_TXN, 0, 4), (_K.ADD_OFFSETS_TO_TXN, 0, 4), (_K.END_TXN, 0, 4),
                (_K.TXN_OFFSET_COMMIT, 0, 5), (_K.DESCRIBE_TRANSACTIONS, 0, 0),
                (_K.LIST_TRANSACTIONS, 0, 2)}),
     frozenset()),
    # 9: + KIP-848 consumer groups (ConsumerGroupHeartbeat, ConsumerGroupDescribe)
    (frozenset({(_K.CONSUMER_GROUP_HEARTBEAT, 0, 1), (_K.CONSUMER_GROUP_DESCRIBE, 0, 1)}), frozenset()),
    # 10: OffsetCommit v10 and OffsetFetch v10 (topics named by id)
    (frozenset({(_K.OFFSET_COMMIT, 2, 10), (_K.OFFSET_FETCH, 1, 10)}),
     frozenset({(_K.OFFSET_COMMIT, 2, 9), (_K.OFFSET_FETCH, 1, 9)})),
    # 11: AddPartitionsToTxn v5
    (frozenset({(_K.ADD_PARTITIONS_TO_TXN, 0, 5)}), frozenset({(_K.ADD_PARTITIONS_TO_TXN, 0, 4)})),
    # 12: + ElectLeaders (the topics module)
    (frozenset({(_K.ELECT_LEADERS, 0, 2)}), frozenset()),
    # 13: + SaslHandshake and SaslAuthenticate (SASL_PLAINTEXT and SASL_SSL listeners)
    (frozenset({(_K.SASL_HANDSHAKE, 0, 1), (_K.SASL_AUTHENTICATE, 0, 2)}), frozenset()),
    # 14: + SCRAM credentials (DescribeUserScramCredentials, AlterUserScramCredentials; the scram module)
    (frozenset({(_K.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0), (_K.ALTER_USER_SCRAM_CREDENTIALS, 0, 0)}),
     frozenset()),
    # 15: + DescribeTopicPartitions (KIP-966: topics and partitions, a page at a time)
    (frozenset({(_K.DESCRIBE_TOPIC_PARTITIONS, 0, 0)}), frozenset()),
    # 16: + ACLs (DescribeAcls, CreateAcls, DeleteAcls; the acls module)
    (frozenset({(_K.DESCRIBE_ACLS, 1, 3), (_K.CREATE_ACLS, 1, 3), (_K.DELETE_ACLS, 1, 3)}), frozenset()),
    # 17: + KIP-932 share groups (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge; the shares module)
    (frozenset({(_K.SHARE_GROUP_HEARTBEAT, 1, 1), (_K.SHARE_FETCH, 1, 2), (_K.SHARE_ACKNOWLEDGE, 1, 2)}),
     frozenset()),
    # 18: + share groups' admin APIs (ShareGroupDescribe, Describe/Alter/DeleteShareGroupOffsets)
    (frozenset({(_K.SHARE_GROUP_DESCRIBE, 1, 1), (_K.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1),
                (_K.ALTER_SHARE_GROUP_OFFSETS, 0, 0), (_K.DELETE_SHARE_GROUP_OFFSETS, 0, 0)}), frozenset()),
    # 19: + AlterPartitionReassignments and ListPartitionReassignments (KIP-455; the topics module)
    (frozenset({(_K.ALTER_PARTITION_REASSIGNMENTS, 0, 1), (_K.LIST_PARTITION_REASSIGNMENTS, 0, 0)}),
     frozenset()),
    # 20: + KIP-932's share coordinator (Initialize/Read/Write/DeleteShareGroupState,
    # ReadShareGroupStateSummary; the share-coordinator module)
    (frozenset({(_K.INITIALIZE_SHARE_GROUP_STATE, 0, 0), (_K.READ_SHARE_GROUP_STATE, 0, 0),
                (_K.WRITE_SHARE_GROUP_STATE, 0, 0), (_K.DELETE_SHARE_GROUP_STATE, 0, 0),
                (_K.READ_SHARE_GROUP_STATE_SUMMARY, 0, 0)}), frozenset()),
    # 21: + ListConfigResources 0-1 (KIP-1142; the configs module, which lists every resource type)
    (frozenset({(_K.LIST_CONFIG_RESOURCES, 0, 1)}), frozenset()),
    # 22: + AlterReplicaLogDirs 1-2 (the dataplane module: moves between the dirs of log.dirs)
    (frozenset({(_K.ALTER_REPLICA_LOG_DIRS, 1, 2)}), frozenset()),
    # 23: the versions Kafka 2.8-3.9 served below Kafka 4's: Produce v0-v2 and Fetch v0-v3 with the
    # magic-0/1 message formats converted, ListOffsets v0, OffsetForLeaderEpoch v0-v1,
    # DescribeLogDirs and AlterReplicaLogDirs v0, the ACL APIs' v0 (literal patterns only), OffsetCommit
    # v0-v1 and OffsetFetch v0 (v0's offsets in the store's /consumers znodes)
    (frozenset({(_K.PRODUCE, 0, 13), (_K.FETCH, 0, 18), (_K.LIST_OFFSETS, 0, 11),
                (_K.OFFSET_FOR_LEADER_EPOCH, 0, 4),
                (_K.DESCRIBE_LOG_DIRS, 0, 5), (_K.ALTER_REPLICA_LOG_DIRS, 0, 2), (_K.DESCRIBE_ACLS, 0, 3),
                (_K.CREATE_ACLS, 0, 3), (_K.DELETE_ACLS, 0, 3), (_K.OFFSET_COMMIT, 0, 10),
                (_K.OFFSET_FETCH, 0, 10)}),
     frozenset({(_K.PRODUCE, 3, 13), (_K.FETCH, 4, 18), (_K.LIST_OFFSETS, 1, 11),
                (_K.OFFSET_FOR_LEADER_EPOCH, 2, 4),
                (_K.DESCRIBE_LOG_DIRS, 1, 5), (_K.ALTER_REPLICA_LOG_DIRS, 1, 2), (_K.DESCRIBE_ACLS, 1, 3),
                (_K.CREATE_ACLS, 1, 3), (_K.DELETE_ACLS, 1, 3), (_K.OFFSET_COMMIT, 2, 10),
                (_K.OFFSET_FETCH, 1, 10)})),
)


def _protocol_history() -> dict[int, frozenset[tuple[int, int, int]]]:
    history: dict[int, frozenset[tuple[int, int, int]]] = {}
    served: frozenset[tuple[int, int, int]] = frozenset()
    for version, (added, replaced) in enumerate(_PROTOCOL_CHANGES, start=PROTOCOL_VERSION_MIN):
        served = history[version] = served - replaced | added
    return history


PROTOCOL_HISTORY = _protocol_history()

# Metadata answers authorized operations for the topics it describes, not for these refusals
# (Kafka's unauthorizedForDescribe/ForCreate and unknownTopicIds entries keep the default).
_NOT_DESCRIBED: Final = frozenset({ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.UNKNOWN_TOPIC_ID})

# Kafka validates ApiVersions v3+ client software names and versions with this pattern.
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def valid_client_software(name: str, version: str) -> bool:
    """Kafka's ApiVersionsRequest.isValid for v3+: both match the pattern, else INVALID_REQUEST."""
    return bool(_SOFTWARE.fullmatch(name) and _SOFTWARE.fullmatch(version))  # Java's whole-string matches()


UNKNOWN_SOFTWARE: Final = "unknown"  # Kafka's ClientInformation.UNKNOWN_NAME_OR_VERSION


def client_information(api_version: int, body: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (software name, version) an ApiVersions request gives its connection, as Kafka's
    SocketServer registers its ClientInformation: None when the request is not valid (refused,
    the connection's stays), "unknown" for what it does not name (v0-v2 name nothing)."""
    name, version = body.get("client_software_name") or "", body.get("client_software_version") or ""
    if api_version >= 3 and not valid_client_software(name, version):
        return None
    return name or UNKNOWN_SOFTWARE, version or UNKNOWN_SOFTWARE

COMPRESSION_CODECS = "1=gzip,2=snappy,3=lz4,4=zstd"
MESSAGE_FORMATS = "v0,v1,v2"


# Kafka's Topic.isInternal: the topics its coordinators keep their state in.
INTERNAL_TOPICS: Final = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


# DescribeCluster v1's endpoint types (Kafka's EndpointType): a broker serves the first only.
_BROKER_ENDPOINT: Final = 1
_CONTROLLER_ENDPOINT: Final = 2

# The first Metadata version that may name topics by id (KIP-516); v10 and v11 carry the field but
# Kafka refuses an id, or a null name, in them.
_METADATA_TOPIC_IDS: Final = 12
_METADATA_LISTENER_NOT_FOUND: Final = 6  # Kafka: LISTENER_NOT_FOUND for a leader off the listener from v6


def _valid_topic_name(name: str) -> bool:
    """Kafka's Topic.validate: Metadata answers a name it breaks INVALID_TOPIC_EXCEPTION, and does
    not try to create it."""
    return topic_name_problem(name) is None


def _metadata_refused(version: int, requested: list[Mapping[str, Any]], error: ErrorCode) -> dict[str, Any]:
    """Kafka's MetadataRequest.getErrorResponse: every requested topic answered ``error``, a null
    name as "" (the response's name is not nullable before v12), no brokers."""
    topics = [{"error_code": error, "name": t.get("name") or "", "topic_id": t.get("topic_id", ZERO_UUID),
               "is_internal": False, "partitions": []} for t in requested]
    return fit_body(ApiKey.METADATA, "response", version, {"throttle_time_ms": 0, "brokers": [],
                                                            "topics": topics})


@attrs.frozen
class _ListenerView:
    """The brokers as one listener sees them (Kafka's MetadataCache, by the request's listener):
    those with an endpoint on it, and what a leader without one is answered."""

    reachable: frozenset[int]
    unreachable_leader: ErrorCode  # LISTENER_NOT_FOUND from Metadata v6, LEADER_NOT_AVAILABLE before


def _partition_metadata(info: TopicInfo, index: int, live: set[int], states: PartitionStates,
                        offline: Mapping[int, frozenset[tuple[str, int]]],
                        view: _ListenerView) -> dict[str, Any]:
    """One partition as Metadata and DescribeTopicPartitions list it (see _topic_metadata). A
    replica is offline on a stopped broker, or in a log dir that failed (KIP-112: ``offline``,
    broker id -> its replicas there), and then leads nothing, as in Kafka. A live broker without an
    endpoint on the request's listener leads as ever, but is told as no leader
    (``view.unreachable_leader``) and an offline replica, as Kafka's MetadataCache answers."""
    replicas = info.partitions[index]
    if offline:
        key = (info.name, index)
        live = {r for r in live if key not in offline.get(r, ())}
    state = states.get((info.name, index))
    leader, epoch = partition_leadership(replicas, live, state)
    error = ErrorCode.NONE if leader != NO_LEADER else ErrorCode.LEADER_NOT_AVAILABLE
    if leader != NO_LEADER and leader not in view.reachable:
        log.debug("Error while fetching metadata for %s-%d: listener not found on leader %d",
                  info.name, index, leader)
        leader, error = NO_LEADER, view.unreachable_leader
    isr = partition_isr(replicas, live, state)
    return {"error_code": error, "partition_index": index, "leader_id": leader, "leader_epoch": epoch,
            "replica_nodes": list(replicas), "isr_nodes": isr,
            "offline_replicas": [r for r in replicas if r not in live or r not in view.reachable]}


def _topic_metadata(info: TopicInfo, live: set[int], states: PartitionStates,
                    offline: Mapping[int, frozenset[tuple[str, int]]], view: _ListenerView) -> dict[str, Any]:
    """A topic as Metadata lists it: the leader, leader epoch and ISR the controller stored
    (``partition_leadership``; a new partition's first live replica before its first state); a
    stored leader that is down, or an election the controller has not written yet: leader -1,
    LEADER_NOT_AVAILABLE."""
    partitions = [_partition_metadata(info, index, live, states, offline, view)
                  for index in sorted(info.partitions)]
    return {"error_code": ErrorCode.NONE, "name": info.name, "topic_id": info.topic_id,
            "is_internal": info.name in INTERNAL_TOPICS, "partitions": partitions,
            "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


def _version_int(version: str) -> str:
    """broker.version.int in the draft's format: 0xMMmmpp00 for version MM.mm.pp."""
    parts = [int(p) for p in re.findall(r"\d+", version)[:3]] + [0, 0, 0]
    return f"0x{parts[0]:02x}{parts[1]:02x}{parts[2]:02x}00"


class CoreModule(Module):
    name = "core"
    wants = (AUTO_TOPIC_CREATION,)

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self._valid_software: set[tuple[str, str]] = set()  # names already checked against _SOFTWARE
        self._api_keys: tuple[Mapping[int, tuple[int, int]], list[dict[str, int]]] | None = None
        self._encoded: dict[int, EncodedResponse] = {}  # ApiVersions answer per version
        self._encoded_finalized: Mapping[str, int] | None = None  # the finalized features they carry

    def apis(self) -> Mapping[int, ApiHandler]:
        return {
            ApiKey.API_VERSIONS: ApiHandler(VersionRange(0, 4), self.api_versions, memoize=True),
            ApiKey.METADATA: ApiHandler(VersionRange(0, 13), self.metadata),
            ApiKey.DESCRIBE_CLUSTER: ApiHandler(VersionRange(0, 2), self.describe_cluster),
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: ApiHandler(VersionRange(0, 0), self.describe_topic_partitions),
            ApiKey.BROKER_METADATA: ApiHandler(VersionRange(0, 0), self.broker_metadata),
            ApiKey.SASL_HANDSHAKE: ApiHandler(VersionRange(0, 1), self.sasl_handshake),
            ApiKey.SASL_AUTHENTICATE: ApiHandler(VersionRange(0, 2), self.sasl_authenticate),
        }

    # --- ApiVersions --------------------------------------------------------------------------

    def api_versions(self, ctx: RequestContext,
                           request: Request) -> Mapping[str, Any] | EncodedResponse:
        if ctx.api_version >= 3:
            asked = request.body
            software = (asked.get("client_software_name", ""), asked.get("client_software_version", ""))
            if software not in self._valid_software:
                if not valid_client_software(*software):
                    return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": [], "throttle_time_ms": 0}
                if len(self._valid_software) < 1024:  # bounded: client names are few
                    self._valid_software.add(software)
        api_keys = self._advertised()
        finalized = self.services.finalized_features
        if finalized is not self._encoded_finalized:  # KIP-584: a finalized change invalidates them all
            self._encoded.clear()
            self._encoded_finalized = finalized
        cached = self._encoded.get(ctx.api_version)
        if cached is None or cached.body["api_keys"] is not api_keys:
            body: dict[str, Any] = {"error_code": ErrorCode.NONE, "api_keys": api_keys, "throttle_time_ms": 0}
            if ctx.api_version >= 3:
                body.update(self._features(ctx.api_version, finalized))
            cached = EncodedResponse(body, encode_response_body(ApiKey.API_VERSIONS, ctx.api_version, body))
            self._encoded[ctx.api_version] = cached
        return cached

    def _features(self, version: int, finalized: Mapping[str, int] | None) -> dict[str, Any]:
        """KIP-584's tagged fields as Kafka fills them: supported features (v3 omits those with
        minimum 0, KAFKA-17011), the finalized epoch (-1, thus absent, when unknown) and the
        finalized levels (min = max = the level, as Kafka sends since KIP-778)."""
        supported = [{"name": name, "min_version": low, "max_version": high}
                     for name, (low, high) in sorted(self.services.supported_features.items())
                     if version >= 4 or low >= 1]
        if finalized is None:
            return {"supported_features": supported}
        return {"supported_features": supported, "finalized_features_epoch": self.services.finalized_epoch,
                "finalized_features": [{"name": name, "max_version_level": level, "min_version_level": level}
                                       for name, level in sorted(finalized.items()) if level >= 1]}

    def _advertised(self) -> list[dict[str, int]]:
        """The advertised keys; a new list object whenever the served set changes."""
        served = self.services.served_versions()
        if self._api_keys is None or self._api_keys[0] is not served:
            advertise_private = self.services.config["advertise.private.api.keys"]
            self._api_keys = (served, [{"api_key": key, "min_version": low, "max_version": high}
                                       for key, (low, high) in sorted(served.items())
                                       if advertise_private or key < 1000])
        return self._api_keys[1]

    # --- SaslHandshake, SaslAuthenticate --------------------------------------------------------

    def sasl_handshake(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        """What reaches the dispatcher is out of place, as in Kafka's KafkaApis: the connection is
        authenticated already, or its listener has no SASL."""
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}

    def sasl_authenticate(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        """Out of place as SaslHandshake is; Kafka's KafkaApis gives one message whatever the
        listener (on PLAINTEXT and SSL too)."""
        return fit_body(ApiKey.SASL_AUTHENTICATE, "response", ctx.api_version,
                        {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
                         "error_message": "SaslAuthenticate request received after successful authentication",
                         "auth_bytes": b"", "session_lifetime_ms": 0})

    # --- Metadata -----------------------------------------------------------------------------

    def _brokers_on(self, listener: str) -> list[tuple[BrokerRegistration, str, int]]:
        """Brokers with an endpoint on the listener the request came in on, as Kafka answers."""
        found = []
        for broker in self.services.cluster.brokers:
            endpoint = broker.endpoint(listener)
            if endpoint is not None:
                found.append((broker, endpoint.host, endpoint.port))
        return found

    def metadata(self, ctx: RequestContext,
                 request: Request) -> Mapping[str, Any] | Awaitable[Mapping[str, Any]]:
        """Answered in place, unless requested topics are missing and may be auto-created: then a
        coroutine that starts creating them and answers as Kafka does (LEADER_NOT_AVAILABLE).

        With an authorizer (Kafka's handleTopicMetadataRequest): a topic the principal may not
        DESCRIBE is left out of a listing of all topics, and answered TOPIC_AUTHORIZATION_FAILED
        when named; a missing topic is auto-created only with CREATE on the CLUSTER or on the
        topic, else answered TOPIC_AUTHORIZATION_FAILED."""
        requested = request.body.get("topics")
        if requested and ctx.api_version < _METADATA_TOPIC_IDS and any(
                t.get("name") is None or t.get("topic_id", ZERO_UUID) != ZERO_UUID for t in requested):
            return _metadata_refused(ctx.api_version, requested, ErrorCode.INVALID_REQUEST)
        refused: dict[str, ErrorCode] = {}
        if requested and not isinstance(self.services.authorizer, AllowAll):
            refused = {name: ErrorCode.TOPIC_AUTHORIZATION_FAILED
                       for name in (t.get("name") for t in requested)
                       if name is not None and not self._allowed(ctx, "DESCRIBE", "TOPIC", name)}
        if requested and (ctx.api_version < 4 or request.body.get("allow_auto_topic_creation", True)):
            known = self.services.cluster.topics
            missing = [t["name"] for t in requested
                       if t.get("name") is not None and t["name"] not in known and t["name"] not in refused]
            creator = self._auto_creator() if missing else None  # looked up only when needed: hot path
            if creator is None:
                return self._metadata(ctx, request, refused)
            if not isinstance(self.services.authorizer, AllowAll) and not self._allowed(
                    ctx, "CREATE", "CLUSTER", CLUSTER_RESOURCE):
                refused.update({name: ErrorCode.TOPIC_AUTHORIZATION_FAILED for name in missing
                                if not self._allowed(ctx, "CREATE", "TOPIC", name)})
                missing = [name for name in missing if name not in refused]
            # An invalid name is answered INVALID_TOPIC_EXCEPTION (by _metadata), never sent on.
            missing = [name for name in missing if _valid_topic_name(name)]
            if missing:
                return self._metadata_creating(ctx, request, creator, missing, refused)
        return self._metadata(ctx, request, refused)

    def _auto_creator(self) -> AutoTopicCreation | None:
        """The module that auto-creates topics, while ``auto.create.topics.enable`` is on: only then
        does a missing topic need CREATE (Kafka asks the authorizer only when it would create)."""
        if not self.services.config.get("auto.create.topics.enable", True):  # Kafka's default
            return None
        creator = self.services.provider(AUTO_TOPIC_CREATION, Module)
        return creator if conforms(creator, AutoTopicCreation) else None

    def _allowed(self, ctx: RequestContext, operation: str, resource_type: str, name: str) -> bool:
        conn = ctx.connection
        return self.services.authorizer.authorize(conn.principal, conn.client_address[0], operation,
                                                  resource_type, name)

    async def _metadata_creating(self, ctx: RequestContext, request: Request, creator: AutoTopicCreation,
                                 missing: list[str], refused: Mapping[str, ErrorCode]) -> Mapping[str, Any]:
        return self._metadata(ctx, request, {**await creator.auto_create_topics(missing), **refused})

    def _metadata(self, ctx: RequestContext, request: Request,
                  creating: Mapping[str, ErrorCode]) -> Mapping[str, Any]:
        cluster = self.services.cluster
        requested = request.body.get("topics")
        known = cluster.topics  # one snapshot: the watch replaces the whole dict
        live = {b.broker_id for b in cluster.brokers}
        on_listener = self._brokers_on(ctx.connection.listener)
        view = _ListenerView(frozenset(b.broker_id for b, _, _ in on_listener),
                             ErrorCode.LISTENER_NOT_FOUND if ctx.api_version >= _METADATA_LISTENER_NOT_FOUND
                             else ErrorCode.LEADER_NOT_AVAILABLE)
        states = cluster.partition_states
        offline = cluster.offline_replicas
        topics = []
        if requested is None or (ctx.api_version == 0 and requested == []):
            listed = sorted(known.items())
            if not isinstance(self.services.authorizer, AllowAll):
                listed = [(name, info) for name, info in listed
                          if self._allowed(ctx, "DESCRIBE", "TOPIC", name)]
            topics = [_topic_metadata(info, live, states, offline, view) for _, info in listed]
        else:
            by_id: dict[Any, TopicInfo] | None = None
            for topic in requested:
                name = topic.get("name")
                if name is None:
                    if by_id is None:
                        by_id = {info.topic_id: info for info in known.values()}
                    found = by_id.get(topic.get("topic_id"))
                    if found is not None and not isinstance(self.services.authorizer, AllowAll) and \
                            not self._allowed(ctx, "DESCRIBE", "TOPIC", found.name):
                        topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": None,
                                       "topic_id": topic.get("topic_id"), "is_internal": False,
                                       "partitions": [],
                                       "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
                        continue
                    if found is not None:
                        topics.append(_topic_metadata(found, live, states, offline, view))
                        continue
                    topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None,
                                   "topic_id": topic.get("topic_id"), "is_internal": False, "partitions": [],
                                   "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
                elif name in known and name not in creating:
                    topics.append(_topic_metadata(known[name], live, states, offline, view))
                else:
                    error = creating.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if _valid_topic_name(name)
                                         else ErrorCode.INVALID_TOPIC_EXCEPTION)
                    topics.append({"error_code": error, "name": name,
                                   # (a refused caller is not told that a topic is internal)
                                   "is_internal": name in INTERNAL_TOPICS
                                                  and error != ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   "partitions": [],
                                   "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
        cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
        if ctx.api_version >= 8:  # KIP-430: computed only when asked for
            if ctx.api_version <= 10 and request.body.get("include_cluster_authorized_operations"):
                cluster_operations = self._cluster_operations(ctx)
            if request.body.get("include_topic_authorized_operations"):
                for entry in topics:
                    if entry["error_code"] not in _NOT_DESCRIBED:
                        entry["topic_authorized_operations"] = self._operations(ctx, ResourceType.TOPIC,
                                                                                entry["name"])
        body = {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": b.broker_id, "host": host, "port": port, "rack": b.rack}
                        for b, host, port in on_listener],
            "cluster_id": cluster.cluster_id,
            "controller_id": cluster.controller_id,
            "topics": topics,
            "cluster_authorized_operations": cluster_operations,
        }
        return fit_body(ApiKey.METADATA, "response", ctx.api_version, body)

    def _operations(self, ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
        conn = ctx.connection
        return authorized_operations(self.services.authorizer, conn.principal, conn.client_address[0],
                                     resource_type, name)

    def _cluster_operations(self, ctx: RequestContext) -> int:
        """The cluster's authorized operations, or none (0) without DESCRIBE on it, as Kafka's."""
        if not self._allowed(ctx, "DESCRIBE", "CLUSTER", CLUSTER_RESOURCE):
            return 0
        return self._operations(ctx, ResourceType.CLUSTER, CLUSTER_RESOURCE)

    # --- DescribeTopicPartitions (KIP-966) --------------------------------------------------------

    def describe_topic_partitions(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        """Topics in name order, a page of at most ``max.request.partition.size.limit`` partitions
        (or the request's lower limit) at a time; the answer's cursor names where the next page
        starts. No topics named: every topic the principal may describe, those it may not left out;
        a named one it may not describe is TOPIC_AUTHORIZATION_FAILED, an unknown one
        UNKNOWN_TOPIC_OR_PARTITION. A cursor before the first partition, or (with topics named) on a
        topic not among them, is INVALID_REQUEST for every topic named, as Kafka answers."""
        body = request.body
        named = [t["name"] for t in body.get("topics") or ()]
        cursor = body.get("cursor")
        start_topic = cursor["topic_name"] if cursor is not None else ""
        problem = None
        if cursor is not None and cursor["partition_index"] < 0:
            problem = f"the cursor's partition must be valid: {cursor['partition_index']}"
        elif cursor is not None and named and start_topic not in named:
            problem = f"the topics named must include the cursor's topic {start_topic!r}"
        if problem is not None:
            log.info("DescribeTopicPartitions from %s refused: %s", ctx.connection.id, problem)
            invalid = [{"error_code": ErrorCode.INVALID_REQUEST, "name": name, "topic_id": ZERO_UUID,
                        "is_internal": False, "partitions": [],
                        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED} for name in named]
            return {"throttle_time_ms": 0, "topics": invalid, "next_cursor": None}
        cluster = self.services.cluster
        known = cluster.topics  # one snapshot: the watch replaces the whole dict
        candidates = sorted(name for name in (named or known) if name >= start_topic)
        conn = ctx.connection
        authorizer = self.services.authorizer
        refused: list[dict[str, Any]] = []
        allowed: list[str] = []
        for name in dict.fromkeys(candidates):
            if authorizer.authorize(conn.principal, conn.client_address[0], "DESCRIBE", "TOPIC", name):
                allowed.append(name)
            elif named:
                refused.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name,
                                "topic_id": ZERO_UUID, "is_internal": False, "partitions": [],
                                "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
        limit = max(min(int(self.services.config["max.request.partition.size.limit"]),
                        body["response_partition_limit"]), 1)
        live = {b.broker_id for b in cluster.brokers}
        # (DescribeTopicPartitions has no partition error: a leader off this listener is only -1)
        view = _ListenerView(frozenset(b.broker_id for b, _, _ in self._brokers_on(ctx.connection.listener)),
                             ErrorCode.NONE)
        states = cluster.partition_states
        offline = cluster.offline_replicas
        topics: list[dict[str, Any]] = []
        next_cursor = None
        for name in allowed:
            if limit == 0:  # the page is full at a topic's start: the next page starts there
                next_cursor = {"topic_name": name, "partition_index": 0}
                break
            info = known.get(name)
            if info is None:
                if named:
                    topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                                   "topic_id": ZERO_UUID, "is_internal": name in INTERNAL_TOPICS,
                                   "partitions": [],
                                   "topic_authorized_operations": self._operations(ctx, ResourceType.TOPIC,
                                                                                   name)})
                continue
            first = cursor["partition_index"] if name == start_topic and cursor is not None else 0
            indexes = [index for index in sorted(info.partitions) if index >= first]
            page, rest = indexes[:limit], indexes[limit:]
            topics.append({"error_code": ErrorCode.NONE, "name": name, "topic_id": info.topic_id,
                           "is_internal": name in INTERNAL_TOPICS,
                           "partitions": [{**_partition_metadata(info, index, live, states, offline, view),
                                           "eligible_leader_replicas": [], "last_known_elr": []}
                                          for index in page],
                           "topic_authorized_operations": self._operations(ctx, ResourceType.TOPIC, name)})
            if rest:
                next_cursor = {"topic_name": name, "partition_index": rest[0]}
                break
            limit -= len(page)
        return {"throttle_time_ms": 0, "topics": topics + refused, "next_cursor": next_cursor}

    # --- DescribeCluster ----------------------------------------------------------------------

    def describe_cluster(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        """The brokers, as Kafka's broker answers; a request for another endpoint type (v1+: the
        controllers, 2, or a type Kafka does not know) is refused as Kafka refuses it."""
        wanted = request.body.get("endpoint_type", _BROKER_ENDPOINT)
        if wanted != _BROKER_ENDPOINT:
            known_type = wanted == _CONTROLLER_ENDPOINT
            code = ErrorCode.INVALID_REQUEST if ctx.api_version == 0 else (
                ErrorCode.MISMATCHED_ENDPOINT_TYPE if known_type else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE)
            message = ("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
                       "type CONTROLLER" if known_type else f"Unsupported endpoint type {wanted}")
            return fit_body(ApiKey.DESCRIBE_CLUSTER, "response", ctx.api_version, {
                "throttle_time_ms": 0, "error_code": code, "error_message": message,
                "endpoint_type": _BROKER_ENDPOINT, "cluster_id": "", "controller_id": -1, "brokers": [],
                "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
        cluster = self.services.cluster
        body = {
            "throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "endpoint_type": _BROKER_ENDPOINT,
            "cluster_id": cluster.cluster_id, "controller_id": cluster.controller_id,
            "brokers": [{"broker_id": b.broker_id, "host": host, "port": port, "rack": b.rack,
                         "is_fenced": False}
                        for b, host, port in self._brokers_on(ctx.connection.listener)],
            "cluster_authorized_operations": (self._cluster_operations(ctx)
                                              if request.body.get("include_cluster_authorized_operations")
                                              else AUTHORIZED_OPERATIONS_OMITTED),
        }
        return fit_body(ApiKey.DESCRIBE_CLUSTER, "response", ctx.api_version, body)

    # --- BrokerMetadata (seed 002) ------------------------------------------------------------

    def broker_metadata(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        wanted = request.body.get("node_ids") or []
        brokers = self.services.cluster.brokers
        if wanted:
            ids = {self.services.broker_id if n == -1 else n for n in wanted}
            brokers = [b for b in brokers if b.broker_id in ids]
        answer = []
        for broker in brokers:
            endpoint = broker.endpoint(ctx.connection.listener) or broker.endpoints[0]
            answer.append({
                "node_id": broker.broker_id, "host": endpoint.host, "port": endpoint.port,
                "protocol_version_min": PROTOCOL_VERSION_MIN, "protocol_version_max": PROTOCOL_VERSION,
                "tags": [{"key": k, "value": v} for k, v in self._tags(broker).items()],
            })
        return {"brokers": answer}

    def _tags(self, broker: BrokerRegistration) -> dict[str, str]:
        # message.max.bytes is there to align clients with the limit in force: a dynamic change
        # counts (this broker's view, for every broker described: their dynamic cluster default is
        # the same, their own overrides and static settings are not known here).
        settings = self.services.provider(TOPIC_CONFIGS_CAPABILITY, Module)
        config = settings.broker_settings() if conforms(settings, BrokerSettings) else self.services.config
        tags = {
            "broker.id": str(broker.broker_id),
            "broker.version": f"kafkapy-{kafkapy.__version__}",
            "broker.version.int": _version_int(kafkapy.__version__),
            "compression.codecs": COMPRESSION_CODECS,
            "message.max.bytes": str(config["message.max.bytes"]),
            "message.formats": MESSAGE_FORMATS,
            "endpoints": ",".join(f"{e.listener.lower()}://{e.host}:{e.port}" for e in broker.endpoints),
        }
        tags.update(broker.tags)  # each broker's own tag.* settings, from its registration
        return tags
