"""Kafka's DynamicLogConfig: the broker settings that give topic configs their defaults
(``log.retention.ms``, ``log.segment.bytes``, ``message.max.bytes``, ...) changed at run time.

Theory of operation. The dynamic keys are Kafka's ``DynamicLogConfig.ReconfigurableConfigs``: for
each topic config, the first of its broker synonyms (ServerTopicConfigSynonyms), so
``log.retention.ms`` but not the unit synonyms ``log.retention.minutes``/``hours``, ``log.roll.ms``
but not ``log.roll.hours``, ``log.flush.interval.ms`` but not ``log.flush.scheduler.interval.ms``;
and ``log.local.retention.ms``/``bytes`` (tiered storage, which kafkapy has not: accepted, checked
against the retention settings as Kafka checks them, stored, without other effect).

An alter's would-be settings are checked as Kafka checks them: each value typed as its broker
config and held to the topic config's own bounds (in the topic config's unit, so a negative
``log.retention.ms`` is "unlimited", as Kafka reads it), Kafka's validateReconfiguration rules of
local against total retention, and the LogConfig they make as a whole (min.compaction.lag.ms
not past max.compaction.lag.ms). Applying is the topic configs' (configs/topics.py): each topic's
LogConfig is the broker settings with the topic's overrides on top, so every log whose config
the change moves is told at once, and a topic's own override still wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkapy.log.topic_config import (
    TOPIC_CONFIGS,
    InvalidTopicConfig,
    LogConfig,
    broker_synonym_value,
)
from kafkapy.server.config import ConfigError, ConfigKey
from kafkapy.validators import AtLeast

__all__ = ["DYNAMIC_LOG_KEYS", "LOCAL_RETENTION_KEYS", "validate_log_settings"]

LOCAL_RETENTION_MS, LOCAL_RETENTION_BYTES = "log.local.retention.ms", "log.local.retention.bytes"
_NOT_SET = -2  # Kafka's default of both: "the same as log.retention.*"


# Kafka's RemoteLogManagerConfig keys; declared by the topics module with the other log.* keys.
LOCAL_RETENTION_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(LOCAL_RETENTION_MS, "long", _NOT_SET,
              "Tiered storage's local retention time (kafkapy has no tiered storage: checked against "
              "log.retention.ms as Kafka checks it, no other effect).", AtLeast(_NOT_SET)),
    ConfigKey(LOCAL_RETENTION_BYTES, "long", _NOT_SET,
              "Tiered storage's local retention size (kafkapy has no tiered storage: checked against "
              "log.retention.bytes as Kafka checks it, no other effect).", AtLeast(_NOT_SET)),
)

# Kafka's DynamicLogConfig.ReconfigurableConfigs (message.format.version, the one it leaves out,
# is no kafkapy topic config; nor is message.downconversion.enable, gone in Kafka 4).
_FIRST_SYNONYMS = {key.synonyms[0].name: key for key in TOPIC_CONFIGS if key.synonyms}
DYNAMIC_LOG_KEYS: frozenset[str] = frozenset(_FIRST_SYNONYMS) | {LOCAL_RETENTION_MS, LOCAL_RETENTION_BYTES}
_RETENTION_MS = next(key for key in TOPIC_CONFIGS if key.name == "retention.ms")


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def validate_log_settings(settings: Mapping[str, Any]) -> None:
    """Refuse (ConfigError, Kafka's message) the effective broker settings an alter would make."""
    for name, key in _FIRST_SYNONYMS.items():
        raw = settings.get(name)
        if raw is None:
            continue
        try:
            found = broker_synonym_value(key, {name: raw})
        except InvalidTopicConfig as exc:
            raise ConfigError(exc.message) from None
        problem = key.check(found[1]) if found is not None and key.check is not None else None
        if not problem and found is not None and key.name == "cleanup.policy" and not found[1]:
            problem = "must name delete, compact or both"  # as LogConfig refuses an empty policy
        if problem:
            raise ConfigError(f"Invalid value {_shown(raw)} for configuration {name}: {problem}")
    _check_local_retention(settings)
    try:
        LogConfig.from_topic_config({}, settings)
    except InvalidTopicConfig as exc:
        raise ConfigError(exc.message) from None


def _check_local_retention(settings: Mapping[str, Any]) -> None:
    """Kafka's DynamicLogConfig.validateReconfiguration: a local retention set (not -2) must not be
    -1 ("unlimited") nor more than the total retention, unless that is unlimited."""
    found = broker_synonym_value(_RETENTION_MS, settings)  # KafkaConfig.logRetentionTimeMillis
    retention_ms = found[1] if found is not None else _RETENTION_MS.default
    retention_bytes = _long(settings, "log.retention.bytes", -1)
    for local_name, total_name, total, unlimited in (
        (LOCAL_RETENTION_MS, "log.retention.ms", retention_ms, retention_ms == -1),
        (LOCAL_RETENTION_BYTES, "log.retention.bytes", retention_bytes, retention_bytes <= -1),
    ):
        local = _long(settings, local_name, _NOT_SET)
        if unlimited or local == _NOT_SET:
            continue
        if local == -1:
            raise ConfigError(f"Invalid value -1 for configuration {local_name}: Value must not be -1 as "
                              f"{total_name} value is set as {total}.")
        if local > total:  # type: ignore[operator]
            raise ConfigError(f"Invalid value {local} for configuration {local_name}: Value must not be "
                              f"more than {total_name} property value: {total}")


def _long(settings: Mapping[str, Any], name: str, default: int) -> int:
    """A LONG setting (typed already when its key is declared); ConfigError when it is no number."""
    raw = settings.get(name)
    if raw is None:
        return default
    try:
        if isinstance(raw, bool):
            raise ValueError(raw)
        return int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"Invalid value {raw} for configuration {name}: "
                          "Not a number of type LONG") from None
