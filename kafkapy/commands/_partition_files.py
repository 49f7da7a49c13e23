"""The partition-list JSON files of Kafka's tools: ``{"partitions": [{"topic": "t", "partition": 0,
...}]}`` (kafka-delete-records.sh's --offset-json-file, kafka-leader-election.sh's
--path-to-json-file). One reader, each problem one ClientError that names it."""

from __future__ import annotations

import json
from typing import Any

from kafkapy.client import ClientError

__all__ = ["INT32", "INT64", "PartitionEntry", "is_int", "partition_entries", "read_json_file"]

PartitionEntry = tuple[str, int, dict[str, Any]]  # topic, partition, the whole entry


def read_json_file(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: thousands of nested arrays
        raise ClientError(f"{path} is not valid JSON: {exc}") from None


INT32 = range(-(1 << 31), 1 << 31)  # Kafka's tools read these fields as Java int / long: a number
INT64 = range(-(1 << 63), 1 << 63)  # past the range is their parse error (and could not be sent)


def is_int(value: object, bits: range = INT32) -> bool:
    """A JSON integer (not a boolean) in ``bits``, the range of the Java type the field has."""
    return isinstance(value, int) and not isinstance(value, bool) and value in bits


def partition_entries(document: Any, missing: str, int_fields: tuple[str, ...] = ()) -> list[PartitionEntry]:
    """The entries of ``document["partitions"]`` in file order (duplicates kept: each tool words
    its own refusal); ``missing`` is the tool's message for a document without that list.
    Every entry needs a string "topic", an int "partition" and the ``int_fields`` (longs)."""
    if not isinstance(document, dict) or "partitions" not in document:
        raise ClientError(missing)
    entries = document["partitions"]
    if not isinstance(entries, list):
        raise ClientError(f'"partitions" must be a list, not {entries!r}')
    found: list[PartitionEntry] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise ClientError(f"a partition must be an object, not {entry!r}")
        for field in ("topic", "partition", *int_fields):
            if field not in entry:
                raise ClientError(f'a partition needs "{field}": {json.dumps(entry)}')
        if not isinstance(entry["topic"], str):
            raise ClientError(f'"topic" must be a string: {json.dumps(entry)}')
        for field in ("partition", *int_fields):
            java = "int" if field == "partition" else "long"
            if not is_int(entry[field], INT32 if java == "int" else INT64):
                raise ClientError(f'"{field}" must be an integer (a Java {java}): {json.dumps(entry)}')
        found.append((entry["topic"], entry["partition"], entry))
    return found
