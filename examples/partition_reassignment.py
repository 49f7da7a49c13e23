"""Move a partition's replicas with kafka-python's admin client (KIP-455; docs/topics.md).

    python examples/partition_reassignment.py      # prints what happened, as JSON

On three brokers (1, 2, 3) in one process: a topic is made on brokers [1, 2], records go in, the
partition is reassigned to [2, 3], more records go in through the same producer (the old leader
refuses it, it finds the new one), and a consumer reads every record back from broker 2. The
reassignment is finished when the call returns, so nothing is listed as under way.
"""

from __future__ import annotations

import json
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from kafkapy import Broker


def placement(admin: KafkaAdminClient) -> dict[str, object]:
    [topic] = admin.describe_topics(["moving"])
    [partition] = topic["partitions"]
    return {"replicas": partition["replica_nodes"], "leader": partition["leader_id"],
            "leader_epoch": partition["leader_epoch"]}


def main() -> None:
    with Broker({"broker.id": 1}, brokers=3) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        admin.create_topics([NewTopic("moving", replica_assignments={0: [1, 2]})])
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, retry_backoff_ms=50)
        for i in range(5):
            producer.send("moving", f"before-{i}".encode(), partition=0)
        producer.flush()
        before = placement(admin)
        refused = admin.alter_partition_reassignments({TopicPartition("moving", 0): [2, 3]})
        after = placement(admin)
        ongoing = admin.list_partition_reassignments()
        for i in range(5):
            producer.send("moving", f"after-{i}".encode(), partition=0)
        producer.flush()
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest")
        consumer.assign([TopicPartition("moving", 0)])
        read: list[str] = []
        deadline = time.monotonic() + 30
        while len(read) < 10 and time.monotonic() < deadline:
            read += [r.value.decode() for batch in consumer.poll(200).values() for r in batch]
        for client in (consumer, producer, admin):
            client.close()
    print(json.dumps({"before": before, "refused": {str(tp): str(e) for tp, e in refused.items() if e},
                      "after": after, "ongoing": len(ongoing), "read": read}))


if __name__ == "__main__":
    main()
