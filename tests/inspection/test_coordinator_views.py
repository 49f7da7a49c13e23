"""broker.groups() and broker.transactions() against what real clients did: a kafka-python group
of two, a confluent-kafka consumer group, and a confluent-kafka transactional producer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from kafka_python_groups import PolledMember, close_all
from quick_clients import KAFKA_PYTHON_CONSUMER, RDKAFKA_CLIENT, warm_transaction_coordinator

from kafkapy.embedded import Broker
from kafkapy.inspection import GroupView
from kafkapy.testing import wait_until

TIMEOUT_S = 20
TOPIC = "orders"
PARTITIONS = 4
RECORDS_PER_PARTITION = 3
HISTORY = "kafkapy.observers.RequestHistory"


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"observer.class.names": HISTORY}) as running:
        running.seed({TOPIC: {"partitions": PARTITIONS, "records": [
            {"value": f"{p}-{i}", "partition": p} for p in range(PARTITIONS)
            for i in range(RECORDS_PER_PARTITION)]}})
        yield running


class KafkaPythonMember(PolledMember):
    """A kafka-python consumer polled on a thread of its own; it commits what it read."""

    def __init__(self, broker: Broker, group: str) -> None:
        from kafka import KafkaConsumer

        super().__init__(KafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                       client_id=f"reader-{id(self)}", auto_offset_reset="earliest",
                                       enable_auto_commit=False, session_timeout_ms=6000,
                                       **KAFKA_PYTHON_CONSUMER))


def settled(broker: Broker, group: str, members: list[KafkaPythonMember]) -> GroupView | None:
    """The group once Stable, each member holding its half (a member that polled alone before the
    second joined still holds all four until its next poll) and every partition's offset committed."""
    view = broker.group(group)
    done = (view is not None and view.state == "Stable" and len(view.members) == len(members)
            and all(len(m.parts) == PARTITIONS // len(members) for m in members)
            and sorted(p for m in members for p in m.parts) == list(range(PARTITIONS))
            and view.committed() == {(TOPIC, p): RECORDS_PER_PARTITION for p in range(PARTITIONS)})
    return view if done else None


def test_a_kafka_python_group_of_two_shows_members_assignment_and_offsets(broker: Broker) -> None:
    members = [KafkaPythonMember(broker, "inspected") for _ in range(2)]
    try:
        view = wait_until(lambda: settled(broker, "inspected", members), TIMEOUT_S,
                          "a stable group of two with every offset committed")
        by_client = {m.consumer.config["client_id"]: m.parts for m in members}
    finally:
        close_all(members)
    assert (view.kind, view.protocol_type, view.protocol) == ("classic", "consumer", "range")
    assert view.generation >= 1 and view.coordinator == broker.broker_id
    assert view.leader in {m.member_id for m in view.members}
    for member in view.members:
        assert member.subscription == (TOPIC,)
        assert member.session_timeout_ms == 6000 and member.member_epoch is None
        assert member.client_host == "/127.0.0.1"
        # what the broker holds is what each client was told it owns
        assert set(member.assignment.get(TOPIC, ())) == by_client[member.client_id]
        assert list(member.assignment) == [TOPIC] and len(member.assignment[TOPIC]) == 2
    assert [(o.topic, o.partition, o.offset, o.metadata) for o in view.offsets] == [
        (TOPIC, p, RECORDS_PER_PARTITION, "") for p in range(PARTITIONS)]
    assert all(o.commit_timestamp > 0 and not o.pending for o in view.offsets)
    assert view.pending_offsets == ()
    # frozen values: nothing a test does to them reaches the broker
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        view.state = "Dead"  # type: ignore[misc]
    with pytest.raises(TypeError):
        view.members[0].assignment[TOPIC] = ()  # type: ignore[index]
    assert broker.groups("inspected") == [broker.group("inspected")] != []
    assert broker.groups("no-such-group") == [] and broker.group("no-such-group") is None


def test_a_standalone_committer_and_a_kip848_group_are_listed_by_kind(broker: Broker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    standalone = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "by-hand",
                           "enable.auto.commit": False})
    try:
        standalone.commit(offsets=[TopicPartition(TOPIC, 1, 2)], asynchronous=False)
    finally:
        standalone.close()
    modern = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "modern",
                       "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        modern.subscribe([TOPIC])

        def assigned() -> Any:
            modern.poll(0.1)
            view = broker.group("modern")
            return view if view is not None and view.members and view.state == "Stable" and \
                modern.assignment() else None
        view = wait_until(assigned, TIMEOUT_S, "the KIP-848 member assigned")
    finally:
        modern.close()
    assert (view.kind, view.protocol_type, view.leader) == ("consumer", "consumer", None)
    [member] = view.members
    assert member.subscription == (TOPIC,) and member.member_epoch == view.generation >= 1
    assert dict(member.assignment) == {TOPIC: tuple(range(PARTITIONS))}
    assert view.assignment_epoch == view.generation and view.protocol in ("uniform", "range")

    [simple] = broker.groups("by-hand")
    assert (simple.kind, simple.protocol_type, simple.state, simple.members) == ("classic", "", "Empty", ())
    assert simple.committed() == {(TOPIC, 1): 2}
    assert [g.group_id for g in broker.groups()] == ["by-hand", "modern"]


def test_a_transaction_is_ongoing_with_its_partitions_then_complete(broker: Broker) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    warm_transaction_coordinator(broker.bootstrap_servers)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "inspected-tx",
                         "transaction.timeout.ms": 30000, "linger.ms": 0, **RDKAFKA_CLIENT})
    producer.init_transactions(TIMEOUT_S)
    [idle] = broker.transactions()
    assert (idle.transactional_id, idle.state, idle.partitions, idle.start_time_ms) == \
        ("inspected-tx", "Empty", (), -1)
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"a", partition=0)
    producer.produce(TOPIC, value=b"b", partition=2)
    assert producer.flush(TIMEOUT_S) == 0
    reader = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "eos"})
    try:
        producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 7)], reader.consumer_group_metadata(),
                                             TIMEOUT_S)
    finally:
        reader.close()
    open_txn = broker.transaction("inspected-tx")
    assert open_txn is not None and open_txn.state == "Ongoing"
    offsets_partition = [tp for tp in open_txn.partitions if tp[0] == "__consumer_offsets"]
    assert len(offsets_partition) == 1  # AddOffsetsToTxn added the group's partition
    assert open_txn.partitions == (*offsets_partition, (TOPIC, 0), (TOPIC, 2))
    assert open_txn.topics == {TOPIC, "__consumer_offsets"}
    assert open_txn.producer_id == idle.producer_id and open_txn.producer_epoch == idle.producer_epoch
    assert open_txn.timeout_ms == 30000 and open_txn.start_time_ms >= idle.last_update_ms > 0
    [eos] = broker.groups("eos")
    assert eos.offsets == () and [(o.topic, o.partition, o.offset, o.pending, o.producer_id)
                                  for o in eos.pending_offsets] == [(TOPIC, 0, 7, True, idle.producer_id)]

    producer.commit_transaction(TIMEOUT_S)
    done = broker.transaction("inspected-tx")
    assert done is not None and (done.state, done.partitions) == ("CompleteCommit", ())
    assert done.last_update_ms >= open_txn.start_time_ms
    [eos] = broker.groups("eos")
    assert eos.committed() == {(TOPIC, 0): 7} and eos.pending_offsets == ()
    assert broker.transactions("someone-else") == []


def test_in_a_cluster_each_group_is_read_from_its_coordinator(kafka_cluster: Broker) -> None:
    from confluent_kafka import Consumer, TopicPartition

    kafka_cluster.seed({TOPIC: {"partitions": PARTITIONS}})
    ids = [f"spread-{i}" for i in range(6)]
    for group_id in ids:
        consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": group_id})
        try:
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, len(group_id))], asynchronous=False)
        finally:
            consumer.close()
    views = kafka_cluster.groups()
    assert [v.group_id for v in views] == ids  # each once, though three coordinators hold groups
    assert len({v.coordinator for v in views}) > 1  # spread over the brokers (Kafka's hash of the id)
    view_cluster = kafka_cluster._running().cluster
    for view in views:
        groups_module = next(m for m in kafka_cluster.brokers[0]._running().modules
                             if type(m).__name__ == "GroupsModule")
        partition = groups_module.group_log.partition_for(view.group_id)
        leadership = view_cluster.leadership("__consumer_offsets", partition)
        assert leadership is not None and view.coordinator == leadership[0]
        assert view.committed() == {(TOPIC, 0): len(view.group_id)}
