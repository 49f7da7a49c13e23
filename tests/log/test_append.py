"""validate_records / assign_offsets against batches real client code builds, every rejection
Kafka makes, and hypothesis: valid batches always pass and come out stamped, corrupt ones never
raise anything but RecordsRejected and are never accepted with records that do not decode."""

from __future__ import annotations

import struct
from unittest import mock

import google_crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from kafkapy.errors import ErrorCode
from kafkapy.log.append import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_RECORD_ERRORS,
    WALK_SLICE_RECORDS,
    InflationIsLong,
    RecordsRejected,
    assign_offsets,
    recompressed,
    recompression_steps,
    validate_records,
    validation_steps,
    walk_is_long,
)
from kafkapy.log.topic_config import LogConfig
from kafkapy.protocol.compression import INFLATE_SLICE_BYTES, Compression
from kafkapy.protocol.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    RecordBatch,
    build_record_batch,
    rebuilt_batch_steps,
)
from kafkapy.protocol.steps import all_at_once

NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CODECS = [0, 1, 2, 3, 4]  # none, gzip, snappy, lz4, zstd: kafka-python has all four here


def fix_crc(data: bytearray) -> bytearray:
    struct.pack_into(">I", data, 17, int(google_crc32c.value(bytes(data[21:]))))
    return data


def patch(data: bytes, fmt: str, at: int, value: int, *, crc: bool = True) -> bytearray:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return fix_crc(out) if crc else out


def kp_batch(
    codec: int = 0,
    n: int = 5,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    timestamp: int = NOW,
    key: bytes | None = b"k",
) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=transactional, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=1 << 22,
    )
    for i in range(n):
        value = b"value-%d-" % i * 20
        builder.append(i, timestamp=timestamp + i, key=key, value=value, headers=[("h", b"v")])
    return bytearray(builder.build())


def rejected(data: bytes | bytearray, config: LogConfig | None = None, **kw: int) -> RecordsRejected:
    with pytest.raises(RecordsRejected) as info:
        validate_records(bytearray(data), config or LogConfig(), NOW, **kw)
    return info.value


# --- accepted batches from real client code ---------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("idempotent", [False, True])
def test_kafka_python_batches_are_accepted_and_stamped_without_touching_the_crc(
    codec: int, idempotent: bool
) -> None:
    ids = {"producer_id": 4000, "producer_epoch": 2, "base_sequence": 17} if idempotent else {}
    data = kp_batch(codec, 7, **ids)
    original_crc = RecordBatch(bytes(data)).crc
    plan = validate_records(data, LogConfig(), NOW)
    assert (plan.record_count, plan.max_timestamp, int(plan.compression)) == (7, NOW + 6, codec)
    info = assign_offsets(data, plan, base_offset=1000, leader_epoch=9)
    assert (info.first_offset, info.last_offset) == (1000, 1006)
    assert (info.max_timestamp, info.log_append_time_ms) == (NOW + 6, -1)
    batch = RecordBatch(bytes(data))
    assert (batch.base_offset, batch.partition_leader_epoch, batch.crc) == (1000, 9, original_crc)
    assert batch.crc_valid
    # kafka-python reads back what it wrote, at the assigned offsets.
    kp = MemoryRecords(bytes(data)).next_batch()
    assert [(r.offset, r.key, r.value) for r in kp] == [
        (1000 + i, b"k", b"value-%d-" % i * 20) for i in range(7)
    ]


def test_memory_records_builder_batch_is_accepted() -> None:
    builder = MemoryRecordsBuilder(magic=2, compression_type=3, batch_size=1 << 20)
    for _ in range(3):
        builder.append(timestamp=NOW, key=None, value=b"x" * 50, headers=[])
    builder.close()
    data = bytearray(builder.buffer())
    plan = validate_records(data, LogConfig(), NOW)
    assign_offsets(data, plan, base_offset=5, leader_epoch=0)
    assert [r.offset for r in RecordBatch(bytes(data))] == [5, 6, 7]


@pytest.mark.parametrize("codec", [0, 4])
def test_log_append_time_rewrites_max_timestamp_and_type_and_recomputes_the_crc(codec: int) -> None:
    data = kp_batch(codec, 3, timestamp=NOW - 10_000)
    config = LogConfig.from_topic_config({"message.timestamp.type": "LogAppendTime"})
    plan = validate_records(data, config, NOW)
    assert plan.log_append_time
    with pytest.raises(ValueError, match="log_append_time_ms"):
        assign_offsets(bytearray(data), plan, base_offset=0, leader_epoch=0)
    info = assign_offsets(data, plan, base_offset=42, leader_epoch=1, log_append_time_ms=NOW + 5)
    assert (info.max_timestamp, info.log_append_time_ms) == (NOW + 5, NOW + 5)
    assert info.offset_of_max_timestamp == 44
    batch = RecordBatch(bytes(data))
    assert batch.crc_valid and batch.timestamp_type == LOG_APPEND_TIME and batch.max_timestamp == NOW + 5
    kp = MemoryRecords(bytes(data)).next_batch()
    assert [(r.timestamp, r.timestamp_type) for r in kp] == [(NOW + 5, 1)] * 3


def test_create_time_corrects_a_wrong_header_max_timestamp_and_a_producer_append_time_bit() -> None:
    wrong_max = patch(build_record_batch([(b"k", b"v", [], NOW - 5), (b"k", b"v", [], NOW - 1)]), ">q", 35, 7)
    plan = validate_records(wrong_max, LogConfig(), NOW)
    assign_offsets(wrong_max, plan, base_offset=0, leader_epoch=0)
    batch = RecordBatch(bytes(wrong_max))
    assert batch.crc_valid and batch.max_timestamp == NOW - 1
    # The producer set LogAppendTime on a CreateTime topic: records then read the header's max
    # timestamp, which is in range, so Kafka accepts and stores the batch as CreateTime.
    bit = build_record_batch([(b"k", b"v", [], NOW)], timestamp_type=LOG_APPEND_TIME)
    data = bytearray(bit)
    plan = validate_records(data, LogConfig(), NOW)
    assign_offsets(data, plan, base_offset=0, leader_epoch=0)
    batch = RecordBatch(bytes(data))
    assert batch.crc_valid and batch.timestamp_type == CREATE_TIME


def test_a_partial_batch_after_the_whole_one_is_dropped_as_kafka_trims_it() -> None:
    whole = kp_batch(0, 2)
    data = whole + kp_batch(0, 2)[:30]
    plan = validate_records(data, LogConfig(), NOW)
    assert plan.size == len(whole)
    assign_offsets(data, plan, base_offset=3, leader_epoch=0)
    assert len(data) == len(whole) and RecordBatch(bytes(data)).crc_valid


# --- rejections, each with Kafka's code --------------------------------------------


def test_no_batch_at_all_is_invalid_record() -> None:
    assert rejected(b"").code is ErrorCode.INVALID_RECORD
    assert rejected(kp_batch()[:40]).code is ErrorCode.INVALID_RECORD  # only a partial batch


def test_broken_framing_is_corrupt_message() -> None:
    assert rejected(patch(kp_batch(), ">i", 8, 13, crc=False)).code is ErrorCode.CORRUPT_MESSAGE
    assert rejected(patch(kp_batch(), ">b", 16, 3, crc=False)).code is ErrorCode.CORRUPT_MESSAGE
    assert rejected(patch(kp_batch(), ">i", 8, 40, crc=False)).code is ErrorCode.CORRUPT_MESSAGE


def test_legacy_magic_is_invalid_record() -> None:
    for magic in (0, 1):
        builder = MemoryRecordsBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
        builder.append(timestamp=NOW if magic else None, key=b"k", value=b"v", headers=[])
        builder.close()
        error = rejected(builder.buffer())
        assert error.code is ErrorCode.INVALID_RECORD and "magic version 2" in error.message


def test_more_than_one_batch_is_invalid_record() -> None:
    assert rejected(kp_batch() + kp_batch()).code is ErrorCode.INVALID_RECORD


def test_zstd_needs_produce_v7() -> None:
    data = kp_batch(4)
    assert rejected(data, produce_version=6).code is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    validate_records(data, LogConfig(), NOW, produce_version=7)


def test_base_offset_must_be_zero() -> None:
    error = rejected(patch(kp_batch(), ">q", 0, 5, crc=False))
    assert error.code is ErrorCode.INVALID_RECORD and "should be 0" in error.message


def test_max_message_bytes_is_message_too_large() -> None:
    data = kp_batch(0, 3)
    assert rejected(data, LogConfig(max_message_bytes=len(data) - 1)).code is ErrorCode.MESSAGE_TOO_LARGE
    validate_records(data, LogConfig(max_message_bytes=len(data)), NOW)
    assert LogConfig().max_message_bytes == DEFAULT_MAX_MESSAGE_BYTES == 1048588


def test_crc_mismatch_is_corrupt_message() -> None:
    data = kp_batch(1)
    data[-1] ^= 0xFF
    assert rejected(data).code is ErrorCode.CORRUPT_MESSAGE


def test_unknown_codec_is_unsupported_compression_type() -> None:
    assert rejected(patch(kp_batch(), ">h", 21, 5)).code is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


@pytest.mark.parametrize(("fmt", "at", "value"), [
    (">i", 23, 3),  # last_offset_delta disagrees with count 5
    (">i", 23, -1),  # offset range empty
    (">i", 57, 0),  # count 0
    (">i", 57, -2),  # negative count
])
def test_inconsistent_count_and_offsets_are_invalid_record(fmt: str, at: int, value: int) -> None:
    assert rejected(patch(kp_batch(), fmt, at, value)).code is ErrorCode.INVALID_RECORD


def test_control_batch_from_a_client_is_invalid_record() -> None:
    data = build_record_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")], is_control=True,
                              producer_id=1, producer_epoch=0, base_sequence=0)
    assert "control" in rejected(data).message


def test_producer_id_without_sequence_is_invalid_record() -> None:
    error = rejected(kp_batch(producer_id=7, producer_epoch=0, base_sequence=-1))
    assert error.code is ErrorCode.INVALID_RECORD and "sequence" in error.message


def test_records_that_miss_the_batch_end_are_invalid_record_without_record_errors() -> None:
    short = patch(patch(kp_batch(0, 5), ">i", 57, 6), ">i", 23, 5)  # count 6, five records
    long = patch(patch(kp_batch(0, 5), ">i", 57, 4), ">i", 23, 3)  # count 4, five records
    for data in (short, long):
        error = rejected(data)
        assert error.code is ErrorCode.INVALID_RECORD and error.record_errors == []


def test_garbage_compressed_payload_is_invalid_record() -> None:
    data = bytearray(kp_batch(1, 5))
    data[61 + 12] ^= 0xFF  # inside the gzip stream, CRC then recomputed
    assert rejected(fix_crc(data)).code is ErrorCode.INVALID_RECORD


def test_offset_deltas_out_of_order_are_record_errors() -> None:
    gap = build_record_batch([{"key": b"a", "value": b"1", "offset": 0},
                              {"key": b"b", "value": b"2", "offset": 2}])
    error = rejected(patch(gap, ">i", 23, 1))
    assert error.code is ErrorCode.INVALID_RECORD and [i for i, _ in error.record_errors] == [1]


def test_compacted_topic_needs_keys_with_the_record_indexes() -> None:
    data = build_record_batch([(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, None)], base_timestamp=NOW)
    config = LogConfig.from_topic_config({"cleanup.policy": "compact,delete"})
    error = rejected(data, config)
    assert error.code is ErrorCode.INVALID_RECORD
    assert error.record_errors == [(1, "Compacted topic cannot accept message without key"),
                                   (3, "Compacted topic cannot accept message without key")]
    validate_records(bytearray(data), LogConfig(), NOW)


def test_a_batch_keeps_at_most_max_record_errors_and_its_message_counts_them_all() -> None:
    """A batch of very many faulty records (a few KB compressed) must not cost the broker
    gigabytes of error strings: the answer names the first MAX_RECORD_ERRORS."""
    faulty = MAX_RECORD_ERRORS + 2 * WALK_SLICE_RECORDS + 7
    data = build_record_batch([(None, b"")] * faulty, base_timestamp=NOW, compression="zstd")
    error = rejected(data, LogConfig.from_topic_config({"cleanup.policy": "compact"}))
    assert error.code is ErrorCode.INVALID_RECORD
    assert [index for index, _ in error.record_errors] == list(range(MAX_RECORD_ERRORS))
    assert error.record_error_count == faulty
    assert error.message.startswith(f"One or more records have been rejected due to {faulty} record errors")


def test_timestamps_out_of_bounds_are_invalid_timestamp_with_record_errors() -> None:
    records = [(b"k", b"v", [], NOW - 2000), (b"k", b"v", [], NOW), (b"k", b"v", [], NOW + 2000)]
    data = build_record_batch(records)
    config = LogConfig.from_topic_config({
        "message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "1000"})
    error = rejected(data, config)
    assert error.code is ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in error.record_errors] == [0, 2]
    assert f"[{NOW - 1000}, {NOW + 1000}]" in error.record_errors[0][1]
    # The deprecated difference bound stands in for both when they are left at their default.
    legacy = LogConfig.from_topic_config({"message.timestamp.difference.max.ms": "1000"})
    assert [i for i, _ in rejected(data, legacy).record_errors] == [0, 2]
    # Under LogAppendTime the producer's timestamps are not checked.
    lat = LogConfig.from_topic_config({"message.timestamp.type": "LogAppendTime",
                                           "message.timestamp.difference.max.ms": "1000"})
    validate_records(bytearray(data), lat, NOW)


def test_key_error_wins_over_timestamp_error_and_any_timestamp_error_makes_it_invalid_timestamp() -> None:
    data = build_record_batch([(None, b"v", [], NOW - 5000), (b"k", b"v", [], NOW - 5000)])
    config = LogConfig(cleanup_policy="compact", message_timestamp_before_max_ms=1000)
    error = rejected(data, config)
    assert error.code is ErrorCode.INVALID_TIMESTAMP
    assert error.record_errors[0] == (0, "Compacted topic cannot accept message without key")
    assert error.record_errors[1][0] == 1


def test_log_append_time_set_by_the_producer_on_a_log_append_time_topic_is_invalid_timestamp() -> None:
    data = build_record_batch([(b"k", b"v"), (b"k", b"v")], timestamp_type=LOG_APPEND_TIME,
                              base_timestamp=NOW)
    error = rejected(data, LogConfig(message_timestamp_type=LOG_APPEND_TIME))
    assert error.code is ErrorCode.INVALID_TIMESTAMP and [i for i, _ in error.record_errors] == [0, 1]


def test_segment_bytes_is_record_list_too_large() -> None:
    data = kp_batch(0, 3)
    assert rejected(data, LogConfig(segment_bytes=len(data) - 1)).code is ErrorCode.RECORD_LIST_TOO_LARGE


def test_topic_configs_are_read_under_kafkas_names() -> None:
    config = LogConfig.from_topic_config({
        "max.message.bytes": "2000", "segment.bytes": "4096", "message.timestamp.type": "CreateTime",
        "message.timestamp.before.max.ms": "5", "message.timestamp.difference.max.ms": "9",
        "cleanup.policy": "delete"})
    assert config == LogConfig(max_message_bytes=2000, segment_bytes=4096, message_timestamp_before_max_ms=5,
                               message_timestamp_difference_max_ms=9)
    assert (config.timestamp_before_max_ms, config.timestamp_after_max_ms, config.compacts) == (5, 9, False)
    assert LogConfig.from_topic_config({}) == LogConfig()


# --- hypothesis --------------------------------------------------------------------

blobs = st.one_of(st.none(), st.binary(max_size=40))
record_lists = st.lists(
    st.tuples(blobs, blobs, st.lists(st.tuples(st.text(max_size=5), blobs), max_size=2),
              st.integers(NOW - 10**6, NOW + 10**6)),
    min_size=1, max_size=12,
)


@FUZZ
@given(records=record_lists, codec=st.sampled_from(CODECS), base=st.integers(0, 2**40),
       epoch=st.integers(-1, 2**31 - 1))
def test_any_valid_batch_is_accepted_and_reads_back_at_its_offsets(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    codec: int, base: int, epoch: int,
) -> None:
    data = bytearray(build_record_batch(records, compression=codec))
    plan = validate_records(data, LogConfig(), NOW)
    assert plan.max_timestamp == max(r[3] for r in records)
    assign_offsets(data, plan, base_offset=base, leader_epoch=epoch)
    batch = RecordBatch(bytes(data))
    batch.validate()
    assert batch.partition_leader_epoch == epoch
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in batch] == [
        (base + i, k, v, h, ts) for i, (k, v, h, ts) in enumerate(records)
    ]


@FUZZ
@given(records=record_lists, codec=st.sampled_from(CODECS), data=st.data())
def test_damaged_batches_are_rejected_with_a_code_or_still_decode(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    codec: int, data: st.DataObject,
) -> None:
    raw = bytearray(build_record_batch(records, compression=codec))
    kind = data.draw(st.sampled_from(["flip", "flip+crc", "truncate", "append"]))
    if kind == "truncate":
        del raw[data.draw(st.integers(0, len(raw) - 1)):]
    elif kind == "append":
        raw += data.draw(st.binary(min_size=1, max_size=80))
    else:
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] ^= data.draw(st.integers(1, 255))
        if kind == "flip+crc" and len(raw) >= 61:
            fix_crc(raw)
    try:
        plan = validate_records(raw, LogConfig(), NOW)
    except RecordsRejected as exc:
        assert isinstance(exc.code, ErrorCode) and exc.code is not ErrorCode.NONE
        return
    # Accepted: then it is one whole batch whose records decode, and stamping keeps it so.
    assign_offsets(raw, plan, base_offset=10, leader_epoch=0)
    batch = RecordBatch(bytes(raw))
    assert batch.size_in_bytes == len(raw) == plan.size
    assert len(batch.record_list(check_crc=True)) == plan.record_count


# --- the fast path's contract ---------------------------------------------------------

configs = st.builds(
    LogConfig,
    message_timestamp_type=st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]),
    message_timestamp_before_max_ms=st.one_of(st.just(2**63 - 1), st.integers(0, 10**6)),
    message_timestamp_after_max_ms=st.one_of(st.just(2**63 - 1), st.integers(0, 10**6)),
    cleanup_policy=st.sampled_from(["delete", "compact"]),
)


def _checked(fn: object, batch: RecordBatch, config: LogConfig) -> object:
    try:
        return fn(batch, config, NOW)  # type: ignore[operator]
    except RecordsRejected as exc:
        return (exc.code, exc.message, exc.record_errors)


@FUZZ
@given(records=st.lists(st.tuples(blobs, blobs, st.just([]),
                                  st.one_of(st.integers(NOW - 2 * 10**6, NOW + 2 * 10**6),
                                            st.sampled_from([-1, -5, 0]))), min_size=1, max_size=8),
       config=configs, kind=st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]),
       header_max=st.sampled_from([None, -1, NOW, NOW - 5 * 10**6]),
       gap=st.booleans(), codec=st.sampled_from([0, 1]))
def test_fast_record_checks_equal_the_plain_ones(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    config: LogConfig, kind: int, header_max: int | None, gap: bool, codec: int,
) -> None:
    from kafkapy.log.append import _check_records, _check_records_plain

    items = [{"key": k, "value": v, "timestamp": ts, **({"offset": i * 2} if gap else {})}
             for i, (k, v, _, ts) in enumerate(records)]
    raw = build_record_batch(items, compression=codec, timestamp_type=kind, max_timestamp=header_max)
    batch = RecordBatch(raw)
    assert _checked(_check_records, batch, config) == _checked(_check_records_plain, batch, config)


def test_max_timestamp_never_reports_below_no_timestamp_as_kafka_starts_from_it() -> None:
    data = bytearray(build_record_batch([(b"k", b"v", [], -5), (b"k", b"v", [], -7)]))
    assert validate_records(data, LogConfig(), NOW).max_timestamp == -1


_HEADER = build_record_batch([(b"k", b"v")])[:61]  # a real header, then random records


@FUZZ
@given(raw=st.one_of(st.binary(max_size=200), st.binary(max_size=120).map(lambda tail: _HEADER + tail)))
def test_arbitrary_bytes_give_a_plan_or_records_rejected(raw: bytes) -> None:
    try:
        plan = validate_records(bytearray(raw), LogConfig(), NOW)
    except RecordsRejected as exc:
        assert exc.code is not ErrorCode.NONE
    else:
        assert RecordBatch(raw[: plan.size]).crc_valid


def test_the_append_benchmark_runs() -> None:
    """``python -m benchmarks append --quick`` builds its LogConfigs and checks its batches."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-m", "benchmarks", "append", "--quick"], cwd=root,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "~1 MB, none, LogAppendTime" in result.stdout and "compacted (key check)" in result.stdout


def damage(raw: bytearray, kind: str, data: st.DataObject) -> None:
    """Damage ``raw`` in place: a byte flipped (and the CRC made to match it), cut, or extended."""
    if kind == "truncate":
        del raw[data.draw(st.integers(0, len(raw) - 1)):]
    elif kind == "append":
        raw += data.draw(st.binary(min_size=1, max_size=80))
    elif kind in ("flip", "flip+crc"):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] ^= data.draw(st.integers(1, 255))
        if kind == "flip+crc" and len(raw) >= 61:
            fix_crc(raw)


def _validated(raw: bytearray, config: LogConfig, version: int | None, fast: bool) -> object:
    from kafkapy.log import append

    with mock.patch.object(append, "_one_clean_batch", append._one_clean_batch if fast else
                           (lambda *args: None)):
        try:
            return validate_records(bytearray(raw), config, NOW, produce_version=version)
        except RecordsRejected as exc:
            return (exc.code, exc.message, exc.record_errors)


@FUZZ
@given(records=record_lists, codec=st.sampled_from(CODECS), config=configs,
       version=st.sampled_from([None, 3, 6, 7, 13]), data=st.data())
def test_the_one_clean_batch_fast_path_equals_the_plain_checks(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    codec: int, config: LogConfig, version: int | None, data: st.DataObject,
) -> None:
    """validate_records' fast path (one whole batch that passes) against the plain checks alone, on
    valid batches and on batches damaged, re-checksummed, cut, extended and re-headed: the same plan
    or the same rejection, code, message and record errors."""
    raw = bytearray(build_record_batch(records, compression=codec))
    kind = data.draw(st.sampled_from(["none", "flip", "flip+crc", "truncate", "append", "field"]))
    damage(raw, kind, data)
    if kind == "field":  # a header field set to an edge value, the CRC kept valid
        fmt, at = data.draw(st.sampled_from([(">q", 0), (">i", 23), (">i", 57), (">q", 43), (">i", 53),
                                             (">h", 21)]))
        struct.pack_into(fmt, raw, at, data.draw(st.sampled_from([-1, 0, 1, 5, 0x20, 0x04])))
        fix_crc(raw)
    assert _validated(raw, config, version, fast=True) == _validated(raw, config, version, fast=False)


@pytest.mark.parametrize("codec", CODECS)
def test_a_producers_batch_takes_the_fast_path(codec: int) -> None:
    from kafkapy.log.append import _one_clean_batch

    raw = bytearray(build_record_batch([(b"k", b"v" * 100, [], NOW)] * 20, compression=codec))
    plan = _one_clean_batch(raw, LogConfig(), NOW, 10)
    assert plan is not None and plan == _validated(raw, LogConfig(), 10, fast=False)
    assert _one_clean_batch(raw + b"\x00" * 5, LogConfig(), NOW, 10) is None  # a tail: the plain path


# --- the record walk in slices -------------------------------------------------------------------


def _sliced(raw: bytearray, config: LogConfig, version: int | None, every: int) -> tuple[object, int]:
    """validation_steps' verdict, ``every`` records at a time, and how often it paused."""
    steps = validation_steps(bytearray(raw), config, NOW, produce_version=version, every=every)
    pauses = 0
    try:
        while True:
            next(steps)
            pauses += 1
    except StopIteration as done:
        return done.value, pauses
    except RecordsRejected as exc:
        return (exc.code, exc.message, exc.record_errors), pauses


@FUZZ
@given(records=record_lists, codec=st.sampled_from(CODECS), config=configs,
       version=st.sampled_from([None, 3, 6, 7, 13]), gap=st.booleans(), every=st.integers(1, 5),
       data=st.data())
def test_the_walk_in_slices_equals_validate_records(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    codec: int, config: LogConfig, version: int | None, gap: bool, every: int, data: st.DataObject,
) -> None:
    """validation_steps, which the broker runs a slice of records at a time between its other
    connections' requests, against validate_records in one go: on valid batches, batches whose
    records are faulty (offset gaps, null keys on compacted topics, timestamps out of bounds) and
    batches damaged as above, the same plan or the same rejection, code, message and record errors."""
    items = [{"key": k, "value": v, "headers": h, "timestamp": ts, **({"offset": i * 2} if gap else {})}
             for i, (k, v, h, ts) in enumerate(records)]
    # offset gaps under a consistent header (last offset delta count - 1): the records are named
    raw = patch(build_record_batch(items, compression=codec), ">i", 23, len(items) - 1)
    damage(raw, data.draw(st.sampled_from(["none", "flip", "flip+crc", "truncate", "append"])), data)
    verdict, _ = _sliced(raw, config, version, every)
    assert verdict == _validated(raw, config, version, fast=True)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_a_payload_inflating_beyond_one_go_is_handed_to_the_slices(codec: str) -> None:
    """Asked to inflate at most INFLATE_SLICE_BYTES in one go (the Produce handler's sync path),
    validate_records raises InflationIsLong for six records of 1 MiB of zeros, and
    validation_steps inflates them in steps, pausing, to validate_records' own verdict; a batch
    refused before its records are read is refused as before, and a short one is checked in one go."""
    big = bytearray(build_record_batch([(b"k", bytes(1 << 20), [], NOW)] * 6, compression=codec))
    with pytest.raises(InflationIsLong):
        validate_records(bytearray(big), LogConfig(), NOW, inflate_in_one_go_at_most=INFLATE_SLICE_BYTES)
    plan, pauses = _sliced(big, LogConfig(), None, WALK_SLICE_RECORDS)
    assert plan == validate_records(bytearray(big), LogConfig(), NOW) and pauses >= 1
    corrupt = bytearray(big)
    corrupt[-1] ^= 1  # the CRC no longer holds
    with pytest.raises(RecordsRejected) as refused:
        validate_records(corrupt, LogConfig(), NOW, inflate_in_one_go_at_most=INFLATE_SLICE_BYTES)
    assert refused.value.code == ErrorCode.CORRUPT_MESSAGE
    short = bytearray(build_record_batch([(b"k", bytes(1000), [], NOW)] * 6, compression=codec))
    in_one_go = validate_records(bytearray(short), LogConfig(), NOW,
                                 inflate_in_one_go_at_most=INFLATE_SLICE_BYTES)
    assert in_one_go == validate_records(short, LogConfig(), NOW)


def test_the_walk_pauses_between_slices_of_scan_and_of_naming() -> None:
    """Ten records three at a time: three pauses in the scan; a batch with faulty records pauses
    three more times while they are named."""
    good = bytearray(build_record_batch([(b"k", b"v", [], NOW)] * 10))
    plan, pauses = _sliced(good, LogConfig(), None, 3)
    assert plan == validate_records(good, LogConfig(), NOW) and pauses == 3
    gaps = patch(build_record_batch([{"key": b"k", "value": b"v", "offset": 2 * i} for i in range(10)]),
                 ">i", 23, 9)
    rejection, pauses = _sliced(gaps, LogConfig(), None, 3)
    refused = rejected(gaps)
    assert rejection == (ErrorCode.INVALID_RECORD, refused.message, refused.record_errors)
    assert len(refused.record_errors) == 9 and pauses == 6


def test_a_batch_of_more_records_than_a_slice_leaves_the_fast_paths() -> None:
    """The fast path (and the Produce from the frame, which checks with the same function) leaves a
    batch of more than WALK_SLICE_RECORDS records to the plain checks, which the Produce handler
    runs in slices; such a batch is a long walk, one a record fewer is not."""
    from kafkapy.log.append import WALK_SLICE_RECORDS, _one_clean_batch

    long = bytearray(build_record_batch([(None, b"", [], NOW)] * (WALK_SLICE_RECORDS + 1)))
    short = bytearray(build_record_batch([(None, b"", [], NOW)] * WALK_SLICE_RECORDS))
    assert walk_is_long(long) and not walk_is_long(short)
    broken = bytearray(long)
    broken[-1] ^= 1
    assert not walk_is_long(broken)  # refused CORRUPT_MESSAGE before any record is read
    lying = patch(patch(build_record_batch([(None, b"", [], NOW)] * 3), ">i", 57, 20_000), ">i", 23, 19_999)
    assert not walk_is_long(lying)  # three records' bytes: the walk stops after them
    compressed = patch(patch(build_record_batch([(None, b"", [], NOW)] * 3, compression="zstd"), ">i", 57,
                             20_000), ">i", 23, 19_999)
    assert walk_is_long(compressed)  # what it inflates to can hold them
    assert _one_clean_batch(long, LogConfig(), NOW, 9) is None
    assert _one_clean_batch(short, LogConfig(), NOW, 9) == validate_records(short, LogConfig(), NOW)
    assert validate_records(long, LogConfig(), NOW).record_count == WALK_SLICE_RECORDS + 1


def _rebuilt_from_its_records(data: bytearray, size: int, codec: Compression, level: int | None) -> bytes:
    """What recompression gave before it was sliced: the batch's decoded records built again,
    with its header fields, in ``codec``."""
    batch = RecordBatch(memoryview(data)[:size])
    return build_record_batch(
        batch.record_list(), base_offset=batch.base_offset, compression=codec, compression_level=level,
        producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence, is_transactional=batch.is_transactional,
        timestamp_type=batch.timestamp_type, partition_leader_epoch=batch.partition_leader_epoch,
        base_timestamp=batch.base_timestamp, max_timestamp=batch.max_timestamp,
        last_offset_delta=batch.last_offset_delta)


@FUZZ
@given(records=record_lists, source=st.sampled_from(CODECS), target=st.sampled_from(list(Compression)),
       level=st.sampled_from([None, 1, 3]), transactional=st.booleans(),
       kind=st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]), every=st.integers(1, 5),
       chunk=st.integers(1, 100))
def test_recompression_in_slices_gives_the_batch_rebuilt_from_its_records(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    source: int, target: Compression, level: int | None, transactional: bool, kind: int, every: int,
    chunk: int,
) -> None:
    """recompressed (in one go) and rebuilt_batch_steps in slices (a few records, a few bytes at a
    time), against the batch built again from its decoded records: the same bytes, for every
    codec in and out, at each level, transactional or not, under either timestamp type."""
    producer = (7, 0, 0) if transactional else (-1, -1, -1)
    data = bytearray(build_record_batch(records, compression=source, timestamp_type=kind,
                                        is_transactional=transactional, producer_id=producer[0],
                                        producer_epoch=producer[1], base_sequence=producer[2]))
    expected = _rebuilt_from_its_records(data, len(data), target, level)
    plan = validate_records(bytearray(data), LogConfig(), NOW) if kind == CREATE_TIME else None
    if plan is not None:
        assert recompressed(bytearray(data), plan, target, level) == expected
    sliced, _ = all_at_once(rebuilt_batch_steps(RecordBatch(memoryview(data)), target, level, every=every,
                                              chunk=chunk))
    assert sliced == expected


@pytest.mark.parametrize("target", [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
def test_a_long_value_is_recompressed_a_slice_at_a_time(target: Compression) -> None:
    """One record of 24 MiB of zeros in zstd, rebuilt with the topic's codec in slices: a pause
    at least every INFLATE_SLICE_BYTES inflated or compressed, and the bytes of recompressed."""
    data = bytearray(build_record_batch([(b"k", bytes(24 << 20), [], NOW)], compression="zstd"))
    plan = validate_records(bytearray(data), LogConfig(), NOW)
    sliced, pauses = all_at_once(recompression_steps(bytearray(data), plan, target))
    assert pauses >= 2 * (24 // (INFLATE_SLICE_BYTES >> 20) - 1)  # inflating, then compressing
    assert sliced == recompressed(bytearray(data), plan, target)
