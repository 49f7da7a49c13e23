"""A broker's group settings must agree with each other to start, as Kafka's GroupCoordinatorConfig
and ShareGroupConfig require: a heartbeat interval within its bounds and shorter than the session
timeout, each bound pair ordered. Kafka refuses to start otherwise; so does kafkapy, in one line
with Kafka's message, and a consistent set (the way to make KIP-848 rebalances quick in tests)
starts."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kafkapy.embedded import Broker
from kafkapy.groups.group_configs import BROKER_SETTINGS_RULES, check_broker_group_settings
from kafkapy.server.config import ConfigError

KAFKAS_DEFAULTS = {"listeners": "PLAINTEXT://127.0.0.1:0"}  # a test port, and Kafka's defaults for the rest


@pytest.mark.parametrize(("settings", "message"), [
    ({"group.consumer.heartbeat.interval.ms": 500},
     "group.consumer.heartbeat.interval.ms must be greater than or equal to "
     "group.consumer.min.heartbeat.interval.ms"),
    ({"group.consumer.heartbeat.interval.ms": 20_000},
     "group.consumer.heartbeat.interval.ms must be less than or equal to "
     "group.consumer.max.heartbeat.interval.ms"),
    ({"group.consumer.min.heartbeat.interval.ms": 20_000},
     "group.consumer.max.heartbeat.interval.ms must be greater than or equal to "
     "group.consumer.min.heartbeat.interval.ms"),
    ({"group.consumer.session.timeout.ms": 70_000},
     "group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ({"group.consumer.session.timeout.ms": 5_000, "group.consumer.min.session.timeout.ms": 5_000},
     "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"),
    ({"group.share.heartbeat.interval.ms": 1_000},
     "group.share.heartbeat.interval.ms must be greater than or equal to "
     "group.share.min.heartbeat.interval.ms"),
    ({"group.share.max.session.timeout.ms": 30_000},
     "group.share.max.session.timeout.ms must be greater than or equal to "
     "group.share.min.session.timeout.ms"),
    ({"group.share.record.lock.duration.ms": 90_000},
     "group.share.max.record.lock.duration.ms must be greater than or equal to "
     "group.share.record.lock.duration.ms"),
    ({"group.share.max.share.sessions": 100},  # Kafka's ShareGroupConfig: not below group.share.max.size
     "group.share.max.share.sessions must be greater than or equal to group.share.max.size"),
])
def test_a_broker_whose_group_settings_disagree_does_not_start(settings: dict[str, Any],
                                                               message: str) -> None:
    """Against Kafka's defaults (``kafkapy serve``'s): the embedded quick heartbeats left out."""
    with pytest.raises(ConfigError) as refused, Broker(settings, defaults=KAFKAS_DEFAULTS):
        pass
    assert str(refused.value) == message


def _heartbeat_interval(broker: Broker) -> int:
    """What a KIP-848 member is told: ConsumerGroupHeartbeat's heartbeat_interval_ms."""
    from kafkapy.client import SimpleClient
    from kafkapy.errors import ErrorCode
    from kafkapy.protocol.api_keys import ApiKey

    broker.seed({"t": {"partitions": 1}})
    with SimpleClient(broker.bootstrap_servers) as client:
        client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
        answer = client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
            "group_id": "g", "member_id": "m-1", "member_epoch": 0, "rebalance_timeout_ms": 30_000,
            "subscribed_topic_names": ["t"], "server_assignor": None, "topic_partitions": [],
            "instance_id": None, "rack_id": None})
    assert answer["error_code"] == ErrorCode.NONE
    return int(answer["heartbeat_interval_ms"])


def test_the_embedded_broker_heartbeats_quickly_unless_the_test_sets_otherwise() -> None:
    """Broker() tells KIP-848 members 500 ms (a test's rebalances take under a second, not 5 s);
    ``kafkapy serve``'s defaults keep Kafka's 5 s; a test's own settings that our 500 ms would
    break (a minimum above it) are checked against Kafka's defaults instead, and start."""
    with Broker() as broker:
        assert _heartbeat_interval(broker) == 500
    with Broker(defaults=KAFKAS_DEFAULTS) as broker:
        assert _heartbeat_interval(broker) == 5_000
    with Broker({"group.consumer.min.heartbeat.interval.ms": 1_000}) as broker:
        assert _heartbeat_interval(broker) == 5_000
    with Broker({"group.consumer.session.timeout.ms": 60_000}) as broker:  # agrees with 500 ms
        assert _heartbeat_interval(broker) == 500
    with Broker({"group.consumer.heartbeat.interval.ms": 2_000}) as broker:  # the test's own
        assert _heartbeat_interval(broker) == 2_000


def test_settings_that_agree_start_and_reach_the_members() -> None:
    from kafkapy.client import SimpleClient
    from kafkapy.errors import ErrorCode
    from kafkapy.protocol.api_keys import ApiKey

    quick = {"group.consumer.heartbeat.interval.ms": 500, "group.consumer.min.heartbeat.interval.ms": 500}
    with Broker(quick) as broker:
        broker.seed({"t": {"partitions": 1}})
        with SimpleClient(broker.bootstrap_servers) as client:
            deadline = time.monotonic() + 10
            while True:  # the first ask makes __consumer_offsets: NOT_COORDINATOR until it has a leader
                client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
                answer = client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
                    "group_id": "g", "member_id": "m-1", "member_epoch": 0, "rebalance_timeout_ms": 30_000,
                    "subscribed_topic_names": ["t"], "server_assignor": None, "topic_partitions": [],
                    "instance_id": None, "rack_id": None})
                if answer["error_code"] != ErrorCode.NOT_COORDINATOR or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
    assert (answer["error_code"], answer["error_message"], answer["heartbeat_interval_ms"]) == (0, None, 500)


def test_every_rule_is_checked_and_only_where_both_keys_are_set() -> None:
    """Each rule, broken alone on top of values that keep the others, is the one reported; a rule
    whose keys are absent (their module not loaded) is not checked."""
    good = {"group.consumer.min.heartbeat.interval.ms": 100, "group.consumer.heartbeat.interval.ms": 200,
            "group.consumer.max.heartbeat.interval.ms": 300, "group.consumer.min.session.timeout.ms": 1_000,
            "group.consumer.session.timeout.ms": 2_000, "group.consumer.max.session.timeout.ms": 3_000,
            "group.share.min.heartbeat.interval.ms": 100, "group.share.heartbeat.interval.ms": 200,
            "group.share.max.heartbeat.interval.ms": 300, "group.share.min.session.timeout.ms": 1_000,
            "group.share.session.timeout.ms": 2_000, "group.share.max.session.timeout.ms": 3_000,
            "group.share.min.record.lock.duration.ms": 1_000, "group.share.record.lock.duration.ms": 2_000,
            "group.share.max.record.lock.duration.ms": 3_000, "group.share.max.size": 10,
            "group.share.max.share.sessions": 20}
    check_broker_group_settings(good)
    for key, relation, other in BROKER_SETTINGS_RULES:
        assert key in good and other in good
        broken = dict(good)
        if relation == ">=":
            broken[key] = 0
        elif relation == "<=":
            broken[key] = 10**6
        else:  # a heartbeat as long as the session, still within its own bounds
            broken[key] = broken[key.replace(".heartbeat.", ".max.heartbeat.")] = good[other]
        with pytest.raises(ConfigError) as refused:
            check_broker_group_settings(broken)
        assert str(refused.value).startswith(f"{key} must be "), (key, relation, other, str(refused.value))
        check_broker_group_settings({k: v for k, v in broken.items() if k not in (key, other)})


@pytest.mark.parametrize(("name", "value", "low", "high"), [
    ("group.share.min.record.lock.duration.ms", 999, 1_000, 30_000),
    ("group.share.min.record.lock.duration.ms", 30_001, 1_000, 30_000),
    ("group.share.max.record.lock.duration.ms", 29_999, 30_000, 3_600_000),
    ("group.share.max.record.lock.duration.ms", 3_600_001, 30_000, 3_600_000)])
def test_the_record_lock_bounds_keep_kafkas_ranges(name: str, value: int, low: int, high: int) -> None:
    """ShareGroupConfig's ConfigDef: the floor 1000 to 30000 ms, the ceiling 30000 to 3600000 ms."""
    with pytest.raises(ConfigError) as refused, Broker({name: value}, defaults=KAFKAS_DEFAULTS):
        pass
    bound = f"at least {low}" if value < low else f"no more than {high}"
    assert str(refused.value) == f"Invalid value {value} for configuration {name}: Value must be {bound}"
