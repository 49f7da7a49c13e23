"""The descriptor-leak guard (tests/fd_guard.py), seen from fresh pytest runs in subprocesses: the
descriptors counted are the process's own, so a leak made on purpose must not be this run's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

TESTS = Path(__file__).parent

Run = Callable[..., pytest.RunResult]

LEAKY = """
    import socket

    kept = []

    def test_leaks_sockets_and_files(tmp_path):
        kept.extend(socket.socket() for _ in range(12))
        kept.extend(open(tmp_path / f"f{i}", "w") for i in range(3))
"""

CLEAN = """
    import gc
    import socket

    def test_closes_what_it_opens():
        with socket.socket():
            pass

    def test_an_unreferenced_cycle_is_collected():
        class Holder:
            pass
        holders = [Holder() for _ in range(12)]
        for holder in holders:
            holder.sock, holder.me = socket.socket(), holder  # closed only when gc collects it
        del holders, holder
"""


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setenv("PYTHONPATH", str(TESTS))  # where fd_guard is
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # only the guard, and quick

    def run_pytest(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess("-p", "fd_guard", "-p", "no:cacheprovider", *args)

    return run_pytest


def test_a_module_that_leaks_fails_the_run_named_with_what_grew(pytester: pytest.Pytester, run: Run) -> None:
    pytester.makepyfile(test_a_clean=CLEAN, test_leaky=LEAKY)
    result = run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=3)  # the tests themselves pass: the run fails
    result.stdout.fnmatch_lines([
        "*FD LEAK: test_leaky.py left 15 file descriptors open (fd_leak_threshold=10): "
        "12 sockets, 3 files under */test_leaks_sockets_and_files*"])
    assert "test_a_clean.py left" not in result.stdout.str()


def test_modules_that_close_what_they_open_pass(pytester: pytest.Pytester, run: Run) -> None:
    pytester.makepyfile(test_a_clean=CLEAN)
    result = run()
    assert result.ret == pytest.ExitCode.OK
    assert "FD LEAK" not in result.stdout.str()


def test_a_session_fixtures_descriptors_are_not_charged(pytester: pytest.Pytester, run: Run) -> None:
    pytester.makeconftest("""
        import socket
        import pytest

        @pytest.fixture(scope="session")
        def server():
            socks = [socket.socket() for _ in range(20)]
            yield socks
            for sock in socks:
                sock.close()
    """)
    pytester.makepyfile(test_first="def test_uses(server): assert len(server) == 20",
                        test_second="def test_uses_too(server): assert len(server) == 20")
    result = run()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


def test_the_threshold_and_report_mode(pytester: pytest.Pytester, run: Run) -> None:
    pytester.makepyfile(test_leaky=LEAKY)
    pytester.makeini("[pytest]\nfd_leak_threshold = 15\n")
    assert run().ret == pytest.ExitCode.OK  # 15 is not more than 15
    pytester.makeini("[pytest]\n")
    result = run("--fd-guard=report")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*descriptors left open per module*",
                                 "   15 test_leaky.py: 12 sockets, 3 files*"])
    assert run("--fd-guard=off").ret == pytest.ExitCode.OK
