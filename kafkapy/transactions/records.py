"""The records of ``__transaction_state``: Kafka's TransactionLogKey and TransactionLogValue.

Each record's key and value start with a big-endian int16 version, then the struct at that
version (protocol_specs/transaction/, Kafka's JSON dialect, read by kafkapy's codec like every
other message). A null value is a tombstone: the transactional id expired. Kafka writes value
version 0 while the ``transaction.version`` feature is 0, and version 1 (flexible, tagged
fields) from 1 on; kafkapy writes 0 and reads both.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable
from typing import Any

from kafkapy.errors import DecodeError
from kafkapy.protocol.schema import StructCodec
from kafkapy.protocol.specs import MessageSpec, load_spec_file, project_spec_dir
from kafkapy.transactions.metadata import NO_PRODUCER_EPOCH, TopicPartition, TxnMetadata
from kafkapy.transactions.state import TxnState

__all__ = ["KEY_VERSION", "VALUE_VERSION", "TransactionLogError", "decode_key", "decode_value",
           "encode_key", "encode_value"]

KEY_VERSION = 0
VALUE_VERSION = 0  # what Kafka writes with transaction.version 0
_VERSION = struct.Struct(">h")


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


def encode_key(transactional_id: str) -> bytes:
    return _encode("TransactionLogKey", KEY_VERSION, {"transactional_id": transactional_id})


def decode_key(data: bytes) -> str:
    _, body = _decode("TransactionLogKey", data)
    return str(body["transactional_id"])


def _grouped(partitions: Iterable[TopicPartition]) -> list[dict[str, object]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [{"topic": topic, "partition_ids": ids} for topic, ids in by_topic.items()]


def encode_value(metadata: TxnMetadata | None, version: int = VALUE_VERSION) -> bytes | None:
    """The value bytes for ``metadata``; None (a tombstone) for None. EMPTY writes no partitions
    (null), as Kafka does."""
    if metadata is None:
        return None
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


def decode_value(transactional_id: str, data: bytes | None) -> TxnMetadata | None:
    """The metadata a value holds; None for a tombstone."""
    if data is None:
        return None
    _, body = _decode("TransactionLogValue", data)
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
