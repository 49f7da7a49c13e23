"""ZooKeeperStore specifics: Kafka's znode paths and JSON formats (read back raw with kazoo),
session loss, an unreachable server, bad chroots and corrupt znodes."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from store_helpers import Recorder, expire_session, registration, wait_until

from kafkapy.store import CorruptMetadata, StoreError, ZooKeeperStore
from kafkapy.store.base import encode_uuid, sanitize


@pytest.fixture
def open_store(zk_connect: str) -> Iterator[Any]:
    opened: list[ZooKeeperStore] = []

    def open_(session_timeout_ms: int = 6000) -> ZooKeeperStore:
        store = ZooKeeperStore(zk_connect, session_timeout_ms=session_timeout_ms, connection_timeout_ms=10000)
        store.start()
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Any) -> ZooKeeperStore:
    result: ZooKeeperStore = open_store()
    return result


@pytest.fixture
def raw(store: ZooKeeperStore, zk_connect: str) -> Iterator[KazooClient]:
    """A plain kazoo client on the same chroot (created by the store)."""
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def read_json(raw: KazooClient, path: str) -> Any:
    return json.loads(raw.get(path)[0])


# --- formats -----------------------------------------------------------------------------------------

def test_producer_id_block_znode_is_kafkas(store: ZooKeeperStore, raw: KazooClient) -> None:
    """Kafka's ProducerIdBlockZNode: created empty at startup, then version 1 with the ids as strings."""
    assert raw.get("/latest_producer_id_block")[0] == b""
    store.allocate_producer_id_block(7)
    data, stat = raw.get("/latest_producer_id_block")
    assert json.loads(data) == {"version": 1, "broker": 7, "block_start": "0", "block_end": "999"}
    # A block a Kafka broker wrote is continued, and every write is a new znode version.
    raw.set("/latest_producer_id_block",
            b'{"version":1,"broker":3,"block_start":"41000","block_end":"41999"}')
    assert store.allocate_producer_id_block(8).first_id == 42000
    assert read_json(raw, "/latest_producer_id_block") == {"version": 1, "broker": 8, "block_start": "42000",
                                                          "block_end": "42999"}
    assert raw.exists("/latest_producer_id_block").version == stat.version + 2


def test_log_dir_failure_writes_kafkas_log_dir_event(store: ZooKeeperStore, raw: KazooClient) -> None:
    """KIP-112 on ZooKeeper: a broker whose replicas go offline adds Kafka's sequential
    /log_dir_event_notification/log_dir_event_<seq> (what a Kafka controller watches); the set
    itself is kafkapy's /kafkapy/offline_replicas/<id>. A set that only shrinks is no new event."""
    store.set_offline_replicas(4, [("t", 1), ("t", 0)])
    events = raw.get_children("/log_dir_event_notification")
    assert len(events) == 1 and events[0].startswith("log_dir_event_") and events[0][-10:].isdigit()
    event = read_json(raw, f"/log_dir_event_notification/{events[0]}")
    assert event == {"version": 1, "broker": 4, "event": 1}
    assert read_json(raw, "/kafkapy/offline_replicas/4") == {
        "version": 1, "partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]}
    store.set_offline_replicas(4, [("t", 0)])
    assert len(raw.get_children("/log_dir_event_notification")) == 1
    store.set_offline_replicas(4, [("t", 0), ("u", 0)])
    assert len(raw.get_children("/log_dir_event_notification")) == 2
    store.register_broker(registration(4))
    assert raw.exists("/kafkapy/offline_replicas/4") is None and store.offline_replicas() == {}


def test_log_dir_events_are_watched_and_deleted(store: ZooKeeperStore, raw: KazooClient) -> None:
    """LogDirEventQueue: /log_dir_event_notification is one of Kafka's persistent paths (made at
    start), its notifications are delivered on each change, after the offline replicas they
    announce, and deleted by name as KafkaZkClient.deleteLogDirEventNotifications does."""
    assert raw.exists("/log_dir_event_notification") is not None
    order: list[str] = []
    offline, events = Recorder(), Recorder()
    store.watch_offline_replicas(lambda found: (order.append("offline"), offline(found)))
    watch = store.watch_log_dir_events(lambda names: (order.append("events"), events(names)))
    assert events.last == ()
    order.clear()
    store.set_offline_replicas(4, [("t", 0)])
    [first] = events.wait_for(lambda names: len(names) == 1)
    assert first.startswith("log_dir_event_") and order == ["offline", "events"]
    store.set_offline_replicas(5, [("u", 0)])
    both = events.wait_for(lambda names: len(names) == 2)
    store.delete_log_dir_events([first, "log_dir_event_9999999999"])  # one already gone: no error
    assert events.wait_for(lambda names: len(names) == 1) == both[1:]
    assert raw.get_children("/log_dir_event_notification") == [both[1]]
    watch.cancel()


def test_producer_ids_exhausted(store: ZooKeeperStore, raw: KazooClient) -> None:
    last = 2**63 - 1
    raw.set("/latest_producer_id_block", json.dumps(
        {"version": 1, "broker": 1, "block_start": str(last - 1500), "block_end": str(last - 501)}).encode())
    with pytest.raises(StoreError, match="producer ids are exhausted"):
        store.allocate_producer_id_block(1)


def test_broker_znode_is_kafkas_version_5(store: ZooKeeperStore, raw: KazooClient) -> None:
    store.register_broker(registration(1, rack="rack-a"))
    data = read_json(raw, "/brokers/ids/1")
    timestamp = data.pop("timestamp")
    assert isinstance(timestamp, str) and abs(int(timestamp) - time.time() * 1000) < 60_000
    assert data == {
        "version": 5, "host": "localhost", "port": 9093, "jmx_port": -1,
        "endpoints": ["PLAINTEXT://localhost:9093", "SECURE://broker.example:9193"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SECURE": "SSL"},
        "rack": "rack-a",
        "features": {"metadata.version": {"min_version": 1, "max_version": 7}},
    }
    assert raw.exists("/brokers/ids/1").ephemeralOwner == store.client.client_id[0]
    controller = read_json(raw, "/controller")
    assert controller["version"] == 1 and controller["brokerid"] == 1 and controller["timestamp"].isdigit()
    assert raw.exists("/controller").ephemeralOwner == store.client.client_id[0]


def test_broker_without_plaintext_listener(store: ZooKeeperStore, raw: KazooClient) -> None:
    from kafkapy.store import BrokerRegistration, RegisteredEndpoint

    store.register_broker(BrokerRegistration(3, (RegisteredEndpoint("SSL", "SSL", "::1", 9094),)))
    data = read_json(raw, "/brokers/ids/3")
    assert data["host"] is None and data["port"] == -1 and data["rack"] is None
    assert data["endpoints"] == ["SSL://[::1]:9094"]
    assert store.brokers()[0].endpoints == (RegisteredEndpoint("SSL", "SSL", "::1", 9094),)


def test_reads_older_kafka_broker_znodes(store: ZooKeeperStore, raw: KazooClient) -> None:
    raw.create("/brokers/ids/7", json.dumps({
        "listener_security_protocol_map": {"INTERNAL": "SASL_PLAINTEXT"}, "endpoints": ["INTERNAL://k7:9092"],
        "jmx_port": 9999, "host": None, "timestamp": "1", "port": -1, "version": 4, "rack": "r"}).encode())
    (found,) = store.brokers()
    assert found.broker_id == 7 and found.rack == "r" and dict(found.features) == {}
    assert found.endpoint("INTERNAL") is not None
    assert found.endpoint("INTERNAL").security_protocol == "SASL_PLAINTEXT"


def test_cluster_id_and_seqid(store: ZooKeeperStore, raw: KazooClient) -> None:
    assert read_json(raw, "/cluster/id") == {"version": "1", "id": store.cluster_id()}
    first = store.allocate_broker_id(1000)
    second = store.allocate_broker_id(1000)
    assert (first, second) == (1001, 1002)
    assert raw.exists("/brokers/seqid").version + 1000 == second


def test_existing_cluster_id_is_used(zk_connect: str) -> None:
    with ZooKeeperStore(zk_connect, connection_timeout_ms=10000, cluster_id="AAAAAAAAAAAAAAAAAAAAAA") as a:
        assert a.cluster_id() == "AAAAAAAAAAAAAAAAAAAAAA"
    with ZooKeeperStore(zk_connect, connection_timeout_ms=10000) as b:
        assert b.cluster_id() == "AAAAAAAAAAAAAAAAAAAAAA"
    with pytest.raises(StoreError, match="does not match"):
        ZooKeeperStore(zk_connect, connection_timeout_ms=10000, cluster_id="BBBBBBBBBBBBBBBBBBBBBB").start()


def test_topic_znode(store: ZooKeeperStore, raw: KazooClient) -> None:
    tid = uuid.uuid4()
    store.create_topic("orders", {0: (1, 2), 1: (2, 1)}, topic_id=tid)
    assert read_json(raw, "/brokers/topics/orders") == {
        "version": 3, "partitions": {"0": [1, 2], "1": [2, 1]}, "topic_id": encode_uuid(tid),
        "adding_replicas": {}, "removing_replicas": {}}
    store.add_partitions("orders", {2: (3, 1)})
    assert read_json(raw, "/brokers/topics/orders")["partitions"] == {"0": [1, 2], "1": [2, 1], "2": [3, 1]}
    # A version 2 znode (before topic ids) reads with the zero topic id, as Kafka's Uuid.ZERO_UUID.
    raw.create("/brokers/topics/old", b'{"version":2,"partitions":{"0":[1]},"adding_replicas":{},'
                                      b'"removing_replicas":{}}')
    assert store.topics()["old"].topic_id == uuid.UUID(int=0)


def test_topic_config_znodes_are_kafkas(store: ZooKeeperStore, raw: KazooClient) -> None:
    """/config/topics/<t> as Kafka's AdminZkClient writes it: always present with the topic,
    {"version":1,"config":{...}}; a change posts /config/changes/config_change_<seq> naming
    topics/<t>; the controller's delete removes it."""
    store.create_topic("orders", {0: (1,)}, config={"retention.ms": "1000"})
    store.create_topic("plain", {0: (1,)})
    assert read_json(raw, "/config/topics/orders") == {"version": 1, "config": {"retention.ms": "1000"}}
    assert read_json(raw, "/config/topics/plain") == {"version": 1, "config": {}}
    before = set(raw.get_children("/config/changes"))
    store.set_entity_config("topics/plain", {"cleanup.policy": "compact"})
    (change,) = set(raw.get_children("/config/changes")) - before
    assert change.startswith("config_change_") and len(change) == len("config_change_") + 10
    assert read_json(raw, f"/config/changes/{change}") == {"version": 2, "entity_path": "topics/plain"}
    assert read_json(raw, "/config/topics/plain") == {"version": 1, "config": {"cleanup.policy": "compact"}}
    store.set_entity_config("topics/plain", {})  # the node stays while the topic lives
    assert read_json(raw, "/config/topics/plain") == {"version": 1, "config": {}}
    store.delete_topic("plain")
    assert raw.exists("/config/topics/plain") is None
    # A node Kafka (or an interrupted delete) left behind is overwritten by the next create.
    raw.create("/config/topics/left", b'{"version":1,"config":{"retention.ms":"1"}}')
    store.create_topic("left", {0: (1,)}, config={"segment.bytes": "2048"})
    assert read_json(raw, "/config/topics/left") == {"version": 1, "config": {"segment.bytes": "2048"}}


def test_config_znodes_and_change_notifications(store: ZooKeeperStore, raw: KazooClient) -> None:
    user = sanitize("alice@example.com")
    assert user == "alice%40example.com"
    store.set_entity_config("ips/1.2.3.4", {"connection_creation_rate": "10"})
    store.set_entity_config(f"users/{user}/clients/{sanitize('c 1*')}", {"producer_byte_rate": "1024"})
    store.set_entity_config("users/<default>", {"consumer_byte_rate": "5"})
    assert read_json(raw, "/config/ips/1.2.3.4") == {"version": 1,
                                                     "config": {"connection_creation_rate": "10"}}
    assert read_json(raw, "/config/users/alice%40example.com/clients/c%201%2A") == {
        "version": 1, "config": {"producer_byte_rate": "1024"}}
    assert read_json(raw, "/config/users/<default>") == {"version": 1, "config": {"consumer_byte_rate": "5"}}
    store.set_entity_config("ips/1.2.3.4", {})
    assert raw.exists("/config/ips/1.2.3.4") is None
    changes = sorted(raw.get_children("/config/changes"))
    assert changes == [f"config_change_{i:010d}" for i in range(4)]
    assert [read_json(raw, f"/config/changes/{c}") for c in changes] == [
        {"version": 2, "entity_path": "ips/1.2.3.4"},
        {"version": 2, "entity_path": "users/alice%40example.com/clients/c%201%2A"},
        {"version": 2, "entity_path": "users/<default>"},
        {"version": 2, "entity_path": "ips/1.2.3.4"},
    ]


def test_feature_znode(store: ZooKeeperStore, raw: KazooClient) -> None:
    assert store.set_finalized_features({"metadata.version": 7}) == 0
    store.set_finalized_features({"metadata.version": 8, "group.version": 1}, expected_epoch=0)
    assert read_json(raw, "/feature") == {"version": 2, "status": 1, "features": {
        "metadata.version": {"max_version_level": 8}, "group.version": {"max_version_level": 1}}}
    assert raw.exists("/feature").version == 1 == store.finalized_features()[0]


def test_reads_version_1_and_disabled_feature_znodes(store: ZooKeeperStore, raw: KazooClient) -> None:
    raw.create("/feature", b'{"version":1,"status":1,"features":{"f":{"min_version_level":1,'
                           b'"max_version_level":3}}}')
    assert store.finalized_features() == (0, {"f": 3})
    raw.set("/feature", b'{"version":1,"status":0,"features":{}}')
    assert store.finalized_features() == (1, {})


def test_consumer_znodes(store: ZooKeeperStore, raw: KazooClient) -> None:
    store.elect_coordinator(4)
    assert raw.get("/consumers/coordinator")[0] == b"4"
    assert raw.exists("/consumers/coordinator").ephemeralOwner == store.client.client_id[0]
    store.set_owners("g", {("t", 0): "g_host-1234-0"})
    store.commit_offsets("g", {("t", 0): 42})
    assert raw.get("/consumers/g/owners/t/0")[0] == b"g_host-1234-0"
    assert raw.exists("/consumers/g/owners/t/0").ephemeralOwner == 0  # persistent, as seed 001 says
    assert raw.get("/consumers/g/offsets/t/0")[0] == b"42"


# --- sessions ----------------------------------------------------------------------------------------

def test_session_loss_reregisters_and_rearms(open_store: Any, zk_connect: str) -> None:
    a: ZooKeeperStore = open_store()
    b: ZooKeeperStore = open_store()
    a.register_broker(registration(1))
    a.elect_coordinator(1)
    a.set_finalized_features({"f": 1})
    a.set_entity_config("ips/1.2.3.4", {"connection_creation_rate": "10"})
    a.commit_offsets("g", {("t", 0): 9})
    a.create_topic("t", {0: (1,)})
    brokers, controller, features, topics, configs = (Recorder() for _ in range(5))
    a.watch_brokers(brokers)
    a.watch_controller(controller)
    a.watch_features(features)
    a.watch_topics(topics)
    a.watch_entity_configs(configs)
    before = {name: len(r.calls) for name, r in
              [("brokers", brokers), ("controller", controller), ("features", features), ("topics", topics)]}
    old_session = a.client.client_id[0]

    started = time.monotonic()
    expire_session(a, zk_connect)
    wait_until(lambda: a.client.connected and a.client.client_id[0] != old_session, what="a new session")
    new_session = a.client.client_id[0]

    # The broker registration and the controller/coordinator it held come back, on the new session.
    def owner(path: str) -> int | None:
        stat = b.client.exists(path)
        return None if stat is None else int(stat.ephemeralOwner)

    wait_until(lambda: owner("/brokers/ids/1") == new_session, what="/brokers/ids/1 on the new session")
    wait_until(lambda: owner("/controller") == new_session and owner("/consumers/coordinator") == new_session,
               what="controller and coordinator re-elected")
    assert [r.broker_id for r in b.brokers()] == [1] and b.controller_id() == 1 and b.coordinator_id() == 1
    recovered = time.monotonic() - started

    # Every watch was called once more with the current state...
    for name, recorder in [("brokers", brokers), ("controller", controller), ("features", features),
                           ("topics", topics)]:
        recorder.wait_count(before[name] + 1)
    brokers.wait_for(lambda regs: [r.broker_id for r in regs] == [1])
    controller.wait_for(lambda c: c == 1)
    assert features.last == (0, {"f": 1}) and list(topics.last) == ["t"]
    # ... and is armed on the new session.
    b.set_finalized_features({"f": 2}, expected_epoch=0)
    features.wait_for(lambda s: s == (1, {"f": 2}))
    b.add_partitions("t", {1: (1,)})
    topics.wait_for(lambda t: len(t["t"].partitions) == 2)
    b.set_entity_config("ips/5.6.7.8", {"connection_creation_rate": "1"})
    configs.wait_for(lambda path: path == "ips/5.6.7.8")
    b.register_broker(registration(2))
    brokers.wait_for(lambda regs: [r.broker_id for r in regs] == [1, 2])

    # Durable state is intact.
    assert a.entity_config("ips/1.2.3.4") == {"connection_creation_rate": "10"}
    assert a.offsets("g") == {("t", 0): 9}
    assert recovered < 10


def test_partition_states_watch_is_rearmed_and_catches_up_after_session_loss(
        open_store: Any, zk_connect: str) -> None:
    from kafkapy.store import PartitionState

    a: ZooKeeperStore = open_store()
    b: ZooKeeperStore = open_store()
    b.create_topic("t", {0: (1,), 1: (1,)})
    b.set_partition_state("t", 0, PartitionState(1, 0, (1,)), -1)
    states = Recorder()
    a.watch_partition_states(states)
    states.wait_for(lambda s: list(s) == [("t", 0)])
    old_session = a.client.client_id[0]
    a.client.stop()  # a is away (its session ends) ...
    b.set_partition_state("t", 0, PartitionState(2, 1, (2,)), 0)  # ... while a state moves
    b.set_partition_state("t", 1, PartitionState(1, 0, (1,)), -1)  # ... and one is created
    a.client.start(timeout=10)
    assert a.client.client_id[0] != old_session
    states.wait_for(lambda s: s.get(("t", 0)) == PartitionState(2, 1, (2,), 0, 1) and ("t", 1) in s)
    b.set_partition_state("t", 1, PartitionState(3, 1, (3,)), 0)  # and the watch is armed again
    states.wait_for(lambda s: s.get(("t", 1)) == PartitionState(3, 1, (3,), 0, 1))


def test_config_changes_missed_during_session_loss_are_delivered(open_store: Any, zk_connect: str) -> None:
    a: ZooKeeperStore = open_store()
    b: ZooKeeperStore = open_store()
    configs = Recorder()
    a.watch_entity_configs(configs)
    a.client.stop()  # a is away...
    b.set_entity_config("users/alice", {"producer_byte_rate": "1"})  # ...while this is posted
    a.client.start(timeout=10)  # kazoo's stop() ended the session: this is a new one
    configs.wait_for(lambda path: path == "users/alice")


def test_server_restart_keeps_the_session(private_zookeeper_server: Any) -> None:
    # ZooKeeper 3.9 accepts connections before it runs: one arriving then is refused ("ZooKeeperServer
    # not running"), but closing it throws (a NullPointerException: no database yet), so the socket
    # stays open and unanswered. kazoo, as ZooKeeper's Java client, waits out its handshake for the
    # session timeout divided by the number of hosts: with one host, the whole session, which the
    # server has meanwhile expired (about once in ten restarts). The server listed three times
    # leaves the client two thirds of its session to try again; a server of its own loads its
    # database in a moment, where the shared one holds the whole run's znodes.
    server = private_zookeeper_server
    connect = ",".join([server.connect] * 3) + server.chroot().removeprefix(server.connect)
    a = ZooKeeperStore(connect, session_timeout_ms=30000, connection_timeout_ms=10000)
    b = ZooKeeperStore(connect, session_timeout_ms=6000, connection_timeout_ms=10000)
    try:
        a.start()
        a.register_broker(registration(1))
        a.set_entity_config("ips/1.2.3.4", {"connection_creation_rate": "10"})
        features = Recorder()
        a.watch_features(features)
        session = a.client.client_id[0]
        server.restart()
        wait_until(lambda: a.client.connected, what="reconnection", timeout=40.0)
        assert a.client.client_id[0] == session, server.log_tail()  # the server's log: when and why
        assert [r.broker_id for r in a.brokers()] == [1]
        assert a.entity_config("ips/1.2.3.4") == {"connection_creation_rate": "10"}
        b.start()
        b.set_finalized_features({"f": 1})
        features.wait_for(lambda s: s == (0, {"f": 1}))
    finally:
        a.close()
        b.close()


# --- failures ----------------------------------------------------------------------------------------

def test_unreachable_zookeeper_fails_clearly_within_the_timeout() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = ZooKeeperStore(f"127.0.0.1:{port}/kafka", session_timeout_ms=6000, connection_timeout_ms=1000)
    started = time.monotonic()
    with pytest.raises(StoreError, match=rf"cannot connect to ZooKeeper at 127.0.0.1:{port} within 1000 ms"):
        store.start()
    assert 0.9 < time.monotonic() - started < 3


def test_timeouts_follow_kafka_defaults() -> None:
    assert ZooKeeperStore("zk:2181").session_timeout_ms == 18000
    assert ZooKeeperStore("zk:2181").connection_timeout_ms == 18000
    assert ZooKeeperStore("zk:2181", session_timeout_ms=6000).connection_timeout_ms == 6000
    assert ZooKeeperStore("zk:2181", connection_timeout_ms=500).connection_timeout_ms == 500


@pytest.mark.parametrize("chroot", ["/bad//chroot", "/trailing/", "/a/../b", "/"])
def test_invalid_chroot_is_named(zookeeper: str, chroot: str) -> None:
    with pytest.raises(StoreError, match="chroot") as info:
        ZooKeeperStore(zookeeper + chroot)
    assert repr(chroot) in str(info.value)


def test_missing_chroot_is_created(zk_connect: str, zookeeper: str) -> None:
    chroot = zk_connect[len(zookeeper):] + "/deeper/kafka"
    with ZooKeeperStore(zookeeper + chroot, connection_timeout_ms=10000) as store:
        store.register_broker(registration(1))
    root = KazooClient(hosts=zookeeper)
    root.start(timeout=10)
    try:
        assert root.exists(chroot + "/brokers/ids") is not None
        assert root.exists(chroot + "/cluster/id") is not None
    finally:
        root.stop()
        root.close()


def test_chroot_that_cannot_be_created_is_named(zk_connect: str, raw: KazooClient) -> None:
    raw.create("/ephemeral", b"", ephemeral=True)  # ephemeral nodes cannot have children
    with pytest.raises(StoreError, match=r"cannot create the ZooKeeper chroot '/t\w+/ephemeral/kafka'"):
        ZooKeeperStore(zk_connect + "/ephemeral/kafka", connection_timeout_ms=10000).start()


@pytest.mark.parametrize(("path", "data", "read", "problem"), [
    ("/feature", b'{"version":99,"status":1,"features":{}}', lambda s: s.finalized_features(),
     "unknown version 99"),
    ("/feature", b"\xff\xfe", lambda s: s.finalized_features(), "invalid JSON"),
    ("/brokers/topics/t", b'{"version":4,"partitions":{}}', lambda s: s.add_partitions("t", {1: (1,)}),
     "unknown version 4"),
    ("/controller", b"[]", lambda s: s.controller_id(), "not a JSON object"),
    ("/cluster/id", b'{"version":"9","id":"x"}', lambda s: ZooKeeperStore(s.connect).start(),
     "unknown version '9'"),
    ("/config/ips/1.2.3.4", b'{"version":1,"config":', lambda s: s.entity_config("ips/1.2.3.4"),
     "invalid JSON"),
    ("/consumers/coordinator", b"me", lambda s: s.coordinator_id(), "not a broker id"),
    ("/latest_producer_id_block", b'{"version":2}', lambda s: s.allocate_producer_id_block(1),
     "unknown version 2"),
    ("/latest_producer_id_block", b'{"version":1,"broker":1,"block_start":"x","block_end":"9"}',
     lambda s: s.allocate_producer_id_block(1), "malformed producer id block"),
    ("/latest_producer_id_block", b"{", lambda s: s.allocate_producer_id_block(1), "invalid JSON"),
])
def test_corrupt_znode_error_names_the_path(store: ZooKeeperStore, raw: KazooClient, path: str, data: bytes,
                                            read: Any, problem: str) -> None:
    if raw.exists(path):
        raw.set(path, data)
    else:
        raw.create(path, data, makepath=True)
    with pytest.raises(CorruptMetadata) as info:
        read(store)
    assert info.value.path == store.chroot + path
    assert str(info.value).startswith(f"{store.chroot}{path}: ")
    assert problem in str(info.value)


# One corrupt child of each list read: (path, data, the read, what it returns with only the good child).
_GOOD = b'{"version":1,"config":{"consumer_byte_rate":"1"}}'
_LIST_READS = [
    ("/brokers/ids/9", b"{not json", lambda s: s.brokers(), "invalid JSON"),
    ("/brokers/ids/9", b'{"version":6,"host":"h"}', lambda s: s.brokers(), "unknown version 6"),
    ("/brokers/ids/nine", b"{}", lambda s: s.brokers(), "not a broker id"),
    ("/brokers/topics/bad", b'{"version":4,"partitions":{}}', lambda s: s.topics(), "unknown version 4"),
    ("/brokers/topics/bad", b'{"version":3,"partitions":[1]}', lambda s: s.topics(), "malformed topic"),
    ("/config/users/bad", b'{"version":2,"config":{}}', lambda s: s.entity_configs("users"),
     "unknown version 2"),
    ("/config/ips/9.9.9.9", b"\xff", lambda s: s.entity_configs("ips"), "invalid JSON"),
    ("/config/clients/bad", b'{"version":1}', lambda s: s.entity_configs("clients"), "no config object"),
    ("/config/brokers/7", b"[", lambda s: s.entity_configs("brokers"), "invalid JSON"),
    ("/config/users/u/clients/bad", b"{", lambda s: s.entity_configs("users/clients"), "invalid JSON"),
    ("/consumers/g/offsets/t/1", b"forty-two", lambda s: s.offsets("g"), "not a decimal number"),
    ("/consumers/g/offsets/t/x", b"1", lambda s: s.offsets("g"), "not a partition number"),
    ("/consumers/g/owners/t/1", b"\xff\xfe", lambda s: s.owners("g"), "not UTF-8"),
    ("/consumers/g/members/bad", b'{"session_timeout_ms":"9"}', lambda s: s.members("g"),
     "session_timeout_ms is not an integer"),
]


def _good_children(store: ZooKeeperStore, path: str) -> None:
    """One readable child beside the corrupt one, written the store's way."""
    if path.startswith("/brokers/ids"):
        store.register_broker(registration(1))
    elif path.startswith("/brokers/topics"):
        store.create_topic("good", {0: (1,)})
    elif path.startswith("/config/users/u/clients"):
        store.set_entity_config("users/u/clients/good", {"consumer_byte_rate": "1"})
    elif path.startswith("/config"):
        kind = path.split("/")[2]
        store.set_entity_config(f"{kind}/{'1' if kind == 'brokers' else 'good'}", {"consumer_byte_rate": "1"})
    elif "/offsets/" in path:
        store.commit_offsets("g", {("t", 0): 42})
    elif "/owners/" in path:
        store.set_owners("g", {("t", 0): "c-1"})
    else:
        store.set_members("g", {"c-1": 6000})


@pytest.mark.parametrize(("path", "data", "read", "problem"), _LIST_READS)
def test_list_read_skips_a_corrupt_child_and_logs_it_once(store: ZooKeeperStore, raw: KazooClient, path: str,
                                                          data: bytes, read: Any, problem: str,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Issue 14: one corrupt znode must not hide the readable ones; it is logged once, naming its path."""
    caplog.set_level(logging.ERROR, logger="kafkapy.store.zookeeper")
    _good_children(store, path)
    good = read(store)
    assert good
    raw.create(path, data, makepath=True)
    assert read(store) == good
    assert read(store) == good  # a re-read (as every watch does) logs nothing new
    full = store.chroot + path
    logged = [r.getMessage() for r in caplog.records if full in r.getMessage()]
    assert len(logged) == 1 and problem in logged[0] and logged[0].startswith(f"skipping {full}: "), logged
    if problem != "not a partition number":  # there the name is wrong, whatever the content
        # Corrupt in another way: that is news, logged again.
        raw.set(path, data + b" ")
        assert read(store) == good
        assert len([r for r in caplog.records if full in r.getMessage()]) == 2


def test_watches_skip_a_corrupt_child(store: ZooKeeperStore, raw: KazooClient) -> None:
    """A watch started while a corrupt child is present gets the readable ones at once."""
    raw.create("/brokers/ids/9", b"{not json", makepath=True)
    raw.create("/brokers/topics/bad", b"{", makepath=True)
    store.register_broker(registration(1))
    store.create_topic("good", {0: (1,)})
    brokers, topics = Recorder(), Recorder()
    store.watch_brokers(brokers)
    store.watch_topics(topics)
    assert [r.broker_id for r in brokers.wait_count(1)[0]] == [1]
    assert list(topics.wait_count(1)[0]) == ["good"]
    store.create_topic("later", {0: (1,)})
    topics.wait_for(lambda view: sorted(view) == ["good", "later"])


def test_watch_on_corrupt_znode_logs_and_survives(store: ZooKeeperStore, raw: KazooClient,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="kafkapy.store.zookeeper")
    brokers, configs = Recorder(), Recorder()
    store.watch_brokers(brokers)
    store.watch_entity_configs(configs)
    store.register_broker(registration(1))
    brokers.wait_for(lambda regs: len(regs) == 1)
    raw.create("/brokers/ids/99", b"{corrupt")
    raw.create("/config/changes/config_change_", b"{corrupt", sequence=True)
    wait_until(lambda: f"{store.chroot}/brokers/ids/99: invalid JSON" in caplog.text, what="broker error")
    wait_until(lambda: f"{store.chroot}/config/changes/config_change_" in caplog.text, what="change error")
    # The store and its watches carry on.
    store.set_entity_config("ips/1.2.3.4", {"connection_creation_rate": "1"})
    configs.wait_for(lambda path: path == "ips/1.2.3.4")
    raw.set("/brokers/ids/99", b'{"version":4,"host":null,"port":-1,"jmx_port":-1,"timestamp":"1",'
                               b'"endpoints":["PLAINTEXT://h:1"],"listener_security_protocol_map":'
                               b'{"PLAINTEXT":"PLAINTEXT"},"rack":null}')
    brokers.wait_for(lambda regs: [r.broker_id for r in regs] == [1, 99])
    assert store.controller_id() == 1


def test_old_change_notifications_are_purged(store: ZooKeeperStore, raw: KazooClient,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkapy.store import zookeeper

    monkeypatch.setattr(zookeeper, "CHANGE_EXPIRATION_S", 1.0)  # Kafka's is 15 minutes
    configs = Recorder()
    store.watch_entity_configs(configs)
    store.set_entity_config("ips/1.1.1.1", {"connection_creation_rate": "1"})
    configs.wait_count(1)
    time.sleep(1.5)
    store._last_purge.clear()  # purges run at most once a minute (per queue)
    store.set_entity_config("ips/2.2.2.2", {"connection_creation_rate": "1"})
    configs.wait_count(2)
    wait_until(lambda: raw.get_children("/config/changes") == ["config_change_0000000001"],
               what="the old notification to be purged, the new one kept")


def test_re_registration_waits_for_the_old_node_to_go(open_store: Any, raw: KazooClient,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """After a session loss the old session's /brokers/ids/<id> may linger; the store waits for it to
    go (woken by a ZooKeeper watch) and registers at once, or gives up with an error at its deadline."""
    store = open_store(session_timeout_ms=1000)  # the deadline is twice the session timeout
    store.register_broker(registration(5))
    for held_for in (0.3, None):
        raw.delete("/brokers/ids/5")
        raw.create("/brokers/ids/5", b"{}", ephemeral=True)  # "the old session's" node
        if held_for is not None:
            threading.Timer(held_for, raw.delete, args=("/brokers/ids/5",)).start()
        started = time.monotonic()
        store._reregister()
        took = time.monotonic() - started
        owner = raw.exists("/brokers/ids/5").ephemeralOwner
        if held_for is not None:
            assert held_for <= took < held_for + 0.5  # woken by the deletion, not a poll's next turn
            assert owner == store.client.client_id[0]
        else:
            assert took >= 1.5 and owner == raw.client_id[0]
            assert f"{store.chroot}/brokers/ids/5 is held by another session" in caplog.text


def test_partition_states_written_by_kafka_are_read_and_a_corrupt_one_skipped(zk_connect: str) -> None:
    from kafkapy.store import PartitionState

    with ZooKeeperStore(zk_connect) as store:
        store.create_topic("t", {0: (1, 2), 1: (2,)})
        zk = store.client
        # Kafka 3.x writes version 2 with leader_recovery_state when a leader recovers
        zk.create("/brokers/topics/t/partitions/0/state", json.dumps(
            {"controller_epoch": 7, "leader": 2, "version": 2, "leader_epoch": 12, "isr": [2],
             "leader_recovery_state": 1}).encode(), makepath=True)
        zk.create("/brokers/topics/t/partitions/1/state", b"{not json", makepath=True)
        assert store.partition_states() == {("t", 0): PartitionState(2, 12, (2,), 7, 0)}
        moved = store.set_partition_state("t", 0, PartitionState(1, 13, (1,), 7), 0)
        assert moved.partition_epoch == 1
        assert json.loads(zk.get("/brokers/topics/t/partitions/0/state")[0]) == {
            "controller_epoch": 7, "leader": 1, "version": 1, "leader_epoch": 13, "isr": [1]}


# --- ACLs at Kafka's paths -----------------------------------------------------------------------

def test_acl_znodes_and_notifications_are_kafkas(store: ZooKeeperStore, raw: KazooClient) -> None:
    from kafkapy.store.base import NO_ACL_VERSION, AclResource, StoredAcl

    read = StoredAcl("User:alice", "Allow", "Read", "*")
    store.set_resource_acls(AclResource("LITERAL", "Topic", "orders"), frozenset({read}), NO_ACL_VERSION)
    store.set_resource_acls(AclResource("PREFIXED", "TransactionalId", "tx-"),
                            frozenset({StoredAcl("User:*", "Deny", "IdempotentWrite", "10.0.0.1")}),
                            NO_ACL_VERSION)
    assert read_json(raw, "/kafka-acl/Topic/orders") == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    assert read_json(raw, "/kafka-acl-extended/prefixed/TransactionalId/tx-") == {"version": 1, "acls": [
        {"principal": "User:*", "permissionType": "Deny", "operation": "IdempotentWrite",
         "host": "10.0.0.1"}]}
    [literal] = raw.get_children("/kafka-acl-changes")
    assert literal.startswith("acl_changes_") and literal[len("acl_changes_"):].isdigit()
    assert raw.get(f"/kafka-acl-changes/{literal}")[0] == b"TOPIC:orders"  # LiteralAclChangeStore
    [extended] = raw.get_children("/kafka-acl-extended-changes")
    assert read_json(raw, f"/kafka-acl-extended-changes/{extended}") == {
        "version": 1, "resourceType": "TRANSACTIONAL_ID", "name": "tx-", "patternType": "PREFIXED"}


def test_acls_written_as_kafka_writes_them_are_read(store: ZooKeeperStore, raw: KazooClient) -> None:
    """Nodes and notifications made by Kafka itself (here: by hand, in its format) are read, and a
    corrupt node is skipped without hiding the others."""
    from kafkapy.store.base import AclResource, StoredAcl

    seen = Recorder()
    store.watch_acl_changes(seen)
    raw.create("/kafka-acl/Group/billing", json.dumps({"version": 1, "acls": [
        {"host": "*", "permissionType": "Deny", "operation": "Read", "principal": "User:bob"}]}).encode(),
        makepath=True)
    raw.create("/kafka-acl/Topic/broken", b"{not json", makepath=True)
    raw.create("/kafka-acl-changes/acl_changes_", b"GROUP:billing", sequence=True, makepath=True)
    billing = AclResource("LITERAL", "Group", "billing")
    assert seen.wait_for(lambda resource: resource == billing) == billing
    assert store.acls() == {billing: frozenset({StoredAcl("User:bob", "Deny", "Read", "*")})}
