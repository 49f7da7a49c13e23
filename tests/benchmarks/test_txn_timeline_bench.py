"""benchmarks/_txn_timeline's reading of a capture: transactions cut where the next one begins,
retries kept inside their transaction, and overlapping requests awaited once."""

from __future__ import annotations

import pytest

from benchmarks._txn_timeline import Exchange, _awaited, _transactions
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

ADD, PRODUCE, END = ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.PRODUCE, ApiKey.END_TXN
REFUSED = (int(ErrorCode.CONCURRENT_TRANSACTIONS),)


def _transaction(start: float, retried: bool = False) -> list[Exchange]:
    """One transaction's exchanges from ``start`` (ms), as the client sends them."""
    ms = 1e-3
    exchanges = [Exchange(ADD, start * ms, (start + 0.1) * ms, REFUSED if retried else (0,))]
    if retried:
        exchanges.append(Exchange(ADD, (start + 0.2) * ms, (start + 0.3) * ms, (0,)))
        start += 0.2
    return [*exchanges, Exchange(PRODUCE, (start + 0.2) * ms, (start + 0.4) * ms, (0,)),
            Exchange(PRODUCE, (start + 0.21) * ms, (start + 0.45) * ms, (0,)),
            Exchange(END, (start + 0.5) * ms, (start + 0.6) * ms, (0,))]


def test_transactions_are_cut_at_the_add_after_an_end_and_the_first_two_left_out() -> None:
    # An InitProducerId and a FindCoordinator between them are not a transaction's requests.
    noise = [Exchange(ApiKey.INIT_PRODUCER_ID, 0.0, 0.0001, (0,))]
    made = [_transaction(float(2 * n), retried=n == 3) for n in range(5)]
    cut = _transactions(noise + [exchange for transaction in made for exchange in transaction])
    # The last one has no successor to close it; the first two are the init and warm-up ones.
    assert cut == made[2:4]
    assert [e.api for e in cut[1]] == [ADD, ADD, PRODUCE, PRODUCE, END]


def test_a_refused_end_does_not_end_the_transaction() -> None:
    ms = 1e-3
    refused_end = [Exchange(ADD, 0.0, 0.1 * ms, (0,)), Exchange(END, 0.2 * ms, 0.3 * ms, REFUSED),
                   Exchange(ADD, 0.4 * ms, 0.5 * ms, (0,)), Exchange(END, 0.6 * ms, 0.7 * ms, (0,))]
    following = [_transaction(float(n)) for n in range(1, 4)]
    cut = _transactions(_transaction(-2.0) + refused_end + [e for t in following for e in t])
    assert cut[0] == following[0]  # the refused EndTxn's transaction was the second, left out
    assert len(_transactions(_transaction(-2.0) + refused_end + _transaction(1.0))) == 0


def test_overlapping_requests_are_awaited_once() -> None:
    # 0.1 (AddPartitionsToTxn) + 0.25 (the Produces, 0.2-0.45, overlapping) + 0.1 (EndTxn)
    assert _awaited(_transaction(0.0)) == pytest.approx(0.45e-3)
