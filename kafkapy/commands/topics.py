"""``kafkapy topics``: list topics, or describe their partitions with offsets (kafka-topics.sh).

``--describe`` shows, per partition, what Metadata says (leader, leader epoch,
replicas, in-sync replicas) and what ListOffsets says (the earliest and the
latest offset -- the log start offset and the high watermark), so one command
answers "what is in this topic".  A broker that does not serve ListOffsets
gets ``-`` in those columns and one note on stderr, not a failure: the
metadata half is still worth showing.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kafkapy.client import ClientError
from kafkapy.commands._partitions import EARLIEST, LATEST, PartitionClient, TopicInfo
from kafkapy.commands._security import add_command_config, client_options
from kafkapy.errors import ErrorCode

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "topics", help="list topics, or describe partitions with their offsets (kafka-topics.sh)",
        description="List topics, or describe each partition's leader, replicas, in-sync replicas and "
                    "earliest/latest offsets, through Metadata and ListOffsets.")
    parser.add_argument("--bootstrap-server", "-b", required=True, metavar="HOST:PORT")
    add_command_config(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true")
    action.add_argument("--describe", action="store_true")
    parser.add_argument("--topic", action="append", metavar="NAME", help="only this topic (repeatable)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS")
    parser.set_defaults(func=_run)


def _describe(client: PartitionClient, topics: list[TopicInfo]) -> tuple[list[dict[str, Any]], bool]:
    """Plain rows per topic, and whether the broker served ListOffsets."""
    served = True
    described = []
    for topic in topics:
        partitions = []
        for p in topic.partitions:
            earliest: int | None = None
            latest: int | None = None
            if served and p.error is ErrorCode.NONE:
                try:
                    earliest = client.list_offset(topic.name, p.partition, EARLIEST)
                    latest = client.list_offset(topic.name, p.partition, LATEST)
                except ClientError as exc:
                    if "does not serve" not in str(exc):
                        raise
                    served = False
            partitions.append({"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
                               "replicas": list(p.replicas), "isr": list(p.isr),
                               "error": None if p.error is ErrorCode.NONE else p.error.name,
                               "earliest_offset": earliest, "latest_offset": latest})
        described.append({"topic": topic.name, "partitions": partitions})
    return described, served


def _table(described: list[dict[str, Any]]) -> str:
    headers = ("TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "EARLIEST", "LATEST", "ERROR")

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        return ",".join(map(str, value)) if isinstance(value, list) else str(value)

    rows = [(t["topic"], *(cell(p[k]) for k in ("partition", "leader", "leader_epoch", "replicas", "isr",
                                                 "earliest_offset", "latest_offset", "error")))
            for t in described for p in t["partitions"]]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in (headers, *rows))


def _run(args: argparse.Namespace) -> int:
    prog = "kafkapy topics"
    try:
        with PartitionClient(args.bootstrap_server, args.timeout, security=client_options(args)) as client:
            topics = client.topics(args.topic)
            missing = [t.name for t in topics if t.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
            if missing:
                print(f"{prog}: no topic {', '.join(missing)}", file=sys.stderr)
                return 1
            if args.list:
                names = [t.name for t in topics]
                print(json.dumps({"topics": names}) if args.json else "\n".join(names))
                return 0
            described, served = _describe(client, topics)
    except ClientError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    if not served:
        print(f"{prog}: note: the broker does not serve ListOffsets; offsets shown as -", file=sys.stderr)
    print(json.dumps({"topics": described}, indent=2) if args.json else _table(described))
    return 0
