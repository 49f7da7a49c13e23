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
from typing import TYPE_CHECKING, BinaryIO

import attrs

from kafkapy.capture.events import ConnectionClassified, Frame, FrameEvent, TlsNote, Unframed
from kafkapy.capture.fused import FusedWalk
from kafkapy.capture.keylog import KeyLog
from kafkapy.capture.packets import PacketDecoder
from kafkapy.capture.pcap import CaptureReader
from kafkapy.capture.tcp import (
    DEFAULT_KAFKA_PORTS,
    Connection,
    ConnectionClosed,
    ConnectionOpened,
    StreamData,
    StreamEnd,
    StreamGap,
    TcpEvent,
    TcpReassembler,
)
from kafkapy.protocol.api_keys import FIRST_PRIVATE_API_KEY, ApiKey
from kafkapy.protocol.header import unpack_request_prefix
from kafkapy.protocol.strings import decode_string

if TYPE_CHECKING:
    from kafkapy.capture.tls import TlsDecryptor

__all__ = [
    "MAX_FRAME_SIZE",
    "PROBE_LIMIT",
    "TLS_BASIS",
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


_UNDECIDED, _SYNCED, _SKIPPING, _HUNTING, _IGNORED, _TRIAL = range(6)
# _TRIAL is _SYNCED at a frame start that hunting found (after a gap or a mid-stream start), or
# that follows from one: a guess until a frame ends where the next frame's header plausibly
# starts. While on trial a side is read frame by frame (never by the fused walk, which takes
# only _SYNCED sides), and a frame whose successor is implausible shows the guess wrong: hunting
# resumes a byte further on.

#: ConnectionClassified.basis of a connection on a Kafka port that opens with a TLS record.
TLS_BASIS = "tls"
# RFC 8446 section 5.1 (and RFC 5246 section 6.2.1): a record is content type, legacy version
# (major 3), 16-bit length of at most 2**14 + 2048. A connection opens with a handshake record
# (22), or an alert (21) refusing one. Read as a Kafka frame size, 21 or 22 as the first byte is
# over 350 MB, far beyond MAX_FRAME_SIZE: no Kafka stream can start that way.
_TLS_OPENING_TYPES = (21, 22)
_TLS_MAX_RECORD = (1 << 14) + 2048


_TLS_TYPES = (20, 21, 22, 23)  # change_cipher_spec, alert, handshake, application_data


def _tls_records_at(buf: bytes | bytearray, pos: int) -> bool | None:
    """Do two TLS record headers start at ``buf[pos]``, the second where the first record ends?
    None: the bytes so far begin one, more are needed. A connection joined mid-stream that shows
    this where the capture joined it is TLS: by chance, a header and its successor line up about
    once in 10**14 tries."""
    n = len(buf)
    if n - pos < 5:
        prefix = buf[pos:]
        looks = (not prefix or prefix[0] in _TLS_TYPES) and (len(prefix) < 2 or prefix[1] == 3)
        return None if looks and (len(prefix) < 3 or prefix[2] <= 4) else False
    if not _tls_header_at(buf, pos):
        return False
    after = pos + 5 + int.from_bytes(buf[pos + 3 : pos + 5], "big")
    if n - after < 5:
        return None
    return _tls_header_at(buf, after)


def _tls_header_at(buf: bytes | bytearray, pos: int) -> bool:
    """A TLS record header of any content type at ``buf[pos]`` (five bytes there)."""
    length = int.from_bytes(buf[pos + 3 : pos + 5], "big")
    version_ok = buf[pos + 1] == 3 and buf[pos + 2] <= 4
    return buf[pos] in _TLS_TYPES and version_ok and 0 < length <= _TLS_MAX_RECORD


def _tls_record_at(buf: bytes | bytearray, pos: int) -> bool:
    """Does a TLS record header start at ``buf[pos]``?"""
    if len(buf) - pos < 5:
        return False
    length = int.from_bytes(buf[pos + 3 : pos + 5], "big")
    version_ok = buf[pos + 1] == 3 and buf[pos + 2] <= 4
    return buf[pos] in _TLS_OPENING_TYPES and version_ok and 0 < length <= _TLS_MAX_RECORD


def plausible_request(buf: bytes | bytearray, pos: int, max_size: int = MAX_FRAME_SIZE) -> bool | None:
    """Could a client->server frame start at ``buf[pos]``? None: need more bytes.

    A judgement, not a decode: it reads the header's fixed prefix with the protocol's
    ``unpack_request_prefix`` and answers from the key, version and client id alone, as early as
    they are in (a v2 header's tag section is not waited for; the header decoder reads it)."""
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
    key, version, _corr = unpack_request_prefix(buf, pos + 4)
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
    # read as the broker reads it (bytes that are not UTF-8 as U+FFFD, which Kafka serves)
    return decode_string(buf[pos + 14 : pos + 14 + cid_len]).isprintable()


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
        "skip_trial",
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
        self.skip_trial = False  # SKIPPING the rest of a frame read on trial
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

    # The fused walk's door (kafkapy.capture.fused.InSyncFramer): a side's state when it sits at
    # a frame boundary, and the cap on a connection's outstanding correlation ids.
    SYNCED = _SYNCED
    MAX_OUTSTANDING = _MAX_OUTSTANDING

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
            self._gap(cs, cs.sides[event.side], event.offset, event.length, event.ts, out, event.reason)
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
        self,
        cs: _ConnState,
        s: _Side,
        offset: int,
        length: int | None,
        ts: float,
        out: list[FrameEvent],
        reason: str = "lost",
    ) -> None:
        conn = cs.conn
        s.boundary = False
        if length is None:  # joined mid-stream (the TCP layer reported it)
            s.lenient = True
            if s.state in (_SYNCED, _SKIPPING, _TRIAL):
                s.state = _HUNTING
            return
        after = offset + length
        if s.state in (_UNDECIDED, _IGNORED):
            s.clear_to(after)
            s.probe_pos = 0
            return
        self._flush_whole(cs, s, ts, out)
        n = len(s.buf)
        lost = length  # missing bytes that fall outside any frame
        if s.state == _SKIPPING:
            if s.skip_left >= length:
                s.skip_left -= length
                lost = 0
                if s.skip_left == 0:
                    s.state = _TRIAL if s.skip_trial else _SYNCED
            else:
                lost = length - s.skip_left
                s.skip_left = 0
                s.state = _HUNTING
        elif s.state in (_SYNCED, _TRIAL) and n >= 4:
            trial = s.state == _TRIAL
            size = _I32.unpack_from(s.buf, 0)[0]
            remaining = 4 + size - n
            # bytes the snap length cut were captured, only not kept: not a loss of the network's
            cut = "snaplen" if reason == "snaplen" else "gap"
            self._emit(cs, s, 0, size, bytes(s.buf[4:]), ts, out, truncated=cut)
            n = 0
            if length < remaining:
                s.state = _SKIPPING
                s.skip_left = remaining - length
                s.skip_trial = trial
                lost = 0
            else:
                lost = length - remaining
                s.state = (_TRIAL if trial else _SYNCED) if lost == 0 else _HUNTING
        else:
            s.state = _HUNTING
        if n:
            out.append(Unframed(conn, s.side, ts, s.base, n, "discarded"))
        if lost:
            out.append(Unframed(conn, s.side, ts, after - lost, lost, "missing"))
        s.clear_to(after)

    def _end(self, cs: _ConnState, s: _Side, ts: float, reason: str, out: list[FrameEvent]) -> None:
        self._flush_whole(cs, s, ts, out)
        n = len(s.buf)
        if s.state == _TRIAL and n >= 4 and reason in ("fin", "rst"):
            # A guessed frame start that the peer closed the connection inside: no peer sends
            # half a frame and hangs up, so the guess was wrong. Not a frame, not a row.
            out.append(Unframed(cs.conn, s.side, ts, s.base, n, "discarded"))
        elif s.state in (_SYNCED, _TRIAL) and n >= 4:
            size = _I32.unpack_from(s.buf, 0)[0]
            self._emit(cs, s, 0, size, bytes(s.buf[4:]), ts, out, truncated=reason)
        elif n and s.state in (_SYNCED, _HUNTING, _TRIAL):
            out.append(Unframed(cs.conn, s.side, ts, s.base, n, "discarded"))
        s.clear_to(s.base + n)
        s.state = _IGNORED

    # -- framing ----------------------------------------------------------

    def _flush_whole(self, cs: _ConnState, s: _Side, ts: float, out: list[FrameEvent]) -> None:
        """A whole frame on trial still waiting for its successor's header when the stream breaks
        (a gap, its end): take it as it is; what follows it is hunted for."""
        if s.state != _TRIAL or len(s.buf) < 4:
            return
        size = _I32.unpack_from(s.buf, 0)[0]
        if 0 <= size and 4 + size <= len(s.buf):
            self._emit(cs, s, 0, size, bytes(s.buf[4 : 4 + size]), ts, out)
            s.consume(4 + size)
            s.state = _HUNTING

    def _confirmed_start(self, cs: _ConnState, buf: bytearray, pos: int, from_client: bool) -> int | None:
        """The first frame start from ``pos`` on whose whole frame is in ``buf`` and ends with it or
        is followed by a plausible header (see _successor); a request, or a response to an awaited
        request."""
        n = len(buf)
        if from_client:
            starts: Iterable[int] = (m.start() for m in self._candidates.finditer(buf, pos))
        else:
            found: list[int] = []
            for corr in cs.outstanding:
                i = buf.find(corr, pos + 4)
                while i != -1:
                    found.append(i - 4)
                    i = buf.find(corr, i + 1)
            starts = sorted(found)
        for p in starts:
            if n - p < 8:
                break
            size = _I32.unpack_from(buf, p)[0]
            end = p + 4 + size
            if not (8 if from_client else 4) <= size <= self.max_frame_size or end > n:
                continue
            if from_client and not plausible_request(buf, p, self.max_frame_size):
                continue
            if end == n or self._successor(cs, buf, p, size, from_client):
                return p
        return None

    def _successor(
        self, cs: _ConnState, buf: bytearray, pos: int, size: int, from_client: bool
    ) -> bool | None:
        """Does a plausible frame header follow the frame on trial at ``buf[pos]``? None: need more
        bytes. Clients number their requests upwards, so the next frame's correlation id must be
        a little above this one's (or, for a response, one still awaited)."""
        end = pos + 4 + size
        n = len(buf)
        if from_client:
            verdict = plausible_request(buf, end, self.max_frame_size)
            if verdict is None or (verdict and n - end < 12):
                return None
            if not verdict:
                return False
            corr: int = _I32.unpack_from(buf, pos + 8)[0]
            nxt: int = _I32.unpack_from(buf, end + 8)[0]
        else:
            if n - end < 8:
                return None
            nsize, nxt = _RESP_HEAD.unpack_from(buf, end)
            if not 4 <= nsize <= self.max_frame_size:
                return False
            if bytes(buf[end + 4 : end + 8]) in cs.outstanding:
                return True
            corr = _I32.unpack_from(buf, pos + 4)[0]
        return 0 < nxt - corr <= _CORR_WINDOW

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
                s.state = _TRIAL if s.skip_trial else _SYNCED
            elif state == _SYNCED or state == _TRIAL:
                if n - pos < 4:
                    break
                size = _I32.unpack_from(buf, pos)[0]
                if size < min_size or size > self.max_frame_size:
                    if s.base + pos == 0 and buf[pos] in _TLS_OPENING_TYPES and n - pos < 5:
                        break  # perhaps a TLS record header: wait for all of it
                    if s.base + pos == 0 and _tls_record_at(buf, pos):
                        # A Kafka port speaking TLS: nothing in it can be decoded, so skip the
                        # connection, saying why, rather than hunt through its records.
                        self._decide(cs, False, TLS_BASIS, ts, out)
                        return
                    s.state = _HUNTING  # lost sync: a length no Kafka peer sends
                    continue
                if n - pos < 4 + size:
                    if state == _TRIAL and n - pos <= PROBE_LIMIT:
                        # Waiting for a guessed frame to complete: a later start whose whole
                        # frame is in and followed as a frame should be is a better guess.
                        q = self._confirmed_start(cs, buf, pos + 1, from_client)
                        if q is not None:
                            at = s.base + pos
                            out.append(Unframed(cs.conn, s.side, s.ts_at(at, ts), at, q - pos, "discarded"))
                            pos = q
                            continue
                    break
                if state == _TRIAL and n - pos > 4 + size:  # (a frame ending with the data stays on trial)
                    follows = self._successor(cs, buf, pos, size, from_client)
                    if follows is None:
                        break
                    if not follows:  # the guess was wrong: hunt on from the next byte
                        at = s.base + pos
                        out.append(Unframed(cs.conn, s.side, s.ts_at(at, ts), at, 1, "discarded"))
                        pos += 1
                        s.state = _HUNTING
                        continue
                    s.state = _SYNCED
                with memoryview(buf) as view:
                    body = bytes(view[pos + 4 : pos + 4 + size])
                self._emit(cs, s, pos, size, body, ts, out)
                pos += 4 + size
            elif state == _HUNTING:
                if s.base + pos == 0 and s.lenient:
                    # Joined mid-stream where TLS records start: an encrypted connection.
                    tls = _tls_records_at(buf, pos)
                    if tls is None:
                        break
                    if tls:
                        self._decide(cs, False, TLS_BASIS, ts, out)
                        return
                if from_client:
                    p, found = self._hunt_request(buf, pos, cs)
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
                s.state = _TRIAL
            else:
                break
        s.consume(pos)

    def framing_state(self, conn_id: int, side: int) -> tuple[_ConnState, _Side] | None:
        """The live state of a followed connection and of one of its sides, for the fused walk
        (see :class:`kafkapy.capture.fused.InSyncFramer` for what it may do with them)."""
        cs = self._conns.get(conn_id)
        return (cs, cs.sides[side]) if cs is not None else None

    def data_in_sync(self, conn_id: int, side: int, ts: float, data: bytes) -> list[FrameEvent]:
        """StreamData for a side that is SYNCED with an empty buffer, without the event: for the
        fused walk, whose payloads are not exactly one frame."""
        cs = self._conns[conn_id]
        return self._fast_data(cs, cs.sides[side], ts, data)

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

    def _hunt_request(self, buf: bytearray, pos: int, cs: _ConnState | None = None) -> tuple[int, bool]:
        """(p, True): a plausible request starts at p. (p, False): nothing
        before p can start one; bytes from p on need more data to judge.

        With ``cs`` (framing, not probing), a candidate whose frame ends inside ``buf`` must be
        followed by a plausible request (see _successor); the first plausible candidate whose frame
        runs past ``buf`` is taken only if no later one is confirmed that way, since a run of
        zeros in a request's tail reads as a large request's header."""
        n = len(buf)
        tentative = -1  # the first plausible start whose frame runs past buf
        undecided = -1  # the first start that needs more bytes to judge
        for match in self._candidates.finditer(buf, pos):
            p = match.start()
            verdict = plausible_request(buf, p, self.max_frame_size)
            if cs is None:  # probing: the first plausible start
                if verdict is None:
                    return p, False
                if verdict:
                    return p, True
                continue
            if verdict:
                end = p + 4 + _I32.unpack_from(buf, p)[0]
                if end > n:
                    if tentative < 0:
                        tentative = p
                    continue
                if end < n:
                    verdict = self._successor(cs, buf, p, end - p - 4, True)
                if verdict:
                    return p, True  # whole, and ending with buf or followed by a request
            if verdict is None and undecided < 0:
                undecided = p
        if undecided >= 0 and (tentative < 0 or undecided < tentative):
            return undecided, False
        if tentative >= 0:
            return tentative, True
        # The candidate pattern needs 7 bytes, so the last 6 are undecided.
        return max(pos, n - 6), False

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
                end = pos + 4 + size
                if end >= n or self._successor(cs, buf, pos, size, False) is not False:
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
        tls_keylog: KeyLog | None = None,
    ) -> None:
        self.source = source
        ports: set[int] = set(kafka_ports)
        self.packets = PacketDecoder()
        self.tcp = TcpReassembler(ports, idle_timeout=idle_timeout)
        self.framer = KafkaFramer(ports, max_frame_size=max_frame_size)
        self.capture: CaptureReader | None = None
        # With a key log, TLS connections are decrypted between the TCP layer and the framer
        # (kafkapy.capture.tls); the fused walk, which goes from packets to frames, is not taken.
        self.tls: TlsDecryptor | None = None
        if tls_keylog is not None:
            from kafkapy.capture.tls import TlsDecryptor

            self.tls = TlsDecryptor(tls_keylog, ports)
        # the fast path, which also keeps the counts for the layer-by-layer path
        self._walk = FusedWalk(self.packets, self.tcp, self.framer)

    @property
    def packet_count(self) -> int:
        """Packets read so far (a progress bar reads it while the reader runs)."""
        return self._walk.packet_count

    @property
    def kafka_ports(self) -> MutableSet[int]:
        return self.framer.kafka_ports

    @property
    def fast_packets(self) -> int:
        """Packets that took the fused fast path (see :mod:`kafkapy.capture.fused`)."""
        return self._walk.packet_count - self._walk.layered_packets

    def __iter__(self) -> Iterator[FrameEvent]:
        with CaptureReader(self.source) as capture:
            self.capture = capture
            if self.tcp.idle_timeout is not None or self.tls is not None:
                # Idle sweeps run per segment, and TLS sits between the layers: only the
                # layer-by-layer path has them.
                yield from self._layered(capture)
            else:
                yield from self._walk.walk(capture)
            for event in self.tcp.finish():
                yield from self._above_tcp(event)

    def _above_tcp(self, event: TcpEvent) -> Iterator[FrameEvent]:
        """A TCP event through the TLS layer (when there is one) and the framer."""
        if self.tls is None:
            yield from self.framer.feed(event)
            return
        for decrypted in self.tls.feed(event):
            if isinstance(decrypted, TlsNote):
                yield decrypted
            else:
                yield from self.framer.feed(decrypted)

    def _layered(self, capture: CaptureReader) -> Iterator[FrameEvent]:
        decode, feed_tcp = self.packets.decode, self.tcp.feed
        above = self._above_tcp
        counts = self._walk
        for packet in capture:
            counts.packet_count += 1
            counts.layered_packets += 1
            seg = decode(packet)
            if seg is None:
                continue
            for event in feed_tcp(seg):
                yield from above(event)


def read_frames(
    source: str | os.PathLike[str] | BinaryIO, *, kafka_ports: Iterable[int] = DEFAULT_KAFKA_PORTS
) -> Iterator[FrameEvent]:
    """Every framing event of a capture file, in capture order."""
    return iter(FrameReader(source, kafka_ports=kafka_ports))
