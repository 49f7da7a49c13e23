"""``kafkapy transactions``: list, describe and abort transactions, as kafka-transactions.sh.

The subcommands, flags, columns and messages are kafka-transactions.sh's (Kafka 3.x):
``list [--duration-filter MS]``, ``describe --transactional-id ID``, ``describe-producers
--topic T --partition P [--broker-id N]``, ``abort --topic T --partition P`` with
``--start-offset`` (the open transaction's first offset, as describe-producers shows it) or
``--producer-id/--producer-epoch/--coordinator-epoch``, and ``find-hanging (--broker-id N |
--topic T [--partition P]) [--max-transaction-timeout MIN]``. Tables are printed as Kafka's
ToolsUtils.prettyPrintTable prints them: each cell padded to its column, followed by a tab.

find-hanging searches as the Java tool does: every partition of the topics in scope (all topics,
internal ones included, with a replica on ``--broker-id``), DescribeProducers for the open
transactions whose last write is older than the timeout, then ListTransactions by producer id and
DescribeTransactions: an open transaction is hanging when no coordinator knows its producer, or the
coordinator's transaction does not hold that partition (so no marker will ever come).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

from kafkapy.client import ClientError
from kafkapy.commands._numbers import java_int, java_long, java_short
from kafkapy.commands._partitions import BrokerRefused
from kafkapy.commands._security import add_command_config, client_options
from kafkapy.commands._transactions import TransactionClient
from kafkapy.errors import ErrorCode

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
    hanging = commands.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument("--broker-id", type=java_int, help="broker id to search for hanging transactions")
    hanging.add_argument("--max-transaction-timeout", type=java_int, default=15, metavar="MINUTES",
                         help="maximum transaction timeout in minutes to limit the scope of the search "
                              "(15 minutes by default)")
    hanging.add_argument("--topic",
                         help="topic name to limit search to (required if --partition is specified)")
    hanging.add_argument("--partition", type=java_int, help="partition number")
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


_HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                    "LastTimestamp", "Duration(min)")


def _find_hanging(client: TransactionClient, args: argparse.Namespace) -> str:
    if args.topic is None and args.broker_id is None:
        raise _Failed("The `find-hanging` command requires either --topic or --broker-id to limit the scope "
                      "of the search")
    if args.partition is not None and args.topic is None:
        raise _Failed("The --partition argument requires --topic to be provided")
    timeout_ms = args.max_transaction_timeout * 60_000
    if args.topic is not None and args.partition is not None:
        scope = [(args.topic, args.partition)]
    else:
        try:
            described = client.topics(None if args.topic is None else [args.topic])
        except ClientError as exc:
            raise _Failed(f"Failed to describe topics: {exc}") from None
        scope = []
        for topic in described:
            if topic.error != ErrorCode.NONE:
                raise _Failed(f"Failed to describe 1 topics: {topic.name}: {topic.error.name}")
            scope.extend((topic.name, p.partition) for p in topic.partitions
                         if args.broker_id is None or args.broker_id in p.replicas)
    try:
        producers = client.describe_producers_of(scope, args.broker_id)
    except ClientError as exc:
        where = "their leaders" if args.broker_id is None else f"broker {args.broker_id}"
        raise _Failed(f"Failed to describe producers for {len(scope)} partitions on {where}: {exc}") from None
    now_ms = int(time.time() * 1000)
    candidates = [(partition, p) for partition in scope for p in producers.get(partition, ())
                  if p.current_txn_start_offset >= 0 and now_ms - p.last_timestamp > timeout_ms]
    hanging = []
    if candidates:
        producer_ids = {p.producer_id for _, p in candidates}
        try:
            listed = client.list_transactions(producer_ids=producer_ids)
        except ClientError as exc:
            raise _Failed(f"Failed to list transactions for {len(producer_ids)} producers: {exc}") from None
        ids = {t.producer_id: t.transactional_id for t in listed if t.producer_id in producer_ids}
        held: dict[str, frozenset[tuple[str, int]] | None] = {}
        for named in sorted(set(ids.values())):
            try:
                held[named] = frozenset(client.describe_transaction(named).partitions)
            except BrokerRefused as exc:
                if exc.code is not ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    raise _Failed(f"Failed to describe {len(ids)} transactions: {exc}") from None
                held[named] = None
            except ClientError as exc:
                raise _Failed(f"Failed to describe {len(ids)} transactions: {exc}") from None
        for partition, producer in candidates:
            transactional_id = ids.get(producer.producer_id)
            partitions = None if transactional_id is None else held.get(transactional_id)
            if partitions is None or partition not in partitions:
                hanging.append((partition, producer))
    return table(_HANGING_HEADERS, [
        (topic, index, p.producer_id, p.producer_epoch, p.coordinator_epoch, p.current_txn_start_offset,
         p.last_timestamp, (now_ms - p.last_timestamp) // 60_000) for (topic, index), p in hanging])


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
            elif command == "find-hanging":
                out = _find_hanging(client, args)
            else:
                out = _abort(client, args)
    except (_Failed, ClientError) as exc:
        print(exc, file=sys.stderr)
        return 1
    if out:
        print(out)
    return 0
