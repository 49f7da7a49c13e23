"""Validation of a Produce request's records for one partition, and offset assignment in place.

Theory of operation
-------------------
A Produce request (v3+) carries, per partition, exactly one magic-2 record batch
whose offsets the producer left at 0.  A broker must (1) decide whether to accept
it, answering a rejected batch with the error Kafka gives, and (2) stamp it with
its place in the log.  The two steps are separate calls because the offset is only
known once the handler holds the log (``base = log.log_end_offset``)::

    plan = validate_records(data, config, now_ms)            # raises RecordsRejected
    info = assign_offsets(data, plan, base_offset=base, leader_epoch=epoch,
                          log_append_time_ms=now_ms if plan.log_append_time else None)

The checks follow Kafka's own, in Kafka's order (``ProduceRequest.validateRecords``,
then ``UnifiedLog.analyzeAndValidateRecords``, then ``LogValidator``; read at
apache/kafka 1eb7644, Oct 2024), each answered with Kafka's error code:

======================================================  ==============================
check                                                   error
======================================================  ==============================
framing: entry length < 14, magic outside 0..2           CORRUPT_MESSAGE
no whole batch at all                                    INVALID_RECORD
magic 0 or 1 (Produce v3+ carries magic 2 only)          INVALID_RECORD
zstd in Produce < v7                                     UNSUPPORTED_COMPRESSION_TYPE
more than one batch                                      INVALID_RECORD
base offset not 0                                        INVALID_RECORD
batch larger than ``max.message.bytes``                  MESSAGE_TOO_LARGE
batch_length below the v2 header, CRC-32C mismatch       CORRUPT_MESSAGE
codec id 5..7                                            UNSUPPORTED_COMPRESSION_TYPE
last_offset_delta + 1 <= 0, count <= 0, or unequal       INVALID_RECORD
control batch from a client                              INVALID_RECORD
producer id set but base sequence < 0                    INVALID_RECORD
records that do not decode, or miss the batch's end      INVALID_RECORD
  (a payload inflating past produce_inflate_limit too)
per record: no key on a compacted topic                  INVALID_RECORD + record errors
per record: offset delta is not its index                INVALID_RECORD + record errors
per record: timestamp outside before/after.max.ms,       INVALID_TIMESTAMP + record errors
  or LogAppendTime set by the producer
whole records larger than ``segment.bytes``              RECORD_LIST_TOO_LARGE
======================================================  ==============================

Records are walked (Kafka iterates them too: that is where structure, keys and
timestamps are checked and where the batch's true max timestamp comes from) by
:meth:`RecordBatch.scan`, the fast path of the project's one record reader, which
checks every record's structure and summarises it without building records; only a
batch the summary shows to be faulty is decoded with :meth:`RecordBatch.record_list`
to name the faulty records (:meth:`RecordBatch.record_facts`, which reads what naming them
needs without building them, is the fast path).  The CRC is checked once, here.

A batch of very many records (a compressed one may hold millions of tiny records) is a long
walk: :func:`validation_steps` makes the same checks as a generator that pauses every
``WALK_SLICE_RECORDS`` records, so that the broker's event loop can serve its other connections
between two slices, and inflates a compressed payload in steps (``decompress_steps``) with the
same pauses; :func:`validate_records` runs it in one slice, and inflates in one go (asked with
``inflate_in_one_go_at_most``, it raises :class:`InflationIsLong` for a payload inflating beyond
that, which the caller then checks in slices).  A partial batch after
the whole one is ignored and dropped by :func:`assign_offsets`, as Kafka's
``trimInvalidBytes`` drops it.

:func:`assign_offsets` writes the base offset and partition leader epoch, fields
outside the CRC, so normally the CRC stays as the producer computed it.  Only when
the attributes' timestamp-type bit or the max timestamp must change (LogAppendTime,
or a producer whose header disagrees with its records, which Kafka corrects too)
is the CRC recomputed.
"""

from __future__ import annotations

import struct
from collections.abc import Generator, Iterator
from typing import cast

import attrs

from kafkapy.errors import DecodeError, ErrorCode, KafkaApiError
from kafkapy.log.topic_config import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_SEGMENT_BYTES, LONG_MAX, LogConfig
from kafkapy.protocol.compression import (
    INFLATE_SLICE_BYTES,
    MAX_INFLATED_BYTES,
    Compression,
    InflationLimitExceeded,
    compression_of,
)
from kafkapy.protocol.records import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    CREATE_TIME,
    LOG_APPEND_TIME,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    V2_ATTRIBUTES_AT,
    V2_COUNT_AT,
    V2_CRC_AT,
    V2_HEADER_SIZE,
    V2_LEADER_EPOCH_AT,
    V2_MAGIC_AT,
    V2_MAX_TIMESTAMP_AT,
    Batch,
    RecordBatch,
    RecordFacts,
    Records,
    RecordsSummary,
    crc32c,
    rebuilt_batch_steps,
)
from kafkapy.protocol.steps import all_at_once

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_SEGMENT_BYTES",
    "MAX_RECORD_ERRORS",
    "WALK_SLICE_RECORDS",
    "AppendPlan",
    "InflationIsLong",
    "OffsetsAssigned",
    "RecordsRejected",
    "assign_offsets",
    "clean_batch_max_timestamp",
    "compression_level",
    "produce_batch",
    "produce_inflate_limit",
    "recompressed",
    "recompression_steps",
    "recompression_target",
    "stamp_batch",
    "validate_records",
    "validation_steps",
    "walk_is_long",
]

_LONG_MAX = LONG_MAX  # message.timestamp.*.max.ms default: no limit
_NO_TIMESTAMP = -1

# Produce v7 is the first version allowed to carry zstd (KIP-110).
_FIRST_ZSTD_PRODUCE_VERSION = 7
_COMPRESSIONS = tuple(Compression)  # by codec id 0..4, without an enum call per batch

# Records walked between two pauses of validation_steps: about 6 ms of the scan (0.6 µs a
# record) or 10 ms of naming faulty records, on the two-core machine of benchmarks/record_walks.py.
# A producer's batch is far fewer (16 KiB, its default batch.size, holds about 2,300 records of the
# smallest kind), so it is checked in one go, on the fast path.
WALK_SLICE_RECORDS = 10_000
# The smallest v2 record: its length, attributes, timestamp delta, offset delta, key length, value
# length and header count, one byte each.
_SMALLEST_RECORD = 7
V2_BATCH_LENGTH_AT = 8  # the v2 header's batch_length (int32), after the base offset

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

RecordError = tuple[int, str]  # (batch-relative record index, message), as Produce v8+ reports them
# The record errors one rejected batch keeps for its answer. Kafka keeps every one; a 25 KB zstd batch
# can hold some 38 million faulty records, whose errors would take gigabytes of the broker's memory,
# while a client logs the first few. The answer's message still counts them all.
MAX_RECORD_ERRORS = 10_000


def produce_inflate_limit(max_message_bytes: int) -> int:
    """The most bytes a Produce batch's compressed payload may inflate to: ``max.message.bytes``
    or MAX_INFLATED_BYTES (256 MiB), whichever is larger.

    Kafka sets no such bound: its validator streams the records one at a time through a small
    buffer, so it never holds the inflated batch, whereas kafkapy inflates a payload whole, and
    1 MB of zstd can claim 32 GB. No producer needs more: a batch that inflates to no more than
    the topic would take uncompressed is always accepted, and a compressed batch beyond 256 MiB
    could not be read by librdkafka-based consumers (their inflation stops at
    receive.message.max.bytes, 100 MB by default). Beyond it the batch is refused like any
    other whose records cannot be read (INVALID_RECORD); other partitions are unaffected."""
    return max(MAX_INFLATED_BYTES, max_message_bytes)


class InflationIsLong(Exception):
    """A batch whose payload inflates beyond what :func:`validate_records` was asked to inflate in
    one go (``inflate_in_one_go_at_most``, bytes): it is to be checked with
    :func:`validation_steps`, which inflates it in steps. Not a verdict: the batch may be valid."""

    def __init__(self, at_most: int) -> None:
        super().__init__(f"the payload inflates beyond {at_most} bytes")
        self.at_most = at_most


class RecordsRejected(KafkaApiError):
    """The whole batch is rejected with ``code``; ``record_errors`` name the offending records (the
    first MAX_RECORD_ERRORS of ``record_error_count``).

    Produce v8+ carries ``record_errors`` and ``message`` back to the client
    (``ProduceResponse.PartitionResponse.record_errors``/``error_message``).
    """

    def __init__(self, code: ErrorCode, message: str, record_errors: list[RecordError] | None = None,
                 record_error_count: int | None = None) -> None:
        super().__init__(code, message)
        self.message: str = message
        self.record_errors: list[RecordError] = record_errors or []
        self.record_error_count: int = (len(self.record_errors) if record_error_count is None
                                        else record_error_count)


@attrs.frozen
class AppendPlan:
    """What validation learnt about the batch, handed on to :func:`assign_offsets`."""

    size: int  # bytes of the whole batch; anything after it is a partial batch to drop
    record_count: int
    max_timestamp: int  # the records' own max (CreateTime); -1 if none has a timestamp
    timestamp_type: int  # the topic's message.timestamp.type, which the stored batch will carry
    compression: Compression
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool

    @property
    def log_append_time(self) -> bool:
        return self.timestamp_type == LOG_APPEND_TIME


@attrs.frozen
class OffsetsAssigned:
    """Where the batch landed, as a Produce response and the log's indexes need it."""

    first_offset: int
    last_offset: int
    max_timestamp: int  # the batch's max timestamp as stored (log-append time under LogAppendTime)
    offset_of_max_timestamp: int  # Kafka keeps this per batch: its last offset
    log_append_time_ms: int  # -1 under CreateTime, as Produce responses report it


def produce_batch(data: bytearray | bytes | memoryview, produce_version: int | None) -> RecordBatch:
    """Frame the records and return their one whole batch, or raise Kafka's error for the framing
    (RecordsRejected; Kafka's ProduceRequest.validateRecords, and a header that does not read)."""
    records = Records(data)
    batches = records.batches()
    try:
        first = next(batches, None)
    except DecodeError as exc:
        raise _header_rejection(data, exc) from None
    if first is None:
        raise RecordsRejected(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {produce_version if produce_version is not None else '3+'} "
            "must have at least one record batch per partition",
        )
    if not isinstance(first, RecordBatch):
        raise RecordsRejected(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {produce_version if produce_version is not None else '3+'} "
            f"are only allowed to contain record batches with magic version 2 (this is {first.magic})",
        )
    return _only_batch(first, batches, produce_version)


def _only_batch(first: RecordBatch, rest: Iterator[Batch], produce_version: int | None) -> RecordBatch:
    if (
        produce_version is not None
        and produce_version < _FIRST_ZSTD_PRODUCE_VERSION
        and first.attributes & 0x07 == Compression.ZSTD
    ):
        raise RecordsRejected(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"Produce requests with version {produce_version} are not allowed to use ZStandard compression",
        )
    try:
        second = next(rest, None)
    except DecodeError as exc:
        raise RecordsRejected(ErrorCode.CORRUPT_MESSAGE, f"after the first batch: {exc}") from None
    if second is not None:
        raise RecordsRejected(
            ErrorCode.INVALID_RECORD,
            "Produce requests with version 3+ are only allowed to contain exactly one record batch "
            "per partition",
        )
    return first


def _header_rejection(data: bytearray | bytes | memoryview, exc: DecodeError) -> RecordsRejected:
    """Kafka's answer for a batch RecordBatch refused to construct, by the field it refused."""
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    if len(view) > V2_MAGIC_AT and view[V2_MAGIC_AT] in (0, 1):
        return RecordsRejected(
            ErrorCode.INVALID_RECORD,
            "Produce requests with version 3+ are only allowed to contain record batches with "
            "magic version 2",
        )
    if exc.offset == V2_ATTRIBUTES_AT:  # codec id 5..7 with a valid CRC
        return RecordsRejected(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc))
    if exc.offset == V2_COUNT_AT:  # negative record count with a valid CRC
        return RecordsRejected(ErrorCode.INVALID_RECORD, f"Invalid reported count for record batch: {exc}")
    # Framing (length < 14, magic > 2), batch_length below the v2 header, CRC mismatch.
    return RecordsRejected(ErrorCode.CORRUPT_MESSAGE, str(exc))


def validate_records(
    data: bytearray | bytes | memoryview,
    config: LogConfig,
    now_ms: int,
    *,
    produce_version: int | None = None,
    inflate_in_one_go_at_most: int | None = None,
) -> AppendPlan:
    """Check one partition's records of a Produce request as Kafka does; raise RecordsRejected if not.

    ``produce_version`` enables the one version-dependent rule (zstd needs v7+);
    without it that rule is skipped.  Nothing is modified. With ``inflate_in_one_go_at_most``,
    a batch that passes the checks before its records and whose payload inflates beyond that
    many bytes raises :class:`InflationIsLong` instead of being inflated in one go: the caller
    checks it with :func:`validation_steps`, which inflates it in steps.
    """
    plan = _one_clean_batch(data, config, now_ms, produce_version)
    if plan is not None:
        return plan
    return all_at_once(_checks(data, config, now_ms, produce_version, None, inflate_in_one_go_at_most))[0]


def walk_is_long(data: bytearray | bytes | memoryview) -> bool:
    """Whether checking the batch in ``data`` would walk more than one slice of records
    (``WALK_SLICE_RECORDS``): its header counts more, its payload could hold more (a record takes
    at least 7 bytes, and the walk stops where an uncompressed payload's records do), and its CRC
    holds (else it is refused before any record is read). Such a batch is checked with
    :func:`validation_steps`, whose slices a caller can interleave with other work."""
    if len(data) < V2_HEADER_SIZE or data[V2_MAGIC_AT] != 2 or \
            _I32.unpack_from(data, V2_COUNT_AT)[0] <= WALK_SLICE_RECORDS:
        return False
    if not data[V2_ATTRIBUTES_AT + 1] & COMPRESSION_MASK and \
            (len(data) - V2_HEADER_SIZE) // _SMALLEST_RECORD <= WALK_SLICE_RECORDS:
        return False
    end = V2_BATCH_LENGTH_AT + 4 + _I32.unpack_from(data, V2_BATCH_LENGTH_AT)[0]
    stated_crc: int = _U32.unpack_from(data, V2_CRC_AT)[0]
    return end <= len(data) and crc32c(memoryview(data)[V2_ATTRIBUTES_AT:end]) == stated_crc


def validation_steps(
    data: bytearray | bytes | memoryview,
    config: LogConfig,
    now_ms: int,
    *,
    produce_version: int | None = None,
    every: int = WALK_SLICE_RECORDS,
) -> Generator[None, None, AppendPlan]:
    """:func:`validate_records`' verdict, reached ``every`` records at a time: a generator that
    yields between two slices of the record walk and returns the plan (or raises RecordsRejected).

    For a batch of very many records: the broker's event loop runs its other connections between
    the slices (kafkapy.dataplane.produce), where one call of :func:`validate_records` would hold it
    for the whole walk. The same checks in the same order (the plain ones: the fast path would walk
    the records once more), so the same verdict; tests/log/test_append.py holds the two equal."""
    return _checks(data, config, now_ms, produce_version, every)


def _checks(data: bytearray | bytes | memoryview, config: LogConfig, now_ms: int, produce_version: int | None,
            every: int | None, inflate_at_most: int | None = None) -> Generator[None, None, AppendPlan]:
    """The plain checks, in Kafka's order; the record walk in slices of ``every`` records (None:
    in one, and the payload inflated in one go, up to ``inflate_at_most`` bytes if given: past
    them, InflationIsLong)."""
    batch = produce_batch(data, produce_version)
    size = batch.size_in_bytes

    # UnifiedLog.analyzeAndValidateRecords
    if batch.base_offset != 0:
        raise RecordsRejected(
            ErrorCode.INVALID_RECORD,
            f"The baseOffset of the record batch in the append should be 0, but it is {batch.base_offset}",
        )
    if size > config.max_message_bytes:
        raise RecordsRejected(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"The record batch size in the append is {size} bytes which exceeds the maximum configured "
            f"value of {config.max_message_bytes}.",
        )
    if not batch.crc_valid:
        raise RecordsRejected(ErrorCode.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {batch.crc})")

    # LogValidator.validateBatch
    count_from_offsets = batch.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise RecordsRejected(
            ErrorCode.INVALID_RECORD, f"Batch has an invalid offset range: [0, {batch.last_offset_delta}]"
        )
    if batch.record_count <= 0:
        raise RecordsRejected(
            ErrorCode.INVALID_RECORD, f"Invalid reported count for record batch: {batch.record_count}"
        )
    if count_from_offsets != batch.record_count:
        raise RecordsRejected(
            ErrorCode.INVALID_RECORD,
            f"Inconsistent batch offset range [0, {batch.last_offset_delta}] and count of records "
            f"{batch.record_count}",
        )
    if batch.is_control:
        raise RecordsRejected(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
    if batch.producer_id >= 0 and batch.base_sequence < 0:
        raise RecordsRejected(
            ErrorCode.INVALID_RECORD,
            f"Invalid sequence number {batch.base_sequence} in record batch with producerId "
            f"{batch.producer_id}",
        )

    max_timestamp = yield from _check_records_steps(batch, config, now_ms, every, inflate_at_most)

    if size > config.segment_bytes:
        raise RecordsRejected(
            ErrorCode.RECORD_LIST_TOO_LARGE,
            f"Message batch size is {size} bytes in append, which exceeds the maximum configured segment "
            f"size of {config.segment_bytes}.",
        )
    return AppendPlan(
        size=size,
        record_count=batch.record_count,
        max_timestamp=max_timestamp,
        timestamp_type=config.message_timestamp_type,
        compression=batch.compression,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
    )


def _one_clean_batch(data: bytearray | bytes | memoryview, config: LogConfig, now_ms: int,
                     produce_version: int | None) -> AppendPlan | None:
    """:func:`validate_records`' fast path, for what producers send: ``data`` is exactly one
    magic-2 batch that passes every check. The same checks as the plain path, made in fewer steps
    (one header read, no framing walk, no generators); the first that fails, or anything unusual
    (a partial batch after it, a header RecordBatch refuses), answers None and the plain path
    decides and words the rejection, in Kafka's order. tests/log/test_append.py holds the two
    equal on random valid and damaged batches."""
    if len(data) < V2_HEADER_SIZE or data[V2_MAGIC_AT] != 2:
        return None
    try:
        batch = RecordBatch(data)
    except DecodeError:
        return None
    max_timestamp = clean_batch_max_timestamp(batch, data, config, now_ms, produce_version)
    if max_timestamp is None:
        return None
    attributes = batch.attributes
    return AppendPlan(
        size=len(data),
        record_count=batch.record_count,
        max_timestamp=max_timestamp,
        timestamp_type=config.message_timestamp_type,
        compression=_COMPRESSIONS[attributes & COMPRESSION_MASK],
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=bool(attributes & TRANSACTIONAL_BIT),
    )


def clean_batch_max_timestamp(batch: RecordBatch, data: bytearray | bytes | memoryview, config: LogConfig,
                              now_ms: int, produce_version: int | None) -> int | None:
    """Every check of :func:`validate_records` on ``batch``, the header of all of ``data`` (read
    by the caller, once): the records' max timestamp if the batch passes them all, None if one
    fails or may (the plain path then decides and words it), or if its walk is long (more than
    ``WALK_SLICE_RECORDS`` records: the plain path walks it once, where this one would walk it
    first and hand any fault on to be walked again, and Produce checks it in slices), or its
    payload inflates beyond ``INFLATE_SLICE_BYTES`` (Produce inflates it in steps). The checks
    of ``_one_clean_batch``, which calls this; Produce's fast path from the frame
    (kafkapy.dataplane.produce_frame) calls it with the header it keeps for the log."""
    size = len(data)
    attributes = batch.attributes
    if (
        batch.size_in_bytes != size
        or batch.base_offset != 0
        or size > config.max_message_bytes
        or size > config.segment_bytes
        or (attributes & COMPRESSION_MASK == Compression.ZSTD and produce_version is not None
            and produce_version < _FIRST_ZSTD_PRODUCE_VERSION)
        or batch.record_count <= 0
        or batch.record_count > WALK_SLICE_RECORDS
        or batch.last_offset_delta + 1 != batch.record_count
        or attributes & CONTROL_BIT
        or (batch.producer_id >= 0 and batch.base_sequence < 0)
        or crc32c(memoryview(data)[V2_ATTRIBUTES_AT:]) != batch.crc
    ):
        return None
    try:  # a payload inflating beyond one slice is declined: the plain path inflates it in steps
        summary = batch.scan(inflate_limit=min(produce_inflate_limit(config.max_message_bytes),
                                               INFLATE_SLICE_BYTES))
    except DecodeError:
        return None
    return _max_timestamp_if_clear(batch, summary, config, now_ms)


def _check_records(batch: RecordBatch, config: LogConfig, now_ms: int) -> int:
    """LogValidator's per-record checks; returns the records' max timestamp (the walk in one slice)."""
    return all_at_once(_check_records_steps(batch, config, now_ms, None))[0]


def _check_records_steps(batch: RecordBatch, config: LogConfig, now_ms: int, every: int | None,
                         inflate_at_most: int | None = None) -> Generator[None, None, int]:
    """LogValidator's per-record checks, ``every`` records at a time; returns the records' max
    timestamp. In slices (``every``), a compressed payload is inflated in steps of
    ``INFLATE_SLICE_BYTES``; in one go, up to ``inflate_at_most`` bytes, past which it raises
    InflationIsLong (the caller checks the batch in slices instead).

    The fast path: :meth:`RecordBatch.scan_steps` walks the records with every
    structural check but builds nothing, and its summary (timestamp range, offset
    deltas in order, null keys) shows whether any record can fail.  Only then are the
    faulty records named, from :meth:`RecordBatch.record_facts` (each record's offset,
    timestamp and null key, read without building it); :func:`_check_records_plain`
    names them from decoded records, and a test holds the two equal.
    """
    count = batch.record_count
    step = every or max(count, 1)
    limit = produce_inflate_limit(config.max_message_bytes)
    one_go_limit = limit if inflate_at_most is None else min(limit, inflate_at_most)
    try:
        scanned = yield from batch.scan_steps(  # the CRC was checked by the caller
            step, inflate_limit=one_go_limit if every is None else limit,
            inflate_every=None if every is None else INFLATE_SLICE_BYTES)
    except InflationLimitExceeded as exc:
        if exc.limit < limit:
            raise InflationIsLong(exc.limit) from None
        raise RecordsRejected(ErrorCode.INVALID_RECORD, f"Found invalid record structure: {exc}") from None
    except DecodeError as exc:
        raise RecordsRejected(ErrorCode.INVALID_RECORD, f"Found invalid record structure: {exc}") from None
    max_timestamp = _max_timestamp_if_clear(batch, scanned.summary, config, now_ms)
    if max_timestamp is not None:
        return max_timestamp
    errors = _RecordErrors(batch, config, now_ms)
    pos = scanned.start
    for first in range(0, count, step):
        if first:
            yield
        facts, pos = batch.record_facts(scanned.data, pos, min(count, first + step) - first)
        errors.add(facts, first)
    return errors.verdict()


def _max_timestamp_if_clear(batch: RecordBatch, summary: RecordsSummary, config: LogConfig,
                            now_ms: int) -> int | None:
    """The records' max timestamp if the summary shows no record can fail LogValidator's per-record
    checks; None if one may, and the records must be decoded to name it."""
    create_time = config.message_timestamp_type == CREATE_TIME
    clear = summary.offsets_in_order and not (config.compacts and summary.null_keys)
    producer_says_append_time = batch.attributes & TIMESTAMP_TYPE_BIT
    if producer_says_append_time and (not create_time or summary.max_timestamp == _NO_TIMESTAMP):
        clear = False  # every record then carries that claim, and Kafka refuses it
    elif create_time and _bounded(config):
        lowest = now_ms - config.timestamp_before_max_ms
        highest = now_ms + config.timestamp_after_max_ms
        clear = clear and lowest <= summary.min_timestamp and summary.max_timestamp <= highest
    return max(summary.max_timestamp, _NO_TIMESTAMP) if clear else None


def _bounded(config: LogConfig) -> bool:
    """Whether message.timestamp.*.max.ms limit anything: the defaults mean no bound."""
    return config.timestamp_before_max_ms != _LONG_MAX or config.timestamp_after_max_ms != _LONG_MAX


def _check_records_plain(batch: RecordBatch, config: LogConfig, now_ms: int) -> int:
    """The per-record checks on decoded records, collecting Kafka's record errors: the plain path
    of :func:`_check_records`.

    Structural faults abort at once (INVALID_RECORD, no record errors), as
    Kafka's record iterator throws; key and timestamp faults are collected for
    every record and reported together.
    """
    try:
        records = batch.record_list(check_crc=False,  # the CRC was checked by the caller
                                    inflate_limit=produce_inflate_limit(config.max_message_bytes))
    except DecodeError as exc:
        raise RecordsRejected(ErrorCode.INVALID_RECORD, f"Found invalid record structure: {exc}") from None
    errors = _RecordErrors(batch, config, now_ms)
    errors.add([(record.offset, cast(int, record.timestamp), record.key is None) for record in records], 0)
    return errors.verdict()


class _RecordErrors:
    """LogValidator's per-record checks over records' facts (offset, timestamp, null key), given
    a slice at a time: the record errors and the max timestamp so far, then Kafka's verdict."""

    def __init__(self, batch: RecordBatch, config: LogConfig, now_ms: int) -> None:
        self.errors: list[RecordError] = []
        self.errors_dropped = 0  # past MAX_RECORD_ERRORS
        self.timestamp_errors = False
        self.max_timestamp = _NO_TIMESTAMP
        self.create_time = config.message_timestamp_type == CREATE_TIME
        self.producer_says_append_time = batch.timestamp_type == LOG_APPEND_TIME
        self.bounded = _bounded(config)
        self.lowest = now_ms - config.timestamp_before_max_ms
        self.highest = now_ms + config.timestamp_after_max_ms
        self.compact = config.compacts

    def add(self, facts: list[RecordFacts], first: int) -> None:
        """Check the records ``first``, ``first + 1``, ... of the batch, whose facts these are."""
        errors = self.errors
        max_timestamp = self.max_timestamp
        create_time, producer_says_append_time = self.create_time, self.producer_says_append_time
        bounded, lowest, highest, compact = self.bounded, self.lowest, self.highest, self.compact
        for index, (offset, timestamp, null_key) in enumerate(facts, first):
            if timestamp > max_timestamp:
                max_timestamp = timestamp
            if offset != index:
                errors.append((index, f"Record offset delta {offset} is not its index {index}"))
            elif compact and null_key:
                errors.append((index, "Compacted topic cannot accept message without key"))
            elif create_time and timestamp != _NO_TIMESTAMP:
                if bounded and not lowest <= timestamp <= highest:
                    self.timestamp_errors = True
                    errors.append((
                        index,
                        f"Timestamp {timestamp} of message with offset {offset} is out of range. "
                        f"The timestamp should be within [{lowest}, {highest}]",
                    ))
            elif producer_says_append_time:
                self.timestamp_errors = True
                errors.append((
                    index,
                    f"Invalid timestamp type in message at offset {offset}. "
                    "Producer should not set timestamp type to LogAppendTime.",
                ))
        self.max_timestamp = max_timestamp
        if len(errors) > MAX_RECORD_ERRORS:  # at most a slice's worth over, for the time being
            self.errors_dropped += len(errors) - MAX_RECORD_ERRORS
            del errors[MAX_RECORD_ERRORS:]

    def verdict(self) -> int:
        """The records' max timestamp, or Kafka's rejection naming the faulty records
        (``processRecordErrors``: INVALID_TIMESTAMP if any error is a timestamp's)."""
        errors = self.errors
        if not errors:
            return self.max_timestamp
        count = len(errors) + self.errors_dropped
        if self.timestamp_errors:
            raise RecordsRejected(
                ErrorCode.INVALID_TIMESTAMP,
                "One or more records have been rejected due to invalid timestamp",
                errors,
                count,
            )
        raise RecordsRejected(
            ErrorCode.INVALID_RECORD,
            f"One or more records have been rejected due to {count} record "
            f"errors in total, and only showing the first three errors at most: {errors[:3]}",
            errors,
            count,
        )


def assign_offsets(
    data: bytearray,
    plan: AppendPlan,
    *,
    base_offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None = None,
) -> OffsetsAssigned:
    """Stamp the validated batch in ``data`` with its offsets and leader epoch, in place.

    Drops a partial batch trailing the whole one.  Under LogAppendTime
    (``plan.log_append_time``) ``log_append_time_ms`` is required; it becomes the
    batch's max timestamp and sets the timestamp-type bit.  Under CreateTime the
    max timestamp becomes the records' own max, as Kafka rewrites it.  The CRC is
    recomputed only when the CRC-covered attributes or max timestamp change.
    """
    if plan.log_append_time and log_append_time_ms is None:
        raise ValueError("log_append_time_ms is required when the topic uses LogAppendTime")
    if len(data) > plan.size:
        del data[plan.size :]
    max_timestamp = log_append_time_ms if log_append_time_ms is not None and plan.log_append_time \
        else plan.max_timestamp
    _stamp(data, plan.size, base_offset, leader_epoch, max_timestamp, plan.log_append_time)
    last_offset = base_offset + plan.record_count - 1
    return OffsetsAssigned(
        first_offset=base_offset,
        last_offset=last_offset,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=last_offset,
        log_append_time_ms=max_timestamp if plan.log_append_time else -1,
    )


def stamp_batch(data: bytearray, batch: RecordBatch, *, base_offset: int, leader_epoch: int,
                max_timestamp: int, log_append_time: bool) -> None:
    """:func:`assign_offsets` for a batch that is all of ``data``, whose header ``batch`` was read
    before the stamp and is kept in step with it (so the log and producer state read it without a
    second header parse): the same stamp, ``max_timestamp`` being the log-append time under
    LogAppendTime and the records' max otherwise."""
    crc = _stamp(data, len(data), base_offset, leader_epoch, max_timestamp, log_append_time)
    batch.base_offset = base_offset
    batch.partition_leader_epoch = leader_epoch
    if crc is not None:
        batch.attributes = _I16.unpack_from(data, V2_ATTRIBUTES_AT)[0]
        batch.max_timestamp = max_timestamp
        batch.crc = crc


def _stamp(data: bytearray, size: int, base_offset: int, leader_epoch: int, max_timestamp: int,
           log_append_time: bool) -> int | None:
    """Write the offsets, epoch, timestamp type and max timestamp into the batch header in
    ``data[:size]``, and the CRC again if a CRC-covered field changed: then the new CRC, else
    None."""
    _I64.pack_into(data, 0, base_offset)
    _I32.pack_into(data, V2_LEADER_EPOCH_AT, leader_epoch)
    attributes = _I16.unpack_from(data, V2_ATTRIBUTES_AT)[0]
    new_attributes = attributes | TIMESTAMP_TYPE_BIT if log_append_time else attributes & ~TIMESTAMP_TYPE_BIT
    if new_attributes != attributes or _I64.unpack_from(data, V2_MAX_TIMESTAMP_AT)[0] != max_timestamp:
        _I16.pack_into(data, V2_ATTRIBUTES_AT, new_attributes)
        _I64.pack_into(data, V2_MAX_TIMESTAMP_AT, max_timestamp)
        crc = crc32c(memoryview(data)[V2_ATTRIBUTES_AT:size])
        _U32.pack_into(data, V2_CRC_AT, crc)
        return crc
    return None


def recompression_target(config: LogConfig, attributes_low_byte: int) -> Compression | None:
    """The codec a batch must be stored with when it is not the one it came in: the topic's
    ``compression.type`` unless that is ``producer`` (Kafka's BrokerCompressionType and
    LogValidator); None when the batch is kept as sent."""
    name = config.compression_type
    if name == "producer":
        return None
    target = Compression.NONE if name == "uncompressed" else compression_of(name)
    return None if target == attributes_low_byte & COMPRESSION_MASK else target


def compression_level(config: LogConfig, codec: Compression) -> int | None:
    """The topic's ``compression.<codec>.level`` (None for a codec without levels)."""
    if codec == Compression.GZIP:
        return config.compression_gzip_level
    if codec == Compression.LZ4:
        return config.compression_lz4_level
    if codec == Compression.ZSTD:
        return config.compression_zstd_level
    return None


def recompressed(data: bytearray, plan: AppendPlan, codec: Compression,
                 level: int | None = None, inflate_limit: int = MAX_INFLATED_BYTES) -> bytearray:
    """The validated batch in ``data`` rebuilt with ``codec`` at ``level`` (the topic's
    ``compression.<codec>.level``, KIP-390), as Kafka's LogValidator rebuilds a batch whose codec
    is not the topic's: the same records (offsets deltas, timestamps, keys, values, headers) and
    producer fields, the batch's timestamps and offset span kept; offsets and leader epoch are
    stamped afterwards as for any batch. A batch already in the topic's codec is kept as sent,
    whatever level it was made at, as Kafka keeps it. ``inflate_limit``: the one its validation
    used (:func:`produce_inflate_limit`)."""
    return all_at_once(recompression_steps(data, plan, codec, level, inflate_limit, every=None))[0]


def recompression_steps(data: bytearray, plan: AppendPlan, codec: Compression, level: int | None = None,
                        inflate_limit: int = MAX_INFLATED_BYTES, *,
                        every: int | None = WALK_SLICE_RECORDS) -> Generator[None, None, bytearray]:
    """:func:`recompressed`, in slices (``every`` records, ``INFLATE_SLICE_BYTES`` inflated or
    compressed) with a yield between two, for a long batch checked in slices
    (kafkapy.dataplane.produce): the same bytes (``rebuilt_batch_steps``); ``every`` None: in one go."""
    return rebuilt_batch_steps(RecordBatch(memoryview(data)[:plan.size]), codec, level,
                               inflate_limit=inflate_limit, every=every,
                               chunk=None if every is None else INFLATE_SLICE_BYTES)
