"""Metadata's answers for topics it does not know, as Kafka's KafkaApis.getTopicMetadata and
AutoTopicCreationManager give them: a coordinator's state topic auto-created in its coordinator's
shape, an invalid name refused whether or not auto-creation is on, CREATE asked for only when the
broker would create; and DescribeCluster's endpoint type."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket


def metadata(conn: KafkaSocket, names: list[str], allow: bool = True, version: int = 9) -> dict[str, Any]:
    body = {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": allow,
            "include_topic_authorized_operations": False}
    return {t["name"]: t for t in conn.call(ApiKey.METADATA, version, body).body["topics"]}


def test_a_state_topic_is_auto_created_in_its_coordinators_shape() -> None:
    config = {"broker.id": 1, "offsets.topic.num.partitions": 7, "transaction.state.log.num.partitions": 3}
    with Broker(config) as b, KafkaSocket(b.bootstrap_servers) as c:
        first = metadata(c, ["__consumer_offsets", "__transaction_state", "plain"])
        assert {n: (t["error_code"], t["is_internal"]) for n, t in first.items()} == {
            "__consumer_offsets": (ErrorCode.LEADER_NOT_AVAILABLE, True),
            "__transaction_state": (ErrorCode.LEADER_NOT_AVAILABLE, True),
            "plain": (ErrorCode.LEADER_NOT_AVAILABLE, False)}
        assert b.store is not None
        topics = b.store.topics()
        # offsets.topic.num.partitions / transaction.state.log.num.partitions, not num.partitions (1)
        assert {n: len(topics[n].partitions) for n in first} == {
            "__consumer_offsets": 7, "__transaction_state": 3, "plain": 1}
        assert b.store.entity_config("topics/__consumer_offsets")["cleanup.policy"] == "compact"
        assert b.store.entity_config("topics/__transaction_state")["cleanup.policy"] == "compact"
        assert b.store.entity_config("topics/plain") == {}
        described = metadata(c, ["__consumer_offsets"], allow=False)["__consumer_offsets"]
        shown = (described["error_code"], described["is_internal"], len(described["partitions"]))
        assert shown == (0, True, 7)


def test_a_state_topic_needs_its_replication_factor_in_live_brokers() -> None:
    """offsets.topic.replication.factor 3 on one broker: Kafka's createTopics refuses it, and
    Metadata passes the refusal on (it is not created with one replica)."""
    with Broker({"broker.id": 1, "offsets.topic.replication.factor": 3}) as b, \
            KafkaSocket(b.bootstrap_servers) as c:
        answer = metadata(c, ["__consumer_offsets"])["__consumer_offsets"]
        assert answer["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
        assert b.store is not None and "__consumer_offsets" not in b.store.topics()


@pytest.mark.parametrize("auto_create", [True, False])
def test_an_invalid_name_is_invalid_topic_exception(auto_create: bool) -> None:
    with Broker({"broker.id": 1, "auto.create.topics.enable": auto_create}) as b, \
            KafkaSocket(b.bootstrap_servers) as c:
        for allow in (True, False):
            fine = f"fine-{allow}"
            answer = metadata(c, ["bad name", "x" * 250, fine], allow=allow)
            assert {n[:8]: t["error_code"] for n, t in answer.items()} == {
                "bad name": ErrorCode.INVALID_TOPIC_EXCEPTION, "x" * 8: ErrorCode.INVALID_TOPIC_EXCEPTION,
                fine[:8]: ErrorCode.LEADER_NOT_AVAILABLE if auto_create and allow
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        # v0 (no allow_auto_topic_creation field) too
        body = {"topics": [{"name": "bad name"}]}
        [answer] = c.call(ApiKey.METADATA, 0, body).body["topics"]
        assert answer["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_create_is_asked_for_only_when_the_broker_would_create() -> None:
    """DESCRIBE without CREATE: a missing topic is TOPIC_AUTHORIZATION_FAILED where the broker would
    auto-create it, and plain UNKNOWN_TOPIC_OR_PARTITION where it would not (Kafka checks CREATE
    only with allow_auto_topic_creation and auto.create.topics.enable both on)."""
    for auto_create, expected in ((True, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                  (False, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)):
        config = {"broker.id": 1, "auto.create.topics.enable": auto_create,
                  "authorizer.class.name": "allowlist", "allowlist.rules": "*@*:DESCRIBE"}
        with Broker(config) as b, KafkaSocket(b.bootstrap_servers) as c:
            assert metadata(c, ["missing"])["missing"]["error_code"] == expected
            assert metadata(c, ["missing"], allow=False)["missing"]["error_code"] == \
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_cluster_refuses_another_endpoint_type() -> None:
    with Broker({"broker.id": 1}) as b, KafkaSocket(b.bootstrap_servers) as c:
        def ask(version: int, endpoint_type: int) -> dict[str, Any]:
            body = {"include_cluster_authorized_operations": False, "endpoint_type": endpoint_type}
            answer: dict[str, Any] = c.call(ApiKey.DESCRIBE_CLUSTER, version, body).body
            return answer

        served = ask(1, 1)
        assert (served["error_code"], served["endpoint_type"], [x["broker_id"] for x in served["brokers"]]) \
            == (0, 1, [1])
        controllers = ask(1, 2)
        assert (controllers["error_code"], controllers["brokers"]) == (ErrorCode.MISMATCHED_ENDPOINT_TYPE, [])
        assert controllers["error_message"] == ("The request was sent to an endpoint of type BROKER, but we "
                                                "wanted an endpoint of type CONTROLLER")
        unknown = ask(1, 7)
        assert (unknown["error_code"], unknown["error_message"]) == (ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                                                                     "Unsupported endpoint type 7")
        assert ask(0, 1)["error_code"] == ErrorCode.NONE
