"""Capture files and packet headers: kafkapy.capture.pcap and .packets.

Real captures are checked against tshark when it is installed; synthetic
files (pcap in both byte orders and resolutions, pcapng with several
interfaces) are built here byte by byte from the formats' layouts.
"""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.capture import CaptureError, CaptureReader, FrameReader, Packet, PacketDecoder, read_packets
from kafkapy.capture.packets import ACK, PSH, SYN, TcpSegment
from kafkapy.capture.pcap import MAX_CAPLEN
from kafkapy.capture.writer import PcapWriter, TcpFlow, tcp_packet
from kafkapy.errors import KafkaPyError

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
CAPTURE_FILES = sorted(CAPTURES.glob("*.pcap"))
TSHARK = shutil.which("tshark")
EDITCAP = shutil.which("editcap")

# Packets per capture, as tshark counts them (frame.number).
PACKET_COUNTS = {
    "00-produce-v2.pcap": 2,
    "00-produce-v7-sw8.pcap": 9,
    "00-produce-v9.pcap": 2,
    "01-fetch-v12-ok.pcap": 2,
    "01-fetch-v12-perf.pcap": 2,
    "01-fetch-v12-unknown.pcap": 2,
    "11-join-group-v7.pcap": 2,
    "13-leave-group-v4.pcap": 2,
    "14-sync-group-v5.pcap": 2,
    "18-api-versions-v3.pcap": 2,
    "mixed-with-unsupported.pcap": 9,
}


def need_tshark() -> str:
    if TSHARK is None:
        pytest.skip(
            "TSHARK NOT INSTALLED: cross-checks against Wireshark's reading are SKIPPED "
            "(DEBIAN_FRONTEND=noninteractive apt-get install -y tshark)"
        )
    return TSHARK


def tshark_fields(path: Path, *fields: str, extra: tuple[str, ...] = ()) -> list[list[str]]:
    cmd = [need_tshark(), "-r", str(path), *extra, "-T", "fields", "-E", "separator=/t", "-E", "aggregator=;"]
    for field in fields:
        cmd += ["-e", field]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


def test_captures_are_present() -> None:
    assert [p.name for p in CAPTURE_FILES] == sorted(PACKET_COUNTS)


# -- pcap ---------------------------------------------------------------------


@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_real_capture_packets(path: Path) -> None:
    reader = CaptureReader(path)
    packets = list(reader)
    reader.close()
    assert reader.format == "pcap"
    assert reader.linktype == 1
    assert not reader.truncated
    assert len(packets) == PACKET_COUNTS[path.name]
    assert [p.index for p in packets] == list(range(1, len(packets) + 1))
    assert all(len(p.data) == p.orig_len and not p.cut_by_eof for p in packets)
    assert reader.nanosecond == (path.name == "01-fetch-v12-unknown.pcap")


@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_real_capture_matches_tshark(path: Path) -> None:
    rows = tshark_fields(path, "frame.number", "frame.time_epoch", "frame.len", "frame.cap_len")
    packets = list(read_packets(path))
    assert len(rows) == len(packets)
    for row, packet in zip(rows, packets):
        assert int(row[0]) == packet.index
        assert abs(float(row[1]) - packet.ts) < 1e-6
        assert int(row[2]) == packet.orig_len
        assert int(row[3]) == len(packet.data)


def _pcap_bytes(packets: list[tuple[int, bytes, int]], *, order: str, nano: bool, linktype: int = 1) -> bytes:
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 65535, linktype)
    for ts_ns, data, orig in packets:
        sec, ns = divmod(ts_ns, 10**9)
        out += struct.pack(order + "IIII", sec, ns if nano else ns // 1000, len(data), orig) + data
    return out


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
def test_pcap_byte_orders_and_resolutions(order: str, nano: bool) -> None:
    pkts = [(1_700_000_000_123_456_789, b"\x01" * 60, 60), (1_700_000_001_000_000_001, b"\x02" * 40, 1500)]
    reader = CaptureReader(io.BytesIO(_pcap_bytes(pkts, order=order, nano=nano)))
    got = list(reader)
    assert reader.nanosecond is nano
    expect_ns = [t if nano else t // 1000 * 1000 for t, _, _ in pkts]
    assert [p.ts_ns for p in got] == expect_ns
    assert [p.data for p in got] == [d for _, d, _ in pkts]
    assert [p.orig_len for p in got] == [60, 1500]
    assert got[1].snapped and not got[0].snapped


class _Trickle(io.RawIOBase):
    """A stream that hands out at most ``step`` bytes per read, like a pipe."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data, self._pos, self._step = data, 0, step

    def readable(self) -> bool:
        return True

    def readinto(self, buf: bytearray | memoryview) -> int:  # type: ignore[override]
        n = min(len(buf), self._step, len(self._data) - self._pos)
        buf[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 54, 1514, 9000, 70_000]), min_size=1, max_size=40),
    cut=st.integers(0, 2000),
    step=st.sampled_from([7, 4096, 1 << 20]),
)
def test_chunked_reading_across_chunk_boundaries(sizes: list[int], cut: int, step: int) -> None:
    """Records of every size, straddling the reader's 64 KiB chunks, from a file
    cut anywhere and read through short reads, come out as written."""
    pkts = [(1_700_000_000_000_000_000 + i * 1000, bytes([i % 251]) * n, n + 3) for i, n in enumerate(sizes)]
    data = _pcap_bytes(pkts, order="<", nano=True)
    data = data[: len(data) - cut] if cut < len(data) - 24 else data
    reader = CaptureReader(_Trickle(data, step))
    got = list(reader)
    # reference: walk the records by hand
    pos, want = 24, []
    while pos + 16 <= len(data):
        _, _, incl, _ = struct.unpack_from("<IIII", data, pos)
        want.append(data[pos + 16 : pos + 16 + incl])
        pos += 16 + incl
    assert [p.data for p in got] == want
    assert [p.index for p in got] == list(range(1, len(want) + 1))
    assert [p.ts_ns for p in got] == [t for t, _, _ in pkts[: len(want)]]
    assert reader.truncated == (pos != len(data))
    assert [p.cut_by_eof for p in got] == [False] * (len(want) - 1) + [pos > len(data)] * bool(want)


def test_pcap_linktype_word_keeps_only_the_link_type() -> None:
    # The upper bits of the link-type word carry FCS information.
    data = _pcap_bytes([(0, b"x", 1)], order="<", nano=False, linktype=0x1000_0000 | 113)
    reader = CaptureReader(io.BytesIO(data))
    assert reader.linktype == 113


def test_truncated_last_packet_is_reported_not_raised() -> None:
    data = (CAPTURES / "00-produce-v7-sw8.pcap").read_bytes()
    whole = list(read_packets(io.BytesIO(data)))
    reader = CaptureReader(io.BytesIO(data[:-10]))
    got = list(reader)
    assert reader.truncated
    assert len(got) == len(whole)
    assert got[-1].cut_by_eof and got[-1].data == whole[-1].data[:-10]
    assert all(not p.cut_by_eof for p in got[:-1])


def test_truncated_record_header_stops_cleanly() -> None:
    data = (CAPTURES / "00-produce-v2.pcap").read_bytes()
    first = 24 + 16 + 187
    reader = CaptureReader(io.BytesIO(data[: first + 7]))
    assert len(list(reader)) == 1
    assert reader.truncated


@pytest.mark.parametrize(
    "data", [b"", b"\xd4\xc3", b"\xd4\xc3\xb2\xa1\x02\x00"], ids=["empty", "2-bytes", "short-header"]
)
def test_short_files_raise_capture_error(data: bytes) -> None:
    with pytest.raises(CaptureError) as info:
        CaptureReader(io.BytesIO(data))
    assert info.value.truncated


def test_not_a_capture() -> None:
    with pytest.raises(CaptureError, match="not a pcap"):
        CaptureReader(io.BytesIO(b"GET / HTTP/1.1\r\n\r\n"))
    assert issubclass(CaptureError, KafkaPyError)


class _ReadRecorder(io.BytesIO):
    """Records the largest read request, to prove no declared length is trusted."""

    largest = 0

    def read(self, n: int | None = -1, /) -> bytes:
        self.largest = max(self.largest, n if n is not None else -1)
        return super().read(n)


def test_huge_pcap_caplen_is_refused_without_allocating() -> None:
    data = _pcap_bytes([], order="<", nano=False) + struct.pack("<IIII", 0, 0, 0x7FFF_FFFF, 0x7FFF_FFFF)
    f = _ReadRecorder(data + b"\x00" * 100)
    with pytest.raises(CaptureError, match="cap"):
        list(CaptureReader(f))
    assert f.largest <= MAX_CAPLEN


def test_huge_pcapng_blocks_are_refused_or_skipped_in_pieces() -> None:
    # An unknown block declaring ~4 GiB: skipped in pieces, then the file ends.
    f = _ReadRecorder(_shb("<") + struct.pack("<II", 0x0BAD, 0xFFFF_FFFC) + b"\x00" * 1000)
    reader = CaptureReader(f)
    assert list(reader) == []
    assert reader.truncated
    assert f.largest <= 65_536
    # An EPB declaring a huge captured length is refused.
    body = struct.pack("<IIIII", 0, 0, 0, 0x7000_0000, 0x7000_0000)
    f = _ReadRecorder(_shb("<") + _idb("<", 1) + struct.pack("<II", 6, 0x7000_0020) + body)
    with pytest.raises(CaptureError, match="cap"):
        list(CaptureReader(f))
    assert f.largest <= MAX_CAPLEN


def test_path_and_file_sources_agree(tmp_path: Path) -> None:
    path = CAPTURES / "mixed-with-unsupported.pcap"
    from_path = list(read_packets(path))
    with open(path, "rb") as f:
        from_file = list(read_packets(f))
        assert not f.closed  # the caller's file stays the caller's
    assert from_path == from_file


# -- pcapng -------------------------------------------------------------------


def _pad(b: bytes) -> bytes:
    return b + b"\x00" * (-len(b) % 4)


def _block(order: str, btype: int, body: bytes) -> bytes:
    body = _pad(body)
    total = 12 + len(body)
    return struct.pack(order + "II", btype, total) + body + struct.pack(order + "I", total)


def _opt(order: str, code: int, value: bytes) -> bytes:
    return struct.pack(order + "HH", code, len(value)) + _pad(value)


def _shb(order: str, options: bytes = b"") -> bytes:
    return _block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1) + options)


def _idb(
    order: str, linktype: int, *, tsresol: int | None = None, tsoffset: int | None = None, snaplen: int = 0
) -> bytes:
    opts = _opt(order, 2, b"eth0-with-a-long-name")  # if_name, to be stepped over
    if tsresol is not None:
        opts += _opt(order, 9, bytes([tsresol]))
    if tsoffset is not None:
        opts += _opt(order, 14, struct.pack(order + "q", tsoffset))
    opts += _opt(order, 0, b"")
    return _block(order, 1, struct.pack(order + "HHI", linktype, 0, snaplen) + opts)


def _epb(
    order: str, iface: int, units: int, data: bytes, orig: int | None = None, options: bytes = b""
) -> bytes:
    head = struct.pack(order + "IIIII", iface, units >> 32, units & 0xFFFF_FFFF, len(data), orig or len(data))
    return _block(order, 6, head + _pad(data) + options)


def _spb(order: str, data: bytes, orig: int | None = None) -> bytes:
    return _block(order, 3, struct.pack(order + "I", orig or len(data)) + data)


def _opb(order: str, iface: int, units: int, data: bytes) -> bytes:
    head = struct.pack(order + "HHIIII", iface, 0, units >> 32, units & 0xFFFF_FFFF, len(data), len(data))
    return _block(order, 2, head + data)


def _sample_pcapng(order: str) -> tuple[bytes, list[tuple[int, int, bytes, int, int]]]:
    """A two-section pcapng file; returns it and (interface, linktype, data, orig_len, ts_ns) expected."""
    real = list(read_packets(CAPTURES / "mixed-with-unsupported.pcap"))
    out = _shb(order, _opt(order, 4, b"kafkapy-test") + _opt(order, 0, b""))
    out += _idb(order, 1)  # default resolution: microseconds
    out += _block(order, 0x0BAD0001, b"unknown block, skipped" * 3)
    out += _idb(order, 1, tsresol=9)  # nanoseconds
    out += _idb(order, 113, tsresol=0x80 | 20, tsoffset=100)  # 2**-20 s units, 100 s offset
    expect = []
    for i, p in enumerate(real[:6]):
        iface = i % 2
        units = p.ts_ns // 1000 if iface == 0 else p.ts_ns
        out += _epb(order, iface, units, p.data, options=_opt(order, 1, b"comment") + _opt(order, 0, b""))
        expect.append((iface, 1, p.data, p.orig_len, units * 1000 if iface == 0 else units))
    out += _epb(order, 2, 3 << 20, b"\x00" * 16, 1000)
    expect.append((2, 113, b"\x00" * 16, 1000, 103 * 10**9))
    # A second section, the other byte order, restarts interface numbering.
    other = ">" if order == "<" else "<"
    out += _shb(other) + _idb(other, 1, tsresol=3, snaplen=64)
    out += _spb(other, real[6].data[:64], real[6].orig_len)
    expect.append((0, 1, real[6].data[:64], real[6].orig_len, 0))
    out += _opb(other, 0, 5_000, real[7].data)
    expect.append((0, 1, real[7].data, real[7].orig_len, 5 * 10**9))
    return out, expect


@pytest.mark.parametrize("order", ["<", ">"])
def test_pcapng_sections_interfaces_and_block_types(order: str) -> None:
    data, expect = _sample_pcapng(order)
    reader = CaptureReader(io.BytesIO(data))
    got = list(reader)
    assert reader.format == "pcapng" and not reader.truncated
    assert [(p.interface, p.linktype, p.data, p.orig_len, p.ts_ns) for p in got] == expect
    assert [p.index for p in got] == list(range(1, len(expect) + 1))


def test_pcapng_truncated_inside_packet_data() -> None:
    data, expect = _sample_pcapng("<")
    cut = data.index(expect[2][2]) + 10  # ten bytes into the third packet's data
    reader = CaptureReader(io.BytesIO(data[:cut]))
    got = list(reader)
    assert reader.truncated
    assert len(got) == 3 and got[-1].cut_by_eof and got[-1].data == expect[2][2][:10]


def test_pcapng_corrupt_trailer_raises() -> None:
    data = bytearray(_shb("<") + _idb("<", 1) + _epb("<", 0, 0, b"abcd"))
    data[-1] ^= 0xFF
    with pytest.raises(CaptureError, match="trailer"):
        list(CaptureReader(io.BytesIO(bytes(data))))


def test_pcapng_undeclared_interface_raises() -> None:
    with pytest.raises(CaptureError, match="interface"):
        list(CaptureReader(io.BytesIO(_shb("<") + _epb("<", 3, 0, b"abcd"))))


def test_pcapng_matches_tshark(tmp_path: Path) -> None:
    data, _ = _sample_pcapng("<")
    path = tmp_path / "sample.pcapng"
    path.write_bytes(data)
    rows = tshark_fields(path, "frame.interface_id", "frame.len", "frame.cap_len", "frame.time_epoch")
    got = list(read_packets(path))
    assert len(rows) == len(got)
    for row, p in zip(rows, got):
        assert (int(row[0]), int(row[1]), int(row[2])) == (p.interface, p.orig_len, len(p.data))
        if p.ts_ns:
            assert abs(float(row[3]) - p.ts) < 1e-6


@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_editcap_pcapng_conversion_reads_the_same(path: Path, tmp_path: Path) -> None:
    if EDITCAP is None:
        pytest.skip("EDITCAP NOT INSTALLED (it comes with tshark): pcapng conversion cross-check SKIPPED")
    out = tmp_path / "converted.pcapng"
    subprocess.run([EDITCAP, "-F", "pcapng", str(path), str(out)], check=True, capture_output=True)
    with CaptureReader(out) as reader:
        got = list(reader)
    assert reader.format == "pcapng"
    want = list(read_packets(path))
    assert [(p.data, p.orig_len, p.ts_ns, p.linktype) for p in got] == [
        (p.data, p.orig_len, p.ts_ns, p.linktype) for p in want
    ]


# -- writer -------------------------------------------------------------------


def test_writer_round_trip_and_tshark_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "synthetic.pcap"
    flow = TcpFlow(("10.1.1.1", 50000), ("10.1.1.2", 9092))
    frames = flow.handshake(1.5) + flow.send(True, b"x" * 3000, 1.6) + flow.close(1.7)
    with PcapWriter(path, nanosecond=True) as w:
        for ts, frame in frames:
            w.write(frame, ts)
    got = list(read_packets(path))
    assert [p.data for p in got] == [f for _, f in frames]
    assert [round(p.ts, 6) for p in got] == [ts for ts, _ in frames]
    if TSHARK is not None:
        rows = tshark_fields(
            path,
            "tcp.len",
            "tcp.checksum.status",
            "ip.checksum.status",
            extra=("-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE"),
        )
        assert [int(r[0]) for r in rows] == [0, 0, 0, 1460, 1460, 80, 0, 0, 0]
        assert {(r[1], r[2]) for r in rows} == {("1", "1")}  # 1: checksum good


# -- link, IP and TCP headers -----------------------------------------------


def _ip_tcp(version: int = 4, payload: bytes = b"hello", flags: int = ACK | PSH) -> bytes:
    src, dst = ("10.0.0.1", "10.0.0.2") if version == 4 else ("fd00::1", "fd00::2")
    return tcp_packet(src, 40000, dst, 9092, seq=7, ack=9, flags=flags, payload=payload)[14:]


def _decode(
    linktype: int, data: bytes, orig_len: int | None = None
) -> tuple[TcpSegment | None, PacketDecoder]:
    decoder = PacketDecoder()
    packet = Packet(1, 0.0, 0, linktype, data, len(data) if orig_len is None else orig_len)
    return decoder.decode(packet), decoder


def _check(seg: TcpSegment | None, payload: bytes = b"hello", v6: bool = False) -> None:
    assert seg is not None
    assert (seg.src, seg.sport, seg.dst, seg.dport) == (
        ("fd00::1", 40000, "fd00::2", 9092) if v6 else ("10.0.0.1", 40000, "10.0.0.2", 9092)
    )
    assert (seg.seq, seg.ack, seg.flags) == (7, 9, ACK | PSH)
    assert seg.payload == payload and seg.wire_len == len(payload)


ETH = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01"


@pytest.mark.parametrize("version", [4, 6])
def test_link_types(version: int) -> None:
    ip = _ip_tcp(version)
    etype = b"\x08\x00" if version == 4 else b"\x86\xdd"
    af_bsd = 2 if version == 4 else 30
    cases = {
        "ethernet": (1, ETH + etype + ip),
        "vlan": (1, ETH + b"\x81\x00\x00\x05" + etype + ip),
        "qinq": (1, ETH + b"\x88\xa8\x00\x05\x81\x00\x00\x06" + etype + ip),
        "sll": (113, struct.pack("!HHH8s", 0, 1, 6, b"\x02" * 6) + etype + ip),
        "sll-vlan": (113, struct.pack("!HHH8s", 0, 1, 6, b"\x02" * 6) + b"\x81\x00\x00\x07" + etype + ip),
        "sll2": (276, etype + struct.pack("!HIHBB8s", 0, 3, 1, 0, 6, b"\x02" * 6) + ip),
        "null-le": (0, struct.pack("<I", af_bsd) + ip),
        "null-be": (0, struct.pack(">I", af_bsd) + ip),
        "loop": (108, struct.pack(">I", af_bsd if version == 4 else 24) + ip),
        "raw": (101, ip),
        "dlt-raw-12": (12, ip),
        "dlt-raw-14": (14, ip),
        "raw-ipv4-or-ipv6": (228 if version == 4 else 229, ip),
    }
    for name, (linktype, data) in cases.items():
        seg, decoder = _decode(linktype, data)
        assert seg is not None, (name, dict(decoder.skipped))
        _check(seg, v6=version == 6)


def _ipv4(
    payload: bytes, *, options: bytes = b"", frag: int = 0, total: int | None = None, proto: int = 6
) -> bytes:
    ihl = (20 + len(options)) // 4
    total = 20 + len(options) + len(payload) if total is None else total
    head = struct.pack(
        "!BBHHHBBH4s4s",
        0x40 | ihl,
        0,
        total,
        1,
        frag,
        64,
        proto,
        0,
        bytes([10, 0, 0, 1]),
        bytes([10, 0, 0, 2]),
    )
    return head + options + payload


def _tcp(payload: bytes = b"hello", options: bytes = b"") -> bytes:
    doff = (20 + len(options)) // 4
    return struct.pack("!HHIIBBHHH", 40000, 9092, 7, 9, doff << 4, ACK | PSH, 1000, 0, 0) + options + payload


def test_ipv4_options_tcp_options_and_ethernet_padding() -> None:
    ip = _ipv4(_tcp(b"hi", options=b"\x01\x01\x08\x0a" + b"\x00" * 8), options=b"\x01\x01\x01\x00")
    frame = ETH + b"\x08\x00" + ip
    frame += b"\x00" * (60 - len(frame) + 6)  # Ethernet minimum frame padding (plus a stray FCS-like tail)
    seg, _ = _decode(1, frame)
    _check(seg, b"hi")


def test_ipv4_fragments() -> None:
    seg, _ = _decode(101, _ipv4(_tcp(), frag=0x2000))  # MF set, offset 0: the first fragment
    assert seg is not None and seg.fragment and seg.payload == b"hello"
    seg, decoder = _decode(101, _ipv4(b"rest of the datagram", frag=0x2000 | 185))
    assert seg is None and decoder.skipped == {"non-first-fragment": 1}


def test_ipv4_total_length_zero_means_tso() -> None:
    seg, _ = _decode(101, _ipv4(_tcp(b"big segment"), total=0))
    _check(seg, b"big segment")


def test_snap_length_cut_is_visible_in_wire_len() -> None:
    ip = _ipv4(_tcp(b"0123456789" * 10))
    seg, decoder = _decode(101, ip[:70], orig_len=len(ip))
    assert seg is not None
    assert seg.payload == (b"0123456789" * 10)[:30] and seg.wire_len == 100
    assert decoder.snapped == 1


def _ipv6(chain: list[tuple[int, bytes]], last: int, payload: bytes) -> bytes:
    """IPv6 with extension headers: chain is (header type, header bytes sans next-header byte)."""
    body = b""
    types = [t for t, _ in chain] + [last]
    for i, (_, ext) in enumerate(chain):
        body += bytes([types[i + 1]]) + ext
    body += payload
    first = types[0]
    return (
        struct.pack(
            "!IHBB16s16s",
            6 << 28,
            len(body),
            first,
            64,
            b"\xfd" + b"\x00" * 14 + b"\x01",
            b"\xfd" + b"\x00" * 14 + b"\x02",
        )
        + body
    )


def test_ipv6_extension_headers() -> None:
    hop = (0, b"\x00" + b"\x01\x04\x00\x00\x00\x00")  # 8 bytes: PadN
    dest = (60, b"\x01" + b"\x01\x0c" + b"\x00" * 12)  # 16 bytes
    routing = (43, b"\x00\x00\x00" + b"\x00" * 4)
    ah = (51, b"\x01\x00\x00" + b"\x00" * 8)  # (1 + 2) * 4 = 12 bytes
    seg, decoder = _decode(101, _ipv6([hop, dest, routing, ah], 6, _tcp()))
    assert seg is not None, decoder.skipped
    assert seg.src == "fd00::1" and seg.payload == b"hello"
    first_frag = (44, b"\x00" + struct.pack("!HI", 0x0001, 99))
    seg, _ = _decode(101, _ipv6([hop, first_frag], 6, _tcp()))
    assert seg is not None and seg.fragment
    later_frag = (44, b"\x00" + struct.pack("!HI", 0x0100, 99))
    seg, decoder = _decode(101, _ipv6([later_frag], 6, b"more"))
    assert seg is None and decoder.skipped == {"non-first-fragment": 1}


@pytest.mark.parametrize(
    ("linktype", "data", "reason"),
    [
        (1, ETH + b"\x08\x06" + b"\x00" * 28, "not-ip"),  # ARP
        (101, _ipv4(b"\x00" * 8, proto=17), "not-tcp"),  # UDP
        (147, b"\x00" * 40, "linktype-147"),
        (1, ETH[:10], "truncated-link-header"),
        (101, _ipv4(b"")[:12], "truncated-ip-header"),
        (101, _ipv4(b"\x00" * 10), "truncated-tcp-header"),
        (101, _ipv4(b"\x00" * 20, total=16), "bad-ip-length"),
        (1, ETH + b"\x08\x00\x75" + b"\x00" * 39, "bad-ip-version"),
        (101, b"\x75" + b"\x00" * 39, "not-ip"),
        (101, _ipv6([], 17, b"\x00" * 8), "not-tcp"),
    ],
)
def test_undecodable_packets_are_skipped_with_a_reason(linktype: int, data: bytes, reason: str) -> None:
    seg, decoder = _decode(linktype, data)
    assert seg is None
    assert decoder.skipped == {reason: 1}


def test_syn_flag_survives_decoding() -> None:
    seg, _ = _decode(101, _ip_tcp(4, b"", flags=SYN))
    assert seg is not None and seg.syn and not seg.has_ack


# -- hostile input ------------------------------------------------------------


def _run_pipeline(data: bytes) -> int:
    """Everything up to Kafka frames; returns the number of events."""
    return sum(1 for _ in FrameReader(io.BytesIO(data), kafka_ports={9092, 36333}))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048))
def test_fuzz_random_bytes(data: bytes) -> None:
    try:
        _run_pipeline(data)
    except CaptureError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00", b"\x0a\x0d\x0d\x0a"]), st.binary(max_size=2048))
def test_fuzz_random_bytes_after_a_valid_magic(magic: bytes, rest: bytes) -> None:
    try:
        _run_pipeline(magic + rest)
    except CaptureError:
        pass


_ORIGINALS = [p.read_bytes() for p in CAPTURE_FILES]
_PCAPNG_SAMPLES = [_sample_pcapng("<")[0], _sample_pcapng(">")[0]]


@st.composite
def mutated_captures(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(_ORIGINALS + _PCAPNG_SAMPLES)))
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            data[pos : pos + 4] = draw(
                st.sampled_from([b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\x7f\xff\xff\xff"])
            )
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        else:
            del data[pos : pos + draw(st.integers(1, 16))]
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_captures())
def test_fuzz_mutated_real_captures(data: bytes) -> None:
    try:
        _run_pipeline(data)
    except CaptureError:
        pass
