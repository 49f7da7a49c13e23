"""``kafkapy topics``: create, delete, alter, list and describe topics, as kafka-topics.sh does.

The flags, their checks and the success line are kafka-topics.sh's (Kafka's TopicCommand), so a
script that sets topics up against Kafka runs unchanged against kafkapy; output of ``--describe``
stays kafkapy's own table (or ``--json``).

``--topic`` is a regular expression for everything but ``--create`` (Kafka's TopicFilter: commas
are alternatives, spaces and surrounding quotes are dropped, the whole name must match), matched
against the topics Metadata lists; internal topics match too unless ``--exclude-internal``, as in
Kafka.  A pattern that matches nothing is an error unless ``--if-exists``.

``--describe`` shows, per partition, what Metadata says (leader, leader epoch,
replicas, in-sync replicas) and what ListOffsets says (the earliest and the
latest offset -- the log start offset and the high watermark), so one command
answers "what is in this topic"; then per topic its partition count, replication
factor and config overrides (DescribeConfigs: every entry whose source is not
the default, as Kafka's describe prints them).  A broker that does not serve
ListOffsets or DescribeConfigs gets ``-`` in those columns and one note on
stderr, not a failure: the metadata half is still worth showing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafkapy.client import ClientError
from kafkapy.commands._numbers import java_int
from kafkapy.commands._partitions import EARLIEST, LATEST, PartitionClient, PartitionInfo, TopicInfo
from kafkapy.commands._security import add_command_config, client_options
from kafkapy.commands._topic_admin import NO_DEFAULT, NewTopic, Outcome, TopicAdminClient, TopicConfig
from kafkapy.configs.module import DEFAULT_CONFIG
from kafkapy.errors import ErrorCode
from kafkapy.server.core import INTERNAL_TOPICS
from kafkapy.server.patterns import PatternError, Regex, compile_java

__all__ = ["parse_configs", "parse_replica_assignment", "topic_pattern"]

_PROG = "kafkapy topics"
_MAX_REPLICATION_FACTOR = 32767  # Kafka's Short.MAX_VALUE: CreateTopics carries it as an int16
_MIN_ISR = "min.insync.replicas"
_BROKER_ID = re.compile(r"[+-]?[0-9]+")  # what Java's Integer.parseInt reads (no '_' as Python's int)
_NOT_SERVED = "does not serve"  # PartitionClient's words for an API the broker lacks

# The partition filters of --describe (Kafka's TopicCommand.PartitionDescription): a partition is
# shown when any chosen filter holds. Arguments: the partition, the live broker ids, the topic's
# min.insync.replicas.
_PARTITION_FILTERS: Mapping[str, Callable[[PartitionInfo, frozenset[int], int], bool]] = {
    "under_replicated_partitions": lambda p, live, min_isr: len(p.replicas) > len(p.isr),
    "unavailable_partitions": lambda p, live, min_isr: p.leader < 0 or p.leader not in live,
    "under_min_isr_partitions": lambda p, live, min_isr: p.leader < 0 or len(p.isr) < min_isr,
    "at_min_isr_partitions": lambda p, live, min_isr: len(p.isr) == min_isr,
}
_NEEDS_MIN_ISR = frozenset({"under_min_isr_partitions", "at_min_isr_partitions"})

# The actions each option goes with (Kafka's TopicCommandOptions.checkInvalidArgs); --config
# with --alter is refused there too: topic configs are kafka-configs.sh's (kafkapy configs).
_ACTIONS_OF: Mapping[str, frozenset[str]] = {
    "config": frozenset({"create"}),
    "partitions": frozenset({"create", "alter"}),
    "replication_factor": frozenset({"create"}),
    "replica_assignment": frozenset({"create", "alter"}),
    "if_exists": frozenset({"alter", "delete", "describe"}),
    "if_not_exists": frozenset({"create"}),
    "exclude_internal": frozenset({"list", "describe"}),
    "topics_with_overrides": frozenset({"describe"}),
    "json": frozenset({"list", "describe"}),
    **{name: frozenset({"describe"}) for name in _PARTITION_FILTERS},
}
_ACTIONS = ("list", "describe", "create", "delete", "alter")


class _Usage(Exception):
    """A command line kafka-topics.sh refuses before sending anything."""


@dataclasses.dataclass(frozen=True)
class _Command:
    """The command line once checked: the action and the values parsed from text."""

    action: str
    assignment: list[list[int]] | None  # --replica-assignment
    configs: dict[str, str]  # --config


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "topics", help="create, delete, alter, list or describe topics (kafka-topics.sh)",
        description="Create, delete, alter (add partitions), list or describe topics through CreateTopics, "
                    "DeleteTopics, CreatePartitions, Metadata, ListOffsets and DescribeConfigs, with "
                    "kafka-topics.sh's flags. --topic is a regular expression except with --create.")
    parser.add_argument("--bootstrap-server", "-b", required=True, metavar="HOST:PORT")
    add_command_config(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the topics")
    action.add_argument("--describe", action="store_true", help="partitions, offsets and config overrides")
    action.add_argument("--create", action="store_true", help="create a topic")
    action.add_argument("--delete", action="store_true", help="delete topics")
    action.add_argument("--alter", action="store_true", help="add partitions to topics")
    parser.add_argument("--topic", action="append", metavar="NAME",
                        help="the topic, a regular expression except with --create (repeatable)")
    parser.add_argument("--partitions", type=java_int, metavar="N",
                        help="partitions of the topic created (the broker's num.partitions without it), "
                             "or to grow it to with --alter")
    parser.add_argument("--replication-factor", type=java_int, metavar="R",
                        help="replicas per partition of the topic created (the broker's "
                             "default.replication.factor without it)")
    parser.add_argument("--replica-assignment", metavar="B1:B2,B1:B2,...",
                        help="broker ids per partition (comma between partitions, colon between replicas); "
                             "with --alter the list covers every partition, old ones included")
    parser.add_argument("--config", action="append", metavar="NAME=VALUE",
                        help="a config override of the topic created (repeatable)")
    parser.add_argument("--if-exists", action="store_true",
                        help="with --alter, --delete or --describe: no error when no topic matches")
    parser.add_argument("--if-not-exists", action="store_true",
                        help="with --create: no error when the topic exists")
    parser.add_argument("--exclude-internal", action="store_true",
                        help="with --list or --describe: leave internal topics out")
    parser.add_argument("--under-replicated-partitions", action="store_true",
                        help="describe only partitions with fewer in-sync replicas than replicas")
    parser.add_argument("--unavailable-partitions", action="store_true",
                        help="describe only partitions without a live leader")
    parser.add_argument("--under-min-isr-partitions", action="store_true",
                        help="describe only partitions with fewer in-sync replicas than min.insync.replicas")
    parser.add_argument("--at-min-isr-partitions", action="store_true",
                        help="describe only partitions with exactly min.insync.replicas in-sync replicas")
    parser.add_argument("--topics-with-overrides", action="store_true",
                        help="describe only topics with config overrides, without their partitions")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="how long to wait for a broker, the controller and the change (default 10)")
    parser.set_defaults(func=_run)


# --- the command line: Kafka's checks before anything is sent ----------------------------------

def topic_pattern(text: str) -> Regex:
    """``--topic`` as Kafka's TopicFilter reads it: commas are alternatives, spaces and leading or
    trailing quotes go (a properties file may bring them); the pattern must match a whole name."""
    regex = text.strip().replace(",", "|").replace(" ", "").lstrip("\"'").rstrip("\"'")
    try:
        return compile_java(regex, fallback=True)
    except PatternError:
        raise _Usage(f"{regex} is an invalid regex.") from None


def parse_configs(items: Sequence[str]) -> dict[str, str]:
    """``--config`` entries as Kafka splits them: on '=' with the spaces around it, into exactly a
    name and a non-empty value."""
    configs: dict[str, str] = {}
    for item in items:
        parts = re.split(r"\s*=\s*", item)
        while len(parts) > 1 and parts[-1] == "":  # Java's split drops trailing empty strings
            parts.pop()
        if len(parts) != 2 or not parts[0].strip():
            raise _Usage(f"invalid topic config {item!r}: configs must be in the format \"key=val\"")
        configs[parts[0].strip()] = parts[1].strip()
    return configs


def parse_replica_assignment(text: str) -> list[list[int]]:
    """``--replica-assignment``: partitions split by ',', their broker ids by ':'; no broker twice
    in a partition and every partition with partition 0's replication factor (Kafka's checks)."""
    assignment: list[list[int]] = []
    for index, partition in enumerate(text.split(",")):
        ids = [b.strip() for b in partition.split(":")]
        if not all(_BROKER_ID.fullmatch(b) for b in ids):
            raise _Usage(f"--replica-assignment: partition {index} is {partition.strip()!r}, "
                         "not broker ids separated by ':'")
        brokers = [int(b) for b in ids]
        twice = sorted({b for b in brokers if brokers.count(b) > 1})
        if twice:
            raise _Usage(f"--replica-assignment: partition {index} lists broker(s) "
                         f"{','.join(map(str, twice))} more than once")
        if assignment and len(brokers) != len(assignment[0]):
            raise _Usage(f"--replica-assignment: partition {index} has replication factor {len(brokers)} "
                         f"({':'.join(map(str, brokers))}), partition 0 has {len(assignment[0])}")
        assignment.append(brokers)
    return assignment


def _check_args(args: argparse.Namespace) -> _Command:
    """The command, once the options fit its action as kafka-topics.sh requires (_Usage if not)."""
    action = next(a for a in _ACTIONS if getattr(args, a))
    for option, actions in _ACTIONS_OF.items():
        given = getattr(args, option)
        if given not in (None, False) and action not in actions:
            flag = "--" + option.replace("_", "-")
            allowed = " or ".join(f"--{a}" for a in _ACTIONS if a in actions)
            raise _Usage(f"{flag} goes with {allowed}, not --{action}" + (
                "; change topic configs with kafkapy configs" if option == "config" else ""))
    if action in ("create", "delete", "alter") and not args.topic:
        raise _Usage(f"--{action} needs --topic")
    if action == "describe" and args.if_exists and not args.topic:
        raise _Usage("--describe --if-exists needs --topic")
    if action == "create":
        if len(args.topic) > 1:
            raise _Usage("--create takes one --topic")
        if args.replica_assignment is not None and (args.partitions is not None
                                                    or args.replication_factor is not None):
            raise _Usage("--replica-assignment goes without --partitions and --replication-factor")
        factor = args.replication_factor
        if factor is not None and not 1 <= factor <= _MAX_REPLICATION_FACTOR:
            raise _Usage(f"the replication factor must be between 1 and {_MAX_REPLICATION_FACTOR} inclusive")
        if args.partitions is not None and args.partitions < 1:
            raise _Usage("the partitions must be greater than 0")
    if action == "alter" and args.partitions is None:
        raise _Usage("--alter needs --partitions")
    if args.topics_with_overrides and any(getattr(args, f) for f in _PARTITION_FILTERS):
        raise _Usage("--topics-with-overrides goes without the partition filters")
    if action != "create":
        for text in args.topic or ():
            topic_pattern(text)  # a bad pattern is refused before anything is sent
    text = args.replica_assignment
    assignment = parse_replica_assignment(text) if text else None  # Kafka: "" is no assignment
    return _Command(action, assignment, parse_configs(args.config or []))


# --- choosing topics ----------------------------------------------------------------------------

def _select(topics: Sequence[TopicInfo], args: argparse.Namespace) -> tuple[list[TopicInfo], list[str]]:
    """The listed topics ``--topic`` matches (all without it), and the patterns that matched none."""
    kept = [t for t in topics if not (args.exclude_internal and t.name in INTERNAL_TOPICS)]
    if not args.topic:
        return kept, []
    patterns = [(text, topic_pattern(text)) for text in args.topic]
    chosen = [t for t in kept if any(p.matches(t.name) for _, p in patterns)]
    unmatched = [text for text, p in patterns if not any(p.matches(t.name) for t in kept)]
    return chosen, unmatched


def _print_failures(outcomes: Sequence[Outcome]) -> int:
    """Each refused topic as one line (Kafka's error name and the broker's message); the exit code."""
    failed = [o for o in outcomes if o.error is not ErrorCode.NONE]
    for o in failed:
        print(f"{_PROG}: error {o.error.name} (topic {o.topic})" + (f": {o.message}" if o.message else ""),
              file=sys.stderr)
    return 1 if failed else 0


# --- the actions --------------------------------------------------------------------------------

def _create(client: TopicAdminClient, args: argparse.Namespace, command: _Command) -> int:
    (name,) = args.topic
    topic = NewTopic(name, NO_DEFAULT if args.partitions is None else args.partitions,
                     NO_DEFAULT if args.replication_factor is None else args.replication_factor,
                     command.assignment or [], command.configs)
    if "." in name or "_" in name:
        print("WARNING: metric names turn '.' and '_' into the same character, so topics whose names "
              "differ only there collide; use one of the two, not both.")
    outcome = client.create_topic(topic)
    if outcome.error is ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return 0
    if outcome.error is not ErrorCode.NONE:
        return _print_failures([outcome])
    print(f"Created topic {name}.")
    return 0


def _matching(client: TopicAdminClient, args: argparse.Namespace) -> list[TopicInfo] | None:
    """The topics ``--topic`` names; None (after one line on stderr) when a pattern matched none
    and ``--if-exists`` was not given."""
    chosen, unmatched = _select(client.topics(None), args)
    if unmatched and not args.if_exists:
        # Kafka's TopicCommand words it so (ensureTopicExists), one sentence per --topic given.
        print(f"{_PROG}: " + "; ".join(f"Topic '{text}' does not exist as expected" for text in unmatched),
              file=sys.stderr)
        return None
    return chosen


def _delete(client: TopicAdminClient, args: argparse.Namespace) -> int:
    chosen = _matching(client, args)
    if chosen is None:
        return 1
    return _print_failures(client.delete_topics([t.name for t in chosen])) if chosen else 0


def _alter(client: TopicAdminClient, args: argparse.Namespace, command: _Command) -> int:
    chosen = _matching(client, args)
    if chosen is None:
        return 1
    if not chosen:
        return 0
    # As Kafka: the assignment covers every partition; a topic's new ones take the entries past
    # the partitions it has.
    assignment = command.assignment
    new = {} if assignment is None else {t.name: assignment[len(t.partitions):] for t in chosen}
    return _print_failures(client.create_partitions({t.name: args.partitions for t in chosen}, new))


def _configs_or_none(client: TopicAdminClient, names: Sequence[str],
                     required: bool) -> dict[str, list[TopicConfig]] | None:
    """The topics' configs; None when the broker does not serve DescribeConfigs and they are
    only shown (a filter that needs them fails instead)."""
    try:
        return client.topic_configs(names)
    except ClientError as exc:
        if required or _NOT_SERVED not in str(exc):
            raise
        return None


def _describe(client: TopicAdminClient, args: argparse.Namespace,
              chosen: Sequence[TopicInfo]) -> tuple[list[dict[str, Any]], set[str]]:
    """Plain rows per chosen topic as the filters leave them, and the notes for stderr."""
    notes: set[str] = set()
    filters = [f for f in _PARTITION_FILTERS if getattr(args, f)]
    needs_configs = args.topics_with_overrides or bool(_NEEDS_MIN_ISR.intersection(filters))
    configs = _configs_or_none(client, [t.name for t in chosen], needs_configs)
    if configs is None:
        notes.add("the broker does not serve DescribeConfigs; configs shown as -")
    described = []
    for topic in chosen:
        entries = None if configs is None else configs.get(topic.name, [])
        overrides = None if entries is None else {c.name: c.value for c in entries
                                                  if c.source != DEFAULT_CONFIG}
        if args.topics_with_overrides and not overrides:
            continue
        min_isr = _min_isr(entries)
        live = client.live_brokers
        shown = [p for p in topic.partitions
                 if not filters or any(_PARTITION_FILTERS[f](p, live, min_isr) for f in filters)]
        if filters and not shown:
            continue
        partitions = [_partition_row(client, topic.name, p, notes) for p in shown]
        described.append({"topic": topic.name, "partitions": partitions,
                          "partition_count": len(topic.partitions),
                          "replication_factor": len(topic.partitions[0].replicas) if topic.partitions else 0,
                          "configs": overrides})
    return described, notes


def _min_isr(entries: Sequence[TopicConfig] | None) -> int:
    for entry in entries or ():
        if entry.name == _MIN_ISR and entry.value is not None:
            return int(entry.value)
    return 1  # Kafka's default min.insync.replicas


def _partition_row(client: PartitionClient, topic: str, p: PartitionInfo, notes: set[str]) -> dict[str, Any]:
    earliest: int | None = None
    latest: int | None = None
    note = "the broker does not serve ListOffsets; offsets shown as -"
    if note not in notes and p.error is ErrorCode.NONE:
        try:
            earliest = client.list_offset(topic, p.partition, EARLIEST)
            latest = client.list_offset(topic, p.partition, LATEST)
        except ClientError as exc:
            if _NOT_SERVED not in str(exc):
                raise
            notes.add(note)
    return {"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
            "replicas": list(p.replicas), "isr": list(p.isr),
            "error": None if p.error is ErrorCode.NONE else p.error.name,
            "earliest_offset": earliest, "latest_offset": latest}


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "-"
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in (headers, *rows))


def _partition_table(described: Sequence[Mapping[str, Any]]) -> str:
    headers = ("TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "EARLIEST", "LATEST", "ERROR")
    keys = ("partition", "leader", "leader_epoch", "replicas", "isr", "earliest_offset", "latest_offset",
            "error")
    return _table(headers, [(t["topic"], *(_cell(p[k]) for k in keys))
                            for t in described for p in t["partitions"]])


def _topic_table(described: Sequence[Mapping[str, Any]]) -> str:
    headers = ("TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "CONFIGS")
    return _table(headers, [(t["topic"], str(t["partition_count"]), str(t["replication_factor"]),
                             _cell(t["configs"])) for t in described])


def _print_described(described: list[dict[str, Any]], args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps({"topics": described}, indent=2))
        return
    filtered = any(getattr(args, f) for f in _PARTITION_FILTERS)
    if filtered or args.topics_with_overrides:
        if not described:
            return  # as Kafka: nothing to report prints nothing (scripts count the lines)
        # Kafka's describe prints only partitions for the partition filters, only topics for overrides.
        print(_topic_table(described) if args.topics_with_overrides else _partition_table(described))
        return
    print(_partition_table(described))
    if described:
        print()
        print(_topic_table(described))


def _run(args: argparse.Namespace) -> int:
    try:
        command = _check_args(args)
        with TopicAdminClient(args.bootstrap_server, args.timeout, security=client_options(args)) as client:
            if command.action == "create":
                return _create(client, args, command)
            if command.action == "delete":
                return _delete(client, args)
            if command.action == "alter":
                return _alter(client, args, command)
            if command.action == "list":
                names = [t.name for t in _select(client.topics(None), args)[0]]
                print(json.dumps({"topics": names}) if args.json else "\n".join(names))
                return 0
            chosen = _matching(client, args)
            if chosen is None:
                return 1
            described, notes = _describe(client, args, chosen)
    except _Usage as exc:
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return 2
    except ClientError as exc:
        print(f"{_PROG}: {exc}", file=sys.stderr)
        return 1
    for note in sorted(notes):
        print(f"{_PROG}: note: {note}", file=sys.stderr)
    _print_described(described, args)
    return 0
