"""One suite, every metadata store: MemoryStore, DurableStore (MemoryStore kept on disk) and
ZooKeeperStore must behave the same.

``cluster`` opens store handles on one cluster: for memory and durable, ``peer()``; for
ZooKeeper, another ZooKeeperStore (another session) on this test's own chroot. Watch callbacks
are synchronous in memory (with one writer) and arrive on a worker thread with ZooKeeper, so every check of a
watch or of a re-election waits for it.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from store_helpers import Recorder, registration, wait_until

from kafkapy.store import (
    AclResource,
    AclVersionConflict,
    FeatureEpochConflict,
    MemoryStore,
    MetadataStore,
    PartitionState,
    PartitionStateConflict,
    ProducerIdBlock,
    StoredAcl,
    StoreError,
    TopicAlreadyExists,
    UnknownTopic,
    ZooKeeperStore,
)
from kafkapy.store.base import NO_ACL_VERSION, PRODUCER_ID_BLOCK_SIZE, ROLES
from kafkapy.store.durable import DurableStore
from kafkapy.store.persistent import WIDTH, PersistentMap, changed_keys

Opener = Callable[[], Any]


@pytest.fixture(params=["memory", "durable", "zookeeper"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """A function opening (and starting) another store handle on one fresh cluster."""
    opened: list[Any] = []
    if request.param == "memory":
        first = MemoryStore()

        def open_store() -> Any:
            store = first if not opened else first.peer()
            store.start()
            opened.append(store)
            return store
    elif request.param == "durable":
        def open_store() -> Any:
            # A peer of a handle still open; with none open, the directory opened again, as a
            # restarted broker opens it (ZooKeeper's state outlives its sessions the same way).
            live = [s for s in opened if not s._closed]
            store = live[0].peer() if live else DurableStore(tmp_path / "metadata")
            store.start()
            opened.append(store)
            return store
    else:
        connect = request.getfixturevalue("zk_connect")

        def open_store() -> Any:
            store = ZooKeeperStore(connect, session_timeout_ms=6000, connection_timeout_ms=10000)
            store.start()
            opened.append(store)
            return store
    yield open_store
    for store in opened:
        store.close()


@pytest.fixture
def store(cluster: Opener) -> Any:
    return cluster()


def _methods(protocol: type) -> set[str]:
    return {n for n, v in vars(protocol).items() if not n.startswith("_") and callable(v)}


def test_both_implement_the_protocol(store: MetadataStore) -> None:
    # A static check really (mypy); here: every method of the interface exists.
    for name in [n for n in dir(MetadataStore) if not n.startswith("_")]:
        assert callable(getattr(store, name)), name


def test_metadata_store_is_exactly_the_union_of_the_roles() -> None:
    """Every method has one role: the roles do not overlap, and MetadataStore adds nothing of its own."""
    seen: dict[str, type] = {}
    for role in ROLES:
        assert role in MetadataStore.__mro__, role
        for name in _methods(role):
            assert name not in seen, f"{name} is in both {seen[name].__name__} and {role.__name__}"
            seen[name] = role
    assert not _methods(MetadataStore)
    public = {n for n in dir(MetadataStore) if not n.startswith("_")}
    assert public == seen.keys()
    assert public >= _BEFORE_THE_SPLIT  # callers of the single interface keep working
    assert "allocate_producer_id_block" in public


# The 33 methods of MetadataStore before it was split into roles.
_BEFORE_THE_SPLIT = set("""add_partitions allocate_broker_id brokers close cluster_id commit_offsets
    controller_id coordinator_id create_topic delete_topic elect_controller elect_coordinator
    entity_config entity_configs
    finalized_features groups members offsets owners register_broker set_entity_config set_finalized_features
    set_members set_owners start topics unregister_broker watch_brokers watch_controller watch_coordinator
    watch_entity_configs watch_features watch_topics""".split())


# --- cluster and brokers ---------------------------------------------------------------------------

def test_cluster_id_is_stable_and_shared(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    assert len(a.cluster_id()) == 22
    assert a.cluster_id() == a.cluster_id() == b.cluster_id()


def test_allocate_broker_id_above_reserved(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    ids = [a.allocate_broker_id(1000), b.allocate_broker_id(1000), a.allocate_broker_id(1000)]
    assert ids[0] == 1001
    assert len(set(ids)) == 3 and all(i > 1000 for i in ids)
    assert ids == sorted(ids)


def test_register_and_unregister_brokers(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    assert a.brokers() == []
    a.register_broker(registration(1, rack="r1"))
    b.register_broker(registration(2))
    assert a.brokers() == b.brokers() == [registration(1, rack="r1"), registration(2)]
    found = a.brokers()[1]
    assert found.endpoint("SECURE") is not None and found.endpoint("SECURE").security_protocol == "SSL"
    assert found.features == {"metadata.version": (1, 7)}
    with pytest.raises(StoreError, match="already registered"):
        b.register_broker(registration(1))
    a.unregister_broker(1)
    assert [r.broker_id for r in b.brokers()] == [2]
    a.unregister_broker(1)  # twice is harmless


def test_registration_keeps_user_tags(cluster: Opener) -> None:
    """tag.<name> settings travel with the registration, so every broker reports every broker's."""
    a, b = cluster(), cluster()
    tagged = attrs.evolve(registration(3), tags={"rack": "r8a9", "aws.zone": "eu-central-1"})
    a.register_broker(tagged)
    assert b.brokers() == [tagged] and b.brokers()[0].tags["aws.zone"] == "eu-central-1"


def test_broker_registration_is_ephemeral(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    a.register_broker(registration(1))
    b.register_broker(registration(2))
    a.close()
    wait_until(lambda: [r.broker_id for r in b.brokers()] == [2], what="broker 1 to go with its session")


def test_offline_replicas_published_watched_and_cleared_by_registering_again(cluster: Opener) -> None:
    """KIP-112: a broker publishes the replicas of its failed log dirs for the controller; its
    registration at the next start clears them (its dirs are opened again)."""
    a, b = cluster(), cluster()
    a.register_broker(registration(1))
    seen = Recorder()
    b.watch_offline_replicas(seen)
    assert seen.wait_count(1)[0] == {}
    a.set_offline_replicas(1, [("t", 0), ("t", 2)])
    seen.wait_for(lambda offline: offline == {1: frozenset({("t", 0), ("t", 2)})})
    assert b.offline_replicas() == {1: frozenset({("t", 0), ("t", 2)})}
    a.unregister_broker(1)  # a stop keeps them: the dir is still failed until the broker starts
    assert b.offline_replicas() == {1: frozenset({("t", 0), ("t", 2)})}
    a.register_broker(registration(1))
    seen.wait_for(lambda offline: offline == {})
    assert b.offline_replicas() == {}


def test_watch_brokers(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    seen = Recorder()
    watch = b.watch_brokers(seen)
    assert seen.wait_count(1)[0] == []  # called at once with the current state
    a.register_broker(registration(1))
    seen.wait_for(lambda brokers: [r.broker_id for r in brokers] == [1])
    a.register_broker(registration(2))
    seen.wait_for(lambda brokers: [r.broker_id for r in brokers] == [1, 2])
    a.unregister_broker(1)
    seen.wait_for(lambda brokers: [r.broker_id for r in brokers] == [2])
    watch.cancel()
    count = len(seen.calls)
    a.register_broker(registration(3))
    marker = Recorder()
    b.watch_brokers(marker)
    marker.wait_for(lambda brokers: len(brokers) == 2)
    assert len(seen.calls) == count


# --- controller --------------------------------------------------------------------------------------

def test_controller_election(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    assert a.controller_id() == -1
    seen = Recorder()
    b.watch_controller(seen)
    assert seen.wait_count(1)[0] == -1
    a.register_broker(registration(1))  # registering runs the broker for controller
    assert a.controller_id() == 1
    seen.wait_for(lambda c: c == 1)
    b.register_broker(registration(2))
    assert b.controller_id() == 1
    assert b.elect_controller(2) == 1  # somebody else holds it
    a.unregister_broker(1)
    assert wait_until(lambda: b.controller_id() == 2, what="broker 2 to take over")
    seen.wait_for(lambda c: c == 2)


def test_controller_moves_when_its_session_ends(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    a.register_broker(registration(1))
    b.register_broker(registration(2))
    assert b.controller_id() == 1
    a.close()
    wait_until(lambda: b.controller_id() == 2, what="re-election after the controller's store closed")


def test_elect_controller_without_registration(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    assert a.elect_controller(5) == 5
    assert b.elect_controller(6) == 5
    assert a.elect_controller(5) == 5


# --- client quota configs ----------------------------------------------------------------------------

def test_entity_configs(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    assert a.entity_config("ips/1.2.3.4") == {}
    a.set_entity_config("ips/1.2.3.4", {"connection_creation_rate": "10"})
    a.set_entity_config("ips/<default>", {"connection_creation_rate": "5"})
    a.set_entity_config("users/alice", {"producer_byte_rate": "1024"})
    a.set_entity_config("users/alice/clients/c%201", {"consumer_byte_rate": "2048"})
    a.set_entity_config("users/<default>/clients/<default>", {"request_percentage": "50.0"})
    a.set_entity_config("clients/c1", {"producer_byte_rate": "1"})
    assert b.entity_config("ips/1.2.3.4") == {"connection_creation_rate": "10"}
    assert b.entity_configs("ips") == {"ips/1.2.3.4": {"connection_creation_rate": "10"},
                                       "ips/<default>": {"connection_creation_rate": "5"}}
    assert b.entity_configs("users") == {"users/alice": {"producer_byte_rate": "1024"}}
    assert b.entity_configs("clients") == {"clients/c1": {"producer_byte_rate": "1"}}
    assert b.entity_configs("users/clients") == {
        "users/<default>/clients/<default>": {"request_percentage": "50.0"},
        "users/alice/clients/c%201": {"consumer_byte_rate": "2048"},
    }
    a.set_entity_config("ips/1.2.3.4", {"connection_creation_rate": "20"})  # replaces
    assert b.entity_config("ips/1.2.3.4") == {"connection_creation_rate": "20"}


def test_entity_config_deleted_when_empty(cluster: Opener) -> None:
    a = cluster()
    a.set_entity_config("ips/1.2.3.4", {"connection_creation_rate": "10"})
    a.set_entity_config("ips/1.2.3.4", {})
    assert a.entity_config("ips/1.2.3.4") == {}
    assert a.entity_configs("ips") == {}
    # A user that also has per-client configs under it: its own config goes, the pair stays.
    a.set_entity_config("users/alice", {"producer_byte_rate": "1"})
    a.set_entity_config("users/alice/clients/c1", {"producer_byte_rate": "2"})
    a.set_entity_config("users/alice", {})
    assert a.entity_configs("users") == {}
    assert a.entity_configs("users/clients") == {"users/alice/clients/c1": {"producer_byte_rate": "2"}}
    a.set_entity_config("clients/never-set", {})  # deleting nothing is fine


def test_entity_config_change_notifications(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    a.set_entity_config("ips/9.9.9.9", {"connection_creation_rate": "1"})  # before the watch: not reported
    seen = Recorder()
    watch = b.watch_entity_configs(seen)
    a.set_entity_config("ips/1.2.3.4", {"connection_creation_rate": "10"})
    a.set_entity_config("users/alice/clients/c1", {"producer_byte_rate": "2"})
    a.set_entity_config("ips/1.2.3.4", {})
    assert seen.wait_count(3) == ["ips/1.2.3.4", "users/alice/clients/c1", "ips/1.2.3.4"]
    watch.cancel()
    a.set_entity_config("ips/5.5.5.5", {"connection_creation_rate": "1"})
    later = Recorder()
    b.watch_entity_configs(later)
    a.set_entity_config("ips/6.6.6.6", {"connection_creation_rate": "1"})
    assert later.wait_count(1) == ["ips/6.6.6.6"]
    assert len(seen.calls) == 3


def test_dynamic_broker_configs(cluster: Opener) -> None:
    """Kafka's /config/brokers/<default> and /config/brokers/<id>, notified like client quotas."""
    a, b = cluster(), cluster()
    seen = Recorder()
    b.watch_entity_configs(seen)
    a.set_entity_config("brokers/<default>", {"max.connections": "100"})
    a.set_entity_config("brokers/1", {"max.connection.creation.rate": "7"})
    assert seen.wait_count(2) == ["brokers/<default>", "brokers/1"]
    assert b.entity_configs("brokers") == {"brokers/1": {"max.connection.creation.rate": "7"},
                                           "brokers/<default>": {"max.connections": "100"}}
    a.set_entity_config("brokers/1", {})
    assert b.entity_config("brokers/1") == {}


def test_topic_configs_live_and_die_with_their_topic(cluster: Opener) -> None:
    """topics/<t>: written by create_topic with the topic, changed like any entity, gone with it."""
    a, b = cluster(), cluster()
    seen = Recorder()
    b.watch_entity_configs(seen)
    a.create_topic("orders", {0: (1,)}, config={"retention.ms": "1000", "cleanup.policy": "compact"})
    a.create_topic("plain", {0: (1,)})
    assert b.entity_config("topics/orders") == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert b.entity_config("topics/plain") == {}
    assert b.entity_configs("topics") == {
        "topics/orders": {"retention.ms": "1000", "cleanup.policy": "compact"}}
    a.set_entity_config("topics/plain", {"segment.bytes": "1024"})
    assert seen.wait_count(1) == ["topics/plain"]  # creation posts no notification; a change does
    assert b.entity_config("topics/plain") == {"segment.bytes": "1024"}
    with pytest.raises(TopicAlreadyExists):
        a.create_topic("orders", {0: (1,)}, config={"retention.ms": "5"})
    assert b.entity_config("topics/orders") == {"retention.ms": "1000", "cleanup.policy": "compact"}
    a.delete_topic("orders")
    assert b.entity_config("topics/orders") == {}
    a.create_topic("orders", {0: (1,)})  # a new topic of the same name starts with no overrides
    assert b.entity_config("topics/orders") == {}


@pytest.mark.parametrize("bad", ["ips", "ips/", "topics/", "topics/t/x", "users/a/clients", "users/a/ips/b",
                                 "x/y/z/w"])
def test_invalid_entity_path(store: Any, bad: str) -> None:
    with pytest.raises(StoreError, match="entity path"):
        store.set_entity_config(bad, {"a": "1"})
    with pytest.raises(StoreError):
        store.entity_config(bad)


def test_unknown_entity_type(store: Any) -> None:
    with pytest.raises(StoreError, match="unknown entity type"):
        store.entity_configs("widgets")


def test_group_configs_are_an_entity_type(store: Any) -> None:
    """Kafka 4's GROUP config resources: ``groups/<sanitized group id>``."""
    store.set_entity_config("groups/a%2Fb", {"share.auto.offset.reset": "earliest"})
    assert store.entity_configs("groups") == {"groups/a%2Fb": {"share.auto.offset.reset": "earliest"}}
    store.set_entity_config("groups/a%2Fb", {})
    assert store.entity_configs("groups") == {}


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "spaced name", "x" * 250, "caf\u00e9"])
def test_invalid_topic_name(store: Any, bad: str) -> None:
    with pytest.raises(StoreError, match=r"^Topic name is invalid: "):
        store.create_topic(bad, {0: (1,)})
    assert store.topics() == {}


# --- finalized features ------------------------------------------------------------------------------

def test_feature_epochs(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    assert a.finalized_features() == (-1, {})
    assert a.set_finalized_features({"metadata.version": 7}, expected_epoch=-1) == 0
    assert b.finalized_features() == (0, {"metadata.version": 7})
    with pytest.raises(FeatureEpochConflict):
        b.set_finalized_features({"metadata.version": 8}, expected_epoch=-1)  # it exists now
    assert b.set_finalized_features({"metadata.version": 8}, expected_epoch=0) == 1
    with pytest.raises(FeatureEpochConflict):
        a.set_finalized_features({"metadata.version": 9}, expected_epoch=0)  # stale
    assert a.finalized_features() == (1, {"metadata.version": 8})
    assert a.set_finalized_features({"metadata.version": 9, "group.version": 1}) == 2  # unconditional
    assert a.set_finalized_features({}) == 3  # epochs only go up, even for an empty set
    assert b.finalized_features() == (3, {})


def test_feature_conflict_on_an_unknown_epoch(store: Any) -> None:
    with pytest.raises(FeatureEpochConflict):
        store.set_finalized_features({"f": 1}, expected_epoch=4)
    assert store.finalized_features() == (-1, {})
    assert store.set_finalized_features({"f": 1}) == 0


def test_watch_features(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    seen = Recorder()
    b.watch_features(seen)
    assert seen.wait_count(1)[0] == (-1, {})
    a.set_finalized_features({"f": 1})
    seen.wait_for(lambda s: s == (0, {"f": 1}))
    a.set_finalized_features({"f": 2}, expected_epoch=0)
    seen.wait_for(lambda s: s == (1, {"f": 2}))
    epochs = [call[0] for call in seen.calls]
    assert epochs == sorted(epochs)


# --- topics ------------------------------------------------------------------------------------------

def test_topics(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    assert a.topics() == {}
    tid = uuid.uuid4()
    info = a.create_topic("orders", {0: (1, 2), 1: (2, 1)}, topic_id=tid)
    assert info.topic_id == tid and dict(info.partitions) == {0: (1, 2), 1: (2, 1)}
    other = a.create_topic("logs", {0: (1,)})
    assert isinstance(other.topic_id, uuid.UUID) and other.topic_id != tid
    assert b.topics() == {"orders": info, "logs": other}
    with pytest.raises(TopicAlreadyExists):
        b.create_topic("orders", {0: (3,)})
    b.delete_topic("logs")
    assert list(a.topics()) == ["orders"]
    with pytest.raises(UnknownTopic):
        a.delete_topic("logs")


def test_partitions_only_grow(store: Any) -> None:
    store.create_topic("t", {0: (1,), 1: (2,)})
    grown = store.add_partitions("t", {2: (3,), 3: (1,)})
    assert dict(grown.partitions) == {0: (1,), 1: (2,), 2: (3,), 3: (1,)}
    assert store.topics()["t"] == grown
    for bad in ({1: (5,)}, {5: (1,)}, {}, {4: ()}):
        with pytest.raises(StoreError):
            store.add_partitions("t", bad)
    assert store.topics()["t"] == grown
    with pytest.raises(UnknownTopic):
        store.add_partitions("nope", {0: (1,)})
    with pytest.raises(StoreError):
        store.create_topic("gap", {0: (1,), 2: (1,)})
    with pytest.raises(StoreError):
        store.create_topic("empty", {})


def test_reassigning_partitions_replaces_their_replica_lists(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    a.create_topic("t", {0: (1, 2, 3), 1: (2, 3, 1)})
    seen = Recorder()
    b.watch_topics(seen)
    moved = a.reassign_partitions("t", {0: (3, 1, 2)})
    assert dict(moved.partitions) == {0: (3, 1, 2), 1: (2, 3, 1)}
    assert b.topics()["t"] == moved
    seen.wait_for(lambda topics: topics["t"].partitions[0] == (3, 1, 2))
    for bad in ({2: (1,)}, {0: ()}, {0: (1, 1)}):
        with pytest.raises(StoreError):
            a.reassign_partitions("t", bad)
    assert a.topics()["t"] == moved
    with pytest.raises(UnknownTopic):
        a.reassign_partitions("nope", {0: (1,)})


def test_watch_topics(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    seen = Recorder()
    b.watch_topics(seen)
    assert seen.wait_count(1)[0] == {}
    a.create_topic("t", {0: (1,)})
    seen.wait_for(lambda topics: list(topics) == ["t"] and len(topics["t"].partitions) == 1)
    a.add_partitions("t", {1: (1,)})
    seen.wait_for(lambda topics: len(topics["t"].partitions) == 2)
    a.delete_topic("t")
    seen.wait_for(lambda topics: topics == {})


# --- partition states --------------------------------------------------------------------------------

def test_partition_states_compare_and_set_on_the_partition_epoch(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    a.create_topic("t", {0: (1, 2), 1: (2, 1)})
    assert a.partition_states() == {}
    first = a.set_partition_state("t", 0, PartitionState(1, 0, (1, 2)), -1)
    assert first == PartitionState(1, 0, (1, 2), 0, 0)
    assert b.partition_states() == {("t", 0): first}
    with pytest.raises(PartitionStateConflict):  # it exists now
        b.set_partition_state("t", 0, PartitionState(2, 1, (2,)), -1)
    moved = b.set_partition_state("t", 0, PartitionState(2, 1, (2,)), 0)
    assert (moved.leader, moved.leader_epoch, moved.isr, moved.partition_epoch) == (2, 1, (2,), 1)
    with pytest.raises(PartitionStateConflict):  # a writer that read before the move is refused
        a.set_partition_state("t", 0, PartitionState(1, 1, (1,)), 0)
    assert a.partition_states() == {("t", 0): moved}
    with pytest.raises(PartitionStateConflict):  # no state yet for partition 1
        a.set_partition_state("t", 1, PartitionState(2, 0, (2,)), 3)
    with pytest.raises(UnknownTopic):
        a.set_partition_state("t", 7, PartitionState(1, 0, (1,)), -1)
    with pytest.raises(UnknownTopic):
        a.set_partition_state("nope", 0, PartitionState(1, 0, (1,)), -1)


def test_partition_states_go_with_their_topic(cluster: Opener) -> None:
    a = cluster()
    a.create_topic("t", {0: (1,)})
    a.set_partition_state("t", 0, PartitionState(1, 4, (1,)), -1)
    a.delete_topic("t")
    assert a.partition_states() == {}
    assert "t" not in a.topics()
    with pytest.raises(UnknownTopic):  # never brings the deleted topic back
        a.set_partition_state("t", 0, PartitionState(1, 5, (1,)), 0)
    assert "t" not in a.topics()
    a.create_topic("t", {0: (1,)})  # a new topic of that name starts with no state
    assert a.partition_states() == {}


def test_watch_partition_states(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    seen = Recorder()
    b.watch_partition_states(seen)
    assert seen.wait_count(1)[0] == {}
    a.create_topic("t", {0: (1, 2), 1: (1, 2)})
    a.set_partition_state("t", 0, PartitionState(1, 0, (1, 2)), -1)
    seen.wait_for(lambda states: states.get(("t", 0)) == PartitionState(1, 0, (1, 2), 0, 0))
    a.set_partition_state("t", 1, PartitionState(2, 0, (2,)), -1)
    a.set_partition_state("t", 0, PartitionState(2, 1, (2,)), 0)
    seen.wait_for(lambda states: states == {("t", 0): PartitionState(2, 1, (2,), 0, 1),
                                            ("t", 1): PartitionState(2, 0, (2,), 0, 0)})
    a.delete_topic("t")
    seen.wait_for(lambda states: states == {})


class Snapshots(Recorder):
    """Records each delivery and a copy of its content as delivered."""

    def __init__(self) -> None:
        super().__init__()
        self.contents: list[dict[Any, Any]] = []

    def __call__(self, *args: Any) -> None:
        self.contents.append(dict(args[0].items()))  # before the Recorder wakes a waiter
        super().__call__(*args)


def plain_diff(old: dict[Any, Any], new: dict[Any, Any]) -> set[Any]:
    missing = object()
    return {k for k in old.keys() | new.keys() if old.get(k, missing) != new.get(k, missing)}


def test_watches_deliver_snapshots_of_one_lineage(cluster: Opener) -> None:
    """kafkapy.store.base, "Snapshots": each delivery is a PersistentMap that never changes, and
    made from the one before, so ``changed_keys`` between the two is the change and the rest is
    shared (a write among 40 topics leaves all but one of the root's slots the same objects)."""
    a, b = cluster(), cluster()
    topics, states = Snapshots(), Snapshots()
    b.watch_topics(topics)
    b.watch_partition_states(states)
    for index in range(40):
        a.create_topic(f"t{index}", {0: (1, 2), 1: (2, 1)})
        a.set_partition_state(f"t{index}", 0, PartitionState(1, 0, (1, 2)), -1)
    topics.wait_for(lambda seen: len(seen) == 40)
    states.wait_for(lambda seen: len(seen) == 40)
    steps: list[tuple[Snapshots, Callable[[], object], Callable[[Any], bool]]] = [
        (topics, lambda: a.create_topic("new", {0: (1,)}), lambda seen: "new" in seen),
        (topics, lambda: a.add_partitions("t3", {2: (1, 2)}), lambda seen: 2 in seen["t3"].partitions),
        (topics, lambda: a.reassign_partitions("t4", {0: (2, 1)}),
         lambda seen: seen["t4"].partitions[0] == (2, 1)),
        (states, lambda: a.set_partition_state("t5", 0, PartitionState(2, 1, (2,)), 0),
         lambda seen: seen[("t5", 0)].leader == 2),
        (states, lambda: a.set_partition_state("t6", 1, PartitionState(2, 0, (2,)), -1),
         lambda seen: ("t6", 1) in seen),
        (topics, lambda: a.delete_topic("t7"), lambda seen: "t7" not in seen),
    ]
    for recorder, step, shown in steps:
        before = len(recorder.calls)
        step()
        recorder.wait_for(shown)
        older, newer = recorder.calls[before - 1], recorder.calls[-1]
        assert changed_keys(older, newer) == plain_diff(recorder.contents[before - 1], recorder.contents[-1])
        assert len(changed_keys(older, newer)) == 1
        assert isinstance(older._root, tuple) and isinstance(newer._root, tuple)
        assert sum(x is y for x, y in zip(older._root, newer._root)) == WIDTH - 1
    states.wait_for(lambda seen: ("t7", 0) not in seen)  # the deleted topic's states go too
    for recorder in (topics, states):
        assert all(isinstance(seen, PersistentMap) for seen in recorder.calls)
        for seen, content in zip(recorder.calls, recorder.contents):
            assert dict(seen.items()) == content  # nothing delivered changed since


def test_one_off_reads_list_by_name(cluster: Opener) -> None:
    """``topics()`` and ``partition_states()`` come sorted, on both stores, whatever the order of
    creation (the watches' snapshots iterate in their own order)."""
    a = cluster()
    for name in ("m", "b", "z", "a"):
        a.create_topic(name, {0: (1,), 1: (1,)})
        a.set_partition_state(name, 1, PartitionState(1, 0, (1,)), -1)
        a.set_partition_state(name, 0, PartitionState(1, 0, (1,)), -1)
    assert list(a.topics()) == ["a", "b", "m", "z"]
    assert list(a.partition_states()) == [(t, p) for t in "abmz" for p in (0, 1)]


def test_partition_states_outlive_every_session(cluster: Opener) -> None:
    a = cluster()
    a.create_topic("t", {0: (1,)})
    written = a.set_partition_state("t", 0, PartitionState(1, 3, (1,)), -1)
    b = cluster()
    a.close()
    assert b.partition_states() == {("t", 0): written}


# --- consumer coordinator (seed 001) -----------------------------------------------------------------

def test_coordinator_election_and_reelection(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    assert a.coordinator_id() == -1
    seen = Recorder()
    b.watch_coordinator(seen)
    assert seen.wait_count(1)[0] == -1
    assert a.elect_coordinator(1) == 1
    assert b.elect_coordinator(2) == 1
    seen.wait_for(lambda c: c == 1)
    a.close()  # the holder goes: the other candidate takes over
    wait_until(lambda: b.coordinator_id() == 2, what="coordinator re-election")
    seen.wait_for(lambda c: c == 2)


def test_coordinator_released_on_unregister(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    a.register_broker(registration(1))
    b.register_broker(registration(2))
    assert a.elect_coordinator(1) == 1
    assert b.elect_coordinator(2) == 1
    a.unregister_broker(1)
    wait_until(lambda: b.coordinator_id() == 2, what="coordinator to move to broker 2")


def test_owners_and_offsets(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    assert a.groups() == [] and a.owners("g") == {} and a.offsets("g") == {}
    a.set_owners("g", {("t", 0): "g_host-1-0", ("t", 1): "g_host-1-0", ("u", 0): "g_host-2-0"})
    assert b.owners("g") == {("t", 0): "g_host-1-0", ("t", 1): "g_host-1-0", ("u", 0): "g_host-2-0"}
    a.set_owners("g", {("t", 0): "g_host-2-0"})  # replaces the whole ownership
    assert b.owners("g") == {("t", 0): "g_host-2-0"}
    a.commit_offsets("g", {("t", 0): 42, ("t", 1): 7})
    a.commit_offsets("g", {("t", 0): 43})  # merges
    b.commit_offsets("h", {("x", 3): 0})
    assert a.offsets("g") == {("t", 0): 43, ("t", 1): 7}
    assert a.offsets("h") == {("x", 3): 0}
    assert a.groups() == ["g", "h"]
    b.close()
    assert a.offsets("g") == {("t", 0): 43, ("t", 1): 7}  # durable, not tied to a session


def test_group_members(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    assert a.members("g") == {}
    a.set_members("g", {"c1": 6000, "host/2 x": 9000})  # any consumer id fits in one znode name
    assert b.members("g") == {"c1": 6000, "host/2 x": 9000}
    a.set_members("g", {"c3": 7000})  # replaces the whole membership
    assert b.members("g") == {"c3": 7000}
    assert b.groups() == ["g"]
    a.close()
    assert b.members("g") == {"c3": 7000}  # persistent, seed 001's coordinator reads it on election


def test_watches_of_one_kind_run_in_the_order_they_were_set(cluster: Opener) -> None:
    """A watch set later sees a state only after the earlier ones did: a request waiting on its own
    watch (CreateTopics) then finds the broker's view (an earlier watch) already up to date."""
    a, b = cluster(), cluster()
    first, late_starts, behind = Recorder(), Recorder(), []

    def second(topics: dict[str, Any]) -> None:
        if first.last is None or sorted(first.last) != sorted(topics):
            behind.append((sorted(first.last or {}), sorted(topics)))

    a.watch_topics(first)
    a.watch_topics(second)
    for i in range(10):
        b.create_topic(f"t{i}", {0: (1,)})
        a.watch_topics(lambda topics: late_starts(sorted(topics) == sorted(first.last or {})))
    first.wait_for(lambda topics: len(topics) == 10)
    wait_until(lambda: len(late_starts.calls) >= 10, what="every late watch's first call")
    assert behind == []
    assert all(late_starts.calls)


def test_concurrent_writers_never_hand_a_watch_an_older_state(cluster: Opener) -> None:
    """Writers racing from threads: each state a topics watch gets holds every topic the one before it
    held (only creates here), and the last is the final state. A store that delivered each writer's
    news from that writer's thread, outside its lock, let a slow writer's older snapshot land last."""
    watcher, *writers = [cluster() for _ in range(4)]
    seen = Recorder()

    def yielding(topics: dict[str, Any]) -> None:
        time.sleep(0)  # let go of the interpreter, as any callback may be made to mid-way
        seen(topics)

    watcher.watch_topics(yielding)
    per_writer = 40
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        def create(handle: Any, index: int) -> None:
            for i in range(per_writer):
                handle.create_topic(f"w{index}-{i}", {0: (1,)})

        threads = [threading.Thread(target=create, args=(h, n)) for n, h in enumerate(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        sys.setswitchinterval(previous)
    expected = {f"w{n}-{i}" for n in range(len(writers)) for i in range(per_writer)}
    seen.wait_for(lambda topics: set(topics) == expected)
    states = [set(topics) for topics in seen.wait_count(1)]
    shrunk = [(len(before), len(after)) for before, after in itertools.pairwise(states)
              if not before <= after]
    assert shrunk == []
    assert states[-1] == expected


# --- producer ids ----------------------------------------------------------------------------------

def test_producer_id_blocks_follow_each_other(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    assert PRODUCER_ID_BLOCK_SIZE == 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
    first = a.allocate_producer_id_block(1)
    assert first == ProducerIdBlock(1, 0, 1000) and first.last_id == 999
    assert b.allocate_producer_id_block(2) == ProducerIdBlock(2, 1000, 1000)
    assert a.allocate_producer_id_block(1) == ProducerIdBlock(1, 2000, 1000)


def test_producer_id_blocks_never_overlap_under_contention(cluster: Opener) -> None:
    """Handles racing from threads (ZooKeeper: sessions racing on the znode version) never share an id."""
    handles = [cluster() for _ in range(4)]
    blocks: list[ProducerIdBlock] = []

    def grab(handle: Any, broker_id: int) -> None:
        for _ in range(5):
            blocks.append(handle.allocate_producer_id_block(broker_id))

    threads = [threading.Thread(target=grab, args=(h, i)) for i, h in enumerate(handles)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    starts = sorted(block.first_id for block in blocks)
    assert starts == [i * 1000 for i in range(20)]


def test_producer_id_blocks_outlive_every_session(cluster: Opener) -> None:
    a = cluster()
    a.allocate_producer_id_block(1)
    a.close()
    assert cluster().allocate_producer_id_block(2).first_id == 1000


# --- lifecycle ---------------------------------------------------------------------------------------

def test_durable_state_outlives_every_session(cluster: Opener) -> None:
    a = cluster()
    a.set_entity_config("ips/1.2.3.4", {"connection_creation_rate": "10"})
    a.set_finalized_features({"f": 3})
    a.create_topic("t", {0: (1,)})
    a.commit_offsets("g", {("t", 0): 5})
    a.register_broker(registration(1))
    b = cluster()
    a.close()
    assert b.entity_config("ips/1.2.3.4") == {"connection_creation_rate": "10"}
    assert b.finalized_features() == (0, {"f": 3})
    assert list(b.topics()) == ["t"]
    assert b.offsets("g") == {("t", 0): 5}
    wait_until(lambda: b.brokers() == [], what="the ephemeral registration to go")


def test_closed_store_refuses(store: Any) -> None:
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.brokers()
    with pytest.raises(StoreError, match="closed"):
        store.set_entity_config("ips/1.2.3.4", {"a": "1"})


def test_a_failing_callback_does_not_break_the_store(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    calls: list[int] = []

    def bad(controller: int) -> None:
        calls.append(controller)
        if controller != -1:
            raise RuntimeError("callback bug")

    try:
        b.watch_controller(bad)
        a.register_broker(registration(1))
    except RuntimeError:
        pytest.fail("a watch callback's exception reached the caller")
    wait_until(lambda: calls[-1:] == [1], what="the callback")
    assert a.controller_id() == 1


# --- ACLs ------------------------------------------------------------------------------------------

READ_TOPIC = AclResource("LITERAL", "Topic", "orders")
PREFIXED_GROUP = AclResource("PREFIXED", "Group", "app-")
ALICE_READS = StoredAcl("User:alice", "Allow", "Read", "*")
BOB_DENIED = StoredAcl("User:bob", "Deny", "Write", "10.0.0.1")


def test_acls_compare_and_set_per_resource(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    assert a.acls() == {} and a.resource_acls(READ_TOPIC) == (frozenset(), NO_ACL_VERSION)
    assert a.set_resource_acls(READ_TOPIC, frozenset({ALICE_READS}), NO_ACL_VERSION) == 0
    assert b.resource_acls(READ_TOPIC) == (frozenset({ALICE_READS}), 0)
    with pytest.raises(AclVersionConflict):  # b read nothing, but a created it meanwhile
        b.set_resource_acls(READ_TOPIC, frozenset({BOB_DENIED}), NO_ACL_VERSION)
    assert b.set_resource_acls(READ_TOPIC, frozenset({ALICE_READS, BOB_DENIED}), 0) == 1
    with pytest.raises(AclVersionConflict):
        a.set_resource_acls(READ_TOPIC, frozenset(), 0)
    a.set_resource_acls(PREFIXED_GROUP, frozenset({ALICE_READS}), NO_ACL_VERSION)
    assert b.acls() == {READ_TOPIC: frozenset({ALICE_READS, BOB_DENIED}),
                        PREFIXED_GROUP: frozenset({ALICE_READS})}
    assert a.set_resource_acls(READ_TOPIC, frozenset(), 1) == NO_ACL_VERSION  # none left: the node goes
    assert b.acls() == {PREFIXED_GROUP: frozenset({ALICE_READS})}
    assert b.resource_acls(READ_TOPIC) == (frozenset(), NO_ACL_VERSION)


def test_acl_resources_that_cannot_be_nodes_are_refused(store: Any) -> None:
    for bad in (AclResource("MATCH", "Topic", "t"), AclResource("LITERAL", "Group", "a/b"),
                AclResource("LITERAL", "Topic", ""), AclResource("PREFIXED", "Topic", "..")):
        with pytest.raises(StoreError):
            store.set_resource_acls(bad, frozenset({ALICE_READS}), NO_ACL_VERSION)


def test_acl_change_notifications(cluster: Opener) -> None:
    a, b = cluster(), cluster()
    a.set_resource_acls(AclResource("LITERAL", "Cluster", "kafka-cluster"), frozenset({ALICE_READS}),
                        NO_ACL_VERSION)  # before the watch: not reported
    seen = Recorder()
    watch = b.watch_acl_changes(seen)
    a.set_resource_acls(READ_TOPIC, frozenset({ALICE_READS}), NO_ACL_VERSION)
    a.set_resource_acls(PREFIXED_GROUP, frozenset({ALICE_READS}), NO_ACL_VERSION)
    txn = AclResource("LITERAL", "TransactionalId", "tx-1")
    a.set_resource_acls(txn, frozenset({BOB_DENIED}), NO_ACL_VERSION)
    calls = seen.wait_count(3)
    assert sorted(calls, key=str) == sorted([READ_TOPIC, PREFIXED_GROUP, txn], key=str)
    watch.cancel()
    a.set_resource_acls(READ_TOPIC, frozenset(), 0)
    a.set_resource_acls(PREFIXED_GROUP, frozenset(), 0)
    wait_until(lambda: b.acls().keys() == {AclResource("LITERAL", "Cluster", "kafka-cluster"), txn})
    assert len(seen.calls) == 3  # cancelled: no more calls
