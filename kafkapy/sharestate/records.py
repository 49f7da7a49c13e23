"""The records of ``__share_group_state``: Kafka's ShareSnapshot and ShareUpdate keys and values.

A record's key is a big-endian int16 *record type* followed by the key message at that version,
its value an int16 value version followed by the value message, or null for a tombstone (Kafka's
CoordinatorRecordSerde, as ``__consumer_offsets`` has them):

====  ==================================  ==================================================
type  key / value                         what it says
====  ==================================  ==================================================
0     ShareSnapshotKey / ...Value v0      a share-partition's whole state (a new snapshot epoch)
1     ShareUpdateKey / ...Value v0        what changed since that snapshot (start offset -1: unmoved)
====  ==================================  ==================================================

Both keys hold (group id, topic id, partition); both values are flexible. The schemas are this
project's specs in ``protocol_specs/records/``, Kafka 4.1's final layouts (an int32 snapshot
epoch; 4.2's tagged DeliveryCompleteCount is read and not written). An unknown record type or
value version is a ShareStateRecordError (the loader skips it, as Kafka's skips records of a newer broker).
"""

from __future__ import annotations

import functools
import struct
import uuid
from typing import Any

from kafkapy.errors import DecodeError
from kafkapy.protocol.schema import StructCodec
from kafkapy.protocol.specs import record_spec
from kafkapy.sharestate.state import (
    NO_TIMESTAMP,
    RecordType,
    SharePartitionKey,
    ShareStateRecord,
    ShareStateValue,
    StateBatch,
)

__all__ = ["VALUE_VERSION", "ShareStateRecordError", "decode_record", "encode_record"]

VALUE_VERSION = 0  # the only one Kafka has
_VERSION = struct.Struct(">h")


_KEY_SPECS = {RecordType.SNAPSHOT: "ShareSnapshotKey", RecordType.UPDATE: "ShareUpdateKey"}
_VALUE_SPECS = {RecordType.SNAPSHOT: "ShareSnapshotValue", RecordType.UPDATE: "ShareUpdateValue"}


class ShareStateRecordError(ValueError):
    """A ``__share_group_state`` record kafkapy cannot read."""


@functools.cache
def _codec(name: str, version: int) -> StructCodec:
    spec = record_spec(name)
    if version not in spec.valid_versions:
        raise ShareStateRecordError(f"{name} version {version} is not one kafkapy reads")
    return StructCodec(name, spec.fields, version, spec.is_flexible(version))


def _read(name: str, version: int, data: bytes, start: int) -> dict[str, Any]:
    try:
        body, _end = _codec(name, version).read(memoryview(data), start, len(data))
    except DecodeError as exc:
        raise ShareStateRecordError(f"{name} v{version}: {exc}") from None
    fields: dict[str, Any] = body
    return fields


def encode_record(record: ShareStateRecord) -> tuple[bytes, bytes | None]:
    """The key and value bytes of ``record``."""
    group_id, topic_id, partition = record.key
    key = bytearray(_VERSION.pack(record.kind))
    _codec(_KEY_SPECS[record.kind], record.kind).write(
        {"group_id": group_id, "topic_id": topic_id, "partition": partition}, key)
    if record.value is None:
        return bytes(key), None
    state = record.value
    body: dict[str, object] = {
        "snapshot_epoch": state.snapshot_epoch, "leader_epoch": state.leader_epoch,
        "start_offset": state.start_offset,
        "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                           "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                          for b in state.batches]}
    if record.kind is RecordType.SNAPSHOT:
        body["state_epoch"] = state.state_epoch
        body["create_timestamp"], body["write_timestamp"] = state.create_timestamp, state.write_timestamp
    value = bytearray(_VERSION.pack(VALUE_VERSION))
    _codec(_VALUE_SPECS[record.kind], VALUE_VERSION).write(body, value)
    return bytes(key), bytes(value)


def decode_record(key: bytes, value: bytes | None) -> ShareStateRecord:
    if len(key) < _VERSION.size:
        raise ShareStateRecordError(f"a {len(key)}-byte key is too short for a record type")
    (kind_number,) = _VERSION.unpack_from(key)
    try:
        kind = RecordType(kind_number)
    except ValueError:
        raise ShareStateRecordError(f"unknown record type {kind_number}") from None
    fields = _read(_KEY_SPECS[kind], kind, key, _VERSION.size)
    share_key: SharePartitionKey = (str(fields["group_id"]), uuid.UUID(str(fields["topic_id"])),
                                    int(fields["partition"]))
    if value is None:
        return ShareStateRecord(kind, share_key, None)
    if len(value) < _VERSION.size:
        raise ShareStateRecordError(f"a {len(value)}-byte value is too short for a version")
    (version,) = _VERSION.unpack_from(value)
    body = _read(_VALUE_SPECS[kind], version, value, _VERSION.size)
    batches = tuple(StateBatch(int(b["first_offset"]), int(b["last_offset"]), int(b["delivery_state"]),
                               int(b["delivery_count"])) for b in body["state_batches"] or ())
    return ShareStateRecord(kind, share_key, ShareStateValue(
        snapshot_epoch=int(body["snapshot_epoch"]), state_epoch=int(body.get("state_epoch", -1)),
        leader_epoch=int(body["leader_epoch"]), start_offset=int(body["start_offset"]), batches=batches,
        create_timestamp=int(body.get("create_timestamp", NO_TIMESTAMP)),
        write_timestamp=int(body.get("write_timestamp", NO_TIMESTAMP))))
