"""Decoded bodies as the JSON Kafka's generated ``*JsonConverter`` classes write.

Kafka's console formatters (``kafka-console-consumer.sh --formatter``) and kafka-dump-log.sh print
coordinator records through those converters, so a tool that prints the same records must name
fields and render values the same way for its output to be compared, or fed, to what expects
Kafka's. Field names are the spec's with the first letter lowered, bytes are base64 and a Uuid is
Kafka's URL-safe base64 without padding. A tagged field is written only when it differs from
its default, as the generated converters do.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from typing import Any

from kafkapy.protocol.schema import default_value
from kafkapy.protocol.specs import FieldSpec

__all__ = ["message_json"]


def message_json(body: Mapping[str, Any], fields: tuple[FieldSpec, ...], version: int) -> dict[str, Any]:
    """A decoded body (snake-case keys, as the codec builds it) at ``version`` as Kafka's JSON
    converter writes it; fields the body lacks (a version without them) are left out."""
    out: dict[str, Any] = {}
    for field in fields:
        if field.snake not in body:
            continue
        value = body[field.snake]
        if field.tagged_in(version) and _is_default(value, field, version):
            continue
        out[field.name[:1].lower() + field.name[1:]] = _value(value, field, version)
    return out


def _is_default(value: Any, field: FieldSpec, version: int) -> bool:
    if field.is_struct and value is not None:
        assert field.fields is not None
        return all(_is_default(value.get(inner.snake), inner, version) for inner in field.fields
                   if version in inner.versions)
    return bool(value == default_value(field, version))


def _value(value: Any, field: FieldSpec, version: int) -> Any:
    if value is None:
        return None
    if field.fields is not None:
        inner = field.fields
        if field.is_array:
            return [message_json(v, inner, version) for v in value]
        return message_json(value, inner, version)
    if isinstance(value, list):
        return [_scalar(v) for v in value]
    return _scalar(value)


def _scalar(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")
    return value
