"""examples/virtual_clock.py runs and says what it should."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "virtual_clock.py"


def test_virtual_clock_example_aborts_the_abandoned_transaction() -> None:
    pytest.importorskip("confluent_kafka")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(EXAMPLE.parents[1]), os.environ.get("PYTHONPATH", "")) if p)}
    result = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60,
                            env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"control_records_before": 0, "control_records_after": 1,
                                         "virtual_seconds": 70.0, "real_seconds_under_1": True}
