"""Writing Kafka's message formats from before record batches: magic 0 (0.8) and magic 1 (0.10).

A broker still writes them when a client fetches with Fetch v0-v3, which cannot carry record
batches (Kafka's down-conversion, ``RecordsUtil.downConvert``). Reading them is
``kafkapy.protocol.records.LegacyBatch``.

The layout, per message (every field big-endian)::

    offset int64, size int32, crc uint32, magic int8, attributes int8,
    [timestamp int64 (magic 1 only)], key bytes (int32 length, -1 null), value bytes

The CRC is CRC-32 (not -C) over ``magic`` to the end. An uncompressed set is one such message per
record, each with its absolute offset. A compressed set is one wrapper message, key null, whose
value is the codec's bytes of the inner messages; the wrapper carries the absolute offset of the
last inner message, and the inner offsets are absolute in magic 0 but relative to the wrapper's
first (0, 1, ...) in magic 1 (KIP-31). Under LogAppendTime (magic 1) the wrapper and every inner
message carry the attribute bit and the append time.

LZ4 in magic 0 is framed with Kafka 0.8's header checksum, which wrongly covers the frame's magic
number (KAFKA-3160); magic-0 readers check for that one, so it is written that way.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

from kafkapy.protocol.compression import Compression, compress, lz4_with_kafka08_header_checksum
from kafkapy.protocol.records import COMPRESSION_MASK, LOG_APPEND_TIME, TIMESTAMP_TYPE_BIT, Record

__all__ = ["LEGACY_MAGICS", "build_message_set"]

LEGACY_MAGICS = (0, 1)
NO_TIMESTAMP = -1
_OFFSET_AND_SIZE = struct.Struct(">qi")
_CRC = struct.Struct(">I")
_MAGIC_AND_ATTRIBUTES = struct.Struct(">bb")
_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")


def _message(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None,
             value: bytes | None) -> bytes:
    """One message with its log overhead (offset and size) in front."""
    body = bytearray(_MAGIC_AND_ATTRIBUTES.pack(magic, attributes))
    if magic == 1:
        body += _TIMESTAMP.pack(timestamp)
    for blob in (key, value):
        if blob is None:
            body += _LENGTH.pack(-1)
        else:
            body += _LENGTH.pack(len(blob))
            body += blob
    crc = zlib.crc32(body)
    return _OFFSET_AND_SIZE.pack(offset, len(body) + _CRC.size) + _CRC.pack(crc) + body


def build_message_set(records: Sequence[Record], *, magic: int, compression: Compression = Compression.NONE,
                      timestamp_type: int = 0, log_append_time: int = NO_TIMESTAMP) -> bytes:
    """``records`` (offsets ascending, gaps allowed) as one magic-0 or magic-1 message set.

    ``timestamp_type`` LOG_APPEND_TIME gives every magic-1 message ``log_append_time``; otherwise
    each keeps its own timestamp (-1 for none). Headers have no place before magic 2 and are
    dropped, as Kafka drops them. Raises ValueError for zstd (no codec id before magic 2) or an
    empty ``records``."""
    if magic not in LEGACY_MAGICS:
        raise ValueError(f"magic {magic} is not a legacy message format")
    if not records:
        raise ValueError("a message set needs at least one record")
    if compression > Compression.LZ4:
        raise ValueError(f"{compression} has no codec id before magic 2")
    append_time = magic == 1 and timestamp_type == LOG_APPEND_TIME
    ts_bit = TIMESTAMP_TYPE_BIT if append_time else 0

    def timestamp_of(record: Record) -> int:
        if append_time:
            return log_append_time
        return NO_TIMESTAMP if record.timestamp is None else record.timestamp

    if compression == Compression.NONE:
        return b"".join(_message(r.offset, magic, ts_bit, timestamp_of(r), r.key, r.value) for r in records)
    first = records[0].offset
    inner = b"".join(
        _message(r.offset - first if magic == 1 else r.offset, magic, ts_bit, timestamp_of(r), r.key, r.value)
        for r in records)
    payload = compress(compression, inner)
    if magic == 0 and compression == Compression.LZ4:
        payload = lz4_with_kafka08_header_checksum(payload)
    wrapper_timestamp = max(timestamp_of(r) for r in records)
    attributes = (int(compression) & COMPRESSION_MASK) | ts_bit
    return _message(records[-1].offset, magic, attributes, wrapper_timestamp, None, payload)
