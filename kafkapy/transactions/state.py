"""The states of a transactional id and the transitions between them, as a table.

Theory of operation. A transactional id is in exactly one state. A producer's first
AddPartitionsToTxn (or AddOffsetsToTxn) takes it from EMPTY, or from the COMPLETE_* state its
last transaction ended in, to ONGOING. EndTxn moves ONGOING to PREPARE_COMMIT or PREPARE_ABORT,
which is written to ``__transaction_state`` before any marker is: from then on the outcome is
decided and survives a restart. Once every partition of the transaction has its marker, the
state becomes COMPLETE_COMMIT or COMPLETE_ABORT and a new transaction may start.

Two states are never written to the log. PREPARE_EPOCH_FENCE is where an ONGOING transaction
goes when a new producer instance (InitProducerId) or the timeout takes it away from its
producer: the epoch is bumped in memory and the transaction is then aborted (PREPARE_ABORT)
under the bumped epoch, so the old producer is fenced. DEAD is a transactional id whose
``transactional.id.expiration.ms`` ran out; its tombstone is written and it is forgotten.

``VALID_PREVIOUS`` is Kafka's ``TransactionState.validPreviousStates`` (Kafka 3.x, without the
Transactions V2 additions of KIP-890 part 2, which kafkapy does not serve): a transition to
``target`` is legal only from the states listed for it. The ids and names are Kafka's, as they
appear in ``TransactionLogValue.TransactionStatus`` and in DescribeTransactions/ListTransactions.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

__all__ = ["VALID_PREVIOUS", "IllegalTransition", "TxnState", "check_transition"]


class TxnState(enum.IntEnum):
    """Kafka's transaction states; the value is the byte written in TransactionLogValue."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("PrepareCommit")."""
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)

    @property
    def is_pending_transaction(self) -> bool:
        """A transaction has started and not yet been completed (Kafka's hasPendingTransaction)."""
        return self in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_completing(self) -> bool:
        """The outcome is decided and markers are being written: CONCURRENT_TRANSACTIONS for others."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


_NAMES: Mapping[TxnState, str] = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

_S = TxnState
VALID_PREVIOUS: Mapping[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTransition(Exception):
    """A transition the table does not allow: a bug in the coordinator, never a client's error
    (the coordinator checks the request first and answers with Kafka's error code)."""

    def __init__(self, source: TxnState, target: TxnState) -> None:
        super().__init__(f"illegal transaction state transition {source.kafka_name} -> {target.kafka_name}")
        self.source = source
        self.target = target


def check_transition(source: TxnState, target: TxnState) -> None:
    """Raise IllegalTransition unless ``source -> target`` is in the table."""
    if source not in VALID_PREVIOUS[target]:
        raise IllegalTransition(source, target)
