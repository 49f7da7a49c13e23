"""Kafka's group coordinator: consumer groups (classic and KIP-848) and their offsets.

Separate from the seed-001 coordinator in ``kafkapy.coordination`` (keys 1000-1004).
"""

from kafkapy.groups.module import GroupsModule

__all__ = ["GroupsModule"]
