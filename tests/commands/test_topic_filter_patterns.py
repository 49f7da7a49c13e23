"""The tools' topic filters (``kafkapy topics --topic``, ``kafkapy get-offsets --topic``) as a user
sees them, in a process of their own with Python's default warning filters: a pattern Kafka's
tools would not run the same way is one line on stderr, exit 2, and no Python warning.

``[[`` made ``re`` print "FutureWarning: Possible nested set" (a set inside a set, which Java reads
as a union of classes and ``re`` as a literal '[') above the error; kafkapy.server.patterns'
``compile_java`` refuses nested classes and intersections and silences ``re``'s FutureWarnings.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

PATTERNS = ["[[", "[[a]]", "t[a[b]]", "[a&&b]"]  # nested classes and an intersection: Java syntax
NOWHERE = "127.0.0.1:9"  # refused before anything is sent: no broker needed


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "import sys; from kafkapy.cli import main; sys.exit(main())",
                           *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("command", ["topics", "get-offsets"])
def test_a_java_only_class_is_one_line_and_no_warning(command: str, pattern: str) -> None:
    args = ["--list", "--topic", pattern] if command == "topics" else ["--topic", pattern]
    done = cli(command, "--bootstrap-server", NOWHERE, *args)
    assert done.returncode == 2 and done.stdout == ""
    assert "Warning" not in done.stderr
    [line] = done.stderr.splitlines()
    assert f"{pattern} is an invalid regex." in line
