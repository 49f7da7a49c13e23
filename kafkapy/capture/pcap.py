"""Streaming reader for pcap and pcapng capture files.

One record is read at a time, so memory does not grow with the file. Both
formats are parsed here from their published layouts (the libpcap file format
and the pcapng draft, draft-ietf-opsawg-pcapng); no packet library is used.

What the reader promises about hostile input: it either yields packets, stops
cleanly, or raises CaptureError. A file that ends inside a record is not an
error: the partial packet is yielded with ``cut_by_eof`` set and the reader's
``truncated`` flag tells the caller the file was cut short.
"""

from __future__ import annotations

import gzip
import io
import os
import struct
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO, Literal

import attrs

from kafkapy.capture.errors import CaptureError

__all__ = ["MAX_CAPLEN", "CaptureReader", "Packet", "read_packets"]

# The largest captured length accepted for one packet: 262144 bytes is
# tcpdump's MAXIMUM_SNAPLEN and Wireshark's WTAP_MAX_PACKET_SIZE_STANDARD, the
# most either tool writes for an Ethernet or IP link. A larger declared length
# is a corrupt file, and refusing it keeps a hostile length field from making
# us allocate gigabytes.
MAX_CAPLEN = 262_144

# Unknown pcapng blocks are skipped by reading them in pieces of this size, so
# even a block that declares 4 GiB never costs more than this much memory.
_SKIP_CHUNK = 65_536

# pcap files are read this many bytes at a time, whatever the records
# declare: dozens of packets per read call, while the reader's own buffer
# stays a small part of the memory a decode needs.
_READ_CHUNK = 65_536


_PCAP_MAGICS: dict[bytes, tuple[str, int, int]] = {
    # magic as stored -> (struct byte order, nanoseconds per fraction unit, extra header bytes)
    b"\xd4\xc3\xb2\xa1": ("<", 1000, 0),  # microsecond, little-endian writer
    b"\xa1\xb2\xc3\xd4": (">", 1000, 0),
    b"\x4d\x3c\xb2\xa1": ("<", 1, 0),  # nanosecond
    b"\xa1\xb2\x3c\x4d": (">", 1, 0),
    # Alexey Kuznetzov's patched libpcap: 8 more bytes per record header
    # (ifindex, protocol, pkt_type, pad). Still produced by old Red Hat tcpdump.
    b"\x34\xcd\xb2\xa1": ("<", 1000, 8),
    b"\xa1\xb2\xcd\x34": (">", 1000, 8),
}

_PCAPNG_SHB = 0x0A0D0D0A
_PCAPNG_BYTE_ORDER_MAGIC = 0x1A2B3C4D
_PCAPNG_IDB = 0x00000001
_PCAPNG_OPB = 0x00000002  # obsolete Packet Block, still written by old tools
_PCAPNG_SPB = 0x00000003
_PCAPNG_EPB = 0x00000006
_OPT_ENDOFOPT = 0
_OPT_IF_TSRESOL = 9
_OPT_IF_TSOFFSET = 14


@attrs.frozen
class Packet:
    """One captured packet, as the capture file recorded it."""

    index: int  # 1-based position in the file, like tshark's frame.number
    ts: float  # seconds since the epoch
    ts_ns: int  # the same instant in integer nanoseconds (a float cannot hold ns)
    linktype: int  # a LINKTYPE_* value (1 Ethernet, 113 Linux SLL, ...)
    data: bytes  # the bytes captured, possibly fewer than were on the wire
    orig_len: int  # the packet's length on the wire
    interface: int = 0  # pcapng interface id; always 0 for pcap
    cut_by_eof: bool = False  # the file ended inside this packet's data

    @property
    def snapped(self) -> bool:
        """True when the capture kept fewer bytes than were on the wire."""
        return len(self.data) < self.orig_len


@attrs.define
class _Interface:
    linktype: int
    snaplen: int
    ts_base: int = 10  # if_tsresol: 10**-exp or 2**-exp seconds per unit
    ts_exp: int = 6
    ts_offset_s: int = 0

    def to_ns(self, units: int) -> int:
        if self.ts_base == 10:
            if self.ts_exp <= 9:
                ns = units * int(10 ** (9 - self.ts_exp))
            else:
                ns = units // int(10 ** (self.ts_exp - 9))
        else:
            ns = (units * 1_000_000_000) >> self.ts_exp
        return ns + self.ts_offset_s * 1_000_000_000

    def ns_scale(self) -> tuple[int, int, int, int]:
        """(linktype, multiplier, divisor, offset): to_ns as one expression,
        ``units * multiplier // divisor + offset``, for a walker to inline."""
        offset = self.ts_offset_s * 1_000_000_000
        if self.ts_base == 2:  # (units * 10**9) >> exp is this floor division
            return self.linktype, 1_000_000_000, 1 << self.ts_exp, offset
        if self.ts_exp <= 9:
            return self.linktype, int(10 ** (9 - self.ts_exp)), 1, offset
        return self.linktype, 1, int(10 ** (self.ts_exp - 9)), offset


class _Eof(Exception):
    """Internal: the file ended inside a structure."""


# RFC 1952: ID1, ID2 and CM (8, deflate) open every gzip member.
_GZIP_MAGIC = b"\x1f\x8b\x08"


class _Prefixed(io.RawIOBase):
    """Bytes already read from a stream, then the rest of it: gzip's input once its magic is read
    (a pipe cannot seek back)."""

    def __init__(self, prefix: bytes, rest: BinaryIO) -> None:
        self._prefix = prefix
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        with memoryview(buffer) as view:
            if self._prefix:
                n = min(len(view), len(self._prefix))
                view[:n] = self._prefix[:n]
                self._prefix = self._prefix[n:]
                return n
            data = self._rest.read(len(view))
            if not data:
                return 0
            view[: len(data)] = data
            return len(data)


class _Gunzip:
    """The decompressed bytes of a gzip stream, read as a capture file reads. A stream cut short
    ends where its data does, as a plain capture cut short does (the reader then reports the cut
    record); corrupt data is a CaptureError."""

    def __init__(self, magic: bytes, raw: BinaryIO) -> None:
        self._raw = raw
        self._gzip = gzip.GzipFile(fileobj=_Prefixed(magic, raw), mode="rb")
        self._ended = False

    def read(self, n: int = -1) -> bytes:
        parts: list[bytes] = []
        want = n if n >= 0 else 1 << 62
        while want > 0 and not self._ended:
            try:
                chunk = self._gzip.read1(min(want, 1 << 20))
            except EOFError:  # the compressed stream breaks off
                chunk = b""
            except (zlib.error, gzip.BadGzipFile) as exc:
                raise CaptureError(f"corrupt gzip data: {exc}") from exc
            if not chunk:
                self._ended = True
                break
            parts.append(chunk)
            want -= len(chunk)
        return b"".join(parts)

    def close(self) -> None:
        self._gzip.close()
        self._raw.close()


class CaptureReader:
    """Iterate the packets of a pcap or pcapng file, one record at a time.

    ``source`` is a path or a binary file object (which is not closed by us).
    The format is recognised from the first four bytes.
    """

    format: Literal["pcap", "pcapng"]

    def __init__(self, source: str | os.PathLike[str] | BinaryIO) -> None:
        if isinstance(source, (str, os.PathLike)):
            self._file: BinaryIO = open(source, "rb")
            self._owns_file = True
        else:
            self._file = source
            self._owns_file = False
        self._pos = 0  # bytes consumed, for error offsets
        self._pushback = b""  # bytes given back by unread(), read before the file's...
        self._pushback_at = 0  # ...from this position on
        self._order = "<"  # the current pcapng section's byte order...
        self._interfaces: list[_Interface] = []  # ...and interfaces
        self._started_ng = False  # the first pcapng block (whose magic _open read) is behind us
        self._index = 0
        self._started = False
        #: True once the reader found the file ending inside a record.
        self.truncated = False
        #: For pcap files, the linktype declared in the file header.
        self.linktype: int | None = None
        self.nanosecond = False
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    # -- plumbing ---------------------------------------------------------

    def _read(self, n: int) -> bytes:
        """Read exactly n bytes, or fewer only at end of file (short reads of
        pipes and sockets are retried)."""
        if self._pushback:
            at = self._pushback_at
            data = self._pushback[at : at + n]
            if at + n < len(self._pushback):
                self._pushback_at = at + n
                self._pos += n
                return data
            self._pushback = b""
            self._pushback_at = 0
            if len(data) < n:
                more = self._file.read(n - len(data))
                data += more or b""
        else:
            data = self._file.read(n)
            if data is None:  # a non-blocking raw stream with nothing ready
                data = b""
        if len(data) < n and data:
            parts = [data]
            got = len(data)
            while got < n:
                more = self._file.read(n - got)
                if not more:
                    break
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        self._pos += len(data)
        return data

    def _read_full(self, n: int) -> bytes:
        data = self._read(n)
        if len(data) < n:
            raise _Eof
        return data

    def _skip(self, n: int) -> None:
        while n > 0:
            got = len(self._read(min(n, _SKIP_CHUNK)))
            if got == 0:
                raise _Eof
            n -= got

    def close(self) -> None:
        if self._owns_file:
            self._file.close()

    def __enter__(self) -> CaptureReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- header -----------------------------------------------------------

    def _open(self) -> None:
        magic = self._read(4)
        if magic[:3] == _GZIP_MAGIC:
            # A compressed capture (tcpdump -z gzip, rotated logs), which tshark reads as it is:
            # read on through the decompressor, from its first byte.
            self._file = _Gunzip(magic, self._file)  # type: ignore[assignment]  # reads like one
            self._pos = 0
            magic = self._read(4)
        if len(magic) < 4:
            raise CaptureError("file too short to be a pcap or pcapng capture", offset=0, truncated=True)
        if magic in _PCAP_MAGICS:
            self.format = "pcap"
            self._open_pcap(magic)
        elif int.from_bytes(magic, "big") == _PCAPNG_SHB:
            self.format = "pcapng"
            self._pending_magic = magic
        else:
            raise CaptureError(f"not a pcap or pcapng file (magic {magic.hex()})", offset=0)

    def _open_pcap(self, magic: bytes) -> None:
        order, self._frac_ns, extra = _PCAP_MAGICS[magic]
        self.nanosecond = self._frac_ns == 1
        rest = self._read(20)
        if len(rest) < 20:
            raise CaptureError("pcap file header cut short", offset=self._pos, truncated=True)
        major, _minor, _zone, _sigfigs, snaplen, network = struct.unpack(order + "HHiIII", rest)
        if major != 2:
            raise CaptureError(f"unsupported pcap version {major}", offset=4)
        # The upper bits of the link-type word carry FCS information (pcap
        # spec, "LinkType and additional information"); the type is the low 16.
        self.linktype = network & 0xFFFF
        self._snaplen = snaplen
        self._rec = struct.Struct(order + "IIII")
        self._rec_size = 16 + extra

    # -- iteration --------------------------------------------------------

    def __iter__(self) -> Iterator[Packet]:
        if self._started:
            raise CaptureError("a CaptureReader can be iterated only once")
        self._started = True
        if self.format == "pcap":
            return self._iter_pcap()
        return self._iter_pcapng()

    def _iter_pcap(self) -> Iterator[Packet]:
        linktype = self.linktype
        assert linktype is not None
        index = 0
        for ts_ns, data, orig, cut in self._pcap_records():
            index += 1
            yield Packet(index, ts_ns / 1e9, ts_ns, linktype, data, orig, 0, cut)

    def pcap_records(self) -> Iterator[tuple[int, bytes, int, bool]]:
        """A pcap file's records as (ts_ns, data, orig_len, cut_by_eof) tuples.

        No object is made per packet beyond the tuple. Only for ``format == "pcap"``,
        and like iteration it can run once.
        """
        self._start_pcap()
        return self._pcap_records()

    def pcap_layout(self) -> tuple[struct.Struct, int, int]:
        """For a walker of the raw chunks (:meth:`read_chunk`): the record header's
        struct (seconds, fraction, captured length, original length), its size,
        and nanoseconds per fraction unit. Starts the reading, like iteration.

        The fused fast path of kafkapy.capture.frames walks the records in the
        chunks itself, so no bytes object or tuple is made per packet; it must
        check each captured length with :meth:`oversized` and hand a partial
        record left at the end of the file to :meth:`cut_record`, as
        :meth:`pcap_records` does.
        """
        self._start_pcap()
        return self._rec, self._rec_size, self._frac_ns

    def _start_pcap(self) -> None:
        if self.format != "pcap" or self._started:
            raise CaptureError("pcap_records() needs a pcap file not yet iterated")
        self._started = True

    def read_chunk(self) -> bytes:
        """The file's next bytes, up to a chunk; empty at its end."""
        if self._pushback:
            more = self._pushback[self._pushback_at :]
            self._pushback = b""
            self._pushback_at = 0
            self._pos += len(more)
            return more
        more = self._file.read(_READ_CHUNK)
        if not more:  # end of file (or of a non-blocking stream's data)
            return b""
        self._pos += len(more)
        return more

    def oversized(self, incl: int, unread: int) -> CaptureError:
        """The error for a record declaring ``incl`` captured bytes, more than
        MAX_CAPLEN; ``unread`` counts the bytes read from the file but not yet
        walked, from the record's header on (which places it in the file)."""
        return CaptureError(
            f"record declares {incl} captured bytes, more than the {MAX_CAPLEN}-byte cap",
            offset=self._pos - unread,
        )

    def cut_record(self, rest: bytes) -> tuple[int, bytes, int] | None:
        """The file ended with ``rest``, part of a record: marks the reader
        truncated and gives (ts_ns, data, orig_len) of the cut packet, or None
        when even its record header is incomplete."""
        if not rest:
            return None
        self.truncated = True
        if len(rest) < self._rec_size:
            return None
        sec, frac, _incl, orig = self._rec.unpack_from(rest)
        return sec * 1_000_000_000 + frac * self._frac_ns, rest[self._rec_size :], orig

    def _pcap_records(self) -> Iterator[tuple[int, bytes, int, bool]]:
        unpack = self._rec.unpack_from
        rec_size = self._rec_size
        frac_ns = self._frac_ns
        read = self.read_chunk
        buf = b""
        pos = 0
        while True:
            end = len(buf)
            while end - pos >= rec_size:
                sec, frac, incl, orig = unpack(buf, pos)
                if incl > MAX_CAPLEN:
                    raise self.oversized(incl, end - pos)
                start = pos + rec_size
                if end - start < incl:
                    break
                pos = start + incl
                yield sec * 1_000_000_000 + frac * frac_ns, buf[start:pos], orig, False
            rest = buf[pos:]
            buf = b""  # freed before the next read, which keeps the peak at two chunks
            more = read()
            if not more:
                cut = self.cut_record(rest)
                if cut is not None:
                    yield cut[0], cut[1], cut[2], True
                return
            buf = rest + more if rest else more
            pos = 0

    def _iter_pcapng(self) -> Iterator[Packet]:
        while True:
            packet, more = self.pcapng_block()
            if packet is not None:
                yield packet
            if not more:
                return

    def pcapng_block(self) -> tuple[Packet | None, bool]:
        """Read one pcapng block: its packet, if it holds one, and whether
        more blocks may follow (False once the file ended, cleanly or not).

        Iteration is this in a loop. The fused fast path of
        kafkapy.capture.frames walks the Enhanced Packet Blocks it can vouch
        for in the chunks itself and hands every other block back here (see
        :meth:`unread`), so errors, offsets and truncation are decided in one
        place; :meth:`pcapng_section` tells it the state the blocks set.
        """
        order = self._order
        block_start = self._pos
        packet: Packet | None = None
        if not self._started_ng:
            head = self._pending_magic + self._read(4)
            block_start = 0
            self._started_ng = True
        else:
            head = self._read(8)
        if not head:
            return None, False
        if len(head) < 8:
            self.truncated = True
            return None, False
        try:
            if int.from_bytes(head[:4], "big") == _PCAPNG_SHB:
                bom = self._read_full(4)
                if bom == b"\x4d\x3c\x2b\x1a":
                    order = "<"
                elif bom == b"\x1a\x2b\x3c\x4d":
                    order = ">"
                else:
                    raise CaptureError("pcapng section header has no byte-order magic", offset=block_start)
                self._order = order
                block_type = _PCAPNG_SHB
                (total,) = struct.unpack(order + "I", head[4:])
                body_read = 4
            else:
                block_type, total = struct.unpack(order + "II", head)
                body_read = 0
            if total < 12 or total % 4:
                raise CaptureError(f"pcapng block length {total} is invalid", offset=block_start)
            body_len = total - 12
            interfaces = self._interfaces
            if block_type == _PCAPNG_SHB:
                if body_len < 16:
                    raise CaptureError("pcapng section header too short", offset=block_start)
                major = struct.unpack(order + "H", self._read_full(2))[0]
                body_read += 2
                if major != 1:
                    raise CaptureError(f"unsupported pcapng version {major}", offset=block_start)
                self._interfaces = []  # interface ids are per section
            elif block_type == _PCAPNG_IDB:
                body_read = self._read_idb(order, body_len, interfaces, block_start)
            elif block_type in (_PCAPNG_EPB, _PCAPNG_OPB):
                packet, body_read = self._read_epb(order, block_type, body_len, interfaces, block_start)
            elif block_type == _PCAPNG_SPB:
                packet, body_read = self._read_spb(order, body_len, interfaces, block_start)
            if packet is not None and packet.cut_by_eof:
                self.truncated = True
                return packet, False
            self._skip(body_len - body_read)
            (trailer,) = struct.unpack(order + "I", self._read_full(4))
            if trailer != total:
                raise CaptureError(
                    f"pcapng block length {total} does not match its trailer {trailer}",
                    offset=block_start,
                )
        except _Eof:
            # A packet whose data was complete is still worth yielding
            # when only its options or trailer were cut off.
            self.truncated = True
            return packet, False
        return packet, True

    def pcapng_start(self) -> None:
        """Start reading a pcapng file block by block (:meth:`pcapng_block`), like iteration."""
        if self.format != "pcapng" or self._started:
            raise CaptureError("pcapng_block() needs a pcapng file not yet iterated")
        self._started = True

    def pcapng_section(self) -> tuple[str, list[tuple[int, int, int, int]]]:
        """The current section's byte order (struct's "<" or ">") and, per
        interface id, (link type, multiplier, divisor, offset in ns): a
        timestamp of ``units`` is ``units * multiplier // divisor + offset``
        nanoseconds, as the interface's if_tsresol and if_tsoffset say."""
        return self._order, [iface.ns_scale() for iface in self._interfaces]

    def set_packet_index(self, index: int) -> None:
        """Number the next packet read here ``index + 1``: for a walker that
        took the packets before it from the chunks itself."""
        self._index = index

    def unread(self, rest: bytes) -> None:
        """Give back bytes read (by :meth:`read_chunk`) but not walked: the
        next reads, of either kind, start with them."""
        if rest:
            self._pushback = rest + self._pushback[self._pushback_at :] if self._pushback else rest
            self._pushback_at = 0
            self._pos -= len(rest)

    def _read_idb(self, order: str, body_len: int, interfaces: list[_Interface], start: int) -> int:
        if body_len < 8:
            raise CaptureError("pcapng interface block too short", offset=start)
        linktype, _reserved, snaplen = struct.unpack(order + "HHI", self._read_full(8))
        iface = _Interface(linktype, snaplen)
        used = 8
        # Options are read one at a time; each value is at most 65535 bytes
        # (a 16-bit length), so parsing them never needs a large buffer.
        while body_len - used >= 4:
            code, length = struct.unpack(order + "HH", self._read_full(4))
            used += 4
            if code == _OPT_ENDOFOPT:
                break
            padded = (length + 3) & ~3
            if padded > body_len - used:
                raise CaptureError("pcapng option runs past its block", offset=start)
            value = self._read_full(padded)[:length]
            used += padded
            if code == _OPT_IF_TSRESOL and length >= 1:
                iface.ts_base = 2 if value[0] & 0x80 else 10
                iface.ts_exp = value[0] & 0x7F
            elif code == _OPT_IF_TSOFFSET and length >= 8:
                (iface.ts_offset_s,) = struct.unpack(order + "q", value[:8])
        interfaces.append(iface)
        return used

    def _read_epb(
        self, order: str, block_type: int, body_len: int, interfaces: list[_Interface], start: int
    ) -> tuple[Packet, int]:
        if body_len < 20:
            raise CaptureError("pcapng packet block too short", offset=start)
        fixed = self._read_full(20)
        if block_type == _PCAPNG_EPB:
            iface_id, ts_hi, ts_lo, caplen, orig = struct.unpack(order + "IIIII", fixed)
        else:
            iface_id, _drops, ts_hi, ts_lo, caplen, orig = struct.unpack(order + "HHIIII", fixed)
        if iface_id >= len(interfaces):
            raise CaptureError(f"packet refers to undeclared interface {iface_id}", offset=start)
        if caplen > MAX_CAPLEN:
            raise CaptureError(
                f"packet declares {caplen} captured bytes, more than the {MAX_CAPLEN}-byte cap", offset=start
            )
        padded = (caplen + 3) & ~3
        if padded > body_len - 20:
            raise CaptureError("packet data runs past its block", offset=start)
        iface = interfaces[iface_id]
        data = self._read(caplen)
        ts_ns = iface.to_ns((ts_hi << 32) | ts_lo)
        self._index += 1
        packet = Packet(
            self._index, ts_ns / 1e9, ts_ns, iface.linktype, data, orig, iface_id, len(data) < caplen
        )
        return packet, 20 + caplen

    def _read_spb(
        self, order: str, body_len: int, interfaces: list[_Interface], start: int
    ) -> tuple[Packet, int]:
        if not interfaces:
            raise CaptureError("simple packet block before any interface block", offset=start)
        if body_len < 4:
            raise CaptureError("pcapng simple packet block too short", offset=start)
        (orig,) = struct.unpack(order + "I", self._read_full(4))
        iface = interfaces[0]
        # An SPB stores min(original length, snaplen) bytes; the block length
        # is the other bound, since the SPB has no captured-length field.
        caplen = min(orig, body_len - 4)
        if iface.snaplen:
            caplen = min(caplen, iface.snaplen)
        if caplen > MAX_CAPLEN:
            raise CaptureError(
                f"packet declares {caplen} captured bytes, more than the {MAX_CAPLEN}-byte cap", offset=start
            )
        data = self._read(caplen)
        self._index += 1
        # SPBs carry no timestamp; 0 is what Wireshark shows for them too.
        return Packet(self._index, 0.0, 0, iface.linktype, data, orig, 0, len(data) < caplen), 4 + caplen


def read_packets(source: str | os.PathLike[str] | BinaryIO) -> Iterator[Packet]:
    """Yield every packet of a capture file; closes the file it opened."""
    with CaptureReader(source) as reader:
        yield from reader
