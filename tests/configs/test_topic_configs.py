"""Topic configs end to end: CreateTopics with configs, DescribeConfigs/AlterConfigs/
IncrementalAlterConfigs on TOPIC resources, from kafka-python's KafkaAdminClient and
confluent-kafka's AdminClient; the topic-configs capability the data plane reads; the znodes
on a real ZooKeeper."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic
from kazoo.client import KazooClient

from kafkapy import Broker
from kafkapy.configs import ConfigsModule
from kafkapy.configs.module import TOPIC_CONFIGS_CAPABILITY
from kafkapy.log import LogConfig

TIMEOUT_S = 10
TIMEOUT_MS = TIMEOUT_S * 1000
# confluent-kafka's ConfigSource values (Kafka's DescribeConfigsResponse.ConfigSource)
DYNAMIC_TOPIC, STATIC, DEFAULT = 1, 4, 5


def eventually(check: Callable[[], bool], timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.05)


def configs_of(broker: Broker) -> ConfigsModule:
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, ConfigsModule))


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": "1", "log.retention.hours": "48", "log.segment.bytes": "2097152"}) as b:
        yield b


@pytest.fixture
def confluent(broker: Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def create(admin: AdminClient, name: str, config: dict[str, str], validate_only: bool = False) -> None:
    futures = admin.create_topics(
        [NewTopic(name, 1, 1, config=config)],
        validate_only=validate_only,
        request_timeout=TIMEOUT_S,
        operation_timeout=TIMEOUT_S,
    )
    futures[name].result(timeout=TIMEOUT_S)


def describe(admin: AdminClient, name: str) -> dict[str, Any]:
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)], request_timeout=TIMEOUT_S)
    result: dict[str, Any] = next(iter(futures.values())).result(timeout=TIMEOUT_S)
    return result


def error_of(call: Callable[[], object]) -> KafkaError:
    with pytest.raises(KafkaException) as caught:
        call()
    error: KafkaError = caught.value.args[0]
    return error


def test_confluent_create_describe_and_alter_a_topics_configs(broker: Broker, confluent: AdminClient) -> None:
    create(confluent, "orders", {"cleanup.policy": "compact", "retention.ms": "3600000"})
    described = describe(confluent, "orders")
    assert described["cleanup.policy"].value == "compact"
    assert described["cleanup.policy"].source == DYNAMIC_TOPIC and not described["cleanup.policy"].is_default
    # Not overridden: the broker's log.segment.bytes (server.properties), then Kafka's default.
    segment = described["segment.bytes"]
    assert segment.value == "2097152" and segment.source == STATIC
    # (confluent-kafka keys synonyms by name, so the STATIC and DEFAULT log.segment.bytes are one here)
    # Kafka's quirk, kept: a synonym list is cut at its first name (log.retention.ms), so the
    # broker's log.retention.hours sets the value but is not reported as its source.
    assert described["retention.ms"].value == "3600000"
    assert (
        described["max.message.bytes"].value == "1048588" and described["max.message.bytes"].source == DEFAULT
    )
    assert describe(confluent, "orders")["message.timestamp.type"].value == "CreateTime"

    # The capability the data plane reads: Kafka's defaults < broker log.* < the topic's overrides.
    configs = configs_of(broker)
    assert broker.runtime is not None
    config = configs.log_config("orders")
    assert config.compacts and not config.deletes and config.retention_ms == 3_600_000
    assert config.segment_bytes == 2097152
    plain = configs.log_config("no-overrides")
    assert plain.retention_ms == 48 * 3_600_000 and plain.segment_bytes == 2097152
    seen: list[tuple[str, LogConfig]] = []
    remove = configs.watch_log_configs(lambda topic, c: seen.append((topic, c)))

    entry = ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET)
    policy = ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND)
    resource = ConfigResource(ResourceType.TOPIC, "orders", incremental_configs=[entry, policy])
    for future in confluent.incremental_alter_configs([resource], request_timeout=TIMEOUT_S).values():
        future.result(timeout=TIMEOUT_S)
    described = describe(confluent, "orders")
    assert (
        described["max.message.bytes"].value == "2000"
        and described["max.message.bytes"].source == DYNAMIC_TOPIC
    )
    assert described["cleanup.policy"].value == "compact,delete"
    eventually(lambda: bool(seen))
    assert seen[-1][0] == "orders" and seen[-1][1].max_message_bytes == 2000 and seen[-1][1].deletes
    assert configs.log_config("orders").max_message_bytes == 2000

    # DELETE goes back to the broker's default; the legacy AlterConfigs replaces the whole set.
    delete = ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)
    resource = ConfigResource(ResourceType.TOPIC, "orders", incremental_configs=[delete])
    for future in confluent.incremental_alter_configs([resource], request_timeout=TIMEOUT_S).values():
        future.result(timeout=TIMEOUT_S)
    assert describe(confluent, "orders")["retention.ms"].value == str(48 * 3_600_000)
    legacy = ConfigResource(ResourceType.TOPIC, "orders", set_config={"segment.ms": "60000"})
    for future in confluent.alter_configs([legacy], request_timeout=TIMEOUT_S).values():
        future.result(timeout=TIMEOUT_S)
    described = describe(confluent, "orders")
    assert described["segment.ms"].value == "60000" and described["max.message.bytes"].source == DEFAULT
    assert configs.log_config("orders") == LogConfig.from_topic_config(
        {"segment.ms": "60000"}, {"log.retention.hours": 48, "log.segment.bytes": 2097152}
    )
    remove()
    count = len(seen)
    legacy = ConfigResource(ResourceType.TOPIC, "orders", set_config={"segment.ms": "70000"})
    for future in confluent.alter_configs([legacy], request_timeout=TIMEOUT_S).values():
        future.result(timeout=TIMEOUT_S)
    time.sleep(0.2)
    assert len(seen) == count  # a removed watcher is not called


def test_invalid_topic_configs_are_invalid_config(broker: Broker, confluent: AdminClient) -> None:
    error = error_of(lambda: create(confluent, "bad", {"segment.bytes": "10"}))
    assert error.code() == KafkaError.INVALID_CONFIG
    assert error.str() == "Invalid value 10 for configuration segment.bytes: Value must be at least 14"
    error = error_of(lambda: create(confluent, "bad", {"no.such.config": "1"}))
    assert (error.code(), error.str()) == (
        KafkaError.INVALID_CONFIG,
        "Unknown topic config name: no.such.config",
    )
    # validate_only checks the configs and creates nothing
    create(confluent, "checked", {"retention.ms": "1000"}, validate_only=True)
    assert "checked" not in confluent.list_topics(timeout=TIMEOUT_S).topics
    error = error_of(
        lambda: create(confluent, "checked", {"message.timestamp.type": "Now"}, validate_only=True)
    )
    assert error.code() == KafkaError.INVALID_CONFIG

    create(confluent, "t", {})
    entry = ConfigEntry("retention.ms", "-7", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, "t", incremental_configs=[entry])
    future = next(iter(confluent.incremental_alter_configs([resource], request_timeout=TIMEOUT_S).values()))
    error = error_of(lambda: future.result(timeout=TIMEOUT_S))
    assert error.code() == KafkaError.INVALID_CONFIG
    assert error.str() == (
        "Invalid config value for resource ConfigResource(type=TOPIC, name='t'): "
        "Invalid value -7 for configuration retention.ms: Value must be at least -1"
    )
    assert describe(confluent, "t")["retention.ms"].source == DEFAULT  # nothing changed
    # APPEND only on list configs (INVALID_CONFIG, as Kafka's prepareIncrementalConfigs); an unknown topic
    entry = ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)
    resource = ConfigResource(ResourceType.TOPIC, "t", incremental_configs=[entry])
    future = next(iter(confluent.incremental_alter_configs([resource], request_timeout=TIMEOUT_S).values()))
    error = error_of(lambda: future.result(timeout=TIMEOUT_S))
    assert (error.code(), error.str()) == (KafkaError.INVALID_CONFIG,
                                           "Config value append is not allowed for config key: retention.ms")
    assert error_of(lambda: describe(confluent, "nope")).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_kafka_python_create_describe_and_alter(broker: Broker) -> None:
    admin = KafkaAdminClient(
        bootstrap_servers=broker.bootstrap_servers,
        client_id="kafkapy-topic-configs",
        request_timeout_ms=TIMEOUT_MS,
        bootstrap_timeout_ms=TIMEOUT_MS,
    )
    try:
        admin.create_topics(
            [KpNewTopic("events", 1, 1, topic_configs={"retention.bytes": "1048576"})], timeout_ms=TIMEOUT_MS
        )
        resource = KpConfigResource(ConfigResourceType.TOPIC, "events")
        described = admin.describe_configs([resource], include_synonyms=True, config_filter="all")["topic"][
            "events"
        ]
        assert described["retention.bytes"]["value"] == "1048576"
        assert described["retention.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert described["segment.bytes"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert [(s["name"], s["source"], s["value"]) for s in described["segment.bytes"]["synonyms"]] == [
            ("log.segment.bytes", "STATIC_BROKER_CONFIG", "2097152"),
            ("log.segment.bytes", "DEFAULT_CONFIG", "1073741824"),
        ]
        assert described["retention.ms"]["synonyms"] == []  # Kafka's cut at log.retention.ms
        result = admin.alter_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, "events", {"retention.ms": "5000"})]
        )
        assert result == {"topic": {"events": "OK"}}
        assert configs_of(broker).log_config("events").retention_ms == 5000
        bad = admin.alter_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, "events", {"cleanup.policy": "shred"})]
        )
        assert bad["topic"]["events"].startswith("[Error 40] InvalidConfigurationError")
        assert configs_of(broker).log_config("events").deletes
    finally:
        admin.close()


def test_topic_configs_on_zookeeper_are_kafkas(zk_connect: str) -> None:
    with (
        Broker({"zookeeper.connect": zk_connect, "broker.id": 1}) as first,
        Broker({"zookeeper.connect": zk_connect, "broker.id": 2}) as second,
    ):
        admin = AdminClient({"bootstrap.servers": first.bootstrap_servers})
        create(admin, "zk-configs", {"retention.ms": "1000"})
        create(admin, "zk-plain", {})
        zk = KazooClient(hosts=zk_connect)
        zk.start(timeout=TIMEOUT_S)
        try:
            assert json.loads(zk.get("/config/topics/zk-configs")[0]) == {
                "version": 1,
                "config": {"retention.ms": "1000"},
            }
            assert json.loads(zk.get("/config/topics/zk-plain")[0]) == {"version": 1, "config": {}}
            # the other broker learns the new topic's config from the store
            eventually(lambda: configs_of(second).log_config("zk-configs").retention_ms == 1000)
            changes = set(zk.get_children("/config/changes"))
            entry = ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
            resource = ConfigResource(ResourceType.TOPIC, "zk-plain", incremental_configs=[entry])
            for future in admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S).values():
                future.result(timeout=TIMEOUT_S)
            (change,) = set(zk.get_children("/config/changes")) - changes
            assert json.loads(zk.get(f"/config/changes/{change}")[0]) == {
                "version": 2,
                "entity_path": "topics/zk-plain",
            }
            eventually(lambda: configs_of(second).log_config("zk-plain").compacts)
            # a config written by hand, as kafka-configs.sh --zookeeper would, reaches both brokers
            zk.set("/config/topics/zk-plain", b'{"version":1,"config":{"segment.bytes":"4096"}}')
            zk.create(
                "/config/changes/config_change_",
                b'{"version":2,"entity_path":"topics/zk-plain"}',
                sequence=True,
            )
            for b in (first, second):
                eventually(lambda b=b: configs_of(b).log_config("zk-plain").segment_bytes == 4096)  # type: ignore[misc]
            for future in admin.delete_topics(["zk-configs"], request_timeout=TIMEOUT_S).values():
                future.result(timeout=TIMEOUT_S)
            eventually(lambda: zk.exists("/config/topics/zk-configs") is None)
        finally:
            zk.stop()
            zk.close()


def test_the_configs_module_provides_topic_configs(broker: Broker) -> None:
    assert TOPIC_CONFIGS_CAPABILITY in ConfigsModule.provides
    configs = configs_of(broker)
    assert configs.log_config("anything") is configs.log_config("anything")  # built once, then cached
    assert configs_of(broker).log_config("anything") == LogConfig.from_topic_config(
        {}, {"log.retention.hours": 48, "log.segment.bytes": 2097152}
    )


def test_describe_versions_types_documentation_and_validate_only(
    broker: Broker, confluent: AdminClient
) -> None:
    from kafkapy.client import SimpleClient
    from kafkapy.protocol.api_keys import ApiKey

    create(confluent, "typed", {"retention.ms": "1000"})
    resource = {"resource_type": 2, "resource_name": "typed", "configuration_keys": None}
    with SimpleClient(broker.bootstrap_servers, TIMEOUT_S) as client:
        body = client.request(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            {"resources": [resource], "include_synonyms": True, "include_documentation": True},
        )
        entries = {e["name"]: e for e in body["results"][0]["configs"]}
        assert (entries["segment.bytes"]["config_type"], entries["retention.ms"]["config_type"]) == (
            3,
            5,
        )  # INT, LONG
        assert (entries["cleanup.policy"]["config_type"], entries["preallocate"]["config_type"]) == (
            7,
            1,
        )  # LIST, BOOLEAN
        assert entries["retention.ms"]["documentation"] and not entries["retention.ms"]["read_only"]
        # v0 has no sources: is_default says whether the value is Kafka's default
        body = client.request(ApiKey.DESCRIBE_CONFIGS, 0, {"resources": [resource]})
        entries = {e["name"]: e for e in body["results"][0]["configs"]}
        assert entries["retention.ms"]["is_default"] is False and entries["preallocate"]["is_default"] is True
        # AlterConfigs with validate_only checks and stores nothing
        alter = {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "typed",
                    "configs": [{"name": "retention.ms", "value": "5"}],
                }
            ],
            "validate_only": True,
        }
        assert client.request(ApiKey.ALTER_CONFIGS, 1, alter)["responses"][0]["error_code"] == 0
        alter["resources"][0]["configs"] = [{"name": "retention.ms", "value": "x"}]  # type: ignore[index]
        assert client.request(ApiKey.ALTER_CONFIGS, 1, alter)["responses"][0]["error_code"] == 40
    assert describe(confluent, "typed")["retention.ms"].value == "1000"
    assert configs_of(broker).log_config("typed").retention_ms == 1000
