"""An exactly-once pipeline under coordinator faults, on a three-broker cluster in one process.

    python examples/exactly_once_faults.py     # prints what happened, as JSON

A confluent-kafka transactional producer invoices orders, sending its input offsets into each
transaction. Between transactions the test moves the coordinator of its transactional id and of
its group (``broker.move_coordinator``: no need to know which partition of the state topics
holds them), and fails its first EndTxn with a rule keyed on the transactional id alone
(``FaultRule(transactional_id=...)``), which librdkafka retries. ``broker.log_offsets`` shows
where the output's log stands with a transaction open and after: the last stable offset holds a
read_committed consumer back until the commit. See docs/testing.md.
"""

from __future__ import annotations

import json

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkapy import Broker
from kafkapy.faults import ApiKey, ErrorAnswer, ErrorCode, FaultRule

ORDERS, INVOICES, GROUP, TXN_ID = "orders", "invoices", "invoicer", "invoicer-1"
TIMEOUT_S = 10


def invoice(producer: Producer, reader: Consumer, order: int, commit: bool = True) -> None:
    producer.begin_transaction()
    producer.produce(INVOICES, value=f"invoice for order-{order}".encode(), partition=0)
    producer.flush(TIMEOUT_S)  # in the log before the offsets: log_offsets sees the open transaction
    producer.send_offsets_to_transaction([TopicPartition(ORDERS, 0, order + 1)],
                                         reader.consumer_group_metadata(), TIMEOUT_S)
    if commit:
        producer.commit_transaction(TIMEOUT_S)


def main() -> None:
    with Broker(brokers=3) as cluster:
        cluster.seed({ORDERS: {"partitions": 1, "records": [{"value": f"order-{n}"} for n in range(3)]},
                      INVOICES: {"partitions": 1}})
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": TXN_ID})
        reader = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP})
        try:
            producer.init_transactions(TIMEOUT_S)
            invoice(producer, reader, 0)
            before = cluster.transaction(TXN_ID)
            group = cluster.group(GROUP)
            assert before is not None and group is not None
            moves = [cluster.move_coordinator(transactional_id=TXN_ID, to=(before.coordinator + 1) % 3),
                     cluster.move_coordinator(group=GROUP, to=(group.coordinator + 1) % 3)]
            with cluster.faults.injected(FaultRule(ErrorAnswer(ErrorCode.CONCURRENT_TRANSACTIONS), times=1,
                                                   transactional_id=TXN_ID, api=ApiKey.END_TXN)) as rule:
                invoice(producer, reader, 1)
            invoice(producer, reader, 2, commit=False)
            [open_offsets] = cluster.log_offsets(INVOICES)
            producer.commit_transaction(TIMEOUT_S)
            [done_offsets] = cluster.log_offsets(INVOICES)
        finally:
            reader.close()
            del producer  # librdkafka's producer is destroyed while its brokers still answer
        after, offsets = cluster.transaction(TXN_ID), cluster.group(GROUP)
        assert after is not None and offsets is not None
        print(json.dumps({
            "moved": [[m.topic, m.partition, m.previous_leader, m.leader] for m in moves],
            "state_partitions": [before.state_partition, group.state_partition],
            "coordinators_after": [after.coordinator, offsets.coordinator],
            "end_txn_failed": rule.fired,
            "open": [open_offsets.last_stable_offset, open_offsets.high_watermark],
            "committed": [done_offsets.last_stable_offset, done_offsets.high_watermark],
            "invoices": [r.value.decode() for r in cluster.records(INVOICES, isolation="read_committed")
                         if r.value is not None],
            "group_offset": offsets.committed()[(ORDERS, 0)],
        }))


if __name__ == "__main__":
    main()
