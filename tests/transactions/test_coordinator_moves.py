"""The transaction coordinator across leader moves of __transaction_state, with a real
transactional producer (confluent-kafka): the markers carry the partition's leader epoch as
their coordinator epoch, and a broker that leads the partition again reads it again, so what
another coordinator wrote meanwhile is not lost."""

from __future__ import annotations

import pytest

from kafkapy.embedded import Broker

confluent_kafka = pytest.importorskip("confluent_kafka")

STATE = "__transaction_state"
TOPIC = "payments"
TIMEOUT_S = 20


def commit_one(producer: confluent_kafka.Producer, value: bytes) -> None:
    producer.begin_transaction()
    producer.produce(TOPIC, value=value, partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    producer.commit_transaction(TIMEOUT_S)


def test_markers_carry_the_coordinator_epoch_and_a_returning_coordinator_reads_again() -> None:
    with Broker({"transaction.state.log.num.partitions": 1}, brokers=2) as cluster:
        cluster.seed({TOPIC: {"partitions": 1}})
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                             "transactional.id": "mover", "linger.ms": 0})
        producer.init_transactions(TIMEOUT_S)
        runtime = cluster.runtime
        assert runtime is not None
        first_leader, first_epoch = runtime.cluster.leadership(STATE, 0)  # type: ignore[misc]
        commit_one(producer, b"one")
        [view] = cluster.producers(TOPIC)
        assert view.coordinator_epoch == first_epoch

        other = 1 - first_leader
        cluster.move_leader(STATE, 0, to=other)  # the other broker coordinates now, one epoch on
        commit_one(producer, b"two")  # the client finds the new coordinator and goes on
        [view] = cluster.producers(TOPIC)
        assert view.coordinator_epoch == first_epoch + 1
        [moved] = cluster.transactions("mover")
        assert (moved.coordinator, moved.state) == (other, "CompleteCommit")

        cluster.move_leader(STATE, 0, to=first_leader)  # back: it must not trust what it had loaded
        [back] = cluster.transactions("mover")
        assert back.coordinator == first_leader
        assert (back.state, back.producer_epoch, back.last_update_ms) == \
            (moved.state, moved.producer_epoch, moved.last_update_ms)
        commit_one(producer, b"three")
        [view] = cluster.producers(TOPIC)
        assert view.coordinator_epoch == first_epoch + 2
        assert [r.value for r in cluster.records(TOPIC) if not r.is_control] == [b"one", b"two", b"three"]
