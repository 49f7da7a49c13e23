"""Pure pieces of the seed-001 coordinator: subscriptions, the range assignor, partition labels.

``topic_count`` is the old ZooKeeper consumer's JSON: ``{"version": 1, "pattern": "static" |
"white_list" | "black_list", "subscription": {topic-or-regex: streams}}``. A static subscription
names topics; a white list subscribes every topic that one of its regexes matches in full, a black
list every topic none matches (streams per topic: the entry's count, for a black list the first);
neither takes an internal topic.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import attrs

from kafkapy.server.core import INTERNAL_TOPICS
from kafkapy.server.patterns import PatternError, compile_java

__all__ = ["Subscription", "SubscriptionError", "parse_label", "partition_label", "range_assign",
           "thread_ids"]

PATTERNS = ("static", "white_list", "black_list")


class SubscriptionError(ValueError):
    """A topic_count that is not the old consumer's JSON."""


@attrs.frozen
class Subscription:
    pattern: str
    streams: Mapping[str, int]  # topic (static) or regex (white/black list) -> streams

    @classmethod
    def parse(cls, text: str) -> Subscription:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: thousands of nested arrays
            raise SubscriptionError(f"topic_count is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise SubscriptionError("topic_count must be a JSON object")
        pattern = data.get("pattern", "static")
        if pattern not in PATTERNS:
            raise SubscriptionError(f"unknown pattern {pattern!r} (expected one of {', '.join(PATTERNS)})")
        subscription = data.get("subscription")
        if not isinstance(subscription, dict) or not subscription:
            raise SubscriptionError("subscription must be a non-empty object of topic -> streams")
        streams: dict[str, int] = {}
        for name, count in subscription.items():
            if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 1000:
                raise SubscriptionError(f"streams for {name!r} must be an integer from 1 to 1000")
            if pattern != "static":
                try:
                    compile_java(name, fallback=False)
                except PatternError as exc:
                    raise SubscriptionError(f"invalid regex {name!r}: {exc}") from None
            streams[str(name)] = count
        return cls(pattern, streams)

    def to_json(self) -> str:
        return json.dumps({"version": 1, "pattern": self.pattern, "subscription": dict(self.streams)})

    @property
    def wildcard(self) -> bool:
        return self.pattern != "static"

    def topic_streams(self, topics: Iterable[str]) -> dict[str, int]:
        """Which of the existing ``topics`` this subscribes, with the streams for each. A white or
        black list never takes an internal topic (the coordinators' state), as the old consumer's
        exclude.internal.topics (default true) had it; a static subscription may name one."""
        result: dict[str, int] = {}
        for topic in topics:
            if self.pattern == "static":
                if topic in self.streams:
                    result[topic] = self.streams[topic]
            elif topic in INTERNAL_TOPICS:
                continue
            elif self.pattern == "white_list":
                for regex, count in self.streams.items():
                    if compile_java(regex, fallback=False).matches(topic):
                        result[topic] = count
                        break
            elif not any(compile_java(regex, fallback=False).matches(topic) for regex in self.streams):
                result[topic] = next(iter(self.streams.values()))
        return result


def thread_ids(consumer_id: str, streams: int) -> list[str]:
    """The old consumer's thread ids: ``<consumer_id>-0`` ... ``<consumer_id>-<streams-1>``."""
    return [f"{consumer_id}-{n}" for n in range(streams)]


def range_assign(partitions: Iterable[int], threads: Iterable[str]) -> dict[int, str]:
    """The old ZooKeeper consumer's range assignor for one topic: sorted partitions are cut into
    contiguous ranges over the sorted thread ids; the first ``len(partitions) % len(threads)``
    threads get one partition more."""
    parts = sorted(partitions)
    consumers = sorted(threads)
    if not consumers:
        return {}
    per_consumer, extra = divmod(len(parts), len(consumers))
    result: dict[int, str] = {}
    for position, thread in enumerate(consumers):
        start = per_consumer * position + min(position, extra)
        count = per_consumer + (1 if position < extra else 0)
        for partition in parts[start:start + count]:
            result[partition] = thread
    return result


def partition_label(broker_id: int, partition: int) -> str:
    """Seed 001's partition string, which "already contains the broker id": ``<brokerId>-<partition>``."""
    return f"{broker_id}-{partition}"


def parse_label(label: str) -> int:
    """The partition number of a label (``"1-3"`` -> 3); a bare number is accepted too."""
    return int(label.rpartition("-")[2])
