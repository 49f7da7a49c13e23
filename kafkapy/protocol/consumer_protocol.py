"""The consumer's embedded protocol: what a classic consumer puts in JoinGroup and gets in SyncGroup.

A classic member of protocol type ``consumer`` sends a ConsumerProtocolSubscription (its topics,
from v1 the partitions it owns, from v3 its rack) as each protocol's metadata, and receives a
ConsumerProtocolAssignment. Both start with an int16 version; each version only appends fields,
so bytes of a version newer than kafkapy's specs are read at the newest it knows. KIP-848's
migration reads them to move classic members into a consumer group, and writes the assignment a
classic member of a consumer group gets from SyncGroup (at the version of its subscription, as
Kafka's ``ConsumerProtocol.serializeAssignment``); the capture rows show them decoded beside the
bytes (:func:`decode_body`). It sits in the codec's layer so that both can read it.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from kafkapy.protocol.json_converter import message_json
from kafkapy.protocol.schema import MessageSchema
from kafkapy.protocol.specs import MessageSpec, standard_and_project_specs

__all__ = ["ASSIGNMENT", "SUBSCRIPTION", "ConsumerProtocolError", "Subscription", "decode_assignment",
           "decode_body", "decode_json", "decode_subscription", "encode_assignment", "encode_subscription",
           "protocol_version"]

#: The two messages' names in Kafka's specs.
SUBSCRIPTION = "ConsumerProtocolSubscription"
ASSIGNMENT = "ConsumerProtocolAssignment"

_VERSION = struct.Struct(">h")
_NEWEST = 3  # the newest ConsumerProtocolSubscription/Assignment version kafkapy's specs know


class ConsumerProtocolError(ValueError):
    """Bytes that are not a ConsumerProtocolSubscription/Assignment."""


@attrs.frozen
class Subscription:
    topics: tuple[str, ...]
    owned: Mapping[str, frozenset[int]] = attrs.field(factory=dict, hash=False)  # v1+
    rack_id: str | None = None  # v3+
    version: int = 0


@functools.cache
def _spec(name: str) -> MessageSpec:
    return next(s for s in standard_and_project_specs() if s.name == name)


@functools.cache
def _codec(name: str, version: int) -> tuple[Any, Any]:
    codec: tuple[Any, Any] = MessageSchema(_spec(name), version).compiled_codec()
    return codec


def protocol_version(data: bytes) -> int:
    """The version a subscription or assignment starts with (0 for bytes too short to say)."""
    return _VERSION.unpack_from(data)[0] if len(data) >= _VERSION.size else 0


def decode_body(name: str, data: bytes) -> dict[str, Any]:
    """The fields of a :data:`SUBSCRIPTION` or :data:`ASSIGNMENT` (snake case, the version not
    among them: :func:`protocol_version`); ConsumerProtocolError, one line, when the bytes are
    not one."""
    data = bytes(data)
    if len(data) < _VERSION.size or _VERSION.unpack_from(data)[0] < 0:
        raise ConsumerProtocolError(f"not a {name}")
    decode: Callable[..., tuple[dict[str, Any], int]] = _codec(name, min(protocol_version(data), _NEWEST))[0]
    try:
        body, _ = decode(data, _VERSION.size, len(data))
    except Exception as exc:  # the decoder's own errors: the client sent bytes it made up
        raise ConsumerProtocolError(f"malformed {name}: {exc}") from None
    return body


def decode_json(name: str, data: bytes) -> dict[str, Any]:
    """:func:`decode_body` with the fields by their spec names and bytes in base64, as Kafka's
    console formatters print a member's subscription and assignment."""
    body = decode_body(name, data)
    return message_json(body, _spec(name).fields, min(protocol_version(bytes(data)), _NEWEST))


def _partitions(entries: Iterable[Mapping[str, Any]] | None) -> dict[str, frozenset[int]]:
    merged: dict[str, frozenset[int]] = {}
    for entry in entries or ():
        topic = entry["topic"]
        merged[topic] = merged.get(topic, frozenset()) | frozenset(entry["partitions"] or ())
    return {topic: parts for topic, parts in merged.items() if parts}


def decode_subscription(data: bytes) -> Subscription:
    body = decode_body(SUBSCRIPTION, data)
    version = protocol_version(bytes(data))
    return Subscription(tuple(body.get("topics") or ()), _partitions(body.get("owned_partitions")),
                        body.get("rack_id"), version)


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """The partitions of an assignment; empty bytes (a member that never synced) assign none."""
    if not data:
        return {}
    return _partitions(decode_body(ASSIGNMENT, data).get("assigned_partitions"))


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int) -> bytes:
    """A ConsumerProtocolAssignment of ``partitions`` (topics by name) at ``version``."""
    version = max(0, min(version, _NEWEST))
    body = {"assigned_partitions": [{"topic": topic, "partitions": sorted(parts)}
                                    for topic, parts in sorted(partitions.items())],
            "user_data": None}
    out = bytearray(_VERSION.pack(version))
    _codec(ASSIGNMENT, version)[1](body, out)
    return bytes(out)


def encode_subscription(subscription: Subscription) -> bytes:
    """A ConsumerProtocolSubscription at ``subscription.version`` (what a classic consumer sends
    as its JoinGroup metadata; the tools and tests speak it too)."""
    version = max(0, min(subscription.version, _NEWEST))
    body: dict[str, Any] = {"topics": list(subscription.topics), "user_data": None}
    if version >= 1:
        body["owned_partitions"] = [{"topic": topic, "partitions": sorted(parts)}
                                    for topic, parts in sorted(subscription.owned.items())]
    if version >= 2:
        body["generation_id"] = -1
    if version >= 3:
        body["rack_id"] = subscription.rack_id
    out = bytearray(_VERSION.pack(version))
    _codec(SUBSCRIPTION, version)[1](body, out)
    return bytes(out)
