"""Kafka's transaction coordinator: transactional producers, markers and __transaction_state.

state.py (the states and their transition table), metadata.py (one transactional id's value),
records.py (__transaction_state's key and value codec), coordinator.py (the rules),
state_log.py (the coordinator's log over the data plane's partitions), module.py (the APIs).
"""

from kafkapy.server.txn_coordinator import TRANSACTION_COORDINATOR, TransactionCoordinatorLocator
from kafkapy.transactions.coordinator import (
           TRANSACTION_STATE_TOPIC,
           TransactionCoordinator,
           transaction_partition_for,
)
from kafkapy.transactions.module import TransactionsModule
from kafkapy.transactions.state import VALID_PREVIOUS, TxnState

__all__ = ["TRANSACTION_COORDINATOR", "TRANSACTION_STATE_TOPIC", "VALID_PREVIOUS", "TransactionCoordinator",
           "TransactionCoordinatorLocator", "TransactionsModule", "TxnState", "transaction_partition_for"]
