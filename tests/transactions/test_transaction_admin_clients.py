"""kafka-python's KafkaAdminClient transaction tools (KIP-664) against the coordinator and the
partitions, with transactions confluent-kafka's transactional producer leaves open or commits:
list_transactions (with its state, producer id, duration and pattern filters),
describe_transactions, describe_producers and find_hanging_transactions.

describe_producers may name the replica to ask (the Java tool's ``--broker-id``): any replica
answers, as in Kafka (ReplicaManager.activeProducerState), and a broker that holds no replica
answers NOT_LEADER_OR_FOLLOWER. A transaction counts as hanging for kafka-python when it has run
past the transaction timeout bound plus five minutes by the client's clock: a broker on a virtual
clock an hour behind makes one without waiting."""

from __future__ import annotations

import time
from collections.abc import Iterator

import confluent_kafka
import pytest
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import NotLeaderForPartitionError, TransactionalIdNotFoundError
from kafka_python_admin import admin_of, create_topic, open_admin
from quick_clients import RDKAFKA_CLIENT, warm_transaction_coordinator

from kafkapy import VirtualClock
from kafkapy.embedded import Broker

TIMEOUT_S = 20
TOPIC = "payments"
TXN_TIMEOUT_MS = 45_000



def transactional(broker: Broker, transactional_id: str) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, **RDKAFKA_CLIENT,
                                         "transactional.id": transactional_id,
                                         "transaction.timeout.ms": TXN_TIMEOUT_MS})
    producer.init_transactions(TIMEOUT_S)
    return producer


def open_transaction(broker: Broker, transactional_id: str, partitions: list[int],
                     records: int = 3) -> confluent_kafka.Producer:
    """A producer whose transaction has written ``records`` records to each of ``partitions``."""
    producer = transactional(broker, transactional_id)
    producer.begin_transaction()
    for partition in partitions:
        for _ in range(records):
            producer.produce(TOPIC, value=b"v", partition=partition)
    assert producer.flush(TIMEOUT_S) == 0
    return producer


def idempotent_writes(broker: Broker, partition: int, records: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, **RDKAFKA_CLIENT,
                                         "enable.idempotence": True})
    for _ in range(records):
        producer.produce(TOPIC, value=b"i", partition=partition)
    assert producer.flush(TIMEOUT_S) == 0


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1}) as running:
        create_topic(running, TOPIC, 3)
        warm_transaction_coordinator(running.bootstrap_servers)
        yield running


@pytest.fixture
def admin(broker: Broker) -> Iterator[KafkaAdminClient]:
    yield from open_admin(broker)


def test_transactions_are_listed_and_described(broker: Broker, admin: KafkaAdminClient) -> None:
    started_ms = int(time.time() * 1000)
    ongoing = open_transaction(broker, "ledger", [0, 1])
    done = open_transaction(broker, "audit", [2])
    done.commit_transaction(TIMEOUT_S)

    [(broker_id, listed)] = admin.list_transactions().items()
    assert broker_id == broker.broker_id
    states = {listing.transactional_id: (listing.state.value, listing.producer_id) for listing in listed}
    assert {name: state for name, (state, _) in states.items()} == {"ledger": "Ongoing",
                                                                    "audit": "CompleteCommit"}
    ledger_pid = states["ledger"][1]
    by_state = admin.list_transactions(state_filters=["Ongoing"])[broker_id]
    assert [listing.transactional_id for listing in by_state] == ["ledger"]
    by_pid = admin.list_transactions(producer_id_filters=[ledger_pid])[broker_id]
    assert [listing.transactional_id for listing in by_pid] == ["ledger"]
    assert admin.list_transactions(duration_filter_ms=3_600_000)[broker_id] == []  # none ran an hour
    by_pattern = admin.list_transactions(transactional_id_pattern="aud.*")[broker_id]  # the whole id
    assert [listing.transactional_id for listing in by_pattern] == ["audit"]

    described = admin.describe_transactions(["ledger", "audit"])
    ledger = described["ledger"]
    assert (ledger.coordinator_id, ledger.state.value, ledger.producer_id, ledger.producer_epoch) == (
        broker.broker_id, "Ongoing", ledger_pid, 0)
    assert ledger.transaction_timeout_ms == TXN_TIMEOUT_MS
    assert started_ms <= ledger.transaction_start_time_ms <= int(time.time() * 1000)
    assert ledger.topic_partitions == {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)}
    audit = described["audit"]
    assert (audit.state.value, audit.topic_partitions) == ("CompleteCommit", set())
    with pytest.raises(TransactionalIdNotFoundError):
        admin.describe_transactions(["never-used"])

    idempotent_writes(broker, 2, records=5)
    producers = admin.describe_producers([TopicPartition(TOPIC, p) for p in range(3)])
    [on_0] = producers[TopicPartition(TOPIC, 0)].active_producers
    assert (on_0.producer_id, on_0.last_sequence, on_0.current_transaction_start_offset) == (ledger_pid, 2, 0)
    assert on_0.coordinator_epoch == -1  # no marker written yet
    on_2 = {p.producer_id: p for p in producers[TopicPartition(TOPIC, 2)].active_producers}
    audit_on_2 = on_2.pop(audit.producer_id)
    assert (audit_on_2.last_sequence, audit_on_2.current_transaction_start_offset) == (2, -1)  # committed
    [idempotent] = on_2.values()
    assert (idempotent.last_sequence, idempotent.current_transaction_start_offset) == (4, -1)

    assert admin.find_hanging_transactions() == []  # young: nothing hangs
    ongoing.abort_transaction(TIMEOUT_S)
    aborted = admin.describe_transactions(["ledger"])["ledger"]
    assert (aborted.state.value, aborted.topic_partitions) == ("CompleteAbort", set())
    [on_0] = admin.describe_producers([TopicPartition(TOPIC, 0)])[TopicPartition(TOPIC, 0)].active_producers
    assert on_0.current_transaction_start_offset == -1


def test_any_replica_describes_a_partitions_producers_on_three_brokers() -> None:
    with Broker({"broker.id": 1}, brokers=3) as cluster:
        admin = admin_of(cluster)
        try:
            admin.create_topics([NewTopic(TOPIC, 3, 3), NewTopic("narrow", 1, 1)])
            admin.wait_for_topics([TOPIC, "narrow"], timeout_ms=TIMEOUT_S * 1000)
            warm_transaction_coordinator(cluster.bootstrap_servers)
            producer = open_transaction(cluster, "spread", [0, 1, 2])
            pid = admin.describe_transactions(["spread"])["spread"].producer_id
            for partition in range(3):
                asked = TopicPartition(TOPIC, partition)
                from_leader = admin.describe_producers([asked])[asked]
                assert [(p.producer_id, p.last_sequence, p.current_transaction_start_offset)
                        for p in from_leader.active_producers] == [(pid, 2, 0)]
                for broker_id in (1, 2, 3):  # every broker holds a replica: each answers the same
                    assert admin.describe_producers([asked], broker_id=broker_id)[asked] == from_leader

            narrow = TopicPartition("narrow", 0)
            [replica] = admin.describe_topics(["narrow"])[0]["partitions"][0]["replica_nodes"]
            for broker_id in {1, 2, 3} - {replica}:
                with pytest.raises(NotLeaderForPartitionError):
                    admin.describe_producers([narrow], broker_id=broker_id)
            assert admin.describe_producers([narrow], broker_id=replica)[narrow].active_producers == []
            producer.abort_transaction(TIMEOUT_S)
        finally:
            admin.close()


def test_a_transaction_open_past_the_timeout_bound_is_found_hanging() -> None:
    # The broker's clock (the transaction's start time) is an hour behind the client's.
    clock = VirtualClock(wall_start=time.time() - 3600)
    with Broker({"broker.id": 1}, clock=clock) as broker:
        admin = admin_of(broker)
        try:
            admin.create_topics([NewTopic(TOPIC, 2, 1)])
            warm_transaction_coordinator(broker.bootstrap_servers)
            stuck = open_transaction(broker, "stuck", [1])
            done = open_transaction(broker, "done", [0])
            done.commit_transaction(TIMEOUT_S)

            [hanging] = admin.find_hanging_transactions()  # bound: 15 min + 5 min
            assert (hanging["transactional_id"], hanging["state"], hanging["coordinator_id"]) == (
                "stuck", "Ongoing", broker.broker_id)
            assert hanging["topic_partitions"] == [TopicPartition(TOPIC, 1)]
            assert 3500_000 < hanging["age_ms"] < 3700_000
            assert admin.find_hanging_transactions(max_transaction_timeout_ms=3_600_000) == []
            stuck.abort_transaction(TIMEOUT_S)
            assert admin.find_hanging_transactions() == []
        finally:
            admin.close()
