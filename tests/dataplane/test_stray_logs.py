"""A deleted topic's logs never stop the topic made again under its name after a restart.

A broker that was down (or killed) when a topic was deleted finds its logs at the next start. With a
store that keeps topic ids across restarts (log.dirs without
ZooKeeper: the durable store), a restart came between the two: the topic made again found the
old log holding the old id and was refused as Kafka refuses it (InconsistentTopicIdException),
so its partitions had no leader. Kafka's KRaft broker sets such logs aside at load
(isStrayKraftReplica: the topic id is not in the metadata; renamed ``-stray``), and so does
kafkapy now; a log of a topic that still exists at the restart and is deleted and made again
after it is dropped at first access, as within one run. Found by tests/store/test_crash_consistency
(a SIGKILL after a DeleteTopics), here after clean stops with the log put back as a kill leaves it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkapy import Broker
from kafkapy.log.partition_metadata import read_partition_metadata

TIMEOUT_S = 20


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until its futures are answered
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(TIMEOUT_S)


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic], operation_timeout=TIMEOUT_S).values():
        future.result(TIMEOUT_S)


def produce_one(bootstrap: str, topic: str, value: bytes, partition: int = 0) -> list[str]:
    """The delivery errors of one record written with acks=all (none: it was written)."""
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 10000})
    producer.produce(topic, value, partition=partition,
                     on_delivery=lambda err, _: errors.append(str(err)) if err is not None else None)
    producer.flush(TIMEOUT_S)
    return errors


def read_all(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = consumer.poll(TIMEOUT_S)
        assert message is not None and message.error() is None, message
        values = [message.value()]
        while (message := consumer.poll(0.5)) is not None:
            values.append(message.value())
    finally:
        consumer.close()
    return values


def test_a_topic_deleted_before_a_restart_is_made_again_after_it(tmp_path: Path) -> None:
    config = {"log.dirs": str(tmp_path), "broker.id": 1, "auto.create.topics.enable": False}
    with Broker(config) as broker:
        create_topic(broker.bootstrap_servers, "orders")
        assert produce_one(broker.bootstrap_servers, "orders", b"old") == []
    # A copy of the log as it was, put back after the deletion: a broker killed before it renamed
    # the log -delete leaves it so (a running broker renames it at once, test_deleted_logs).
    kept = tmp_path.parent / "kept-orders-0"
    shutil.copytree(tmp_path / "orders-0", kept)
    with Broker(config) as broker:
        delete_topic(broker.bootstrap_servers, "orders")
    shutil.rmtree(tmp_path / "orders-0", ignore_errors=True)
    shutil.move(kept, tmp_path / "orders-0")
    old_id = read_partition_metadata(tmp_path / "orders-0")
    assert old_id is not None
    with Broker(config) as broker:
        create_topic(broker.bootstrap_servers, "orders")
        assert produce_one(broker.bootstrap_servers, "orders", b"new") == []
        assert read_all(broker.bootstrap_servers, "orders") == [b"new"]
    # Set aside at load, as Kafka's broker does: renamed -stray, with its records.
    (stray,) = tmp_path.glob("orders-0.*-stray")
    assert read_partition_metadata(stray) == old_id


def test_a_topic_deleted_and_made_again_after_a_restart_drops_the_old_logs(tmp_path: Path) -> None:
    config = {"log.dirs": str(tmp_path), "broker.id": 1, "auto.create.topics.enable": False}
    with Broker(config) as broker:
        create_topic(broker.bootstrap_servers, "orders")
        assert produce_one(broker.bootstrap_servers, "orders", b"old") == []
    with Broker(config) as broker:
        delete_topic(broker.bootstrap_servers, "orders")
        create_topic(broker.bootstrap_servers, "orders")
        assert produce_one(broker.bootstrap_servers, "orders", b"new") == []
        assert read_all(broker.bootstrap_servers, "orders") == [b"new"]
    assert not list(tmp_path.glob("orders-0.*-stray"))
