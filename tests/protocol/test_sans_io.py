"""kafkapy/protocol stays sans-I/O: no sockets, asyncio, kazoo or pyspark, directly or not."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import kafkapy.protocol

FORBIDDEN = {"socket", "asyncio", "kazoo", "pyspark", "selectors", "ssl"}
PACKAGE = Path(kafkapy.protocol.__file__).parent


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_module_imports_io_packages() -> None:
    offenders = {p.name: _imported_roots(p) & FORBIDDEN for p in PACKAGE.rglob("*.py")}
    assert not {k: v for k, v in offenders.items() if v}


def test_decoding_pulls_in_no_io_module_at_run_time() -> None:
    """Also catches indirect imports, e.g. executing kafka-python's package to find its specs."""
    code = (
        "import sys\n"
        "from kafkapy.protocol import decode_request, encode_request\n"
        "decode_request(encode_request(3, 12, 1, 'c', {'topics': []}))\n"
        "decode_request(encode_request(0, 9, 1, 'c', {'topic_data': []}))\n"
        "from kafkapy.protocol.records import Records, build_record_batch\n"
        "batch = build_record_batch([(b'k', b'v', [], None)], compression='zstd')\n"
        "assert [r.value for r in Records(batch).records()] == [b'v']\n"
        f"print(sorted(m for m in {sorted(FORBIDDEN)!r} if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
