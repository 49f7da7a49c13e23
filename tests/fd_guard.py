"""A pytest plugin that fails a run when a test module leaves file descriptors open.

A leak shows up far from its cause: a test that left ~970 descriptors open (a generator closed
with ``.close()`` skipped its cleanup) made select()-based clients fail much later in the run with
"filedescriptor out of range in select()". This plugin counts /proc/self/fd before a module's
first test and after its last teardown (when the count grew, again after ``gc.collect()``, so what
is merely unreferenced is closed) and fails the run naming the module and the kinds of descriptors that grew.

What a session-scoped fixture opens (a ZooKeeper server, a Spark session) stays open for the run
on purpose: the descriptors that appear while such a fixture sets up are not charged to the module
that happened to ask for it first. The cost is two listings of /proc/self/fd per module (a few
dozen readlinks, well under a millisecond), and a collection only where the count grew.

``--fd-guard=fail`` (the default) fails the run, ``report`` only lists every module's growth in
the summary (how the threshold was chosen), ``off`` skips it; ``fd_leak_threshold`` in the ini
(default 10, chosen from measurement: DEFAULT_THRESHOLD) is how many descriptors a module may leave
behind.
"""

from __future__ import annotations

import gc
import os
import re
import time
from collections import Counter
from collections.abc import Generator
from pathlib import Path

import pytest

FD_DIR = "/proc/self/fd"
# Measured with --fd-guard=report over every test directory: no module left more than 6 (kafka-python
# 3.0.12 keeps a selector, its socket pair and an epoll per client whose constructor raised; a
# Spark session's gateway and matplotlib's font cache live on), against ~1000 for the leak this
# guard was made for. Well under select()'s 1024 descriptors over the ~300 modules of a run.
DEFAULT_THRESHOLD = 10
_KEY = pytest.StashKey["FdGuard"]()


def open_descriptors() -> dict[int, str]:
    """Each open descriptor and what it refers to (``socket:[..]``, a path, ``pipe:[..]``, ...)."""
    found: dict[int, str] = {}
    for name in os.listdir(FD_DIR):
        try:
            found[int(name)] = os.readlink(f"{FD_DIR}/{name}")
        except OSError:  # the listing's own descriptor, gone by now
            continue
    return found


def kind(target: str) -> str:
    """What a descriptor is, coarse enough that a leak's descriptors group into a few lines."""
    if target.startswith("socket:"):
        return "sockets"
    if target.startswith("pipe:"):
        return "pipes"
    if target.startswith("anon_inode:"):
        return target.removeprefix("anon_inode:").strip("[]") + "s"  # eventfds, eventpolls, ...
    if target.startswith("/"):
        # Numbered directories (pytest's tmp_path, a log's segments) as a glob: a leak over many
        # examples is one line, not one per directory.
        return f"files under {re.sub(r'[0-9]+', '*', str(Path(target).parent))}"
    return target


def describe(before: dict[int, str], after: dict[int, str]) -> str:
    grown = Counter(kind(t) for fd, t in after.items() if before.get(fd) != t)
    return ", ".join(f"{n} {k}" for k, n in grown.most_common(6))


class FdGuard:
    def __init__(self, mode: str, threshold: int) -> None:
        self.mode = mode
        self.threshold = threshold
        self.module: str | None = None
        self.before: dict[int, str] = {}
        self.session_owned: dict[int, str] = {}  # what session fixtures opened during this module
        self.growth: list[tuple[str, int, str]] = []  # (module, grown by, what)
        self.cost_s = 0.0  # the guard's own time: collections and listings
        self.modules = 0

    def module_starts(self, module: str) -> None:
        started = time.perf_counter()
        self.module = module
        self.before = open_descriptors()
        self.session_owned = {}
        self.modules += 1
        self.cost_s += time.perf_counter() - started

    def module_ends(self) -> None:
        started = time.perf_counter()
        after = open_descriptors()
        grown = self._grown(after)
        if grown > 0:
            # Collected first: what is merely unreferenced closes then. A full collection costs up to
            # 0.2 s after a Hypothesis module, so only when something grew.
            gc.collect()
            after = open_descriptors()
            grown = self._grown(after)
        owned = {fd for fd, t in self.session_owned.items() if after.get(fd) == t}
        if self.module is not None and grown > 0:
            unowned = {fd: t for fd, t in after.items() if fd not in owned}
            self.growth.append((self.module, grown, describe(self.before, unowned)))
        self.cost_s += time.perf_counter() - started

    def _grown(self, after: dict[int, str]) -> int:
        owned = sum(1 for fd, t in self.session_owned.items() if after.get(fd) == t)
        return len(after) - owned - len(self.before)

    def leaks(self) -> list[tuple[str, int, str]]:
        return [g for g in self.growth if g[1] > self.threshold]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fd-guard", "descriptor leaks per test module (tests/fd_guard.py)")
    group.addoption("--fd-guard", choices=["fail", "report", "off"], default=None,
                    help="fail the run when a module leaves descriptors open (default), only report, or off")
    parser.addini("fd_leak_threshold", f"descriptors a module may leave open (default {DEFAULT_THRESHOLD})",
                  default=str(DEFAULT_THRESHOLD))


def pytest_configure(config: pytest.Config) -> None:
    mode = config.getoption("--fd-guard") or "fail"
    if mode == "off" or not os.path.isdir(FD_DIR):
        return
    config.stash[_KEY] = FdGuard(mode, int(config.getini("fd_leak_threshold")))


def _guard(config: pytest.Config) -> FdGuard | None:
    return config.stash.get(_KEY, None)


def _module_of(item: pytest.Item | None) -> str | None:
    return None if item is None else item.nodeid.split("::", 1)[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[object],
                         request: pytest.FixtureRequest) -> Generator[None, None, None]:
    guard = _guard(request.config)
    if guard is None or fixturedef.scope != "session":
        yield
        return
    before = open_descriptors()
    yield
    guard.session_owned.update((fd, t) for fd, t in open_descriptors().items() if before.get(fd) != t)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    guard = _guard(item.config)
    if guard is None:
        yield
        return
    module = _module_of(item)
    if guard.module != module:
        guard.module_starts(module)  # type: ignore[arg-type]
    yield
    # The teardown of a module's last test tears down its module-scoped fixtures too.
    if _module_of(nextitem) != module:
        guard.module_ends()
        guard.module = None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A leak fails the run, which goes on to its end so that every leaking module is named."""
    guard = _guard(session.config)
    if guard is not None and guard.mode == "fail" and guard.leaks() and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    guard = _guard(config)
    if guard is None:
        return
    if guard.mode == "report":
        terminalreporter.section("descriptors left open per module (fd_guard)")
        for module, grown, what in sorted(guard.growth, key=lambda g: -g[1]):
            terminalreporter.write_line(f"{grown:5d} {module}: {what}")
        if not guard.growth:
            terminalreporter.write_line("none")
        terminalreporter.write_line(f"(the guard's own time: {guard.cost_s:.3f} s over {guard.modules} "
                                    "modules)")
    elif guard.leaks():
        terminalreporter.section("file descriptor leaks (fd_guard)", red=True)
        for module, grown, what in guard.leaks():
            terminalreporter.write_line(
                f"FD LEAK: {module} left {grown} file descriptors open (fd_leak_threshold="
                f"{guard.threshold}): {what}", red=True)
