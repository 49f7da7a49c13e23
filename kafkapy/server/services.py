"""What a module is given: the broker's services, narrow and typed.

A module never sees the broker runtime (kafkapy.server.broker): it is handed a
``BrokerServices`` at construction, one per module, and reaches the broker only
through it. What it may read (store, config, cluster view, clock, feature
levels) are plain attributes; what it may change (the finalized features, the
accept gate, an orderly shutdown) are methods, so every write to broker state
has one place to be found. Other modules are reached by what they declare they
``provide`` (``provider``), never by scanning for a class.

The store is typed as the whole MetadataStore for now; it narrows to the roles
a module needs once the store is split by role.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.base import PartitionLog
from kafkapy.log.producer_state import ProducerStateManager
from kafkapy.server.wakeup import Wakeup
from kafkapy.store.base import BrokerRegistration, MetadataStore, PartitionState, TopicInfo
from kafkapy.store.persistent import PersistentMap

if TYPE_CHECKING:
    from kafkapy.server.auth import Authorizer
    from kafkapy.server.config import BrokerConfig, ConfigKey
    from kafkapy.server.connection import ConnectionInfo, KafkaConnection
    from kafkapy.server.interceptors import Interceptor

__all__ = [
    "AUTO_TOPIC_CREATION",
    "FINALIZED_FEATURES",
    "INITIAL_LEADER_EPOCH",
    "NO_LEADER",
    "PARTITION_LOGS",
    "TOPIC_CONFIGS_CAPABILITY",
    "TOPIC_CREATION",
    "AcceptGate",
    "AutoTopicCreation",
    "BrokerServices",
    "BrokerSettings",
    "ClusterView",
    "Election",
    "EpochOwed",
    "InternalTopicCreation",
    "InternalTopicShape",
    "PartitionLogs",
    "PartitionLogsProvider",
    "partition_isr",
    "partition_leader",
    "partition_leadership",
]

T = TypeVar("T")

# The capability of a module that finalizes features (KIP-584): while one is enabled, nothing is
# finalized (so gated APIs stay closed) until it says otherwise with set_finalized_features.
FINALIZED_FEATURES = "finalized-features"


# An internal topic's partitions, replication factor and topic configs, from its module's settings.
InternalTopicShape = tuple[int, int, Mapping[str, str]]

# The capability of a module that creates topics on demand (Kafka's auto.create.topics.enable):
# the core's Metadata handler asks it about requested topics that do not exist.
AUTO_TOPIC_CREATION = "auto-topic-creation"
# The topics module's create path with the broker's defaults (create_topics_with_defaults).
TOPIC_CREATION = "topic-creation"
# Per-topic LogConfig and its changes (log_config(topic), watch_log_configs(callback)): the configs module.
TOPIC_CONFIGS_CAPABILITY = "topic-configs"
# The data plane's partition logs (``partition_logs()``), for a module that keeps its state in a topic
# of its own (the group coordinator in __consumer_offsets), written and read as Produce and Fetch do.
PARTITION_LOGS = "partition-logs"


@runtime_checkable
class PartitionLogs(Protocol):
    def leader_log(self, topic: str, partition: int) -> PartitionLog:
        """The log of a partition this broker leads; KafkaApiError UNKNOWN_TOPIC_OR_PARTITION or
        NOT_LEADER_OR_FOLLOWER otherwise, as Produce answers."""
    def leader_log_for_acks_all(self, topic: str, partition: int) -> PartitionLog:
        """``leader_log`` for a write that waits on every in-sync replica (a coordinator's): also
        NOT_ENOUGH_REPLICAS while fewer are in sync than the topic's min.insync.replicas."""
    def leader_epoch(self, topic: str, partition: int) -> int: ...
    def appended(self, topic: str, partition: int) -> None:
        """Say that the partition's high watermark moved (wakes long-polling Fetches)."""
    def producer_state(self, topic: str, partition: int) -> ProducerStateManager:
        """The producer table of a partition this broker leads: a module appending a producer's
        batch itself (TxnOffsetCommit's) checks it here first, as Produce does."""
    def needs_transaction_verification(self, topic: str, partition: int, producer_id: int) -> bool:
        """Whether a transactional write of the producer must first be checked with its transaction
        coordinator (KIP-890 part 1: the switch on, and no transaction of the producer open in the
        partition yet), as Produce's are."""
    def storage_failed(self, topic: str, partition: int, exc: OSError) -> KafkaApiError:
        """An OSError met on the partition's log: its log dir goes offline (KIP-112) as for a
        Produce; answers the KAFKA_STORAGE_ERROR to map to the caller's own error."""
    def is_offline(self, topic: str, partition: int) -> bool:
        """Whether the partition's log is in a log dir that failed (a coordinator resigns it)."""


@runtime_checkable
class PartitionLogsProvider(Protocol):
    def partition_logs(self) -> PartitionLogs: ...


@runtime_checkable
class InternalTopicCreation(Protocol):
    """TOPIC_CREATION's path for a module's internal topic (__consumer_offsets,
    __transaction_state): its own size and configs, checked as CreateTopics checks them."""

    async def create_internal_topic(self, name: str, num_partitions: int, replication_factor: int,
                                    configs: Mapping[str, str]) -> ErrorCode:
        """NONE, TOPIC_ALREADY_EXISTS, or the code CreateTopics would answer."""
        ...


@runtime_checkable
class BrokerSettings(Protocol):
    def broker_settings(self) -> Mapping[str, Any]:
        """The broker's settings as in force now: the static ones under the dynamic cluster
        defaults under this broker's own dynamic values (Kafka's precedence). The configs module
        (TOPIC_CONFIGS_CAPABILITY) provides it; without one the static settings are all there is."""
        ...


@runtime_checkable
class AutoTopicCreation(Protocol):
    async def auto_create_topics(self, names: Collection[str]) -> dict[str, ErrorCode]:
        """Start creating the missing topics ``names``; per name the error Metadata answers with
        (LEADER_NOT_AVAILABLE while it is being created, or why it cannot be). Names left out
        (auto-creation off) stay UNKNOWN_TOPIC_OR_PARTITION."""
        ...


NO_LEADER = -1  # Metadata's leader_id when no replica is live


def partition_leader(replicas: Sequence[int], live: Collection[int]) -> int:
    """A new partition's first leader: its first live replica (Kafka's controller's election for a
    new partition), NO_LEADER when none is. After that the leader is the stored one
    (``partition_leadership``): the controller moves it only by the rules of
    kafkapy.server.leadership."""
    for replica in replicas:
        if replica in live:
            return replica
    return NO_LEADER


INITIAL_LEADER_EPOCH = 0  # a partition's first leader, before any move (Kafka's controller starts at 0)


class Election(enum.Enum):
    """An election asked of the controller (ElectLeaders, a leader move, the auto rebalance), on
    top of the ones it holds by itself (kafkapy.server.leadership)."""

    PREFERRED = "preferred"  # the first replica, if it is live and in the ISR
    UNCLEAN = "unclean"  # a leaderless partition: the first live replica, in the ISR or not


@attrs.frozen
class EpochOwed:
    """What a completed partition reassignment leaves the controller to write: once its view shows
    ``replicas`` (not yet while it still shows ``previous``), a state in ``leader_epoch`` or later."""

    previous: tuple[int, ...]
    replicas: tuple[int, ...]
    leader_epoch: int


def partition_leadership(replicas: Sequence[int], live: Collection[int],
                         state: PartitionState | None) -> tuple[int, int]:
    """(leader, leader epoch) as Metadata answers and the data plane enforces: the one answer, so a
    client sent to a broker by Metadata is never refused by it for leadership.

    The leader is the one the controller wrote in the partition's state (kafkapy.server.leadership)
    with that state's epoch. Before any state exists the partition is new: its first live replica
    leads in epoch 0, which is what the controller's first write says. A stored leader that is not
    live (a broker went, and the controller has not written the election yet) or no longer a
    replica (a reassignment took it away) leads nothing: serving then would pair another broker
    with the old leader's epoch, which fences nothing."""
    if state is None:
        return partition_leader(replicas, live), INITIAL_LEADER_EPOCH
    if state.leader in live and state.leader in replicas:
        return state.leader, state.leader_epoch
    return NO_LEADER, state.leader_epoch


def partition_isr(replicas: Sequence[int], live: Collection[int], state: PartitionState | None) -> list[int]:
    """The in-sync replicas Metadata lists and an acks=all Produce counts: the controller's ISR, or,
    before its first state, every live replica (a new partition's replicas are all caught up)."""
    return [r for r in replicas if r in live] if state is None else list(state.isr)


class ClusterView:
    """What handlers read about the cluster, kept current by store watches so that no request
    waits on ZooKeeper. Watch callbacks replace whole values (atomic in Python), so readers on
    the loop thread never see a half-updated list.

    Each partition's (leader, leader epoch) is worked out once and kept until the brokers, the
    topics or the partition states change: Produce and Fetch ask for it on every partition. A
    setter stores its value before it drops the cache, and a reader fills the cache it took
    before reading, so an answer worked out from old values never outlives the change.

    ``on_change`` callbacks run after every such change, on the thread that made it (a store
    watch's); a waiting Fetch uses one to answer at once when a partition it waits on moves or
    goes, as Kafka's DelayedFetch completes early."""

    def __init__(self) -> None:
        self.cluster_id = ""
        self.controller_id = -1
        self._brokers: list[BrokerRegistration] = []
        self._live: frozenset[int] = frozenset()
        self._topics: Mapping[str, TopicInfo] = PersistentMap()
        self._partition_states: Mapping[tuple[str, int], PartitionState] = PersistentMap()
        self._offline: Mapping[int, frozenset[tuple[str, int]]] = {}  # broker -> its offline replicas
        self._offline_on: dict[tuple[str, int], frozenset[int]] = {}  # (topic, partition) -> brokers
        self._leadership: dict[tuple[str, int], tuple[int, int]] = {}
        # topic id -> name, for the topics snapshot it was built from (``topic_name``)
        self._names_by_id: tuple[Mapping[str, TopicInfo], dict[uuid.UUID, str]] | None = None
        self._change_callbacks: dict[object, Callable[[], None]] = {}

    def on_change(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (on the changing thread) after each change of the brokers, topics or
        partition states, until the returned remover is called."""
        token = object()
        self._change_callbacks[token] = callback

        def remove() -> None:
            self._change_callbacks.pop(token, None)
        return remove

    def wake_on_change(self, loop: asyncio.AbstractEventLoop, event: Wakeup) -> Callable[[], None]:
        """Set ``event`` on ``loop`` after each change (``on_change`` from any thread), until the
        returned remover is called: how a request waiting on its loop hears that the cluster moved."""
        def changed() -> None:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the loop closed under a broker shutting down: nobody waits
                pass
        return self.on_change(changed)

    def _changed(self) -> None:
        self._leadership = {}
        if self._change_callbacks:
            for callback in list(self._change_callbacks.values()):  # one C-level copy: thread-safe
                callback()

    @property
    def brokers(self) -> list[BrokerRegistration]:
        return self._brokers

    @brokers.setter
    def brokers(self, brokers: list[BrokerRegistration]) -> None:
        self._live = frozenset(b.broker_id for b in brokers)
        self._brokers = brokers
        self._changed()

    @property
    def topics(self) -> Mapping[str, TopicInfo]:
        """name -> topic, from the store's topics watch (a snapshot: kafkapy.store.base)."""
        return self._topics

    @topics.setter
    def topics(self, topics: Mapping[str, TopicInfo]) -> None:
        self._topics = topics
        self._changed()

    @property
    def partition_states(self) -> Mapping[tuple[str, int], PartitionState]:
        """(topic, partition) -> leader, leader epoch and ISR, from the store's partition-state watch."""
        return self._partition_states

    @partition_states.setter
    def partition_states(self, states: Mapping[tuple[str, int], PartitionState]) -> None:
        self._partition_states = states
        self._changed()

    @property
    def offline_replicas(self) -> Mapping[int, frozenset[tuple[str, int]]]:
        """broker id -> the replicas it holds in a failed log dir (KIP-112), from the store's watch."""
        return self._offline

    @offline_replicas.setter
    def offline_replicas(self, offline: Mapping[int, frozenset[tuple[str, int]]]) -> None:
        index: dict[tuple[str, int], set[int]] = {}
        for broker, keys in offline.items():
            for key in keys:
                index.setdefault(key, set()).add(broker)
        self._offline_on = {key: frozenset(brokers) for key, brokers in index.items()}
        self._offline = offline
        self._changed()

    def live_broker_ids(self) -> frozenset[int]:
        return self._live

    def live_replicas_of(self, topic: str, partition: int) -> frozenset[int]:
        """The live brokers that can serve ``topic``-``partition``: a broker holding it in a failed
        log dir counts as down for it (as Kafka's controller treats an offline replica)."""
        offline = self._offline_on.get((topic, partition)) if self._offline_on else None
        return self._live if not offline else self._live - offline

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with ``topic_id`` (Fetch, Produce and the share APIs name topics
        by id): an index built once per topics snapshot, not a walk over every topic per request.
        It is kept with the snapshot it came from, so a change on another thread never leaves it
        stale."""
        topics = self._topics
        cached = self._names_by_id
        if cached is None or cached[0] is not topics:
            cached = self._names_by_id = (topics, {info.topic_id: name for name, info in topics.items()})
        return cached[1].get(topic_id)

    def in_sync_replicas(self, topic: str, partition: int) -> list[int]:
        """``partition_isr`` of one partition by this view; none if it has no such partition."""
        info = self._topics.get(topic)
        replicas = info.partitions.get(partition) if info is not None else None
        if replicas is None:
            return []
        return partition_isr(replicas, self.live_replicas_of(topic, partition),
                             self._partition_states.get((topic, partition)))

    def leadership(self, topic: str, partition: int) -> tuple[int, int] | None:
        """``partition_leadership`` of one partition by this view; None if it has no such partition."""
        cache = self._leadership
        key = (topic, partition)
        found = cache.get(key)
        if found is None:
            info = self._topics.get(topic)
            replicas = info.partitions.get(partition) if info is not None else None
            if replicas is None:
                return None
            found = cache[key] = partition_leadership(replicas, self.live_replicas_of(topic, partition),
                                                      self._partition_states.get(key))
        return found


class AcceptGate(Protocol):
    """What the accept loop consults (a module installs one with ``install_accept_gate``).

    For every accepted socket: ``acceptor_wait`` runs in the listener's accept loop, so while it
    sleeps that listener accepts nothing (and only that listener); then ``admit`` runs in a task of
    the connection's own, so a delay there holds back no one else. False closes the socket before
    it is served. Once ``acceptor_wait`` has returned, ``released`` is called exactly once, when
    the socket is closed, whichever way it went. Both coroutines are stepped in place
    (kafkapy.server.eager): until one suspends there is no current task."""

    async def acceptor_wait(self, listener: str) -> None: ...
    async def admit(self, listener: str, address: str) -> bool: ...
    def released(self, listener: str, address: str, admitted: bool) -> None: ...


class BrokerServices(Protocol):
    """The broker as one module sees it. Read-only properties; changes go through methods."""

    @property
    def store(self) -> MetadataStore: ...
    @property
    def config(self) -> BrokerConfig:
        """Every setting, every enabled module's keys included (merged before any module is built)."""
    @property
    def cluster(self) -> ClusterView: ...
    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...
    @property
    def clock(self) -> Callable[[], float]:
        """The loop's clock (seconds, monotonic)."""
    @property
    def wall_clock(self) -> Callable[[], float]:
        """Epoch seconds that move with ``clock`` (``time.time`` unless the clock is virtual): for
        timestamps written down (records, commits), never for deadlines."""
    @property
    def log(self) -> logging.Logger:
        """A logger of this module's own (``kafkapy.modules.<name>``)."""
    @property
    def authorizer(self) -> Authorizer: ...
    @property
    def broker_id(self) -> int:
        """-1 until the broker has its id (start())."""
    @property
    def listener_names(self) -> list[str]:
        """The bound listeners' names (empty before start())."""
    @property
    def inter_broker_listener(self) -> str: ...
    @property
    def supported_features(self) -> Mapping[str, tuple[int, int]]:
        """KIP-584: the union of the modules' features, after supported.features.max."""
    @property
    def finalized_features(self) -> Mapping[str, int] | None:
        """None while no module finalizes features (then nothing is gated)."""
    @property
    def finalized_epoch(self) -> int: ...

    def feature_level(self, feature: str) -> int:
        """The finalized level of a feature (KIP-584), which gates APIs and behaviors."""
    def default_feature_levels(self) -> Mapping[str, int]:
        """Every module's ``default_feature_levels``, merged."""
    def set_finalized_features(self, epoch: int, features: Mapping[str, int]) -> None:
        """Take a finalized state: feature gates and the ApiVersions answer follow it."""
    def served_versions(self) -> Mapping[int, tuple[int, int]]:
        """What ApiVersions advertises: API key -> (min, max) served now."""
    def owe_leader_epochs(self, owed: Mapping[tuple[str, int], EpochOwed]) -> None:
        """Partition reassignments completed: the controller's leadership (kafkapy.server.leadership,
        the one writer of partition states) writes each partition's next leader epoch, as Kafka's
        controller does then. Nothing off the controller."""
    def elect_leaders(self, kind: Election, partitions: Collection[tuple[str, int]]) -> None:
        """Ask the controller's leadership for ``kind`` elections of ``partitions`` (ElectLeaders):
        each is written if it still applies when the controller's next pass looks. Nothing off
        the controller."""
    def provider(self, capability: str, kind: type[T]) -> T | None:
        """The module that provides ``capability`` (declared in its ``provides``), or None when no
        enabled module does; a ConfigError when it is not a ``kind``."""
    def register_internal_topic(self, name: str, shape: Callable[[], InternalTopicShape]) -> None:
        """A coordinator's state topic and how its module makes it, so that creating that name any
        other way (Metadata's auto-creation) makes it the same, as Kafka's broker does."""
    def internal_topic_shape(self, name: str) -> InternalTopicShape | None:
        """The registered shape of an internal topic, read now; None for any other name."""
    def connections(self) -> Collection[KafkaConnection]:
        """The connections being served now."""
    def connection_for(self, info: ConnectionInfo) -> KafkaConnection | None:
        """The live connection behind a ConnectionInfo (for modules that send requests on it)."""
    def module_config_keys(self) -> tuple[ConfigKey, ...]:
        """The config keys the enabled modules declare (the core's are CORE_KEYS)."""
    def install_accept_gate(self, gate: AcceptGate) -> None:
        """Put ``gate`` in front of every accepted socket."""
    def remove_accept_gate(self, gate: AcceptGate) -> None:
        """Take ``gate`` away again, if it is the one installed."""
    def install_interceptor(self, interceptor: Interceptor) -> None:
        """Add ``interceptor`` to the end (innermost) of the chain around every handler."""
    def remove_interceptor(self, interceptor: Interceptor) -> None: ...
    def fail(self, reason: str) -> None:
        """Shut the broker down in an orderly way because it cannot go on."""
    @property
    def stopping(self) -> bool:
        """True from the moment the broker begins to stop."""
    def on_stop(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on the loop when the broker begins to stop (at once if it has), until
        the returned remover is called: how a request parked waiting (a long poll, a join) hears
        to answer now, before the connections close."""
