"""kafka-python 3.x producer and consumer options that reach the broker, which no other test sets:
``max_request_size`` above the broker's ``message.max.bytes`` (the batch is refused with
MESSAGE_TOO_LARGE, Kafka's per-partition answer, and a topic's ``max.message.bytes`` lets it in),
and ``exclude_internal_topics`` on a pattern subscription (Metadata marks ``__consumer_offsets``
internal, so only a consumer that includes internal topics is given it).

kafka-python 3.0.12's idempotent producer (its default) fails every later send to a partition
after one MESSAGE_TOO_LARGE without sending it (a client bug: the broker saw one Produce); the
producer here is not idempotent, so the sends after the refused one are the broker's to answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import MessageSizeTooLargeError
from quick_clients import KAFKA_PYTHON_CLIENT, KAFKA_PYTHON_CONSUMER

from kafkapy.embedded import Broker
from kafkapy.testing import wait_until

TIMEOUT_S = 20
MESSAGE_MAX_BYTES = 1_048_588  # Kafka's default message.max.bytes, the broker's limit on a batch


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1}) as running:
        yield running


def test_a_batch_over_the_brokers_limit_is_refused_alone(broker: Broker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.create_topics([NewTopic("plain", 1, 1),
                             NewTopic("roomy", 1, 1, topic_configs={"max.message.bytes": "2000000"})])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_request_size=3_000_000,
                             enable_idempotence=False, **KAFKA_PYTHON_CLIENT)
    try:
        with pytest.raises(MessageSizeTooLargeError):
            producer.send("plain", b"x" * 1_500_000).get(TIMEOUT_S)
        assert producer.send("plain", b"x" * (MESSAGE_MAX_BYTES - 1000)).get(TIMEOUT_S).offset == 0
        assert producer.send("plain", b"small").get(TIMEOUT_S).offset == 1
        assert producer.send("roomy", b"x" * 1_500_000).get(TIMEOUT_S).offset == 0
    finally:
        producer.close()
    stored = [len(record.value or b"") for record in broker.records("plain", 0)]
    assert stored == [MESSAGE_MAX_BYTES - 1000, 5]


@pytest.mark.parametrize("exclude", [True, False])
def test_a_pattern_subscription_includes_internal_topics_only_when_asked(broker: Broker,
                                                                          exclude: bool) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.create_topics([NewTopic("_audit", 1, 1)])
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=f"pattern-{exclude}",
                             exclude_internal_topics=exclude, **KAFKA_PYTHON_CONSUMER)
    try:
        consumer.subscribe(pattern="^_.*")  # __consumer_offsets is made by this group's FindCoordinator

        def assigned() -> set[str]:
            consumer.poll(100)
            return {tp.topic for tp in consumer.assignment()}
        expected = {"_audit"} if exclude else {"_audit", "__consumer_offsets"}
        wait_until(lambda: assigned() == expected, TIMEOUT_S, what=f"an assignment of {expected}")
    finally:
        consumer.close()
