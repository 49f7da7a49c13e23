"""The metadata store interface: the cluster state every broker shares.

Two implementations behave the same and pass one shared test suite:
MemoryStore (the default; several Brokers in one process sharing one
MemoryStore form a cluster) and ZooKeeperStore (kazoo, at Kafka's own znode
paths and JSON formats, for brokers on several machines).

The interface is split by role (BrokerStore, TopicStore, ConfigStore, FeatureStore,
CoordinatorStore, ProducerIdStore, PartitionStateStore, AclStore, LogDirStore, StoreLifecycle), so that code
states which part of the cluster state it touches; MetadataStore is their union,
and both stores implement it whole.

Reads of a list of children (brokers, topics, entity configs, a group's
owners, members and offsets) skip a child that cannot be read (invalid JSON, an
unknown version) and log it once per store and content, naming its path: one
bad znode must not hide the good ones (a corrupt /brokers/ids/9 once left
Metadata with no brokers at all). A read of one node raises CorruptMetadata.

The interface is synchronous: kazoo is, and the in-memory store is trivially.
Callers on an event loop run store calls that may block in a thread, and hand
watch callbacks to the loop with kafkapy.store.onloop.


Watches: ``watch_*`` registers a callback and returns a Watch whose ``cancel()``
stops it. Callbacks may run on any thread (kazoo's event thread, or, in memory,
the thread that made the change or the one already delivering, in the order of
the changes); they must be quick and thread-safe, e.g.
``loop.call_soon_threadsafe(...)``. Every watch survives a ZooKeeper session
loss: the store re-arms it on the new session and calls it once with the current
state, since changes may have been missed meanwhile. Each ``watch_*`` also calls
its callback once at registration with the current state, except
``watch_entity_configs``, which reports only later changes. An exception in a
callback is logged, never raised to whoever made the change. Watches of one kind
are called in the order they were set, each after the earlier ones have seen the
state: a watch set later (a request waiting for a topic) never runs ahead of an
earlier one (the broker's view of the cluster).

Snapshots: ``watch_topics`` and ``watch_partition_states`` deliver the whole state as a
kafkapy.store.persistent.PersistentMap that never changes once delivered (a reader may keep it and
read it from any thread). Each one a watch delivers is made from the one before it by the changes
in between, sharing the rest, so a reader that keeps the last it saw learns what changed with
``changed_keys(last, new)`` in time proportional to the change, not to the cluster (the
controller's pass, kafkapy.server.leadership, works on such deltas). The one-off reads
(``topics()``, ``partition_states()``) give plain dicts of their own.

Elections: ``register_broker`` also runs the broker for controller (as a Kafka
broker does when it starts); ``elect_coordinator`` enters the broker for
/consumers/coordinator. When the holder unregisters, or its store is closed or
loses its session, a remaining candidate takes over.

Entity paths name client-quota entities as Kafka's /config tree does:
``ips/1.2.3.4``, ``ips/<default>``, ``users/alice``, ``clients/c1``,
``users/alice/clients/c1``, ``users/<default>/clients/<default>``. Names are
URL-encoded (Kafka's Sanitizer) inside the path. Dynamic broker configs use the
same calls and notifications: ``brokers/<default>`` (the cluster-wide default)
and ``brokers/<id>`` (one broker's overrides), Kafka's /config/brokers nodes; and
so do topic configs: ``topics/<topic>``, Kafka's /config/topics/<topic>, written
by ``create_topic`` with the topic and removed by ``delete_topic``.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Protocol, runtime_checkable
from urllib.parse import quote, unquote

import attrs

from kafkapy.errors import KafkaPyError

__all__ = [
    "AclResource",
    "AclStore",
    "AclVersionConflict",
    "BrokerRegistration",
    "BrokerStore",
    "ConfigStore",
    "CoordinatorStore",
    "CorruptMetadata",
    "FeatureEpochConflict",
    "FeatureStore",
    "LogDirEventQueue",
    "LogDirStore",
    "MetadataStore",
    "OfflineReplicas",
    "PartitionState",
    "PartitionStateConflict",
    "PartitionStateStore",
    "PartitionStates",
    "ProducerIdBlock",
    "ProducerIdStore",
    "RegisteredEndpoint",
    "StoreError",
    "StoreLifecycle",
    "StoredAcl",
    "TopicAlreadyExists",
    "TopicInfo",
    "TopicStore",
    "UnknownTopic",
    "Watch",
    "check_acl_resource",
    "check_topic_name",
    "decode_uuid",
    "desanitize",
    "encode_uuid",
    "entity_type_of",
    "new_cluster_id",
    "next_producer_id_block",
    "sanitize",
    "topic_name_problem",
]

DEFAULT_ENTITY = "<default>"
ENTITY_TYPES = ("ips", "users", "clients", "users/clients", "brokers", "topics", "client-metrics", "groups")
_NAMED_ENTITY_TYPES = frozenset(ENTITY_TYPES) - {"users/clients"}
# Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE; ids are Java longs.
PRODUCER_ID_BLOCK_SIZE = 1000
MAX_PRODUCER_ID = 2**63 - 1


class StoreError(KafkaPyError):
    """The store refused an operation (e.g. a broker id already registered)."""


class CorruptMetadata(StoreError):
    """Stored data the store cannot read (invalid JSON, an unknown version...); names the path."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path


def encode_uuid(value: uuid.UUID) -> str:
    """A UUID as Kafka prints it: URL-safe base64 without padding, 22 characters."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def decode_uuid(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return uuid.UUID(bytes=raw)


def new_cluster_id() -> str:
    """A random UUID as Kafka prints it: URL-safe base64 without padding, 22 characters."""
    return encode_uuid(uuid.uuid4())


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: URL-encode an entity name for a znode path (<default> stays)."""
    if name == DEFAULT_ENTITY:
        return name
    # java.net.URLEncoder keeps [A-Za-z0-9.-*_]; Sanitizer then turns "*" into %2A and "+" into %20.
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return name if name == DEFAULT_ENTITY else unquote(name)


def entity_type_of(entity_path: str) -> str:
    """``ips/1.2.3.4`` -> ``ips``; ``users/a/clients/c`` -> ``users/clients``; ``brokers/0`` ->
    ``brokers``; ``topics/t`` -> ``topics``; ``client-metrics/s`` (KIP-714 subscriptions) ->
    ``client-metrics``; ``groups/g`` (KIP-848 group configs) -> ``groups``. StoreError if malformed."""
    parts = entity_path.split("/")
    if len(parts) == 2 and parts[0] in _NAMED_ENTITY_TYPES and parts[1]:
        return parts[0]
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and parts[1] and parts[3]:
        return "users/clients"
    raise StoreError(f"invalid entity path {entity_path!r} (expected <type>/<name> or users/<u>/clients/<c>)")


def topic_name_problem(name: str) -> str | None:
    """Why Kafka's Topic.validate refuses a name (1 to 249 of [a-zA-Z0-9._-], not "." or ".."), in
    the words its INVALID_TOPIC_EXCEPTION messages use; None for a valid name."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > 249:
        return f"the length of '{name}' is longer than the max allowed length 249"
    if any(not (ch.isascii() and (ch.isalnum() or ch in "._-")) for ch in name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def check_topic_name(name: str) -> None:
    """Kafka's rule (``topic_name_problem``): StoreError "Topic name is invalid: ..." if broken."""
    problem = topic_name_problem(name)
    if problem is not None:
        raise StoreError(f"Topic name is invalid: {problem}")


@attrs.frozen
class RegisteredEndpoint:
    listener: str
    security_protocol: str
    host: str
    port: int


@attrs.frozen
class BrokerRegistration:
    broker_id: int
    endpoints: tuple[RegisteredEndpoint, ...]
    rack: str | None = None
    features: Mapping[str, tuple[int, int]] = attrs.field(factory=dict)
    # User tags (tag.<name>=<value>, the KIP-35 draft), so every broker can report every broker's.
    tags: Mapping[str, str] = attrs.field(factory=dict)

    def endpoint(self, listener: str) -> RegisteredEndpoint | None:
        for endpoint in self.endpoints:
            if endpoint.listener == listener:
                return endpoint
        return None


class TopicAlreadyExists(StoreError):
    pass


class UnknownTopic(StoreError):
    pass


class FeatureEpochConflict(StoreError):
    """The finalized features changed since the epoch the caller read."""


class PartitionStateConflict(StoreError):
    """A partition's state changed since the partition epoch the writer read."""


NO_PARTITION_EPOCH = -1  # set_partition_state's expected epoch when the state must not exist yet


@attrs.frozen
class PartitionState:
    """One partition's leadership, as Kafka's controller keeps it (LeaderAndIsr, ZooKeeper's
    /brokers/topics/<topic>/partitions/<p>/state).

    ``leader_epoch`` goes up by one each time the leader changes (-1 for no leader counts as a
    leader), which is what fences a client or a replica that still talks to the old one.
    ``partition_epoch`` is the state's own version, bumped by every write, ISR changes included
    (Kafka's partitionEpoch; on ZooKeeper, the znode's version): writers compare-and-set on it.
    ``controller_epoch`` is carried for Kafka's JSON; kafkapy has no /controller_epoch and writes 0.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 0
    partition_epoch: int = NO_PARTITION_EPOCH


# (topic, partition) -> its state: what watch_partition_states delivers (partition_states() gives a dict)
PartitionStates = Mapping[tuple[str, int], PartitionState]


@attrs.frozen
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    # partition -> replica broker ids (the first is the preferred leader)
    partitions: Mapping[int, tuple[int, ...]]


@attrs.frozen
class ProducerIdBlock:
    """A range of producer ids one broker hands out (Kafka's ProducerIdsBlock): ``first_id`` to
    ``last_id`` inclusive, ``size`` of them."""

    broker_id: int
    first_id: int
    size: int = PRODUCER_ID_BLOCK_SIZE

    @property
    def last_id(self) -> int:
        return self.first_id + self.size - 1

    @property
    def next_first_id(self) -> int:
        return self.first_id + self.size


def next_producer_id_block(current: ProducerIdBlock | None, broker_id: int) -> ProducerIdBlock:
    """The block after ``current`` (the first block starts at 0), for ``broker_id``; StoreError once
    the ids would pass Kafka's limit (a Java long), as Kafka's ProducerIdManager fails."""
    if current is None:
        return ProducerIdBlock(broker_id, 0)
    if current.last_id > MAX_PRODUCER_ID - PRODUCER_ID_BLOCK_SIZE:
        raise StoreError(f"producer ids are exhausted (the last block ends at {current.last_id})")
    return ProducerIdBlock(broker_id, current.next_first_id)


class Watch(Protocol):
    def cancel(self) -> None: ...


class AclVersionConflict(StoreError):
    """A resource's ACLs changed since the version the writer read."""


NO_ACL_VERSION = -1  # a resource's ACL version when it has none (set_resource_acls: create)
ACL_PATTERN_TYPES = ("LITERAL", "PREFIXED")


@attrs.frozen
class AclResource:
    """Where one resource pattern's ACLs are kept, named as Kafka's ZooKeeper tree names it:
    ``/kafka-acl/<resource_type>/<name>`` for LITERAL patterns,
    ``/kafka-acl-extended/prefixed/<resource_type>/<name>`` for PREFIXED ones."""

    pattern_type: str  # "LITERAL" or "PREFIXED"
    resource_type: str  # Kafka's Pascal-case name: "Topic", "Group", "Cluster", "TransactionalId"...
    name: str


@attrs.frozen
class StoredAcl:
    """One access control entry as Kafka's JSON holds it (AclEntry.toMap): Pascal-case names."""

    principal: str  # "User:alice"
    permission_type: str  # "Allow" or "Deny"
    operation: str  # "Read", "DescribeConfigs", "IdempotentWrite"...
    host: str  # "*" or an address


def check_acl_resource(resource: AclResource) -> None:
    """StoreError unless ``resource`` can be a znode: a known pattern type, and a resource type
    and name that are each one path element (Kafka puts the name in the path as it is)."""
    if resource.pattern_type not in ACL_PATTERN_TYPES:
        raise StoreError(f"ACLs are kept for LITERAL and PREFIXED patterns, not {resource.pattern_type!r}")
    for part in (resource.resource_type, resource.name):
        if not part or "/" in part or part in (".", "..") or any(ch < " " for ch in part):
            raise StoreError(f"{part!r} cannot name an ACL node (empty, '.', '..', a '/' or a control "
                             "character)")


# --- the roles -----------------------------------------------------------------------------------
# Each role is what one concern of the broker needs; a module asks for the roles it uses, and a
# store implements them all (MetadataStore). Every method belongs to exactly one role (a test holds
# this). Roles the coming issues bring go beside these, each with its own znodes and its own test
# section: consumer-group offsets and metadata (KIP-848's coordinator state, not seed 001's /consumers).


class StoreLifecycle(Protocol):
    def start(self) -> None:
        """Connect (ZooKeeper: fail with StoreError after zookeeper.connection.timeout.ms)."""

    def close(self) -> None: ...
    def keeps_metadata(self) -> bool:
        """Whether what is stored outlives the broker's process (ZooKeeper; the durable store's
        files), so the cluster id and topic ids can be held to those its log dirs recorded."""


class BrokerStore(Protocol):
    """Cluster id, broker registrations and ids, the controller election
    (/cluster/id, /brokers/ids/<id>, /brokers/seqid, /controller)."""

    def cluster_id(self) -> str: ...
    def allocate_broker_id(self, reserved_max: int) -> int: ...
    def register_broker(self, registration: BrokerRegistration) -> None:
        """Ephemeral: gone when the broker's session ends; re-created after a session loss."""

    def unregister_broker(self, broker_id: int) -> None: ...
    def brokers(self) -> list[BrokerRegistration]:
        """Every readable registration; a corrupt one is skipped (and logged once, naming its path)."""

    def watch_brokers(self, callback: Callable[[list[BrokerRegistration]], None]) -> Watch: ...

    def elect_controller(self, broker_id: int) -> int:
        """Try to become controller; return whoever is controller now (-1 if none)."""

    def controller_id(self) -> int: ...
    def watch_controller(self, callback: Callable[[int], None]) -> Watch: ...


class ConfigStore(Protocol):
    """Entity configs: client quotas and dynamic broker configs (/config/<type>/<name>), with
    Kafka's change notifications (/config/changes)."""

    def entity_config(self, entity_path: str) -> dict[str, str]: ...
    def entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        """Every entity of a type ("ips", "users", "clients", "brokers", or "users/clients" for pairs),
        keyed by entity path; a corrupt entity is skipped (and logged once)."""

    def set_entity_config(self, entity_path: str, config: Mapping[str, str]) -> None:
        """Replace an entity's config (empty: delete it) and post a change notification."""

    def watch_entity_configs(self, callback: Callable[[str], None]) -> Watch:
        """Called with the entity path of every change notification."""


class FeatureStore(Protocol):
    """Finalized features (/feature; epoch = znode version, -1 when absent)."""

    def finalized_features(self) -> tuple[int, dict[str, int]]: ...
    def set_finalized_features(self, features: Mapping[str, int], expected_epoch: int | None = None) -> int:
        """Replace the finalized features; return the new epoch. FeatureEpochConflict if the
        epoch moved since ``expected_epoch``."""

    def watch_features(self, callback: Callable[[int, dict[str, int]], None]) -> Watch: ...


class TopicStore(Protocol):
    """Topics and their replica assignments (/brokers/topics/<topic>)."""

    def create_topic(self, name: str, partitions: Mapping[int, tuple[int, ...]],
                     topic_id: uuid.UUID | None = None, config: Mapping[str, str] | None = None) -> TopicInfo:
        """Create the topic with its config overrides (entity ``topics/<name>``) in one step, as
        Kafka writes /config/topics/<name> with /brokers/topics/<name>; no change notification."""

    def delete_topic(self, name: str) -> None:
        """Remove the topic and its config overrides."""

    def add_partitions(self, name: str, partitions: Mapping[int, tuple[int, ...]]) -> TopicInfo:
        """Partitions only grow: new ids must continue the existing ones."""

    def reassign_partitions(self, name: str, partitions: Mapping[int, tuple[int, ...]]) -> TopicInfo:
        """New replica lists for existing partitions (the others keep theirs), as Kafka's controller
        writes a finished reassignment; the first replica is the preferred leader, so reordering
        the replicas moves leadership (kafkapy.server.leadership). StoreError for a partition the
        topic lacks or an empty or repeating replica list, UnknownTopic for no such topic."""

    def topics(self) -> dict[str, TopicInfo]:
        """Every readable topic; a corrupt one is skipped (and logged once, naming its path)."""

    def watch_topics(self, callback: Callable[[Mapping[str, TopicInfo]], None]) -> Watch:
        """Called with every topic, as a snapshot (see "Snapshots" in the module docstring)."""


class CoordinatorStore(Protocol):
    """The seed-001 consumer coordinator's state (/consumers/...)."""

    def elect_coordinator(self, broker_id: int) -> int:
        """/consumers/coordinator (ephemeral, holds the broker id): try to win; return the winner."""

    def coordinator_id(self) -> int: ...
    def watch_coordinator(self, callback: Callable[[int], None]) -> Watch: ...
    def groups(self) -> list[str]: ...
    def owners(self, group: str) -> dict[tuple[str, int], str]:
        """(topic, partition) -> consumer thread id, from /consumers/<group>/owners/<topic>/<partition>."""

    def set_owners(self, group: str, owners: Mapping[tuple[str, int], str]) -> None:
        """Replace the group's ownership (persistent nodes, seed 001)."""

    def members(self, group: str) -> dict[str, int]:
        """consumer id -> session_timeout_ms of the group's last rebalanced membership, from
        /consumers/<group>/members/<sanitized id> (persistent): a new coordinator waits for them."""

    def set_members(self, group: str, members: Mapping[str, int]) -> None:
        """Replace the group's recorded membership."""

    def offsets(self, group: str) -> dict[tuple[str, int], int]: ...
    def commit_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """/consumers/<group>/offsets/<topic>/<partition>, the offset as a decimal string."""


class ProducerIdStore(Protocol):
    """Blocks of producer ids for idempotent and transactional producers (/latest_producer_id_block)."""

    def allocate_producer_id_block(self, broker_id: int) -> ProducerIdBlock:
        """The next block of PRODUCER_ID_BLOCK_SIZE ids, for ``broker_id``; no two calls anywhere in
        the cluster get overlapping blocks (ZooKeeper: a conditional update on the znode version)."""


class PartitionStateStore(Protocol):
    """Each partition's leader, leader epoch and ISR (/brokers/topics/<topic>/partitions/<p>/state).
    States live and die with their topic: ``delete_topic`` removes them."""

    def partition_states(self) -> dict[tuple[str, int], PartitionState]:
        """Every readable state, by (topic, partition); a corrupt one is skipped (and logged once)."""

    def set_partition_state(self, topic: str, partition: int, state: PartitionState,
                            expected_partition_epoch: int) -> PartitionState:
        """Write ``state`` (its partition_epoch is ignored) only if the stored one is still at
        ``expected_partition_epoch`` (NO_PARTITION_EPOCH: only if there is none); return it with its
        new partition epoch. PartitionStateConflict otherwise; UnknownTopic if the topic is gone."""

    def watch_partition_states(self, callback: Callable[[PartitionStates], None]) -> Watch:
        """Called with every state, as a snapshot (see "Snapshots" in the module docstring)."""


class AclStore(Protocol):
    """ACLs by resource pattern (/kafka-acl, /kafka-acl-extended/prefixed), with Kafka's change
    notifications (/kafka-acl-changes, /kafka-acl-extended-changes). Writers compare-and-set on a
    resource's version, as Kafka's authorizer updates a resource's znode."""

    def acls(self) -> dict[AclResource, frozenset[StoredAcl]]:
        """Every resource that has ACLs; a corrupt node is skipped (and logged once)."""

    def resource_acls(self, resource: AclResource) -> tuple[frozenset[StoredAcl], int]:
        """The resource's ACLs and their version (NO_ACL_VERSION and nothing when it has none)."""

    def set_resource_acls(self, resource: AclResource, acls: frozenset[StoredAcl],
                          expected_version: int) -> int:
        """Replace the resource's ACLs (none: remove its node) if its version is still
        ``expected_version``; post a change notification; return the new version (NO_ACL_VERSION
        once removed). AclVersionConflict otherwise; StoreError for a resource that cannot be a node."""

    def watch_acl_changes(self, callback: Callable[[AclResource], None]) -> Watch:
        """Called with the resource of every change notification posted after the watch was set."""


# broker id -> the (topic, partition) replicas it holds in a failed log dir (LogDirStore)
OfflineReplicas = Mapping[int, frozenset[tuple[str, int]]]


class LogDirStore(Protocol):
    """KIP-112's news for the controller: the replicas each broker holds in a log dir that failed,
    so the controller treats them like replicas on a stopped broker (Kafka's log dir event
    notification, /log_dir_event_notification on ZooKeeper). A broker's set is cleared when it
    registers again (a restart opens its dirs again)."""

    def set_offline_replicas(self, broker_id: int, replicas: Collection[tuple[str, int]]) -> None:
        """Publish every replica of ``broker_id`` now offline (the whole set, not an addition)."""
    def offline_replicas(self) -> dict[int, frozenset[tuple[str, int]]]: ...
    def watch_offline_replicas(self, callback: Callable[[OfflineReplicas], None]) -> Watch:
        """Called with every broker's set (brokers with none left out) on each change."""


@runtime_checkable
class LogDirEventQueue(Protocol):
    """Kafka's log dir event notifications themselves (ZooKeeper's /log_dir_event_notification,
    one sequential child per failure), which a Kafka controller deletes once it has handled them
    (KafkaController.processLogDirEventNotification). Only a store that writes them has this role:
    the in-memory store keeps LogDirStore's sets alone, which is all a kafkapy controller reads."""

    def watch_log_dir_events(self, callback: Callable[[tuple[str, ...]], None]) -> Watch:
        """Called with the names of the notifications now queued (sorted) on each change."""
    def delete_log_dir_events(self, names: Collection[str]) -> None:
        """Remove these notifications (those already gone are no error)."""


ROLES: tuple[type, ...] = (StoreLifecycle, BrokerStore, ConfigStore, FeatureStore, TopicStore,
                           CoordinatorStore, ProducerIdStore, PartitionStateStore, AclStore, LogDirStore)


class MetadataStore(StoreLifecycle, BrokerStore, ConfigStore, FeatureStore, TopicStore, CoordinatorStore,
                    ProducerIdStore, PartitionStateStore, AclStore, LogDirStore, Protocol):
    """Every role: what a store implements and what code that needs the whole store asks for."""
