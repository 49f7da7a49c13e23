"""The Java client's default partitioner for keyed records: ``murmur2(key)`` made positive, modulo
the partition count (Kafka's ``Utils.murmur2`` and ``Utils.toPositive``).

kafkapy places keyed records the way a producer would (seeding, ``kafkapy produce``), so a test
finds a key in the partition its application's producer will write it to. Computed here rather
than through kafka-python: importing kafka-python costs a command about 70 ms and, on Python
3.11+, some two hundred DeprecationWarnings from its schema loader in the user's test run.
"""

from __future__ import annotations

import struct

__all__ = ["murmur2", "partition_for_key"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS = struct.Struct("<I")


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of ``data``, as the signed int Java returns."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    for (k,) in _WORDS.iter_unpack(data[:whole]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        if tail == 3:
            h ^= data[whole + 2] << 16
        if tail >= 2:
            h ^= data[whole + 1] << 8
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition the Java client's default partitioner gives ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
