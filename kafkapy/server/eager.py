"""Fast path: coroutines started in place; a task is needed only if they suspend.

This is what Python 3.12's eager tasks do, for 3.10 and 3.11 too, and without a task object
for the (common) coroutine that never suspends. The broker steps its accept gate and admission
coroutines this way (kafkapy.server.fastpaths), so a connection nothing holds back costs no
task. Until the first suspension there is no current task (``asyncio.current_task()`` is None,
and ``asyncio.timeout()`` raises), so a handler is started here only when it declares it may be
(``ApiHandler.in_place``, through ``stepped``); the others start inside the connection's worker
task. ``deferred`` is the plain path: nothing runs until awaited.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any

__all__ = ["deferred", "resume", "start", "stepped"]


def start(coro: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """Run ``coro`` up to its first suspension: ``(True, result)`` if it finished, else
    ``(False, awaitable)``, an awaitable of the result that drives the rest. Exceptions raised
    before the first suspension propagate from here."""
    try:
        step = coro.send(None)
    except StopIteration as stop:
        return True, stop.value
    return False, resume(coro, step)


def deferred(coro: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """``start``'s plain path: ``(False, coro)``, so the caller awaits it in a task."""
    return False, coro


def stepped(handle: Callable[..., Any]) -> Callable[..., Any]:
    """``handle`` as a plain function: a coroutine it returns is started in place, and what it
    answers is the result if the coroutine finished, else the awaitable that drives the rest (a
    plain handler's answer and its exceptions pass through unchanged)."""
    def step(*args: Any) -> Any:
        answer = handle(*args)
        if type(answer) is not types.CoroutineType:
            return answer
        return start(answer)[1]
    return step


@types.coroutine
def resume(coro: Coroutine[Any, Any, Any], step: Any) -> Generator[Any, Any, Any]:
    """Go on driving a coroutine that was stepped outside any task and suspended on ``step``:
    within the task that awaits this, it behaves as if it had been awaited from the start
    (results, exceptions and cancellation pass through)."""
    while True:
        try:
            sent = yield step
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # cancellation and the like go on into the coroutine
            try:
                step = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                step = coro.send(sent)
            except StopIteration as stop:
                return stop.value
