"""Decode one Kafka frame given as hex on the command line.

An ApiVersions v3 request from kcat 1.7 (client id "demo", correlation id 7), the broker's answer,
and a Metadata v1 request for topic "orders" with its 4-byte size prefix (accepted and stripped
when it matches the rest):

    python examples/decode_frame.py 0012000300000007000464656d6f00056b63617404312e3700
    python examples/decode_frame.py --response 18 3 0000000700000200030000000c000000000000
    python examples/decode_frame.py 0000001a0003000100000001000464656d6f0000000100066f7264657273

Input that is not hex is one line on stderr and exit 2; a frame that does not decode, exit 1.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from typing import Any

from kafkapy.protocol import DecodeError, api_name, decode_request, decode_response


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if hasattr(value, "raw"):  # lazy Records: show the size, not the bytes
        return f"<records: {len(value)} bytes>"
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--response", nargs=2, type=int, metavar=("API_KEY", "API_VERSION"),
                        help="decode a response to this API key and version")
    parser.add_argument("hex", help="the frame, in hex")
    args = parser.parse_args(argv)
    try:
        data = bytes.fromhex(args.hex)
    except ValueError as exc:  # fromhex says where: "non-hexadecimal number found ... at position 3"
        print(f"decode_frame.py: error: the frame is not hex: {exc}", file=sys.stderr)
        return 2
    if len(data) >= 4 and struct.unpack_from(">i", data)[0] == len(data) - 4:
        data = data[4:]
    try:
        if args.response:
            key, version = args.response
            response = decode_response(data, key, version)
            out = {"api": api_name(key), "api_version": response.api_version,
                   "correlation_id": response.correlation_id, "body": _jsonable(response.body)}
        else:
            request = decode_request(data)
            out = {"api": api_name(request.api_key), "api_version": request.api_version,
                   "correlation_id": request.correlation_id, "client_id": request.client_id,
                   "trailing_bytes": request.trailing_bytes, "body": _jsonable(request.body)}
    except DecodeError as exc:
        print(f"cannot decode: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
