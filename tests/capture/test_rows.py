"""kafkapy.capture.rows: exchanges as rows (statuses, JSON bodies, records),
server-initiated coordinator requests, summaries, and hostile input."""

from __future__ import annotations

import base64
import io
import json
import shutil
import struct
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.capture import PcapWriter, TcpFlow
from kafkapy.capture.rows import COLUMNS, STATUSES, decode_capture, rows_to_arrow, to_json
from kafkapy.capture.summary import Summary
from kafkapy.protocol import build_record_batch, encode_request, encode_response
from tests.protocol.test_records_json import spec as records_spec

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
CAPTURE_FILES = sorted(CAPTURES.glob("*.pcap"))

# (file, api_key, api_version, correlation_id, client_id) of each row, in output order
EXPECTED = {
    "00-produce-v2.pcap": [(0, 2, 1, "console-producer")],
    "00-produce-v7-sw8.pcap": [(0, 7, 1, "kafka-python-producer-1")],
    "00-produce-v9.pcap": [(0, 9, 47, "console-producer")],
    "01-fetch-v12-ok.pcap": [(1, 12, 15603, "consumer-console-consumer-8919-1")],
    "01-fetch-v12-perf.pcap": [(1, 12, 20, "consumer-console-consumer-84107-1")],
    "01-fetch-v12-unknown.pcap": [(1, 12, 20, "consumer-console-consumer-84107-1")],
    "11-join-group-v7.pcap": [(11, 7, 120, "consumer-zzzz12-1")],
    "13-leave-group-v4.pcap": [(13, 4, 201, "consumer-zzzz12-1")],
    "14-sync-group-v5.pcap": [(14, 5, 120, "consumer-zzzz12-1")],
    "18-api-versions-v3.pcap": [(18, 3, 2, "adminclient-1")],
    "mixed-with-unsupported.pcap": [
        (8, 8, 15551977, "consumer-frauddetectionservice-1"),
        (12, 4, 15551978, "consumer-frauddetectionservice-1"),
        (1, 13, 15551976, "consumer-frauddetectionservice-1"),
    ],
}


@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_real_captures_decode_to_rows(path: Path) -> None:
    rows = list(decode_capture(path))
    assert [(r["api_key"], r["api_version"], r["correlation_id"], r["client_id"]) for r in rows] == EXPECTED[
        path.name
    ]
    for r in rows:
        assert set(r) == set(COLUMNS)
        assert r["status"] == "ok" and r["reason"] is None
        assert json.loads(r["request"]) and json.loads(r["response"]) is not None
        assert r["latency_ms"] is not None and r["latency_ms"] >= 0
        assert r["request_bytes"] > 8 and r["response_bytes"] > 4
        assert r["capture"] == str(path)


def test_produce_records_are_decoded() -> None:
    (row,) = decode_capture(CAPTURES / "00-produce-v2.pcap")
    body = json.loads(row["request"])
    (record,) = body["topic_data"][0]["partition_data"][0]["records"]
    assert base64.b64decode(record["value"]) == b"Message without compression"
    assert record["key"] is None and record["offset"] == 0 and record["timestamp"] > 0
    assert row["topics"] == ["topic2"]
    (raw,) = decode_capture(CAPTURES / "00-produce-v2.pcap", decode_records=False)
    records = json.loads(raw["request"])["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, str) and base64.b64decode(records)[:8] == b"\x00" * 8


def test_records_headers_survive() -> None:
    (row,) = decode_capture(CAPTURES / "00-produce-v7-sw8.pcap")
    records = json.loads(row["request"])["topic_data"][0]["partition_data"][0]["records"]
    assert records and all("headers" in r for r in records)
    assert any(r["headers"] for r in records)  # the sw8 tracing header


def test_top_level_error_code() -> None:
    (row,) = decode_capture(CAPTURES / "11-join-group-v7.pcap")
    assert row["error_code"] == json.loads(row["response"])["error_code"]
    assert isinstance(row["error_code"], int)
    (row,) = decode_capture(CAPTURES / "00-produce-v2.pcap")
    assert row["error_code"] is None  # Produce has no top-level error code


def test_to_json_types() -> None:
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert json.loads(to_json({"b": b"\x00\xff", "u": u, "n": None})) == {
        "b": "AP8=", "u": str(u), "n": None
    }  # fmt: skip


def _reference_json(value: Any) -> str:
    """to_json as json.dumps with Record.to_dict() (and the batch and control members records_json
    adds, as tests/protocol/test_records_json.py defines them) would write it: what the direct
    writer must match."""
    from kafkapy.protocol import Records

    def default(v: Any) -> Any:
        if isinstance(v, bytes):
            return base64.b64encode(v).decode("ascii")
        if isinstance(v, Records):  # each record's dict with its batch header and control marker
            return json.loads(records_spec(v))
        if isinstance(v, uuid.UUID):
            return str(v)
        raise TypeError(v)

    return json.dumps(value, default=default, separators=(",", ":"), ensure_ascii=False)


def test_records_json_matches_the_dict_form() -> None:
    from kafkapy.protocol import Records

    batch = build_record_batch(
        [(None, b"v"), (b"k", None), (b"", b"\x00\xff" * 40),
         (b"k2", b"v2", [("h\u00e9\"\\\n", b"x"), ("null-value", None), ("", b"")])],
        base_offset=7, base_timestamp=1_767_225_600_000,
    )  # fmt: skip
    records = Records(batch + build_record_batch([(b"a", b"b")], base_offset=11))
    marker_like = "\x00" + "0" * 16 + ":0\x00"  # the shape of the splice marker, wrong nonce
    body = {"topics": [{"name": "t\u00e9", "records": records, "other": records}], "s": marker_like,
            "empty": Records(b"")}  # fmt: skip
    assert to_json(body) == _reference_json(body)
    assert json.loads(to_json(body))["s"] == marker_like
    broken = Records(batch[:57] + b"\x00\x00\x00\x09" + batch[61:])  # declares 9 records, holds 4
    decoded = json.loads(to_json({"records": broken}))["records"]
    assert set(decoded) == {"undecodable_records", "error"}


def _records_strategy() -> Any:
    from kafkapy.protocol import Records

    blob = st.one_of(st.none(), st.binary(max_size=40))
    header = st.tuples(st.text(max_size=8), blob)
    record = st.tuples(blob, blob, st.lists(header, max_size=3))
    batch = st.builds(
        lambda rs, base: build_record_batch(rs, base_offset=base, base_timestamp=1_767_225_600_000),
        st.lists(record, min_size=1, max_size=4), st.integers(0, 2**40),
    )  # fmt: skip
    return st.lists(batch, max_size=3).map(lambda bs: Records(b"".join(bs)))


_json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False),
    st.text(), st.binary(max_size=20), st.uuids(), _records_strategy(),
)  # fmt: skip
_json_body = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=6), _json_body, max_size=5))
def test_property_to_json_matches_the_reference(body: dict[str, Any]) -> None:
    """The body writer (C encoder built once, records written directly) against plain json.dumps."""
    assert to_json(body) == _reference_json(body)


# --- synthetic captures ------------------------------------------------------------------


def _pcap(conversation: list[tuple[bool, bytes]], *, drop: set[int] = frozenset(), close: bool = True,
          port: int = 9092, snaplen: int | None = None) -> bytes:  # fmt: skip
    buf = io.BytesIO()
    w = PcapWriter(buf) if snaplen is None else PcapWriter(buf, snaplen=snaplen)
    flow = TcpFlow(("10.0.0.1", 40000), ("10.0.0.2", port), mss=200)
    ts = 1_700_000_000.0
    for t, pkt in flow.handshake(ts):
        w.write(pkt, t)
    for i, (from_client, data) in enumerate(conversation):
        ts += 0.002
        for j, (t, pkt) in enumerate(flow.send(from_client, struct.pack(">i", len(data)) + data, ts)):
            if (i, j) not in drop:
                w.write(pkt, t)
    if close:
        for t, pkt in flow.close(ts + 0.001):
            w.write(pkt, t)
    w.close()
    return buf.getvalue()


def _rows(data: bytes, **kw: Any) -> list[dict[str, Any]]:
    return list(decode_capture(io.BytesIO(data), capture="mem", **kw))


META_REQ = encode_request(3, 12, 1, "c1", {"topics": None, "allow_auto_topic_creation": False})
META_RESP = encode_response(
    3, 12, 1,
    {"brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}], "cluster_id": "x",
     "controller_id": 1, "topics": []},
)  # fmt: skip


def test_statuses_of_a_synthetic_conversation() -> None:
    produce = encode_request(
        0, 9, 2, "c1",
        {"transactional_id": None, "acks": 0, "timeout_ms": 100,
         "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": build_record_batch(
             [(b"k", b"v", [("h", b"1")])])}]}]},
    )  # fmt: skip
    conversation = [
        (True, META_REQ), (False, META_RESP),
        (True, produce),  # acks=0: never answered
        (True, encode_request(3, 12, 3, "c1", {"topics": None, "allow_auto_topic_creation": False})),
        (False, struct.pack(">i", 3)),  # the empty response
        (False, encode_response(18, 3, 77, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0})),
    ]  # fmt: skip
    rows = _rows(_pcap(conversation))
    statuses = [(r["api_name"], r["status"]) for r in rows]
    assert statuses == [
        ("Metadata", "ok"), ("Produce", "unmatched_request"), ("Metadata", "empty_response"),
        (None, "unmatched_response"),
    ]  # fmt: skip
    produce_row = rows[1]
    records = json.loads(produce_row["request"])["topic_data"][0]["partition_data"][0]["records"]
    assert base64.b64decode(records[0]["key"]) == b"k"
    assert records[0]["headers"] == [{"key": "h", "value": base64.b64encode(b"1").decode()}]
    assert produce_row["response"] is None and produce_row["latency_ms"] is None
    assert all(r["status"] in STATUSES for r in rows)
    assert rows[0]["src"] == "10.0.0.1:40000" and rows[0]["dst"] == "10.0.0.2:9092"
    table = rows_to_arrow(rows)
    assert table.num_rows == len(rows) and table.schema.names == list(COLUMNS)


def test_unanswered_reason_tells_a_hang_up_from_the_capture_ending() -> None:
    conversation = [(True, META_REQ), (False, META_RESP), (True, META_REQ)]
    closed = _rows(_pcap(conversation, close=True))[-1]
    cut = _rows(_pcap(conversation, close=False))[-1]
    assert closed["status"] == cut["status"] == "unmatched_request"
    assert closed["reason"] == "the connection ended (closed with FIN) before a response"
    assert cut["reason"] == "no response in the capture"


def test_an_unanswered_request_says_when_the_server_stream_lost_bytes_after_it() -> None:
    """Request 2's response is lost (a segment the client acknowledges, so the loss is proven):
    its row says the response may have been in the gap, as tshark's "previous segment not captured"
    would let an analyst see. An acks=0 Produce with no loss after it says only that no response
    is in the capture, and neither does a request sent after the gap."""
    empty_metadata = {"brokers": [], "cluster_id": "x", "controller_id": 1, "topics": []}
    produce = encode_request(
        0, 9, 4, "c1",
        {"transactional_id": None, "acks": 0, "timeout_ms": 100,
         "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": None}]}]},
    )  # fmt: skip
    conversation = [
        (True, META_REQ), (False, META_RESP),
        (True, encode_request(3, 12, 2, "c1", {"topics": None, "allow_auto_topic_creation": False})),
        (False, encode_response(3, 12, 2, empty_metadata)),
        (True, encode_request(3, 12, 3, "c1", {"topics": None, "allow_auto_topic_creation": False})),
        (False, encode_response(3, 12, 3, empty_metadata)),
        (True, produce),
    ]  # fmt: skip
    rows = _rows(_pcap(conversation, drop={(3, 0)}, close=False))
    by_id = {r["correlation_id"]: r for r in rows if r["correlation_id"] is not None}
    assert [r["status"] for r in rows if r["correlation_id"] is None] == ["gap"]
    assert (by_id[1]["status"], by_id[3]["status"]) == ("ok", "ok")
    assert by_id[2]["status"] == "unmatched_request"
    assert by_id[2]["reason"].startswith("no response in the capture; the capture lost ")
    assert "bytes of the server stream (at offset " in by_id[2]["reason"]
    assert by_id[2]["reason"].endswith("after the request: the response may have been among them")
    assert by_id[4]["status"] == "unmatched_request"
    assert by_id[4]["reason"] == "no response in the capture"


def test_lost_segments_give_gap_and_truncated_rows() -> None:
    big = encode_request(3, 12, 2, "c1", {"topics": [{"topic_id": uuid.UUID(int=0), "name": "t" * 600}],
                                           "allow_auto_topic_creation": False})  # fmt: skip
    conversation = [(True, META_REQ), (False, META_RESP), (True, big), (False, META_RESP)]
    rows = _rows(_pcap(conversation, drop={(2, 1)}))
    assert rows[0]["status"] == "ok"
    assert "gap" in {r["status"] for r in rows[1:]}
    for r in rows:
        assert r["status"] in STATUSES


def test_frames_cut_by_the_snap_length_are_truncated_not_gaps() -> None:
    """tcpdump -s 128: every packet is cut at 128 bytes. The capture lost nothing (tshark marks
    such packets "Packet size limited during capture", not "previous segment not captured"), so a
    cut frame is ``truncated``, as documented, and the reason names the snap length."""
    big = encode_request(3, 12, 2, "c1", {"topics": [{"topic_id": uuid.UUID(int=0), "name": "t" * 150}],
                                           "allow_auto_topic_creation": False})  # fmt: skip
    answer = encode_response(3, 12, 2, {"brokers": [], "cluster_id": "x", "controller_id": 1, "topics": []})
    conversation = [(True, META_REQ), (False, META_RESP), (True, big), (False, answer)]
    rows = _rows(_pcap(conversation, snaplen=128))
    assert [(r["correlation_id"], r["status"]) for r in rows] == [(1, "ok"), (2, "truncated")]
    assert rows[1]["reason"].startswith("request frame truncated (snap length, ")


def test_a_guessed_frame_start_the_connection_never_completes_is_no_row() -> None:
    """A capture that starts in the tail of a request: hunting for a frame start in it can take
    a run of zeros for a request header (here: 1 MiB, Produce v2, correlation id 0, empty client
    id). If the connection then closes before that "frame" completes, it never was one (no client
    sends half a request and hangs up), so it must not become a phantom Produce row; tshark shows
    nothing for those bytes either."""
    tail = struct.pack(">ihhih", 1_048_580, 0, 2, 0, 0) + bytes(17)  # the last 29 bytes of a request
    answer = encode_response(3, 12, 11, {"brokers": [], "cluster_id": "x", "controller_id": 1, "topics": []})
    flow = TcpFlow(("10.0.0.1", 40000), ("10.0.0.2", 9092))
    packets = flow.send(True, tail, 1.0) + flow.send(False, struct.pack(">i", len(answer)) + answer, 1.1)
    packets += flow.close(1.2)
    buf = io.BytesIO()
    with PcapWriter(buf) as w:
        for ts, frame in packets:
            w.write(frame, ts)
    rows = _rows(buf.getvalue())
    assert [(r["api_name"], r["correlation_id"], r["status"]) for r in rows] == [
        (None, 11, "unmatched_response")
    ]


def _midstream(parts: list[tuple[bool, bytes]]) -> list[dict[str, Any]]:
    """A capture that joins a connection mid-stream: no handshake, each part its own segments."""
    flow = TcpFlow(("10.0.0.1", 40000), ("10.0.0.2", 9092), mss=100)
    packets = []
    for i, (from_client, data) in enumerate(parts):
        packets += flow.send(from_client, data, 1.0 + i / 100)
    packets += flow.close(2.0)
    buf = io.BytesIO()
    with PcapWriter(buf) as w:
        for ts, frame in packets:
            w.write(frame, ts)
    return _rows(buf.getvalue())


def _framed(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def _metadata(corr: int) -> tuple[bytes, bytes]:
    request = encode_request(3, 12, corr, "c1", {"topics": None, "allow_auto_topic_creation": False})
    body = {"brokers": [], "cluster_id": "x", "controller_id": 1, "topics": []}
    return _framed(request), _framed(encode_response(3, 12, corr, body))


def test_a_mid_stream_start_in_a_request_tail_finds_the_requests_after_it() -> None:
    """The capture starts in the tail of a request whose bytes read as request headers: one that
    needs 3,854 bytes to judge (a client id of length 0x0f00), and large ones. The requests after
    it, each a whole frame followed by another, are the better guess; before, hunting waited on
    the first, the connection closed, and every exchange after the start was lost."""
    tail = b"\x03\x00\x00\x00" + bytes(8) + b"\x0f\x00" + bytes(20) + b"\x00\x01\x00\x00" + bytes(21)
    (req7, resp7), (req8, resp8), (req9, resp9) = _metadata(7), _metadata(8), _metadata(9)
    rows = _midstream([(True, tail + req7), (False, resp7), (True, req8), (False, resp8), (True, req9),
                       (False, resp9)])  # fmt: skip
    assert [(r["correlation_id"], r["status"]) for r in rows] == [(7, "ok"), (8, "ok"), (9, "ok")]


def test_a_mid_stream_start_in_a_response_finds_the_responses_after_it() -> None:
    """The broker's first captured bytes are the middle of a response and read as a 65-byte
    response header (correlation id 0) before any request is seen; the responses to the requests
    that follow must still pair."""
    middle = b"\x00\x00\x00\x41\x00\x00\x00\x00\x00\x42\x00\x00\x00\x02\x00\x44" + bytes(12)
    (req2, resp2), (req3, resp3), (req4, resp4) = _metadata(2), _metadata(3), _metadata(4)
    rows = _midstream([(False, middle), (True, req2), (False, resp2), (True, req3), (False, resp3),
                       (True, req4), (False, resp4)])  # fmt: skip
    paired = [(r["correlation_id"], r["status"]) for r in rows if r["status"] == "ok"]
    assert paired == [(2, "ok"), (3, "ok"), (4, "ok")]


def test_undecodable_request_body() -> None:
    bad = META_REQ[:14] + b"\xff\xff\xff\xff" + META_REQ[18:]
    rows = _rows(_pcap([(True, bad), (False, META_RESP)]))
    assert [r["status"] for r in rows] == ["undecodable"]
    assert rows[0]["reason"] and rows[0]["api_key"] == 3


def test_server_initiated_coordinator_requests() -> None:
    """Ping/StopFetcher/StartFetcher go broker -> client and are answered by the client."""
    ping = encode_request(1002, 0, 500, "coordinator", {"consumer_id": "c-1", "num_retries": 0})
    pong = encode_response(1002, 0, 500, {"request_type_id": 1002, "error_code": 0, "consumer_id": "c-1"})
    stop = encode_request(1003, 0, 501, "coordinator", {"consumer_id": "c-1"})
    conversation = [
        (True, META_REQ), (False, META_RESP),
        (False, ping), (True, pong),
        (False, stop),  # never answered
    ]  # fmt: skip
    rows = _rows(_pcap(conversation))
    assert [(r["api_name"], r["status"]) for r in rows] == [
        ("Metadata", "ok"), ("Ping", "ok"), ("StopFetcher", "unmatched_request")
    ]  # fmt: skip
    ping_row = rows[1]
    assert ping_row["src"] == "10.0.0.2:9092" and ping_row["dst"] == "10.0.0.1:40000"
    assert ping_row["correlation_id"] == 500 and ping_row["client_id"] == "coordinator"
    assert json.loads(ping_row["request"]) == {"consumer_id": "c-1", "num_retries": 0}
    assert json.loads(ping_row["response"])["consumer_id"] == "c-1"
    assert ping_row["error_code"] == 0


def test_summary_from_rows() -> None:
    rows = [r for p in CAPTURE_FILES for r in decode_capture(p)]
    s = Summary().add_all(rows)
    assert s.rows == 13 and s.per_api["Fetch"] == 4
    assert s.per_client["consumer-zzzz12-1"] == 3
    assert s.per_topic["zqy-test"] == 2 and s.bytes_per_topic["zqy-test"] > 0
    assert s.latency["(all)"][100.0] == pytest.approx(13000.0)
    table = s.table()
    assert "requests per client" in table
    # one request is "1 request" (it read "1 requests"), two are "2 requests"
    assert " 1 request\n" in table and " 1 requests" not in table and " 2 requests\n" in table


# --- hostile input ---------------------------------------------------------------------------


def _never_crashes(data: bytes) -> list[dict[str, Any]]:
    rows = _rows(data)
    for r in rows:
        assert r["status"] in STATUSES
        to_json(r)
    return rows


def test_random_bytes_are_one_undecodable_row() -> None:
    rows = _never_crashes(b"this is not a capture at all" * 10)
    assert [r["status"] for r in rows] == ["undecodable"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4000))
def test_property_random_bytes(data: bytes) -> None:
    _never_crashes(data)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(CAPTURE_FILES), st.floats(0, 1), st.integers(0, 255), st.integers(0, 1 << 20))
def test_property_truncated_and_corrupted_real_captures(path: Path, cut: float, byte: int, at: int) -> None:
    data = bytearray(path.read_bytes())
    if data:
        data[at % len(data)] = byte
    _never_crashes(bytes(data[: int(len(data) * cut)]))
    _never_crashes(bytes(data))


@settings(max_examples=100, deadline=None)
@given(st.integers(-(1 << 31), (1 << 31) - 1), st.binary(max_size=64), st.booleans())
def test_property_huge_declared_frame_sizes(size: int, tail: bytes, from_client: bool) -> None:
    buf = io.BytesIO()
    w = PcapWriter(buf)
    flow = TcpFlow(("10.0.0.1", 40000), ("10.0.0.2", 9092))
    for t, pkt in flow.handshake(1.0):
        w.write(pkt, t)
    for t, pkt in flow.send(True, struct.pack(">i", len(META_REQ)) + META_REQ, 1.1):
        w.write(pkt, t)
    for t, pkt in flow.send(from_client, struct.pack(">i", size) + tail, 1.2):
        w.write(pkt, t)
    w.close()
    _never_crashes(buf.getvalue())


def test_huge_declared_pcap_record_length() -> None:
    data = bytearray(_pcap([(True, META_REQ), (False, META_RESP)]))
    struct.pack_into("<I", data, 24 + 8, 0xFFFFFFF0)  # first record's captured length
    rows = _never_crashes(bytes(data))
    assert rows[-1]["status"] == "undecodable"


# --- header-only rows and the columnar builder -------------------------------------------------

_BODY_COLUMNS = ("request", "response", "error_code", "errors", "topics")


def _bench_capture(tmp_path: Path) -> Path:
    from benchmarks.capture import generate

    paths, _ = generate(tmp_path, 1, files=1)
    return paths[0]


@pytest.mark.parametrize("path", [*CAPTURE_FILES, None], ids=lambda p: p.name if p else "bench-mix")
def test_header_only_rows_are_the_full_rows_without_bodies(path: Path | None, tmp_path: Path) -> None:
    path = path or _bench_capture(tmp_path)
    full = list(decode_capture(path))
    headers = list(decode_capture(path, bodies=()))
    assert len(headers) == len(full) > 0
    for h, f in zip(headers, full):
        assert all(h[c] is None for c in _BODY_COLUMNS)
        assert {k: v for k, v in h.items() if k not in _BODY_COLUMNS} == {
            k: v for k, v in f.items() if k not in _BODY_COLUMNS
        }


def test_bodies_of_selected_apis_only(tmp_path: Path) -> None:
    path = _bench_capture(tmp_path)
    rows = list(decode_capture(path, bodies={0}))  # Produce only
    produce = [r for r in rows if r["api_key"] == 0]
    others = [r for r in rows if r["api_key"] != 0]
    assert produce and others
    assert all(r["request"] and r["response"] and r["topics"] == ["orders"] for r in produce)
    assert all(r["request"] is None and r["response"] is None for r in others)
    assert {r["status"] for r in rows} == {"ok"}


def test_bodies_and_ports_are_checked_at_the_call_as_the_flags_are() -> None:
    """decode_capture takes API names in ``bodies``, as ``--bodies`` does ({"Produce"} matched no
    key and left every body undecoded, silently), and refuses what the flags refuse (an unknown
    API, port 0) with one ValueError at the call, before the file is read."""
    path = CAPTURES / "mixed-with-unsupported.pcap"  # Fetch, OffsetCommit, Heartbeat
    by_name = list(decode_capture(path, bodies=["fetch", "Heartbeat"], kafka_ports=9092))
    assert by_name == list(decode_capture(path, bodies={1, 12}))
    assert {r["api_name"] for r in by_name if r["request"] is not None} == {"Fetch", "Heartbeat"}
    for bad, match in (({"bodies": {"Prodyce"}}, "unknown API 'Prodyce'"),
                       ({"bodies": {9999}}, "unknown API key 9999"),
                       ({"kafka_ports": [9092, 0]}, "0 is not a TCP port"),
                       ({"kafka_ports": ["x"]}, "'x' is not a TCP port")):
        with pytest.raises(ValueError, match=match):
            decode_capture(CAPTURES / "no-such-file.pcap", **bad)


def test_header_only_statuses_of_a_synthetic_conversation() -> None:
    conversation = [
        (True, META_REQ), (False, META_RESP),
        (True, encode_request(3, 12, 3, "c1", {"topics": None, "allow_auto_topic_creation": False})),
        (False, struct.pack(">i", 3)),  # the empty response
        (True, META_REQ[:4] + b"\x00\x00\x00\x09" + META_REQ[8:]),  # correlation id 9: never answered
        (False, encode_response(18, 3, 77, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0})),
        (True, META_REQ[:8] + b"\xff\xfe" + META_REQ[10:]),  # client id length -2
    ]  # fmt: skip
    rows = _rows(_pcap(conversation), bodies=())
    assert [r["status"] for r in rows] == [r["status"] for r in _rows(_pcap(conversation))]
    assert [(r["api_name"], r["correlation_id"], r["status"]) for r in rows] == [
        ("Metadata", 1, "ok"), ("Metadata", 3, "empty_response"), (None, 77, "unmatched_response"),
        ("Metadata", 9, "unmatched_request"), ("Metadata", 1, "truncated"),
    ]  # fmt: skip
    assert rows[-1]["reason"].startswith("request: ")


def test_columnar_batches_hold_the_same_rows(tmp_path: Path) -> None:
    from kafkapy.capture.rows import decode_capture_batches

    path = _bench_capture(tmp_path)
    rows = list(decode_capture(path))
    batches = list(decode_capture_batches(path, batch_rows=500))
    assert len(batches) > 1
    assert sum(b.num_rows for b in batches) == len(rows)
    assert [r for b in batches for r in b.to_pylist()] == rows_to_arrow(rows).to_pylist()


@pytest.mark.parametrize("ts", [0.0, 5e-7, 1.5e-6, 2.5e-6, 1_700_000_000.123456, 1_700_000_000.9999996])
def test_columnar_timestamps_round_as_python_does(ts: float) -> None:
    """values_to_arrow turns seconds into microseconds in Arrow: half to even, as round() does."""
    from kafkapy.capture.rows import decode_capture_values, values_to_arrow

    values = next(iter(decode_capture_values(io.BytesIO(_pcap([(True, META_REQ), (False, META_RESP)])))))
    batch = values_to_arrow([(ts, *values[1:])])
    assert batch.column(0).cast("int64").to_pylist() == [round(ts * 1_000_000)]
    assert batch.to_pylist()[0] == rows_to_arrow([dict(zip(COLUMNS, (ts, *values[1:])))]).to_pylist()[0]


def test_row_dicts_have_the_columns_in_order() -> None:
    from kafkapy.capture.rows import _row

    values = tuple(range(len(COLUMNS)))
    row = _row(values)
    assert list(row) == list(COLUMNS) and row == dict(zip(COLUMNS, values))


# --- the benchmark's premise about tshark ------------------------------------------------------


def _tshark_verdicts(path: Path) -> tuple[set[str], int]:
    """tshark's expert messages on a capture's packets (but ApiVersions responses, whose lists of
    versions tshark also judges), and how many packets carried record keys it read."""
    import shutil
    import subprocess

    tshark = shutil.which("tshark")
    if tshark is None:
        pytest.skip("tshark is not installed (make install adds it)")
    out = subprocess.run(
        [tshark, "-r", str(path), "-Y", "kafka && !(kafka.response_key == 18)", "-T", "fields",
         "-E", "separator=|", "-e", "kafka.message_key", "-e", "_ws.expert.message"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    messages: set[str] = set()
    keyed = 0
    for line in out.splitlines():
        keys, _, expert = line.partition("|")
        keyed += bool(keys)
        messages.update(m for m in expert.split(",") if m)
    return messages, keyed


def test_the_benchmark_mix_is_beyond_tshark_and_its_second_capture_is_not(tmp_path: Path) -> None:
    """The capture benchmark's like-for-like claim: tshark reads no records of the 1 GB mix
    (Produce v9, Fetch v12, Metadata v12 are too new for it) but dissects every body, records
    included, of the same traffic at TSHARK_VERSIONS."""
    from benchmarks.capture import TSHARK_VERSIONS, generate

    (modern,), _ = generate(tmp_path, 1, files=1, seed=0)
    (older,), _ = generate(tmp_path, 1, files=1, seed=1, versions=TSHARK_VERSIONS)
    messages, keyed = _tshark_verdicts(modern)
    assert keyed == 0
    for api in ("Produce", "Fetch", "Metadata"):
        assert any(m.startswith(f"Unsupported {api} version") for m in messages), (api, messages)
    messages, keyed = _tshark_verdicts(older)
    assert keyed > 0
    assert messages == set(), messages


def _record_ends(data: bytes) -> set[int]:
    """Offsets where a pcap record or a pcapng block ends (little-endian files, as written here)."""
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        ends, at = set(), 0
        while at + 8 <= len(data):
            at += struct.unpack_from("<I", data, at + 4)[0]
            ends.add(at)
        return ends
    ends, at = {24}, 24
    while at + 16 <= len(data):
        at += 16 + struct.unpack_from("<I", data, at + 8)[0]
        ends.add(at)
    return ends


def _as_pcapng(path: Path, tmp_path: Path) -> Path:
    editcap = shutil.which("editcap")
    if editcap is None:
        pytest.skip("editcap (Wireshark) is not installed: `make install` installs tshark")
    out = tmp_path / (path.stem + ".pcapng")
    subprocess.run([editcap, "-F", "pcapng", str(path), str(out)], check=True)
    return out


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_a_file_cut_inside_a_record_is_truncated_not_a_gap(path: Path, fmt: str, tmp_path: Path) -> None:
    """Cut anywhere inside a record, a capture ends in one undecodable row saying the file was cut,
    the cut frame is `truncated` and no row claims a TCP gap; cut between records, nothing is
    reported (the file is a shorter capture)."""
    data = (path if fmt == "pcap" else _as_pcapng(path, tmp_path)).read_bytes()
    ends = _record_ends(data)
    assert max(ends) == len(data)
    assert "gap" not in {r["status"] for r in decode_capture(io.BytesIO(data))}
    cut_statuses = set()
    for cut in range(min(ends), len(data)):
        rows = list(decode_capture(io.BytesIO(data[:cut]), bodies=frozenset()))
        statuses = [r["status"] for r in rows]
        assert "gap" not in statuses, (cut, rows)
        if cut in ends:
            assert "undecodable" not in statuses, (cut, rows)
        else:
            assert statuses[-1] == "undecodable" and statuses.count("undecodable") == 1, (cut, rows)
            assert rows[-1]["reason"] == "capture error: the file ends inside a record (cut short)"
            cut_statuses.update(statuses[:-1])
    assert "truncated" in cut_statuses


def test_the_issue_case_a_produce_cut_at_535_bytes() -> None:
    data = (CAPTURES / "00-produce-v7-sw8.pcap").read_bytes()[:535]
    rows = list(decode_capture(io.BytesIO(data)))
    assert [(r["api_name"], r["status"]) for r in rows] == [("Produce", "truncated"), (None, "undecodable")]
    assert rows[0]["reason"].startswith("request frame truncated (capture-end, 105 bytes missing)")


def test_strings_that_are_not_utf8_are_shown_as_the_broker_reads_them() -> None:
    """A client id and a group id whose bytes are not UTF-8 (written as surrogate escapes): Kafka
    reads them with U+FFFD and serves the request, so the capture frames and decodes it and shows
    that text (before, the connection's first request was judged no request, and nothing decoded)."""
    request = encode_request(10, 3, 1, "c\udcff", {"key": "g\udcfe", "key_type": 0})
    assert b"c\xff" in request and b"g\xfe" in request
    response = encode_response(10, 3, 1, {"error_code": 0, "node_id": 1, "host": "h", "port": 9092})
    for rows in (_rows(_pcap([(True, request), (False, response)])),
                 _midstream([(True, _framed(request)), (False, _framed(response))])):
        assert [(r["api_name"], r["status"], r["client_id"]) for r in rows] == [
            ("FindCoordinator", "ok", "c\ufffd")]
        assert json.loads(rows[0]["request"])["key"] == "g\ufffd"
        json.dumps(rows[0], ensure_ascii=False).encode()  # writable as UTF-8 (a lone surrogate is not)


def test_filters_are_checked_at_the_call_and_keep_file_errors() -> None:
    from kafkapy.capture.filters import _API_KEY, _CLIENT_ID, _CONNECTION_ID, _ERRORS, _TOPICS

    assert [COLUMNS[i] for i in (_CONNECTION_ID, _API_KEY, _CLIENT_ID, _ERRORS, _TOPICS)] == [
        "connection_id", "api_key", "client_id", "errors", "topics"]
    for bad, match in (({"api": "Prodyce"}, "unknown API 'Prodyce'"),
                       ({"topic": [1]}, "topic takes one or more strings"),
                       ({"client_id": []}, "client_id takes one or more strings"),
                       ({"errors_only": "yes"}, "errors_only is True or False")):
        with pytest.raises(ValueError, match=match):
            decode_capture(CAPTURES / "no-such-file.pcap", **bad)  # type: ignore[arg-type]
    rows = list(decode_capture(CAPTURES / "README.md", api="Produce", errors_only=True))
    assert [r["status"] for r in rows] == ["undecodable"]  # the file's problem is kept
    path = CAPTURES / "00-produce-v9.pcap"
    assert list(decode_capture(path, api=0, client_id=next(decode_capture(path))["client_id"])) == list(
        decode_capture(path))
