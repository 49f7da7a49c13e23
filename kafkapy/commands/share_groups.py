"""``kafkapy share-groups``: list, describe, delete KIP-932 share groups and reset or delete their
offsets, as kafka-share-groups.sh does.

The flags, the argument checks, the columns and the messages are those of Kafka 4.1's
ShareGroupCommand: ``--describe`` shows GROUP TOPIC PARTITION START-OFFSET LAG (the start offset is
the share-partition start offset, the lag DescribeShareGroupOffsets v1's); ``--reset-offsets``
(``--to-earliest``, ``--to-latest``, ``--to-datetime``) is a dry run unless ``--execute`` and needs
an empty group; ``--delete`` deletes empty groups only. ``--json`` prints the same facts for scripts.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kafkapy.client import ClientError
from kafkapy.commands._admin import error_text
from kafkapy.commands._group_cli import Usage, datetime_ms, offset_at_time, table, topic_arguments
from kafkapy.commands._partitions import EARLIEST, LATEST
from kafkapy.commands._security import add_command_config, client_options
from kafkapy.commands._share_groups import (
    Outcome,
    ShareGroupClient,
    ShareGroupDescription,
    ShareMember,
    SharePartitionOffset,
)
from kafkapy.errors import ErrorCode

__all__ = ["register"]

PROG = "kafkapy share-groups"
STATES = ("Empty", "Stable", "Dead")  # a share group's states (Kafka's GroupState for type SHARE)
_ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
_RESETS = ("to_datetime", "to_earliest", "to_latest")
# The errors of DeleteShareGroupOffsets that are the group's, told by their message alone.
_GROUP_REFUSALS = frozenset({ErrorCode.INVALID_GROUP_ID, ErrorCode.GROUP_ID_NOT_FOUND,
                             ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.NON_EMPTY_GROUP})
_TOPIC_ERRORS = frozenset({ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
# The options that go with some actions only (joptsimple's availableIf in Kafka's tool).
_ONLY_WITH: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("members", ("describe",)), ("offsets", ("describe",)), ("verbose", ("describe",)),
    ("state", ("describe", "list")), ("all_groups", ("describe", "delete")),
    *((o, ("reset_offsets",)) for o in ("all_topics", "dry_run", "execute", *_RESETS)))


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "share-groups", help="list, describe, delete share groups, reset offsets (kafka-share-groups.sh)",
        description="KIP-932 share group administration with kafka-share-groups.sh's flags and columns.")
    parser.add_argument("--bootstrap-server", "-b", required=True, metavar="HOST:PORT")
    add_command_config(parser)
    parser.add_argument("--list", action="store_true", help="list the share groups")
    parser.add_argument("--describe", action="store_true",
                        help="start offsets and lag (or --members / --state) of --group or --all-groups")
    parser.add_argument("--delete", action="store_true", help="delete empty share groups")
    parser.add_argument("--reset-offsets", action="store_true",
                        help="move one empty group's start offsets (a dry run unless --execute)")
    parser.add_argument("--delete-offsets", action="store_true",
                        help="forget one empty group's share-partitions of each --topic")
    parser.add_argument("--group", action="append", metavar="GROUP", help="a share group (repeatable)")
    parser.add_argument("--all-groups", action="store_true",
                        help="with --describe or --delete: every share group")
    parser.add_argument("--members", action="store_true", help="with --describe: one row per member")
    parser.add_argument("--offsets", action="store_true",
                        help="with --describe: start offsets and lag (the default)")
    parser.add_argument("--state", nargs="?", const="", metavar="STATE[,STATE]",
                        help="with --describe: the group's state; with --list: show (or filter by) state "
                             f"({', '.join(STATES)})")
    parser.add_argument("--verbose", action="store_true",
                        help="with --describe: leader epochs, member epochs, group and assignment epochs")
    parser.add_argument("--topic", action="append", metavar="TOPIC[:P,P]",
                        help="with --reset-offsets: a topic, or some of its partitions; with "
                             "--delete-offsets: a topic (repeatable)")
    parser.add_argument("--all-topics", action="store_true",
                        help="with --reset-offsets: every topic the group has start offsets for "
                             "(the default)")
    parser.add_argument("--to-earliest", action="store_true")
    parser.add_argument("--to-latest", action="store_true")
    parser.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                        help="the first offset at or after this time (UTC unless an offset is given)")
    parser.add_argument("--dry-run", action="store_true", help="show the new offsets only (the default)")
    parser.add_argument("--execute", action="store_true", help="set the new start offsets")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS")
    parser.set_defaults(func=_run)


def _given(args: argparse.Namespace, name: str) -> bool:
    value = getattr(args, name)
    return value is not None and value is not False


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


class _Refused(Exception):
    """A refusal in the words kafka-share-groups.sh prints it, printed as it is."""


def _check(args: argparse.Namespace) -> None:
    """ShareGroupCommandOptions.checkArgs's rules and wording (options spelled as typed)."""
    actions = [a for a in _ACTIONS if _given(args, a)]
    if len(actions) != 1:
        raise Usage("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
                    "--delete-offsets.")
    (action,) = actions
    for option, allowed in _ONLY_WITH:
        if _given(args, option) and action not in allowed:
            raise Usage(f"Option {_flag(option)} is only available with "
                        f"{' or '.join(_flag(a) for a in allowed)}")
    if action == "describe":
        if not args.group and not args.all_groups:
            raise Usage("Option --describe takes one of these options: --all-groups, --group")
        if sum(_given(args, o) for o in ("members", "offsets", "state")) > 1:
            raise Usage("Option --describe takes at most one of these options: --members, --offsets, --state")
        if args.state:
            raise Usage("Option --describe does not take a value for --state")
    if action == "delete":
        if not args.group and not args.all_groups:
            raise Usage("Option --delete takes the options --group or --all-groups")
        if args.group and args.all_groups:
            raise Usage("Option --delete takes either --group or --all-groups, not both.")
        if args.topic:
            raise Usage("Option --delete does not take the option: --topic")
    if action == "delete_offsets":
        if not args.group or not args.topic:
            raise Usage("Option --delete-offsets takes the following options: --group, --topic")
        if any(":" in t for t in args.topic):
            raise Usage("Option --delete-offsets takes whole topics: --topic TOPIC, without partitions")
    if action == "reset_offsets":
        if args.dry_run and args.execute:
            raise Usage("Option --reset-offsets only accepts one of --execute and --dry-run")
        if not args.group:
            raise Usage("Option --reset-offsets takes the option: --group")
        chosen = [r for r in _RESETS if _given(args, r)]
        if len(chosen) > 1:
            raise Usage(f'Option "{_flag(chosen[0])}" can\'t be used with option "{_flag(chosen[1])}"')
        if not chosen:
            raise Usage("Option --reset-offsets requires one of the following scenarios: --to-datetime, "
                        "--to-earliest, --to-latest")
        if args.topic and args.all_topics:
            raise Usage('Option "--topic" can\'t be used with option "--all-topics"')
        topic_arguments(args.topic or ())  # T:P,P read before anything is sent
    if args.group and args.all_groups:
        raise Usage('Option "--group" can\'t be used with option "--all-groups"')
    if args.group and action == "list":
        raise Usage('Option "--group" can\'t be used with option "--list"')
    if args.group and len(args.group) > 1 and action in ("reset_offsets", "delete_offsets"):
        raise Usage(f"Option {_flag(action)} supports one share group at a time")
    if args.topic and action in ("list", "describe"):
        raise Usage(f'Option "--topic" can\'t be used with option "{_flag(action)}"')


def _states(text: str) -> list[str]:
    """``--list --state`` values, comma-separated and case-blind, as Kafka's GroupState.parse reads them."""
    by_name = {s.lower(): s for s in STATES}
    parsed = [by_name.get(part.strip().lower()) for part in text.split(",")]
    if any(s is None for s in parsed):
        raise Usage(f"Invalid state list '{text}'. Valid states are: {', '.join(STATES)}")
    return [s for s in parsed if s is not None]


def _list(client: ShareGroupClient, args: argparse.Namespace) -> str:
    listed = client.list_share_groups(_states(args.state) if args.state else ())
    if args.json:
        return json.dumps({"groups": [{"group": g.group_id, "state": g.state or None} for g in listed]})
    if args.state is not None:
        return table(("GROUP", "STATE"), ((g.group_id, g.state or None) for g in listed))
    return "\n".join(g.group_id for g in listed)


def _described(client: ShareGroupClient, group_id: str) -> ShareGroupDescription:
    group = client.describe_share_group(group_id)
    if group.error is ErrorCode.GROUP_ID_NOT_FOUND or group.state == "Dead":
        raise _Refused(f"Error: Share group '{group_id}' does not exist.")
    if group.error is not ErrorCode.NONE:
        raise ClientError(f"describe share group {group_id!r}: {error_text(group.error, group.message)}")
    return group


def _offsets(client: ShareGroupClient, group: ShareGroupDescription) -> list[SharePartitionOffset]:
    """The group's start offsets, on the topics it has state for or its members subscribe to."""
    group_id = group.group_id
    error, message, offsets = client.share_offsets(group_id, sorted({t for m in group.members
                                                                     for t in m.subscribed}))
    if error is not ErrorCode.NONE:
        raise ClientError(f"describe offsets of share group {group_id!r}: {error_text(error, message)}")
    return offsets


def _assignment(member: ShareMember) -> str | None:
    """Kafka's ASSIGNMENT cell: ``topic:0,1;other:2``, topics sorted."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in member.assignment:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items())) or None


def _describe(client: ShareGroupClient, args: argparse.Namespace, warn: list[str]) -> str:
    chosen = [g.group_id for g in client.list_share_groups()] if args.all_groups else args.group
    group_ids = sorted(set(chosen))
    out_json: list[dict[str, Any]] = []
    blocks: list[str] = []
    for group_id in group_ids:
        group = _described(client, group_id)
        if args.state is not None:
            if group.state == "Empty":
                warn.append(f"Share group '{group_id}' has no active members.")
            coordinator = f"{group.coordinator_address}  ({group.coordinator})"
            out_json.append({"group": group_id, "coordinator": group.coordinator,
                             "coordinator_address": group.coordinator_address, "state": group.state,
                             "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                             "members": len(group.members)})
            if args.verbose:
                blocks.append(table(("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH",
                                     "#MEMBERS"), [(group_id, coordinator, group.state, group.group_epoch,
                                                    group.assignment_epoch, len(group.members))]))
            else:
                blocks.append(table(("GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"),
                                    [(group_id, coordinator, group.state, len(group.members))]))
        elif args.members:
            if not group.members:
                warn.append(f"Share group '{group_id}' has no active members.")
                continue
            out_json.extend({"group": group_id, "consumer_id": m.member_id, "host": m.client_host,
                             "client_id": m.client_id, "partitions": len(m.assignment),
                             "member_epoch": m.member_epoch,
                             "assignment": [f"{t}-{p}" for t, p in m.assignment]} for m in group.members)
            headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                       *(["MEMBER-EPOCH"] if args.verbose else []), "ASSIGNMENT"]
            blocks.append(table(headers, (
                [group_id, m.member_id, m.client_host, m.client_id, len(m.assignment),
                 *([m.member_epoch] if args.verbose else []), _assignment(m)] for m in group.members)))
        else:
            offsets = _offsets(client, group)
            out_json.extend({"group": group_id, "topic": o.topic, "partition": o.partition,
                             "leader_epoch": o.leader_epoch, "start_offset": o.start_offset, "lag": o.lag}
                            for o in offsets)
            if not offsets:
                blocks.append(f"Share group '{group_id}' has no offset information.")
                continue
            headers = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if args.verbose else []),
                       "START-OFFSET", "LAG"]
            blocks.append(table(headers, ([group_id, o.topic, o.partition,
                                           *([o.leader_epoch] if args.verbose else []), o.start_offset, o.lag]
                                          for o in offsets)))
    return json.dumps({"groups": out_json}) if args.json else "\n\n".join(blocks)


def _quoted(group_ids: list[str]) -> str:
    return ", ".join(f"'{g}'" for g in group_ids)


def _delete(client: ShareGroupClient, args: argparse.Namespace, warn: list[str]) -> tuple[str, bool]:
    """ShareGroupCommand's pre-checks on the listing (not a share group, dead, not empty), then
    DeleteGroups for the rest."""
    listed = {g.group_id: g for g in client.list_share_groups()}
    group_ids = sorted(listed) if args.all_groups else list(dict.fromkeys(args.group))
    failed: dict[str, str] = {}
    for group_id in group_ids:
        listing = listed.get(group_id)
        if listing is None:
            failed[group_id] = f"GROUP_ID_NOT_FOUND: Group '{group_id}' is not a share group."
        elif listing.state == "Dead":
            failed[group_id] = f"Share group '{group_id}' group state is DEAD."
        elif listing.state and listing.state != "Empty":
            failed[group_id] = f"NON_EMPTY_GROUP: Share group '{group_id}' is not EMPTY."
    to_delete = [g for g in group_ids if g not in failed]
    results = client.delete_groups(to_delete) if to_delete else {}
    failed.update({g: e.name for g, e in results.items() if e is not ErrorCode.NONE})
    done = [g for g in to_delete if g not in failed]
    if args.json:
        return json.dumps({"deleted": done, "failed": failed}), not failed
    if not failed:
        return f"Deletion of requested share groups ({_quoted(done)}) was successful.", True
    warn.append("Error: Deletion of some share groups failed:")
    warn.extend(f"* Group '{g}' could not be deleted due to: {why}" for g, why in failed.items())
    if done:
        return f"These share groups were deleted successfully: {_quoted(done)}", False
    return "", False


def _reset(client: ShareGroupClient, args: argparse.Namespace) -> str:
    (group_id,) = args.group
    when = datetime_ms(args.to_datetime) if args.to_datetime is not None else None
    group = client.describe_share_group(group_id)
    if group.error not in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND):
        raise ClientError(f"describe share group {group_id!r}: {error_text(group.error, group.message)}")
    if group.error is ErrorCode.NONE and group.state not in ("Empty", "Dead"):
        raise _Refused(f"Share group '{group_id}' is not empty.")
    targets: list[tuple[str, int]] = []
    if args.topic:
        missing = []
        for topic, partitions in topic_arguments(args.topic):
            existing = client.partitions(topic)
            named = existing if partitions is None else partitions
            missing += [f"{topic}-{p}" for p in named if p not in existing]
            targets.extend((topic, p) for p in named)
        if missing:  # Kafka's check before it asks for any offset
            raise ClientError(f'The partitions "{",".join(missing)}" does not exist')
    elif group.error is ErrorCode.NONE:  # every partition the group keeps a start offset for
        targets = [(o.topic, o.partition) for o in _offsets(client, group)]
    new: dict[tuple[str, int], int] = {}
    for topic, partition in sorted(set(targets)):
        if when is not None:
            new[(topic, partition)] = offset_at_time(client, topic, partition, when)
        else:
            spec = EARLIEST if args.to_earliest else LATEST
            new[(topic, partition)] = client.list_offset(topic, partition, spec)
    if args.execute and new:
        _raise_failed(group_id, client.alter_share_offsets(group_id, new))
    if args.json:
        return json.dumps({"executed": bool(args.execute),
                           "offsets": [{"group": group_id, "topic": t, "partition": p, "new_offset": o}
                                       for (t, p), o in sorted(new.items())]})
    return table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
                 ([group_id, t, p, o] for (t, p), o in sorted(new.items())))


def _raise_failed(group_id: str, outcome: Outcome) -> None:
    if outcome.error is ErrorCode.NON_EMPTY_GROUP:
        raise _Refused(f"Share group '{group_id}' is not empty.")
    if outcome.error is not ErrorCode.NONE:
        raise ClientError(f"resetting share group '{group_id}': {error_text(outcome.error, outcome.message)}")
    for item, (error, message) in sorted(outcome.items.items()):
        if error is not ErrorCode.NONE:
            raise ClientError(f"resetting share group '{group_id}' failed for {item}: "
                              f"{error_text(error, message)}")


def _delete_offsets(client: ShareGroupClient, args: argparse.Namespace, warn: list[str]) -> tuple[str, bool]:
    (group_id,) = args.group
    outcome = client.delete_share_offsets(group_id, args.topic)
    ok = outcome.error is ErrorCode.NONE and all(e is ErrorCode.NONE for e, _ in outcome.items.values())
    if args.json:
        return json.dumps({"group": group_id,
                           "error": None if outcome.error is ErrorCode.NONE else outcome.error.name,
                           "topics": [{"topic": t, "error": None if e is ErrorCode.NONE else e.name}
                                      for t, (e, _) in sorted(outcome.items.items())]}), ok
    if outcome.error in _GROUP_REFUSALS:
        warn.append(f"Error: {outcome.message or outcome.error.name}")
        return "", False
    if outcome.error is not ErrorCode.NONE and outcome.error not in _TOPIC_ERRORS:
        warn.append(f"Error: Encounter some unknown error: {error_text(outcome.error, outcome.message)}")
        return "", False
    rows = [(t, "Successful" if e is ErrorCode.NONE else f"Error: {m or e.name}")
            for t, (e, m) in sorted(outcome.items.items())]
    return table(("TOPIC", "STATUS"), rows), ok


def _run(args: argparse.Namespace) -> int:
    warn: list[str] = []
    ok = True
    try:
        _check(args)
        with ShareGroupClient(args.bootstrap_server, args.timeout, "kafkapy-share-groups",
                              security=client_options(args)) as client:
            if args.list:
                out = _list(client, args)
            elif args.describe:
                out = _describe(client, args, warn)
            elif args.delete:
                out, ok = _delete(client, args, warn)
            elif args.delete_offsets:
                out, ok = _delete_offsets(client, args, warn)
            else:
                out = _reset(client, args)
    except Usage as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except _Refused as exc:
        print(exc, file=sys.stderr)
        return 1
    except ClientError as exc:
        print(f"{PROG}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    for line in warn:
        print(line, file=sys.stderr)
    if out:
        print(out)
    return 0 if ok else 1

