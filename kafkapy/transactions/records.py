"""The records of ``__transaction_state``: Kafka's TransactionLogKey and TransactionLogValue.

Each record's key and value start with a big-endian int16 version, then the struct at that
version (protocol_specs/transaction/, Kafka's JSON dialect, read by kafkapy's codec like every
other message). A null value is a tombstone: the transactional id expired. Kafka writes value
version 0 while the ``transaction.version`` feature is 0, and version 1 (flexible, tagged
fields) from 1 on; kafkapy writes 0 and reads both.

Every state change writes a key and a value, three a committed transaction, so what kafkapy
writes (key v0, value v0) is encoded by hand with ``struct``: the fast path, held equal to the
spec codec byte for byte by a hypothesis test (tests/transactions/test_records.py), and left to
the spec codec for anything a ``struct`` field cannot hold (the codec's error then). Keys and
the partitions part of a value are kept per id and per partition set (a transaction's Ongoing
and PrepareCommit records carry the same set). Reading, on load only, is the spec codec's but
for a value v0, which is read by hand too (``value_fields``, held equal to the codec by a
hypothesis test on valid and damaged values).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable
from typing import Any

from kafkapy.errors import DecodeError
from kafkapy.protocol.json_converter import message_json
from kafkapy.protocol.schema import StructCodec
from kafkapy.protocol.specs import MessageSpec, load_spec_file, project_spec_dir
from kafkapy.transactions.metadata import NO_PRODUCER_EPOCH, TopicPartition, TxnMetadata
from kafkapy.transactions.state import TxnState

__all__ = ["KEY_VERSION", "VALUE_VERSION", "TransactionLogError", "decode_key", "decode_value",
           "encode_key", "encode_value", "record_json", "spec_encode_key", "spec_encode_value",
           "value_fields"]

KEY_VERSION = 0
VALUE_VERSION = 0  # what Kafka writes with transaction.version 0
_VERSION = struct.Struct(">h")
# The hand-written v0 layouts: version, producer id, epoch, timeout, status | the partitions
# (an int32 count, null as -1; per topic an int16-length string and an int32 array) | the last
# update and start timestamps.
_VALUE_V0_HEAD = struct.Struct(">hqhib")
_VALUE_V0_TAIL = struct.Struct(">qq")
_INT32 = struct.Struct(">i")
_NULL_ARRAY = _INT32.pack(-1)
_STRING_MAX = 0x7FFF  # an int16 length
_CACHED = 4096  # ids (keys) and partition sets (values) kept encoded


class TransactionLogError(ValueError):
    """A __transaction_state record kafkapy cannot read (an unknown version, a short buffer)."""


@functools.cache
def _spec(name: str) -> MessageSpec:
    return load_spec_file(project_spec_dir() / "transaction" / f"{name}.json", "kafkapy")


@functools.cache
def _codec(name: str, version: int) -> StructCodec:
    spec = _spec(name)
    if version not in spec.valid_versions:
        raise TransactionLogError(f"{name} version {version} is not one kafkapy reads "
                                  f"(known: {spec.valid_versions})")
    return StructCodec(name, spec.fields, version, spec.is_flexible(version))


def _encode(name: str, version: int, body: dict[str, object]) -> bytes:
    out = bytearray(_VERSION.pack(version))
    _codec(name, version).write(body, out)
    return bytes(out)


def _decode(name: str, data: bytes) -> tuple[int, dict[str, Any]]:
    if len(data) < _VERSION.size:
        raise TransactionLogError(f"{name}: {len(data)} bytes is too short for a version")
    (version,) = _VERSION.unpack_from(data)
    codec = _codec(name, version)
    try:
        body, end = codec.read(memoryview(data), _VERSION.size, len(data))
    except DecodeError as exc:
        raise TransactionLogError(f"{name} v{version}: {exc}") from None
    if end != len(data):
        raise TransactionLogError(f"{name} v{version}: {len(data) - end} bytes left over")
    return version, body


@functools.lru_cache(maxsize=_CACHED)
def encode_key(transactional_id: str) -> bytes:
    try:
        encoded = transactional_id.encode()
    except UnicodeEncodeError:
        return spec_encode_key(transactional_id)
    if len(encoded) > _STRING_MAX:
        return spec_encode_key(transactional_id)
    return _VERSION.pack(KEY_VERSION) + _VERSION.pack(len(encoded)) + encoded


def spec_encode_key(transactional_id: str) -> bytes:
    """``encode_key``'s plain path: the spec codec."""
    return _encode("TransactionLogKey", KEY_VERSION, {"transactional_id": transactional_id})


def decode_key(data: bytes) -> str:
    _, body = _decode("TransactionLogKey", data)
    return str(body["transactional_id"])


def _grouped(partitions: Iterable[TopicPartition]) -> list[dict[str, object]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [{"topic": topic, "partition_ids": ids} for topic, ids in by_topic.items()]


@functools.lru_cache(maxsize=_CACHED)
def _partitions_v0(partitions: frozenset[TopicPartition]) -> bytes | None:
    """The partitions array of a value v0 (as ``_grouped`` orders it), or None when ``struct``
    cannot hold it."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    parts = [_INT32.pack(len(by_topic))]
    try:
        for topic, ids in by_topic.items():
            name = topic.encode()
            if len(name) > _STRING_MAX:
                return None
            parts.append(_VERSION.pack(len(name)) + name + struct.pack(f">i{len(ids)}i", len(ids), *ids))
    except (struct.error, UnicodeEncodeError):
        return None
    return b"".join(parts)


def encode_value(metadata: TxnMetadata | None, version: int = VALUE_VERSION) -> bytes | None:
    """The value bytes for ``metadata``; None (a tombstone) for None. EMPTY writes no partitions
    (null), as Kafka does."""
    if metadata is None:
        return None
    if version == 0:
        state = metadata.state
        partitions = _NULL_ARRAY if state is TxnState.EMPTY else _partitions_v0(metadata.partitions)
        if partitions is not None:
            try:
                return b"".join((
                    _VALUE_V0_HEAD.pack(0, metadata.producer_id, metadata.producer_epoch, metadata.timeout_ms,
                                        state),
                    partitions, _VALUE_V0_TAIL.pack(metadata.last_update_ms, metadata.start_ms)))
            except struct.error:
                pass
    return spec_encode_value(metadata, version)


def spec_encode_value(metadata: TxnMetadata, version: int = VALUE_VERSION) -> bytes:
    """``encode_value``'s plain path: the spec codec, for every version."""
    partitions = None if metadata.state is TxnState.EMPTY else _grouped(metadata.partitions)
    body: dict[str, object] = {
        "producer_id": metadata.producer_id,
        "producer_epoch": metadata.producer_epoch,
        "transaction_timeout_ms": metadata.timeout_ms,
        "transaction_status": int(metadata.state),
        "transaction_partitions": partitions,
        "transaction_last_update_timestamp_ms": metadata.last_update_ms,
        "transaction_start_timestamp_ms": metadata.start_ms,
    }
    if version >= 1:
        body["previous_producer_id"] = metadata.previous_producer_id
    return _encode("TransactionLogValue", version, body)


def _value_v0_fields(data: bytes) -> dict[str, Any] | None:
    """A value v0's body as the spec codec reads it, read by hand with ``struct`` (loading replays
    every record of a partition: about a fifth of the codec's time); None for anything else or
    anything unusual (another version, a short or long buffer, a negative length, a topic name
    that is not UTF-8), which the spec codec then reads or refuses in its own words."""
    size = len(data)
    head = _VALUE_V0_HEAD.size
    if size < head + _INT32.size + _VALUE_V0_TAIL.size or data[0] or data[1]:
        return None
    _, producer_id, producer_epoch, timeout_ms, status = _VALUE_V0_HEAD.unpack_from(data)
    (topics,) = _INT32.unpack_from(data, head)
    pos = head + _INT32.size
    partitions: list[dict[str, object]] | None = None
    if topics >= 0:
        partitions = []
        for _ in range(topics):
            if pos + 2 > size:
                return None
            (length,) = _VERSION.unpack_from(data, pos)
            pos += 2
            if length < 0 or pos + length + 4 > size:
                return None
            try:
                topic = data[pos:pos + length].decode()
            except UnicodeDecodeError:
                return None
            pos += length
            (count,) = _INT32.unpack_from(data, pos)
            pos += 4
            if count < 0 or pos + 4 * count > size:
                return None
            ids = list(struct.unpack_from(f">{count}i", data, pos))
            partitions.append({"topic": topic, "partition_ids": ids})
            pos += 4 * count
    elif topics != -1:
        return None
    if pos + _VALUE_V0_TAIL.size != size:
        return None
    last_update_ms, start_ms = _VALUE_V0_TAIL.unpack_from(data, pos)
    return {"producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_timeout_ms": timeout_ms, "transaction_status": status,
            "transaction_partitions": partitions, "transaction_last_update_timestamp_ms": last_update_ms,
            "transaction_start_timestamp_ms": start_ms}


def value_fields(data: bytes) -> dict[str, Any]:
    """A value's body (any version kafkapy reads): by hand for v0, else the spec codec's."""
    fields = _value_v0_fields(data)
    if fields is None:
        _, fields = _decode("TransactionLogValue", data)
    return fields


def decode_value(transactional_id: str, data: bytes | None) -> TxnMetadata | None:
    """The metadata a value holds; None for a tombstone."""
    if data is None:
        return None
    body = value_fields(data)
    status = body["transaction_status"]
    try:
        state = TxnState(status)
    except ValueError:
        raise TransactionLogError(f"TransactionLogValue: unknown transaction status {status}") from None
    partitions: frozenset[TopicPartition] = frozenset()
    if state is not TxnState.EMPTY:
        partitions = frozenset((str(entry["topic"]), int(p))
                               for entry in body["transaction_partitions"] or ()
                               for p in entry["partition_ids"])
    return TxnMetadata(
        transactional_id=transactional_id,
        producer_id=int(body["producer_id"]),
        producer_epoch=int(body["producer_epoch"]),
        timeout_ms=int(body["transaction_timeout_ms"]),
        state=state,
        last_update_ms=int(body["transaction_last_update_timestamp_ms"]),
        start_ms=int(body["transaction_start_timestamp_ms"]),
        partitions=partitions,
        previous_producer_id=int(body.get("previous_producer_id", -1)),
        last_producer_epoch=NO_PRODUCER_EPOCH,
    )


def record_json(key: bytes, value: bytes | None) -> dict[str, Any]:
    """A record as Kafka 4's TransactionLogMessageFormatter prints it: ``{"key": {"version": V,
    "data": {...}}, "value": {"version": V, "data": {...}} or null}`` (a null value is an expired
    id's tombstone). A version kafkapy has no schema for prints ``"data": "unknown"``, as Kafka's
    does, since a later release may write one; TransactionLogError when the bytes do not decode."""
    return {"key": _part_json("TransactionLogKey", bytes(key)),
            "value": None if value is None else _part_json("TransactionLogValue", bytes(value))}


def _part_json(name: str, data: bytes) -> dict[str, Any]:
    if len(data) < _VERSION.size:
        raise TransactionLogError(f"{name}: {len(data)} bytes is too short for a version")
    (version,) = _VERSION.unpack_from(data)
    if version not in _spec(name).valid_versions:
        return {"version": version, "data": "unknown"}
    _, body = _decode(name, data)
    return {"version": version, "data": message_json(body, _spec(name).fields, version)}
