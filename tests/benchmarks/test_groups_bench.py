"""`python -m benchmarks groups --quick` measures both kafkapy and the mock: numbers, never a
crash or a made-up number."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NUMBER = re.compile(r"^\d+$")


def test_quick_run_reports_both_brokers() -> None:
    result = subprocess.run([sys.executable, "-m", "benchmarks", "groups", "--quick"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = [re.split(r"\s{2,}", line.strip()) for line in result.stdout.splitlines()
            if line.startswith("N = ")]
    assert [row[0] for row in rows] == ["N = 1", "N = 10"], result.stdout
    for row in rows:
        assert NUMBER.match(row[1]) and NUMBER.match(row[2]), row
        assert row[3].endswith("x")
    assert "error:" not in result.stdout
