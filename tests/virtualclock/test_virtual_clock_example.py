"""examples/virtual_clock.py runs and says what it should."""

from __future__ import annotations

import json

import pytest
from example_in_process import run_example


def test_virtual_clock_example_aborts_the_abandoned_transaction() -> None:
    pytest.importorskip("confluent_kafka")
    assert json.loads(run_example("virtual_clock.py")) == {
        "control_records_before": 0, "control_records_after": 1, "virtual_seconds": 70.0,
        "real_seconds_under_1": True}


def test_autojump_example_runs_aiokafka_on_the_clocks_loop() -> None:
    pytest.importorskip("aiokafka")
    assert json.loads(run_example("virtual_clock_autojump.py")) == {
        "read": "o-1", "clock_moved": True, "real_seconds_under_10": True}
