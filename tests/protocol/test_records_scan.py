"""RecordBatch.scan, the append path's fast walk over records, held equal to record_list:
the same DecodeError on the same bytes, and otherwise the summary record_list's records give."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.errors import DecodeError
from kafkapy.protocol import records as records_module
from kafkapy.protocol.compression import Compression, compress
from kafkapy.protocol.records import (
    _OFFSET_DELTA_BANDS,
    CREATE_TIME,
    LOG_APPEND_TIME,
    RecordBatch,
    RecordsSummary,
    _offset_delta_bytes,
    _zigzag_varint,
    build_record_batch,
)

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NOW = 1_767_225_600_000

blobs = st.one_of(st.none(), st.binary(max_size=300))
records = st.lists(
    st.tuples(blobs, blobs, st.lists(st.tuples(st.text(max_size=6), blobs), max_size=3),
              st.integers(NOW - 10**10, NOW + 10**10)),
    min_size=0, max_size=15,
)


def summary_from_records(batch: RecordBatch) -> RecordsSummary:
    decoded = batch.record_list(check_crc=False)
    stamps = [r.timestamp for r in decoded]
    return RecordsSummary(
        len(decoded),
        min(stamps) if stamps else -1,  # type: ignore[type-var]
        max(stamps) if stamps else -1,  # type: ignore[type-var]
        [r.offset - batch.base_offset for r in decoded] == list(range(len(decoded))),
        sum(r.key is None for r in decoded),
    )


def outcome(fn: object) -> object:
    try:
        return fn()  # type: ignore[operator]
    except DecodeError as exc:
        return ("DecodeError", exc.reason, exc.offset)


@FUZZ
@given(items=records, codec=st.sampled_from(list(Compression)),
       kind=st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]), base=st.integers(0, 2**40), data=st.data())
def test_scan_equals_record_list_on_valid_and_damaged_payloads(
    items: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    codec: Compression, kind: int, base: int, data: st.DataObject,
) -> None:
    # Damage the records themselves, then compress: damage to a compressed stream mostly
    # stops the codec and never reaches the record walk.
    plain = build_record_batch(items, timestamp_type=kind, base_offset=base)
    header, payload = bytearray(plain[:61]), bytearray(plain[61:])
    damage = data.draw(st.sampled_from(["none", "byte", "insert", "delete", "count"]))
    if damage == "byte" and payload:
        at = data.draw(st.integers(0, len(payload) - 1))
        payload[at] = data.draw(st.one_of(st.sampled_from([0x00, 0x01, 0x02, 0x03, 0x7E, 0x7F, 0x80, 0xFF]),
                                          st.integers(0, 255)))
    elif damage == "insert":
        at = data.draw(st.integers(0, len(payload)))
        payload[at:at] = data.draw(st.binary(min_size=1, max_size=3))
    elif damage == "delete" and payload:
        at = data.draw(st.integers(0, len(payload) - 1))
        del payload[at : at + data.draw(st.integers(1, 3))]
    elif damage == "count":
        struct.pack_into(">i", header, 57, data.draw(st.integers(0, 20)))
    body = compress(codec, bytes(payload)) if codec else bytes(payload)
    struct.pack_into(">i", header, 8, 49 + len(body))
    struct.pack_into(">h", header, 21, struct.unpack_from(">h", header, 21)[0] | int(codec))
    batch = RecordBatch(bytes(header) + body)
    expected = outcome(lambda: summary_from_records(batch))
    assert outcome(batch.scan) == expected
    if damage == "none":
        assert isinstance(expected, RecordsSummary) and expected.records == len(items)
    every = data.draw(st.integers(1, 4))
    assert outcome(lambda: sliced_scan(batch, every)[0]) == expected
    if isinstance(expected, RecordsSummary):
        assert sliced_scan(batch, every)[1] == facts_from_records(batch)


def sliced_scan(batch: RecordBatch, every: int) -> tuple[RecordsSummary, list[tuple[int, int, bool]]]:
    """scan_steps' summary, run ``every`` records at a time, and record_facts' facts of every
    record, read as many at a time; the yields between slices counted and checked."""
    steps = batch.scan_steps(every)
    pauses = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            scanned = done.value
            break
        pauses += 1
    facts: list[tuple[int, int, bool]] = []
    pos = scanned.start
    for first in range(0, batch.record_count, every):
        some, pos = batch.record_facts(scanned.data, pos, min(batch.record_count, first + every) - first)
        facts += some
    assert pauses in (0, max(0, -(-batch.record_count // every) - 1))  # none: the uniform fast path
    return scanned.summary, facts


def facts_from_records(batch: RecordBatch) -> list[tuple[int, int, bool]]:
    return [(r.offset, r.timestamp, r.key is None) for r in batch.record_list(check_crc=False)]  # type: ignore[misc]


def test_record_facts_read_a_null_key_written_in_two_bytes() -> None:
    """A key length of -1 written as a two-byte varint (0x81 0x00) is a null key to record_list and
    to the scan; record_facts, which reads the first byte only when it is the whole varint, too."""
    raw = bytearray(build_record_batch([{"key": None, "value": b"v", "timestamp": NOW}]))
    at = 61 + 4  # record length, attributes, timestamp delta, offset delta, then the key length
    assert raw[at] == 0x01
    raw[at:at + 1] = b"\x81\x00"
    raw[61] += 2  # the record's length (zigzag: one byte more)
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    batch = RecordBatch(bytes(raw))
    assert batch.scan().null_keys == 1
    assert sliced_scan(batch, 1)[1] == facts_from_records(batch) == [(0, NOW, True)]


def test_scan_reports_gaps_null_keys_and_log_append_time() -> None:
    gap = RecordBatch(build_record_batch([{"key": None, "value": b"1", "offset": 0, "timestamp": 5},
                                          {"key": b"k", "value": b"2", "offset": 2, "timestamp": 3}]))
    assert gap.scan() == RecordsSummary(2, 3, 5, False, 1)
    lat = RecordBatch(build_record_batch([(b"k", b"v", [], 1), (b"k", b"v", [], 2)],
                                         timestamp_type=LOG_APPEND_TIME, max_timestamp=99))
    assert lat.scan() == RecordsSummary(2, 99, 99, True, 0)


def test_a_header_key_that_is_not_utf8_is_taken_by_scan_and_read_as_java_reads_it() -> None:
    """Kafka never checks a header key's bytes (its Header.key() reads them with U+FFFD): the scan
    takes the batch, and record_list reads the key as Java does."""
    raw = bytearray(build_record_batch([(b"k", b"v", [("ab", b"x")], 1)]))
    at = raw.index(b"ab")
    raw[at] = 0xFF
    batch = RecordBatch(bytes(raw))
    assert batch.scan() == RecordBatch(build_record_batch([(b"k", b"v", [("ab", b"x")], 1)])).scan()
    assert [record.headers for record in batch.record_list(check_crc=False)] == [[("\ufffdb", b"x")]]


# --- the uniform-records fast path (_scan_uniform), held equal to the full walk ------------------

UNIFORM = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def uniform_batch(count: int, key_size: int | None, value_size: int, stamps: list[int],
                  codec: Compression = Compression.NONE) -> bytes:
    """``count`` records of one shape: what a producer sends with fixed-size keys and values."""
    key = None if key_size is None else b"k" * key_size
    items: list[tuple[bytes | None, bytes, list[tuple[str, bytes]], int]] = [
        (key, bytes([i % 251]) * value_size, [], NOW + stamps[i % len(stamps)]) for i in range(count)]
    return build_record_batch(items, base_timestamp=NOW, compression=codec)


@UNIFORM
@given(count=st.sampled_from([1, 15, 16, 63, 64, 65, 200, 8191, 8192, 8193, 9000]),
       key_size=st.one_of(st.none(), st.integers(0, 200)), value_size=st.integers(0, 300),
       stamps=st.lists(st.integers(0, 200), min_size=1, max_size=4),
       codec=st.sampled_from([Compression.NONE, Compression.GZIP]), data=st.data())
def test_uniform_fast_path_equals_the_full_walk(
    count: int, key_size: int | None, value_size: int, stamps: list[int], codec: Compression,
    data: st.DataObject,
) -> None:
    raw = bytearray(uniform_batch(count, key_size, value_size, stamps))
    payload_at = 61
    damage = data.draw(st.sampled_from(["none", "byte", "insert", "delete", "count"]))
    if damage == "byte":
        at = data.draw(st.integers(payload_at, len(raw) - 1))
        raw[at] = data.draw(st.one_of(st.sampled_from([0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF]),
                                      st.integers(0, 255)))
    elif damage == "insert":
        at = data.draw(st.integers(payload_at, len(raw)))
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=3))
    elif damage == "delete":
        at = data.draw(st.integers(payload_at, len(raw) - 1))
        del raw[at : at + data.draw(st.integers(1, 3))]
    elif damage == "count":
        struct.pack_into(">i", raw, 57, data.draw(st.integers(0, count + 2)))
    header, payload = bytes(raw[:payload_at]), bytes(raw[payload_at:])
    body = compress(codec, payload) if codec else payload
    framed = bytearray(header + body)
    struct.pack_into(">i", framed, 8, 49 + len(body))
    struct.pack_into(">h", framed, 21, struct.unpack_from(">h", framed, 21)[0] | int(codec))
    batch = RecordBatch(bytes(framed))
    walked = outcome(lambda: batch.scan(uniform=False))
    assert outcome(batch.scan) == walked
    if damage == "none":
        assert walked == summary_from_records(batch)


@pytest.mark.parametrize("count", [16, 64, 8192, 9000])
def test_uniform_fast_path_is_taken_on_a_producers_batch(count: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: a batch of one shape is summarised without the walk (the walk is broken
    here, so only the fast path can answer)."""
    batch = RecordBatch(uniform_batch(count, None, 100, [0, 3, 1]))
    expected = batch.scan(uniform=False)

    def no_walk(*_: object) -> RecordsSummary:
        raise AssertionError("walked")

    monkeypatch.setattr(records_module, "_scan_slice", no_walk)
    assert batch.scan() == expected == RecordsSummary(count, NOW, NOW + 3, True, count)
    assert sliced_scan(batch, 10)[0] == expected  # the walk in slices takes it too


def test_a_record_of_another_shape_goes_to_the_walk() -> None:
    no_headers: list[tuple[str, bytes]] = []
    same, other = (None, b"v" * 10, no_headers, NOW), (None, b"v" * 11, no_headers, NOW)
    items = [same] * 20 + [other]
    batch = RecordBatch(build_record_batch(items, base_timestamp=NOW))
    assert batch.scan() == batch.scan(uniform=False) == RecordsSummary(21, NOW, NOW, True, 21)


@FUZZ
@given(items=records, kind=st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]), data=st.data())
def test_scan_in_a_bytearray_equals_scan_of_the_bytes(
    items: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    kind: int, data: st.DataObject,
) -> None:
    """Produce checks a batch in the bytearray it stamps; scan then walks the bytearray in place
    (no payload copy) and must give what it gives on bytes, damage included."""
    raw = bytearray(build_record_batch(items, timestamp_type=kind))
    if len(raw) > 61 and data.draw(st.booleans()):
        at = data.draw(st.integers(61, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    assert outcome(lambda: RecordBatch(raw).scan()) == outcome(lambda: RecordBatch(bytes(raw)).scan())
    assert outcome(lambda: RecordBatch(raw).scan(uniform=False)) == outcome(
        lambda: RecordBatch(bytes(raw)).scan(uniform=False))


@FUZZ
@given(items=records, kind=st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]), data=st.data())
def test_scan_of_a_view_into_a_larger_buffer_equals_scan_of_the_bytes(
    items: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    kind: int, data: st.DataObject,
) -> None:
    """A batch inside a frame (Produce stamps large frames in place): scan walks the view itself,
    without copying the payload, and its answer and errors (offsets relative to the view) are
    those of the same bytes on their own."""
    raw = bytearray(build_record_batch(items, timestamp_type=kind))
    if len(raw) > 61 and data.draw(st.booleans()):
        at = data.draw(st.integers(61, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    before, after = data.draw(st.binary(max_size=9)), data.draw(st.binary(max_size=9))
    frame = bytearray(before) + raw + bytearray(after)
    views = (memoryview(frame)[len(before):len(before) + len(raw)],
             memoryview(bytes(frame))[len(before):len(before) + len(raw)])
    for view in views:
        plain = outcome(lambda: RecordBatch(bytes(raw)).scan())
        assert outcome(lambda v=view: RecordBatch(v).scan()) == plain
        assert outcome(lambda v=view: RecordBatch(v).scan(uniform=False)) == outcome(
            lambda: RecordBatch(bytes(raw)).scan(uniform=False))


@pytest.mark.parametrize("width", [1, 2, 3])
def test_offset_delta_columns_are_the_varints_of_each_band(width: int) -> None:
    """The uniform path's expected offset-delta bytes (built from runs) are, column by column, the
    zigzag varints the records writer writes for every delta of the band."""
    low, high, _ = next(band for band in _OFFSET_DELTA_BANDS if band[2] == width)
    varints = []
    for delta in range(low, high):
        out = bytearray()
        _zigzag_varint(out, delta)
        assert len(out) == width
        varints.append(bytes(out))
    assert _offset_delta_bytes(width) == tuple(bytes(v[j] for v in varints) for j in range(width))
