"""create.topic.policy.class.name (Kafka's CreateTopicPolicy): CreateTopics, its validate_only and
auto-creation are asked of the policy, a refusal is POLICY_VIOLATION with the policy's message
(ZkAdminManager.createTopics), through confluent-kafka and over the wire."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.config import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
import policies
from server_wire import KafkaSocket

POLICY = "policies:AtMostFourPartitions"


def test_confluent_kafka_sees_the_policys_refusal() -> None:
    policies.SEEN.clear()
    with Broker({"broker.id": 1, "create.topic.policy.class.name": POLICY}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        futures = admin.create_topics([NewTopic("small", 4, 1, config={"retention.ms": "60000"}),
                                       NewTopic("big", 5, 1)], request_timeout=10)
        futures["small"].result(timeout=10)
        with pytest.raises(KafkaException) as refused:
            futures["big"].result(timeout=10)
        error = refused.value.args[0]
        assert (error.code(), error.str()) == (KafkaError.POLICY_VIOLATION,
                                               "Topic big would have 5 partitions; at most 4")
        assert b.store is not None and set(b.store.topics()) == {"small"}
        small = next(r for r in policies.SEEN if r.topic == "small")
        shown = (small.num_partitions, small.replication_factor, small.replicas_assignments)
        assert shown == (4, 1, None) and dict(small.configs) == {"retention.ms": "60000"}


def test_assignments_validate_only_and_auto_creation_are_asked() -> None:
    policies.SEEN.clear()
    with Broker({"broker.id": 1, "create.topic.policy.class.name": POLICY}) as b, \
            KafkaSocket(b.bootstrap_servers) as c:
        assigned_topic = {"name": "assigned", "num_partitions": -1, "replication_factor": -1, "configs": [],
                          "assignments": [{"partition_index": p, "broker_ids": [1]} for p in range(5)]}
        forbidden = {"name": "forbidden-1", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                     "configs": []}
        body = {"topics": [assigned_topic, forbidden], "timeout_ms": 5000, "validate_only": True}
        answer = [(t["name"], t["error_code"], t["error_message"])
                  for t in c.call(ApiKey.CREATE_TOPICS, 7, body).body["topics"]]
        assert answer == [
            ("assigned", ErrorCode.POLICY_VIOLATION, "Topic assigned would have 5 partitions; at most 4"),
            ("forbidden-1", ErrorCode.POLICY_VIOLATION, "Topic forbidden-1 is forbidden")]
        assigned = policies.SEEN[0]
        assert (assigned.num_partitions, assigned.replication_factor) == (None, None)
        assert len(assigned.replicas_assignments or {}) == 5
        metadata = {"topics": [{"name": "forbidden-2"}, {"name": "allowed"}],
                    "allow_auto_topic_creation": True, "include_topic_authorized_operations": False}
        found = {t["name"]: t["error_code"] for t in c.call(ApiKey.METADATA, 9, metadata).body["topics"]}
        assert found == {"forbidden-2": ErrorCode.POLICY_VIOLATION, "allowed": ErrorCode.LEADER_NOT_AVAILABLE}
        assert b.store is not None and set(b.store.topics()) == {"allowed"}


def test_a_failing_policy_is_the_brokers_failure_and_a_bad_name_stops_the_start() -> None:
    with Broker({"broker.id": 1, "create.topic.policy.class.name": "policies.Broken"}) as b, \
            KafkaSocket(b.bootstrap_servers) as c:
        body = {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                            "configs": []}], "timeout_ms": 5000, "validate_only": False}
        [answer] = c.call(ApiKey.CREATE_TOPICS, 7, body).body["topics"]
        assert answer["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
    with pytest.raises(ConfigError, match=r"create\.topic\.policy\.class\.name"), \
            Broker({"broker.id": 1, "create.topic.policy.class.name": "policies:Missing"}):
        pass
