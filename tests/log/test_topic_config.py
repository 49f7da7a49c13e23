"""LogConfig: Kafka's topic configs, checked as Kafka checks them, over the broker's log.* settings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.errors import ErrorCode
from kafkapy.log.topic_config import (
    LONG_MAX,
    TOPIC_CONFIGS,
    InvalidTopicConfig,
    LogConfig,
    TopicConfigKey,
    format_topic_value,
    parse_topic_value,
    validate_topic_config,
)
from kafkapy.protocol.records import LOG_APPEND_TIME


def refused(config: dict[str, object], broker: dict[str, object] | None = None) -> str:
    with pytest.raises(InvalidTopicConfig) as caught:
        validate_topic_config(config) if broker is None else LogConfig.from_topic_config(config, broker)
    assert caught.value.code is ErrorCode.INVALID_CONFIG
    return str(caught.value.message)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"segment.bytes": "13"},
            "Invalid value 13 for configuration segment.bytes: Value must be at least 14",
        ),
        (
            {"segment.bytes": "abc"},
            "Invalid value abc for configuration segment.bytes: Not a number of type INT",
        ),
        (
            {"segment.bytes": str(1 << 31)},
            f"Invalid value {1 << 31} for configuration segment.bytes: Not a number of type INT",
        ),
        (
            {"retention.ms": "-2"},
            "Invalid value -2 for configuration retention.ms: Value must be at least -1",
        ),
        (
            {"retention.ms": "1.5"},
            "Invalid value 1.5 for configuration retention.ms: Not a number of type LONG",
        ),
        (
            {"message.timestamp.type": "Now"},
            "Invalid value Now for configuration message.timestamp.type: "
            "String must be one of: CreateTime, LogAppendTime",
        ),
        (
            {"cleanup.policy": "compact,shred"},
            "Invalid value compact,shred for configuration cleanup.policy: "
            "String must be one of: compact, delete",
        ),
        (
            {"compression.type": "brotli"},
            "Invalid value brotli for configuration compression.type: String must be "
            "one of: uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        (
            {"min.cleanable.dirty.ratio": "1.5"},
            "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
        ),
        (
            {"preallocate": "yes"},
            "Invalid value yes for configuration preallocate: Expected value to be either true or false",
        ),
        (
            {"min.insync.replicas": "0"},
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
        ),
        (
            {"flush.messages": "0"},
            "Invalid value 0 for configuration flush.messages: Value must be at least 1",
        ),
        ({"retention.size": "1"}, "Unknown topic config name: retention.size"),
        (
            {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
        ),
    ],
)
def test_invalid_values_are_invalid_config_with_kafkas_message(
    config: dict[str, object], message: str
) -> None:
    assert refused(config) == message


def test_defaults_are_kafkas() -> None:
    config = LogConfig.from_topic_config({})
    assert config == LogConfig()
    assert (config.segment_bytes, config.retention_ms, config.max_message_bytes) == (
        1 << 30,
        604_800_000,
        1048588,
    )
    assert (
        config.value_of("cleanup.policy") == ("delete",)
        and config.value_of("message.timestamp.type") == "CreateTime"
    )
    for key in TOPIC_CONFIGS:  # every default passes its own check, and LogConfig() holds it
        assert parse_topic_value(key.name, format_topic_value(key.name, key.default)) == key.default
        assert config.value_of(key.name) == key.default


def test_broker_settings_supply_the_defaults_under_kafkas_synonyms() -> None:
    config = LogConfig.from_topic_config(
        {},
        {
            "log.retention.hours": 1,
            "log.segment.bytes": "1048576",
            "log.cleanup.policy": "compact",
            "message.max.bytes": 500,
            "log.message.timestamp.type": "LogAppendTime",
            "log.roll.hours": 2,
        },
    )
    assert config.retention_ms == 3_600_000 and config.segment_bytes == 1 << 20 and config.compacts
    assert config.max_message_bytes == 500 and config.message_timestamp_type == LOG_APPEND_TIME
    assert config.segment_ms == 7_200_000
    # log.retention.ms wins over minutes, minutes over hours; any negative ms means unlimited.
    assert (
        LogConfig.from_topic_config({}, {"log.retention.minutes": 2, "log.retention.hours": 5}).retention_ms
        == 120_000
    )
    assert (
        LogConfig.from_topic_config({}, {"log.retention.ms": -5, "log.retention.minutes": 2}).retention_ms
        == -1
    )
    # flush.ms falls back from log.flush.interval.ms to log.flush.scheduler.interval.ms.
    assert LogConfig.from_topic_config({}, {"log.flush.scheduler.interval.ms": 9}).flush_ms == 9
    # The topic's override wins over the broker's setting.
    assert LogConfig.from_topic_config({"retention.ms": "5"}, {"log.retention.hours": 1}).retention_ms == 5
    assert LogConfig.from_topic_config({}, {"log.retention.hours": None}).retention_ms == 604_800_000


def test_the_legacy_difference_key_stands_in_for_bounds_left_at_their_default() -> None:
    config = LogConfig.from_topic_config(
        {"message.timestamp.difference.max.ms": "9", "message.timestamp.after.max.ms": "3"}
    )
    assert (config.timestamp_before_max_ms, config.timestamp_after_max_ms) == (9, 3)
    assert LogConfig().timestamp_before_max_ms == LONG_MAX


@given(st.sampled_from(TOPIC_CONFIGS), st.text(max_size=12))
def test_any_string_gives_a_value_or_invalid_config(key: TopicConfigKey, raw: str) -> None:
    """Parser invariant: a value, or INVALID_CONFIG; never another exception."""
    try:
        value = parse_topic_value(key.name, raw)
    except InvalidTopicConfig:
        return
    assert parse_topic_value(key.name, format_topic_value(key.name, value)) == value
