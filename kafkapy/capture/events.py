"""The framing layer's events: what :class:`~kafkapy.capture.frames.KafkaFramer` and the fused
pcap walk (:mod:`kafkapy.capture.fused`) hand up, in a module of their own so both can make them."""

from __future__ import annotations

import struct
from typing import Literal, NamedTuple

import attrs

from kafkapy.capture.tcp import Connection, ConnectionClosed

__all__ = ["ConnectionClassified", "Frame", "FrameEvent", "TlsNote", "Unframed", "UnframedReason"]

_I32 = struct.Struct(">i")

UnframedReason = Literal["missing", "discarded"]
NoteStatus = Literal["undecodable", "gap"]


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
    reason: str | None = None  # "gap", "snaplen", "capture-end", "fin", "rst", ... when truncated

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


@attrs.frozen
class TlsNote:
    """What the TLS layer could not decrypt, for one row: a whole connection (``side`` None,
    status ``undecodable``) or the rest of one direction (status ``gap``)."""

    conn: Connection
    side: int | None
    ts: float
    status: NoteStatus
    reason: str


FrameEvent = Frame | Unframed | ConnectionClassified | ConnectionClosed | TlsNote
