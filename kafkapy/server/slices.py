"""Long work on the event loop, done in slices that let everything else run between them.

Between two slices the loop serves whatever is ready (other connections' requests, timers), and
the process's other Python threads get the GIL. The second needs more than ``asyncio.sleep(0)``:
the embedded broker's loop shares its process with the test that drives it, and CPython asks a
GIL holder to let go only after a waiting thread has seen no switch for a whole switch interval
(5 ms). A loop that selects with no timeout between slices of a few milliseconds releases the GIL
and takes it straight back, a switch each time, so the waiting thread's interval restarts and it
can wait out the whole walk (seen: a test's 0.1 s sleep returned after 1.1 s of a 2.7 s record
walk). A real sleep of ``GIL_PAUSE_S`` lets the waiting thread wake and take the GIL; ``asyncio.sleep``
with that delay would not do, as the epoll selector rounds its timeout up to a millisecond.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from typing import Final, TypeVar, cast

__all__ = ["GIL_PAUSE_S", "between_slices", "in_slices"]

_T = TypeVar("_T")

GIL_PAUSE_S: Final = 50e-6
"""How long the loop lets go of the GIL between two slices: long enough for a waiting thread to
be woken (tens of microseconds), short against a slice (milliseconds)."""


async def between_slices() -> None:
    """Let the loop run what is ready, then let other threads take the GIL."""
    await asyncio.sleep(0)
    time.sleep(GIL_PAUSE_S)


async def in_slices(steps: Generator[None, None, _T]) -> _T:
    """Run ``steps`` (a generator that yields between two slices of its work) to its end, with
    :func:`between_slices` at each yield; returns what it returns."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return cast(_T, done.value)
        await between_slices()

