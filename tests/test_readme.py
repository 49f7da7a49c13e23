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
