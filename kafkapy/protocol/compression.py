"""Kafka's batch compression codecs, on top of cramjam.

Theory of operation: cramjam does the real work for all four codecs; this
module only adds the framing Kafka puts around them.  Two of those framings are
Kafka-specific and are the reason this module exists:

* snappy: the Java client writes snappy-java's "xerial" block stream (a 16-byte
  header starting ``\\x82SNAPPY\\x00`` followed by ``[int32 length][raw snappy
  block]`` chunks), while several non-Java clients write one raw snappy block.
  Decoding sniffs the header and accepts both; encoding writes the xerial form,
  which every Kafka consumer understands.
* lz4: the LZ4 frame format, except that Kafka 0.8/0.9 (message format v0)
  computed the frame header checksum over the wrong bytes.  A frame whose
  header checksum does not verify gets it recomputed once and is retried, so
  those old batches still decode.

Every failure surfaces as :class:`~kafkapy.errors.DecodeError` carrying the byte
offset of the compressed payload, because the caller only knows positions in
the original records bytes, not inside the decompressed stream.

Inflation is bounded. A few kilobytes of zstd (RLE blocks: 4 bytes for 128 KiB) or
gzip (1032:1) can claim gigabytes, and a payload is inflated whole, so every
:func:`decompress` takes a ``limit`` and refuses, with :class:`InflationLimitExceeded`,
a payload that would inflate beyond it, never holding more than ``limit + 1`` inflated bytes.
Produce and telemetry pick their own limit (see their docstrings); every other reader, the
capture decoder included, takes :data:`MAX_INFLATED_BYTES`. The bound costs nothing on the
usual batch: a payload too small to reach the limit even at its codec's densest ratio
(:data:`_DENSEST`) takes the plain one-shot call; only a larger one is inflated into a
buffer a few times its size and, if that fills, into a window of ``limit + 1`` bytes (an
anonymous mapping, whose pages cost nothing until written). snappy declares its lengths up
front, which are checked before anything is inflated.

Inflation in steps: one cramjam call cannot be paused, and under the bound a few KB of zstd
still inflate to 256 MiB, a large fraction of a second in one call. :func:`decompress_steps`
gives :func:`decompress`'s result in steps of about :data:`INFLATE_SLICE_BYTES`, yielding
between two, for the broker's event loop (a long Produce batch is checked in slices); it reads
each codec through a decoder that stops at a given output size (zlib, python-lz4, zstandard).
"""

from __future__ import annotations

import enum
import mmap
import zlib
from collections.abc import Generator, Iterator
from typing import Any, Final

import cramjam

from kafkapy.errors import DecodeError, EncodeError

__all__ = ["GZIP_DEFAULT_LEVEL", "INFLATE_SLICE_BYTES", "LZ4_DEFAULT_LEVEL", "MAX_INFLATED_BYTES",
           "ZSTD_DEFAULT_LEVEL", "Compression", "Deflater", "InflationLimitExceeded", "compress",
           "compression_of", "decompress", "decompress_steps", "lz4_with_kafka08_header_checksum"]

Buffer = bytes | bytearray | memoryview

# The default bound on one inflated payload. librdkafka, the most used non-Java client, refuses
# to inflate a batch beyond its receive.message.max.bytes (100 MB by default), so a batch above
# this could not be consumed by most of those clients anyway; 256 MiB leaves that room and more.
MAX_INFLATED_BYTES: Final = 256 * 1024 * 1024


class InflationLimitExceeded(DecodeError):
    """A compressed payload that would inflate beyond the bound its reader set (``limit``)."""

    def __init__(self, reason: str, *, limit: int, offset: int | None = None) -> None:
        super().__init__(reason, offset=offset, field="records")
        self.limit = limit


class Compression(enum.IntEnum):
    """The codec id carried in the low three bits of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    def __str__(self) -> str:
        return self.name.lower()


_BY_NAME = {c.name.lower(): c for c in Compression}


def compression_of(codec: Compression | int | str | None) -> Compression:
    """Normalise the many ways callers spell a codec ("gzip", 1, Compression.GZIP, None)."""
    if codec is None:
        return Compression.NONE
    if isinstance(codec, str):
        try:
            return _BY_NAME[codec.strip().lower()]
        except KeyError:
            raise EncodeError(f"unknown compression {codec!r}", field="compression") from None
    try:
        return Compression(codec)
    except ValueError:
        raise EncodeError(f"unknown compression id {codec!r}", field="compression") from None


# --- snappy (xerial framing) -------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
# version 1, minimum compatible version 1: what snappy-java writes.
_XERIAL_HEADER = _XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
_XERIAL_HEADER_LEN = len(_XERIAL_HEADER)
# snappy-java's default chunk; readers accept any size, so this only affects ratio.
_XERIAL_BLOCK = 32 * 1024


class _TooLarge(Exception):
    """Raised inside the codecs when the output would pass the limit; :func:`decompress` words it."""


def _snappy_block(block: memoryview, room: int) -> bytes:
    """One raw snappy block, whose declared length (a varint ahead of the data, which decoding
    holds it to) is checked against the ``room`` left before anything is allocated."""
    if cramjam.snappy.decompress_raw_len(block) > room:
        raise _TooLarge
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decode(data: Buffer, limit: int) -> bytes:
    return b"".join(_snappy_pieces(memoryview(data), limit))


def _snappy_pieces(view: memoryview, limit: int) -> Iterator[bytes]:
    """The inflated blocks of a snappy payload, one at a time, no more than ``limit`` bytes in
    all: the one decoder of both framings, whole (:func:`decompress`) or in steps."""
    if bytes(view[:8]) != _XERIAL_MAGIC or len(view) < _XERIAL_HEADER_LEN:
        yield _snappy_block(view, limit)
        return
    # The version/compat words are deliberately ignored: some producers write
    # them little-endian, and there has only ever been one layout.
    room = limit
    pos, end = _XERIAL_HEADER_LEN, len(view)
    while pos < end:
        # snappy-java tolerates streams concatenated header and all.
        if bytes(view[pos : pos + 8]) == _XERIAL_MAGIC:
            pos += _XERIAL_HEADER_LEN
            continue
        if end - pos < 4:
            raise ValueError("xerial snappy stream ends inside a chunk length")
        size = int.from_bytes(view[pos : pos + 4], "big", signed=True)
        pos += 4
        if size < 0 or size > end - pos:
            raise ValueError(f"xerial snappy chunk of {size} bytes overruns the stream")
        block = _snappy_block(view[pos : pos + size], room)
        room -= len(block)
        yield block
        pos += size


def _snappy_encode(data: Buffer) -> bytes:
    return b"".join([_XERIAL_HEADER, *_xerial_chunks(memoryview(data))])


def _xerial_chunks(view: memoryview) -> list[bytes]:
    """``view`` as xerial chunks (each block's length, then the block), no header."""
    parts = []
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(len(block).to_bytes(4, "big"))
        parts.append(block)
    return parts


# --- lz4 (Kafka 0.8/0.9 header checksum) -------------------------------------

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_M32 = 0xFFFFFFFF
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32, needed only to repair LZ4 frame header checksums (a few bytes long)."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos : pos + 4], "little")
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        h = (h + int.from_bytes(data[pos : pos + 4], "little") * _P3) & _M32
        h = (_rotl(h, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (h + data[pos] * _P5) & _M32
        h = (_rotl(h, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def _lz4_header_checksum_at(frame: bytes) -> int | None:
    """Where an LZ4 frame's header checksum byte is (after the optional content size and
    dictionary id), or None for bytes that are no whole frame header."""
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        return None
    at = 6 + (8 if frame[4] & 0x08 else 0) + (4 if frame[4] & 0x01 else 0)
    return at if len(frame) > at else None


def _lz4_fix_header_checksum(frame: bytes) -> bytes | None:
    """Return ``frame`` with a correct header checksum, or None if it already had one."""
    at = _lz4_header_checksum_at(frame)
    if at is None:
        return None
    good = (xxh32(frame[4:at]) >> 8) & 0xFF
    return None if frame[at] == good else frame[:at] + bytes((good,)) + frame[at + 1 :]


def lz4_with_kafka08_header_checksum(frame: bytes) -> bytes:
    """``frame`` with the header checksum Kafka 0.8 wrote (over the magic number too, KAFKA-3160),
    which magic-0 readers expect."""
    at = _lz4_header_checksum_at(frame)
    if at is None:
        raise ValueError("not an LZ4 frame")
    return frame[:at] + bytes(((xxh32(frame[:at]) >> 8) & 0xFF,)) + frame[at + 1 :]


def _lz4_decode(data: Buffer, limit: int) -> bytes:
    try:
        return _inflate(Compression.LZ4, data, limit)
    except cramjam.DecompressionError:
        fixed = _lz4_fix_header_checksum(bytes(data))
        if fixed is None:
            raise
        return _inflate(Compression.LZ4, fixed, limit)


# --- bounded inflation ---------------------------------------------------------

# The most bytes one input byte can inflate to, per codec: deflate codes a 258-byte match in
# two bits (1032:1); an LZ4 sequence of k+4 bytes yields at most 255k+273 (under 256:1); a
# zstd RLE block is 4 bytes for at most 128 KiB (32768:1). A payload no longer than
# limit / ratio cannot pass the limit, and takes the one-shot call.
_DENSEST: Final = {Compression.GZIP: 1032, Compression.LZ4: 256, Compression.ZSTD: 32768}
# cramjam's answer when the output buffer is full and the stream is not: it stops there.
_BUFFER_FULL: Final = "failed to write whole buffer"


def _inflate(codec: Compression, data: Buffer, limit: int) -> bytes:
    """cramjam's one-shot inflation of a gzip, lz4 or zstd payload, with at most ``limit`` bytes out.

    Past the ratio gate the payload is inflated into a buffer: first an ordinary one of a few
    times its size (memory the allocator has already mapped, so as fast as the one-shot call),
    then, if that fills, a window of ``limit + 1`` bytes (an anonymous mapping: its pages are
    faulted in only as they are written, which costs more per byte but nothing for the rest)."""
    module = _MODULES[codec]
    if len(data) * _DENSEST[codec] <= limit:
        return bytes(module.decompress(data))
    first = min(limit + 1, _FIRST_BUFFER_MAX, max(_FIRST_BUFFER_MIN, _FIRST_BUFFER_RATIO * len(data)))
    buffer = bytearray(first)
    written = _inflate_into(module, data, buffer)
    if written is not None and written < first:
        return bytes(memoryview(buffer)[:written])
    del buffer
    if first > limit:
        raise _TooLarge
    window = mmap.mmap(-1, limit + 1)
    try:
        written = _inflate_into(module, data, window)
        if written is None or written > limit:
            raise _TooLarge
        return window[:written]
    finally:
        window.close()


def _inflate_into(module: Any, data: Buffer, out: bytearray | mmap.mmap) -> int | None:
    """How many bytes ``data`` inflates to in ``out``, None if it fills ``out`` and wants more."""
    try:
        written: int = module.decompress_into(data, out)
    except cramjam.DecompressionError as exc:
        if _BUFFER_FULL in str(exc):
            return None
        raise
    return None if written >= len(out) else written


# The first buffer: this many times the payload, within these bounds (bytes).
_FIRST_BUFFER_RATIO: Final = 8
_FIRST_BUFFER_MIN: Final = 1 << 20
_FIRST_BUFFER_MAX: Final = 64 << 20

_MODULES: Final[dict[Compression, Any]] = {
    Compression.GZIP: cramjam.gzip, Compression.LZ4: cramjam.lz4, Compression.ZSTD: cramjam.zstd}

# The last payload found to pass its limit, kept whole: Produce reads a batch up to three times
# (the from-frame path, validate_records' fast path, its plain path), and the same bytes with the
# same or a lower limit are refused again for the price of a comparison instead of an inflation.
# A payload above _REMEMBERED_AT_MOST bytes (possible only where max.message.bytes is raised) is
# not kept: the copy would outlive the request.
_last_refused: tuple[Compression, bytes, int] | None = None
_REMEMBERED_AT_MOST: Final = 16 << 20


# --- dispatch ----------------------------------------------------------------


def decompress(codec: Compression, data: Buffer, *, offset: int | None = None,
               limit: int = MAX_INFLATED_BYTES) -> bytes:
    """Inflate a batch payload; ``offset`` locates the payload for error reports.

    A payload that would inflate beyond ``limit`` bytes raises :class:`InflationLimitExceeded`
    (a DecodeError), never holding more than ``limit + 1`` inflated bytes; every caller says
    which bound fits what it reads, :data:`MAX_INFLATED_BYTES` otherwise."""
    _refuse_if_refused_before(codec, data, limit, offset)
    try:
        if codec == Compression.GZIP:
            return _inflate(Compression.GZIP, data, limit)
        if codec == Compression.SNAPPY:
            return _snappy_decode(data, limit)
        if codec == Compression.LZ4:
            return _lz4_decode(data, limit)
        if codec == Compression.ZSTD:
            return _inflate(Compression.ZSTD, data, limit)
        if codec == Compression.NONE:
            return bytes(data)
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:
        # BaseException on purpose: a Rust panic inside cramjam surfaces as
        # pyo3's PanicException, which does not derive from Exception.
        raise _decode_error(codec, data, limit, offset, exc) from exc
    raise DecodeError(f"unknown compression id {int(codec)}", offset=offset, field="records")


def _refuse_if_refused_before(codec: Compression, data: Buffer, limit: int, offset: int | None) -> None:
    """Raise the limit's error at once for the payload last refused (the same bytes, a bound no higher)."""
    refused = _last_refused
    if (refused is not None and refused[0] == codec and limit <= refused[2]
            and len(refused[1]) == len(data) and refused[1] == data):
        raise _limit_error(codec, limit, offset)


def _decode_error(codec: Compression, data: Buffer, limit: int, offset: int | None,
                  exc: BaseException) -> DecodeError:
    """What an inflation that raised ``exc`` raises: the limit's error (the payload remembered),
    or that the payload does not decompress."""
    global _last_refused
    if isinstance(exc, _TooLarge):
        if len(data) <= _REMEMBERED_AT_MOST:
            _last_refused = (codec, bytes(data), limit)
        return _limit_error(codec, limit, offset)
    return DecodeError(f"{codec} payload does not decompress: {exc}", offset=offset, field="records")


def _limit_error(codec: Compression, limit: int, offset: int | None) -> InflationLimitExceeded:
    return InflationLimitExceeded(
        f"{codec} payload inflates beyond the limit of {limit} bytes", limit=limit, offset=offset)


# --- inflation in steps ----------------------------------------------------------

INFLATE_SLICE_BYTES: Final = 4 << 20
"""About how many bytes :func:`decompress_steps` inflates between two yields: a few milliseconds of
zstd or lz4 (zlib's inflate, the slowest, about 10 ms), as long as a slice of the record walk."""


def decompress_steps(codec: Compression, data: Buffer, *, offset: int | None = None,
                     limit: int = MAX_INFLATED_BYTES,
                     every: int = INFLATE_SLICE_BYTES) -> Generator[None, None, bytes | bytearray]:
    """:func:`decompress`, yielding after each ``every`` or so inflated bytes: the same bytes (as
    a bytearray when it took steps) or the same DecodeError (the same kind, the limit's one word
    for word; only a damaged payload past the limit may be called corrupt by one and too large
    by the other), for a caller that must not hold its thread for the whole inflation (the
    broker's event loop: 8 KB of zstd may inflate to 256 MiB, hundreds of milliseconds of C).

    One call of cramjam cannot be paused, and cramjam has no decoder that stops at a given
    output size, so each codec is read here through one that does: zlib's ``decompressobj``
    with ``max_length`` (gzip, member by member), python-lz4's frame decompressor with
    ``max_length`` (frame by frame, Kafka 0.8's header checksum repaired first, as
    :func:`decompress` repairs it), and zstandard's ``decompressobj`` fed ``every / 32768`` input
    bytes at a time (zstd's densest ratio: no feed can inflate to much more than ``every``),
    frame by frame; snappy's blocks are inflated one at a time by the same code as
    :func:`decompress` (a block is one call: a raw payload at most ~21 times its size). A payload
    that cannot inflate beyond ``every`` at its codec's densest ratio takes :func:`decompress`.
    tests/protocol/test_compression_steps.py holds the two equal, corrupt payloads included."""
    _refuse_if_refused_before(codec, data, limit, offset)
    if codec == Compression.NONE or (codec in _DENSEST and len(data) * _DENSEST[codec] <= every):
        return decompress(codec, data, offset=offset, limit=limit)
    view = memoryview(data)
    try:
        if codec == Compression.GZIP:
            pieces = _gzip_pieces(view, every, limit)
        elif codec == Compression.SNAPPY:
            pieces = _snappy_pieces(view, limit)
        elif codec == Compression.LZ4:
            pieces = _lz4_pieces(view, every, limit)
        elif codec == Compression.ZSTD:
            pieces = _zstd_pieces(view, every)
        else:
            raise DecodeError(f"unknown compression id {int(codec)}", offset=offset, field="records")
        return (yield from _gathered(pieces, limit, every))
    except DecodeError:
        raise
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # as decompress: any codec's failure, a panic included
        raise _decode_error(codec, data, limit, offset, exc) from exc


def _gathered(pieces: Iterator[bytes], limit: int, every: int) -> Generator[None, None, bytearray]:
    """The ``pieces`` of an inflation joined, with a yield after each ``every`` bytes or so;
    :class:`_TooLarge` if they pass ``limit``. Joined as they come, so the pieces are freed as
    they go, and no final join copies the whole in one call.

    As :func:`_inflate`'s window of ``limit + 1`` bytes: a stream that fills it exactly and then
    turns out corrupt is corrupt, one that fills it and goes on or ends there is too large."""
    out = bytearray()
    since_yield = 0
    for piece in pieces:
        out += piece
        if len(out) > limit + 1:
            raise _TooLarge
        since_yield += len(piece)
        if since_yield >= every:
            since_yield = 0
            yield
    if len(out) > limit:
        raise _TooLarge
    return out


def _gzip_pieces(view: memoryview, every: int, limit: int) -> Iterator[bytes]:
    """A gzip payload's inflated bytes, at most ``every`` at a time, member after member, as
    cramjam reads them: any bytes after a member must be another whole member. No more than
    ``limit + 2`` bytes come out (:func:`_gathered` stops there), so a stream cut or damaged past
    that point is too large, not corrupt, as in :func:`_inflate`'s window."""
    if not len(view):
        raise ValueError("empty gzip stream")
    rest: Buffer = view
    room = limit + 2
    while len(rest):
        member = zlib.decompressobj(_GZIP_WBITS)
        pending = rest
        while not member.eof:
            piece = member.decompress(pending, min(every, room))
            pending = member.unconsumed_tail
            if piece:
                room -= len(piece)
                yield piece
            elif not pending and not member.eof:
                raise ValueError("gzip stream ends inside a member")
        rest = member.unused_data


def _lz4_pieces(view: memoryview, every: int, limit: int) -> Iterator[bytes]:
    """An LZ4 payload's inflated bytes, at most ``every`` at a time, frame after frame, as cramjam
    reads them (skippable frames included; any bytes after a frame must be another whole frame);
    no more than ``limit + 2``, as :func:`_gzip_pieces`."""
    import lz4.frame  # only inflation in steps needs it

    if not len(view):
        raise ValueError("lz4: empty input")
    data: bytes = view.tobytes()
    fixed = _lz4_fix_header_checksum(data)  # what decompress retries with; a bad checksum fails first
    if fixed is not None:
        data = fixed
    room = limit + 2
    pos = 0
    while pos < len(data):
        frame = lz4.frame.LZ4FrameDecompressor()
        piece = frame.decompress(data[pos:] if pos else data, max_length=min(every, room))
        while True:
            if piece:
                room -= len(piece)
                yield piece
            if frame.eof:
                break
            if frame.needs_input:
                raise ValueError("lz4: truncated frame")
            piece = frame.decompress(b"", max_length=min(every, room))
        pos = len(data) - len(frame.unused_data or b"")


def _zstd_pieces(view: memoryview, every: int) -> Iterator[bytes]:
    """A zstd payload's inflated bytes, frame after frame (skippable ones included; any bytes after a
    frame must be another whole frame), as cramjam reads them. zstandard's decompressobj inflates
    all it is fed, so it is fed ``every / 32768`` bytes at a time: no more than ``every`` bytes and
    one block (128 KiB) come out of one feed."""
    import zstandard  # only inflation in steps needs it

    if not len(view):
        raise ValueError("incomplete frame")
    feed = max(1, every // _DENSEST[Compression.ZSTD])
    pos, end = 0, len(view)
    while pos < end:
        declared = _zstd_content_size(zstandard, view[pos : pos + _ZSTD_HEADER_MAX])
        frame = zstandard.ZstdDecompressor().decompressobj()
        inflated = 0
        while not frame.eof:
            if pos >= end:
                raise ValueError("incomplete frame")
            fed = view[pos : pos + feed]
            pos += len(fed)
            piece = frame.decompress(fed)
            if piece:
                inflated += len(piece)
                yield piece
        if declared is not None and inflated != declared:
            # zstandard, fed in pieces, misses a frame ending short of its stated size (an empty
            # last block); libzstd in one go, as cramjam calls it, calls it corrupt
            raise ValueError("Data corruption detected")
        pos -= len(frame.unused_data)


def _zstd_content_size(zstandard: Any, header: memoryview) -> int | None:
    """The content size a zstd frame's header states, None for none (or a skippable frame, or a
    header the decoder will refuse itself)."""
    if bytes(header[:4]) != _ZSTD_MAGIC:
        return None
    try:
        size: int = zstandard.get_frame_parameters(header).content_size
    except zstandard.ZstdError:
        return None
    return None if size >= zstandard.CONTENTSIZE_ERROR else size


_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
_ZSTD_HEADER_MAX: Final = 18  # magic, descriptor, window, dictionary id and content size at their largest

_GZIP_WBITS: Final = 16 + zlib.MAX_WBITS  # zlib's gzip framing, header and trailer checked


# KIP-390's compression.<codec>.level defaults (Kafka's CompressionType): gzip's -1 is zlib's
# default (6); lz4's 9 is lz4-java's fast compressor, any other level its high compressor.
GZIP_DEFAULT_LEVEL: Final = -1
LZ4_DEFAULT_LEVEL: Final = 9
ZSTD_DEFAULT_LEVEL: Final = 3
_ZLIB_DEFAULT_LEVEL: Final = 6
_LZ4F_FAST: Final = 0  # the LZ4 frame API's default, fast mode; 3 and up are its high-compression levels


def _lz4_encode(data: Buffer, level: int) -> bytes:
    """An LZ4 frame of independent blocks and no content checksum, as Kafka's Lz4BlockOutputStream
    writes: Kafka's Java reader (and Sarama's) refuse linked blocks ("Dependent block stream is
    unsupported"), the LZ4 frame API's default."""
    compressor = _lz4_compressor(level)
    compressor.compress(data if isinstance(data, bytes) else bytes(data))  # it takes bytes only
    return bytes(compressor.finish())


def _lz4_compressor(level: int) -> Any:
    return cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)


def compress(codec: Compression, data: Buffer, level: int | None = None) -> bytes:
    """Deflate a batch payload the way a Java producer would, so any consumer can read it.
    ``level`` means what Kafka's ``compression.<codec>.level`` means (None: Kafka's default);
    snappy has none. zstd is written as a stream (no content size in the frame header), as
    Kafka's ZstdOutputStream writes it, so that :class:`Deflater` gives the same bytes."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data, level=_gzip_level(level)))
    if codec == Compression.SNAPPY:
        return _snappy_encode(data)
    if codec == Compression.LZ4:
        return _lz4_encode(data, _lz4_level(level))
    if codec == Compression.ZSTD:
        compressor = cramjam.zstd.Compressor(level=_zstd_level(level))
        compressor.compress(data if isinstance(data, bytes) else bytes(data))  # it takes bytes only
        return bytes(compressor.finish())
    raise EncodeError(f"unknown compression {codec!r}", field="compression")


def _gzip_level(level: int | None) -> int:
    return _ZLIB_DEFAULT_LEVEL if level is None or level == GZIP_DEFAULT_LEVEL else level


def _lz4_level(level: int | None) -> int:
    return _LZ4F_FAST if level is None or level == LZ4_DEFAULT_LEVEL else level


def _zstd_level(level: int | None) -> int:
    return ZSTD_DEFAULT_LEVEL if level is None else level


class Deflater:
    """:func:`compress` of a payload given a piece at a time: the outputs of :meth:`compress`
    for each piece, then of :meth:`finish`, joined, are what ``compress`` gives for the pieces
    joined (tests/protocol/test_compression_steps.py holds it). For a caller that must not
    compress a long payload in one call: the broker's loop, rebuilding a long batch in slices.
    gzip, zstd and lz4 hold their output until :meth:`finish` (their compressed size); snappy
    gives each 32 KiB block as it fills; none gives each piece back."""

    def __init__(self, codec: Compression, level: int | None = None) -> None:
        self.codec = codec
        self._snappy_pending = bytearray()
        self._snappy_started = False
        self._stream: Any = None
        if codec == Compression.GZIP:
            self._stream = cramjam.gzip.Compressor(level=_gzip_level(level))
        elif codec == Compression.LZ4:
            self._stream = _lz4_compressor(_lz4_level(level))
        elif codec == Compression.ZSTD:
            self._stream = cramjam.zstd.Compressor(level=_zstd_level(level))
        elif codec not in (Compression.NONE, Compression.SNAPPY):
            raise EncodeError(f"unknown compression {codec!r}", field="compression")

    def compress(self, piece: Buffer) -> bytes:
        """The output ready after ``piece`` (often nothing until :meth:`finish`)."""
        if self.codec == Compression.NONE:
            return bytes(piece)
        if self.codec != Compression.SNAPPY:
            self._stream.compress(piece if isinstance(piece, bytes) else bytes(piece))  # it takes bytes only
            return b""
        pending = self._snappy_pending
        pending += piece
        whole = len(pending) - len(pending) % _XERIAL_BLOCK
        if not whole:
            return b""
        out = self._snappy_blocks(memoryview(pending)[:whole])
        del pending[:whole]
        return out

    def finish(self) -> bytes:
        """The rest of the output; the Deflater is spent."""
        if self.codec == Compression.NONE:
            return b""
        if self.codec != Compression.SNAPPY:
            return bytes(self._stream.finish())
        out = self._snappy_blocks(memoryview(self._snappy_pending))
        return out if self._snappy_started or out else _XERIAL_HEADER

    def _snappy_blocks(self, data: memoryview) -> bytes:
        parts = _xerial_chunks(data)
        if not self._snappy_started:
            self._snappy_started = True
            parts.insert(0, _XERIAL_HEADER)
        return b"".join(parts)
