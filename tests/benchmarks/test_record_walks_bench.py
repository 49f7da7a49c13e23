"""`python -m benchmarks record_walks --quick` runs its two uncompressed batches (the zstd ones, a
million records each, are left to the full run) and reports every column (no speed asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_reports_every_column() -> None:
    result = subprocess.run([sys.executable, "-m", "benchmarks", "record_walks", "--quick"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = [re.split(r"\s{2,}", line.strip()) for line in result.stdout.splitlines()
            if line.startswith("none, ~1 MB")]
    assert [row[3] for row in rows] == ["accepted", "INVALID_RECORD, 139,999 record errors"], result.stdout
    for row in rows:
        assert len(row) == 10 and all(re.fullmatch(r"[\d,.]+", cell) for cell in row[4:]), row
