"""The virtual clock's loop on its own: what advance() fires, when, in which order, from where."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkapy import VirtualClock
from kafkapy.groups.timers import Cancellable, ManualScheduler
from kafkapy.server.clock import VirtualTimeLoop, call_later_real, sleep_real, wait_real


def test_advance_fires_due_callbacks_in_due_order_at_their_time() -> None:
    clock = VirtualClock()
    fired: list[tuple[str, float]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def note(name: str) -> Callable[[], None]:
            return lambda: fired.append((name, loop.time()))

        loop.call_later(3, note("c"))
        loop.call_later(1, note("a"))
        loop.call_at(loop.time() + 2, note("b"))
        loop.call_later(10, note("late"))
        await clock.advance_async(3)
        assert fired == [("a", 1.0), ("b", 2.0), ("c", 3.0)]
        assert loop.time() == clock.time() == 3.0
        await clock.advance_async(6.5)
        assert [name for name, _ in fired] == ["a", "b", "c"]  # "late" is due at 10, not 9.5
        await clock.advance_async(0.5)
        assert fired[-1] == ("late", 10.0)

    clock.run(main())


def test_timers_due_at_one_instant_fire_in_the_order_they_were_set() -> None:
    clock = VirtualClock()
    fired: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for name in range(20):
            loop.call_at(5.0, fired.append, name)
        loop.call_later(2.5, lambda: loop.call_later(2.5, fired.append, 20))  # due at 5.0 too, set later
        for _ in range(49):  # 49 steps of 0.1 s: in floating point they add up to 4.899999999999999...
            await clock.advance_async(0.1)
        assert fired == [] and clock.time() == 4.9
        await clock.advance_async(0.1)
        assert fired == list(range(21)) and clock.time() == 5.0

    clock.run(main())


def test_nothing_fires_while_the_clock_stands_still() -> None:
    clock = VirtualClock()
    fired: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(0.001, fired.append, 1)
        await sleep_real(0.05)  # real time passes; virtual time does not
        assert fired == [] and loop.time() == 0.0

    clock.run(main())


def test_what_a_callback_sets_off_runs_before_the_clock_moves_on() -> None:
    clock = VirtualClock()
    seen: list[tuple[str, float]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def first() -> None:
            seen.append(("first", loop.time()))
            loop.call_soon(lambda: seen.append(("soon", loop.time())))
            loop.call_later(0, lambda: seen.append(("at once", loop.time())))
            loop.call_later(0.5, lambda: seen.append(("within", loop.time())))
            loop.call_later(5, lambda: seen.append(("beyond", loop.time())))

        loop.call_later(1, first)
        loop.call_later(1.2, lambda: seen.append(("next", loop.time())))
        await clock.advance_async(2)
        assert seen == [("first", 1.0), ("soon", 1.0), ("at once", 1.0), ("next", 1.2), ("within", 1.5)]

    clock.run(main())


def test_sleep_wait_for_and_timeout_follow_the_clock() -> None:
    clock = VirtualClock()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        woke: list[float] = []

        async def sleeper() -> None:
            await asyncio.sleep(30)
            woke.append(loop.time())

        async def waits_forever() -> str:
            try:
                await asyncio.wait_for(asyncio.Event().wait(), 5)
            except asyncio.TimeoutError:
                return f"timed out at {loop.time():g}"
            return "woken"

        task = loop.create_task(sleeper())
        timing_out = loop.create_task(waits_forever())
        await asyncio.sleep(0)
        await clock.advance_async(29.9)
        assert woke == [] and timing_out.done()  # the task woken by the timeout has run too
        assert timing_out.result() == "timed out at 5"
        await clock.advance_async(0.1)
        assert task.done() and woke == [30.0]

    clock.run(main())


def test_a_cancelled_handle_never_fires() -> None:
    clock = VirtualClock()
    fired: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(1, fired.append, "cancelled").cancel()
        kept = loop.call_later(2, fired.append, "kept")
        later = loop.call_later(3, fired.append, "cancelled on the way")
        loop.call_later(2.5, later.cancel)
        await clock.advance_async(10)
        assert fired == ["kept"] and not kept.cancelled()

    clock.run(main())


def test_advance_from_another_thread_returns_once_the_callbacks_ran() -> None:
    clock = VirtualClock()
    loop, thread = clock.acquire_thread()
    try:
        fired: list[tuple[str, float]] = []
        task_done = threading.Event()

        async def sleeper() -> None:
            await asyncio.sleep(4)
            fired.append(("task", loop.time()))
            task_done.set()

        def schedule() -> None:
            loop.call_later(2, lambda: fired.append(("timer", loop.time())))
            loop.create_task(sleeper())

        asyncio.run_coroutine_threadsafe(_call(schedule), loop).result()
        clock.advance(1)
        assert fired == []
        clock.advance(3)
        assert fired == [("timer", 2.0), ("task", 4.0)] and task_done.is_set()
        assert clock.time() == 4.0
    finally:
        clock.release_thread()
    assert not thread.is_alive()


def test_advances_from_several_threads_add_up() -> None:
    clock = VirtualClock()
    loop, _ = clock.acquire_thread()
    try:
        ticks: list[float] = []

        def tick() -> None:
            ticks.append(loop.time())
            loop.call_later(1, tick)

        loop.call_soon_threadsafe(lambda: loop.call_later(1, tick))
        asyncio.run_coroutine_threadsafe(_call(lambda: None), loop).result()
        threads = [threading.Thread(target=lambda: [clock.advance(1) for _ in range(25)]) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert clock.time() == 100.0
        assert ticks == [float(i) for i in range(1, 101)]  # every tick once, in order
    finally:
        clock.release_thread()


def test_advance_on_the_loop_itself_and_backwards_are_refused() -> None:
    clock = VirtualClock()

    async def main() -> None:
        with pytest.raises(RuntimeError, match="advance_async"):
            clock.advance(1)
        with pytest.raises(ValueError, match="forward only"):
            await clock.advance_async(-1)

    clock.run(main())
    with pytest.raises(ValueError, match="forward only"):
        clock.advance(float("nan"))


def test_with_no_loop_running_time_just_moves() -> None:
    clock = VirtualClock(start=100.0, wall_start=1_700_000_000.0)
    clock.advance(2.5)
    assert clock.time() == 102.5
    assert clock.wall() == 1_700_000_002.5


def test_one_clock_drives_one_running_loop() -> None:
    clock = VirtualClock()
    clock.acquire_thread()
    try:
        with pytest.raises(RuntimeError, match="one running loop"):
            clock.run(asyncio.sleep(0))
    finally:
        clock.release_thread()


def test_a_sleep_shorter_than_the_clock_resolution_runs_at_once() -> None:
    """asyncio runs a timer due within its clock's resolution at this instant; the selector used
    to wait for I/O on such a timer's (positive) distance, and the sleep never ended."""
    clock = VirtualClock()
    delays = (5e-324, 2.2e-308, 1e-12)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        sleepers = [loop.create_task(asyncio.sleep(d)) for d in delays]
        started = time.monotonic()
        # Real seconds. With the bug only this wait's own timer woke the selector, after all of it.
        done, pending = await wait_real(sleepers, 10.0)
        assert len(done) == len(delays) and not pending
        assert time.monotonic() - started < 5.0  # ran at once, not when the 10 s wait woke the loop
        assert loop.time() == 0.0  # they ran at this instant; the clock did not move

    clock.run(main())


def test_a_frozen_loop_waits_in_select_not_in_a_spin() -> None:
    """A timer a virtual millisecond away must not make the loop poll: it waits for I/O."""
    clock = VirtualClock()
    iterations = 0

    class Counting(VirtualTimeLoop):
        def _run_once(self) -> None:
            nonlocal iterations
            iterations += 1
            super()._run_once()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(0.001, lambda: None)
        before = iterations
        await sleep_real(0.2)
        assert iterations - before < 10

    loop = Counting(clock)
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_real_time_helpers_ignore_the_virtual_clock() -> None:
    clock = VirtualClock()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        never = loop.create_future()
        done, pending = await wait_real([never], 0.05)
        assert not done and pending == {never} and time.monotonic() - started >= 0.05
        called = asyncio.Event()
        call_later_real(loop, 0.01, called.set)
        await asyncio.wait_for(called.wait(), 1.0)  # virtual: this timeout never fires, the call does
        assert loop.time() == 0.0

    clock.run(main())


@settings(max_examples=60, deadline=None)
@given(delays=st.lists(st.integers(0, 50), max_size=20), steps=st.lists(st.integers(0, 20), min_size=1,
                                                                        max_size=6))
def test_advances_fire_exactly_what_falls_due_in_order(delays: list[int], steps: list[int]) -> None:
    """Any timers, any advances: after each advance, the fired ones are those due by then,
    sorted by due time, each at its due time."""
    clock = VirtualClock()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        fired: list[tuple[float, float]] = []
        for delay in delays:
            due = delay / 10
            loop.call_later(due, lambda due=due: fired.append((due, loop.time())))
        total = 0.0
        for step in steps:
            await clock.advance_async(step / 10)
            total += step / 10
            expected = sorted(d / 10 for d in delays if d / 10 <= total + 1e-9)
            assert [due for due, _ in fired] == expected
            assert all(abs(due - at) < 1e-9 for due, at in fired)

    clock.run(main())


async def _call(action: Callable[[], Any]) -> Any:
    return action()


class LoopAgainstManualScheduler(RuleBasedStateMachine):
    """The virtual loop, driven from another thread, fires exactly what the groups' ManualScheduler
    (the model of "timers on a clock that moves when told") fires, in the same order, at the same
    times, whatever is scheduled, cancelled and advanced. Times are quarters of a second: exact in
    binary, so both sides add them up alike."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = VirtualClock()
        self.loop, _ = self.clock.acquire_thread()
        self.model = ManualScheduler()
        self.fired: list[tuple[int, float]] = []
        self.expected: list[tuple[int, float]] = []
        self.handles: list[tuple[Cancellable, asyncio.TimerHandle]] = []

    @rule(quarters=st.integers(0, 40))
    def schedule(self, quarters: int) -> None:
        name, delay = len(self.handles), quarters / 4
        model_handle = self.model.call_later(delay, lambda: self.expected.append((name, self.model.now)))

        def on_loop() -> asyncio.TimerHandle:
            return self.loop.call_later(delay, lambda: self.fired.append((name, self.loop.time())))

        handle = asyncio.run_coroutine_threadsafe(_call(on_loop), self.loop).result()
        self.handles.append((model_handle, handle))
        # A timer due now fires at once on the loop (as on asyncio's own); advance(0) waits for that,
        # and is how the model fires it.
        self.clock.advance(0)
        self.model.advance(0)

    @precondition(lambda self: bool(self.handles))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        model_handle, handle = data.draw(st.sampled_from(self.handles))
        model_handle.cancel()
        self.loop.call_soon_threadsafe(handle.cancel)

    @rule(quarters=st.integers(0, 24))
    def advance(self, quarters: int) -> None:
        self.model.advance(quarters / 4)
        self.clock.advance(quarters / 4)

    @invariant()
    def same_firings(self) -> None:
        assert self.fired == self.expected
        assert self.clock.time() == self.model.now

    def teardown(self) -> None:
        self.clock.release_thread()


LoopAgainstManualScheduler.TestCase.settings = settings(max_examples=25, stateful_step_count=20,
                                                        deadline=None)
test_loop_against_manual_scheduler = LoopAgainstManualScheduler.TestCase
