"""dumpcap on the loopback interface around a block of client traffic, for the tests that hold
kafkapy's decoder to tshark on a live capture."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

DUMPCAP = shutil.which("dumpcap")
TSHARK = shutil.which("tshark")


def skip_live(reason: str) -> None:
    """Skip, saying so on stderr too: a live capture test that never runs should be noticed."""
    print(f"\nSKIPPING live capture tests: {reason}", file=sys.stderr)
    pytest.skip(reason)


def _wait_live(path: Path, proc: subprocess.Popen[bytes]) -> None:
    """dumpcap writes the pcapng section header once the capture is running."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            skip_live(f"dumpcap exited: {err.strip()}")
        if path.exists() and path.stat().st_size > 0:
            time.sleep(0.5)  # the kernel filter is attached before the header is written; margin
            return
        time.sleep(0.05)
    proc.kill()
    skip_live("dumpcap did not start capturing within 15 s")


@contextlib.contextmanager
def capturing(path: Path, port: int) -> Iterator[None]:
    """The block's traffic to and from ``port`` captured into ``path``; skips when dumpcap or
    tshark is missing, cannot capture, or wrote no packets."""
    if DUMPCAP is None or TSHARK is None:
        skip_live("dumpcap and tshark are needed (apt-get install tshark)")
    assert DUMPCAP is not None
    proc = subprocess.Popen(
        [DUMPCAP, "-q", "-i", "lo", "-f", f"tcp port {port}", "-w", str(path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait_live(path, proc)
        yield
        time.sleep(1.0)  # let the last packets reach the capture
    finally:
        proc.terminate()
        proc.communicate(timeout=15)  # and closes its stderr pipe
    if not path.exists() or path.stat().st_size < 100:
        skip_live("dumpcap wrote no packets")
