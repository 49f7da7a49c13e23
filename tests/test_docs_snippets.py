"""The docs' snippets stay runnable: every ``kafkapy`` command line in their shell blocks parses
(a flag renamed or a subcommand dropped shows up here rather than in a reader's terminal), and
every Python block compiles (many are fragments that continue the page, so they are not run)."""

from __future__ import annotations

import argparse
import ast
import re
import shlex
from pathlib import Path

import pytest

from kafkapy.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
_SHELL_BLOCK = re.compile(r"^```(?:sh|bash|console)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _command_lines(page: Path) -> list[list[str]]:
    """The argv of each ``kafkapy`` (or ``python -m kafkapy``) command in the page's shell blocks;
    usage synopses (``[--flag ...]``) are not commands."""
    commands = []
    for block in _SHELL_BLOCK.findall(page.read_text()):
        for line in block.replace("\\\n", " ").splitlines():
            if "[--" in line or "..." in line:
                continue
            for part in re.split(r" \| | && ", line.split("  #")[0]):
                part = part.strip().removeprefix("$ ")
                if not part.startswith(("kafkapy ", "python -m kafkapy ")):
                    continue  # curl's JSON may span lines: only kafkapy's are split
                words = shlex.split(part, comments=True)
                if words[:1] == ["kafkapy"]:
                    commands.append(words[1:])
                elif words[:3] == ["python", "-m", "kafkapy"]:
                    commands.append(words[3:])
    return [argv for argv in commands if argv != ["--version"]]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_command_parses(page: Path) -> None:
    for argv in _command_lines(page):
        try:
            build_parser().parse_args(argv)
        except SystemExit as exit:
            pytest.fail(f"{page.name}: kafkapy {shlex.join(argv)} exits {exit.code} in argument parsing")


def test_the_readme_has_commands() -> None:
    assert len(_command_lines(ROOT / "README.md")) >= 20


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_python_block_compiles(page: Path) -> None:
    text = page.read_text()
    for found in _PYTHON_BLOCK.finditer(text):
        line = text[:found.start()].count("\n") + 2
        try:  # asyncio examples await at their top level, as in an asyncio test's body
            compile(found.group(1), f"{page.name}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        except SyntaxError as error:
            pytest.fail(f"{page.name}, the python block at line {line}: {error}")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_pages_reaches_its_heading() -> None:
    anchors = {page.name: {_anchor(h) for h in re.findall(r"^#+ (.*)$", page.read_text(), re.MULTILINE)}
               for page in PAGES}
    broken = []
    for page in PAGES:
        for target, anchor in re.findall(r"\]\(((?:docs/)?[\w-]+\.md)?(?:#([\w-]+))?\)", page.read_text()):
            name = Path(target).name if target else page.name
            if name not in anchors or (anchor and anchor not in anchors[name]):
                broken.append(f"{page.name} -> {target}#{anchor}")
    assert broken == []


def test_cli_md_has_a_section_per_client_command() -> None:
    """docs/cli.md describes each command that talks to a broker as a client; ``serve``,
    ``broker-metadata`` (docs/broker.md), ``demo`` and the capture decoders (docs/capture.md)
    have their pages."""
    elsewhere = {"serve", "broker-metadata", "demo", "decode", "spark-decode"}
    subcommands = next(action.choices for action in build_parser()._actions
                       if isinstance(action, argparse._SubParsersAction))
    headings = set(re.findall(r"^## ([\w-]+) ", (ROOT / "docs" / "cli.md").read_text(), re.MULTILINE))
    assert set(subcommands) - elsewhere - headings == set()
