"""examples/consumer_group_rebalance.py runs and shows revoke-then-assign settling the group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_rebalance_example_settles_three_then_two_members() -> None:
    paths = (str(ROOT), os.environ.get("PYTHONPATH", ""))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "consumer_group_rebalance.py")],
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    steps = [json.loads(line) for line in result.stdout.splitlines()]
    first, settled, after_leave = steps[0], steps[2], steps[-1]
    assert first["state"] == "Reconciling" and first["members"]["b"]["owned"] == []
    assert settled["state"] == "Stable"
    assert sorted(p for m in settled["members"].values() for p in m["owned"]) == list(range(6))
    assert [len(m["owned"]) for m in settled["members"].values()] == [2, 2, 2]
    assert after_leave["state"] == "Stable" and set(after_leave["members"]) == {"a", "b"}
    assert sorted(p for m in after_leave["members"].values() for p in m["owned"]) == list(range(6))
