"""``kafkapy get-offsets``: partitions' offsets at a time, like kafka-get-offsets.sh
(Kafka's GetOffsetShell).

Which partitions: ``--topic REGEX`` (the whole name must match; commas separate alternatives, as
Kafka's topic filter reads them) with ``--partitions 0,1``, or ``--topic-partitions`` rules
``REGEX[:PARTITIONS]`` separated by commas, PARTITIONS being ``N``, ``N-M`` (M excluded), ``N-``
or ``-M``; neither: every topic. Internal topics count unless ``--exclude-internal-topics``.
``--time``: ``latest`` (-1, the default), ``earliest`` (-2), ``max-timestamp`` (-3, ListOffsets
v7+), ``earliest-local`` (-4, v8+), ``latest-tiered`` (-5, v9+) or a timestamp in ms (the first
offset at or after it). Output: ``topic:partition:offset`` lines in the order of the partitions'
names (Kafka's, so ``t-10`` comes before ``t-2``); a partition without such an offset is left out.
A partition that fails is one "Skip getting offsets" line on stderr, as in Kafka, and (unlike
Kafka, which exits 0) makes the exit status 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from kafkapy.client import ClientError
from kafkapy.commands._admin import AdminClient, partition_name
from kafkapy.commands._security import add_connection_options
from kafkapy.errors import ErrorCode
from kafkapy.log.base import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_OFFSET,
)
from kafkapy.server.patterns import PatternError, Regex, compile_java

__all__ = ["TopicPartitionRule", "parse_rules", "parse_time", "register"]

PROG = "kafkapy get-offsets"

TIME_NAMES = {"latest": LATEST_TIMESTAMP, "earliest": EARLIEST_TIMESTAMP, "max-timestamp": MAX_TIMESTAMP,
              "earliest-local": EARLIEST_LOCAL_TIMESTAMP, "latest-tiered": LATEST_TIERED_TIMESTAMP}
# The first ListOffsets version that knows each special timestamp (KIP-734, KIP-405, KIP-1005).
OLDEST_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL_TIMESTAMP: 8, LATEST_TIERED_TIMESTAMP: 9}
PLAIN_VERSION = 1  # ListOffsets v1: one offset per partition

# Kafka's GetOffsetShell rule: a topic regex, then ":" and a partition, a range or nothing.
_RULE = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
_NO_UPPER = 2**31 - 1  # Integer.MAX_VALUE: a range without an upper bound


@dataclasses.dataclass(frozen=True)
class TopicPartitionRule:
    """Topics whose whole name matches ``topic``, and partitions in [low, high) or ``only``."""

    topic: Regex
    low: int = 0
    high: int = _NO_UPPER
    only: frozenset[int] | None = None

    def allows_topic(self, name: str) -> bool:
        return self.topic.matches(name)

    def allows(self, name: str, partition: int) -> bool:
        if not self.allows_topic(name):
            return False
        if self.only is not None:
            return not self.only or partition in self.only
        return self.low <= partition < self.high


def topic_regex(raw: str) -> Regex:
    """Kafka's topic filter: blanks dropped, commas are alternatives, quotes around it ignored
    (property files bring them)."""
    text = raw.strip().replace(",", "|").replace(" ", "")
    text = re.sub(r"""["']+$""", "", re.sub(r"""^["']+""", "", text))
    try:
        return compile_java(text, fallback=True)
    except PatternError:
        raise argparse.ArgumentTypeError(f"{text} is an invalid regex.") from None


def parse_rules(text: str) -> list[TopicPartitionRule]:
    """``--topic-partitions``: the rules, separated by commas; ArgumentTypeError naming a bad one."""
    rules = []
    for spec in text.split(","):
        match = _RULE.fullmatch(spec)
        if match is None:
            raise argparse.ArgumentTypeError(f"Invalid rule specification: {spec}")
        topic, single, low, high = (group or None for group in match.groups())
        pattern = topic_regex(topic or ".*")
        if single is not None:
            rules.append(TopicPartitionRule(pattern, only=frozenset({int(single)})))
        else:
            rules.append(TopicPartitionRule(pattern, int(low or 0), int(high) if high else _NO_UPPER))
    return rules


def parse_time(text: str) -> int:
    """``--time``: a name, or a timestamp in ms (-1 to -5 are the names' numbers)."""
    if text in TIME_NAMES:
        return TIME_NAMES[text]
    if re.fullmatch(r"[+-]?[0-9]+", text) is None or not -2**63 <= int(text) < 2**63:
        raise argparse.ArgumentTypeError(
            f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or max-timestamp "
            "/ -4 or earliest-local / -5 or latest-tiered, or a specified long format timestamp")
    return int(text)


def _partition_ids(text: str) -> frozenset[int]:
    try:
        return frozenset(int(part) for part in text.split(",")) if text else frozenset()
    except ValueError:
        raise argparse.ArgumentTypeError("--partitions expects a comma separated list of numeric partition "
                                         f"ids, but received: {text}") from None


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "get-offsets", help="partitions' offsets at a time, like kafka-get-offsets.sh",
        description="Print topic:partition:offset for the matching partitions, from ListOffsets at "
                    "each partition's leader.")
    add_connection_options(parser)
    parser.add_argument("--topic-partitions", metavar="RULES", type=parse_rules,
                        help="topic-partition rules, e.g. topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3 "
                             "(topic regexes; N-M excludes M)")
    parser.add_argument("--topic", metavar="REGEX", type=topic_regex,
                        help="the topics (a regular expression); default all")
    parser.add_argument("--partitions", metavar="IDS", type=_partition_ids,
                        help="comma-separated partition ids; default all")
    parser.add_argument("--time", type=parse_time, default=LATEST_TIMESTAMP, metavar="TIME",
                        help="latest (-1, default), earliest (-2), max-timestamp (-3), earliest-local (-4), "
                             "latest-tiered (-5) or a timestamp in ms")
    parser.add_argument("--exclude-internal-topics", action="store_true",
                        help="leave out internal topics (__consumer_offsets, __transaction_state)")
    parser.set_defaults(func=run, usage_error=parser.error)


def run(args: argparse.Namespace) -> int:
    if args.topic_partitions is not None and (args.topic is not None or args.partitions is not None):
        usage_error: Callable[[str], None] = args.usage_error
        usage_error("--topic-partitions cannot be used with --topic or --partitions")
    rules: Sequence[TopicPartitionRule] = args.topic_partitions or [
        TopicPartitionRule(args.topic or topic_regex(".*"), only=args.partitions or frozenset())]
    failed = 0
    found: dict[str, str] = {}
    try:
        with AdminClient.from_args(args, "kafkapy-get-offsets") as client:
            topics = [t for t in client.topics() if t.error is ErrorCode.NONE
                      and not (t.internal and args.exclude_internal_topics)
                      and any(rule.allows_topic(t.name) for rule in rules)]
            chosen = [(t.name, p.partition) for t in topics for p in t.partitions
                      if any(rule.allows(t.name, p.partition) for rule in rules)]
            if not chosen:
                raise ClientError("Could not match any topic-partitions with the specified filters")
            oldest = OLDEST_VERSION.get(args.time, PLAIN_VERSION)
            for topic, partition in chosen:
                name = partition_name(topic, partition)
                try:
                    offset = client.offset_at(topic, partition, args.time, oldest)
                except ClientError as exc:
                    failed += 1
                    print(f"Skip getting offsets for topic-partition {name} due to error: {exc}",
                          file=sys.stderr)
                    continue
                if offset != NO_OFFSET:
                    found[name] = f"{topic}:{partition}:{offset}"
    except ClientError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    for name in sorted(found):
        print(found[name])
    return 1 if failed else 0
