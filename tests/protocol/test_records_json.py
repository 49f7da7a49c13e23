"""The one-pass records JSON writer against the two-pass reference, byte for byte.

``records_json`` writes magic-2 batches straight from their bytes and hands
anything it doubts to ``_records_json_reference`` (decode to Record objects,
then format). These tests hold it to the reference's exact output -- text,
error object and exception alike -- on batches built by kafkapy's encoder and
kafka-python's (legacy formats), on mutated and truncated ones, on random
bytes and on every records field of the real captures. They also check the
fast path really is the one taken for valid input, and that the reference
itself still equals ``json.dumps`` of ``Record.to_dict`` with each record's batch header
and control marker.
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecordsBuilder

from kafkapy.capture.rows import decode_capture
from kafkapy.log.end_txn_marker import end_txn_marker_batch
from kafkapy.protocol import records_json as records_json_module
from kafkapy.protocol.compression import MAX_INFLATED_BYTES
from kafkapy.protocol.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    Batch,
    LegacyBatch,
    Records,
    build_record_batch,
)
from kafkapy.protocol.records_json import _fused, _records_json_reference, records_json, records_json_at

CAPTURE_DIRS = (Path(__file__).resolve().parents[1] / "data" / "captures", Path("/work/shared/captures"))
CAPTURES = sorted({p.name: p for d in CAPTURE_DIRS if d.is_dir() for p in d.glob("*.pcap")}.values())
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(fn: Any, records: Records) -> tuple[Any, ...]:
    """What ``fn(records)`` gives: its text, or the type and message of what it raised."""
    try:
        return ("text", fn(records))
    except Exception as exc:
        return ("raised", type(exc), str(exc))


CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
MARKERS = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
           5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}  # fmt: skip


def batch_dict(b: Batch) -> dict[str, Any]:
    """What each record's ``batch`` member says: the header fields, the attribute bits by name."""
    if isinstance(b, LegacyBatch):
        kind = ("CreateTime", "LogAppendTime")[b.attributes >> 3 & 1] if b.magic else "NoTimestampType"
        return {"offset": b.offset, "magic": b.magic, "attributes": b.attributes,
                "codec": CODECS[b.attributes & 7], "timestamp_type": kind}  # fmt: skip
    return {
        "base_offset": b.base_offset, "partition_leader_epoch": b.partition_leader_epoch, "magic": b.magic,
        "attributes": b.attributes, "codec": CODECS[b.attributes & 7],
        "timestamp_type": "LogAppendTime" if b.attributes & 8 else "CreateTime",
        "transactional": b.is_transactional, "control": b.is_control,
        "producer_id": b.producer_id, "producer_epoch": b.producer_epoch, "base_sequence": b.base_sequence,
    }  # fmt: skip


def control_dict(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """A control record's marker: key version and type, and an end-transaction value's epoch."""
    if key is None or len(key) < 4:
        return {"version": None, "type_id": None, "type": None, "coordinator_epoch": None}
    version, kind = struct.unpack(">hh", key[:4])
    epoch = struct.unpack(">i", value[2:6])[0] if kind in (0, 1) and value and len(value) >= 6 else None
    name = MARKERS.get(kind, "UNKNOWN")
    return {"version": version, "type_id": kind, "type": name, "coordinator_epoch": epoch}


def spec(records: Records) -> str:
    """The documented meaning of records_json for records that decode: each record's dict, with its
    batch's header and, for a control record, its marker."""
    out = []
    for b in records.batches():
        for r in b.record_list(check_crc=False):
            d = r.to_dict()
            d["batch"] = batch_dict(b)
            d["control"] = control_dict(r.key, r.value) if b.is_control else None
            out.append(d)
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False)


def assert_same(raw: bytes) -> str | None:
    """records_json equals the reference on ``raw`` as bytes, a view of a larger buffer, a bytearray.

    Each is compared with the reference on the same buffer: for a record
    running past its batch the reference reports the first fault it meets,
    which is not the same for bytes (read in place) and other buffers (batch
    by batch copies). Text, when there is some, is the same for all three.
    """
    framed = b"\xee" * 3 + raw + b"\xee" * 2
    texts = set()
    for view in (raw, memoryview(framed)[3 : 3 + len(raw)], bytearray(raw)):
        expected = outcome(_records_json_reference, Records(view))
        assert outcome(records_json, Records(view)) == expected
        texts.add(expected[1] if expected[0] == "text" else None)
    # In place, as the JSON decoders call it: reads past the field see the frame's bytes (or,
    # with a field that fills its buffer, IndexError), and either way the answer is the view's.
    in_view = outcome(_records_json_reference, Records(memoryview(framed)[3 : 3 + len(raw)]))
    for buf, start in ((framed, 3), (raw, 0), (b"\x01" * 5 + raw + b"\x01\x00" * 40, 5)):
        assert outcome(lambda r, b=buf, s=start: records_json_at(b, s, s + len(raw)), None) == in_view
    assert outcome(lambda r: records_json_at(bytearray(framed), 3, 3 + len(raw)), None) == in_view
    assert len(texts) == 1 or not any(t and not t.startswith('{"undecodable') for t in texts)
    return texts.pop() if len(texts) == 1 else None


def fast(raw: bytes) -> str | None:
    """The one-pass writer's own answer; None where it leaves the field to the reference."""
    try:
        return _fused(raw, 0, len(raw))
    except Exception:
        return None


def assert_fast_and_same(raw: bytes) -> None:
    """For valid magic-2 input: the one-pass writer answers by itself, and as the spec says."""
    text = assert_same(raw)
    assert text is not None and not text.startswith('{"undecodable_records"')
    assert fast(raw) == text == spec(Records(raw))


# --- strategies ----------------------------------------------------------------------------

# Lengths of 8 KiB and more take three-byte varints; the inline reads stop at two.
_LONG = (b"\x00\x7f\xff" * 2731, bytes(range(256)) * 32)
blobs = st.one_of(st.none(), st.binary(max_size=70), st.sampled_from(_LONG))
# Few distinct keys, so records repeat them (the writer keeps the last key's JSON).
header_keys = st.one_of(st.sampled_from(["", "0", "trace", '\u00e9\x00"\\\n\u2028']), st.text(max_size=10))
headers = st.lists(st.tuples(header_keys, blobs), max_size=4)
timestamps = st.integers(-(1 << 40), 1 << 40)


@st.composite
def v2_batch(draw: st.DrawFn) -> bytes:
    """One batch: offsets with gaps, timestamps far from the base, any codec and attribute."""
    base_offset = draw(st.integers(0, 1 << 50))
    base_ts = draw(timestamps)
    rows = []
    offset = base_offset
    for _ in range(draw(st.integers(0, 6))):
        offset += draw(st.sampled_from([1, 1, 1, 2, 70, 9000, 1 << 20]))
        rows.append(
            {
                "key": draw(blobs),
                "value": draw(blobs),
                "headers": draw(headers),
                "timestamp": base_ts + draw(st.sampled_from([0, 1, 63, 64, 9000, -1, -(1 << 35), 1 << 39])),
                "offset": offset,
            }
        )
    log_append = draw(st.booleans())
    return build_record_batch(
        rows,
        base_offset=base_offset + 1,
        base_timestamp=base_ts,
        compression=draw(st.sampled_from(["none", "none", "gzip", "snappy", "lz4", "zstd"])),
        timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME,
        max_timestamp=draw(timestamps) if log_append else None,
        is_control=draw(st.booleans()),
        is_transactional=draw(st.booleans()),
        producer_id=draw(st.sampled_from([-1, 0, 4000, (1 << 63) - 1])),
        producer_epoch=draw(st.sampled_from([-1, 0, 7, 32767])),
        base_sequence=draw(st.sampled_from([-1, 0, 41, (1 << 31) - 1])),
        partition_leader_epoch=draw(st.sampled_from([-1, 0, 12])),
    )


@st.composite
def legacy_batch(draw: st.DrawFn) -> bytes:
    """Magic 0 or 1 message sets, plain or gzip-wrapped, as kafka-python's producer writes them."""
    magic = draw(st.sampled_from([0, 1]))
    builder = MemoryRecordsBuilder(
        magic, draw(st.sampled_from([0, 1])), 1 << 20, offset=draw(st.integers(0, 99))
    )
    for _ in range(draw(st.integers(1, 4))):
        key, value = draw(st.none() | st.binary(max_size=30)), draw(st.none() | st.binary(max_size=30))
        assert builder.append(draw(st.integers(0, 1 << 41)), key, value, None) is not None
    builder.close()
    return bytes(builder.buffer())


v2_fields = st.lists(v2_batch(), max_size=3).map(b"".join)
any_fields = st.lists(st.one_of(v2_batch(), v2_batch(), legacy_batch()), max_size=3).map(b"".join)


# --- valid input ---------------------------------------------------------------------------


@given(raw=v2_fields)
@PROPERTY
def test_valid_v2_fields_take_the_fast_path_and_match(raw: bytes) -> None:
    assert_fast_and_same(raw)


@given(raw=any_fields)
@PROPERTY
def test_mixed_formats_match_the_reference(raw: bytes) -> None:
    text = assert_same(raw)
    if text is not None and not text.startswith('{"undecodable'):
        assert text == spec(Records(raw))  # legacy messages carry their own header fields


@given(raw=v2_fields.filter(bool), cut=st.integers(1, 1 << 20))
@PROPERTY
def test_a_partial_trailing_batch_is_left_out_as_before(raw: bytes, cut: int) -> None:
    """Fetch responses end mid-batch at max_bytes: the whole batches before it are the records."""
    complete = raw[: len(raw) - 61]  # ends inside the last batch, at the latest in its header
    for tail in (complete[: cut % (len(complete) + 1)], raw[:-1], raw[:11], raw[:16]):
        text = assert_same(tail)
        if text is not None and not text.startswith('{"undecodable'):
            assert fast(tail) == text  # a partial tail is no reason to leave the fast path


def test_shapes_the_fast_path_writes_itself() -> None:
    rows: list[Any] = [
        (None, None),
        (b"", b""),
        (b"k", None, [("h", None)]),
        (None, b"v", [("a", b""), ("b", None), ("\u00fc\u00f1\u00ee", b"\x00\xff")]),
        (b"k" * 9000, b"v" * 20000, [("x" * 70, b"y" * 9000)]),
        # One header, then several, then the first key again: the kept key JSON must follow.
        (b"k", b"v", [("a", b"1")]),
        (b"k", b"v", [("b", b"2"), ("c", None)]),
        (b"k", b"v", [("a", b"3")]),
        (b"k", b"v", [("c", b"4")]),
    ]
    for ts_type in (CREATE_TIME, LOG_APPEND_TIME):
        batch = build_record_batch(rows, base_offset=(1 << 62), base_timestamp=-(1 << 61),
                                   timestamp_type=ts_type, max_timestamp=(1 << 62))  # fmt: skip
        assert_fast_and_same(batch)
        assert_fast_and_same(batch + build_record_batch([], base_offset=3) + batch)
    assert_fast_and_same(b"")
    assert json.loads(records_json(Records(build_record_batch(rows[:1]))))[0]["key"] is None


def test_one_producers_batches_share_a_template_not_its_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path keeps each producer's batch member with the base offset and base sequence
    left open: batches of one producer (one template) still show their own two numbers, also
    when the kept templates are dropped at their bound between two batches."""
    batches = [
        build_record_batch([(b"k", b"v", [])], base_offset=offset, base_timestamp=5, producer_id=4000,
                           producer_epoch=7, base_sequence=sequence, partition_leader_epoch=12)
        for offset, sequence in ((0, 0), (1, 1), (77, 2), (1 << 40, 41))
    ]  # fmt: skip
    raw = b"".join(batches)
    assert_fast_and_same(raw)
    monkeypatch.setattr(records_json_module, "_TAILS_KEPT", 1)
    records_json_module._TAILS.clear()
    assert_fast_and_same(raw + b"".join(batches[:1]) + build_record_batch([(b"k", b"v", [])], producer_id=1))
    assert len(records_json_module._TAILS) == 1


def test_transaction_markers_and_producer_fields() -> None:
    """A transaction's batch, its COMMIT and an ABORT: each record names its producer and batch,
    and a marker reads as one (type and coordinator epoch), not as an opaque key and value."""
    data = build_record_batch([(b"k", b"v"), (None, b"w")], base_offset=10, producer_id=4000,
                              producer_epoch=3, base_sequence=41, is_transactional=True,
                              partition_leader_epoch=5, compression="lz4")  # fmt: skip
    commit = end_txn_marker_batch(producer_id=4000, producer_epoch=3, committed=True, coordinator_epoch=9,
                                  base_offset=12, leader_epoch=5, timestamp_ms=1000,
                                  timestamp_type=CREATE_TIME)  # fmt: skip
    abort = end_txn_marker_batch(producer_id=4000, producer_epoch=4, committed=False, coordinator_epoch=10,
                                 base_offset=13, leader_epoch=5, timestamp_ms=1001,
                                 timestamp_type=CREATE_TIME)  # fmt: skip
    raw = data + commit + abort
    assert_fast_and_same(raw)
    rows = json.loads(records_json(Records(raw)))
    assert [r["batch"]["base_sequence"] for r in rows] == [41, 41, -1, -1]
    assert [r["batch"]["producer_epoch"] for r in rows] == [3, 3, 3, 4]
    assert {r["batch"]["producer_id"] for r in rows} == {4000}
    assert [r["batch"]["codec"] for r in rows] == ["lz4", "lz4", "none", "none"]
    assert all(r["batch"]["transactional"] for r in rows)
    assert [r["batch"]["control"] for r in rows] == [False, False, True, True]
    assert [r["control"] for r in rows] == [
        None, None,
        {"version": 0, "type_id": 1, "type": "COMMIT", "coordinator_epoch": 9},
        {"version": 0, "type_id": 0, "type": "ABORT", "coordinator_epoch": 10},
    ]  # fmt: skip
    assert rows[2]["batch"]["partition_leader_epoch"] == 5 and rows[2]["offset"] == 12


def test_legacy_messages_show_their_own_fields() -> None:
    builder = MemoryRecordsBuilder(1, 1, 1 << 20, offset=0)  # magic 1, gzip
    builder.append(1_500_000_000_000, b"k", b"v", None)
    builder.close()
    (row,) = json.loads(records_json(Records(bytes(builder.buffer()))))
    batch = row["batch"]
    shown = (batch["magic"], batch["codec"], batch["timestamp_type"], batch["attributes"])
    assert shown == (1, "gzip", "CreateTime", 1)
    assert row["control"] is None and "producer_id" not in batch
    builder = MemoryRecordsBuilder(0, 0, 1 << 20, offset=0)
    builder.append(0, None, b"v", None)
    builder.close()
    (row,) = json.loads(records_json(Records(bytes(builder.buffer()))))
    assert (row["batch"]["magic"], row["batch"]["codec"], row["batch"]["timestamp_type"]) == (
        0, "none", "NoTimestampType")  # fmt: skip


# --- broken input ------------------------------------------------------------------------


@given(
    raw=any_fields.filter(bool),
    edits=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 1 << 20),
    splice=st.binary(max_size=3),
)
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_fields_give_the_reference_text_or_error(
    raw: bytes, edits: list[tuple[int, int]], cut: int, splice: bytes
) -> None:
    data = bytearray(raw)
    for where, value in edits:
        data[where % len(data)] = value
    if splice:  # shift everything after a point: lengths and varints then disagree
        at = cut % len(data)
        data[at:at] = splice
    elif cut & 1:
        data = data[: cut % (len(data) + 1)]
    assert_same(bytes(data))


def _record_bytes_edits() -> list[bytes]:
    """Single-record batches whose record bytes lie in each way the decoder checks.

    0x03 is a length of -2, 0x01 null, 0x00 empty, 0x80 and 0xFF start longer varints.
    """
    cases = []
    for rows in ([(b"kk", b"vv", [("h", b"x")])], [(None, None, [("h", None)])], [(None, b"", [])]):
        good = build_record_batch(rows, base_timestamp=5)
        payload = good[61:]
        for at in range(len(payload)):
            for value in (0x00, 0x01, 0x03, 0x7F, 0x80, 0xFF):
                body = bytearray(payload)
                body[at] = value
                cases.append(_reframe(good, bytes(body)))
    # A header key length of -2 would step back onto the header count and come out even.
    cases.append(_reframe(good, b"\x0e\x00\x00\x00\x01\x01\x02\x03"))
    return cases


def _reframe(batch: bytes, payload: bytes) -> bytes:
    head = bytearray(batch[:61])
    struct.pack_into(">i", head, 8, 49 + len(payload))
    return bytes(head) + payload


@pytest.mark.parametrize("raw", _record_bytes_edits())
def test_every_single_byte_lie_in_a_record(raw: bytes) -> None:
    assert_same(raw)


@given(data=st.binary(max_size=300))
@PROPERTY
def test_random_bytes(data: bytes) -> None:
    assert_same(data)


@given(tail=st.binary(max_size=80), count=st.integers(-3, 40), attributes=st.integers(0, 0x7F))
@PROPERTY
def test_random_bytes_behind_a_valid_header(tail: bytes, count: int, attributes: int) -> None:
    head = bytearray(build_record_batch([])[:61])
    struct.pack_into(">i", head, 8, 49 + len(tail))
    struct.pack_into(">h", head, 21, attributes)
    struct.pack_into(">i", head, 57, count)
    assert_same(bytes(head) + tail)


def test_undecodable_fields_keep_the_reference_error_text() -> None:
    batch = build_record_batch([(b"k", b"v", [("h", b"x")])] * 4)
    lying = batch[:57] + struct.pack(">i", 9) + batch[61:]  # declares 9 records, holds 4
    for raw in (lying, batch + lying):
        text = records_json(Records(raw))
        assert text == _records_json_reference(Records(raw))
        assert set(json.loads(text)) == {"undecodable_records", "error"}
        assert fast(raw) is None


def test_a_header_key_that_is_not_utf8_reads_as_java_reads_it() -> None:
    """Kafka keeps a header's key as bytes and a Java reader's Header.key() gives U+FFFD for what is
    not UTF-8: the records decode (they were an undecodable field), on both renderers."""
    batch = build_record_batch([(b"k", b"v", [("h", b"x")])] * 4)
    bad_key = batch.replace(b"\x02h", b"\x02\xff")
    text = records_json(Records(bad_key))
    assert text == _records_json_reference(Records(bad_key))
    assert [h["key"] for record in json.loads(text) for h in record["headers"]] == ["\ufffd"] * 4
    assert fast(bad_key) == text  # the one-pass writer too


def test_a_compression_bomb_is_an_undecodable_field_not_a_dead_decoder() -> None:
    """A capture's batch whose zstd payload claims 1 GiB in 32 KB: the decoder inflates at most
    MAX_INFLATED_BYTES of it and marks its records field undecodable, saying why, as any field it
    cannot read (docs/capture.md); the decoder goes on to the next field."""
    compressor = cramjam.zstd.Compressor(level=3)
    for _ in range(1024):
        compressor.compress(bytes(1 << 20))
    bomb = bytearray(build_record_batch([(b"k", b"v")], compression="zstd")[:61]) + bytes(compressor.finish())
    struct.pack_into(">i", bomb, 8, len(bomb) - 12)
    for raw in (bytes(bomb), build_record_batch([(b"k", b"v")]) + bytes(bomb)):
        at = len(raw) - len(bomb) + 61  # where the bomb's payload starts in the field
        assert json.loads(records_json(Records(raw))) == {
            "undecodable_records": base64.b64encode(raw).decode(),
            "error": f"zstd payload inflates beyond the limit of {MAX_INFLATED_BYTES} bytes "
                     f"[field records, byte offset {at}]"}
    good = build_record_batch([(b"k", b"v")], compression="zstd")
    assert json.loads(records_json(Records(good)))[0]["value"] == base64.b64encode(b"v").decode()


# --- real captures -----------------------------------------------------------------------


def _records_fields(raw_tree: Any, full_tree: Any) -> list[tuple[bytes, Any]]:
    """(raw bytes, decoded JSON) of every records field, pairing the two decodings of one body."""
    found = []
    if isinstance(raw_tree, dict):
        for name, value in raw_tree.items():
            if name == "records" and isinstance(value, str):
                found.append((base64.b64decode(value), full_tree[name]))
            else:
                found += _records_fields(value, full_tree[name])
    elif isinstance(raw_tree, list):
        for a, b in zip(raw_tree, full_tree, strict=True):
            found += _records_fields(a, b)
    return found


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_every_records_field_of_the_real_captures(path: Path) -> None:
    fields = []
    for raw_row, full_row in zip(
        decode_capture(path, decode_records=False), decode_capture(path), strict=True
    ):
        for column in ("request", "response"):
            if raw_row[column] is not None:
                fields += _records_fields(json.loads(raw_row[column]), json.loads(full_row[column]))
    for raw, decoded in fields:
        text = assert_same(raw)
        assert text is not None and json.loads(text) == decoded
    if path.name.startswith("00-produce"):  # the fetch responses captured hold no partitions
        assert fields and any(json.loads(records_json(Records(raw))) for raw, _ in fields)
