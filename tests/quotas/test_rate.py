"""Kafka's sampled Rate: the fast path of record_checked gives the same answer as a full measurement."""

from __future__ import annotations

import random

import pytest

from kafkapy.quotas.rate import Rate


@pytest.mark.parametrize("samples", [1, 2, 11])
def test_record_checked_matches_a_full_measurement(samples: int) -> None:
    rng = random.Random(samples)
    bound = 12.0  # about the mean rate of the mix below: some checks pass, some fail
    fast, full = Rate(samples, 1.0, bound), Rate(samples, 1.0, bound)
    now, violations = 0.0, 0
    for _ in range(20000):
        now += rng.expovariate(rng.choice([5.0, 25.0, 200.0]))  # below, near and far above the bound
        throttle = fast.record_checked(1.0, now)
        full.record(1.0, now)
        assert throttle == full.throttle_time(now)
        violations += throttle > 0
        if throttle > 0 and rng.random() < 0.5:  # the per-IP path un-records a refused attempt
            fast.record(-1.0, now)
            full.record(-1.0, now)
    assert 0 < violations < 20000  # both branches were exercised
    assert fast.measure(now) == pytest.approx(full.measure(now))


def test_throttle_time_is_kafkas_formula() -> None:
    rate = Rate(2, 1.0, 10.0)
    for i in range(30):  # 30 events in the first 0.29 s
        throttle = rate.record_checked(1.0, i * 0.01)
    # A young sensor's elapsed time is padded by one window: 1.29 s, so 30 / 1.29 s; the throttle
    # time (rate - bound) / bound * window is then (30 - 12.9) / 10 s.
    assert throttle == pytest.approx(1.71)
