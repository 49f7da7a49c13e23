"""The seam between FindCoordinator (the group coordinator's API) and the transaction coordinator.

FindCoordinator with key type TRANSACTION names the leader of the transactional id's
``__transaction_state`` partition, and TxnOffsetCommit asks whether the group's offsets
partition is in the producer's transaction. The transaction coordinator module (kafkapy.transactions)
provides the capability ``TRANSACTION_COORDINATOR`` answering that; the seam lives here, below
both modules, because the transaction coordinator already uses kafkapy.groups (the offsets
partition of AddOffsetsToTxn) and the group coordinator must not import it back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Collection, Mapping
from typing import Protocol, runtime_checkable

from kafkapy.errors import ErrorCode
from kafkapy.store.base import BrokerRegistration

__all__ = ["TRANSACTION_COORDINATOR", "TransactionCoordinatorLocator", "Verified"]

TRANSACTION_COORDINATOR = "transaction-coordinator"
Verified = Mapping[tuple[str, int], ErrorCode]  # per partition, what a verification found


@runtime_checkable
class TransactionCoordinatorLocator(Protocol):
    async def find_transaction_coordinator(
            self, transactional_id: str) -> tuple[ErrorCode, BrokerRegistration | None]:
        """(NONE, the broker leading the id's __transaction_state partition), or why there is
        none yet: COORDINATOR_NOT_AVAILABLE while the topic is being created or the partition
        has no leader, INVALID_REQUEST for an empty id. FindCoordinator checks DESCRIBE on the
        TransactionalId first (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as Kafka does."""
        ...

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Collection[tuple[str, int]]) -> Mapping[tuple[str, int], ErrorCode]:
        """KIP-890's verification, for TxnOffsetCommit: per partition NONE if it is in the
        producer's ongoing transaction, TRANSACTION_ABORTABLE if not, or why the producer is
        refused (PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS;
        NOT_COORDINATOR when this broker is not the id's transaction coordinator)."""
        ...

    def verify_for_append(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Collection[tuple[str, int]]) -> Verified | Awaitable[Verified]:
        """KIP-890 part 1 for a leader about to append a transaction's first batch (Produce,
        TxnOffsetCommit), whoever the coordinator is: answered in place when it is this broker,
        else an awaitable of a verify-only AddPartitionsToTxn sent to it (Kafka's
        AddPartitionsToTxnManager). Per partition NONE, TRANSACTION_ABORTABLE (not in the
        transaction: the caller words it for its version), INVALID_PRODUCER_EPOCH for a fenced
        producer (what producers handle here, as Kafka's manager answers), INVALID_PRODUCER_ID_MAPPING,
        CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE (no live coordinator),
        NETWORK_EXCEPTION (it could not be asked), or INVALID_TXN_STATE (it refused the broker)."""
        ...

    def verify_in_place(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        partitions: Collection[tuple[str, int]]) -> Verified | None:
        """``verify_for_append``'s answer when this broker coordinates the id, else None (nothing
        is sent): what a path that must not wait may use."""
        ...
