"""A virtual clock for the broker: time that moves only when a test says so, or (autojump) when
nothing else is happening (issue 18).

Theory of operation. asyncio schedules every timer (``call_later``/``call_at``, and through them
``asyncio.sleep``, ``wait_for`` and ``timeout``) by ``loop.time()``. ``VirtualTimeLoop`` is a
selector loop whose ``time()`` reads a ``VirtualClock``. The broker reads time only from its loop
(``BrokerRuntime.clock`` is ``loop.time`` when the loop's class overrides it) and schedules only
on it, so on this loop every broker timer runs on virtual time, while the sockets stay real:
clients connect, send and are answered as ever.

Virtual time stands still until ``advance(seconds)``. An advance is a request the loop serves
itself, between iterations, whenever it is idle at the current instant (no ready callback, no
timer due now): it moves the clock to its earliest pending timer if that lies at or before the
advance's target, so the timers fire one instant at a time in due order, and whatever they set
off at that instant (callbacks, the tasks they wake, timers due at once) runs before the clock
moves again. Timers due at one instant fire in the order they were set; a target is rounded to
whole nanoseconds and reaches a timer within asyncio's clock resolution of it, so ten steps of
0.1 s reach a timer at 1.0. asyncio runs a timer due within that resolution (1 ns) at once:
when the earliest one lies those few nanoseconds on, the loop first moves the clock to it, so a
callback that checks ``time() >= due`` and else sets itself again for the rest runs again at
its time instead of spinning at an instant that never passes.
When no timer lies before the target, the clock stands at the target and the advance is done:
``advance()`` (from another thread) returns, ``await advance_async()`` (from a coroutine on the
loop) resumes. Work handed to other threads or to peers (a store write in a thread, a client's
next request) is not waited for.

While the clock stands still, the loop blocks in select() until I/O or a wake-up: a timer's
virtual delay says nothing about real seconds, so it never bounds the wait. A few waits on the
loop must be real (a cluster settling, a test's ``wait_for``, a shutdown's grace): they use
``sleep_real``/``wait_real``/``call_later_real``, timers kept apart on the monotonic clock.

Autojump (``VirtualClock(autojump_threshold=S)``, as trio's MockClock): an asyncio client on
the clock's loop has its timers on virtual time too, and nobody but the loop knows when it
waits only on them. So when select() would block with a virtual timer pending and nothing
ready, it waits at most the rest of S real seconds; if the loop stayed idle that long, the
clock moves to the earliest pending timer, exactly as an advance to that instant would, and the
iteration runs what is due there. Idle means: S real seconds spent waiting in select() since
the last activity, where activity is a socket event (a peer spoke and may speak again soon),
the clock moving (an advance, a jump: the timers fired are the loop's work) or work elsewhere
still running: a job handed to a thread (``run_in_executor``: ``to_thread``, ``getaddrinfo``)
or a ``working_elsewhere()`` block (the embedded Broker's settle, which polls for its store
watches' threads); the loop waits for those without jumping. Real-timer polls and wake-ups from
other threads (``broker.wait_for``, ``wait_until`` reading the broker) only observe, so they do
not hold a jump off. What the loop cannot see is a client in another thread or process about to
send its next request: S is the user's bet that no such gap is longer. An advance is served
whole before any jump (a jump never runs while one waits), and an advance's seconds count from
wherever the clock stands when the loop takes it, jumps included.

One clock drives one loop at a time. The embedded Broker runs every broker given the same clock
on that clock's loop, in one thread (``acquire_thread``), so an in-process cluster and any
other brokers of the test share one time.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import heapq
import itertools
import logging
import math
import selectors
import threading
import time
from collections.abc import Callable, Collection, Coroutine, Iterator
from typing import Any, TypeVar

__all__ = ["VirtualClock", "VirtualTimeLoop", "call_later_real", "close_stopped_loop", "sleep_real",
           "wait_real", "wall_clock_of"]

log = logging.getLogger(__name__)

T = TypeVar("T")
_Event = tuple[selectors.SelectorKey, int]
_Select = Callable[[float | None], list[_Event]]

# How long advance() from another thread waits for the loop before it gives up: a callback that
# blocks the loop would otherwise hang the test for good (real seconds; an advance takes ms).
ADVANCE_TIMEOUT_S = 60.0
TIME_DIGITS = 9  # an advance's target is rounded to whole nanoseconds: 0.1 + 0.2 stands at 0.3
_ONE_LOOP = "a VirtualClock drives one running loop at a time: run every broker of the clock on its loop"


class _Advance:
    """One advance() not yet done: ``seconds`` from where the clock stands when the loop takes it."""

    __slots__ = ("done", "seconds", "target")

    def __init__(self, seconds: float, done: Callable[[], None]) -> None:
        self.seconds = seconds
        self.target: float | None = None
        self.done = done


class _RealTimer:
    """A callback due at a monotonic instant, whatever the virtual clock says."""

    __slots__ = ("callback", "cancelled", "due")

    def __init__(self, due: float, callback: Callable[[], None]) -> None:
        self.due, self.callback, self.cancelled = due, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class _OrderedTimerHandle(asyncio.TimerHandle):
    """A timer that keeps its place among timers due at the same time: they fire in the order
    they were set (asyncio's heap alone leaves that order to chance)."""

    __slots__ = ("_order",)

    def __init__(self, when: float, callback: Callable[..., object], args: tuple[Any, ...],
                 loop: asyncio.AbstractEventLoop, context: contextvars.Context | None, order: int) -> None:
        super().__init__(when, callback, args, loop, context)
        self._order = order

    def __lt__(self, other: object) -> bool:
        if isinstance(other, _OrderedTimerHandle):
            return (self.when(), self._order) < (other.when(), other._order)
        return super().__lt__(other)  # type: ignore[operator]


class _Selector(selectors.DefaultSelector):
    """The loop's selector: how long select() may block is the loop's to say (``wait``), given
    asyncio's timeout (the next virtual timer's distance, or None for none)."""

    def __init__(self) -> None:
        super().__init__()
        self.wait: Callable[[float | None, _Select], list[_Event]] = lambda timeout, select: select(timeout)

    def select(self, timeout: float | None = None) -> list[_Event]:
        return self.wait(timeout, super().select)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop on a VirtualClock's time (see the module's theory of operation)."""

    def __init__(self, clock: VirtualClock) -> None:
        selector = _Selector()
        selector.wait = self._wait
        super().__init__(selector)
        self.virtual_clock = clock
        self._real_timers: list[tuple[float, int, _RealTimer]] = []
        self._real_seq = itertools.count()
        self._timer_order = itertools.count()
        # Autojump's idleness: real seconds waited in select() with a jump possible and no socket
        # event since the last activity (a socket event, the clock moving, a job in a thread).
        self._idle_s = 0.0
        self._idle_at = clock._now  # the virtual instant that idleness was counted at
        self._jobs_lock = threading.Lock()
        # Work elsewhere the loop waits for: run_in_executor jobs not yet returned (to_thread,
        # getaddrinfo) and working_elsewhere() blocks (a settle waiting on store-watch threads).
        self._jobs_in_threads = 0

    def time(self) -> float:
        return self.virtual_clock._now

    def call_at(self, when: float, callback: Callable[..., object], *args: Any,  # type: ignore[override]
                context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        # BaseEventLoop.call_at with an _OrderedTimerHandle: call_later and asyncio.timeout come here.
        if when is None:
            raise TypeError("when cannot be None")
        self._check_closed()  # type: ignore[attr-defined]
        if self.get_debug():
            self._check_thread()  # type: ignore[attr-defined]
            self._check_callback(callback, "call_at")  # type: ignore[attr-defined]
        timer = _OrderedTimerHandle(when, callback, args, self, context, next(self._timer_order))
        if timer._source_traceback:  # type: ignore[attr-defined]
            del timer._source_traceback[-1]  # type: ignore[attr-defined]
        heapq.heappush(self._scheduled, timer)  # type: ignore[attr-defined]
        timer._scheduled = True  # type: ignore[attr-defined]
        return timer

    def call_later_real(self, delay: float, callback: Callable[[], None]) -> _RealTimer:
        """``callback`` after ``delay`` real seconds (on this loop's thread), virtual time aside."""
        timer = _RealTimer(time.monotonic() + max(delay, 0.0), callback)
        heapq.heappush(self._real_timers, (timer.due, next(self._real_seq), timer))
        return timer

    def run_in_executor(self, executor: Any, func: Callable[..., T],  # type: ignore[override]
                        *args: Any) -> asyncio.Future[T]:
        """As asyncio's, counted while the job runs: a loop waiting for a thread is not idle."""
        with self._jobs_lock:
            self._jobs_in_threads += 1

        def job(*job_args: Any) -> T:
            try:
                return func(*job_args)
            finally:
                with self._jobs_lock:
                    self._jobs_in_threads -= 1

        try:
            return super().run_in_executor(executor, job, *args)
        except BaseException:
            with self._jobs_lock:
                self._jobs_in_threads -= 1
            raise

    @contextlib.contextmanager
    def working_elsewhere(self) -> Iterator[None]:
        """While inside, the loop is not idle, whatever it runs: it waits on work it cannot see
        (store watches settling in their own threads, polled in real time), so autojump holds."""
        with self._jobs_lock:
            self._jobs_in_threads += 1
        try:
            yield
        finally:
            with self._jobs_lock:
                self._jobs_in_threads -= 1

    def run_forever(self) -> None:
        self.virtual_clock._attach(self)
        try:
            super().run_forever()
        finally:
            self.virtual_clock._detach(self)

    # -- between iterations ---------------------------------------------------------------------

    def _run_once(self) -> None:
        self._fire_real_timers()
        self._step()
        super()._run_once()  # type: ignore[misc]

    def _fire_real_timers(self) -> None:
        timers = self._real_timers
        now = time.monotonic()
        while timers and (timers[0][2].cancelled or timers[0][0] <= now):
            timer = heapq.heappop(timers)[2]
            if not timer.cancelled:
                self.call_soon(timer.callback)

    def _wait(self, timeout: float | None, select: _Select) -> list[_Event]:
        """How select() waits. asyncio's ``timeout`` is the next virtual timer's distance (None:
        no timer): that says nothing about real seconds, so the wait is for I/O, a wake-up or the
        next real timer, or with autojump on, for the rest of the idle threshold, after which the
        clock jumps to that timer. A timeout under the clock's resolution is a timer asyncio runs
        at this instant (it runs what falls due within the resolution): that select must not
        wait, or a sleep of a few nanoseconds would hang."""
        resolution: float = self._clock_resolution  # type: ignore[attr-defined]
        clock = self.virtual_clock
        if clock._now != self._idle_at:  # the clock moved (an advance, a jump): its timers ran
            self._idle_s, self._idle_at = 0.0, clock._now
        threshold = clock._autojump_threshold
        jump_in: float | None = None
        if timeout is not None and timeout < resolution:
            wait: float | None = 0.0 if timeout > 0 else timeout
            if timeout > 0:
                self._reach_next_due()
        else:
            wait = self._real_timeout()
            if timeout is not None and threshold is not None:
                with self._jobs_lock:
                    busy = self._jobs_in_threads > 0
                if busy:
                    self._idle_s = 0.0
                else:
                    jump_in = max(threshold - self._idle_s, 0.0)
                    wait = jump_in if wait is None else min(wait, jump_in)
        started = time.monotonic()
        events = select(wait)
        self_pipe = self._ssock.fileno()  # type: ignore[attr-defined]
        if any(key.fd != self_pipe for key, _ in events):
            self._idle_s = 0.0  # a peer spoke: it may speak again soon
        elif jump_in is not None and threshold is not None:
            self._idle_s += time.monotonic() - started
            if self._idle_s >= threshold:
                self._jump()
        return events

    def _reach_next_due(self) -> None:
        """Move the clock the last few nanoseconds to the timer asyncio is about to run early (it
        runs what falls due within its resolution): on a clock that stands still, a callback that
        checks ``time() >= due`` and else sets itself again would otherwise do so for good."""
        clock = self.virtual_clock
        due = self._next_due()
        with clock._lock:
            if due is not None and due > clock._now:
                clock._now = due

    def _jump(self) -> None:
        """Move the clock to the earliest pending timer, as an advance to that instant would: the
        loop's iteration then runs every timer due there, in order. An advance waiting is served
        first (it has woken the loop)."""
        clock = self.virtual_clock
        due = self._next_due()
        with clock._lock:
            if due is None or clock._advances or due <= clock._now:
                return
            clock._now = due
        self._idle_s, self._idle_at = 0.0, due

    def _real_timeout(self) -> float | None:
        timers = self._real_timers
        while timers and timers[0][2].cancelled:
            heapq.heappop(timers)
        return max(timers[0][0] - time.monotonic(), 0.0) if timers else None

    def _next_due(self) -> float | None:
        scheduled: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        if scheduled and not scheduled[0].cancelled():
            return scheduled[0].when()  # the heap's head, when live, is the earliest
        return min((h.when() for h in scheduled if not h.cancelled()), default=None)

    def _step(self) -> None:
        """Serve the advances waiting, as far as this instant allows (the theory of operation)."""
        clock = self.virtual_clock
        # asyncio runs a timer once it is due within the clock's resolution (1 ns): so does an
        # advance, so that steps adding up to a timer's time in floating point still reach it.
        resolution: float = self._clock_resolution  # type: ignore[attr-defined]
        while clock._advances and not self._ready:  # type: ignore[attr-defined]
            due = self._next_due()
            now = clock._now
            if due is not None and due < now + resolution:
                return  # this instant's timers run first
            with clock._lock:
                request = clock._advances[0]
                if request.target is None:
                    request.target = round(now + request.seconds, TIME_DIGITS)
                if due is not None and due < request.target + resolution:
                    clock._now = max(clock._now, min(due, request.target))
                    return
                clock._now = max(clock._now, request.target)  # past it by a timer's few ns
                clock._advances.pop(0)
            request.done()


class VirtualClock:
    """Time for a broker that moves only on ``advance(seconds)``, or with ``autojump_threshold``
    (real seconds; None, the default: off) also when its loop has been idle that long; see the
    module docstring.

    ``start`` is where ``time()`` begins (seconds, as the loop reports them); ``wall_start`` the
    epoch seconds it stands for (now, unless given), so timestamps written to records move with
    the clock: ``wall()`` is ``wall_start`` plus the virtual seconds gone by."""

    def __init__(self, start: float = 0.0, *, wall_start: float | None = None,
                 autojump_threshold: float | None = None) -> None:
        self._start = self._now = float(start)
        self._autojump_threshold = _checked_threshold(autojump_threshold)
        self.wall_start = time.time() if wall_start is None else float(wall_start)
        self._lock = threading.Lock()
        self._advances: list[_Advance] = []
        self._running: VirtualTimeLoop | None = None  # the loop running on this clock, if any
        self._running_thread: int | None = None
        # The loop and thread the embedded Brokers on this clock share, and how many hold them.
        self._thread_loop: VirtualTimeLoop | None = None
        self._thread: threading.Thread | None = None
        self._thread_users = 0

    def time(self) -> float:
        """Virtual seconds, as the loop's ``time()`` reports them."""
        return self._now

    def wall(self) -> float:
        """Virtual epoch seconds (``time.time()``'s counterpart)."""
        return self.wall_start + (self._now - self._start)

    def __repr__(self) -> str:
        return f"VirtualClock(time={self._now:g})"

    @property
    def autojump_threshold(self) -> float | None:
        """Real seconds the loop must be idle before the clock jumps to its next timer; None: it
        never jumps (the default), only ``advance()`` moves it. Settable at any time, from any
        thread: the loop takes the new value at once."""
        return self._autojump_threshold

    @autojump_threshold.setter
    def autojump_threshold(self, seconds: float | None) -> None:
        self._autojump_threshold = _checked_threshold(seconds)
        with self._lock:
            loop = self._running
        if loop is not None:
            try:
                loop.call_soon_threadsafe(_wake)  # a select() waiting for good takes the new value
            except RuntimeError:  # closed meanwhile
                pass

    # -- moving time ------------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` on, firing every timer that falls due, in due order; returns
        once they (and what they set off at their instant) have run. From any thread but the
        loop's (there: ``await advance_async``)."""
        seconds = _checked(seconds)
        finished = threading.Event()
        with self._lock:
            loop = self._running
            if loop is None:  # no loop runs: nothing could fire, time just moves
                self._now = round(self._now + seconds, TIME_DIGITS)
                return
            if threading.get_ident() == self._running_thread:
                raise RuntimeError("advance() on the clock's own loop would wait for itself: "
                                   "await clock.advance_async(seconds) there")
            self._advances.append(_Advance(seconds, finished.set))
        try:
            loop.call_soon_threadsafe(_wake)
        except RuntimeError:  # closed meanwhile: _detach has moved the time and finished it
            pass
        if not finished.wait(ADVANCE_TIMEOUT_S):
            raise TimeoutError(f"the clock's loop did not finish advancing {seconds:g} s within "
                               f"{ADVANCE_TIMEOUT_S:g} real seconds (is a callback blocking it?)")

    async def advance_async(self, seconds: float) -> None:
        """``advance`` from a coroutine running on the clock's loop."""
        seconds = _checked(seconds)
        loop = asyncio.get_running_loop()
        if loop is not self._running:
            raise RuntimeError("advance_async() runs on the clock's loop; from another thread call advance()")
        finished: asyncio.Future[None] = loop.create_future()
        with self._lock:
            self._advances.append(_Advance(seconds, lambda: _resolve(finished)))
        await finished

    # -- loops ------------------------------------------------------------------------------------

    def new_event_loop(self) -> VirtualTimeLoop:
        """A new event loop on this clock (``asyncio.Runner(loop_factory=clock.new_event_loop)``)."""
        return VirtualTimeLoop(self)

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """``asyncio.run(main)`` on a new loop on this clock, in this thread."""
        with self._lock:
            busy = self._running is not None
        if busy:
            main.close()
            raise RuntimeError(_ONE_LOOP)
        loop = self.new_event_loop()
        try:
            asyncio.set_event_loop(loop)
            return loop.run_until_complete(main)
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    def acquire_thread(self) -> tuple[VirtualTimeLoop, threading.Thread]:
        """This clock's loop, running in a thread of its own, for one more user (an embedded
        Broker): started by the first, stopped when the last calls ``release_thread``."""
        with self._lock:
            if self._thread is not None:
                assert self._thread_loop is not None
                self._thread_users += 1
                return self._thread_loop, self._thread
            loop = self.new_event_loop()
            running = threading.Event()
            loop.call_soon(running.set)
            thread = threading.Thread(target=_run_loop, args=(loop,), name="kafkapy-clock", daemon=True)
            self._thread_loop, self._thread, self._thread_users = loop, thread, 1
        thread.start()
        running.wait()
        return loop, thread

    def release_thread(self) -> None:
        """One user of ``acquire_thread`` is done; the last stops the loop and its thread."""
        with self._lock:
            self._thread_users -= 1
            if self._thread_users > 0 or self._thread is None:
                return
            loop, thread = self._thread_loop, self._thread
            self._thread_loop = self._thread = None
        assert loop is not None
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)

    def _attach(self, loop: VirtualTimeLoop) -> None:
        with self._lock:
            if self._running is not None and self._running is not loop:
                raise RuntimeError(_ONE_LOOP)
            self._running, self._running_thread = loop, threading.get_ident()

    def _detach(self, loop: VirtualTimeLoop) -> None:
        with self._lock:
            if self._running is not loop:
                return
            self._running = self._running_thread = None
            # Advances nobody will serve now: the time moves, and their callers go on.
            waiting, self._advances = self._advances, []
            for request in waiting:
                self._now = request.target if request.target is not None else round(
                    self._now + request.seconds, TIME_DIGITS)
        for request in waiting:
            request.done()


def _checked(seconds: float) -> float:
    if not seconds >= 0:  # NaN too
        raise ValueError(f"a clock moves forward only: advance({seconds!r})")
    return float(seconds)


def _checked_threshold(seconds: float | None) -> float | None:
    if seconds is None:
        return None
    if not 0 <= seconds < math.inf:  # NaN too
        raise ValueError(f"autojump_threshold is real seconds of idleness (>= 0) or None: {seconds!r}")
    return float(seconds)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _wake() -> None:
    """Called on the loop so it runs an iteration (and so serves an advance)."""


def _run_loop(loop: VirtualTimeLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        close_stopped_loop(loop)


# -- closing a loop ------------------------------------------------------------------------------

LEFT_TASKS_GRACE_S = 5.0  # real seconds the tasks left at a loop's close get to end once cancelled


def close_stopped_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close a loop that ran its brokers and has stopped, as ``asyncio.run`` closes its own.

    A task still pending when its loop closes is reported ("Task was destroyed but it is
    pending!") only when it is collected, long after and far from its cause. A broker's stop ends
    what its modules started; whatever is still there (a module that forgot a task, or whose task
    was cancelled but not awaited) is named in a warning, cancelled and run to its end here."""
    try:
        left = asyncio.all_tasks(loop)
        if left:
            log.warning("%d task(s) still pending as the broker's loop closes (cancelled): %s",
                        len(left), ", ".join(sorted(_describe(task) for task in left)))
            for task in left:
                task.cancel()
            _, stuck = loop.run_until_complete(wait_real(left, LEFT_TASKS_GRACE_S))
            for task in left - stuck:
                failure = None if task.cancelled() else task.exception()
                if failure is not None:
                    log.error("task %s failed as it was cancelled", _describe(task), exc_info=failure)
            if stuck:
                log.error("%d task(s) did not end within %.0f s of being cancelled: %s", len(stuck),
                          LEFT_TASKS_GRACE_S, ", ".join(sorted(_describe(task) for task in stuck)))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


def _describe(task: asyncio.Future[Any]) -> str:
    coroutine = task.get_coro() if isinstance(task, asyncio.Task) else None
    return getattr(coroutine, "__qualname__", None) or repr(task)


# -- real-time waits on any loop (virtual or not) ------------------------------------------------

def wall_clock_of(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """Epoch seconds that move with ``loop.time()``: a VirtualTimeLoop's clock's, or (any other
    loop with a time of its own) the wall time at this call moved on by the loop's seconds."""
    if isinstance(loop, VirtualTimeLoop):
        return loop.virtual_clock.wall
    offset = time.time() - loop.time()
    return lambda: loop.time() + offset


def call_later_real(loop: asyncio.AbstractEventLoop, delay: float,
                    callback: Callable[[], None]) -> asyncio.TimerHandle | _RealTimer:
    """``loop.call_later`` in real seconds even on a virtual loop (a retry, a poll)."""
    if isinstance(loop, VirtualTimeLoop):
        return loop.call_later_real(delay, callback)
    return loop.call_later(delay, callback)


async def sleep_real(seconds: float) -> None:
    """``asyncio.sleep`` in real seconds even on a virtual loop (a poll that waits for other threads)."""
    loop = asyncio.get_running_loop()
    if not isinstance(loop, VirtualTimeLoop):
        await asyncio.sleep(seconds)
        return
    woken: asyncio.Future[None] = loop.create_future()
    timer = loop.call_later_real(seconds, lambda: _resolve(woken))
    try:
        await woken
    finally:
        timer.cancel()


async def wait_real(tasks: Collection[asyncio.Future[Any]],
                    timeout: float) -> tuple[set[asyncio.Future[Any]], set[asyncio.Future[Any]]]:
    """``asyncio.wait(tasks, timeout=timeout)`` with the timeout in real seconds even on a virtual
    loop: (done, pending)."""
    loop = asyncio.get_running_loop()
    if not isinstance(loop, VirtualTimeLoop):
        done, pending = await asyncio.wait(tasks, timeout=timeout)
        return set(done), set(pending)
    waiting = set(tasks)
    finished: asyncio.Future[None] = loop.create_future()

    def one_done(task: asyncio.Future[Any]) -> None:
        waiting.discard(task)
        if not waiting:
            _resolve(finished)

    for task in tasks:
        task.add_done_callback(one_done)
    timer = loop.call_later_real(timeout, lambda: _resolve(finished))
    try:
        if waiting:
            await finished
    finally:
        timer.cancel()
        for task in tasks:
            task.remove_done_callback(one_done)
    done = {task for task in tasks if task.done()}
    return done, set(tasks) - done
