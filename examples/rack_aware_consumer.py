"""A consumer that reads from the replica in its own rack (KIP-392), in a cluster in one process.

    python examples/rack_aware_consumer.py      # prints the placement and who served the reads

Three brokers, one per rack (``racks=``), and Kafka's RackAwareReplicaSelector: the leader points
a consumer with ``client.rack`` at the in-sync replica in that rack, which then serves its fetches
from the shared log. Each broker keeps its own request history, which shows who served what
(docs/dataplane.md, "Reading from followers"; docs/topics.md for rack-aware placement).
"""

from __future__ import annotations

import json
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkapy import Broker

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def main() -> None:
    config = {"replica.selector.class": RACK_AWARE}
    with Broker(config, brokers=3, racks=["az0", "az1", "az2"], history=True) as cluster:
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("events", 1, replica_assignment=[[0, 1, 2]])])["events"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(5):
            producer.produce("events", f"event-{i}".encode(), partition=0)
        producer.flush(30)

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "example", "client.rack": "az2",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("events", 0, 0)])
        read: list[str] = []
        deadline = time.monotonic() + 30
        while len(read) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                read.append((message.value() or b"").decode())
        consumer.close()
        fetches = {member.broker_id: sum(1 for h in member.history() if h.api_name == "Fetch")
                   for member in cluster.brokers}
        print(json.dumps({"racks": {m.broker_id: m.config["broker.rack"] for m in cluster.brokers},
                          "read": read, "fetches_served": fetches}))


if __name__ == "__main__":
    main()
