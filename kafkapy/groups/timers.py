"""Keyed timers for the coordinator: one place that reads the clock and schedules.

The coordinator names each timer (a member's session, a group's join or sync deadline); setting a
name again replaces its timer, so "heartbeat received" is one call. Time is read only through the
clock handed in, and the callbacks are scheduled only through ``call_later`` (the loop's, in the
broker), so a virtual clock (issue 18) or a test's manual one drives every deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Protocol

__all__ = ["Cancellable", "ManualScheduler", "Timers"]


class Cancellable(Protocol):
    def cancel(self) -> None: ...


CallLater = Callable[[float, Callable[[], None]], Cancellable]


class Timers:
    def __init__(self, clock: Callable[[], float], call_later: CallLater,
                 wall_clock: Callable[[], float] | None = None) -> None:
        self.clock = clock  # seconds, monotonic
        self._call_later = call_later
        self._pending: dict[Hashable, Cancellable] = {}
        # Wall time as the clock moves it: the timestamps written to records (commit times, when a
        # group entered its state) must be epoch milliseconds, as Kafka writes and reads them, and
        # outlive a restart; deriving them from the clock keeps a virtual clock in charge of both.
        # The broker hands its own (services.wall_clock), so every module writes the same time.
        self._wall_offset = time.time() - clock()
        self._wall_clock = wall_clock

    def now_ms(self) -> int:
        """For deadlines: the clock's (monotonic) milliseconds."""
        return int(self.clock() * 1000)

    def wall_ms(self) -> int:
        """For timestamps that are written down: epoch milliseconds."""
        if self._wall_clock is not None:
            return int(self._wall_clock() * 1000)
        return int((self.clock() + self._wall_offset) * 1000)

    def set(self, key: Hashable, delay_ms: int, callback: Callable[[], None]) -> None:
        """Run ``callback`` in ``delay_ms``, replacing any timer of the same name."""
        self.cancel(key)

        def fire() -> None:
            if self._pending.get(key) is handle:
                del self._pending[key]
                callback()

        handle = self._call_later(max(delay_ms, 0) / 1000, fire)
        self._pending[key] = handle

    def cancel(self, key: Hashable) -> None:
        handle = self._pending.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_set(self, key: Hashable) -> bool:
        return key in self._pending

    def cancel_all(self) -> None:
        for handle in self._pending.values():
            handle.cancel()
        self._pending.clear()


class _Entry:
    def __init__(self, due: float, seq: int, callback: Callable[[], None]) -> None:
        self.due, self.seq, self.callback, self.cancelled = due, seq, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """A clock that moves only when told, and the timers on it: for tests and models."""

    def __init__(self) -> None:
        self.now = 0.0
        self._entries: list[_Entry] = []
        self._seq = 0

    def clock(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Cancellable:
        self._seq += 1
        entry = _Entry(self.now + delay, self._seq, callback)
        self._entries.append(entry)
        return entry

    def advance(self, seconds: float) -> None:
        """Move the clock on, running every timer that falls due, in due order."""
        target = round(self.now + seconds, 6)  # whole microseconds: steps of 0.1 s add up exactly
        while True:
            live = [e for e in self._entries if not e.cancelled and e.due <= target]
            if not live:
                break
            entry = min(live, key=lambda e: (e.due, e.seq))
            self._entries.remove(entry)
            self.now = max(self.now, entry.due)
            entry.callback()
        self._entries = [e for e in self._entries if not e.cancelled]
        self.now = target
