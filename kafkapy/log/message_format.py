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
  A timestamp that is negative and not -1 is kept in the batch, and named in ``UpConverted``:
  Kafka's MemoryRecordsBuilder throws on it, which its ReplicaManager answers
  UNKNOWN_SERVER_ERROR, once the record checks it makes first have passed
  (``UpConverted.builder_refusal``, which the Produce handler asks).

  A long set (a request's worth of messages, or a wrapper inflating to 256 MiB) takes seconds of
  Python, so ``up_conversion_steps`` can do it in slices, with a yield between two, for the
  broker's loop; the records are written into the batch as the messages are read
  (``BatchWriter``), never held as a list.

* **down** (``down_convert``, Kafka's ``RecordsUtil.downConvert``): the batches a Fetch read
  become magic-0 (Fetch v0-v1) or magic-1 (v2-v3) messages, each batch in its own codec, offsets
  and timestamps kept. Control batches (transaction markers) are left out, since old consumers
  cannot tell them from data; headers are dropped; from an uncompressed batch the records before
  the fetch offset are left out (old consumers take every message of an uncompressed set), from a
  compressed one they are kept (old consumers skip them). A zstd batch cannot be written before
  magic 2: ``DownConversionRefused`` (UNSUPPORTED_COMPRESSION_TYPE for the partition).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Final

import attrs

from kafkapy.errors import DecodeError, EncodeError, ErrorCode, KafkaApiError
from kafkapy.log.append import RecordsRejected, produce_inflate_limit
from kafkapy.protocol.compression import Buffer, Compression, decompress, decompress_steps
from kafkapy.protocol.legacy_messages import build_message_set
from kafkapy.protocol.records import (
    COMPRESSION_MASK,
    CREATE_TIME,
    LOG_APPEND_TIME,
    TIMESTAMP_TYPE_BIT,
    V2_MAGIC_AT,
    BatchWriter,
    LegacyBatch,
    RecordBatch,
    Records,
    entry_end,
)
from kafkapy.protocol.steps import all_at_once

__all__ = ["CONVERSION_SLICE_MESSAGES", "ConversionIsLong", "DownConversionRefused", "UpConverted",
           "down_convert", "fetch_magic", "up_conversion_steps", "up_convert"]

_LOG_OVERHEAD = 12  # offset and size, in front of every message
NO_TIMESTAMP = -1

CONVERSION_SLICE_MESSAGES: Final = 2_000
"""Messages up-converted between two yields when the broker's loop converts in slices: about
5 us a message (framing, CRC-32, the record written), so some 10 ms, as long as a slice of the
record walk (kafkapy.log.append.WALK_SLICE_RECORDS of 0.7 us records)."""


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


class _Written:
    """Records written into one batch as the messages are read (:class:`BatchWriter`, begun at the
    first record), and what Kafka would refuse in them: the first timestamp its
    MemoryRecordsBuilder throws on (negative, not NO_TIMESTAMP), and the first too far from the
    first timestamp for the batch's int64 deltas, which is refused only once every message has
    been read, as before (Kafka's framing and CRC checks of the whole set come first)."""

    def __init__(self, codec: Compression, chunk: int | None) -> None:
        self.codec = codec
        self.chunk = chunk
        self.writer: BatchWriter | None = None
        self.append_time = False  # a message claims LogAppendTime
        self.negative: tuple[int, int] | None = None  # (index, timestamp)
        self.too_far: EncodeError | None = None

    def add(self, index: int, timestamp: int | None, key: bytes | None, value: bytes | memoryview | None
            ) -> Generator[None, None, None]:
        """Message ``index`` written (a missing timestamp as -1), yielding as the writer asks."""
        stamp = NO_TIMESTAMP if timestamp is None else timestamp
        if stamp < NO_TIMESTAMP and self.negative is None:
            self.negative = (index, stamp)
        if self.too_far is not None:
            return  # refused once the walk ends: nothing more to write
        try:
            if self.writer is None:
                self.writer = BatchWriter(self.codec, stamp, self.chunk)
            yield from self.writer.add(stamp, key, value)
        except EncodeError as exc:  # timestamps further apart than a batch's int64 deltas reach
            self.too_far = exc

    def finish(self, compressed: bool) -> UpConverted:
        """The batch, or the refusal of timestamps too far apart; ``compressed``: from a wrapper."""
        if self.too_far is not None:
            raise RecordsRejected(ErrorCode.INVALID_TIMESTAMP,
                                  f"The messages cannot be one record batch: {self.too_far}")
        assert self.writer is not None
        batch = self.writer.finish(LOG_APPEND_TIME if self.append_time else CREATE_TIME)
        if self.negative is None:
            return UpConverted(batch, compressed)
        return UpConverted(batch, compressed, *self.negative)


def _shallow_messages(data: bytes | memoryview, max_message_bytes: int, every: int | None,
                      chunk: int | None) -> Generator[None, None, tuple[int, LegacyBatch | None, _Written]]:
    """The top-level messages of a legacy set, each checked for framing, size and CRC-32 (a partial
    message at the end is dropped, as Kafka's trimInvalidBytes drops it), the uncompressed ones
    written into a batch as they come: how many, the first compressed one, and the written. A
    yield after each ``every`` messages and as the CRC of a message of ``chunk`` bytes or more, and
    the writer, ask (None: in one go)."""
    written = _Written(Compression.NONE, chunk)
    count, first_magic, compressed = 0, -1, None
    pos, total = 0, len(data)
    while pos < total:
        if every and count and not count % every:
            yield
        try:
            end = entry_end(data, pos, total)
        except DecodeError as exc:
            raise RecordsRejected(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        if end is None:
            break
        magic = data[pos + V2_MAGIC_AT]
        if count and magic != first_magic:
            raise RecordsRejected(ErrorCode.INVALID_RECORD,
                                  f"Batch magic {magic} is not the same as the first batch's magic byte "
                                  f"{first_magic}")
        if end - pos > max_message_bytes:
            raise RecordsRejected(ErrorCode.MESSAGE_TOO_LARGE,
                                  f"The message is {end - pos} bytes, larger than the topic's "
                                  f"max.message.bytes ({max_message_bytes})")
        try:
            message = LegacyBatch(data, pos)
        except DecodeError as exc:
            raise RecordsRejected(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        computed = yield from _crc_steps(message, chunk)
        if computed != message.crc:
            raise RecordsRejected(ErrorCode.CORRUPT_MESSAGE,
                                  f"Record is corrupt (stored crc = {message.crc}, computed crc = "
                                  f"{computed})")
        if not count:
            first_magic = magic
        if message.attributes & COMPRESSION_MASK:
            compressed = compressed or message
        elif compressed is None:  # beside a compressed one, the set is refused: nothing to write
            yield from written.add(count, message.timestamp, message.key, _value(message, chunk))
            written.append_time = written.append_time or bool(message.magic == 1 and
                                                              message.attributes & TIMESTAMP_TYPE_BIT)
        count += 1
        pos = end
    return count, compressed, written


def _crc_steps(message: LegacyBatch, chunk: int | None) -> Generator[None, None, int]:
    """The message's CRC-32 as its bytes give it, in steps of ``chunk`` bytes when it is longer."""
    if chunk is None or message.size_in_bytes < chunk:
        return message.computed_crc
    return (yield from message.computed_crc_steps(chunk))


def _value(message: LegacyBatch, chunk: int | None) -> bytes | memoryview | None:
    """The message's value: a view of the payload it lies in when it is ``chunk`` bytes or more,
    which is never copied (its bytes go to the compressor from there, BatchWriter)."""
    if chunk is not None and message.size_in_bytes >= chunk:
        return message.value_view
    return message.value


def _inner_records(wrapper: LegacyBatch, inflate_limit: int, every: int | None, chunk: int | None
                   ) -> Generator[None, None, _Written]:
    """The records inside a compressed wrapper, checked as Kafka's LogValidator checks them, and
    written into a batch in the wrapper's codec; its value may inflate to ``inflate_limit`` bytes
    (Produce's bound, :func:`~kafkapy.log.append.produce_inflate_limit`), beyond which it is
    refused as any value that does not inflate. With ``every`` and ``chunk``: inflated ``chunk``
    bytes at a time (:func:`decompress_steps`), its messages walked ``every`` at a time, a yield
    between two."""
    value = wrapper.value_view
    if value is None:
        raise RecordsRejected(ErrorCode.INVALID_RECORD, "A compressed message has a null value")
    try:
        if chunk is None:
            inner: bytes | bytearray = decompress(wrapper.compression, value, limit=inflate_limit)
        else:
            inner = yield from decompress_steps(wrapper.compression, value, limit=inflate_limit, every=chunk)
    except DecodeError as exc:
        raise RecordsRejected(ErrorCode.INVALID_RECORD, str(exc)) from None
    return (yield from _inner_messages(wrapper, inner if isinstance(inner, bytes) else memoryview(inner),
                                       every, chunk))


def _inner_messages(wrapper: LegacyBatch, inner: bytes | memoryview, every: int | None, chunk: int | None
                    ) -> Generator[None, None, _Written]:
    """The records of the wrapper's inflated message set ``inner`` (:func:`_inner_records`)."""
    written = _Written(wrapper.compression, chunk)
    errors: list[tuple[int, str]] = []
    written.append_time = bool(wrapper.attributes & TIMESTAMP_TYPE_BIT) and wrapper.magic == 1
    pos, index = 0, 0
    while pos < len(inner):
        if every and index and not index % every:
            yield
        try:
            end = entry_end(inner, pos, len(inner))
            if end is None:
                raise DecodeError("the compressed message set ends inside a message", offset=pos)
            message = LegacyBatch(inner, pos)
        except DecodeError as exc:
            raise RecordsRejected(ErrorCode.CORRUPT_MESSAGE, f"inner message {index}: {exc}") from None
        computed = yield from _crc_steps(message, chunk)
        if computed != message.crc:
            raise RecordsRejected(ErrorCode.CORRUPT_MESSAGE,
                                  f"Inner message {index} is corrupt (stored crc = {message.crc}, "
                                  f"computed crc = {computed})")
        if message.attributes & COMPRESSION_MASK:
            errors.append((index, "Compressed outer record should not have an inner record with a "
                                  "compression attribute set"))
        elif message.magic != wrapper.magic:
            errors.append((index, f"Record's magic {message.magic} does not match outer magic "
                                  f"{wrapper.magic}"))
        elif not errors:  # once one is refused, the set is: nothing more to write
            timestamp = wrapper.timestamp if written.append_time else message.timestamp
            yield from written.add(index, timestamp, message.key, _value(message, chunk))
            written.append_time = written.append_time or bool(message.magic == 1 and
                                                              message.attributes & TIMESTAMP_TYPE_BIT)
        pos, index = end, index + 1
    if errors:
        raise RecordsRejected(ErrorCode.INVALID_RECORD,
                              f"One or more records have been rejected due to {len(errors)} record errors",
                              errors)
    if written.writer is None:
        raise RecordsRejected(ErrorCode.INVALID_RECORD, "A compressed message holds no messages")
    return written


@attrs.frozen
class UpConverted:
    """A Produce v0-v2 partition's message set as one record batch, and what Kafka's
    MemoryRecordsBuilder would refuse in it: the first record whose timestamp is negative and not
    -1 (NO_TIMESTAMP), which its ``appendWithOffset`` throws IllegalArgumentException on."""

    batch: bytes | bytearray | memoryview
    compressed: bool = False  # the messages came in one compressed wrapper
    negative_timestamp_at: int | None = None  # that record's index, and its timestamp
    negative_timestamp: int = NO_TIMESTAMP

    def builder_refusal(self, verdict: RecordsRejected | None) -> KafkaApiError | None:
        """UNKNOWN_SERVER_ERROR (what Kafka's ReplicaManager answers for an unexpected exception)
        when Kafka's builder throws on a negative timestamp before it reaches ``verdict`` (the
        converted batch's checks; None: accepted), else None. Kafka builds the batch after
        checking every record of a compressed wrapper, so any record error comes first; of
        uncompressed messages, it appends each after checking it, so a record error comes first
        only from an earlier message (or the same one). The checks it makes after the build (the
        converted batch's size) come after."""
        at = self.negative_timestamp_at
        if at is None:
            return None
        if verdict is not None and verdict.record_errors and (
                self.compressed or min(index for index, _ in verdict.record_errors) <= at):
            return None
        return KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"Invalid negative timestamp {self.negative_timestamp}")


class ConversionIsLong(Exception):
    """An up-conversion that took more than its first slice (:func:`up_conversion_steps` yielded):
    ``steps`` goes on from there, for the caller to run in slices between which its loop serves
    others. Not a verdict."""

    def __init__(self, steps: Generator[None, None, UpConverted | None]) -> None:
        super().__init__("the up-conversion takes more than one slice")
        self.steps = steps


def up_convert(data: Buffer, *, max_message_bytes: int) -> UpConverted | None:
    """:func:`up_conversion_steps` in one go."""
    return all_at_once(up_conversion_steps(data, max_message_bytes=max_message_bytes))[0]


def up_conversion_steps(data: Buffer, *, max_message_bytes: int, every: int | None = None,
                        chunk: int | None = None) -> Generator[None, None, UpConverted | None]:
    """A Produce v0-v2 partition's message set as one record batch (offsets from 0, no producer
    id), in the codec of its compressed message if it has one; the set itself when it already is a
    record batch; None when it holds no whole message (Kafka appends nothing and answers offset
    -1). Raises RecordsRejected as the table above says.

    With ``every`` and ``chunk``, in slices, with a yield between two: messages walked ``every`` at
    a time, a compressed wrapper inflated and the batch compressed ``chunk`` bytes at a time, the
    CRC of a long message and a long value likewise; the broker's loop runs it so when it is long
    (the messages of a set up to socket.request.max.bytes, or a wrapper inflating to 256 MiB, take
    seconds of Python). Without them, in one go; the two give the same result
    (tests/log/test_message_format.py)."""
    view = data if isinstance(data, bytes) else memoryview(data).cast("B")
    if len(view) > V2_MAGIC_AT and view[V2_MAGIC_AT] == 2:
        return UpConverted(view)
    count, compressed, written = yield from _shallow_messages(view, max_message_bytes, every, chunk)
    if not count:
        return None
    if compressed is not None and count > 1:
        raise RecordsRejected(ErrorCode.INVALID_RECORD, "Compressed outer record has more than one batch")
    if compressed is not None:
        limit = produce_inflate_limit(max_message_bytes)
        written = yield from _inner_records(compressed, limit, every, chunk)
    return written.finish(compressed is not None)


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
