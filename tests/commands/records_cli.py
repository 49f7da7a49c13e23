"""Shared by the produce/consume/topics CLI tests: the CLI as a real process, and librdkafka's
mock cluster (a real Kafka-protocol server that stores and serves records) as the broker."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import confluent_kafka

TIMEOUT_S = 30


def kafkapy(*args: str, stdin: bytes = b"", timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "kafkapy.cli", *args], input=stdin, capture_output=True,
                          timeout=timeout)


def json_lines(result: subprocess.CompletedProcess[bytes]) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr.decode()
    return [json.loads(line) for line in result.stdout.splitlines()]


class MockCluster:
    """librdkafka's mock cluster, owned by a client in this process; its address is the broker
    that client's metadata lists. Auto-created topics get 4 partitions."""

    def __init__(self) -> None:
        self._owner = confluent_kafka.Producer({"test.mock.num.brokers": 1, "log_level": 0})
        (broker,) = self._owner.list_topics(timeout=10).brokers.values()
        self.bootstrap = f"{broker.host}:{broker.port}"

    def read_all(self, topic: str, partition: int) -> list[confluent_kafka.Message]:
        """Every record of a partition, read by confluent-kafka (an independent reader)."""
        consumer = confluent_kafka.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "readers",
                                             "enable.partition.eof": True, "log_level": 0})
        try:
            start = confluent_kafka.TopicPartition(topic, partition, confluent_kafka.OFFSET_BEGINNING)
            consumer.assign([start])
            found = []
            while True:
                message = consumer.poll(TIMEOUT_S)
                assert message is not None, "confluent-kafka read nothing"
                error = message.error()
                if error is not None and error.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    return found
                assert error is None, error
                found.append(message)
        finally:
            consumer.close()

    def write(self, topic: str, records: list[dict[str, Any]], **config: Any) -> None:
        """Produce with confluent-kafka (an independent writer) and wait for every ack."""
        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap, "log_level": 0, **config})
        for record in records:
            producer.produce(topic, **record)
        assert producer.flush(TIMEOUT_S) == 0

    def close(self) -> None:
        self._owner.flush(1)
