"""Move a partition between the directories of ``log.dirs`` with kafka-python's admin client
(AlterReplicaLogDirs; docs/log.md).

    python examples/log_dir_move.py      # prints what happened, as JSON

One broker with two log dirs: records go into a partition, kafka-python's
``alter_replica_log_dirs`` moves it to the other dir while the producer keeps sending,
``describe_log_dirs`` shows where it is, and a consumer reads every record back once.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from kafkapy import Broker


def where(admin: KafkaAdminClient) -> dict[str, list[str]]:
    """{log dir: ["topic-partition" (future) ...]} as DescribeLogDirs answers."""
    [broker] = admin.describe_log_dirs()
    return {Path(d["log_dir"]).name: [f"{t['name']}-{p['partition_index']}"
                                      + (" (future)" if p["is_future_key"] else "")
                                      for t in d["topics"] for p in t["partitions"]]
            for d in broker["log_dirs"]}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        dirs = [f"{tmp}/disk1", f"{tmp}/disk2"]
        with Broker({"broker.id": 1, "log.dirs": ",".join(dirs)}) as broker:
            admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
            admin.create_topics([NewTopic("jbod", 1, 1)])
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
            for i in range(500):
                producer.send("jbod", f"before-{i}".encode(), partition=0)
            producer.flush()
            before = where(admin)
            target = next(d for d in dirs if not Path(d, "jbod-0").exists())
            errors = admin.alter_replica_log_dirs({("jbod", 0, 1): target})
            for i in range(500):  # the move goes on meanwhile
                producer.send("jbod", f"during-{i}".encode(), partition=0)
            producer.flush()
            deadline = time.monotonic() + 30
            while not Path(target, "jbod-0").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            after = where(admin)
            consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers,
                                     auto_offset_reset="earliest")
            consumer.assign([TopicPartition("jbod", 0)])
            read: list[str] = []
            while len(read) < 1000 and time.monotonic() < deadline:
                read += [r.value.decode() for batch in consumer.poll(200).values() for r in batch]
            for client in (consumer, producer, admin):
                client.close()
    sent = [f"before-{i}" for i in range(500)] + [f"during-{i}" for i in range(500)]
    print(json.dumps({"before": before, "errors": [e.__name__ for e in errors.values()], "after": after,
                      "read": len(read), "in_order": read == sent}))


if __name__ == "__main__":
    main()
