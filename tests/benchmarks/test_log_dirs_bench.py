"""`python -m benchmarks log_dirs --quick` runs and reports a number per column (no speed asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_reports_every_column() -> None:
    result = subprocess.run([sys.executable, "-m", "benchmarks", "log_dirs", "--quick"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = [re.split(r"\s{2,}", line.strip()) for line in result.stdout.splitlines()
            if line.startswith("2 MB")]
    assert len(rows) == 2 and rows[0][0] == "2 MB, 1 segment", result.stdout
    for row in rows:
        assert len(row) == 6 and all(re.fullmatch(r"\d+\.\d{3}", cell) for cell in row[1:]), row
