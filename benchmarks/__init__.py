"""kafkapy's benchmarks: ``python -m benchmarks [name ...] [--write-docs]``.

Not tests: nothing here asserts a speed. Each benchmark module in this package
(any ``benchmarks/<name>.py`` not starting with ``_``) defines::

    TITLE: str                                  # docs/performance.md section heading
    def run(options: Options) -> Report: ...

and is found by :func:`available`. ``__main__`` runs every module, or those
named on the command line, prints each report's text, and with
``--write-docs`` rewrites that module's section of docs/performance.md
between ``<!-- bench:<name>:start -->`` and ``<!-- bench:<name>:end -->``.

The helpers below are shared by the modules: :func:`measure` times a group of
callables interleaved (the machine this runs on has two noisy cores, so every
competitor gets hit by the same noise), and :func:`update_docs_section`
maintains the markdown file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import importlib
import os
import pkgutil
import platform
import re
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType

__all__ = [
    "DOCS_FILE",
    "Options",
    "Report",
    "Timing",
    "available",
    "load",
    "machine_note",
    "measure",
    "render_table",
    "revision",
    "update_docs_section",
]

ROOT = Path(__file__).resolve().parent.parent
DOCS_FILE = ROOT / "docs" / "performance.md"


@dataclasses.dataclass(frozen=True)
class Options:
    repeats: int = 7  # timed blocks per callable; the median is reported, and the min
    block_seconds: float = 0.2  # each timed block is sized to take about this long
    quick: bool = False  # smoke-test mode: tiny blocks, for checking a module still runs


@dataclasses.dataclass
class Report:
    text: str  # plain text for stdout
    markdown: str  # body of the docs section (between the markers)


@dataclasses.dataclass(frozen=True)
class Timing:
    """Seconds per call over the repeats, each a block of ``n`` calls.

    ``median`` and ``best`` are wall-clock (``time.perf_counter``). ``cpu`` is the
    median of the same blocks in process CPU time (``time.process_time``), which
    leaves out the time this process sat descheduled while others used the cores;
    on a shared two-core machine it is the steadier basis for a ratio.
    """

    median: float
    best: float
    cpu: float
    n: int

    @property
    def rate(self) -> float:
        return 1.0 / self.median


class LoopGaps:
    """The largest gap between runs of a callback asked of an event loop every millisecond: how long
    the loop was held by something else (a swap, an fsync, a cleaning) while it ran."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.largest = 0.0
        self._last = time.perf_counter()
        self._handle: asyncio.TimerHandle | None = None

    def _tick(self) -> None:
        now = time.perf_counter()
        self.largest = max(self.largest, now - self._last)
        self._last = now
        self._handle = self.loop.call_later(0.001, self._tick)

    def start(self) -> None:
        self._last = time.perf_counter()
        self.loop.call_soon_threadsafe(self._tick)

    def stop(self) -> float:
        if self._handle is not None:
            self.loop.call_soon_threadsafe(self._handle.cancel)
        return self.largest


def available() -> list[str]:
    """Every benchmark module in this package, by name, in alphabetical order."""
    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])
                  if not m.name.startswith("_"))


def load(name: str) -> ModuleType:
    if name not in available():
        raise SystemExit(f"no benchmark {name!r}; available: {', '.join(available())}")
    return importlib.import_module(f"benchmarks.{name}")


def _calibrate(fn: Callable[[], object], block_seconds: float) -> int:
    """Calls per block so one block takes about ``block_seconds`` (doubles as warm-up)."""
    fn()
    fn()
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min(0.05, block_seconds / 4) or n >= 1 << 24:
            return max(1, round(n * block_seconds / max(elapsed, 1e-9)))
        n *= 2 if elapsed * 10 > block_seconds / 4 else 8


def _block(fn: Callable[[], object], n: int) -> tuple[float, float]:
    gc.collect()  # start every block from the same heap state; GC stays on, as in real use
    loop = range(n)
    cpu = time.process_time()
    start = time.perf_counter()
    for _ in loop:
        fn()
    wall = time.perf_counter() - start
    return wall / n, (time.process_time() - cpu) / n


def measure(fns: Mapping[str, Callable[[], object]], options: Options) -> dict[str, Timing]:
    """Time each callable in ``options.repeats`` blocks, interleaving the callables.

    Blocks are sized per callable (about ``options.block_seconds`` each) and run
    round-robin, rotating who goes first, so a burst of noise from the other
    core hits every competitor rather than whichever happened to be running.
    """
    block = 0.01 if options.quick else options.block_seconds
    repeats = 1 if options.quick else options.repeats
    sizes = {name: _calibrate(fn, block) for name, fn in fns.items()}
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeats):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            samples[name].append(_block(fns[name], sizes[name]))
    timings = {}
    for name, s in samples.items():
        wall = [w for w, _ in s]
        timings[name] = Timing(statistics.median(wall), min(wall), statistics.median(c for _, c in s),
                               sizes[name])
    return timings


def render_table(headers: list[str], rows: list[list[str]], markdown: bool = False) -> str:
    """A plain-text table (first column left-aligned, the rest right-aligned), or markdown."""
    if markdown:
        lines = ["| " + " | ".join(headers) + " |",
                 "|" + "|".join(":---" if i == 0 else "---:" for i in range(len(headers))) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def revision() -> str:
    """The checkout's commit (and whether it has local changes), for the record."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                             text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unknown revision"
    return out.stdout.strip() or "unknown revision"


def machine_note() -> str:
    cpus = os.cpu_count()
    return (f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
            f"{cpus} core{'s' if cpus != 1 else ''} (shared, noisy)")


def update_docs_section(name: str, title: str, body: str, path: Path = DOCS_FILE) -> None:
    """Replace the text between this benchmark's markers, creating the file or section if needed."""
    start, end = f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"
    block = f"{start}\n{body.strip()}\n{end}"
    text = path.read_text() if path.exists() else (
        "# Performance\n\n"
        "Numbers below are written by `python -m benchmarks --write-docs` "
        "(`make bench` runs the benchmarks without touching this file). "
        "Text between the `bench:` markers is regenerated; edit around it.\n")
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text, count=1)
    else:
        text = text.rstrip("\n") + f"\n\n## {title}\n\n{block}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text.endswith("\n") else text + "\n")
