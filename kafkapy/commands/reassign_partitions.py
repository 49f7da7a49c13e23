"""``kafkapy reassign-partitions``: move partitions' replicas, like kafka-reassign-partitions.sh.

Its flags and its words: ``--execute`` reads Kafka's reassignment JSON
(``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}``), prints the current
assignment in the same JSON (kept for a rollback) and sends AlterPartitionReassignments to the
controller; ``--verify`` compares each partition's replicas with the file's; ``--cancel`` cancels the
file's partitions that are being reassigned; ``--list`` prints the ongoing reassignments
(ListPartitionReassignments). A kafkapy broker finishes a reassignment at once
(kafkapy.topics.reassignment), so ``--verify`` right after ``--execute`` says it is completed and
nothing is ever listed or cancelled. The file's ``log_dirs`` (one per replica, ``"any"`` or an
absolute log dir) are sent after the reassignment as AlterReplicaLogDirs to each replica's broker,
retried while a broker answers REPLICA_NOT_AVAILABLE (its replica not there yet) until
``--timeout``, as Kafka's tool does; ``--verify`` then says where each such replica's move is
(DescribeLogDirs). Exit status 1 with Kafka's error lines when a partition is refused.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kafkapy.client import ClientError, SimpleClient
from kafkapy.commands._admin import AdminClient
from kafkapy.commands._controller import controller_client
from kafkapy.commands._partition_files import is_int
from kafkapy.commands._security import add_connection_options
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

__all__ = ["parse_log_dir_moves", "parse_reassignment_json", "register"]

ALTER_VERSION = 0  # AlterPartitionReassignments v0: what kafka-reassign-partitions.sh sends by default
REASSIGNMENT_TIMEOUT_MS = 60_000  # the request's TimeoutMs default (Kafka's AdminClient and schema)

Partition = tuple[str, int]
Replica = tuple[str, int, int]  # topic, partition, broker: Kafka's TopicPartitionReplica
ANY_LOG_DIR = "any"
MOVE_RETRY_SECONDS = 0.1  # Kafka's tool retries AlterReplicaLogDirs every 100 ms


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "reassign-partitions", help="move partitions' replicas, like kafka-reassign-partitions.sh",
        description="Execute, verify, cancel (AlterPartitionReassignments) or list "
                    "(ListPartitionReassignments) partition reassignments with "
                    "kafka-reassign-partitions.sh's flags and JSON.")
    add_connection_options(parser)
    parser.add_argument("--reassignment-json-file", metavar="FILE",
                        help='the reassignment: {"version":1,"partitions":[{"topic":..,"partition":..,'
                             '"replicas":[..]}]}')
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--execute", action="store_true", help="start the reassignment in the file")
    action.add_argument("--verify", action="store_true", help="say whether the file's reassignment is done")
    action.add_argument("--cancel", action="store_true", help="cancel the file's ongoing reassignments")
    action.add_argument("--list", action="store_true", help="list the ongoing reassignments")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.list:
            with controller_client(args, "kafkapy-reassign-partitions") as client:
                print("\n".join(_list_lines(_ongoing(client, None))))
            return 0
        if args.reassignment_json_file is None:
            raise ClientError("--execute, --verify and --cancel need --reassignment-json-file")
        try:
            with open(args.reassignment_json_file, encoding="utf-8") as file:
                text = file.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ClientError(f"cannot read {args.reassignment_json_file}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
        targets = parse_reassignment_json(text)
        moves = parse_log_dir_moves(text)
        with controller_client(args, "kafkapy-reassign-partitions") as client:
            if args.execute:
                code = _execute(client, targets)
                return code or (_move_log_dirs(args, moves) if moves else 0)
            if args.verify:
                code = _verify(client, targets)
                if moves:
                    _verify_log_dirs(args, moves)
                return code
            return _cancel(client, targets)
    except ClientError as exc:
        print(f"kafkapy reassign-partitions: {exc}", file=sys.stderr)
        return 1


def parse_reassignment_json(text: str) -> dict[Partition, list[int]]:
    """Kafka's reassignment JSON as {(topic, partition): replicas}; ClientError naming what is wrong
    (Kafka's rules: version 1, a non-empty partition list, no partition twice, no replica twice)."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: thousands of nested arrays
        raise ClientError(f"the reassignment JSON is not JSON: {exc}") from None
    if not isinstance(document, dict) or not is_int(version := document.get("version", 1)) or version != 1:
        raise ClientError('the reassignment JSON must be an object with "version": 1')
    entries = document.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise ClientError("Partition reassignment list cannot be empty")
    targets: dict[Partition, list[int]] = {}
    for entry in entries:
        try:
            topic, partition, replicas = entry["topic"], entry["partition"], entry["replicas"]
        except (KeyError, TypeError):
            raise ClientError(f'a partition needs "topic", "partition" and "replicas": {entry!r}') from None
        if not isinstance(topic, str) or not is_int(partition) or not isinstance(replicas, list) \
                or not all(is_int(r) for r in replicas):
            raise ClientError(f"a topic name, a partition number and a list of broker ids, not {entry!r}")
        if (topic, partition) in targets:
            raise ClientError(f"Duplicate reassignment for partition {topic}-{partition}")
        if len(set(replicas)) != len(replicas):
            raise ClientError(f"Duplicate replica assignment for partition {topic}-{partition}: {replicas}")
        targets[topic, partition] = list(replicas)
    return targets


def parse_log_dir_moves(text: str) -> dict[Replica, str]:
    """The file's ``log_dirs``: {(topic, partition, broker): log dir} for each replica not "any"
    (Kafka's rule: as many as there are replicas). Call after :func:`parse_reassignment_json`."""
    document = json.loads(text)
    moves: dict[Replica, str] = {}
    for entry in document["partitions"]:
        topic, partition, replicas = entry["topic"], entry["partition"], entry["replicas"]
        dirs = entry.get("log_dirs")
        if dirs is None:
            continue
        if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
            raise ClientError(f'"log_dirs" is a list of log dirs or "any", not {dirs!r}')
        if len(dirs) != len(replicas):
            raise ClientError(f"Size of replicas list [{', '.join(map(str, replicas))}] is different from "
                              f"size of log dirs list [{', '.join(dirs)}] for partition {topic}-{partition}")
        for replica, log_dir in zip(replicas, dirs, strict=True):
            if log_dir != ANY_LOG_DIR:
                moves[topic, partition, replica] = log_dir
    return moves


def _replica(replica: Replica) -> str:
    return "-".join(map(str, replica))  # Kafka's TopicPartitionReplica.toString


def _alter_log_dirs(admin: AdminClient, pending: Mapping[Replica, str]) -> set[Replica]:
    """AlterReplicaLogDirs to each replica's broker; the replicas whose move started (or that are
    there). REPLICA_NOT_AVAILABLE leaves a replica pending; another error is Kafka's failure."""
    by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
    for (topic, partition, broker), log_dir in pending.items():
        by_broker.setdefault(broker, {}).setdefault(log_dir, {}).setdefault(topic, []).append(partition)
    started: set[Replica] = set()
    for broker, dirs in sorted(by_broker.items()):
        body = admin.call(admin.connection(broker), ApiKey.ALTER_REPLICA_LOG_DIRS, {"dirs": [
            {"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
            for path, topics in dirs.items()]})
        for topic in body["results"]:
            for answer in topic["partitions"]:
                replica = (topic["topic_name"], answer["partition_index"], broker)
                if answer["error_code"] == ErrorCode.NONE:
                    started.add(replica)
                elif answer["error_code"] != ErrorCode.REPLICA_NOT_AVAILABLE:
                    raise ClientError(f"Failed to alter dir for {_replica(replica)}: "
                                      f"{_error(answer['error_code'], None)}")
    return started


def _move_log_dirs(args: argparse.Namespace, moves: Mapping[Replica, str]) -> int:
    """Kafka's executeMoves: send the moves until each has started, or --timeout passed."""
    pending = dict(moves)
    deadline = time.monotonic() + args.timeout
    with AdminClient.from_args(args, "kafkapy-reassign-partitions") as admin:
        admin.cluster()
        while True:
            started = _alter_log_dirs(admin, pending)
            for replica in sorted(started):
                topic, partition, broker = replica
                print(f"Successfully started moving log directory to {pending[replica]} for replica "
                      f"{topic}-{partition} with broker {broker} ")
                del pending[replica]
            if not pending:
                return 0
            if time.monotonic() >= deadline:
                plural = "" if len(pending) == 1 else "s"
                raise ClientError(f"Timed out before log directory move{plural} could be started for: "
                                  f"{','.join(_replica(r) for r in sorted(pending))}")
            time.sleep(MOVE_RETRY_SECONDS)


def _verify_log_dirs(args: argparse.Namespace, moves: Mapping[Replica, str]) -> None:
    """Kafka's verifyReplicaMoves: each replica's current and future log dir (DescribeLogDirs)."""
    where: dict[Replica, tuple[str | None, str | None]] = {}
    with AdminClient.from_args(args, "kafkapy-reassign-partitions") as admin:
        admin.cluster()
        for broker in sorted({b for _, _, b in moves}):
            body = admin.call(admin.connection(broker), ApiKey.DESCRIBE_LOG_DIRS, {"topics": None})
            for result in body["results"]:
                for topic in result["topics"]:
                    for p in topic["partitions"]:
                        replica = (topic["name"], p["partition_index"], broker)
                        current, future = where.get(replica, (None, None))
                        if p["is_future_key"]:
                            future = result["log_dir"]
                        else:
                            current = result["log_dir"]
                        where[replica] = (current, future)
    for replica in sorted(moves):
        topic, partition, broker = replica
        target = moves[replica]
        current, future = where.get(replica, (None, None))
        if current is None:
            print(f"Partition {topic}-{partition} cannot be found in any live log directory on broker "
                  f"{broker}.")
        elif future is None and current == target:
            print(f"Reassignment of replica {_replica(replica)} completed successfully.")
        elif future is None:
            print(f"Partition {topic}-{partition} on broker {broker} is not being moved from log dir "
                  f"{current} to {target}.")
        elif future == target:
            print(f"Reassignment of replica {_replica(replica)} is still in progress.")
        else:
            print(f"Partition {topic}-{partition} on broker {broker} is being moved to log dir {future} "
                  f"instead of {target}.")


def _name(partition: Partition) -> str:
    return f"{partition[0]}-{partition[1]}"


def _error(code: int, message: str | None) -> str:
    """Kafka's exception message for a partition's error: the broker's message, else the code's name."""
    if message:
        return message
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def _current(client: SimpleClient, topics: set[str]) -> dict[Partition, list[int]]:
    """The replicas of every partition of ``topics`` as Metadata answers (v4: without creating a
    topic the file names by mistake, as Kafka's tool describes topics)."""
    body = client.request(ApiKey.METADATA, 4, {"topics": [{"name": t} for t in sorted(topics)],
                                               "allow_auto_topic_creation": False})
    return {(t["name"], p["partition_index"]): list(p["replica_nodes"])
            for t in body["topics"] if t["error_code"] == ErrorCode.NONE for p in t["partitions"]}


def _alter(client: SimpleClient, targets: Mapping[Partition, list[int] | None]) -> dict[Partition, str]:
    """Send the reassignments (None: cancel); return the refused partitions with Kafka's message."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), replicas in targets.items():
        by_topic.setdefault(topic, []).append({"partition_index": partition, "replicas": replicas})
    body = client.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, ALTER_VERSION, {
        "timeout_ms": REASSIGNMENT_TIMEOUT_MS,
        "topics": [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]})
    if body["error_code"] != ErrorCode.NONE:
        raise ClientError(_error(body["error_code"], body["error_message"]))
    return {(t["name"], p["partition_index"]): _error(p["error_code"], p["error_message"])
            for t in body["responses"] for p in t["partitions"] if p["error_code"] != ErrorCode.NONE}


def _ongoing(client: SimpleClient, partitions: Sequence[Partition] | None
             ) -> dict[Partition, tuple[list[int], list[int], list[int]]]:
    """{partition: (replicas, adding, removing)} of the ongoing reassignments (of ``partitions``)."""
    asked = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        asked = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
    body = client.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                          {"timeout_ms": REASSIGNMENT_TIMEOUT_MS, "topics": asked})
    if body["error_code"] != ErrorCode.NONE:
        raise ClientError(_error(body["error_code"], body["error_message"]))
    return {(t["name"], p["partition_index"]): (list(p["replicas"]), list(p["adding_replicas"]),
                                                list(p["removing_replicas"]))
            for t in body["topics"] for p in t["partitions"]}


def _ids(replicas: Sequence[int]) -> str:
    return ",".join(map(str, replicas))


def _list_lines(ongoing: Mapping[Partition, tuple[list[int], list[int], list[int]]]) -> list[str]:
    if not ongoing:
        return ["No partition reassignments found."]
    lines = ["Current partition reassignments:"]
    for partition in sorted(ongoing):
        replicas, adding, removing = ongoing[partition]
        line = f"{_name(partition)}: replicas: {_ids(replicas)}."
        if adding:
            line += f" adding: {_ids(adding)}."
        if removing:
            line += f" removing: {_ids(removing)}."
        lines.append(line)
    return lines


def _assignment_json(assignment: Mapping[Partition, list[int]]) -> str:
    """Kafka's reassignment JSON of ``assignment`` (what --execute prints for a rollback)."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": index, "replicas": assignment[topic, index],
         "log_dirs": ["any"] * len(assignment[topic, index])} for topic, index in sorted(assignment)]},
        separators=(",", ":"))


def _execute(client: SimpleClient, targets: Mapping[Partition, list[int]]) -> int:
    current = _current(client, {topic for topic, _ in targets})
    known = {partition: current[partition] for partition in targets if partition in current}
    print("Current partition replica assignment\n")
    print(_assignment_json(known))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    refused = _alter(client, targets)
    if refused:
        return _refusals("Error reassigning partition{s}:", refused)
    plural = "" if len(targets) == 1 else "s"
    print(f"Successfully started partition reassignment{plural} for "
          f"{','.join(_name(p) for p in sorted(targets))}")
    return 0


def _verify(client: SimpleClient, targets: Mapping[Partition, list[int]]) -> int:
    ongoing = _ongoing(client, list(targets))
    current = _current(client, {topic for topic, _ in targets})
    # A partition no topic has cannot have a status: Kafka's tool fails on it (its topic
    # description has no such partition) before printing any (kafkapy printed "replica set is
    # rather than ..." with no replicas, and exited 0).
    missing = [p for p in sorted(targets) if p not in ongoing and p not in current]
    if missing:
        raise ClientError(f"Unable to find partition: {', '.join(_name(p) for p in missing)}")
    print("Status of partition reassignment:")
    for partition in sorted(targets):
        name = _name(partition)
        if partition in ongoing:
            print(f"Reassignment of partition {name} is still in progress.")
        elif current.get(partition) == targets[partition]:
            print(f"Reassignment of partition {name} is completed.")
        else:
            now = _ids(current.get(partition, []))
            print(f"There is no active reassignment of partition {name}, but replica set is {now} rather "
                  f"than {_ids(targets[partition])}.")
    return 0  # as Kafka's tool: the status is the answer, not a failure


def _refusals(heading: str, refused: Mapping[Partition, str]) -> int:
    """The partitions the controller refused, in kafka-reassign-partitions.sh's words; exit code 1."""
    print(heading.format(s="" if len(refused) == 1 else "s"), file=sys.stderr)
    for partition in sorted(refused):
        print(f"{_name(partition)}: {refused[partition]}", file=sys.stderr)
    return 1


def _cancel(client: SimpleClient, targets: Mapping[Partition, list[int]]) -> int:
    ongoing = _ongoing(client, list(targets))
    if not ongoing:
        print("None of the specified partition reassignments are active.")
        return 0
    refused = _alter(client, dict.fromkeys(ongoing))
    if refused:
        return _refusals("Error cancelling partition reassignment{s} for:", refused)
    plural = "" if len(ongoing) == 1 else "s"
    print(f"Successfully cancelled partition reassignment{plural} for: "
          f"{','.join(_name(p) for p in sorted(ongoing))}")
    return 0
