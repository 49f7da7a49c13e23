"""ListConfigResources (74): v0 lists client metrics subscriptions (KIP-714's
ListClientMetricsResources), v1 every resource type Kafka 4.1 lists (KIP-1142), through
kafka-python's ``KafkaAdminClient.list_config_resources`` and over the wire."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from test_broker_configs import _request

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC = 32, 16, 8, 4, 2
KAFKAS_ORDER = [GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC]  # ConfigResource types Kafka 4.1 lists


@pytest.fixture
def cluster() -> Iterator[Broker]:
    with Broker({"kafkapy.modules": "telemetry"}, brokers=3) as started:
        yield started


@pytest.fixture
def admin(cluster: Broker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10_000)
    try:
        yield client
    finally:
        client.close()


def _listed(address: str, version: int, types: list[int] | None = None, source: str | None = None
            ) -> tuple[int, list[tuple[int, str]]]:
    body = _request(address, ApiKey.LIST_CONFIG_RESOURCES, version,
                    {"resource_types": types or []}, source)
    return body["error_code"], [(r.get("resource_type", CLIENT_METRICS), r["resource_name"])  # v0: no type
                                for r in body["config_resources"]]


def test_kafka_python_lists_every_type_with_a_config(cluster: Broker, admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("orders", 1, 1), NewTopic("audit", 1, 1)])
    admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, "billing",
                                        configs={"consumer.session.timeout.ms": "50000"})])
    cluster.set_client_metrics("apps", metrics=["org.apache.kafka.producer."])
    listed = admin.list_config_resources()
    assert listed == {
        "group": ["billing"],  # a group with a config, though no member ever joined it
        "client_metrics": ["apps"],
        "broker_logger": ["0", "1", "2"],
        "broker": ["0", "1", "2"],
        "topic": ["audit", "orders"],
    }
    assert admin.list_config_resources(["TOPIC", "GROUP"]) == {"group": ["billing"],
                                                               "topic": ["audit", "orders"]}
    # a group whose configs are all deleted has none left, and is not listed
    admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, "billing",
                                        configs={"consumer.session.timeout.ms": ("DELETE", None)})])
    assert "group" not in admin.list_config_resources(["GROUP"])


def test_kafkas_order_whatever_the_order_asked(cluster: Broker) -> None:
    cluster.set_client_metrics("b", metrics=["x."])
    cluster.set_client_metrics("a", metrics=["*"])
    address = cluster.bootstrap_servers.split(",")[0]
    code, resources = _listed(address, 1, [TOPIC, BROKER, CLIENT_METRICS, TOPIC])
    assert code == ErrorCode.NONE
    assert resources == [(CLIENT_METRICS, "a"), (CLIENT_METRICS, "b"),
                         (BROKER, "0"), (BROKER, "1"), (BROKER, "2")]  # no topics made yet


def test_v0_lists_client_metrics_only(cluster: Broker) -> None:
    cluster.set_client_metrics("apps", metrics=["*"])
    code, resources = _listed(cluster.bootstrap_servers.split(",")[0], 0)
    assert (code, resources) == (ErrorCode.NONE, [(CLIENT_METRICS, "apps")])


@pytest.mark.parametrize("types", [[64], [TOPIC, 1, BROKER], [0]])
def test_a_type_kafka_does_not_list_refuses_the_whole_request(cluster: Broker, types: list[int]) -> None:
    assert _listed(cluster.bootstrap_servers.split(",")[0], 1, types) == (ErrorCode.UNSUPPORTED_VERSION, [])


def test_served_without_the_telemetry_module(kafka_broker: Broker) -> None:
    """As Kafka serves it without a telemetry receiver: there are just no subscriptions."""
    code, resources = _listed(kafka_broker.bootstrap_servers, 1)
    assert code == ErrorCode.NONE
    assert [name for kind, name in resources if kind == BROKER] == [str(kafka_broker.broker_id)]
    assert not [name for kind, name in resources if kind == CLIENT_METRICS]


def test_needs_describe_configs_on_the_cluster() -> None:
    config: dict[str, Any] = {"authorizer.class.name": "allowlist",
                              "allowlist.rules": "*@127.0.0.2:DESCRIBE_CONFIGS"}
    with Broker(config) as broker:
        address = broker.bootstrap_servers
        assert _listed(address, 1) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
        assert _listed(address, 0) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
        code, resources = _listed(address, 1, [BROKER], source="127.0.0.2")
        assert (code, resources) == (ErrorCode.NONE, [(BROKER, str(broker.broker_id))])


@pytest.fixture(scope="module")
def listed_broker() -> Iterator[Broker]:
    with Broker({"kafkapy.modules": "telemetry"}, brokers=2) as started:
        started.seed({"orders": {"partitions": 1}, "audit": {"partitions": 1}})
        started.set_client_metrics("apps", metrics=["*"])
        yield started


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(KAFKAS_ORDER) | st.integers(-128, 127), max_size=6))
def test_any_types_asked_give_kafkas_listing_of_them_or_unsupported_version(
        listed_broker: Broker, types: list[int]) -> None:
    """Whatever int8 types a v1 request names (duplicates, any order, unknown ones): the listing of
    exactly those types (all, for none) in Kafka's order, or UNSUPPORTED_VERSION and nothing when
    one is a type Kafka does not list; the connection is served again afterwards."""
    address = listed_broker.bootstrap_servers.split(",")[0]
    code, resources = _listed(address, 1, types)
    if not set(types) <= set(KAFKAS_ORDER):
        assert (code, resources) == (ErrorCode.UNSUPPORTED_VERSION, [])
        return
    _, everything = _listed(address, 1)
    wanted = set(types) or set(KAFKAS_ORDER)
    assert code == ErrorCode.NONE
    assert resources == [(kind, name) for kind, name in everything if kind in wanted]
    assert [KAFKAS_ORDER.index(kind) for kind, _ in everything] == sorted(
        KAFKAS_ORDER.index(kind) for kind, _ in everything)
    assert {(kind, name) for kind, name in everything} >= {
        (TOPIC, "orders"), (TOPIC, "audit"), (CLIENT_METRICS, "apps"), (BROKER, "0"), (BROKER, "1"),
        (BROKER_LOGGER, "0"), (BROKER_LOGGER, "1")}
