"""examples/control_endpoint.py runs and says what it should."""

from __future__ import annotations

import json

from example_in_process import run_example


def test_the_control_endpoint_example() -> None:
    assert json.loads(run_example("control_endpoint.py")) == {
        "seeded": {"seeded": ["orders"], "records": 1}, "fault_fired": 1,
        "deliveries": ["POLICY_VIOLATION", "delivered"], "stored": ["a", "b"]}
