"""A magic-2 batch of one record, built by hand: the broker's own small writes.

A committed transaction makes the broker write five batches of its own, each holding one
record without headers: three ``__transaction_state`` records (Ongoing, PrepareCommit,
CompleteCommit) and a marker per partition. ``build_record_batch`` takes any records (tuples,
dicts, Records, headers, compression, offsets with gaps) and normalises each; for one record
all of that is overhead, and it was a tenth of the broker's CPU per transaction. This writes
the one layout those batches have, with the fields computed as ``build_record_batch`` computes
them: the record's timestamp is the base timestamp (delta 0), offset delta 0, the max
timestamp the base timestamp, and a last offset delta of 0.

The fast path of ``build_record_batch``, held equal to it byte for byte, errors included, by a
hypothesis test (tests/protocol/test_one_record_batch.py).
"""

from __future__ import annotations

import struct

from kafkapy.protocol.crc32c import crc32c
from kafkapy.protocol.records import CREATE_TIME, LOG_APPEND_TIME, build_record_batch

__all__ = ["one_record_batch"]

# The v2 header up to the CRC (base offset, batch length, partition leader epoch, magic, CRC),
# and the CRC-covered rest (attributes, last offset delta, base and max timestamp, producer id,
# epoch, base sequence, record count). Together Kafka's DefaultRecordBatch header, 61 bytes.
_UP_TO_CRC = struct.Struct(">qiibI")
_COVERED = struct.Struct(">hiqqqhii")
_LENGTH_BEFORE_COVERED = 9  # batch_length counts from the leader epoch: 4 + 1 + 4 bytes, then the rest
_TRANSACTIONAL, _CONTROL, _LOG_APPEND_TIME = 0x10, 0x20, 0x08  # attribute bits (no compression)
_MAX_COVERED = (1 << 31) - 1 - _LENGTH_BEFORE_COVERED  # batch_length is an int32
# Attributes, timestamp delta and offset delta of the record: all zero, one byte each.
_RECORD_HEAD = b"\x00\x00\x00"
_NULL = b"\x01"  # a null key or value: zigzag varint of -1
_NO_HEADERS = b"\x00"


def _varint(value: int) -> bytes:
    """Kafka's zigzag varint of a non-negative int."""
    unsigned = value << 1
    if unsigned < 0x80:
        return bytes((unsigned,))
    out = bytearray()
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


def one_record_batch(key: bytes | None, value: bytes | None, *, base_offset: int, base_timestamp: int,
                     producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                     is_transactional: bool = False, is_control: bool = False,
                     timestamp_type: int = CREATE_TIME, partition_leader_epoch: int = -1) -> bytes:
    """``build_record_batch([(key, value)], ...)`` with the same keywords: the same bytes, and for
    anything unusual (buffers that are not bytes, a bad timestamp type, a field out of range)
    the general path itself, so the errors are its errors too."""
    if (isinstance(key, bytes) or key is None) and (isinstance(value, bytes) or value is None) \
            and (timestamp_type == CREATE_TIME or timestamp_type == LOG_APPEND_TIME):
        record = b"".join((_RECORD_HEAD, _NULL if key is None else _varint(len(key)) + key,
                           _NULL if value is None else _varint(len(value)) + value, _NO_HEADERS))
        attributes = ((_TRANSACTIONAL if is_transactional else 0) | (_CONTROL if is_control else 0)
                      | (_LOG_APPEND_TIME if timestamp_type == LOG_APPEND_TIME else 0))
        try:
            covered = _COVERED.pack(attributes, 0, base_timestamp, base_timestamp, producer_id,
                                    producer_epoch, base_sequence, 1) + _varint(len(record)) + record
            if len(covered) <= _MAX_COVERED:
                return _UP_TO_CRC.pack(base_offset, _LENGTH_BEFORE_COVERED + len(covered),
                                       partition_leader_epoch, 2, crc32c(covered)) + covered
        except struct.error:
            pass
    return build_record_batch([(key, value)], base_offset=base_offset, base_timestamp=base_timestamp,
                              producer_id=producer_id, producer_epoch=producer_epoch,
                              base_sequence=base_sequence, is_transactional=is_transactional,
                              is_control=is_control, timestamp_type=timestamp_type,
                              partition_leader_epoch=partition_leader_epoch)
