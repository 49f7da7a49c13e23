"""Strict mode on the wire: a raw-protocol client (kafkapy's SimpleClient) misusing the protocol
gets the named violation, and the same client behaving gets none."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from kafkapy.client import ClientError, SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.faults import DropConnection, ErrorAnswer, FaultRule
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol import decode_response
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.strict import ViolationKind
from kafkapy.testing import wait_until

GROUP = "strict-group"
TOPIC = "strict-topic"


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(strict=True) as running:
        running.seed({TOPIC: {"partitions": 2}})
        yield running


@pytest.fixture(autouse=True)
def fresh(broker: Broker) -> Iterator[None]:
    broker.violations.clear()
    yield
    broker.faults.clear()


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0."""
    data = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        data += struct.pack(">h", len(topic)) + topic.encode()
    return data + struct.pack(">i", -1)


def assignment(partitions: dict[str, list[int]]) -> bytes:
    """A ConsumerProtocolAssignment v0."""
    data = struct.pack(">hi", 0, len(partitions))
    for topic, indexes in partitions.items():
        data += struct.pack(">h", len(topic)) + topic.encode()
        data += struct.pack(f">i{len(indexes)}i", len(indexes), *indexes)
    return data + struct.pack(">i", -1)


def join(client: SimpleClient, member_id: str = "") -> Any:
    wait_until(lambda: client.request(ApiKey.FIND_COORDINATOR, 3,
                                      {"key": GROUP, "key_type": CoordinatorKeyType.GROUP}).error_code
               == ErrorCode.NONE, what="the group coordinator")
    body = {"group_id": GROUP, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(TOPIC)}]}
    answer = wait_until(lambda: _joined(client, body), what="a JoinGroup answered by the coordinator")
    if answer.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        answer = client.request(ApiKey.JOIN_GROUP, 5, {**body, "member_id": answer.member_id})
    assert answer.error_code == ErrorCode.NONE
    return answer


def _joined(client: SimpleClient, body: dict[str, Any]) -> Any:
    answer = client.request(ApiKey.JOIN_GROUP, 5, body)
    loading = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
               ErrorCode.COORDINATOR_NOT_AVAILABLE}
    return None if answer.error_code in loading else answer


def sync(client: SimpleClient, member_id: str, generation: int, partitions: dict[str, list[int]]) -> Any:
    answer = client.request(ApiKey.SYNC_GROUP, 3, {
        "group_id": GROUP, "generation_id": generation, "member_id": member_id, "group_instance_id": None,
        "assignments": [{"member_id": member_id, "assignment": assignment(partitions)}]})
    assert answer.error_code == ErrorCode.NONE
    return answer


def commit(client: SimpleClient, member_id: str, generation: int, partition: int) -> int:
    answer = client.request(ApiKey.OFFSET_COMMIT, 8, {
        "group_id": GROUP, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": partition, "committed_offset": 5, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})
    return int(answer.topics[0].partitions[0].error_code)


def heartbeat(client: SimpleClient, member_id: str, generation: int) -> int:
    return int(client.request(ApiKey.HEARTBEAT, 4, {"group_id": GROUP, "generation_id": generation,
                                                    "member_id": member_id,
                                                    "group_instance_id": None}).error_code)


def leave(client: SimpleClient, member_id: str) -> None:
    client.request(ApiKey.LEAVE_GROUP, 4, {"group_id": GROUP, "members": [
        {"member_id": member_id, "group_instance_id": None}]})


def kinds(broker: Broker) -> list[ViolationKind]:
    return [violation.kind for violation in broker.violations]


def test_commits_for_own_partitions_and_an_unassigned_one(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers, client_id="raw-consumer") as client:
        joined = join(client)
        member, generation = joined.member_id, joined.generation_id
        sync(client, member, generation, {TOPIC: [0]})
        assert commit(client, member, generation, 0) == ErrorCode.NONE
        assert heartbeat(client, member, generation) == ErrorCode.NONE
        assert broker.violations == []

        assert commit(client, member, generation, 1) == ErrorCode.NONE  # Kafka accepts it quietly
        leave(client, member)
    [violation] = broker.violations
    assert violation.kind is ViolationKind.UNASSIGNED_COMMIT
    assert violation.client_id == "raw-consumer"
    assert violation.api_key == ApiKey.OFFSET_COMMIT and violation.api_version == 8
    assert violation.connection.startswith("PLAINTEXT-")
    assert violation.request is not None
    assert violation.request["topics"][0]["partitions"][0]["partition_index"] == 1
    assert f"{TOPIC}-1" in violation.what and f"{TOPIC}-0" in violation.expected
    assert "[unassigned_commit] OffsetCommit v8" in str(violation)


def test_a_stale_generation_once_is_recovery_twice_is_misuse(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers, client_id="raw-consumer") as client:
        first = join(client)
        member = first.member_id
        sync(client, member, first.generation_id, {TOPIC: [0, 1]})
        second = join(client, member)  # a rebalance: the generation moves on
        assert second.generation_id == first.generation_id + 1
        sync(client, member, second.generation_id, {TOPIC: [0, 1]})

        assert heartbeat(client, member, first.generation_id) == ErrorCode.ILLEGAL_GENERATION
        assert broker.violations == []  # told once: how a member learns of a rebalance

        assert commit(client, member, first.generation_id, 0) == ErrorCode.ILLEGAL_GENERATION  # it knew
        assert heartbeat(client, member, second.generation_id + 5) == ErrorCode.ILLEGAL_GENERATION
        leave(client, member)
    assert kinds(broker) == [ViolationKind.STALE_GENERATION, ViolationKind.STALE_GENERATION]
    repeated, invented = broker.violations
    assert repeated.api_key == ApiKey.OFFSET_COMMIT
    assert "had been told" in repeated.what and "ILLEGAL_GENERATION" in repeated.what
    assert f"(the last it was given: {second.generation_id})" in repeated.expected
    assert invented.api_key == ApiKey.HEARTBEAT and "never gave it" in invented.what


def idempotent(client: SimpleClient) -> int:
    answer = client.request(ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout_ms": 1, "producer_id": -1, "producer_epoch": -1})
    assert answer.error_code == ErrorCode.NONE
    return int(answer.producer_id)


def produce(client: SimpleClient, producer_id: int, sequence: int, count: int = 1, partition: int = 0) -> int:
    batch = build_record_batch([(b"k", b"v%d" % i) for i in range(count)], producer_id=producer_id,
                               producer_epoch=0, base_sequence=sequence)
    answer = client.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                                                "topic_data": [{"name": TOPIC, "partition_data": [
                                                    {"index": partition, "records": batch}]}]})
    return int(answer.responses[0].partition_responses[0].error_code)


def test_in_order_sequences_are_clean_and_a_gap_is_out_of_order(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers, client_id="raw-producer") as client:
        producer = idempotent(client)
        assert produce(client, producer, 0, count=3) == ErrorCode.NONE
        assert produce(client, producer, 3) == ErrorCode.NONE
        assert broker.violations == []

        assert produce(client, producer, 7) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    [violation] = broker.violations
    assert violation.kind is ViolationKind.OUT_OF_ORDER_SEQUENCE
    assert violation.expected == "base sequence 4"
    assert f"{TOPIC}-0" in violation.what and "sequences 7-7" in violation.what
    assert "sequences 7-7" in violation.request["topic_data"][0]["partition_data"][0]["records"]


def test_resending_an_acknowledged_batch_is_a_duplicate(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers, client_id="raw-producer") as client:
        producer = idempotent(client)
        assert produce(client, producer, 0, count=2) == ErrorCode.NONE
        assert produce(client, producer, 0, count=2) == ErrorCode.NONE  # Kafka dedups it quietly
    [violation] = broker.violations
    assert violation.kind is ViolationKind.DUPLICATE_SEQUENCE
    assert "resent sequences 0-1" in violation.what and "sequence 2" in violation.expected
    assert [r.sequence for r in broker.records(TOPIC, 0) if r.producer_id == producer] == [0, 1]


def test_a_retry_after_a_lost_answer_or_an_error_is_recovery(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers, client_id="raw-producer") as client:
        producer = idempotent(client)
        with broker.faults.injected(FaultRule(DropConnection("after"), api=ApiKey.PRODUCE, times=1)):
            with pytest.raises(ClientError):
                produce(client, producer, 0)  # written, but the answer is lost
        assert produce(client, producer, 0) == ErrorCode.NONE  # the retry meets its own write
        with broker.faults.injected(FaultRule(ErrorAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                              api=ApiKey.PRODUCE, times=1)):
            assert produce(client, producer, 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert produce(client, producer, 2) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # behind the failed one
        assert produce(client, producer, 1, count=2) == ErrorCode.NONE
    assert broker.violations == []


def unserved(bootstrap: str, api_key: int, api_version: int, client_id: str = "raw-old") -> bytes:
    """Send a header-only request (header v2: the versions past a codec's are flexible) at a version
    no codec knows; the answer's bytes after its size."""
    host, port = bootstrap.rsplit(":", 1)
    name = client_id.encode()
    frame = struct.pack(">hhih", api_key, api_version, 7, len(name)) + name + b"\x00"
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        return sock.recv(size, socket.MSG_WAITALL)


def test_an_unsupported_version_is_recorded_but_api_versions_negotiation_is_not(broker: Broker) -> None:
    answered = unserved(broker.bootstrap_servers, ApiKey.API_VERSIONS, 99)
    fallback = decode_response(answered, ApiKey.API_VERSIONS, 0)
    assert fallback.body["error_code"] == ErrorCode.UNSUPPORTED_VERSION  # the client negotiates down
    assert broker.violations == []
    assert unserved(broker.bootstrap_servers, ApiKey.METADATA, 99) == struct.pack(">i", 7)  # the empty answer
    [violation] = broker.violations
    assert violation.kind is ViolationKind.UNSUPPORTED_VERSION
    assert violation.api_key == ApiKey.METADATA and violation.api_version == 99
    assert violation.client_id == "raw-old" and violation.request is None
    assert "the broker serves v0-v" in violation.what
    assert "advertises in ApiVersions: v0-v" in violation.expected


def test_produce_versions_refused_by_the_emulated_release() -> None:
    with Broker({"kafka.version": "4.0"}, strict=True) as broker:
        broker.seed({TOPIC: {}})
        with SimpleClient(broker.bootstrap_servers) as client:
            batch = build_record_batch([(b"k", b"v")])
            answer = client.request(ApiKey.PRODUCE, 2, {"acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
            assert answer.responses[0].partition_responses[0].error_code == ErrorCode.UNSUPPORTED_VERSION
        assert kinds(broker) == [ViolationKind.UNSUPPORTED_VERSION]


def test_strict_off_records_nothing_and_says_so() -> None:
    with Broker() as broker:
        unserved(broker.bootstrap_servers, ApiKey.METADATA, 99)
        with pytest.raises(RuntimeError, match="not strict"):
            broker.violations  # noqa: B018 - the property is the behaviour under test
        assert broker.runtime is not None and broker.runtime.dispatcher.interceptors == []


def test_config_key_turns_it_on_logs_and_clear_forgets(caplog: pytest.LogCaptureFixture) -> None:
    with Broker({"kafkapy.strict": "true"}) as broker:
        unserved(broker.bootstrap_servers, ApiKey.METADATA, 99)
        assert kinds(broker) == [ViolationKind.UNSUPPORTED_VERSION]
        logged = "strict mode: [unsupported_version] Metadata v99"
        assert any(r.levelname == "WARNING" and logged in r.getMessage() for r in caplog.records)
        broker.violations.clear()
        assert broker.violations == []


def test_a_cluster_lists_every_brokers_violations_and_clears_them() -> None:
    with Broker(brokers=2, strict=True) as cluster:
        for member in cluster.brokers:
            unserved(member.bootstrap_servers, ApiKey.METADATA, 99)
        cluster.stop_broker(1)
        assert len(cluster.violations) == 2  # the one recorded by the broker now down included
        cluster.violations.clear()
        assert cluster.violations == []


def consumer_heartbeat(client: SimpleClient, group: str, member_id: str, epoch: int) -> Any:
    return client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
        "group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": None,
        "rack_id": None, "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": [TOPIC] if epoch == 0 else None, "server_assignor": None,
        "topic_partitions": [] if epoch == 0 else None})


def test_kip848_member_commits_outside_its_assignment_and_invents_an_epoch(broker: Broker) -> None:
    group = "strict-848"
    broker.seed({"strict-other": {}})
    with SimpleClient(broker.bootstrap_servers, client_id="raw-848") as client:
        find = {"key": group, "key_type": CoordinatorKeyType.GROUP}
        wait_until(lambda: client.request(ApiKey.FIND_COORDINATOR, 3, find).error_code == ErrorCode.NONE,
                   what="the group coordinator")
        joined = consumer_heartbeat(client, group, "", 0)
        assert joined.error_code == ErrorCode.NONE
        member = joined.member_id
        latest = [joined]

        def assigned() -> bool:
            answer = latest[-1]
            if answer.assignment is not None and answer.assignment.topic_partitions:
                return True
            latest.append(consumer_heartbeat(client, group, member, answer.member_epoch))
            return False

        wait_until(assigned, what="an assignment")
        epoch = latest[-1].member_epoch
        body = {"group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member,
                "group_instance_id": None, "topics": []}

        def commit_to(topic: str) -> int:
            topics = [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                      "committed_leader_epoch": -1,
                                                      "committed_metadata": ""}]}]
            committed = client.request(ApiKey.OFFSET_COMMIT, 9, {**body, "topics": topics})
            return int(committed.topics[0].partitions[0].error_code)

        assert commit_to(TOPIC) == ErrorCode.NONE
        assert broker.violations == []
        assert commit_to("strict-other") == ErrorCode.NONE  # accepted: the coordinator checks the epoch only
        fenced = consumer_heartbeat(client, group, member, epoch + 5)
        assert fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH
        consumer_heartbeat(client, group, member, -1)  # leave
    assert kinds(broker) == [ViolationKind.UNASSIGNED_COMMIT, ViolationKind.STALE_GENERATION]
    unassigned, invented = broker.violations
    assert "strict-other-0" in unassigned.what and f"{TOPIC}-0, {TOPIC}-1" in unassigned.expected
    assert "FENCED_MEMBER_EPOCH" in invented.what and "never gave it" in invented.what
