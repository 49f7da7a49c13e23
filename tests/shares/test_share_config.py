"""The share groups' broker settings: Kafka's names, defaults and ranges."""

from __future__ import annotations

import pytest

from kafkapy.server.config import BrokerConfig, ConfigError
from kafkapy.shares.module import SHARE_CONFIG_KEYS


def test_kafkas_defaults() -> None:
    config = BrokerConfig.build({}).with_keys(SHARE_CONFIG_KEYS)
    assert {key.name: config[key.name] for key in SHARE_CONFIG_KEYS} == {
        "group.share.session.timeout.ms": 45_000, "group.share.heartbeat.interval.ms": 5_000,
        "group.share.max.size": 200, "group.share.record.lock.duration.ms": 30_000,
        "group.share.delivery.count.limit": 5, "group.share.partition.max.record.locks": 2000,
        "group.share.max.share.sessions": 2000, "share.auto.offset.reset": "latest"}


@pytest.mark.parametrize(("name", "value"), [
    ("group.share.delivery.count.limit", 1), ("group.share.delivery.count.limit", 11),
    ("group.share.record.lock.duration.ms", 999), ("group.share.partition.max.record.locks", 99),
    ("group.share.session.timeout.ms", 0), ("share.auto.offset.reset", "by_duration:-PT1H"),
    ("group.share.max.size", 0), ("group.share.max.size", 1001)])
def test_values_out_of_kafkas_range_are_refused(name: str, value: object) -> None:
    with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
        BrokerConfig.build({name: value}).with_keys(SHARE_CONFIG_KEYS)


def test_by_duration_is_a_start_kafka_takes() -> None:
    config = BrokerConfig.build({"share.auto.offset.reset": "by_duration:P1D"}).with_keys(SHARE_CONFIG_KEYS)
    assert config["share.auto.offset.reset"] == "by_duration:P1D"
