"""A flag a waiting request sleeps on, with a timeout, that a cancellation always reaches.

Python 3.11's ``asyncio.wait_for(event.wait(), timeout)`` swallows a cancellation that arrives in
the loop step where the event is set: the inner wait has finished, so ``wait_for`` returns its
result and the cancelled task goes on waiting. A long-polling Fetch of a client that went away
(its worker cancelled as an append or a cluster change woke it) then waited its whole
``max_wait_ms`` again, and a broker stopping found it still pending. ``Wakeup.wait`` is made of
one future and one timer, no inner task, so there is nothing to swallow the cancellation; and it
needs no current task (``asyncio.timeout()`` does), so it works in a handler stepped in place
(kafkapy.server.eager).
"""

from __future__ import annotations

import asyncio

__all__ = ["Wakeup"]


class Wakeup:
    """``asyncio.Event``'s set and clear, and ``wait(timeout)`` answering whether a
    ``set`` woke it (False when the timeout passed first). ``set`` runs on the loop's thread."""

    __slots__ = ("_flag", "_waiters")

    def __init__(self) -> None:
        self._flag = False
        self._waiters: list[asyncio.Future[bool]] = []

    def set(self) -> None:
        self._flag = True
        if self._waiters:
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(True)

    def clear(self) -> None:
        self._flag = False

    async def wait(self, timeout: float | None) -> bool:
        """Until set, or ``timeout`` seconds by the loop's clock (None: no limit)."""
        if self._flag:
            return True
        if timeout is not None and timeout <= 0:
            return False
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(waiter)
        timer = None if timeout is None else loop.call_later(timeout, _time_up, waiter)
        try:
            return await waiter
        finally:
            if timer is not None:
                timer.cancel()
            self._waiters.remove(waiter)


def _time_up(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)
