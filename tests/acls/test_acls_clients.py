"""Real clients against a broker with the ACL authorizer on a SASL_PLAINTEXT listener (PLAIN).

``admin`` is a super user (super.users); ``alice`` and ``bob`` start with no rights at all
(allow.everyone.if.no.acl.found is false, Kafka's default). The admins of confluent-kafka and
kafka-python create, describe and delete ACLs; producers and consumers meet them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kafkapy.embedded import Broker
from kafkapy.testing import BrokerFactory

TIMEOUT_S = 10
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a" '
        'user_admin="a" user_alice="alice-secret" user_bob="bob-secret";')
ACL_BROKER = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
              "authorizer.class.name": "acl", "super.users": "User:admin"}
PASSWORDS = {"admin": "a", "alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture
def acl_broker(kafka_broker_factory: BrokerFactory) -> Broker:
    return kafka_broker_factory(ACL_BROKER)


def confluent(broker: Broker, user: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user], **extra}


def kafka_python(broker: Broker, user: str) -> dict[str, Any]:
    return {"bootstrap_servers": broker.bootstrap_servers, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": user, "sasl_plain_password": PASSWORDS[user],
            "request_timeout_ms": TIMEOUT_S * 1000}


def eventually(check: Callable[[], bool], timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.05)


def create_topic(broker: Broker, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(confluent(broker, "admin"))
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT_S)


def confluent_grant(broker: Broker, *bindings: Any) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(confluent(broker, "admin"))
    for future in admin.create_acls(list(bindings), request_timeout=TIMEOUT_S).values():
        future.result(TIMEOUT_S)


def binding(resource_type: str, name: str, principal: str, operation: str, permission: str = "ALLOW",
            pattern: str = "LITERAL") -> Any:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBinding(ResourceType[resource_type], name, ResourcePatternType[pattern], principal, "*",
                      AclOperation[operation], AclPermissionType[permission])


def produce_error(broker: Broker, user: str, topic: str) -> Any:
    """The delivery error of one message (None when delivered), by confluent-kafka."""
    from confluent_kafka import Producer

    reports: list[Any] = []
    producer = Producer(confluent(broker, user, **{"message.timeout.ms": 5000}))
    producer.produce(topic, b"v", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(TIMEOUT_S)
    assert reports, "no delivery report"
    return reports[0]


# --- the admin APIs -----------------------------------------------------------------------------

def test_confluent_kafka_creates_describes_and_deletes_acls(acl_broker: Broker) -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(confluent(acl_broker, "admin"))
    read = binding("TOPIC", "orders", "User:alice", "READ")
    write_prefixed = binding("TOPIC", "orders-", "User:alice", "WRITE", pattern="PREFIXED")
    deny_group = binding("GROUP", "billing", "User:bob", "READ", permission="DENY")
    for future in admin.create_acls([read, write_prefixed, deny_group], request_timeout=TIMEOUT_S).values():
        assert future.result(TIMEOUT_S) is None

    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    described = admin.describe_acls(everything, request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    assert sorted(described) == sorted([read, write_prefixed, deny_group])

    # MATCH: what applies to the topic orders-eu (the prefixed ACL), not the literal "orders"
    match = AclBindingFilter(ResourceType.TOPIC, "orders-eu", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(match, request_timeout=TIMEOUT_S).result(TIMEOUT_S) == [write_prefixed]

    alice_topics = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, "User:alice", None,
                                    AclOperation.ANY, AclPermissionType.ANY)
    deleted = admin.delete_acls([alice_topics], request_timeout=TIMEOUT_S)[alice_topics].result(TIMEOUT_S)
    assert sorted(deleted) == sorted([read, write_prefixed])
    assert admin.describe_acls(everything, request_timeout=TIMEOUT_S).result(TIMEOUT_S) == [deny_group]


def test_confluent_kafka_invalid_binding_is_refused(acl_broker: Broker) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(confluent(acl_broker, "admin"))
    # A principal must be Type:name (Kafka's parseKafkaPrincipal; the broker answers INVALID_REQUEST).
    bad = binding("TOPIC", "t", "alice-without-type", "READ")
    with pytest.raises(KafkaException) as refused:
        admin.create_acls([bad], request_timeout=TIMEOUT_S)[bad].result(TIMEOUT_S)
    assert refused.value.args[0].name() == "INVALID_REQUEST"


def test_kafka_python_creates_describes_and_deletes_acls(acl_broker: Broker) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    admin = KafkaAdminClient(**kafka_python(acl_broker, "admin"))
    try:
        prefixed = ResourcePattern(ResourceType.GROUP, "app-", ACLResourcePatternType.PREFIXED)
        acl = ACL(principal="User:alice", host="*", operation=ACLOperation.READ,
                  permission_type=ACLPermissionType.ALLOW, resource_pattern=prefixed)
        created = admin.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        any_group = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                              permission_type=ACLPermissionType.ANY,
                              resource_pattern=ResourcePatternFilter(ResourceType.GROUP, None,
                                                                     ACLResourcePatternType.ANY))
        described, error = admin.describe_acls(any_group)
        assert error.errno == 0
        assert [(a.principal, a.operation, a.resource_pattern.resource_name,
                 a.resource_pattern.pattern_type) for a in described] == [
            ("User:alice", ACLOperation.READ, "app-", ACLResourcePatternType.PREFIXED)]
        [(_, deleted, error)] = admin.delete_acls([any_group])
        assert error.errno == 0
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in deleted] == [
            ("User:alice", ACLOperation.READ, "app-")]
        assert admin.describe_acls(any_group)[0] == []
    finally:
        admin.close()


def test_a_user_without_alter_on_the_cluster_may_not_create_acls(acl_broker: Broker) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(confluent(acl_broker, "alice"))
    grant = binding("TOPIC", "orders", "User:alice", "ALL")
    with pytest.raises(KafkaException) as refused:
        admin.create_acls([grant], request_timeout=TIMEOUT_S)[grant].result(TIMEOUT_S)
    assert refused.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"


def test_without_the_acl_authorizer_the_apis_answer_security_disabled(
        kafka_broker_factory: BrokerFactory) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    broker = kafka_broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    grant = binding("TOPIC", "orders", "User:alice", "READ")
    with pytest.raises(KafkaException) as refused:
        admin.create_acls([grant], request_timeout=TIMEOUT_S)[grant].result(TIMEOUT_S)
    assert refused.value.args[0].name() == "SECURITY_DISABLED"


# --- enforcement --------------------------------------------------------------------------------

def test_produce_needs_write_and_an_acl_grants_it(acl_broker: Broker) -> None:
    topic = f"acl-produce-{uuid.uuid4().hex[:6]}"
    create_topic(acl_broker, topic)
    error = produce_error(acl_broker, "alice", topic)
    assert error is not None and error.name() == "TOPIC_AUTHORIZATION_FAILED"
    confluent_grant(acl_broker, binding("TOPIC", topic, "User:alice", "WRITE"))
    assert produce_error(acl_broker, "alice", topic) is None


def test_a_deny_beats_an_allow(acl_broker: Broker) -> None:
    topic = f"acl-deny-{uuid.uuid4().hex[:6]}"
    create_topic(acl_broker, topic)
    confluent_grant(acl_broker, binding("TOPIC", "*", "User:*", "ALL"),
                    binding("TOPIC", topic, "User:bob", "WRITE", permission="DENY"))
    assert produce_error(acl_broker, "alice", topic) is None  # the wildcard allow
    error = produce_error(acl_broker, "bob", topic)
    assert error is not None and error.name() == "TOPIC_AUTHORIZATION_FAILED"


def test_a_prefixed_acl_grants_the_topics_it_prefixes(acl_broker: Broker) -> None:
    create_topic(acl_broker, "team-a.orders")
    create_topic(acl_broker, "team-b.orders")
    confluent_grant(acl_broker, binding("TOPIC", "team-a.", "User:alice", "WRITE", pattern="PREFIXED"))
    assert produce_error(acl_broker, "alice", "team-a.orders") is None
    error = produce_error(acl_broker, "alice", "team-b.orders")
    assert error is not None and error.name() == "TOPIC_AUTHORIZATION_FAILED"


def test_a_consumer_without_read_on_its_group_gets_the_group_error(acl_broker: Broker) -> None:
    from confluent_kafka import Consumer

    topic = f"acl-group-{uuid.uuid4().hex[:6]}"
    create_topic(acl_broker, topic)
    confluent_grant(acl_broker, binding("TOPIC", topic, "User:alice", "READ"))
    consumer = Consumer(confluent(acl_broker, "alice", **{"group.id": "not-alices",
                                                          "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    try:
        errors = []
        deadline = time.monotonic() + TIMEOUT_S
        while not errors and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is not None:
                errors.append(message.error())
        assert errors and errors[0].name() == "GROUP_AUTHORIZATION_FAILED", errors
    finally:
        consumer.close()


def test_kafka_python_consumer_reads_once_its_group_and_topic_are_granted(acl_broker: Broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"acl-kp-{uuid.uuid4().hex[:6]}"
    create_topic(acl_broker, topic)
    confluent_grant(acl_broker, binding("TOPIC", topic, "User:alice", "WRITE"),
                    binding("TOPIC", topic, "User:alice", "READ"),
                    binding("GROUP", "alices", "User:alice", "READ"))
    producer = KafkaProducer(**kafka_python(acl_broker, "alice"))
    try:
        producer.send(topic, b"granted").get(timeout=TIMEOUT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, group_id="alices", auto_offset_reset="earliest",
                             consumer_timeout_ms=TIMEOUT_S * 1000, **kafka_python(acl_broker, "alice"))
    try:
        assert bytes(next(consumer).value) == b"granted"
        consumer.commit()
    finally:
        consumer.close()
