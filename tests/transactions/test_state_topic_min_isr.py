"""transaction.state.log.min.isr: the min.insync.replicas __transaction_state is made with
(Kafka's default 2, capped at the replica count, so one broker's topic of one replica still takes
the coordinator's writes)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from kafkapy.embedded import Broker

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
        producer.init_transactions(TIMEOUT_S)  # makes __transaction_state; one replica still takes it
        producer.begin_transaction()
        producer.produce("events", b"v")
        producer.commit_transaction(TIMEOUT_S)
        assert _topic_config(broker, "__transaction_state", "min.insync.replicas") == expected
