"""Where a response's error codes sit: the ``errors`` of a capture row.

A response carries error codes at many levels (Produce per partition, Fetch per partition,
DescribeConfigs per resource, JoinGroup at the top), and an analyst asks "which failed and
why" of all of them, as tshark's ``kafka.error`` lists them. An entry names the code, its
name in :class:`~kafkapy.errors.ErrorCode`, and the identifying fields of the structs it
sits in (the struct's own and its ancestors'), under short keys:

    topic, topic_id, partition, group, member, resource, code, name

A ``name`` field is a topic's when it sits in an array of topics (``topics``, ``responses``
of Produce, ...), otherwise a resource's. Fields Kafka's specs spell differently for the
same thing (``partition_index``, Produce's ``index``, ``partition``) map to one key.

Two readers use these rules: the generated JSON decoders (kafkapy.protocol.json_decoder)
while they walk a body once, and :func:`body_errors` on a decoded Body dict; a test holds
them equal.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from kafkapy.errors import ErrorCode

__all__ = ["ERROR_KEYS", "body_errors", "error_entry", "error_name", "site_key"]

# The keys of an entry, in order (the Arrow/Spark struct's fields).
ERROR_KEYS = ("topic", "topic_id", "partition", "group", "member", "resource", "code", "name")

# spec field (snake case) -> entry key; "name" is decided by where it sits (site_key)
_SITES = {
    "topic": "topic",
    "topic_name": "topic",
    "topic_id": "topic_id",
    "partition_index": "partition",
    "partition": "partition",
    "partition_id": "partition",
    "group_id": "group",
    "member_id": "member",
    "resource_name": "resource",
}
# arrays whose entries' "name" is a topic's (Produce's responses, most others' topics)
# Produce's, DeleteTopics' and CreatePartitions' topic arrays; and any array named *topic*
_TOPIC_ARRAYS = frozenset({"responses", "results"})


def site_key(field: str, array: str | None) -> str | None:
    """The entry key of a struct's field, or None when it does not say where an error sits.
    ``array``: the key of the array the struct is an element of (None for the body itself)."""
    found = _SITES.get(field)
    if found is not None:
        return found
    if field == "name" and array is not None:
        return "topic" if "topic" in array or array in _TOPIC_ARRAYS else "resource"
    if field == "index" and array in ("partitions", "partition_responses"):
        return "partition"  # Produce's and FetchSnapshot's partitions
    return None


_NAMES: dict[int, str] = {code.value: code.name for code in ErrorCode}


def error_name(code: int) -> str:
    """A code's name in kafkapy's ErrorCode (Kafka's), or ``UNKNOWN`` for one it does not have."""
    return _NAMES.get(code, "UNKNOWN")


def error_entry(code: int, where: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """One entry: ``where``'s (key, value) pairs, outermost first, then the code and its name
    (``UNKNOWN`` for a code kafkapy's ErrorCode does not have)."""
    entry = {key: _plain(value) for key, value in where}
    entry["code"] = code
    entry["name"] = error_name(code)
    return entry


def _plain(value: Any) -> Any:
    """A site's value as JSON takes it: a UUID (or its 16 wire bytes) as its string."""
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return str(uuid.UUID(bytes=bytes(value)))
    return value if isinstance(value, (str, int)) or value is None else str(value)


def body_errors(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every non-zero ``error_code`` of a decoded body, in the order they are read, each placed
    by :func:`site_key` (what the JSON decoders give, for a Body dict)."""
    found: list[dict[str, Any]] = []
    _walk(body, None, (), found)
    return found


def _walk(struct: Mapping[str, Any], array: str | None, where: tuple[tuple[str, Any], ...],
          found: list[dict[str, Any]]) -> None:
    own = tuple((key, struct[field]) for field in struct
                if (key := site_key(field, array)) is not None)
    here = where + own
    mark = len(found)
    code = struct.get("error_code")
    for field, value in struct.items():
        if isinstance(value, list):
            for item in value:
                if isinstance(item, Mapping):
                    _walk(item, field, here, found)
        elif isinstance(value, Mapping) and field != "_unknown_tags":
            _walk(value, array, here, found)
    if type(code) is int and code != 0:
        found.insert(mark, error_entry(code, here))
