"""The data plane: Produce, Fetch, ListOffsets, idempotent producers and the partition registry.

Partition logs themselves are kafkapy.log's; this package serves them to clients. See
docs/dataplane.md.
"""

from __future__ import annotations

from kafkapy.dataplane.module import DataPlaneModule
from kafkapy.dataplane.partitions import Partitions

__all__ = ["DataPlaneModule", "Partitions"]
