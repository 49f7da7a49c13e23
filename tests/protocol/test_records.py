"""The records layer against a real peer codec (kafka-python's), real captures, and fuzzing.

kafka-python's ``kafka.record`` package is an independent implementation of
the same formats, so agreement in both directions is the interop evidence:
batches it builds decode here to what it decodes, and batches built here
decode there to what was put in.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import cramjam
import google_crc32c
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kafka import codec as kcodec
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from kafkapy.errors import DecodeError, EncodeError
from kafkapy.protocol.compression import Compression, compress, decompress, xxh32
from kafkapy.protocol.records import (
    LegacyBatch,
    Record,
    RecordBatch,
    Records,
    build_record_batch,
)

CAPTURES = Path("/work/shared/captures")
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# kafka-python's codec ids match Kafka's and ours.
_KP_CODEC_AVAILABLE = {
    0: True,
    1: kcodec.has_gzip(),
    2: kcodec.has_snappy(),
    3: kcodec.has_lz4(),
    4: kcodec.has_zstd(),
}
_KP_CODEC_NEEDS = {2: "python-snappy", 3: "lz4 (and xxhash for magic 0)", 4: "zstandard"}


def _needs_codec(codec: int, magic: int = 2) -> None:
    if not _KP_CODEC_AVAILABLE[codec]:
        pytest.skip(
            f"!!! kafka-python cannot use {Compression(codec)} here: pip install "
            f"{_KP_CODEC_NEEDS[codec]} into the venv to run this interop case !!!"
        )
    if codec == 3 and magic == 0 and kcodec.xxhash is None:
        pytest.skip("!!! kafka-python needs xxhash to write magic-0 lz4 (pip install xxhash) !!!")


# --- helpers -----------------------------------------------------------------


def kp_build(
    magic: int,
    codec: int,
    rows: Iterable[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]],
    *,
    offset: int = 0,
    **producer: Any,
) -> bytes:
    """Build with kafka-python; rows are (timestamp, key, value, headers)."""
    builder = MemoryRecordsBuilder(magic, codec, 1 << 24, offset=offset, **producer)
    for ts, key, value, headers in rows:
        assert builder.append(ts, key, value, headers if magic == 2 else None) is not None
    builder.close()
    return bytes(builder.buffer())


def kp_decode(raw: bytes) -> list[tuple[int, int | None, bytes | None, bytes | None, list[tuple[str, Any]]]]:
    out = []
    for batch in MemoryRecords(raw):
        for r in batch:
            value = None if r.value is None else bytes(r.value)
            key = None if r.key is None else bytes(r.key)
            headers = [(k, None if v is None else bytes(v)) for k, v in r.headers]
            out.append((r.offset, r.timestamp, key, value, headers))
    return out


def kafkapy_decode(raw: bytes | bytearray | memoryview) -> list[tuple[int, int | None, Any, Any, Any]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in Records(raw).records()]


def sample_rows(n: int = 7) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    rows = []
    for i in range(n):
        key = None if i % 3 == 0 else f"key-{i}".encode()
        value = None if i == 4 else (f"value-{i}-".encode() * (i * 40 + 1))
        headers = [("trace", f"t{i}".encode()), ("ünïcode", b"\x00\xff")] if i % 2 else []
        rows.append((1_700_000_000_000 + i * 997, key, value, headers))
    return rows


def reframe(batch: bytes, *, payload: bytes | None = None, attributes: int | None = None) -> bytes:
    """A v2 batch with its payload or attributes swapped and length and CRC fixed up."""
    head = bytearray(batch[:61])
    body = batch[61:] if payload is None else payload
    if attributes is not None:
        struct.pack_into(">h", head, 21, attributes)
    struct.pack_into(">i", head, 8, 49 + len(body))
    out = head + body
    struct.pack_into(">I", out, 17, google_crc32c.value(bytes(out[21:])))
    return bytes(out)


def fix_legacy_crc(msg: bytearray, pos: int = 0) -> None:
    size = struct.unpack_from(">i", msg, pos + 8)[0]
    struct.pack_into(">I", msg, pos + 12, zlib.crc32(bytes(msg[pos + 16 : pos + 12 + size])))


def exhaust(records: Records, *, strict: bool = False) -> None:
    for batch in records.batches(strict=strict):
        for record in batch:
            record.to_dict()


# --- kafka-python builds, kafkapy decodes ---------------------------------------

V2_CODECS = [0, 1, 2, 3, 4]
LEGACY_CASES = [(m, c) for m in (0, 1) for c in (0, 1, 2, 3)]


@pytest.mark.parametrize("codec", V2_CODECS, ids=lambda c: str(Compression(c)))
def test_v2_from_kafka_python(codec: int) -> None:
    _needs_codec(codec)
    rows = sample_rows()
    raw = kp_build(2, codec, rows, offset=1000)
    mine = kafkapy_decode(raw)
    assert mine == kp_decode(raw)
    assert mine == [(1000 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(rows)]
    (batch,) = list(Records(raw))
    assert isinstance(batch, RecordBatch)
    assert batch.compression == Compression(codec) and str(batch.compression) == str(Compression(codec))
    # kafka-python leaves base_offset 0 and puts the offsets in the deltas, as producers may.
    assert (batch.last_offset, batch.record_count) == (1006, 7)
    assert batch.base_timestamp == rows[0][0] and batch.max_timestamp == rows[-1][0]
    assert batch.crc_valid and batch.magic == 2 and batch.timestamp_type == 0
    assert not batch.is_transactional and not batch.is_control
    assert batch.size_in_bytes == len(raw) == batch.batch_length + 12


@pytest.mark.parametrize("magic,codec", LEGACY_CASES, ids=lambda x: str(x))
def test_legacy_from_kafka_python(magic: int, codec: int) -> None:
    _needs_codec(codec, magic)
    rows = sample_rows()
    raw = kp_build(magic, codec, rows)
    mine = kafkapy_decode(raw)
    assert mine == kp_decode(raw)
    expected_ts = [ts if magic else None for ts, *_ in rows]
    assert [(o, t, k, v) for o, t, k, v, _ in mine] == [
        (i, expected_ts[i], k, v) for i, (_, k, v, _) in enumerate(rows)
    ]
    batches = list(Records(raw))
    assert all(isinstance(b, LegacyBatch) and b.magic == magic for b in batches)
    assert len(batches) == (1 if codec else len(rows))
    assert all(b.crc_valid for b in batches)


@pytest.mark.parametrize("codec", [1, 2, 3], ids=lambda c: str(Compression(c)))
def test_v1_wrapper_relative_offsets_as_a_broker_stamps_them(codec: int) -> None:
    """A broker rewrites a v1 wrapper's offset to the absolute last offset; inner ones stay 0..n-1."""
    _needs_codec(codec, 1)
    wrapper = bytearray(kp_build(1, codec, sample_rows(5)))
    struct.pack_into(">q", wrapper, 0, 504)  # outside the CRC, as on a real broker
    mine = kafkapy_decode(bytes(wrapper))
    assert [r[0] for r in mine] == [500, 501, 502, 503, 504]
    assert mine == kp_decode(bytes(wrapper))
    (batch,) = list(Records(bytes(wrapper)))
    assert isinstance(batch, LegacyBatch)
    assert (batch.base_offset, batch.last_offset) == (500, 504)


def test_v1_log_append_time_wrapper_stamps_inner_records() -> None:
    wrapper = bytearray(kp_build(1, 1, sample_rows(3)))
    wrapper[17] |= 0x08  # attributes: log-append time
    struct.pack_into(">q", wrapper, 18, 42_000)
    fix_legacy_crc(wrapper)
    assert [r.timestamp for r in Records(bytes(wrapper)).records()] == [42_000] * 3
    assert kafkapy_decode(bytes(wrapper)) == kp_decode(bytes(wrapper))


def test_v0_lz4_needs_the_old_kafka_header_checksum_repair() -> None:
    _needs_codec(3, 0)
    raw = kp_build(0, 3, sample_rows(4))
    (batch,) = list(Records(raw))
    assert isinstance(batch, LegacyBatch)
    frame = batch.value
    assert frame is not None
    with pytest.raises(cramjam.DecompressionError):
        cramjam.lz4.decompress(frame)  # a standard reader rejects Kafka 0.8's checksum
    assert kafkapy_decode(raw) == kp_decode(raw)


@pytest.mark.parametrize("level", [None, 1, 9, 12])
def test_lz4_frames_are_what_kafkas_java_reader_accepts(level: int | None) -> None:
    """Kafka's Lz4BlockInputStream (and Sarama) refuse linked blocks, a version other than 01 and
    reserved bits; the LZ4 frame API links blocks by default. Large enough for several blocks."""
    data = bytes(range(256)) * 2048 + b"tail" * 40_000
    frame = compress(Compression.LZ4, data, level)
    flg = frame[4]
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert (flg >> 6, flg >> 5 & 1, flg & 0x03) == (0b01, 1, 0)  # version 01, independent blocks, no reserved
    assert decompress(Compression.LZ4, frame) == data


def test_transactional_producer_state_from_kafka_python() -> None:
    raw = kp_build(
        2, 0, sample_rows(3), transactional=True, producer_id=77, producer_epoch=3, base_sequence=11
    )
    (batch,) = list(Records(raw))
    assert isinstance(batch, RecordBatch)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 3, 11)
    assert batch.is_transactional


def test_log_append_time_v2_uses_max_timestamp() -> None:
    raw = reframe(kp_build(2, 0, sample_rows(3)), attributes=0x08)
    (batch,) = list(Records(raw))
    assert batch.timestamp_type == 1
    assert isinstance(batch, RecordBatch)
    assert [r.timestamp for r in batch] == [batch.max_timestamp] * 3
    assert kafkapy_decode(raw) == kp_decode(raw)


def test_mixed_formats_in_one_records_field() -> None:
    """A partition upgraded across message formats holds v0, v1 and v2 entries side by side."""
    parts = [kp_build(0, 0, sample_rows(2)), kp_build(1, 1, sample_rows(2)), kp_build(2, 0, sample_rows(2))]
    records = Records.from_batches(*parts)
    assert [b.magic for b in records] == [0, 0, 1, 2]
    assert kafkapy_decode(bytes(records)) == kp_decode(bytes(records))


# --- kafkapy builds, kafka-python decodes ---------------------------------------


@pytest.mark.parametrize("codec", V2_CODECS, ids=lambda c: str(Compression(c)))
def test_kafka_python_reads_what_we_build(codec: int) -> None:
    _needs_codec(codec)
    rows = sample_rows()
    raw = build_record_batch(
        [(k, v, h, ts) for ts, k, v, h in rows],
        base_offset=31,
        compression=Compression(codec).name.lower(),
        producer_id=9,
        producer_epoch=2,
        base_sequence=5,
        is_transactional=True,
        partition_leader_epoch=4,
    )
    (kbatch,) = list(MemoryRecords(raw))
    assert kbatch.validate_crc()
    assert (kbatch.producer_id, kbatch.producer_epoch, kbatch.base_sequence) == (9, 2, 5)
    assert kbatch.is_transactional and kbatch.compression_type == codec and kbatch.leader_epoch == 4
    expected = [(31 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(rows)]
    assert kp_decode(raw) == expected
    assert kafkapy_decode(raw) == expected


def test_builder_accepts_dicts_records_and_short_tuples() -> None:
    rec = Record(12, 5_000, b"k", b"v", [("h", None)])
    raw = build_record_batch(
        [
            {"key": b"a", "value": b"b", "timestamp": 4_000, "offset": 10},
            rec,
            (b"x", b"y"),
        ],
        base_offset=10,
        base_timestamp=4_000,
    )
    decoded = list(Records(raw).records())
    assert decoded == [
        Record(10, 4_000, b"a", b"b", []),
        rec,
        Record(13, 4_000, b"x", b"y", []),  # no timestamp: base_timestamp, like a producer's "now"
    ]
    assert kp_decode(raw) == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded]


def test_builder_rejects_bad_input() -> None:
    with pytest.raises(EncodeError):
        build_record_batch([("text key", b"v")])
    with pytest.raises(EncodeError):
        build_record_batch([(b"k", b"v")], compression="brotli")
    with pytest.raises(EncodeError):
        build_record_batch(
            [{"key": b"a", "value": b"b", "offset": 5}, {"key": b"a", "value": b"b", "offset": 5}]
        )
    with pytest.raises(EncodeError):
        build_record_batch([(b"k", b"v")], producer_epoch=1 << 20)


def test_control_batch_and_rebase() -> None:
    marker = build_record_batch(
        [(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 7), [], 1_000)],
        is_control=True,
        is_transactional=True,
        producer_id=5,
        producer_epoch=0,
    )
    (batch,) = list(Records(marker))
    assert isinstance(batch, RecordBatch)
    assert batch.is_control and batch.is_transactional
    (kbatch,) = list(MemoryRecords(marker))
    assert kbatch.is_control_batch
    moved = batch.rebased(900, partition_leader_epoch=3)
    (again,) = list(Records(moved))
    assert isinstance(again, RecordBatch)
    assert (again.base_offset, again.partition_leader_epoch, again.crc_valid) == (900, 3, True)
    assert [r.offset for r in again] == [900]


# --- compression framings kafka-python does not exercise -------------------------


def test_raw_snappy_payload_decodes() -> None:
    """Several non-Java clients write one raw snappy block instead of xerial framing."""
    plain = build_record_batch([(b"k", b"v" * 500, [], 1)] * 3)
    raw = reframe(plain, payload=bytes(cramjam.snappy.compress_raw(plain[61:])), attributes=2)
    assert kafkapy_decode(raw) == kafkapy_decode(plain)


def test_concatenated_xerial_streams_decode() -> None:
    data = b"abc" * 50_000
    stream = compress(Compression.SNAPPY, data[:70_000]) + compress(Compression.SNAPPY, data[70_000:])
    assert decompress(Compression.SNAPPY, stream) == data


@pytest.mark.parametrize("codec", list(Compression), ids=str)
def test_codec_round_trip_and_empty(codec: Compression) -> None:
    for data in (b"", b"x", bytes(range(256)) * 300):
        assert decompress(codec, compress(codec, data)) == data


def test_xxh32_matches_reference() -> None:
    xxhash = pytest.importorskip("xxhash", reason="xxhash is only a cross-check here")
    for n in range(70):
        data = bytes((i * 37 + n) & 0xFF for i in range(n))
        assert xxh32(data) == xxhash.xxh32_intdigest(data)


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=lambda c: str(Compression(c)))
def test_undecompressable_payload_is_a_decode_error_at_the_payload(codec: int) -> None:
    raw = reframe(
        build_record_batch([(b"k", b"v")]), payload=b"\x82SNAPPY\x00garbage-garbage!" * 3, attributes=codec
    )
    records = Records(raw)
    (batch,) = list(records)  # the header is fine; nothing is inflated yet
    with pytest.raises(DecodeError) as err:
        list(batch)
    assert err.value.offset == 61


# --- records framing, laziness, errors -------------------------------------------


def test_records_value_semantics() -> None:
    raw = build_record_batch([(b"k", b"v")])
    for given_raw in (raw, bytearray(raw), memoryview(raw)):
        records = Records(given_raw)
        assert records.raw is given_raw
        assert bytes(records) == raw and len(records) == len(raw)
        assert records == raw and records == bytearray(raw) and records == memoryview(raw)
        assert records == Records(raw) and hash(records) == hash(raw)
        assert records != b"other" and records != 3
        assert repr(records) == f"<Records {len(raw)} bytes>"
        assert kafkapy_decode(given_raw) == kafkapy_decode(raw)
        assert [r.value for r in records.records()] == [b"v"]


def test_memoryview_of_a_larger_buffer_reports_offsets_within_the_records() -> None:
    raw = build_record_batch([(b"k", b"v")]) + b"\x00" * 8 + b"\x00\x00\x00\x40" + b"\x00" * 4 + b"\x07"
    frame = b"prefix!" + raw + b"suffix"
    view = memoryview(frame)[7 : 7 + len(raw)]
    records = Records(view)
    with pytest.raises(DecodeError) as err:
        exhaust(records)
    assert err.value.offset == len(raw) - 17 + 16  # the magic byte of the second entry


def test_construction_is_lazy() -> None:
    garbage = b"\xff" * 1000
    records = Records(garbage)  # no error: nothing looked at
    assert len(records) == 1000 and bytes(records) == garbage
    with pytest.raises(DecodeError):
        list(records)


def test_batches_defer_crc_and_record_decoding() -> None:
    raw = bytearray(build_record_batch([(b"k", b"v" * 50)] * 4))
    raw[-2] ^= 0xFF  # the last value byte: only the CRC can tell
    records = Records(bytes(raw))
    (batch,) = list(records)  # headers only: no CRC check yet
    assert isinstance(batch, RecordBatch)
    assert batch.record_count == 4 and not batch.crc_valid
    with pytest.raises(DecodeError) as err:
        list(batch)
    assert err.value.offset == 17 and "CRC" in err.value.reason
    assert [r.value for r in batch.records(check_crc=False)][-1] == b"v" * 49 + b"\x89"


def test_error_offsets_point_into_the_records_bytes() -> None:
    first = build_record_batch([(b"k", b"v")])
    second = bytearray(build_record_batch([(b"k", b"v")]))
    second[16] = 9  # magic
    with pytest.raises(DecodeError) as err:
        list(Records(first + bytes(second)))
    assert err.value.offset == len(first) + 16
    assert err.value.error_code == 2  # CORRUPT_MESSAGE

    # A record whose key length overruns the record, with a valid CRC so decoding gets there.
    bad = bytearray(build_record_batch([(b"kk", b"v")]))
    key_len_at = 61 + 1 + 1 + 1 + 1  # length, attributes, timestamp delta, offset delta
    bad[key_len_at] = 0x7E  # zigzag 63
    bad = bytearray(reframe(bytes(bad)))
    with pytest.raises(DecodeError) as err:
        list(Records(first + bytes(bad)).records())
    assert err.value.offset == len(first) + key_len_at + 1


def test_partial_trailing_batch() -> None:
    first = build_record_batch([(b"a", b"1")], base_offset=0)
    second = build_record_batch([(b"b", b"2" * 100)], base_offset=1)
    whole = first + second
    for cut in range(len(first), len(whole)):
        records = Records(whole[:cut])
        assert records.partial_tail_bytes == cut - len(first)  # known before iterating
        assert [r.offset for r in records.records()] == [0]
        assert records.partial_tail_bytes == cut - len(first)
        if cut > len(first):
            with pytest.raises(DecodeError) as err:
                list(records.batches(strict=True))
            assert err.value.truncated and err.value.offset == len(first)
        else:
            assert len(list(records.batches(strict=True))) == 1
    assert Records(whole).partial_tail_bytes == 0


def test_partial_legacy_tail() -> None:
    raw = kp_build(1, 0, sample_rows(3))
    records = Records(raw[:-5])
    assert len(list(records)) == 2 and records.partial_tail_bytes > 0


def test_empty_records() -> None:
    records = Records(b"")
    assert list(records) == [] and records.partial_tail_bytes == 0 and not records


def test_legacy_crc_corruption_is_detected() -> None:
    raw = bytearray(kp_build(1, 0, sample_rows(1)))
    raw[-1] ^= 0x01
    with pytest.raises(DecodeError) as err:
        list(Records(bytes(raw)).records())
    assert err.value.offset == 12 and "CRC" in err.value.reason


def test_record_to_dict_is_json_and_inverts() -> None:
    raw = build_record_batch([(b"\x00\xff", None, [("h", b"\x01"), ("n", None)], 123)], base_offset=5)
    (record,) = list(Records(raw).records())
    as_json = json.loads(json.dumps(record.to_dict()))
    assert as_json == {
        "offset": 5,
        "timestamp": 123,
        "key": "AP8=",
        "value": None,
        "headers": [{"key": "h", "value": "AQ=="}, {"key": "n", "value": None}],
    }
    assert Record.from_dict(as_json) == record
    assert "offset=5" in repr(record)


# --- real capture data ---------------------------------------------------------


def _carve(data: bytes) -> list[RecordBatch | LegacyBatch]:
    """Find CRC-valid batches in a pcap by brute force: no pcap or TCP parsing needed."""
    found: list[RecordBatch | LegacyBatch] = []
    pos = 0
    while pos < len(data) - 30:
        batch: RecordBatch | LegacyBatch | None = None
        try:
            if data[pos + 16] == 2:
                batch = RecordBatch(data, pos)
            elif data[pos + 16] in (0, 1):
                batch = LegacyBatch(data, pos)
        except DecodeError:
            batch = None
        if batch is not None and batch.crc_valid:
            found.append(batch)
            pos += batch.size_in_bytes
        else:
            pos += 1
    return found


@pytest.mark.parametrize(
    "name,magic",
    [("00-produce-v7-sw8.pcap", 2), ("00-produce-v9.pcap", 2), ("00-produce-v2.pcap", 1)],
)
def test_capture_batches_decode_like_kafka_python(name: str, magic: int) -> None:
    path = CAPTURES / name
    if not path.exists():
        pytest.skip(f"capture {path} not present")
    batches = _carve(path.read_bytes())
    assert batches and all(b.magic == magic for b in batches)
    for batch in batches:
        raw = bytes(batch)
        assert kafkapy_decode(raw) == kp_decode(raw)
    if name == "00-produce-v7-sw8.pcap":
        (record,) = list(batches[0])
        assert (record.key, record.value) == (b"MyKey", b"Hello Kafka")
        ((hkey, hvalue),) = record.headers
        assert hkey == "sw8" and hvalue is not None and hvalue.startswith(b"1-")


# --- properties ----------------------------------------------------------------

blobs = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=12), blobs), max_size=4)
timestamps = st.integers(min_value=0, max_value=1 << 45)
rows = st.lists(st.tuples(blobs, blobs, headers, timestamps), max_size=25)
codecs = st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"])


@given(rows=rows, codec=codecs, base_offset=st.integers(0, 1 << 40))
@settings(max_examples=200, deadline=None)
def test_round_trip(rows: list[Any], codec: str, base_offset: int) -> None:
    raw = build_record_batch(rows, base_offset=base_offset, compression=codec)
    decoded = list(Records(raw).records())
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (k, v, list(h), ts) for k, v, h, ts in rows
    ]
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(rows)))
    assert [Record.from_dict(json.loads(json.dumps(r.to_dict()))) for r in decoded] == decoded


@given(rows=rows.filter(bool), codec=codecs)
@settings(max_examples=60, deadline=None)
def test_kafka_python_agrees_on_random_batches(rows: list[Any], codec: str) -> None:
    assume(_KP_CODEC_AVAILABLE[int(Compression[codec.upper()])])
    raw = build_record_batch(rows, compression=codec)
    assert kp_decode(raw) == kafkapy_decode(raw)


@given(data=st.binary(max_size=400))
@FUZZ
def test_random_bytes_only_raise_decode_error(data: bytes) -> None:
    for strict in (False, True):
        try:
            exhaust(Records(data), strict=strict)
        except DecodeError:
            pass
    try:
        _ = Records(data).partial_tail_bytes
    except DecodeError:
        pass


def _seed_batches() -> list[bytes]:
    rows_ = [(t, k, v, h) for t, k, v, h in sample_rows(4)]
    seeds = [build_record_batch([(k, v, h, t) for t, k, v, h in rows_], compression=c) for c in Compression]
    seeds += [
        kp_build(m, c, rows_)
        for m, c in LEGACY_CASES
        if _KP_CODEC_AVAILABLE[c] and not (m == 0 and c == 3 and kcodec.xxhash is None)
    ]
    return seeds


SEEDS = _seed_batches()


@given(
    seed=st.sampled_from(SEEDS),
    edits=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.integers(0, 1 << 16),
    fix_crc=st.booleans(),
)
@FUZZ
def test_mutated_batches_only_raise_decode_error(
    seed: bytes, edits: list[tuple[int, int]], cut: int, fix_crc: bool
) -> None:
    data = bytearray(seed)
    for where, value in edits:
        data[where % len(data)] = value
    # Mutations behind a recomputed checksum reach the record decoders.
    if fix_crc and len(data) > 61 and data[16] == 2:
        data = bytearray(reframe(bytes(data[:61]) + bytes(data[61:])))
    elif fix_crc and data[16] in (0, 1):
        try:
            fix_legacy_crc(data)
        except struct.error:
            pass
    data = data[: max(1, cut % (len(data) + 1))] if cut & 1 else data
    for strict in (False, True):
        for check_crc in (True, False):
            try:
                for record in Records(bytes(data)).records(strict=strict, check_crc=check_crc):
                    record.to_dict()
            except DecodeError as exc:
                assert exc.offset is None or 0 <= exc.offset <= len(data)


@given(seed=st.sampled_from(SEEDS[:5]), where=st.integers(21, 1 << 16), flip=st.integers(1, 255))
@FUZZ
def test_v2_crc_corruption_is_always_detected(seed: bytes, where: int, flip: int) -> None:
    data = bytearray(seed)
    at = 21 + where % (len(data) - 21)
    data[at] ^= flip
    with pytest.raises(DecodeError) as err:
        list(Records(bytes(data)).records())
    assert err.value.offset == 17


@given(seed=st.sampled_from(SEEDS[5:] or SEEDS[:1]), where=st.integers(0, 1 << 16), flip=st.integers(1, 255))
@FUZZ
def test_legacy_crc_corruption_is_always_detected(seed: bytes, where: int, flip: int) -> None:
    assume(seed[16] in (0, 1))
    data = bytearray(seed)
    entries = list(Records(seed))
    first = entries[0]
    at = 16 + where % (first.size_in_bytes - 16)  # inside the first message's CRC coverage
    data[at] ^= flip
    with pytest.raises(DecodeError):
        list(Records(bytes(data)).records())


def test_a_delete_horizon_takes_the_base_timestamp_and_the_records_keep_theirs() -> None:
    """KIP-534's layout: attribute bit 6 set, the horizon in the base timestamp, record deltas
    taken from it (negative here), so readers still compute each record's own timestamp."""
    data = build_record_batch([(b"k", None, [], 5_000), (b"j", b"v", [], 7_000)], base_offset=10,
                              delete_horizon_ms=90_000)
    batch = RecordBatch(data, 0)
    assert batch.has_delete_horizon and batch.delete_horizon_ms == 90_000 and batch.crc_valid
    assert (batch.base_timestamp, batch.max_timestamp) == (90_000, 7_000)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in batch.record_list()] == [
        (10, b"k", None, 5_000), (11, b"j", b"v", 7_000)]
    plain = RecordBatch(build_record_batch([(b"k", None, [], 5_000)]), 0)
    assert (plain.has_delete_horizon, plain.delete_horizon_ms) == (False, None)
