"""The wheel carries protocol_specs/ inside the package, so installs need no checkout."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

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
