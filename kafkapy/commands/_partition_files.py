"""The partition-list JSON files of Kafka's tools: ``{"partitions": [{"topic": "t", "partition": 0,
...}]}`` (kafka-delete-records.sh's --offset-json-file, kafka-leader-election.sh's
--path-to-json-file). One reader, each problem one ClientError that names it."""

from __future__ import annotations

import json
from typing import Any

from kafkapy.client import ClientError

__all__ = ["PartitionEntry", "partition_entries", "read_json_file"]

PartitionEntry = tuple[str, int, dict[str, Any]]  # topic, partition, the whole entry


def read_json_file(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ClientError(f"{path} is not valid JSON: {exc}") from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def partition_entries(document: Any, missing: str, int_fields: tuple[str, ...] = ()) -> list[PartitionEntry]:
    """The entries of ``document["partitions"]`` in file order (duplicates kept: each tool words
    its own refusal); ``missing`` is the tool's message for a document without that list.
    Every entry needs a string "topic", an integer "partition" and the ``int_fields``."""
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
            if not _is_int(entry[field]):
                raise ClientError(f'"{field}" must be an integer: {json.dumps(entry)}')
        found.append((entry["topic"], entry["partition"], entry))
    return found
