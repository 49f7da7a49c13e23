"""`python -m benchmarks log_writes --quick` reports both variants in both tables (no speed asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_reports_both_variants() -> None:
    result = subprocess.run([sys.executable, "-m", "benchmarks", "log_writes", "--quick"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("cleaning "))
    split = (re.split(r"\s{2,}", line.strip()) for line in lines[:start])
    rows = {row[0]: row[1:] for row in split if row[0] in ("background writer", "in place (on the loop)")}
    assert len(rows) == 2, result.stdout
    for cells in rows.values():
        assert len(cells) == 6 and int(cells[0]) > 0, cells
        assert all(re.fullmatch(r"\d+\.\d{2}", cell) for cell in cells[1:]), cells
    cleanings = [re.split(r"\s{2,}", line.strip()) for line in lines[start + 2:start + 4]]
    assert [row[0] for row in cleanings] == ["cleaner thread", "in place (on the loop)"], result.stdout
    for row in cleanings:
        assert row[1] == "20,000" and all(re.fullmatch(r"\d+\.\d", cell) for cell in row[2:]), row
