"""Link-layer, IP and TCP header decoding: from a captured packet to a TCP segment.

Only what TCP reassembly needs is decoded. Checksums are not verified: a
capture taken on a host with checksum offload records the checksums the NIC
had not filled in yet, so they are wrong on perfectly good packets.

A packet that is not TCP, or is too mangled to decode, is skipped, never an
exception: one bad packet on the wire must not stop a whole capture. The
decoder counts why it skipped packets in ``PacketDecoder.skipped``.
"""

from __future__ import annotations

import socket
import struct
from collections import Counter

import attrs

from kafkapy.capture.pcap import Packet

__all__ = [
    "ACK",
    "FIN",
    "LINKTYPE_ETHERNET",
    "LINKTYPE_LINUX_SLL",
    "LINKTYPE_LINUX_SLL2",
    "LINKTYPE_LOOP",
    "LINKTYPE_NULL",
    "LINKTYPE_RAW",
    "PSH",
    "RST",
    "SYN",
    "PacketDecoder",
    "TcpSegment",
    "decode_packet",
]

# TCP flag bits (RFC 9293 section 3.1).
FIN = 0x01
SYN = 0x02
RST = 0x04
PSH = 0x08
ACK = 0x10

# Link types from the tcpdump.org LINKTYPE_ registry.
LINKTYPE_NULL = 0  # BSD loopback: 4-byte address family in the capturing host's byte order
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101  # bare IPv4 or IPv6
LINKTYPE_LOOP = 108  # OpenBSD loopback: address family in network byte order
LINKTYPE_LINUX_SLL = 113
LINKTYPE_LINUX_SLL2 = 276
_LINKTYPE_IPV4 = 228
_LINKTYPE_IPV6 = 229
# DLT_RAW is 12 on most BSDs and 14 on OpenBSD; pcap files from those systems
# sometimes carry the DLT value instead of LINKTYPE_RAW.
_RAW_LINKTYPES = frozenset({LINKTYPE_RAW, 12, 14, _LINKTYPE_IPV4, _LINKTYPE_IPV6})

_ETH_IPV4 = 0x0800
_ETH_IPV6 = 0x86DD
# 802.1Q, 802.1ad (QinQ) and the pre-standard 0x9100 QinQ tag all carry a
# 2-byte TCI followed by the next EtherType.
_ETH_VLAN = frozenset({0x8100, 0x88A8, 0x9100})

# Address family values a BSD loopback header can hold for IPv6: 24 (NetBSD,
# OpenBSD), 28 (FreeBSD), 30 (macOS), 10 (Linux); IPv4 is 2 everywhere.
_AF_INET6 = frozenset({10, 24, 28, 30})

_IPPROTO_TCP = 6
# IPv6 extension headers that can be stepped over with the generic
# (next header, length in 8-byte units beyond the first 8) layout.
_IPV6_EXT_GENERIC = frozenset({0, 43, 60, 135, 139, 140, 253, 254})
_IPV6_FRAGMENT = 44
_IPV6_AH = 51  # its length field counts 4-byte units minus 2

_U16 = struct.Struct("!H")
_IPV4 = struct.Struct("!BBHHHBB")
_TCP = struct.Struct("!HHIIBBH")


@attrs.frozen
class TcpSegment:
    """The parts of one TCP segment that reassembly uses."""

    index: int  # packet number in the capture (1-based)
    ts: float
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: int
    payload: bytes  # the payload bytes the capture holds
    # Payload length on the wire according to the IP header; larger than
    # len(payload) when the capture's snap length cut the packet.
    wire_len: int
    # First fragment of a fragmented IP datagram: the rest of the payload is in
    # later fragments, which are not reassembled.
    fragment: bool = False

    @property
    def syn(self) -> bool:
        return bool(self.flags & SYN)

    @property
    def fin(self) -> bool:
        return bool(self.flags & FIN)

    @property
    def rst(self) -> bool:
        return bool(self.flags & RST)

    @property
    def has_ack(self) -> bool:
        return bool(self.flags & ACK)


class _Skip(Exception):
    """Internal: this packet carries no usable TCP segment, for this reason."""


class PacketDecoder:
    """Turns captured packets into TCP segments, counting what it skips."""

    def __init__(self) -> None:
        #: reason -> packets skipped for it ("not-tcp", "non-first-fragment", ...)
        self.skipped: Counter[str] = Counter()
        #: packets whose TCP payload was cut by the capture's snap length
        self.snapped = 0

    def decode(self, packet: Packet) -> TcpSegment | None:
        """The packet's TCP segment, or None (with the reason counted)."""
        try:
            return self._decode(packet)
        except _Skip as skip:
            self.skipped[str(skip)] += 1
            return None
        except (struct.error, IndexError, ValueError):
            # Any read past the end of a header the length checks missed.
            self.skipped["malformed"] += 1
            return None

    def _decode(self, packet: Packet) -> TcpSegment:
        data = packet.data
        lt = packet.linktype
        if lt == LINKTYPE_ETHERNET:
            if len(data) < 14:
                raise _Skip("truncated-link-header")
            (ethertype,) = _U16.unpack_from(data, 12)
            off = 14
            while ethertype in _ETH_VLAN:
                if len(data) < off + 4:
                    raise _Skip("truncated-link-header")
                (ethertype,) = _U16.unpack_from(data, off + 2)
                off += 4
        elif lt == LINKTYPE_LINUX_SLL:
            if len(data) < 16:
                raise _Skip("truncated-link-header")
            (ethertype,) = _U16.unpack_from(data, 14)
            off = 16
        elif lt == LINKTYPE_LINUX_SLL2:
            if len(data) < 20:
                raise _Skip("truncated-link-header")
            (ethertype,) = _U16.unpack_from(data, 0)
            off = 20
        elif lt in (LINKTYPE_NULL, LINKTYPE_LOOP):
            if len(data) < 4:
                raise _Skip("truncated-link-header")
            family = int.from_bytes(data[:4], "big" if lt == LINKTYPE_LOOP else "little")
            if lt == LINKTYPE_NULL and family > 0xFFFF:
                # Written by a big-endian host: the family is in the top bytes.
                family = int.from_bytes(data[:4], "big")
            if family == 2:
                ethertype = _ETH_IPV4
            elif family in _AF_INET6:
                ethertype = _ETH_IPV6
            else:
                raise _Skip("not-ip")
            off = 4
        elif lt in _RAW_LINKTYPES:
            if not data:
                raise _Skip("truncated-link-header")
            version = data[0] >> 4
            ethertype = _ETH_IPV4 if version == 4 else _ETH_IPV6 if version == 6 else 0
            off = 0
        else:
            raise _Skip(f"linktype-{lt}")
        # Linux cooked captures keep VLAN tags in the payload when the NIC did
        # not strip them, so step over tags here too.
        while ethertype in _ETH_VLAN and lt != LINKTYPE_ETHERNET:
            if len(data) < off + 4:
                raise _Skip("truncated-link-header")
            (ethertype,) = _U16.unpack_from(data, off + 2)
            off += 4
        if ethertype == _ETH_IPV4:
            return self._ipv4(packet, off)
        if ethertype == _ETH_IPV6:
            return self._ipv6(packet, off)
        raise _Skip("not-ip")

    def _ipv4(self, packet: Packet, off: int) -> TcpSegment:
        data = packet.data
        if len(data) < off + 20:
            raise _Skip("truncated-ip-header")
        vihl, _tos, total, _ident, frag, _ttl, proto = _IPV4.unpack_from(data, off)
        if vihl >> 4 != 4:
            raise _Skip("bad-ip-version")
        ihl = (vihl & 0x0F) * 4
        if ihl < 20 or len(data) < off + ihl:
            raise _Skip("truncated-ip-header")
        if proto != _IPPROTO_TCP:
            raise _Skip("not-tcp")
        if frag & 0x1FFF:
            raise _Skip("non-first-fragment")
        more_fragments = bool(frag & 0x2000)
        if total == 0:
            # A total length of 0 is what TCP segmentation offload leaves in
            # outgoing packets captured before the NIC split them (Wireshark
            # treats it the same way): the captured length is the truth.
            total = len(data) - off
        elif total < ihl:
            raise _Skip("bad-ip-length")
        src = socket.inet_ntop(socket.AF_INET, data[off + 12 : off + 16])
        dst = socket.inet_ntop(socket.AF_INET, data[off + 16 : off + 20])
        return self._tcp(packet, off + ihl, off + total, src, dst, more_fragments)

    def _ipv6(self, packet: Packet, off: int) -> TcpSegment:
        data = packet.data
        if len(data) < off + 40:
            raise _Skip("truncated-ip-header")
        if data[off] >> 4 != 6:
            raise _Skip("bad-ip-version")
        (plen,) = _U16.unpack_from(data, off + 4)
        nxt = data[off + 6]
        src = socket.inet_ntop(socket.AF_INET6, data[off + 8 : off + 24])
        dst = socket.inet_ntop(socket.AF_INET6, data[off + 24 : off + 40])
        # A payload length of 0 means a jumbogram (RFC 2675) or a TSO
        # super-packet; either way the captured bytes are all there is.
        end = off + 40 + plen if plen else len(data)
        pos = off + 40
        more_fragments = False
        while nxt != _IPPROTO_TCP:
            if len(data) < pos + 8:
                raise _Skip("truncated-ip-header")
            if nxt in _IPV6_EXT_GENERIC:
                step = (data[pos + 1] + 1) * 8
            elif nxt == _IPV6_AH:
                step = (data[pos + 1] + 2) * 4
            elif nxt == _IPV6_FRAGMENT:
                (frag,) = _U16.unpack_from(data, pos + 2)
                if frag & 0xFFF8:
                    raise _Skip("non-first-fragment")
                more_fragments = bool(frag & 1)
                step = 8
            else:
                raise _Skip("not-tcp")  # ESP, ICMPv6, UDP, no-next-header, ...
            nxt = data[pos]
            pos += step
        return self._tcp(packet, pos, end, src, dst, more_fragments)

    def _tcp(self, packet: Packet, off: int, end: int, src: str, dst: str, fragment: bool) -> TcpSegment:
        data = packet.data
        if len(data) < off + 20:
            raise _Skip("truncated-tcp-header")
        sport, dport, seq, ack, doff, flags, _window = _TCP.unpack_from(data, off)
        hlen = (doff >> 4) * 4
        if hlen < 20:
            raise _Skip("bad-tcp-header-length")
        if end < off + hlen:
            raise _Skip("bad-ip-length")
        start = off + hlen
        captured_end = min(end, len(data))  # min(): anything past `end` is Ethernet padding
        if captured_end < start:
            raise _Skip("truncated-tcp-header")
        payload = data[start:captured_end]
        wire_len = end - start
        if wire_len > len(payload):
            if packet.snapped:
                self.snapped += 1
            else:
                # The IP header claims more than the packet held, yet nothing
                # was snapped: trust the bytes, not the header.
                wire_len = len(payload)
        return TcpSegment(
            packet.index, packet.ts, src, sport, dst, dport, seq, ack, flags, payload, wire_len, fragment
        )


def decode_packet(packet: Packet) -> TcpSegment | None:
    """One-off convenience: the packet's TCP segment, or None."""
    return PacketDecoder().decode(packet)
