"""Decodings of frames seen before, for readers of many frames (the capture rows).

Theory of operation
-------------------
A capture of quiet clients repeats most of its small frames byte for byte,
but for the correlation id: a consumer's Heartbeat every few seconds, an idle
consumer's empty Fetch answer every ``fetch.max.wait.ms`` (not its request,
whose fetch session epoch moves), periodic Metadata requests and their
answers while the cluster stands still, ApiVersions on every connection. A
busy capture repeats few (docs/capture.md, the benchmark's mix). Decoding such a frame again gives the same
text, so a reader keeps what each one decoded to, keyed by the frame's bytes
without its correlation id, and answers a repeat with the kept decoding and
the repeat's own correlation id.

It is a fast path behind a contract: a frame decoder wrapped here answers
exactly what the plain one does, frame for frame (tests/protocol/test_frame_memo.py
and the bound decoders of tests/protocol/test_json_decoder.py). What keeps it so:

* The key is every byte of the frame but the correlation id, under the API
  and version the reader found the decoder for (one table per decoder), and
  a decoder reads nothing but the frame: same key, same answer.
* Only answers are kept. A frame that does not decode raises from the plain
  decoder every time, so its error is the plain one.
* The one mutable part of an answer, the body's topic list, is copied into
  every answer handed out, so a reader changing it changes no other row.

Messages with a records field (Produce requests, Fetch responses, ...) are
not kept: their batches do not repeat (every batch has offsets and sequence
numbers of its own), so keeping them would only spend memory and a hash.
Neither are frames over :data:`MAX_FRAME` bytes, and a reader holds at most
:data:`BUDGET` bytes (keys, texts and the objects around them), all dropped
at once when full: memory stays bounded by the reader, never by the capture.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from kafkapy.protocol.json_decoder import RenderedBody
from kafkapy.protocol.primitives import Array, Primitive, RecordsField
from kafkapy.protocol.schema import NullableStruct, StructCodec

__all__ = ["BUDGET", "ENTRY_OVERHEAD", "MAX_FRAME", "FrameMemo", "carries_records"]

#: Frames longer than this are decoded every time: a Metadata answer of a large cluster, say,
#: would take much of the budget for one key.
MAX_FRAME = 4096
#: Bytes one reader keeps (its tables are emptied when they would exceed it): keys and texts, and
#: :data:`ENTRY_OVERHEAD` per entry.
BUDGET = 4 << 20
#: What an entry holds besides its key and text bytes (CPython 3.11, 64-bit, by sys.getsizeof):
#: the bytes and str headers (33 and 49 bytes), the answer's tuples (96 for a request, 64 for its
#: body) and topic list (56), and about 80 for its dict slot as the dict grows.
ENTRY_OVERHEAD = 384

_CORRELATION = struct.Struct(">i")
_new = tuple.__new__


def carries_records(codec: Primitive) -> bool:
    """Whether a message (or any struct, array or field in it) holds a records field."""
    if isinstance(codec, RecordsField):
        return True
    if isinstance(codec, StructCodec):
        return any(carries_records(s.codec) for s in codec.slots + codec.tagged)
    if isinstance(codec, NullableStruct):
        return carries_records(codec.inner)
    if isinstance(codec, Array):
        return carries_records(codec.element)
    return False


class FrameMemo:
    """The kept decodings of one reader: a table per frame decoder, and one byte budget for all."""

    __slots__ = ("held", "tables")

    def __init__(self) -> None:
        self.tables: list[dict[bytes, Any]] = []
        self.held = 0

    def _table(self) -> dict[bytes, Any]:
        table: dict[bytes, Any] = {}
        self.tables.append(table)
        return table

    def _keep(self, table: dict[bytes, Any], key: bytes, answer: Any, size: int) -> None:
        if self.held + size > BUDGET:
            for t in self.tables:
                t.clear()
            self.held = 0
        table[key] = answer
        self.held += size

    def requests(self, decode: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
        """``decode`` (whole request frames of one API and version, to a RenderedRequest) with its
        answers kept: the correlation id is bytes 4-8, after the API key and version (which the
        caller found the decoder by), and the body the answer's fifth item."""
        return self._memoized(decode, 4, 4)

    def responses(self, decode: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
        """``decode`` (whole response frames of one API and version, to a RenderedResponse) with
        its answers kept: the correlation id is the first 4 bytes, the body the answer's fourth item."""
        return self._memoized(decode, 0, 3)

    def _memoized(self, decode: Callable[[bytes], Any], at: int, body_at: int) -> Callable[[bytes], Any]:
        table = self._table()
        seen = table.get
        keep = self._keep
        correlation = _CORRELATION.unpack_from
        after = at + 4  # the key: the frame's bytes after its correlation id
        body_type = RenderedBody

        def memoized(buf: bytes) -> Any:
            if len(buf) > MAX_FRAME or len(buf) < after:
                return decode(buf)
            key = buf[after:]
            found = seen(key)
            if found is None:
                found = decode(buf)
                keep(table, key, found, len(key) + len(found[body_at][0]) + ENTRY_OVERHEAD)
            answer = list(found)
            answer[2] = correlation(buf, at)[0]
            body = found[body_at]
            answer[body_at] = _new(body_type, (body[0], body[1], body[2][:]))
            return _new(type(found), answer)

        return memoized
