"""An empty checkpoint file through a real restart: Kafka's CheckpointReadBuffer reads a file that
stops before its count line (no lines at all, or the version alone) as holding no entries, so the
broker starts and its logs keep their records; kafkapy refused to start on one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.log.checkpoint import CheckpointCorrupt, read_checkpoint
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch

TOPIC = "cp"
# Each file kind, where it lives in a log dir, and its fields per entry.
KINDS = {
    "recovery-point-offset-checkpoint": ("recovery-point-offset-checkpoint", 3),
    "log-start-offset-checkpoint": ("log-start-offset-checkpoint", 3),
    "replication-offset-checkpoint": ("replication-offset-checkpoint", 3),  # written, not read at open
    "cleaner-offset-checkpoint": ("cleaner-offset-checkpoint", 3),
    "leader-epoch-checkpoint": (f"{TOPIC}-0/leader-epoch-checkpoint", 2),
}
EMPTY = {"no lines": "", "the version alone": "0\n"}


def create_topic(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers) as client:
        answer = client.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
            {"name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 5000, "validate_only": False})
    assert answer["topics"][0]["error_code"] == ErrorCode.NONE


def produce(broker: Broker, value: bytes) -> dict[str, Any]:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": build_record_batch([{"value": value}])}]}]}
    with SimpleClient(broker.bootstrap_servers) as client:
        [answer] = client.request(ApiKey.PRODUCE, 9, body)["responses"]
    [partition] = answer["partition_responses"]
    assert partition["error_code"] == ErrorCode.NONE
    return dict(partition)


def offsets(broker: Broker) -> tuple[int, int]:
    """The partition's earliest and latest offsets (ListOffsets)."""
    found = []
    with SimpleClient(broker.bootstrap_servers) as client:
        for timestamp in (-2, -1):
            answer = client.request(ApiKey.LIST_OFFSETS, 7, {
                "replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
                    {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
            [partition] = answer["topics"][0]["partitions"]
            assert partition["error_code"] == ErrorCode.NONE
            found.append(partition["offset"])
    return found[0], found[1]


@pytest.mark.parametrize("content", EMPTY.values(), ids=EMPTY.keys())
@pytest.mark.parametrize("kind", KINDS, ids=KINDS.keys())
def test_an_empty_checkpoint_is_read_as_no_entries_at_restart(tmp_path: Path, kind: str,
                                                              content: str) -> None:
    relative, fields = KINDS[kind]
    settings = {"broker.id": 1, "log.dirs": str(tmp_path)}
    with Broker(settings) as broker:
        create_topic(broker)
        for value in (b"one", b"two"):
            produce(broker, value)
    path = tmp_path / relative
    written = path.read_text()
    read_checkpoint(path, fields)  # the clean shutdown wrote it, in Kafka's layout
    path.write_text(content)
    with Broker(settings) as broker:  # the topic is kept (the metadata journal), its log found again
        assert offsets(broker) == (0, 2)  # the records stayed
        assert produce(broker, b"three")["base_offset"] == 2
    # The next shutdown wrote it whole again, with as many entries as before.
    assert path.read_text() != content
    assert len(read_checkpoint(path, fields)) == len(written.splitlines()) - 2


@pytest.mark.parametrize("content", ["\n", "1\n", "x\n", "0\nx\n", "0\n2\nt 0 1\n"])
def test_a_checkpoint_kafka_refuses_is_still_refused(tmp_path: Path, content: str) -> None:
    """Only a file that ends before its count reads as empty: a blank or wrong version line, a
    count that is not a number, or fewer entries than the count are refused, as Kafka does."""
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(content)
    with pytest.raises(CheckpointCorrupt) as refused:
        read_checkpoint(path, 3)
    assert str(path) in str(refused.value) and "\n" not in str(refused.value)
