"""A three-broker cluster in one process, seeded, read by a real client, then reset.

    python examples/seeded_cluster.py      # prints what the client saw, as JSON

``Broker(brokers=3)`` serves three brokers sharing one store; ``seed`` makes a topic of three
partitions (one led by each broker) with records; confluent-kafka reads them all; broker 1 goes
down and its partition moves; ``reset`` leaves no topic behind (docs/testing.md, docs/cluster.md).
"""

from __future__ import annotations

import json
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from kafkapy import Broker


def read_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[tuple[int, str]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "example", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, str]] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append((message.partition(), (message.value() or b"").decode()))
    consumer.close()
    return sorted(got)


def leaders(bootstrap: str, topic: str) -> list[int]:
    described = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return [p.leader for _, p in sorted(described.topics[topic].partitions.items())]


def main() -> None:
    with Broker(brokers=3) as cluster:
        cluster.seed({"orders": {"partitions": 3, "records": [
            {"key": f"order-{i}", "value": f"order-{i}", "partition": i % 3} for i in range(6)]}})
        before = leaders(cluster.bootstrap_servers, "orders")
        records = read_all(cluster.bootstrap_servers, "orders", 3, 6)
        cluster.stop_broker(1)
        after = leaders(cluster.bootstrap_servers, "orders")
        cluster.reset()
        left = sorted(AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
                      .list_topics(timeout=30).topics)
        print(json.dumps({"brokers": [b.broker_id for b in cluster.brokers], "leaders": before,
                          "leaders_with_broker_1_down": after, "records": records,
                          "topics_after_reset": [t for t in left if not t.startswith("__")]}, indent=2))


if __name__ == "__main__":
    main()
