"""FrameReader's fused fast path against the layers it stands in for.

The fast path cuts frames straight from in-order Ethernet/IPv4/TCP packets;
everything else goes through the layers one by one. Either way the events
must be exactly those of the layers composed by hand, for in-order,
reordered, duplicated, lost, coalesced and split traffic alike.
"""

from __future__ import annotations

import ast
import inspect
import io
import random
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.capture import (
    CaptureError,
    CaptureReader,
    ConnectionClassified,
    ConnectionClosed,
    Frame,
    FrameReader,
    KafkaFramer,
    PacketDecoder,
    PcapWriter,
    TcpFlow,
    TcpReassembler,
    Unframed,
    fused,
    read_packets,
)
from kafkapy.capture.frames import FrameEvent
from kafkapy.capture.fused import FusedWalk
from kafkapy.capture.rows import decode_capture
from kafkapy.protocol import encode_request, encode_response

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
CAPTURE_FILES = sorted(CAPTURES.glob("*.pcap*"))
# The project's shared captures (the same recordings today; checked too, should they diverge)
SHARED_CAPTURES = Path("/work/shared/captures")
SHARED_CAPTURE_FILES = sorted(SHARED_CAPTURES.glob("*.pcap*")) if SHARED_CAPTURES.is_dir() else []


def _layered(data: bytes, ports: set[int] | None = None) -> Iterator[FrameEvent]:
    """The layers composed by hand: no fast path anywhere."""
    ports = {9092} if ports is None else ports
    packets = PacketDecoder()
    tcp = TcpReassembler(ports)
    framer = KafkaFramer(ports)
    for packet in read_packets(io.BytesIO(data)):
        seg = packets.decode(packet)
        if seg is not None:
            for event in tcp.feed(seg):
                yield from framer.feed(event)
    for event in tcp.finish():
        yield from framer.feed(event)


def _key(event: FrameEvent) -> tuple[Any, ...]:
    if isinstance(event, Frame):
        return ("frame", event.conn.id, event.side, event.from_client, event.ts, event.end_ts,
                event.offset, event.size, event.body, event.truncated, event.reason)  # fmt: skip
    if isinstance(event, Unframed):
        return ("unframed", event.conn.id, event.side, event.ts, event.offset, event.length, event.reason)
    if isinstance(event, ConnectionClassified):
        return ("classified", event.conn.id, event.ts, event.kafka, event.basis)
    assert isinstance(event, ConnectionClosed)
    return ("closed", event.conn.id, event.ts, event.reason)


def _assert_same(data: bytes) -> list[tuple[Any, ...]]:
    fast = [_key(e) for e in FrameReader(io.BytesIO(data))]
    assert fast == [_key(e) for e in _layered(data)]
    return fast


def _pcap(packets: list[tuple[float, bytes]]) -> bytes:
    buf = io.BytesIO()
    with PcapWriter(buf) as w:
        for ts, frame in packets:
            w.write(frame, ts)
    return buf.getvalue()


def _request(corr: int, size: int) -> bytes:
    body = encode_request(18, 3, corr, "fast-path", {
        "client_software_name": "x" * size, "client_software_version": "1"})  # fmt: skip
    return struct.pack(">i", len(body)) + body


def _response(corr: int, size: int) -> bytes:
    body = encode_response(18, 3, corr, {
        "error_code": 0, "throttle_time_ms": 0, "supported_features": [], "finalized_features_epoch": -1,
        "finalized_features": [], "zk_migration_ready": False,
        "api_keys": [{"api_key": k, "min_version": 0, "max_version": 3} for k in range(size // 8)],
    })  # fmt: skip
    return struct.pack(">i", len(body)) + body


def _conversation(
    rnd: random.Random, connections: int, exchanges: int, mss: int, close: bool = True, late: bool = False
) -> list[tuple[float, bytes]]:
    """Pipelined exchanges on a few connections, some frames coalesced into one send.

    ``late``: each write's segments are captured last first (reordering that
    no ACK gives away, so it is not mistaken for loss)."""
    flows = [TcpFlow((f"10.9.0.{c + 1}", 41000 + c), ("10.9.9.9", 9092), mss=mss) for c in range(connections)]
    packets: list[tuple[float, bytes]] = []
    ts = 100.0
    for flow in flows:
        packets += flow.handshake(ts)
    corr = 0
    for _ in range(exchanges):
        flow = rnd.choice(flows)
        corr += 1
        ts += 0.001
        batch = rnd.randint(1, 3)  # requests sent in one write
        data = b"".join(_request(corr + i, rnd.randint(0, 700)) for i in range(batch))
        answer = b"".join(_response(corr + i, rnd.randint(0, 900)) for i in range(batch))
        for from_client, payload, at in ((True, data, ts), (False, answer, ts + 0.0005)):
            sent = flow.send(from_client, payload, at)
            packets += sent[::-1] if late else sent
        corr += batch
    if close:
        for flow in flows:
            packets += flow.close(ts + 0.01)
    return packets


def _perturb(
    rnd: random.Random, packets: list[tuple[float, bytes]], swaps: int, dups: int, drops: int
) -> None:
    n = len(packets)
    for _ in range(swaps):
        i = rnd.randrange(6, n - 1)
        packets[i], packets[i + 1] = packets[i + 1], packets[i]
    for _ in range(dups):
        i = rnd.randrange(7, len(packets))
        packets.insert(i, packets[rnd.randrange(6, i)])
    for _ in range(drops):
        del packets[rnd.randrange(6, len(packets))]


@pytest.mark.parametrize("path", CAPTURE_FILES + SHARED_CAPTURE_FILES,
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_captures_give_the_same_events(path: Path) -> None:
    assert _assert_same(path.read_bytes())


class _OnlyInSyncFramer:
    """A KafkaFramer seen through InSyncFramer alone: the walk gets nothing else of it."""

    def __init__(self, framer: KafkaFramer) -> None:
        self.SYNCED = framer.SYNCED
        self.MAX_OUTSTANDING = framer.MAX_OUTSTANDING
        self.max_frame_size = framer.max_frame_size
        self.feed = framer.feed
        self.framing_state = framer.framing_state
        self.data_in_sync = framer.data_in_sync


class _OnlyFlowAndFeed:
    """A TcpReassembler seen through the two doors the walk may use."""

    def __init__(self, tcp: TcpReassembler) -> None:
        self.feed = tcp.feed
        self.flow = tcp.flow


def _walked_through_its_doors(data: bytes) -> tuple[list[tuple[Any, ...]], int]:
    """FusedWalk on a framer and reassembler that expose only its documented interface; the
    events, and how many packets took the fused path."""
    ports = {9092}
    tcp, framer = TcpReassembler(ports), KafkaFramer(ports)
    walk = FusedWalk(PacketDecoder(), _OnlyFlowAndFeed(tcp), _OnlyInSyncFramer(framer))  # type: ignore[arg-type]
    events: list[FrameEvent] = []
    with CaptureReader(io.BytesIO(data)) as capture:
        events += walk.walk(capture)
    for event in tcp.finish():
        events += framer.feed(event)
    return [_key(e) for e in events], walk.packet_count - walk.layered_packets


@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_the_walk_needs_no_more_than_its_documented_doors(path: Path) -> None:
    data = path.read_bytes()
    events, _ = _walked_through_its_doors(data)
    assert events == [_key(e) for e in _layered(data)]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), connections=st.integers(1, 4), exchanges=st.integers(1, 40),
       mss=st.sampled_from([48, 536, 1460, 9000]), late=st.booleans(), close=st.booleans())
def test_property_the_walk_through_its_doors_equals_the_layers(
    seed: int, connections: int, exchanges: int, mss: int, late: bool, close: bool
) -> None:
    data = _pcap(_conversation(random.Random(seed), connections, exchanges, mss, close=close, late=late))
    events, fused = _walked_through_its_doors(data)
    assert events == [_key(e) for e in _layered(data)]
    if not late and mss >= 536:
        assert fused > 0  # in-order traffic: the fused path was taken, so it was the one compared


def test_the_fused_walk_reaches_no_private_state_of_another_module() -> None:
    """capture/fused.py names no underscored attribute but its own (self._x) and imports no
    underscored name: the TCP and framing layers are reached through their public doors."""
    tree = ast.parse(inspect.getsource(fused))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            assert isinstance(node.value, ast.Name) and node.value.id == "self", ast.unparse(node)
        if isinstance(node, ast.ImportFrom):
            assert not any(alias.name.startswith("_") for alias in node.names), ast.unparse(node)


def test_in_order_traffic_takes_the_fast_path_and_matches() -> None:
    data = _pcap(_conversation(random.Random(1), 3, 60, mss=1460))
    events = _assert_same(data)
    assert sum(1 for e in events if e[0] == "frame") > 200
    reader = FrameReader(io.BytesIO(data))
    list(reader)
    # all but the handshakes, the first packet of each direction and the FINs
    assert reader.fast_packets > reader.packet_count - 40


def test_frames_split_over_small_segments_match() -> None:
    _assert_same(_pcap(_conversation(random.Random(2), 2, 40, mss=97)))


def test_capture_cut_mid_stream_matches() -> None:
    packets = _conversation(random.Random(3), 2, 30, mss=300, close=False)
    _assert_same(_pcap(packets[len(packets) // 3 :]))


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    mss=st.sampled_from([61, 300, 1460]),
    swaps=st.integers(0, 6),
    dups=st.integers(0, 4),
    drops=st.integers(0, 2),
)
def test_property_disordered_traffic_gives_the_same_events(
    seed: int, mss: int, swaps: int, dups: int, drops: int
) -> None:
    rnd = random.Random(seed)
    packets = _conversation(rnd, rnd.randint(1, 3), rnd.randint(3, 25), mss)
    _perturb(rnd, packets, swaps, dups, drops)
    _assert_same(_pcap(packets))


def _rows(packets: list[tuple[float, bytes]]) -> list[dict[str, Any]]:
    rows = list(decode_capture(io.BytesIO(_pcap(packets)), capture="x"))
    # Reordering changes when bytes were captured, not what they decode to.
    return [{k: v for k, v in r.items() if k not in ("ts", "latency_ms")} for r in rows]


def test_in_order_and_reordered_segments_give_identical_rows() -> None:
    packets = _conversation(random.Random(4), 2, 30, mss=200)
    reordered = _conversation(random.Random(4), 2, 30, mss=200, late=True)
    assert reordered != packets
    assert _assert_same(_pcap(reordered))
    in_order = _rows(packets)
    assert in_order == _rows(reordered)
    assert {r["status"] for r in in_order} == {"ok"}
    assert len(in_order) > 30


# -- the pcap walk: records across chunks, cut files, hostile lengths ---------------


class _ShortReads(io.RawIOBase):
    """A stream that hands out at most ``step`` bytes a read, as a pipe may."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data = data
        self._pos = 0
        self._step = step

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        take = self._step if n < 0 else min(n, self._step)
        piece = self._data[self._pos : self._pos + take]
        self._pos += len(piece)
        return piece


def _events(source: Any) -> list[tuple[Any, ...]]:
    return [_key(e) for e in FrameReader(source)]


def test_records_across_many_chunks_match() -> None:
    data = _pcap(_conversation(random.Random(5), 3, 400, mss=1460))
    assert len(data) > 4 * 65_536  # the reader's chunk size: records straddle chunk ends
    events = _assert_same(data)
    assert _events(_ShortReads(data, 997)) == events


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), cut=st.floats(0.0, 1.0), step=st.sampled_from([1, 61, 65_536]))
def test_property_a_file_cut_anywhere_gives_the_same_events(seed: int, cut: float, step: int) -> None:
    data = _pcap(_conversation(random.Random(seed), 2, 8, mss=300, close=False))
    data = data[: 24 + int((len(data) - 24) * cut)]
    reader = FrameReader(_ShortReads(data, step))
    assert [_key(e) for e in reader] == [_key(e) for e in _layered(data)]
    layered = list(read_packets(io.BytesIO(data)))
    assert reader.packet_count == len(layered)
    assert reader.capture is not None
    assert reader.capture.truncated == _ends_inside_a_record(data)


def _ends_inside_a_record(data: bytes) -> bool:
    pos = 24
    while len(data) - pos >= 16:
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    return pos != len(data)


def test_an_oversized_record_fails_as_in_the_reader_after_the_same_events() -> None:
    packets = _conversation(random.Random(6), 2, 10, mss=1460, close=False)
    data = bytearray(_pcap(packets))
    pos = 24
    for _ in range(len(packets) - 3):  # the header of the third record from the end
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    struct.pack_into("<I", data, pos + 8, 262_145)
    with pytest.raises(CaptureError) as expected:
        list(_layered(bytes(data)))
    seen: list[tuple[Any, ...]] = []
    with pytest.raises(CaptureError) as got:
        for event in FrameReader(_ShortReads(bytes(data), 700)):
            seen.append(_key(event))
    assert str(got.value) == str(expected.value)
    assert got.value.offset == expected.value.offset == pos
    layered: list[tuple[Any, ...]] = []
    with pytest.raises(CaptureError):
        for event in _layered(bytes(data)):
            layered.append(_key(event))
    assert seen == layered and len(seen) > 10


def _pcapng(packets: list[tuple[float, bytes]]) -> bytes:
    """The packets as pcapng (little-endian; one Ethernet interface in nanoseconds)."""
    out = struct.pack("<IIIHHqI", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1, 28)
    tsresol = struct.pack("<HHB3x", 9, 1, 9) + struct.pack("<HH", 0, 0)
    out += (
        struct.pack("<IIHHI", 1, 20 + len(tsresol), 1, 0, 0) + tsresol + struct.pack("<I", 20 + len(tsresol))
    )
    for ts, frame in packets:
        ts_ns = round(ts * 1e9)
        padded = frame + b"\x00" * (-len(frame) % 4)
        total = 32 + len(padded)
        out += struct.pack("<IIIIIII", 6, total, 0, ts_ns >> 32, ts_ns & 0xFFFFFFFF, len(frame), len(frame))
        out += padded + struct.pack("<I", total)
    return out


@pytest.mark.parametrize("late", [False, True], ids=["in-order", "reordered"])
def test_pcapng_packets_take_the_fast_path_and_match(late: bool) -> None:
    packets = _conversation(random.Random(7), 3, 60, mss=700, late=late)
    data = _pcapng(packets)
    events = _assert_same(data)
    assert sum(1 for e in events if e[0] == "frame") > 200
    reader = FrameReader(io.BytesIO(data))
    assert [_key(e) for e in reader] == events
    assert reader.capture is not None and reader.capture.format == "pcapng"
    if not late:
        assert reader.fast_packets > reader.packet_count // 2
    # the same traffic as pcap: the same frames, times aside (pcap keeps microseconds)
    as_pcap = [e[:4] + e[6:] for e in _events(io.BytesIO(_pcap(packets))) if e[0] == "frame"]
    assert as_pcap == [e[:4] + e[6:] for e in events if e[0] == "frame"]
    _assert_same(data[: len(data) * 2 // 3])  # cut mid-file


# -- the pcapng walk: byte orders, resolutions, interfaces, sections, odd blocks --------------

_ETHERNET, _RAW = 1, 101


def _ng_block(order: str, btype: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    return struct.pack(order + "II", btype, 12 + len(body)) + body + struct.pack(order + "I", 12 + len(body))


def _ng_units(ts: float, tsresol: int) -> int:
    return round(ts * (2 ** (tsresol & 0x7F) if tsresol & 0x80 else 10**tsresol))


def _pcapng_of(
    packets: list[tuple[float, bytes]],
    *,
    order: str = "<",
    interfaces: tuple[tuple[int, int], ...] = ((_ETHERNET, 9),),
    sections: int = 1,
    extras: bool = False,
) -> bytes:
    """The packets as pcapng: ``interfaces`` are (link type, if_tsresol) pairs, declared anew in each
    of ``sections`` sections, and taken in turn; ``extras`` puts statistics, name-resolution and
    unknown blocks, Simple Packet Blocks and options between and in the packet blocks."""
    end_opt = struct.pack(order + "HH", 0, 0)
    out = b""
    for i, (ts, frame) in enumerate(packets):
        if i * sections // len(packets) != (i - 1) * sections // len(packets) or i == 0:
            out += _ng_block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1))
            for linktype, tsresol in interfaces:
                opts = struct.pack(order + "HHB3x", 9, 1, tsresol) + end_opt
                out += _ng_block(order, 1, struct.pack(order + "HHI", linktype, 0, 0) + opts)
        iface = i % len(interfaces)
        linktype, tsresol = interfaces[iface]
        data = frame if linktype == _ETHERNET else frame[14:]
        if extras and i % 11 == 5:
            out += _ng_block(order, 5, struct.pack(order + "III", iface, 0, 0))  # interface statistics
            out += _ng_block(order, 4, struct.pack(order + "HH", 0, 0))  # name resolution, no records
            out += _ng_block(order, 0x40000BAD, b"\x00\x00\x7e\x58kafkapy")  # custom, not copied
        if extras and i % 17 == 9 and iface == 0:
            out += _ng_block(order, 3, struct.pack(order + "I", len(data)) + data)
            continue
        units = _ng_units(ts, tsresol)
        opts = struct.pack(order + "HHI", 2, 4, 0) + end_opt if extras and i % 3 == 0 else b""
        fixed = struct.pack(order + "IIIII", iface, units >> 32, units & 0xFFFFFFFF, len(data), len(data))
        out += _ng_block(order, 6, fixed + data + b"\x00" * (-len(data) % 4) + opts)
    return out


def _outcome(events: Iterator[FrameEvent]) -> tuple[list[tuple[Any, ...]], tuple[str, int | None] | None]:
    """The events, then the error (message and offset) if any."""
    seen: list[tuple[Any, ...]] = []
    try:
        for event in events:
            seen.append(_key(event))
    except CaptureError as exc:
        return seen, (str(exc), exc.offset)
    return seen, None


@pytest.mark.parametrize("order", ["<", ">"], ids=["little-endian", "big-endian"])
@pytest.mark.parametrize(
    "interfaces",
    [((_ETHERNET, 6),), ((_ETHERNET, 9),), ((_ETHERNET, 9), (_ETHERNET, 6), (_RAW, 0x94))],
    ids=["us", "ns", "us-ns-raw"],
)
@pytest.mark.parametrize("sections", [1, 3])
def test_pcapng_layouts_take_the_fast_path_and_match(
    order: str, interfaces: tuple[tuple[int, int], ...], sections: int
) -> None:
    packets = _conversation(random.Random(8), 3, 50, mss=700)
    data = _pcapng_of(packets, order=order, interfaces=interfaces, sections=sections, extras=True)
    events = _assert_same(data)
    assert sum(1 for e in events if e[0] == "frame") > 150
    reader = FrameReader(_ShortReads(data, 4093))
    assert [_key(e) for e in reader] == events
    assert reader.packet_count == len(list(read_packets(io.BytesIO(data))))
    ethernet = sum(1 for linktype, _ in interfaces if linktype == _ETHERNET) / len(interfaces)
    assert reader.fast_packets > reader.packet_count * ethernet // 2
    if len(interfaces) == 1 and sections == 1:
        # the same traffic without the odd blocks: the same frames, times aside (SPBs have none)
        plain = _events(io.BytesIO(_pcapng_of(packets, order=order, interfaces=interfaces)))
        assert [e[:4] + e[6:] for e in plain if e[0] == "frame"] == [
            e[:4] + e[6:] for e in events if e[0] == "frame"
        ]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    cut=st.floats(0.0, 1.0),
    step=st.sampled_from([1, 61, 65_536]),
    order=st.sampled_from("<>"),
)
def test_property_a_pcapng_file_cut_anywhere_gives_the_same_events(
    seed: int, cut: float, step: int, order: str
) -> None:
    packets = _conversation(random.Random(seed), 2, 8, mss=300, close=False)
    data = _pcapng_of(
        packets, order=order, interfaces=((_ETHERNET, 6), (_ETHERNET, 9)), sections=2, extras=True
    )
    data = data[: int(len(data) * cut)]
    reader = FrameReader(_ShortReads(data, step))
    assert _outcome(iter(reader)) == _outcome(_layered(data))
    layered = CaptureReader(io.BytesIO(data)) if len(data) >= 4 else None
    if layered is not None:
        assert reader.packet_count == sum(1 for _ in layered)
        assert reader.capture is not None and reader.capture.truncated == layered.truncated


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    where=st.floats(0.0, 1.0),
    word=st.sampled_from([0, 1, 2, 3, 5, 6, 12, 28, 31, 32, 0x7FFFFFFF, 0xFFFFFFFF, 262_145])
    | st.integers(0, 2**32 - 1),
    step=st.sampled_from([97, 65_536]),
    order=st.sampled_from("<>"),
)
def test_property_a_corrupt_pcapng_block_fails_or_reads_as_in_the_reader(
    seed: int, where: float, word: int, step: int, order: str
) -> None:
    """A 4-byte word overwritten anywhere (a block type or length, an interface id, a captured
    length, a trailer, a byte-order magic...): the same events, then the same error at the same offset."""
    packets = _conversation(random.Random(seed), 2, 10, mss=500, close=False)
    data = bytearray(_pcapng_of(packets, order=order, interfaces=((_ETHERNET, 9), (_RAW, 6)), extras=True))
    pos = int((len(data) - 4) * where) & ~3
    struct.pack_into(order + "I", data, pos, word)
    fast = _outcome(iter(FrameReader(_ShortReads(bytes(data), step))))
    assert fast == _outcome(_layered(bytes(data)))


@pytest.mark.skipif(shutil.which("editcap") is None, reason="needs Wireshark's editcap")
@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_real_captures_converted_to_pcapng_give_the_same_events(path: Path, tmp_path: Path) -> None:
    converted = tmp_path / (path.stem + ".pcapng")
    subprocess.run(["editcap", "-F", "pcapng", str(path), str(converted)], check=True, capture_output=True)
    data = converted.read_bytes()
    events = _assert_same(data)
    reader = FrameReader(converted)
    assert [_key(e) for e in reader] == events
    as_pcap = FrameReader(path)
    assert [_key(e) for e in as_pcap] == events
    # every packet block is walked as the pcap's records are: as many packets take the fast path
    assert (reader.fast_packets, reader.packet_count) == (as_pcap.fast_packets, as_pcap.packet_count)


def _ng_blocks(data: bytes, order: str) -> Iterator[tuple[int, int, int]]:
    """(offset, type, total length) of each block of a well-formed pcapng file."""
    pos = 0
    while pos < len(data):
        btype, total = struct.unpack_from(order + "II", data, pos)
        yield pos, btype, total
        pos += total


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("field", [0, 4, 8, 20, -4], ids=["type", "length", "interface", "caplen", "trailer"])
@pytest.mark.parametrize("value", [1, 2, 3, 6, 33, 262_145, 0xFFFFFFFF])
def test_a_corrupt_packet_block_fails_or_reads_as_in_the_reader(order: str, field: int, value: int) -> None:
    """Each field the walk checks, broken in one Enhanced Packet Block amid Ethernet traffic that takes
    the fast path: the same events, then the same error at the same offset, as the reader alone."""
    packets = _conversation(random.Random(9), 2, 20, mss=500, close=False)
    data = bytearray(_pcapng_of(packets, order=order, interfaces=((_ETHERNET, 9), (_ETHERNET, 6))))
    epbs = [(pos, total) for pos, btype, total in _ng_blocks(bytes(data), order) if btype == 6]
    pos, total = epbs[-5]
    struct.pack_into(order + "I", data, pos + field if field >= 0 else pos + total + field, value)
    reader = FrameReader(_ShortReads(bytes(data), 997))
    fast = _outcome(iter(reader))
    assert fast == _outcome(_layered(bytes(data)))
    assert reader.fast_packets > 10
