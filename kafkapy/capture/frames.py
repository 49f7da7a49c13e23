"""Kafka framing: from reassembled TCP streams to size-prefixed Kafka frames.

Theory of operation
-------------------
Every Kafka message on the wire is an int32 size followed by that many bytes
(the "frame body", which starts with the request or response header). Each
direction of a connection is split independently by a small state machine:

    SYNCED    at a frame boundary: read the size, wait for the whole body
    SKIPPING  discarding the rest of a frame whose middle the capture lost
    HUNTING   position unknown: look for the next plausible frame header
    UNDECIDED the connection is not yet known to carry Kafka

A stream that starts with a SYN starts SYNCED. One that the capture joined
mid-stream starts HUNTING, and the first candidate tried is offset 0. A gap
inside a frame whose size is known costs only that frame (emitted truncated),
because the next frame's position is still known; a gap over a frame
boundary costs a HUNT.

Hunting uses ``plausible_request`` for the client's direction and, for the
server's, a size of at least 4 followed by the correlation id of a request
still waiting for its response. Those checks also decide whether a
connection on an unknown port carries Kafka at all: the ports in
``kafka_ports`` are trusted, and the server port of every connection whose
client sends a plausible request is added to that set (so later connections
to the same broker port are recognised without looking, and earlier ones
that were dismissed are picked up again).

Frames of one direction come out in stream order; across directions, in
capture order, except that when a connection is classified the client's
buffered frames come out before the server's (whose hunt needs them).

Memory: a SYNCED direction holds at most one partial frame (capped by
``max_frame_size``), a HUNTING one only the bytes of a candidate header it
cannot judge yet, and an UNDECIDED one at most ``PROBE_LIMIT`` bytes.
"""

from __future__ import annotations

import bisect
import os
import re
import struct
from collections.abc import Iterable, Iterator, MutableSet
from typing import Any, BinaryIO, Literal, NamedTuple

import attrs

from kafkapy.capture.packets import PacketDecoder
from kafkapy.capture.pcap import MAX_CAPLEN, CaptureReader, Packet
from kafkapy.capture.tcp import (
    _MAX_WINDOW,
    DEFAULT_KAFKA_PORTS,
    Connection,
    ConnectionClosed,
    ConnectionOpened,
    StreamData,
    StreamEnd,
    StreamGap,
    TcpEvent,
    TcpReassembler,
    _Half,
)
from kafkapy.protocol.api_keys import FIRST_PRIVATE_API_KEY, ApiKey

__all__ = [
    "MAX_FRAME_SIZE",
    "PROBE_LIMIT",
    "ConnectionClassified",
    "Frame",
    "FrameEvent",
    "FrameReader",
    "KafkaFramer",
    "Unframed",
    "plausible_request",
    "read_frames",
]

# Kafka's socket.request.max.bytes default (104857600): a broker closes the
# connection on any larger request, so no real frame is bigger. Responses have
# no such limit in principle, but fetch.max.bytes (50 MiB) keeps them below it.
MAX_FRAME_SIZE = 104_857_600

# Kafka numbers its APIs from 0 and never reuses a retired key (LeaderAndIsr, StopReplica and
# UpdateMetadata, 4-6, left the specs but old captures still carry them), so any key up to the
# highest the catalogue knows is plausible; above it, only kafkapy's private keys (ApiKey's
# members from FIRST_PRIVATE_API_KEY, the seed designs in protocol_specs/).
_MAX_API_KEY = int(max(key for key in ApiKey if key < FIRST_PRIVATE_API_KEY))
_PRIVATE_API_KEYS = frozenset(int(key) for key in ApiKey if key >= FIRST_PRIVATE_API_KEY)
# The highest request version in Kafka 4.x is Fetch v17; 24 is headroom.
_MAX_API_VERSION = 24
# client.id has no length limit in Kafka, but real ones are short names like
# "consumer-<group>-1", and group ids are usually under 255 characters.
_MAX_CLIENT_ID = 4096

#: Bytes per direction examined before deciding a connection on an unknown
#: port is not Kafka. 64 KiB is larger than most Kafka requests other than
#: Produce, so a client joined mid-stream will start a new request by then.
PROBE_LIMIT = 65_536

# Requests a connection may have waiting for responses before the oldest is
# forgotten. Clients pipeline at most max.in.flight.requests.per.connection
# (5 by default); the rest of the margin covers acks=0 Produce requests,
# which never get a response.
_MAX_OUTSTANDING = 1024

_I32 = struct.Struct(">i")
_RESP_HEAD = struct.Struct(">ii")
# How far below the first request's correlation id a response that opens a
# mid-stream capture may be. Clients count requests up by one, so this is
# "a million requests before the capture", while a random int32 lands in
# the window only once in 4096 tries.
_CORR_WINDOW = 1 << 20
_REQ_HEAD = struct.Struct(">ihhi")
# Ethernet + IPv4 (no options) + TCP up to the flags byte: ethertype, IP
# version/IHL, total length, fragment word, protocol, seq, ack, data offset, flags.
_ETH_IPV4_TCP = struct.Struct("!12xHBxH2xHxB2x4x4x2x2xIIBB")
# A pcapng Enhanced Packet Block up to its data: type, total length, interface,
# timestamp high and low, captured and original length; per byte order.
_EPB = {order: struct.Struct(order + "IIIIIII") for order in "<>"}
_U32 = {order: struct.Struct(order + "I") for order in "<>"}
# The longest Enhanced Packet Block the fast path's walk waits for when it
# straddles chunks (the largest packet, its header and some options); a
# longer one is left to the reader, which skips its options piecewise.
_NG_WAIT = MAX_CAPLEN + 4096

UnframedReason = Literal["missing", "discarded"]


class Frame(NamedTuple):
    """One Kafka frame: ``body`` is the frame without its 4-byte size prefix.

    A truncated frame has fewer than ``size`` body bytes: the capture lost
    part of it (``reason`` says how). Its header is usually still readable.

    A named tuple, immutable like the other events: one is made per frame, and
    a tuple costs a third of a frozen attrs instance to build (measured: 0.26
    against 0.70 us): as attrs instances, a row's two frames were a tenth of its cost.
    """

    conn: Connection
    side: int
    from_client: bool
    ts: float  # when the frame's first byte was captured
    end_ts: float  # when its last byte (or the last byte seen) was captured
    offset: int  # stream offset of the size prefix
    size: int  # the declared body size
    body: bytes
    truncated: bool = False
    reason: str | None = None  # "gap", "capture-end", "fin", "rst", ... when truncated

    @property
    def missing(self) -> int:
        return self.size - len(self.body)

    @property
    def correlation_id(self) -> int | None:
        at = 4 if self.from_client else 0
        if len(self.body) < at + 4:
            return None
        return int(_I32.unpack_from(self.body, at)[0])

    @property
    def api_key(self) -> int | None:
        """A request's API key, read straight from its header."""
        if not self.from_client or len(self.body) < 2:
            return None
        return int.from_bytes(self.body[:2], "big", signed=True)

    @property
    def api_version(self) -> int | None:
        if not self.from_client or len(self.body) < 4:
            return None
        return int.from_bytes(self.body[2:4], "big", signed=True)


@attrs.frozen
class Unframed:
    """Stream bytes that belong to no emitted frame.

    "missing": the capture does not have them (``length`` None: an unknown
    amount before the capture started). "discarded": seen but skipped while
    looking for a frame boundary.
    """

    conn: Connection
    side: int
    ts: float
    offset: int
    length: int | None
    reason: UnframedReason


@attrs.frozen
class ConnectionClassified:
    """The framer decided whether a connection carries Kafka, and why."""

    conn: Connection
    ts: float
    kafka: bool
    basis: str


FrameEvent = Frame | Unframed | ConnectionClassified | ConnectionClosed

_UNDECIDED, _SYNCED, _SKIPPING, _HUNTING, _IGNORED = range(5)


def plausible_request(buf: bytes | bytearray, pos: int, max_size: int = MAX_FRAME_SIZE) -> bool | None:
    """Could a client->server frame start at ``buf[pos]``? None: need more bytes."""
    avail = len(buf) - pos
    if avail < 4:
        return None
    size = _I32.unpack_from(buf, pos)[0]
    if size < 8 or size > max_size:
        return False
    if avail < 12:
        if avail >= 6:
            key = int.from_bytes(buf[pos + 4 : pos + 6], "big", signed=True)
            if not (0 <= key <= _MAX_API_KEY or key in _PRIVATE_API_KEYS):
                return False
        return None
    _, key, version, _corr = _REQ_HEAD.unpack_from(buf, pos)
    if not (0 <= key <= _MAX_API_KEY or key in _PRIVATE_API_KEYS):
        return False
    if not 0 <= version <= _MAX_API_VERSION:
        return False
    if key == ApiKey.CONTROLLED_SHUTDOWN and version == 0:
        return True  # request header v0: no client id to judge
    if size < 10:
        return False
    if avail < 14:
        return None
    cid_len = int.from_bytes(buf[pos + 12 : pos + 14], "big", signed=True)
    if cid_len == -1:
        return True
    if cid_len < 0 or cid_len > size - 10 or cid_len > _MAX_CLIENT_ID:
        return False
    if avail < 14 + cid_len:
        return None
    try:
        cid = bytes(buf[pos + 14 : pos + 14 + cid_len]).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return cid.isprintable()


def _request_candidates(max_size: int) -> re.Pattern[bytes]:
    """Positions worth a full plausible_request check: size's top byte within
    range, API key's top byte one a plausible key has (today 0 for Kafka's keys, 3 for the
    private 1000-1020), version's top byte 0. The lookahead finds overlapping candidates."""
    top = max(0, min(max_size >> 24, 0x7F))
    key_tops = bytes(sorted({key >> 8 for key in (*range(_MAX_API_KEY + 1), *_PRIVATE_API_KEYS)}))
    size_top = re.escape(bytes([top]))
    return re.compile(rb"(?s)(?=[\x00-" + size_top + rb"]...[" + re.escape(key_tops) + rb"].\x00)")


class _Side:
    """Framing state of one direction."""

    __slots__ = (
        "base",
        "boundary",
        "buf",
        "lenient",
        "marks_off",
        "marks_ts",
        "probe_failed",
        "probe_pos",
        "side",
        "skip_left",
        "state",
    )

    def __init__(self, side: int) -> None:
        self.side = side
        self.buf = bytearray()
        self.base = 0  # stream offset of buf[0]
        self.marks_off: list[int] = []  # where each buffered chunk starts...
        self.marks_ts: list[float] = []  # ...and when it was captured
        self.state = _UNDECIDED
        self.skip_left = 0
        self.boundary = True  # the stream starts at a frame boundary (no gap so far)
        self.lenient = False  # joined mid-stream: may take an unverifiable first response
        self.probe_pos = 0
        self.probe_failed = False

    def ts_at(self, offset: int, default: float) -> float:
        i = bisect.bisect_right(self.marks_off, offset) - 1
        return self.marks_ts[i] if i >= 0 else default

    def consume(self, n: int) -> None:
        if n <= 0:
            return
        del self.buf[:n]
        self.base += n
        i = bisect.bisect_right(self.marks_off, self.base) - 1
        if i > 0:
            del self.marks_off[:i]
            del self.marks_ts[:i]

    def clear_to(self, offset: int) -> None:
        self.buf.clear()
        self.base = offset
        self.marks_off.clear()
        self.marks_ts.clear()


@attrs.define(eq=False)
class _ConnState:
    conn: Connection
    sides: tuple[_Side, _Side]
    kafka: bool | None = None
    outstanding: dict[bytes, None] = attrs.Factory(dict)  # correlation ids (4 raw bytes) awaiting a response
    first_request_corr: int | None = None

    def note(self, from_client: bool, body: bytes) -> None:
        """Track the correlation ids awaiting an answer (bounded), which tells a broker-initiated
        request from a response later on."""
        if from_client:
            if len(body) >= 8:
                if self.first_request_corr is None:
                    self.first_request_corr = _I32.unpack_from(body, 4)[0]
                outstanding = self.outstanding
                outstanding[body[4:8]] = None
                if len(outstanding) > _MAX_OUTSTANDING:
                    del outstanding[next(iter(outstanding))]
        elif len(body) >= 4:
            self.outstanding.pop(body[:4], None)


class KafkaFramer:
    """Feeds TCP events; returns Kafka frames and framing events.

    ``kafka_ports`` is a live set: the framer adds the server port of every
    connection whose content proves it is Kafka. Share it with the
    TcpReassembler so both layers agree on which side is the server.
    """

    def __init__(
        self,
        kafka_ports: MutableSet[int] | None = None,
        *,
        max_frame_size: int = MAX_FRAME_SIZE,
        learn_ports: bool = True,
    ) -> None:
        self.kafka_ports: MutableSet[int] = set(DEFAULT_KAFKA_PORTS) if kafka_ports is None else kafka_ports
        self.max_frame_size = max_frame_size
        self.learn_ports = learn_ports
        self._candidates = _request_candidates(max_frame_size)
        self._conns: dict[int, _ConnState] = {}

    # -- entry points -----------------------------------------------------

    def feed(self, event: TcpEvent) -> list[FrameEvent]:
        out: list[FrameEvent] = []
        if isinstance(event, ConnectionOpened):
            cs = _ConnState(event.conn, (_Side(0), _Side(1)))
            self._conns[event.conn.id] = cs
            self._classify_by_port(cs, event.ts, out)
            return out
        cs_or_none = self._conns.get(event.conn.id)
        if cs_or_none is None:
            return out
        cs = cs_or_none
        if isinstance(event, StreamData):
            self._data(cs, event, out)
        elif isinstance(event, StreamGap):
            self._gap(cs, cs.sides[event.side], event.offset, event.length, event.ts, out)
        elif isinstance(event, StreamEnd):
            self._end(cs, cs.sides[event.side], event.ts, event.reason, out)
        elif isinstance(event, ConnectionClosed):
            for s in cs.sides:
                self._end(cs, s, event.ts, event.reason, out)
            if cs.kafka is None:
                self._decide(cs, False, "closed before any Kafka request", event.ts, out)
            del self._conns[event.conn.id]
            if cs.kafka:
                out.append(event)
        return out

    # -- classification ---------------------------------------------------

    def _classify_by_port(self, cs: _ConnState, ts: float, out: list[FrameEvent]) -> bool:
        conn = cs.conn
        a, b = conn.endpoints
        known_a, known_b = a.port in self.kafka_ports, b.port in self.kafka_ports
        if not (known_a or known_b):
            return False
        if known_a != known_b and conn.role_basis != "syn":
            server = 0 if known_a else 1
            if conn.client_side == server:
                conn.set_client(1 - server, "port")
        self._decide(cs, True, "port", ts, out)
        return True

    def _decide(self, cs: _ConnState, kafka: bool, basis: str, ts: float, out: list[FrameEvent]) -> None:
        cs.kafka = kafka
        conn = cs.conn
        out.append(ConnectionClassified(conn, ts, kafka, basis))
        if not kafka:
            conn.ignored = True
            for s in cs.sides:
                s.state = _IGNORED
                s.clear_to(s.base + len(s.buf))
            return
        conn.ignored = False
        if self.learn_ports and basis == "requests" and conn.server.port not in self.kafka_ports:
            self.kafka_ports.add(conn.server.port)
            self._reconsider(conn.server.port, ts, out)
        client = cs.sides[conn.client_side]
        server = cs.sides[1 - conn.client_side]
        for s in (client, server):
            s.state = _SYNCED if s.boundary else _HUNTING
        for s in (client, server):
            self._drain(cs, s, ts, out)

    def _reconsider(self, port: int, ts: float, out: list[FrameEvent]) -> None:
        """Connections dismissed as not Kafka that use a newly learned port
        get another chance, from their next byte on."""
        for cs in self._conns.values():
            if cs.kafka is False and port in (cs.conn.endpoints[0].port, cs.conn.endpoints[1].port):
                for s in cs.sides:
                    s.boundary = False
                    s.lenient = False
                    s.state = _UNDECIDED
                self._classify_by_port(cs, ts, out)

    def _probe(self, cs: _ConnState, ts: float, out: list[FrameEvent]) -> None:
        if self._classify_by_port(cs, ts, out):
            return
        conn = cs.conn
        client = cs.sides[conn.client_side]
        server = cs.sides[1 - conn.client_side]
        if conn.role_basis == "syn" and client.boundary:
            # With the handshake seen, the client's first bytes must be a
            # request header, and a Kafka server never speaks first.
            if not client.buf:
                if server.buf:
                    self._decide(cs, False, "server spoke first", ts, out)
                return
            verdict = plausible_request(client.buf, 0, self.max_frame_size)
            if verdict is None and len(client.buf) < PROBE_LIMIT:
                return
            self._decide(cs, bool(verdict), "requests" if verdict else "no request at stream start", ts, out)
            return
        for s in (client, server):
            if s.probe_failed or len(s.buf) <= s.probe_pos:
                continue
            p, found = self._hunt_request(s.buf, s.probe_pos)
            if found:
                if s is server:
                    conn.set_client(s.side, "requests")
                self._decide(cs, True, "requests", ts, out)
                return
            s.probe_pos = p
            if len(s.buf) >= PROBE_LIMIT:
                s.probe_failed = True
                s.clear_to(s.base + len(s.buf))
                s.probe_pos = 0
        if client.probe_failed and server.probe_failed:
            self._decide(cs, False, "no request in the first bytes", ts, out)

    # -- stream events ----------------------------------------------------

    def _data(self, cs: _ConnState, event: StreamData, out: list[FrameEvent]) -> None:
        s = cs.sides[event.side]
        if s.state == _IGNORED:
            s.clear_to(event.offset + len(event.data))
            return
        expected = s.base + len(s.buf)
        if event.offset != expected:
            # Bytes skipped while the connection was ignored: a gap to us.
            self._gap(cs, s, expected, event.offset - expected, event.ts, out)
        s.marks_off.append(event.offset)
        s.marks_ts.append(event.ts)
        s.buf += event.data
        if s.state == _UNDECIDED:
            self._probe(cs, event.ts, out)
        else:
            self._drain(cs, s, event.ts, out)

    def _gap(
        self, cs: _ConnState, s: _Side, offset: int, length: int | None, ts: float, out: list[FrameEvent]
    ) -> None:
        conn = cs.conn
        s.boundary = False
        if length is None:  # joined mid-stream (the TCP layer reported it)
            s.lenient = True
            if s.state in (_SYNCED, _SKIPPING):
                s.state = _HUNTING
            return
        after = offset + length
        if s.state in (_UNDECIDED, _IGNORED):
            s.clear_to(after)
            s.probe_pos = 0
            return
        n = len(s.buf)
        lost = length  # missing bytes that fall outside any frame
        if s.state == _SKIPPING:
            if s.skip_left >= length:
                s.skip_left -= length
                lost = 0
                if s.skip_left == 0:
                    s.state = _SYNCED
            else:
                lost = length - s.skip_left
                s.skip_left = 0
                s.state = _HUNTING
        elif s.state == _SYNCED and n >= 4:
            size = _I32.unpack_from(s.buf, 0)[0]
            remaining = 4 + size - n
            self._emit(cs, s, 0, size, bytes(s.buf[4:]), ts, out, truncated="gap")
            n = 0
            if length < remaining:
                s.state = _SKIPPING
                s.skip_left = remaining - length
                lost = 0
            else:
                lost = length - remaining
                s.state = _SYNCED if lost == 0 else _HUNTING
        else:
            s.state = _HUNTING
        if n:
            out.append(Unframed(conn, s.side, ts, s.base, n, "discarded"))
        if lost:
            out.append(Unframed(conn, s.side, ts, after - lost, lost, "missing"))
        s.clear_to(after)

    def _end(self, cs: _ConnState, s: _Side, ts: float, reason: str, out: list[FrameEvent]) -> None:
        n = len(s.buf)
        if s.state == _SYNCED and n >= 4:
            size = _I32.unpack_from(s.buf, 0)[0]
            self._emit(cs, s, 0, size, bytes(s.buf[4:]), ts, out, truncated=reason)
        elif n and s.state in (_SYNCED, _HUNTING):
            out.append(Unframed(cs.conn, s.side, ts, s.base, n, "discarded"))
        s.clear_to(s.base + n)
        s.state = _IGNORED

    # -- framing ----------------------------------------------------------

    def _emit(
        self,
        cs: _ConnState,
        s: _Side,
        pos: int,
        size: int,
        body: bytes,
        ts: float,
        out: list[FrameEvent],
        truncated: str | None = None,
    ) -> None:
        conn = cs.conn
        from_client = conn.from_client(s.side)
        offset = s.base + pos
        frame = Frame(
            conn, s.side, from_client, s.ts_at(offset, ts), ts, offset, size, body,
            truncated is not None, truncated,
        )  # fmt: skip
        cs.note(from_client, body)
        out.append(frame)

    def _drain(self, cs: _ConnState, s: _Side, ts: float, out: list[FrameEvent]) -> None:
        buf = s.buf
        n = len(buf)
        pos = 0
        from_client = cs.conn.from_client(s.side)
        min_size = 8 if from_client else 4
        while True:
            state = s.state
            if state == _SKIPPING:
                take = min(s.skip_left, n - pos)
                pos += take
                s.skip_left -= take
                if s.skip_left:
                    break
                s.state = _SYNCED
            elif state == _SYNCED:
                if n - pos < 4:
                    break
                size = _I32.unpack_from(buf, pos)[0]
                if size < min_size or size > self.max_frame_size:
                    s.state = _HUNTING  # lost sync: a length no Kafka peer sends
                    continue
                if n - pos < 4 + size:
                    break
                with memoryview(buf) as view:
                    body = bytes(view[pos + 4 : pos + 4 + size])
                self._emit(cs, s, pos, size, body, ts, out)
                pos += 4 + size
            elif state == _HUNTING:
                if from_client:
                    p, found = self._hunt_request(buf, pos)
                else:
                    p, found = self._hunt_response(cs, s, pos)
                if p > pos:
                    out.append(
                        Unframed(
                            cs.conn, s.side, s.ts_at(s.base + pos, ts), s.base + pos, p - pos, "discarded"
                        )
                    )
                    pos = p
                if not found:
                    break
                s.state = _SYNCED
            else:
                break
        s.consume(pos)

    def _fast_data(self, cs: _ConnState, s: _Side, ts: float, data: bytes) -> list[FrameEvent]:
        """StreamData for a SYNCED side with an empty buffer, without the event:
        whole frames are cut straight from ``data``; the rest goes to _drain."""
        out: list[FrameEvent] = []
        conn = cs.conn
        side = s.side
        from_client = side == conn.client_side
        min_size = 8 if from_client else 4
        max_size = self.max_frame_size
        offset = s.base
        unpack = _I32.unpack_from
        n = len(data)
        pos = 0
        while n - pos >= 4:
            size = unpack(data, pos)[0]
            if size < min_size or size > max_size or n - pos - 4 < size:
                break
            body = data[pos + 4 : pos + 4 + size]
            cs.note(from_client, body)
            out.append(Frame(conn, side, from_client, ts, ts, offset + pos, size, body, False, None))
            pos += 4 + size
        s.marks_off.clear()
        s.marks_ts.clear()
        s.marks_off.append(offset)
        s.marks_ts.append(ts)
        if pos < n:
            s.base = offset + pos
            s.buf += memoryview(data)[pos:]
            self._drain(cs, s, ts, out)
        else:
            s.base = offset + n
        return out

    def _hunt_request(self, buf: bytearray, pos: int) -> tuple[int, bool]:
        """(p, True): a plausible request starts at p. (p, False): nothing
        before p can start one; bytes from p on need more data to judge."""
        for match in self._candidates.finditer(buf, pos):
            p = match.start()
            verdict = plausible_request(buf, p, self.max_frame_size)
            if verdict:
                return p, True
            if verdict is None:
                return p, False
        # The candidate pattern needs 7 bytes, so the last 6 are undecided.
        return max(pos, len(buf) - 6), False

    def _hunt_response(self, cs: _ConnState, s: _Side, pos: int) -> tuple[int, bool]:
        buf = s.buf
        n = len(buf)
        if s.lenient and s.base + pos == 0:
            # Joined mid-stream: the first bytes may answer a request sent
            # before the capture began. Clients number requests upwards, so
            # such a response's correlation id is a little below the first
            # request's we saw (or we saw none yet).
            if n - pos < 8:
                return pos, False
            s.lenient = False
            size, corr = _RESP_HEAD.unpack_from(buf, pos)
            first = cs.first_request_corr
            if 4 <= size <= self.max_frame_size and (first is None or 0 < first - corr <= _CORR_WINDOW):
                return pos, True
        s.lenient = False
        best = -1
        for corr in cs.outstanding:
            i = buf.find(corr, pos + 4)
            while i != -1:
                p = i - 4
                size = _I32.unpack_from(buf, p)[0]
                if 4 <= size <= self.max_frame_size:
                    if best < 0 or p < best:
                        best = p
                    break
                i = buf.find(corr, i + 1)
        if best >= 0:
            return best, True
        # A correlation id needs 8 bytes from its frame start to be seen.
        return max(pos, n - 7), False


# What FrameReader's fast path keeps per direction: the connection, the TCP
# halves (sending, receiving), the connection's last-seen cell, the framer's
# side and connection state, the side's number, the connection's outstanding
# correlation ids (the state's own dict), and a cell [generation, peer live]
# saying when the TCP state the fast path needs was last found in order (see
# ``_fast``) and whether the peer's half was then started and not ended.
_Flow = tuple[Connection, _Half, _Half, list[float], _Side, _ConnState, int, dict[bytes, None], list[int]]


def frames_from_tcp(events: Iterable[TcpEvent], framer: KafkaFramer | None = None) -> Iterator[FrameEvent]:
    """Kafka framing of a stream of TCP events."""
    framer = framer or KafkaFramer()
    for event in events:
        yield from framer.feed(event)


class FrameReader:
    """A capture file, decoded as far as Kafka frames.

    Iterating yields FrameEvents in capture order; the layer objects stay
    available for their statistics (``reader.tcp.stats``,
    ``reader.packets.skipped``, ``reader.capture.truncated``).
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | BinaryIO,
        *,
        kafka_ports: Iterable[int] = DEFAULT_KAFKA_PORTS,
        max_frame_size: int = MAX_FRAME_SIZE,
        idle_timeout: float | None = None,
    ) -> None:
        self.source = source
        ports: set[int] = set(kafka_ports)
        self.packets = PacketDecoder()
        self.tcp = TcpReassembler(ports, idle_timeout=idle_timeout)
        self.framer = KafkaFramer(ports, max_frame_size=max_frame_size)
        self.capture: CaptureReader | None = None
        self.packet_count = 0
        self._layered_packets = 0  # packets that went through the layers one by one

    @property
    def kafka_ports(self) -> MutableSet[int]:
        return self.framer.kafka_ports

    @property
    def fast_packets(self) -> int:
        """Packets that took the fused fast path (see ``_fast``)."""
        return self.packet_count - self._layered_packets

    def __iter__(self) -> Iterator[FrameEvent]:
        with CaptureReader(self.source) as capture:
            self.capture = capture
            if self.tcp.idle_timeout is not None:
                # Idle sweeps run per segment: only the layer-by-layer path has them.
                yield from self._layered(capture)
            else:
                yield from self._fast(capture)
            for event in self.tcp.finish():
                yield from self.framer.feed(event)

    def _layered(self, capture: CaptureReader) -> Iterator[FrameEvent]:
        decode, feed_tcp, feed_framer = self.packets.decode, self.tcp.feed, self.framer.feed
        for packet in capture:
            self.packet_count += 1
            self._layered_packets += 1
            seg = decode(packet)
            if seg is None:
                continue
            for event in feed_tcp(seg):
                yield from feed_framer(event)

    def _fast(self, capture: CaptureReader) -> Iterator[FrameEvent]:
        """The layers fused for the common case, falling back to them for the rest.

        A packet takes the fast path when it is an untagged Ethernet/IPv4/TCP
        packet without IP options or fragmentation, captured whole, carrying
        only ACK (and PSH), in sequence on a connection both layers already
        follow, with an ACK that settles nothing, into a direction the framer
        holds in sync with an empty buffer. Then the layers would only pass
        the bytes up, so the frames are cut from the payload right here, with
        no Packet, TcpSegment or StreamData made. Every other packet goes
        through the layers one by one (``_layers``), exactly as ``_layered``
        does; the tests check both paths give the same events.

        A pcap file is walked here chunk by chunk, record headers included, so
        not even a bytes object or a tuple is made per packet: the frame
        bodies are cut straight from the chunk. So is a pcapng file's Enhanced
        Packet Blocks; every other block (section and interface headers, other
        packet blocks, anything odd, cut or corrupt) is handed back to the
        reader (``_pcapng_blocks``), whose packet is walked as a chunk of its own.
        """
        framer = self.framer
        fast_data = framer._fast_data
        unpack = _ETH_IPV4_TCP.unpack_from
        unpack_i32 = _I32.unpack_from
        max_frame = framer.max_frame_size
        # Frame's own __new__ is a Python function around this: half the cost of a frame, skipped
        new_frame = tuple.__new__
        # raw address+port bytes of one direction -> the state both layers keep for it
        flows: dict[bytes, _Flow] = {}
        flow_keys: dict[int, list[bytes]] = {}  # connection id -> its keys in ``flows``
        blocks: Iterator[tuple[bytes, Packet | None]]
        pcap = capture.format == "pcap"
        iface = 0
        # pcapng: the walker stops at a block it leaves to the reader (``handback``); the
        # section's byte order and interfaces, as the reader last found them
        handback = [True]  # the first block, a section header, is the reader's
        section: list[Any] = [_EPB["<"].unpack_from, _U32["<"].unpack_from, []]
        if pcap:
            rec, rec_size, frac_ns = capture.pcap_layout()
            unpack_rec = rec.unpack_from
            blocks = ((chunk, None) for chunk in iter(capture.read_chunk, b""))
            assert capture.linktype is not None
            linktype = capture.linktype
        else:
            capture.pcapng_start()
            blocks = self._pcapng_blocks(capture, handback, section)
        count = self.packet_count
        # The TCP state a flow needs in order (half started, not ended, nothing pending, no FIN, the
        # connection not ignored; and whether the peer half is live) changes only while a packet goes
        # through the layers, which counts ``_layered_packets``: so it is checked again only when that
        # count moved since the flow's last check, which is almost never.
        generation = self._layered_packets
        carry = b""  # a pcap record begun at the end of the last chunk
        for chunk, packet in blocks:
            if not pcap:
                ng_blocks, unpack_u32, interfaces = section
            buf = carry + chunk if carry else chunk
            end = len(buf)
            pos = 0
            while True:
                # One packet: its captured bytes are buf[b:e].
                if packet is None and not pcap:
                    # A pcapng Enhanced Packet Block this walk can vouch for: whole in the
                    # buffer, of a declared interface, with every length and the trailer
                    # as the reader checks them. Anything else is the reader's.
                    if end - pos < 28:
                        if pos < end and not chunk:
                            handback[0] = True
                        break
                    btype, total, iface, ts_hi, ts_lo, incl, orig = ng_blocks(buf, pos)
                    if (
                        btype != 6
                        or iface >= len(interfaces)
                        or incl > MAX_CAPLEN
                        or total & 3
                        or total < 32 + ((incl + 3) & ~3)
                    ):
                        handback[0] = True
                        break
                    b = pos + total
                    if b > end:
                        if total > _NG_WAIT or not chunk:
                            handback[0] = True
                        break
                    if unpack_u32(buf, b - 4)[0] != total:
                        handback[0] = True
                        break
                    linktype, ts_mul, ts_div, ts_off = interfaces[iface]
                    ts_ns = ((ts_hi << 32) | ts_lo) * ts_mul // ts_div + ts_off
                    pos, b = b, pos + 28
                    e = b + incl
                elif packet is None:
                    if end - pos < rec_size:
                        break
                    sec, frac, incl, orig = unpack_rec(buf, pos)
                    if incl > MAX_CAPLEN:
                        raise capture.oversized(incl, end - pos)
                    b = pos + rec_size
                    e = b + incl
                    if e > end:
                        break
                    pos = e
                    ts_ns = sec * 1_000_000_000 + frac * frac_ns
                else:
                    if pos < 0:
                        break
                    pos = -1
                    b, e = 0, end
                    ts_ns, linktype = packet.ts_ns, packet.linktype
                count += 1
                raw_key = None
                if linktype == 1 and e - b >= 54:
                    ethertype, vihl, total, frag, proto, seq, ack, doff, flags = unpack(buf, b)
                    if ethertype == 0x0800 and vihl == 0x45 and proto == 6 and not frag & 0x3FFF:
                        raw_key = buf[b + 26 : b + 38]
                        flow = flows.get(raw_key)
                        if flow is not None and (flags == 0x10 or flags == 0x18):
                            conn, half, peer, last_seen, fside, cs, side, outstanding, settled = flow
                            if settled[0] != generation:
                                if (
                                    half.started
                                    and not half.ended
                                    and not half.pending
                                    and half.fin_at is None
                                    and not conn.ignored
                                ):
                                    settled[0] = generation
                                    settled[1] = peer.started and not peer.ended
                                else:
                                    settled[0] = -1
                            hlen = (doff >> 4) * 4
                            start = b + 34 + hlen  # the TCP payload...
                            stop = b + 14 + total  # ...ends with the IP packet
                            nxt = half.next
                            offset = fside.base
                            if (
                                settled[0] == generation
                                and hlen >= 20
                                and start <= stop <= e
                                and not (seq - nxt) & 0xFFFFFFFF
                                and (not settled[1] or not 0 < (ack - peer.next) & 0xFFFFFFFF <= _MAX_WINDOW)
                                and (
                                    stop == start
                                    or (
                                        fside.state == _SYNCED
                                        and not fside.buf
                                        and offset == nxt - half.start
                                    )
                                )
                            ):
                                ts = ts_ns / 1e9
                                last_seen[0] = ts
                                self.packet_count = count
                                n = stop - start
                                if n:
                                    half.next = nxt + n
                                    from_client = side == conn.client_side
                                    size = unpack_i32(buf, start)[0] if n >= 4 else -1
                                    if size + 4 == n and (8 if from_client else 4) <= size <= max_frame:
                                        # One whole frame, the most common packet of all.
                                        body = buf[start + 4 : stop]
                                        # _ConnState.note, inlined
                                        if from_client:
                                            if cs.first_request_corr is None:
                                                cs.first_request_corr = unpack_i32(body, 4)[0]
                                            outstanding[body[4:8]] = None
                                            if len(outstanding) > _MAX_OUTSTANDING:
                                                del outstanding[next(iter(outstanding))]
                                        else:
                                            outstanding.pop(body[:4], None)
                                        fside.base = offset + n
                                        yield new_frame(Frame, (conn, side, from_client, ts, ts, offset, size,
                                                                body, False, None))  # fmt: skip
                                    else:
                                        out = fast_data(cs, fside, ts, buf[start:stop])
                                        if out:
                                            yield from out
                                continue
                # Anything else: the layers one at a time.
                self.packet_count = count
                if packet is None:
                    yield from self._layers(
                        Packet(count, ts_ns / 1e9, ts_ns, linktype, buf[b:e], orig, iface, False),
                        raw_key, flows, flow_keys,
                    )  # fmt: skip
                else:
                    yield from self._layers(packet, raw_key, flows, flow_keys)
                generation = self._layered_packets
            if packet is None:
                carry = buf[pos:]
                buf = chunk = b""  # freed before the next read, which keeps the peak at two chunks
                if not pcap and handback[0]:
                    capture.unread(carry)
                    carry = b""
        if pcap:
            cut = capture.cut_record(carry)
            if cut is not None:
                count += 1
                self.packet_count = count
                cut_ts_ns, data, orig = cut
                cut_packet = Packet(count, cut_ts_ns / 1e9, cut_ts_ns, linktype, data, orig, 0, True)
                yield from self._layers(cut_packet, None, flows, flow_keys)

    def _pcapng_blocks(
        self, capture: CaptureReader, handback: list[bool], section: list[Any]
    ) -> Iterator[tuple[bytes, Packet | None]]:
        """A pcapng file for ``_fast``: its chunks to walk, as (chunk, None),
        ending with an empty chunk at the end of the file; and, whenever the walk
        stopped at a block it leaves to the reader (``handback``, after giving
        back the unwalked bytes), that block read by the reader, as
        (data, packet) when it holds a packet. ``section`` gets the byte order's
        structs and the interfaces as the reader's blocks set them."""
        ended = False
        while True:
            if handback[0]:
                handback[0] = False
                ended = False  # the walk gets the end of the file again after the reader's block
                capture.set_packet_index(self.packet_count)
                packet, more = capture.pcapng_block()
                order, interfaces = capture.pcapng_section()
                section[:] = [_EPB[order].unpack_from, _U32[order].unpack_from, interfaces]
                if packet is not None:
                    yield packet.data, packet
                if not more:
                    return
                continue
            chunk = capture.read_chunk()
            if not chunk:
                if ended:
                    return
                ended = True
            yield chunk, None

    def _layers(
        self,
        packet: Packet,
        raw_key: bytes | None,
        flows: dict[bytes, _Flow],
        flow_keys: dict[int, list[bytes]],
    ) -> Iterator[FrameEvent]:
        """One packet through the layers, for ``_fast``; then, if it was
        Ethernet/IPv4/TCP (``raw_key``), the state its flow keeps for the fast path."""
        self._layered_packets += 1
        seg = self.packets.decode(packet)
        if seg is None:
            return
        framer = self.framer
        closed = False
        for event in self.tcp.feed(seg):
            if isinstance(event, ConnectionClosed):
                closed = True
                for key in flow_keys.pop(event.conn.id, ()):
                    flows.pop(key, None)
            yield from framer.feed(event)
        if raw_key is not None and raw_key not in flows and not closed:
            entry = self.tcp._table.get((seg.src, seg.sport, seg.dst, seg.dport))
            state = framer._conns.get(entry[0].id) if entry is not None else None
            if entry is not None and state is not None:
                conn, halves, last_seen = entry
                side = 0 if conn.endpoints[0] == (seg.src, seg.sport) else 1
                flows[raw_key] = (
                    conn, halves[side], halves[1 - side], last_seen, state.sides[side], state, side,
                    state.outstanding, [-1, 0],
                )  # fmt: skip
                flow_keys.setdefault(conn.id, []).append(raw_key)


def read_frames(
    source: str | os.PathLike[str] | BinaryIO, *, kafka_ports: Iterable[int] = DEFAULT_KAFKA_PORTS
) -> Iterator[FrameEvent]:
    """Every framing event of a capture file, in capture order."""
    return iter(FrameReader(source, kafka_ports=kafka_ports))
