"""Clients cannot append to the coordinators' internal topics: Kafka's ReplicaManager answers a
Produce to ``__consumer_offsets``, ``__transaction_state`` or ``__share_group_state``
INVALID_TOPIC_EXCEPTION (only the client id ``__admin_client`` may), so a stray or hostile
producer cannot write records the coordinators would load as theirs. Both Produce paths (the
from-frame fast path declines internal topics to the plain one) answer the same."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.testing import wait_until

TIMEOUT_S = 20.0


def produce(bootstrap: str, topic: str, version: int, client_id: str = "app") -> ErrorCode:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [
            {"index": 0, "records": build_record_batch([{"key": b"forged", "value": b"state"}])}]}]}
    with SimpleClient(bootstrap, client_id=client_id) as client:
        [topic_answer] = client.request(ApiKey.PRODUCE, version, body)["responses"]
    [answer] = topic_answer["partition_responses"]
    return ErrorCode(answer["error_code"])


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1, "offsets.topic.num.partitions": 1,
                 "transaction.state.log.num.partitions": 1}) as running:
        with SimpleClient(running.bootstrap_servers) as client:  # the coordinators make their topics
            for key_type in (0, 1):
                client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": ["x"]})
        runtime = running.runtime
        assert runtime is not None
        wait_until(lambda: {"__consumer_offsets", "__transaction_state"} <= set(runtime.cluster.topics))
        yield running


@pytest.mark.parametrize("version", [3, 9, 11])
def test_a_client_cannot_append_to_an_internal_topic(broker: Broker, version: int) -> None:
    assert produce(broker.bootstrap_servers, "__share_group_state", version) == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # not made yet, and a Produce does not make it
    assert broker.runtime is not None and "__share_group_state" not in broker.runtime.cluster.topics
    broker.seed({"plain": {"partitions": 1}})
    for internal in ("__consumer_offsets", "__transaction_state"):
        before = len(broker.records(internal))
        assert produce(broker.bootstrap_servers, internal, version) == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert len(broker.records(internal)) == before
    assert produce(broker.bootstrap_servers, "plain", version) == ErrorCode.NONE


def test_the_admin_client_id_may(broker: Broker) -> None:
    before = len(broker.records("__consumer_offsets"))
    assert produce(broker.bootstrap_servers, "__consumer_offsets", 9, client_id="__admin_client") == \
        ErrorCode.NONE
    assert len(broker.records("__consumer_offsets")) == before + 1


def test_confluent_kafka_gets_the_error_in_its_delivery_report(broker: Broker) -> None:
    reports: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "message.timeout.ms": 10_000})
    producer.produce("__consumer_offsets", b"state", key=b"forged", partition=0,
                     on_delivery=lambda error, _message: reports.append(error))
    producer.flush(TIMEOUT_S)
    [error] = reports
    assert error is not None and error.code() == KafkaError.TOPIC_EXCEPTION
