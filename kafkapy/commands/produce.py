"""``kafkapy produce``: stdin to a topic, one record per delimited message, as ``kcat -P``.

Messages are split on ``-D`` (newline by default); with ``-K DELIM`` the text
before the first DELIM is the key (a message without DELIM has no key).
``-Z`` sends empty keys and values as null, as kcat's -Z does; without it they
are empty byte strings.  Every ``-H name=value`` header goes on every record.

Input is read as it arrives (a chunk at a time, not to end of file), so a
line typed into a terminal is produced at once; the messages of one chunk go
out as one batch per partition.  Without ``-p`` a keyed record goes to
``murmur2(key) % partitions``, the Java client's partitioner, so the same key
lands where a Java producer would put it; unkeyed ones rotate over the
partitions batch by batch.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from kafkapy.client import ClientError
from kafkapy.commands._numbers import java_int
from kafkapy.commands._partitions import PartitionClient
from kafkapy.commands._security import add_command_config, client_options
from kafkapy.errors import EncodeError
from kafkapy.protocol.compression import Compression
from kafkapy.protocol.partitioner import partition_for_key
from kafkapy.protocol.records import build_record_batch

__all__ = ["register"]

_CHUNK = 1 << 16  # bytes read from stdin at a time
_BATCH_RECORDS = 10_000  # records per Produce request at most, to keep requests well under 1 MB
_BATCH_BYTES = 512 * 1024  # ... and this many value+key bytes; Kafka's max.message.bytes is ~1 MiB
_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}  # kcat's default is librdkafka's, -1 (all)

RecordTuple = tuple[bytes | None, bytes | None]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "produce", help="produce stdin's messages to a topic (kcat -P)",
        description="Read messages from stdin, split on the delimiter, and produce them to a topic with "
                    "Produce requests sent to each partition's leader.")
    parser.add_argument("--bootstrap-server", "-b", required=True, metavar="HOST:PORT")
    add_command_config(parser)
    parser.add_argument("-t", "--topic", required=True)
    parser.add_argument("-p", "--partition", type=java_int, metavar="N",
                        help="this partition (default: by key, murmur2 as the Java client; unkeyed rotate)")
    parser.add_argument("-K", "--key-delimiter", metavar="DELIM",
                        help="the text before the first DELIM of each message is its key")
    parser.add_argument("-D", "--delimiter", default="\\n", metavar="DELIM",
                        help="message delimiter (default newline; \\n \\t \\0 \\r understood)")
    parser.add_argument("-H", "--header", action="append", default=[], metavar="NAME=VALUE",
                        help="a header on every record (repeatable)")
    parser.add_argument("-Z", "--null-empty", action="store_true",
                        help="send an empty key or value as null (a tombstone for an empty value)")
    parser.add_argument("-z", "--compression", default="none", choices=[str(c) for c in Compression])
    parser.add_argument("--acks", default="all", choices=sorted(_ACKS),
                        help="all (-1, the default, as kcat's), 1 (the leader), or 0 (no answer: "
                             "nothing confirms the records were stored)")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="per request, and how long to wait for a leader (default 10)")
    parser.set_defaults(func=_run)


def unescape(text: str) -> bytes:
    r"""A delimiter as typed on a command line: ``\n``, ``\t``, ``\r``, ``\0`` and ``\\`` decoded; the
    other characters as the bytes the command line held (see :func:`argument_bytes`)."""
    out = bytearray()
    escapes = {"n": b"\n", "t": b"\t", "r": b"\r", "0": b"\0", "\\": b"\\"}
    i = 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in escapes:
            out += escapes[text[i + 1]]
            i += 2
        else:
            out += argument_bytes(text[i])
            i += 1
    return bytes(out)


def argument_bytes(text: str) -> bytes:
    """A command-line argument's own bytes: Python decodes argv with surrogateescape, so bytes
    that are not UTF-8 come back as they were given (kcat, a C program, takes them as bytes; a
    plain encode() raised UnicodeEncodeError on them)."""
    return text.encode("utf-8", "surrogateescape")


def messages(read: Callable[[int], bytes], delimiter: bytes) -> Iterator[list[bytes]]:
    """The complete messages of each chunk ``read`` returns (b"" at end of input); at the end, a
    non-empty unterminated tail too."""
    pending = b""
    while True:
        chunk = read(_CHUNK)
        if not chunk:
            if pending:
                yield [pending]
            return
        parts = (pending + chunk).split(delimiter)
        pending = parts.pop()
        if parts:
            yield parts


def split(message: bytes, key_delimiter: bytes | None, null_empty: bool) -> RecordTuple:
    key: bytes | None = None
    value: bytes | None = message
    if key_delimiter is not None:
        head, found, tail = message.partition(key_delimiter)
        if found:
            key, value = head, tail
    if null_empty:
        key = key or None
        value = value or None
    return key, value


def _headers(specs: list[str]) -> list[tuple[str, bytes | None]]:
    headers: list[tuple[str, bytes | None]] = []
    for spec in specs:
        name, found, value = spec.partition("=")
        if not found or not name:
            raise ValueError(f"-H {spec!r} is not NAME=VALUE")
        headers.append((name, argument_bytes(value)))
    return headers


def _run(args: argparse.Namespace) -> int:
    prog = "kafkapy produce"
    try:
        headers = _headers(args.header)
    except ValueError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    delimiter = unescape(args.delimiter)
    if not delimiter:
        print(f"{prog}: error: -D must not be empty", file=sys.stderr)
        return 2
    key_delimiter = unescape(args.key_delimiter) if args.key_delimiter is not None else None
    acks = _ACKS[args.acks]
    try:
        with PartitionClient(args.bootstrap_server, args.timeout, security=client_options(args)) as client:
            partitions = client.partitions(args.topic, auto_create=True)
            if args.partition is not None and args.partition not in partitions:
                print(f"{prog}: error: topic {args.topic!r} has no partition {args.partition} "
                      f"(it has {len(partitions)})", file=sys.stderr)
                return 2
            rotation = 0
            stdin = sys.stdin.buffer.fileno()
            for chunk in messages(lambda n: os.read(stdin, n), delimiter):
                by_partition: dict[int, list[RecordTuple]] = {}
                for message in chunk:
                    key, value = split(message, key_delimiter, args.null_empty)
                    if args.partition is not None:
                        partition = args.partition
                    elif key is not None:
                        partition = partitions[partition_for_key(key, len(partitions))]
                    else:
                        partition = partitions[rotation % len(partitions)]
                    by_partition.setdefault(partition, []).append((key, value))
                rotation += 1
                for partition, records in by_partition.items():
                    for batch in _batches(records, headers, args.compression):
                        client.produce(args.topic, partition, batch, acks)
    except (ClientError, EncodeError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _batches(records: list[RecordTuple], headers: list[tuple[str, bytes | None]],
             compression: str) -> Iterator[bytes]:
    """Record batches of at most _BATCH_RECORDS records and about _BATCH_BYTES bytes each."""
    start = 0
    while start < len(records):
        end, size = start, 0
        while end < len(records) and end - start < _BATCH_RECORDS and (size < _BATCH_BYTES or end == start):
            key, value = records[end]
            size += len(key or b"") + len(value or b"")
            end += 1
        yield build_record_batch(
            [{"key": key, "value": value, "headers": headers} for key, value in records[start:end]],
            compression=compression)
        start = end
