"""Compressed payloads built to inflate far beyond their size, shared by the Produce and the
telemetry tests of the inflation bound."""

from __future__ import annotations

import zlib

import cramjam

from kafkapy.protocol.compression import Compression, compress

_MIB = 1 << 20


def snappy_claim(size: int) -> bytes:
    """A raw snappy block declaring ``size`` bytes (its varint length) and holding one literal:
    snappy inflates at most about 21:1, so its bomb is a length claimed up front."""
    head = bytearray()
    while size >= 0x80:
        head.append(size & 0x7F | 0x80)
        size >>= 7
    head.append(size)
    return bytes(head) + b"\x00x"


def zeros_in(codec: Compression, inflated: int) -> bytes:
    """``inflated`` zero bytes in ``codec``, compressed a MiB at a time (never whole in memory but
    for snappy, which inflates at most about 21:1 anyway)."""
    zeros = bytes(_MIB)
    if codec == Compression.GZIP:
        deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
        return b"".join([deflater.compress(zeros) for _ in range(inflated // _MIB)] + [deflater.flush()])
    if codec == Compression.SNAPPY:
        return compress(codec, bytes(inflated))
    compressor = (cramjam.zstd.Compressor(level=3) if codec == Compression.ZSTD
                  else cramjam.lz4.Compressor(level=0, content_checksum=False, block_linked=False))
    for _ in range(inflated // _MIB):
        compressor.compress(zeros)
    return bytes(compressor.finish())
