"""``kafkapy transactions``: list, describe and abort transactions, as kafka-transactions.sh.

The subcommands, flags, columns and messages are kafka-transactions.sh's (Kafka 3.x):
``list [--duration-filter MS]``, ``describe --transactional-id ID``, ``describe-producers
--topic T --partition P [--broker-id N]`` and ``abort --topic T --partition P`` with
``--start-offset`` (the open transaction's first offset, as describe-producers shows it) or
``--producer-id/--producer-epoch/--coordinator-epoch``. Tables are printed as Kafka's
ToolsUtils.prettyPrintTable prints them: each cell padded to its column, followed by a tab.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

from kafkapy.client import ClientError
from kafkapy.commands._numbers import java_int, java_long, java_short
from kafkapy.commands._security import add_command_config, client_options
from kafkapy.commands._transactions import TransactionClient

__all__ = ["register", "table"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "transactions", help="list, describe and abort transactions (kafka-transactions.sh)",
        description="Transaction administration with kafka-transactions.sh's subcommands, flags and columns.")
    parser.add_argument("--bootstrap-server", "-b", required=True, metavar="HOST:PORT")
    add_command_config(parser)
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS")
    commands = parser.add_subparsers(dest="transactions_command", required=True)
    listing = commands.add_parser("list", help="list transactions")
    listing.add_argument("--duration-filter", type=java_long, metavar="MS",
                         help="only transactions running longer than this (ms); < 0: all")
    describe = commands.add_parser("describe", help="describe the state of an active transactional-id")
    describe.add_argument("--transactional-id", required=True)
    producers = commands.add_parser("describe-producers",
                                    help="describe the states of active producers for a topic partition")
    producers.add_argument("--broker-id", type=java_int)
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=java_int, required=True)
    abort = commands.add_parser("abort",
                                help="abort a hanging transaction (requires administrative privileges)")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=java_int, required=True)
    abort.add_argument("--start-offset", type=java_long, help="start offset of the transaction to abort")
    abort.add_argument("--producer-id", type=java_long)
    abort.add_argument("--producer-epoch", type=java_short)
    abort.add_argument("--coordinator-epoch", type=java_int)
    parser.set_defaults(func=_run)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Kafka's ToolsUtils.prettyPrintTable: cells padded to the column, each followed by a tab."""
    cells = [list(headers), *([str(value) for value in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("".join(cell.ljust(width) + "\t" for cell, width in zip(row, widths)) for row in cells)


class _Failed(Exception):
    """kafka-transactions.sh's printErrorAndExit: one line, exit status 1."""


def _none_if_negative(value: int) -> str:
    return "None" if value < 0 else str(value)


def _describe(client: TransactionClient, args: argparse.Namespace) -> str:
    try:
        found = client.describe_transaction(args.transactional_id)
    except ClientError as exc:
        raise _Failed(f"Failed to describe transaction state of transactional-id `{args.transactional_id}`: "
                      f"{exc}") from None
    started = found.start_time_ms
    duration = "None" if started < 0 else str(int(time.time() * 1000) - started)
    return table(("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                  "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                  "TopicPartitions"),
                 [(found.coordinator, found.transactional_id, found.producer_id, found.producer_epoch,
                   found.state, found.timeout_ms, _none_if_negative(started), duration,
                   ",".join(f"{t}-{p}" for t, p in found.partitions))])


def _describe_producers(client: TransactionClient, args: argparse.Namespace) -> str:
    try:
        producers = client.describe_producers(args.topic, args.partition, args.broker_id)
    except ClientError as exc:
        where = "leader" if args.broker_id is None else f"broker {args.broker_id}"
        raise _Failed(f"Failed to describe producers for partition {args.topic}-{args.partition} on {where}: "
                      f"{exc}") from None
    return table(("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                  "CurrentTransactionStartOffset"),
                 [(p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence, p.last_timestamp,
                   _none_if_negative(p.current_txn_start_offset)) for p in producers])


def _abort(client: TransactionClient, args: argparse.Namespace) -> str:
    topic, partition = args.topic, args.partition
    if args.start_offset is None and args.producer_id is None:
        raise _Failed("The transaction to abort must be identified either with --start-offset (for "
                      "brokers on 3.0 or above) or with --producer-id, --producer-epoch, and "
                      "--coordinator-epoch (for older brokers)")
    if args.start_offset is None:
        if args.producer_epoch is None:
            raise _Failed("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise _Failed("Missing required argument --coordinator-epoch")
        producer_id, epoch = args.producer_id, args.producer_epoch
        coordinator_epoch = max(args.coordinator_epoch, 0)  # -1 (never ended): 0, as Kafka's tool does
    else:
        try:
            producers = client.describe_producers(topic, partition)
        except ClientError as exc:
            raise _Failed(f"Failed to validate producer state for partition {topic}-{partition}: "
                          f"{exc}") from None
        match = next((p for p in producers if p.current_txn_start_offset == args.start_offset), None)
        if match is None:
            raise _Failed(f"Could not find any open transactions starting at offset {args.start_offset} on "
                          f"partition {topic}-{partition}")
        producer_id, epoch, coordinator_epoch = match.producer_id, match.producer_epoch, max(
            match.coordinator_epoch, 0)
    try:
        client.abort(topic, partition, producer_id, epoch, coordinator_epoch)
    except ClientError as exc:
        raise _Failed(f"Failed to abort transaction (topic {topic}-{partition}, producer id {producer_id}, "
                      f"producer epoch {epoch}, coordinator epoch {coordinator_epoch}): {exc}") from None
    return ""


def _run(args: argparse.Namespace) -> int:
    try:
        with TransactionClient(args.bootstrap_server, args.timeout, "kafkapy-transactions",
                               client_options(args)) as client:
            command = args.transactions_command
            if command == "list":
                try:
                    listed = client.list_transactions(args.duration_filter)
                except ClientError as exc:
                    raise _Failed(f"Failed to list transactions: {exc}") from None
                out = table(("TransactionalId", "Coordinator", "ProducerId", "TransactionState"),
                            [(t.transactional_id, t.coordinator, t.producer_id, t.state) for t in listed])
            elif command == "describe":
                out = _describe(client, args)
            elif command == "describe-producers":
                out = _describe_producers(client, args)
            else:
                out = _abort(client, args)
    except (_Failed, ClientError) as exc:
        print(exc, file=sys.stderr)
        return 1
    if out:
        print(out)
    return 0
