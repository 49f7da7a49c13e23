"""Fast path: coroutines started in place; a task is needed only if they suspend.

This is what Python 3.12's eager tasks do, for 3.10 and 3.11 too, and without a task object
for the (common) coroutine that never suspends. The broker steps its accept gate and admission
coroutines this way (kafkapy.server.fastpaths), so a connection nothing holds back costs no
task. Until the first suspension there is no current task (``asyncio.current_task()`` is None,
and ``asyncio.timeout()`` raises, as does ``asyncio.wait_for`` on Python 3.12+, which uses it),
so a handler is started here only when it declares it may be (``ApiHandler.in_place``, through
``stepped``); the others start inside the connection's worker task. ``deferred`` is the plain
path: nothing runs until awaited.

A coroutine stepped in place that is about to start one that needs a task (the interceptor chain,
before it runs a coroutine handler; admission, before a module's on_accept; a request to another
broker, kafkapy.server.broker_channel) awaits ``into_task()`` first: outside a task that suspends it
on the ``INTO_TASK`` marker, ``start`` hands it back as an awaitable, and ``resume``, now inside
the worker task, goes straight on without yielding the marker to the loop. Inside a task (or
when a task awaits the coroutine from the start) ``into_task()`` does nothing.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Final

__all__ = ["INTO_TASK", "deferred", "into_task", "resume", "start", "stepped"]


class _IntoTask:
    """The type of INTO_TASK: "go on inside a task", never seen by the loop."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "INTO_TASK"


INTO_TASK: Final = _IntoTask()


@types.coroutine
def into_task() -> Generator[Any, Any, None]:
    """Await this before starting what must run inside a task (see the module docstring)."""
    try:
        in_task = asyncio.current_task() is not None
    except RuntimeError:  # no running loop: no task either
        in_task = False
    if not in_task:
        yield INTO_TASK


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
    (results, exceptions and cancellation pass through). The INTO_TASK marker is not passed on:
    the coroutine goes on at once, inside the task."""
    while True:
        if step is INTO_TASK:
            try:
                step = coro.send(None)
            except StopIteration as stop:
                return stop.value
            continue
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
