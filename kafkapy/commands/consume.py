"""``kafkapy consume``: a topic's records to stdout, as ``kcat -C``.

Where to start (``-o``), as kcat: ``beginning``, ``end``, an absolute offset
``N``, ``-N`` (N before the end, not before the start), or ``s@MS`` (the first
record at or after a timestamp, through ListOffsets).  ``-c N`` stops after N
records, ``-e`` when every partition read has reached its high watermark;
without either it follows the topic until interrupted.  There is no group:
partitions are read by offset, as kcat's -C without -G.

``--isolation-level read_committed`` reads as a read_committed consumer (kcat's
default through librdkafka): up to each partition's last stable offset, where
``-e`` stops, without the records of aborted transactions (the aborted list a
read_committed Fetch carries, applied as Kafka's consumer applies it). The
default is read_uncommitted, as kafka-console-consumer's: every data record
below the high watermark. Transaction markers are never printed.

Text output is each value (``-K DELIM``: key, DELIM, value) followed by ``-D``
(newline), written as raw bytes.  A null key or value prints as nothing, or as
``NULL`` with ``-Z``, as kcat does.

JSON output (``--format json``, or ``-J`` as kcat) is one object per line::

    {"topic": "t", "partition": 0, "offset": 7, "timestamp": 1700000000000,
     "key": "k", "value": null, "headers": [{"key": "h", "value": "v"}]}

Key, value and header values are ``null`` when null, a string when the bytes
are valid UTF-8, and otherwise ``{"base64": "..."}`` -- the bytes in base64,
so no byte is lost or replaced and a reader can tell text from binary.

``--formatter offsets`` reads ``__consumer_offsets`` and ``--formatter
transaction-log`` ``__transaction_state``: each record's key and value decoded
as Kafka's console formatters print them (``record_json`` of
``kafkapy.groups.record_codec`` and of ``kafkapy.transactions.records``), one
JSON object per line with the partition, offset and timestamp; a record that
does not decode is printed with an ``error`` instead, and the rest go on.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Sequence
from typing import Any

from kafkapy.client import ClientError
from kafkapy.commands._numbers import java_int, java_long
from kafkapy.commands._partitions import EARLIEST, LATEST, IsolationLevel, PartitionClient
from kafkapy.commands._security import add_command_config, client_options
from kafkapy.commands.produce import unescape
from kafkapy.errors import DecodeError
from kafkapy.groups.record_codec import GroupRecordError
from kafkapy.groups.record_codec import record_json as offsets_record_json
from kafkapy.protocol.records import Record
from kafkapy.transactions.records import TransactionLogError
from kafkapy.transactions.records import record_json as transaction_record_json

__all__ = ["register", "render_bytes"]

_MAX_WAIT_MS = 500  # Fetch long-poll per round; the Java consumer's fetch.max.wait.ms is 500


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "consume", help="print a topic's records (kcat -C)",
        description="Read records from a topic's partitions by offset, with Fetch requests sent to each "
                    "partition's leader, and print them as text or JSON lines.")
    parser.add_argument("--bootstrap-server", "-b", required=True, metavar="HOST:PORT")
    add_command_config(parser)
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("-p", "--partition", type=java_int, action="append", metavar="N",
                        help="read this partition (repeatable; default all)")
    parser.add_argument("-o", "--offset", default="beginning", type=_offset_argument,
                        metavar="beginning|end|N|-N|s@MS", help="where to start (default beginning)")
    parser.add_argument("-c", "--count", type=int, metavar="N", help="exit after N records")
    parser.add_argument("-e", "--exit", action="store_true",
                        help="exit when every partition read has reached its end")
    parser.add_argument("-K", "--key-delimiter", metavar="DELIM", help="text output: print key DELIM value")
    parser.add_argument("-D", "--delimiter", default="\\n", metavar="DELIM",
                        help="text output: after each record (default newline)")
    parser.add_argument("-Z", "--null-text", action="store_true", help="text output: null as NULL")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument("-J", dest="format", action="store_const", const="json", help="--format json")
    parser.add_argument("--formatter", choices=["offsets", "transaction-log"],
                        help="decode __consumer_offsets (offsets) or __transaction_state (transaction-log) "
                             "keys and values, as Kafka's console formatters (JSON lines)")
    parser.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                        default="read_uncommitted",
                        help="read_committed: only committed transactions' records, up to the last stable "
                             "offset (-e stops there); default read_uncommitted, as kafka-console-consumer")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="per request, and how long to wait for a leader (default 10)")
    parser.set_defaults(func=_run)


Start = tuple[str, int]  # ("beginning"|"end"|"absolute"|"relative"|"timestamp", number)


def _offset_argument(text: str) -> Start:
    """kcat's -o forms, checked before anything connects (a usage error, exit 2)."""
    if text in ("beginning", "end"):
        return text, 0
    number = text[2:] if text.startswith("s@") else text
    try:
        value = java_long(number)  # past a long, ListOffsets/Fetch could not carry it
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not beginning, end, N, -N or s@MS "
                                         "(N and MS a long)") from None
    if text.startswith("s@"):
        return "timestamp", value
    return ("relative", -value) if value < 0 else ("absolute", value)


def render_bytes(data: bytes | None) -> str | dict[str, str] | None:
    """JSON for bytes: null, the text if valid UTF-8, else ``{"base64": ...}`` (lossless)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def as_json(topic: str, partition: int, record: Record) -> dict[str, Any]:
    return {"topic": topic, "partition": partition, "offset": record.offset, "timestamp": record.timestamp,
            "key": render_bytes(record.key), "value": render_bytes(record.value),
            "headers": [{"key": name, "value": render_bytes(value)} for name, value in record.headers]}


_COORDINATOR_TOPICS = {"offsets": "__consumer_offsets", "transaction-log": "__transaction_state"}


def as_coordinator_json(formatter: str, partition: int, record: Record) -> dict[str, Any]:
    """A coordinator's record (``formatter``: offsets or transaction-log) decoded; ``error`` says
    why one could not be."""
    answer: dict[str, Any] = {"partition": partition, "offset": record.offset, "timestamp": record.timestamp}
    if record.key is None:
        return {**answer, "error": f"a record without a key is not a {_COORDINATOR_TOPICS[formatter]} record"}
    try:
        if formatter == "offsets":
            return {**answer, **offsets_record_json(record.key, record.value)}
        return {**answer, **transaction_record_json(record.key, record.value)}
    except (GroupRecordError, TransactionLogError) as exc:
        return {**answer, "error": str(exc)}


def _start(client: PartitionClient, topic: str, partition: int, start: Start,
           isolation: IsolationLevel) -> int:
    kind, number = start
    if kind == "absolute":
        return number
    if kind == "beginning":
        return client.list_offset(topic, partition, EARLIEST)
    latest = client.list_offset(topic, partition, LATEST, isolation)
    if kind == "end":
        return latest
    if kind == "relative":
        return max(client.list_offset(topic, partition, EARLIEST), latest - number)
    found = client.list_offset(topic, partition, number)
    return latest if found < 0 else found  # no record that late: start at the end, as kcat


def _run(args: argparse.Namespace) -> int:
    prog = "kafkapy consume"
    if args.count is not None and args.count < 0:
        print(f"{prog}: error: -c must not be negative", file=sys.stderr)
        return 2
    out = sys.stdout.buffer
    delimiter = unescape(args.delimiter)
    key_delimiter = unescape(args.key_delimiter) if args.key_delimiter is not None else None
    null = b"NULL" if args.null_text else b""
    printed = 0
    try:
        with PartitionClient(args.bootstrap_server, args.timeout, security=client_options(args)) as client:
            partitions: Sequence[int] = client.partitions(args.topic)
            if args.partition:
                missing = sorted(set(args.partition) - set(partitions))
                if missing:
                    print(f"{prog}: error: topic {args.topic!r} has no partition "
                          f"{', '.join(map(str, missing))} (it has {len(partitions)})", file=sys.stderr)
                    return 2
                partitions = sorted(set(args.partition))
            isolation = IsolationLevel[args.isolation_level.upper()]
            positions = {p: _start(client, args.topic, p, args.offset, isolation) for p in partitions}
            at_end: set[int] = set()
            while args.count is None or printed < args.count:
                if args.exit and len(at_end) == len(positions):
                    break
                fetched = client.fetch(args.topic, positions, 0 if args.exit else _MAX_WAIT_MS,
                                       isolation=isolation)
                for partition, answer in sorted(fetched.items()):
                    for record in answer.records:
                        if args.count is not None and printed >= args.count:
                            break
                        if args.formatter is not None:
                            decoded = as_coordinator_json(args.formatter, partition, record)
                            out.write(json.dumps(decoded).encode() + b"\n")
                        elif args.format == "json":
                            out.write(json.dumps(as_json(args.topic, partition, record)).encode() + b"\n")
                        else:
                            if key_delimiter is not None:
                                out.write((null if record.key is None else record.key) + key_delimiter)
                            out.write((null if record.value is None else record.value) + delimiter)
                        printed += 1
                    positions[partition] = answer.next_offset
                    if answer.next_offset >= answer.end_offset:
                        at_end.add(partition)
                    else:
                        at_end.discard(partition)
                out.flush()
    except (ClientError, DecodeError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0  # the way to stop following a topic
    return 0
