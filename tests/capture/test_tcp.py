"""TCP reassembly, Kafka framing and request/response pairing:
kafkapy.capture.tcp, .frames and .pairing.

Reassembly is tested on hand-made segments (exact control of sequence
numbers), framing on synthetic pcaps written with kafkapy.capture.writer,
and both on the real captures, cross-checked against tshark when installed.
"""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.capture import (
    ConnectionClassified,
    ConnectionClosed,
    ConnectionOpened,
    Frame,
    FrameReader,
    KafkaFramer,
    PcapWriter,
    StreamData,
    StreamEnd,
    StreamGap,
    StreamOverlap,
    TcpEvent,
    TcpFlow,
    TcpReassembler,
    TcpSegment,
    Unframed,
)
from kafkapy.capture.frames import FrameEvent, plausible_request
from kafkapy.capture.packets import ACK, FIN, PSH, RST, SYN
from kafkapy.capture.pairing import Exchange, Pairer, pair_frames
from kafkapy.errors import DecodeError
from kafkapy.protocol.api_keys import FIRST_PRIVATE_API_KEY, ApiKey

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
CAPTURE_FILES = sorted(CAPTURES.glob("*.pcap"))
TSHARK = shutil.which("tshark")

CLIENT = ("10.0.0.1", 40000)
SERVER = ("10.0.0.2", 9092)


# -- helpers ------------------------------------------------------------------


def seg(
    from_client: bool,
    seq: int,
    payload: bytes = b"",
    *,
    ack: int = 0,
    flags: int = ACK | PSH,
    wire_len: int | None = None,
    ts: float = 0.0,
    client: tuple[str, int] = CLIENT,
    server: tuple[str, int] = SERVER,
) -> TcpSegment:
    src, dst = (client, server) if from_client else (server, client)
    return TcpSegment(
        0, ts, src[0], src[1], dst[0], dst[1], seq % (1 << 32), ack % (1 << 32), flags, payload,
        len(payload) if wire_len is None else wire_len,
    )  # fmt: skip


def run(segments: Iterable[TcpSegment], **kwargs: Any) -> tuple[list[TcpEvent], TcpReassembler]:
    tcp = TcpReassembler(**kwargs)
    events: list[TcpEvent] = []
    for s in segments:
        events += tcp.feed(s)
    events += tcp.finish()
    return events, tcp


def side_events(events: Sequence[TcpEvent], side: int) -> list[TcpEvent]:
    return [
        e
        for e in events
        if isinstance(e, (StreamData, StreamGap, StreamOverlap, StreamEnd)) and e.side == side
    ]


def data_of(events: Sequence[TcpEvent], side: int) -> bytes:
    return b"".join(e.data for e in events if isinstance(e, StreamData) and e.side == side)


def gaps_of(events: Sequence[TcpEvent], side: int) -> list[tuple[int, int | None, str]]:
    return [(e.offset, e.length, e.reason) for e in events if isinstance(e, StreamGap) and e.side == side]


def assert_contiguous(events: Sequence[TcpEvent], side: int) -> None:
    """House rule: offsets only move forward, each byte reported once."""
    pos: int | None = None
    for e in side_events(events, side):
        if isinstance(e, StreamData):
            assert pos is None or e.offset == pos
            pos = e.offset + len(e.data)
        elif isinstance(e, StreamGap) and e.length is not None:
            assert pos is None or e.offset == pos
            pos = e.offset + e.length
        elif isinstance(e, StreamGap):
            pos = 0


def request(
    api_key: int, version: int, corr: int, client_id: bytes = b"kafkapy-test", body: bytes = b""
) -> bytes:
    header = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id + body
    return struct.pack(">i", len(header)) + header


def response(corr: int, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(body), corr) + body


def write_pcap(packets: Iterable[tuple[float, bytes]]) -> io.BytesIO:
    buf = io.BytesIO()
    with PcapWriter(buf) as w:
        for ts, frame in packets:
            w.write(frame, ts)
    buf.seek(0)
    return buf


def frames_of(events: Iterable[FrameEvent]) -> list[Frame]:
    return [e for e in events if isinstance(e, Frame)]


# -- reassembly ---------------------------------------------------------------


def test_handshake_in_order_data_and_fin() -> None:
    events, tcp = run(
        [
            seg(True, 100, flags=SYN),
            seg(False, 900, flags=SYN | ACK, ack=101),
            seg(True, 101, ack=901, flags=ACK),
            seg(True, 101, b"hello ", ack=901),
            seg(True, 107, b"world", ack=901),
            seg(False, 901, b"reply", ack=112),
            seg(True, 112, flags=FIN | ACK, ack=906),
            seg(False, 906, flags=FIN | ACK, ack=113),
            seg(True, 113, flags=ACK, ack=907),
        ]
    )
    conn = events[0].conn
    assert isinstance(events[0], ConnectionOpened)
    assert conn.role_basis == "syn" and conn.client == CLIENT and conn.server == SERVER
    assert data_of(events, 0) == b"hello world" and data_of(events, 1) == b"reply"
    assert gaps_of(events, 0) == gaps_of(events, 1) == []
    ends = [e for e in events if isinstance(e, StreamEnd)]
    assert [(e.side, e.offset, e.reason) for e in ends] == [(0, 11, "fin"), (1, 5, "fin")]
    assert isinstance(events[-1], ConnectionClosed) and events[-1].reason == "fin"
    assert tcp.open_connections == 0
    assert tcp.stats["segments-without-connection"] == 1  # the last ACK, after the close


def test_out_of_order_segments_are_buffered() -> None:
    events, tcp = run(
        [
            seg(True, 1, flags=SYN),
            seg(True, 12, b"CCCC"),
            seg(True, 7, b"BBBBB"),
            seg(True, 2, b"AAAAA"),
        ]
    )
    assert data_of(events, 0) == b"AAAAABBBBBCCCC"
    assert gaps_of(events, 0) == []
    assert_contiguous(events, 0)
    assert tcp.stats["retransmitted-segments"] == 0


def test_retransmissions_are_dropped() -> None:
    events, tcp = run(
        [
            seg(True, 1, flags=SYN),
            seg(True, 2, b"AAAA"),
            seg(True, 2, b"AAAA"),  # already emitted
            seg(True, 10, b"CCCC"),
            seg(True, 10, b"CCCC"),  # still pending
            seg(True, 6, b"BBBB"),
        ]
    )
    assert data_of(events, 0) == b"AAAABBBBCCCC"
    assert tcp.stats["retransmitted-segments"] == 2 and tcp.stats["retransmitted-bytes"] == 8
    assert not [e for e in events if isinstance(e, StreamOverlap)]


def test_overlaps_keep_the_first_bytes_and_are_flagged() -> None:
    events, tcp = run(
        [
            seg(True, 1, flags=SYN),
            seg(True, 2, b"AAAA"),
            seg(True, 4, b"xxZZ"),  # first two bytes were emitted already: kept as "AA"
            seg(True, 12, b"CCCC"),
            seg(True, 10, b"YYcccc"),  # overlaps pending "CCCC" with different bytes
            seg(True, 14, b"CCDD"),  # overlaps pending identically, adds "DD"
            seg(True, 8, b"BB"),
        ]
    )
    assert data_of(events, 0) == b"AAAAZZBBYYCCCCDD"
    overlaps = [(e.offset, e.length, e.conflict) for e in events if isinstance(e, StreamOverlap)]
    assert overlaps == [(2, 2, None), (8, 4, True), (12, 2, False)]
    assert tcp.stats["conflicting-overlaps"] == 1
    assert_contiguous(events, 0)


def test_conflicting_full_retransmission_is_flagged() -> None:
    events, _ = run(
        [seg(True, 1, flags=SYN), seg(True, 6, b"BBBB"), seg(True, 6, b"bbbb"), seg(True, 2, b"AAAA")]
    )
    assert data_of(events, 0) == b"AAAABBBB"
    assert [(e.offset, e.conflict) for e in events if isinstance(e, StreamOverlap)] == [(4, True)]


def test_sequence_number_wrap_around() -> None:
    isn = (1 << 32) - 6
    events, _ = run(
        [
            seg(True, isn, flags=SYN),
            seg(True, isn + 9, b"CCCC"),  # past 2**32, sent before the bytes below wrap
            seg(True, isn + 1, b"AAAA"),
            seg(True, isn + 5, b"BBBB"),  # crosses the wrap
            seg(True, isn + 13, b"DDDD"),
            seg(False, 5, b"reply", ack=isn + 17, flags=SYN | ACK),
        ]
    )
    assert data_of(events, 0) == b"AAAABBBBCCCCDDDD"
    assert gaps_of(events, 0) == []
    assert_contiguous(events, 0)


def test_lost_segment_becomes_a_gap_when_the_peer_acks_past_it() -> None:
    events, _ = run(
        [
            seg(True, 1, flags=SYN),
            seg(True, 2, b"A" * 100),
            # 100 bytes at seq 102 never captured
            seg(True, 202, b"C" * 50),
            seg(False, 500, b"reply", ack=252),  # the server had them all
        ]
    )
    assert gaps_of(events, 0) == [(100, 100, "lost")]
    assert data_of(events, 0) == b"A" * 100 + b"C" * 50
    # The gap is reported before the reply that proved it.
    kinds = [(type(e).__name__, e.side) for e in events if isinstance(e, (StreamGap, StreamData))]
    assert kinds.index(("StreamGap", 0)) < kinds.index(("StreamData", 1))
    assert_contiguous(events, 0)


def test_lost_tail_acked_without_later_data() -> None:
    events, _ = run(
        [seg(True, 1, flags=SYN), seg(True, 2, b"AAAA"), seg(False, 7, ack=2 + 4 + 30, flags=ACK)]
    )
    assert gaps_of(events, 0) == [(4, 30, "lost")]


def test_holes_are_settled_at_capture_end() -> None:
    events, _ = run(
        [seg(True, 1, flags=SYN), seg(True, 2, b"AAAA"), seg(True, 10, b"CCCC"), seg(True, 20, b"EE")]
    )
    assert gaps_of(events, 0) == [(4, 4, "lost"), (12, 6, "lost")]
    assert data_of(events, 0) == b"AAAACCCCEE"
    end = next(e for e in events if isinstance(e, StreamEnd))
    assert end.reason == "capture-end" and end.offset == 20


def test_capture_started_mid_stream() -> None:
    events, _ = run([seg(True, 5000, b"abc"), seg(False, 70000, b"xyz", ack=5003)])
    assert gaps_of(events, 0) == [(0, None, "midstream-start")]
    assert gaps_of(events, 1) == [(0, None, "midstream-start")]
    assert data_of(events, 0) == b"abc" and data_of(events, 1) == b"xyz"
    conn = events[0].conn
    assert conn.role_basis == "port" and conn.client == CLIENT


def test_snap_length_cut_is_a_known_gap() -> None:
    events, _ = run(
        [seg(True, 1, flags=SYN), seg(True, 2, b"A" * 10, wire_len=1000), seg(True, 1002, b"B" * 10)],
    )
    assert gaps_of(events, 0) == [(10, 990, "snaplen")]
    assert data_of(events, 0) == b"A" * 10 + b"B" * 10
    assert_contiguous(events, 0)


def test_rst_closes_both_directions() -> None:
    events, tcp = run([seg(True, 1, flags=SYN), seg(True, 2, b"AA"), seg(False, 9, flags=RST | ACK, ack=4)])
    closed = [e for e in events if isinstance(e, ConnectionClosed)]
    assert [c.reason for c in closed] == ["rst"]
    assert [(e.side, e.reason) for e in events if isinstance(e, StreamEnd)] == [(0, "rst")]
    assert tcp.open_connections == 0


def test_late_segments_of_a_closed_connection_open_nothing() -> None:
    """A retransmission captured after both FINs (the peer's ACK was lost, so the sender sent the
    data again) belongs to the closed connection, as tshark keeps it in its tcp.stream: it must
    not open a connection of its own, with a gap, an orphan response and shifted ids after it."""
    events, tcp = run(
        [
            seg(True, 1, flags=SYN),
            seg(False, 100, flags=SYN | ACK, ack=2),
            seg(True, 2, b"request", ack=101),
            seg(False, 101, b"response", ack=9),
            seg(True, 9, flags=FIN | ACK, ack=109),
            seg(False, 109, flags=FIN | ACK, ack=10),
            seg(False, 101, b"response", ack=10),  # the response again, after the FINs
            seg(True, 2, b"request", ack=110, flags=FIN | ACK | PSH),  # and the request, with its FIN
            seg(True, 50000, flags=SYN),  # a new connection on the same ports: opens one
        ]
    )
    opened = [e.conn.id for e in events if isinstance(e, ConnectionOpened)]
    assert opened == [0, 1]
    assert data_of(events, 0) == b"request" and data_of(events, 1) == b"response"
    assert not [e for e in events if isinstance(e, StreamGap) and e.conn.id == 0]
    assert tcp.stats["segments-after-end"] == 2


def test_connection_ids_count_connections_seen_only_in_bare_segments_as_tshark_does() -> None:
    """A capture that starts with the last ACK or FIN of a connection: tshark gives that packet a
    tcp.stream, so kafkapy's ids (documented as tshark's tcp.stream) must count it too."""
    other = ("10.0.0.3", 40001)
    events, _ = run(
        [
            seg(True, 500, flags=FIN | ACK, ack=900),  # the tail of a connection: opens nothing...
            seg(False, 900, flags=ACK, ack=501),  # (its other direction: the same connection)
            seg(True, 1, flags=SYN, client=other),  # ...but the next connection is tcp.stream 1
            seg(True, 2, b"data", client=other),
            seg(False, 900, b"late", ack=501),  # bytes on the first tuple: its id, 0
        ]
    )
    opened = {e.conn.id: e.conn.client for e in events if isinstance(e, ConnectionOpened)}
    assert opened == {1: other, 0: CLIENT}


def test_a_new_connection_without_its_syn_on_a_closed_tuple_still_opens() -> None:
    """Bytes far from the closed connection's sequence space are a new connection whose SYN the
    capture missed, not a late copy."""
    events, _ = run(
        [
            seg(True, 1, flags=SYN),
            seg(True, 2, b"old", ack=0),
            seg(True, 5, flags=FIN | ACK),
            seg(False, 100, flags=FIN | ACK, ack=6),
            seg(True, 7_000_000, b"new"),
        ]
    )
    assert [e.conn.id for e in events if isinstance(e, ConnectionOpened)] == [0, 1]
    assert data_of([e for e in events if getattr(e, "conn", None) and e.conn.id == 1], 0) == b"new"


def test_port_reuse_opens_a_new_connection() -> None:
    events, _ = run(
        [
            seg(True, 1, flags=SYN),
            seg(True, 2, b"first"),
            seg(True, 77777, flags=SYN),  # new ISN on the same 4-tuple
            seg(True, 77778, b"second"),
        ]
    )
    opened = [e.conn.id for e in events if isinstance(e, ConnectionOpened)]
    assert opened == [0, 1]
    assert [e.reason for e in events if isinstance(e, ConnectionClosed)] == ["reused", "capture-end"]
    assert [e.data for e in events if isinstance(e, StreamData)] == [b"first", b"second"]


@pytest.mark.parametrize(
    ("first", "basis", "client"),
    [
        (seg(False, 1, flags=SYN | ACK, ack=5), "syn", CLIENT),  # a SYN-ACK: its receiver is the client
        # sent from port 9092: its receiver is the client
        (
            seg(True, 1, b"data", client=("10.0.0.1", 9092), server=("10.0.0.2", 41000)),
            "port",
            ("10.0.0.2", 41000),
        ),
        (seg(False, 1, b"x", server=("10.0.0.2", 7777)), "first-speaker", ("10.0.0.2", 7777)),
    ],
)
def test_client_side_detection(first: TcpSegment, basis: str, client: tuple[str, int]) -> None:
    events, _ = run([first])
    conn = events[0].conn
    assert conn.role_basis == basis
    assert conn.client == client


def test_pending_bytes_are_capped() -> None:
    segments = [seg(True, 1, flags=SYN)] + [seg(True, 100 + 10 * i, b"x" * 10) for i in range(20)]
    events, tcp = run(segments, max_pending=100)
    assert gaps_of(events, 0)[0] == (0, 98, "lost")
    assert tcp.stats["pending-overflows"] == 1
    assert data_of(events, 0) == b"x" * 200


def test_idle_connections_are_closed() -> None:
    events, _ = run(
        [
            seg(True, 1, b"a", ts=0.0),
            seg(True, 1, b"a", ts=1.0, client=("10.0.0.9", 1)),
            seg(True, 2, b"b", ts=2000.0),
        ],
        idle_timeout=600.0,
    )
    closed = [(e.conn.id, e.reason) for e in events if isinstance(e, ConnectionClosed)]
    # Both were idle for over 600 s at ts 2000; the late segment reopens the first 4-tuple.
    assert closed == [(0, "idle"), (1, "idle"), (2, "capture-end")]
    assert [e.conn.id for e in events if isinstance(e, ConnectionOpened)] == [0, 1, 2]


@settings(max_examples=200, deadline=None)
@given(
    st.binary(min_size=1, max_size=3000),
    st.integers(0, (1 << 32) - 1),
    st.data(),
)
def test_property_reordering_and_duplication_reassemble_exactly(
    payload: bytes, isn: int, data: st.DataObject
) -> None:
    cuts = sorted(
        set(data.draw(st.lists(st.integers(1, len(payload) - 1), max_size=20)) if len(payload) > 1 else [])
    )
    bounds = [0, *cuts, len(payload)]
    pieces = [(bounds[i], payload[bounds[i] : bounds[i + 1]]) for i in range(len(bounds) - 1)]
    dups = data.draw(st.lists(st.sampled_from(pieces), max_size=5))
    order = data.draw(st.permutations(pieces + dups))
    segments = [seg(True, isn, flags=SYN)] + [seg(True, isn + 1 + off, chunk) for off, chunk in order]
    events, _ = run(segments)
    assert data_of(events, 0) == payload
    assert gaps_of(events, 0) == []
    assert_contiguous(events, 0)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=2000), st.integers(0, (1 << 32) - 1), st.data())
def test_property_every_byte_reported_once_despite_loss(
    payload: bytes, isn: int, data: st.DataObject
) -> None:
    size = data.draw(st.integers(1, 300))
    pieces = [(i, payload[i : i + size]) for i in range(0, len(payload), size)]
    kept = [p for p in pieces if data.draw(st.booleans())]
    order = data.draw(st.permutations(kept))
    ack_at_end = data.draw(st.booleans())
    segments = [seg(True, isn, flags=SYN)] + [seg(True, isn + 1 + off, chunk) for off, chunk in order]
    if ack_at_end:
        segments.append(seg(False, 5, flags=ACK, ack=isn + 1 + len(payload)))
    events, _ = run(segments)
    assert_contiguous(events, 0)
    covered = 0
    for e in side_events(events, 0):
        if isinstance(e, StreamData):
            assert payload[e.offset : e.offset + len(e.data)] == e.data
            covered = e.offset + len(e.data)
        elif isinstance(e, StreamGap) and e.length is not None:
            covered = e.offset + e.length
    last_kept = max((off + len(chunk) for off, chunk in kept), default=0)
    assert covered == (len(payload) if ack_at_end else last_kept)


# -- Kafka framing ------------------------------------------------------------


def test_plausible_request() -> None:
    good = request(3, 12, 7, b"consumer-1")
    assert plausible_request(good, 0) is True
    assert plausible_request(good[:3], 0) is None
    assert plausible_request(good[:13], 0) is None  # client id length not there yet
    assert plausible_request(request(3, 12, 7, b"\x00\x01bin"), 0) is False
    assert plausible_request(request(500, 1, 7), 0) is False
    assert plausible_request(request(1010, 0, 7), 0) is True  # a private key
    assert plausible_request(request(3, 99, 7), 0) is False
    assert plausible_request(struct.pack(">ihhih", 10, 3, 1, 1, -1), 0) is True  # null client id
    assert plausible_request(struct.pack(">i", 200 * 1024 * 1024) + good[4:], 0) is False
    assert (
        plausible_request(struct.pack(">ihhi", 8, 7, 0, 1), 0) is True
    )  # ControlledShutdown v0: no client id
    assert plausible_request(b"GET / HTTP/1.1\r\n", 0) is False


def test_plausible_request_takes_its_key_limits_from_api_key() -> None:
    highest = max(key for key in ApiKey if key < FIRST_PRIVATE_API_KEY)
    assert plausible_request(request(highest, 0, 7, b"c"), 0) is True
    assert plausible_request(request(highest + 1, 0, 7, b"c"), 0) is False
    assert plausible_request(request(ApiKey.DELETE_FEATURES, 0, 7, b"c"), 0) is True
    assert plausible_request(request(FIRST_PRIVATE_API_KEY - 1, 0, 7, b"c"), 0) is False
    assert plausible_request(request(4, 0, 7, b"c"), 0) is True  # LeaderAndIsr: retired, never reused


def conversation(
    exchanges: Sequence[tuple[bytes, bytes]],
    *,
    server: tuple[str, int] = SERVER,
    client: tuple[str, int] = CLIENT,
    mss: int = 100,
    handshake: bool = True,
    drop: Iterable[tuple[bool, int]] = (),
    close: bool = True,
) -> list[tuple[float, bytes]]:
    """Packets of a connection carrying the given (request, response) byte
    strings; ``drop`` lists (from_client, stream offset) of segments to lose."""
    flow = TcpFlow(client, server, mss=mss)
    lost = set(drop)
    start = {True: flow.next_seq[True], False: flow.next_seq[False]}
    packets = flow.handshake(1.0) if handshake else []
    if handshake:
        start = {True: flow.next_seq[True], False: flow.next_seq[False]}
    ts = 1.0
    for req, resp in exchanges:
        for from_client, data in ((True, req), (False, resp)):
            ts += 0.001
            for seq, chunk in flow.segments(from_client, data):
                if (from_client, (seq - start[from_client]) % (1 << 32)) not in lost:
                    packets.append(flow.segment(from_client, seq, chunk, ts))
    if close:
        packets += flow.close(ts + 0.001)
    return packets


EXCHANGES = [
    (request(18, 3, 1, body=b"\x00" * 300), response(1, b"\x01" * 250)),
    (request(3, 12, 2), response(2, b"\x02" * 20)),
    (request(1, 13, 3, body=b"\x03" * 1000), response(3, b"\x04" * 90)),
    (request(12, 4, 4), response(4)),
]


def test_frames_split_and_coalesced_across_segments() -> None:
    # mss 7: every frame spans segments; several small frames share one
    # response segment when the whole exchange list is sent at once.
    for mss in (7, 100, 1460):
        reader = FrameReader(write_pcap(conversation(EXCHANGES, mss=mss)))
        frames = frames_of(reader)
        expected = [b for pair in EXCHANGES for b in pair]
        assert [struct.pack(">i", f.size) + f.body for f in frames] == expected
        assert [f.from_client for f in frames] == [True, False] * 4
        assert not any(f.truncated for f in frames)
        assert [f.correlation_id for f in frames] == [1, 1, 2, 2, 3, 3, 4, 4]


def test_pipelined_frames_in_one_segment() -> None:
    flow = TcpFlow(CLIENT, SERVER)
    reqs = b"".join(request(3, 12, i) for i in range(5))
    resps = b"".join(response(i, b"x" * i) for i in range(5))
    packets = flow.handshake(1.0) + flow.send(True, reqs, 1.1) + flow.send(False, resps, 1.2)
    frames = frames_of(FrameReader(write_pcap(packets)))
    assert [(f.from_client, f.correlation_id) for f in frames] == [(True, i) for i in range(5)] + [
        (False, i) for i in range(5)
    ]


def test_gap_inside_a_frame_costs_only_that_frame() -> None:
    # Lose the client's second segment: inside the 316-byte first request.
    events = list(FrameReader(write_pcap(conversation(EXCHANGES, drop=[(True, 100)]))))
    frames = frames_of(events)
    first = frames[0]
    assert first.truncated and first.reason == "gap" and first.body == EXCHANGES[0][0][4:100]
    assert first.missing == first.size - 96
    rest = [struct.pack(">i", f.size) + f.body for f in frames[1:]]
    assert rest == [EXCHANGES[0][1]] + [b for pair in EXCHANGES[1:] for b in pair]
    assert not [e for e in events if isinstance(e, Unframed)]  # still in sync: nothing discarded


def test_gap_ending_on_a_frame_boundary_keeps_sync() -> None:
    # Each message is segmented on its own (mss 100): request 1 is 326 bytes,
    # so its segment at 300 is its last and the loss ends on a boundary.
    assert len(EXCHANGES[0][0]) == 326
    events = list(FrameReader(write_pcap(conversation(EXCHANGES, drop=[(True, 300)]))))
    frames = frames_of(events)
    assert [(f.correlation_id, f.truncated) for f in frames] == [(1, True), (1, False)] + [
        (c, False) for c in (2, 2, 3, 3, 4, 4)
    ]
    assert not [e for e in events if isinstance(e, Unframed)]


def test_gap_over_a_frame_boundary_resynchronises() -> None:
    # Lose the tail of request 1 and all of request 2 (at 326), and the tail
    # of response 1 and all of response 2 (at 258): the framer must hunt.
    assert len(EXCHANGES[0][1]) == 258
    drop = [(True, 300), (True, 326), (False, 200), (False, 258)]
    events = list(FrameReader(write_pcap(conversation(EXCHANGES, drop=drop))))
    frames = frames_of(events)
    got = [(f.from_client, f.correlation_id, f.truncated) for f in frames]
    assert got == [
        (True, 1, True),  # cut by the gap
        (False, 1, True),
        (True, 3, False),  # found again by hunting for a plausible request header...
        (False, 3, False),  # ...and a response carrying an outstanding correlation id
        (True, 4, False),
        (False, 4, False),
    ]
    unframed = [(e.side, e.length, e.reason) for e in events if isinstance(e, Unframed)]
    # (The server's loss is proven first: by the ACKs on request 3.)
    assert unframed == [(1, 28, "missing"), (0, 26, "missing")]


def test_frame_cut_by_capture_end_is_emitted_truncated() -> None:
    packets = conversation(EXCHANGES[:1], close=False)
    packets = packets[:-1]  # the response's last segment never captured
    frames = frames_of(FrameReader(write_pcap(packets)))
    assert [f.truncated for f in frames] == [False, True]
    assert frames[1].reason == "capture-end" and frames[1].body == EXCHANGES[0][1][4:200]


def test_kafka_on_an_unknown_port_is_detected_and_the_port_learned() -> None:
    broker = ("10.0.0.2", 36333)
    packets = conversation(EXCHANGES[:2], server=broker)
    # A second connection to the same broker joined mid-stream: known by port now.
    packets += conversation(EXCHANGES[2:], server=broker, client=("10.0.0.3", 50000), handshake=False)
    # HTTP on another port: not Kafka, dismissed without frames.
    http = TcpFlow(("10.0.0.1", 40001), ("10.0.0.5", 8080))
    packets += http.handshake(3.0) + http.send(True, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 3.1)
    packets += http.send(False, b"HTTP/1.1 200 OK\r\n\r\n" + b"\x00\x00\x00\x10" * 100, 3.2)
    reader = FrameReader(write_pcap(packets))
    events = list(reader)
    classified = [(e.conn.id, e.kafka, e.basis) for e in events if isinstance(e, ConnectionClassified)]
    assert classified == [(0, True, "requests"), (1, True, "port"), (2, False, "no request at stream start")]
    assert 36333 in reader.kafka_ports
    frames = frames_of(events)
    assert {f.conn.id for f in frames} == {0, 1}
    assert len(frames) == 8
    assert [f.correlation_id for f in frames if f.conn.id == 1] == [3, 3, 4, 4]


def test_roles_are_corrected_by_what_flows() -> None:
    # Joined mid-stream on unknown ports, and the server spoke first (a
    # response): the first-speaker guess is wrong until the requests show.
    flow = TcpFlow(("10.0.0.1", 33000), ("10.0.0.2", 36999))
    packets = flow.send(False, response(7, b"tail of an earlier exchange"), 1.0)
    packets += flow.send(True, request(3, 12, 8), 1.1) + flow.send(False, response(8, b"ok"), 1.2)
    events = list(FrameReader(write_pcap(packets)))
    conn = next(e.conn for e in events if isinstance(e, ConnectionClassified))
    assert conn.client == ("10.0.0.1", 33000) and conn.role_basis == "requests"
    frames = frames_of(events)
    # Once classified, the client's buffered frames come out first, so the
    # server's can be checked against them.
    assert [(f.from_client, f.correlation_id) for f in frames] == [(True, 8), (False, 7), (False, 8)]


def test_dismissed_connection_is_reconsidered_when_its_port_is_learned() -> None:
    broker = ("10.0.0.2", 7000)
    slow = TcpFlow(("10.0.0.1", 41000), broker, mss=1460)
    # Mid-stream, both directions in the middle of something big: not judged Kafka.
    packets = slow.send(True, b"\xee" * 70_000, 1.0) + slow.send(False, b"\xee" * 70_000, 1.1)
    # Another client connects with a handshake and sends a request: port 7000 is Kafka.
    packets += conversation(EXCHANGES[:1], server=broker, client=("10.0.0.3", 42000), close=False)
    # The first connection carries on with a request/response.
    packets += slow.send(True, request(3, 12, 99), 2.0) + slow.send(False, response(99, b"meta"), 2.1)
    events = list(FrameReader(write_pcap(packets)))
    classified = [(e.conn.id, e.kafka, e.basis) for e in events if isinstance(e, ConnectionClassified)]
    assert classified == [
        (0, False, "no request in the first bytes"),
        (1, True, "requests"),
        (0, True, "port"),
    ]
    assert [(f.conn.id, f.correlation_id) for f in frames_of(events) if f.conn.id == 0] == [(0, 99), (0, 99)]


def test_framer_tolerates_events_for_unknown_connections() -> None:
    events, _ = run([seg(True, 1, flags=SYN), seg(True, 2, request(3, 1, 1))])
    framer = KafkaFramer()
    out = [x for e in events if not isinstance(e, ConnectionOpened) for x in framer.feed(e)]
    assert out == []


def test_memory_does_not_grow_with_the_capture() -> None:
    import tracemalloc

    flow = TcpFlow(CLIENT, SERVER)
    packets = flow.handshake(1.0)
    for corr in range(1500):
        packets += flow.send(True, request(1, 13, corr, body=b"r" * 100), 1.0 + corr / 1e4)
        packets += flow.send(False, response(corr, b"f" * 5000), 1.0 + corr / 1e4)
    capture = write_pcap(packets)
    size = len(capture.getvalue())
    assert size > 8_000_000
    tracemalloc.start()
    try:
        count = sum(1 for e in FrameReader(capture) if isinstance(e, Frame))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 3000
    assert peak < 200_000, f"peak {peak} bytes for a {size}-byte capture"


# -- real captures --------------------------------------------------------------

# (connection id, sender port, frame size, correlation id), as tshark's Kafka
# dissector reads them (kafka.len, kafka.correlation_id).
EXPECTED_FRAMES = {
    "00-produce-v2.pcap": [(0, 34128, 117, 1), (0, 9092, 46, 1)],
    "00-produce-v7-sw8.pcap": [(0, 54618, 308, 1), (0, 36333, 65, 1)],
    "00-produce-v9.pcap": [(0, 51704, 152, 47), (0, 36333, 55, 47)],
    "01-fetch-v12-ok.pcap": [(0, 41972, 116, 15603), (0, 36333, 17, 15603)],
    "01-fetch-v12-perf.pcap": [(0, 33118, 73, 20), (0, 9092, 17, 20)],
    "01-fetch-v12-unknown.pcap": [(0, 50020, 73, 20), (0, 9092, 17, 20)],
    "11-join-group-v7.pcap": [(0, 30120, 141, 120), (0, 36333, 75, 120)],
    "13-leave-group-v4.pcap": [(0, 54280, 94, 201), (0, 36333, 72, 201)],
    "14-sync-group-v5.pcap": [(0, 30120, 207, 120), (0, 36333, 66, 120)],
    "18-api-versions-v3.pcap": [(0, 32906, 49, 2), (0, 9092, 435, 2)],
    "mixed-with-unsupported.pcap": [
        (0, 56786, 72, 15551976),
        (1, 56848, 169, 15551977),
        (1, 9092, 27, 15551977),
        (1, 56848, 141, 15551978),
        (1, 9092, 12, 15551978),
        (0, 9092, 17, 15551976),
    ],
}


def _our_frames(path: Path) -> tuple[list[Frame], FrameReader]:
    reader = FrameReader(path)
    return frames_of(reader), reader


@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_real_capture_frames(path: Path) -> None:
    frames, reader = _our_frames(path)
    got = [(f.conn.id, f.conn.endpoints[f.side].port, f.size, f.correlation_id) for f in frames]
    assert got == EXPECTED_FRAMES[path.name]
    assert not any(f.truncated for f in frames)  # none of these captures cut a frame
    for f in frames:
        assert f.from_client == (f.conn.server.port not in (f.conn.endpoints[f.side].port,))
        assert f.conn.server.port in (9092, 36333)
    assert reader.packets.skipped == {}
    assert reader.capture is not None and not reader.capture.truncated


def _tshark(path: Path, *fields: str, decode_as: Iterable[int] = ()) -> list[list[str]]:
    if TSHARK is None:
        pytest.skip(
            "TSHARK NOT INSTALLED: cross-checks against Wireshark are SKIPPED "
            "(DEBIAN_FRONTEND=noninteractive apt-get install -y tshark)"
        )
    cmd = [TSHARK, "-r", str(path), "-T", "fields", "-E", "separator=/t", "-E", "aggregator=;"]
    for port in decode_as:
        cmd += ["-d", f"tcp.port=={port},kafka"]
    for field in fields:
        cmd += ["-e", field]
    return [
        line.split("\t")
        for line in subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    ]


@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_real_capture_streams_match_tshark(path: Path) -> None:
    rows = _tshark(path, "tcp.stream", "tcp.srcport", "tcp.len")
    want: dict[tuple[int, int], int] = {}
    for stream, port, length in rows:
        want[(int(stream), int(port))] = want.get((int(stream), int(port)), 0) + int(length)
    events, _ = run(s for s in _segments(path))
    got: dict[tuple[int, int], int] = {}
    for e in events:
        if isinstance(e, StreamData):
            key = (e.conn.id, e.conn.endpoints[e.side].port)
            got[key] = got.get(key, 0) + len(e.data)
    assert got == {k: v for k, v in want.items() if v}


@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_real_capture_frames_match_tshark(path: Path) -> None:
    frames, reader = _our_frames(path)
    rows = _tshark(
        path, "tcp.stream", "tcp.srcport", "kafka.len", "kafka.correlation_id", decode_as=reader.kafka_ports
    )
    want = []
    for stream, port, lens, corrs in rows:
        for length, corr in zip(lens.split(";"), corrs.split(";")) if lens else ():
            want.append((int(stream), int(port), int(length), int(corr)))
    got = [(f.conn.id, f.conn.endpoints[f.side].port, f.size, f.correlation_id) for f in frames]
    assert got == want


def test_synthetic_capture_frames_match_tshark(tmp_path: Path) -> None:
    path = tmp_path / "synthetic.pcap"
    path.write_bytes(write_pcap(conversation(EXCHANGES, mss=7)).getvalue())
    test_real_capture_frames_match_tshark(path)


def _segments(path: Path) -> Iterable[TcpSegment]:
    from kafkapy.capture import PacketDecoder, read_packets

    decoder = PacketDecoder()
    for packet in read_packets(path):
        s = decoder.decode(packet)
        if s is not None:
            yield s


# -- pairing --------------------------------------------------------------------


class _Header:
    def __init__(self, body: bytes) -> None:
        self.api_key, self.api_version, self.correlation_id = struct.unpack_from(">hhi", body)
        self.client_id: str | None = None
        self.body: dict[str, Any] = {}
        self.trailing_bytes = 0


class _Response:
    def __init__(self, body: bytes, api_key: int, api_version: int) -> None:
        (self.correlation_id,) = struct.unpack_from(">i", body)
        self.body: dict[str, Any] = {"decoded_as": (api_key, api_version)}


class FakeDecoder:
    """Stands in for kafkapy.protocol: decodes only headers; API key 99 is unknown."""

    def decode_request_header(self, frame_body: bytes) -> _Header:
        if len(frame_body) < 8:
            raise DecodeError("short header", truncated=True)
        return _Header(frame_body)

    def decode_request(self, frame_body: bytes) -> _Header:
        header = self.decode_request_header(frame_body)
        if header.api_key == 99:
            raise DecodeError("unknown api key 99", api_key=99)
        return header

    def decode_response(self, frame_body: bytes, api_key: int, api_version: int) -> _Response:
        if len(frame_body) < 6:
            raise DecodeError("short response", truncated=True)
        return _Response(frame_body, api_key, api_version)


def exchanges_of(packets: list[tuple[float, bytes]]) -> list[Exchange]:
    return list(pair_frames(FrameReader(write_pcap(packets)), Pairer(FakeDecoder())))


def test_pairing_by_correlation_id_decodes_with_the_requests_key_and_version() -> None:
    flow = TcpFlow(CLIENT, SERVER)
    reqs = [request(3, 12, 1), request(0, 9, 2), request(1, 13, 3)]
    packets = flow.handshake(1.0) + flow.send(True, b"".join(reqs), 1.1)
    # acks=0-style: request 2 is never answered; responses 1 and 3 are.
    packets += flow.send(False, response(1, b"aa") + response(3, b"bb"), 1.2) + flow.close(1.3)
    got = exchanges_of(packets)
    assert [(x.status, x.correlation_id, x.paired_by) for x in got] == [
        ("ok", 1, "correlation-id"),
        ("no_response", 2, None),
        ("ok", 3, "correlation-id"),
    ]
    assert got[0].response is not None and got[0].response.body == {"decoded_as": (3, 12)}
    assert got[2].response is not None and got[2].response.body == {"decoded_as": (1, 13)}
    assert got[0].latency is not None and got[0].latency >= 0


def test_empty_response_to_an_unknown_request() -> None:
    flow = TcpFlow(CLIENT, SERVER)
    packets = (
        flow.handshake(1.0) + flow.send(True, request(99, 0, 5), 1.1) + flow.send(False, response(5), 1.2)
    )
    (x,) = exchanges_of(packets)
    assert x.status == "empty_response" and x.api_key == 99
    assert x.request_error is not None and x.response_error is None


def test_orphan_response_and_unanswered_request() -> None:
    flow = TcpFlow(CLIENT, SERVER)
    packets = flow.send(False, response(41, b"xx"), 1.0)  # its request predates the capture
    packets += flow.send(True, request(3, 12, 42), 1.1)
    got = exchanges_of(packets)
    assert [(x.status, x.correlation_id) for x in got] == [("orphan_response", 41), ("no_response", 42)]


def test_pairing_falls_back_to_order_when_the_correlation_id_is_unreadable() -> None:
    flow = TcpFlow(CLIENT, SERVER, mss=6)
    packets = flow.handshake(1.0)
    segments = [flow.segment(True, seq, chunk, 1.1) for seq, chunk in flow.segments(True, request(3, 12, 1))]
    packets += segments[:1] + segments[2:]  # bytes 6..11, holding the correlation id, are lost
    packets += flow.send(False, response(1, b"zz"), 1.2)
    (x,) = exchanges_of(packets)
    assert x.paired_by == "order"
    assert x.status == "truncated"
