"""Kafka ``records`` fields: record batches (magic 2) and legacy message sets (magic 0/1).

Theory of operation
-------------------
A ``records`` field is an opaque byte string at the protocol level; most of the
time a broker only stores and forwards it.  :class:`Records` therefore wraps the
bytes and does nothing until asked: construction is O(1) and never fails, so a
request carrying garbage records still parses and can be answered with
CORRUPT_MESSAGE by whoever looks inside.

Looking inside happens in three layers, each lazy:

1. *Framing.*  Every entry, whatever its format, starts with
   ``offset int64, length int32`` and has its magic byte at position 16, so the
   walk over entries needs only those 17 bytes per entry.  An entry that claims
   more bytes than remain is a *partial tail* -- normal at the end of a Fetch
   response, which the broker cuts at ``max_bytes`` -- and ends iteration
   quietly unless ``strict=True``.
2. *Batch header.*  A :class:`RecordBatch` (v2) unpacks its fixed 61-byte
   header with one ``struct`` call; a :class:`LegacyBatch` (v0/v1) unpacks one
   message's header and locates its key and value.
3. *Records.*  Only iterating a batch checks its CRC, inflates a compressed
   payload, and decodes its records, a whole batch at a time (a list is
   cheaper to build than a generator is to resume once per record).

Decoding never trusts a length: each is compared with the bytes that remain
before anything is sliced, and every inconsistency is a
:class:`~kafkapy.errors.DecodeError` whose ``offset`` is a position in the
original records bytes.  For trouble inside a compressed payload the offset is
where that payload starts, and the reason says where in the inflated bytes.

The v2 record decoder is the hot path.  Its varints are nearly always one or
two bytes long (lengths under 8 KiB, deltas under 8192), so each is read
inline through a 16384-entry zigzag table and only longer ones take a
function call.

Layouts (all integers big-endian)::

    v2 batch:  base_offset q, batch_length i, partition_leader_epoch i, magic b,
               crc I (CRC-32C of attributes..end), attributes h,
               last_offset_delta i, base_timestamp q, max_timestamp q,
               producer_id q, producer_epoch h, base_sequence i, count i,
               records...
    v2 record: length varint, attributes b, timestamp_delta varlong,
               offset_delta varint, key varint-length bytes,
               value varint-length bytes, header count varint,
               headers (key varint-length utf8, value varint-length bytes)...
    v0/v1:     offset q, size i, crc I (CRC-32 of magic..end), magic b,
               attributes b, [timestamp q, v1 only], key i-length bytes,
               value i-length bytes
"""

from __future__ import annotations

import base64
import functools
import struct
import time
import zlib
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any, Final, NamedTuple, NoReturn, cast

from kafkapy.errors import DecodeError, EncodeError
from kafkapy.protocol.compression import (
    MAX_INFLATED_BYTES,
    Compression,
    Deflater,
    compress,
    compression_of,
    decompress,
    decompress_steps,
)
from kafkapy.protocol.crc32c import crc32c  # v2 batches' checksum; exported from here too
from kafkapy.protocol.strings import decode_string

__all__ = [
    "COMPRESSION_MASK",
    "CONTROL_BIT",
    "TIMESTAMP_TYPE_BIT",
    "TRANSACTIONAL_BIT",
    "V2_ATTRIBUTES_AT",
    "V2_COUNT_AT",
    "V2_CRC_AT",
    "V2_HEADER_SIZE",
    "V2_LEADER_EPOCH_AT",
    "V2_MAGIC_AT",
    "V2_MAX_TIMESTAMP_AT",
    "Batch",
    "BatchWriter",
    "Compression",
    "LegacyBatch",
    "Record",
    "RecordBatch",
    "Records",
    "RecordsSummary",
    "build_record_batch",
    "crc32c",
    "entry_end",
    "read_v2_records",
    "rebuilt_batch_steps",
    "record_batch_steps",
    "v2_payload",
    "v2_payload_steps",
]

Buffer = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP_TYPE = -1
_NO_TIMESTAMP_VALUE = -1  # a record timestamp of -1 means none

_LOG_OVERHEAD = 12  # offset int64 + length int32, common to every format
_UP_TO_MAGIC = 17  # bytes needed before an entry's magic byte can be read

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
V2_HEADER_SIZE = _V2_HEADER.size  # 61: base offset to record count
_V2_HEADER_SIZE = V2_HEADER_SIZE
# Where the v2 header's fields sit, for code that rewrites a batch in place (the broker's append).
V2_LEADER_EPOCH_AT = 12
V2_MAGIC_AT = 16
V2_CRC_AT = 17
V2_ATTRIBUTES_AT = 21  # the CRC covers everything from here on
V2_MAX_TIMESTAMP_AT = 35
V2_COUNT_AT = 57
_V2_CRC_AT = V2_CRC_AT
_V2_ATTRIBUTES_AT = V2_ATTRIBUTES_AT
_V2_MIN_LENGTH = _V2_HEADER_SIZE - _LOG_OVERHEAD

_LEGACY_HEADER = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_LEGACY_MIN_SIZE = (14, 22)  # crc+magic+attributes+[timestamp]+key length+value length
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

COMPRESSION_MASK = 0x07  # attributes: the codec id
_COMPRESSION_MASK = COMPRESSION_MASK
TIMESTAMP_TYPE_BIT = 0x08  # attributes: set when the batch carries log-append time
_TIMESTAMP_TYPE_BIT = TIMESTAMP_TYPE_BIT
TRANSACTIONAL_BIT = 0x10  # attributes: set on a transaction's batches and markers
_TRANSACTIONAL_BIT = TRANSACTIONAL_BIT
CONTROL_BIT = 0x20
_CONTROL_BIT = CONTROL_BIT
_DELETE_HORIZON_BIT = 0x40

_INT32_MAX = (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# Zigzag decoding of every value a one- or two-byte varint can hold: nearly all of them.
_ZIGZAG = tuple((u >> 1) ^ -(u & 1) for u in range(1 << 14))


class _Corrupt(Exception):
    """Raised deep inside decoders, which know positions but not where their buffer sits."""

    def __init__(self, reason: str, pos: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.pos = pos

    def located(self, origin: int | None, payload_at: int) -> DecodeError:
        """The DecodeError to raise, placed in the records field: at ``origin + pos`` when the
        payload was read in place, at the payload (with the position in the reason) when inflated."""
        if origin is None:
            return DecodeError(
                f"{self.reason} (at byte {self.pos} of the decompressed payload)",
                offset=payload_at,
                field="records",
            )
        return DecodeError(self.reason, offset=origin + self.pos, field="records")


def _varint_long(data: bytes | bytearray, pos: int, max_bytes: int) -> tuple[int, int]:
    """Decode a zigzag varint of at most ``max_bytes``: the slow path behind the inline reads."""
    start = pos
    result = 0
    shift = 0
    for _ in range(max_bytes):
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            # Java drops bits beyond the type's width rather than rejecting them.
            result &= 0xFFFFFFFF if max_bytes == 5 else 0xFFFFFFFFFFFFFFFF
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise _Corrupt(f"varint longer than {max_bytes} bytes", start)


# --- the uniform-records fast path ----------------------------------------------------------------
# A producer's batch is usually records of one shape: the same key and value lengths, no headers,
# timestamp deltas of one byte. Such records differ only in their timestamp and offset-delta bytes,
# so after one record is walked, every other record's structure bytes (length, key and value
# lengths, header count) can be compared with a strided slice, in C, instead of walked in Python.
# Offset deltas widen at 64 and 8192 (one, two, three varint bytes): one shape per width band.
_UNIFORM_MIN_RECORDS = 16  # below, walking the records is cheaper than slicing (measured: ~12)
_OFFSET_DELTA_BANDS = ((0, 64, 1), (64, 1 << 13, 2), (1 << 13, 1 << 16, 3))  # bigger batches: the walk


@functools.cache
def _offset_delta_bytes(width: int) -> tuple[bytes, ...]:
    """Byte ``j`` of the varint of each offset delta in ``width``'s band, as one string per ``j``.

    Built from runs rather than delta by delta (the three-byte band has 57,344 deltas: 34 ms a
    byte at a time, paid by the first Produce of a batch that large): byte 0 of the zigzag varint
    of ``delta`` is ``2 * delta`` mod 128, which repeats every 64 deltas, and byte ``j >= 1`` is
    ``delta >> (7j - 1)`` mod 128, constant over runs of ``2 ** (7j - 1)`` deltas, on which every
    band's bounds lie. tests/protocol/test_records_scan.py holds it to the varints themselves."""
    low, high, _ = next(band for band in _OFFSET_DELTA_BANDS if band[2] == width)
    columns = [bytes((delta << 1) & 0x7F for delta in range(64)) * ((high - low) // 64)]
    for j in range(1, width):
        run = 1 << (7 * j - 1)
        columns.append(b"".join(bytes([(delta >> (7 * j - 1)) & 0x7F]) * run
                                for delta in range(low, high, run)))
    return tuple(column.translate(_WITH_CONTINUATION) if j < width - 1 else column
                 for j, column in enumerate(columns))


_WITH_CONTINUATION = bytes(b | 0x80 for b in range(256))  # a varint byte with more to follow


def _record_shape(
    data: bytes | bytearray, pos: int, end: int, width: int
) -> tuple[int, int, list[int], bool] | None:
    """Walk one record at ``pos`` with ``width`` offset-delta bytes: ``(stride, timestamp byte at,
    structure byte positions, key is null)``, relative to ``pos``, or None when it is not of the
    uniform shape (a multi-byte timestamp delta, headers, or anything the full walk must judge)."""
    try:
        length, at = _varint_long(data, pos, 5)
        if length < 0 or length > end - at:
            return None
        rec_end = at + length
        structure = list(range(at - pos))  # the length varint
        ts_at = at + 1  # after the attributes byte, which the walk does not read
        if data[ts_at] >= 0x80:
            return None
        key_at = ts_at + 1 + width
        n, at = _varint_long(data, key_at, 5)
        structure.extend(range(key_at - pos, at - pos))
        null_key = n == -1
        if n < -1 or n > rec_end - at:
            return None
        at += max(n, 0)
        value_at = at
        n, at = _varint_long(data, value_at, 5)
        structure.extend(range(value_at - pos, at - pos))
        if n < -1 or n > rec_end - at:
            return None
        at += max(n, 0)
        if at + 1 != rec_end or data[at] != 0:  # no headers, and nothing after them
            return None
        structure.append(at - pos)
    except (IndexError, _Corrupt):
        return None
    return rec_end - pos, ts_at - pos, structure, null_key


def _scan_uniform(data: bytes | bytearray, pos: int, end: int, count: int) -> tuple[int, int, int] | None:
    """``(min timestamp delta, max timestamp delta, null keys)`` of ``count`` records of the
    uniform shape filling ``data[pos:end]`` exactly, with offset deltas 0..count-1; else None,
    and the full walk decides (and words any error)."""
    stamp_columns: list[bytes | bytearray] = []
    null_keys = 0
    index = 0
    for low, high, width in _OFFSET_DELTA_BANDS:
        if index >= count:
            break
        if index >= high:
            continue
        shape = _record_shape(data, pos, end, width)
        if shape is None:
            return None
        stride, ts_at, structure, null_key = shape
        n = min(count, high) - index
        stop = pos + n * stride
        if stop > end:
            return None
        for at in structure:
            if data[pos + at : stop : stride].count(data[pos + at]) != n:
                return None
        expected = _offset_delta_bytes(width)
        for j in range(width):
            if data[pos + ts_at + 1 + j : stop : stride] != expected[j][index - low : index - low + n]:
                return None
        stamps_here = data[pos + ts_at : stop : stride]
        if not stamps_here.isascii():  # a timestamp delta of more than one byte
            return None
        stamp_columns.append(stamps_here)
        null_keys += n if null_key else 0
        index += n
        pos = stop
    if index != count or pos != end:
        return None
    zz = _ZIGZAG
    deltas = [zz[b] for b in _distinct_ascii(b"".join(stamp_columns))]
    return min(deltas), max(deltas), null_keys


# From this many bytes on, 128 searches in C (one per value) beat a set built byte by byte.
_DISTINCT_BY_SEARCH_FROM = 512


def _distinct_ascii(data: bytes) -> Iterable[int]:
    """The values of the bytes in ``data``, all below 0x80."""
    if len(data) < _DISTINCT_BY_SEARCH_FROM:
        return set(data)
    return [value for value in range(0x80) if value in data]


def _flat(raw: Buffer) -> bytes | memoryview:
    """A buffer that slices and indexes as bytes, without copying."""
    if isinstance(raw, bytes):
        return raw
    view = memoryview(raw)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(data: Any) -> bytes | None:
    if data is None or isinstance(data, (bytes, bytearray, memoryview)):
        return None if data is None else bytes(data)
    return base64.b64decode(data, validate=True)


def _short(data: bytes | None, limit: int = 24) -> str:
    if data is None or len(data) <= limit:
        return repr(data)
    return f"{data[:limit]!r}...({len(data)} bytes)"


class Record:
    """One decoded record, the same shape for every message format.

    A plain ``__slots__`` class rather than attrs: a Fetch response can hold
    millions of these, and construction is about a third of decoding time.
    """

    __slots__ = ("headers", "key", "offset", "timestamp", "value")

    def __init__(
        self,
        offset: int,
        timestamp: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: list[Header] | None = None,
    ) -> None:
        self.offset = offset
        # Absolute milliseconds; None only for magic 0, which has no timestamps.
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers: list[Header] = [] if headers is None else headers

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable form; bytes become base64 so binary payloads survive."""
        return {
            "offset": self.offset,
            "timestamp": self.timestamp,
            "key": _b64(self.key),
            "value": _b64(self.value),
            "headers": [{"key": k, "value": _b64(v)} for k, v in self.headers],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        """Inverse of :meth:`to_dict`; also accepts raw bytes where base64 is expected."""
        headers: list[Header] = []
        for h in data.get("headers") or ():
            if isinstance(h, Mapping):
                headers.append((str(h["key"]), _unb64(h.get("value"))))
            else:
                k, v = h
                headers.append((str(k), _unb64(v)))
        return cls(
            int(data.get("offset", 0)),
            data.get("timestamp"),
            _unb64(data.get("key")),
            _unb64(data.get("value")),
            headers,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return (
            self.offset == other.offset
            and self.timestamp == other.timestamp
            and self.key == other.key
            and self.value == other.value
            and self.headers == other.headers
        )

    __hash__ = None  # type: ignore[assignment]  # mutable: headers is a list

    def __repr__(self) -> str:
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, key={_short(self.key)}, "
            f"value={_short(self.value)}, headers={self.headers!r})"
        )


def entry_end(data: bytes | memoryview, pos: int, total: int) -> int | None:
    """The one framing step of a records field: the end of the entry (batch or legacy message) at
    ``pos``, or None if the field ends before it does (a partial tail); DecodeError for framing
    no entry can have. Records, and the JSON writer, walk a field with it."""
    remaining = total - pos
    if remaining < _LOG_OVERHEAD:
        return None
    length: int = _I32.unpack_from(data, pos + 8)[0]
    if length < _LEGACY_MIN_SIZE[0]:
        raise DecodeError(f"entry length {length} is impossibly small", offset=pos + 8, field="records")
    if remaining < _UP_TO_MAGIC:
        return None
    magic = data[pos + 16]
    if magic > 2:
        raise DecodeError(f"unknown magic byte {magic}", offset=pos + 16, field="records")
    minimum = _V2_MIN_LENGTH if magic == 2 else _LEGACY_MIN_SIZE[magic]
    if length < minimum:
        raise DecodeError(
            f"entry length {length} is below the magic {magic} minimum of {minimum}",
            offset=pos + 8,
            field="records",
        )
    if length > remaining - _LOG_OVERHEAD:
        return None
    return pos + _LOG_OVERHEAD + length


def v2_payload(
    buf: bytes | memoryview, pos: int, end: int, attributes: int, limit: int = MAX_INFLATED_BYTES
) -> tuple[bytes, int, int, int | None]:
    """The records of the v2 batch ``buf[pos:end]`` as ``(data, start, stop, origin)``: inflated when
    compressed (``origin`` None: positions are in the inflated bytes), else the batch's own bytes
    (``origin``: where ``data``'s position 0 lies in ``buf``). The one place a payload is found.
    A payload inflating beyond ``limit`` bytes raises InflationLimitExceeded (a DecodeError)."""
    payload_at = pos + _V2_HEADER_SIZE
    codec = attributes & _COMPRESSION_MASK
    if codec:
        data = decompress(Compression(codec), memoryview(buf)[payload_at:end], offset=payload_at,
                          limit=limit)
        return data, 0, len(data), None
    if isinstance(buf, bytes):
        return buf, payload_at, end, 0
    data = bytes(buf[payload_at:end])
    return data, 0, len(data), payload_at


def v2_payload_steps(
    buf: bytes | memoryview, pos: int, end: int, attributes: int, limit: int, every: int
) -> Generator[None, None, tuple[bytes | bytearray, int, int, int | None]]:
    """:func:`v2_payload`, a compressed payload inflated about ``every`` bytes at a time with a
    yield between two (``decompress_steps``: the same bytes or the same refusal)."""
    codec = attributes & _COMPRESSION_MASK
    if not codec:
        return v2_payload(buf, pos, end, attributes, limit)
    payload_at = pos + _V2_HEADER_SIZE
    data = yield from decompress_steps(Compression(codec), memoryview(buf)[payload_at:end], offset=payload_at,
                                       limit=limit, every=every)
    return data, 0, len(data), None


def read_v2_records(
    data: bytes, pos: int, end: int, base_offset: int, base_ts: int, lat: int | None, count: int
) -> list[Record]:
    """The one reader of magic-2 records: the ``count`` records of a batch payload ``data[pos:end]``
    (inflated already), offsets from ``base_offset``, timestamps from ``base_ts`` or, with
    log-append time, ``lat`` for every record. Positions are within ``data``; faults raise _Corrupt.

    The JSON writer (records_json) keeps a copy of these reads, fused with its formatting, as its
    fast path; it falls back to this reader on any doubt, and its tests hold the two equal.

    Every varint is decoded inline: one- and two-byte ones (nearly all of
    them) through the zigzag table, longer ones through a call.  Reads past
    ``end`` are caught by the per-record length check, reads past ``data``
    by IndexError.
    """
    zz = _ZIGZAG
    varint = _varint_long
    out: list[Record] = []
    append = out.append
    start = pos
    try:
        for index in range(count):
            start = pos
            if pos >= end:
                raise _Corrupt(f"batch ends after {index} of {count} records", pos)
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                length = zz[(b & 0x7F) | (c << 7)]
                pos += 2
            else:
                length, pos = varint(data, pos, 5)
            if length < 0 or length > end - pos:
                raise _Corrupt(
                    f"record length {length} overruns the batch ({end - pos} bytes left)", start
                )
            rec_end = pos + length
            # The attributes byte at ``pos`` is unused by every Kafka version so far.
            b = data[pos + 1]
            if b < 0x80:
                ts_delta = zz[b]
                pos += 2
            elif (c := data[pos + 2]) < 0x80:
                ts_delta = zz[(b & 0x7F) | (c << 7)]
                pos += 3
            else:
                ts_delta, pos = varint(data, pos + 1, 10)
            b = data[pos]
            if b < 0x80:
                offset_delta = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                offset_delta = zz[(b & 0x7F) | (c << 7)]
                pos += 2
            else:
                offset_delta, pos = varint(data, pos, 5)
            b = data[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                n = zz[(b & 0x7F) | (c << 7)]
                pos += 2
            else:
                n, pos = varint(data, pos, 5)
            if n < 0:
                if n != -1:
                    raise _Corrupt(f"negative key length {n}", pos)
                key = None
            elif n > rec_end - pos:
                raise _Corrupt(f"key length {n} overruns the record", pos)
            else:
                key = data[pos : pos + n]
                pos += n
            b = data[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                n = zz[(b & 0x7F) | (c << 7)]
                pos += 2
            else:
                n, pos = varint(data, pos, 5)
            if n < 0:
                if n != -1:
                    raise _Corrupt(f"negative value length {n}", pos)
                value = None
            elif n > rec_end - pos:
                raise _Corrupt(f"value length {n} overruns the record", pos)
            else:
                value = data[pos : pos + n]
                pos += n
            b = data[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            else:
                n, pos = varint(data, pos, 5)
            headers: list[Header] = []
            if n:
                # Each header takes at least two bytes, which bounds a lying count.
                if n < 0 or n > (rec_end - pos) >> 1:
                    raise _Corrupt(f"header count {n} does not fit the record", pos)
                for _ in range(n):
                    b = data[pos]
                    if b < 0x80:
                        n = zz[b]
                        pos += 1
                    else:
                        n, pos = varint(data, pos, 5)
                    if n < 0 or n > rec_end - pos:
                        raise _Corrupt(f"header key length {n} is invalid here", pos)
                    try:
                        hkey = data[pos : pos + n].decode()
                    except UnicodeDecodeError:  # Header.key() as Java reads it: U+FFFD, never refused
                        hkey = decode_string(data[pos : pos + n])
                    pos += n
                    b = data[pos]
                    if b < 0x80:
                        n = zz[b]
                        pos += 1
                    elif (c := data[pos + 1]) < 0x80:
                        n = zz[(b & 0x7F) | (c << 7)]
                        pos += 2
                    else:
                        n, pos = varint(data, pos, 5)
                    if n < 0:
                        if n != -1:
                            raise _Corrupt(f"negative header value length {n}", pos)
                        headers.append((hkey, None))
                    elif n > rec_end - pos:
                        raise _Corrupt(f"header value length {n} overruns the record", pos)
                    else:
                        headers.append((hkey, data[pos : pos + n]))
                        pos += n
            if pos != rec_end:
                raise _Corrupt(
                    f"record declares {length} bytes but its fields take {pos - rec_end + length}", start
                )
            append(
                Record(
                    base_offset + offset_delta,
                    base_ts + ts_delta if lat is None else lat,
                    key,
                    value,
                    headers,
                )
            )
    except IndexError:
        raise _Corrupt("record runs past the end of the batch", start) from None
    if pos != end:
        raise _Corrupt(f"{end - pos} bytes follow the last of {count} records", pos)
    return out


# What _scan_slice carries from one slice of records to the next: the lowest and highest
# timestamp delta, whether the offset deltas are in order, the null keys. The lowest and highest
# start beyond any varlong, so the first record sets both.
_Tally = tuple[int, int, bool, int]
_FRESH_TALLY: _Tally = (1 << 64, -(1 << 64), True, 0)

def _scan_slice(data: bytes | bytearray, pos: int, end: int, first: int, stop: int, count: int,
                tally: _Tally) -> tuple[int, _Tally]:
    """Walk records ``first`` to ``stop - 1`` (of ``count``) of a v2 payload ``data[:end]``, the
    first at ``pos``, with every check of ``read_v2_records``: the position after them, and
    ``tally`` with their timestamp deltas, order and null keys added; faults raise _Corrupt.

    The append checks' fast path (:meth:`RecordBatch.scan`), kept line for line beside
    ``read_v2_records`` so the two fail on the same bytes; tests/protocol/test_records_scan.py
    holds them equal. A slice of a batch's records, so that a long walk can pause between slices
    (:meth:`RecordBatch.scan_steps`)."""
    zz = _ZIGZAG
    varint = _varint_long
    min_ts, max_ts, in_order, null_keys = tally
    start = pos
    try:
        for index in range(first, stop):
            start = pos
            if pos >= end:
                raise _Corrupt(f"batch ends after {index} of {count} records", pos)
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                length = zz[(b & 0x7F) | (c << 7)]
                pos += 2
            else:
                length, pos = varint(data, pos, 5)
            if length < 0 or length > end - pos:
                raise _Corrupt(
                    f"record length {length} overruns the batch ({end - pos} bytes left)", start
                )
            rec_end = pos + length
            b = data[pos + 1]
            if b < 0x80:
                ts_delta = zz[b]
                pos += 2
            elif (c := data[pos + 2]) < 0x80:
                ts_delta = zz[(b & 0x7F) | (c << 7)]
                pos += 3
            else:
                ts_delta, pos = varint(data, pos + 1, 10)
            if ts_delta > max_ts:
                max_ts = ts_delta
            if ts_delta < min_ts:
                min_ts = ts_delta
            b = data[pos]
            if b < 0x80:
                offset_delta = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                offset_delta = zz[(b & 0x7F) | (c << 7)]
                pos += 2
            else:
                offset_delta, pos = varint(data, pos, 5)
            if offset_delta != index:
                in_order = False
            b = data[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                n = zz[(b & 0x7F) | (c << 7)]
                pos += 2
            else:
                n, pos = varint(data, pos, 5)
            if n < 0:
                if n != -1:
                    raise _Corrupt(f"negative key length {n}", pos)
                null_keys += 1
            elif n > rec_end - pos:
                raise _Corrupt(f"key length {n} overruns the record", pos)
            else:
                pos += n
            b = data[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                n = zz[(b & 0x7F) | (c << 7)]
                pos += 2
            else:
                n, pos = varint(data, pos, 5)
            if n < 0:
                if n != -1:
                    raise _Corrupt(f"negative value length {n}", pos)
            elif n > rec_end - pos:
                raise _Corrupt(f"value length {n} overruns the record", pos)
            else:
                pos += n
            b = data[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            else:
                n, pos = varint(data, pos, 5)
            if n:
                if n < 0 or n > (rec_end - pos) >> 1:
                    raise _Corrupt(f"header count {n} does not fit the record", pos)
                for _ in range(n):
                    b = data[pos]
                    if b < 0x80:
                        n = zz[b]
                        pos += 1
                    else:
                        n, pos = varint(data, pos, 5)
                    if n < 0 or n > rec_end - pos:
                        raise _Corrupt(f"header key length {n} is invalid here", pos)
                    pos += n  # the key's bytes are not checked: Kafka reads them only as Header.key()
                    b = data[pos]
                    if b < 0x80:
                        n = zz[b]
                        pos += 1
                    elif (c := data[pos + 1]) < 0x80:
                        n = zz[(b & 0x7F) | (c << 7)]
                        pos += 2
                    else:
                        n, pos = varint(data, pos, 5)
                    if n < 0:
                        if n != -1:
                            raise _Corrupt(f"negative header value length {n}", pos)
                    elif n > rec_end - pos:
                        raise _Corrupt(f"header value length {n} overruns the record", pos)
                    else:
                        pos += n
            if pos != rec_end:
                raise _Corrupt(
                    f"record declares {length} bytes but its fields take {pos - rec_end + length}", start
                )
    except IndexError:
        raise _Corrupt("record runs past the end of the batch", start) from None
    return pos, (min_ts, max_ts, in_order, null_keys)


class RecordsSummary(NamedTuple):
    """What :meth:`RecordBatch.scan` reports: the facts append validation checks, per batch."""

    records: int
    min_timestamp: int  # absolute, as the records read (log-append time when the batch says so)
    max_timestamp: int
    offsets_in_order: bool  # offset deltas are exactly 0, 1, ..., count - 1
    null_keys: int  # records without a key


class Scanned(NamedTuple):
    """What :meth:`RecordBatch.scan_steps` returns: the summary, and the payload it walked."""

    summary: RecordsSummary
    data: bytes | bytearray  # the payload, inflated if the batch is compressed
    start: int  # where the first record lies in ``data``


RecordFacts = tuple[int, int, bool]  # a record's offset, timestamp, and whether its key is null


class RecordBatch:
    """A magic-2 record batch: header decoded eagerly (cheap), records on iteration.

    ``buf`` may be a whole records field; ``pos`` is where the batch starts in
    it, so error offsets come out relative to the field rather than the batch.
    """

    __slots__ = (
        "_buf",
        "_end",
        "_pos",
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "record_count",
    )

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    def __init__(self, buf: Buffer, pos: int = 0) -> None:
        data = _flat(buf)
        if len(data) - pos < _V2_HEADER_SIZE:
            raise DecodeError(
                f"record batch header needs {_V2_HEADER_SIZE} bytes, {len(data) - pos} remain",
                offset=pos,
                field="records",
                truncated=True,
            )
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = _V2_HEADER.unpack_from(data, pos)
        if self.magic != 2:
            raise DecodeError(f"record batch has magic {self.magic}, not 2", offset=pos + 16, field="records")
        if self.batch_length < _V2_MIN_LENGTH:
            raise DecodeError(
                f"batch_length {self.batch_length} is shorter than a batch header",
                offset=pos + 8,
                field="records",
            )
        end = pos + _LOG_OVERHEAD + self.batch_length
        if end > len(data):
            raise DecodeError(
                f"record batch of {self.batch_length + _LOG_OVERHEAD} bytes, {len(data) - pos} remain",
                offset=pos + 8,
                field="records",
                truncated=True,
            )
        self._buf = data
        self._pos = pos
        self._end = end
        if self.attributes & _COMPRESSION_MASK > Compression.ZSTD:
            self._reject(f"unknown compression id {self.attributes & _COMPRESSION_MASK}", _V2_ATTRIBUTES_AT)
        if self.record_count < 0:
            self._reject(f"negative record count {self.record_count}", 57)

    def _reject(self, reason: str, at: int) -> NoReturn:
        """Report a nonsensical CRC-covered header field, as damage if the CRC says so."""
        self._check_crc()
        raise DecodeError(reason, offset=self._pos + at, field="records")

    # -- derived header fields ----------------------------------------------

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & _COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        """KIP-534: compaction reuses base_timestamp to hold the tombstone delete horizon."""
        return bool(self.attributes & _DELETE_HORIZON_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the cleaner may drop this batch's tombstones (or, a control batch, its marker);
        None until a cleaning has stamped it."""
        return self.base_timestamp if self.attributes & _DELETE_HORIZON_BIT else None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def size_in_bytes(self) -> int:
        return self._end - self._pos

    @property
    def raw(self) -> bytes | memoryview:
        """This batch's bytes; a view when the records field was not ``bytes``."""
        return self._buf[self._pos : self._end]

    def __bytes__(self) -> bytes:
        return bytes(self.raw)

    # -- integrity --------------------------------------------------------------

    @property
    def computed_crc(self) -> int:
        view = memoryview(self._buf)[self._pos + _V2_ATTRIBUTES_AT : self._end]
        return crc32c(view)

    @property
    def crc_valid(self) -> bool:
        return self.computed_crc == self.crc

    def validate(self) -> None:
        """Check the CRC and decode every record, raising DecodeError on the first fault."""
        self.record_list(check_crc=True)

    def _check_crc(self) -> None:
        computed = self.computed_crc
        if computed != self.crc:
            raise DecodeError(
                f"record batch CRC32C mismatch: header says {self.crc:#010x}, bytes give {computed:#010x}",
                offset=self._pos + _V2_CRC_AT,
                field="records",
            )

    # -- records ----------------------------------------------------------------

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def records(self, *, check_crc: bool = True) -> Iterator[Record]:
        """Check the CRC, inflate and decode now; ``Records`` defers this call until a batch is reached."""
        return iter(self.record_list(check_crc=check_crc))

    def record_list(self, *, check_crc: bool = True, inflate_limit: int = MAX_INFLATED_BYTES) -> list[Record]:
        """All records at once: building a list beats resuming a generator per record. A compressed
        payload may inflate to ``inflate_limit`` bytes (the caller's bound; beyond it, DecodeError)."""
        if check_crc:
            self._check_crc()
        data, start, end, origin = v2_payload(self._buf, self._pos, self._end, self.attributes, inflate_limit)
        try:
            return self._decode(data, start, end)
        except _Corrupt as exc:
            raise exc.located(origin, self._pos + _V2_HEADER_SIZE) from None

    def scan(self, *, uniform: bool = True, inflate_limit: int = MAX_INFLATED_BYTES) -> RecordsSummary:
        """What a broker's append checks need from the records, without building them.

        A fast path behind :meth:`record_list`'s contract: it raises DecodeError
        exactly when ``record_list(check_crc=False)`` does (the CRC is the caller's
        business) and otherwise summarises the records ``record_list`` returns.
        ``uniform`` adds a second fast path (``_scan_uniform``) for batches whose records
        share one shape; off, every record is walked (tests hold the two equal).
        ``inflate_limit`` is :meth:`record_list`'s.
        """
        data, start, end, origin = self._scan_payload(inflate_limit)
        if uniform and self.record_count >= _UNIFORM_MIN_RECORDS:
            summary = self._uniform_summary(data, start, end)
            if summary is not None:
                return summary
        count = self.record_count
        try:  # the walk in one slice
            pos, tally = _scan_slice(data, start, end, 0, count, count, _FRESH_TALLY)
            return self._summary(pos, end, tally)
        except _Corrupt as exc:
            raise exc.located(origin, self._pos + _V2_HEADER_SIZE) from None

    def scan_steps(self, every: int, *, inflate_limit: int = MAX_INFLATED_BYTES,
                   inflate_every: int | None = None) -> Generator[None, None, Scanned]:
        """:meth:`scan` in slices of ``every`` records, yielding between two slices: the walk of a
        batch of very many records, for a caller that must not hold its thread for all of it (the
        broker's event loop: kafkapy.dataplane.produce). The same DecodeError, or the same summary,
        with the payload walked, so that :meth:`record_facts` can read it again without inflating
        it twice. With ``inflate_every``, a compressed payload is inflated in steps of about that
        many bytes too (:func:`v2_payload_steps`); the uniform fast path is not sliced (it runs in
        C, in time with the records, not their bytes)."""
        if inflate_every is None or not self.attributes & _COMPRESSION_MASK:
            data, start, end, origin = self._scan_payload(inflate_limit)
        else:
            data, start, end, origin = yield from v2_payload_steps(
                self._buf, self._pos, self._end, self.attributes, inflate_limit, inflate_every)
        summary = self._uniform_summary(data, start, end)
        if summary is not None:
            return Scanned(summary, data, start)
        count = self.record_count
        tally = _FRESH_TALLY
        pos = start
        try:
            for first in range(0, count, max(every, 1)):
                if first:
                    yield
                pos, tally = _scan_slice(data, pos, end, first, min(count, first + every), count, tally)
            return Scanned(self._summary(pos, end, tally), data, start)
        except _Corrupt as exc:
            raise exc.located(origin, self._pos + _V2_HEADER_SIZE) from None

    def _scan_payload(self, inflate_limit: int) -> tuple[bytes | bytearray, int, int, int | None]:
        """The payload the walk reads, as :func:`v2_payload` gives it, but in place when it can be."""
        buf = self._buf
        whole = buf.obj if isinstance(buf, memoryview) else None
        if (isinstance(whole, bytearray) and not self.attributes & _COMPRESSION_MASK
                and len(buf) == len(whole)):
            # A view of a whole bytearray (Produce checks the batch in the buffer it is stamped in):
            # the walk only reads, and a bytearray indexes and slices as bytes do, at the same
            # positions, so the payload needs no copy. (record_list copies: records hold bytes.)
            return whole, self._pos + _V2_HEADER_SIZE, self._end, 0
        return v2_payload(buf, self._pos, self._end, self.attributes, inflate_limit)

    def _uniform_summary(self, data: bytes | bytearray, start: int, end: int) -> RecordsSummary | None:
        """The summary from ``_scan_uniform``, for records of one shape; None when it declines."""
        if self.record_count < _UNIFORM_MIN_RECORDS:
            return None
        uniform_summary = _scan_uniform(data, start, end, self.record_count)
        if uniform_summary is None:
            return None
        min_ts, max_ts, null_keys = uniform_summary
        if self.attributes & _TIMESTAMP_TYPE_BIT:
            low = high = self.max_timestamp
        else:
            low, high = self.base_timestamp + min_ts, self.base_timestamp + max_ts
        return RecordsSummary(self.record_count, low, high, True, null_keys)

    def record_facts(self, data: bytes | bytearray, pos: int, count: int) -> tuple[list[RecordFacts], int]:
        """``(offset, timestamp, key is null)`` of the ``count`` records at ``pos`` of the payload
        ``data`` (``Scanned.data``), and the position after them: what the append checks need to
        name faulty records, read without building them.

        A fast path behind :meth:`record_list`'s contract, for a batch :meth:`scan_steps` accepted
        (so every record's structure is known to be sound, and each is skipped by its length):
        the facts of the records ``record_list`` returns. tests/protocol/test_records_scan.py
        holds the two equal."""
        zz = _ZIGZAG
        varint = _varint_long
        base_offset = self.base_offset
        base_ts = self.base_timestamp
        lat = self.max_timestamp if self.attributes & _TIMESTAMP_TYPE_BIT else None
        out: list[RecordFacts] = []
        append = out.append
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            else:
                length, pos = varint(data, pos, 5)
            rec_end = pos + length
            b = data[pos + 1]  # after the attributes byte
            if b < 0x80:
                ts_delta = zz[b]
                pos += 2
            else:
                ts_delta, pos = varint(data, pos + 1, 10)
            b = data[pos]
            if b < 0x80:
                offset_delta = zz[b]
                pos += 1
            else:
                offset_delta, pos = varint(data, pos, 5)
            b = data[pos]
            null_key = b == 1 if b < 0x80 else varint(data, pos, 5)[0] == -1  # 1: -1 zigzagged
            append((base_offset + offset_delta, base_ts + ts_delta if lat is None else lat, null_key))
            pos = rec_end
        return out, pos

    def _decode(self, data: bytes, pos: int, end: int) -> list[Record]:
        """This batch's records from its payload ``data[pos:end]``; faults raise _Corrupt."""
        lat = self.max_timestamp if self.attributes & _TIMESTAMP_TYPE_BIT else None
        return read_v2_records(data, pos, end, self.base_offset, self.base_timestamp, lat, self.record_count)

    def _summary(self, pos: int, end: int, tally: _Tally) -> RecordsSummary:
        """The summary of a walk (:func:`_scan_slice`, ``read_v2_records``' walk and checks keeping
        counters instead of records) that stopped at ``pos`` after the last record; _Corrupt when
        bytes follow it, as ``read_v2_records`` refuses them."""
        count = self.record_count
        if pos != end:
            raise _Corrupt(f"{end - pos} bytes follow the last of {count} records", pos)
        if not count:
            low = high = _NO_TIMESTAMP_VALUE
        elif self.attributes & _TIMESTAMP_TYPE_BIT:
            low = high = self.max_timestamp
        else:
            low, high = self.base_timestamp + tally[0], self.base_timestamp + tally[1]
        return RecordsSummary(count, low, high, tally[2], tally[3])

    # -- rewriting --------------------------------------------------------------

    def rebased(self, base_offset: int, partition_leader_epoch: int | None = None) -> bytes:
        """This batch with broker-assigned fields replaced; both lie outside the CRC, so it stays valid."""
        out = bytearray(self.raw)
        _I64.pack_into(out, 0, base_offset)
        if partition_leader_epoch is not None:
            _I32.pack_into(out, 12, partition_leader_epoch)
        return bytes(out)

    def __repr__(self) -> str:
        return (
            f"<RecordBatch base_offset={self.base_offset} count={self.record_count} "
            f"compression={self.compression} size={self.size_in_bytes}"
            f"{' control' if self.is_control else ''}{' transactional' if self.is_transactional else ''}>"
        )


def _legacy_entry(data: bytes | memoryview, pos: int, end: int) -> tuple[int, ...]:
    """Locate the parts of one v0/v1 message that lies wholly within ``data[pos:end]``.

    Returns (offset, crc, magic, attributes, timestamp, key_pos, key_len,
    value_pos, value_len, message_end); a length of -1 means null, and the timestamp of a magic-0
    message (which has none) is -2, so read it by the magic.
    """
    if end - pos < _UP_TO_MAGIC + 1:
        raise _Corrupt("message set entry shorter than its header", pos)
    offset, size, crc, magic, attributes = _LEGACY_HEADER.unpack_from(data, pos)
    if magic not in (0, 1):
        raise _Corrupt(f"message has magic {magic}, not 0 or 1", pos + 16)
    if size < _LEGACY_MIN_SIZE[magic]:
        raise _Corrupt(f"message size {size} is below the v{magic} minimum", pos + 8)
    msg_end = pos + _LOG_OVERHEAD + size
    if msg_end > end:
        raise _Corrupt(f"message of {size} bytes overruns its message set", pos + 8)
    p = pos + 18
    timestamp = -2
    if magic == 1:
        timestamp = _I64.unpack_from(data, p)[0]
        p += 8
    key_len = _I32.unpack_from(data, p)[0]
    p += 4
    if key_len < -1 or key_len > msg_end - p - 4:
        raise _Corrupt(f"key length {key_len} overruns the message", p - 4)
    key_pos = p
    p += max(key_len, 0)
    value_len = _I32.unpack_from(data, p)[0]
    p += 4
    if value_len < -1 or value_len > msg_end - p:
        raise _Corrupt(f"value length {value_len} overruns the message", p - 4)
    value_pos = p
    p += max(value_len, 0)
    if p != msg_end:
        raise _Corrupt(f"{msg_end - p} unexplained bytes after the message value", p)
    return (offset, crc, magic, attributes, timestamp, key_pos, key_len, value_pos, value_len, msg_end)


def _slice(data: bytes | memoryview, pos: int, length: int) -> bytes | None:
    return None if length < 0 else bytes(data[pos : pos + length])


class LegacyBatch:
    """One top-level v0/v1 message; a compressed wrapper expands to its inner messages.

    Kafka calls these message sets; treating each top-level entry as a "batch"
    lets callers handle all formats with one loop.
    """

    __slots__ = (
        "_buf",
        "_end",
        "_key",
        "_pos",
        "_value",
        "attributes",
        "crc",
        "magic",
        "offset",
        "timestamp",
    )

    offset: int
    crc: int
    magic: int
    attributes: int
    _end: int

    def __init__(self, buf: Buffer, pos: int = 0) -> None:
        data = _flat(buf)
        if len(data) - pos >= _LOG_OVERHEAD:
            size = _I32.unpack_from(data, pos + 8)[0]
            if pos + _LOG_OVERHEAD + size > len(data):
                raise DecodeError(
                    f"message of {size} bytes, {len(data) - pos - _LOG_OVERHEAD} remain",
                    offset=pos + 8,
                    field="records",
                    truncated=True,
                )
        self._buf = data
        self._pos = pos
        try:
            entry = _legacy_entry(data, pos, len(data))
        except _Corrupt as exc:
            self._reject(exc.reason, exc.pos)
        (self.offset, self.crc, self.magic, self.attributes, ts, kpos, klen, vpos, vlen, self._end) = entry
        # Magic 0 has no timestamp at all; Kafka calls its type NO_TIMESTAMP_TYPE. (By the magic, not
        # by _legacy_entry's -2: a magic-1 message may carry -2 itself.)
        self.timestamp: int | None = None if self.magic == 0 else ts
        if self.attributes & _COMPRESSION_MASK > Compression.LZ4:
            self._reject(
                f"compression id {self.attributes & _COMPRESSION_MASK} is not valid before magic 2", pos + 17
            )
        self._key = (kpos, klen)
        self._value = (vpos, vlen)

    def _reject(self, reason: str, at: int) -> NoReturn:
        """Report a nonsensical message, as damage if its CRC says so (the likelier story)."""
        data, pos = self._buf, self._pos
        if len(data) - pos >= _LEGACY_HEADER.size:
            size = _I32.unpack_from(data, pos + 8)[0]
            if 4 < size <= len(data) - pos - _LOG_OVERHEAD:
                self.crc = _I32.unpack_from(data, pos + 12)[0] & 0xFFFFFFFF
                self._end = pos + _LOG_OVERHEAD + size
                self._check_crc()
        raise DecodeError(reason, offset=at, field="records")

    def _check_crc(self) -> None:
        computed = self.computed_crc
        if computed != self.crc:
            raise DecodeError(
                f"message CRC32 mismatch: header says {self.crc:#010x}, bytes give {computed:#010x}",
                offset=self._pos + 12,
                field="records",
            )

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & _COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def key(self) -> bytes | None:
        return _slice(self._buf, *self._key)

    @property
    def value(self) -> bytes | None:
        """The message value; for a compressed wrapper, the compressed inner message set."""
        return _slice(self._buf, *self._value)

    @property
    def value_view(self) -> memoryview | None:
        """:attr:`value` without a copy: a view of the buffer the message was read from (a long
        value copied is a memcpy of its whole length in one call)."""
        pos, length = self._value
        return None if length < 0 else memoryview(self._buf)[pos : pos + length]

    @property
    def last_offset(self) -> int:
        """A wrapper carries the offset of its last inner message, so this needs no inflating."""
        return self.offset

    @property
    def base_offset(self) -> int:
        if not self.attributes & _COMPRESSION_MASK:
            return self.offset
        # Needs the inner set inflated: only the last inner offset is on the wrapper.
        return self.record_list(check_crc=False)[0].offset

    is_transactional = False
    is_control = False

    @property
    def size_in_bytes(self) -> int:
        return self._end - self._pos

    @property
    def raw(self) -> bytes | memoryview:
        return self._buf[self._pos : self._end]

    def __bytes__(self) -> bytes:
        return bytes(self.raw)

    @property
    def computed_crc(self) -> int:
        return zlib.crc32(memoryview(self._buf)[self._pos + 16 : self._end])

    @property
    def crc_valid(self) -> bool:
        return self.computed_crc == self.crc

    def computed_crc_steps(self, every: int) -> Generator[None, None, int]:
        """:attr:`computed_crc`, ``every`` bytes a call with a yield between two, for a message
        long enough that one call would hold the broker's loop (zlib's CRC-32 runs at about 1 GB/s)."""
        view = memoryview(self._buf)
        crc = 0
        for at in range(self._pos + 16, self._end, every):
            if at > self._pos + 16:
                yield
            crc = zlib.crc32(view[at : min(at + every, self._end)], crc)
        return crc

    def validate(self) -> None:
        """Check every CRC (wrapper and inner) and decode everything."""
        self.record_list(check_crc=True)

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def records(self, *, check_crc: bool = True) -> Iterator[Record]:
        """Check CRCs, inflate and decode now; ``Records`` defers this call until a batch is reached."""
        return iter(self.record_list(check_crc=check_crc))

    def record_list(self, *, check_crc: bool = True, inflate_limit: int = MAX_INFLATED_BYTES) -> list[Record]:
        """The message, or the messages a compressed wrapper holds, inflated to at most
        ``inflate_limit`` bytes (beyond it, DecodeError)."""
        if check_crc:
            self._check_crc()
        if not self.attributes & _COMPRESSION_MASK:
            return [Record(self.offset, self.timestamp, self.key, self.value, [])]
        vpos, vlen = self._value
        if vlen < 0:
            raise DecodeError("compressed message has a null value", offset=vpos - 4, field="records")
        inner = decompress(self.compression, memoryview(self._buf)[vpos : vpos + vlen], offset=vpos,
                           limit=inflate_limit)
        try:
            return self._inner(inner, check_crc)
        except _Corrupt as exc:
            raise DecodeError(
                f"{exc.reason} (at byte {exc.pos} of the decompressed payload)", offset=vpos, field="records"
            ) from None

    def _inner(self, data: bytes, check_crc: bool) -> list[Record]:
        # The whole inner set is parsed up front: v1 offsets are relative to the
        # last inner message, which is only known at the end.
        entries = []
        pos = 0
        while pos < len(data):
            entry = _legacy_entry(data, pos, len(data))
            if entry[3] & _COMPRESSION_MASK:
                raise _Corrupt("message set is compressed twice", pos + 17)
            if check_crc and zlib.crc32(memoryview(data)[pos + 16 : entry[9]]) != entry[1]:
                raise _Corrupt("inner message CRC32 mismatch", pos + 12)
            entries.append(entry)
            pos = entry[9]
        if not entries:
            raise _Corrupt("compressed message set holds no messages", 0)
        # Producers write inner offsets 0..n-1 and the broker stamps the wrapper
        # with the absolute offset of the last one; a negative base means an
        # unstamped (producer-side) wrapper whose inner offsets are taken as is.
        base = self.offset - entries[-1][0] if self.magic > 0 else -1
        lat = self.timestamp if self.timestamp_type == LOG_APPEND_TIME else None
        out = []
        for offset, _crc, magic, _attrs, ts, kpos, klen, vpos, vlen, _end in entries:
            out.append(
                Record(
                    offset + base if base >= 0 else offset,
                    lat if lat is not None else (None if magic == 0 else ts),
                    _slice(data, kpos, klen),
                    _slice(data, vpos, vlen),
                    [],
                )
            )
        return out

    def __repr__(self) -> str:
        return (
            f"<LegacyBatch v{self.magic} offset={self.offset} compression={self.compression} "
            f"size={self.size_in_bytes}>"
        )


Batch = RecordBatch | LegacyBatch


class Records:
    """The value of a ``records`` field: raw bytes, decoded only when iterated."""

    __slots__ = ("_raw", "_tail")

    def __init__(self, raw: Buffer) -> None:
        self._raw = raw
        self._tail: int | None = None

    @classmethod
    def from_batches(cls, *batches: Buffer) -> Records:
        return cls(b"".join(batches))

    @property
    def raw(self) -> Buffer:
        return self._raw

    def __bytes__(self) -> bytes:
        return bytes(self._raw)

    def __len__(self) -> int:
        raw = self._raw
        return raw.nbytes if isinstance(raw, memoryview) else len(raw)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Records):
            other = other._raw
        if isinstance(other, (bytes, bytearray, memoryview)):
            return bytes(self._raw) == bytes(other)
        return NotImplemented

    def __hash__(self) -> int:
        # Equal to bytes, so it must hash like them.
        return hash(bytes(self._raw))

    def __repr__(self) -> str:
        return f"<Records {len(self)} bytes>"

    # -- iteration ----------------------------------------------------------------

    def __iter__(self) -> Iterator[Batch]:
        return self.batches()

    def batches(self, *, strict: bool = False) -> Iterator[Batch]:
        """Yield each batch; a partial trailing batch ends iteration unless ``strict``.

        Only headers are decoded here; a batch's CRC is checked when its records are.
        """
        data = _flat(self._raw)
        total = len(data)
        pos = 0
        while pos < total:
            end = self._frame(data, pos, total)
            if end is None:
                self._tail = total - pos
                if strict:
                    raise DecodeError(
                        f"records end inside a batch ({total - pos} trailing bytes)",
                        offset=pos,
                        field="records",
                        truncated=True,
                    )
                return
            if data[pos + 16] == 2:
                yield RecordBatch(data, pos)
            else:
                yield LegacyBatch(data, pos)
            pos = end
        self._tail = 0

    # The framing step, kept under its old name for the methods below.
    _frame = staticmethod(entry_end)

    def records(self, *, strict: bool = False, check_crc: bool = True) -> Iterator[Record]:
        """Every record of every batch, in order, control records included; decoded a batch at a time."""
        return chain.from_iterable(b.record_list(check_crc=check_crc) for b in self.batches(strict=strict))

    def validate(self, *, strict: bool = True) -> None:
        """Decode everything and check every CRC; what a broker does before appending."""
        for batch in self.batches(strict=strict):
            batch.record_list(check_crc=True)

    @property
    def partial_tail_bytes(self) -> int:
        """Bytes of an incomplete trailing batch (0 if none).

        Known after a full iteration; otherwise found by walking just the
        entry framing, which can raise DecodeError on corrupt framing.
        """
        if self._tail is None:
            data = _flat(self._raw)
            total = len(data)
            pos = 0
            while pos < total:
                end = self._frame(data, pos, total)
                if end is None:
                    break
                pos = end
            self._tail = total - pos
        return self._tail


# --- building ----------------------------------------------------------------


def _zigzag_varint(out: bytearray, value: int) -> None:
    u = (value << 1) if value >= 0 else ((-value) << 1) - 1
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def _as_bytes(value: Any, what: str) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise EncodeError(f"{what} must be bytes or None, not {type(value).__name__}", field=what)


RecordLike = Record | Mapping[str, Any] | Sequence[Any]


def _normalise(item: RecordLike) -> tuple[bytes | None, bytes | None, list[Header], int | None, int | None]:
    """Accept a Record, a Record-like dict, or a (key, value[, headers[, timestamp]]) tuple."""
    offset: int | None = None
    headers: Any
    if isinstance(item, Record):
        key, value, headers, timestamp, offset = (
            item.key,
            item.value,
            item.headers,
            item.timestamp,
            item.offset,
        )
    elif isinstance(item, Mapping):
        key, value = item.get("key"), item.get("value")
        headers, timestamp, offset = item.get("headers"), item.get("timestamp"), item.get("offset")
    else:
        if not 2 <= len(item) <= 4:
            raise EncodeError("record tuples are (key, value[, headers[, timestamp]])", field="records")
        key, value = item[0], item[1]
        headers = item[2] if len(item) > 2 else None
        timestamp = item[3] if len(item) > 3 else None
    norm: list[Header] = []
    for h in headers or ():
        if isinstance(h, Mapping):
            hk, hv = h["key"], h.get("value")
        else:
            hk, hv = h
        if isinstance(hk, (bytes, bytearray, memoryview)):
            hk = bytes(hk).decode("utf-8")
        if not isinstance(hk, str):
            raise EncodeError(f"header key must be str, not {type(hk).__name__}", field="headers")
        norm.append((hk, _as_bytes(hv, "headers")))
    return _as_bytes(key, "key"), _as_bytes(value, "value"), norm, timestamp, offset


def build_record_batch(
    records: Iterable[RecordLike],
    *,
    base_offset: int = 0,
    compression: Compression | int | str | None = "none",
    compression_level: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = CREATE_TIME,
    partition_leader_epoch: int = -1,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode one magic-2 batch.

    Records without a timestamp get ``base_timestamp``, or the current time as
    a producer would.  Records carrying an ``offset`` (Records, dicts) keep it,
    which is how compacted batches with offset gaps are written; the others
    follow their predecessor.  ``max_timestamp`` overrides the computed one, for
    a broker stamping log-append time.  ``last_offset_delta`` overrides the
    computed one, so an emptied batch still spans the offsets it held (what
    Kafka's cleaner keeps of a producer's last batch).  ``delete_horizon_ms``
    (KIP-534, what the cleaner stamps on a batch holding tombstones or a marker
    it may later drop) goes in the header's base timestamp with the attribute
    bit set; the records' deltas are taken from it, so their timestamps stay.
    ``compression_level`` is Kafka's ``compression.<codec>.level`` (None: its
    default).
    """
    codec = compression_of(compression)
    items = [_normalise(r) for r in records]
    if base_timestamp is None:
        first = next((ts for _, _, _, ts, _ in items if ts is not None), None)
        if first is None:
            first = int(time.time() * 1000) if items else -1
        base_timestamp = first
    if not _INT64_MIN <= base_timestamp <= _INT64_MAX:
        raise EncodeError("base_timestamp does not fit int64", field="base_timestamp")
    header_timestamp = base_timestamp if delete_horizon_ms is None else delete_horizon_ms
    if not _INT64_MIN <= header_timestamp <= _INT64_MAX:
        raise EncodeError("delete_horizon_ms does not fit int64", field="delete_horizon_ms")
    body = bytearray()
    rec = bytearray()
    delta = -1
    top_ts: int | None = None
    for key, value, headers, ts, offset in items:
        if ts is None:
            ts = base_timestamp
        if top_ts is None or ts > top_ts:
            top_ts = ts
        new_delta = delta + 1 if offset is None else offset - base_offset
        if new_delta <= delta or new_delta > _INT32_MAX:
            raise EncodeError(
                f"offset {base_offset + new_delta} does not follow {base_offset + delta} in the batch",
                field="offset",
            )
        delta = new_delta
        ts_delta = ts - header_timestamp
        if not _INT64_MIN <= ts_delta <= _INT64_MAX:
            raise EncodeError(f"timestamp {ts} is too far from base_timestamp", field="timestamp")
        rec.clear()
        _encode_record(rec, ts_delta, delta, key, value, headers)
        _zigzag_varint(body, len(rec))
        body += rec
    if len(items) > _INT32_MAX:
        raise EncodeError("too many records for one batch", field="records")
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise EncodeError(f"timestamp_type must be 0 or 1, not {timestamp_type}", field="timestamp_type")
    attributes = (int(codec) | (_TIMESTAMP_TYPE_BIT if timestamp_type == LOG_APPEND_TIME else 0)
                  | (_TRANSACTIONAL_BIT if is_transactional else 0) | (_CONTROL_BIT if is_control else 0)
                  | (_DELETE_HORIZON_BIT if delete_horizon_ms is not None else 0))
    if max_timestamp is None:
        max_timestamp = base_timestamp if top_ts is None else top_ts
    if last_offset_delta is not None and last_offset_delta < max(delta, 0):
        raise EncodeError(f"last_offset_delta {last_offset_delta} ends before the records do", field="offset")
    out = bytearray(_V2_HEADER_SIZE)
    out += compress(codec, body, compression_level) if codec else body
    _stamp_v2_header(out, base_offset, partition_leader_epoch, attributes,
                     max(delta, 0) if last_offset_delta is None else last_offset_delta, header_timestamp,
                     max_timestamp, producer_id, producer_epoch, base_sequence, len(items))
    return bytes(out)


def _encode_record(rec: bytearray, ts_delta: int, delta: int, key: bytes | None, value: Buffer | None,
                   headers: Sequence[Header]) -> None:
    """A v2 record's fields, all but its length, onto ``rec``."""
    _encode_record_head(rec, ts_delta, delta, key, None if value is None else len(value))
    if value is not None:
        rec += value
    _encode_headers(rec, headers)


def _encode_record_head(rec: bytearray, ts_delta: int, delta: int, key: bytes | None,
                        value_length: int | None) -> None:
    """A v2 record's fields before its value's bytes (from its attributes to its value's length),
    onto ``rec``: with :func:`_encode_headers` after the value, the one encoder of a record
    (:func:`rebuilt_batch_steps` puts a long value in between a piece at a time)."""
    rec.append(0)  # attributes
    _zigzag_varint(rec, ts_delta)
    _zigzag_varint(rec, delta)
    if key is None:
        rec.append(1)  # zigzag(-1)
    else:
        _zigzag_varint(rec, len(key))
        rec += key
    if value_length is None:
        rec.append(1)
    else:
        _zigzag_varint(rec, value_length)


def _encode_headers(rec: bytearray, headers: Sequence[Header]) -> None:
    _zigzag_varint(rec, len(headers))
    for hk, hv in headers:
        encoded = hk.encode("utf-8")
        _zigzag_varint(rec, len(encoded))
        rec += encoded
        if hv is None:
            rec.append(1)
        else:
            _zigzag_varint(rec, len(hv))
            rec += hv


def _stamp_v2_header(out: bytearray, base_offset: int, partition_leader_epoch: int, attributes: int,
                     last_offset_delta: int, header_timestamp: int, max_timestamp: int, producer_id: int,
                     producer_epoch: int, base_sequence: int, count: int) -> None:
    """The v2 header written over the first bytes of ``out`` (the batch, payload and all), its
    length and CRC computed from it."""
    batch_length = len(out) - _LOG_OVERHEAD
    if batch_length > _INT32_MAX:
        raise EncodeError("batch exceeds 2 GiB", field="records")
    try:
        _V2_HEADER.pack_into(out, 0, base_offset, batch_length, partition_leader_epoch, 2, 0, attributes,
                             last_offset_delta, header_timestamp, max_timestamp, producer_id, producer_epoch,
                             base_sequence, count)
    except struct.error as exc:
        raise EncodeError(f"batch header field out of range: {exc}", field="records") from None
    struct.pack_into(">I", out, _V2_CRC_AT, crc32c(memoryview(out)[_V2_ATTRIBUTES_AT:]))


# Bytes of small records gathered before they are handed to the compressor: one call per many records.
_REBUILD_FEED_BYTES: Final = 64 * 1024


def rebuilt_batch_steps(batch: RecordBatch, codec: Compression, level: int | None, *,
                        inflate_limit: int = MAX_INFLATED_BYTES, every: int | None = None,
                        chunk: int | None = None) -> Generator[None, None, bytearray]:
    """``batch`` rebuilt with ``codec`` at ``level``: the same records (offset deltas, timestamps,
    keys, values, headers) and header fields, as :func:`build_record_batch` of its
    :meth:`RecordBatch.record_list` with its header fields gives it (tests/log/test_append.py
    holds the two equal); what the broker stores when a topic's ``compression.type`` is not the
    producer's codec.

    With ``every`` and ``chunk``, in slices, with a yield between two: the payload inflated
    ``chunk`` bytes at a time (:func:`decompress_steps`), the records decoded ``every`` at a time,
    and the new payload compressed ``chunk`` bytes at a time (:class:`Deflater`). A value of
    ``chunk`` bytes or more is never copied: it goes to the compressor from the inflated payload,
    ``chunk`` bytes a call (:func:`_without_a_long_value`). Without them, in one go."""
    if chunk is None:
        data, start, end, origin = batch._scan_payload(inflate_limit)
    else:
        data, start, end, origin = yield from v2_payload_steps(
            batch._buf, batch._pos, batch._end, batch.attributes, inflate_limit, chunk)
    # A payload inflated in steps is a bytearray, which reads as bytes does; its records' keys and
    # values are then bytearrays, which are only written out again here.
    payload = cast(bytes, data)
    rebuilt = _Rebuilt(Deflater(codec, level), batch.base_offset, batch.base_timestamp, chunk or 1 << 62)
    count = batch.record_count
    base_offset, base_ts = batch.base_offset, batch.base_timestamp
    lat = batch.max_timestamp if batch.attributes & _TIMESTAMP_TYPE_BIT else None
    pos = start
    try:
        for first in range(0, count, every or max(count, 1)):
            if first:
                yield
            n = min(count, first + (every or count)) - first
            stop = end if every is None else batch.record_facts(data, pos, n)[1]
            if chunk is None or stop - pos < chunk:
                for record in read_v2_records(payload, pos, stop, base_offset, base_ts, lat, n):
                    if rebuilt.add(record):
                        yield
                pos = stop
                continue
            for _ in range(n):  # a long record among them: one at a time, a long value left in place
                record_end = batch.record_facts(data, pos, 1)[1]
                parts = _without_a_long_value(payload, pos, record_end, base_offset, base_ts, lat, chunk)
                if parts is None:
                    [record] = read_v2_records(payload, pos, record_end, base_offset, base_ts, lat, 1)
                    if rebuilt.add(record):
                        yield
                else:
                    yield from rebuilt.add_long(*parts)
                pos = record_end
    except _Corrupt as exc:
        raise exc.located(origin, batch._pos + _V2_HEADER_SIZE) from None
    out = rebuilt.finish()
    attributes = int(codec) | (batch.attributes & (_TIMESTAMP_TYPE_BIT | _TRANSACTIONAL_BIT))
    _stamp_v2_header(out, base_offset, batch.partition_leader_epoch, attributes, batch.last_offset_delta,
                     base_ts, batch.max_timestamp, batch.producer_id, batch.producer_epoch,
                     batch.base_sequence, count)
    return out


def record_batch_steps(records: Sequence[Record], compression: Compression, *, timestamp_type: int,
                       every: int | None = None, chunk: int | None = None
                       ) -> Generator[None, None, bytearray]:
    """:func:`build_record_batch` of ``records`` (offsets 0, 1, ... in order, every timestamp set,
    no headers) with its first record's timestamp as the base timestamp and ``compression`` at
    its default level, through :class:`BatchWriter`: the same bytes
    (tests/protocol/test_record_batch_steps.py holds them equal). With ``every`` and ``chunk``, a
    yield after each ``every`` records and as the writer asks. EncodeError as ``build_record_batch``
    for a timestamp too far from the first for an int64 delta."""
    writer = BatchWriter(compression, cast(int, records[0].timestamp) if records else -1, chunk)
    for index, record in enumerate(records):
        if every and index and not index % every:
            yield
        yield from writer.add(cast(int, record.timestamp), record.key, record.value)
    return writer.finish(timestamp_type)


class BatchWriter:
    """A record batch written a record at a time, as :func:`build_record_batch` writes one whose
    records' offsets run 0, 1, ... with no headers, its first record's timestamp the base one and
    the codec at its default level: what up-conversion stores, written as the old messages are
    read, so that no list of records is ever held (ten million records in a 256 MiB wrapper were
    gigabytes of objects, and seconds of the garbage collector's walks).

    With ``chunk``, :meth:`add` yields once ``chunk`` bytes have gone to the compressor since its
    last yield, and a value of ``chunk`` bytes or more goes from where it lies, ``chunk`` bytes a
    call, never copied whole."""

    def __init__(self, compression: Compression, base_timestamp: int, chunk: int | None = None) -> None:
        if not _INT64_MIN <= base_timestamp <= _INT64_MAX:
            raise EncodeError("base_timestamp does not fit int64", field="base_timestamp")
        self.compression = compression
        self.base_timestamp = base_timestamp
        self.max_timestamp = base_timestamp
        self.count = 0
        self.chunk = chunk
        self._rebuilt = _Rebuilt(Deflater(compression), 0, base_timestamp, chunk or 1 << 62)

    def add(self, timestamp: int, key: bytes | None, value: Buffer | None) -> Generator[None, None, None]:
        """The next record; EncodeError if its timestamp is too far from the base one."""
        if not _INT64_MIN <= timestamp - self.base_timestamp <= _INT64_MAX:
            raise EncodeError(f"timestamp {timestamp} is too far from base_timestamp", field="timestamp")
        self.max_timestamp = max(self.max_timestamp, timestamp)
        record = Record(self.count, timestamp, key, None)
        self.count += 1
        if value is not None and self.chunk is not None and len(value) >= self.chunk:
            yield from self._rebuilt.add_long(record, memoryview(value))
            return
        record.value = cast(bytes, value)  # read as bytes are: only written out again
        if self._rebuilt.add(record):
            yield

    def finish(self, timestamp_type: int) -> bytearray:
        """The batch, its header stamped; the writer is spent."""
        out = self._rebuilt.finish()
        attributes = int(self.compression) | (_TIMESTAMP_TYPE_BIT if timestamp_type == LOG_APPEND_TIME else 0)
        _stamp_v2_header(out, 0, -1, attributes, max(self.count - 1, 0), self.base_timestamp,
                         self.max_timestamp, -1, -1, -1, self.count)
        return out


class _Rebuilt:
    """A batch being rebuilt (:func:`rebuilt_batch_steps`): its records encoded as
    :func:`build_record_batch` encodes them, gathered, and handed to the compressor
    ``_REBUILD_FEED_BYTES`` at a time; the output after room for the header."""

    def __init__(self, deflater: Deflater, base_offset: int, header_timestamp: int, step: int) -> None:
        self.deflater = deflater
        self.base_offset = base_offset
        self.header_timestamp = header_timestamp
        self.step = step
        self.out = bytearray(_V2_HEADER_SIZE)
        self.pending = bytearray()
        self.fed_since_yield = 0

    def add(self, record: Record) -> bool:
        """``record`` encoded; True when ``step`` bytes have gone to the compressor since the
        last True (time for a yield)."""
        value = record.value
        tail = self._head(record, None if value is None else len(value))
        if value is not None:
            self.pending += value
        self.pending += tail
        if len(self.pending) < _REBUILD_FEED_BYTES:
            return False
        self._flush()
        if self.fed_since_yield < self.step:
            return False
        self.fed_since_yield = 0
        return True

    def add_long(self, record: Record, value: memoryview) -> Generator[None, None, None]:
        """``record`` (read without its value) with ``value``, compressed ``step`` bytes a call with
        a yield after each: the value is never copied whole."""
        tail = self._head(record, len(value))
        self._flush()
        for at in range(0, len(value), self.step):
            self.out += self.deflater.compress(value[at : at + self.step])
            yield
        self.fed_since_yield = 0
        self.pending += tail

    def finish(self) -> bytearray:
        self._flush()
        self.out += self.deflater.finish()
        return self.out

    def _head(self, record: Record, value_length: int | None) -> bytearray:
        """The record's length and fields up to its value's length onto what is pending; its
        headers' bytes, which go after the value, returned."""
        head = bytearray()
        _encode_record_head(head, cast(int, record.timestamp) - self.header_timestamp,
                            record.offset - self.base_offset, record.key, value_length)
        tail = bytearray()
        _encode_headers(tail, record.headers)
        _zigzag_varint(self.pending, len(head) + (value_length or 0) + len(tail))
        self.pending += head
        return tail

    def _flush(self) -> None:
        self.out += self.deflater.compress(self.pending)
        self.fed_since_yield += len(self.pending)
        self.pending.clear()


def _without_a_long_value(data: bytes, pos: int, end: int, base_offset: int, base_ts: int,
                          lat: int | None, long_from: int) -> tuple[Record, memoryview] | None:
    """The record at ``data[pos:end]`` read by :func:`read_v2_records` with an empty value in place
    of its own (from a copy of its other bytes), and a view of its value, if that value takes
    ``long_from`` bytes or more (else None): a long value is never copied (a memcpy of 200 MB
    into new memory held the loop 0.2-0.4 s, page faults included)."""
    _, body = _varint_long(data, pos, 5)  # the record's length
    at = body + 1  # attributes
    _, at = _varint_long(data, at, 10)  # timestamp delta
    _, at = _varint_long(data, at, 5)  # offset delta
    key_length, at = _varint_long(data, at, 5)
    value_length_at = at + max(key_length, 0)
    value_length, value_at = _varint_long(data, value_length_at, 5)
    if value_length < long_from:
        return None
    value_end = value_at + value_length
    fields = bytearray(data[body:value_length_at])
    fields.append(0)  # zigzag(0): an empty value
    fields += data[value_end:end]
    record = bytearray()
    _zigzag_varint(record, len(fields))
    record += fields
    [without] = read_v2_records(bytes(record), 0, len(record), base_offset, base_ts, lat, 1)
    return without, memoryview(data)[value_at:value_end]

