"""partition.metadata with a running broker: each partition directory records the topic id its
clients see; where topic ids outlive the broker (ZooKeeper; the store kept in metadata.log.dir) a
log on disk holding another id is refused as Kafka refuses it, with one clear line; with an
in-memory store the topic is made again on restart with a new id and its log follows it, keeping
its records."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.log.partition_metadata import PARTITION_METADATA, kafka_uuid, read_partition_metadata
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.store import MemoryStore

TIMEOUT_S = 20


def create_topic(broker: Broker, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    [future] = admin.create_topics([NewTopic(name, 1, 1)]).values()
    future.result(timeout=TIMEOUT_S)


def topic_id_of(broker: Broker, name: str) -> uuid.UUID:
    """The topic id Metadata v12 answers (what clients see)."""
    with SimpleClient(broker.bootstrap_servers) as client:
        answer = client.request(ApiKey.METADATA, 12, {"topics": [{"name": name, "topic_id": None}],
                                                      "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False})
    [topic] = answer["topics"]
    assert isinstance(topic["topic_id"], uuid.UUID)
    return topic["topic_id"]


def produce(broker: Broker, topic: str, value: bytes) -> dict[str, Any]:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": build_record_batch([{"value": value}])}]}]}
    with SimpleClient(broker.bootstrap_servers) as client:
        [answer] = client.request(ApiKey.PRODUCE, 9, body)["responses"]
    [partition_answer] = answer["partition_responses"]
    return dict(partition_answer)


def test_each_partition_records_the_topic_id_clients_see(tmp_path: Path) -> None:
    settings = {"broker.id": 1, "log.dirs": str(tmp_path)}
    with Broker(settings) as broker:
        create_topic(broker, "ids")
        assert produce(broker, "ids", b"one")["error_code"] == ErrorCode.NONE
        first_id = topic_id_of(broker, "ids")
        assert (tmp_path / "ids-0" / PARTITION_METADATA).read_text() == (
            f"version: 0\ntopic_id: {kafka_uuid(first_id)}")
    # The store keeps its metadata beside the logs (metadata.log.dir): the topic and its id stay.
    with Broker(settings) as broker:
        assert topic_id_of(broker, "ids") == first_id
        assert produce(broker, "ids", b"two")["base_offset"] == 1
    # A store that keeps nothing (an in-memory one, given): the topic is made again with a new id,
    # and the log takes it.
    with Broker(settings, store=MemoryStore()) as broker:
        create_topic(broker, "ids")
        second_id = topic_id_of(broker, "ids")
        assert second_id != first_id
        assert produce(broker, "ids", b"three")["base_offset"] == 2  # the records stayed
        assert read_partition_metadata(tmp_path / "ids-0") == second_id


def test_zookeeper_refuses_a_log_of_another_topic_id(tmp_path: Path, zk_connect: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    settings = {"broker.id": 1, "log.dirs": str(tmp_path), "zookeeper.connect": zk_connect,
                "zookeeper.session.timeout.ms": 6000}
    with Broker(settings) as broker:
        create_topic(broker, "kept")
        assert produce(broker, "kept", b"one")["error_code"] == ErrorCode.NONE
        topic_id = topic_id_of(broker, "kept")
    assert read_partition_metadata(tmp_path / "kept-0") == topic_id
    with Broker(settings) as broker:  # the id outlived the broker in ZooKeeper: the log is served
        assert produce(broker, "kept", b"two")["base_offset"] == 1
    stranger = uuid.UUID(int=7)
    (tmp_path / "kept-0" / PARTITION_METADATA).write_text(f"version: 0\ntopic_id: {kafka_uuid(stranger)}")
    with caplog.at_level(logging.ERROR), Broker(settings) as broker:
        refused = produce(broker, "kept", b"three")
        # Kafka never makes this broker the leader from that log: clients see no leader here (a
        # Produce carries no message without record errors), the broker's log says why.
        assert refused["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert produce(broker, "kept", b"again")["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    message = (f"Tried to assign topic ID {kafka_uuid(topic_id)} to log for topic partition kept-0,"
               f"but log already contained topic ID {kafka_uuid(stranger)}")
    lines = [r.getMessage() for r in caplog.records if "kept-0" in r.getMessage()]
    assert lines == [f"partition kept-0 refused: {message}"]  # one line, once
    assert read_partition_metadata(tmp_path / "kept-0") == stranger  # the log is left as it was
