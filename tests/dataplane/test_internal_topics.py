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


def test_records_of_an_internal_topic_cannot_be_deleted(broker: Broker) -> None:
    """DeleteRecords: INVALID_TOPIC_EXCEPTION, as Kafka's ReplicaManager (confluent-kafka's admin)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    broker.seed({"deletable": {"partitions": 1, "records": [{"value": "a"}, {"value": "b"}]}})
    asked = [TopicPartition("__consumer_offsets", 0, 0), TopicPartition("deletable", 0, 1)]
    futures = admin.delete_records(asked, request_timeout=TIMEOUT_S)
    with pytest.raises(Exception) as refused:
        futures[TopicPartition("__consumer_offsets", 0, 0)].result()
    assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    assert futures[TopicPartition("deletable", 0, 1)].result().low_watermark == 1


def test_a_transaction_cannot_add_an_internal_topic(broker: Broker) -> None:
    """AddPartitionsToTxn from a client: an internal topic is never writable
    (TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED), as in Kafka's KafkaApis."""
    broker.seed({"plain": {"partitions": 1}})
    with SimpleClient(broker.bootstrap_servers) as client:
        wait_until(lambda: client.request(ApiKey.FIND_COORDINATOR, 4, {
            "key_type": 1, "coordinator_keys": ["internal-txn"]})["coordinators"][0]["error_code"] == 0)
        init = client.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": "internal-txn", "transaction_timeout_ms": 60_000, "producer_id": -1,
            "producer_epoch": -1})
        assert init["error_code"] == ErrorCode.NONE
        answer = client.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": "internal-txn", "v3_and_below_producer_id": init["producer_id"],
            "v3_and_below_producer_epoch": init["producer_epoch"], "v3_and_below_topics": [
                {"name": "__consumer_offsets", "partitions": [0]}, {"name": "plain", "partitions": [0]}]})
    codes = {(topic["name"], result["partition_index"]): ErrorCode(result["partition_error_code"])
             for topic in answer["results_by_topic_v3_and_below"] for result in topic["results_by_partition"]}
    assert codes == {("__consumer_offsets", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                     ("plain", 0): ErrorCode.OPERATION_NOT_ATTEMPTED}
