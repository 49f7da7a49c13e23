"""The data plane over raw sockets: Produce's per-partition answers, acks, leadership on a
2-broker in-process cluster, idempotent retries, ListOffsets, DeleteRecords,
OffsetForLeaderEpoch, DescribeLogDirs, DescribeProducers, InitProducerId, auto-creation."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkapy.dataplane import DataPlaneModule, Partitions
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.log import LogConfig
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.server.services import NO_LEADER, partition_leader
from kafkapy.store import MemoryStore, PartitionState

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket


def partitions_of(broker: Broker) -> Partitions:
    assert broker.runtime is not None
    [module] = [m for m in broker.runtime.modules if isinstance(m, DataPlaneModule)]
    return module.partitions


def create(broker: Broker, name: str, assignment: dict[int, tuple[int, ...]],
           config: dict[str, str] | None = None) -> None:
    """The topic with its config overrides, stored as CreateTopics stores them; back once this broker
    sees it (its topics view and, for the overrides, the configs module's)."""
    assert broker.store is not None and broker.runtime is not None
    broker.store.create_topic(name, assignment, config=config)
    module = next(m for m in broker.runtime.modules if isinstance(m, DataPlaneModule))
    expected = LogConfig.from_topic_config(config or {}, broker.runtime.config.values)
    deadline = time.monotonic() + 5
    while name not in broker.runtime.cluster.topics or module.log_config(name) != expected:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def batch(*values: bytes, **kwargs: Any) -> bytes:
    return build_record_batch([{"key": b"k", "value": v, "timestamp": 1_700_000_000_000} for v in values],
                              **kwargs)


def produce(conn: KafkaSocket, topic: str, parts: dict[int, bytes], *, acks: int = -1,
            version: int = 9) -> dict[int, dict[str, Any]]:
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": data}
                                                              for p, data in parts.items()]}]}
    [answer] = conn.call(ApiKey.PRODUCE, version, body).body["responses"]
    return {p["index"]: p for p in answer["partition_responses"]}


def list_offset(conn: KafkaSocket, topic: str, partition: int, timestamp: int,
                version: int = 9) -> dict[str, Any]:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": timestamp}]}]}
    [topic_answer] = conn.call(ApiKey.LIST_OFFSETS, version, body).body["topics"]
    [answer] = topic_answer["partitions"]
    return dict(answer)


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1}) as b:
        create(b, "t", {0: (1,), 1: (1,)})
        yield b


def test_partition_leader_is_the_first_live_replica() -> None:
    assert partition_leader((3, 1, 2), {1, 2}) == 1
    assert partition_leader((3, 1), {3, 1}) == 3
    assert partition_leader((4,), {1}) == NO_LEADER


def test_a_corrupt_batch_is_refused_and_the_other_partition_stored(broker: Broker) -> None:
    good = batch(b"a", b"b")
    corrupt = bytearray(batch(b"x"))
    corrupt[-1] ^= 0xFF  # inside the CRC's range
    with KafkaSocket(broker.bootstrap_servers) as conn:
        answers = produce(conn, "t", {0: bytes(corrupt), 1: good})
    assert answers[0]["error_code"] == ErrorCode.CORRUPT_MESSAGE
    assert answers[0]["base_offset"] == -1 and answers[0]["error_message"] is None
    assert (answers[1]["error_code"], answers[1]["base_offset"], answers[1]["log_start_offset"]) == (0, 0, 0)
    logs = partitions_of(broker).logs
    assert logs.get("t", 1) is not None and logs.get("t", 1).log_end_offset == 2  # type: ignore[union-attr]
    assert logs.get("t", 0) is None or logs.get("t", 0).log_end_offset == 0  # type: ignore[union-attr]


def test_record_errors_come_with_an_error_message(broker: Broker) -> None:
    """Compacted topics need keys: INVALID_RECORD with record errors, and (only then) a message."""
    keyless = build_record_batch([{"key": None, "value": b"v", "timestamp": 1}])
    create(broker, "compacted", {0: (1,)}, {"cleanup.policy": "compact"})
    with KafkaSocket(broker.bootstrap_servers) as conn:
        answers = produce(conn, "compacted", {0: keyless})
    assert answers[0]["error_code"] == ErrorCode.INVALID_RECORD
    assert [e["batch_index"] for e in answers[0]["record_errors"]] == [0]
    assert answers[0]["error_message"] is not None and "compacted-0" in answers[0]["error_message"]


def test_offsets_follow_on_and_list_offsets_answers_every_special_timestamp(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        assert produce(conn, "t", {0: batch(b"1", b"2", b"3")})[0]["base_offset"] == 0
        assert produce(conn, "t", {0: batch(b"4")})[0]["base_offset"] == 3
        assert list_offset(conn, "t", 0, -1)["offset"] == 4
        assert list_offset(conn, "t", 0, -2)["offset"] == 0
        assert list_offset(conn, "t", 0, -4)["offset"] == 0
        assert list_offset(conn, "t", 0, -3)["offset"] == 0  # ties: the first record (KAFKA-16310)
        assert list_offset(conn, "t", 0, 1_700_000_000_000)["offset"] == 0
        assert list_offset(conn, "t", 0, 1_800_000_000_000)["offset"] == -1
        assert list_offset(conn, "t", 0, -1, version=1)["offset"] == 4
        assert list_offset(conn, "t", 5, -1)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # DeleteRecords moves the log start; ListOffsets -2 follows
        body = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 2}]}],
                "timeout_ms": 1000}
        [deleted] = conn.call(ApiKey.DELETE_RECORDS, 2, body).body["topics"][0]["partitions"]
        assert (deleted["error_code"], deleted["low_watermark"]) == (0, 2)
        assert list_offset(conn, "t", 0, -2)["offset"] == 2
        body["topics"][0]["partitions"][0]["offset"] = 99  # type: ignore[index]
        [refused] = conn.call(ApiKey.DELETE_RECORDS, 2, body).body["topics"][0]["partitions"]
        assert refused["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        # OffsetForLeaderEpoch: epoch 0 ends at the log end
        body = {"replica_id": -1, "topics": [{"topic": "t", "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}
        [epoch] = conn.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body).body["topics"][0]["partitions"]
        assert (epoch["error_code"], epoch["leader_epoch"], epoch["end_offset"]) == (0, 0, 4)
        # an epoch newer than any here is no error: no epoch, no end offset (Kafka's endOffsetFor)
        body["topics"][0]["partitions"][0]["leader_epoch"] = 7  # type: ignore[index]
        [newer] = conn.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body).body["topics"][0]["partitions"]
        assert (newer["error_code"], newer["leader_epoch"], newer["end_offset"]) == (0, -1, -1)
        body["topics"][0]["partitions"][0]["current_leader_epoch"] = 3  # type: ignore[index]
        [ahead] = conn.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body).body["topics"][0]["partitions"]
        assert ahead["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
        # DescribeLogDirs: the in-memory dir with the partition's size
        [result] = conn.call(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None}).body["results"]
        sizes = {(t["name"], p["partition_index"]): p["partition_size"]
                 for t in result["topics"] for p in t["partitions"]}
        assert result["log_dir"] == "memory"
        assert sizes[("t", 0)] == partitions_of(broker).logs.get("t", 0).size_in_bytes > 0  # type: ignore[union-attr]


def test_acks_zero_sends_no_answer_and_invalid_acks_are_refused(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        body = {"transactional_id": None, "acks": 0, "timeout_ms": 5000,
                "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch(b"z")}]}]}
        conn.send(ApiKey.PRODUCE, 9, body)
        # the next answer on the connection is the ApiVersions one: Produce sent nothing
        assert conn.call(ApiKey.API_VERSIONS, 0, {}).body["error_code"] == 0
        assert partitions_of(broker).logs.get("t", 0).log_end_offset == 1  # type: ignore[union-attr]
        refused = produce(conn, "t", {0: batch(b"z"), 9: batch(b"z")}, acks=2)
        assert refused[0]["error_code"] == ErrorCode.INVALID_REQUIRED_ACKS
        # Kafka's handleProduceRequest answers a partition it does not know before looking at acks
        assert refused[9]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # acks=0 and a failed partition: the connection is closed, as Kafka does
        body["topic_data"][0]["partition_data"][0]["index"] = 9  # type: ignore[index]
        conn.send(ApiKey.PRODUCE, 9, body)
        assert conn.wait_closed() == b""


def test_idempotent_retry_gets_its_first_offsets_and_describe_producers_shows_it(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        init = conn.call(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 1,
                                                      "producer_id": -1, "producer_epoch": -1}).body
        assert init["error_code"] == 0 and init["producer_id"] >= 0 and init["producer_epoch"] == 0
        pid = init["producer_id"]
        second = conn.call(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 1,
                                                        "producer_id": -1, "producer_epoch": -1}).body
        assert second["producer_id"] == pid + 1
        first = batch(b"a", b"b", producer_id=pid, producer_epoch=0, base_sequence=0)
        assert produce(conn, "t", {0: first})[0]["base_offset"] == 0
        assert produce(conn, "t", {0: batch(b"other")})[0]["base_offset"] == 2
        retry = produce(conn, "t", {0: first})[0]
        assert (retry["error_code"], retry["base_offset"]) == (0, 0)
        gap = batch(b"c", producer_id=pid, producer_epoch=0, base_sequence=5)
        assert produce(conn, "t", {0: gap})[0]["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        body = {"topics": [{"name": "t", "partition_indexes": [0, 7]}]}
        [topic] = conn.call(ApiKey.DESCRIBE_PRODUCERS, 0, body).body["topics"]
        by_index = {p["partition_index"]: p for p in topic["partitions"]}
        [state] = by_index[0]["active_producers"]
        assert (state["producer_id"], state["producer_epoch"], state["last_sequence"]) == (pid, 0, 1)
        assert by_index[7]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert partitions_of(broker).logs.get("t", 0).log_end_offset == 3  # type: ignore[union-attr]


def test_log_append_time_is_answered() -> None:
    with Broker({"broker.id": 1}) as b:
        create(b, "t", {0: (1,)}, {"message.timestamp.type": "LogAppendTime"})
        before = int(time.time() * 1000)
        with KafkaSocket(b.bootstrap_servers) as conn:
            answer = produce(conn, "t", {0: batch(b"x")})[0]
        assert answer["error_code"] == 0 and answer["log_append_time_ms"] >= before


def test_metadata_auto_creates_and_produce_to_a_missing_topic_creates_it(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        body = {"topics": [{"name": "fresh"}], "allow_auto_topic_creation": True,
                "include_topic_authorized_operations": False}
        [topic] = conn.call(ApiKey.METADATA, 12, body).body["topics"]
        assert topic["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE
        assert broker.runtime is not None and "fresh" in broker.runtime.cluster.topics
        body = {"topics": [{"name": "not-asked"}], "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}
        [topic] = conn.call(ApiKey.METADATA, 12, body).body["topics"]
        assert topic["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        [topic] = conn.call(ApiKey.METADATA, 1, {"topics": [{"name": "v1-always"}]}).body["topics"]
        assert topic["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE
        assert produce(conn, "by-produce", {0: batch(b"x")})[0]["error_code"] == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        deadline = time.monotonic() + 5
        while "by-produce" not in broker.runtime.cluster.topics:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert produce(conn, "by-produce", {0: batch(b"x")})[0]["error_code"] == 0


def test_auto_creation_off() -> None:
    with Broker({"broker.id": 1, "auto.create.topics.enable": False}) as b, \
            KafkaSocket(b.bootstrap_servers) as conn:
        [topic] = conn.call(ApiKey.METADATA, 1, {"topics": [{"name": "nope"}]}).body["topics"]
        assert topic["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        refused = produce(conn, "nope", {0: batch(b"x")})[0]
        assert refused["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        time.sleep(0.2)
        assert b.runtime is not None and "nope" not in b.runtime.cluster.topics


def test_not_leader_on_a_two_broker_cluster_and_a_leader_change_keeps_the_records() -> None:
    store = MemoryStore()
    with Broker({"broker.id": 1}, store=store) as first:
        with Broker({"broker.id": 2}, store=store) as second:
            create(first, "two", {0: (1, 2), 1: (2, 1)})
            with KafkaSocket(first.bootstrap_servers) as a, KafkaSocket(second.bootstrap_servers) as b:
                answers = produce(a, "two", {0: batch(b"p0"), 1: batch(b"p1")})
                assert answers[0]["error_code"] == 0
                assert answers[1]["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
                assert produce(b, "two", {1: batch(b"p1")})[1]["error_code"] == 0
                assert list_offset(b, "two", 0, -1)["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
                # a debugging request (replica id -2) may be answered by any replica, as Kafka's
                # fetchOnlyFromLeader says, in v0 too
                for version, field in ((1, "offset"), (0, "old_style_offsets")):
                    body = {"replica_id": -2, "topics": [{"name": "two", "partitions": [
                        {"partition_index": 0, "timestamp": -1, "max_num_offsets": 1}]}]}
                    [debug] = b.call(ApiKey.LIST_OFFSETS, version, body).body["topics"][0]["partitions"]
                    assert (debug["error_code"], debug[field]) == (ErrorCode.NONE, 1 if version else [1])
        # broker 2 is gone: broker 1 leads partition 1 and finds its record
        assert first.runtime is not None
        deadline = time.monotonic() + 5
        # ... once the controller (broker 1) has written the move: leader 1 in epoch 1
        moved = PartitionState(1, 1, (1,), 0, 1)
        while len(first.runtime.cluster.brokers) != 1 or \
                first.runtime.cluster.partition_states.get(("two", 1)) != moved:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with KafkaSocket(first.bootstrap_servers) as a:
            assert list_offset(a, "two", 1, -1)["offset"] == 1
            assert produce(a, "two", {1: batch(b"more")})[1]["base_offset"] == 1


def test_produce_versions_v3_and_v13_by_topic_id(broker: Broker) -> None:
    assert broker.runtime is not None
    topic_id = broker.runtime.cluster.topics["t"].topic_id
    with KafkaSocket(broker.bootstrap_servers) as conn:
        old = produce(conn, "t", {0: batch(b"v3")}, version=3)[0]
        assert (old["error_code"], old["base_offset"]) == (0, 0)
        assert "log_start_offset" not in old or old["log_start_offset"] == -1  # v5+ only
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": [
            {"topic_id": topic_id, "partition_data": [{"index": 0, "records": batch(b"v13")}]},
            {"topic_id": uuid.uuid4(), "partition_data": [{"index": 0, "records": batch(b"lost")}]}]}
        known, unknown = conn.call(ApiKey.PRODUCE, 13, body).body["responses"]
        assert known["topic_id"] == topic_id
        assert [(p["error_code"], p["base_offset"]) for p in known["partition_responses"]] == [(0, 1)]
        assert [p["error_code"] for p in unknown["partition_responses"]] == [ErrorCode.UNKNOWN_TOPIC_ID]


def test_init_producer_id_with_half_a_producer_id_and_epoch_is_an_invalid_request(broker: Broker) -> None:
    """Kafka's KafkaApis, for idempotent producers too: both or neither."""
    with KafkaSocket(broker.bootstrap_servers) as conn:
        for producer_id, epoch in ((7, -1), (-1, 3)):
            asked = {"transactional_id": None, "transaction_timeout_ms": 1, "producer_id": producer_id,
                     "producer_epoch": epoch}
            body = conn.call(ApiKey.INIT_PRODUCER_ID, 4, asked).body
            assert (body["error_code"], body["producer_id"]) == (ErrorCode.INVALID_REQUEST, -1)


def test_init_producer_id_with_a_transactional_id_is_not_served_here(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        asked = {"transactional_id": "tx", "transaction_timeout_ms": 1000, "producer_id": -1,
                 "producer_epoch": -1}
        body = conn.call(ApiKey.INIT_PRODUCER_ID, 4, asked).body
        assert (body["error_code"], body["producer_id"]) == (ErrorCode.NOT_COORDINATOR, -1)


def test_metadata_auto_creation_refuses_an_invalid_name(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        [topic] = conn.call(ApiKey.METADATA, 1, {"topics": [{"name": "bad name!"}]}).body["topics"]
        assert topic["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_log_dirs_describe_and_survive_a_restart(tmp_path: Path) -> None:
    config = {"broker.id": 1, "log.dirs": str(tmp_path)}
    store = MemoryStore()  # the topic outlives the first broker, as it would on ZooKeeper
    with Broker(config, store=store) as b:
        create(b, "t", {0: (1,)})
        with KafkaSocket(b.bootstrap_servers) as conn:
            assert produce(conn, "t", {0: batch(b"a", b"b")})[0]["base_offset"] == 0
            [result] = conn.call(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None}).body["results"]
            assert result["log_dir"] == str(tmp_path) and result["total_bytes"] > 0
            [topic] = result["topics"]
            assert topic["partitions"][0]["partition_size"] == len(batch(b"a", b"b"))
    assert (tmp_path / "t-0" / "00000000000000000000.log").stat().st_size == len(batch(b"a", b"b"))
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    with Broker(config, store=store) as again, KafkaSocket(again.bootstrap_servers) as conn:
        create_wait = time.monotonic() + 5
        while again.runtime is not None and "t" not in again.runtime.cluster.topics:
            assert time.monotonic() < create_wait
            time.sleep(0.01)
        assert list_offset(conn, "t", 0, -1)["offset"] == 2
        assert produce(conn, "t", {0: batch(b"c")})[0]["base_offset"] == 2


def test_list_offsets_answers_a_partition_named_twice_once_with_invalid_request(broker: Broker) -> None:
    """Kafka's ReplicaManager.fetchOffset: each partition named more than once is INVALID_REQUEST
    (answered once), the others are answered as usual."""
    def asked(index: int, timestamp: int) -> dict[str, int]:
        return {"partition_index": index, "current_leader_epoch": -1, "timestamp": timestamp}

    with KafkaSocket(broker.bootstrap_servers) as conn:
        produce(conn, "t", {0: batch(b"1", b"2"), 1: batch(b"3")})
        body = {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "t", "partitions": [asked(0, -1), asked(1, -1)]},
            {"name": "t", "partitions": [asked(0, -2)]}]}
        [topic] = conn.call(ApiKey.LIST_OFFSETS, 9, body).body["topics"]
    assert [(p["partition_index"], p["error_code"], p["offset"]) for p in topic["partitions"]] == [
        (0, ErrorCode.INVALID_REQUEST, -1), (1, ErrorCode.NONE, 1)]


# (special timestamp, the first ListOffsets version that takes it): Kafka's ReplicaManager
# timestampMinSupportedVersion; -1 and -2 from v1, any other negative timestamp never.
SPECIAL_TIMESTAMPS = [(-1, 1), (-2, 1), (-3, 7), (-4, 8), (-5, 9), (-6, 11), (-7, None), (-100, None)]


@pytest.mark.parametrize(("timestamp", "first"), SPECIAL_TIMESTAMPS)
def test_list_offsets_refuses_a_special_timestamp_its_version_does_not_take(
        broker: Broker, timestamp: int, first: int | None) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        produce(conn, "t", {0: batch(b"1", b"2")})
        for version in range(1, 12):
            answer = list_offset(conn, "t", 0, timestamp, version=version)
            if first is None or version < first:
                refused = (ErrorCode.UNSUPPORTED_VERSION, -1)
                assert (answer["error_code"], answer["offset"]) == refused, version
            else:
                assert answer["error_code"] == ErrorCode.NONE, version


def test_list_offsets_tiered_timestamps_find_nothing_without_tiered_storage(broker: Broker) -> None:
    """-5 (KIP-1005) and -6 (KIP-1023) ask about remote storage, which kafkapy has not: Kafka's
    UnifiedLog answers offset -1 in epoch -1 then, never a record found by searching for them."""
    with KafkaSocket(broker.bootstrap_servers) as conn:
        produce(conn, "t", {0: batch(b"1", b"2")})
        for timestamp in (-5, -6):
            answer = list_offset(conn, "t", 0, timestamp, version=11)
            assert (answer["error_code"], answer["timestamp"], answer["offset"], answer["leader_epoch"]) == \
                (ErrorCode.NONE, -1, -1, -1)


def test_delete_records_needs_the_delete_cleanup_policy(broker: Broker) -> None:
    """Kafka's Partition.deleteRecordsOnLeader: a compacted-only topic's records are not deleted
    (POLICY_VIOLATION); compact,delete allows it. -1 is the high watermark, past it is refused."""
    create(broker, "compact-only", {0: (1,)}, {"cleanup.policy": "compact"})
    create(broker, "both", {0: (1,)}, {"cleanup.policy": "compact,delete"})

    def delete(conn: KafkaSocket, topic: str, offset: int) -> tuple[int, int]:
        body = {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}],
                "timeout_ms": 1000}
        [answer] = conn.call(ApiKey.DELETE_RECORDS, 2, body).body["topics"][0]["partitions"]
        return answer["error_code"], answer["low_watermark"]

    with KafkaSocket(broker.bootstrap_servers) as conn:
        for topic in ("compact-only", "both"):
            assert produce(conn, topic, {0: batch(b"1", b"2", b"3")})[0]["error_code"] == 0
        assert delete(conn, "compact-only", 1) == (ErrorCode.POLICY_VIOLATION, -1)
        assert list_offset(conn, "compact-only", 0, -2)["offset"] == 0
        assert delete(conn, "both", 1) == (ErrorCode.NONE, 1)
        assert delete(conn, "both", 4) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
        assert delete(conn, "both", -2) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
        assert delete(conn, "both", -1) == (ErrorCode.NONE, 3)


def test_produce_v10_names_the_current_leader_of_a_partition_led_elsewhere() -> None:
    """KIP-951 (Kafka's handleProduceRequest from v10): NOT_LEADER_OR_FOLLOWER comes with the
    partition's leader and epoch and that broker's endpoint, so the producer goes there at once."""
    store = MemoryStore()
    with Broker({"broker.id": 1}, store=store) as first, Broker({"broker.id": 2}, store=store) as second:
        create(first, "two", {0: (1, 2), 1: (2, 1)})
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "two", "partition_data": [{"index": p, "records": batch(b"x")} for p in (0, 1)]}]}
        with KafkaSocket(first.bootstrap_servers) as conn:
            new = conn.call(ApiKey.PRODUCE, 12, body).body
            old = conn.call(ApiKey.PRODUCE, 9, body).body
        ours, elsewhere = new["responses"][0]["partition_responses"]
        assert ours["error_code"] == ErrorCode.NONE
        assert elsewhere["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert elsewhere["current_leader"] == {"leader_id": 2, "leader_epoch": 0}
        port = int(second.bootstrap_servers.rsplit(":", 1)[1])
        assert [(n["node_id"], n["port"]) for n in new["node_endpoints"]] == [(2, port)]
        assert "current_leader" not in old["responses"][0]["partition_responses"][1]  # v9: none


def test_a_follower_checks_the_leader_epoch_before_leadership() -> None:
    """Kafka's Partition.getLocalLog: on a broker holding a replica, a current_leader_epoch other
    than the partition's is answered first (UNKNOWN_LEADER_EPOCH for a newer one), then that the
    broker does not lead; a broker holding no replica answers NOT_LEADER_OR_FOLLOWER whatever the
    epoch (ListOffsets, OffsetForLeaderEpoch, Fetch before v11 go to the leader only)."""
    store = MemoryStore()
    with Broker({"broker.id": 1}, store=store) as first, Broker({"broker.id": 2}, store=store) as second:
        create(first, "two", {0: (1, 2), 1: (1,)})  # broker 2 follows partition 0, holds no 1

        def answers(conn: KafkaSocket, partition: int, epoch: int) -> tuple[int, int, int]:
            listed = conn.call(ApiKey.LIST_OFFSETS, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "two", "partitions": [{"partition_index": partition, "current_leader_epoch": epoch,
                                                "timestamp": -1}]}]}).body["topics"][0]["partitions"][0]
            ended = conn.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
                {"topic": "two", "partitions": [{"partition": partition, "current_leader_epoch": epoch,
                                                 "leader_epoch": 0}]}]}).body["topics"][0]["partitions"][0]
            fetched = conn.call(ApiKey.FETCH, 10, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
                "topics": [
                    {"topic": "two", "partitions": [{"partition": partition, "current_leader_epoch": epoch,
                                                     "fetch_offset": 0, "log_start_offset": -1,
                                                     "partition_max_bytes": 1024}]}]}).body
            return (listed["error_code"], ended["error_code"],
                    fetched["responses"][0]["partitions"][0]["error_code"])

        with KafkaSocket(second.bootstrap_servers) as conn:
            not_leader, unknown = ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH
            assert answers(conn, 0, -1) == (not_leader,) * 3
            assert answers(conn, 0, 0) == (not_leader,) * 3
            assert answers(conn, 0, 5) == (unknown,) * 3  # a follower: the epoch first
            assert answers(conn, 1, 5) == (not_leader,) * 3  # no replica here
        with KafkaSocket(first.bootstrap_servers) as conn:
            assert answers(conn, 0, 5) == (unknown,) * 3
            assert answers(conn, 0, 0) == (ErrorCode.NONE,) * 3


def test_a_retried_batch_is_answered_the_append_time_it_got() -> None:
    """Kafka's UnifiedLog answers a duplicate with its first offsets and, as log_append_time_ms,
    the batch's timestamp as stored: under LogAppendTime the producer's retry learns the same
    append time as the first answer it lost."""
    with Broker({"broker.id": 1}) as b:
        create(b, "t", {0: (1,)}, {"message.timestamp.type": "LogAppendTime"})
        with KafkaSocket(b.bootstrap_servers) as conn:
            asked = {"transactional_id": None, "transaction_timeout_ms": 1, "producer_id": -1,
                     "producer_epoch": -1}
            init = conn.call(ApiKey.INIT_PRODUCER_ID, 4, asked).body
            first = batch(b"a", producer_id=init["producer_id"], producer_epoch=0, base_sequence=0)
            answer = produce(conn, "t", {0: first})[0]
            time.sleep(0.01)
            retry = produce(conn, "t", {0: first})[0]
    assert answer["log_append_time_ms"] > 1_700_000_000_000
    assert (retry["error_code"], retry["base_offset"], retry["log_append_time_ms"]) == (
        ErrorCode.NONE, 0, answer["log_append_time_ms"])


def test_list_offsets_max_timestamp_under_log_append_time_is_the_batchs_first_record() -> None:
    """KIP-734 under LogAppendTime: every record of a batch bears its append time, so Kafka's
    RecordBatch.offsetOfMaxTimestamp answers the first record of the newest batch."""
    with Broker({"broker.id": 1}) as b:
        create(b, "t", {0: (1,)}, {"message.timestamp.type": "LogAppendTime"})
        with KafkaSocket(b.bootstrap_servers) as conn:
            produce(conn, "t", {0: batch(b"1", b"2")})
            time.sleep(0.01)
            stamped = produce(conn, "t", {0: batch(b"3", b"4", b"5")})[0]
            answer = list_offset(conn, "t", 0, -3)
    assert (answer["offset"], answer["timestamp"]) == (2, stamped["log_append_time_ms"])
