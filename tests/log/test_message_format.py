"""The old message formats (magic 0 and 1) converted to record batches and back, as Kafka 2.8-3.9
convert them for Produce v0-v2 and Fetch v0-v3.

kafka-python's own legacy message code is the independent party: its builder writes what old
producers send (up-conversion's input), and its reader reads what down-conversion writes.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Generator, Iterator
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafkapy.errors import ErrorCode
from kafkapy.log.append import RecordsRejected, produce_inflate_limit, validate_records
from kafkapy.log.message_format import (
    DownConversionRefused,
    UpConverted,
    down_convert,
    fetch_magic,
    up_conversion_steps,
    up_convert,
)
from kafkapy.log.topic_config import LogConfig
from kafkapy.protocol.compression import Compression, xxh32
from kafkapy.protocol.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    Record,
    RecordBatch,
    Records,
    build_record_batch,
)
from kafkapy.protocol.steps import all_at_once

LEGACY_CODECS = (Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4)
MAX = 1_048_588
NOW = 1_700_000_000_000

blobs = st.one_of(st.none(), st.binary(max_size=40))
timestamps = st.integers(0, 2**41)


Sent = list[tuple[bytes | None, bytes | None, int]]  # key, value, timestamp


def old_producer_set(magic: int, codec: Compression, records: Sent) -> bytes:
    """What an old producer sends: kafka-python's legacy builder, offsets 0..n-1."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 20)
    for offset, (key, value, timestamp) in enumerate(records):
        builder.append(offset, timestamp=timestamp if magic else None, key=key, value=value)
    return bytes(builder.build())


def read_by_kafka_python(data: bytes) -> list[tuple[int, int | None, int, bytes | None, bytes | None]]:
    found = []
    records = MemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        found.extend((r.offset, r.timestamp, r.timestamp_type, r.key, r.value) for r in batch)
    return found


def _converted(data: bytes) -> bytes:
    """The record batch up-conversion makes of ``data``, which must hold a whole message."""
    converted = up_convert(data, max_message_bytes=MAX)
    assert converted is not None
    return bytes(converted.batch)


def test_fetch_versions_map_to_their_message_formats() -> None:
    assert [fetch_magic(v) for v in range(6)] == [0, 0, 1, 1, None, None]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(magic=st.sampled_from((0, 1)), codec=st.sampled_from(LEGACY_CODECS),
       records=st.lists(st.tuples(blobs, blobs, timestamps), min_size=1, max_size=8))
def test_an_old_producers_messages_become_one_record_batch_with_the_same_records(
        magic: int, codec: Compression, records: list[tuple[bytes | None, bytes | None, int]]) -> None:
    batch = RecordBatch(_converted(old_producer_set(magic, codec, records)))
    assert batch.compression == codec
    assert batch.timestamp_type == CREATE_TIME
    assert batch.producer_id == -1 and batch.base_offset == 0
    expected_stamps = [ts if magic else -1 for _, _, ts in records]
    assert [(r.offset, r.timestamp, r.key, r.value) for r in batch.record_list()] == [
        (i, stamp, key, value)
        for i, ((key, value, _), stamp) in enumerate(zip(records, expected_stamps, strict=True))]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(magic=st.sampled_from((0, 1)), codec=st.sampled_from(LEGACY_CODECS),
       base=st.integers(0, 2**40), append_time=st.booleans(),
       records=st.lists(st.tuples(blobs, blobs, timestamps, st.integers(1, 3)), min_size=1, max_size=8))
def test_stored_batches_read_by_an_old_consumer_keep_offsets_keys_values_and_timestamps(
        magic: int, codec: Compression, base: int, append_time: bool,
        records: list[tuple[bytes | None, bytes | None, int, int]]) -> None:
    offsets, offset = [], base
    for *_, gap in records:
        offsets.append(offset)
        offset += gap  # a compacted log leaves gaps
    stored = [Record(o, ts, key, value, [("h", b"dropped")])
              for o, (key, value, ts, _) in zip(offsets, records, strict=True)]
    batch = build_record_batch(stored, base_offset=base, compression=codec,
                               timestamp_type=LOG_APPEND_TIME if append_time else CREATE_TIME,
                               max_timestamp=NOW if append_time else None)
    converted = down_convert([batch], to_magic=magic, fetch_offset=base)
    def stamp(ts: int) -> int | None:
        return None if magic == 0 else (NOW if append_time else ts)
    expected_type = None if magic == 0 else (LOG_APPEND_TIME if append_time else CREATE_TIME)
    assert read_by_kafka_python(converted) == [
        (o, stamp(ts), expected_type, key, value)
        for o, (key, value, ts, _) in zip(offsets, records, strict=True)]


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_a_round_trip_through_the_old_format_keeps_the_records(codec: Compression) -> None:
    stored = build_record_batch([Record(10 + i, NOW + i, b"k%d" % i, b"v%d" % i) for i in range(5)],
                                base_offset=10, compression=codec)
    old = down_convert([stored], to_magic=1, fetch_offset=10)
    again = RecordBatch(_converted(old))
    assert [(r.timestamp, r.key, r.value) for r in again.record_list()] == [
        (r.timestamp, r.key, r.value) for r in RecordBatch(stored).record_list()]


def test_magic_zero_lz4_carries_kafka_08s_header_checksum() -> None:
    """Magic-0 readers (kafka-python's lz4_decode_old_kafka, librdkafka's MsgVersion 0) expect the
    checksum that covered the frame's magic number too; kafka-python reads it back."""
    stored = build_record_batch([Record(0, NOW, b"k", b"v" * 100)], compression=Compression.LZ4)
    message = down_convert([stored], to_magic=0, fetch_offset=0)
    key_length_at = 12 + 4 + 2
    value_at = key_length_at + 4 + 4
    frame = message[value_at:]
    hc_at = 6 + (8 if frame[4] & 0x08 else 0)
    assert frame[hc_at] == (xxh32(frame[:hc_at]) >> 8) & 0xFF
    assert read_by_kafka_python(message) == [(0, None, None, b"k", b"v" * 100)]


def test_control_batches_are_left_out_and_uncompressed_records_before_the_fetch_offset_too() -> None:
    data = build_record_batch([Record(i, NOW, None, b"%d" % i) for i in range(4)])
    marker = build_record_batch([Record(4, NOW, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
                                base_offset=4, producer_id=7, producer_epoch=0, is_transactional=True,
                                is_control=True)
    compressed = build_record_batch([Record(5 + i, NOW, None, b"c%d" % i) for i in range(3)], base_offset=5,
                                    compression=Compression.GZIP)
    converted = down_convert([data + marker, compressed], to_magic=1, fetch_offset=6)
    # From the uncompressed batch nothing below 6 (all of it); the compressed one whole (old
    # consumers skip what is below their position in it).
    assert [o for o, *_ in read_by_kafka_python(converted)] == [5, 6, 7]
    assert down_convert([marker], to_magic=0, fetch_offset=0) == b""


def test_zstd_cannot_be_down_converted() -> None:
    stored = build_record_batch([Record(0, NOW, None, b"v")], compression=Compression.ZSTD)
    with pytest.raises(DownConversionRefused) as refused:
        down_convert([stored], to_magic=1, fetch_offset=0)
    assert refused.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_a_legacy_message_claiming_log_append_time_keeps_the_claim_for_the_append_checks() -> None:
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=NOW, key=None, value=b"v")
    data = bytearray(builder.build())
    data[12 + 4 + 1] |= 0x08  # the timestamp-type bit of the message's attributes
    struct.pack_into(">I", data, 12, zlib.crc32(data[12 + 4:]))
    converted = _converted(bytes(data))
    assert RecordBatch(converted).timestamp_type == LOG_APPEND_TIME


def test_a_record_batch_in_an_old_produce_is_left_to_the_batch_checks() -> None:
    batch = build_record_batch([Record(0, NOW, None, b"v")])
    assert _converted(batch) == batch


def test_no_whole_message_is_nothing_to_append() -> None:
    whole = old_producer_set(1, Compression.NONE, [(None, b"v", NOW)])
    assert up_convert(b"", max_message_bytes=MAX) is None
    # A partial message is dropped, as Kafka trims it.
    assert up_convert(whole[:-3], max_message_bytes=MAX) is None


def _reject(data: bytes, max_message_bytes: int = MAX) -> RecordsRejected:
    with pytest.raises(RecordsRejected) as rejected:
        up_convert(data, max_message_bytes=max_message_bytes)
    return rejected.value


def test_up_conversion_refuses_what_kafka_refuses() -> None:
    one = old_producer_set(1, Compression.NONE, [(None, b"v", NOW)])
    zero = old_producer_set(0, Compression.NONE, [(None, b"v", NOW)])
    gzipped = old_producer_set(1, Compression.GZIP, [(None, b"v", NOW), (b"k", b"w", NOW)])

    corrupt = bytearray(one)
    corrupt[-1] ^= 0xFF
    assert _reject(bytes(corrupt)).code == ErrorCode.CORRUPT_MESSAGE
    assert _reject(one, max_message_bytes=len(one) - 1).code == ErrorCode.MESSAGE_TOO_LARGE
    assert _reject(one + zero).code == ErrorCode.INVALID_RECORD  # mixed magic
    assert _reject(gzipped + one).code == ErrorCode.INVALID_RECORD  # a compressed message beside another

    # An inner message compressed again: a record error naming it.
    rejected = _reject(_wrap_raw(_raw_message(1, int(Compression.GZIP), b"x"), magic=1))
    assert rejected.code == ErrorCode.INVALID_RECORD and rejected.record_errors[0][0] == 0

    # An inner message of another magic.
    rejected = _reject(_wrap_raw(zero, magic=1))
    assert rejected.code == ErrorCode.INVALID_RECORD and "magic" in rejected.record_errors[0][1]

    # An inner message whose CRC is wrong.
    bad_inner = bytearray(one)
    bad_inner[-1] ^= 0xFF
    assert _reject(_wrap_raw(bytes(bad_inner), magic=1)).code == ErrorCode.CORRUPT_MESSAGE

    # A payload that does not inflate.
    assert _reject(_wrap_raw(b"not gzip at all", magic=1, compress=False)).code == ErrorCode.INVALID_RECORD


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from(LEGACY_CODECS),
       records=st.lists(st.tuples(blobs, blobs, st.integers(-(2**63), 2**63 - 1)), min_size=1, max_size=5))
def test_any_magic_one_timestamps_give_a_batch_or_a_kafka_error(
        codec: Compression, records: Sent) -> None:
    try:
        converted = up_convert(old_producer_set(1, codec, records), max_message_bytes=MAX)
    except RecordsRejected as rejected:
        assert rejected.code == ErrorCode.INVALID_TIMESTAMP
        return
    assert converted is not None
    assert [r.timestamp for r in RecordBatch(converted.batch).record_list()] == [ts for *_, ts in records]
    negative = [i for i, (*_, ts) in enumerate(records) if ts < -1]
    assert converted.negative_timestamp_at == (negative[0] if negative else None)


def test_timestamps_too_far_apart_for_one_batch_are_refused_not_raised() -> None:
    first = old_producer_set(1, Compression.NONE, [(None, b"a", -(2**63))])
    second = old_producer_set(1, Compression.NONE, [(None, b"b", 2**63 - 1)])
    assert _reject(first + second).code == ErrorCode.INVALID_TIMESTAMP


def _raw_message(magic: int, attributes: int, value: bytes) -> bytes:
    """One message exactly as given (no checks), with a valid CRC."""
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", NOW) if magic else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body


def _wrap_raw(inner: bytes, *, magic: int, compress: bool = True) -> bytes:
    """A gzip wrapper around ``inner`` exactly as given, with a valid outer CRC."""
    gzip = zlib.compressobj(6, zlib.DEFLATED, 31)
    payload = gzip.compress(inner) + gzip.flush() if compress else inner
    return _raw_message(magic, int(Compression.GZIP), payload)


def test_a_wrapper_inflating_beyond_produces_bound_is_refused_before_it_is_inflated_further() -> None:
    """An old producer's gzip wrapper claiming 512 MiB in 520 KB: inflation stops at Produce's
    bound (produce_inflate_limit: 256 MiB at the default max.message.bytes), INVALID_RECORD as
    for any wrapper that does not inflate."""
    gzip = zlib.compressobj(9, zlib.DEFLATED, 31)
    payload = b"".join([gzip.compress(bytes(1 << 20)) for _ in range(512)] + [gzip.flush()])
    rejected = _reject(_raw_message(1, int(Compression.GZIP), payload))
    assert rejected.code == ErrorCode.INVALID_RECORD
    assert f"gzip payload inflates beyond the limit of {produce_inflate_limit(MAX)} bytes" in rejected.message


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), magic=st.sampled_from((0, 1)), codec=st.sampled_from(LEGACY_CODECS))
def test_damaged_old_messages_are_refused_with_a_kafka_error_and_nothing_else(
        data: st.DataObject, magic: int, codec: Compression) -> None:
    """Whatever the damage, up-conversion followed by the record batch checks (the Produce v0-v2
    path) answers a plan, nothing, or RecordsRejected: a set that already reads as a record batch
    is passed through unconverted and left to the checks."""
    good = bytearray(old_producer_set(magic, codec, [(b"k", b"value", NOW), (None, b"v2", NOW + 1)]))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(good) - 1))
        good[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(good)))
    damaged = bytes(good[:cut])
    try:
        converted = up_convert(damaged, max_message_bytes=MAX)
        if converted is not None:
            validate_records(bytearray(converted.batch), LogConfig(), NOW, produce_version=2)
    except RecordsRejected as rejected:
        assert rejected.code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD,
                                 ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                 ErrorCode.INVALID_TIMESTAMP)
        return
    if converted is not None and converted.batch is not damaged:
        list(Records(converted.batch))  # converted: a whole batch


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_a_magic_one_timestamp_of_minus_two_is_its_own_not_magic_zero_s_none(codec: Compression) -> None:
    """The message set reader marked magic 0's missing timestamp with -2, so a magic-1 message
    carrying -2 lost it (read as no timestamp, up-converted as -1). Found by the property above.
    Kafka's MemoryRecordsBuilder then refuses it (an IllegalArgumentException, which the Produce
    partition is answered UNKNOWN_SERVER_ERROR for): the conversion names it."""
    converted = up_convert(old_producer_set(1, codec, [(None, None, -2), (b"k", b"v", 5)]),
                           max_message_bytes=MAX)
    assert converted is not None
    assert [r.timestamp for r in RecordBatch(converted.batch).record_list()] == [-2, 5]
    assert (converted.negative_timestamp_at, converted.negative_timestamp) == (0, -2)
    refusal = converted.builder_refusal(None)
    assert refusal is not None and refusal.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert refusal.message == "Invalid negative timestamp -2"


def _verdict(converted: UpConverted, config: LogConfig) -> ErrorCode:
    """The Produce v0-v2 path's answer code for a converted set: the batch's checks, then whether
    Kafka's builder would have thrown first."""
    try:
        validate_records(bytearray(converted.batch), config, NOW, produce_version=2)
        rejected = None
    except RecordsRejected as exc:
        rejected = exc
    refusal = converted.builder_refusal(rejected)
    if refusal is not None:
        return refusal.code
    return ErrorCode.NONE if rejected is None else rejected.code


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_a_negative_timestamp_is_refused_after_the_record_checks_kafka_makes_before_its_builder(
        codec: Compression) -> None:
    """Kafka's LogValidator checks every record of a compressed wrapper before it builds the
    batch, so a record error anywhere in it is the verdict; of uncompressed messages it checks
    each and appends it before the next, so a record error only of an earlier message (or of the
    same one) comes before the builder's exception."""
    compacted = LogConfig(cleanup_policy="compact")
    keyless_later = up_convert(old_producer_set(1, codec, [(b"k", b"a", -5), (None, b"b", NOW)]),
                               max_message_bytes=MAX)
    keyless_first = up_convert(old_producer_set(1, codec, [(None, b"a", NOW), (b"k", b"b", -5)]),
                               max_message_bytes=MAX)
    assert keyless_later is not None and keyless_first is not None
    assert _verdict(keyless_later, LogConfig()) == ErrorCode.UNKNOWN_SERVER_ERROR
    assert _verdict(keyless_first, compacted) == ErrorCode.INVALID_RECORD
    assert _verdict(keyless_later, compacted) == (
        ErrorCode.INVALID_RECORD if codec != Compression.NONE else ErrorCode.UNKNOWN_SERVER_ERROR)
    # out of a bounded timestamp range: the record's own INVALID_TIMESTAMP comes first
    bounded = LogConfig(message_timestamp_before_max_ms=3_600_000)
    assert _verdict(keyless_later, bounded) == ErrorCode.INVALID_TIMESTAMP
    # -1 is NO_TIMESTAMP, which the builder takes
    none = up_convert(old_producer_set(1, codec, [(b"k", b"a", -1)]), max_message_bytes=MAX)
    assert none is not None and none.negative_timestamp_at is None
    assert _verdict(none, LogConfig()) == ErrorCode.NONE


_EVERY = st.integers(1, 4)
_CHUNK = st.sampled_from([16, 64, 1 << 20])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), magic=st.sampled_from((0, 1)), codec=st.sampled_from(LEGACY_CODECS),
       records=st.lists(st.tuples(blobs, st.one_of(st.none(), st.binary(max_size=200)),
                                  st.integers(-(2**63), 2**63 - 1)), min_size=1, max_size=12),
       every=_EVERY, chunk=_CHUNK)
def test_up_conversion_in_slices_equals_it_in_one_go(
        data: st.DataObject, magic: int, codec: Compression, records: Sent, every: int, chunk: int) -> None:
    """up_conversion_steps with any slice (``every`` messages, ``chunk`` bytes of inflation, CRC
    and long values) gives what up_convert gives in one go: the same batch and refusal, or the
    same RecordsRejected, damaged sets included; and it yields between slices."""
    sent = bytearray(old_producer_set(magic, codec, records))
    damage = data.draw(st.integers(0, 3))
    for _ in range(damage):
        sent[data.draw(st.integers(0, len(sent) - 1))] = data.draw(st.integers(0, 255))

    def outcome(steps: Iterator[None]) -> tuple[Any, int]:
        try:
            result, yields = all_at_once(cast(Generator[None, None, UpConverted | None], steps))
        except RecordsRejected as rejected:
            return (rejected.code, rejected.message, rejected.record_errors), 0
        if result is None:
            return None, yields
        return (bytes(result.batch), result.compressed, result.negative_timestamp_at,
                result.negative_timestamp), yields

    whole, _ = outcome(up_conversion_steps(bytes(sent), max_message_bytes=MAX))
    sliced, yields = outcome(up_conversion_steps(bytes(sent), max_message_bytes=MAX, every=every,
                                                 chunk=chunk))
    assert sliced == whole
    if not damage and len(records) > every and whole is not None and len(whole) == 4:
        assert yields > 0


def test_a_long_value_in_a_wrapper_is_fed_to_the_compressor_in_pieces() -> None:
    """A 3 MB value inside a gzip wrapper, in 1 MiB pieces: the same batch as in one go, made
    with yields in the inflation, the inner message's CRC and the compression of its value."""
    value = bytes(range(256)) * 12_000
    sent = old_producer_set(1, Compression.GZIP, [(b"k", value, NOW)])
    whole = up_convert(sent, max_message_bytes=MAX)
    sliced, yields = all_at_once(up_conversion_steps(sent, max_message_bytes=MAX, every=1, chunk=1 << 20))
    assert whole is not None and sliced is not None and bytes(sliced.batch) == bytes(whole.batch)
    assert yields >= 6
    assert [r.value for r in RecordBatch(bytes(whole.batch)).record_list()] == [value]
