"""Real clients manage topics on a kafkapy broker: kafka-python's KafkaAdminClient, confluent-kafka's
AdminClient (librdkafka) and kcat. Every call has a bounded timeout."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from kafkapy.embedded import Broker
from kafkapy.testing import BrokerFactory

TIMEOUT_S = 10
TIMEOUT_MS = TIMEOUT_S * 1000
KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def kafka_python_admin(broker: Broker) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, client_id="kafkapy-topics",
                            request_timeout_ms=TIMEOUT_MS, bootstrap_timeout_ms=TIMEOUT_MS)


def eventually(check: Callable[[], bool], timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.05)


def partition_counts(broker: Broker) -> dict[str, int]:
    assert broker.runtime is not None
    return {name: len(info.partitions) for name, info in broker.runtime.cluster.topics.items()}


def test_kafka_python_creates_grows_and_deletes_topics(kafka_broker_factory: BrokerFactory) -> None:
    from kafka.admin import NewPartitions, NewTopic
    from kafka.errors import InvalidPartitionsError, TopicAlreadyExistsError

    broker = kafka_broker_factory(broker_id=3)
    admin = kafka_python_admin(broker)
    try:
        admin.create_topics([NewTopic("orders", 3, 1), NewTopic("audit", -1, -1)], timeout_ms=TIMEOUT_MS)
        assert partition_counts(broker) == {"orders": 3, "audit": 1}
        assert sorted(admin.list_topics()) == ["audit", "orders"]
        described = {t["name"]: t for t in admin.describe_topics(["orders"])}
        assert described["orders"]["error_code"] == 0
        partitions = sorted(described["orders"]["partitions"], key=lambda p: p["partition_index"])
        assert [(p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"])
                for p in partitions] == [
            (0, 3, [3], [3]), (1, 3, [3], [3]), (2, 3, [3], [3])]
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("orders", 1, 1)], timeout_ms=TIMEOUT_MS)

        admin.create_partitions({"orders": NewPartitions(5)}, timeout_ms=TIMEOUT_MS)
        assert partition_counts(broker)["orders"] == 5
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"orders": NewPartitions(4)}, timeout_ms=TIMEOUT_MS)

        admin.delete_topics(["audit"], timeout_ms=TIMEOUT_MS)
        assert partition_counts(broker) == {"orders": 5}
        assert admin.list_topics() == ["orders"]
    finally:
        admin.close()


def test_kafka_python_validate_only_creates_nothing(kafka_broker_factory: BrokerFactory) -> None:
    from kafka.admin import NewTopic

    broker = kafka_broker_factory(broker_id=1)
    admin = kafka_python_admin(broker)
    try:
        admin.create_topics([NewTopic("dry", 2, 1)], timeout_ms=TIMEOUT_MS, validate_only=True)
        assert admin.list_topics() == []
    finally:
        admin.close()


@pytest.mark.skipif(KCAT is None, reason="KCAT NOT INSTALLED (`apt-get install kcat`): topic listing "
                                         "through kcat -L SKIPPED")
def test_kcat_lists_topics_with_partitions(kafka_broker_factory: BrokerFactory) -> None:
    from kafka.admin import NewTopic

    assert KCAT is not None
    broker = kafka_broker_factory(broker_id=7)
    admin = kafka_python_admin(broker)
    try:
        admin.create_topics([NewTopic("clicks", 2, 1), NewTopic("views", 1, 1)], timeout_ms=TIMEOUT_MS)
    finally:
        admin.close()
    result = subprocess.run([KCAT, "-L", "-J", "-b", broker.bootstrap_servers, "-m", str(TIMEOUT_S)],
                            capture_output=True, text=True, timeout=TIMEOUT_S * 3)
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    topics = {t["topic"]: t for t in listing["topics"]}
    assert sorted(topics) == ["clicks", "views"]
    assert [(p["partition"], p["leader"], [r["id"] for r in p["replicas"]], [r["id"] for r in p["isrs"]])
            for p in topics["clicks"]["partitions"]] == [(0, 7, [7], [7]), (1, 7, [7], [7])]
    assert len(topics["views"]["partitions"]) == 1


def test_confluent_admin_lists_created_topics(kafka_broker_factory: BrokerFactory) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    broker = kafka_broker_factory(broker_id=5)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.create_topics([NewTopic("payments", 4, 1)], request_timeout=TIMEOUT_S,
                                  operation_timeout=TIMEOUT_S)
    assert futures["payments"].result(timeout=TIMEOUT_S) is None
    # operation_timeout 0: the broker answers REQUEST_TIMED_OUT at once, which librdkafka hides
    futures = admin.create_topics([NewTopic("refunds", 1, 1)], request_timeout=TIMEOUT_S)
    assert futures["refunds"].result(timeout=TIMEOUT_S) is None
    eventually(lambda: "refunds" in partition_counts(broker))
    futures = admin.create_partitions([NewPartitions("payments", 6)], request_timeout=TIMEOUT_S,
                                      operation_timeout=TIMEOUT_S)
    assert futures["payments"].result(timeout=TIMEOUT_S) is None

    metadata = admin.list_topics(timeout=TIMEOUT_S)
    assert sorted(metadata.topics) == ["payments", "refunds"]
    payments = metadata.topics["payments"]
    assert payments.error is None
    assert sorted(payments.partitions) == [0, 1, 2, 3, 4, 5]
    assert {(p.leader, tuple(p.replicas), tuple(p.isrs)) for p in payments.partitions.values()} == {
        (5, (5,), (5,))}
    futures = admin.delete_topics(["refunds"], request_timeout=TIMEOUT_S, operation_timeout=TIMEOUT_S)
    assert futures["refunds"].result(timeout=TIMEOUT_S) is None
    assert sorted(admin.list_topics(timeout=TIMEOUT_S).topics) == ["payments"]


def test_a_request_larger_than_kafkas_controller_takes_is_refused_whole(
        kafka_broker_factory: BrokerFactory) -> None:
    """Kafka's controller writes at most 10,000 metadata records for one request (a topic, each
    partition and each config is one) and refuses a larger one whole with POLICY_VIOLATION. Before
    this, two billion partitions asked for took the broker's memory."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.admin import NewPartitions
    from kafka.admin import NewTopic as KafkaPythonNewTopic
    from kafka.errors import PolicyViolationError

    broker = kafka_broker_factory(broker_id=1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    # 2 topic records + 10,000 partition records: neither topic is made, though each alone would be.
    futures = admin.create_topics([NewTopic("half-a", 5_000, 1), NewTopic("half-b", 5_000, 1)],
                                  request_timeout=TIMEOUT_S)
    for future in futures.values():
        error = future.exception(timeout=TIMEOUT_S).args[0]
        assert (error.code(), error.str()) == (KafkaError.POLICY_VIOLATION,
                                               "Unable to perform excessively large batch operation.")
    # confluent-kafka refuses more than 100,000 partitions itself; kafka-python sends anything.
    kafka_python = kafka_python_admin(broker)
    try:
        with pytest.raises(PolicyViolationError):
            kafka_python.create_topics([KafkaPythonNewTopic("huge", 2**31 - 1, 1)], timeout_ms=TIMEOUT_MS)
        kafka_python.create_topics([KafkaPythonNewTopic("small", 2, 1)], timeout_ms=TIMEOUT_MS)
        with pytest.raises(PolicyViolationError):
            kafka_python.create_partitions({"small": NewPartitions(2**31 - 1)}, timeout_ms=TIMEOUT_MS)
    finally:
        kafka_python.close()
    assert partition_counts(broker) == {"small": 2}
