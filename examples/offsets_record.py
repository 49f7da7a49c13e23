"""Decode one ``__consumer_offsets`` record given as hex: its key, and its value unless a tombstone.

Bytes as ``kcat -C -t __consumer_offsets -f '%K\\n%s\\n'`` would print them, hex-encoded. An offset
commit of group "my-group" for orders-7 (offset 1234, leader epoch 5), then a deleted group:

    python examples/offsets_record.py 000100086d792d67726f757000066f726465727300000007 \\
        000300000000000004d20000000500000000018bcfe56800
    python examples/offsets_record.py 000200086d792d67726f7570

Prints Kafka's console-formatter JSON of the record and the value the coordinator works with.
Input that is not hex is one line on stderr and exit 2; bytes that are not such a record, exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys

from kafkapy.groups.record_codec import GroupRecordError, decode_record, record_json


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("key", help="the record key, hex")
    parser.add_argument("value", nargs="?", help="the record value, hex (absent: a tombstone)")
    args = parser.parse_args()
    try:
        key = bytes.fromhex(args.key)
        value = None if args.value is None else bytes.fromhex(args.value)
    except ValueError as exc:
        print(f"offsets_record: not hex: {exc}", file=sys.stderr)
        return 2
    try:
        print(json.dumps(record_json(key, value)))
        print(decode_record(key, value))
    except GroupRecordError as exc:
        print(f"offsets_record: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
