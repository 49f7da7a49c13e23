"""`python -m benchmarks reset --quick` runs and reports a number per row (no speed asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_reports_every_row() -> None:
    result = subprocess.run([sys.executable, "-m", "benchmarks", "reset", "--quick"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = [re.split(r"\s{2,}", line.strip()) for line in result.stdout.splitlines()
            if line[:2] in ("1 ", "3 ")]
    assert [(row[0], row[1].split()[0]) for row in rows] == [("1", "await"), ("1", "reset()"),
                                                             ("3", "await"), ("3", "reset()")], result.stdout
    for row in rows:
        assert all(re.fullmatch(r"\d+\.\d{3}", cell) for cell in row[2:]), row
