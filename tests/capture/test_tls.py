"""TLS decryption with a key log (kafkapy.capture.tls): a capture of kafka-python over TLS 1.3 and
1.2, its keys right, wrong or missing, its records cut at any boundary, the capture damaged.

``tls-kafka-python.pcap`` (tests/data/tls/README.md) holds three producers, one per
version and suite; tests/capture/test_live_tls.py holds the decoder to tshark and to the
plaintext run on a live capture.
"""

from __future__ import annotations

import base64
import io
import json
import struct
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.capture.keylog import KeyLog, KeyLogError
from kafkapy.capture.packets import PacketDecoder
from kafkapy.capture.pcap import read_packets
from kafkapy.capture.rows import STATUSES, TLS_JOINED_REASON, decode_capture
from kafkapy.capture.summary import Summary
from kafkapy.capture.tcp import StreamData, TcpEvent, TcpReassembler
from kafkapy.capture.tls import TlsDecryptor
from kafkapy.capture.tls_keys import _expand_label
from kafkapy.cli import main as cli_main

DATA = Path(__file__).parent.parent / "data" / "tls"
CAPTURE = DATA / "tls-kafka-python.pcap"
KEYS = DATA / "tls-kafka-python.keys"
CLIENTS = ("TLSv1_3-default", "TLSv1_2-ECDHE-ECDSA-AES128-GCM-SHA256",
           "TLSv1_2-ECDHE-ECDSA-CHACHA20-POLY1305")


def _rows(source: Any, keys: Any = KEYS, **options: Any) -> list[dict[str, Any]]:
    return list(decode_capture(source, tls_keylog=keys, **options))


def test_rfc8448_key_schedule() -> None:
    """RFC 8448 section 3 (Simple 1-RTT Handshake): the server's handshake write key and IV."""
    secret = bytes.fromhex("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38")
    assert _expand_label("sha256", secret, b"key", 16).hex() == "3fce516009c21727d0f2e4e86ee403bc"
    assert _expand_label("sha256", secret, b"iv", 12).hex() == "5d313eb2671276ee13000b30"


def test_every_exchange_decrypted_on_a_port_nobody_named() -> None:
    rows = _rows(CAPTURE)
    assert {row["status"] for row in rows} == {"ok"}
    assert {row["client_id"] for row in rows} == set(CLIENTS)
    values = set()
    for row in rows:
        if row["api_name"] == "Produce":
            for topic in json.loads(row["request"])["topic_data"]:
                for part in topic["partition_data"]:
                    values.update(base64.b64decode(r["value"]) for r in part["records"])
    assert values == {b"hello " + name.encode() for name in CLIENTS}
    assert [row for row in rows if row["api_name"] == "Produce" and row["error_code"] is None]


def test_without_the_key_log_each_connection_says_tls_no_keys(capsys: pytest.CaptureFixture[str]) -> None:
    port = int(_rows(CAPTURE)[0]["dst"].rsplit(":", 1)[1])
    bare = list(decode_capture(CAPTURE, kafka_ports=[port]))
    assert len(bare) == len({row["connection_id"] for row in _rows(CAPTURE)}) == 6
    assert all(row["status"] == "undecodable" and row["reason"].startswith("TLS, no keys") for row in bare)
    summary = Summary().add_all(bare).table()
    assert summary.count("TLS, no keys") == 6  # a line per connection


def test_a_key_log_of_another_run_decrypts_nothing_and_says_so(tmp_path: Path) -> None:
    lines = KEYS.read_text().splitlines()
    wrong = tmp_path / "wrong.keys"
    # every secret's first byte changed: the client randoms still match, the keys do not
    wrong.write_text("\n".join(
        f"{label} {random} {int(secret[:2], 16) ^ 1:02x}{secret[2:]}" if not label.startswith("#") else label
        for label, random, secret in (line.split() if not line.startswith("#") else (line, "", "")
                                      for line in lines)
    ) + "\n")  # fmt: skip
    rows = _rows(CAPTURE, wrong)
    assert len(rows) == 6 and all(row["status"] == "undecodable" for row in rows)
    assert all("do not decrypt" in row["reason"] for row in rows)


def test_a_key_log_without_the_connections_says_no_secrets(tmp_path: Path) -> None:
    other = tmp_path / "other.keys"
    other.write_text("CLIENT_RANDOM " + "ab" * 32 + " " + "cd" * 48 + "\n")
    port = int(_rows(CAPTURE)[0]["dst"].rsplit(":", 1)[1])
    rows = _rows(CAPTURE, other, kafka_ports=[port])
    assert len(rows) == 6
    assert all(row["reason"].startswith("TLS, no keys: the key log has no secrets for client random")
               for row in rows)
    assert _rows(CAPTURE, other) == []  # on a port nobody named: not taken for Kafka's


def test_key_log_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(KeyLogError, match="cannot read the TLS key log"):
        _rows(CAPTURE, tmp_path / "missing.keys")
    empty = tmp_path / "empty.keys"
    empty.write_text("# nothing\nnot a line\n")
    with pytest.raises(KeyLogError, match="has no secrets"):
        _rows(CAPTURE, empty)
    assert cli_main(["decode", str(CAPTURE), "--tls-keylog", str(empty)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no secrets" in err


def test_missing_cryptography_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # an import of a module set to None in sys.modules fails as a missing package does
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers", None)
    assert cli_main(["decode", str(CAPTURE), "--tls-keylog", str(KEYS)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'kafkapy[tls]'" in err
    assert cli_main(["decode", str(CAPTURE), "--kafka-port", "40727", "--format", "table"]) == 0
    assert "TLS, no keys" in capsys.readouterr().out  # without a key log it is not needed


def test_key_log_lines_skipped_and_read_as_it_grows(tmp_path: Path) -> None:
    path = tmp_path / "growing.keys"
    lines = KEYS.read_text().splitlines(keepends=True)
    path.write_text("garbage line\n" + lines[1] + "CLIENT_RANDOM zz " + "00" * 48 + "\n")
    log = KeyLog(path)
    assert log.skipped_lines == 2 and len(log) == 1
    with path.open("a") as f:
        f.writelines(lines)
    rows = _rows(CAPTURE, log)  # the missing client randoms are looked up after the file grew
    assert {row["status"] for row in rows} == {"ok"}


# --- records cut anywhere, captures damaged --------------------------------------------------


def _tcp_events() -> list[TcpEvent]:
    decoder, tcp = PacketDecoder(), TcpReassembler()
    events: list[TcpEvent] = []
    for packet in read_packets(CAPTURE):
        segment = decoder.decode(packet)
        if segment is not None:
            events.extend(tcp.feed(segment))
    events.extend(tcp.finish())
    return events


def _plaintext(events: list[TcpEvent]) -> dict[tuple[int, int], bytes]:
    tls = TlsDecryptor(KeyLog(KEYS), set())
    streams: dict[tuple[int, int], bytearray] = defaultdict(bytearray)
    for event in events:
        for out in tls.feed(event):
            if type(out) is StreamData:
                assert out.offset == len(streams[out.conn.id, out.side])  # in order, no holes
                streams[out.conn.id, out.side] += out.data
    return {key: bytes(value) for key, value in streams.items()}


EVENTS = _tcp_events()
PLAINTEXT = _plaintext(EVENTS)


def test_plaintext_is_every_frame() -> None:
    assert len(PLAINTEXT) == 12  # both directions of six connections
    for data in PLAINTEXT.values():
        pos = 0
        while pos < len(data):
            pos += 4 + struct.unpack_from(">i", data, pos)[0]
        assert pos == len(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(min_value=1, max_value=4000), min_size=1, max_size=40))
def test_records_cut_at_any_boundary_give_the_same_plaintext(cuts: list[int]) -> None:
    """The TCP layer hands on stream data in pieces of any size: TLS records split anywhere,
    several in one piece, a header in two."""
    events: list[TcpEvent] = []
    step = 0
    for event in EVENTS:
        if type(event) is not StreamData:
            events.append(event)
            continue
        data, offset = event.data, event.offset
        while data:
            size = cuts[step % len(cuts)]
            step += 1
            events.append(StreamData(event.conn, event.side, event.ts, offset, data[:size]))
            data, offset = data[size:], offset + size
    assert _plaintext(events) == PLAINTEXT


def _pcap_records(data: bytes) -> tuple[bytes, list[bytes]]:
    """A classic pcap's global header and its records (each header and packet)."""
    records, pos = [], 24
    while pos < len(data):
        size = struct.unpack_from("<I", data, pos + 8)[0]
        records.append(data[pos : pos + 16 + size])
        pos += 16 + size
    return data[:24], records


HEADER, RECORDS = _pcap_records(CAPTURE.read_bytes())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sets(st.integers(min_value=0, max_value=len(RECORDS) - 1), max_size=6),
    st.lists(st.tuples(st.integers(min_value=0, max_value=len(RECORDS) - 1),
                       st.integers(min_value=16, max_value=1500), st.integers(min_value=1, max_value=255)),
             max_size=4),
    st.integers(min_value=0, max_value=sum(map(len, RECORDS)) + 24),
)  # fmt: skip
def test_damaged_captures_give_rows_never_a_traceback(
    dropped: set[int], flips: list[tuple[int, int, int]], cut: int
) -> None:
    records = [bytearray(r) for i, r in enumerate(RECORDS) if i not in dropped]
    for index, at, mask in flips:
        if records and index < len(records) and at < len(records[index]):
            records[index][at] ^= mask
    data = (HEADER + b"".join(records))[:cut]
    rows = _rows(io.BytesIO(data))
    assert all(row["status"] in STATUSES for row in rows)
    for row in rows:
        if row["reason"] and row["reason"].startswith("TLS"):
            assert row["connection_id"] is not None and "\n" not in row["reason"]


def _without(dropped: set[int]) -> bytes:
    return HEADER + b"".join(r for i, r in enumerate(RECORDS) if i not in dropped)


def test_a_lost_record_costs_only_itself() -> None:
    """Each packet dropped in turn. Lost during a handshake, it costs its connection ("TLS, no
    keys") or its direction (a "gap" row saying why); lost among application records, only the
    exchange it carried: the next record is found by its sequence number, the framer is told how
    many plaintext bytes were lost, and every later exchange decodes as in the whole capture."""
    full = {(row["connection_id"], row["correlation_id"]): row for row in _rows(CAPTURE)}
    resynced = 0
    for index in range(len(RECORDS)):
        rows = _rows(io.BytesIO(_without({index})))
        hit = {row["connection_id"] for row in rows if row["status"] != "ok"}
        assert len(hit) <= 1, index  # one connection at most
        for row in rows:
            if row["status"] == "ok":
                whole = full[row["connection_id"], row["correlation_id"]]
                assert {**row, "capture": None} == {**whole, "capture": None}, index
        for row in rows:
            if row["status"] == "gap" and row["reason"].startswith("TLS: the capture lost"):
                assert "cannot be decrypted" in row["reason"]
        gaps = [row for row in rows if row["status"] == "gap" and "bytes missing from the" in row["reason"]]
        later_ok = [row for row in rows if row["status"] == "ok" and row["connection_id"] in hit
                    and gaps and row["ts"] > gaps[0]["ts"]]  # fmt: skip
        resynced += bool(later_ok)
    assert resynced  # a loss among a connection's records, and its later exchanges decoded


def test_a_capture_that_joined_after_the_handshake_says_so() -> None:
    """The first connection's packets up to its first application data are not in the capture."""
    port = int(_rows(CAPTURE)[0]["dst"].rsplit(":", 1)[1])
    first_data = next(i for i, r in enumerate(RECORDS) if r[16 + 14 + 20 + 32 :].startswith(b"\x17\x03\x03"))
    rows = _rows(io.BytesIO(_without(set(range(first_data)))), kafka_ports=[port])
    joined = [row for row in rows if row["connection_id"] == 0]
    assert [row["reason"] for row in joined] == [TLS_JOINED_REASON]
    assert {row["status"] for row in rows if row["connection_id"] != 0} == {"ok"}
