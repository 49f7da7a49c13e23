"""A producer and a consumer group against kafkapy's cluster faults (docs/testing.md).

    python examples/cluster_faults.py      # prints what happened, as JSON

On a three-broker cluster in one process: a partition's leader moves while an idempotent
confluent-kafka producer writes to it (it is refused by the old leader, finds the new one, and
the log holds every record once); then a kafka-python consumer's session is ended at its
coordinator: its commit is refused until it has rejoined as a new member.
"""

from __future__ import annotations

import json
import time

from confluent_kafka import Producer
from kafka import KafkaConsumer
from kafka.errors import CommitFailedError, RebalanceInProgressError

from kafkapy import Broker
from kafkapy.errors import ErrorCode, KafkaApiError


def main() -> None:
    with Broker(brokers=3) as cluster:
        cluster.seed({"orders": {"partitions": 1}})
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True,
                             "retry.backoff.ms": 10})
        # librdkafka asks for its producer id when a Metadata answer comes from a broker it knows, else
        # 500 ms later: a second Metadata request saves that wait (docs/testing.md, "Keeping tests fast")
        for _ in range(2):
            producer.list_topics("orders", timeout=30)
        for i in range(5):
            producer.produce("orders", value=f"order-{i}".encode(), partition=0)
        producer.flush(30)
        try:
            move = cluster.move_leader("orders", 0, to=1)
        except KafkaApiError as refused:  # ELECTION_NOT_NEEDED: broker 1 leads it already
            assert refused.code == ErrorCode.ELECTION_NOT_NEEDED
            move = cluster.move_leader("orders", 0, to=2)
        for i in range(5, 10):
            producer.produce("orders", value=f"order-{i}".encode(), partition=0)
        undelivered = producer.flush(30)

        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="readers",
                                 client_id="reader", auto_offset_reset="earliest", enable_auto_commit=False)
        deadline = time.monotonic() + 30
        while "orders" not in consumer.topics() and time.monotonic() < deadline:
            time.sleep(0.05)  # knowing the topic first, its first join gets the partition
        consumer.subscribe(["orders"])
        read: list[str] = []
        while len(read) < 10 and time.monotonic() < deadline:
            read += [r.value.decode() for batch in consumer.poll(200).values() for r in batch]
        expired = cluster.expire_session("readers", client_id="reader")
        refused_commits = 0
        while True:  # as the expired member, its commit is refused; polling rejoins the group
            consumer.poll(50)  # no records are coming: each poll waits this long
            try:
                consumer.commit()
                break
            except (CommitFailedError, RebalanceInProgressError):  # not yet a member again
                refused_commits += 1
        consumer.close()

        print(json.dumps({
            "move": {"from": move.previous_leader, "to": move.leader, "leader_epoch": move.leader_epoch},
            "undelivered": undelivered,
            "stored": [(r.offset, r.value.decode() if r.value else None, r.sequence)
                       for r in cluster.records("orders")],
            "read": read,
            "expired": len(expired),
            "refused_commits": refused_commits,
        }, indent=2))


if __name__ == "__main__":
    main()
