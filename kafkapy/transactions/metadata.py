"""What the coordinator knows about one transactional id: an immutable value per state.

Kafka keeps a mutable TransactionMetadata and a separate TxnTransitMetadata for the state a
change is heading to. Here every change makes a new ``TxnMetadata`` (``transit``), checked
against the state table, and the coordinator swaps it in once it is durable in
``__transaction_state``: the value in the cache is always one that was written.
"""

from __future__ import annotations

from typing import Any

import attrs

from kafkapy.transactions.state import TxnState, check_transition

__all__ = ["MAX_PRODUCER_EPOCH", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "TopicPartition", "TxnMetadata",
           "epoch_exhausted"]

NO_PRODUCER_ID = -1  # Kafka's RecordBatch.NO_PRODUCER_ID
NO_PRODUCER_EPOCH = -1  # Kafka's RecordBatch.NO_PRODUCER_EPOCH
MAX_PRODUCER_EPOCH = (1 << 15) - 1  # Short.MaxValue: an epoch never handed to a client (kept for fencing)

TopicPartition = tuple[str, int]


def epoch_exhausted(epoch: int) -> bool:
    """Kafka's isEpochExhausted: the next bump would reach Short.MaxValue, kept so the coordinator
    can always fence once more; the producer id is rotated instead."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


@attrs.frozen
class TxnMetadata:
    """One transactional id's state as TransactionLogValue holds it (plus the last epoch, which
    Kafka keeps in memory only, to answer a retried KIP-360 InitProducerId)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    last_update_ms: int
    start_ms: int = -1
    partitions: frozenset[TopicPartition] = frozenset()
    previous_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def transit(self, state: TxnState, now_ms: int, **changes: Any) -> TxnMetadata:
        """This id in ``state`` (IllegalTransition unless the table allows it), with ``changes``.

        Built positionally rather than with ``attrs.evolve`` (0.9 against 2.1 us; three to four
        transits a transaction); tests/transactions/test_txn_metadata.py holds the two equal."""
        check_transition(self.state, state)
        if changes and not _CHANGEABLE.issuperset(changes):
            raise TypeError(f"not a field a transit changes: {sorted(set(changes) - _CHANGEABLE)}")
        get = changes.get
        return TxnMetadata(
            get("transactional_id", self.transactional_id), get("producer_id", self.producer_id),
            get("producer_epoch", self.producer_epoch), get("timeout_ms", self.timeout_ms),
            state, now_ms, get("start_ms", self.start_ms), get("partitions", self.partitions),
            get("previous_producer_id", self.previous_producer_id),
            get("last_producer_epoch", self.last_producer_epoch))


# What ``transit``'s changes may name: every field but the two it always sets.
_CHANGEABLE = frozenset(field.name for field in attrs.fields(TxnMetadata)) - {"state", "last_update_ms"}
