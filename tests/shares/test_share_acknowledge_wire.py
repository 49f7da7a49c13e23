"""Acknowledgements on the wire as Kafka 4.2 takes them (KafkaApis.validateAcknowledgementBatches,
SharePartitionManager.acknowledge, SharePartition.acknowledge): a partition's batches are checked
for form first (INVALID_REQUEST: out of order, RENEW where the request may not carry it), then go
all or none; offsets past the last one handed out are INVALID_REQUEST, offsets below the start
offset are passed over, a partition the group holds no share-partition of is
UNKNOWN_TOPIC_OR_PARTITION; and KIP-1222's renewing ShareFetch only acknowledges."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from share_wire_client import LOCK_MS, ack_error, acquired, setup_topic, share_fetch

from kafkapy import VirtualClock
from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import BrokerFactory

ACCEPT, RELEASE, RENEW = 1, 2, 4


@pytest.fixture
def broker(kafka_broker_factory: BrokerFactory) -> Iterator[Broker]:
    yield kafka_broker_factory({"share.auto.offset.reset": "earliest"})


def batch(first: int, last: int, *types: int) -> dict[str, Any]:
    return {"first_offset": first, "last_offset": last, "acknowledge_types": list(types)}


def acknowledge(client: SimpleClient, topic_id: uuid.UUID, member: str, epoch: int,
                batches: list[dict[str, Any]], version: int = 1, renew: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"group_id": "g", "member_id": member, "share_session_epoch": epoch,
                            "topics": [{"topic_id": topic_id, "partitions": [
                                {"partition_index": 0, "acknowledgement_batches": batches}]}]}
    if version >= 2:
        body["is_renew_ack"] = renew
    return dict(client.request(ApiKey.SHARE_ACKNOWLEDGE, version, body))


def partition_error(answer: dict[str, Any]) -> int:
    code: int = answer["responses"][0]["partitions"][0]["error_code"]
    return code


def states(broker: Broker, offsets: range) -> list[str]:
    [view] = broker.share_partitions("g")
    return [view.state_of(offset) for offset in offsets]


def test_a_refused_batch_undoes_the_batches_before_it(broker: Broker) -> None:
    client, topic_id = setup_topic(broker, 4)
    with client:
        assert acquired(share_fetch(client, topic_id, "a", 0)) == [(0, 3, 1)]
        past = share_fetch(client, topic_id, "a", 1, acks=[batch(0, 1, ACCEPT), batch(3, 5, ACCEPT)])
        assert ack_error(past) == ErrorCode.INVALID_REQUEST  # 4 and 5 were never handed out
        assert states(broker, range(4)) == ["ACQUIRED"] * 4  # 0-1 not accepted either
        twice = share_fetch(client, topic_id, "a", 2, acks=[batch(0, 1, ACCEPT), batch(1, 2, ACCEPT)])
        assert ack_error(twice) == ErrorCode.INVALID_RECORD_STATE  # offset 1 in both
        backwards = share_fetch(client, topic_id, "a", 3, acks=[batch(2, 3, ACCEPT), batch(0, 1, ACCEPT)])
        assert ack_error(backwards) == ErrorCode.INVALID_REQUEST
        assert states(broker, range(4)) == ["ACQUIRED"] * 4
        done = share_fetch(client, topic_id, "a", 4, acks=[batch(0, 1, ACCEPT), batch(2, 3, ACCEPT)])
        assert ack_error(done) == ErrorCode.NONE
        assert broker.share_partitions("g")[0].start_offset == 4


def test_offsets_below_the_start_offset_are_passed_over(broker: Broker) -> None:
    client, topic_id = setup_topic(broker, 3)
    with client:
        share_fetch(client, topic_id, "a", 0)
        assert ack_error(share_fetch(client, topic_id, "a", 1, acks=[batch(0, 0, ACCEPT)])) == ErrorCode.NONE
        again = acknowledge(client, topic_id, "a", 2, [batch(0, 0, ACCEPT)])  # done already
        assert partition_error(again) == ErrorCode.NONE
        across = acknowledge(client, topic_id, "a", 3, [batch(0, 1, ACCEPT)])  # 0 done, 1 held
        assert partition_error(across) == ErrorCode.NONE
        assert states(broker, range(3)) == ["ARCHIVED", "ARCHIVED", "ACQUIRED"]


def test_a_partition_the_group_never_fetched_is_unknown_topic_or_partition(broker: Broker) -> None:
    client, topic_id = setup_topic(broker, 1)
    with client:
        opened = client.request(ApiKey.SHARE_FETCH, 1, {
            "group_id": "g", "member_id": "a", "share_session_epoch": 0, "max_wait_ms": 0, "min_bytes": 1,
            "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10, "topics": [],
            "forgotten_topics_data": []})
        assert opened["error_code"] == ErrorCode.NONE
        answer = acknowledge(client, topic_id, "a", 1, [batch(0, 0, ACCEPT)])
        assert partition_error(answer) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_renew_only_in_a_v2_request_that_says_is_renew_ack(kafka_clock: VirtualClock, broker: Broker) -> None:
    client, topic_id = setup_topic(broker, 1)
    with client:
        share_fetch(client, topic_id, "a", 0)
        assert partition_error(acknowledge(client, topic_id, "a", 1, [batch(0, 0, RENEW)])) == \
            ErrorCode.INVALID_REQUEST  # v1 knows no RENEW
        unsaid = acknowledge(client, topic_id, "a", 2, [batch(0, 0, RENEW)], version=2, renew=False)
        assert partition_error(unsaid) == ErrorCode.INVALID_REQUEST
        kafka_clock.advance(LOCK_MS / 1000 - 1)
        renewed = acknowledge(client, topic_id, "a", 3, [batch(0, 0, RENEW)], version=2, renew=True)
        assert partition_error(renewed) == ErrorCode.NONE
        kafka_clock.advance(2)  # past the first lock: the renewed one holds
        assert states(broker, range(1)) == ["ACQUIRED"]
        mixed = acknowledge(client, topic_id, "a", 4, [batch(0, 0, ACCEPT)], version=2, renew=True)
        assert partition_error(mixed) == ErrorCode.NONE  # a renewing request may finish records too


def renewing_fetch(client: SimpleClient, topic_id: uuid.UUID, epoch: int, acks: list[dict[str, Any]],
                   **limits: int) -> dict[str, Any]:
    body = {"group_id": "g", "member_id": "a", "share_session_epoch": epoch, "max_wait_ms": 0, "min_bytes": 0,
            "max_bytes": 0, "max_records": 0, "batch_size": 0, "share_acquire_mode": 0, "is_renew_ack": True,
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0,
                                                              "acknowledgement_batches": acks}]}],
            "forgotten_topics_data": [], **limits}
    return dict(client.request(ApiKey.SHARE_FETCH, 2, body))


def test_a_renewing_share_fetch_only_acknowledges_and_wants_its_limits_zero(broker: Broker) -> None:
    """KIP-1222 (KafkaApis.handleShareFetchRequest): IsRenewAck with a byte, record or wait limit
    is INVALID_REQUEST naming each; with them 0 the fetch acknowledges and acquires nothing."""
    client, topic_id = setup_topic(broker, 2)
    with client:
        first = client.request(ApiKey.SHARE_FETCH, 2, {
            "group_id": "g", "member_id": "a", "share_session_epoch": 0, "max_wait_ms": 0, "min_bytes": 1,
            "max_bytes": 1 << 20, "max_records": 1, "batch_size": 1, "share_acquire_mode": 1,
            "is_renew_ack": False, "topics": [{"topic_id": topic_id, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": []}]}], "forgotten_topics_data": []})
        assert acquired(first) == [(0, 0, 1)]
        refused = renewing_fetch(client, topic_id, 1, [batch(0, 0, RENEW)], max_wait_ms=500, max_records=5)
        assert (refused["error_code"], refused["error_message"]) == (
            ErrorCode.INVALID_REQUEST, "maxRecords must be set to 0, maxWaitMs must be set to 0, "
            "if isRenewAck is true.")
        renewed = renewing_fetch(client, topic_id, 1, [batch(0, 0, RENEW)])
        assert renewed["error_code"] == ErrorCode.NONE and ack_error(renewed) == ErrorCode.NONE
        assert acquired(renewed) == []  # offset 1 is there to take, but a renewing fetch takes nothing
        assert states(broker, range(2)) == ["ACQUIRED", "AVAILABLE"]
