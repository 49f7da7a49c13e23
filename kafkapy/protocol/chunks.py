"""Responses as several buffers: the encoded fields around ``records``, and the records themselves
as the buffers they are stored in (for ``transport.writelines``; nothing joined in Python).

Theory of operation
-------------------
A Fetch response is mostly record batches that already sit in the log as bytes. The plain encoder
copies them into one bytearray; ``encode_response_chunks`` does not. It encodes the body with every
:class:`RecordChunks` value replaced by a 16-byte marker (random per response, so no field a client
sent can forge one), finds each marker in the encoded bytes, and splits there: the bytes before the
marker minus its length prefix, a length prefix for the real size, the record chunks, and so on.
The length prefix in front of a 16-byte marker ends in 0x10 (int32, non-flexible versions) or is the
single byte 0x11 (unsigned varint of 16 + 1, flexible versions), which says which form to rewrite.

The plain path is the contract: ``b"".join(encode_response_chunks(k, v, c, body))`` equals
``encode_response(k, v, c, body)`` (which joins each RecordChunks through its ``raw``), held by a
Hypothesis test over every Fetch version (tests/protocol/test_chunks.py).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from kafkapy.errors import EncodeError
from kafkapy.protocol.codec import response_encoder
from kafkapy.protocol.primitives import uvarint_bytes

__all__ = ["Chunk", "RecordChunks", "encode_response_chunks", "frame_size", "joined"]

Chunk = bytes | memoryview
_MARKER_SIZE = 16
_INT32 = struct.Struct(">i")
_INT32_MARKER_PREFIX = _INT32.pack(_MARKER_SIZE)
_COMPACT_MARKER_PREFIX = uvarint_bytes(_MARKER_SIZE + 1)


class RecordChunks:
    """A ``records`` field value made of stored buffers (whole batches, in order)."""

    __slots__ = ("chunks", "size")

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks = list(chunks)
        self.size = sum(len(c) if isinstance(c, bytes) else c.nbytes for c in self.chunks)

    @property
    def raw(self) -> bytes:
        """The records as one bytes object: what the plain encoder writes (a copy)."""
        return b"".join(self.chunks)

    def __repr__(self) -> str:
        return f"RecordChunks({len(self.chunks)} chunks, {self.size} bytes)"


def frame_size(frame: Sequence[Chunk]) -> int:
    """The size prefix of a frame made of several buffers, found without joining them."""
    return sum(len(chunk) if type(chunk) is bytes else memoryview(chunk).nbytes for chunk in frame)


def joined(value: Any) -> Any:
    """``value`` with each RecordChunks replaced by its bytes (for observers: one copy, off the
    hot path)."""
    return _substitute(value, lambda chunks: chunks.raw)


def _substitute(value: Any, replace: Any) -> Any:
    if isinstance(value, RecordChunks):
        return replace(value)
    if isinstance(value, Mapping):
        return {k: _substitute(v, replace) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, replace) for v in value]
    return value


def encode_response_chunks(api_key: int, api_version: int, correlation_id: int,
                           body: Mapping[str, Any]) -> list[Chunk]:
    """One response frame (without its size prefix) as buffers whose concatenation is
    ``encode_response(api_key, api_version, correlation_id, body)``; the record chunks are the
    caller's own buffers."""
    prefix = os.urandom(_MARKER_SIZE - 4)
    holes: list[RecordChunks] = []

    def marker(chunks: RecordChunks) -> bytes:
        holes.append(chunks)
        return prefix + _INT32.pack(len(holes) - 1)

    encoded = response_encoder(api_key, api_version)(correlation_id, _substitute(body, marker))
    if not holes:
        return [encoded]
    found: list[tuple[int, int]] = []  # (marker position, hole index)
    start = 0
    while (pos := encoded.find(prefix, start)) >= 0:
        index = _INT32.unpack_from(encoded, pos + _MARKER_SIZE - 4)[0]
        found.append((pos, index))
        start = pos + _MARKER_SIZE
    if sorted(index for _, index in found) != list(range(len(holes))):
        raise EncodeError(f"records markers: found {len(found)} of {len(holes)}")
    out: list[Chunk] = []
    view = memoryview(encoded)
    done = 0
    for pos, index in found:
        chunks = holes[index]
        if encoded[pos - 1] == _COMPACT_MARKER_PREFIX[0]:
            out.append(view[done:pos - 1])
            out.append(uvarint_bytes(chunks.size + 1))
        elif encoded[pos - 4:pos] == _INT32_MARKER_PREFIX:
            out.append(view[done:pos - 4])
            out.append(_INT32.pack(chunks.size))
        else:
            raise EncodeError("records marker without its length prefix")
        out.extend(chunks.chunks)
        done = pos + _MARKER_SIZE
    out.append(view[done:])
    return [chunk for chunk in out if len(chunk)]
