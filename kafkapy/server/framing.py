"""Splitting a byte stream into Kafka frames, without I/O.

Each frame is a 4-byte big-endian size, then that many bytes. A size below
zero or above the limit (socket.request.max.bytes) is refused as soon as the
four size bytes arrive, before any of the body is read or buffered, so a
hostile size costs nothing.
"""

from __future__ import annotations

import struct

from kafkapy.errors import KafkaPyError

__all__ = ["FrameBuffer", "FrameSizeError"]


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

    __slots__ = ("_buf", "_failed", "_limit", "_want")

    def __init__(self, limit: int) -> None:
        self._buf = bytearray()  # the start of a frame whose end has not arrived
        self._limit = limit
        self._want = 4  # bytes _buf must hold before a frame can complete
        self._failed: FrameSizeError | None = None

    @property
    def pending(self) -> int:
        """Bytes received but not yet handed out: a stalled partial frame shows here."""
        return len(self._buf)

    def drain(self, data: bytes, out: list[bytes]) -> None:
        """Take received bytes: every frame body they complete is appended to ``out``, in order.

        A frame size that is negative or over the limit raises FrameSizeError as soon as its four
        bytes are in, after the frames before it were appended; the buffer then refuses all input.
        Whole frames are sliced straight out of ``data``: bytes are only buffered (and copied) for
        a frame that spans reads, and its body is copied out of the buffer once (a produce of a
        megabyte spans many reads)."""
        if self._failed is not None:
            raise self._failed
        buf = self._buf
        if buf:
            buf += data
            want = self._want
            if len(buf) < want:
                return
            if want > 4:  # a frame that spanned reads, its size checked: its body copied once
                with memoryview(buf) as view:
                    out.append(bytes(view[4:want]))
                    data = bytes(view[want:])
            else:
                data = bytes(buf)
            buf.clear()
        elif type(data) is not bytes:
            data = bytes(data)
        pos, end, limit, unpack = 0, len(data), self._limit, _SIZE.unpack_from
        want = 4
        while end - pos >= 4:
            size = unpack(data, pos)[0]
            if size < 0 or size > limit:
                self._failed = FrameSizeError(size, limit)
                raise self._failed
            stop = pos + 4 + size
            if stop > end:
                want = 4 + size
                break
            out.append(data[pos + 4:stop])
            pos = stop
        if pos < end:
            buf += data[pos:] if pos else data
        self._want = want
