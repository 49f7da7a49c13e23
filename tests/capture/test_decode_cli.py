"""``kafkapy decode``: formats, summaries, progress, and errors."""

from __future__ import annotations

import io
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kafkapy.capture.rows import COLUMNS
from kafkapy.cli import main

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
CAPTURE_FILES = [str(p) for p in sorted(CAPTURES.glob("*.pcap"))]


def test_jsonl_to_stdout_embeds_bodies_as_objects(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", *CAPTURE_FILES]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 13
    rows = [json.loads(line) for line in lines]
    assert all(set(r) == set(COLUMNS) for r in rows)
    assert all(isinstance(r["request"], dict) and isinstance(r["response"], dict) for r in rows)
    assert {r["api_name"] for r in rows} == {
        "Produce", "Fetch", "JoinGroup", "LeaveGroup", "SyncGroup", "ApiVersions", "OffsetCommit", "Heartbeat"
    }  # fmt: skip


@pytest.mark.parametrize(
    ("bodies", "decoded"),
    [("none", set()), ("Produce,fetch", {"Produce", "Fetch"}), ("0,18", {"Produce", "ApiVersions"})],
)
def test_bodies_option(bodies: str, decoded: set[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", "--bodies", bodies, *CAPTURE_FILES]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 13 and all(r["status"] == "ok" for r in rows)
    assert {r["api_name"] for r in rows if r["request"] is not None} == decoded
    assert all(isinstance(r["response"], dict) == (r["api_name"] in decoded) for r in rows)
    assert all(r["client_id"] and r["correlation_id"] is not None for r in rows)


def test_bodies_option_rejects_an_unknown_api(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["decode", "--bodies", "Produce,Nonsense", CAPTURE_FILES[0]])
    assert "unknown API 'Nonsense'" in capsys.readouterr().err  # as typed, not lowercased


def test_table_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", "--format", "table", CAPTURE_FILES[0]]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["ts", "src", "dst", "api_name"]
    assert set(out[1]) == {"-"} and len(out[1]) == len(out[0])
    assert out[2].split() == ["2016-11-17T21:06:37.793608Z", "127.0.0.1:34128", "127.0.1.1:9092", "Produce",
                              "2", "1", "console-producer", "-", "-", "16.107", "ok", "-"]


def test_table_rows_not_ok_say_why(tmp_path: Path) -> None:
    """The table's last column is the row's ``reason``, as jsonl and parquet carry it: a TLS
    connection skipped, a gap, a truncated frame say so, not only their status."""
    from kafkapy.capture import PcapWriter, TcpFlow
    from kafkapy.protocol import encode_request, encode_response

    buf = io.BytesIO()
    writer = PcapWriter(buf, snaplen=100)
    tls = TcpFlow(("10.0.0.1", 40001), ("10.0.0.2", 9093))
    plain = TcpFlow(("10.0.0.1", 40000), ("10.0.0.2", 9092))
    ts = 1_700_000_000.0
    for flow in (tls, plain):
        for t, pkt in flow.handshake(ts):
            writer.write(pkt, t)
    hello = bytes([0x16, 0x03, 0x01, 0x00, 0x40]) + bytes(0x40)  # a TLS ClientHello record
    for t, pkt in tls.send(True, hello, ts + 0.1):
        writer.write(pkt, t)
    request = encode_request(3, 12, 1, "c1", {"topics": [{"topic_id": None, "name": "t" * 200}],
                                              "allow_auto_topic_creation": False})
    for t, pkt in plain.send(True, len(request).to_bytes(4, "big") + request, ts + 0.2):
        writer.write(pkt, t)
    writer.close()
    capture = tmp_path / "mixed.pcap"
    capture.write_bytes(buf.getvalue())
    # another capture that lost the response to request 5 (the client's next segment acknowledges it)
    buf = io.BytesIO()
    writer = PcapWriter(buf)
    flow = TcpFlow(("10.0.0.1", 40002), ("10.0.0.2", 9092))
    for t, pkt in flow.handshake(ts):
        writer.write(pkt, t)
    for n, correlation_id in enumerate((5, 6)):
        asked = encode_request(18, 3, correlation_id, "c", {"client_software_name": "a",
                                                            "client_software_version": "1"})
        answer = encode_response(18, 3, correlation_id, {"error_code": 0, "api_keys": [],
                                                         "throttle_time_ms": 0})
        for t, pkt in flow.send(True, len(asked).to_bytes(4, "big") + asked, ts + 1 + n):
            writer.write(pkt, t)
        if correlation_id == 6:
            for t, pkt in flow.send(False, len(answer).to_bytes(4, "big") + answer, ts + 1.5 + n):
                writer.write(pkt, t)
        else:
            flow.send(False, len(answer).to_bytes(4, "big") + answer, ts + 1.5 + n)  # not captured
    writer.close()
    lossy = tmp_path / "lossy.pcap"
    lossy.write_bytes(buf.getvalue())
    out = tmp_path / "table.txt"
    assert main(["decode", "--format", "table", "--kafka-port", "9092", "--kafka-port", "9093",
                 "-o", str(out), str(capture), str(lossy)]) == 0
    header, _, *lines = out.read_text().splitlines()
    starts = _column_starts(header)
    rows: list[list[str]] = []
    for line in lines:  # a reason wrapped onto the next lines joins its row's
        cells = _cells(line, starts)
        if cells[0]:
            rows.append(cells)
        else:
            rows[-1][11] += " " + cells[11]
    by_status = {row[10]: row[11] for row in rows}
    assert by_status["undecodable"].startswith("TLS, no keys: the connection carries TLS records")
    assert by_status["truncated"].startswith("request frame truncated (snap length, ")
    assert re.fullmatch(r"\d+ bytes missing from the server stream at offset \d+", by_status["gap"])
    assert by_status["unmatched_request"].endswith("the response may have been among them")


def _column_starts(header: str) -> list[int]:
    return [m.start() for m in re.finditer(r"\S+", header)]


def _cells(line: str, starts: list[int]) -> list[str]:
    return [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None])]


def test_table_columns_line_up_with_their_headers_whatever_the_cells(tmp_path: Path) -> None:
    """Every cell starts where its header does (left-aligned columns) or ends where it does
    (right-aligned numbers); a 90-character client id folds within its column, and a client id
    that looks like rich markup is shown as it is."""
    from kafkapy.capture import PcapWriter, TcpFlow
    from kafkapy.protocol import encode_request, encode_response

    long_id, markup_id = "producer-" + "x" * 81, "[bold]not-markup[/bold]"
    buf = io.BytesIO()
    writer = PcapWriter(buf)
    flow = TcpFlow(("10.0.0.1", 40000), ("10.0.0.2", 9092))
    for t, pkt in flow.handshake(1_700_000_000.0):
        writer.write(pkt, t)
    for correlation_id, client_id in enumerate((long_id, markup_id, "c"), 1):
        request = encode_request(18, 3, correlation_id, client_id, {"client_software_name": "a",
                                                                    "client_software_version": "1"})
        response = encode_response(18, 3, correlation_id, {"error_code": 0, "api_keys": [],
                                                           "throttle_time_ms": 0})
        for from_client, frame in ((True, request), (False, response)):
            for t, pkt in flow.send(from_client, len(frame).to_bytes(4, "big") + frame,
                                    1_700_000_000.5 + correlation_id):
                writer.write(pkt, t)
    writer.close()
    capture = tmp_path / "ids.pcap"
    capture.write_bytes(buf.getvalue())
    out = tmp_path / "table.txt"
    not_a_capture = str(CAPTURES / "README.md")
    assert main(["decode", "--format", "table", "-o", str(out), str(capture), not_a_capture]) == 1
    header, rule, *lines = out.read_text().splitlines()
    starts = _column_starts(header)
    assert _cells(header, starts) == ["ts", "src", "dst", "api_name", "api_version", "correlation_id",
                                      "client_id", "error_code", "errors", "latency_ms", "status", "reason"]
    client = starts[6]
    assert starts[7] - client <= 40 + 3  # the client id column folded at 40
    assert all(len(line) <= len(rule) for line in lines)
    rows = [_cells(line, starts) for line in lines]
    assert rows[0][:4] == ["2023-11-14T22:13:21.500000Z", "10.0.0.1:40000", "10.0.0.2:9092", "ApiVersions"]
    # the long id goes on over the next lines, in its own column only
    folded = [row for row in rows if not row[0]]
    assert "".join([rows[0][6], *(row[6] for row in folded)]) == long_id
    assert all(cell == "" for row in folded for i, cell in enumerate(row) if i not in (6, 11))
    full = [row for row in rows if row[0]]
    assert [row[6] for row in full] == [long_id[:40], markup_id, "c", "-"]
    assert [row[10] for row in full] == ["ok", "ok", "ok", "undecodable"]
    # the reason, wrapped at words within its column: ok rows have none
    assert [row[11] for row in full[:3]] == ["-", "-", "-"]
    undecodable = lines.index(next(line for line in lines if "undecodable" in line))
    reason = " ".join(_cells(line, starts)[11] for line in lines[undecodable:])
    assert reason == "capture error: not a pcap or pcapng file (magic 23205265) (file offset 0)"
    assert full[-1][:10] == ["-"] * 10  # a file that is not a capture has no time, not 00:00:00
    names = _cells(header, starts)
    for line in (line for line in lines if not line.startswith(" ")):  # numbers end where their header does
        for i in (4, 5, 9):
            end = starts[i] + len(names[i])
            assert line[end - 1] != " " and line[end] == " ", (names[i], line)


def test_parquet_output(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "rows.parquet"
    assert main(["decode", "--format", "parquet", "--output", str(out), *CAPTURE_FILES]) == 0
    table = pq.read_table(out)
    assert table.num_rows == 13 and table.column_names == list(COLUMNS)
    assert sorted(table.column("api_key").to_pylist()) == [0, 0, 0, 1, 1, 1, 1, 8, 11, 12, 13, 14, 18]


def test_parquet_needs_an_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", "--format", "parquet", CAPTURE_FILES[0]]) == 2
    assert "--output" in capsys.readouterr().err


def test_summary_table_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "summary.png"
    out = tmp_path / "rows.jsonl"
    assert main(["decode", "--summary", "--summary-plot", str(png), "-o", str(out), *CAPTURE_FILES]) == 0
    err = capsys.readouterr().err
    for title in ("requests per API", "requests per client", "requests per topic", "bytes per topic",
                  "latency (ms)"):  # fmt: skip
        assert title in err
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_bad_file_is_reported_and_others_still_decode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"\x00" * 100)
    assert main(["decode", str(bad), CAPTURE_FILES[0]]) == 1
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert [r["status"] for r in rows] == ["undecodable", "ok"]
    assert "bad.pcap" in captured.err


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path) -> None:  # fmt: skip
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main(["decode", "-o", str(tmp_path / "x.jsonl"), *CAPTURE_FILES]) == 0
    assert "\r" in tty.getvalue()  # the progress line is drawn and then cleared
    assert "\r" not in capsys.readouterr().err  # not a terminal: no progress


def test_decode_reads_a_capture_piped_to_stdin() -> None:
    piped = subprocess.run([sys.executable, "-m", "kafkapy.cli", "decode", "-"], capture_output=True,
                           input=Path(CAPTURE_FILES[0]).read_bytes(), timeout=60)
    assert piped.returncode == 0, piped.stderr
    named = subprocess.run([sys.executable, "-m", "kafkapy.cli", "decode", CAPTURE_FILES[0]],
                           capture_output=True, timeout=60)
    rows = [json.loads(line) for line in piped.stdout.splitlines()]
    expected = [json.loads(line) for line in named.stdout.splitlines()]
    assert rows and [r["capture"] for r in rows] == ["-"] * len(rows)
    assert [{**r, "capture": None} for r in rows] == [{**r, "capture": None} for r in expected]


def _kafkapy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkapy.cli", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize(("options", "says"), [
    (["--format", "parquet", "-o", "{tmp}/no/dir/x.parquet"],
     "cannot write {tmp}/no/dir/x.parquet: no such directory"),
    (["--format", "parquet", "-o", "{tmp}"], "{tmp} is a directory"),
    (["-o", "{tmp}"], "{tmp} is a directory"),
    (["--format", "table", "-o", "{tmp}/none/x.txt"], "cannot write {tmp}/none/x.txt: no such directory"),
    (["--summary-plot", "{tmp}/no/dir/x.png"], "cannot write {tmp}/no/dir/x.png: no such directory"),
    (["--format", "table", "-o", "{tmp}/ro/x.txt"], "cannot write {tmp}/ro/x.txt: permission denied"),
])
def test_an_unwritable_output_is_one_line_exit_2_before_decoding(
    tmp_path: Path, options: list[str], says: str
) -> None:
    (tmp_path / "ro").mkdir(mode=0o500)
    if os.access(tmp_path / "ro", os.W_OK) and "ro/" in says:
        pytest.skip("running as a user who may write anywhere (root)")
    result = _kafkapy("decode", *[o.format(tmp=tmp_path) for o in options], *CAPTURE_FILES)
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"kafkapy decode: error: {says.format(tmp=tmp_path)}\n"
    assert result.stdout == ""  # nothing decoded


def test_a_capture_cut_in_half_exits_1(tmp_path: Path) -> None:
    half = tmp_path / "half.pcap"
    half.write_bytes((CAPTURES / "00-produce-v7-sw8.pcap").read_bytes()[:535])
    result = _kafkapy("decode", str(half), CAPTURE_FILES[0])
    assert result.returncode == 1
    assert [json.loads(line)["status"] for line in result.stdout.splitlines()] == [
        "truncated", "undecodable", "ok"]
    assert result.stderr == (f"kafkapy decode: {half}: capture error: the file ends inside a record "
                             "(cut short)\n")


def _client_hello() -> bytes:
    """The first bytes a TLS client sends: a real ClientHello, from Python's ssl module."""
    import ssl

    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="broker")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


@pytest.mark.parametrize("port", [9092, 9093])
def test_kafka_over_tls_is_one_row_saying_why_it_is_skipped(
    port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A client of an SSL listener: its connection cannot be decoded, and the output says so in
    one row (rather than nothing at all), while plaintext connections beside it decode as usual.
    It is not a broken file: no error line, exit status 0."""
    from kafkapy.capture import PcapWriter, TcpFlow
    from kafkapy.protocol import encode_request, encode_response

    tls = TcpFlow(("10.0.0.1", 40000), ("10.0.0.2", port))
    server_hello = b"\x16\x03\x03\x00\x30" + bytes(48) + b"\x17\x03\x03\x00\x20" + bytes(32)
    packets = tls.handshake(1.0) + tls.send(True, _client_hello(), 1.1) + tls.send(False, server_hello, 1.2)
    packets += tls.send(True, b"\x17\x03\x03\x00\x40" + bytes(64), 1.3) + tls.close(1.4)
    plain = TcpFlow(("10.0.0.3", 40001), ("10.0.0.2", 9092))
    request = encode_request(18, 3, 7, "plain", {"client_software_name": "x", "client_software_version": "1"})
    answer = encode_response(18, 3, 7, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0})
    packets += plain.handshake(2.0) + plain.send(True, struct.pack(">i", len(request)) + request, 2.1)
    packets += plain.send(False, struct.pack(">i", len(answer)) + answer, 2.2) + plain.close(2.3)
    path = tmp_path / "tls.pcap"
    with PcapWriter(path) as w:
        for ts, frame in packets:
            w.write(frame, ts)
    assert main(["decode", "--kafka-port", str(port), str(path)]) == 0
    out = capsys.readouterr()
    rows = [json.loads(line) for line in out.out.splitlines()]
    assert [(r["connection_id"], r["status"], r["api_name"]) for r in rows] == [
        (0, "undecodable", None), (1, "ok", "ApiVersions")
    ]  # fmt: skip
    assert rows[0]["reason"].startswith("TLS, no keys: ") and "encrypted" in rows[0]["reason"]
    assert (rows[0]["src"], rows[0]["dst"]) == ("10.0.0.1:40000", f"10.0.0.2:{port}")
    assert out.err == ""


def test_a_capture_with_no_kafka_traffic_found_says_so_and_what_to_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A TLS listener's port, not named: nothing can tell its traffic is Kafka, so there is no
    row, and an empty output alone left an analyst guessing. One line on stderr says so and
    points at --kafka-port; it is not an error (exit status 0)."""
    from kafkapy.capture import PcapWriter, TcpFlow

    tls = TcpFlow(("10.0.0.1", 40000), ("10.0.0.2", 9093))
    packets = tls.handshake(1.0) + tls.send(True, _client_hello(), 1.1) + tls.close(1.2)
    path = tmp_path / "tls-only.pcap"
    with PcapWriter(path) as w:
        for ts, frame in packets:
            w.write(frame, ts)
    assert main(["decode", str(path)]) == 0
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.splitlines() == [
        f"kafkapy decode: {path}: no Kafka traffic found (broker ports 9092 and any port seen "
        "carrying Kafka requests); a port with no plaintext request in the capture, such as a "
        "TLS listener's, must be named with --kafka-port"]
    assert main(["decode", "--kafka-port", "9093", str(path)]) == 0  # named: its one TLS row
    out = capsys.readouterr()
    assert len(out.out.splitlines()) == 1 and out.err == ""


def test_a_gzip_compressed_capture_decodes_as_tshark_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tcpdump -z gzip and log rotation leave .pcap.gz files, which tshark and editcap open as
    they are; so does decode, from a path and from stdin, with the rows of the plain file."""
    import gzip

    plain = CAPTURES / "mixed-with-unsupported.pcap"
    packed = tmp_path / "mixed.pcap.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert main(["decode", str(plain)]) == 0
    want = [{**json.loads(line), "capture": None} for line in capsys.readouterr().out.splitlines()]
    assert main(["decode", str(packed)]) == 0
    got = [{**json.loads(line), "capture": None} for line in capsys.readouterr().out.splitlines()]
    assert got == want and len(got) == 3
    piped = subprocess.run([sys.executable, "-m", "kafkapy.cli", "decode", "-"], input=packed.read_bytes(),
                           capture_output=True, timeout=120)  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert [{**json.loads(line), "capture": None} for line in piped.stdout.splitlines()] == want


def test_a_cut_or_corrupt_gzip_capture_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import gzip

    packed = gzip.compress((CAPTURES / "00-produce-v7-sw8.pcap").read_bytes())
    (tmp_path / "cut.pcap.gz").write_bytes(packed[: len(packed) // 2])
    corrupt = bytearray(packed)
    corrupt[40:80] = bytes(40)
    (tmp_path / "corrupt.pcap.gz").write_bytes(bytes(corrupt))
    assert main(["decode", str(tmp_path / "cut.pcap.gz"), str(tmp_path / "corrupt.pcap.gz")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[0].endswith("cut.pcap.gz: capture error: the file ends inside a record (cut short)")
    assert "corrupt.pcap.gz: capture error: corrupt gzip data: " in err[1]


def test_a_tls_connection_joined_mid_stream_is_one_row_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Most connections to an SSL listener are open before a capture starts: joined mid-stream,
    they show TLS application-data records where the capture joins them, and get the same one
    row (they gave nothing at all)."""
    from kafkapy.capture import PcapWriter, TcpFlow

    def records(n: int, size: int) -> bytes:
        return b"".join(b"\x17\x03\x03" + struct.pack(">H", size) + bytes([i]) * size for i in range(n))

    flow = TcpFlow(("10.0.0.1", 40000), ("10.0.0.2", 9093), mss=1000)
    packets = flow.send(True, records(3, 700), 1.0) + flow.send(False, records(4, 2500), 1.1)
    packets += flow.close(1.2)
    path = tmp_path / "tls-mid.pcap"
    with PcapWriter(path) as w:
        for ts, frame in packets:
            w.write(frame, ts)
    assert main(["decode", "--kafka-port", "9093", str(path)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    said = [(r["connection_id"], r["status"], r["reason"][:14]) for r in rows]
    assert said == [(0, "undecodable", "TLS, no keys: ")]


def test_filters_keep_the_rows_that_pass_them_all(capsys: pytest.CaptureFixture[str]) -> None:
    """mixed-with-unsupported.pcap: Fetch v13, OffsetCommit v8 and Heartbeat v4 of two clients."""
    path = str(CAPTURES / "mixed-with-unsupported.pcap")

    def decode(*options: str) -> list[dict[str, object]]:
        assert main(["decode", *options, path]) == 0
        return [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    every = decode()
    assert decode("--api", "fetch,12") == [r for r in every if r["api_name"] in ("Fetch", "Heartbeat")]
    assert decode("--api", "OffsetCommit") == [r for r in every if r["api_name"] == "OffsetCommit"] != []
    client = str(every[0]["client_id"])
    assert decode("--client-id", client) == [r for r in every if r["client_id"] == client] != []
    topic = next(t for r in every for t in (r["topics"] or []))  # type: ignore[attr-defined]
    assert decode("--topic", topic, "--topic", "other") == [r for r in every if topic in (r["topics"] or [])]  # type: ignore[operator]
    assert decode("--errors-only") == [r for r in every if r["errors"]]
    assert decode("--api", "Produce") == []
    assert "no Kafka traffic" not in capsys.readouterr().err  # rows there, none kept: not "nothing found"


@pytest.mark.parametrize(("options", "says"), [
    (["--api", "Prodyce"], "argument --api: unknown API 'Prodyce' (give a name such as Produce, or a key)"),
    (["--api", "9999"], "argument --api: unknown API key 9999 (not in kafkapy's catalogue)"),
    (["--bodies", "none", "--errors-only"],
     "--errors-only reads decoded bodies, which --bodies none leaves out"),
    (["--bodies", "none", "--topic", "t"], "--topic reads decoded bodies, which --bodies none leaves out"),
])  # fmt: skip
def test_a_bad_filter_is_one_line_exit_2(options: list[str], says: str) -> None:
    result = _kafkapy("decode", *options, CAPTURE_FILES[0])
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"kafkapy decode: error: {says}") and result.stderr.count("\n") == 1
    assert result.stdout == ""


def test_the_table_names_error_codes_and_lists_the_errors() -> None:
    from kafkapy.commands.decode import table_cells

    row = {"error_code": 79, "errors": [{"member": "m-1", "code": 79, "name": "MEMBER_ID_REQUIRED"}]}
    cells = table_cells(row)
    assert "79 MEMBER_ID_REQUIRED" in cells and "79 MEMBER_ID_REQUIRED m-1" in cells
    produce = {"error_code": None, "errors": [
        {"topic": "t", "partition": p, "code": 6, "name": "NOT_LEADER_OR_FOLLOWER"} for p in range(5)]}
    shown = "; ".join(f"6 NOT_LEADER_OR_FOLLOWER t-{p}" for p in range(3))
    assert f"{shown}; (+2 more)" in table_cells(produce)
    assert table_cells({"error_code": 0, "errors": []})[7:9] == ["0", "-"]
