"""Store watches meet the event loop: callbacks hop onto the loop, and waiting for a change is awaitable.

Theory of operation. A store calls watch callbacks on a thread of its own (the ZooKeeper store's
worker, or whichever thread changed a MemoryStore), and they must be quick. Broker code lives on an
event loop. So a callback does one thing: hand the news to the loop (``call_soon_threadsafe``). On
the loop, two shapes cover every use:

- ``Reloader``: the news means "read again". One reload runs at a time; news during a reload asks
  for exactly one more run after it, so a burst of changes costs at most two reads, and the last
  read always starts after the last news (the table TRANSITIONS).
- ``LoopView`` (``watching``): the news carries the state. The latest state is kept on the loop,
  and ``wait_for(predicate, timeout)`` sleeps until a change makes the predicate true. Nothing polls.

A callback that arrives after the loop has closed (a store outliving its broker) is dropped.
This module is part of the store layer: it may import asyncio, never kafkapy.server.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar

from kafkapy.store.base import Watch

__all__ = ["LoopView", "Reloader", "call_soon_on", "watching"]

log = logging.getLogger("kafkapy.store.onloop")

T = TypeVar("T")


def call_soon_on(loop: asyncio.AbstractEventLoop, callback: Callable[..., object], *args: Any) -> bool:
    """From any thread: run ``callback(*args)`` on ``loop`` soon. False (and nothing runs) once the
    loop is closed."""
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # "Event loop is closed": the broker is gone, and so is the news' reader
        return False
    return True


class _Phase(enum.Enum):
    IDLE = "idle"
    RUNNING = "running"
    OWED = "running, one more run owed"


class _Event(enum.Enum):
    REQUEST = "request"
    DONE = "done"
    FAILED = "failed"


# Reloader's state machine: (phase, event) -> (next phase, start a run now). A request while a run
# is going can only be served by a run that starts after it, so it is owed one; any number of them
# owe the same one. A failed run still pays what is owed: news it may have missed is read again.
TRANSITIONS: Mapping[tuple[_Phase, _Event], tuple[_Phase, bool]] = {
    (_Phase.IDLE, _Event.REQUEST): (_Phase.RUNNING, True),
    (_Phase.RUNNING, _Event.REQUEST): (_Phase.OWED, False),
    (_Phase.OWED, _Event.REQUEST): (_Phase.OWED, False),
    (_Phase.RUNNING, _Event.DONE): (_Phase.IDLE, False),
    (_Phase.RUNNING, _Event.FAILED): (_Phase.IDLE, False),
    (_Phase.OWED, _Event.DONE): (_Phase.RUNNING, True),
    (_Phase.OWED, _Event.FAILED): (_Phase.RUNNING, True),
}


class Reloader:
    """Runs ``reload()`` on ``loop`` after each ``request()`` (from any thread, e.g. a store watch
    callback), one run at a time: requests during a run fold into one more run after it (TRANSITIONS).
    A reload that raises is logged and the previous state kept."""

    def __init__(self, loop: asyncio.AbstractEventLoop, reload: Callable[[], Awaitable[None]],
                 what: str) -> None:
        self._loop = loop
        self._reload = reload
        self._what = what
        self._phase = _Phase.IDLE
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def request(self) -> None:
        """Thread-safe: ask for a reload."""
        call_soon_on(self._loop, self._fire, _Event.REQUEST)

    def _fire(self, event: _Event) -> None:
        if self._closed:
            return
        self._phase, run = TRANSITIONS[(self._phase, event)]
        if run:
            self._task = self._loop.create_task(self._run())

    async def _run(self) -> None:
        outcome = _Event.FAILED
        try:
            await self._reload()
            outcome = _Event.DONE
        except Exception:
            log.exception("could not reload %s (keeping the previous ones)", self._what)
        finally:  # cancelled too: the phase must leave RUNNING, or no request would run again
            self._fire(outcome)

    async def idle(self) -> None:
        """Until no reload runs or is owed (for an orderly stop, and for tests)."""
        while self._task is not None and not self._task.done():
            await asyncio.wait({self._task})

    def close(self) -> None:
        """Cancel a running reload; later requests do nothing."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()


class LoopView(Generic[T]):
    """The latest state a store watch reported, kept on ``loop``. Pass the view itself as the watch
    callback (it is thread-safe); every state it receives wakes the waiters of ``wait_for``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._state: tuple[T] | None = None  # a 1-tuple, so that a state of None is a state
        self._waiters: set[asyncio.Future[None]] = set()

    def __call__(self, state: T) -> None:
        call_soon_on(self._loop, self._update, state)

    def _update(self, state: T) -> None:
        self._state = (state,)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    @property
    def state(self) -> T:
        """The latest state; LookupError before the first one arrived."""
        if self._state is None:
            raise LookupError("the watch has reported no state yet")
        return self._state[0]

    async def wait_for(self, predicate: Callable[[T], bool], timeout: float) -> bool:
        """True as soon as the latest state satisfies ``predicate`` (at once if it does now);
        False after ``timeout`` seconds without. Made of futures and one timer, not
        ``asyncio.timeout()``, so it works in a handler that has not suspended yet."""
        loop = self._loop
        deadline = loop.time() + timeout
        while self._state is None or not predicate(self._state[0]):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.add(waiter)
            timer = loop.call_later(remaining, _settle, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiters.discard(waiter)
        return True


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


@contextlib.asynccontextmanager
async def watching(loop: asyncio.AbstractEventLoop,
                   register: Callable[[Callable[[T], None]], Watch]) -> AsyncIterator[LoopView[T]]:
    """``async with watching(loop, store.watch_topics) as topics: await topics.wait_for(...)``: a
    watch for the duration of the block (registered off the loop, since a store call may block)."""
    view: LoopView[T] = LoopView(loop)
    watch = await asyncio.to_thread(register, view)
    try:
        yield view
    finally:
        watch.cancel()
