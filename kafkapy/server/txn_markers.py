"""The seam between the transaction coordinator and the partitions a transaction wrote to.

Ending a transaction means writing a marker (a control batch: COMMIT or ABORT) into every
partition the transaction touched, as Kafka's WriteTxnMarkers does. The data plane owns the
logs, so it provides the capability ``TXN_MARKERS``; the transaction coordinator uses it for
the partitions this broker leads, and WriteTxnMarkers requests for the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

import attrs

from kafkapy.errors import ErrorCode

__all__ = ["TXN_MARKERS", "TxnMarker", "TxnMarkerEvents", "TxnMarkerWriter"]

TXN_MARKERS = "txn-markers"


@attrs.frozen
class TxnMarker:
    """One WriteTxnMarkers entry: end ``producer_id``'s transaction in these partitions."""

    producer_id: int
    producer_epoch: int
    committed: bool  # COMMIT, else ABORT
    coordinator_epoch: int
    partitions: tuple[tuple[str, int], ...]


@runtime_checkable
class TxnMarkerWriter(Protocol):
    def write_markers(self, markers: Sequence[TxnMarker]) -> Mapping[tuple[int, str, int], ErrorCode]:
        """Append each marker's control batch to each of its partitions (durable as acks=all when
        it returns: a plain call, so the coordinator can finish a transaction without a task);
        per (producer_id, topic, partition) NONE or Kafka's error for that partition
        (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH, ...)."""
        ...


@runtime_checkable
class TxnMarkerEvents(Protocol):
    def watch_txn_markers(self, callback: Callable[[TxnMarker, str, int], None]) -> Callable[[], None]:
        """Call ``callback(marker, topic, partition)`` on the loop after each marker written to a
        partition (by the capability or by WriteTxnMarkers), as Kafka tells its group coordinator
        (onTransactionCompleted) about __consumer_offsets markers; returns a function that stops it."""
        ...
