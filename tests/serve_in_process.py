"""``kafkapy serve ARGS`` called in this process, for arguments refused before anything listens
(tests/ is on sys.path through its conftest).

A subprocess costs about half a second of interpreter start and imports; a refusal is the same
code path either way (``kafkapy.cli.main``), so one test per refusal family runs the real process
(proving its stderr is one line and its exit code) and the rest call ``main`` here.
"""

from __future__ import annotations

import contextlib
import io
import logging

from kafkapy.cli import main

__all__ = ["serve_in_process"]


def serve_in_process(*args: str) -> tuple[int, str]:
    """The exit code of ``kafkapy serve ARGS`` and all it wrote to stderr, its log lines
    included (serve logs to stderr: a handler here stands in for the one it would install)."""
    root = logging.getLogger()
    level = root.level
    stderr = io.StringIO()
    handler = logging.StreamHandler(stderr)
    root.addHandler(handler)
    try:
        with contextlib.redirect_stderr(stderr):
            try:
                code = main(["serve", *args])
            except SystemExit as exc:  # argparse's refusals
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    return code, stderr.getvalue()
