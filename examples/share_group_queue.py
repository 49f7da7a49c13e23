"""Share groups (KIP-932, "queues for Kafka"): two confluent-kafka ShareConsumers of one group
split one partition's records between them, each record going to one of them; one record is
released once and comes back with delivery count 2, and one is rejected and never comes back.

    python examples/share_group_queue.py          # prints what each consumer got, as JSON

The group's own config ``share.auto.offset.reset=earliest``, set as against Kafka 4 with an admin
client's IncrementalAlterConfigs on the GROUP resource (``kafkapy configs --entity-type groups`` or
kafka-configs.sh do the same), makes it start at the partition's first record; Kafka's default,
latest, would start at the records produced after the group's first fetch.
"""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from kafkapy import Broker

TOPIC = "jobs"
JOBS = 30


def main() -> None:
    with Broker() as broker:
        broker.seed({TOPIC: {"partitions": 1}})
        earliest = ConfigEntry("share.auto.offset.reset", "earliest",
                               incremental_operation=AlterConfigOpType.SET)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        group = ConfigResource(ResourceType.GROUP, "workers", incremental_configs=[earliest])
        for future in admin.incremental_alter_configs([group]).values():
            future.result(10)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(JOBS):
            producer.produce(TOPIC, f"job-{i}".encode())
        producer.flush(10)
        workers = [ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "workers",
                                  "share.acknowledgement.mode": "explicit"}) for _ in range(2)]
        for worker in workers:
            worker.subscribe([TOPIC])
        done: dict[str, int] = {}  # job -> the delivery count it was accepted at
        rejected: list[str] = []
        deadline = time.monotonic() + 20
        while len(done) + len(rejected) < JOBS and time.monotonic() < deadline:
            for worker in workers:
                for message in worker.poll(0.2):
                    if message.error() is not None:
                        continue
                    job = message.value().decode()
                    kind: Any = AcknowledgeType.ACCEPT
                    if job == "job-7" and message.delivery_count() == 1:
                        kind = AcknowledgeType.RELEASE  # give it back: it comes again
                    elif job == "job-13":
                        kind = AcknowledgeType.REJECT  # poison: archived, never again
                        rejected.append(job)
                    else:
                        done[job] = message.delivery_count()
                    worker.acknowledge(message, kind)
        for worker in workers:
            worker.commit_sync(10)
            worker.close()
    print(json.dumps({"accepted": len(done), "rejected": rejected, "job-7 delivery count": done.get("job-7"),
                      "every job once": sorted(done) == sorted(f"job-{i}" for i in range(JOBS) if i != 13)}))


if __name__ == "__main__":
    main()
