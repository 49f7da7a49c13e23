"""Patterns clients send cannot stall the broker (kafkapy/server/patterns.py), on the wire.

``(a+)+$`` against thirty ``a``s and a ``b`` backtracks for minutes in Python's ``re``, and the
broker runs every request on one loop. Each test sends such a pattern where a client can (a
KIP-848 subscription regex from confluent-kafka and from kafkapy's codec, a ListTransactions
pattern, a client-metrics ``match`` set with IncrementalAlterConfigs), has a name for it to chew
on, and checks that another connection is answered within a few seconds meanwhile and that the
pattern's own request gets the right answer. Patterns only a backtracking engine runs get the
API's error for an invalid pattern."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import BrokerFactory, wait_until

CATASTROPHIC = "(a+)+$"
CHEWY = "a" * 30 + "b"  # what makes re backtrack on CATASTROPHIC: 2**30 ways to fail
MATCHING = "aaaa"
PROMPT = 5.0  # seconds: generous; a stalled loop would take minutes
CLIENT_METRICS = 16  # Kafka's ConfigResource.Type

T = TypeVar("T")


def answered_promptly_while(bootstrap: str, request: Callable[[], T]) -> T:
    """``request`` (on its own connection) in a thread; meanwhile another connection's ApiVersions
    must be answered within PROMPT seconds. Returns what ``request`` returned."""
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(request)
        time.sleep(0.2)  # let it reach the broker first; if it comes later, the check is only weaker
        started = time.monotonic()
        with SimpleClient(bootstrap, timeout=PROMPT, client_id="bystander") as other:
            answer = other.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "bystander",
                                                            "client_software_version": "1"})
        assert answer["error_code"] == ErrorCode.NONE
        assert time.monotonic() - started < PROMPT
        return pending.result(timeout=PROMPT)


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1, "offsets.topic.num.partitions": 1,
                 "transaction.state.log.num.partitions": 1}) as running:
        with SimpleClient(running.bootstrap_servers) as client:
            answer = client.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
                {"name": name, "num_partitions": 1, "replication_factor": 1}
                for name in (MATCHING, CHEWY, "other")], "timeout_ms": 5000})
            assert all(t["error_code"] == ErrorCode.NONE for t in answer["topics"])
        yield running


def _coordinator_ready(client: SimpleClient, key: str, key_type: int) -> None:
    wait_until(lambda: client.request(ApiKey.FIND_COORDINATOR, 3, {"key": key, "key_type": key_type}
                                      )["error_code"] == ErrorCode.NONE, what="a coordinator")


def _heartbeat(bootstrap: str, group: str, regex: str) -> Any:
    with SimpleClient(bootstrap) as client:
        return client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
            "group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": 10000, "subscribed_topic_names": None,
            "subscribed_topic_regex": regex, "server_assignor": None, "topic_partitions": []})


def _topic_ids(bootstrap: str) -> dict[str, Any]:
    with SimpleClient(bootstrap) as client:
        answer = client.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False})
    return {t["name"]: t["topic_id"] for t in answer["topics"]}


def test_confluent_kafka_subscribes_with_a_catastrophic_regex_and_the_broker_stays_responsive(
        broker: Broker) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "regex-group",
                         "group.protocol": "consumer"})
    try:
        consumer.subscribe([f"^{CATASTROPHIC}"])  # librdkafka sends it as SubscribedTopicRegex

        def assigned() -> set[str]:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not consumer.assignment():
                consumer.poll(0.2)
            return {tp.topic for tp in consumer.assignment()}

        assert answered_promptly_while(broker.bootstrap_servers, assigned) == {MATCHING}
    finally:
        consumer.close()
    with SimpleClient(broker.bootstrap_servers) as client:
        group = client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
            "group_ids": ["regex-group"], "include_authorized_operations": False})["groups"][0]
    assert all(CATASTROPHIC in m["subscribed_topic_regex"] for m in group["members"])


def test_a_heartbeat_with_a_catastrophic_regex_is_answered_and_assigned(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers) as client:
        _coordinator_ready(client, "g", CoordinatorKeyType.GROUP)
    answer = answered_promptly_while(broker.bootstrap_servers,
                                     lambda: _heartbeat(broker.bootstrap_servers, "g", CATASTROPHIC))
    assert answer["error_code"] == ErrorCode.NONE, answer
    ids = _topic_ids(broker.bootstrap_servers)
    assert [t["topic_id"] for t in answer["assignment"]["topic_partitions"]] == [ids[MATCHING]]


@pytest.mark.parametrize("regex, description", [
    ("(?<=x)y", "invalid or unsupported Perl syntax"),
    (r"(t)\1", "invalid escape sequence"),
    ("t(", "missing closing )"),
    ("t{4294967296}", "invalid repeat count"),
])
def test_a_regex_re2j_refuses_gets_invalid_regular_expression_with_kafkas_message(
        broker: Broker, regex: str, description: str) -> None:
    with SimpleClient(broker.bootstrap_servers) as client:
        _coordinator_ready(client, "g", CoordinatorKeyType.GROUP)
    answer = _heartbeat(broker.bootstrap_servers, "g", regex)
    assert answer["error_code"] == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert answer["error_message"] == f"SubscribedTopicRegex `{regex}` is not a valid regular expression: " \
                                      f"{description}."


def test_list_transactions_with_a_catastrophic_pattern(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers) as client:
        for transactional_id in (MATCHING, CHEWY):
            _coordinator_ready(client, transactional_id, CoordinatorKeyType.TRANSACTION)
            answer = client.request(ApiKey.INIT_PRODUCER_ID, 4, {
                "transactional_id": transactional_id, "transaction_timeout_ms": 60_000,
                "producer_id": -1, "producer_epoch": -1})
            assert answer["error_code"] == ErrorCode.NONE

    def listed(pattern: str) -> Any:
        with SimpleClient(broker.bootstrap_servers) as client:
            return client.request(ApiKey.LIST_TRANSACTIONS, 2, {
                "state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                "transactional_id_pattern": pattern})

    answer = answered_promptly_while(broker.bootstrap_servers, lambda: listed(CATASTROPHIC))
    assert answer["error_code"] == ErrorCode.NONE
    assert [s["transactional_id"] for s in answer["transaction_states"]] == [MATCHING]
    # Valid for Java, but only a backtracking engine runs it: Kafka's answer for an invalid pattern.
    for pattern in ("(?=a)a+", r"(a)\1+", "a{4294967296}", "["):
        assert listed(pattern)["error_code"] == ErrorCode.INVALID_REGULAR_EXPRESSION


@pytest.fixture
def telemetry_broker(kafka_broker_factory: BrokerFactory) -> Broker:
    return kafka_broker_factory({"kafkapy.modules": "telemetry"})


def _set_match(broker: Broker, match: str) -> tuple[int, str | None]:
    with SimpleClient(broker.bootstrap_servers) as client:
        answer = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": CLIENT_METRICS, "resource_name": "subscription", "configs": [
                {"name": "metrics", "config_operation": 0, "value": "org.apache.kafka."},
                {"name": "match", "config_operation": 0, "value": match}]}], "validate_only": False})
    (response,) = answer["responses"]
    return response["error_code"], response["error_message"]


def _subscription(broker: Broker, client_id: str) -> list[str]:
    with SimpleClient(broker.bootstrap_servers, client_id=client_id) as client:
        answer = client.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": None})
    assert answer["error_code"] == ErrorCode.NONE
    return list(answer["requested_metrics"])


def test_a_client_metrics_match_pattern_that_backtracks_cannot_stall_the_broker(
        telemetry_broker: Broker) -> None:
    assert _set_match(telemetry_broker, f"client_id={CATASTROPHIC}") == (ErrorCode.NONE, None)
    # The client chooses its id: here the one the pattern backtracks on.
    requested = answered_promptly_while(telemetry_broker.bootstrap_servers,
                                        lambda: _subscription(telemetry_broker, CHEWY))
    assert requested == []
    assert _subscription(telemetry_broker, MATCHING) == ["org.apache.kafka."]


@pytest.mark.parametrize("pattern", ["(?=a)a", r"(a)\1", "(", "[a-z&&[^b]]"])
def test_a_client_metrics_match_pattern_re2_cannot_run_is_an_invalid_config(telemetry_broker: Broker,
                                                                            pattern: str) -> None:
    assert _set_match(telemetry_broker, f"client_id={pattern}") == (
        ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: client_id={pattern}")
