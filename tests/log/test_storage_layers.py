"""kafkapy.log sits at the store layer: it imports errors, protocol, store, attrs and the stdlib only."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kafkapy" / "log"
ALLOWED = ("kafkapy.errors", "kafkapy.protocol", "kafkapy.store", "kafkapy.log")
THIRD_PARTY = {"attrs"}


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_every_module_imports_only_lower_layers() -> None:
    stdlib = sys.stdlib_module_names
    for path in sorted(PACKAGE.glob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "kafkapy":
                assert name.startswith(ALLOWED), f"{path.name} imports {name}"
            else:
                assert top in stdlib or top in THIRD_PARTY or top == "__future__", (
                    f"{path.name} imports {name}"
                )


def test_importing_the_package_loads_no_server_or_module_package() -> None:
    code = (
        "import sys, kafkapy.log, kafkapy.log.manager;"
        "print(sorted(m for m in sys.modules if m.startswith('kafkapy.') and not m.startswith("
        f"{ALLOWED!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=PACKAGE.parents[1]
    )
    assert out.stdout.strip() == "[]"
