"""CLIENT_METRICS config resources over DescribeConfigs / IncrementalAlterConfigs / AlterConfigs,
as kafka-client-metrics.sh and the admin clients set subscriptions (kafka-python's admin here)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.store import MemoryStore
from kafkapy.testing import BrokerFactory

CLIENT_METRICS = 16  # Kafka's ConfigResource.Type


@pytest.fixture
def broker(kafka_broker_factory: BrokerFactory) -> Broker:
    return kafka_broker_factory({"kafkapy.modules": "telemetry"})


@pytest.fixture
def admin(broker: Broker) -> Iterator[Any]:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10_000)
    try:
        yield client
    finally:
        client.close()


def described(admin: Any, name: str) -> dict[str, str]:
    from kafka.admin import ConfigResource, ConfigResourceType

    answer = admin.describe_configs([ConfigResource(ConfigResourceType.CLIENT_METRICS, name)])
    entries = answer["client_metrics"][name]
    assert all(entry["config_source"] == "DYNAMIC_CLIENT_METRICS_CONFIG" for entry in entries.values())
    return {key: entry["value"] for key, entry in entries.items()}


def test_kafka_python_sets_a_subscription_that_clients_then_get(broker: Broker, admin: Any) -> None:
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

    resource = ConfigResource(ConfigResourceType.CLIENT_METRICS, "producers", configs={
        "metrics": (AlterConfigOp.SET, "org.apache.kafka.producer."),
        "interval.ms": (AlterConfigOp.SET, "1000"), "match": (AlterConfigOp.SET, "client_id=app-.*")})
    admin.alter_configs([resource], raise_on_unknown=False, incremental=True)
    assert described(admin, "producers") == {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000",
                                             "match": "client_id=app-.*"}
    appended = ConfigResource(ConfigResourceType.CLIENT_METRICS, "producers", configs={
        "metrics": (AlterConfigOp.APPEND, "org.apache.kafka.consumer.")})
    admin.alter_configs([appended], raise_on_unknown=False, incremental=True)
    assert described(admin, "producers")["metrics"] == "org.apache.kafka.producer.,org.apache.kafka.consumer."
    with SimpleClient(broker.bootstrap_servers, client_id="app-1") as client:
        answer = client.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": None})
    assert sorted(answer["requested_metrics"]) == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
    assert answer["push_interval_ms"] == 1000
    # Deleting every key removes the subscription, as in Kafka.
    emptied = ConfigResource(ConfigResourceType.CLIENT_METRICS, "producers", configs={
        "metrics": (AlterConfigOp.DELETE, None), "interval.ms": (AlterConfigOp.DELETE, None),
        "match": (AlterConfigOp.DELETE, None)})
    admin.alter_configs([emptied], raise_on_unknown=False, incremental=True)
    assert described(admin, "producers") == {}
    with SimpleClient(broker.bootstrap_servers, client_id="app-2") as client:
        answer = client.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": None})
    assert answer["requested_metrics"] == []


def alter(broker: Broker, name: str, configs: list[dict[str, Any]]) -> tuple[int, str | None]:
    with SimpleClient(broker.bootstrap_servers) as client:
        answer = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": CLIENT_METRICS, "resource_name": name, "configs": configs}],
            "validate_only": False})
    (response,) = answer["responses"]
    return response["error_code"], response["error_message"]


@pytest.mark.parametrize(("name", "config", "code", "message"), [
    ("s", {"interval.ms": "50"}, ErrorCode.INVALID_REQUEST, "interval must be between 100 and 3600000"),
    ("s", {"metric": "x"}, ErrorCode.INVALID_REQUEST, "Unknown client metrics configuration: metric"),
    ("s", {"match": "host=x"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: host=x"),
    # Kafka's ConfigDef cannot read it (a ConfigException): its controller answers INVALID_CONFIG
    ("s", {"interval.ms": "soon"}, ErrorCode.INVALID_CONFIG,
     "Invalid value soon for configuration interval.ms: Not a number of type INT"),
    ("s", {"match": "client_id="}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id="),
    ("s", {"match": "client_id=app,"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: "),
    ("", {"metrics": "*"}, ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"),
])
def test_configs_kafka_refuses_get_its_codes(broker: Broker, name: str, config: dict[str, str],
                                             code: ErrorCode, message: str) -> None:
    ops = [{"name": key, "config_operation": 0, "value": value} for key, value in config.items()]
    error_code, error_message = alter(broker, name, ops)
    assert error_code == code and error_message is not None and message in error_message
    with SimpleClient(broker.bootstrap_servers) as client:  # nothing was stored
        answer = client.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": None})
    assert answer["requested_metrics"] == []


def test_a_description_lists_every_key_whatever_keys_were_asked(broker: Broker) -> None:
    """Kafka's DescribeConfigs of a CLIENT_METRICS resource ignores configuration_keys: every stored
    key comes back."""
    broker.set_client_metrics("apps", metrics=["org.apache.kafka.producer."], interval_ms=1000)
    with SimpleClient(broker.bootstrap_servers) as client:
        answer = client.request(ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": CLIENT_METRICS, "resource_name": "apps",
                           "configuration_keys": ["interval.ms"]}],
            "include_synonyms": False, "include_documentation": False})
    (result,) = answer["results"]
    assert result["error_code"] == ErrorCode.NONE
    assert {entry["name"]: entry["value"] for entry in result["configs"]} == {
        "metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}


def test_a_broker_without_the_telemetry_module_keeps_subscriptions_as_kafka_does() -> None:
    """A Kafka broker serves CLIENT_METRICS resources whether or not a telemetry receiver is
    configured (its ClientMetricsManager is always made): a broker without the telemetry module
    stores, checks, describes, lists and replaces them; a telemetry broker of the same cluster
    then hands the subscription to its clients."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

    store = MemoryStore()
    with Broker({"broker.id": 1}, store=store) as plain:
        admin = KafkaAdminClient(bootstrap_servers=plain.bootstrap_servers, request_timeout_ms=10_000)
        try:
            admin.alter_configs([ConfigResource(ConfigResourceType.CLIENT_METRICS, "apps", configs={
                "metrics": (AlterConfigOp.SET, "org.apache.kafka.producer."),
                "interval.ms": (AlterConfigOp.SET, "1000")})], raise_on_unknown=False, incremental=True)
            assert described(admin, "apps") == {"metrics": "org.apache.kafka.producer.",
                                                "interval.ms": "1000"}
            assert admin.list_config_resources(["CLIENT_METRICS"]) == {"client_metrics": ["apps"]}
        finally:
            admin.close()
        refused = alter(plain, "apps", [{"name": "interval.ms", "config_operation": 0, "value": "50"}])
        assert refused[0] == ErrorCode.INVALID_REQUEST  # Kafka's ClientMetricsConfigs check: nothing stored
        with SimpleClient(plain.bootstrap_servers) as client:  # AlterConfigs replaces the whole set
            answer = client.request(ApiKey.ALTER_CONFIGS, 2, {"resources": [{
                "resource_type": CLIENT_METRICS, "resource_name": "apps",
                "configs": [{"name": "metrics", "value": "*"}]}], "validate_only": False})
            assert answer["responses"][0]["error_code"] == ErrorCode.NONE
        with Broker({"broker.id": 2, "kafkapy.modules": "telemetry"}, store=store) as receiver, \
                SimpleClient(receiver.bootstrap_servers) as client:
            answer = client.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": None})
            assert (answer["requested_metrics"], answer["push_interval_ms"]) == (["*"], 300_000)
