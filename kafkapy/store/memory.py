"""The embedded in-memory metadata store. Several Brokers in one process that
share one MemoryStore form a cluster; it is thread-safe because each embedded
broker runs its own event loop in its own thread.

A MemoryStore handle plays the part of one ZooKeeper session: what it
registers (brokers, the controller and coordinator it holds) is "ephemeral"
and goes away when the handle is closed. ``peer()`` opens another handle on
the same cluster state, as a second broker's ZooKeeperStore would.

Every lasting change (kafkapy.store.changes) is made one way: built as a value, handed to the
cluster's sink if it has one (the durable store's journal, kafkapy.store.durable, which writes it
to disk before anything else happens), then applied by ``apply_change``, the function a replay
runs too. All of it under the lock, so the journal's order is the order of the changes.
"""

from __future__ import annotations

import collections
import logging
import threading
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from kafkapy.store.base import (
    ENTITY_TYPES,
    NO_ACL_VERSION,
    NO_PARTITION_EPOCH,
    AclResource,
    AclVersionConflict,
    BrokerRegistration,
    FeatureEpochConflict,
    OfflineReplicas,
    PartitionState,
    PartitionStateConflict,
    PartitionStates,
    ProducerIdBlock,
    RegisteredEndpoint,
    StoredAcl,
    StoreError,
    TopicAlreadyExists,
    TopicInfo,
    UnknownTopic,
    check_acl_resource,
    check_topic_name,
    entity_type_of,
    new_cluster_id,
    next_producer_id_block,
)
from kafkapy.store.base import Watch as Watch
from kafkapy.store.changes import (
    AclsWritten,
    BrokerSequence,
    Change,
    ConfigWritten,
    FeaturesWritten,
    MembersWritten,
    OffsetsCommitted,
    OwnersWritten,
    PartitionStateWritten,
    ProducerIdsAllocated,
    TopicDeleted,
    TopicWritten,
)
from kafkapy.store.persistent import PersistentMap

__all__ = ["BrokerRegistration", "ChangeSink", "MemoryStore", "RegisteredEndpoint", "StoreError",
           "apply_change", "new_cluster_id"]

log = logging.getLogger("kafkapy.store.memory")


class ChangeSink(Protocol):
    """Where a durable store writes each lasting change before it is made (the lock held)."""

    def write(self, change: Change) -> None:
        """On disk when this returns; StoreError (and nothing changed) if it cannot be."""

    def close(self) -> None:
        """The last handle on the cluster closed: release the files."""


class _MemoryWatch:
    def __init__(self, cluster: _Cluster, owner: MemoryStore, kind: str,
                 callback: Callable[..., None]) -> None:
        self._cluster = cluster
        self.owner = owner
        self.kind = kind
        self.callback = callback
        self.active = True

    def cancel(self) -> None:
        self.active = False
        with self._cluster.lock:
            if self in self._cluster.watches:
                self._cluster.watches.remove(self)


class _Cluster:
    """The state every handle of one in-memory cluster shares (the "ZooKeeper tree")."""

    def __init__(self, cluster_id: str) -> None:
        self.lock = threading.Lock()
        self.cluster_id = cluster_id
        self.brokers: dict[int, BrokerRegistration] = {}
        self.broker_owner: dict[int, MemoryStore] = {}
        self.next_generated_id: int | None = None
        self.controller: tuple[int, MemoryStore] | None = None
        self.coordinator: tuple[int, MemoryStore] | None = None
        self.configs: dict[str, dict[str, str]] = {}
        self.change_seq = 0
        self.features: dict[str, int] = {}
        self.feature_epoch = -1
        # Persistent maps: a write makes a new one that shares all but one path with the last, which
        # its watches get as it is (no copy); kafkapy.store.persistent.
        self.topics: PersistentMap[str, TopicInfo] = PersistentMap()
        self.owners: dict[str, dict[tuple[str, int], str]] = {}
        self.offsets: dict[str, dict[tuple[str, int], int]] = {}
        self.members: dict[str, dict[str, int]] = {}
        self.producer_id_block: ProducerIdBlock | None = None
        self.partition_states: PersistentMap[tuple[str, int], PartitionState] = PersistentMap()
        self.acls: dict[AclResource, tuple[frozenset[StoredAcl], int]] = {}  # -> (acls, version)
        self.offline_replicas: dict[int, frozenset[tuple[str, int]]] = {}  # broker id -> its set
        self.handles: list[MemoryStore] = []
        self.watches: list[_MemoryWatch] = []
        self.pending: collections.deque[tuple[_MemoryWatch, tuple[Any, ...]]] = collections.deque()
        self.delivering = False  # a thread is running watch callbacks (MemoryStore._drain)
        self.sink: ChangeSink | None = None  # the durable store's journal (kafkapy.store.durable)
        self.lasting = False  # a durable store's: the state outlives the process

    def commit(self, change: Change) -> None:
        """Make a lasting change (the lock held): to the sink first, then to the state."""
        if self.sink is not None:
            self.sink.write(change)
        apply_change(self, change)


class MemoryStore:
    def __init__(self, cluster_id: str | None = None, *, _cluster: _Cluster | None = None) -> None:
        self._cluster = _cluster or _Cluster(cluster_id or new_cluster_id())
        self._lock = self._cluster.lock
        self._closed = False
        # Like a ZooKeeper session's: candidates re-run for controller/coordinator when the holder leaves.
        self._controller_candidates: set[int] = set()
        self._coordinator_candidates: set[int] = set()
        with self._lock:
            self._cluster.handles.append(self)

    def peer(self) -> MemoryStore:
        """Another handle (another "session") on the same cluster state."""
        return MemoryStore(_cluster=self._cluster)

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self._check_open()

    def keeps_metadata(self) -> bool:
        return self._cluster.lasting

    def close(self) -> None:
        """End this handle: its brokers, controller and coordinator go, as a session's ephemerals do."""
        if self._closed:
            return
        with self._lock:
            self._closed = True
            c = self._cluster
            self._controller_candidates.clear()
            self._coordinator_candidates.clear()
            mine = [bid for bid, owner in c.broker_owner.items() if owner is self]
            for bid in mine:
                del c.brokers[bid]
                del c.broker_owner[bid]
            if mine:
                self._notify("brokers", self._broker_list())
            self._release_elections(lambda holder: holder[1] is self)
            c.handles.remove(self)
            for watch in c.watches:
                if watch.owner is self:
                    watch.active = False
            c.watches = [w for w in c.watches if w.active]
            if not c.handles and c.sink is not None:
                c.sink.close()
        self._drain()

    # --- cluster and brokers -----------------------------------------------------------------
    def cluster_id(self) -> str:
        return self._cluster.cluster_id

    def allocate_broker_id(self, reserved_max: int) -> int:
        """Kafka's broker.id=-1: generated ids start above reserved.broker.max.id."""
        with self._lock:
            self._check_open()
            c = self._cluster
            candidate = max(c.next_generated_id or 0, reserved_max + 1)
            while candidate in c.brokers:
                candidate += 1
            c.commit(BrokerSequence(candidate + 1))
            return candidate

    def register_broker(self, registration: BrokerRegistration) -> None:
        """Also runs the broker for controller, as a Kafka broker does when it starts."""
        with self._lock:
            self._check_open()
            c = self._cluster
            if registration.broker_id in c.brokers:
                raise StoreError(f"broker id {registration.broker_id} is already registered in this cluster")
            c.brokers[registration.broker_id] = registration
            c.broker_owner[registration.broker_id] = self
            if c.offline_replicas.pop(registration.broker_id, None) is not None:  # its dirs open again
                self._notify("offline_replicas", dict(c.offline_replicas))
            self._notify("brokers", self._broker_list())
            self._elect_controller_locked(registration.broker_id)
        self._drain()

    def unregister_broker(self, broker_id: int) -> None:
        """The broker leaves: its registration goes, and so does any controller/coordinator it holds."""
        with self._lock:
            c = self._cluster
            if c.broker_owner.get(broker_id) is self:
                del c.brokers[broker_id]
                del c.broker_owner[broker_id]
                self._notify("brokers", self._broker_list())
            self._controller_candidates.discard(broker_id)
            self._coordinator_candidates.discard(broker_id)
            self._release_elections(lambda holder: holder == (broker_id, self))
        self._drain()

    def brokers(self) -> list[BrokerRegistration]:
        with self._lock:
            self._check_open()
            return self._broker_list()

    def watch_brokers(self, callback: Callable[[list[BrokerRegistration]], None]) -> Watch:
        return self._watch("brokers", callback, lambda: (self._broker_list(),))

    def _broker_list(self) -> list[BrokerRegistration]:
        return sorted(self._cluster.brokers.values(), key=lambda b: b.broker_id)

    # --- offline replicas (KIP-112) -----------------------------------------------------------
    def set_offline_replicas(self, broker_id: int, replicas: Collection[tuple[str, int]]) -> None:
        with self._lock:
            self._check_open()
            c = self._cluster
            found = frozenset(replicas)
            if c.offline_replicas.get(broker_id, frozenset()) != found:
                if found:
                    c.offline_replicas[broker_id] = found
                else:
                    c.offline_replicas.pop(broker_id, None)
                self._notify("offline_replicas", dict(c.offline_replicas))
        self._drain()

    def offline_replicas(self) -> dict[int, frozenset[tuple[str, int]]]:
        with self._lock:
            self._check_open()
            return dict(self._cluster.offline_replicas)

    def watch_offline_replicas(self, callback: Callable[[OfflineReplicas], None]) -> Watch:
        return self._watch("offline_replicas", callback, lambda: (dict(self._cluster.offline_replicas),))

    # --- controller --------------------------------------------------------------------------
    def elect_controller(self, broker_id: int) -> int:
        with self._lock:
            self._check_open()
            self._elect_controller_locked(broker_id)
            winner = self._holder_id(self._cluster.controller)
        self._drain()
        return winner

    def controller_id(self) -> int:
        with self._lock:
            return self._holder_id(self._cluster.controller)

    def watch_controller(self, callback: Callable[[int], None]) -> Watch:
        return self._watch("controller", callback, lambda: (self._holder_id(self._cluster.controller),))

    def _elect_controller_locked(self, broker_id: int) -> None:
        self._controller_candidates.add(broker_id)
        if self._cluster.controller is not None:
            return
        self._cluster.controller = (broker_id, self)
        self._notify("controller", broker_id)

    # --- client quota configs ----------------------------------------------------------------
    def entity_config(self, entity_path: str) -> dict[str, str]:
        entity_type_of(entity_path)
        with self._lock:
            self._check_open()
            return dict(self._cluster.configs.get(entity_path, {}))

    def entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        if entity_type not in ENTITY_TYPES:
            raise StoreError(f"unknown entity type {entity_type!r} (known: {', '.join(ENTITY_TYPES)})")
        with self._lock:
            self._check_open()
            return {path: dict(config) for path, config in sorted(self._cluster.configs.items())
                    if entity_type_of(path) == entity_type}

    def set_entity_config(self, entity_path: str, config: Mapping[str, str]) -> None:
        entity_type_of(entity_path)
        with self._lock:
            self._check_open()
            c = self._cluster
            c.commit(ConfigWritten(entity_path, {str(k): str(v) for k, v in config.items()}))
            c.change_seq += 1
            self._notify("configs", entity_path)
        self._drain()

    def watch_entity_configs(self, callback: Callable[[str], None]) -> Watch:
        """Called for each change made after the watch was set (no initial call)."""
        return self._watch("configs", callback, None)

    # --- finalized features ------------------------------------------------------------------
    def finalized_features(self) -> tuple[int, dict[str, int]]:
        with self._lock:
            self._check_open()
            return self._cluster.feature_epoch, dict(self._cluster.features)

    def set_finalized_features(self, features: Mapping[str, int], expected_epoch: int | None = None) -> int:
        with self._lock:
            self._check_open()
            c = self._cluster
            if expected_epoch is not None and expected_epoch != c.feature_epoch:
                raise FeatureEpochConflict(
                    f"finalized features are at epoch {c.feature_epoch}, not {expected_epoch}")
            c.commit(FeaturesWritten(c.feature_epoch + 1, {str(k): int(v) for k, v in features.items()}))
            epoch = c.feature_epoch
            self._notify("features", epoch, dict(c.features))
        self._drain()
        return epoch

    def watch_features(self, callback: Callable[[int, dict[str, int]], None]) -> Watch:
        return self._watch("features", callback,
                           lambda: (self._cluster.feature_epoch, dict(self._cluster.features)))

    # --- topics ------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: Mapping[int, tuple[int, ...]],
                     topic_id: uuid.UUID | None = None, config: Mapping[str, str] | None = None) -> TopicInfo:
        check_topic_name(name)
        parts = check_partitions(name, partitions, 0)
        with self._lock:
            self._check_open()
            c = self._cluster
            if name in c.topics:
                raise TopicAlreadyExists(f"topic {name!r} already exists")
            info = TopicInfo(name, topic_id or uuid.uuid4(), parts)
            c.commit(TopicWritten(info, {str(k): str(v) for k, v in (config or {}).items()}))
            self._notify("topics", c.topics)
        self._drain()
        return info

    def delete_topic(self, name: str) -> None:
        with self._lock:
            self._check_open()
            c = self._cluster
            info = c.topics.get(name)
            if info is None:
                raise UnknownTopic(f"topic {name!r} does not exist")
            states_before = c.partition_states
            c.commit(TopicDeleted(name))
            self._notify("topics", c.topics)
            if c.partition_states is not states_before:
                self._notify("partition_states", c.partition_states)
        self._drain()

    def add_partitions(self, name: str, partitions: Mapping[int, tuple[int, ...]]) -> TopicInfo:
        def added(old: TopicInfo) -> Mapping[int, tuple[int, ...]]:
            return check_partitions(name, partitions, len(old.partitions))
        return self._change_partitions(name, added)

    def reassign_partitions(self, name: str, partitions: Mapping[int, tuple[int, ...]]) -> TopicInfo:
        return self._change_partitions(name, lambda old: check_reassignment(old, partitions))

    def _change_partitions(self, name: str,
                           change: Callable[[TopicInfo], Mapping[int, tuple[int, ...]]]) -> TopicInfo:
        with self._lock:
            self._check_open()
            c = self._cluster
            old = c.topics.get(name)
            if old is None:
                raise UnknownTopic(f"topic {name!r} does not exist")
            info = TopicInfo(name, old.topic_id, {**old.partitions, **change(old)})
            c.commit(TopicWritten(info, None))
            self._notify("topics", c.topics)
        self._drain()
        return info

    def topics(self) -> dict[str, TopicInfo]:
        with self._lock:
            self._check_open()
            return dict(sorted(self._cluster.topics.iter_items()))  # by name, as ZooKeeperStore lists them

    def watch_topics(self, callback: Callable[[Mapping[str, TopicInfo]], None]) -> Watch:
        return self._watch("topics", callback, lambda: (self._cluster.topics,))

    # --- consumer coordinator (seed 001) -----------------------------------------------------
    def elect_coordinator(self, broker_id: int) -> int:
        with self._lock:
            self._check_open()
            c = self._cluster
            self._coordinator_candidates.add(broker_id)
            if c.coordinator is None:
                c.coordinator = (broker_id, self)
                self._notify("coordinator", broker_id)
            winner = self._holder_id(c.coordinator)
        self._drain()
        return winner

    def coordinator_id(self) -> int:
        with self._lock:
            return self._holder_id(self._cluster.coordinator)

    def watch_coordinator(self, callback: Callable[[int], None]) -> Watch:
        return self._watch("coordinator", callback, lambda: (self._holder_id(self._cluster.coordinator),))

    def groups(self) -> list[str]:
        with self._lock:
            self._check_open()
            return sorted(set(self._cluster.owners) | set(self._cluster.offsets) | set(self._cluster.members))

    def owners(self, group: str) -> dict[tuple[str, int], str]:
        with self._lock:
            self._check_open()
            return dict(self._cluster.owners.get(group, {}))

    def set_owners(self, group: str, owners: Mapping[tuple[str, int], str]) -> None:
        with self._lock:
            self._check_open()
            self._cluster.commit(OwnersWritten(group, {(str(t), int(p)): str(o)
                                                       for (t, p), o in owners.items()}))

    def members(self, group: str) -> dict[str, int]:
        with self._lock:
            self._check_open()
            return dict(self._cluster.members.get(group, {}))

    def set_members(self, group: str, members: Mapping[str, int]) -> None:
        with self._lock:
            self._check_open()
            self._cluster.commit(MembersWritten(group, {str(c): int(t) for c, t in members.items()}))

    def offsets(self, group: str) -> dict[tuple[str, int], int]:
        with self._lock:
            self._check_open()
            return dict(self._cluster.offsets.get(group, {}))

    def commit_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        with self._lock:
            self._check_open()
            self._cluster.commit(OffsetsCommitted(group, {(str(t), int(p)): int(o)
                                                          for (t, p), o in offsets.items()}))

    # --- producer ids ------------------------------------------------------------------------
    def allocate_producer_id_block(self, broker_id: int) -> ProducerIdBlock:
        with self._lock:
            self._check_open()
            c = self._cluster
            block = next_producer_id_block(c.producer_id_block, broker_id)
            c.commit(ProducerIdsAllocated(block))
            return block

    # --- partition states --------------------------------------------------------------------
    def partition_states(self) -> dict[tuple[str, int], PartitionState]:
        with self._lock:
            self._check_open()
            return dict(sorted(self._cluster.partition_states.iter_items()))  # as ZooKeeperStore's

    def set_partition_state(self, topic: str, partition: int, state: PartitionState,
                            expected_partition_epoch: int) -> PartitionState:
        with self._lock:
            self._check_open()
            c = self._cluster
            info = c.topics.get(topic)
            if info is None or partition not in info.partitions:
                raise UnknownTopic(f"topic {topic!r} has no partition {partition}")
            current = c.partition_states.get((topic, partition))
            found = NO_PARTITION_EPOCH if current is None else current.partition_epoch
            if found != expected_partition_epoch:
                raise PartitionStateConflict(f"the state of {topic}-{partition} is at partition epoch "
                                             f"{found}, not {expected_partition_epoch}")
            # As a znode's version: 0 when created, one more on every write.
            written = attrs.evolve(state, isr=tuple(state.isr), partition_epoch=found + 1)
            c.commit(PartitionStateWritten(topic, partition, written))
            self._notify("partition_states", c.partition_states)
        self._drain()
        return written

    def watch_partition_states(self, callback: Callable[[PartitionStates], None]) -> Watch:
        return self._watch("partition_states", callback, lambda: (self._cluster.partition_states,))

    # --- ACLs --------------------------------------------------------------------------------
    def acls(self) -> dict[AclResource, frozenset[StoredAcl]]:
        with self._lock:
            self._check_open()
            return {resource: acls for resource, (acls, _) in self._cluster.acls.items()}

    def resource_acls(self, resource: AclResource) -> tuple[frozenset[StoredAcl], int]:
        with self._lock:
            self._check_open()
            return self._cluster.acls.get(resource, (frozenset(), NO_ACL_VERSION))

    def set_resource_acls(self, resource: AclResource, acls: frozenset[StoredAcl],
                          expected_version: int) -> int:
        check_acl_resource(resource)
        with self._lock:
            self._check_open()
            c = self._cluster
            found = c.acls.get(resource, (frozenset(), NO_ACL_VERSION))[1]
            if found != expected_version:
                raise AclVersionConflict(f"the ACLs of {resource} are at version {found}, "
                                         f"not {expected_version}")
            # As a znode's version: 0 when created, one more on every write, gone when removed.
            version = found + 1 if acls else NO_ACL_VERSION
            c.commit(AclsWritten(resource, frozenset(acls), version))
            self._notify("acls", resource)
        self._drain()
        return version

    def watch_acl_changes(self, callback: Callable[[AclResource], None]) -> Watch:
        """Called for each change made after the watch was set (no initial call)."""
        return self._watch("acls", callback, None)

    # --- internals ---------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the metadata store is closed")

    @staticmethod
    def _holder_id(holder: tuple[int, MemoryStore] | None) -> int:
        return -1 if holder is None else holder[0]

    def _release_elections(self, released: Callable[[tuple[int, MemoryStore]], bool]) -> None:
        """Drop the controller/coordinator if ``released`` says so; the remaining candidates re-run."""
        c = self._cluster
        if c.controller is not None and released(c.controller):
            c.controller = self._next_holder("_controller_candidates")
            self._notify("controller", self._holder_id(c.controller))
        if c.coordinator is not None and released(c.coordinator):
            c.coordinator = self._next_holder("_coordinator_candidates")
            self._notify("coordinator", self._holder_id(c.coordinator))

    def _next_holder(self, attribute: str) -> tuple[int, MemoryStore] | None:
        candidates = [(bid, handle) for handle in self._cluster.handles if not handle._closed
                      for bid in getattr(handle, attribute)]
        return min(candidates, key=lambda item: item[0]) if candidates else None

    def _notify(self, kind: str, *args: Any) -> None:
        """Queue the news for the watches of ``kind`` (the lock is held: the queue's order is the
        order of the changes)."""
        self._cluster.pending.extend((w, args) for w in self._cluster.watches if w.kind == kind and w.active)

    def _drain(self) -> None:
        """Deliver the queued news, outside the lock, one callback at a time and in the order the
        changes were made, as ZooKeeper's event thread does. Whichever thread finds nobody delivering
        does it; a writer that finds another thread delivering (or a callback of its own that writes)
        leaves its news to that one, so two writers can never hand watchers their states out of
        order. A watch cancelled (or a handle closed) before its turn is skipped. A failing callback
        is logged; it never fails the change that triggered it."""
        c = self._cluster
        with c.lock:
            if c.delivering:
                return
            c.delivering = True
        try:
            while True:
                with c.lock:
                    if not c.pending:
                        c.delivering = False
                        return
                    watch, args = c.pending.popleft()
                if not watch.active:
                    continue
                try:
                    watch.callback(*args)
                except Exception:
                    log.exception("metadata watch callback %r failed (ignored)", watch.callback)
        except BaseException:  # KeyboardInterrupt and the like: the next change delivers the rest
            with c.lock:
                c.delivering = False
            raise

    def _watch(self, kind: str, callback: Callable[..., None],
               current: Callable[[], tuple[Any, ...]] | None) -> Watch:
        with self._lock:
            self._check_open()
            watch = _MemoryWatch(self._cluster, self, kind, callback)
            self._cluster.watches.append(watch)
            if current is not None:  # queued behind the news of earlier changes, never ahead of it
                self._cluster.pending.append((watch, current()))
        self._drain()
        return watch


def apply_change(cluster: _Cluster, change: Change) -> None:
    """Make ``change`` to ``cluster``'s state: what every write does after its checks, and what a
    replay of the durable store's journal does (kafkapy.store.durable). No watch is told here."""
    c = cluster
    match change:
        case BrokerSequence(next_id):
            c.next_generated_id = next_id
        case ConfigWritten(path, config):
            if config:
                c.configs[path] = dict(config)
            else:
                c.configs.pop(path, None)
        case FeaturesWritten(epoch, features):
            c.feature_epoch, c.features = epoch, dict(features)
        case TopicWritten(info, config):
            c.topics = c.topics.set(info.name, info)
            if config is not None:  # a creation: the topic's overrides are the ones it came with
                apply_change(c, ConfigWritten(f"topics/{info.name}", config))
        case TopicDeleted(name):
            deleted = c.topics.get(name)
            if deleted is not None:
                c.topics = c.topics.delete(name)
                # The states live under the topic's znode in Kafka's tree; only its partitions have any.
                gone = [(name, index) for index in deleted.partitions if (name, index) in c.partition_states]
                if gone:
                    c.partition_states = c.partition_states.update(removed=gone)
            c.configs.pop(f"topics/{name}", None)
        case OwnersWritten(group, owners):
            c.owners[group] = dict(owners)
        case MembersWritten(group, members):
            c.members[group] = dict(members)
        case OffsetsCommitted(group, offsets):
            c.offsets.setdefault(group, {}).update(offsets)
        case ProducerIdsAllocated(block):
            c.producer_id_block = block
        case PartitionStateWritten(topic, partition, state):
            c.partition_states = c.partition_states.set((topic, partition), state)
        case AclsWritten(resource, acls, version):
            if acls:
                c.acls[resource] = (acls, version)
            else:
                c.acls.pop(resource, None)


def check_partitions(topic: str, partitions: Mapping[int, tuple[int, ...]],
                     first: int) -> dict[int, tuple[int, ...]]:
    """Partition ids must be first, first+1, ... with at least one replica each; at least one partition."""
    ids = sorted(int(p) for p in partitions)
    if not ids:
        raise StoreError(f"topic {topic!r}: no partitions given")
    if ids != list(range(first, first + len(ids))):
        raise StoreError(f"topic {topic!r}: partitions must be numbered {first}..{first + len(ids) - 1}, "
                         f"got {ids} (partitions only grow)")
    result: dict[int, tuple[int, ...]] = {}
    for p in ids:
        replicas = tuple(int(r) for r in partitions[p])
        if not replicas:
            raise StoreError(f"topic {topic!r}: partition {p} has no replicas")
        result[p] = replicas
    return result


def check_reassignment(topic: TopicInfo,
                       partitions: Mapping[int, tuple[int, ...]]) -> dict[int, tuple[int, ...]]:
    """New replica lists for partitions ``topic`` has: each non-empty, no broker twice."""
    result: dict[int, tuple[int, ...]] = {}
    for p, replicas in partitions.items():
        if int(p) not in topic.partitions:
            raise StoreError(f"topic {topic.name!r} has no partition {p} to reassign")
        checked = tuple(int(r) for r in replicas)
        if not checked or len(set(checked)) != len(checked):
            raise StoreError(f"topic {topic.name!r}: partition {p} needs distinct replicas, "
                             f"not {list(checked)}")
        result[int(p)] = checked
    return result


if TYPE_CHECKING:
    from kafkapy.store.base import MetadataStore

    def _implements_the_interface(store: MemoryStore) -> MetadataStore:
        return store
