"""The hand-written tables of the docs hold to the code: config tables give the code's defaults
(a default changed or a key renamed fails here until its page says so), and a package's "Files"
table names each of its modules."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kafkapy.assembly import default_module_keys
from kafkapy.server.config import CORE_KEYS, INERT_KEYS, ConfigKey

DOCS = Path(__file__).resolve().parents[1] / "docs"
# Pages whose tables are written by hand (broker.md's inert keys are generated and checked apart).
PAGES = ["broker.md", "dataplane.md", "transactions.md", "groups.md"]
_ROW = re.compile(r"^\| `([a-z][\w.-]+)`[^|]*\| ([^|]*)\|", re.MULTILINE)
# How the pages write values that are not plain numbers.
_WORDS: dict[str, Any] = {"none": None, "unset": None, "Long.MAX_VALUE": 2**63 - 1, "1 GiB": 2**30,
                          "1 day": 86_400_000}


def _keys() -> dict[str, ConfigKey]:
    return {key.name: key for key in (*CORE_KEYS, *INERT_KEYS, *default_module_keys())}


def _states(cell: str, default: Any) -> bool:
    """Whether a default cell states ``default``: its first phrase, before a note ("; ...",
    " (..."), read as the pages write values. A cell that sends the reader elsewhere ("Kafka's")
    states nothing to check."""
    text = re.split(r";| \(|, counted", cell.replace("**", "").replace("`", ""))[0].strip()
    text = text.split(" / ")[0]  # log.retention.hours / .minutes / .ms: the first is the key's
    if text.startswith("Kafka's"):
        return True
    if isinstance(default, list):
        return text == ("[]" if not default else ",".join(default))
    if isinstance(default, bool):
        return text == str(default).lower()
    if text == str(default):
        return True
    if text in _WORDS:
        return bool(_WORDS[text] == default)
    try:
        return (float(text) if "." in text else int(text)) == default
    except ValueError:
        return False


@pytest.mark.parametrize("page", PAGES)
def test_the_defaults_in_the_config_tables_are_the_codes(page: Path) -> None:
    keys = _keys()
    rows = [(name, cell) for name, cell in _ROW.findall((DOCS / page).read_text()) if name in keys]
    assert len(rows) >= 8, f"{page}: its config table was not found"
    wrong = {name: (cell.strip(), keys[name].default) for name, cell in rows
             if not _states(cell, keys[name].default)}
    assert wrong == {}, f"{page}: documented default, code's default"


@pytest.mark.parametrize(("page", "package"), [("groups.md", "groups"), ("transactions.md", "transactions")])
def test_the_files_tables_name_every_module(page: str, package: str) -> None:
    section = (DOCS / page).read_text().split("## Files\n", 1)[1].split("\n## ", 1)[0]
    modules = {path.name for path in (DOCS.parent / "kafkapy" / package).glob("*.py")} - {"__init__.py"}
    assert {name for name in modules if f"`{name}`" not in section} == set()
