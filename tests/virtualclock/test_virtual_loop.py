"""The virtual clock's loop on its own: what advance() fires, when, in which order, from where."""

from __future__ import annotations

import asyncio
import socket
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
        assert 0 < loop.time() < 1e-9  # they ran at once: the clock moved the few ns to the first

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


# -- autojump: the clock moves by itself when the loop is idle -----------------------------------

def test_an_idle_loop_jumps_to_its_next_timer_with_autojump_on() -> None:
    clock = VirtualClock(autojump_threshold=0.01)
    fired: list[tuple[str, float]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(30, lambda: fired.append(("b", loop.time())))
        loop.call_later(5, lambda: fired.append(("a", loop.time())))
        started = time.monotonic()
        await asyncio.sleep(3600)  # an hour of virtual time, in three jumps
        assert fired == [("a", 5.0), ("b", 30.0)] and loop.time() == 3600.0
        assert time.monotonic() - started < 5

    clock.run(main())


def test_without_autojump_the_loop_waits_for_an_advance() -> None:
    clock = VirtualClock()
    assert clock.autojump_threshold is None

    async def main() -> None:
        sleeper = asyncio.ensure_future(asyncio.sleep(1))
        done, _ = await wait_real([sleeper], 0.2)
        assert not done and clock.time() == 0.0
        sleeper.cancel()

    clock.run(main())


def test_a_loop_waiting_for_a_thread_does_not_jump() -> None:
    """A job handed to a thread (asyncio.to_thread, getaddrinfo) is work in progress: a timeout
    set around it must not fire because the loop itself had nothing to do meanwhile."""
    clock = VirtualClock(autojump_threshold=0.0)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        timed_out = asyncio.Event()
        loop.call_later(1, timed_out.set)
        await asyncio.to_thread(time.sleep, 0.2)
        assert not timed_out.is_set() and loop.time() == 0.0
        await timed_out.wait()  # and once it returned, the loop is idle again: the clock jumps
        assert loop.time() == 1.0

    clock.run(main())


def test_a_peer_that_keeps_talking_holds_the_jump_off() -> None:
    """Socket traffic restarts the idle count: the clock does not jump while a peer in another
    thread sends more often than the threshold, and jumps once it goes quiet. The
    threshold is 30 times the peer's pauses, so a loaded machine stalling it does not jump."""
    clock = VirtualClock(autojump_threshold=0.3)

    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def drain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while await reader.read(100):
                pass
            writer.close()

        server = await asyncio.start_server(drain, "127.0.0.1", 0)
        address = server.sockets[0].getsockname()[:2]
        quiet = threading.Event()

        def talk() -> None:  # a blocking client, as kafka-python's or librdkafka's threads are
            with socket.create_connection(address) as peer:
                while not quiet.is_set():
                    peer.sendall(b"x")
                    time.sleep(0.01)

        talking = threading.Thread(target=talk)
        talking.start()
        jumped = loop.create_task(asyncio.sleep(5))
        try:
            done, _ = await wait_real([jumped], 0.5)  # 0.5 real seconds of talk, 10 ms apart
            assert not done and loop.time() == 0.0
        finally:
            quiet.set()
            talking.join()
        done, _ = await wait_real([jumped], 5)
        assert done and loop.time() == 5.0
        server.close()
        await server.wait_closed()

    clock.run(main())


def test_real_time_polls_and_wake_ups_do_not_hold_the_jump_off() -> None:
    """A poll on real time (broker.wait_for's sleep_real) or from another thread (wait_until
    through call_soon_threadsafe) observes; it is not the system at work, so the clock jumps
    while it polls more often than the threshold."""
    clock = VirtualClock(autojump_threshold=0.1)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        polling = threading.Event()

        def poll_from_a_thread() -> None:
            while not polling.is_set():
                loop.call_soon_threadsafe(lambda: None)
                time.sleep(0.01)

        poller = threading.Thread(target=poll_from_a_thread)
        poller.start()
        timer_fired = asyncio.Event()
        loop.call_later(60, timer_fired.set)
        started = time.monotonic()
        try:
            while not timer_fired.is_set():
                await sleep_real(0.01)
                assert time.monotonic() - started < 5
        finally:
            polling.set()
            poller.join()
        assert loop.time() == 60.0

    clock.run(main())


def test_autojump_can_be_turned_on_and_off_while_the_loop_waits() -> None:
    clock = VirtualClock()
    loop, _ = clock.acquire_thread()
    try:
        fired = threading.Event()
        loop.call_soon_threadsafe(lambda: loop.call_later(10, fired.set))
        assert not fired.wait(0.2) and clock.time() == 0.0  # off: the loop waits in select for good
        clock.autojump_threshold = 0.01  # wakes it to take the new value
        assert fired.wait(5) and clock.time() == 10.0
        clock.autojump_threshold = None
        loop.call_soon_threadsafe(lambda: loop.call_later(10, fired.clear))
        time.sleep(0.2)
        assert fired.is_set() and clock.time() == 10.0
        clock.advance(10)  # explicit advances work as ever beside it
        assert not fired.is_set() and clock.time() == 20.0
    finally:
        clock.release_thread()


@pytest.mark.parametrize("threshold", [-1.0, float("nan"), float("inf")])
def test_an_autojump_threshold_that_is_no_duration_is_refused(threshold: float) -> None:
    with pytest.raises(ValueError, match="autojump_threshold is real seconds"):
        VirtualClock(autojump_threshold=threshold)
    clock = VirtualClock()
    with pytest.raises(ValueError, match="autojump_threshold is real seconds"):
        clock.autojump_threshold = threshold


# A timer program: timer i is set (delay in quarters of a second) at the start, or when timer
# `parent` fires; when it fires it may cancel timer `cancels`. Quarters are exact in binary.
_TIMER = st.tuples(st.integers(0, 12), st.none() | st.integers(0, 9), st.none() | st.integers(0, 9))


def _run_program(timers: list[tuple[int, int | None, int | None]], clock: VirtualClock,
                 drive: Callable[[], Any]) -> list[tuple[int, float]]:
    fired: list[tuple[int, float]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        handles: dict[int, asyncio.TimerHandle] = {}
        finished = loop.create_future()

        def settle() -> None:
            if not finished.done() and all(h.cancelled() or not h._scheduled  # type: ignore[attr-defined]
                                           for h in handles.values()):
                finished.set_result(None)

        def fire(index: int) -> None:
            fired.append((index, loop.time()))
            cancels = timers[index][2]
            if cancels is not None and cancels in handles:
                handles[cancels].cancel()
            for child, (_, parent, _) in enumerate(timers):
                if parent == index and child > index:
                    start(child)
            loop.call_soon(settle)

        def start(index: int) -> None:
            handles[index] = loop.call_later(timers[index][0] / 4, fire, index)

        for index, (_, parent, _) in enumerate(timers):
            if parent is None or parent >= index:
                start(index)
        settle()
        await drive()
        done, _ = await wait_real([finished], 10)
        assert done, f"timers left at {loop.time()}: {handles}"

    clock.run(main())
    return fired


@settings(max_examples=40, deadline=None)
@given(timers=st.lists(_TIMER, max_size=10), steps=st.lists(st.integers(0, 16), max_size=4))
def test_autojumps_fire_timers_as_explicit_advances_do(timers: list[tuple[int, int | None, int | None]],
                                                       steps: list[int]) -> None:
    """Whoever moves the clock (one advance past every timer, the loop's own jumps, or advances
    mixed with jumps), each timer fires at its instant, in the same order."""
    horizon = 3 * 10 * len(timers)  # seconds: the longest chain of delays, whatever the program

    async def advance_past_all() -> None:
        await clock.advance_async(horizon)

    async def advances_and_jumps() -> None:
        for step in steps:
            await clock.advance_async(step / 4)
            await sleep_real(0.001)  # idle: the loop jumps meanwhile, as often as it likes

    async def nothing() -> None:
        pass

    clock = VirtualClock()
    by_advance = _run_program(timers, clock, advance_past_all)
    clock = VirtualClock(autojump_threshold=0)
    assert _run_program(timers, clock, nothing) == by_advance
    clock = VirtualClock(autojump_threshold=0)
    assert _run_program(timers, clock, advances_and_jumps) == by_advance


@pytest.mark.parametrize("moved_by", ["advance", "autojump"])
def test_a_timer_due_a_few_nanoseconds_on_never_sees_the_clock_before_its_time(moved_by: str) -> None:
    """Timers at 9.999999999999995 (steps of 0.2 add up so) and at 10.0: asyncio runs both at the
    first, within its resolution. A callback that checks ``time() >= due`` and else sets itself
    again (as the broker's LogMaintenance does) used to spin at that instant for good, holding
    the loop and every advance."""
    clock = VirtualClock(autojump_threshold=0 if moved_by == "autojump" else None)
    seen: list[float] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        early = sum([0.2] * 50)
        assert 0 < 10.0 - early < 1e-9

        def strict(due: float) -> None:
            if loop.time() >= due:
                seen.append(loop.time())
            else:
                loop.call_later(due - loop.time(), strict, due)

        loop.call_at(early, lambda: None)
        loop.call_at(10.0, strict, 10.0)
        if moved_by == "advance":
            moving = asyncio.ensure_future(clock.advance_async(early))
        else:
            moving = asyncio.ensure_future(asyncio.sleep(20))
        done, _ = await wait_real([moving], 5)
        assert done, f"spun at {loop.time()!r}"
        assert seen == [10.0]

    clock.run(main())
