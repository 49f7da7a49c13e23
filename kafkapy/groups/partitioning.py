"""Which ``__consumer_offsets`` partition holds a group, by Kafka's rule.

The coordinator of a group is the leader of that partition, so every broker and every tool
(``kafkapy decode``, the CLI) must pick the same one Kafka picks: the non-negative Java
``String.hashCode`` of the group id modulo ``offsets.topic.num.partitions``.
"""

from __future__ import annotations

__all__ = ["OFFSETS_TOPIC", "java_string_hash", "offsets_partition_for"]

OFFSETS_TOPIC = "__consumer_offsets"

_INT32_MIN = -(1 << 31)


def java_string_hash(text: str) -> int:
    """``String.hashCode()``: over UTF-16 code units, wrapping at 32 bits (signed)."""
    encoded = text.encode("utf-16-be")
    value = 0
    for index in range(0, len(encoded), 2):
        value = (31 * value + ((encoded[index] << 8) | encoded[index + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def offsets_partition_for(group_id: str, partition_count: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % partitions``; ``abs(MIN_VALUE)`` is 0 there."""
    if partition_count < 1:
        raise ValueError(f"partition_count must be at least 1, got {partition_count}")
    hashed = java_string_hash(group_id)
    return (0 if hashed == _INT32_MIN else abs(hashed)) % partition_count
