"""Produce, then read back from the start: the round trip the interop tests make with each client
over an authenticated listener (PLAIN, SCRAM, OAUTHBEARER with unsecured or signed tokens).
``after_produce`` runs between the two halves, for what a test checks of the producer's login."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any

TIMEOUT_S = 10


def _nothing() -> None:
    pass


def confluent_round_trip(producer_config: dict[str, Any], consumer_config: dict[str, Any], topic: str,
                         values: Iterable[bytes] = (b"one", b"two"),
                         after_produce: Callable[[], None] = _nothing) -> list[bytes]:
    """What a confluent-kafka consumer (``consumer_config`` names its group) reads of ``values``."""
    from confluent_kafka import Consumer, Producer

    sent = list(values)
    producer = Producer(producer_config)
    for value in sent:
        producer.produce(topic, value)
    assert producer.flush(TIMEOUT_S) == 0
    after_produce()
    consumer = Consumer({**consumer_config, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read: list[bytes] = []
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while len(read) < len(sent) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append(message.value())
    finally:
        consumer.close()
    return read


def kafka_python_round_trip(config: dict[str, Any], topic: str, value: bytes, group_id: str | None = None,
                            after_produce: Callable[[], None] = _nothing) -> bytes:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(**config)
    try:
        producer.send(topic, value).get(timeout=TIMEOUT_S)
        after_produce()
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, group_id=group_id, auto_offset_reset="earliest",
                             consumer_timeout_ms=TIMEOUT_S * 1000, **config)
    try:
        return bytes(next(consumer).value)
    finally:
        consumer.close()


def aiokafka_round_trip(config: dict[str, Any], topic: str, value: bytes, group_id: str,
                        after_produce: Callable[[], None] = _nothing) -> bytes:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def round_trip() -> bytes:
        producer = AIOKafkaProducer(**config)
        await producer.start()
        try:
            await producer.send_and_wait(topic, value)
            after_produce()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=group_id, auto_offset_reset="earliest", **config)
        await consumer.start()
        try:
            message = await asyncio.wait_for(consumer.getone(), TIMEOUT_S)
            return bytes(message.value)
        finally:
            await consumer.stop()

    return asyncio.run(round_trip())
