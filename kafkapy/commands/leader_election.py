"""``kafkapy leader-election``: preferred or unclean leader elections, like
kafka-leader-election.sh.

Exactly one of ``--topic T --partition P``, ``--all-topic-partitions`` or ``--path-to-json-file``
(``{"partitions": [{"topic": "t", "partition": 0}]}``) says which partitions; ElectLeaders goes to
the controller (Metadata names it; v1+ for an unclean election). The tool's lines:
``Successfully completed leader election (PREFERRED) for partitions t-0, t-1``, ``Valid replica
already elected for partitions t-2`` and, per failure, ``Error completing leader election
(PREFERRED) for partition: t-3: PREFERRED_LEADER_NOT_AVAILABLE: ...`` (the error's name and the
broker's message, where Kafka prints its Java exception), then exit status 1. Over all partitions
the controller answers only the partitions whose election did something or failed, so a cluster
with every preferred leader in place prints nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from typing import Any

from kafkapy.client import ClientError
from kafkapy.commands._admin import AdminClient, error_text, partition_name
from kafkapy.commands._numbers import java_int
from kafkapy.commands._partition_files import partition_entries, read_json_file
from kafkapy.commands._security import add_connection_options
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.topics.elections import ElectionType

__all__ = ["election_report", "register"]

PROG = "kafkapy leader-election"
Partition = tuple[str, int]
# The first ElectLeaders version that carries each election type (v0 elects preferred leaders only).
OLDEST_VERSION = {ElectionType.PREFERRED: 0, ElectionType.UNCLEAN: 1}
SELECTORS = ("--topic", "--all-topic-partitions", "--path-to-json-file")


def _election_type(text: str) -> ElectionType:
    try:
        return ElectionType[text.upper()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"{text!r} is not preferred or unclean") from None


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "leader-election", help="elect preferred or unclean leaders, like kafka-leader-election.sh",
        description="Ask the controller (ElectLeaders) for preferred or unclean leader elections of "
                    "one partition, the partitions of a JSON file, or all partitions.")
    add_connection_options(parser)
    parser.add_argument("--admin.config", dest="command_config", metavar="FILE",
                        help="kafka-leader-election.sh's name for --command-config")
    parser.add_argument("--election-type", required=True, type=_election_type, metavar="PREFERRED|UNCLEAN",
                        help="preferred: make each partition's first replica its leader; unclean: elect "
                             "a leader for partitions without one")
    parser.add_argument("--topic", metavar="TOPIC", help="the topic of --partition")
    parser.add_argument("--partition", type=java_int, metavar="P", help="the partition (with --topic)")
    parser.add_argument("--all-topic-partitions", action="store_true", help="every partition")
    parser.add_argument("--path-to-json-file", metavar="FILE",
                        help='the partitions: {"partitions": [{"topic": "foo", "partition": 1}]}')
    parser.set_defaults(func=run, usage_error=parser.error)


def _check_selection(args: argparse.Namespace) -> None:
    """kafka-leader-election.sh's rules, each broken one a usage error."""
    usage_error: Callable[[str], None] = args.usage_error
    chosen = [args.topic is not None, args.all_topic_partitions, args.path_to_json_file is not None]
    if sum(chosen) != 1:
        usage_error(f"One and only one of the following options is required: {', '.join(SELECTORS)}")
    if args.topic is not None and args.partition is None:
        usage_error("Missing required option(s): --partition")
    if args.topic is None and args.partition is not None:
        usage_error("Option --partition is only allowed if --topic is used")


def _partitions(args: argparse.Namespace) -> list[Partition] | None:
    """The partitions asked for; None: all of them."""
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        return [(args.topic, args.partition)]
    document = read_json_file(args.path_to_json_file)
    if document is None:
        raise ClientError("Replica election data is empty")
    entries = partition_entries(document, 'Replica election data is missing "partitions" field')
    asked = [(topic, partition) for topic, partition, _ in entries]
    duplicates = sorted({p for p in asked if asked.count(p) > 1})
    if duplicates:
        raise ClientError("Replica election data contains duplicate partitions: "
                          f"{', '.join(partition_name(*p) for p in duplicates)}")
    return asked


def election_report(kind: ElectionType,
                    results: Mapping[Partition, tuple[int, str | None]]) -> tuple[list[str], int]:
    """kafka-leader-election.sh's lines for {partition: (error code, message)}, and how many failed."""
    done = [p for p, (code, _) in sorted(results.items()) if code == ErrorCode.NONE]
    not_needed = [p for p, (code, _) in sorted(results.items()) if code == ErrorCode.ELECTION_NOT_NEEDED]
    failed = {p: answer for p, answer in sorted(results.items())
              if answer[0] not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)}
    lines = []
    if done:
        lines.append(f"Successfully completed leader election ({kind.name}) for partitions "
                     f"{', '.join(partition_name(*p) for p in done)}")
    if not_needed:
        lines.append("Valid replica already elected for partitions "
                     f"{', '.join(partition_name(*p) for p in not_needed)}")
    for partition, (code, message) in failed.items():
        lines.append(f"Error completing leader election ({kind.name}) for partition: "
                     f"{partition_name(*partition)}: {error_text(code, message)}")
    return lines, len(failed)


def run(args: argparse.Namespace) -> int:
    _check_selection(args)
    kind: ElectionType = args.election_type
    try:
        asked = _partitions(args)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in asked or ():
            by_topic.setdefault(topic, []).append(partition)
        with AdminClient.from_args(args, "kafkapy-leader-election") as client:
            body = client.call(client.controller(), ApiKey.ELECT_LEADERS, {
                "election_type": kind,
                "topic_partitions": None if asked is None else [{"topic": t, "partitions": ps}
                                                                for t, ps in by_topic.items()],
                "timeout_ms": int(args.timeout * 1000)}, OLDEST_VERSION[kind])
    except ClientError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    top = body.get("error_code", ErrorCode.NONE)
    if top == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        print(f"{PROG}: Not authorized to perform leader election", file=sys.stderr)
        return 1
    if top != ErrorCode.NONE:
        print(f"{PROG}: ElectLeaders failed: {error_text(top)}", file=sys.stderr)
        return 1
    results = {(r["topic"], p["partition_id"]): (p["error_code"], p.get("error_message"))
               for r in body["replica_election_results"] for p in r["partition_result"]}
    lines, failed = election_report(kind, results)
    for line in lines:
        print(line)
    if failed:
        print(f"{PROG}: {failed} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0
