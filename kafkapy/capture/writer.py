"""Writing pcap files, and synthesising the TCP/IP packets to put in them.

Used to turn byte streams that never crossed a wire (a broker's in-process
traffic, test fixtures) into captures that Wireshark, tshark and our own
reader open: each chunk of payload becomes Ethernet/IP/TCP packets with
consistent sequence numbers, acknowledgements and checksums.
"""

from __future__ import annotations

import ipaddress
import os
import struct
from collections.abc import Iterator
from typing import BinaryIO

from kafkapy.capture.errors import CaptureError
from kafkapy.capture.packets import ACK, FIN, LINKTYPE_ETHERNET, PSH, RST, SYN
from kafkapy.capture.pcap import MAX_CAPLEN, Packet

__all__ = ["PcapWriter", "TcpFlow", "tcp_packet"]

_ETH_IPV4 = b"\x08\x00"
_ETH_IPV6 = b"\x86\xdd"
_VLAN = b"\x81\x00"
# Locally administered unicast MACs (bit 1 of the first octet set): they can
# never belong to a real NIC, which marks the packets as synthetic.
_CLIENT_MAC = bytes.fromhex("020000000001")
_SERVER_MAC = bytes.fromhex("020000000002")
# Largest payload per segment: 1460 is the MSS of a 1500-byte Ethernet MTU
# with 20-byte IPv4 and TCP headers (RFC 9293 section 3.7.1).
DEFAULT_MSS = 1460


class PcapWriter:
    """Writes a classic pcap file (microsecond or nanosecond timestamps)."""

    def __init__(
        self,
        dest: str | os.PathLike[str] | BinaryIO,
        *,
        linktype: int = LINKTYPE_ETHERNET,
        nanosecond: bool = False,
        snaplen: int = MAX_CAPLEN,
    ) -> None:
        if isinstance(dest, (str, os.PathLike)):
            self._file: BinaryIO = open(dest, "wb")
            self._owns_file = True
        else:
            self._file = dest
            self._owns_file = False
        self.nanosecond = nanosecond
        self.snaplen = snaplen
        magic = 0xA1B23C4D if nanosecond else 0xA1B2C3D4
        self._file.write(struct.pack("<IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))
        self.count = 0

    def write(self, data: bytes, ts: float, *, ts_ns: int | None = None, orig_len: int | None = None) -> None:
        """Write one packet; bytes beyond the snap length are cut, as tcpdump would."""
        if ts_ns is None:
            ts_ns = round(ts * 1e9)
        sec, ns = divmod(ts_ns, 1_000_000_000)
        frac = ns if self.nanosecond else ns // 1000
        if orig_len is None:
            orig_len = len(data)
        data = data[: self.snaplen]
        if not 0 <= sec < 1 << 32:
            raise CaptureError(f"timestamp {ts} does not fit a pcap record")
        self._file.write(struct.pack("<IIII", sec, frac, len(data), orig_len))
        self._file.write(data)
        self.count += 1

    def write_packet(self, packet: Packet) -> None:
        self.write(packet.data, packet.ts, ts_ns=packet.ts_ns, orig_len=packet.orig_len)

    def close(self) -> None:
        if self._owns_file:
            self._file.close()
        else:
            self._file.flush()

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071): ones' complement of the ones'
    complement sum of 16-bit words."""
    if len(data) % 2:
        data += b"\x00"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def tcp_packet(
    src: str,
    sport: int,
    dst: str,
    dport: int,
    *,
    seq: int,
    ack: int = 0,
    flags: int = ACK,
    payload: bytes = b"",
    window: int = 65535,
    src_mac: bytes = _CLIENT_MAC,
    dst_mac: bytes = _SERVER_MAC,
    vlan: int | None = None,
    ip_id: int = 0,
) -> bytes:
    """One Ethernet frame holding an IPv4 or IPv6 TCP segment, checksums filled in."""
    s_ip = ipaddress.ip_address(src)
    d_ip = ipaddress.ip_address(dst)
    tcp_len = 20 + len(payload)
    tcp = struct.pack(
        "!HHIIBBHHH", sport, dport, seq % (1 << 32), ack % (1 << 32), 5 << 4, flags, window, 0, 0
    )
    if s_ip.version == 4 and d_ip.version == 4:
        pseudo = s_ip.packed + d_ip.packed + struct.pack("!BBH", 0, 6, tcp_len)
        csum = _checksum(pseudo + tcp + payload)
        tcp = tcp[:16] + struct.pack("!H", csum) + tcp[18:]
        ip = struct.pack(
            "!BBHHHBBH4s4s", 0x45, 0, 20 + tcp_len, ip_id & 0xFFFF, 0x4000, 64, 6, 0, s_ip.packed, d_ip.packed
        )
        ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
        ethertype = _ETH_IPV4
    elif s_ip.version == 6 and d_ip.version == 6:
        pseudo = s_ip.packed + d_ip.packed + struct.pack("!IxxxB", tcp_len, 6)
        csum = _checksum(pseudo + tcp + payload)
        tcp = tcp[:16] + struct.pack("!H", csum) + tcp[18:]
        ip = struct.pack("!IHBB16s16s", 6 << 28, tcp_len, 6, 64, s_ip.packed, d_ip.packed)
        ethertype = _ETH_IPV6
    else:
        raise CaptureError(f"cannot mix address families: {src} and {dst}")
    eth = dst_mac + src_mac
    if vlan is not None:
        eth += _VLAN + struct.pack("!H", vlan & 0x0FFF)
    return eth + ethertype + ip + tcp + payload


class TcpFlow:
    """Packets of one synthetic TCP connection, with sequence numbers tracked.

    Every method returns ``(timestamp, frame)`` pairs ready for
    ``PcapWriter.write``; data is cut into ``mss``-sized segments, and each
    segment acknowledges everything the other side has sent so far.
    """

    def __init__(
        self,
        client: tuple[str, int],
        server: tuple[str, int],
        *,
        client_isn: int = 1_000_000,
        server_isn: int = 5_000_000,
        mss: int = DEFAULT_MSS,
    ) -> None:
        self.client = client
        self.server = server
        self.mss = mss
        # next sequence number to send, per side (True: client)
        self.next_seq = {True: client_isn % (1 << 32), False: server_isn % (1 << 32)}
        self._ip_id = 0

    def _packet(
        self, from_client: bool, flags: int, payload: bytes = b"", *, seq: int | None = None
    ) -> bytes:
        src, dst = (self.client, self.server) if from_client else (self.server, self.client)
        macs = (_CLIENT_MAC, _SERVER_MAC) if from_client else (_SERVER_MAC, _CLIENT_MAC)
        self._ip_id += 1
        return tcp_packet(
            src[0], src[1], dst[0], dst[1],
            seq=self.next_seq[from_client] if seq is None else seq,
            ack=self.next_seq[not from_client] if flags & ACK else 0,
            flags=flags, payload=payload, src_mac=macs[0], dst_mac=macs[1], ip_id=self._ip_id,
        )  # fmt: skip

    def handshake(self, ts: float) -> list[tuple[float, bytes]]:
        syn = self._packet(True, SYN)
        self.next_seq[True] = (self.next_seq[True] + 1) % (1 << 32)
        syn_ack = self._packet(False, SYN | ACK)
        self.next_seq[False] = (self.next_seq[False] + 1) % (1 << 32)
        return [(ts, syn), (ts, syn_ack), (ts, self._packet(True, ACK))]

    def segments(self, from_client: bool, data: bytes) -> Iterator[tuple[int, bytes]]:
        """(sequence number, payload) of each segment ``data`` would be sent as,
        advancing the sender's sequence number."""
        for i in range(0, len(data), self.mss):
            chunk = data[i : i + self.mss]
            yield self.next_seq[from_client], chunk
            self.next_seq[from_client] = (self.next_seq[from_client] + len(chunk)) % (1 << 32)

    def send(self, from_client: bool, data: bytes, ts: float) -> list[tuple[float, bytes]]:
        out = []
        for seq, chunk in self.segments(from_client, data):
            out.append((ts, self._packet(from_client, ACK | PSH, chunk, seq=seq)))
        return out

    def segment(
        self, from_client: bool, seq: int, payload: bytes, ts: float, flags: int = ACK | PSH
    ) -> tuple[float, bytes]:
        """A segment at an explicit sequence number (for retransmissions,
        overlaps and reordering); does not advance the flow's state."""
        return ts, self._packet(from_client, flags, payload, seq=seq)

    def close(self, ts: float) -> list[tuple[float, bytes]]:
        fin1 = self._packet(True, FIN | ACK)
        self.next_seq[True] = (self.next_seq[True] + 1) % (1 << 32)
        fin2 = self._packet(False, FIN | ACK)
        self.next_seq[False] = (self.next_seq[False] + 1) % (1 << 32)
        return [(ts, fin1), (ts, fin2), (ts, self._packet(True, ACK))]

    def reset(self, from_client: bool, ts: float) -> tuple[float, bytes]:
        return ts, self._packet(from_client, RST | ACK)
