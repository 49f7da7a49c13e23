"""The state table: Kafka's moves and no others, and docs/groups.md shows the same table."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from kafkapy.groups.state import TRANSITIONS, GroupState, InvalidTransition, transition

DOC = Path(__file__).resolve().parents[2] / "docs" / "groups.md"
S = GroupState

KAFKA = {  # Kafka's ClassicGroupState.validPreviousStates, written out by hand
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE), (S.COMPLETING_REBALANCE, S.STABLE),
    (S.STABLE, S.PREPARING_REBALANCE), (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.EMPTY, S.PREPARING_REBALANCE), (S.PREPARING_REBALANCE, S.EMPTY),
    *((state, S.DEAD) for state in S),
}


@pytest.mark.parametrize(("current", "target"), list(itertools.product(S, S)))
def test_every_move_is_kafkas_or_refused(current: GroupState, target: GroupState) -> None:
    if (current, target) in KAFKA:
        assert transition(current, target) is target
    else:
        with pytest.raises(InvalidTransition, match=f"from {current.value} to {target.value}"):
            transition(current, target)


def test_the_docs_show_the_table() -> None:
    lines = DOC.read_text().splitlines()
    start = lines.index("| to \\ from | Empty | PreparingRebalance | CompletingRebalance | Stable | Dead |")
    header = [cell.strip() for cell in lines[start].strip("|").split("|")][1:]
    shown = set()
    for row in lines[start + 2:start + 2 + len(S)]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        target = S(cells[0])
        shown |= {(S(header[i]), target) for i, cell in enumerate(cells[1:]) if cell == "yes"}
    assert shown == {(before, after) for after, befores in TRANSITIONS.items() for before in befores}
