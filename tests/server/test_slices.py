"""Work in slices on the event loop leaves room for the process's other Python threads, as the
embedded broker's loop must for the test driving it (kafkapy.server.slices)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Generator

from kafkapy.server.slices import in_slices

_SLICES = 200
_SLICE_FACTS = 20_000  # a slice of a record walk: a few milliseconds building small objects


def _busy_slices(done_at: list[float]) -> Generator[None, None, int]:
    for number in range(_SLICES):
        if number:
            yield
        facts = [(index, str(index), index % 2 == 0) for index in range(_SLICE_FACTS)]
        assert len(facts) == _SLICE_FACTS
    done_at.append(time.perf_counter())
    return _SLICES


def test_another_thread_runs_between_slices_not_after_them() -> None:
    """Ten short sleeps of this thread, each needing the GIL back, end long before a walk of 200
    slices of a few milliseconds does: this thread is not kept waiting for the whole walk (it was,
    with only asyncio.sleep(0) between slices: the loop took the GIL back before this thread woke)."""
    started_at = time.perf_counter()
    walk_done_at: list[float] = []
    loop = asyncio.new_event_loop()
    started = threading.Event()

    async def walk() -> int:
        started.set()
        return await in_slices(_busy_slices(walk_done_at))

    result: list[int] = []
    walker = threading.Thread(target=lambda: result.append(loop.run_until_complete(walk())))
    walker.start()
    try:
        started.wait(10)
        for _ in range(10):
            time.sleep(0.001)
        mine_done_at = time.perf_counter()
    finally:
        walker.join(30)
        loop.close()
    assert result == [_SLICES]
    [walk_done] = walk_done_at
    assert walk_done - mine_done_at > (walk_done - started_at) / 2, (
        f"this thread's sleeps took {1000 * (mine_done_at - started_at):.0f} ms of the walk's "
        f"{1000 * (walk_done - started_at):.0f} ms")
