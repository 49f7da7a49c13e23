"""kafkapy.server.wakeup: a long poll's sleep that a cancellation always ends."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

import kafkapy
from kafkapy.server import eager
from kafkapy.server.wakeup import Wakeup


def test_a_set_wakes_the_waiter_and_the_timeout_answers_false() -> None:
    async def main() -> tuple[bool, bool, bool]:
        wakeup = Wakeup()
        timed_out = await wakeup.wait(0.01)
        asyncio.get_running_loop().call_later(0.01, wakeup.set)
        woken = await wakeup.wait(10)
        already = await wakeup.wait(0)  # still set: answers at once
        return timed_out, woken, already

    assert asyncio.run(main()) == (False, True, True)


def test_a_cancellation_in_the_step_that_sets_it_still_cancels() -> None:
    """The case ``asyncio.wait_for(event.wait(), t)`` loses on 3.11: the waiter is woken and
    cancelled in one loop step. The task must end cancelled, not go back to waiting."""
    async def main() -> tuple[bool, int]:
        wakeup = Wakeup()

        async def long_poll() -> None:
            while await wakeup.wait(60):
                wakeup.clear()

        task = asyncio.create_task(long_poll())
        await asyncio.sleep(0)  # the task is waiting
        wakeup.set()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        return task.cancelled(), len(wakeup._waiters)

    assert asyncio.run(main()) == (True, 0)


def test_waits_in_a_coroutine_stepped_in_place_with_no_task() -> None:
    """A handler started by kafkapy.server.eager has no current task until it suspends, so the
    wait must not need one (``asyncio.timeout()`` would raise there)."""
    async def main() -> bool:
        loop = asyncio.get_running_loop()
        wakeup = Wakeup()
        started: asyncio.Future[object] = loop.create_future()

        def in_a_callback() -> None:  # as data_received steps a handler: no current task
            assert asyncio.current_task() is None
            done, rest = eager.start(wakeup.wait(10))
            assert not done
            started.set_result(rest)
            loop.call_soon(wakeup.set)

        loop.call_soon(in_a_callback)
        return bool(await (await started))  # type: ignore[misc]

    assert asyncio.run(main()) is True


def test_every_waiter_wakes() -> None:
    async def main() -> list[bool]:
        wakeup = Wakeup()
        waiters = [asyncio.create_task(wakeup.wait(10)) for _ in range(3)]
        await asyncio.sleep(0)
        wakeup.set()
        return list(await asyncio.gather(*waiters))

    assert asyncio.run(main()) == [True, True, True]


def _wait_for_on_a_wait(tree: ast.AST) -> list[int]:
    """Lines calling ``asyncio.wait_for(<something>.wait(), ...)``."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "wait_for" and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "asyncio" and node.args
            and isinstance(node.args[0], ast.Call) and isinstance(node.args[0].func, ast.Attribute)
            and node.args[0].func.attr == "wait"]


def test_kafkapy_sleeps_on_no_event_through_wait_for() -> None:
    """Each such sleep is a long poll that a cancellation may not end (see the module)."""
    package = Path(kafkapy.__file__).parent
    found = [f"{path.relative_to(package)}:{line}" for path in sorted(package.rglob("*.py"))
             for line in _wait_for_on_a_wait(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == []
    planted = ast.parse("import asyncio\nasync def f(e):\n    await asyncio.wait_for(e.wait(), 1)\n")
    assert _wait_for_on_a_wait(planted) == [3]  # the scan can fail
