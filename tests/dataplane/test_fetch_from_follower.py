"""KIP-392: consumers read from a follower in their own rack. With Kafka's
``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector`` the leader
answers a consumer's Fetch v11+ that names a ``rack_id`` with ``preferred_read_replica`` (an
in-sync replica in that rack, no records), and the follower then serves the consumer's fetches from
its copy of the log: in an in-process cluster, the shared log itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.config import ConfigError

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
RACKS = ["az0", "az1", "az2"]
TIMEOUT_S = 20


@pytest.fixture
def cluster() -> Iterator[Broker]:
    config = {"replica.selector.class": RACK_AWARE,
              "observer.class.names": "kafkapy.observers.RequestHistory"}
    with Broker(config, brokers=3, racks=RACKS) as running:
        yield running


def create_led_by_broker_0(cluster: Broker, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[0, 1, 2]])])[topic].result(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:  # until every broker knows the topic (no Fetch: they are counted)
        known = []
        for member in cluster.brokers:
            with SimpleClient(member.bootstrap_servers) as client:
                [found] = client.request(ApiKey.METADATA, 12, {"topics": [{"name": topic}]})["topics"]
            known.append(found["error_code"] == ErrorCode.NONE and found["partitions"][0]["leader_id"] == 0)
        if all(known):
            return
        time.sleep(0.05)
    raise AssertionError(f"{topic} not known to every broker within {TIMEOUT_S} s")


def produce(cluster: Broker, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(TIMEOUT_S) == 0


def fetch(client: SimpleClient, topic: str, version: int, *, rack: str, max_wait_ms: int = 0) -> Any:
    body: dict[str, Any] = {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic,
                    "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    if version >= 11:
        body["rack_id"] = rack
    [partition] = client.request(ApiKey.FETCH, version, body)["responses"][0]["partitions"]
    return partition


def test_a_consumer_reads_from_the_follower_in_its_rack(cluster: Broker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    create_led_by_broker_0(cluster, "r")
    produce(cluster, "r", [b"v%d" % i for i in range(10)])
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "unused",
                         "client.rack": "az2", "enable.auto.commit": False})
    got: list[bytes | None] = []
    try:
        consumer.assign([TopicPartition("r", 0, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
                if len(got) == 10:  # more while it reads from the follower
                    produce(cluster, "r", [b"v%d" % i for i in range(10, 20)])
    finally:
        consumer.close()
    assert got == [b"v%d" % i for i in range(20)]
    served = {m.broker_id: [h for h in m.history() if h.api_name == "Fetch"] for m in cluster.brokers}
    assert len(served[2]) >= 2 and not served[1]  # az2's follower served it, az1's never did
    assert len(served[0]) <= 2  # the leader only pointed it there (and perhaps once more)


def fetches_served(cluster: Broker) -> dict[int, int]:
    return {m.broker_id: sum(1 for h in m.history() if h.api_name == "Fetch") for m in cluster.brokers}


def test_kafka_python_reads_from_the_follower_in_its_rack(cluster: Broker) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPythonPartition

    create_led_by_broker_0(cluster, "kp")
    produce(cluster, "kp", [b"v%d" % i for i in range(5)])
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, client_rack="az1",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got: list[bytes] = []
    try:
        consumer.assign([KafkaPythonPartition("kp", 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 5 and time.monotonic() < deadline:
            got.extend(r.value for records in consumer.poll(timeout_ms=200).values() for r in records)
    finally:
        consumer.close()
    assert got == [b"v%d" % i for i in range(5)]
    served = fetches_served(cluster)
    assert served[1] >= 1 and served[2] == 0  # az1's follower, never az2's


def test_aiokafka_reads_from_the_follower_in_its_rack(cluster: Broker) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioPartition

    create_led_by_broker_0(cluster, "aio")
    produce(cluster, "aio", [b"v%d" % i for i in range(5)])

    async def consume() -> list[bytes | None]:
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, client_rack="az2",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([AioPartition("aio", 0)])
            got: list[bytes | None] = []
            async with asyncio.timeout(TIMEOUT_S):
                while len(got) < 5:
                    for records in (await consumer.getmany(timeout_ms=200)).values():
                        got.extend(r.value for r in records)
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(consume()) == [b"v%d" % i for i in range(5)]
    served = fetches_served(cluster)
    assert served[2] >= 1 and served[1] == 0


def test_the_leader_names_the_follower_in_the_consumers_rack(cluster: Broker) -> None:
    create_led_by_broker_0(cluster, "p")
    produce(cluster, "p", [b"x"])
    with SimpleClient(cluster.brokers[0].bootstrap_servers) as leader:
        pointed = fetch(leader, "p", 11, rack="az1")
        own_rack = fetch(leader, "p", 11, rack="az0")
        no_rack = fetch(leader, "p", 11, rack="")
        elsewhere = fetch(leader, "p", 11, rack="az9")
    assert pointed["preferred_read_replica"] == 1 and pointed["high_watermark"] == 1
    assert list(pointed["records"] or []) == []
    for read_here in (own_rack, no_rack, elsewhere):
        assert read_here["preferred_read_replica"] == -1
        assert [r.value for batch in read_here["records"] for r in batch] == [b"x"]


def test_a_follower_serves_consumers_from_fetch_v11_and_wakes_with_the_leaders_appends(
        cluster: Broker) -> None:
    create_led_by_broker_0(cluster, "w")
    with SimpleClient(cluster.brokers[1].bootstrap_servers) as follower:
        assert fetch(follower, "w", 10, rack="")["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        answered: list[Any] = []
        waiting = threading.Thread(target=lambda: answered.append(
            fetch(follower, "w", 11, rack="az1", max_wait_ms=15_000)))
        started = time.monotonic()
        waiting.start()
        time.sleep(0.3)
        produce(cluster, "w", [b"late"])
        waiting.join(TIMEOUT_S)
    [partition] = answered
    assert [r.value for batch in partition["records"] for r in batch] == [b"late"]
    assert time.monotonic() - started < 10  # woken by the append on broker 0, not by its 15 s wait


def test_without_a_replica_selector_the_leader_serves_everyone() -> None:
    with Broker({}, brokers=3, racks=RACKS) as cluster:
        create_led_by_broker_0(cluster, "n")
        produce(cluster, "n", [b"x"])
        with SimpleClient(cluster.brokers[0].bootstrap_servers) as leader:
            assert fetch(leader, "n", 11, rack="az1")["preferred_read_replica"] == -1


def test_only_kafkas_rack_aware_selector_is_known() -> None:
    with pytest.raises(ConfigError, match=r"replica\.selector\.class"):
        Broker({"replica.selector.class": "com.example.MySelector"})
    with pytest.raises(ConfigError, match="racks"):
        Broker(brokers=3, racks=["a", "b"])
