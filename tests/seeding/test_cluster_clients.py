"""A cluster in one process, seeding, snapshots and reset, seen by real clients: confluent-kafka
(librdkafka), kafka-python and kcat against ``Broker(brokers=3)`` and ``kafka_cluster``."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from quick_clients import KAFKA_PYTHON_CLIENT, KCAT_CONSUMER

from kafkapy.embedded import Broker, member_config
from kafkapy.testing import wait_until

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
TIMEOUT_S = 20
FAST_METADATA = {"topic.metadata.refresh.interval.ms": 500, "retry.backoff.ms": 50,
                 "reconnect.backoff.max.ms": 200, "socket.timeout.ms": 5000}


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition to leader, as librdkafka's Metadata reads it."""
    from confluent_kafka.admin import AdminClient

    described = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=TIMEOUT_S)
    return {p.id: p.leader for p in described.topics[topic].partitions.values()}


def user_topics(bootstrap: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=TIMEOUT_S)
    return {name for name in listed.topics if not name.startswith("__")}


def produce(bootstrap: str, topic: str, values: list[tuple[int, bytes]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all", **FAST_METADATA})
    failures: list[Any] = []
    for partition, value in values:
        producer.produce(topic, key=value, value=value, partition=partition,  # keyed: compacted topics too
                         on_delivery=lambda err, _msg: failures.append(err) if err else None)
    assert producer.flush(TIMEOUT_S) == 0
    assert failures == []


def consume_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[tuple[int, int, bytes]]:
    """``count`` records (partition, offset, value) read from the start of every partition."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         **FAST_METADATA})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            got.append((message.partition(), message.offset(), message.value()))
    finally:
        consumer.close()
    return sorted(got)


# --- the cluster ----------------------------------------------------------------------------------

def test_member_configs_count_ids_and_ports_up_from_the_given_ones() -> None:
    assert member_config({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://:9093"}, 2) == {
        "broker.id": 2, "listeners": "PLAINTEXT://127.0.0.1:9094,SSL://:9095"}
    assert member_config({"broker.id": 10, "listeners": "PLAINTEXT://127.0.0.1:0",
                          "advertised.listeners": "PLAINTEXT://kafka:19092"}, 1) == {
        "broker.id": 11, "listeners": "PLAINTEXT://127.0.0.1:0", "advertised.listeners": "PLAINTEXT://kafka:19093"}


def test_a_cluster_with_log_dirs_gives_each_broker_a_directory_of_its_own(tmp_path: Path) -> None:
    """`kafkapy serve --brokers 3 --override log.dirs=...` (Broker(brokers=3) with log.dirs): every
    broker opened the same directories, and the second found the first's meta.properties and
    refused to start. A log dir is one broker's, so each takes broker-<id> under each of them."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    assert member_config({"broker.id": 4, "log.dirs": ",".join(map(str, dirs))}, 1)["log.dirs"] == \
        f"{dirs[0] / 'broker-5'},{dirs[1] / 'broker-5'}"
    for _ in range(2):  # and again over the same directories, as a restart would
        with Broker({"log.dirs": ",".join(map(str, dirs)), "num.partitions": 2}, brokers=2) as cluster:
            cluster.seed({"spread": {"partitions": 2, "records": [{"value": "v", "partition": 1}]}})
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("*/*/meta.properties")) == [
        "a/broker-0/meta.properties", "a/broker-1/meta.properties",
        "b/broker-0/meta.properties", "b/broker-1/meta.properties"]


def test_three_brokers_each_lead_a_partition_and_a_client_reads_all(kafka_cluster: Broker) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = kafka_cluster.bootstrap_servers
    assert len(bootstrap.split(",")) == 3 and [b.broker_id for b in kafka_cluster.brokers] == [0, 1, 2]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [created] = admin.create_topics([NewTopic("spread", 3, 3)]).values()
    created.result(TIMEOUT_S)
    brokers = admin.list_topics(timeout=TIMEOUT_S).brokers
    assert sorted(brokers) == [0, 1, 2]
    assert {b.port for b in brokers.values()} == {int(a.rpartition(":")[2]) for a in bootstrap.split(",")}
    assert sorted(wait_until(lambda: leaders(bootstrap, "spread")).values()) == [0, 1, 2]
    values = [(i % 3, b"v%d" % i) for i in range(30)]
    produce(bootstrap, "spread", values)
    got = consume_all(bootstrap, "spread", 3, 30)
    assert sorted((p, v) for p, _, v in got) == sorted(values)
    # the records landed in the one set of logs every broker shares, each batch from its leader
    assert sorted((r.partition, r.value) for r in kafka_cluster.records("spread")) == sorted(values)


def test_a_broker_goes_down_its_partitions_move_and_it_comes_back(kafka_cluster: Broker) -> None:
    from confluent_kafka import ElectionType, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    kafka_cluster.seed({"moving": {"partitions": 3, "replication_factor": 3}})
    first = kafka_cluster.brokers[0].bootstrap_servers  # stays up throughout
    before = leaders(first, "moving")
    assert sorted(before.values()) == [0, 1, 2]
    produce(first, "moving", [(p, b"a%d" % p) for p in range(3)])
    kafka_cluster.stop_broker(1)
    assert len(kafka_cluster.bootstrap_servers.split(",")) == 2
    with pytest.raises(RuntimeError, match="not started"):
        kafka_cluster.brokers[1].records("moving")
    assert kafka_cluster.brokers[1].broker_id == 1  # known while it is down
    moved = wait_until(lambda: (found := leaders(first, "moving")) and 1 not in found.values() and found)
    assert all(leader in (0, 2) for leader in moved.values())
    produce(first, "moving", [(p, b"b%d" % p) for p in range(3)])
    kafka_cluster.start_broker(1)  # on its old port: librdkafka reconnects to the address it knows
    # Back as each partition's preferred leader by ElectLeaders, as kafka-leader-election.sh asks,
    # where the controller's own rebalance would come FIRST_REBALANCE_CHECK_S (5 s) of wall time
    # later (tests/topics/test_leaders_stay.py runs that one on the virtual clock).
    admin = AdminClient({"bootstrap.servers": first})
    wanted = [TopicPartition("moving", p) for p, leader in before.items() if leader == 1]

    def elected() -> bool:
        try:
            admin.elect_leaders(ElectionType.PREFERRED, wanted).result(timeout=TIMEOUT_S)
        except KafkaException:
            return False  # broker 1 not yet back in the partition's ISR
        return leaders(first, "moving") == before
    assert wait_until(elected)
    produce(kafka_cluster.bootstrap_servers, "moving", [(p, b"c%d" % p) for p in range(3)])
    got = consume_all(kafka_cluster.bootstrap_servers, "moving", 3, 9)
    stages = (b"a", b"b", b"c")
    assert got == [(p, o, b"%s%d" % (stage, p)) for p in range(3) for o, stage in enumerate(stages)]


def test_kafka_python_reads_on_while_its_leader_goes_down() -> None:
    from kafka import KafkaConsumer, TopicPartition

    with Broker(brokers=3) as cluster:
        cluster.seed({"kp": {"partitions": 1, "replication_factor": 3,
                             "records": [{"value": f"a{i}", "partition": 0} for i in range(5)]}})
        leader = cluster.runtime.cluster.leadership("kp", 0)[0]  # type: ignore[union-attr,index]
        other = next(m for m in cluster.brokers if m.broker_id != leader)
        consumer = KafkaConsumer(bootstrap_servers=other.bootstrap_servers, enable_auto_commit=False,
                                 request_timeout_ms=TIMEOUT_S * 1000, retry_backoff_ms=50,
                                 metadata_max_age_ms=500, reconnect_backoff_max_ms=200, **KAFKA_PYTHON_CLIENT)
        try:
            consumer.assign([TopicPartition("kp", 0)])
            consumer.seek(TopicPartition("kp", 0), 0)
            got = [m.value for m in _poll(consumer, 5)]
            cluster.stop_broker([m.broker_id for m in cluster.brokers].index(leader))
            cluster.seed({"kp": {"records": [{"value": f"b{i}", "partition": 0} for i in range(5)]}})
            got += [m.value for m in _poll(consumer, 5)]
        finally:
            consumer.close()
        assert got == [b"a%d" % i for i in range(5)] + [b"b%d" % i for i in range(5)]


def _poll(consumer: Any, count: int) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            got.extend(batch)
    return got


# --- seeding ----------------------------------------------------------------------------------------

SEED = {"greetings": {"partitions": 3, "config": {"cleanup.policy": "compact"}, "records": [
    {"key": "k0", "value": "hello", "headers": {"lang": "en"}, "partition": 0, "timestamp": 1700000000000},
    {"key": "k1", "value": "hola", "partition": 1, "timestamp": 1700000000001},
    *({"key": f"key-{i}", "value": f"by-key-{i}"} for i in range(12))]}}


@pytest.mark.kafka_seed(SEED)
@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_seeded_records_are_read_back_by_kcat_and_confluent(kafka_cluster: Broker) -> None:
    from confluent_kafka import Producer

    assert KCAT is not None
    out = subprocess.run([KCAT, "-b", kafka_cluster.bootstrap_servers, "-C", "-t", "greetings", "-e", "-q",
                          "-J", *KCAT_CONSUMER], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    read = [json.loads(line) for line in out.splitlines()]
    assert len(read) == 14
    first = next(r for r in read if r["key"] == "k0")
    assert (first["partition"], first["offset"], first["payload"], first["ts"], first["headers"]) == (
        0, 0, "hello", 1700000000000, ["lang", "en"])
    got = consume_all(kafka_cluster.bootstrap_servers, "greetings", 3, 14)
    assert sorted(v for _, _, v in got) == sorted(r["payload"].encode() for r in read)
    # keyed records sit where a Java-compatible producer (librdkafka's murmur2) puts the same keys
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "partitioner": "murmur2"})
    placed: dict[str, int] = {}
    for i in range(12):
        producer.produce("greetings", key=f"key-{i}", value=b"again",
                         on_delivery=lambda _, msg: placed.__setitem__(msg.key().decode(), msg.partition()))
    assert producer.flush(TIMEOUT_S) == 0
    assert placed == {r["key"]: r["partition"] for r in read if r["key"].startswith("key-")}
    assert kafka_cluster.snapshot().topics["greetings"]["config"] == {"cleanup.policy": "compact"}


@pytest.mark.kafka_seed({"one": {"records": [{"value": "x"}]}})
def test_the_marker_seeds_the_single_broker_too(kafka_broker: Broker) -> None:
    assert [r.value for r in kafka_broker.records("one")] == [b"x"]


def test_bad_seed_data_fails_before_anything_is_made(kafka_broker: Broker) -> None:
    from kafkapy.seeding import SeedError

    with pytest.raises(SeedError, match="record 0: unknown field"):
        kafka_broker.seed({"ok": {}, "bad": {"records": [{"vlaue": 1}]}})
    assert "ok" not in kafka_broker.runtime.cluster.topics  # type: ignore[union-attr]
    with pytest.raises(SeedError, match="INVALID_CONFIG"):
        kafka_broker.seed({"badconfig": {"config": {"cleanup.policy": "sometimes"}}})
    # topic names as a list (or one name) where a mapping goes: an AttributeError from the
    # create path before, on 'str' having no 'name'
    for data in (["orders"], "orders"):
        with pytest.raises(SeedError, match="seed data must be a mapping of topic name"):
            kafka_broker.seed(data)  # type: ignore[arg-type]


# --- snapshots and reset ----------------------------------------------------------------------------

def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             request_timeout_ms=TIMEOUT_S * 1000, **KAFKA_PYTHON_CLIENT)
    try:
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    finally:
        consumer.close()


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, as librdkafka's admin reads them (OffsetFetch, all partitions)."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    return {(tp.topic, tp.partition): tp.offset for tp in future.result(TIMEOUT_S).topic_partitions}


def groups(bootstrap: str) -> list[str]:
    """The groups kafka-python's admin lists (ListGroups to every broker)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000,
                             **KAFKA_PYTHON_CLIENT)
    try:
        listed = admin.list_groups()
    finally:
        admin.close()
    return sorted(g["group_id"] for g in listed)


def test_snapshot_reset_restore_bring_topics_records_and_offsets_back(kafka_cluster: Broker) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    kafka_cluster.seed(SEED)
    produce(bootstrap, "greetings", [(2, b"produced")])
    commit(bootstrap, "readers", "greetings", {0: 1, 2: 3})
    snapshot = kafka_cluster.snapshot()
    assert snapshot.offsets == {"readers": {("greetings", 0): 1, ("greetings", 2): 3}}
    before = [(r.partition, r.key, r.value, r.headers, r.timestamp)
              for r in kafka_cluster.records("greetings")]

    kafka_cluster.reset()
    assert user_topics(bootstrap) == set()
    assert groups(bootstrap) == []
    assert kafka_cluster.records("greetings") == []

    kafka_cluster.restore(snapshot)
    after = [(r.partition, r.key, r.value, r.headers, r.timestamp)
             for r in kafka_cluster.records("greetings")]
    assert after == before and len(after) == 15
    assert user_topics(bootstrap) == {"greetings"}
    assert committed(bootstrap, "readers") == {("greetings", 0): 1, ("greetings", 2): 3}


def test_reset_empties_a_topic_made_again_under_the_same_name(kafka_broker: Broker) -> None:
    kafka_broker.seed({"again": {"records": [{"value": "old"}]}})
    kafka_broker.reset()
    kafka_broker.seed({"again": {"records": [{"value": "new"}]}})
    assert [(r.offset, r.value) for r in kafka_broker.records("again")] == [(0, b"new")]
    assert consume_all(kafka_broker.bootstrap_servers, "again", 1, 1) == [(0, 0, b"new")]


def test_the_async_forms_on_the_callers_loop() -> None:
    async def scenario() -> tuple[list[bytes], list[str]]:
        cluster = Broker(brokers=2)
        await cluster.start()
        try:
            with pytest.raises(RuntimeError, match="await the \\*_async form"):
                cluster.seed({"a": {}})
            await cluster.seed_async({"a": {"partitions": 2, "records": [{"value": "1"}, {"value": "2"}]}})
            values = sorted(r.value or b"" for r in cluster.records("a"))
            await cluster.stop_broker_async(0)
            await cluster.start_broker_async(0)
            await cluster.reset_async()
            return [*values], sorted(cluster.runtime.cluster.topics)  # type: ignore[union-attr]
        finally:
            await cluster.stop()
    assert asyncio.run(scenario()) == ([b"1", b"2"], [])


# One broker for a whole module, reset between tests: what a suite with a session broker does.

@pytest.fixture(scope="module")
def shared_broker() -> Iterator[Broker]:
    with Broker(brokers=3) as broker:
        yield broker


@pytest.fixture
def fresh(shared_broker: Broker) -> Iterator[Broker]:
    yield shared_broker
    shared_broker.reset()


def test_reset_between_tests_first_leaves_a_topic_and_a_group(fresh: Broker) -> None:
    fresh.seed({"left-behind": {}})
    commit(fresh.bootstrap_servers, "left-group", "left-behind", {0: 1})
    assert user_topics(fresh.bootstrap_servers) == {"left-behind"}
    assert groups(fresh.bootstrap_servers) == ["left-group"]


def test_reset_between_tests_second_finds_nothing_left(fresh: Broker) -> None:
    assert user_topics(fresh.bootstrap_servers) == set()
    assert groups(fresh.bootstrap_servers) == []
    assert committed(fresh.bootstrap_servers, "left-group") == {}


def test_a_cluster_on_zookeeper_shares_it_and_its_brokers_register_there(zk_connect: str) -> None:
    """With zookeeper.connect each broker opens its own session, as separate Kafka brokers do;
    Metadata lists the three, a topic spreads over them, and one going down moves its leadership.
    The logs are each broker's own there (no shared memory store), so only metadata is checked."""
    from kazoo.client import KazooClient

    with Broker({"zookeeper.connect": zk_connect, "broker.id": 5}, brokers=3) as cluster:
        assert [b.broker_id for b in cluster.brokers] == [5, 6, 7]
        zk = KazooClient(hosts=zk_connect)
        zk.start()
        try:
            assert sorted(zk.get_children("/brokers/ids")) == ["5", "6", "7"]
        finally:
            zk.stop()
            zk.close()  # its wake-up socket pair
        cluster.seed({"zk-topic": {"partitions": 3, "replication_factor": 3}})
        assert sorted(leaders(cluster.bootstrap_servers, "zk-topic").values()) == [5, 6, 7]
        cluster.stop_broker(1)
        assert 6 not in wait_until(lambda: leaders(cluster.bootstrap_servers, "zk-topic")).values()
        cluster.reset()
        # every broker learns of the deletions through its own ZooKeeper watch: converges, not at once
        wait_until(lambda: user_topics(cluster.bootstrap_servers) == set(), what="no topic left after reset")


def test_a_cluster_that_cannot_bind_stops_the_brokers_it_started() -> None:
    import socket

    from kafkapy.server.config import ConfigError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port - 1))
            except OSError:
                pytest.skip("the port below the taken one is in use too")
        cluster = Broker({"listeners": f"PLAINTEXT://127.0.0.1:{port - 1}"}, brokers=2)
        with pytest.raises(ConfigError, match="cannot listen"):
            cluster.__enter__()
    # broker 0 had bound port - 1: it is closed again, so the port is free
    with socket.socket() as again:
        again.bind(("127.0.0.1", port - 1))
    with pytest.raises(ConfigError, match="brokers must be at least 1"):
        Broker(brokers=0)
