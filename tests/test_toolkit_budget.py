"""tests/toolkit_budget.py (``make test-toolkit``) names test paths that exist, and the Makefile runs it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_toolkit_set_names_existing_tests_and_make_runs_it() -> None:
    spec = importlib.util.spec_from_file_location("toolkit_budget", ROOT / "tests" / "toolkit_budget.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.BUDGET_S == 30.0
    assert all((ROOT / path).exists() for path in module.TOOLKIT_TESTS), module.TOOLKIT_TESTS
    assert "tests/toolkit_budget.py" in (ROOT / "Makefile").read_text()
