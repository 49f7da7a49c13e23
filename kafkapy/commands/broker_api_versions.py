"""``kafkapy broker-api-versions``: what each broker serves, like kafka-broker-api-versions.sh.

It asks Metadata for the brokers, then each broker for ApiVersions, and prints Kafka's
NodeApiVersions form per broker: ``host:port (id: N rack: null) -> (``, then one line per API
(``Produce(0): 3 to 12 [usable: 12],``), then ``)``. "usable" is the newest version both the broker
and kafkapy's codec have ("unusable: node too new/old" when they share none); an API a Kafka broker
serves to clients that this broker lacks is ``UNSUPPORTED``; a key the codec does not know is
``UNKNOWN(key)``. A broker that cannot be asked is ``-> ERROR: why``, and the exit status 1.

"APIs a Kafka broker serves to clients" is Kafka's ApiKeys.clientApis (the specs whose listeners
include a broker): here the keys any release in kafkapy.protocol.releases advertised, the same
tables ``kafka.version`` emulates.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from kafkapy.client import ClientError
from kafkapy.commands._admin import AdminClient, error_text
from kafkapy.commands._security import add_connection_options
from kafkapy.errors import ErrorCode
from kafkapy.protocol import catalogue
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.releases import KAFKA_RELEASES

__all__ = ["CLIENT_APIS", "format_api_versions", "register"]

PROG = "kafkapy broker-api-versions"
API_VERSIONS_VERSION = 0  # every broker answers v0, and its api_keys are all this tool needs
CLIENT_APIS = frozenset(key for release in KAFKA_RELEASES.values() for key in release.advertised)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "broker-api-versions", help="the API versions each broker serves, like kafka-broker-api-versions.sh",
        description="Print each broker's ApiVersions answer in Kafka's form, with the newest version "
                    "kafkapy's codec can use with it.")
    add_connection_options(parser)
    parser.set_defaults(func=run)


def format_api_versions(served: Mapping[int, tuple[int, int]]) -> str:
    """Kafka's NodeApiVersions.toString(true) of a broker's {api key: (min, max)}."""
    known = catalogue()
    lines: dict[int, str] = {}
    for key, (low, high) in served.items():
        spec = known.get(key)
        versions = str(low) if low == high else f"{low} to {high}"
        if spec is None:
            lines[key] = f"UNKNOWN({key}): {versions}"
        elif spec.max_version < low:
            lines[key] = f"{spec.name}({key}): {versions} [unusable: node too new]"
        elif high < spec.min_version:
            lines[key] = f"{spec.name}({key}): {versions} [unusable: node too old]"
        else:
            lines[key] = f"{spec.name}({key}): {versions} [usable: {min(spec.max_version, high)}]"
    for key in CLIENT_APIS - served.keys():
        name = known[key].name if key in known else ApiKey(key).name
        lines[key] = f"{name}({key}): UNSUPPORTED"
    return "(\n\t" + ",\n\t".join(lines[key] for key in sorted(lines)) + "\n)"


def run(args: argparse.Namespace) -> int:
    failed = 0
    try:
        with AdminClient.from_args(args, "kafkapy-broker-api-versions") as client:
            brokers, _ = client.cluster()
            for broker in brokers:
                try:
                    connection = client.connection(broker.node_id)
                    body = connection.request(ApiKey.API_VERSIONS, API_VERSIONS_VERSION, {})
                    if body["error_code"] != ErrorCode.NONE:
                        raise ClientError(f"ApiVersions failed: {error_text(body['error_code'])}")
                except ClientError as exc:
                    failed += 1
                    print(f"{broker} -> ERROR: {exc}")
                    continue
                served = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
                print(f"{broker} -> {format_api_versions(served)}")
    except ClientError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    return 1 if failed else 0
