"""``broker.log_offsets()``: a partition's last stable offset, high watermark and aborted
transactions, checked against what confluent-kafka's consumers are told (ListOffsets at each
isolation level) while a transaction is open, after it aborts and after another commits."""

from __future__ import annotations

import confluent_kafka
import pytest

from kafkapy import Broker
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.inspection import AbortedTransaction, LogOffsets


def watermarks(broker: Broker, isolation: str) -> tuple[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "lso",
                                         "isolation.level": isolation})
    try:
        low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition("out", 0), timeout=10)
        return low, high
    finally:
        consumer.close()


def test_log_offsets_follow_a_transaction_as_consumers_are_told() -> None:
    with Broker() as broker:
        broker.seed({"out": {"partitions": 2, "records": [{"value": "plain", "partition": 0}]}})
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                             "transactional.id": "lso-tx"})
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.produce("out", b"open", partition=0)
        assert producer.flush(10) == 0

        [open_txn] = broker.log_offsets("out", 0)
        assert open_txn == LogOffsets("out", 0, 0, 1, 2, 2, ())  # the open transaction holds the LSO at 1
        assert watermarks(broker, "read_committed") == (0, open_txn.last_stable_offset)
        assert watermarks(broker, "read_uncommitted") == (0, open_txn.high_watermark)

        producer.abort_transaction(10)
        producer_id = broker.transaction("lso-tx").producer_id
        [aborted] = broker.log_offsets("out", 0)
        assert aborted == LogOffsets("out", 0, 0, 3, 3, 3, (AbortedTransaction(producer_id, 1, 2),))
        assert [r.offset for r in broker.records("out", 0) if r.is_control] == [2]  # the marker
        assert watermarks(broker, "read_committed") == (0, 3)

        producer.begin_transaction()
        producer.produce("out", b"kept", partition=0)
        producer.commit_transaction(10)
        [committed] = broker.log_offsets("out", 0)
        assert (committed.last_stable_offset, committed.high_watermark) == (5, 5)
        assert committed.aborted_transactions == aborted.aborted_transactions  # commits are not listed
        assert [r.value for r in broker.records("out", 0, isolation="read_committed")] == [b"plain", b"kept"]

        assert [o.partition for o in broker.log_offsets("out")] == [0, 1]
        assert broker.log_offsets("not-made") == []
        with pytest.raises(KafkaApiError) as refused:
            broker.log_offsets("out", 2)
        assert refused.value.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_on_a_cluster_each_partition_is_read_once_from_its_leader() -> None:
    with Broker(brokers=2) as cluster:
        records = [{"value": "v", "partition": p} for p in range(4)]
        cluster.seed({"out": {"partitions": 4, "records": records}})
        offsets = cluster.log_offsets("out")
        assert [(o.partition, o.high_watermark, o.last_stable_offset) for o in offsets] == [
            (p, 1, 1) for p in range(4)]
