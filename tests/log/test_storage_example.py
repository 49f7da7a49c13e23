"""examples/partition_log.py runs and shows Kafka's file names and the records written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_partition_log_example(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "partition_log.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's kafkapy, not the editable install's
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["records"] == [[0, "order-0", "shipped"], [1, "order-1", "shipped"], [2, "order-2", "shipped"]]
    assert "00000000000000000000.log" in out["files"] and "leader-epoch-checkpoint" in out["files"]
    assert out["log_end_offset"] == 3
