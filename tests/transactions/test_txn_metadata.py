"""``TxnMetadata.transit`` builds the next value positionally (a fast path); it must give what
``attrs.evolve`` gives for every allowed transition and any set of changes, and refuse what
evolve would refuse."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.transactions.metadata import TxnMetadata
from kafkapy.transactions.state import VALID_PREVIOUS, IllegalTransition, TxnState

_INT16 = st.integers(-1, (1 << 15) - 1)
_INT64 = st.integers(-1, (1 << 63) - 1)
_PARTITIONS = st.frozensets(st.tuples(st.text(min_size=1, max_size=8), st.integers(0, 50)), max_size=4)
_FIELDS = {"transactional_id": st.text(min_size=1, max_size=12), "producer_id": _INT64,
           "producer_epoch": _INT16, "timeout_ms": st.integers(1, 900_000), "start_ms": _INT64,
           "partitions": _PARTITIONS, "previous_producer_id": _INT64, "last_producer_epoch": _INT16}


@st.composite
def _metadata(draw: st.DrawFn, state: TxnState) -> TxnMetadata:
    values: dict[str, Any] = {name: draw(strategy) for name, strategy in _FIELDS.items()}
    return TxnMetadata(state=state, last_update_ms=draw(_INT64), **values)


_TRANSITIONS = st.sampled_from(sorted((source, target) for target, sources in VALID_PREVIOUS.items()
                                      for source in sources))


@given(st.data(), _TRANSITIONS, _INT64)
def test_transit_is_evolve_for_every_allowed_transition_and_any_changes(
        data: st.DataObject, transition: tuple[TxnState, TxnState], now_ms: int) -> None:
    source, target = transition
    current = data.draw(_metadata(source))
    names = data.draw(st.frozensets(st.sampled_from(sorted(_FIELDS))))
    changes: dict[str, Any] = {name: data.draw(_FIELDS[name]) for name in sorted(names)}
    assert current.transit(target, now_ms, **changes) == attrs.evolve(
        current, state=target, last_update_ms=now_ms, **changes)


def test_transit_refuses_what_evolve_would() -> None:
    current = TxnMetadata("t", 1, 0, 1_000, TxnState.ONGOING, 5)
    with pytest.raises(TypeError, match="bogus"):
        current.transit(TxnState.PREPARE_COMMIT, 6, bogus=1)
    with pytest.raises(TypeError, match="state"):  # the two it sets itself
        current.transit(TxnState.PREPARE_COMMIT, 6, **{"state": TxnState.EMPTY})
    with pytest.raises(IllegalTransition):
        current.transit(TxnState.COMPLETE_COMMIT, 6)
