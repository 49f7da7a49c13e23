"""transaction.state.log.min.isr and share.coordinator.state.topic.min.isr: the
min.insync.replicas __transaction_state and __share_group_state are made with (Kafka's default 2,
capped at the replica count as every min.insync.replicas is, so a one-replica topic still takes
writes)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.sharestate.coordinator import SHARE_STATE_TOPIC
from kafkapy.sharestate.state import coordinator_key

TIMEOUT_S = 20


def _topic_config(broker: Broker, topic: str, key: str) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    value: str = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)[key].value
    return value


@pytest.mark.parametrize(("setting", "expected"), [({}, "2"), ({"transaction.state.log.min.isr": 3}, "3")])
def test_transaction_state_log_min_isr_is_the_state_topics_min_insync_replicas(
        setting: dict[str, int], expected: str) -> None:
    with Broker(setting) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "tx"})
        producer.init_transactions(TIMEOUT_S)  # makes __transaction_state
        producer.begin_transaction()
        producer.produce("events", b"v")
        producer.commit_transaction(TIMEOUT_S)
        assert _topic_config(broker, "__transaction_state", "min.insync.replicas") == expected


@pytest.mark.parametrize(("setting", "expected"),
                         [({}, "2"), ({"share.coordinator.state.topic.min.isr": 1}, "1")])
def test_share_coordinator_state_topic_min_isr_is_the_state_topics_min_insync_replicas(
        setting: dict[str, int], expected: str) -> None:
    with Broker(setting) as broker:
        broker.seed({"q": {"partitions": 1, "records": []}})
        with SimpleClient(broker.bootstrap_servers) as client:
            metadata = client.request(ApiKey.METADATA, 12, {"topics": [{"name": "q", "topic_id": None}],
                                                            "allow_auto_topic_creation": False,
                                                            "include_topic_authorized_operations": False})
            topic_id: uuid.UUID = metadata["topics"][0]["topic_id"]
            found = client.request(ApiKey.FIND_COORDINATOR, 6, {
                "key_type": CoordinatorKeyType.SHARE,
                "coordinator_keys": [coordinator_key(("workers", topic_id, 0))]})
            assert found["coordinators"][0]["error_code"] == ErrorCode.NONE
        assert _topic_config(broker, SHARE_STATE_TOPIC, "min.insync.replicas") == expected
