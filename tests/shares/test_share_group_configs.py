"""Share groups take their GROUP config resources (Kafka 4's group configs): a group set to
share.auto.offset.reset=earliest through IncrementalAlterConfigs reads what was produced before it
joined while the broker's default stays latest; share.record.lock.duration.ms and the share
session timeout / heartbeat interval are the group's own."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kafkapy import VirtualClock
from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.testing import BrokerFactory, wait_until
from tests.shares.share_wire_client import TOPIC, acquired, ready, setup_topic, share_fetch

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")

GROUP = 32  # Kafka's ConfigResource.Type.GROUP


def _set_with_confluent(broker: Broker, group: str, configs: dict[str, str]) -> None:
    admin = ck_admin.AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    entries = [ck_admin.ConfigEntry(k, v, incremental_operation=ck_admin.AlterConfigOpType.SET)
               for k, v in configs.items()]
    resource = ck_admin.ConfigResource(ck_admin.ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        assert future.result(10) is None


def _described_with_confluent(broker: Broker, group: str) -> dict[str, tuple[str, Any]]:
    admin = ck_admin.AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    (future,) = admin.describe_configs([ck_admin.ConfigResource(ck_admin.ResourceType.GROUP, group)]).values()
    described = future.result(10)
    return {name: (entry.value, ck_admin.ConfigSource(entry.source)) for name, entry in described.items()}


def _drain(consumer: Any, want: int, seconds: float) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        for message in consumer.poll(0.2):
            if message.error() is None:
                got.append(message.value())
                consumer.acknowledge(message, ck.AcknowledgeType.ACCEPT)
    return got


def test_a_share_consumer_of_a_group_set_to_earliest_reads_what_came_before_it(
        kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory()  # share.auto.offset.reset left at Kafka's latest
    broker.seed({TOPIC: {"partitions": 1}})
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(10):
        producer.produce(TOPIC, f"old-{i}".encode())
    assert producer.flush(10) == 0
    _set_with_confluent(broker, "early", {"share.auto.offset.reset": "earliest"})
    described = _described_with_confluent(broker, "early")
    assert described["share.auto.offset.reset"] == ("earliest", ck_admin.ConfigSource.GROUP_CONFIG)
    assert described["share.record.lock.duration.ms"] == ("30000", ck_admin.ConfigSource.DEFAULT_CONFIG)

    def consumer(group: str) -> Any:
        share = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                  "share.acknowledgement.mode": "explicit"})
        share.subscribe([TOPIC])
        return share

    early, late = consumer("early"), consumer("late")
    try:
        assert sorted(_drain(early, 10, 20)) == sorted(f"old-{i}".encode() for i in range(10))
        assert _drain(late, 1, 3) == []  # the broker's latest: nothing from before it joined
    finally:
        early.close()
        late.close()


def _alter(client: SimpleClient, group: str, configs: dict[str, str]) -> None:
    answer = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": GROUP, "resource_name": group,
        "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]}],
        "validate_only": False})
    assert answer["responses"][0]["error_code"] == ErrorCode.NONE, answer


def test_a_groups_lock_duration_and_start_on_the_wire(kafka_clock: VirtualClock,
                                                       kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory()
    client, topic_id = setup_topic(broker, 2)
    with client:
        _alter(client, "g", {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "15000"})
        first = share_fetch(client, topic_id, "a", 0)
        assert first["acquisition_lock_timeout_ms"] == 15_000
        assert acquired(first) == [(0, 1, 1)]  # earliest: the records seeded before
        kafka_clock.advance(14)
        assert acquired(share_fetch(client, topic_id, "b", 0)) == []
        kafka_clock.advance(1)  # the group's 15 s, not the broker's 30 s
        assert acquired(share_fetch(client, topic_id, "b", 1)) == [(0, 1, 2)]


def test_a_share_member_is_fenced_after_its_groups_session_timeout(
        kafka_clock: VirtualClock, kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory({"group.share.min.session.timeout.ms": 1000,
                                   "group.share.min.heartbeat.interval.ms": 100})
    broker.seed({TOPIC: {"partitions": 1}})
    with SimpleClient(broker.bootstrap_servers) as client:
        ready(client, "short")
        _alter(client, "short", {"share.session.timeout.ms": "2000", "share.heartbeat.interval.ms": "500"})
        joined = client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
            "group_id": "short", "member_id": "m", "member_epoch": 0, "rack_id": None,
            "subscribed_topic_names": [TOPIC]})
        assert joined["error_code"] == ErrorCode.NONE and joined["heartbeat_interval_ms"] == 500

        def members() -> list[Any]:
            answer = client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": ["short"],
                                                                     "include_authorized_operations": False})
            found: list[Any] = answer["groups"][0]["members"]
            return found

        kafka_clock.advance(1.5)
        assert len(members()) == 1
        kafka_clock.advance(1.0)
        wait_until(lambda: members() == [], what="the share member fenced after the group's 2 s")


def test_a_share_consumer_of_a_group_set_by_duration_starts_at_the_first_record_that_recent(
        kafka_broker_factory: BrokerFactory) -> None:
    """KIP-1106's by_duration (Kafka 4.1's share.auto.offset.reset, Kafka's
    ShareConsumerTest.testShareAutoOffsetResetByDuration): records two hours and half an hour old
    and one new; a group set to PT1H starts at the half-hour-old one, one set to PT3H at the first."""
    broker = kafka_broker_factory()
    broker.seed({TOPIC: {"partitions": 1}})
    now_ms = int(time.time() * 1000)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for name, age_ms in (("old", 7_200_000), ("recent", 1_800_000), ("current", 0)):
        producer.produce(TOPIC, name.encode(), timestamp=now_ms - age_ms)
        assert producer.flush(10) == 0  # one batch each: the timestamp index finds each record
    _set_with_confluent(broker, "hour", {"share.auto.offset.reset": "by_duration:PT1H"})
    _set_with_confluent(broker, "three", {"share.auto.offset.reset": "by_duration:pt3h"})
    assert _described_with_confluent(broker, "hour")["share.auto.offset.reset"] == (
        "by_duration:PT1H", ck_admin.ConfigSource.GROUP_CONFIG)
    consumers = {}
    try:
        for group in ("hour", "three"):
            consumers[group] = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap_servers,
                                                 "group.id": group, "share.acknowledgement.mode": "explicit"})
            consumers[group].subscribe([TOPIC])
        assert sorted(_drain(consumers["hour"], 2, 20)) == [b"current", b"recent"]
        assert sorted(_drain(consumers["three"], 3, 20)) == [b"current", b"old", b"recent"]
    finally:
        for consumer in consumers.values():
            consumer.close()


@pytest.mark.parametrize("value", ["by_duration", "by_duration:1h", "by_duration:-PT1H", "by_duration:PT",
                                   "none", "Earliest"])
def test_share_auto_offset_reset_values_kafka_refuses_are_invalid_config(
        kafka_broker_factory: BrokerFactory, value: str) -> None:
    broker = kafka_broker_factory()
    with SimpleClient(broker.bootstrap_servers) as client:
        answer = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": GROUP, "resource_name": "g",
            "configs": [{"name": "share.auto.offset.reset", "config_operation": 0, "value": value}]}],
            "validate_only": False})
        refused = answer["responses"][0]
        assert refused["error_code"] == ErrorCode.INVALID_CONFIG
        assert refused["error_message"].endswith(
            "The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def test_by_duration_with_no_record_that_recent_is_offset_not_available_until_one_comes(
        kafka_broker_factory: BrokerFactory) -> None:
    """Kafka's SharePartition finds no offset for the timestamp (OffsetNotAvailableException): the
    fetch answers the partition's error and the next one tries again."""
    broker = kafka_broker_factory()
    client, topic_id = setup_topic(broker, 2)  # seeded records, stamped now
    with client:
        _alter(client, "g", {"share.auto.offset.reset": "by_duration:PT0S"})
        time.sleep(0.01)  # the seeded records are now older than "now less nothing"
        first = share_fetch(client, topic_id, "a", 0)
        assert first["responses"][0]["partitions"][0]["error_code"] == ErrorCode.OFFSET_NOT_AVAILABLE
        # a record stamped ahead of the clock, so "now" at the next fetch is not past it
        stamped_ahead = build_record_batch([(None, b"new", [], int(time.time() * 1000) + 10_000)])
        client.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                                           "topic_data": [{"name": TOPIC, "partition_data": [
                                               {"index": 0, "records": stamped_ahead}]}]})
        assert acquired(share_fetch(client, topic_id, "a", 1)) == [(2, 2, 1)]  # starts at the new one
