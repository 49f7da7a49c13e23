"""Which topics and partitions a decoded request names, for rules that match on them.

Requests carry topics in arrays whose field names say "topic" (Produce's ``topic_data``,
Fetch's and Metadata's ``topics``, DeleteTopics' ``topic_names``), sometimes inside other
arrays (OffsetFetch v8's ``groups``, WriteTxnMarkers' ``markers``); an element names its topic
by ``name``, ``topic`` or ``topic_name``, or by ``topic_id`` (Fetch v13+), and its partitions
in an array whose name says "partition", of structs (with ``partition_index``, ``partition``
or ``index``) or of plain ints. The walk follows that convention rather than a list per API.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["named_partitions"]

_TOPIC_FIELDS = ("name", "topic", "topic_name")
_PARTITION_FIELDS = ("partition_index", "partition", "index", "partition_id")

TopicNamer = Callable[[uuid.UUID], str | None]


def named_partitions(body: Mapping[str, Any], topic_name: TopicNamer) -> Iterator[tuple[str, int | None]]:
    """(topic, partition) for every partition the request names, (topic, None) for a topic named
    without partitions. ``topic_name`` turns a topic id into its name (None: unknown)."""
    for field, value in body.items():
        if not isinstance(value, list) or not value:
            continue
        if "topic" in field:
            if isinstance(value[0], str):
                for name in value:
                    yield name, None
            elif isinstance(value[0], Mapping):
                for element in value:
                    yield from _topic_element(element, topic_name)
        elif isinstance(value[0], Mapping):
            for element in value:
                yield from named_partitions(element, topic_name)


def _topic_element(element: Mapping[str, Any], topic_name: TopicNamer) -> Iterator[tuple[str, int | None]]:
    name = next((element[f] for f in _TOPIC_FIELDS if isinstance(element.get(f), str)), None)
    if name is None and isinstance(element.get("topic_id"), uuid.UUID):
        name = topic_name(element["topic_id"])
    if name is None:
        return
    named = False
    for field, value in element.items():
        if "partition" not in field or not isinstance(value, list):
            continue
        for item in value:
            if isinstance(item, int):
                named = True
                yield name, item
            elif isinstance(item, Mapping):
                index = next((item[f] for f in _PARTITION_FIELDS if isinstance(item.get(f), int)), None)
                if index is not None:
                    named = True
                    yield name, index
    if not named:
        yield name, None
