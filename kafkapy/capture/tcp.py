"""TCP reassembly: from captured segments to in-order byte streams.

Theory of operation
-------------------
A connection is identified by its 4-tuple and has two halves, one per sending
side. Side 0 is the side believed to be the client when the connection was
first seen: the sender of a SYN (or receiver of a SYN-ACK); failing that, the
side talking to a known Kafka port is the server; failing that, whoever spoke
first. A higher layer that learns better (it saw Kafka requests flowing the
other way) calls ``Connection.set_client``; sides never renumber.

Each half keeps ``next``, the sequence number of the next byte it will emit,
as an unbounded integer. A 32-bit sequence number from the wire is "unwrapped"
to the value nearest ``next`` (the signed 32-bit difference is added), so
wrap-around at 2**32 needs no special case anywhere else. Offsets in events
are counted from the half's first byte (the byte after the SYN, or the first
byte seen when the capture started mid-stream).

A segment's bytes go into a sorted list of non-overlapping pending pieces;
pieces contiguous with ``next`` are emitted at once as StreamData. Bytes the
half already has are never replaced: the first copy seen wins. A segment that
brings nothing new is a retransmission and is only counted; one that overlaps
pending bytes with different content, or partly re-sends bytes, is flagged
with a StreamOverlap event.

A hole before pending bytes is normal reordering until proven otherwise.
Proof is any of: the other side ACKs past the hole (it got bytes we never
saw, so the capture lost them); the half's pending bytes exceed
``max_pending``; the connection ends (FIN acknowledged, RST, idle timeout or
end of capture). Then the hole becomes a StreamGap event with its byte count
and emission carries on after it. Bytes that the snap length cut from a
captured segment are a hole known at once, reported as a "snaplen" gap.

So memory is bounded by, per open connection, the data the capture saw but
the receiver had not yet acknowledged (capped by ``max_pending``).

House rules: no event is emitted for a half out of order with its offsets,
and every byte of a half's sequence space is reported exactly once, as data
or as part of a gap.
"""

from __future__ import annotations

import bisect
from collections import Counter, OrderedDict
from collections.abc import Container, Iterable, Iterator
from typing import Literal, NamedTuple

import attrs

from kafkapy.capture.packets import TcpSegment

__all__ = [
    "DEFAULT_KAFKA_PORTS",
    "MAX_PENDING_BYTES",
    "MAX_WINDOW",
    "Connection",
    "ConnectionClosed",
    "ConnectionOpened",
    "Endpoint",
    "FlowState",
    "HalfStream",
    "StreamData",
    "StreamEnd",
    "StreamGap",
    "StreamOverlap",
    "TcpEvent",
    "TcpReassembler",
    "reassemble",
]

# 9092 is Kafka's default listener port (the `listeners` default in
# server.properties).
DEFAULT_KAFKA_PORTS: frozenset[int] = frozenset({9092})

# A half may hold this many out-of-order bytes behind a hole before the hole
# is declared lost. 16 MiB is 4x Linux's default tcp_rmem maximum (6 MiB, a
# receive window no ordinary peer exceeds) rounded up: reordering is resolved
# long before, and hostile input cannot make us buffer more.
MAX_PENDING_BYTES = 16 * 1024 * 1024

#: RFC 7323: with window scaling the largest window is 2**30 bytes, so a
#: segment starting further than that past the next expected byte cannot be
#: part of this stream (nor an ACK further than that past it current).
MAX_WINDOW = 1 << 30
_MAX_WINDOW = MAX_WINDOW

# How long, in capture time, a connection closed by FIN or RST is remembered so that late copies of
# its segments (a retransmission whose ACK was lost, captured after the FINs) are not taken for a
# new connection. 120 s is twice Linux's TIME_WAIT (60 s), the time a closed 4-tuple is kept from
# reuse; the count cap bounds memory on captures of very many short connections.
CLOSED_LINGER = 120.0
_MAX_CLOSED = 65_536

_MOD = 1 << 32
_HALF = 1 << 31

GapReason = Literal["midstream-start", "lost", "snaplen"]
EndReason = Literal["fin", "rst", "capture-end", "idle", "reused"]


class Endpoint(NamedTuple):
    ip: str
    port: int

    def __str__(self) -> str:
        return f"[{self.ip}]:{self.port}" if ":" in self.ip else f"{self.ip}:{self.port}"


@attrs.define(eq=False, repr=False)
class Connection:
    """One TCP connection; shared by every event about it."""

    id: int  # 0, 1, ... in order of first appearance (like tshark's tcp.stream)
    endpoints: tuple[Endpoint, Endpoint]  # indexed by side
    client_side: int  # 0 or 1
    role_basis: str  # why client_side was chosen: "syn", "port", "first-speaker", ...
    first_ts: float
    # Set by a higher layer that has no use for this connection's bytes: the
    # reassembler then stops buffering them (FIN/RST are still tracked).
    ignored: bool = False

    @property
    def client(self) -> Endpoint:
        return self.endpoints[self.client_side]

    @property
    def server(self) -> Endpoint:
        return self.endpoints[1 - self.client_side]

    def from_client(self, side: int) -> bool:
        return side == self.client_side

    def set_client(self, side: int, basis: str) -> None:
        """Record better knowledge of which side is the client."""
        self.client_side = side
        self.role_basis = basis

    def __str__(self) -> str:
        return f"#{self.id} {self.client} -> {self.server}"

    def __repr__(self) -> str:
        return f"<Connection {self} ({self.role_basis})>"


@attrs.frozen
class ConnectionOpened:
    conn: Connection
    ts: float


@attrs.frozen
class StreamData:
    """In-order bytes of one half; ``offset`` is the first byte's stream offset."""

    conn: Connection
    side: int
    ts: float
    offset: int
    data: bytes


@attrs.frozen
class StreamGap:
    """Bytes of one half the capture does not have.

    ``length`` is None only for "midstream-start": the capture began after
    the connection had already carried an unknown number of bytes.
    """

    conn: Connection
    side: int
    ts: float
    offset: int
    length: int | None
    reason: GapReason


@attrs.frozen
class StreamOverlap:
    """A segment re-sent bytes already seen; the first copy was kept.

    ``conflict`` is True when the copies differ, None when the earlier copy
    had already been emitted and could not be compared.
    """

    conn: Connection
    side: int
    ts: float
    offset: int
    length: int
    conflict: bool | None


@attrs.frozen
class StreamEnd:
    conn: Connection
    side: int
    ts: float
    offset: int  # stream offset just past the last byte
    reason: EndReason


@attrs.frozen
class ConnectionClosed:
    conn: Connection
    ts: float
    reason: EndReason


TcpEvent = ConnectionOpened | StreamData | StreamGap | StreamOverlap | StreamEnd | ConnectionClosed


@attrs.define
class _Piece:
    start: int
    end: int
    data: bytes | None  # None: bytes known to be missing (cut by the snap length)
    ts: float


class HalfStream:
    """Reassembly state of one sending side.

    A fast path that passes in-order bytes up itself (kafkapy.capture.fused) gets the live
    halves from :meth:`TcpReassembler.flow` and may rely on these public attributes: while
    :meth:`passes_in_order` holds, an in-sequence segment carrying only ACK (and PSH) whose ACK
    settles nothing would make :meth:`TcpReassembler.feed` do exactly two things, advance
    ``next`` by the payload's length and set the connection's last-seen time, so the fast path
    may do them instead. It changes nothing else; anything else goes through ``feed``.
    """

    __slots__ = ("ended", "fin_at", "isn", "next", "pending", "pending_bytes", "start", "started", "starts")

    def __init__(self) -> None:
        self.started = False
        self.isn: int | None = None  # 32-bit SYN sequence number, if the SYN was seen
        self.start = 0  # unwrapped sequence number of stream offset 0
        self.next = 0  # unwrapped sequence number of the next byte to emit
        self.pending: list[_Piece] = []
        self.starts: list[int] = []  # pending[i].start, for bisect
        self.pending_bytes = 0
        self.fin_at: int | None = None  # unwrapped sequence number the FIN occupies
        self.ended = False

    def passes_in_order(self) -> bool:
        """In-order bytes pass straight up: started, not ended, nothing waiting, no FIN seen."""
        return self.started and not self.ended and not self.pending and self.fin_at is None

    def unwrap(self, seq: int) -> int:
        diff = (seq - self.next) % _MOD
        if diff >= _HALF:
            diff -= _MOD
        return self.next + diff


_Half = HalfStream  # the name it had before it was part of the fast path's interface
_Halves = tuple[HalfStream, HalfStream]  # a connection's, by side
_Key = tuple[str, int, str, int]  # (source ip, port, destination ip, port)


class FlowState(NamedTuple):
    """One direction of a followed connection, live (see :meth:`TcpReassembler.flow`)."""

    conn: Connection
    side: int  # the sending side's index in conn.endpoints
    half: HalfStream  # the sending side's reassembly state
    peer: HalfStream  # the receiving side's
    last_seen: list[float]  # one cell: when the connection was last seen


class TcpReassembler:
    """Feeds TCP segments in capture order; returns reassembly events.

    ``server_ports`` is consulted, live, whenever a connection without a
    visible handshake appears, so a caller can add ports it learns.
    """

    def __init__(
        self,
        server_ports: Container[int] = DEFAULT_KAFKA_PORTS,
        *,
        max_pending: int = MAX_PENDING_BYTES,
        idle_timeout: float | None = None,
    ) -> None:
        self.server_ports = server_ports
        self.max_pending = max_pending
        self.idle_timeout = idle_timeout
        self._table: dict[tuple[str, int, str, int], tuple[Connection, _Halves, list[float]]] = {}
        # Connections closed by FIN or RST, by both directions' 4-tuples, oldest first: (the
        # connection, its halves, when closed). See CLOSED_LINGER.
        self._closed: OrderedDict[_Key, tuple[Connection, _Halves, float]] = OrderedDict()
        # Ids taken by 4-tuples seen only in bare segments (both directions), oldest first: a
        # connection that then shows bytes gets its tuple's id. Capped at _MAX_CLOSED tuples.
        self._unopened: OrderedDict[tuple[str, int, str, int], int] = OrderedDict()
        self._next_id = 0
        self._last_sweep = 0.0
        #: counters: "retransmitted-segments", "gaps", "gap-bytes", "overlaps", ...
        self.stats: Counter[str] = Counter()

    @property
    def open_connections(self) -> int:
        return len(self._table) // 2

    # -- entry points -----------------------------------------------------

    def feed(self, seg: TcpSegment) -> list[TcpEvent]:
        out: list[TcpEvent] = []
        if self.idle_timeout is not None and seg.ts - self._last_sweep >= self.idle_timeout / 4:
            self._sweep_idle(seg.ts, out)
        key = (seg.src, seg.sport, seg.dst, seg.dport)
        entry = self._table.get(key)
        if entry is not None:
            conn, halves, last_seen = entry
            side = 0 if conn.endpoints[0] == (seg.src, seg.sport) else 1
            half = halves[side]
            if seg.syn and half.isn != seg.seq and (half.started or half.ended):
                # A new SYN with a different sequence number on a 4-tuple we
                # still track: the port was reused for a new connection.
                self._close(conn, halves, seg.ts, "reused", out)
                entry = None
        if entry is None:
            if not seg.syn and self._closed and self._late(key, seg):
                self.stats["segments-after-end"] += 1
                return out
            if not seg.syn and not seg.payload and seg.wire_len == 0:
                # A bare ACK/FIN/RST of a connection we know nothing about
                # (e.g. the tail of one closed before) opens nothing. Unless it
                # is the tail of one closed here, it still takes the next id, as
                # tshark gives it a tcp.stream, so the ids of later connections
                # stay equal to tshark's.
                self.stats["segments-without-connection"] += 1
                if key not in self._closed and key not in self._unopened:
                    self._reserve_id(key)
                return out
            conn, halves = self._open(seg, out)
            last_seen = [seg.ts]
            side = 0 if conn.endpoints[0] == (seg.src, seg.sport) else 1
        last_seen[0] = seg.ts
        self._segment(conn, halves, side, seg, out)
        return out

    def flow(self, src: str, sport: int, dst: str, dport: int) -> FlowState | None:
        """The live state of the direction ``src:sport -> dst:dport`` of a followed connection, or
        None. The one door for a fast path: what it may do with the halves is
        :class:`HalfStream`'s contract."""
        entry = self._table.get((src, sport, dst, dport))
        if entry is None:
            return None
        conn, halves, last_seen = entry
        side = 0 if conn.endpoints[0] == (src, sport) else 1
        return FlowState(conn, side, halves[side], halves[1 - side], last_seen)

    def finish(self) -> list[TcpEvent]:
        """Settle every open connection at the end of the capture."""
        out: list[TcpEvent] = []
        seen: set[int] = set()
        for conn, halves, last in list(self._table.values()):
            if conn.id not in seen:
                seen.add(conn.id)
                self._close(conn, halves, last[0], "capture-end", out)
        return out

    # -- connections ------------------------------------------------------

    def _late(self, key: tuple[str, int, str, int], seg: TcpSegment) -> bool:
        """Is ``seg`` a late copy of bytes a connection closed on this 4-tuple had already sent?
        Bytes outside what that side sent are a new connection whose SYN the capture missed."""
        closed = self._closed.get(key)
        if closed is None:
            return False
        conn, halves, closed_ts = closed
        if seg.ts - closed_ts > CLOSED_LINGER:
            return False
        half = halves[0 if conn.endpoints[0] == (seg.src, seg.sport) else 1]
        if not half.started:
            return False
        begin = half.unwrap(seg.seq)
        end = begin + seg.wire_len
        sent = half.next if half.fin_at is None else max(half.next, half.fin_at)
        return half.start - 1 <= begin and end <= sent

    def _reserve_id(self, key: tuple[str, int, str, int]) -> None:
        unopened = self._unopened
        unopened[key] = unopened[(key[2], key[3], key[0], key[1])] = self._next_id
        self._next_id += 1
        while len(unopened) > 2 * _MAX_CLOSED:
            del unopened[next(iter(unopened))]

    def _remember_closed(self, conn: Connection, halves: _Halves, ts: float) -> None:
        closed = self._closed
        a, b = conn.endpoints
        for key in ((a.ip, a.port, b.ip, b.port), (b.ip, b.port, a.ip, a.port)):
            closed.pop(key, None)
            closed[key] = (conn, halves, ts)
        while closed:
            first_key, (_, _, first_ts) = next(iter(closed.items()))
            if len(closed) <= 2 * _MAX_CLOSED and ts - first_ts <= CLOSED_LINGER:
                break
            del closed[first_key]

    def _open(self, seg: TcpSegment, out: list[TcpEvent]) -> tuple[Connection, _Halves]:
        sender = Endpoint(seg.src, seg.sport)
        receiver = Endpoint(seg.dst, seg.dport)
        sender_is_client: bool
        if seg.syn:
            sender_is_client, basis = not seg.has_ack, "syn"
        elif seg.dport in self.server_ports and seg.sport not in self.server_ports:
            sender_is_client, basis = True, "port"
        elif seg.sport in self.server_ports and seg.dport not in self.server_ports:
            sender_is_client, basis = False, "port"
        else:
            # Kafka clients speak first, so at a quiet point the first
            # talker is the client; the frame layer corrects a wrong guess.
            sender_is_client, basis = True, "first-speaker"
        endpoints = (sender, receiver) if sender_is_client else (receiver, sender)
        reserved = self._unopened.pop((seg.src, seg.sport, seg.dst, seg.dport), None)
        if reserved is not None and not seg.syn:
            self._unopened.pop((seg.dst, seg.dport, seg.src, seg.sport), None)
            conn_id = reserved
        else:
            conn_id = self._next_id
            self._next_id += 1
        conn = Connection(conn_id, endpoints, 0, basis, seg.ts)
        halves = (HalfStream(), HalfStream())
        last = [seg.ts]
        self._table[(seg.src, seg.sport, seg.dst, seg.dport)] = (conn, halves, last)
        self._table[(seg.dst, seg.dport, seg.src, seg.sport)] = (conn, halves, last)
        self.stats["connections"] += 1
        out.append(ConnectionOpened(conn, seg.ts))
        return conn, halves

    def _close(
        self, conn: Connection, halves: _Halves, ts: float, reason: EndReason, out: list[TcpEvent]
    ) -> None:
        for side in (0, 1):
            half = halves[side]
            if half.ended:
                continue
            if half.started:
                if not conn.ignored:
                    self._settle(conn, side, half, None, ts, out)
                out.append(StreamEnd(conn, side, ts, half.next - half.start, reason))
            half.ended = True
        a, b = conn.endpoints
        self._table.pop((a.ip, a.port, b.ip, b.port), None)
        self._table.pop((b.ip, b.port, a.ip, a.port), None)
        if reason in ("fin", "rst"):
            self._remember_closed(conn, halves, ts)
        out.append(ConnectionClosed(conn, ts, reason))

    def _sweep_idle(self, now: float, out: list[TcpEvent]) -> None:
        assert self.idle_timeout is not None
        self._last_sweep = now
        for conn, halves, last in list(self._table.values()):
            if now - last[0] > self.idle_timeout and not (halves[0].ended and halves[1].ended):
                self._close(conn, halves, last[0], "idle", out)

    # -- one segment ------------------------------------------------------

    def _segment(
        self, conn: Connection, halves: _Halves, side: int, seg: TcpSegment, out: list[TcpEvent]
    ) -> None:
        half, peer = halves[side], halves[1 - side]
        ts = seg.ts
        if seg.rst:
            self._close(conn, halves, ts, "rst", out)
            return
        if seg.syn:
            if half.isn is None and not half.started:
                half.isn = seg.seq
                half.start = half.next = seg.seq + 1
                half.started = True
            elif half.isn == seg.seq:
                self.stats["retransmitted-syns"] += 1
        # The ACK first: bytes the peer had acknowledged come before anything
        # this segment carries, so a request's gap precedes its response.
        if seg.has_ack and peer.started and not peer.ended and not conn.ignored:
            ack = peer.unwrap(seg.ack)
            if peer.next < ack <= peer.next + _MAX_WINDOW:
                limit = ack if peer.fin_at is None else min(ack, peer.fin_at)
                self._settle(conn, 1 - side, peer, limit, ts, out)
                self._maybe_end(conn, halves, 1 - side, ts, out)
                if half.ended:
                    return
        if half.ended:
            if seg.wire_len:
                self.stats["segments-after-end"] += 1
            return
        length = seg.wire_len
        if length or seg.fin:
            if not half.started:
                half.start = half.next = seg.seq
                half.started = True
                out.append(StreamGap(conn, side, ts, 0, None, "midstream-start"))
            begin = half.unwrap(seg.seq) + (1 if seg.syn else 0)
            if length and not conn.ignored:
                self._insert(conn, side, half, begin, seg.payload, begin + length, ts, out)
            elif length and 0 < begin + length - half.next <= _MAX_WINDOW:
                # Nobody wants an ignored connection's bytes, but keep the
                # position current in case a higher layer changes its mind.
                half.next = begin + length
            if seg.fin and half.fin_at is None:
                half.fin_at = begin + length
        if conn.ignored and half.pending:
            half.pending.clear()
            half.starts.clear()
            half.pending_bytes = 0
        self._emit_ready(conn, side, half, out)
        while half.pending_bytes > self.max_pending:
            self.stats["pending-overflows"] += 1
            self._settle(conn, side, half, half.pending[0].start, ts, out)
            self._emit_ready(conn, side, half, out)
        self._maybe_end(conn, halves, side, ts, out)

    def _maybe_end(
        self, conn: Connection, halves: _Halves, side: int, ts: float, out: list[TcpEvent]
    ) -> None:
        half = halves[side]
        if not half.ended and half.fin_at is not None and (half.next >= half.fin_at or conn.ignored):
            half.ended = True
            out.append(StreamEnd(conn, side, ts, half.next - half.start, "fin"))
            if halves[1 - side].ended:
                self._close(conn, halves, ts, "fin", out)

    def _insert(
        self,
        conn: Connection,
        side: int,
        half: HalfStream,
        begin: int,
        payload: bytes,
        wire_end: int,
        ts: float,
        out: list[TcpEvent],
    ) -> None:
        if (
            begin == half.next
            and not half.pending
            and begin + len(payload) == wire_end
            and half.fin_at is None
        ):
            # The common case, in order with nothing held back: straight out.
            out.append(StreamData(conn, side, ts, begin - half.start, payload))
            half.next = wire_end
            return
        stats = self.stats
        if wire_end <= half.next:
            stats["retransmitted-segments"] += 1
            stats["retransmitted-bytes"] += wire_end - begin
            return
        if begin - half.next > _MAX_WINDOW:
            stats["out-of-window-segments"] += 1
            return
        if half.fin_at is not None and begin >= half.fin_at:
            stats["segments-after-fin"] += 1
            return
        new_pieces: list[_Piece] = []
        data_end = begin + len(payload)
        if data_end > begin:
            new_pieces.append(_Piece(begin, data_end, payload, ts))
        if wire_end > data_end:
            new_pieces.append(_Piece(data_end, wire_end, None, ts))
        overlap = 0
        conflict: bool | None = False
        if begin < half.next:
            # Part of this segment was emitted already; keep only the rest.
            overlap += half.next - begin
            conflict = None
            new_pieces = [p for piece in new_pieces if (p := _clip(piece, half.next, piece.end)) is not None]
        # Cut the new pieces around pending ones: the first copy wins.
        kept: list[_Piece] = []
        for piece in new_pieces:
            for part, old in self._uncovered(half, piece):
                if old is None:
                    kept.append(part)
                else:
                    overlap += part.end - part.start
                    if conflict is not None and _differs(part, old):
                        conflict = True
        if not kept:
            stats["retransmitted-segments"] += 1
            stats["retransmitted-bytes"] += wire_end - begin
            if conflict:
                stats["conflicting-overlaps"] += 1
                out.append(StreamOverlap(conn, side, ts, begin - half.start, overlap, True))
            return
        for piece in kept:
            i = bisect.bisect_left(half.starts, piece.start)
            half.pending.insert(i, piece)
            half.starts.insert(i, piece.start)
            half.pending_bytes += piece.end - piece.start
        if overlap:
            stats["overlaps"] += 1
            if conflict:
                stats["conflicting-overlaps"] += 1
            out.append(StreamOverlap(conn, side, ts, begin - half.start, overlap, conflict))

    @staticmethod
    def _uncovered(half: HalfStream, piece: _Piece) -> Iterator[tuple[_Piece, _Piece | None]]:
        """Split ``piece`` against pending pieces: (part, None) for bytes not
        yet held, (part, old) for bytes ``old`` already holds."""
        starts = half.starts
        i = bisect.bisect_right(starts, piece.start) - 1
        if i < 0:
            i = 0
        pos = piece.start
        pending = half.pending
        while pos < piece.end:
            while i < len(pending) and pending[i].end <= pos:
                i += 1
            if i >= len(pending) or pending[i].start >= piece.end:
                part = _clip(piece, pos, piece.end)
                assert part is not None
                yield part, None
                return
            old = pending[i]
            if old.start > pos:
                part = _clip(piece, pos, old.start)
                assert part is not None
                yield part, None
                pos = old.start
            stop = min(old.end, piece.end)
            part = _clip(piece, pos, stop)
            assert part is not None
            yield part, old
            pos = stop

    def _emit_ready(self, conn: Connection, side: int, half: HalfStream, out: list[TcpEvent]) -> None:
        pending = half.pending
        while pending and pending[0].start <= half.next:
            piece = pending.pop(0)
            del half.starts[0]
            half.pending_bytes -= piece.end - piece.start
            if piece.end <= half.next:  # pragma: no cover - pieces never overlap what was emitted
                continue
            if piece.start < half.next:  # pragma: no cover
                clipped = _clip(piece, half.next, piece.end)
                assert clipped is not None
                piece = clipped
            offset = piece.start - half.start
            if piece.data is None:
                self.stats["gaps"] += 1
                self.stats["gap-bytes"] += piece.end - piece.start
                out.append(StreamGap(conn, side, piece.ts, offset, piece.end - piece.start, "snaplen"))
            else:
                out.append(StreamData(conn, side, piece.ts, offset, piece.data))
            half.next = piece.end

    def _settle(
        self, conn: Connection, side: int, half: HalfStream, upto: int | None, ts: float, out: list[TcpEvent]
    ) -> None:
        """Declare every hole below ``upto`` (None: below everything pending) lost."""
        while True:
            self._emit_ready(conn, side, half, out)
            if upto is None:
                if not half.pending:
                    return
                target = half.pending[0].start
            else:
                if half.next >= upto:
                    return
                target = min(upto, half.pending[0].start) if half.pending else upto
            gap = target - half.next
            self.stats["gaps"] += 1
            self.stats["gap-bytes"] += gap
            out.append(StreamGap(conn, side, ts, half.next - half.start, gap, "lost"))
            half.next = target


def _clip(piece: _Piece, start: int, end: int) -> _Piece | None:
    start = max(start, piece.start)
    end = min(end, piece.end)
    if end <= start:
        return None
    if piece.data is None:
        return _Piece(start, end, None, piece.ts)
    if start == piece.start and end == piece.end:
        return piece
    return _Piece(start, end, piece.data[start - piece.start : end - piece.start], piece.ts)


def _differs(new: _Piece, old: _Piece) -> bool:
    if new.data is None or old.data is None:
        return False
    lo, hi = new.start - old.start, new.end - old.start
    return old.data[lo:hi] != new.data


def reassemble(
    segments: Iterable[TcpSegment], server_ports: Container[int] = DEFAULT_KAFKA_PORTS
) -> Iterator[TcpEvent]:
    """Every reassembly event for a stream of segments, then the final flush."""
    tcp = TcpReassembler(server_ports)
    for seg in segments:
        yield from tcp.feed(seg)
    yield from tcp.finish()
