"""The transition table: every allowed transition passes, every other one is refused."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from kafkapy.transactions.state import VALID_PREVIOUS, IllegalTransition, TxnState, check_transition

S = TxnState
# Kafka 3.x's validPreviousStates, written out here independently of the module's table.
ALLOWED = {
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.ONGOING, S.ONGOING), (S.EMPTY, S.ONGOING),
    (S.COMPLETE_COMMIT, S.ONGOING), (S.COMPLETE_ABORT, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.EMPTY, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD), (S.COMPLETE_ABORT, S.DEAD),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}
PAIRS = list(itertools.product(TxnState, TxnState))


def test_the_table_is_kafkas() -> None:
    assert {(source, target) for target, sources in VALID_PREVIOUS.items() for source in sources} == ALLOWED


@pytest.mark.parametrize(("source", "target"), sorted(ALLOWED))
def test_allowed_transition_passes(source: TxnState, target: TxnState) -> None:
    check_transition(source, target)


@pytest.mark.parametrize(("source", "target"), [pair for pair in PAIRS if pair not in ALLOWED])
def test_other_transitions_are_refused(source: TxnState, target: TxnState) -> None:
    with pytest.raises(IllegalTransition, match=f"{source.kafka_name} -> {target.kafka_name}"):
        check_transition(source, target)


def test_ids_and_names_are_kafkas() -> None:
    assert [(int(s), s.kafka_name) for s in TxnState] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert all(TxnState.from_kafka_name(s.kafka_name) is s for s in TxnState)
    assert TxnState.from_kafka_name("ongoing") is None  # Kafka's names are case-sensitive


def test_the_docs_show_the_table() -> None:
    """docs/transactions.md's state table is VALID_PREVIOUS, row for row."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "transactions.md").read_text()
    rows = {}
    for line in docs.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 2 and TxnState.from_kafka_name(cells[0]) is not None:
            rows[cells[0]] = set(cells[1].split(", "))
    assert rows == {target.kafka_name: {source.kafka_name for source in sources}
                    for target, sources in VALID_PREVIOUS.items()}
