"""The share coordinator's five APIs and FindCoordinator key type SHARE, on the wire with
kafkapy's own client codec: answers, Kafka's errors, and state that a new coordinator loads."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kafkapy.cli import main
from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.sharestate.coordinator import SHARE_STATE_TOPIC
from kafkapy.sharestate.state import coordinator_key, state_partition_for
from kafkapy.store.base import encode_uuid
from kafkapy.testing import wait_until

TOPIC = "q"
GROUP = "workers"


def _topic_id(client: SimpleClient) -> uuid.UUID:
    metadata = client.request(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                                    "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False})
    topic_id: uuid.UUID = metadata["topics"][0]["topic_id"]
    return topic_id


def _find(client: SimpleClient, key: str, version: int = 6) -> dict[str, Any]:
    answer = client.request(ApiKey.FIND_COORDINATOR, version,
                            {"key_type": CoordinatorKeyType.SHARE, "coordinator_keys": [key]})
    found: dict[str, Any] = answer["coordinators"][0]
    return found


def _coordinator(client: SimpleClient, key: str) -> int:
    wait_until(lambda: _find(client, key)["error_code"] == ErrorCode.NONE, what="the share coordinator")
    node: int = _find(client, key)["node_id"]
    return node


def _one(answer: Any) -> dict[str, Any]:
    row: dict[str, Any] = answer["results"][0]["partitions"][0]
    return row


def _initialize(client: SimpleClient, topic_id: uuid.UUID, state_epoch: int, start: int,
                group: str = GROUP, partition: int = 0) -> dict[str, Any]:
    return _one(client.request(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, {"group_id": group, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition": partition, "state_epoch": state_epoch,
                                               "start_offset": start}]}]}))


def _write(client: SimpleClient, topic_id: uuid.UUID, *, state_epoch: int = 0, leader_epoch: int = 0,
           start: int = -1, batches: Sequence[tuple[int, int, int, int]] = (), partition: int = 0,
           group: str = GROUP) -> dict[str, Any]:
    return _one(client.request(ApiKey.WRITE_SHARE_GROUP_STATE, 0, {"group_id": group, "topics": [
        {"topic_id": topic_id, "partitions": [{
            "partition": partition, "state_epoch": state_epoch, "leader_epoch": leader_epoch,
            "start_offset": start,
            "state_batches": [{"first_offset": f, "last_offset": last, "delivery_state": state,
                               "delivery_count": count} for f, last, state, count in batches]}]}]}))


def _read(client: SimpleClient, topic_id: uuid.UUID, leader_epoch: int = 0,
          partition: int = 0) -> dict[str, Any]:
    return _one(client.request(ApiKey.READ_SHARE_GROUP_STATE, 0, {"group_id": GROUP, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition": partition, "leader_epoch": leader_epoch}]}]}))


def _summary(client: SimpleClient, topic_id: uuid.UUID) -> dict[str, Any]:
    return _one(client.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, {"group_id": GROUP, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": -1}]}]}))


def _delete(client: SimpleClient, topic_id: uuid.UUID) -> dict[str, Any]:
    return _one(client.request(ApiKey.DELETE_SHARE_GROUP_STATE, 0, {"group_id": GROUP, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition": 0}]}]}))


def _batches(row: dict[str, Any]) -> list[tuple[int, int, int, int]]:
    return [(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
            for b in row["state_batches"]]


@pytest.fixture
def single() -> Iterator[tuple[Broker, SimpleClient, uuid.UUID]]:
    with Broker({"share.coordinator.state.topic.num.partitions": 5}) as broker:
        broker.seed({TOPIC: {"partitions": 2, "records": []}})
        with SimpleClient(broker.bootstrap_servers) as client:
            topic_id = _topic_id(client)
            _coordinator(client, coordinator_key((GROUP, topic_id, 0)))
            yield broker, client, topic_id


def test_the_first_find_coordinator_share_answers_once_the_topic_is_made() -> None:
    """Kafka answers COORDINATOR_NOT_AVAILABLE while it makes __share_group_state; kafkapy's
    answer waits for the topic, so the first ask names the coordinator."""
    with Broker({"share.coordinator.state.topic.num.partitions": 5}) as broker:
        broker.seed({TOPIC: {"partitions": 2, "records": []}})
        with SimpleClient(broker.bootstrap_servers) as client:
            topic_id = _topic_id(client)
            assert broker.store is not None and SHARE_STATE_TOPIC not in broker.store.topics()
            found = _find(client, coordinator_key((GROUP, topic_id, 0)))
            assert (found["error_code"], found["node_id"]) == (ErrorCode.NONE, broker.broker_id)


def test_find_coordinator_share_makes_the_topic_and_names_the_key_partitions_leader(
        single: tuple[Broker, SimpleClient, uuid.UUID]) -> None:
    broker, client, topic_id = single
    metadata = client.request(ApiKey.METADATA, 12, {"topics": [{"name": SHARE_STATE_TOPIC, "topic_id": None}],
                                                    "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False})
    topic = metadata["topics"][0]
    assert topic["error_code"] == ErrorCode.NONE and topic["is_internal"]
    assert len(topic["partitions"]) == 5
    found = _find(client, coordinator_key((GROUP, topic_id, 0)))
    assert f"{found['host']}:{found['port']}" == broker.bootstrap_servers
    configs = client.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": SHARE_STATE_TOPIC, "configuration_keys": [
            "cleanup.policy", "compression.type", "segment.bytes"]}],
        "include_synonyms": False, "include_documentation": False})
    values = {c["name"]: c["value"] for c in configs["results"][0]["configs"]}
    assert values == {"cleanup.policy": "delete", "compression.type": "producer",
                      "segment.bytes": str(100 * 1024 * 1024)}


@pytest.mark.parametrize(("key", "version"), [("workers", 6), ("g:not-a-uuid:0", 6),
                                              ("g:AAAAAAAAAAAAAAAAAAAAAA", 6),
                                              ("g:AAAAAAAAAAAAAAAAAAAAAA:-1", 6),
                                              ("g:AAAAAAAAAAAAAAAAAAAAAA:0", 5)])
def test_find_coordinator_share_refuses_a_malformed_key_or_an_old_version(
        single: tuple[Broker, SimpleClient, uuid.UUID], key: str, version: int) -> None:
    _, client, _ = single
    if version < 6:
        answer = client.request(ApiKey.FIND_COORDINATOR, version,
                                {"key_type": CoordinatorKeyType.SHARE, "coordinator_keys": [key]})
        assert answer["coordinators"][0]["error_code"] == ErrorCode.INVALID_REQUEST
    else:
        assert _find(client, key)["error_code"] == ErrorCode.INVALID_REQUEST


def test_initialize_write_read_summary_delete(single: tuple[Broker, SimpleClient, uuid.UUID]) -> None:
    _, client, topic_id = single
    # Nothing stored: start offset -1 (uninitialized), state epoch 0.
    nothing = _read(client, topic_id)
    assert (nothing["error_code"], nothing["state_epoch"], nothing["start_offset"]) == (ErrorCode.NONE, 0, -1)
    assert _initialize(client, topic_id, 1, 10)["error_code"] == ErrorCode.NONE
    row = _read(client, topic_id)
    assert (row["state_epoch"], row["start_offset"], _batches(row)) == (1, 10, [])
    assert _write(client, topic_id, state_epoch=1, leader_epoch=3,
                  batches=[(10, 14, 2, 1), (15, 19, 0, 1)])["error_code"] == ErrorCode.NONE
    assert _write(client, topic_id, state_epoch=1, leader_epoch=3, start=12,
                  batches=[(15, 16, 4, 2)])["error_code"] == ErrorCode.NONE
    row = _read(client, topic_id, leader_epoch=3)
    assert (row["start_offset"], _batches(row)) == (12, [(12, 14, 2, 1), (15, 16, 4, 2), (17, 19, 0, 1)])
    summary = _summary(client, topic_id)
    assert (summary["error_code"], summary["state_epoch"], summary["start_offset"]) == (ErrorCode.NONE, 1, 12)
    assert summary["leader_epoch"] == 3  # Kafka 4.1's v0 has it, between the state epoch and the offset
    assert _delete(client, topic_id)["error_code"] == ErrorCode.NONE
    assert _read(client, topic_id)["start_offset"] == -1
    assert _summary(client, topic_id)["leader_epoch"] == 0  # nothing kept: PartitionFactory's default


def test_kafkas_errors(single: tuple[Broker, SimpleClient, uuid.UUID]) -> None:
    _, client, topic_id = single
    assert _initialize(client, topic_id, 2, 0)["error_code"] == ErrorCode.NONE
    # An older state epoch is fenced, for Initialize and Write alike.
    assert _initialize(client, topic_id, 1, 0)["error_code"] == ErrorCode.FENCED_STATE_EPOCH
    older = _write(client, topic_id, state_epoch=1, leader_epoch=0)
    assert older["error_code"] == ErrorCode.FENCED_STATE_EPOCH
    # A newer leader's read fences the older leader's writes and reads.
    assert _read(client, topic_id, leader_epoch=5)["error_code"] == ErrorCode.NONE
    fenced = _write(client, topic_id, state_epoch=2, leader_epoch=4)
    assert fenced["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
    assert _read(client, topic_id, leader_epoch=4)["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
    # The key itself, then the topic.
    assert _write(client, topic_id, group="")["error_code"] == ErrorCode.INVALID_GROUP_ID
    assert _write(client, topic_id, state_epoch=2, leader_epoch=5,
                  batches=[(5, 4, 0, 1)])["error_code"] == ErrorCode.INVALID_REQUEST
    # One broker leads every state partition here, so the topic is what is refused.
    assert _write(client, uuid.uuid4())["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    unknown_partition = _read(client, topic_id, partition=7)
    assert (unknown_partition["error_code"], unknown_partition["start_offset"]) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)


def test_a_broker_that_does_not_lead_the_state_partition_is_not_the_coordinator() -> None:
    config = {"share.coordinator.state.topic.num.partitions": 3,
              "share.coordinator.snapshot.update.records.per.snapshot": 2}
    with Broker(brokers=3, config=config) as cluster:
        cluster.seed({TOPIC: {"partitions": 1, "records": []}})
        with SimpleClient(cluster.bootstrap_servers) as client:
            topic_id = _topic_id(client)
            key = (GROUP, topic_id, 0)
            leader = _coordinator(client, coordinator_key(key))
            other = next(b for i, b in enumerate(cluster.brokers) if i != leader)
            with SimpleClient(other.bootstrap_servers) as elsewhere:
                assert _read(elsewhere, topic_id)["error_code"] == ErrorCode.NOT_COORDINATOR
            with SimpleClient(cluster.brokers[leader].bootstrap_servers) as there:
                assert _initialize(there, topic_id, 0, 3)["error_code"] == ErrorCode.NONE
                for epoch in range(4):  # more updates than a snapshot takes: snapshots and updates
                    assert _write(there, topic_id, leader_epoch=1,
                                  batches=[(3 + epoch, 3 + epoch, 2, 1)])["error_code"] == ErrorCode.NONE
            # The coordinator's broker goes: the next leader of the state partition loads it.
            cluster.stop_broker(leader)
            with SimpleClient(other.bootstrap_servers) as survivor:
                new_leader = _coordinator(survivor, coordinator_key(key))
            assert new_leader != leader
            with SimpleClient(cluster.brokers[new_leader].bootstrap_servers) as there:
                row = _read(there, topic_id, leader_epoch=1)
                assert (row["error_code"], row["start_offset"], _batches(row)) == (ErrorCode.NONE, 3,
                                                                                  [(3, 6, 2, 1)])
            assert state_partition_for(key, 3) in range(3)


def test_only_brokers_may_call_them() -> None:
    config = {"authorizer.class.name": "allowlist",
              "allowlist.rules": "*@*:DESCRIBE,CREATE,READ,DESCRIBE_CONFIGS"}
    with Broker(config) as broker:
        broker.seed({TOPIC: {"partitions": 1, "records": []}})
        with SimpleClient(broker.bootstrap_servers) as client:
            topic_id = _topic_id(client)
            assert _read(client, topic_id)["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            assert _write(client, topic_id)["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            assert _find(client, coordinator_key((GROUP, topic_id, 0)))["error_code"] == \
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_dump_log_decodes_the_state_topic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``kafkapy dump-log --share-group-state-decoder`` (kafka-dump-log.sh's flag) over what the
    coordinator wrote: Kafka's record types, field names and versions."""
    with Broker({"log.dirs": str(tmp_path), "share.coordinator.state.topic.num.partitions": 1}) as broker:
        broker.seed({TOPIC: {"partitions": 1, "records": []}})
        with SimpleClient(broker.bootstrap_servers) as client:
            topic_id = _topic_id(client)
            _coordinator(client, coordinator_key((GROUP, topic_id, 0)))
            assert _initialize(client, topic_id, 0, 4)["error_code"] == ErrorCode.NONE
            assert _write(client, topic_id, leader_epoch=2, start=5,
                          batches=[(5, 6, 2, 1)])["error_code"] == ErrorCode.NONE
            assert _delete(client, topic_id)["error_code"] == ErrorCode.NONE
    segment = tmp_path / f"{SHARE_STATE_TOPIC}-0" / "00000000000000000000.log"
    assert main(["dump-log", "--files", str(segment), "--share-group-state-decoder",
                 "--skip-record-metadata"]) == 0
    records = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    keys = [json.loads(line.split(" key: ")[1].split(" payload: ")[0]) for line in records]
    payloads = [line.split(" payload: ")[1] for line in records]
    expected_key = {"groupId": GROUP, "topicId": encode_uuid(topic_id), "partition": 0}
    assert keys == [{"type": "0", "data": expected_key}, {"type": "1", "data": expected_key},
                    {"type": "0", "data": expected_key}]
    assert [json.loads(p) for p in payloads[:2]] == [
        {"version": "0", "data": {"snapshotEpoch": 0, "stateEpoch": 0, "leaderEpoch": 0, "startOffset": 4,
                                  "stateBatches": []}},
        {"version": "0", "data": {"snapshotEpoch": 0, "leaderEpoch": 2, "startOffset": 5, "stateBatches": [
            {"firstOffset": 5, "lastOffset": 6, "deliveryState": 2, "deliveryCount": 1}]}}]
    assert payloads[2] == "<DELETE>"


def test_a_reset_forgets_the_kept_state(single: tuple[Broker, SimpleClient, uuid.UUID]) -> None:
    broker, client, topic_id = single
    assert _initialize(client, topic_id, 0, 3)["error_code"] == ErrorCode.NONE
    assert broker.records(SHARE_STATE_TOPIC) != []
    broker.reset()
    assert broker.records(SHARE_STATE_TOPIC) == []  # what a later load finds: nothing
    broker.seed({TOPIC: {"partitions": 2, "records": []}})
    fresh = _topic_id(client)
    assert _read(client, fresh)["start_offset"] == -1


def _share_fetch(client: SimpleClient, group: str, topic_id: uuid.UUID, epoch: int,
                 acks: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    return dict(client.request(ApiKey.SHARE_FETCH, 1, {
        "group_id": group, "member_id": "m", "share_session_epoch": epoch, "max_wait_ms": 0, "min_bytes": 1,
        "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
        "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0,
                                                          "acknowledgement_batches": list(acks)}]}],
        "forgotten_topics_data": []}))


def test_a_leader_persists_through_a_coordinator_on_another_broker() -> None:
    """The share-partition leader and the key's share coordinator on different brokers: the
    state goes over the inter-broker channel, and the coordinator's refusals come back."""
    with Broker(brokers=3, config={"share.coordinator.state.topic.num.partitions": 3,
                                   "share.auto.offset.reset": "earliest"}) as cluster:
        cluster.seed({TOPIC: {"partitions": 1, "records": [{"value": f"v{i}"} for i in range(4)]}})
        with SimpleClient(cluster.bootstrap_servers) as client:
            topic_id = _topic_id(client)
            metadata = client.request(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                                            "allow_auto_topic_creation": False,
                                                            "include_topic_authorized_operations": False})
            leader = metadata["topics"][0]["partitions"][0]["leader_id"]
            # A group whose share coordinator is another broker than the partition's leader.
            group, coordinator = next(
                (g, c) for g in (f"group-{i}" for i in range(100))
                if (c := _coordinator(client, coordinator_key((g, topic_id, 0)))) != leader)
        # One connection to the leader throughout: its share session ends with it (Kafka 4.2).
        with SimpleClient(cluster.brokers[leader].bootstrap_servers) as there:
            first = _share_fetch(there, group, topic_id, 0)
            assert [(a["first_offset"], a["last_offset"]) for a in
                    first["responses"][0]["partitions"][0]["acquired_records"]] == [(0, 3)]
            acked = _share_fetch(there, group, topic_id, 1, [
                {"first_offset": 0, "last_offset": 1, "acknowledge_types": [1]}])  # ACCEPT
            assert acked["responses"][0]["partitions"][0]["acknowledge_error_code"] == ErrorCode.NONE
            with SimpleClient(cluster.brokers[coordinator].bootstrap_servers) as keeper:
                state = _one(keeper.request(ApiKey.READ_SHARE_GROUP_STATE, 0, {"group_id": group, "topics": [
                    {"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": -1}]}]}))
                # Acquired records are kept as the AVAILABLE records they were before the fetch.
                assert (state["error_code"], state["start_offset"], _batches(state)) == (
                    ErrorCode.NONE, 2, [(2, 3, 0, 0)])
                # A newer leader epoch read at the coordinator fences the leader's next write.
                _one(keeper.request(ApiKey.READ_SHARE_GROUP_STATE, 0, {"group_id": group, "topics": [
                    {"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": 99}]}]}))
            fenced = _share_fetch(there, group, topic_id, 2, [
                {"first_offset": 2, "last_offset": 2, "acknowledge_types": [1]}])
            assert fenced["responses"][0]["partitions"][0]["acknowledge_error_code"] == \
                ErrorCode.FENCED_LEADER_EPOCH
