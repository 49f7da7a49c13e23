"""``kafkapy log-dirs --describe``: each broker's log directories and the partitions in them,
like kafka-log-dirs.sh.

It asks Metadata for the brokers (``--broker-list`` picks some, and naming one the cluster does
not have is the tool's error), sends DescribeLogDirs to each and prints the tool's two lines and
its JSON: ``{"version":1,"brokers":[{"broker":0,"logDirs":[{"logDir":"/var/kafka","error":null,
"partitions":[{"partition":"t-0","size":N,"offsetLag":0,"isFuture":false}]}]}]}``, the partitions
of ``--topic-list`` only if given. A log dir's error is the Kafka error's name where Kafka's tool
prints its Java exception class.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from kafkapy.client import ClientError
from kafkapy.commands._admin import AdminClient, error_text, partition_name
from kafkapy.commands._security import add_connection_options
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

__all__ = ["log_dirs_json", "register"]

PROG = "kafkapy log-dirs"
JSON_VERSION = 1  # the "version" of kafka-log-dirs.sh's output


def _names(text: str) -> list[str]:
    return [name for name in text.split(",") if name]


def _broker_ids(text: str) -> list[int]:
    try:
        return [int(name) for name in _names(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--broker-list {text!r} is not broker ids like 0,1,2") from None


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "log-dirs", help="describe brokers' log directories, like kafka-log-dirs.sh",
        description="Print each broker's log directories and the size of each partition in them "
                    "(DescribeLogDirs), as kafka-log-dirs.sh's JSON.")
    add_connection_options(parser)
    parser.add_argument("--describe", action="store_true", required=True,
                        help="describe the log directories of the brokers")
    parser.add_argument("--broker-list", type=_broker_ids, default=[], metavar="0,1,2",
                        help="the brokers to ask; default every broker in the cluster")
    parser.add_argument("--topic-list", type=_names, default=[], metavar="t1,t2",
                        help="only these topics' partitions; default all")
    parser.set_defaults(func=run)


def log_dirs_json(described: Mapping[int, Sequence[Mapping[str, Any]]], topics: Collection[str]) -> str:
    """kafka-log-dirs.sh's JSON of {broker id: DescribeLogDirs results}, only ``topics`` (if any)."""
    brokers = []
    for broker, results in sorted(described.items()):
        log_dirs = []
        for result in results:
            partitions = [{"partition": partition_name(topic["name"], p["partition_index"]),
                           "size": p["partition_size"], "offsetLag": p["offset_lag"],
                           "isFuture": p["is_future_key"]}
                          for topic in result["topics"] if not topics or topic["name"] in topics
                          for p in topic["partitions"]]
            error = None if result["error_code"] == ErrorCode.NONE else error_text(result["error_code"])
            log_dirs.append({"logDir": result["log_dir"], "error": error, "partitions": partitions})
        brokers.append({"broker": broker, "logDirs": log_dirs})
    return json.dumps({"version": JSON_VERSION, "brokers": brokers}, separators=(",", ":"))


def run(args: argparse.Namespace) -> int:
    try:
        with AdminClient.from_args(args, "kafkapy-log-dirs") as client:
            brokers, _ = client.cluster()
            existing = [b.node_id for b in brokers]
            unknown = [b for b in args.broker_list if b not in existing]
            if unknown:
                raise ClientError(f"ERROR: The given brokers do not exist from --broker-list: "
                                  f"{','.join(map(str, unknown))}. Current existent brokers: "
                                  f"{','.join(map(str, existing))}")
            asked = sorted(set(args.broker_list)) or existing
            print("Querying brokers for log directories information")
            described = {}
            for broker in asked:
                connection = client.connection(broker)
                body = client.call(connection, ApiKey.DESCRIBE_LOG_DIRS, {"topics": None})
                if body.get("error_code", ErrorCode.NONE) != ErrorCode.NONE:
                    refusal = error_text(body["error_code"])
                    raise ClientError(f"broker {broker} refused DescribeLogDirs: {refusal}")
                described[broker] = body["results"]
    except ClientError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    print(f"Received log directory information from brokers {','.join(map(str, asked))}")
    print(log_dirs_json(described, set(args.topic_list)))
    return 0
