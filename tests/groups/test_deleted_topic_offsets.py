"""A deleted topic's committed offsets go from every group, as Kafka's coordinator drops them
(GroupCoordinator.handleDeletedPartitions, OffsetMetadataManager.onPartitionsDeleted), with real
clients committing and deleting; kafkapy kept them, so OffsetFetch, lag tools and a topic made
again under the same name saw the old positions."""

from __future__ import annotations

import confluent_kafka
from confluent_kafka.admin import AdminClient

from kafkapy import Broker
from kafkapy.groups.record_codec import decode_key
from kafkapy.groups.records import OffsetCommitKey
from kafkapy.testing import wait_until

SEED = {"gone": {"partitions": 2, "records": [{"value": "a", "partition": 0},
                                             {"value": "b", "partition": 1}]},
        "kept": {"partitions": 1, "records": [{"value": "c"}]}}


def commit(broker: Broker, group: str, offsets: list[tuple[str, int, int]]) -> None:
    """Offsets committed by a consumer outside group management."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(t, p, o) for t, p, o in offsets],
                        asynchronous=False)
    finally:
        consumer.close()


def delete_topic(broker: Broker, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.delete_topics([name])[name].result(10)


def test_a_deleted_topics_offsets_go_and_a_group_left_with_none_goes_too() -> None:
    with Broker() as broker:
        broker.seed(SEED)
        commit(broker, "both", [("gone", 0, 1), ("gone", 1, 1), ("kept", 0, 1)])
        commit(broker, "only-gone", [("gone", 0, 1)])
        delete_topic(broker, "gone")
        wait_until(lambda: broker.group("both").committed() == {("kept", 0): 1},
                   what="the deleted topic's offsets gone from 'both'")
        assert broker.group("only-gone") is None  # Empty with no offsets left: Dead, as Kafka
        # OffsetFetch, as a client reads its position: nothing for the gone topic's partitions
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers,
                                             "group.id": "both"})
        try:
            positions = consumer.committed([confluent_kafka.TopicPartition("gone", 0),
                                            confluent_kafka.TopicPartition("kept", 0)], timeout=10)
        finally:
            consumer.close()
        assert [p.offset for p in positions] == [confluent_kafka.OFFSET_INVALID, 1]
        # and durable: each removal is a tombstone in __consumer_offsets
        tombstones = {decode_key(r.key) for r in broker.records("__consumer_offsets")
                      if r.value is None and r.key is not None}
        assert {OffsetCommitKey("both", "gone", 0), OffsetCommitKey("both", "gone", 1),
                OffsetCommitKey("only-gone", "gone", 0)} <= tombstones


def test_a_topic_made_again_under_the_name_starts_without_the_old_offsets() -> None:
    with Broker() as broker:
        broker.seed(SEED)
        commit(broker, "again", [("gone", 0, 1), ("kept", 0, 1)])
        delete_topic(broker, "gone")
        broker.seed({"gone": {"partitions": 2}})
        wait_until(lambda: broker.group("again").committed() == {("kept", 0): 1},
                   what="the first 'gone' topic's offsets gone")


def test_a_kip848_groups_offsets_of_a_deleted_topic_go() -> None:
    with Broker() as broker:
        broker.seed(SEED)
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers,
                                             "group.id": "modern", "group.protocol": "consumer",
                                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe(["kept"])
            broker.wait_for_group("modern", state=None, members=1, poll=consumer)
            consumer.commit(offsets=[confluent_kafka.TopicPartition("gone", 0, 1),
                                     confluent_kafka.TopicPartition("kept", 0, 1)], asynchronous=False)
            assert broker.group("modern").committed() == {("gone", 0): 1, ("kept", 0): 1}
            delete_topic(broker, "gone")
            wait_until(lambda: broker.group("modern").committed() == {("kept", 0): 1},
                       what="the deleted topic's offsets gone from the KIP-848 group")
        finally:
            consumer.close()


def test_pending_transactional_offsets_of_a_deleted_topic_are_not_applied_at_commit() -> None:
    with Broker() as broker:
        broker.seed(SEED)
        group = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "txg"})
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                             "transactional.id": "txg-producer"})
        try:
            producer.init_transactions(10)
            producer.begin_transaction()
            producer.produce("kept", b"out")
            producer.send_offsets_to_transaction(
                [confluent_kafka.TopicPartition("gone", 0, 1), confluent_kafka.TopicPartition("kept", 0, 1)],
                group.consumer_group_metadata(), 10)
            assert {(o.topic, o.partition) for o in broker.group("txg").pending_offsets} == {
                ("gone", 0), ("kept", 0)}
            delete_topic(broker, "gone")
            wait_until(lambda: {(o.topic, o.partition) for o in broker.group("txg").pending_offsets}
                       == {("kept", 0)}, what="the deleted topic's pending offset gone")
            producer.commit_transaction(10)
            assert broker.group("txg").committed() == {("kept", 0): 1}
        finally:
            group.close()

