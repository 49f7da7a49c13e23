"""The seam between FindCoordinator (the group coordinator's API) and the transaction coordinator.

FindCoordinator with key type TRANSACTION names the leader of the transactional id's
``__transaction_state`` partition. The transaction coordinator module (kafkapy.transactions)
provides the capability ``TRANSACTION_COORDINATOR`` answering that; the seam lives here, below
both modules, because the transaction coordinator already uses kafkapy.groups (the offsets
partition of AddOffsetsToTxn) and the group coordinator must not import it back.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kafkapy.errors import ErrorCode
from kafkapy.store.base import BrokerRegistration

__all__ = ["TRANSACTION_COORDINATOR", "TransactionCoordinatorLocator"]

TRANSACTION_COORDINATOR = "transaction-coordinator"


@runtime_checkable
class TransactionCoordinatorLocator(Protocol):
    async def find_transaction_coordinator(
            self, transactional_id: str) -> tuple[ErrorCode, BrokerRegistration | None]:
        """(NONE, the broker leading the id's __transaction_state partition), or why there is
        none yet: COORDINATOR_NOT_AVAILABLE while the topic is being created or the partition
        has no leader, INVALID_REQUEST for an empty id. FindCoordinator checks DESCRIBE on the
        TransactionalId first (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as Kafka does."""
        ...
