"""What the transaction coordinators hold, as frozen values: ``broker.transactions()`` for tests.

Read on the broker's loop from each broker's transaction coordinator, for the partitions of
``__transaction_state`` it leads (loading any not yet loaded, as ListTransactions does). The
values are the coordinator's own: each is the latest one written to ``__transaction_state``, so a
transaction between PrepareCommit and CompleteCommit shows as PrepareCommit.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from kafkapy.transactions.metadata import TxnMetadata
from kafkapy.transactions.module import TransactionsModule

__all__ = ["TransactionView", "transaction_views"]


@attrs.frozen
class TransactionView:
    transactional_id: str
    state: str  # Kafka's name: Empty, Ongoing, PrepareCommit, CompleteCommit, ...
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    partitions: tuple[tuple[str, int], ...]  # in the open transaction, sorted; () once it ended
    start_time_ms: int  # epoch ms the open transaction began; -1 with none
    last_update_ms: int  # epoch ms of the last state change
    coordinator: int  # the broker id that coordinates it
    # Its partition of __transaction_state (Kafka's hash of the id modulo
    # transaction.state.log.num.partitions), whose leader is the coordinator:
    # broker.move_coordinator(transactional_id=...) moves that leadership.
    state_partition: int

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(topic for topic, _ in self.partitions)


def _view(metadata: TxnMetadata, broker_id: int, state_partition: int) -> TransactionView:
    return TransactionView(metadata.transactional_id, metadata.state.kafka_name, metadata.producer_id,
                           metadata.producer_epoch, metadata.timeout_ms, tuple(sorted(metadata.partitions)),
                           metadata.start_ms, metadata.last_update_ms, broker_id, state_partition)


def transaction_views(module: TransactionsModule,
                      wanted: Iterable[str] | None = None) -> list[TransactionView]:
    """The transactional ids ``module``'s broker coordinates (``wanted`` ones only), sorted."""
    names = None if wanted is None else set(wanted)
    broker_id = module.services.broker_id
    _, found = module.coordinator.list(matches=lambda name: names is None or name in names)
    partition_for = module.coordinator.partition_for
    return [_view(m, broker_id, partition_for(m.transactional_id))
            for m in sorted(found, key=lambda m: m.transactional_id)]
