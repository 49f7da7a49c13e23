"""Kafka's topic configs: one table of names, types, defaults, ranges and broker synonyms, and the
:class:`LogConfig` every partition log and append check reads.

Theory of operation
-------------------
A topic config's effective value is, in Kafka's order: the topic's override (stored at
/config/topics/<topic>), then the broker's setting of its synonym (``retention.ms`` <-
``log.retention.ms``, ``log.retention.minutes``, ``log.retention.hours``; the first one set wins and
is converted to the topic's unit), then Kafka's default. :data:`TOPIC_CONFIGS` holds that for every
topic config kafkapy knows, as Kafka's ``LogConfig`` ConfigDef and ``ServerTopicConfigSynonyms``
define it (read at apache/kafka 3.9). :func:`parse_topic_value` checks one value as Kafka's
ConfigDef does and raises :class:`InvalidTopicConfig` (INVALID_CONFIG) with Kafka's message;
:func:`validate_topic_config` checks a whole set of overrides as ``LogConfig.validate`` does.

The constructor of :class:`LogConfig` trusts its caller (tests build tiny segments with it);
:meth:`LogConfig.from_topic_config` is the checked path from Kafka's names and string values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.protocol.records import CREATE_TIME, LOG_APPEND_TIME
from kafkapy.validators import AtLeast, Between, EachOneOf, MinusOneOr, OneOf

__all__ = [
    "BROKER_KEYS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_SEGMENT_BYTES",
    "LONG_MAX",
    "TOPIC_CONFIGS",
    "BrokerKey",
    "InvalidTopicConfig",
    "InvalidTopicValue",
    "LogConfig",
    "TopicConfigKey",
    "broker_synonym_value",
    "format_topic_value",
    "parse_topic_value",
    "validate_topic_config",
]

LONG_MAX = (1 << 63) - 1  # Java's Long.MAX_VALUE, Kafka's "never" for the flush intervals
_INT_MAX = (1 << 31) - 1
_RANGES = {"int": (-(1 << 31), _INT_MAX), "long": (-(1 << 63), LONG_MAX)}
_HOUR_MS = 60 * 60 * 1000
_DAY_MS = 24 * _HOUR_MS
# message.timestamp.type's values, as the record batch attribute bit they set
_TIMESTAMP_TYPES = {"CreateTime": CREATE_TIME, "LogAppendTime": LOG_APPEND_TIME}
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 + 12  # max.message.bytes: 1 MiB plus the 12-byte log overhead
DEFAULT_SEGMENT_BYTES = 1 << 30  # segment.bytes: 1 GiB
_RECORD_OVERHEAD_V0 = 14  # LegacyRecord.RECORD_OVERHEAD_V0: segment.bytes' lower bound
# Kafka's BrokerCompressionType names, and each codec's level range (GzipCompression etc.).
_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


class InvalidTopicConfig(KafkaApiError):
    """A topic config Kafka would refuse: INVALID_CONFIG with Kafka's ConfigException message."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_CONFIG, message)


class InvalidTopicValue(InvalidTopicConfig):
    """A value ConfigDef refuses (Kafka's ConfigException, not LogConfig's own checks): alters
    word it "Invalid config value for resource ..."."""


Check = Callable[[object], "str | None"]

# Kafka's validators of the topic configs and of their broker synonyms (LogConfig's two ConfigDefs)
_POLICIES = EachOneOf(("compact", "delete"))
_COMPRESSION = OneOf(_COMPRESSION_TYPES)
_GZIP_LEVEL = MinusOneOr(1, 9, "Value must be between 1 and 9, or equal to -1")  # GzipCompression's
_LZ4_LEVEL = Between(1, 17)  # Lz4Compression's
_ZSTD_LEVEL = Between(-131072, 22)  # ZstdCompression's
_TIMESTAMP_TYPE = OneOf(tuple(_TIMESTAMP_TYPES))
_RATIO = Between(0, 1)


@attrs.frozen
class BrokerKey:
    """A broker setting that supplies a topic config's default; ``factor`` turns it into the
    topic config's unit (log.retention.hours -> ms)."""

    name: str
    type: str
    default: object
    factor: int = 1
    check: Check | None = None  # Kafka's validator of the broker setting itself (not always the topic's)


@attrs.frozen
class TopicConfigKey:
    """One of Kafka's topic configs (LogConfig's ConfigDef entry and its broker synonyms)."""

    name: str
    type: str  # "int", "long", "double", "boolean", "string", "list": Kafka's ConfigDef.Type
    default: object  # typed
    doc: str
    check: Check | None = None
    synonyms: tuple[BrokerKey, ...] = ()

    @property
    def attribute(self) -> str:
        return self.name.replace(".", "_")


def _key(name: str, kind: str, default: object, doc: str, check: Check | None = None,
         *synonyms: BrokerKey) -> TopicConfigKey:
    return TopicConfigKey(name, kind, default, doc, check, synonyms)


# Kafka's LogConfig.CONFIG (types, defaults, validators) and ServerTopicConfigSynonyms (the broker
# keys, first one set wins). Docs are kafkapy's own one-liners.
TOPIC_CONFIGS: tuple[TopicConfigKey, ...] = (
    _key("cleanup.policy", "list", ("delete",), "delete old segments, compact by key, or both",
         _POLICIES, BrokerKey("log.cleanup.policy", "list", "delete", check=_POLICIES)),
    _key("compression.type", "string", "producer", "codec the broker stores batches with "
         "(kafkapy stores what the producer sent)", _COMPRESSION,
         BrokerKey("compression.type", "string", "producer", check=_COMPRESSION)),
    _key("compression.gzip.level", "int", -1, "gzip level when compression.type is gzip", _GZIP_LEVEL,
         BrokerKey("compression.gzip.level", "int", -1, check=_GZIP_LEVEL)),
    _key("compression.lz4.level", "int", 9, "lz4 level when compression.type is lz4", _LZ4_LEVEL,
         BrokerKey("compression.lz4.level", "int", 9, check=_LZ4_LEVEL)),
    _key("compression.zstd.level", "int", 3, "zstd level when compression.type is zstd",
         _ZSTD_LEVEL, BrokerKey("compression.zstd.level", "int", 3, check=_ZSTD_LEVEL)),
    _key("delete.retention.ms", "long", _DAY_MS, "how long tombstones survive compaction", AtLeast(0),
         BrokerKey("log.cleaner.delete.retention.ms", "long", _DAY_MS, check=AtLeast(0))),
    _key("file.delete.delay.ms", "long", 60_000, "delay before a deleted topic's log directories go",
         AtLeast(0), BrokerKey("log.segment.delete.delay.ms", "long", 60_000, check=AtLeast(0))),
    _key("flush.messages", "long", LONG_MAX, "fsync after this many messages", AtLeast(1),
         BrokerKey("log.flush.interval.messages", "long", LONG_MAX, check=AtLeast(1))),
    _key("flush.ms", "long", LONG_MAX, "fsync after this long", AtLeast(0),
         BrokerKey("log.flush.interval.ms", "long", None),
         BrokerKey("log.flush.scheduler.interval.ms", "long", LONG_MAX)),
    _key("index.interval.bytes", "int", 4096, "bytes between offset-index entries", AtLeast(0),
         BrokerKey("log.index.interval.bytes", "int", 4096, check=AtLeast(0))),
    _key("max.compaction.lag.ms", "long", LONG_MAX, "longest a record stays uncompacted", AtLeast(1),
         BrokerKey("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, check=AtLeast(1))),
    _key("max.message.bytes", "int", DEFAULT_MAX_MESSAGE_BYTES, "largest record batch accepted",
         AtLeast(0), BrokerKey("message.max.bytes", "int", DEFAULT_MAX_MESSAGE_BYTES, check=AtLeast(0))),
    _key("message.timestamp.after.max.ms", "long", LONG_MAX,
         "how far a CreateTime timestamp may lie after the broker's clock", AtLeast(0),
         BrokerKey("log.message.timestamp.after.max.ms", "long", LONG_MAX, check=AtLeast(0))),
    _key("message.timestamp.before.max.ms", "long", LONG_MAX,
         "how far a CreateTime timestamp may lie before the broker's clock", AtLeast(0),
         BrokerKey("log.message.timestamp.before.max.ms", "long", LONG_MAX, check=AtLeast(0))),
    _key("message.timestamp.difference.max.ms", "long", LONG_MAX,
         "deprecated: both bounds at once, where they are left at their default", AtLeast(0),
         BrokerKey("log.message.timestamp.difference.max.ms", "long", LONG_MAX, check=AtLeast(0))),
    _key("message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime",
         _TIMESTAMP_TYPE,
         BrokerKey("log.message.timestamp.type", "string", "CreateTime", check=_TIMESTAMP_TYPE)),
    _key("min.cleanable.dirty.ratio", "double", 0.5, "dirty share of a log that triggers compaction",
         _RATIO, BrokerKey("log.cleaner.min.cleanable.ratio", "double", 0.5, check=_RATIO)),
    _key("min.compaction.lag.ms", "long", 0, "shortest a record stays uncompacted", AtLeast(0),
         BrokerKey("log.cleaner.min.compaction.lag.ms", "long", 0, check=AtLeast(0))),
    _key("min.insync.replicas", "int", 1, "replicas an acks=all write needs", AtLeast(1),
         BrokerKey("min.insync.replicas", "int", 1, check=AtLeast(1))),
    _key("preallocate", "boolean", False, "preallocate segment files", None,
         BrokerKey("log.preallocate", "boolean", False)),
    _key("retention.bytes", "long", -1, "size a partition is cut back to; -1 unlimited", None,
         BrokerKey("log.retention.bytes", "long", -1)),
    _key("retention.ms", "long", 7 * _DAY_MS, "age at which segments are deleted; -1 never",
         AtLeast(-1), BrokerKey("log.retention.ms", "long", None),
         BrokerKey("log.retention.minutes", "int", None, 60_000),
         BrokerKey("log.retention.hours", "int", 168, _HOUR_MS)),
    _key("segment.bytes", "int", DEFAULT_SEGMENT_BYTES, "size at which a segment rolls",
         AtLeast(_RECORD_OVERHEAD_V0),
         BrokerKey("log.segment.bytes", "int", DEFAULT_SEGMENT_BYTES, check=AtLeast(_RECORD_OVERHEAD_V0))),
    _key("segment.index.bytes", "int", 10 * 1024 * 1024, "size of a segment's offset index",
         AtLeast(4), BrokerKey("log.index.size.max.bytes", "int", 10 * 1024 * 1024, check=AtLeast(4))),
    _key("segment.jitter.ms", "long", 0, "random reduction of segment.ms", AtLeast(0),
         BrokerKey("log.roll.jitter.ms", "long", None),
         BrokerKey("log.roll.jitter.hours", "int", 0, _HOUR_MS, AtLeast(0))),
    _key("segment.ms", "long", 7 * _DAY_MS, "age at which a segment rolls", AtLeast(1),
         BrokerKey("log.roll.ms", "long", None),
         BrokerKey("log.roll.hours", "int", 168, _HOUR_MS, AtLeast(1))),
    _key("unclean.leader.election.enable", "boolean", False, "elect an out-of-sync replica as leader",
         None, BrokerKey("unclean.leader.election.enable", "boolean", False)),
)
_BY_NAME = {key.name: key for key in TOPIC_CONFIGS}
# Every broker setting above once, for the module that declares them to the broker's config.
BROKER_KEYS: tuple[tuple[BrokerKey, TopicConfigKey], ...] = tuple(
    (synonym, key) for key in TOPIC_CONFIGS for synonym in key.synonyms
)


def _invalid(name: str, raw: object, problem: str) -> InvalidTopicValue:
    return InvalidTopicValue(f"Invalid value {raw} for configuration {name}: {problem}")


def _typed(name: str, kind: str, raw: object) -> object:
    """ConfigDef.parseType: a string (or an already typed value) as ``kind``."""
    if kind in _RANGES:
        if isinstance(raw, bool):
            raise _invalid(name, raw, f"Not a number of type {kind.upper()}")
        try:
            number = raw if isinstance(raw, int) else int(str(raw).strip())
        except ValueError:
            raise _invalid(name, raw, f"Not a number of type {kind.upper()}") from None
        low, high = _RANGES[kind]
        if not low <= number <= high:
            raise _invalid(name, raw, f"Not a number of type {kind.upper()}")
        return number
    if kind == "double":
        try:
            return float(str(raw).strip())
        except ValueError:
            raise _invalid(name, raw, "Not a number of type DOUBLE") from None
    if kind == "boolean":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise _invalid(name, raw, "Expected value to be either true or false")
        return text == "true"
    if kind == "list":
        return _as_list(raw)
    return str(raw).strip()


def _as_list(raw: object) -> tuple[str, ...]:
    """ConfigDef's LIST: comma-separated, blanks dropped."""
    parts = raw.split(",") if isinstance(raw, str) else [str(p) for p in raw]  # type: ignore[attr-defined]
    return tuple(p.strip() for p in parts if p.strip())


def parse_topic_value(name: str, raw: object) -> object:
    """One topic config's value, typed and checked as Kafka's LogConfig checks it."""
    key = _BY_NAME.get(name)
    if key is None:
        raise InvalidTopicConfig(f"Unknown topic config name: {name}")
    value = _typed(name, key.type, raw)
    problem = key.check(value) if key.check is not None else None
    if problem:
        raise _invalid(name, raw, problem)
    return value


def format_topic_value(name: str, value: object) -> str:
    """A typed value as Kafka prints it (ConfigDef.convertToString)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def validate_topic_config(overrides: Mapping[str, object]) -> None:
    """Kafka's ``LogConfig.validate`` of a topic's overrides: every name known, every value valid,
    and the compaction lags in order."""
    for name, raw in overrides.items():
        parse_topic_value(name, raw)
    LogConfig.from_topic_config(overrides)


def broker_synonym_value(key: TopicConfigKey,
                         settings: Mapping[str, object]) -> tuple[BrokerKey, object] | None:
    """The broker setting that supplies this topic config (the first synonym set in ``settings``)
    and its value converted to the topic config's unit; None when none is set."""
    for synonym in key.synonyms:
        value = settings.get(synonym.name)
        if value is not None:
            value = _typed(synonym.name, synonym.type, value)
            if synonym.factor != 1 and isinstance(value, int):
                value *= synonym.factor
            if key.name == "retention.ms" and isinstance(value, int) and value < 0:
                value = -1  # KafkaConfig.logRetentionTimeMillis: any negative means unlimited
            return synonym, value
    return None


def _policy(value: str | Iterable[str]) -> frozenset[str]:
    """cleanup.policy is a list: "delete", "compact" or "compact,delete"."""
    parts = _as_list(value)
    problem = _POLICIES(parts)
    if problem or not parts:
        raise _invalid("cleanup.policy", value, problem or "must name delete, compact or both")
    return frozenset(parts)


def _timestamp_type(value: object) -> int:
    if isinstance(value, int):
        return value
    parsed = parse_topic_value("message.timestamp.type", value)
    return _TIMESTAMP_TYPES[str(parsed)]


@attrs.frozen
class LogConfig:
    """Every topic config by Kafka's name (dotted -> underscored) with Kafka's default.

    Built with :meth:`from_topic_config` from Kafka's names (checked), or directly (trusted).
    """

    segment_bytes: int = DEFAULT_SEGMENT_BYTES  # segment.bytes
    segment_ms: int = 7 * _DAY_MS  # segment.ms
    segment_jitter_ms: int = 0  # segment.jitter.ms
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes: 10 MiB
    index_interval_bytes: int = 4096  # index.interval.bytes
    flush_messages: int = LONG_MAX  # flush.messages (broker: log.flush.interval.messages)
    flush_ms: int = LONG_MAX  # flush.ms (broker: log.flush.interval.ms)
    cleanup_policy: frozenset[str] = attrs.field(default=frozenset({"delete"}), converter=_policy)
    retention_ms: int = 7 * _DAY_MS  # retention.ms; -1 keeps forever
    retention_bytes: int = -1  # retention.bytes; -1 is unlimited
    delete_retention_ms: int = _DAY_MS  # delete.retention.ms: how long tombstones survive compaction
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX  # max.compaction.lag.ms
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    file_delete_delay_ms: int = 60_000  # file.delete.delay.ms
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES  # max.message.bytes
    # message.timestamp.type, as the batch attribute bit: CREATE_TIME or LOG_APPEND_TIME
    message_timestamp_type: int = attrs.field(default=CREATE_TIME, converter=_timestamp_type)
    message_timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms (KIP-937)
    message_timestamp_after_max_ms: int = LONG_MAX  # message.timestamp.after.max.ms (KIP-937)
    message_timestamp_difference_max_ms: int = LONG_MAX  # deprecated; see timestamp_before_max_ms
    compression_type: str = "producer"  # compression.type
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    min_insync_replicas: int = 1  # min.insync.replicas
    preallocate: bool = False
    unclean_leader_election_enable: bool = False

    @classmethod
    def from_topic_config(cls, config: Mapping[str, object],
                          broker: Mapping[str, object] | None = None) -> LogConfig:
        """Kafka's topic configs (``config``, the topic's overrides) over the broker's ``log.*``
        settings (``broker``), over Kafka's defaults; each value checked. Names that are no topic
        config are ignored here (:func:`validate_topic_config` refuses them)."""
        values: dict[str, object] = {}
        for key in TOPIC_CONFIGS:
            if broker is not None:
                found = broker_synonym_value(key, broker)
                if found is not None:
                    values[key.attribute] = found[1]
            raw = config.get(key.name)
            if raw is not None:
                values[key.attribute] = parse_topic_value(key.name, raw)
        made = cls(**values)  # type: ignore[arg-type]
        if made.min_compaction_lag_ms > made.max_compaction_lag_ms:
            raise InvalidTopicConfig(
                f"conflict topic config setting min.compaction.lag.ms ({made.min_compaction_lag_ms}) > "
                f"max.compaction.lag.ms ({made.max_compaction_lag_ms})")
        return made

    @property
    def deletes(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compacts(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """The age at which a segment rolls (Kafka's LogConfig.maxSegmentMs): a compacted log's
        active segment also rolls by max.compaction.lag.ms, so its records can be cleaned in time."""
        if self.compacts and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def timestamp_before_max_ms(self) -> int:
        """The bound append checks: before.max.ms, or the deprecated difference key where
        before.max.ms is left at its default (Kafka's LogConfig.getMessageTimestampBeforeMaxMs)."""
        if self.message_timestamp_before_max_ms != LONG_MAX:
            return self.message_timestamp_before_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        if self.message_timestamp_after_max_ms != LONG_MAX:
            return self.message_timestamp_after_max_ms
        return self.message_timestamp_difference_max_ms

    def value_of(self, name: str) -> object:
        """A topic config's typed value by Kafka's name."""
        value = getattr(self, _BY_NAME[name].attribute)
        if name == "message.timestamp.type":
            return "LogAppendTime" if value == LOG_APPEND_TIME else "CreateTime"
        if name == "cleanup.policy":
            return tuple(p for p in ("compact", "delete") if p in value)
        return value
