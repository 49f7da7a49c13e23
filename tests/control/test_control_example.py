"""examples/control_endpoint.py runs and says what it should."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "control_endpoint.py"


def test_the_control_endpoint_example() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(EXAMPLE.parent.parent), os.environ.get("PYTHONPATH", "")) if p)}
    result = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120,
                            env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"seeded": {"seeded": ["orders"], "records": 1}, "fault_fired": 1,
                                         "deliveries": ["POLICY_VIOLATION", "delivered"],
                                         "stored": ["a", "b"]}
