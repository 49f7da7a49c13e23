"""What a checkout and its wheel hold: protocol_specs/ inside the package (installs need no
checkout), and no link that points out of the tree."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_ships_protocol_specs(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(ROOT)]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    wheel = next(tmp_path.glob("kafkapy-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"kafkapy/protocol_specs/{p.relative_to(ROOT / 'protocol_specs').as_posix()}"
                for p in (ROOT / "protocol_specs").rglob("*.json")}  # subfolders too (transaction/)
    assert expected and expected <= names
    assert "kafkapy/protocol/codec.py" in names
    assert "kafkapy/control/openapi.json" in names  # GET /openapi.json serves it from the package


def test_every_tracked_symlink_stays_inside_the_repository() -> None:
    """A link to a path outside (a worktree's ``.venv`` pointing at another checkout's) breaks
    every fresh clone: committed once, it made CI's ``make test`` fail before any test ran."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-s"], check=True, capture_output=True,
                            text=True, timeout=60).stdout.splitlines()
    links = [line.split("\t", 1)[1] for line in listed if line.startswith("120000 ")]
    for link in links:
        target = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-p", f":{link}"], check=True,
                                capture_output=True, text=True, timeout=60).stdout
        resolved = (ROOT / link).parent.joinpath(target).resolve()
        assert not Path(target).is_absolute() and resolved.is_relative_to(ROOT), f"{link} -> {target}"
