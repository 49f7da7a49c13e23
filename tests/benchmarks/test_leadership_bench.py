"""`python -m benchmarks leadership --quick` runs and reports a time per checkpoint and a rate per
segment for 1 and 3 brokers (no speed asserted: the docs carry the numbers)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_reports_every_row() -> None:
    result = subprocess.run([sys.executable, "-m", "benchmarks", "leadership", "--quick"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = [re.split(r"\s{2,}", line.strip()) for line in result.stdout.splitlines()
            if re.match(r"[13] ", line)]
    assert [row[0] for row in rows] == ["1", "3"], result.stdout
    for row in rows:
        assert [bool(re.fullmatch(r"\d+\.\d{2} s", cell)) for cell in row[1:]] == [True] * 2 + [False] * 2
        assert all(re.fullmatch(r"\d+\.\d{2}", cell) for cell in row[3:]), row
