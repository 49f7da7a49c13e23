"""kafka-python's KafkaAdminClient.reset_configs: a topic's, a broker's and a group's dynamic
configs back to their defaults, one key or all of them, through IncrementalAlterConfigs (DELETE)
and through AlterConfigs (the client sends the other modified keys again, which the broker keeps).

kafka-python 3.0.12 fails a reset of every key when the resource's ``configs`` is None (its
``_get_missing_modified_configs`` iterates it): an empty dict asks the same, and works."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from kafkapy.embedded import Broker

TIMEOUT_S = 20
TOPIC, BROKER, GROUP = ConfigResourceType.TOPIC, ConfigResourceType.BROKER, ConfigResourceType.GROUP
OK = {"topic": {"events": "OK"}}


@pytest.fixture
def admin() -> Iterator[KafkaAdminClient]:
    with Broker({"broker.id": 1}) as broker:
        client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers,
                                  request_timeout_ms=TIMEOUT_S * 1000)
        client.create_topics([NewTopic("events", 1, 1)])
        yield client
        client.close()


def modified(admin: KafkaAdminClient, kind: ConfigResourceType, name: str) -> dict[str, str]:
    """The resource's configs set away from their defaults (kafka-python's default filter)."""
    [(_, described)] = admin.describe_configs([ConfigResource(kind, name)])[kind.name.lower()].items()
    return {key: entry["value"] for key, entry in described.items()}


def test_a_topics_configs_are_reset_one_key_or_all(admin: KafkaAdminClient) -> None:
    changes = {"retention.ms": "60000", "cleanup.policy": "compact", "segment.ms": "100000"}
    assert admin.alter_configs([ConfigResource(TOPIC, "events", configs=changes)]) == OK
    assert modified(admin, TOPIC, "events") == changes

    assert admin.reset_configs([ConfigResource(TOPIC, "events", configs=["retention.ms"])]) == OK
    assert modified(admin, TOPIC, "events") == {"cleanup.policy": "compact", "segment.ms": "100000"}
    # AlterConfigs replaces the whole set: the client sends the keys it keeps.
    assert admin.reset_configs([ConfigResource(TOPIC, "events", configs=["segment.ms"])],
                               incremental=False) == OK
    assert modified(admin, TOPIC, "events") == {"cleanup.policy": "compact"}
    assert admin.reset_configs([ConfigResource(TOPIC, "events", configs={})]) == OK
    assert modified(admin, TOPIC, "events") == {}

    reset = admin.reset_configs([ConfigResource(TOPIC, "absent", configs=["retention.ms"])],
                                raise_on_unknown=False)
    assert reset == {"topic": {"absent": "[Error 3] UnknownTopicOrPartitionError: "
                                         "The topic 'absent' does not exist."}}


def test_a_brokers_and_a_groups_configs_are_reset(admin: KafkaAdminClient) -> None:
    admin.alter_configs([ConfigResource(BROKER, "1", configs={"max.connections": "500"})])
    assert modified(admin, BROKER, "1") == {"max.connections": "500"}
    reset = admin.reset_configs([ConfigResource(BROKER, "1", configs=["max.connections"])])
    assert reset == {"broker": {"1": "OK"}}
    assert modified(admin, BROKER, "1") == {}

    group_changes = {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000"}
    admin.alter_configs([ConfigResource(GROUP, "billing", configs=group_changes)])
    assert modified(admin, GROUP, "billing") == group_changes
    reset = admin.reset_configs([ConfigResource(GROUP, "billing", configs={})])
    assert reset == {"group": {"billing": "OK"}}
    assert modified(admin, GROUP, "billing") == {}
