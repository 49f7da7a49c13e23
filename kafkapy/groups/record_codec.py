"""``__consumer_offsets`` records to and from bytes, as Kafka's group coordinator writes them.

Theory of operation
-------------------
A record's key is a big-endian int16 *record type* followed by the key message at that version;
its value is an int16 *value version* followed by the value message, or null for a tombstone
(Kafka's CoordinatorRecordSerde). The record type is the key's schema version, so it says which
key and value schemas follow:

====  ======================================================  =========================
type  key / value                                             value versions (written)
====  ======================================================  =========================
0, 1  OffsetCommitKey / OffsetCommitValue                     0-4 (3; 1 with an expiry)
2     GroupMetadataKey / GroupMetadataValue                   0-4 (3)
3     ConsumerGroupMetadataKey / ...Value                     0
4     ConsumerGroupPartitionMetadataKey / ...Value            0
5     ConsumerGroupMemberMetadataKey / ...Value               0
6     ConsumerGroupTargetAssignmentMetadataKey / ...Value     0
7     ConsumerGroupTargetAssignmentMemberKey / ...Value       0
8     ConsumerGroupCurrentMemberAssignmentKey / ...Value      0
10    ShareGroupMemberMetadataKey / ...Value                  0
11    ShareGroupMetadataKey / ...Value                        0
12    ShareGroupTargetAssignmentMetadataKey / ...Value        0
13    ShareGroupTargetAssignmentMemberKey / ...Value          0
14    ShareGroupCurrentMemberAssignmentKey / ...Value         0
15    ShareGroupStatePartitionMetadataKey / ...Value          0
====  ======================================================  =========================

Types 10-15 are share groups' (KIP-932), in Kafka 4.1's layouts (the records were a preview that
changed layout without new versions: 4.1 added ShareGroupMetadataValue's MetadataHash and the
initializing topics with their timestamps, and dropped type 9, ShareGroupPartitionMetadata, which
is refused as unknown, so replay skips it as Kafka 4.1's loader does). The written versions are
those of Kafka's MetadataVersion.offsetCommitValueVersion / groupMetadataValueVersion at any
metadata version since 2.3: the newest non-flexible one, since no tagged field exists yet.

The schemas are this project's specs in ``protocol_specs/records/`` (Kafka's dialect), compiled
and cached like every API's. A value's Python shape is the attrs class of
``kafkapy.groups.records``, whose field names are the specs' snake_case names (two classic member
fields excepted, renamed in ``_RENAMES``). A field an older version lacks decodes to its spec
default; encoding at an older version drops the fields it lacks (all of them ignorable, as Kafka's
generated code drops them). Trailing bytes after a message are ignored, as Kafka's reader does.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kafkapy.errors import DecodeError
from kafkapy.groups.records import (
    NO_EXPIRE_TIMESTAMP,
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupKey,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecord,
    GroupValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    PartitionRacks,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    TopicInfo,
    TopicMetadata,
    TopicPartitions,
    TopicPartitionsInfo,
)
from kafkapy.protocol.consumer_protocol import ConsumerProtocolError, decode_json
from kafkapy.protocol.json_converter import message_json
from kafkapy.protocol.schema import MessageSchema, default_value
from kafkapy.protocol.specs import FieldSpec, MessageSpec, record_spec

__all__ = [
    "GroupRecordError",
    "RecordKind",
    "UnknownRecordType",
    "consumer_protocol_json",
    "decode_key",
    "decode_record",
    "decode_value",
    "encode_key",
    "encode_record",
    "encode_value",
    "kind_for_type",
    "kind_of",
    "record_json",
    "value_version_for",
]

_VERSION = struct.Struct(">h")
# ShareGroupPartitionMetadata: Kafka 4.0 wrote it, 4.1 replaced it with ShareGroupMetadataValue's
# MetadataHash (KIP-1101) and skips it on load, as replay here does.
REMOVED_SHARE_GROUP_TYPE = 9


class GroupRecordError(DecodeError):
    """Bytes that are not a ``__consumer_offsets`` record kafkapy can read: one line saying why."""


class UnknownRecordType(GroupRecordError):
    """A key whose record type (its version prefix) kafkapy has no schema for. Kafka's loader
    skips such records with a warning (a leftover of a newer broker), and so does replay."""

    def __init__(self, record_type: int) -> None:
        self.record_type = record_type
        what = "a share group's ShareGroupPartitionMetadata (Kafka 4.0's; 4.1 no longer writes it)" \
            if record_type == REMOVED_SHARE_GROUP_TYPE else "not a record type kafkapy knows (0-8, 10-15)"
        super().__init__(f"__consumer_offsets key of record type {record_type}: {what}", offset=0,
                         field="key.version")


@attrs.frozen
class RecordKind:
    """One kind of record: the key version Kafka writes for it and its two schemas' names."""

    record_type: int
    key_class: type[Any]
    value_class: type[Any]

    @property
    def key_spec(self) -> MessageSpec:
        return record_spec(self.key_class.__name__)

    @property
    def value_spec(self) -> MessageSpec:
        return record_spec(self.value_class.__name__)


_KINDS = (
    RecordKind(1, OffsetCommitKey, OffsetCommitValue),
    RecordKind(2, GroupMetadataKey, GroupMetadataValue),
    RecordKind(3, ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    RecordKind(4, ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue),
    RecordKind(5, ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    RecordKind(6, ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
    RecordKind(7, ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
    RecordKind(8, ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
    RecordKind(10, ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue),
    RecordKind(11, ShareGroupMetadataKey, ShareGroupMetadataValue),
    RecordKind(12, ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue),
    RecordKind(13, ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue),
    RecordKind(14, ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue),
    RecordKind(15, ShareGroupStatePartitionMetadataKey, ShareGroupStatePartitionMetadataValue),
)
# Type 0 is OffsetCommitKey's first version (the same layout); Kafka reads both, writes 1.
_BY_TYPE: dict[int, RecordKind] = {0: _KINDS[0], **{kind.record_type: kind for kind in _KINDS}}
_BY_KEY_CLASS: dict[type[Any], RecordKind] = {kind.key_class: kind for kind in _KINDS}
_BY_VALUE_CLASS: dict[type[Any], RecordKind] = {kind.value_class: kind for kind in _KINDS}

# attrs field -> spec field, where the names differ (the classic member's timeouts say their unit).
_RENAMES: dict[type[Any], dict[str, str]] = {
    MemberMetadata: {"rebalance_timeout_ms": "rebalance_timeout", "session_timeout_ms": "session_timeout"},
}
# attrs field -> the attrs class of its struct (or of each element of its struct array).
_NESTED: dict[type[Any], dict[str, type[Any]]] = {
    GroupMetadataValue: {"members": MemberMetadata},
    ConsumerGroupPartitionMetadataValue: {"topics": TopicMetadata},
    TopicMetadata: {"partition_metadata": PartitionRacks},
    ConsumerGroupMemberMetadataValue: {"classic_member_metadata": ClassicMemberMetadata},
    ClassicMemberMetadata: {"supported_protocols": ClassicProtocol},
    ConsumerGroupTargetAssignmentMemberValue: {"topic_partitions": TopicPartitions},
    ConsumerGroupCurrentMemberAssignmentValue: {"assigned_partitions": TopicPartitions,
                                                "partitions_pending_revocation": TopicPartitions},
    ShareGroupTargetAssignmentMemberValue: {"topic_partitions": TopicPartitions},
    ShareGroupCurrentMemberAssignmentValue: {"assigned_partitions": TopicPartitions},
    ShareGroupStatePartitionMetadataValue: {"initializing_topics": TopicPartitionsInfo,
                                            "initialized_topics": TopicPartitionsInfo,
                                            "deleting_topics": TopicInfo},
}


def kind_for_type(record_type: int) -> RecordKind:
    """The kind a key's record type names; UnknownRecordType for any other."""
    kind = _BY_TYPE.get(record_type)
    if kind is None:
        raise UnknownRecordType(record_type)
    return kind


def kind_of(item: GroupKey | GroupValue) -> RecordKind:
    kind = _BY_KEY_CLASS.get(type(item)) or _BY_VALUE_CLASS.get(type(item))
    if kind is None:
        raise TypeError(f"{type(item).__name__} is not a __consumer_offsets key or value")
    return kind


def value_version_for(value: GroupValue) -> int:
    """The value version Kafka writes: OffsetCommitValue v3 (v1 when the commit expires on its
    own), GroupMetadataValue v3, every KIP-848 value v0."""
    if isinstance(value, OffsetCommitValue):
        return 1 if value.expire_timestamp != NO_EXPIRE_TIMESTAMP else 3
    if isinstance(value, GroupMetadataValue):
        return 3
    return 0


# --- schemas: compiled once per (spec, version) ------------------------------------------------

Decoder = Callable[[bytes, int, int], tuple[Mapping[str, Any], int]]
Encoder = Callable[[Mapping[str, Any], bytearray], None]


@functools.cache
def _schema(name: str, version: int) -> tuple[Decoder, Encoder, Callable[[Mapping[str, Any]], Any]]:
    schema = MessageSchema(record_spec(name), version)
    decode, encode = schema.compiled_codec()
    return decode, encode, schema.compiled_fit()


def _checked(spec: MessageSpec, version: int, where: str) -> None:
    if version not in spec.valid_versions:
        raise GroupRecordError(f"__consumer_offsets {where}: {spec.name} has no version {version} "
                               f"(kafkapy reads {spec.valid_versions.low}-{spec.valid_versions.high})",
                               offset=0, field=f"{where}.version")


def _encode(spec: MessageSpec, version: int, item: Any) -> bytes:
    _, encode, fit = _schema(spec.name, version)
    out = bytearray(_VERSION.pack(version))
    encode(fit(_to_body(item)), out)
    return bytes(out)


def _decode(spec: MessageSpec, cls: type[Any], data: bytes, version: int, where: str) -> Any:
    decode, _, _ = _schema(spec.name, version)
    return _from_body(cls, _run_decoder(decode, spec, data, version, where), spec.fields)


def _run_decoder(decode: Decoder, spec: MessageSpec, data: bytes, version: int,
                 where: str) -> Mapping[str, Any]:
    try:
        body, _ = decode(data, _VERSION.size, len(data))
    except DecodeError as exc:
        raise GroupRecordError(f"__consumer_offsets {where} ({spec.name} v{version}): {exc.reason}",
                               offset=exc.offset, field=exc.field, truncated=exc.truncated) from None
    except Exception as exc:  # a decoder bug must still surface as the one error readers expect
        raise GroupRecordError(f"__consumer_offsets {where} ({spec.name} v{version}): {exc!r}") from exc
    return body


def _version(data: bytes, where: str) -> int:
    if len(data) < _VERSION.size:
        raise GroupRecordError(f"__consumer_offsets {where} of {len(data)} bytes has no version",
                               offset=0, field=f"{where}.version", truncated=True)
    version: int = _VERSION.unpack_from(data)[0]
    return version


# --- public ------------------------------------------------------------------------------------


def encode_key(key: GroupKey) -> bytes:
    """The key's bytes: its record type, then the key message at that version."""
    kind = kind_of(key)
    return _encode(kind.key_spec, kind.record_type, key)


def encode_value(value: GroupValue | None, version: int | None = None) -> bytes | None:
    """The value's bytes at ``version`` (what Kafka writes when None); None stays a tombstone."""
    if value is None:
        return None
    spec = kind_of(value).value_spec
    version = value_version_for(value) if version is None else version
    if version not in spec.valid_versions:
        raise ValueError(f"{spec.name} has no version {version} ({spec.valid_versions})")
    return _encode(spec, version, value)


def encode_record(record: GroupRecord) -> tuple[bytes, bytes | None]:
    """A record's key and value bytes, as Kafka's coordinator would write them."""
    if record.value is not None and kind_of(record.value) is not kind_of(record.key):
        raise TypeError(f"{type(record.key).__name__} cannot hold a {type(record.value).__name__}")
    return encode_key(record.key), encode_value(record.value)


def decode_key(data: bytes) -> GroupKey:
    data = bytes(data)
    record_type = _version(data, "key")
    kind = kind_for_type(record_type)
    key: GroupKey = _decode(kind.key_spec, kind.key_class, data, record_type, "key")
    return key


def decode_value(record_type: int, data: bytes | None) -> GroupValue | None:
    """The value of a record of ``record_type`` (its key's version); None for a tombstone."""
    if data is None:
        return None
    data = bytes(data)
    spec = kind_for_type(record_type).value_spec
    version = _version(data, "value")
    _checked(spec, version, "value")
    value: GroupValue = _decode(spec, kind_for_type(record_type).value_class, data, version, "value")
    return value


def decode_record(key: bytes, value: bytes | None) -> GroupRecord:
    """A ``__consumer_offsets`` record from its key and value bytes (None: a tombstone).
    GroupRecordError (UnknownRecordType for a record type kafkapy has no schema for) otherwise."""
    decoded_key = decode_key(key)
    return GroupRecord(decoded_key, decode_value(_VERSION.unpack_from(key)[0], value))


def record_json(key: bytes, value: bytes | None, *, consumer_protocol: bool = False) -> dict[str, Any]:
    """A record as Kafka's console formatters for ``__consumer_offsets`` print it (Kafka 4's
    CoordinatorRecordMessageFormatter): ``{"key": {"type": T, "data": {...}}, "value": {"version":
    V, "data": {...}} or null}``, fields by their spec names, bytes in base64, topic ids as Kafka
    writes a Uuid (URL-safe base64). ``consumer_protocol``: a classic "consumer" group's member
    subscriptions and assignments decoded too (:func:`consumer_protocol_json`), as kafka-dump-log.sh
    shows them. GroupRecordError when the bytes are not such a record."""
    key = bytes(key)
    record_type = _version(key, "key")
    kind = kind_for_type(record_type)
    decode, _, _ = _schema(kind.key_spec.name, record_type)
    key_body = _run_decoder(decode, kind.key_spec, key, record_type, "key")
    answer: dict[str, Any] = {
        "key": {"type": record_type, "data": message_json(key_body, kind.key_spec.fields, record_type)},
        "value": None}
    if value is not None:
        value = bytes(value)
        version = _version(value, "value")
        _checked(kind.value_spec, version, "value")
        decode, _, _ = _schema(kind.value_spec.name, version)
        value_body = _run_decoder(decode, kind.value_spec, value, version, "value")
        data = message_json(value_body, kind.value_spec.fields, version)
        if consumer_protocol and data.get("protocolType") == "consumer":
            for member, raw in zip(data.get("members") or (), value_body.get("members") or ()):
                for name, spec_name in (("subscription", "ConsumerProtocolSubscription"),
                                        ("assignment", "ConsumerProtocolAssignment")):
                    decoded = consumer_protocol_json(spec_name, raw.get(name) or b"")
                    if decoded is not None:  # otherwise the bytes stay, in base64, as Kafka keeps them
                        member[name] = decoded
        answer["value"] = {"version": version, "data": data}
    return answer


def consumer_protocol_json(name: str, data: bytes) -> dict[str, Any] | None:
    """A ConsumerProtocolSubscription or ConsumerProtocolAssignment (what a classic consumer group's
    members carry) as JSON, fields by spec name; None when the bytes are not one."""
    try:
        return decode_json(name, data)
    except ConsumerProtocolError:
        return None


# --- attrs values <-> decoded bodies -----------------------------------------------------------


def _to_body(item: Any) -> dict[str, Any]:
    cls = type(item)
    renames = _RENAMES.get(cls, {})
    nested = _NESTED.get(cls, {})
    body: dict[str, Any] = {}
    for field in attrs.fields(cls):
        value = getattr(item, field.name)
        if field.name in nested and value is not None:
            value = [_to_body(v) for v in value] if isinstance(value, tuple) else _to_body(value)
        elif isinstance(value, tuple):
            value = list(value)
        body[renames.get(field.name, field.name)] = value
    return body


# One plan per (attrs class, spec fields): per attribute its body key, its default when the version
# lacks it, and the nested class; built once, so decoding a record is a loop over tuples.
_Step = tuple[str, str, Any, "type[Any] | None", bool, "tuple[FieldSpec, ...] | None"]
_PLANS: dict[tuple[type[Any], int], tuple[_Step, ...]] = {}


def _plan(cls: type[Any], fields: tuple[FieldSpec, ...]) -> tuple[_Step, ...]:
    renames = _RENAMES.get(cls, {})
    nested = _NESTED.get(cls, {})
    by_snake = {field.snake: field for field in fields}
    steps = []
    for attribute in attrs.fields(cls):
        spec = by_snake[renames.get(attribute.name, attribute.name)]
        # a field a version lacks gets its spec default, taken at a version that has the field
        default = default_value(spec, spec.versions.high)
        if isinstance(default, list):
            default = tuple(default)
        steps.append((attribute.name, spec.snake, default, nested.get(attribute.name), spec.is_array,
                      spec.fields))
    plan = _PLANS[(cls, id(fields))] = tuple(steps)
    return plan


def _from_body(cls: type[Any], body: Mapping[str, Any], fields: tuple[FieldSpec, ...]) -> Any:
    plan = _PLANS.get((cls, id(fields))) or _plan(cls, fields)
    kwargs: dict[str, Any] = {}
    for name, key, default, sub, is_array, inner in plan:
        value = body.get(key, default)
        if sub is not None and value is not None:
            assert inner is not None
            value = tuple(_from_body(sub, v, inner) for v in value) if is_array \
                else _from_body(sub, value, inner)
        elif type(value) is list:
            value = tuple(value)
        elif isinstance(value, (bytearray, memoryview)):
            value = bytes(value)
        kwargs[name] = value
    return cls(**kwargs)
