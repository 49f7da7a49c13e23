"""Decoded bodies as the JSON Kafka's generated ``*JsonConverter`` classes write.

Kafka's console formatters (``kafka-console-consumer.sh --formatter``) and kafka-dump-log.sh print
coordinator records through those converters, so a tool that prints the same records must name
fields and render values the same way for its output to be compared, or fed, to what expects
Kafka's. Field names are the spec's with the first letter lowered, bytes are base64 and a Uuid is
Kafka's URL-safe base64 without padding.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from typing import Any

from kafkapy.protocol.specs import FieldSpec

__all__ = ["message_json"]


def message_json(body: Mapping[str, Any], fields: tuple[FieldSpec, ...]) -> dict[str, Any]:
    """A decoded body (snake-case keys, as the codec builds it) as Kafka's JSON converter writes
    it; fields the body lacks (a version without them) are left out."""
    out: dict[str, Any] = {}
    for field in fields:
        if field.snake in body:
            out[field.name[:1].lower() + field.name[1:]] = _value(body[field.snake], field)
    return out


def _value(value: Any, field: FieldSpec) -> Any:
    if value is None:
        return None
    if field.fields is not None:
        inner = field.fields
        return [message_json(v, inner) for v in value] if field.is_array else message_json(value, inner)
    if isinstance(value, list):
        return [_scalar(v) for v in value]
    return _scalar(value)


def _scalar(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")
    return value
