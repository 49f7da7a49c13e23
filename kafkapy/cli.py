"""The ``kafkapy`` command. Subcommands arrive with the issues that build them."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from kafkapy.protocol import (
    api_name,
    catalogue,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)


def _demo(_: argparse.Namespace) -> int:
    """Encode and decode a client's opening exchange, showing what the codec sees."""
    exchange = [
        (18, 3, {"client_software_name": "kafkapy-demo", "client_software_version": "0.1"},
         {"error_code": 0, "api_keys": [{"api_key": 3, "min_version": 0, "max_version": 12}],
          "throttle_time_ms": 0}),
        (3, 12, {"topics": None, "allow_auto_topic_creation": False},
         {"brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
          "cluster_id": "kafkapy-demo", "controller_id": 1, "topics": []}),
    ]
    for correlation_id, (key, version, request_body, response_body) in enumerate(exchange, 1):
        frame = encode_request(key, version, correlation_id, "demo", request_body)
        request = decode_request(frame)
        print(f"-> {api_name(key)} v{version} request, {len(frame)} bytes: {frame.hex()}")
        print(f"   {json.dumps(_plain(request.body))}")
        frame = encode_response(key, version, correlation_id, response_body)
        response = decode_response(frame, key, version)
        print(f"<- {api_name(key)} v{version} response, {len(frame)} bytes")
        print(f"   {json.dumps(_plain(response.body))}")
    print(f"\n{len(catalogue())} APIs in the catalogue; "
          "a broker on 127.0.0.1:9092 comes with the broker issue.")
    return 0


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafkapy",
                                     description="Kafka's wire protocol from the broker side.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="encode and decode a sample exchange")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
