"""``kafkapy client-metrics``: KIP-714 subscriptions, like kafka-client-metrics.sh.

``--alter`` sets the given keys (IncrementalAlterConfigs SET; an empty value deletes the key, as
kafka-client-metrics.sh does), ``--delete`` deletes every key of a subscription (which removes it),
``--describe`` prints a subscription's keys (all subscriptions without ``--name``), ``--list`` the
names (ListConfigResources v0, KIP-1000's ListClientMetricsResources). The broker must run the
telemetry module (docs/telemetry.md).
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import Any

from kafkapy.client import ClientError, SimpleClient
from kafkapy.commands._numbers import java_int
from kafkapy.commands._security import add_connection_options, client_options
from kafkapy.configs.module import CLIENT_METRICS_RESOURCE, DELETE, SET
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

__all__ = ["register"]



def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "client-metrics", help="KIP-714 client metrics subscriptions (kafka-client-metrics.sh)",
        description="List, describe, alter and delete client metrics subscriptions (CLIENT_METRICS config "
                    "resources) with kafka-client-metrics.sh's flags.")
    add_connection_options(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true", help="set the subscription's keys given")
    action.add_argument("--delete", action="store_true", help="delete the subscription")
    action.add_argument("--describe", action="store_true", help="print subscriptions' keys")
    action.add_argument("--list", action="store_true", help="print the subscriptions' names")
    parser.add_argument("--name", metavar="NAME", help="the subscription")
    parser.add_argument("--generate-name", action="store_true",
                        help="with --alter: a random UUID as the name")
    parser.add_argument("--metrics", metavar="M1,M2", help="metric name prefixes ('*' for all)")
    parser.add_argument("--interval", type=java_int, metavar="MS", help="the push interval in milliseconds")
    parser.add_argument("--match", metavar="K1=V1,K2=V2",
                        help="selectors: client_instance_id, client_id, client_source_address, "
                             "client_source_port")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        _check_usage(args)
        with SimpleClient(args.bootstrap_server, args.timeout, "kafkapy-client-metrics",
                          **client_options(args)) as client:
            if args.list:
                print("\n".join(_names(client)))
            elif args.describe:
                for name in [args.name] if args.name else _names(client):
                    print(f"Client metrics configs for {name} are:")
                    for key, value in sorted(_describe(client, name).items()):
                        print(f"  {key}={value}")
            elif args.alter:
                name = str(uuid.uuid4()) if args.generate_name else args.name
                given = (("interval.ms", args.interval), ("metrics", args.metrics), ("match", args.match))
                _alter(client, name, {key: str(value) for key, value in given if value is not None})
                print(f"Altered client metrics config for {name}.")
            else:
                _alter(client, args.name, {key: "" for key in _describe(client, args.name)})
                print(f"Deleted client metrics config for {args.name}.")
    except ClientError as exc:
        print(f"kafkapy client-metrics: {exc}", file=sys.stderr)
        return 1
    return 0


def _check_usage(args: argparse.Namespace) -> None:
    if args.alter and not (args.name or args.generate_name):
        raise ClientError("--alter needs --name or --generate-name")
    if args.alter and args.name and args.generate_name:
        raise ClientError("--name and --generate-name are exclusive")
    if args.delete and not args.name:
        raise ClientError("--delete needs --name")
    if not args.alter and any(v is not None for v in (args.metrics, args.interval, args.match)):
        raise ClientError("--metrics, --interval and --match go with --alter")


def _names(client: SimpleClient) -> list[str]:
    body = client.request(ApiKey.LIST_CONFIG_RESOURCES, 0, {})
    _check(body["error_code"], "ListConfigResources", None)
    return sorted(resource["resource_name"] for resource in body["config_resources"])


def _describe(client: SimpleClient, name: str) -> dict[str, str]:
    body = client.request(ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": CLIENT_METRICS_RESOURCE, "resource_name": name,
                       "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    (result,) = body["results"]
    _check(result["error_code"], "DescribeConfigs", result.get("error_message"))
    return {entry["name"]: entry["value"] for entry in result["configs"]}


def _alter(client: SimpleClient, name: str, settings: dict[str, str]) -> None:
    """Each key SET to its value, or DELETE where the value is empty."""
    configs = [{"name": key, "config_operation": DELETE if value == "" else SET,
                "value": None if value == "" else value} for key, value in settings.items()]
    body = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": CLIENT_METRICS_RESOURCE, "resource_name": name, "configs": configs}],
        "validate_only": False})
    (response,) = body["responses"]
    _check(response["error_code"], "IncrementalAlterConfigs", response.get("error_message"))


def _check(code: int, what: str, message: str | None) -> None:
    if code != ErrorCode.NONE:
        detail = f": {message}" if message else ""
        raise ClientError(f"{what} failed: {ErrorCode(code).name}{detail}")
