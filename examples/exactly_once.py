"""A consume-transform-produce loop with transactions, tested against an embedded broker.

    python examples/exactly_once.py            # prints what each kind of consumer of the output sees

The loop reads orders, writes one invoice per order and commits its input offsets in the same
transaction (``send_offsets_to_transaction``), as Kafka Streams and other exactly-once pipelines
do. One batch is aborted on purpose halfway, as a crash would leave it. A ``read_committed``
consumer of the output then sees every invoice once and nothing of the aborted batch, while a
``read_uncommitted`` one sees the aborted records too: the broker keeps the last stable offset and
the aborted-transaction index exactly as Kafka does (docs/transactions.md).
"""

from __future__ import annotations

import json
from collections import Counter

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from kafkapy import Broker

ORDERS, INVOICES = "orders", "invoices"
ORDER_COUNT = 6


def read_all(bootstrap: str, topic: str, isolation: str) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{isolation}",
                         "isolation.level": isolation, "enable.partition.eof": True})
    values: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while True:
            message = consumer.poll(10)
            if message is None:
                raise SystemExit(f"no end of {topic} within 10 s")
            if message.error() is not None:  # the partition's end (for read_committed: the LSO)
                return values
            values.append(message.value().decode())
    finally:
        consumer.close()


def transform(bootstrap: str) -> None:
    """Invoice every order, one transaction per two orders; the second transaction aborts."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "invoicer",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "invoicer-1"})
    try:
        producer.init_transactions(10)
        consumer.assign([TopicPartition(ORDERS, 0, 0)])
        done, transactions = 0, 0
        while done < ORDER_COUNT:
            batch = consumer.consume(num_messages=2, timeout=10)
            if not batch:
                raise SystemExit("the invoicer read nothing for 10 s")
            producer.begin_transaction()
            for order in batch:
                producer.produce(INVOICES, value=f"invoice for {order.value().decode()}".encode())
            transactions += 1
            if transactions == 2:  # a crash mid-transaction: nothing of it may be seen as committed
                producer.flush(10)  # its invoices reached the broker (abort would drop unsent ones)
                producer.abort_transaction(10)
                consumer.seek(TopicPartition(ORDERS, 0, batch[0].offset()))  # and do it again
                continue
            last = batch[-1]
            producer.send_offsets_to_transaction(
                [TopicPartition(ORDERS, 0, last.offset() + 1)], consumer.consumer_group_metadata(), 10)
            producer.commit_transaction(10)
            done += len(batch)
    except KafkaException as error:
        raise SystemExit(f"transaction failed: {error}") from None
    finally:
        consumer.close()


def main() -> None:
    config = {"auto.create.topics.enable": "true", "num.partitions": "1"}
    with Broker(config) as broker:
        bootstrap = broker.bootstrap_servers
        orders = Producer({"bootstrap.servers": bootstrap})
        for n in range(ORDER_COUNT):
            orders.produce(ORDERS, value=f"order-{n}".encode())
        if orders.flush(10):
            raise SystemExit("the orders were not delivered")
        transform(bootstrap)
        committed = read_all(bootstrap, INVOICES, "read_committed")
        uncommitted = read_all(bootstrap, INVOICES, "read_uncommitted")
    print(json.dumps({
        "read_committed": committed,
        "read_uncommitted": uncommitted,
        "only_read_uncommitted": sorted((Counter(uncommitted) - Counter(committed)).elements()),
    }))


if __name__ == "__main__":
    main()
