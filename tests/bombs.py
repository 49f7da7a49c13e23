"""Compressed payloads built to inflate far beyond their size, shared by the Produce and the
telemetry tests of the inflation bound."""

from __future__ import annotations


def snappy_claim(size: int) -> bytes:
    """A raw snappy block declaring ``size`` bytes (its varint length) and holding one literal:
    snappy inflates at most about 21:1, so its bomb is a length claimed up front."""
    head = bytearray()
    while size >= 0x80:
        head.append(size & 0x7F | 0x80)
        size >>= 7
    head.append(size)
    return bytes(head) + b"\x00x"
