"""Splitting a byte stream into Kafka frames, without I/O.

Each frame is a 4-byte big-endian size, then that many bytes. A size below
zero or above the limit (socket.request.max.bytes) is refused as soon as the
four size bytes arrive, before any of the body is read or buffered, so a
hostile size costs nothing.
"""

from __future__ import annotations

from kafkapy.errors import KafkaPyError

__all__ = ["FrameBuffer", "FrameSizeError"]


class FrameSizeError(KafkaPyError):
    """The peer announced a frame that must not be read."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        reason = "negative" if size < 0 else f"larger than socket.request.max.bytes ({limit})"
        super().__init__(f"frame size {size} is {reason}")


class FrameBuffer:
    """Accumulates received bytes and hands out complete frame bodies in order."""

    __slots__ = ("_buf", "_limit", "_need")

    def __init__(self, limit: int) -> None:
        self._buf = bytearray()
        self._limit = limit
        self._need = -1  # body size of the frame in progress, -1 while its size is unknown

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def pending(self) -> int:
        """Bytes received but not yet handed out: a stalled partial frame shows here."""
        return len(self._buf)

    def next_frame(self) -> bytes | None:
        """The next complete frame body, or None until more bytes arrive."""
        buf = self._buf
        if self._need < 0:
            if len(buf) < 4:
                return None
            size = int.from_bytes(buf[:4], "big", signed=True)
            if size < 0 or size > self._limit:
                raise FrameSizeError(size, self._limit)
            self._need = size
        need = self._need
        if len(buf) < need + 4:
            return None
        frame = bytes(buf[4:need + 4])
        del buf[:need + 4]
        self._need = -1
        return frame
