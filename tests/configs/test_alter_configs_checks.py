"""The checks Kafka makes of an AlterConfigs or IncrementalAlterConfigs request before it looks at
a resource's type (ConfigAdminManager.preprocess), and of a TOPIC resource's name
(ZkAdminManager.alterTopicConfigs), over the wire: refused resources change nothing."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
ONCE = "Each resource must appear at most once."


@pytest.fixture
def conn() -> Iterator[KafkaSocket]:
    with Broker({"broker.id": 1}) as b, KafkaSocket(b.bootstrap_servers) as c:
        body = {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                            "configs": [{"name": "retention.ms", "value": "1000"}]}],
                "timeout_ms": 5000, "validate_only": False}
        assert c.call(ApiKey.CREATE_TOPICS, 5, body).body["topics"][0]["error_code"] == ErrorCode.NONE
        yield c


def incremental(conn: KafkaSocket, *resources: tuple[int, str, list[tuple[str, int, str | None]]]
                ) -> list[tuple[str, int, str | None]]:
    body = {"validate_only": False, "resources": [
        {"resource_type": kind, "resource_name": name,
         "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]}
        for kind, name, ops in resources]}
    return [(r["resource_name"], r["error_code"], r["error_message"])
            for r in conn.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body).body["responses"]]


def legacy(conn: KafkaSocket, *resources: tuple[int, str, list[tuple[str, str | None]]]
           ) -> list[tuple[str, int, str | None]]:
    body = {"validate_only": False, "resources": [
        {"resource_type": kind, "resource_name": name,
         "configs": [{"name": n, "value": v} for n, v in entries]}
        for kind, name, entries in resources]}
    return [(r["resource_name"], r["error_code"], r["error_message"])
            for r in conn.call(ApiKey.ALTER_CONFIGS, 1, body).body["responses"]]


def overrides(conn: KafkaSocket) -> dict[str, Any]:
    body = {"resources": [{"resource_type": TOPIC, "resource_name": "t", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}
    [result] = conn.call(ApiKey.DESCRIBE_CONFIGS, 4, body).body["results"]
    return {e["name"]: e["value"] for e in result["configs"] if e["config_source"] == 1}


def test_a_resource_named_twice_refuses_both_entries(conn: KafkaSocket) -> None:
    assert incremental(conn, (TOPIC, "t", [("retention.ms", SET, "2000")]),
                       (TOPIC, "t", [("segment.ms", SET, "3000")]),
                       (BROKER, "1", [("max.connections", SET, "77")])) == [
        ("t", ErrorCode.INVALID_REQUEST, ONCE), ("t", ErrorCode.INVALID_REQUEST, ONCE), ("1", 0, None)]
    assert legacy(conn, (TOPIC, "t", []), (TOPIC, "t", [("retention.ms", "5")])) == [
        ("t", ErrorCode.INVALID_REQUEST, ONCE), ("t", ErrorCode.INVALID_REQUEST, ONCE)]
    assert overrides(conn) == {"retention.ms": "1000"}


def test_a_null_value_refuses_the_resource(conn: KafkaSocket) -> None:
    # AlterConfigs: a null value does not drop the key, it refuses the whole set (the overrides stay)
    nulls = [("segment.ms", "5000"), ("retention.ms", None), ("flush.ms", None)]
    assert legacy(conn, (TOPIC, "t", nulls)) == [
        ("t", ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms, flush.ms")]
    assert legacy(conn, (TOPIC, "t", [("segment.ms", "1"), ("segment.ms", "2")])) == [
        ("t", ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")]
    # IncrementalAlterConfigs: every operation but DELETE needs a value
    assert incremental(conn, (TOPIC, "t", [("cleanup.policy", APPEND, None), ("retention.ms", DELETE, None),
                                           ("segment.ms", SET, None)])) == [
        ("t", ErrorCode.INVALID_REQUEST, "Null value not supported for : cleanup.policy, segment.ms")]
    assert overrides(conn) == {"retention.ms": "1000"}


def test_append_and_subtract_need_a_list_config(conn: KafkaSocket) -> None:
    for op, verb in ((APPEND, "append"), (SUBTRACT, "subtract")):
        refusal = f"Config value {verb} is not allowed for config key: "
        assert incremental(conn, (TOPIC, "t", [("retention.ms", op, "5")]),
                           (BROKER, "1", [("max.connections", op, "5")])) == [
            ("t", ErrorCode.INVALID_CONFIG, refusal + "retention.ms"),
            ("1", ErrorCode.INVALID_CONFIG, refusal + "max.connections")]
    assert incremental(conn, (TOPIC, "t", [("cleanup.policy", APPEND, "compact")])) == [("t", 0, None)]
    now = overrides(conn)
    assert (now["retention.ms"], set(now["cleanup.policy"].split(","))) == ("1000", {"delete", "compact"})


def test_the_default_topic_resource_is_refused(conn: KafkaSocket) -> None:
    message = "Default topic resources are not allowed."
    assert incremental(conn, (TOPIC, "", [("retention.ms", SET, "5")])) == [
        ("", ErrorCode.INVALID_REQUEST, message)]
    assert legacy(conn, (TOPIC, "", [("retention.ms", "5")])) == [("", ErrorCode.INVALID_REQUEST, message)]


def test_append_to_a_broker_list_starts_from_kafkas_default_not_server_properties() -> None:
    """Kafka applies APPEND/SUBTRACT to the resource's dynamic config, a key not set there taken at
    its ConfigDef default (ConfigAdminManager.prepareIncrementalConfigs): the static
    log.cleanup.policy=compact is not where it starts."""
    with Broker({"broker.id": 1, "log.cleanup.policy": "compact"}) as b, \
            KafkaSocket(b.bootstrap_servers) as c:
        assert incremental(c, (BROKER, "1", [("log.cleanup.policy", APPEND, "delete")])) == [("1", 0, None)]
        assert b.store is not None and b.store.entity_config("brokers/1") == {"log.cleanup.policy": "delete"}
        assert incremental(c, (BROKER, "", [("log.cleanup.policy", APPEND, "compact")])) == [("", 0, None)]
        assert b.store.entity_config("brokers/<default>") == {"log.cleanup.policy": "delete,compact"}


def test_an_unknown_topic_is_described_by_its_code_and_altered_with_kafkas_message(conn: KafkaSocket) -> None:
    body = {"resources": [{"resource_type": TOPIC, "resource_name": "nope", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}
    [result] = conn.call(ApiKey.DESCRIBE_CONFIGS, 4, body).body["results"]
    assert (result["error_code"], result["error_message"]) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
    assert incremental(conn, (TOPIC, "nope", [("retention.ms", SET, "5")])) == [
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.")]


@pytest.mark.parametrize(("kind", "described", "altered"), [
    (16, "Client metrics subscription name must not be empty", "Subscription name can't be empty"),
    (32, "Group name must not be empty", "Default group resources are not allowed."),
])
def test_an_empty_name_of_an_owned_type_is_refused_in_kafkas_words(conn: KafkaSocket, kind: int,
                                                                  described: str, altered: str) -> None:
    """CLIENT_METRICS (16) and GROUP (32), on a broker with the default modules: DescribeConfigs
    answers ConfigHelper's message, IncrementalAlterConfigs the one of Kafka's check of the new
    config (ClientMetricsConfigs, ControllerConfigurationValidator)."""
    body = {"resources": [{"resource_type": kind, "resource_name": "", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}
    [result] = conn.call(ApiKey.DESCRIBE_CONFIGS, 4, body).body["results"]
    assert (result["error_code"], result["error_message"]) == (ErrorCode.INVALID_REQUEST, described)
    refused = incremental(conn, (kind, "", [("metrics", SET, "*")]))
    assert refused == [("", ErrorCode.INVALID_REQUEST, altered)]
