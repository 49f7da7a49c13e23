"""Records as JSON text, written straight from the batch bytes.

A Fetch or Produce body is mostly records, so their JSON is the bulk of a
decoded capture's output. The output equals ``json.dumps`` (compact, not
ASCII-escaped) of each record's ``Record.to_dict()`` with two members added:
``batch``, its batch's header fields (magic 2: the 61-byte header, the
attribute bits by name, producer id and epoch, base sequence; magic 0/1:
the message's offset, magic, attributes, codec and timestamp type), and ``control``, null except on a
control batch's records, where it is the marker (type and coordinator
epoch). Batch-level fields are what tell an idempotent or transactional
producer's records, and a transaction's COMMIT/ABORT, from plain ones, and
they cost one format per batch. Records that do not decode give an object
naming the error and holding the raw bytes, so no data is lost.

Theory of operation
-------------------
Decoding to :class:`~kafkapy.protocol.records.Record` objects and then
formatting them takes two passes and an object per record, about 2.8 us a
record. Magic-2 batches (everything since Kafka 0.11) are instead read and
written in one pass: :func:`_v2_json` makes the reads of
:func:`~kafkapy.protocol.records.read_v2_records` (the one record reader, which the
reference stands on) and formats each record with one ``bytes`` template
(base64 output is bytes already), and the text is decoded once at the end.
To keep that pass short it takes three liberties, none of which can change
the output:

* Bounds are checked once per record: no length moves the position
  backwards, so a field that overruns its record, or a record its batch,
  leaves the position past where the record or batch must end (a slice past
  the data is short, not an error, and that check still catches it).
* A null value or header value goes into the template as a quoted NUL
  byte, and in the text of a record that has one the quoted NUL becomes
  ``null``. Nothing else in the text can hold a NUL: base64, numbers, and
  header keys, whose control characters JSON escapes. Null keys, the common
  null, have templates of their own.
* A header key's JSON is kept for the next time the same key bytes come
  (a small set recurs everywhere: tracing, content type, ...).

The fast path never decides what an anomaly means. Output is all-or-nothing
(one bad batch turns the whole field into the error object), so on any
exception -- a corrupt record, a bad UTF-8 header key, anything unforeseen --
it gives up and :func:`_records_json_reference`, the two-pass writer, does
the whole field again: the error text (or exception) is the old one by
construction. Legacy (magic 0/1) batches, rare by now, decode through their
own class and are formatted by the reference's code.
"""

from __future__ import annotations

import binascii
import json
import struct
from collections.abc import Callable, Iterable
from json.encoder import encode_basestring

from kafkapy.errors import DecodeError
from kafkapy.protocol.compression import Compression
from kafkapy.protocol.records import (
    _V2_HEADER,
    _V2_HEADER_SIZE,
    _ZIGZAG,
    CONTROL_BIT,
    TRANSACTIONAL_BIT,
    LegacyBatch,
    Record,
    RecordBatch,
    Records,
    _Corrupt,
    _flat,
    _varint_long,
    entry_end,
    read_v2_records,
    v2_payload,
)
from kafkapy.protocol.strings import decode_string

__all__ = ["records_json", "records_json_at"]

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = TRANSACTIONAL_BIT
_CONTROL_BIT = CONTROL_BIT
_ZSTD = int(Compression.ZSTD)  # the highest codec id

# One record, by header count (none, one, more); keyed and (with an empty key) keyless.
# The last %b is the batch's part (``_v2_batch_text``), the same for every record of a batch.
_KEYED: tuple[bytes, ...] = (
    b'{"offset":%d,"timestamp":%d,"key":"%b","value":"%b","headers":[]%b}',
    b'{"offset":%d,"timestamp":%d,"key":"%b","value":"%b","headers":[{"key":%b,"value":"%b"}]%b}',
    b'{"offset":%d,"timestamp":%d,"key":"%b","value":"%b","headers":[%b]%b}',
)
_KEYLESS: tuple[bytes, ...] = tuple(t.replace(b'"key":"%b"', b'"key":null%b', 1) for t in _KEYED)
_HEADER = b'{"key":%b,"value":"%b"}'
_HEADERS = tuple(b",".join([_HEADER] * n) for n in range(17))  # the header list of n headers
# A null value goes in as this, quoted like base64 text, and the quoted form becomes null.
_NULL = b"\x00"
_QUOTED_NULL = b'"\x00"'
# _ZIGZAG for one-byte varints, None where the varint goes on: one lookup instead of a test.
_ZIGZAG_1 = tuple(None if b & 0x80 else _ZIGZAG[b] for b in range(256))


def _b64(data: bytes | bytearray | memoryview) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _header_text(key: str, value: bytes | None) -> str:
    v = "null" if value is None else f'"{_b64(value)}"'
    return f'{{"key":{encode_basestring(key)},"value":{v}}}'


# Kafka's names (CompressionType, TimestampType, ControlRecordType), by id.
_CODECS = tuple(str(c) for c in Compression)
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                  5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}  # fmt: skip
_END_TXN = (0, 1)  # ABORT and COMMIT: the types whose value is an end-transaction marker
_NOT_CONTROL = ',"control":null'
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_BOOL = ("false", "true")


def _v2_batch_template(
    leader_epoch: int, magic: int, attributes: int, producer_id: int, producer_epoch: int
) -> str:
    """The ``"batch"`` member of each record of a magic-2 batch, with ``%d`` for its base offset and
    base sequence: the header fields that tell whose records these are and how they were sent, the
    attribute bits by name. Only the 61-byte header is read; the member is on every record, so it
    is kept to what the records themselves cannot show (not the CRC, lengths, count or first/last
    timestamps). The two numbers left open change from batch to batch of one producer, the others
    seldom, so the fast path keeps the template (``_batch_tail``)."""
    return (
        f',"batch":{{"base_offset":%d,"partition_leader_epoch":{leader_epoch},"magic":{magic},'
        f'"attributes":{attributes},"codec":"{_CODECS[attributes & _COMPRESSION_MASK]}",'
        f'"timestamp_type":"{_TIMESTAMP_TYPES[(attributes & _TIMESTAMP_TYPE_BIT) >> 3]}",'
        f'"transactional":{_BOOL[(attributes & _TRANSACTIONAL_BIT) >> 4]},'
        f'"control":{_BOOL[(attributes & _CONTROL_BIT) >> 5]},"producer_id":{producer_id},'
        f'"producer_epoch":{producer_epoch},"base_sequence":%d}}'
    )


def _v2_batch_text(
    base_offset: int, leader_epoch: int, magic: int, attributes: int, producer_id: int,
    producer_epoch: int, base_sequence: int,
) -> str:  # fmt: skip
    """The ``"batch"`` member of each record of a magic-2 batch (``_v2_batch_template`` filled in)."""
    template = _v2_batch_template(leader_epoch, magic, attributes, producer_id, producer_epoch)
    return template % (base_offset, base_sequence)


# (leader epoch, attributes, producer id, producer epoch) -> the bytes that close each record of
# a non-control magic-2 batch, with %d for the base offset and base sequence. A producer's batches
# share all four, so few are ever made; the bound stops a hostile capture from growing it.
_TAILS: dict[tuple[int, int, int, int], bytes] = {}
_TAILS_KEPT = 4096


def _batch_tail(leader_epoch: int, attributes: int, producer_id: int, producer_epoch: int) -> bytes:
    """The template of a non-control magic-2 batch's record tail, from ``_TAILS`` once made."""
    key = (leader_epoch, attributes, producer_id, producer_epoch)
    tail = _TAILS.get(key)
    if tail is None:
        template = _v2_batch_template(leader_epoch, 2, attributes, producer_id, producer_epoch)
        tail = (template + _NOT_CONTROL).encode()
        if len(_TAILS) >= _TAILS_KEPT:
            _TAILS.clear()
        _TAILS[key] = tail
    return tail


def _legacy_batch_text(batch: LegacyBatch) -> str:
    """The ``"batch"`` member of each record of a magic 0/1 message (a compressed wrapper's, for
    its inner messages): the message's own header fields."""
    attributes = batch.attributes
    kind = _TIMESTAMP_TYPES[(attributes & _TIMESTAMP_TYPE_BIT) >> 3] if batch.magic else "NoTimestampType"
    return (
        f',"batch":{{"offset":{batch.offset},"magic":{batch.magic},"attributes":{attributes},'
        f'"codec":"{_CODECS[attributes & _COMPRESSION_MASK]}","timestamp_type":"{kind}"}}'
    )


def _control_text(key: bytes | None, value: bytes | None) -> str:
    """A control record's ``"control"`` member: the marker its key and value encode (nulls for
    what they are too short to hold), so a COMMIT or ABORT reads as one."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return ',"control":{"version":null,"type_id":null,"type":null,"coordinator_epoch":null}'
    version, type_id = _CONTROL_KEY.unpack_from(key)
    epoch = "null"
    if type_id in _END_TXN and value is not None and len(value) >= _END_TXN_VALUE.size:
        epoch = str(_END_TXN_VALUE.unpack_from(value)[1])
    name = _CONTROL_TYPES.get(type_id, "UNKNOWN")
    return (
        f',"control":{{"version":{version},"type_id":{type_id},"type":"{name}",'
        f'"coordinator_epoch":{epoch}}}'
    )


def _format(records: Iterable[Record], append: Callable[[str], None], batch: str, control: bool) -> None:
    """Append each record's JSON, ``batch`` (its batch's member) and its control member closing
    it: the second pass of the reference writer."""
    quote = encode_basestring
    b2a = binascii.b2a_base64
    tail = batch + _NOT_CONTROL
    for r in records:
        ts, key, value, headers = r.timestamp, r.key, r.value, r.headers
        # key and value inline: they are the bulk of the calls
        k = "null" if key is None else f'"{b2a(key, newline=False).decode()}"'
        v = "null" if value is None else f'"{b2a(value, newline=False).decode()}"'
        if not headers:
            h = ""
        elif len(headers) == 1:  # the common case, without a loop
            ((hk, hv),) = headers
            hj = "null" if hv is None else f'"{b2a(hv, newline=False).decode()}"'
            h = f'{{"key":{quote(hk)},"value":{hj}}}'
        else:
            h = ",".join([_header_text(hk, hv) for hk, hv in headers])
        if control:
            tail = batch + _control_text(key, value)
        append(
            f'{{"offset":{r.offset},"timestamp":{"null" if ts is None else ts},"key":{k},'
            f'"value":{v},"headers":[{h}]{tail}}}'
        )


def _records_json_reference(records: Records) -> str:
    """Decode to Record objects, then format them: the definition the fast path must equal."""
    parts: list[str] = []
    try:
        for b in records.batches():
            if isinstance(b, RecordBatch):
                text = _v2_batch_text(b.base_offset, b.partition_leader_epoch, b.magic, b.attributes,
                                      b.producer_id, b.producer_epoch, b.base_sequence)  # fmt: skip
                _format(b.record_list(check_crc=False), parts.append, text, b.is_control)
            else:
                _format(b.record_list(check_crc=False), parts.append, _legacy_batch_text(b), False)
    except DecodeError as exc:
        return json.dumps(
            {"undecodable_records": _b64(bytes(records)), "error": str(exc)},
            separators=(",", ":"), ensure_ascii=False,
        )  # fmt: skip
    return "[" + ",".join(parts) + "]"


def records_json(records: Records) -> str:
    """The records of ``records`` as a JSON list (CRCs are not checked: captures are read as sent)."""
    raw = records.raw
    # bytes index and slice faster than a view; one copy of the field pays for itself.
    data = raw if isinstance(raw, bytes) else bytes(_flat(raw))
    try:
        text = _fused(data, 0, len(data))
    except Exception:  # any anomaly: the reference decides, its error text included
        text = None
    return _records_json_reference(records) if text is None else text


def records_json_at(buf: bytes, start: int, stop: int) -> str:
    """``records_json(Records(buf[start:stop]))``, read where it lies: the JSON decoders call this
    for every records field, and neither the field's copy nor its Records object is needed unless
    the reference has to decide."""
    if type(buf) is not bytes:
        return records_json(Records(memoryview(buf)[start:stop]))
    try:
        text = _fused(buf, start, stop)
    except Exception:  # as in records_json
        text = None
    # Reads past ``stop`` see the next field's bytes, not an IndexError; the checks that each
    # record and batch ends where it says still refuse them (see the module's notes).
    return _records_json_reference(Records(memoryview(buf)[start:stop])) if text is None else text


def _fused(data: bytes, pos: int, total: int) -> str | None:
    """One pass over the field ``data[pos:total]``; None, or any exception, leaves it to the
    reference.

    The field is walked, and each v2 payload found, by the records module's own steps
    (``entry_end``, ``v2_payload``), as ``Records.batches`` and ``RecordBatch`` do: a partial
    trailing batch ends the field quietly, as it does there. Only the per-record reads are the
    fast path's copy (``_v2_json``).
    """
    parts: list[bytes] = []
    while pos < total:
        end = entry_end(data, pos, total)
        if end is None:
            break  # a partial trailing batch
        if data[pos + 16] == 2:
            (base_offset, _, leader_epoch, magic, _, attributes, _, base_ts, max_ts, producer_id,
             producer_epoch, base_sequence, count) = _V2_HEADER.unpack_from(data, pos)  # fmt: skip
            if attributes & _COMPRESSION_MASK > _ZSTD or count < 0:
                return None
            # With log-append time the broker's stamp replaces every record's own.
            lat = max_ts if attributes & _TIMESTAMP_TYPE_BIT else None
            if attributes & _CONTROL_BIT:  # markers, rare: read as the reference does, and decoded
                batch = _v2_batch_text(base_offset, leader_epoch, magic, attributes, producer_id,
                                       producer_epoch, base_sequence)  # fmt: skip
                payload, start, stop, _ = v2_payload(data, pos, end, attributes)
                texts: list[str] = []
                records = read_v2_records(payload, start, stop, base_offset, base_ts, lat, count)
                _format(records, texts.append, batch, True)
                parts += [t.encode() for t in texts]
                pos = end
                continue
            tail = (
                _TAILS.get((leader_epoch, attributes, producer_id, producer_epoch))
                or _batch_tail(leader_epoch, attributes, producer_id, producer_epoch)
            ) % (base_offset, base_sequence)
            if attributes & _COMPRESSION_MASK:
                payload, start, stop, _ = v2_payload(data, pos, end, attributes)
                _v2_json(payload, start, stop, base_offset, base_ts, lat, count, tail, parts)
            else:  # v2_payload's in-place answer for bytes, without the call: the common batch
                _v2_json(data, pos + _V2_HEADER_SIZE, end, base_offset, base_ts, lat, count, tail, parts)
        else:
            texts = []
            # LegacyBatch bounds itself by the end of its buffer: give it one that ends with the field.
            whole = data if total == len(data) else data[:total]
            legacy = LegacyBatch(whole, pos)
            _format(legacy.record_list(check_crc=False), texts.append, _legacy_batch_text(legacy), False)
            parts += [t.encode() for t in texts]
        pos = end
    return f"[{b','.join(parts).decode()}]"


# Header key bytes -> the key as JSON. Header keys are a small vocabulary (traceparent,
# content-type, ...) that recurs in every batch, so they are kept across calls; the bound
# stops a capture of random keys from growing it without end.
_KEYS: dict[bytes, bytes] = {}
_KEYS_KEPT = 4096


def _quoted_key(raw: bytes) -> bytes:
    """A header key as JSON text, from ``_KEYS`` once seen."""
    quoted = _KEYS.get(raw)
    if quoted is None:
        quoted = encode_basestring(decode_string(raw)).encode()  # as the reference reads it
        if len(_KEYS) >= _KEYS_KEPT:
            _KEYS.clear()
        _KEYS[raw] = quoted
    return quoted


def _v2_json(
    data: bytes,
    pos: int,
    end: int,
    base_offset: int,
    base_ts: int,
    lat: int | None,
    count: int,
    batch: bytes,
    parts: list[bytes],
) -> None:
    """Append the JSON of each record in ``data[pos:end]``, ``batch`` (its batch's part) closing
    each; raise wherever ``_decode`` would.

    The fast path's copy of :func:`~kafkapy.protocol.records.read_v2_records`'s reads, held equal
    to it by tests/protocol/test_records_json.py. Its bounds checks are
    folded into the check that each record, and the batch, ends where it
    says (see the module's notes).
    """
    zz = _ZIGZAG
    z1 = _ZIGZAG_1
    keys = _KEYS
    varint = _varint_long
    b2a = binascii.b2a_base64
    append = parts.append
    n: int | None  # a length or delta, None after a _ZIGZAG_1 miss
    nulls = False  # whether the record's text holds _NULL
    last_key = None  # the key bytes of the last one-header record, and its JSON:
    quoted = b""  # the same key comes record after record
    for _ in range(count):
        # Record and value lengths are often two bytes long, the other varints one.
        b = data[pos]
        if b < 0x80:
            pos += 1
            rec_end = pos + zz[b]
        elif (c := data[pos + 1]) < 0x80:
            pos += 2
            rec_end = pos + zz[(b & 0x7F) | (c << 7)]
        else:
            n, pos = varint(data, pos, 5)
            rec_end = pos + n
        # The attributes byte at ``pos`` is unused by every Kafka version so far.
        n = z1[data[pos + 1]]
        if n is not None:
            pos += 2
        elif (c := data[pos + 2]) < 0x80:
            n = zz[(data[pos + 1] & 0x7F) | (c << 7)]
            pos += 3
        else:
            n, pos = varint(data, pos + 1, 10)
        ts = base_ts + n if lat is None else lat
        n = z1[data[pos]]
        if n is not None:
            pos += 1
        elif (c := data[pos + 1]) < 0x80:
            n = zz[(data[pos] & 0x7F) | (c << 7)]
            pos += 2
        else:
            n, pos = varint(data, pos, 5)
        offset = base_offset + n
        n = z1[data[pos]]
        if n is not None:
            pos += 1
        elif (c := data[pos + 1]) < 0x80:
            n = zz[(data[pos] & 0x7F) | (c << 7)]
            pos += 2
        else:
            n, pos = varint(data, pos, 5)
        if n >= 0:
            key = b2a(data[pos : (pos := pos + n)], newline=False)
            templates = _KEYED
        elif n == -1:
            key = b""
            templates = _KEYLESS
        else:
            raise _Corrupt("negative key length", pos)
        b = data[pos]
        if b < 0x80:
            n = zz[b]
            pos += 1
        elif (c := data[pos + 1]) < 0x80:
            n = zz[(b & 0x7F) | (c << 7)]
            pos += 2
        else:
            n, pos = varint(data, pos, 5)
        if n >= 0:
            value = b2a(data[pos : (pos := pos + n)], newline=False)
        elif n == -1:
            value = _NULL
            nulls = True
        else:
            raise _Corrupt("negative value length", pos)
        n = z1[data[pos]]
        if n is not None:
            pos += 1
        else:
            n, pos = varint(data, pos, 5)
        if not n:
            text = templates[0] % (offset, ts, key, value, batch)
        elif n == 1:
            n = z1[data[pos]]
            if n is not None:
                pos += 1
            else:
                n, pos = varint(data, pos, 5)
            if n < 0:
                raise _Corrupt("negative header key length", pos)
            raw_key = data[pos : (pos := pos + n)]
            if raw_key != last_key:
                quoted = _quoted_key(raw_key)
                last_key = raw_key
            n = z1[data[pos]]
            if n is not None:
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                n = zz[(data[pos] & 0x7F) | (c << 7)]
                pos += 2
            else:
                n, pos = varint(data, pos, 5)
            if n >= 0:
                hv = b2a(data[pos : (pos := pos + n)], newline=False)
            elif n == -1:
                hv = _NULL
                nulls = True
            else:
                raise _Corrupt("negative header value length", pos)
            text = templates[1] % (offset, ts, key, value, quoted, hv, batch)
        else:
            # Each header takes at least two bytes, which bounds a lying count.
            if n < 0 or n > (rec_end - pos) >> 1:
                raise _Corrupt("header count does not fit the record", pos)
            count_h = n
            pieces: list[bytes] = []  # key, value, key, value... for one template
            for _ in range(count_h):
                n = z1[data[pos]]
                if n is not None:
                    pos += 1
                else:
                    n, pos = varint(data, pos, 5)
                if n < 0:
                    raise _Corrupt("negative header key length", pos)
                raw_key = data[pos : (pos := pos + n)]
                hkey = keys.get(raw_key) or _quoted_key(raw_key)
                n = z1[data[pos]]
                if n is not None:
                    pos += 1
                elif (c := data[pos + 1]) < 0x80:
                    n = zz[(data[pos] & 0x7F) | (c << 7)]
                    pos += 2
                else:
                    n, pos = varint(data, pos, 5)
                if n >= 0:
                    pieces += (hkey, b2a(data[pos : (pos := pos + n)], newline=False))
                elif n == -1:
                    pieces += (hkey, _NULL)
                    nulls = True
                else:
                    raise _Corrupt("negative header value length", pos)
            headers = _HEADERS[count_h] if count_h < len(_HEADERS) else b",".join([_HEADER] * count_h)
            text = templates[2] % (offset, ts, key, value, headers % tuple(pieces), batch)
        if pos != rec_end:
            raise _Corrupt("record fields do not fill the record", pos)
        if nulls:
            text = text.replace(_QUOTED_NULL, b"null")
            nulls = False
        append(text)
    if pos != end:
        raise _Corrupt("bytes follow the last record", pos)
