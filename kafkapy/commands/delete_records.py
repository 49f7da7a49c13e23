"""``kafkapy delete-records``: move partitions' log start offsets forward, like
kafka-delete-records.sh.

It reads the tool's --offset-json-file (``{"partitions": [{"topic": "t", "partition": 0,
"offset": 5}], "version": 1}``; offset -1 is the high watermark), sends DeleteRecords to each
partition's leader and prints the tool's lines: ``partition: t-0<TAB>low_watermark: 5``, or
``partition: t-0<TAB>error: OFFSET_OUT_OF_RANGE`` (the error's name where Kafka prints its Java
exception). Unlike Kafka's tool, which exits 0 whatever the partitions answered, a partition that
failed makes the exit status 1, so a script can tell.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from kafkapy.client import ClientError
from kafkapy.commands._admin import AdminClient, partition_name
from kafkapy.commands._partition_files import partition_entries, read_json_file
from kafkapy.commands._security import add_connection_options
from kafkapy.errors import ErrorCode

__all__ = ["parse_offset_json", "register"]

PROG = "kafkapy delete-records"
JSON_VERSION = 1  # the only version of the file Kafka's tool reads (and the default)

Target = tuple[str, int, int]  # topic, partition, delete before this offset


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "delete-records", help="delete records below an offset, like kafka-delete-records.sh",
        description="Delete the records of the given partitions down to the given offsets "
                    "(DeleteRecords to each partition's leader) and print each partition's new low "
                    "watermark or its error.")
    add_connection_options(parser)
    parser.add_argument("--offset-json-file", required=True, metavar="FILE",
                        help='the offsets: {"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], '
                             '"version": 1} (offset -1: the high watermark)')
    parser.set_defaults(func=run)


def parse_offset_json(document: Any) -> list[Target]:
    """The file's partitions in its order, checked as Kafka's tool checks them; ClientError with
    the tool's message otherwise."""
    version = document.get("version", JSON_VERSION) if isinstance(document, dict) else JSON_VERSION
    if version != JSON_VERSION or isinstance(version, bool):
        raise ClientError(f"Not supported version field value {version}")
    entries = partition_entries(document, "Missing partitions field", ("offset",))
    seen: set[tuple[str, int]] = set()
    duplicates: list[str] = []
    for topic, partition, _ in entries:
        if (topic, partition) in seen:
            duplicates.append(partition_name(topic, partition))
        seen.add((topic, partition))
    if duplicates:
        raise ClientError(f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}")
    return [(topic, partition, entry["offset"]) for topic, partition, entry in entries]


def run(args: argparse.Namespace) -> int:
    try:
        targets = parse_offset_json(read_json_file(args.offset_json_file))
        print("Executing records delete operation")
        with AdminClient.from_args(args, "kafkapy-delete-records") as client:
            results = _delete(client, targets)
    except ClientError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    print("Records delete operation completed:")
    failed = 0
    for (topic, partition), (error, low_watermark) in sorted(results.items()):
        name = partition_name(topic, partition)
        if error is ErrorCode.NONE:
            print(f"partition: {name}\tlow_watermark: {low_watermark}")
        else:
            failed += 1
            print(f"partition: {name}\terror: {error.name}")
    if failed:
        print(f"{PROG}: {failed} of {len(results)} partition(s) failed", file=sys.stderr)
        return 1
    return 0


def _delete(client: AdminClient, targets: Sequence[Target]) -> dict[tuple[str, int], tuple[ErrorCode, int]]:
    """Each partition's (error, low watermark). Partitions Metadata does not know fail at once
    with UNKNOWN_TOPIC_OR_PARTITION, as Kafka's admin client fails them, rather than being
    retried until the timeout."""
    known = {(topic.name, p.partition) for topic in client.topics(sorted({t for t, _, _ in targets}))
             for p in topic.partitions}
    results: dict[tuple[str, int], tuple[ErrorCode, int]] = {}
    for topic, partition, offset in targets:
        if (topic, partition) not in known:
            results[topic, partition] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
        else:
            results[topic, partition] = client.delete_records(topic, partition, offset)
    return results
