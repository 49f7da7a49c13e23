"""Topics named by id (KIP-516): which messages do it, and the names a message pairs with the ids.

Since Kafka 3.x several messages name a topic only by its UUID (Fetch v13+, OffsetCommit and
OffsetFetch v10+, the share-group and KIP-848 messages); others pair the id with its name
(Metadata v10+, CreateTopics v7+, DeleteTopics v6+, DescribeTopicPartitions). A reader of a
conversation (the capture rows) learns the pairs from the second kind to name the topics of the
first. In Kafka's specs no message mixes the two: a struct holding ``TopicId`` either has a name
field beside it (``Name``, ``Topic`` or ``TopicName``) in every struct of the message, or in none
(a test holds this), so a message's shape is one of three:

    none    no topic id anywhere
    ids     topic ids without names: the reader adds what it knows
    named   ids beside their names: the reader learns from it

The rest works on the JSON text of a body as the JSON decoders write it (keys in snake case, a
UUID as its 36-character string), so it costs nothing to messages of the ``none`` shape.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from json.encoder import encode_basestring  # the string escaper of json.dumps(ensure_ascii=False)
from typing import Any, Literal

from kafkapy.protocol.catalogue import catalogue
from kafkapy.protocol.specs import FieldSpec

__all__ = ["NAME_KEYS", "TOPIC_NAME_KEY", "TopicIdShape", "add_topic_names", "named_topic_ids",
           "topic_id_messages", "topic_id_shape"]

TopicIdShape = Literal["none", "ids", "named"]

#: The fields that name a topic beside its id, in Kafka's specs (snake case).
NAME_KEYS = ("name", "topic", "topic_name")
#: The key :func:`add_topic_names` writes beside an id: the spelling Kafka's own messages use for
#: a name next to a ``topic_id`` (ConsumerGroupDescribe's assignments).
TOPIC_NAME_KEY = "topic_name"
#: The id Kafka sends where it has none (a Metadata request by name): ``Uuid.ZERO_UUID``.
ZERO_ID = "00000000-0000-0000-0000-000000000000"
_ID_KEY = '"topic_id":"'
_UUID_CHARS = 36


def _shape(fields: tuple[FieldSpec, ...], version: int) -> TopicIdShape:
    """The shape of the structs of ``fields`` (one struct's, then their children's) at ``version``."""
    present = [f for f in fields if version in f.versions]
    keys = {f.snake for f in present}
    if "topic_id" in keys:
        return "named" if not keys.isdisjoint(NAME_KEYS) else "ids"
    for field in present:
        if field.fields:
            found = _shape(field.fields, version)
            if found != "none":
                return found
    return "none"


def topic_id_shape(api_key: int, kind: str, version: int) -> TopicIdShape:
    """Whether one message (``kind`` "request" or "response") names topics by id only, pairs ids
    with names, or has no ids (also for an API kafkapy does not know)."""
    return _shapes().get((api_key, kind, version), "none")


@functools.cache
def _shapes() -> dict[tuple[int, str, int], TopicIdShape]:
    """Every message with topic ids, read from the specs once: (API key, kind, version) -> shape."""
    found: dict[tuple[int, str, int], TopicIdShape] = {}
    for key, api in catalogue().items():
        for kind, spec in (("request", api.request), ("response", api.response)):
            for version in range(api.versions.low, api.versions.high + 1):
                shape = _shape(spec.fields, version)
                if shape != "none":
                    found[key, kind, version] = shape
    return found


def topic_id_messages() -> frozenset[tuple[int, int]]:
    """The (API key, version) pairs whose request or response carries topic ids."""
    return frozenset((key, version) for key, _, version in _shapes())


def named_topic_ids(text: str) -> list[tuple[str, str]]:
    """The (id, name) pairs of a body of the ``named`` shape, in the order they appear; ids that
    are Kafka's zero id and names that are null (a Metadata topic asked for by an id the broker
    does not know) are left out."""
    pairs: list[tuple[str, str]] = []
    _walk(json.loads(text), pairs)
    return pairs


def _walk(value: Any, pairs: list[tuple[str, str]]) -> None:
    if isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)):
                _walk(item, pairs)
    elif isinstance(value, dict):
        topic_id = value.get("topic_id")
        if isinstance(topic_id, str) and topic_id != ZERO_ID:
            name = next((value[k] for k in NAME_KEYS if isinstance(value.get(k), str)), None)
            if name:
                pairs.append((topic_id, name))
        for item in value.values():
            if isinstance(item, (dict, list)):
                _walk(item, pairs)


def add_topic_names(text: str, names: Mapping[str, str]) -> tuple[str, list[str]]:
    """A body of the ``ids`` shape with ``"topic_name": <name>`` written after each ``topic_id``
    that ``names`` knows, and those names (first occurrence order). The ids stay as they were.

    The search is for the key with its quotes: inside a JSON string a quote is escaped, so the
    text of a string (a record header key, say) can never pass for it.
    """
    at = text.find(_ID_KEY)
    if at < 0 or not names:
        return text, []
    pieces: list[str] = []
    found: list[str] = []
    done = 0
    while at >= 0:
        start = at + len(_ID_KEY)
        stop = start + _UUID_CHARS
        name = names.get(text[start:stop]) if text[stop:stop + 1] == '"' else None
        if name is not None:
            if name not in found:
                found.append(name)
            pieces.append(text[done:stop + 1])
            pieces.append(f',"{TOPIC_NAME_KEY}":{encode_basestring(name)}')
            done = stop + 1
        at = text.find(_ID_KEY, start)  # from start: an id shorter than a UUID ends before stop
    if not pieces:
        return text, found
    pieces.append(text[done:])
    return "".join(pieces), found
