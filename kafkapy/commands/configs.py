"""``kafkapy configs``: client and IP quotas, dynamic broker configs and topic configs, as
kafka-configs.sh manages them.

Entities are chosen as in kafka-configs.sh: ``--entity-type users|clients|ips|brokers|topics``
with ``--entity-name NAME`` or ``--entity-default`` (a user and a client
together: two of each, in order), or the shortcuts ``--user``, ``--client``,
``--ip``, ``--broker``, ``--user-defaults``, ``--client-defaults``, ``--ip-defaults``,
``--broker-defaults``. Quotas go through Describe/AlterClientQuotas; brokers
through DescribeConfigs and IncrementalAlterConfigs (resource BROKER, "" for the
cluster-wide default); topics (``--entity-type topics --entity-name T`` or ``--topic T``) and
groups' own configs (``--entity-type groups --entity-name G`` or ``--group G``; Kafka 4's GROUP
resources) and KIP-714 client metrics subscriptions (``--entity-type client-metrics
--entity-name S`` or ``--client-metrics S``) through DescribeConfigs and IncrementalAlterConfigs
on resource TOPIC, GROUP or CLIENT_METRICS.
"""

from __future__ import annotations

import argparse
import re
import secrets
import sys
from collections.abc import Mapping
from typing import Any

from kafkapy.client import ClientError, SimpleClient
from kafkapy.commands._admin import error_text
from kafkapy.commands._security import add_command_config, client_options
from kafkapy.configs.module import CLIENT_METRICS_RESOURCE, DELETE, SET
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.sasl.scram import MECHANISMS, MECHANISMS_BY_CODE, salted_password

__all__ = ["register"]

BROKER_RESOURCE = 4
TOPIC_RESOURCE = 2  # Kafka's ConfigResource.Type.TOPIC
GROUP_RESOURCE = 32  # Kafka's ConfigResource.Type.GROUP
DYNAMIC_TOPIC_CONFIG, DYNAMIC_CLIENT_METRICS_CONFIG, DYNAMIC_GROUP_CONFIG = 1, 7, 8
# DescribeConfigs sources, by number (Kafka's names)
_SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
            4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 7: "DYNAMIC_CLIENT_METRICS_CONFIG",
            8: "DYNAMIC_GROUP_CONFIG"}
#: The entity types named by one resource: (ConfigResource type, its own dynamic source, label
#: in the tool's lines, the shortcut option's attribute).
_NAMED = {"topics": (TOPIC_RESOURCE, DYNAMIC_TOPIC_CONFIG, "topic", "topic"),
          "groups": (GROUP_RESOURCE, DYNAMIC_GROUP_CONFIG, "group", "group"),
          "client-metrics": (CLIENT_METRICS_RESOURCE, DYNAMIC_CLIENT_METRICS_CONFIG, "client-metric",
                             "client_metrics")}
_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_LABELS = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}


def _client(args: argparse.Namespace) -> SimpleClient:
    return SimpleClient(args.bootstrap_server, args.timeout, "kafkapy-configs", **client_options(args))


class _Usage(Exception):
    pass


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "configs", help="client and IP quotas, dynamic broker configs (kafka-configs.sh)",
        description="Describe or alter quotas of users, client ids and IPs through DescribeClientQuotas "
                    "and AlterClientQuotas, and dynamic broker configs through DescribeConfigs and "
                    "IncrementalAlterConfigs.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    add_command_config(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true")
    action.add_argument("--alter", action="store_true")
    parser.add_argument("--entity-type", action="append", default=[],
                        choices=sorted([*_TYPES, "brokers", *_NAMED]))
    parser.add_argument("--entity-name", action="append", default=[], dest="entity_names")
    parser.add_argument("--entity-default", action="append_const", const=None, dest="entity_names")
    for name in ("user", "client", "ip", "broker"):
        parser.add_argument(f"--{name}", metavar=name.upper())
        parser.add_argument(f"--{name}-defaults", action="store_true")
    parser.add_argument("--topic", metavar="TOPIC", help="same as --entity-type topics --entity-name TOPIC")
    parser.add_argument("--group", metavar="GROUP", help="same as --entity-type groups --entity-name GROUP")
    parser.add_argument("--client-metrics", metavar="NAME",
                        help="same as --entity-type client-metrics --entity-name NAME")
    parser.add_argument("--all", action="store_true",
                        help="with --describe of a topic, group or broker: every config, not only the "
                             "dynamic ones")
    parser.add_argument("--add-config", metavar="K=V[,K=V]",
                        help="e.g. 'connection_creation_rate=100'; a value with commas in brackets: "
                             "'max.connections.per.ip.overrides=[h1:5,h2:9]'")
    parser.add_argument("--delete-config", metavar="K[,K]", action="append",
                        help="config keys to remove (repeatable); each must be set on the entity")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS")
    parser.set_defaults(func=_run)


def _entity(args: argparse.Namespace) -> list[tuple[str, str | None, bool]]:
    """(entity type, name or None, whether given) in kafka-configs.sh's order."""
    found: list[tuple[str, str | None, bool]] = []
    names = list(args.entity_names or [])
    for i, kind in enumerate(args.entity_type):
        if i < len(names):
            found.append((_TYPES[kind], names[i], True))
        else:
            found.append((_TYPES[kind], None, False))
    if len(names) > len(args.entity_type):
        raise _Usage("each --entity-name or --entity-default needs an --entity-type")
    for option, kind in (("user", "user"), ("client", "client-id"), ("ip", "ip")):
        if getattr(args, option) is not None:
            found.append((kind, getattr(args, option), True))
        elif getattr(args, f"{option}_defaults"):
            found.append((kind, None, True))
    kinds = [k for k, _, _ in found]
    if len(set(kinds)) != len(kinds):
        raise _Usage("an entity type was given twice")
    if not found:
        raise _Usage("an entity is required: --entity-type with --entity-name/--entity-default, or --user, "
                     "--client, --ip, --user-defaults, --client-defaults, --ip-defaults")
    if "ip" in kinds and len(kinds) > 1:
        raise _Usage("ips cannot be combined with users or clients")
    return found


def _parse_add(text: str) -> list[tuple[str, float]]:
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    result = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        try:
            result.append((key.strip(), float(value)))
        except ValueError:
            raise _Usage(f"--add-config {item!r}: the value must be a number") from None
        if not sep:
            raise _Usage(f"--add-config {item!r} is not KEY=VALUE")
    return result


def _describe_entity(entity: list[dict[str, Any]]) -> str:
    parts = []
    for kind in ("user", "client-id", "ip"):
        for component in entity:
            if component["entity_type"] == kind:
                name = component["entity_name"]
                label = _LABELS[kind]
                parts.append(f"{label} '{name}'" if name is not None else f"the default {label}")
    return ", ".join(parts)


def _broker(args: argparse.Namespace) -> str | None:
    """The broker resource name ("" for the cluster default), or None when no broker was chosen."""
    if "brokers" not in args.entity_type and args.broker is None and not args.broker_defaults:
        return None
    chosen: list[str] = []
    if "brokers" in args.entity_type:
        if args.entity_type != ["brokers"] or len(args.entity_names or []) != 1:
            raise _Usage("--entity-type brokers takes one --entity-name ID or --entity-default, and no "
                         "other entity")
        chosen.append(args.entity_names[0] or "")
    if args.broker is not None:
        chosen.append(args.broker)
    if args.broker_defaults:
        chosen.append("")
    if len(chosen) != 1 or any(getattr(args, o) is not None or getattr(args, f"{o}_defaults")
                               for o in ("user", "client", "ip")):
        raise _Usage("choose one broker (--entity-type brokers --entity-name ID, --entity-default, "
                     "--broker ID or --broker-defaults) and no other entity")
    name = chosen[0]
    if name and not name.strip().lstrip("-").isdecimal():
        raise _Usage(f"the broker must be an integer id, not {name!r}")
    return name.strip()


def _run(args: argparse.Namespace) -> int:
    try:
        for kind in _NAMED:
            if args.describe and _every_named(args, kind):
                with _client(args) as client:
                    return max((_describe_named(client, kind, name, args.all)
                                for name in _listed(client, kind)), default=0)
        for kind, (resource_type, _, label, _) in _NAMED.items():
            named = _named(args, kind)
            if named is not None:
                with _client(args) as client:
                    if args.describe:
                        return _describe_named(client, kind, named, args.all)
                    return _alter_resource(client, resource_type, named, args, f"config for {label} {named}")
        if args.describe and _every_named(args, "brokers"):
            with _client(args) as client:
                body = client.request(ApiKey.METADATA, 1, {"topics": []})
                ids = sorted(b["node_id"] for b in body["brokers"])
                # Each broker, then the cluster default; the first refusal ends the command, as
                # it does kafka-configs.sh's (kafkapy went on, one error line per broker).
                names = [*(str(node) for node in ids), ""]
                return 1 if any(_describe_broker(client, name, args.all) for name in names) else 0
        broker = _broker(args)
        if broker is not None:
            with _client(args) as client:
                if args.describe:
                    return _describe_broker(client, broker, args.all)
                done = f"config for broker {broker}" if broker else \
                    "default config for brokers in the cluster"
                return _alter_resource(client, BROKER_RESOURCE, broker, args, done)
        entity = _entity(args)
        with _client(args) as client:
            if args.describe:
                return _describe(client, entity)
            return _alter(client, entity, args)
    except _Usage as exc:
        print(f"kafkapy configs: error: {exc}", file=sys.stderr)
        return 2
    except ClientError as exc:
        print(f"kafkapy configs: {exc}", file=sys.stderr)
        return 1


def _describe(client: SimpleClient, entity: list[tuple[str, str | None, bool]]) -> int:
    components = []
    for kind, name, given in entity:
        if not given:
            components.append({"entity_type": kind, "match_type": 2, "match": None})
        elif name is None:
            components.append({"entity_type": kind, "match_type": 1, "match": None})
        else:
            components.append({"entity_type": kind, "match_type": 0, "match": name})
    body = client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": components, "strict": True})
    if body["error_code"]:
        _print_error(body)
        return 1
    for entry in body["entries"] or []:
        values = ", ".join(f"{v['key']}={float(v['value'])!r}" for v in entry["values"])
        print(f"Quota configs for {_describe_entity(entry['entity'])} are {values}")
    if [kind for kind, _, _ in entity] == ["user"] and not (entity[0][2] and entity[0][1] is None):
        _describe_scram(client, entity)  # as Kafka: not with clients, nor for the default user
    return 0


def _alter(client: SimpleClient, entity: list[tuple[str, str | None, bool]], args: argparse.Namespace) -> int:
    if any(not given for _, _, given in entity):
        raise _Usage("--alter needs an --entity-name or --entity-default for each --entity-type")
    scram_added = [(k, v) for k, v in _split_configs(args.add_config or "") if k in MECHANISMS]
    scram_deleted = [k for k in _deleted(args) if k in MECHANISMS]
    if scram_added or scram_deleted:
        return _alter_scram(client, entity, args, scram_added, scram_deleted)
    ops: list[dict[str, Any]] = [{"key": k, "value": v, "remove": False}
                                 for k, v in _parse_add(args.add_config or "")]
    deleted = _deleted(args)
    ops += [{"key": k, "value": 0.0, "remove": True} for k in deleted]
    if not ops:
        raise _Usage("--alter needs --add-config or --delete-config")
    if deleted:
        _check_deleted(deleted, _quota_keys(client, entity))
    request = {"entries": [{"entity": [{"entity_type": k, "entity_name": n} for k, n, _ in entity],
                            "ops": ops}], "validate_only": False}
    body = client.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, request)
    entry = body["entries"][0]
    if entry["error_code"]:
        _print_error(entry)
        return 1
    print(_completed(entity))
    return 0


_DEFAULT_SCRAM_ITERATIONS = 4096  # kafka-configs.sh's, when the credential names none
_SCRAM_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


def _alter_scram(client: SimpleClient, entity: list[tuple[str, str | None, bool]], args: argparse.Namespace,
                 added: list[tuple[str, str]], deleted: list[str]) -> int:
    """SCRAM credentials of one user through AlterUserScramCredentials, as kafka-configs.sh sets them
    (``SCRAM-SHA-256=[iterations=8192,password=...]``; the salted password is made here)."""
    kinds = [kind for kind, _, _ in entity]
    names = [key for key, _ in added] + deleted
    if kinds != ["user"]:
        raise _Usage(f"Only quota configs can be altered for '{'ips' if 'ip' in kinds else 'clients'}' "
                     f"using --bootstrap-server. Unexpected config names: {', '.join(names)}")
    user = entity[0][1]
    if user is None:
        raise _Usage("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                     "Credentials using --bootstrap-server.")
    others = [k for k, _ in _split_configs(args.add_config or "") if k not in MECHANISMS] + \
        [k for k in _deleted(args) if k not in MECHANISMS]
    if others:
        raise _Usage("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
                     "using --bootstrap-server.")
    upsertions = []
    for name, text in added:
        mechanism = MECHANISMS[name]
        match = _SCRAM_CREDENTIAL.fullmatch(text)
        if match is None or (match.group(1) is not None and match.group(1) in ("", "-")):
            raise _Usage(f"Invalid credential property {name}={text}")
        iterations = _DEFAULT_SCRAM_ITERATIONS if match.group(1) in (None, "-1") else int(match.group(1))
        if iterations < mechanism.min_iterations:
            raise _Usage(f"Iterations {iterations} is less than the minimum {mechanism.min_iterations} "
                         f"required for {name}")
        salt = secrets.token_bytes(32)
        upsertions.append({"name": user, "mechanism": mechanism.code, "iterations": iterations, "salt": salt,
                           "salted_password": salted_password(mechanism, match.group(2), salt, iterations)})
    body = client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {
        "deletions": [{"name": user, "mechanism": MECHANISMS[k].code} for k in deleted],
        "upsertions": upsertions})
    for result in body["results"]:
        if result["error_code"]:
            _print_error(result)
            return 1
    print(_completed(entity))
    return 0


def _describe_scram(client: SimpleClient, entity: list[tuple[str, str | None, bool]]) -> None:
    """kafka-configs.sh's SCRAM lines after a user's quotas: each user's mechanisms and iterations
    (DescribeUserScramCredentials); a user without credentials says nothing."""
    ((_, name, given),) = entity
    users = [{"name": name}] if given else None
    body = client.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": users})
    for result in body["results"]:
        code = result["error_code"]
        if code == ErrorCode.RESOURCE_NOT_FOUND:
            continue
        if code:
            print(f"Error retrieving SCRAM credential configs for user-principal '{result['user']}': "
                  f"{error_text(code, result.get('error_message'))}")
            continue
        infos = ", ".join(f"{MECHANISMS_BY_CODE[i['mechanism']].name}=iterations={i['iterations']}"
                          for i in result["credential_infos"] if i["mechanism"] in MECHANISMS_BY_CODE)
        print(f"SCRAM credential configs for user-principal '{result['user']}' are {infos}")


def _completed(entity: list[tuple[str, str | None, bool]]) -> str:
    """kafka-configs.sh's last line, naming the first entity only (its type without the plural's s)."""
    kind, name, _ = entity[0]
    plural = {value: key for key, value in _TYPES.items()}[kind]
    if name is None:
        return f"Completed updating default config for {plural} in the cluster."
    return f"Completed updating config for {plural[:-1]} {name}."


def _split_configs(text: str) -> list[tuple[str, str]]:
    """kafka-configs.sh's --add-config: K=V pairs split on commas outside square brackets (a
    bracketed value keeps its commas)."""
    items, depth, current = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(ch, 0)
        current += ch
    items.append(current)
    result = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise _Usage(f"--add-config {item!r} is not KEY=VALUE")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        result.append((key.strip(), value))
    return result


def _broker_label(name: str) -> str:
    return f"broker {name}" if name else "brokers in the cluster"


def _java(value: object) -> str:
    """A value as kafka-configs.sh prints it: Java's "null" for none (unset, or sensitive)."""
    return "null" if value is None else str(value)


def _describe_broker(client: SimpleClient, name: str, everything: bool = False) -> int:
    resource = {"resource_type": BROKER_RESOURCE, "resource_name": name, "configuration_keys": None}
    request = {"resources": [resource],
               "include_synonyms": True, "include_documentation": False}
    result = client.request(ApiKey.DESCRIBE_CONFIGS, 4, request)["results"][0]
    if result["error_code"]:
        _print_error(result)
        return 1
    # the entity's own dynamic configs, as kafka-configs.sh lists them; with --all every one
    wanted = 2 if name else 3
    print(f"{'Default' if not name else 'All' if everything else 'Dynamic'} configs for "
          f"{_broker_label(name)} are:")
    for config in sorted(result["configs"], key=lambda c: str(c["name"])):
        if not everything and config["config_source"] != wanted:
            continue
        value = config["value"] if not config["is_sensitive"] else None
        synonyms = ", ".join(f"{_SOURCES.get(s['source'], s['source'])}:{s['name']}={_java(s['value'])}"
                             for s in config["synonyms"])
        print(f"  {config['name']}={_java(value)} sensitive={str(config['is_sensitive']).lower()} "
              f"synonyms={{{synonyms}}}")
    return 0


def _alter_resource(client: SimpleClient, resource_type: int, name: str, args: argparse.Namespace,
                    done: str) -> int:
    """IncrementalAlterConfigs of one resource from --add-config / --delete-config."""
    configs = [{"name": k, "config_operation": SET, "value": v}
               for k, v in _split_configs(args.add_config or "")]
    deleted = _deleted(args)
    configs += [{"name": k, "config_operation": DELETE, "value": None} for k in deleted]
    if not configs:
        raise _Usage("--alter needs --add-config or --delete-config")
    if deleted:
        current = _dynamic_keys(client, resource_type, name)
        if current is None:
            return 1
        _check_deleted(deleted, current)
    request = {"resources": [{"resource_type": resource_type, "resource_name": name, "configs": configs}],
               "validate_only": False}
    result = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request)["responses"][0]
    if result["error_code"]:
        _print_error(result)
        return 1
    print(f"Completed updating {done}.")
    return 0


def _deleted(args: argparse.Namespace) -> list[str]:
    """The ``--delete-config`` keys: comma-separated, the option repeatable (Kafka's valuesOf)."""
    return [key.strip() for text in args.delete_config or () for key in text.split(",") if key.strip()]


def _check_deleted(deleted: list[str], current: set[str]) -> None:
    """Kafka's tool refuses, before altering anything, to delete a config the entity does not set:
    a mistyped name is an error, not a silent no-op."""
    missing = [key for key in deleted if key not in current]
    if missing:
        raise ClientError(f"Invalid config(s): {','.join(missing)}")


# The source of the configs an entity sets itself, by resource type (and "" for the broker default).
_OWN_SOURCE = {TOPIC_RESOURCE: DYNAMIC_TOPIC_CONFIG, GROUP_RESOURCE: DYNAMIC_GROUP_CONFIG,
               CLIENT_METRICS_RESOURCE: DYNAMIC_CLIENT_METRICS_CONFIG}
_DYNAMIC_BROKER, _DYNAMIC_DEFAULT_BROKER = 2, 3


def _dynamic_keys(client: SimpleClient, resource_type: int, name: str) -> set[str] | None:
    """The names of the configs set on the resource itself (what --describe lists without --all);
    None after printing the broker's refusal."""
    resource = {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}
    request = {"resources": [resource], "include_synonyms": False, "include_documentation": False}
    result = client.request(ApiKey.DESCRIBE_CONFIGS, 4, request)["results"][0]
    if result["error_code"]:
        _print_error(result)
        return None
    own = _OWN_SOURCE.get(resource_type, _DYNAMIC_BROKER if name else _DYNAMIC_DEFAULT_BROKER)
    return {c["name"] for c in result["configs"] if c["config_source"] == own}


def _quota_keys(client: SimpleClient, entity: list[tuple[str, str | None, bool]]) -> set[str]:
    """The quota keys set on exactly this entity (DescribeClientQuotas, strict)."""
    components = [{"entity_type": kind, "match_type": 1 if name is None else 0, "match": name}
                  for kind, name, _ in entity]
    body = client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": components, "strict": True})
    if body["error_code"]:
        code = body["error_code"]
        raise ClientError(f"error {error_text(code, body.get('error_message'))}")
    return {v["key"] for e in body["entries"] or [] for v in e["values"]}


def _print_error(result: Mapping[str, Any]) -> None:
    """A refusal as one line: Kafka's error name, then its message if the broker sent one (Kafka's
    DescribeConfigs sends none for an unknown topic)."""
    print(f"kafkapy configs: error {error_text(result['error_code'], result.get('error_message'))}",
          file=sys.stderr)


def _named(args: argparse.Namespace, kind: str) -> str | None:
    """The topic, group or subscription chosen (``--entity-type topics|groups|client-metrics
    --entity-name N``, or the ``--topic N`` / ``--group N`` / ``--client-metrics N`` shortcut), or
    None."""
    option = _NAMED[kind][3]
    shortcut = getattr(args, option)
    if kind not in args.entity_type and shortcut is None:
        return None
    chosen: list[str | None] = list(args.entity_names or []) if kind in args.entity_type else []
    if shortcut is not None:
        chosen.append(shortcut)
    others = [t for t in args.entity_type if t != kind]
    other_shortcuts = [getattr(args, _NAMED[k][3]) for k in _NAMED if k != kind]
    if len(chosen) != 1 or chosen[0] is None or others or args.entity_type.count(kind) > 1 or any(
            getattr(args, o) is not None or getattr(args, f"{o}_defaults")
            for o in ("user", "client", "ip", "broker")) or any(o is not None for o in other_shortcuts):
        raise _Usage(f"--entity-type {kind} takes one --entity-name NAME (or --{option.replace('_', '-')} "
                     f"NAME), and no other entity")
    return chosen[0]


def _every_named(args: argparse.Namespace, kind: str) -> bool:
    """``--entity-type topics|groups|client-metrics|brokers`` alone, with no name: describe each of
    them (brokers: each live broker, then the cluster default), as kafka-configs.sh does."""
    return args.entity_type == [kind] and not args.entity_names and not any(
        getattr(args, option) is not None
        for option in ("topic", "group", "client_metrics", "user", "client", "ip", "broker")
    ) and not any(getattr(args, f"{option}_defaults") for option in ("user", "client", "ip", "broker"))


def _listed(client: SimpleClient, kind: str) -> list[str]:
    """The topics, or the groups that hold configs, from ListConfigResources v1 (KIP-1142); the
    client metrics subscriptions from its v0 (KIP-714's ListClientMetricsResources, as
    kafka-configs.sh lists them, so Kafka 3.7 to 4.0 brokers answer too)."""
    resource_type = _NAMED[kind][0]
    served = {api["api_key"]: api["max_version"]
              for api in client.request(ApiKey.API_VERSIONS, 0, {})["api_keys"]}
    if resource_type == CLIENT_METRICS_RESOURCE:
        if served.get(ApiKey.LIST_CONFIG_RESOURCES, -1) < 0:
            raise ClientError("listing client metrics subscriptions needs ListClientMetricsResources (Kafka "
                              "3.7 and later); name one with --entity-name")
        body = client.request(ApiKey.LIST_CONFIG_RESOURCES, 0, {})
        if body["error_code"]:
            raise ClientError(f"ListClientMetricsResources failed: {ErrorCode(body['error_code']).name}")
        return sorted(resource["resource_name"] for resource in body["config_resources"])
    if served.get(ApiKey.LIST_CONFIG_RESOURCES, -1) < 1:
        raise ClientError(f"listing every {_NAMED[kind][2]} needs ListConfigResources v1 (Kafka 4.1 and "
                          f"later); name one with --entity-name")
    body = client.request(ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [resource_type]})
    if body["error_code"]:
        raise ClientError(f"ListConfigResources failed: {ErrorCode(body['error_code']).name}")
    return [resource["resource_name"] for resource in body["config_resources"]]


def _describe_named(client: SimpleClient, kind: str, name: str, everything: bool) -> int:
    resource_type, dynamic, label, _ = _NAMED[kind]
    resource = {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}
    request = {"resources": [resource], "include_synonyms": True, "include_documentation": False}
    result = client.request(ApiKey.DESCRIBE_CONFIGS, 4, request)["results"][0]
    if result["error_code"]:
        _print_error(result)
        return 1
    print(f"{'All' if everything else 'Dynamic'} configs for {label} {name} are:")
    for config in result["configs"]:
        if not everything and config["config_source"] != dynamic:
            continue
        synonyms = ", ".join(f"{_SOURCES.get(s['source'], s['source'])}:{s['name']}={s['value']}"
                             for s in config["synonyms"])
        print(f"  {config['name']}={config['value']} sensitive={str(config['is_sensitive']).lower()} "
              f"synonyms={{{synonyms}}}")
    return 0

