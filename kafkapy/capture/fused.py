"""The fused pcap walk: the capture, packet, TCP and framing layers run as one loop for the
common packet, so a capture of in-order traffic is framed without a Packet, TcpSegment or
StreamData per packet. It is :class:`~kafkapy.capture.frames.FrameReader`'s fast path.

Theory of operation
-------------------
The walk reads the capture a chunk at a time (pcap records, or pcapng Enhanced Packet Blocks,
straight from the chunk). A packet takes the fused path only when the layers would do nothing
with it but pass its bytes up: an untagged Ethernet/IPv4/TCP packet, whole, ACK (and PSH) only,
in sequence, on a direction both layers follow, whose framer side is in sync with an empty
buffer. Every other packet goes through the layers one at a time (``_layers``), exactly as the
layered path does; so the fused path is an optimisation, never a second behaviour, and
tests/capture/test_fast_path.py holds the two equal on real and generated captures.

The walk reaches the layers through narrow, documented doors only:

* TCP: :meth:`TcpReassembler.flow <kafkapy.capture.tcp.TcpReassembler.flow>` hands it the live
  :class:`~kafkapy.capture.tcp.HalfStream` of a direction, whose contract says what it may do:
  advance ``next`` and the last-seen time over an in-order, ACK-only segment while
  ``passes_in_order()`` holds.
* Framing: :class:`InSyncFramer` below, which KafkaFramer implements: the state of a side it may
  read (and whose ``base`` it advances over whole frames it cuts), the correlation ids it notes,
  and ``data_in_sync`` for any payload that is not exactly one frame.
* The capture reader's chunk API (``read_chunk``, ``pcap_layout``, ``pcapng_block``, ...).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, Protocol

from kafkapy.capture.events import Frame, FrameEvent
from kafkapy.capture.packets import PacketDecoder
from kafkapy.capture.pcap import MAX_CAPLEN, CaptureReader, Packet
from kafkapy.capture.tcp import (
    MAX_WINDOW,
    Connection,
    ConnectionClosed,
    HalfStream,
    TcpEvent,
    TcpReassembler,
)

__all__ = ["FramingConnection", "FramingSide", "FusedWalk", "InSyncFramer"]

_I32 = struct.Struct(">i")
# Ethernet + IPv4 (no options) + TCP up to the flags byte: ethertype, IP
# version/IHL, total length, fragment word, protocol, seq, ack, data offset, flags.
_ETH_IPV4_TCP = struct.Struct("!12xHBxH2xHxB2x4x4x2x2xIIBB")
# A pcapng Enhanced Packet Block up to its data: type, total length, interface,
# timestamp high and low, captured and original length; per byte order.
_EPB = {order: struct.Struct(order + "IIIIIII") for order in "<>"}
_U32 = {order: struct.Struct(order + "I") for order in "<>"}
# The longest Enhanced Packet Block the walk waits for when it straddles
# chunks (the largest packet, its header and some options); a longer one is
# left to the reader, which skips its options piecewise.
_NG_WAIT = MAX_CAPLEN + 4096


class FramingSide(Protocol):
    """The framer's state of one direction, as far as the walk may use it: it reads ``state``
    (is the side at a frame boundary?) and ``buf`` (is nothing buffered?), and when it cuts whole
    frames from a payload itself it advances ``base``, the stream offset of the next frame."""

    state: int
    buf: bytearray
    base: int


class FramingConnection(Protocol):
    """The framer's state of one connection that the walk keeps as the framer would for each
    frame it cuts: the first request's correlation id, and the correlation ids awaiting an answer
    (requests add theirs, responses remove theirs, at most ``MAX_OUTSTANDING``, oldest dropped)."""

    first_request_corr: int | None
    outstanding: dict[bytes, None]


class InSyncFramer(Protocol):
    """What the walk needs of the framing layer (KafkaFramer implements it)."""

    SYNCED: int  # FramingSide.state of a side at a frame boundary
    MAX_OUTSTANDING: int
    max_frame_size: int

    def feed(self, event: TcpEvent) -> list[FrameEvent]: ...

    def framing_state(self, conn_id: int, side: int) -> tuple[FramingConnection, FramingSide] | None:
        """The live state of a connection the framer follows, and of one of its sides."""
        ...

    def data_in_sync(self, conn_id: int, side: int, ts: float, data: bytes) -> list[FrameEvent]:
        """StreamData for a side that is SYNCED with an empty buffer, without the event."""
        ...


# What the walk keeps per direction: the connection, the TCP
# halves (sending, receiving), the connection's last-seen cell, the framer's
# side and connection state, the side's number, the connection's outstanding
# correlation ids (the state's own dict), and a cell [generation, peer live]
# saying when the TCP state the fast path needs was last found in order (see
# ``walk``) and whether the peer's half was then started and not ended.
_Flow = tuple[
    Connection, HalfStream, HalfStream, list[float], FramingSide, FramingConnection, int, dict[bytes, None],
    list[int],
]


class FusedWalk:
    """One capture's walk through the fused layers (see the module's theory of operation).

    ``packet_count`` counts the packets walked so far (a progress bar reads it while the walk
    runs); ``layered_packets`` those that went through the layers one by one.
    """

    def __init__(self, packets: PacketDecoder, tcp: TcpReassembler, framer: InSyncFramer) -> None:
        self.packets = packets
        self.tcp = tcp
        self.framer = framer
        self.packet_count = 0
        self.layered_packets = 0

    def walk(self, capture: CaptureReader) -> Iterator[FrameEvent]:
        """The layers fused for the common case, falling back to them for the rest.

        A packet takes the fast path when it is an untagged Ethernet/IPv4/TCP
        packet without IP options or fragmentation, captured whole, carrying
        only ACK (and PSH), in sequence on a connection both layers already
        follow, with an ACK that settles nothing, into a direction the framer
        holds in sync with an empty buffer. Then the layers would only pass
        the bytes up, so the frames are cut from the payload right here, with
        no Packet, TcpSegment or StreamData made. Every other packet goes
        through the layers one by one (``_layers``), exactly as FrameReader's
        layered path does; the tests check both paths give the same events.

        A pcap file is walked here chunk by chunk, record headers included, so
        not even a bytes object or a tuple is made per packet: the frame
        bodies are cut straight from the chunk. So is a pcapng file's Enhanced
        Packet Blocks; every other block (section and interface headers, other
        packet blocks, anything odd, cut or corrupt) is handed back to the
        reader (``_pcapng_blocks``), whose packet is walked as a chunk of its own.
        """
        framer = self.framer
        data_in_sync = framer.data_in_sync
        synced = framer.SYNCED
        max_outstanding = framer.MAX_OUTSTANDING
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
        # through the layers, which counts ``layered_packets``: so it is checked again only when that
        # count moved since the flow's last check, which is almost never.
        generation = self.layered_packets
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
                                if half.passes_in_order() and not conn.ignored:
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
                                and (not settled[1] or not 0 < (ack - peer.next) & 0xFFFFFFFF <= MAX_WINDOW)
                                and (
                                    stop == start
                                    or (
                                        fside.state == synced
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
                                            if len(outstanding) > max_outstanding:
                                                del outstanding[next(iter(outstanding))]
                                        else:
                                            outstanding.pop(body[:4], None)
                                        fside.base = offset + n
                                        yield new_frame(Frame, (conn, side, from_client, ts, ts, offset, size,
                                                                body, False, None))  # fmt: skip
                                    else:
                                        out = data_in_sync(conn.id, side, ts, buf[start:stop])
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
                generation = self.layered_packets
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
        self.layered_packets += 1
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
            flow = self.tcp.flow(seg.src, seg.sport, seg.dst, seg.dport)
            framing = framer.framing_state(flow.conn.id, flow.side) if flow is not None else None
            if flow is not None and framing is not None:
                conn_state, side_state = framing
                flows[raw_key] = (
                    flow.conn, flow.half, flow.peer, flow.last_seen, side_state, conn_state, flow.side,
                    conn_state.outstanding, [-1, 0],
                )  # fmt: skip
                flow_keys.setdefault(flow.conn.id, []).append(raw_key)
