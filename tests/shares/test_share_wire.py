"""Share groups on the wire, with kafkapy's own protocol client: sessions and their errors,
acquisition and acknowledgement, locks running out on virtual time, the one group-id namespace,
and a hypothesis fuzz of the share requests (Kafka's errors, never a traceback)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from share_wire_client import (
    LOCK_MS,
    TOPIC,
    ack_error,
    acquired,
    ready,
    setup_topic,
    share_fetch,
    topic_id_of,
)

from kafkapy import VirtualClock
from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.shares.fetch import batch_spans
from kafkapy.testing import BrokerFactory, wait_until


@pytest.fixture
def broker(kafka_broker_factory: BrokerFactory) -> Iterator[Broker]:
    yield kafka_broker_factory({"share.auto.offset.reset": "earliest"})


def test_sessions_acquire_acknowledge_and_kafkas_session_errors(broker: Broker) -> None:
    client, topic_id = setup_topic(broker, 3)
    with client:
        first = share_fetch(client, topic_id, "a", 0)
        assert first["error_code"] == ErrorCode.NONE and first["acquisition_lock_timeout_ms"] == LOCK_MS
        assert acquired(first) == [(0, 2, 1)]
        assert share_fetch(client, topic_id, "a", 5)["error_code"] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert share_fetch(client, topic_id, "b", 1)["error_code"] == ErrorCode.SHARE_SESSION_NOT_FOUND
        # b sees nothing: a holds every record
        assert acquired(share_fetch(client, topic_id, "b", 0)) == []
        # a acknowledges b's nothing: INVALID_RECORD_STATE for offsets it does not hold is per partition
        bad = share_fetch(client, topic_id, "b", 1, acks=[{"first_offset": 0, "last_offset": 0,
                                                      "acknowledge_types": [1]}])
        assert ack_error(bad) == ErrorCode.INVALID_RECORD_STATE
        # a accepts 0, releases 1, rejects 2: only 1 comes back, delivered a second time
        acked = share_fetch(client, topic_id, "a", 1, acks=[{"first_offset": 0, "last_offset": 2,
                                                        "acknowledge_types": [1, 2, 3]}])
        assert ack_error(acked) == ErrorCode.NONE
        assert acquired(acked) == [(1, 1, 2)]
        closing = client.request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
            "group_id": "g", "member_id": "a", "share_session_epoch": -1, "topics": []})
        assert closing["error_code"] == ErrorCode.NONE
        assert acquired(share_fetch(client, topic_id, "b", 2)) == [(1, 1, 3)]  # released on close


def test_acknowledge_cannot_open_a_session(broker: Broker) -> None:
    client, _ = setup_topic(broker, 0)
    with client:
        answer = client.request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
            "group_id": "g", "member_id": "a", "share_session_epoch": 0, "topics": []})
        assert answer["error_code"] == ErrorCode.INVALID_SHARE_SESSION_EPOCH


def test_acknowledgements_on_the_opening_fetch_are_invalid_request(broker: Broker) -> None:
    client, topic_id = setup_topic(broker, 1)
    with client:
        answer = share_fetch(client, topic_id, "a", 0, acks=[{"first_offset": 0, "last_offset": 0,
                                                         "acknowledge_types": [1]}])
        assert answer["error_code"] == ErrorCode.INVALID_REQUEST


def test_a_lock_runs_out_on_virtual_time_and_another_member_gets_the_records(
        kafka_clock: VirtualClock, kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory({"share.auto.offset.reset": "earliest"})
    client, topic_id = setup_topic(broker, 2)
    with client:
        assert acquired(share_fetch(client, topic_id, "a", 0)) == [(0, 1, 1)]
        assert acquired(share_fetch(client, topic_id, "b", 0)) == []
        kafka_clock.advance(LOCK_MS / 1000 - 1)
        assert acquired(share_fetch(client, topic_id, "b", 1)) == []
        kafka_clock.advance(1)
        assert acquired(share_fetch(client, topic_id, "b", 2)) == [(0, 1, 2)]
        late = share_fetch(client, topic_id, "a", 1, acks=[{"first_offset": 0, "last_offset": 1,
                                                       "acknowledge_types": [1]}])
        assert ack_error(late) == ErrorCode.INVALID_RECORD_STATE


def test_the_delivery_limit_archives_a_record_released_five_times(broker: Broker) -> None:
    client, topic_id = setup_topic(broker, 1)
    with client:
        assert acquired(share_fetch(client, topic_id, "a", 0)) == [(0, 0, 1)]
        release = [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [2]}]
        for epoch, count in zip(range(1, 5), range(2, 6), strict=True):
            assert acquired(share_fetch(client, topic_id, "a", epoch, acks=release)) == [(0, 0, count)]
        assert acquired(share_fetch(client, topic_id, "a", 5, acks=release)) == []  # archived: never again


def test_a_group_id_is_one_type(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers) as client:
        broker.seed({TOPIC: {"partitions": 1}})
        ready(client, "shared", "kip848")
        joined = client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
            "group_id": "shared", "member_id": "m", "member_epoch": 0, "rack_id": None,
            "subscribed_topic_names": [TOPIC]})
        assert joined["error_code"] == ErrorCode.NONE and joined["member_epoch"] == 1
        classic = client.request(ApiKey.JOIN_GROUP, 5, {
            "group_id": "shared", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]})
        assert classic["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        consumer = client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
            "group_id": "shared", "member_id": "c", "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 10_000, "subscribed_topic_names": [TOPIC], "server_assignor": None,
            "topic_partitions": []})
        assert consumer["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
            "group_id": "kip848", "member_id": "c", "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 10_000, "subscribed_topic_names": [TOPIC], "server_assignor": None,
            "topic_partitions": []})
        share = client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
            "group_id": "kip848", "member_id": "m", "member_epoch": 0, "rack_id": None,
            "subscribed_topic_names": [TOPIC]})
        assert share["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


_ACK_BATCH = st.fixed_dictionaries({"first_offset": st.integers(-3, 2**40),
                                    "last_offset": st.integers(-3, 2**40),
                                    "acknowledge_types": st.lists(st.integers(-128, 127), max_size=4)})
_EXPECTED_TOP = {ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.SHARE_SESSION_NOT_FOUND,
                 ErrorCode.INVALID_SHARE_SESSION_EPOCH}
_EXPECTED_PARTITION = {ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_RECORD_STATE,
                       ErrorCode.UNKNOWN_TOPIC_ID}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(member=st.sampled_from(["a", "b", ""]), epoch=st.integers(-3, 4), known_topic=st.booleans(),
       acks=st.lists(_ACK_BATCH, max_size=3), acknowledge=st.booleans(),
       heartbeat_epoch=st.integers(-3, 3))
def test_fuzzed_share_requests_get_kafkas_errors(fuzz_broker: Broker, member: str, epoch: int,
                                                 known_topic: bool, acks: list[dict[str, Any]],
                                                 acknowledge: bool, heartbeat_epoch: int) -> None:
    with SimpleClient(fuzz_broker.bootstrap_servers) as client:
        ready(client, "g")
        topic_id = topic_id_of(client) if known_topic else uuid.uuid4()
        partition = {"partition_index": 0, "acknowledgement_batches": acks}
        topics = [{"topic_id": topic_id, "partitions": [partition]}]
        if acknowledge:
            answer = client.request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
                "group_id": "g", "member_id": member, "share_session_epoch": epoch, "topics": topics})
        else:
            answer = client.request(ApiKey.SHARE_FETCH, 1, {
                "group_id": "g", "member_id": member, "share_session_epoch": epoch, "max_wait_ms": 0,
                "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10, "topics": topics,
                "forgotten_topics_data": []})
        assert answer["error_code"] in _EXPECTED_TOP
        for topic in answer["responses"]:
            for partition in topic["partitions"]:
                assert partition["error_code"] in _EXPECTED_PARTITION
                assert partition.get("acknowledge_error_code", ErrorCode.NONE) in _EXPECTED_PARTITION
        beat = client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
            "group_id": "g", "member_id": member, "member_epoch": heartbeat_epoch, "rack_id": None,
            "subscribed_topic_names": [TOPIC] if heartbeat_epoch % 2 == 0 else None})
        assert beat["error_code"] in {ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_MEMBER_ID,
                                      ErrorCode.FENCED_MEMBER_EPOCH}


@pytest.fixture(scope="module")
def fuzz_broker() -> Iterator[Broker]:
    with Broker({"share.auto.offset.reset": "earliest"}) as broker:
        broker.seed({TOPIC: {"partitions": 1, "records": [{"value": f"v{i}"} for i in range(5)]}})
        yield broker


def test_a_silent_member_is_fenced_on_virtual_time_and_its_records_go_back(
        kafka_clock: VirtualClock, kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory({"share.auto.offset.reset": "earliest"})
    client, topic_id = setup_topic(broker, 2)
    with client:
        ready(client, "g")
        beat = {"group_id": "g", "member_id": "a", "member_epoch": 0, "rack_id": None,
                "subscribed_topic_names": [TOPIC]}
        assert client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, beat)["member_epoch"] == 1
        assert acquired(share_fetch(client, topic_id, "a", 0)) == [(0, 1, 1)]
        kafka_clock.advance(45)  # group.share.session.timeout.ms, Kafka's default; the lock has 30 s
        assert acquired(share_fetch(client, topic_id, "b", 0)) == [(0, 1, 2)]
        again = client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {**beat, "member_epoch": 1})
        assert again["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
        assert share_fetch(client, topic_id, "a", 1)["error_code"] == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_fencing_releases_before_the_lock_runs_out(
        kafka_clock: VirtualClock, kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory({"share.auto.offset.reset": "earliest",
                                   "group.share.session.timeout.ms": 10_000,
                                   "group.share.min.session.timeout.ms": 10_000})
    client, topic_id = setup_topic(broker, 1)
    with client:
        ready(client, "g")
        client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
            "group_id": "g", "member_id": "a", "member_epoch": 0, "rack_id": None,
            "subscribed_topic_names": [TOPIC]})
        assert acquired(share_fetch(client, topic_id, "a", 0)) == [(0, 0, 1)]
        kafka_clock.advance(10)  # fenced at 10 s; its lock would last 30 s
        assert acquired(share_fetch(client, topic_id, "b", 0)) == [(0, 0, 2)]


def test_reset_forgets_share_groups(broker: Broker) -> None:
    client, topic_id = setup_topic(broker, 1)
    with client:
        assert acquired(share_fetch(client, topic_id, "a", 0)) == [(0, 0, 1)]
    broker.reset()
    client, topic_id = setup_topic(broker, 1)
    with client:
        assert share_fetch(client, topic_id, "a", 1)["error_code"] == ErrorCode.SHARE_SESSION_NOT_FOUND
        assert acquired(share_fetch(client, topic_id, "b", 0)) == [(0, 0, 1)]


def test_latest_by_default_a_group_starts_at_the_high_watermark(kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory()
    client, topic_id = setup_topic(broker, 2)
    with client:
        assert acquired(share_fetch(client, topic_id, "a", 0)) == []
        broker.seed({TOPIC: {"records": [{"value": "new"}]}})
        assert acquired(share_fetch(client, topic_id, "a", 1)) == [(2, 2, 1)]


def _acknowledge(client: SimpleClient, topic_id: uuid.UUID, member: str, epoch: int, *, first: int, last: int,
                 kind: int) -> None:
    """ShareAcknowledge, which (unlike a ShareFetch carrying the same) acquires nothing after."""
    answer = client.request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
        "group_id": "g", "member_id": member, "share_session_epoch": epoch, "topics": [
            {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]}]}]}]})
    assert answer["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NONE


def _fetch_in_thread(broker: Broker, topic_id: uuid.UUID, member: str, max_wait_ms: int
                     ) -> tuple[threading.Thread, list[dict[str, Any]]]:
    answers: list[dict[str, Any]] = []

    def run() -> None:
        with SimpleClient(broker.bootstrap_servers, max_wait_ms / 1000 + 10) as other:
            answers.append(share_fetch(other, topic_id, member, 0, max_wait_ms=max_wait_ms))
    thread = threading.Thread(target=run)
    thread.start()
    return thread, answers


def _wait_for_a_waiting_fetch(broker: Broker) -> None:
    """Until a ShareFetch waits in the broker (an admitted connection's worker holds it), rather
    than sleeping and hoping the fetch thread got there first on a loaded machine."""
    runtime = broker.runtime
    assert runtime is not None
    wait_until(lambda: any(c.admitted and c.busy for c in runtime.connections), what="a fetch waiting")


# The waits below are far longer than any test: a fetch answered within WOKEN_S was woken by what
# the test did, however slow the machine, and one that was not is still waiting then.
LONG_WAIT_MS, WOKEN_S = 120_000, 60


def test_a_waiting_fetch_is_answered_when_a_record_is_released_not_when_one_is_accepted(
        broker: Broker) -> None:
    client, topic_id = setup_topic(broker, 2)
    with client:
        assert acquired(share_fetch(client, topic_id, "a", 0)) == [(0, 1, 1)]
        thread, answers = _fetch_in_thread(broker, topic_id, "b", LONG_WAIT_MS)
        _wait_for_a_waiting_fetch(broker)  # b's
        _acknowledge(client, topic_id, "a", 1, first=0, last=0, kind=1)
        time.sleep(0.3)
        assert thread.is_alive()  # an accepted record wakes it, but gives it nothing: it waits on
        _acknowledge(client, topic_id, "a", 2, first=1, last=1, kind=2)
        thread.join(WOKEN_S)
        assert not thread.is_alive() and acquired(answers[0]) == [(1, 1, 2)]


def test_a_waiting_fetch_is_answered_by_an_append(broker: Broker) -> None:
    client, topic_id = setup_topic(broker, 0)
    with client:
        thread, answers = _fetch_in_thread(broker, topic_id, "b", LONG_WAIT_MS)
        _wait_for_a_waiting_fetch(broker)
        broker.seed({TOPIC: {"records": [{"value": "late"}]}})
        thread.join(WOKEN_S)
        assert not thread.is_alive() and acquired(answers[0]) == [(0, 0, 1)]


def test_a_waiting_fetch_is_answered_when_its_topic_is_deleted(broker: Broker) -> None:
    """Kafka's DelayedShareFetch completes early when a partition it waits on is gone."""
    client, topic_id = setup_topic(broker, 0)
    with client:
        thread, answers = _fetch_in_thread(broker, topic_id, "b", LONG_WAIT_MS)
        _wait_for_a_waiting_fetch(broker)
        broker.delete_topics(TOPIC)
        thread.join(WOKEN_S)
        assert not thread.is_alive()  # not after max_wait_ms
        [partition] = answers[0]["responses"][0]["partitions"]
        assert partition["error_code"] in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID)


def test_a_broker_that_does_not_lead_the_partition_names_the_leader(
        kafka_broker_factory: BrokerFactory) -> None:
    cluster = kafka_broker_factory({"share.auto.offset.reset": "earliest"}, brokers=3)
    cluster.seed({TOPIC: {"partitions": 1, "replication_factor": 1, "records": [{"value": "v"}]}})
    addresses = cluster.bootstrap_servers.split(",")
    with SimpleClient(addresses[0]) as first:
        topic_id = topic_id_of(first)
        leader = first.request(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                                     "allow_auto_topic_creation": False,
                                                     "include_topic_authorized_operations": False}
                               )["topics"][0]["partitions"][0]["leader_id"]
    follower = next(i for i, b in enumerate(cluster.brokers) if b.broker_id != leader)
    with SimpleClient(addresses[follower]) as client:
        answer = share_fetch(client, topic_id, "a", 0, max_wait_ms=5_000)
        row = answer["responses"][0]["partitions"][0]
        assert row["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert row["current_leader"]["leader_id"] == leader
        assert [e["node_id"] for e in answer["node_endpoints"]] == [leader]


def test_share_fetch_v2_record_limit_mode_acquires_exactly_max_records(broker: Broker) -> None:
    broker.seed({TOPIC: {"partitions": 1}})
    broker.seed({TOPIC: {"records": [{"value": f"v{i}"} for i in range(6)]}})  # one batch
    with SimpleClient(broker.bootstrap_servers) as client:
        topic_id = topic_id_of(client)

        def fetch(member: str, mode: int) -> dict[str, Any]:
            return dict(client.request(ApiKey.SHARE_FETCH, 2, {
                "group_id": "g", "member_id": member, "share_session_epoch": 0, "max_wait_ms": 0,
                "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 2, "batch_size": 2,
                "share_acquire_mode": mode, "is_renew_ack": False,
                "topics": [{"topic_id": topic_id, "partitions": [
                    {"partition_index": 0, "acknowledgement_batches": []}]}], "forgotten_topics_data": []}))
        assert acquired(fetch("a", 1)) == [(0, 1, 1)]
        assert acquired(fetch("b", 0)) == [(2, 5, 1)]  # the rest of the batch, whole


def test_a_broker_emulating_kafka_4_0_serves_no_share_apis(kafka_broker_factory: BrokerFactory) -> None:
    """Kafka 4.0 served share groups only as an early-access v0, which kafkapy does not speak."""
    broker = kafka_broker_factory({"kafka.version": "4.0"})
    with SimpleClient(broker.bootstrap_servers) as client:
        keys = {k["api_key"] for k in client.request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"})["api_keys"]}
    assert keys and not keys & {ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE,
                                ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS}


def test_batch_spans_reads_whole_batches_and_stops_at_a_part_of_one() -> None:
    one = build_record_batch([(None, b"a"), (None, b"b")], base_offset=7)
    two = build_record_batch([(None, b"c")], base_offset=9)
    assert [(f, last, bytes(v)) for f, last, v in batch_spans([one + two])] == [(7, 8, one), (9, 9, two)]
    assert [(f, last) for f, last, _ in batch_spans([one + two[:20]])] == [(7, 8)]


def test_a_waiting_fetch_is_answered_when_the_broker_stops(broker: Broker) -> None:
    """As a Fetch's: the stop does not wait out max_wait_ms nor close the socket under it."""
    client, topic_id = setup_topic(broker, 0)
    with client:
        thread, answers = _fetch_in_thread(broker, topic_id, "b", 20_000)
        runtime = broker.runtime
        assert runtime is not None
        wait_until(lambda: any(c.busy for c in runtime.connections), what="b's fetch waiting")
        broker.close()
        thread.join(30)
        [partition] = answers[0]["responses"][0]["partitions"]
        assert partition["error_code"] == ErrorCode.NONE and acquired(answers[0]) == []
