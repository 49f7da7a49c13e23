"""The README's Python snippets run as printed: a reader copies them first."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kafkapy.protocol.api_keys import ApiKey

README = Path(__file__).resolve().parents[1] / "README.md"
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks() -> list[str]:
    return _PYTHON_BLOCK.findall(README.read_text())


def test_every_python_snippet_runs() -> None:
    blocks = _blocks()
    assert len(blocks) >= 3
    for number, source in enumerate(blocks):
        namespace: dict[str, Any] = {"__name__": f"readme_block_{number}"}
        exec(compile(source, f"README.md python block {number}", "exec"), namespace)


def test_the_codec_snippet_decodes_what_it_encoded() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(_blocks()[0], "README.md python block 0", "exec"), namespace)
    request = namespace["request"]
    assert (request.api_key, request.body.topics) == (ApiKey.METADATA, None)
    assert (request.api_version, request.correlation_id, request.client_id) == (12, 1, "my-client")


def _table_rows(heading: str) -> str:
    """The README's table under ``## heading``, as text."""
    section = README.read_text().split(f"## {heading}\n", 1)[1]
    return section.split("\n## ", 1)[0]


def test_the_docs_table_lists_every_page() -> None:
    listed = set(re.findall(r"\[docs/([\w-]+\.md)\]", _table_rows("Docs, one page per capability")))
    pages = {page.name for page in (README.parent / "docs").glob("*.md")}
    assert pages - listed == set()


def test_the_layout_table_names_every_package() -> None:
    layout = _table_rows("Layout")
    package = README.parent / "kafkapy"
    names = {f"kafkapy/{d.name}/" for d in package.iterdir() if (d / "__init__.py").exists()}
    names |= {f"kafkapy/{f.name}" for f in package.glob("*.py") if not f.name.startswith("__")}
    assert {name for name in names if f"`{name}`" not in layout} == set()
