"""``kafkapy groups``: list, describe, delete consumer groups and reset their offsets.

The flags, the columns and the messages are kafka-consumer-groups.sh's, so a runbook written for
Kafka works here unchanged: ``--describe`` shows GROUP TOPIC PARTITION CURRENT-OFFSET
LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID; ``--reset-offsets`` is a dry run unless
``--execute`` is given, and refuses a group that still has members (their positions would
overwrite the reset at their next commit). ``--json`` prints the same facts for scripts.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from kafkapy.client import ClientError
from kafkapy.commands._group_cli import Usage as _Usage
from kafkapy.commands._group_cli import datetime_ms, offset_at_time, table, topic_arguments
from kafkapy.commands._groups import GroupClient, GroupDescription, GroupListing
from kafkapy.commands._numbers import java_long
from kafkapy.commands._partitions import EARLIEST, LATEST
from kafkapy.commands._security import add_command_config, client_options
from kafkapy.errors import ErrorCode
from kafkapy.log.checkpoint import java_integer

__all__ = ["register"]

_INACTIVE = frozenset({"Empty", "Dead"})  # the states in which Kafka lets offsets be reset
# A consumer group's states, classic and KIP-848 (Kafka's ConsumerGroupState without UNKNOWN).
_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
_TYPES = ("Consumer", "Classic", "Share")  # Kafka's GroupType without UNKNOWN, as --list --type shows them
_REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"})
_CONSUMER_PROTOCOL = "consumer"  # ListGroups' protocol_type of consumer groups (share groups: "share")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "groups", help="list, describe, delete consumer groups, reset offsets (kafka-consumer-groups.sh)",
        description="Consumer group administration with kafka-consumer-groups.sh's flags and columns.")
    parser.add_argument("--bootstrap-server", "-b", required=True, metavar="HOST:PORT")
    add_command_config(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list every group")
    action.add_argument("--describe", action="store_true", help="offsets and lag (or --members / --state)")
    action.add_argument("--delete", action="store_true", help="delete empty groups")
    action.add_argument("--reset-offsets", action="store_true", help="move committed offsets (dry run "
                                                                     "unless --execute)")
    action.add_argument("--delete-offsets", action="store_true",
                        help="delete the committed offsets of one --group for --topic (Kafka refuses topics "
                             "the group's members are subscribed to)")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--group", action="append", metavar="GROUP", help="a group (repeatable)")
    scope.add_argument("--all-groups", action="store_true")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="with --describe: one row per member")
    view.add_argument("--offsets", action="store_true", help="with --describe: offsets and lag (default)")
    view.add_argument("--state", nargs="*", metavar="STATE",
                      help="with --describe: the group's state; with --list: show (or filter by) state")
    parser.add_argument("--type", nargs="*", metavar="TYPE[,TYPE]",
                        help="with --list: show (or filter by) the group type: classic, consumer")
    parser.add_argument("--verbose", action="store_true", help="with --members: the assigned partitions")
    topics = parser.add_mutually_exclusive_group()
    topics.add_argument("--topic", action="append", metavar="TOPIC[:P,P]",
                        help="with --reset-offsets or --delete-offsets: a topic, or some of its "
                             "partitions (repeatable)")
    topics.add_argument("--all-topics", action="store_true",
                        help="with --reset-offsets: every topic the group has offsets for")
    spec = parser.add_mutually_exclusive_group()
    spec.add_argument("--to-earliest", action="store_true")
    spec.add_argument("--to-latest", action="store_true")
    spec.add_argument("--to-current", action="store_true")
    spec.add_argument("--to-offset", type=java_long, metavar="OFFSET")
    spec.add_argument("--shift-by", type=java_long, metavar="N")
    spec.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                      help="the first offset at or after this time (UTC unless an offset is given)")
    spec.add_argument("--by-duration", metavar="PnDTnHnMnS", help="the first offset this long ago")
    spec.add_argument("--from-file", metavar="CSV",
                      help="the offsets in this file: topic,partition,offset lines (group,topic,partition,"
                           "offset with several groups), as --export writes them")
    run = parser.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="show the new offsets only (the default)")
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    parser.add_argument("--export", action="store_true",
                        help="with --reset-offsets: print the new offsets as CSV, for --from-file")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS")
    parser.set_defaults(func=_run)


def _consumer_groups(client: GroupClient, states: Sequence[str] = ()) -> list[GroupListing]:
    """The consumer groups, as Kafka's admin listConsumerGroups keeps them: protocol type "consumer"
    or none (an empty classic group, a KIP-848 group). Share groups are kafka-share-groups.sh's, and
    Connect's or other clients' groups are no consumer groups either."""
    return [g for g in client.list_groups(states) if g.protocol_type in (_CONSUMER_PROTOCOL, "")]


def _groups(client: GroupClient, args: argparse.Namespace) -> list[str]:
    if args.all_groups:  # only consumer groups: --delete --all-groups must not reach a share group
        return [g.group_id for g in _consumer_groups(client)]
    if not args.group:
        raise _Usage("one of --group or --all-groups is required")
    return list(args.group)


def _states(values: Sequence[str]) -> list[str]:
    """``--list --state`` values, comma-separated and case-blind as Kafka's ConsumerGroupState.parse
    reads them, in the spelling ListGroups filters by (the broker compares them as given)."""
    by_name = {state.lower(): state for state in _STATES}
    parsed: list[str] = []
    for value in values:
        for part in value.split(","):
            state = by_name.get(part.strip().lower())
            if state is None:
                raise _Usage(f"Invalid state list '{value}'. Valid states are: {', '.join(_STATES)}")
            parsed.append(state)
    return parsed


def _types(values: Sequence[str]) -> list[str]:
    """``--list --type`` values, comma-separated and case-blind (Kafka's GroupType.parse), in the
    spelling ListGroups filters by."""
    parsed: list[str] = []
    for value in values:
        for part in value.split(","):
            if part.strip().lower() not in {t.lower() for t in _TYPES}:
                raise _Usage(f"Invalid types list '{value}'. Valid types are: {', '.join(_TYPES)}")
            parsed.append(part.strip().lower())
    return parsed


def _type_name(group_type: str) -> str:
    """A ListGroups group type as Kafka's tool prints it (GroupType's name; Unknown when not told)."""
    return next((t for t in _TYPES if t.lower() == group_type.lower()), "Unknown")


def _list(client: GroupClient, args: argparse.Namespace) -> str:
    states = _states(args.state or ())
    types = _types(args.type or ())
    listed = [g for g in _consumer_groups(client, states)
              if not types or g.group_type.lower() in types or not g.group_type]
    if args.json:
        return json.dumps({"groups": [{"group": g.group_id, "state": g.state or None,
                                       "type": _type_name(g.group_type),
                                       "protocol_type": g.protocol_type} for g in listed]})
    if args.state is not None or args.type is not None:
        headers = ["GROUP", *(["TYPE"] if args.type is not None else []),
                   *(["STATE"] if args.state is not None else [])]
        return table(headers, ([g.group_id, *([_type_name(g.group_type)] if args.type is not None else []),
                                *([g.state or None] if args.state is not None else [])] for g in listed))
    return "\n".join(g.group_id for g in listed)


def _offset_rows(client: GroupClient, group: GroupDescription) -> list[dict[str, Any]]:
    """One row per partition the group has an offset for or a member owns, with the lag."""
    committed = {(c.topic, c.partition): c.offset for c in client.committed(group.group_id)}
    owners = {tp: m for m in group.members for tp in m.assignment}
    listed = sorted(committed.keys() | owners.keys())
    missing = _missing_partitions(client, listed)
    rows = []
    for topic, partition in listed:
        # A partition whose topic is gone has no log end: "-" in both columns (KAFKA-17218),
        # where asking its leader would wait out the whole --timeout and fail the command.
        end = client.list_offset(topic, partition, LATEST) if (topic, partition) not in missing else None
        current = committed.get((topic, partition))
        member = owners.get((topic, partition))
        rows.append({"group": group.group_id, "topic": topic, "partition": partition,
                     "current_offset": current, "log_end_offset": end,
                     # Kafka shows a negative lag as it is: an offset past the log end (a log
                     # truncated under the group) is worth seeing, not hiding as 0.
                     "lag": None if current is None or end is None else end - current,
                     "consumer_id": member and member.member_id, "host": member and member.client_host,
                     "client_id": member and member.client_id})
    return rows


def _missing_partitions(client: GroupClient, listed: Sequence[tuple[str, int]]) -> set[tuple[str, int]]:
    """The partitions of ``listed`` that no longer exist: their topic is answered
    UNKNOWN_TOPIC_OR_PARTITION (deleted), or it lists partitions and not this one (made again
    with fewer). A topic still being made (no partitions yet) is not missing."""
    if not listed:
        return set()
    infos = {info.name: info for info in client.topics(sorted({topic for topic, _ in listed}))}
    missing = set()
    for topic, partition in listed:
        info = infos.get(topic)
        if info is None or info.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or (
                info.partitions and partition not in {p.partition for p in info.partitions}):
            missing.add((topic, partition))
    return missing


def _assignment_cell(assignment: Sequence[tuple[str, int]]) -> str | None:
    """``--members --verbose``'s ASSIGNMENT as Kafka prints it: ``orders(0,2), audit(1)``, topics in
    name order, None (``-``) for a member without partitions."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assignment:
        by_topic.setdefault(topic, []).append(partition)
    return ", ".join(f"{topic}({','.join(str(p) for p in sorted(parts))})"
                     for topic, parts in sorted(by_topic.items())) or None


def _describe(client: GroupClient, args: argparse.Namespace, warn: list[str]) -> tuple[str, bool]:
    """The groups' offsets, members or states; False when a group does not exist, which fails the
    command after the others are shown (kafka-consumer-groups.sh prints the same line but exits 0,
    as it does after any failure; its share and streams group tools exit 1)."""
    out_json: list[dict[str, Any]] = []
    blocks: list[str] = []
    found_all = True
    for group_id in _groups(client, args):
        group = client.describe_group(group_id)
        # Dead: no such group, as DescribeGroups before v6 says it; GROUP_ID_NOT_FOUND: as
        # ConsumerGroupDescribe and DescribeGroups v6 say it, or the id is another type's group.
        if group.state == "Dead" or group.error is ErrorCode.GROUP_ID_NOT_FOUND:
            warn.append(f"Error: Consumer group '{group_id}' does not exist.")
            found_all = False
            continue
        if group.error is not ErrorCode.NONE:
            raise ClientError(f"describe group {group_id!r}: {group.error.name}")
        if group.state == "Empty":
            warn.append(f"Consumer group '{group_id}' has no active members.")
        elif group.state in _REBALANCING:
            warn.append(f"Warning: Consumer group '{group_id}' is rebalancing.")
        if args.state is not None:
            address = client.address(group.coordinator)
            row = {"group": group_id, "coordinator": group.coordinator, "coordinator_address": address,
                   "assignment_strategy": group.protocol, "state": group.state, "members": len(group.members)}
            out_json.append(row)
            blocks.append(table(("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                                [(group_id, f"{address}  ({group.coordinator})", group.protocol or None,
                                  group.state, len(group.members))]))
        elif args.members:
            members = [{"group": group_id, "consumer_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "host": m.client_host, "client_id": m.client_id, "partitions": len(m.assignment),
                        "assignment": [f"{t}-{p}" for t, p in m.assignment]} for m in group.members]
            out_json.extend(members)
            # Kafka's tool shows GROUP-INSTANCE-ID only when a member has one (static membership).
            static = any(m.group_instance_id for m in group.members)
            headers = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if static else []), "HOST",
                       "CLIENT-ID", "#PARTITIONS"]
            keys = ["group", "consumer_id", *(["group_instance_id"] if static else []), "host", "client_id",
                    "partitions"]
            member_rows: list[list[Any]] = [[m[k] for k in keys] for m in members]
            if args.verbose:
                headers.append("ASSIGNMENT")
                for member_row, member in zip(member_rows, group.members):
                    member_row.append(_assignment_cell(member.assignment))
            blocks.append(table(headers, member_rows))
        else:
            offsets = _offset_rows(client, group)
            out_json.extend(offsets)
            if not offsets:  # Kafka's tool prints no table for a group without a row to show
                continue
            columns = ("group", "topic", "partition", "current_offset", "log_end_offset", "lag",
                       "consumer_id", "host", "client_id")
            blocks.append(table([c.upper().replace("_", "-") for c in columns],
                                ([r[k] for k in columns] for r in offsets)))
    return (json.dumps({"groups": out_json}) if args.json else "\n\n".join(blocks)), found_all


def _delete(client: GroupClient, args: argparse.Namespace, warn: list[str]) -> tuple[str, bool]:
    group_ids = _groups(client, args)
    results = client.delete_groups(group_ids)
    failed = {g: e for g, e in results.items() if e is not ErrorCode.NONE}
    if args.json:
        return json.dumps({"deleted": [g for g in group_ids if g not in failed],
                           "failed": {g: e.name for g, e in failed.items()}}), not failed
    done = [g for g in group_ids if g not in failed]
    lines = []
    if done:
        names = ", ".join(f"'{g}'" for g in done)
        lines.append(f"Deletion of requested consumer groups ({names}) was successful.")
    if failed:
        warn.append("Error: Deletion of some consumer groups failed:")
        warn.extend(f"* Group '{g}' could not be deleted due to: {e.name}" for g, e in failed.items())
    return "\n".join(lines), not failed


# java.time.Duration.parse's text: an optional sign, days, then after T hours, minutes and seconds
# (with a fraction), each signed; letters in either case.
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


def duration_ms(text: str) -> int:
    """``--by-duration``, read as Kafka reads it (Duration.parse), in ms; _Usage if it is none."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise _Usage(f"--by-duration {text!r}: expected an ISO-8601 duration like PT1H30M")
    sign, days, time_part, hours, minutes, seconds, fraction = match.groups()
    if (time_part is not None and hours is None and minutes is None and seconds is None) or \
            (days is None and time_part is None):
        raise _Usage(f"--by-duration {text!r}: expected an ISO-8601 duration like PT1H30M")
    whole_minutes = (int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)
    whole_seconds = whole_minutes * 60 + int(seconds or 0)
    fraction_ms = int((fraction or "").ljust(3, "0")[:3])
    if seconds is not None and seconds.startswith("-"):
        fraction_ms = -fraction_ms  # Java: the fraction takes the seconds' sign
    total = whole_seconds * 1000 + fraction_ms
    return -total if sign == "-" else total


def _timestamp_ms(args: argparse.Namespace) -> int | None:
    """The time --to-datetime or --by-duration names, in ms since the epoch."""
    if args.to_datetime is not None:
        return datetime_ms(args.to_datetime)
    if args.by_duration is not None:
        since_ms = int(datetime.now(timezone.utc).timestamp() * 1000) - duration_ms(args.by_duration)
        if not -(2**63) <= since_ms < 2**63:  # Kafka overflows too; ListOffsets could not carry it
            raise _Usage(f"--by-duration {args.by_duration!r} reaches past what a timestamp can hold")
        return since_ms
    return None


def _targets(client: GroupClient, args: argparse.Namespace, group_id: str) -> list[tuple[str, int]]:
    if args.all_topics:
        return [(c.topic, c.partition) for c in client.committed(group_id)]
    chosen: list[tuple[str, int]] = []  # --topic, as _check made sure
    for topic, partitions in topic_arguments(args.topic):
        known = client.partitions(topic)
        # A partition the topic lacks fails at once, as Kafka's admin client fails its ListOffsets
        # (asked for it, the leader lookup would wait out the whole --timeout).
        missing = [p for p in partitions or () if p not in known]
        if missing:
            raise ClientError(f"{topic}-{missing[0]}: {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.name}")
        chosen.extend((topic, p) for p in (known if partitions is None else partitions))
    return sorted(set(chosen))


def _reset_plan(path: str, group_ids: Sequence[str]) -> dict[str, dict[tuple[str, int], int]]:
    """A --from-file plan: per group, the offset for each partition (kafka-consumer-groups.sh's CSV:
    no group column when one group is reset, a leading one otherwise)."""
    try:
        with open(path, encoding="utf-8", newline="") as plan_file:
            rows = [row for row in csv.reader(plan_file) if row and any(cell.strip() for cell in row)]
    except OSError as exc:
        raise _Usage(f"--from-file {path!r}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:  # not text; a field past csv's size limit
        raise _Usage(f"--from-file {path!r} is not a CSV file: {exc}") from None
    plan: dict[str, dict[tuple[str, int], int]] = {}
    for line, row in enumerate(rows, 1):
        cells = [cell.strip() for cell in row]
        if len(cells) == 3 and len(group_ids) == 1:
            cells.insert(0, group_ids[0])
        if len(cells) != 4:
            wanted = "topic,partition,offset" if len(group_ids) == 1 else "group,topic,partition,offset"
            raise _Usage(f"--from-file {path!r} line {line}: expected {wanted}, not {','.join(row)!r}")
        group, topic, partition, offset = cells
        try:
            number, position = java_integer(partition, 32), java_integer(offset, 64)
        except ValueError:
            raise _Usage(f"--from-file {path!r} line {line}: partition and offset must be numbers "
                         "(a Java int and long)") from None
        plan.setdefault(group, {})[(topic, number)] = position
    return plan


def _new_offset(client: GroupClient, args: argparse.Namespace, current: dict[tuple[str, int], int],
                tp: tuple[str, int], when: int | None) -> int:
    earliest = client.list_offset(*tp, EARLIEST)
    latest = client.list_offset(*tp, LATEST)
    if args.to_earliest:
        return earliest
    if args.to_latest:
        return latest
    if when is not None:
        return offset_at_time(client, *tp, when)
    if args.to_current:
        return current.get(tp, latest)
    if args.from_file is not None:
        wanted = current[tp]  # the plan's offset, clamped below as Kafka clamps it
    elif args.to_offset is not None:
        wanted = int(args.to_offset)
    else:  # --shift-by: from the committed offset, which Kafka requires (there is nothing to shift)
        if tp not in current:
            raise _Usage(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current "
                         "committed offset")
        wanted = current[tp] + int(args.shift_by)
    return min(max(wanted, earliest), latest)  # Kafka clamps into what the log holds


def _reset(client: GroupClient, args: argparse.Namespace, warn: list[str]) -> tuple[str, bool]:
    if not any((args.to_earliest, args.to_latest, args.to_current, args.to_datetime, args.by_duration,
                args.to_offset is not None, args.shift_by is not None, args.from_file is not None)):
        raise _Usage("--reset-offsets needs one of --to-earliest, --to-latest, --to-current, --to-offset, "
                     "--shift-by, --to-datetime, --by-duration, --from-file")
    if args.export and args.json:
        raise _Usage("--export and --json are two outputs: give one")
    when = _timestamp_ms(args)
    group_ids = _groups(client, args)
    plan = _reset_plan(args.from_file, group_ids) if args.from_file is not None else None
    planned: list[dict[str, Any]] = []
    refused = False
    for group_id in group_ids:
        group = client.describe_group(group_id)
        if group.state not in _INACTIVE:
            # Kafka's tool skips this group and still resets the others it was given.
            warn.append(f"Error: Assignments can only be reset if the group '{group_id}' is inactive, but "
                        f"the current state is {group.state}.")
            refused = True
            continue
        if plan is not None:
            current = plan.get(group_id, {})
            if not current:
                warn.append(f"Error: No reset plan for group {group_id} found")
            targets = sorted(current)
        else:
            current = {(c.topic, c.partition): c.offset for c in client.committed(group_id)}
            targets = _targets(client, args, group_id)
        offsets = {tp: _new_offset(client, args, current, tp, when) for tp in targets}
        if args.execute and offsets:
            failed = {tp: e for tp, e in client.commit(group_id, offsets).items() if e is not ErrorCode.NONE}
            if failed:
                (topic, partition), error = next(iter(failed.items()))
                raise ClientError(f"committing the reset of group '{group_id}' failed for "
                                  f"{topic}-{partition}: {error.name}")
        planned.extend({"group": group_id, "topic": t, "partition": p, "new_offset": o}
                       for (t, p), o in sorted(offsets.items()))
    if args.json:
        return json.dumps({"executed": bool(args.execute), "offsets": planned}), not refused
    if args.export:
        with_group = len(group_ids) > 1
        return "\n".join(",".join(str(r[k]) for k in (("group",) if with_group else ()) +
                                   ("topic", "partition", "new_offset")) for r in planned), not refused
    if refused and not planned:
        return "", False
    return table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
                 ([r["group"], r["topic"], r["partition"], r["new_offset"]] for r in planned)), not refused


# What kafka-consumer-groups.sh prints when OffsetDelete fails as a whole, by the group's error.
_DELETE_OFFSETS_REFUSALS: dict[ErrorCode, str] = {
    ErrorCode.INVALID_GROUP_ID: "Error: '{group}' is not valid.",
    ErrorCode.GROUP_ID_NOT_FOUND: "Error: '{group}' does not exist.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Error: Access to '{group}' is not authorized.",
    ErrorCode.NON_EMPTY_GROUP:
        "Error: Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty.",
}
_NOT_PROVIDED = "Not Provided"  # the PARTITION cell of a topic that could not be expanded to partitions


def _delete_offsets(client: GroupClient, args: argparse.Namespace, warn: list[str]) -> tuple[str, bool]:
    if not args.group or len(args.group) != 1:
        raise _Usage("--delete-offsets takes exactly one --group")
    if not args.topic:
        raise _Usage("--delete-offsets needs --topic")
    (group_id,) = args.group
    results: dict[tuple[str, int], ErrorCode] = {}
    partitions: list[tuple[str, int]] = []
    for topic, named in topic_arguments(args.topic):
        if named is not None:
            partitions.extend((topic, p) for p in named)
            continue
        try:
            partitions.extend((topic, p) for p in client.partitions(topic))
        except ClientError:
            results[(topic, -1)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    error = ErrorCode.NONE
    if partitions:
        error, answered = client.delete_offsets(group_id, partitions)
        results.update(answered)
    failed_partition = next((e for e in results.values() if e is not ErrorCode.NONE), None)
    ok = error is ErrorCode.NONE and failed_partition is None
    if args.json:
        return json.dumps({"group": group_id, "error": None if error is ErrorCode.NONE else error.name,
                           "partitions": [{"topic": t, "partition": p if p >= 0 else None,
                                           "error": None if e is ErrorCode.NONE else e.name}
                                          for (t, p), e in sorted(results.items())]}), ok
    if error is not ErrorCode.NONE and error in _DELETE_OFFSETS_REFUSALS:
        warn.append(_DELETE_OFFSETS_REFUSALS[error].format(group=group_id))
        return "", False
    if error is not ErrorCode.NONE:
        warn.append(f"Error: Encounter some unknown error: {error.name}")
        return "", False
    lines = []
    if failed_partition is None:
        topics = ", ".join(args.topic)
        lines.append(f"Request succeed for deleting offsets with topic {topics} group {group_id}")
    else:
        warn.append("Error: Encounter some partition level error, see the follow-up details:")
    rows = [(t, p if p >= 0 else _NOT_PROVIDED, "Successful" if e is ErrorCode.NONE else f"Error: {e.name}")
            for (t, p), e in sorted(results.items())]
    lines.append(table(("TOPIC", "PARTITION", "STATUS"), rows))
    return "\n\n".join(lines), ok


def _check(args: argparse.Namespace) -> None:
    """The option combinations kafka-consumer-groups.sh refuses before asking the cluster anything."""
    if args.delete and args.topic:
        # Deleting a group drops all of its offsets: a --topic here is a mistake, not a filter.
        raise _Usage("The consumer does not support topic-specific offset deletion from a consumer group.")
    if args.topic and (args.list or args.describe):
        raise _Usage(f"Option --topic can't be used with option {'--list' if args.list else '--describe'}")
    if args.group and args.list:
        raise _Usage("Option --group can't be used with option --list")
    if args.type is not None and not args.list:
        raise _Usage("Option --type is only available with --list")
    if args.describe and args.state:
        raise _Usage("Option --describe does not take a value for --state")
    # Read before anything is sent (Kafka's tool asks for the groups first): a mistake here is a
    # usage error even when no broker answers.
    if args.reset_offsets and not (args.topic or args.all_topics or args.from_file is not None):
        raise _Usage("one of --topic or --all-topics is required with --reset-offsets")
    topic_arguments(args.topic or ())


def _run(args: argparse.Namespace) -> int:
    prog = "kafkapy groups"
    warn: list[str] = []
    ok = True
    try:
        _check(args)
        with GroupClient(args.bootstrap_server, args.timeout, security=client_options(args)) as client:
            if args.list:
                out = _list(client, args)
            elif args.describe:
                out, ok = _describe(client, args, warn)
            elif args.delete:
                out, ok = _delete(client, args, warn)
            elif args.delete_offsets:
                out, ok = _delete_offsets(client, args, warn)
            else:
                out, ok = _reset(client, args, warn)
    except _Usage as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except ClientError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    for line in warn:
        print(line, file=sys.stderr)
    if out:
        print(out)
    return 0 if ok else 1
