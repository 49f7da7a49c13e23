"""Faults as real clients meet them: they retry, reconnect and wait, and nothing is lost or doubled
(read back with broker.records, the requests seen with broker.history)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from quick_clients import KAFKA_PYTHON_CLIENT, RDKAFKA_CLIENT, RDKAFKA_CONSUMER

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.faults import ApiKey, Delay, DropConnection, ErrorAnswer, ErrorCode, FaultRule
from kafkapy.testing import wait_until

TIMEOUT_S = 30
HISTORY = {"observer.class.names": "kafkapy.observers.RequestHistory"}


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(HISTORY) as running:
        yield running


def create(broker: Broker, topic: str) -> None:
    with SimpleClient(broker.bootstrap_servers) as client:
        def created() -> bool:
            answer = client.request(ApiKey.METADATA, 9, {"topics": [{"name": topic}],
                                                        "allow_auto_topic_creation": True})
            return bool(answer.topics[0].error_code == ErrorCode.NONE)
        wait_until(created, what=f"{topic} created")


def values(broker: Broker, topic: str) -> list[bytes | None]:
    return [record.value for record in broker.records(topic)]


def test_confluent_idempotent_producer_retries_not_leader_and_delivers_once(broker: Broker) -> None:
    from confluent_kafka import Producer

    create(broker, "orders")
    handle = broker.faults.add(FaultRule(ErrorAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER), api=ApiKey.PRODUCE,
                                         topic="orders", times=2))
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                         "linger.ms": 0, "retry.backoff.ms": 10, **RDKAFKA_CLIENT})
    reports: list[Any] = []
    for i in range(10):
        producer.produce("orders", value=b"order-%d" % i, partition=0,
                         on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    assert reports == [None] * 10
    assert handle.fired == 2
    assert values(broker, "orders") == [b"order-%d" % i for i in range(10)]
    stored = broker.records("orders")
    assert {r.producer_id for r in stored} != {-1} and [r.sequence for r in stored] == list(range(10))
    produced = [e for e in broker.history() if e.api_key == ApiKey.PRODUCE]
    assert [e.error_code for e in produced[:2]] == [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 2
    assert produced[-1].error_code == ErrorCode.NONE


def test_confluent_idempotent_producer_survives_a_drop_after_the_write(broker: Broker) -> None:
    """The first Produce is written, but its answer never comes: the retry is deduplicated."""
    from confluent_kafka import Producer

    create(broker, "payments")
    handle = broker.faults.add(FaultRule(DropConnection("after"), api=ApiKey.PRODUCE, times=1))
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                         "linger.ms": 0, "retry.backoff.ms": 10, **RDKAFKA_CLIENT})
    errors: list[Any] = []
    producer.produce("payments", value=b"once", partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == [None] and handle.fired == 1
    assert values(broker, "payments") == [b"once"]
    assert [e.answered for e in broker.history() if e.api_key == ApiKey.PRODUCE][:2] == [False, True]


def test_kafka_python_producer_retries_not_leader(broker: Broker) -> None:
    from kafka import KafkaProducer

    create(broker, "events")
    handle = broker.faults.add(FaultRule(ErrorAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER), api=ApiKey.PRODUCE,
                                         times=2))
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, retries=5, retry_backoff_ms=10,
                             acks="all", request_timeout_ms=TIMEOUT_S * 1000, **KAFKA_PYTHON_CLIENT)
    try:
        offsets = [producer.send("events", value=b"e%d" % i, partition=0).get(TIMEOUT_S).offset
                   for i in range(3)]
    finally:
        producer.close(TIMEOUT_S)
    assert handle.fired == 2
    assert offsets == [0, 1, 2]
    assert values(broker, "events") == [b"e0", b"e1", b"e2"]


def test_confluent_consumer_recovers_from_a_dropped_fetch(broker: Broker) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    create(broker, "feed")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(5):
        producer.produce("feed", value=b"f%d" % i, partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    handle = broker.faults.add(FaultRule(DropConnection(), api=ApiKey.FETCH, times=1))
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "faults",
                         "enable.auto.commit": False, "reconnect.backoff.ms": 10, **RDKAFKA_CONSUMER})
    consumer.assign([TopicPartition("feed", 0, 0)])
    got: list[bytes | None] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(got) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    assert handle.fired == 1
    assert got == [b"f%d" % i for i in range(5)]


def test_aiokafka_consumer_reconnects_after_a_dropped_fetch(broker: Broker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    create(broker, "stream")

    async def run() -> list[bytes | None]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait("stream", b"s%d" % i, partition=0)
        finally:
            await producer.stop()
        broker.faults.add(FaultRule(DropConnection(), api=ApiKey.FETCH, times=1))
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False,
                                    retry_backoff_ms=10)
        await consumer.start()
        try:
            consumer.assign([TopicPartition("stream", 0)])
            consumer.seek(TopicPartition("stream", 0), 0)
            got: list[bytes | None] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 3 and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                got += [m.value for messages in batches.values() for m in messages]
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"s0", b"s1", b"s2"]
    fetches = [e for e in broker.history() if e.api_key == ApiKey.FETCH]
    # The first Fetch was dropped; a later one brought the records. (The last may be a long poll
    # still waiting when the consumer stopped, so it is not the one to look at.)
    assert not fetches[0].answered and any(e.answered for e in fetches[1:])


def test_a_delay_shows_in_the_clients_latency(broker: Broker) -> None:
    from kafka import KafkaProducer

    create(broker, "slow")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all",
                             request_timeout_ms=TIMEOUT_S * 1000, **KAFKA_PYTHON_CLIENT)
    try:
        def latency() -> float:
            start = time.monotonic()
            producer.send("slow", value=b"x", partition=0).get(TIMEOUT_S)
            return time.monotonic() - start
        latency()  # metadata and connections settled
        plain = latency()
        # A delay of seconds: a plain send on a loaded machine can take half of one.
        with broker.faults.injected(FaultRule(Delay(2.0), api=ApiKey.PRODUCE)):
            delayed = latency()
    finally:
        producer.close(TIMEOUT_S)
    assert delayed >= 2.0 > plain


def test_a_when_that_raises_on_another_apis_body_does_not_match_it(
        broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    """A predicate written for the transactional requests, on a rule without api=, meets
    ApiVersions, Metadata and FindCoordinator bodies without the field: those requests do not
    match (one WARNING line per API, no traceback) and confluent-kafka's transactional producer
    retries through the two InitProducerId answers the rule makes. The KeyError closed every
    connection (with a traceback in the broker's log), so the producer never got its id."""
    rule = FaultRule(ErrorAnswer(ErrorCode.CONCURRENT_TRANSACTIONS), times=2,
                     when=lambda body: body["transactional_id"] == "payments")
    with broker.faults.injected(rule) as handle:
        producer = confluent_kafka.Producer({**RDKAFKA_CLIENT, "bootstrap.servers": broker.bootstrap_servers,
                                             "transactional.id": "payments"})
        producer.init_transactions(TIMEOUT_S)
    assert handle.fired == 2 and handle.when_errors > 0
    warnings = [r for r in caplog.records if r.name == "kafkapy.faults.injector"]
    assert warnings and all(r.levelname == "WARNING" and r.exc_info is None for r in warnings)
    assert "its when= raised KeyError: 'transactional_id' on ApiVersions v" in warnings[0].getMessage()
    assert len({r.getMessage().split(" on ")[1].split(" v")[0] for r in warnings}) == len(warnings)
    assert not [r for r in caplog.records if r.name == "kafkapy.server.dispatch"]
