"""Splitting a byte stream into Kafka frames, without I/O.

Each frame is a 4-byte big-endian size, then that many bytes. A size below
zero or above the limit (socket.request.max.bytes) is refused as soon as the
four size bytes arrive, before any of the body is read or buffered, so a
hostile size costs little.

Theory of operation: a frame whose bytes all arrive in one read is sliced out
of it (one copy). A frame that spans reads gets its body allocated once, as
soon as its size is known (``bytearray(size)``), and each read is copied into
its place, so each of its bytes is copied once however many reads bring it:
no growing buffer, no copy of the body out of it, no copy of the leftover of
the read that ends it. Only a size cut between reads (under four bytes) is
buffered. A body over PREALLOCATE_UP_TO is not allocated ahead of its bytes
(a peer announcing socket.request.max.bytes and sending nothing would pin
that much): it grows as they arrive. A body that spanned reads is handed out
as the ``bytearray`` itself when it is at least ``keep_from`` bytes (the
connection never touches it again, so whoever takes it may keep or cut it),
else as ``bytes`` (one more copy, of a small frame).

Bytes come in one of two ways. ``drain`` takes a read's ``bytes`` (asyncio.Protocol's
data_received). ``get_buffer``/``buffer_updated`` are asyncio.BufferedProtocol's: the socket is
read straight into the body of a frame that spans reads, once its size is known, so those bytes
are copied once in all (by the kernel); other reads land in a read buffer (the broker's
connections share one: no fresh 256 KiB ``bytes`` per read) and are drained out of it at once,
so both ways hand out the same frames after the same reads (tests/server/test_framing.py holds
them equal).
"""

from __future__ import annotations

import struct

from kafkapy.errors import KafkaPyError

__all__ = ["KEEP_FROM", "PREALLOCATE_UP_TO", "READ_SIZE", "FrameBuffer", "FrameSizeError", "ReceivedFrame"]

# A frame body as handed out: ``bytes``, or a large frame's own ``bytearray`` (see above).
ReceivedFrame = bytes | bytearray

# Bodies from this size on that span reads are handed out as their bytearray (FastPaths.kept_frames):
# the Produce batches worth it (librdkafka's, linger.ms=5, are 10-1000 KB; asyncio reads at most
# 256 KiB at a time). Smaller ones stay bytes, as every request was before, for a copy of a few KB.
KEEP_FROM = 16 * 1024
# The largest body allocated whole before its bytes arrive: librdkafka's message.max.bytes default
# (1,000,000) bounds its requests, so a producer's batches all fit.
PREALLOCATE_UP_TO = 1 << 20
# The read buffer of get_buffer: what asyncio's selector transports read at most at a time (max_size).
READ_SIZE = 256 * 1024


class FrameSizeError(KafkaPyError):
    """The peer announced a frame that must not be read."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        reason = "negative" if size < 0 else f"larger than socket.request.max.bytes ({limit})"
        super().__init__(f"frame size {size} is {reason}")


_SIZE = struct.Struct(">i")


class FrameBuffer:
    """Accumulates received bytes and hands out complete frame bodies in order."""

    __slots__ = ("_body", "_failed", "_filled", "_head", "_keep_from", "_lent", "_limit", "_read_view",
                 "_size")

    def __init__(self, limit: int, keep_from: int | None = KEEP_FROM,
                 read_buffer: memoryview | None = None) -> None:
        self._head = b""  # under four bytes of a size cut between reads
        self._body: bytearray | None = None  # the body of a frame that spans reads, allocated whole
        self._filled = 0  # bytes of _body received so far
        self._size = 0  # the size of _body's frame
        self._limit = limit
        self._keep_from = keep_from  # None: every body handed out as bytes
        self._failed: FrameSizeError | None = None
        # get_buffer's read buffer, made on first use unless given: every read is drained out of it
        # before the next one lands, so one loop's connections may share one (the broker's do).
        self._read_view = read_buffer
        self._lent: memoryview | None = None  # the part of _body get_buffer lent for the next read

    @property
    def pending(self) -> int:
        """Bytes received but not yet handed out: a stalled partial frame shows here."""
        return len(self._head) if self._body is None else 4 + self._filled

    def drain(self, data: bytes | bytearray | memoryview, out: list[ReceivedFrame]) -> None:
        """Take received bytes: every frame body they complete is appended to ``out``, in order.

        A frame size that is negative or over the limit raises FrameSizeError as soon as its four
        bytes are in, after the frames before it were appended; the buffer then refuses all input."""
        if self._failed is not None:
            raise self._failed
        if type(data) is not bytes:
            data = bytes(data)
        pos, end = 0, len(data)
        body = self._body
        if body is not None:  # more of a frame that spans reads, copied into its place
            filled = self._filled
            take = self._size - filled
            if take > end:
                body[filled:filled + end] = data
                self._filled = filled + end
                return
            with memoryview(data) as view:
                body[filled:] = view[:take]
            self._body = None
            keep_from = self._keep_from
            out.append(body if keep_from is not None and take + filled >= keep_from else bytes(body))
            pos = take
        elif self._head:  # a size cut between reads
            head = self._head
            need = 4 - len(head)
            if end < need:
                self._head = head + data
                return
            self._head = b""
            size = self._checked(_SIZE.unpack(head + data[:need])[0])
            pos = need
            if pos + size > end:
                self._start_body(data, pos, end, size)
                return
            out.append(data[pos:pos + size])
            pos += size
        limit, unpack = self._limit, _SIZE.unpack_from
        while end - pos >= 4:
            size = unpack(data, pos)[0]
            if size < 0 or size > limit:
                self._checked(size)
            stop = pos + 4 + size
            if stop > end:
                self._start_body(data, pos + 4, end, size)
                return
            out.append(data[pos + 4:stop])
            pos = stop
        if pos < end:
            self._head = data[pos:]

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next read goes (asyncio.BufferedProtocol.get_buffer; ``sizehint`` is not
        needed): the rest of a frame body that spans reads and was allocated whole, else the read
        buffer. ``buffer_updated`` then takes the bytes read."""
        body = self._body
        if body is not None and len(body) == self._size:
            lent = self._lent = memoryview(body)[self._filled:]
            return lent
        view = self._read_view
        if view is None:
            view = self._read_view = memoryview(bytearray(READ_SIZE))
        return view

    def buffer_updated(self, nbytes: int, out: list[ReceivedFrame]) -> None:
        """``nbytes`` were read into the last ``get_buffer``: as ``drain`` of those bytes."""
        lent = self._lent
        if lent is None:
            view = self._read_view
            assert view is not None
            if nbytes >= 4 and not self._head and self._body is None and self._failed is None:
                size = _SIZE.unpack_from(view, 0)[0]
                if size == nbytes - 4 and size <= self._limit:  # one whole frame (one at a time)
                    out.append(bytes(view[4:nbytes]))
                    return
            self.drain(bytes(view[:nbytes]), out)
            return
        self._lent = None
        lent.release()  # a body lent out and complete is handed out, maybe to be cut: no view may pin it
        filled = self._filled + nbytes
        if filled < self._size:
            self._filled = filled
            return
        body = self._body
        assert body is not None
        self._body = None
        keep_from = self._keep_from
        out.append(body if keep_from is not None and filled >= keep_from else bytes(body))

    def _checked(self, size: int) -> int:
        """``size``, or FrameSizeError (and every later drain refused) if it must not be read."""
        if size < 0 or size > self._limit:
            self._failed = FrameSizeError(size, self._limit)
            raise self._failed
        return size

    def _start_body(self, data: bytes, start: int, end: int, size: int) -> None:
        """Allocate the body of a frame that spans reads, and copy in the part of it that came."""
        with memoryview(data) as view:
            if size <= PREALLOCATE_UP_TO:
                body = self._body = bytearray(size)
                body[:end - start] = view[start:end]
            else:
                self._body = bytearray(view[start:end])
        self._filled, self._size = end - start, size
