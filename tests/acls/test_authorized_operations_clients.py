"""KIP-430 through real admin clients: confluent-kafka's describe_topics, describe_cluster and
describe_consumer_groups with ``include_authorized_operations``, and kafka-python's admin (which
always asks), against the ACL authorizer over SASL PLAIN users (the fixtures of
test_acls_clients.py) and against a broker without an authorizer. Each answer is exactly what the
ACLs grant, implied operations included; not asked, it is None."""

from __future__ import annotations

from typing import Any

import pytest

from kafkapy.embedded import Broker
from kafkapy.server.operations import SUPPORTED_OPERATIONS, ResourceType, from_bitfield
from kafkapy.testing import BrokerFactory
from tests.acls.test_acls_clients import (
    ACL_BROKER,
    TIMEOUT_S,
    binding,
    confluent,
    confluent_grant,
    create_topic,
    kafka_python,
)

EVERY = {kind: {op.name for op in SUPPORTED_OPERATIONS[kind]}
         for kind in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER)}


def described(config: dict[str, Any], asked: bool) -> dict[str, set[str] | None]:
    """What confluent-kafka's admin reports for topic t, group g and the cluster."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(config)
    topic = admin.describe_topics(TopicCollection(["t"]), include_authorized_operations=asked,
                                  request_timeout=TIMEOUT_S)["t"].result(TIMEOUT_S)
    cluster = admin.describe_cluster(include_authorized_operations=asked,
                                     request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    group = admin.describe_consumer_groups(["g"], include_authorized_operations=asked,
                                           request_timeout=TIMEOUT_S)["g"].result(TIMEOUT_S)
    answers = {"topic": topic.authorized_operations, "cluster": cluster.authorized_operations,
               "group": group.authorized_operations}
    return {what: None if ops is None else {op.name for op in ops} for what, ops in answers.items()}


def offsets_for_group_g(config: dict[str, Any]) -> None:
    """Group g exists (Empty, holding an offset of t), committed by the admin."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(config)  # held while the futures run: a dropped client fails them
    request = [ConsumerGroupTopicPartitions("g", [TopicPartition("t", 0, 1)])]
    for future in admin.alter_consumer_group_offsets(request).values():
        future.result(TIMEOUT_S)


@pytest.fixture
def acl_broker(kafka_broker_factory: BrokerFactory) -> Broker:
    broker = kafka_broker_factory(ACL_BROKER)
    create_topic(broker, "t")
    offsets_for_group_g(confluent(broker, "admin"))
    return broker


def test_confluent_kafka_gets_what_the_acls_grant(acl_broker: Broker) -> None:
    confluent_grant(acl_broker,
                    binding("TOPIC", "t", "User:alice", "READ"),
                    binding("GROUP", "g", "User:alice", "DELETE"),
                    binding("BROKER", "kafka-cluster", "User:alice", "ALTER"),  # confluent's CLUSTER
                    binding("TOPIC", "t", "User:bob", "ALL"),
                    binding("TOPIC", "t", "User:bob", "WRITE", permission="DENY"),
                    binding("GROUP", "g", "User:bob", "READ"),
                    binding("BROKER", "kafka-cluster", "User:bob", "ALTER_CONFIGS"))
    assert described(confluent(acl_broker, "alice"), asked=True) == {
        "topic": {"READ", "DESCRIBE"}, "group": {"DELETE", "DESCRIBE"}, "cluster": {"ALTER", "DESCRIBE"}}
    assert described(confluent(acl_broker, "bob"), asked=True) == {
        "topic": EVERY[ResourceType.TOPIC] - {"WRITE"},  # ALL but the denied WRITE
        "group": {"READ", "DESCRIBE"},
        # ALTER_CONFIGS without DESCRIBE on the cluster: Kafka answers 0 (the raw wire test reads
        # it), which librdkafka reports as no list at all
        "cluster": None}
    assert described(confluent(acl_broker, "admin"), asked=True) == {  # a super user
        "topic": EVERY[ResourceType.TOPIC], "group": EVERY[ResourceType.GROUP],
        "cluster": EVERY[ResourceType.CLUSTER]}
    for user in ("alice", "admin"):
        assert described(confluent(acl_broker, user), asked=False) == {
            "topic": None, "group": None, "cluster": None}


def test_confluent_kafka_without_an_authorizer_gets_every_supported_operation(
        kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory({})
    config = {"bootstrap.servers": broker.bootstrap_servers}
    broker.seed({"t": {"partitions": 1}})
    offsets_for_group_g(config)
    assert described(config, asked=True) == {"topic": EVERY[ResourceType.TOPIC],
                                             "group": EVERY[ResourceType.GROUP],
                                             "cluster": EVERY[ResourceType.CLUSTER]}
    assert described(config, asked=False) == {"topic": None, "group": None, "cluster": None}


def test_kafka_python_admin_gets_what_the_acls_grant(acl_broker: Broker) -> None:
    """kafka-python always asks: describe_topics, describe_cluster and describe_groups decode the
    field to names; describe_topic_partitions hands the bitfield over as it came."""
    from kafka.admin import KafkaAdminClient

    confluent_grant(acl_broker,
                    binding("TOPIC", "t", "User:alice", "ALTER_CONFIGS"),
                    binding("TOPIC", "t", "User:alice", "DELETE"),
                    binding("GROUP", "g", "User:alice", "READ"),
                    binding("BROKER", "kafka-cluster", "User:alice", "DESCRIBE"))
    admin = KafkaAdminClient(**kafka_python(acl_broker, "alice"))
    try:
        (topic,) = admin.describe_topics(["t"])
        topic_ops = {"ALTER_CONFIGS", "DESCRIBE_CONFIGS", "DELETE", "DESCRIBE"}
        assert set(topic["authorized_operations"]) == topic_ops
        (paged,) = admin.describe_topic_partitions(["t"])["topics"]
        assert {op.name for op in from_bitfield(paged["topic_authorized_operations"])} == topic_ops
        assert set(admin.describe_cluster()["authorized_operations"]) == {"DESCRIBE"}
        group = admin.describe_groups(["g"])["g"]
        assert set(group["authorized_operations"]) == {"READ", "DESCRIBE"}
    finally:
        admin.close()
