"""Message-format conversion: the old formats (magic 0 and 1) in, record batches stored, and back.

Kafka 3.x stores only record batches (magic 2), yet serves clients that speak the formats before
them: a Produce v0-v2 may carry magic-0 or magic-1 messages, and a Fetch v0-v3 cannot carry a
record batch. So the broker converts both ways, as Kafka 2.8-3.9 do (Kafka 4.0 dropped these
versions, KIP-896):

* **up** (``up_convert``, Kafka's ``LogValidator`` when the source magic is not the log's): the
  messages of one partition become one uncommitted-offset record batch, in the producer's codec,
  which then goes through every check of a Produce v3+ batch (``kafkapy.log.append``) and gets
  its offsets there. What only the old format can get wrong is refused here, with Kafka's error:

  ==========================================================  ==========================
  a message whose framing or CRC-32 is wrong                   CORRUPT_MESSAGE
  a message larger than ``max.message.bytes``                  MESSAGE_TOO_LARGE
  messages of mixed magic                                      INVALID_RECORD
  a compressed message beside any other message                INVALID_RECORD
  an inner message compressed again, or of another magic       INVALID_RECORD + record errors
  an inner message whose CRC-32 is wrong                       CORRUPT_MESSAGE
  a compressed payload that does not inflate                   INVALID_RECORD
  timestamps too far apart for one batch's int64 deltas        INVALID_TIMESTAMP
  ==========================================================  ==========================

  A partition's message set that is already a record batch is left to the v3+ checks as it is.

* **down** (``down_convert``, Kafka's ``RecordsUtil.downConvert``): the batches a Fetch read
  become magic-0 (Fetch v0-v1) or magic-1 (v2-v3) messages, each batch in its own codec, offsets
  and timestamps kept. Control batches (transaction markers) are left out, since old consumers
  cannot tell them from data; headers are dropped; from an uncompressed batch the records before
  the fetch offset are left out (old consumers take every message of an uncompressed set), from a
  compressed one they are kept (old consumers skip them). A zstd batch cannot be written before
  magic 2: ``DownConversionRefused`` (UNSUPPORTED_COMPRESSION_TYPE for the partition).
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkapy.errors import DecodeError, EncodeError, ErrorCode
from kafkapy.log.append import RecordsRejected, produce_inflate_limit
from kafkapy.protocol.compression import Buffer, Compression, decompress
from kafkapy.protocol.legacy_messages import build_message_set
from kafkapy.protocol.records import (
    COMPRESSION_MASK,
    CREATE_TIME,
    LOG_APPEND_TIME,
    TIMESTAMP_TYPE_BIT,
    V2_MAGIC_AT,
    LegacyBatch,
    Record,
    RecordBatch,
    Records,
    build_record_batch,
    entry_end,
)

__all__ = ["DownConversionRefused", "down_convert", "fetch_magic", "up_convert"]

_LOG_OVERHEAD = 12  # offset and size, in front of every message
NO_TIMESTAMP = -1


class DownConversionRefused(Exception):
    """A batch that the old formats cannot express (zstd): the partition is answered ``code``."""

    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def fetch_magic(fetch_version: int) -> int | None:
    """The message format a Fetch version can carry, when it is not record batches (Kafka's
    KafkaApis.maybeConvertFetchedData): magic 0 up to v1, magic 1 up to v3."""
    if fetch_version <= 1:
        return 0
    if fetch_version <= 3:
        return 1
    return None


def _shallow_messages(data: bytes | memoryview, max_message_bytes: int) -> list[LegacyBatch]:
    """The top-level messages of a legacy set, each checked for framing, size and CRC-32; a partial
    message at the end is dropped, as Kafka's trimInvalidBytes drops it."""
    messages: list[LegacyBatch] = []
    pos, total = 0, len(data)
    while pos < total:
        try:
            end = entry_end(data, pos, total)
        except DecodeError as exc:
            raise RecordsRejected(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        if end is None:
            break
        magic = data[pos + V2_MAGIC_AT]
        if messages and magic != messages[0].magic:
            raise RecordsRejected(ErrorCode.INVALID_RECORD,
                                  f"Batch magic {magic} is not the same as the first batch's magic byte "
                                  f"{messages[0].magic}")
        if end - pos > max_message_bytes:
            raise RecordsRejected(ErrorCode.MESSAGE_TOO_LARGE,
                                  f"The message is {end - pos} bytes, larger than the topic's "
                                  f"max.message.bytes ({max_message_bytes})")
        try:
            message = LegacyBatch(data, pos)
        except DecodeError as exc:
            raise RecordsRejected(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        if not message.crc_valid:
            raise RecordsRejected(ErrorCode.CORRUPT_MESSAGE,
                                  f"Record is corrupt (stored crc = {message.crc}, computed crc = "
                                  f"{message.computed_crc})")
        messages.append(message)
        pos = end
    return messages


def _inner_records(wrapper: LegacyBatch, inflate_limit: int) -> tuple[list[Record], bool]:
    """The records inside a compressed wrapper, checked as Kafka's LogValidator checks them, and
    whether any claims LogAppendTime; its value may inflate to ``inflate_limit`` bytes (Produce's
    bound, :func:`~kafkapy.log.append.produce_inflate_limit`), beyond which it is refused as any
    value that does not inflate."""
    value = wrapper.value
    if value is None:
        raise RecordsRejected(ErrorCode.INVALID_RECORD, "A compressed message has a null value")
    try:
        inner = decompress(wrapper.compression, value, limit=inflate_limit)
    except DecodeError as exc:
        raise RecordsRejected(ErrorCode.INVALID_RECORD, str(exc)) from None
    records: list[Record] = []
    errors: list[tuple[int, str]] = []
    append_time = bool(wrapper.attributes & TIMESTAMP_TYPE_BIT) and wrapper.magic == 1
    pos, index = 0, 0
    while pos < len(inner):
        try:
            end = entry_end(inner, pos, len(inner))
            if end is None:
                raise DecodeError("the compressed message set ends inside a message", offset=pos)
            message = LegacyBatch(inner, pos)
        except DecodeError as exc:
            raise RecordsRejected(ErrorCode.CORRUPT_MESSAGE, f"inner message {index}: {exc}") from None
        if not message.crc_valid:
            raise RecordsRejected(ErrorCode.CORRUPT_MESSAGE,
                                  f"Inner message {index} is corrupt (stored crc = {message.crc}, "
                                  f"computed crc = {message.computed_crc})")
        if message.attributes & COMPRESSION_MASK:
            errors.append((index, "Compressed outer record should not have an inner record with a "
                                  "compression attribute set"))
        elif message.magic != wrapper.magic:
            errors.append((index, f"Record's magic {message.magic} does not match outer magic "
                                  f"{wrapper.magic}"))
        else:
            timestamp = wrapper.timestamp if append_time else message.timestamp
            records.append(Record(index, NO_TIMESTAMP if timestamp is None else timestamp,
                                  message.key, message.value))
            append_time = append_time or bool(message.magic == 1 and message.attributes & TIMESTAMP_TYPE_BIT)
        pos, index = end, index + 1
    if errors:
        raise RecordsRejected(ErrorCode.INVALID_RECORD,
                              f"One or more records have been rejected due to {len(errors)} record errors",
                              errors)
    if not records:
        raise RecordsRejected(ErrorCode.INVALID_RECORD, "A compressed message holds no messages")
    return records, append_time


def up_convert(data: Buffer, *, max_message_bytes: int) -> bytes | None:
    """A Produce v0-v2 partition's message set as one record batch (offsets from 0, no producer
    id), in the codec of its compressed message if it has one; the set itself when it already is a
    record batch; None when it holds no whole message (Kafka appends nothing and answers offset
    -1). Raises RecordsRejected as the table above says."""
    view = data if isinstance(data, bytes) else bytes(data)
    if len(view) > V2_MAGIC_AT and view[V2_MAGIC_AT] == 2:
        return view
    messages = _shallow_messages(view, max_message_bytes)
    if not messages:
        return None
    compressed = [m for m in messages if m.attributes & COMPRESSION_MASK]
    if compressed and len(messages) > 1:
        raise RecordsRejected(ErrorCode.INVALID_RECORD, "Compressed outer record has more than one batch")
    codec = Compression.NONE
    if compressed:
        records, append_time = _inner_records(compressed[0], produce_inflate_limit(max_message_bytes))
        codec = compressed[0].compression
    else:
        records = [Record(index, NO_TIMESTAMP if m.timestamp is None else m.timestamp, m.key, m.value)
                   for index, m in enumerate(messages)]
        append_time = any(m.magic == 1 and m.attributes & TIMESTAMP_TYPE_BIT for m in messages)
    try:
        return build_record_batch(records, compression=codec,
                                  timestamp_type=LOG_APPEND_TIME if append_time else CREATE_TIME,
                                  base_timestamp=records[0].timestamp)
    except EncodeError as exc:  # timestamps further apart than a batch's int64 deltas reach
        raise RecordsRejected(ErrorCode.INVALID_TIMESTAMP,
                              f"The messages cannot be one record batch: {exc}") from None


def down_convert(chunks: Iterable[Buffer], *, to_magic: int, fetch_offset: int) -> bytes:
    """What a Fetch read (whole batches, in order) is in ``to_magic``'s format; see the module's
    docstring. Raises DownConversionRefused for a zstd batch."""
    out: list[bytes] = []
    for chunk in chunks:
        for batch in Records(chunk):
            if batch.magic <= to_magic:
                out.append(bytes(batch.raw))
                continue
            if isinstance(batch, LegacyBatch):  # magic 1 stored, magic 0 asked: one message, or a wrapper
                records = batch.record_list(check_crc=False)
                compression, timestamp_type, append_time = batch.compression, CREATE_TIME, NO_TIMESTAMP
            else:
                assert isinstance(batch, RecordBatch)
                if batch.is_control:
                    continue
                compression = batch.compression
                if compression == Compression.ZSTD:
                    raise DownConversionRefused(
                        "Down-conversion of zstandard-compressed batches is not supported")
                records = batch.record_list(check_crc=False)
                timestamp_type = batch.timestamp_type
                append_time = batch.max_timestamp if timestamp_type == LOG_APPEND_TIME else NO_TIMESTAMP
            if compression == Compression.NONE:
                records = [r for r in records if r.offset >= fetch_offset]
            if records:
                out.append(build_message_set(records, magic=to_magic, compression=compression,
                                             timestamp_type=timestamp_type, log_append_time=append_time))
    return b"".join(out)
