"""The per-topic settings a partition log obeys, with Kafka's names and defaults.

Kafka resolves a topic config from the topic's override, then the broker's
``log.*`` setting, then the default; whoever owns configs does that and hands
the log a :class:`LogConfig` built with :meth:`LogConfig.from_topic_config`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

__all__ = ["LONG_MAX", "LogConfig"]

LONG_MAX = (1 << 63) - 1  # Java's Long.MAX_VALUE, Kafka's "never" for the flush intervals

_DAY_MS = 24 * 60 * 60 * 1000


def _policy(value: str | Iterable[str]) -> frozenset[str]:
    """cleanup.policy is a list: "delete", "compact" or "compact,delete"."""
    if isinstance(value, str):
        parts = [part.strip() for part in value.split(",") if part.strip()]
    else:
        parts = [str(part) for part in value]
    unknown = set(parts) - {"delete", "compact"}
    if unknown or not parts:
        raise ValueError(f"cleanup.policy must be a list of delete and compact, not {value!r}")
    return frozenset(parts)


_ATTRIBUTE_OF_NAME = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "cleanup.policy": "cleanup_policy",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
}


@attrs.frozen
class LogConfig:
    """Topic-level log settings; each attribute is the Kafka topic config of the same name, dotted."""

    segment_bytes: int = 1 << 30  # segment.bytes: 1 GiB
    segment_ms: int = 7 * _DAY_MS  # segment.ms
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

    @classmethod
    def from_topic_config(cls, config: Mapping[str, object]) -> LogConfig:
        """Build from Kafka's topic config names; names this log does not use are ignored."""
        values: dict[str, object] = {}
        for name, value in config.items():
            attr = _ATTRIBUTE_OF_NAME.get(name)
            if attr is None or value is None:
                continue
            values[attr] = value if attr == "cleanup_policy" else int(str(value))
        return cls(**values)  # type: ignore[arg-type]

    @property
    def deletes(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compacts(self) -> bool:
        return "compact" in self.cleanup_policy
