"""aiokafka's AIOKafkaAdminClient, every call, against a three-broker cluster: topics created
(a bad one refused in the answer), listed, described, grown and deleted; topic and broker configs
altered and described (a broker's resource sent to that broker); each group's coordinator found
(and the transaction coordinator's); groups listed and described, their committed offsets
listed; records deleted up to an offset and to the high watermark.

aiokafka 0.14.0 decodes DescribeGroups v3 answers with its v2 schema (DescribeGroupsRequest_v3's
RESPONSE_TYPE), so a describe_consumer_groups of several groups on one coordinator misreads every
group after the first (the first group's authorized_operations is read as the next one's error
code): the test describes one group per call, which it reads right."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import confluent_kafka
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import OffsetOutOfRangeError
from aiokafka.structs import TopicPartition
from quick_clients import RDKAFKA_CLIENT, warm_transaction_coordinator

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode

TIMEOUT_S = 20
TOPIC = "ledger"
# Their __consumer_offsets partitions (Java hashCode % 50) fall on all three brokers, whatever the
# placement's random start: round-robin leaders differ by partition index mod 3.
GROUPS = ["ga", "gb", "gc", "gd"]
TRANSACTION = 1  # FindCoordinator's key type for a transactional id


@pytest.fixture
def cluster() -> Iterator[Broker]:
    with Broker({"broker.id": 1}, brokers=3) as running:
        yield running


def fill_and_commit(cluster: Broker) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, **RDKAFKA_CLIENT})
    for i in range(30):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % 3)
    assert producer.flush(TIMEOUT_S) == 0
    for i, group in enumerate(GROUPS):
        consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                                             "group.id": group, **RDKAFKA_CLIENT})
        consumer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, 0, 5 + i),
                                 confluent_kafka.TopicPartition(TOPIC, 1, 7)], asynchronous=False)
        consumer.close()


def test_aiokafka_admin_calls_on_three_brokers(cluster: Broker) -> None:
    async def topics_and_configs(admin: AIOKafkaAdminClient) -> None:
        created = await admin.create_topics([NewTopic(TOPIC, 3, 3), NewTopic("broken", -5, 3)])
        assert [(t[0], t[1]) for t in created.topic_errors] == [(TOPIC, ErrorCode.NONE),
                                                                ("broken", ErrorCode.INVALID_PARTITIONS)]
        assert set(await admin.list_topics()) == {TOPIC}
        grown = await admin.create_partitions({TOPIC: NewPartitions(4)})
        assert [(t[0], t[1]) for t in grown.topic_errors] == [(TOPIC, ErrorCode.NONE)]
        [described] = await admin.describe_topics([TOPIC])
        assert described["error_code"] == ErrorCode.NONE
        assert sorted(p["partition"] for p in described["partitions"]) == [0, 1, 2, 3]
        assert all(sorted(p["replicas"]) == [1, 2, 3] for p in described["partitions"])

        await admin.alter_configs([
            ConfigResource(ConfigResourceType.TOPIC, TOPIC, {"retention.ms": "5000"}),
            ConfigResource(ConfigResourceType.BROKER, "2", {"max.connections": "100"})])
        answers = await admin.describe_configs([
            ConfigResource(ConfigResourceType.TOPIC, TOPIC, {"retention.ms": None}),
            ConfigResource(ConfigResourceType.BROKER, "2", {"max.connections": None})])
        entries = {(r[2], r[3]): [(e[0], e[1], e[3]) for e in r[4]] for a in answers for r in a.resources}
        assert entries == {(2, TOPIC): [("retention.ms", "5000", 1)],            # DYNAMIC_TOPIC_CONFIG
                           (4, "2"): [("max.connections", "100", 2)]}           # DYNAMIC_BROKER_CONFIG

    async def groups(admin: AIOKafkaAdminClient) -> None:
        coordinators = {group: await admin.find_coordinator(group) for group in GROUPS}
        assert set(coordinators.values()) == {1, 2, 3}
        assert await admin.find_coordinator("payments", TRANSACTION) in {1, 2, 3}
        assert sorted(await admin.list_consumer_groups()) == sorted((group, "") for group in GROUPS)
        for group in GROUPS:
            [answer] = await admin.describe_consumer_groups([group])
            [(error, name, state, protocol_type, _, members)] = answer.groups
            assert (error, name, state, protocol_type, members) == (ErrorCode.NONE, group, "Empty", "", [])
        for i, group in enumerate(GROUPS):
            offsets = await admin.list_consumer_group_offsets(group)
            assert {tp.partition: o.offset for tp, o in offsets.items()} == {0: 5 + i, 1: 7}
        asked = await admin.list_consumer_group_offsets("ga", partitions=[TopicPartition(TOPIC, 2)])
        assert {tp.partition: o.offset for tp, o in asked.items()} == {2: -1}
        assert await admin.list_consumer_group_offsets("nobody") == {}

    async def records_and_deletes(admin: AIOKafkaAdminClient) -> None:
        deleted = await admin.delete_records({TopicPartition(TOPIC, 0): RecordsToDelete(4),
                                              TopicPartition(TOPIC, 1): RecordsToDelete(-1)})
        # -1: up to the high watermark
        assert deleted == {TopicPartition(TOPIC, 0): 4, TopicPartition(TOPIC, 1): 10}
        with pytest.raises(OffsetOutOfRangeError):
            await admin.delete_records({TopicPartition(TOPIC, 2): RecordsToDelete(11)})
        answer = await admin.delete_topics([TOPIC, "absent"])
        assert [(t[0], t[1]) for t in answer.topic_error_codes] == [
            (TOPIC, ErrorCode.NONE), ("absent", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        assert TOPIC not in await admin.list_topics()

    async def run(step: str) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers,
                                    request_timeout_ms=TIMEOUT_S * 1000)
        await admin.start()
        try:
            await asyncio.wait_for({"topics": topics_and_configs, "groups": groups,
                                    "records": records_and_deletes}[step](admin), TIMEOUT_S * 2)
        finally:
            await admin.close()

    asyncio.run(run("topics"))
    fill_and_commit(cluster)
    warm_transaction_coordinator(cluster.bootstrap_servers)
    asyncio.run(run("groups"))
    asyncio.run(run("records"))
