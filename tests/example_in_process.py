"""``python examples/NAME.py`` run in this process, for the toolkit's example tests (tests/ is on
sys.path through its conftest).

A subprocess costs about half a second of interpreter start and imports, which is most of what a
short example takes. The script runs as ``__main__`` all the same; tests/test_examples.py keeps
running examples as real processes, so that kind is still proven.
"""

from __future__ import annotations

import contextlib
import io
import runpy
from pathlib import Path

__all__ = ["EXAMPLES", "run_example"]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str) -> str:
    """What ``examples/NAME`` printed to stdout; an exception it raises fails the test as it is."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return out.getvalue()
