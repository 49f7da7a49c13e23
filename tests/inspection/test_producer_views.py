"""broker.producers(): each partition leader's producer table, as real producers left it."""

from __future__ import annotations

import pytest
from quick_clients import RDKAFKA_CLIENT, warm_transaction_coordinator

from kafkapy.embedded import Broker

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "ledger"
TIMEOUT_S = 20


def test_an_idempotent_and_an_open_transactional_producer_on_two_brokers() -> None:
    with Broker({"transaction.state.log.num.partitions": 1}, brokers=2) as cluster:
        cluster.seed({TOPIC: {"partitions": 2}})
        runtime = cluster.runtime
        assert runtime is not None
        # Each partition is led by a broker of its own: the views come from both tables.
        assert {runtime.cluster.leadership(TOPIC, p)[0] for p in (0, 1)} == {0, 1}  # type: ignore[index]
        assert cluster.producers() == []

        idempotent = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                               "enable.idempotence": True, "linger.ms": 0,
                                               **RDKAFKA_CLIENT})
        for i in range(5):
            idempotent.produce(TOPIC, value=b"%d" % i, partition=0)
        assert idempotent.flush(TIMEOUT_S) == 0
        [plain] = cluster.producers(TOPIC)
        assert (plain.partition, plain.last_sequence, plain.current_txn_start_offset) == (0, 4, None)
        assert plain.producer_epoch == 0 and plain.coordinator_epoch == -1

        warm_transaction_coordinator(cluster.bootstrap_servers)
        txn = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                        "transactional.id": "ledger-writer", "linger.ms": 0,
                                        **RDKAFKA_CLIENT})
        txn.init_transactions(TIMEOUT_S)
        txn.begin_transaction()
        txn.produce(TOPIC, value=b"pending", partition=1)
        txn.produce(TOPIC, value=b"pending", partition=0)
        assert txn.flush(TIMEOUT_S) == 0
        [coordinator_view] = cluster.transactions("ledger-writer")
        views = cluster.producers(TOPIC)
        assert [(v.partition, v.producer_id) for v in views] == sorted(
            [(0, plain.producer_id), (0, coordinator_view.producer_id), (1, coordinator_view.producer_id)])
        opened = {v.partition: v for v in views if v.producer_id == coordinator_view.producer_id}
        # The open transaction's first offset in each partition: after the 5 idempotent records in 0.
        assert {p: v.current_txn_start_offset for p, v in opened.items()} == {0: 5, 1: 0}
        assert all(v.producer_epoch == coordinator_view.producer_epoch and v.last_sequence == 0
                   for v in opened.values())
        assert cluster.producers(TOPIC, 1) == [opened[1]]

        txn.commit_transaction(TIMEOUT_S)
        committed = [v for v in cluster.producers(TOPIC) if v.producer_id == coordinator_view.producer_id]
        assert [v.current_txn_start_offset for v in committed] == [None, None]
        assert all(v.coordinator_epoch >= 0 for v in committed)  # the markers' coordinator epoch
        assert cluster.producers("no-such-topic") == []
