"""CreateTopics' and DeleteTopics' refusals in Kafka's words, over the wire: invalid names with
Topic.validate's messages, the KRaft metadata log's name, and a deletion by id the caller may not
see (KafkaApis.handleCreateTopicsRequest / handleDeleteTopicsRequest)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket

ZERO = uuid.UUID(int=0)


def create(conn: KafkaSocket, *names: str, validate_only: bool = False) -> list[tuple[str, int, str | None]]:
    body = {"topics": [{"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": []} for n in names], "timeout_ms": 5000, "validate_only": validate_only}
    return [(r["name"], r["error_code"], r["error_message"])
            for r in conn.call(ApiKey.CREATE_TOPICS, 7, body).body["topics"]]


def test_invalid_names_get_kafkas_messages() -> None:
    with Broker({"broker.id": 1}) as b, KafkaSocket(b.bootstrap_servers) as c:
        long = "x" * 250
        assert create(c, "", ".", "a b", long) == [
            ("", ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: the empty string is not allowed"),
            (".", ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: '.' is not allowed"),
            ("a b", ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: 'a b' contains one or more "
             "characters other than ASCII alphanumerics, '.', '_' and '-'"),
            (long, ErrorCode.INVALID_TOPIC_EXCEPTION,
             f"Topic name is invalid: the length of '{long}' is longer than the max allowed length 249")]


def test_the_metadata_log_topic_cannot_be_created() -> None:
    refusal = (ErrorCode.INVALID_REQUEST, "Creation of internal topic __cluster_metadata is prohibited.")
    with Broker({"broker.id": 1}) as b, KafkaSocket(b.bootstrap_servers) as c:
        for validate_only in (True, False):
            assert create(c, "__cluster_metadata", "fine", validate_only=validate_only) == [
                ("__cluster_metadata", *refusal), ("fine", ErrorCode.NONE, None)]
        assert b.store is not None and set(b.store.topics()) == {"fine"}


def delete_by_id(conn: KafkaSocket, *ids: uuid.UUID) -> list[tuple[str | None, int]]:
    body = {"topics": [{"name": None, "topic_id": i} for i in ids], "timeout_ms": 5000}
    answer: list[dict[str, Any]] = conn.call(ApiKey.DELETE_TOPICS, 6, body).body["responses"]
    return [(r["name"], r["error_code"]) for r in answer]


def test_a_deletion_by_id_the_caller_may_not_see_is_an_authorization_failure() -> None:
    for rules, expected in (("*@*:CREATE", (None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)),
                            ("*@*:CREATE,DESCRIBE", ("hidden", ErrorCode.TOPIC_AUTHORIZATION_FAILED))):
        config = {"broker.id": 1, "authorizer.class.name": "allowlist", "allowlist.rules": rules}
        with Broker(config) as b, KafkaSocket(b.bootstrap_servers) as c:
            assert create(c, "hidden")[0][1] == ErrorCode.NONE
            assert b.store is not None
            topic_id = b.store.topics()["hidden"].topic_id
            unknown = uuid.uuid4()
            # without DESCRIBE the name stays hidden, the id is not; an unknown id is still unknown
            assert delete_by_id(c, topic_id, unknown) == [expected, (None, ErrorCode.UNKNOWN_TOPIC_ID)]
            # neither a name nor an id: Kafka's controller refuses the entry
            assert delete_by_id(c, ZERO) == [(None, ErrorCode.INVALID_REQUEST)]
            assert "hidden" in b.store.topics()


def test_delete_topic_enable_false_refuses_every_deletion() -> None:
    with Broker({"broker.id": 1, "delete.topic.enable": False}) as b, KafkaSocket(b.bootstrap_servers) as c:
        assert create(c, "kept")[0][1] == ErrorCode.NONE
        assert b.store is not None
        topic_id = b.store.topics()["kept"].topic_id
        assert delete_by_id(c, topic_id) == [(None, ErrorCode.TOPIC_DELETION_DISABLED)]
        for version, code in ((1, ErrorCode.INVALID_REQUEST), (3, ErrorCode.TOPIC_DELETION_DISABLED)):
            body = {"topic_names": ["kept", "missing"], "timeout_ms": 5000}
            answer = c.call(ApiKey.DELETE_TOPICS, version, body).body["responses"]
            assert [(r["name"], r["error_code"]) for r in answer] == [("kept", code), ("missing", code)]
        assert "kept" in b.store.topics()


def test_null_configs_are_all_named() -> None:
    with Broker({"broker.id": 1}) as b, KafkaSocket(b.bootstrap_servers) as c:
        configs = [{"name": "retention.ms", "value": None}, {"name": "segment.ms", "value": None},
                   {"name": "flush.ms", "value": "5"}]
        body = {"topics": [{"name": "n", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                            "configs": configs}], "timeout_ms": 5000, "validate_only": False}
        [answer] = c.call(ApiKey.CREATE_TOPICS, 7, body).body["topics"]
        assert (answer["error_code"], answer["error_message"]) == (
            ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs: retention.ms,segment.ms")


def test_a_caller_without_describe_configs_is_not_told_the_new_topics_shape() -> None:
    """Kafka (ZkAdminManager.createTopics, ReplicationControlManager.createTopic) fills in the
    configs, partition count and replication factor of a v5+ result only for a caller that may
    DESCRIBE_CONFIGS the topic."""
    config = {"broker.id": 1, "authorizer.class.name": "allowlist", "allowlist.rules": "*@*:CREATE"}
    with Broker(config) as b, KafkaSocket(b.bootstrap_servers) as c:
        body = {"topics": [{"name": "blind", "num_partitions": 3, "replication_factor": 1, "assignments": [],
                            "configs": []}], "timeout_ms": 5000, "validate_only": False}
        [answer] = c.call(ApiKey.CREATE_TOPICS, 7, body).body["topics"]
        shown = (answer["error_code"], answer["topic_config_error_code"], answer["num_partitions"],
                 answer["replication_factor"], answer["configs"])
        assert shown == (ErrorCode.NONE, ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1, [])
        assert b.store is not None and len(b.store.topics()["blind"].partitions) == 3
