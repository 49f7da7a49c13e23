"""``kafkapy acls``: add, remove and list ACLs, like kafka-acls.sh (its flags, its output).

``--add`` sends CreateAcls, ``--remove`` DeleteAcls and ``--list`` DescribeAcls (version 3) to the
bootstrap broker, which keeps them in the cluster's metadata store. As kafka-acls.sh: the
operation defaults to All, a principal's host to ``*``, the pattern type to LITERAL (``--list``
without a resource lists every ACL); ``--remove`` asks before it deletes unless
``--force``; ``--remove`` without a principal removes every ACL of the resources named. The
broker's answer is printed in kafka-acls.sh's words (``ResourcePattern(resourceType=TOPIC,
name=orders, patternType=LITERAL)``, ``(principal=User:alice, host=*, operation=READ,
permissionType=ALLOW)``). ``--command-config`` logs in as Kafka's tools do (kafkapy.commands._security);
without it the broker sees the principal its listener gives (``User:ANONYMOUS`` on PLAINTEXT).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from kafkapy.acls.model import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    from_name,
)
from kafkapy.client import ClientError, SimpleClient
from kafkapy.commands._security import add_connection_options, client_options
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

__all__ = ["register"]

VERSION = 3  # of DescribeAcls, CreateAcls and DeleteAcls

Resource = tuple[ResourceType, str]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "acls", help="add, remove and list ACLs, like kafka-acls.sh",
        description="Add (CreateAcls), remove (DeleteAcls) or list (DescribeAcls) ACLs with "
                    "kafka-acls.sh's flags.")
    add_connection_options(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add the ACLs described")
    action.add_argument("--remove", action="store_true", help="remove the ACLs described")
    action.add_argument("--list", action="store_true", help="list the ACLs of the resources named (or all)")
    parser.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="Type:name (User:alice, User:*) granted (repeatable)")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="Type:name denied (repeatable)")
    parser.add_argument("--principal", action="append", default=[], metavar="PRINCIPAL",
                        help="--list: only the ACLs of this principal (repeatable)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                        help="the host the allow principals may come from (default *)")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                        help="the host the deny principals are denied from (default *)")
    parser.add_argument("--operation", action="append", default=[], metavar="OPERATION",
                        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, AlterConfigs, "
                             "DescribeConfigs, IdempotentWrite, CreateTokens, DescribeTokens or All "
                             "(repeatable; default All)")
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC")
    parser.add_argument("--group", action="append", default=[], metavar="GROUP")
    parser.add_argument("--transactional-id", action="append", default=[], metavar="ID")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--resource-pattern-type", metavar="TYPE",
                        help="LITERAL or PREFIXED (default LITERAL), or ANY or MATCH (--list, --remove)")
    parser.add_argument("--producer", action="store_true",
                        help="--add/--remove the producer's ACLs: Write, Describe and Create on --topic, "
                             "Write and Describe on --transactional-id")
    parser.add_argument("--idempotent", action="store_true",
                        help="with --producer: IdempotentWrite on the cluster too")
    parser.add_argument("--consumer", action="store_true",
                        help="--add/--remove the consumer's ACLs: Read and Describe on --topic, Read on "
                             "--group")
    parser.add_argument("--force", action="store_true", help="--remove without asking")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        # Every flag is checked before anything is sent, as kafka-acls.sh checks its options before
        # it asks the cluster (a --remove with --principal deleted the ACLs, then was refused).
        if args.principal and not args.list:
            raise ClientError("The --principal option is only available if --list is set")
        if args.add:
            planned, pattern_type = _add_plan(args)
        elif args.remove:
            planned, pattern_type = _remove_plan(args)
        else:
            planned, pattern_type = [], _listed_pattern_type(args)
        with SimpleClient(args.bootstrap_server, args.timeout, client_id="kafkapy-acls",
                          **client_options(args)) as client:
            if args.add:
                return _add(args, client, planned, pattern_type)
            if args.remove:
                return _remove(args, client, planned, pattern_type)
            return _list(args, client, pattern_type)
    except ClientError as exc:
        print(f"kafkapy acls: {exc}", file=sys.stderr)
        return 1


# --- the words of kafka-acls.sh ------------------------------------------------------------------

def pattern_text(resource_type: int, name: str, pattern_type: int) -> str:
    return (f"ResourcePattern(resourceType={ResourceType.from_code(resource_type).name}, name={name}, "
            f"patternType={PatternType.from_code(pattern_type).name})")


def entry_text(principal: str, host: str, operation: int, permission: int) -> str:
    return (f"(principal={principal}, host={host}, operation={AclOperation.from_code(operation).name}, "
            f"permissionType={AclPermissionType.from_code(permission).name})")


def _print_resource(heading: str, pattern: str, entries: Iterable[str]) -> None:
    lines = "\n".join(f"\t{entry}" for entry in entries)
    print(f"{heading} `{pattern}`: \n {lines} \n")


# --- reading the flags ---------------------------------------------------------------------------

def _resources(args: argparse.Namespace) -> list[Resource]:
    found: list[Resource] = [(ResourceType.TOPIC, t) for t in args.topic]
    found += [(ResourceType.GROUP, g) for g in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return found


def _pattern_type(args: argparse.Namespace, default: PatternType,
                  allowed: Iterable[PatternType]) -> PatternType:
    if args.resource_pattern_type is None:
        return default
    chosen = from_name(PatternType, args.resource_pattern_type)
    if chosen not in allowed:
        names = ", ".join(p.name for p in allowed)
        raise ClientError(f"--resource-pattern-type {args.resource_pattern_type} is not one of {names} here")
    return chosen


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    operations: list[AclOperation] = []
    for text in args.operation or ["All"]:
        operation = from_name(AclOperation, text)
        if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise ClientError(f"--operation {text} is not an ACL operation")
        operations.append(operation)
    return operations


Entry = tuple[str, str, AclOperation, AclPermissionType]  # principal, host, operation, permission


def _entries(args: argparse.Namespace, operations: Sequence[AclOperation] | None = None) -> list[Entry]:
    """(principal, host, operation, permission) for every principal, host and operation named
    (``operations``: the role's, instead of --operation)."""
    entries: list[Entry] = []
    for principals, hosts, permission in ((args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
                                          (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        for principal in principals:
            if ":" not in principal:
                raise ClientError(f"principal {principal!r} is not Type:name (User:alice)")
            for host in hosts or ["*"]:
                entries.extend((principal, host, operation, permission)
                               for operation in (_operations(args) if operations is None else operations))
    return entries


# The ACLs of kafka-acls.sh's --producer and --consumer, by resource type.
_PRODUCER = {ResourceType.TOPIC: (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE),
             ResourceType.TRANSACTIONAL_ID: (AclOperation.WRITE, AclOperation.DESCRIBE)}
_CONSUMER = {ResourceType.TOPIC: (AclOperation.READ, AclOperation.DESCRIBE),
             ResourceType.GROUP: (AclOperation.READ,)}


def _check_roles(args: argparse.Namespace) -> None:
    """kafka-acls.sh's rules for --producer, --consumer and --idempotent."""
    roles = args.producer or args.consumer
    if roles and args.list:
        raise ClientError("--producer and --consumer go with --add or --remove, not --list")
    if roles and (args.operation or args.deny_principal or args.deny_host):
        raise ClientError("--producer and --consumer choose the operations themselves and allow only: "
                          "no --operation, --deny-principal or --deny-host")
    if args.producer and not args.topic:
        raise ClientError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise ClientError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group or (
            not args.producer and (args.cluster or args.transactional_id))):
        raise ClientError("With --consumer you must specify a --topic and a --group and no --cluster or "
                          "--transactional-id option should be specified.")


def _resource_entries(args: argparse.Namespace) -> list[tuple[Resource, list[Entry]]]:
    """Each resource and the ACLs for it: the flags' entries on every resource named, or with
    --producer/--consumer each role's operations on the resources of its kinds."""
    if not (args.producer or args.consumer):
        entries = _entries(args)
        return [(resource, entries) for resource in _resources(args)]
    operations: dict[Resource, list[AclOperation]] = {}
    for role, wanted in ((_PRODUCER, args.producer), (_CONSUMER, args.consumer)):
        if not wanted:
            continue
        for resource in _resources(args):
            for operation in role.get(resource[0], ()):
                if operation not in operations.setdefault(resource, []):
                    operations[resource].append(operation)
    if args.idempotent:
        operations[(ResourceType.CLUSTER, CLUSTER_NAME)] = [AclOperation.IDEMPOTENT_WRITE]
    return [(resource, _entries(args, ops)) for resource, ops in operations.items() if ops]


def _check(code: int, message: str | None, what: str) -> None:
    if code != ErrorCode.NONE:
        raise ClientError(f"{what} failed: {ErrorCode(code).name}: {message or ''}".rstrip(": "))


# --- the actions -----------------------------------------------------------------------------------

Plan = list[tuple[Resource, list[Entry]]]


def _add_plan(args: argparse.Namespace) -> tuple[Plan, PatternType]:
    _check_roles(args)
    planned = _resource_entries(args)
    if not planned or not all(entries for _, entries in planned):
        raise ClientError("--add needs a resource (--topic, --group, --transactional-id or --cluster) and "
                          "--allow-principal or --deny-principal")
    return planned, _pattern_type(args, PatternType.LITERAL, (PatternType.LITERAL, PatternType.PREFIXED))


def _remove_plan(args: argparse.Namespace) -> tuple[Plan, PatternType]:
    _check_roles(args)
    planned = _resource_entries(args)
    if not planned:
        raise ClientError("--remove needs a resource (--topic, --group, --transactional-id or --cluster)")
    return planned, _pattern_type(args, PatternType.LITERAL, (PatternType.LITERAL, PatternType.PREFIXED,
                                                              PatternType.ANY, PatternType.MATCH))


def _listed_pattern_type(args: argparse.Namespace) -> PatternType:
    return _pattern_type(args, PatternType.LITERAL, list(PatternType)[1:])


def _add(args: argparse.Namespace, client: SimpleClient, planned: Plan, pattern_type: PatternType) -> int:
    for (resource_type, name), entries in planned:
        creations = [{"resource_type": resource_type, "resource_name": name,
                      "resource_pattern_type": pattern_type, "principal": principal, "host": host,
                      "operation": operation, "permission_type": permission}
                     for principal, host, operation, permission in entries]
        _print_resource("Adding ACLs for resource", pattern_text(resource_type, name, pattern_type),
                        [entry_text(*entry) for entry in entries])
        for result in client.request(ApiKey.CREATE_ACLS, VERSION, {"creations": creations})["results"]:
            _check(result["error_code"], result["error_message"], "CreateAcls")
    return _list(args, client, pattern_type)


def _remove(args: argparse.Namespace, client: SimpleClient, planned: Plan, pattern_type: PatternType) -> int:
    filters = []
    for (resource_type, name), entries in planned:
        shown = pattern_text(resource_type, name, pattern_type).replace("ResourcePattern(",
                                                                        "ResourcePatternFilter(")
        listed = "\n".join(f"\t{entry_text(*entry)}" for entry in entries)
        question = (f"Are you sure you want to remove ACLs: \n {listed} \n from resource filter "
                    f"`{shown}`? (y/n)" if entries else
                    f"Are you sure you want to delete all ACLs for resource filter `{shown}`? (y/n)")
        if not args.force and not _confirmed(question):
            continue
        base = {"resource_type_filter": resource_type, "resource_name_filter": name,
                "pattern_type_filter": pattern_type}
        if entries:
            filters += [{**base, "principal_filter": principal, "host_filter": host, "operation": operation,
                         "permission_type": permission} for principal, host, operation, permission in entries]
        else:
            filters.append({**base, "principal_filter": None, "host_filter": None,
                            "operation": AclOperation.ANY, "permission_type": AclPermissionType.ANY})
    if filters:
        for result in client.request(ApiKey.DELETE_ACLS, VERSION, {"filters": filters})["filter_results"]:
            _check(result["error_code"], result["error_message"], "DeleteAcls")
    return _list(args, client, pattern_type)


def _confirmed(question: str) -> bool:
    print(question)
    return sys.stdin.readline().strip().lower() == "y"


def _list(args: argparse.Namespace, client: SimpleClient, pattern_type: PatternType) -> int:
    """kafka-acls.sh's listing: the ACLs of the resources named, their pattern type LITERAL unless
    --resource-pattern-type says otherwise (every ACL when none is named); with --principal, one
    "ACLs for principal" block per principal, holding only that principal's ACLs."""
    named = _resources(args)
    if args.idempotent and (ResourceType.CLUSTER, CLUSTER_NAME) not in named:
        named.append((ResourceType.CLUSTER, CLUSTER_NAME))  # where --producer --idempotent added one
    queries: list[tuple[int, str | None, PatternType]] = [(t, n, pattern_type) for t, n in named] or [
        (ResourceType.ANY, None, PatternType.ANY)]
    seen: dict[tuple[int, str, int], list[tuple[str, str]]] = {}  # resource: [(principal, entry text)]
    for resource_type, name, pattern in queries:
        body = client.request(ApiKey.DESCRIBE_ACLS, VERSION, {
            "resource_type_filter": resource_type, "resource_name_filter": name,
            "pattern_type_filter": pattern, "principal_filter": None, "host_filter": None,
            "operation": AclOperation.ANY, "permission_type": AclPermissionType.ANY})
        _check(body["error_code"], body["error_message"], "DescribeAcls")
        for resource in body["resources"]:
            key = (resource["resource_type"], resource["resource_name"], resource["pattern_type"])
            entries = seen.setdefault(key, [])
            for acl in resource["acls"]:
                text = entry_text(acl["principal"], acl["host"], acl["operation"], acl["permission_type"])
                if (acl["principal"], text) not in entries:
                    entries.append((acl["principal"], text))
    for principal in args.principal or [None]:
        if principal is not None:
            print(f"ACLs for principal `{principal}`")
        for (resource_type, name, found_pattern), entries in seen.items():
            texts = [text for owner, text in entries if principal is None or owner == principal]
            if texts:
                _print_resource("Current ACLs for resource", pattern_text(resource_type, name, found_pattern),
                                texts)
    return 0
