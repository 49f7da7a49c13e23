"""broker.move_coordinator(transactional_id=... | group=..., to=...) under real clients on a
three-broker cluster: a confluent-kafka transaction opened at one coordinator commits at the
next, and an aiokafka group member commits on after its coordinator moved; the views' state
partition is the one moved (kafkapy's Kafka hash of the id, over the configured count)."""

from __future__ import annotations

import asyncio

import confluent_kafka
import pytest
from quick_clients import RDKAFKA_CLIENT, send_group_offsets, warm_transaction_coordinator

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.partitioning import OFFSETS_TOPIC, offsets_partition_for
from kafkapy.transactions.coordinator import TRANSACTION_STATE_TOPIC, transaction_partition_for

TIMEOUT_S = 30
TOPIC = "orders"
STATE_PARTITIONS = 50  # transaction.state.log.num.partitions and offsets.topic.num.partitions: Kafka's


def another(cluster: Broker, broker_id: int) -> int:
    return next(member.broker_id for member in cluster.brokers if member.broker_id != broker_id)


def test_a_transaction_opened_at_one_coordinator_commits_at_the_next(kafka_cluster: Broker) -> None:
    kafka_cluster.seed({TOPIC: {"partitions": 1}})
    warm_transaction_coordinator(kafka_cluster.bootstrap_servers)
    producer = confluent_kafka.Producer({**RDKAFKA_CLIENT, "transactional.id": "payments", "linger.ms": 0,
                                         "bootstrap.servers": kafka_cluster.bootstrap_servers})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"paid", partition=0)
    send_group_offsets(producer, kafka_cluster.bootstrap_servers, "payers", TOPIC, 5)
    before = kafka_cluster.transaction("payments")
    assert before is not None and before.state == "Ongoing"
    assert before.state_partition == transaction_partition_for("payments", STATE_PARTITIONS)

    to = another(kafka_cluster, before.coordinator)
    move = kafka_cluster.move_coordinator(transactional_id="payments", to=to)
    assert (move.topic, move.partition, move.previous_leader) == \
        (TRANSACTION_STATE_TOPIC, before.state_partition, before.coordinator)
    moved = kafka_cluster.transaction("payments")  # loaded by the new coordinator, still open
    assert moved is not None and (moved.coordinator, moved.state) == (move.leader, "Ongoing")
    assert moved.partitions == before.partitions and moved.producer_id == before.producer_id

    producer.commit_transaction(TIMEOUT_S)  # EndTxn at the old one: NOT_COORDINATOR, then the new one
    done = kafka_cluster.transaction("payments")
    assert done is not None and (done.coordinator, done.state) == (move.leader, "CompleteCommit")
    assert [r.value for r in kafka_cluster.records(TOPIC, isolation="read_committed")] == [b"paid"]
    payers = kafka_cluster.group("payers")
    assert payers is not None and payers.committed() == {(TOPIC, 0): 5}


async def member_commits_across_a_move(cluster: Broker) -> tuple[int, int, int]:
    """(the coordinator before, after, the offset committed after the move)."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=cluster.bootstrap_servers, group_id="workers",
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                heartbeat_interval_ms=100)
    await consumer.start()
    try:
        got = 0
        while got < 2:
            batches = await consumer.getmany(timeout_ms=1000, max_records=2)
            got += sum(len(records) for records in batches.values())
        await consumer.commit()
        view = await asyncio.to_thread(cluster.group, "workers")
        assert view is not None and view.committed() == {(TOPIC, 0): 2}
        assert view.state_partition == offsets_partition_for("workers", STATE_PARTITIONS)
        move = await asyncio.to_thread(lambda: cluster.move_coordinator(
            group="workers", to=another(cluster, view.coordinator)))
        assert (move.topic, move.partition) == (OFFSETS_TOPIC, view.state_partition)
        while got < 4:
            batches = await consumer.getmany(timeout_ms=1000)
            got += sum(len(records) for records in batches.values())
        await consumer.commit()  # NOT_COORDINATOR at the old one; found again, committed at the new
        after = await asyncio.to_thread(cluster.group, "workers")
        assert after is not None and after.committed() == {(TOPIC, 0): 4}
        return view.coordinator, after.coordinator, move.leader
    finally:
        await consumer.stop()


def test_a_group_member_commits_on_after_its_coordinator_moved(kafka_cluster: Broker) -> None:
    kafka_cluster.seed({TOPIC: {"partitions": 1, "records": [{"value": f"v{i}"} for i in range(4)]}})
    before, after, leader = asyncio.run(member_commits_across_a_move(kafka_cluster))
    assert after == leader != before


def test_a_move_that_cannot_be_is_one_error(kafka_cluster: Broker) -> None:
    with pytest.raises(ValueError, match=r"^give transactional_id or group \(one of them\)"):
        kafka_cluster.move_coordinator(to=1)
    with pytest.raises(ValueError, match=r"^give transactional_id or group"):
        kafka_cluster.move_coordinator(transactional_id="t", group="g", to=1)
    with pytest.raises(KafkaApiError, match=r"^COORDINATOR_NOT_AVAILABLE: no transactional id") as early:
        kafka_cluster.move_coordinator(transactional_id="payments", to=1)
    assert early.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    warm_transaction_coordinator(kafka_cluster.bootstrap_servers)
    partition = transaction_partition_for("payments", STATE_PARTITIONS)
    leadership = kafka_cluster._running().cluster.leadership(TRANSACTION_STATE_TOPIC, partition)
    assert leadership is not None
    with pytest.raises(KafkaApiError) as led:
        kafka_cluster.move_coordinator(transactional_id="payments", to=leadership[0])
    assert led.value.code == ErrorCode.ELECTION_NOT_NEEDED
    with pytest.raises(KafkaApiError) as nowhere:
        kafka_cluster.move_coordinator(transactional_id="payments", to=99)
    assert nowhere.value.code == ErrorCode.BROKER_NOT_AVAILABLE
