"""kafka-python's KafkaAdminClient on an embedded broker, as the admin-client tests open it (tests/ is
on sys.path through its conftest)."""

from __future__ import annotations

from collections.abc import Iterator

from kafka.admin import KafkaAdminClient, NewTopic

from kafkapy.embedded import Broker

TIMEOUT_S = 20


def admin_of(broker: Broker) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=TIMEOUT_S * 1000)


def create_topic(broker: Broker, name: str, partitions: int) -> None:
    admin = admin_of(broker)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def open_admin(broker: Broker) -> Iterator[KafkaAdminClient]:
    """The body of a module's ``admin`` fixture: a client for the test, closed after it."""
    client = admin_of(broker)
    yield client
    client.close()
