"""kafkapy.store.onloop: store watch callbacks hop onto the event loop, a burst of changes folds into
one reload, and waiting for a change is awaitable (woken by the change, never by a poll). With the
memory store and a real ZooKeeper."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkapy.store import MemoryStore, TopicInfo, ZooKeeperStore
from kafkapy.store.onloop import LoopView, Reloader, call_soon_on, watching


@pytest.fixture(params=["memory", "zookeeper"])
def stores(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any]]:
    """Two handles (two sessions) on one fresh cluster: one watches, the other makes changes."""
    if request.param == "memory":
        first = MemoryStore()
        pair = (first, first.peer())
    else:
        connect = request.getfixturevalue("zk_connect")
        pair = (ZooKeeperStore(connect, connection_timeout_ms=10000),
                ZooKeeperStore(connect, connection_timeout_ms=10000))
    for store in pair:
        store.start()
    yield pair
    for store in pair:
        store.close()


# --- Reloader ------------------------------------------------------------------------------------

def test_reloads_run_on_the_loop_one_at_a_time_and_a_burst_folds_into_one_more() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate = asyncio.Event()
        runs: list[int] = []
        threads: set[int] = set()

        async def reload() -> None:
            threads.add(threading.get_ident())
            runs.append(len(runs))
            if len(runs) == 1:
                await gate.wait()  # the first run is slow; requests pile up meanwhile

        reloader = Reloader(loop, reload, "test state")
        reloader.request()
        while not runs:
            await asyncio.sleep(0)
        burst = [threading.Thread(target=reloader.request) for _ in range(20)]  # from store threads
        for thread in burst:
            thread.start()
        for thread in burst:
            thread.join()
        await asyncio.sleep(0.05)
        assert runs == [0]  # still one at a time
        gate.set()
        await reloader.idle()
        assert runs == [0, 1]  # 20 requests during a run: exactly one more run after it
        assert threads == {threading.get_ident()}  # every run on the loop's thread

    asyncio.run(main())


def test_a_failing_reload_is_logged_and_the_next_one_runs(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> list[str]:
        outcomes = ["fail", "ok"]
        done: list[str] = []

        async def reload() -> None:
            outcome = outcomes.pop(0)
            if outcome == "fail":
                raise ValueError("the store is unreadable")
            done.append(outcome)

        reloader = Reloader(asyncio.get_running_loop(), reload, "test state")
        for _ in range(2):
            reloader.request()
            await asyncio.sleep(0.01)
            await reloader.idle()
        reloader.close()
        reloader.request()  # closed: nothing runs
        await asyncio.sleep(0.01)
        return done

    assert asyncio.run(main()) == ["ok"]
    assert "could not reload test state (keeping the previous ones)" in caplog.text
    assert "the store is unreadable" in caplog.text


def test_a_reloader_follows_entity_config_changes(stores: tuple[Any, Any]) -> None:
    """The configs/quotas modules' shape: the change-notification watch asks, the reload reads; after
    a burst of changes the last read has them all, in fewer reads than changes."""
    watcher, maker = stores

    async def main() -> tuple[dict[str, dict[str, str]], int]:
        loop = asyncio.get_running_loop()
        seen: dict[str, dict[str, str]] = {}
        reads = 0

        async def reload() -> None:
            nonlocal seen, reads
            reads += 1
            seen = await asyncio.to_thread(watcher.entity_configs, "ips")

        reloader = Reloader(loop, reload, "ip quotas")
        watch = await asyncio.to_thread(watcher.watch_entity_configs, lambda path: reloader.request())
        try:
            def burst() -> None:
                for i in range(30):
                    maker.set_entity_config(f"ips/10.0.0.{i}", {"connection_creation_rate": str(i)})

            await asyncio.to_thread(burst)
            deadline = loop.time() + 10
            while len(seen) < 30 and loop.time() < deadline:  # the test's own wait, not the helper's
                await asyncio.sleep(0.05)
            await reloader.idle()
        finally:
            watch.cancel()
        return seen, reads

    seen, reads = asyncio.run(main())
    assert seen == {f"ips/10.0.0.{i}": {"connection_creation_rate": str(i)} for i in range(30)}
    assert 1 <= reads < 30


def test_a_reload_cancelled_from_outside_does_not_stop_later_ones() -> None:
    """A run cancelled by someone other than close() (its task cancelled) must not leave the Reloader
    thinking a run is still going: later requests run. (Seen in the full suite: ip quotas never applied.)"""
    async def main() -> list[str]:
        runs: list[str] = []
        gate = asyncio.Event()

        async def reload() -> None:
            runs.append("run")
            if len(runs) == 1:
                await gate.wait()

        reloader = Reloader(asyncio.get_running_loop(), reload, "test state")
        reloader.request()
        while not runs:
            await asyncio.sleep(0)
        assert reloader._task is not None
        reloader._task.cancel()
        await asyncio.sleep(0.01)
        reloader.request()
        await asyncio.sleep(0.01)
        await reloader.idle()
        return runs

    assert asyncio.run(main()) == ["run", "run"]


def test_news_for_a_closed_loop_is_dropped() -> None:
    loop = asyncio.new_event_loop()
    loop.close()
    assert call_soon_on(loop, print, "never") is False
    Reloader(loop, asyncio.sleep, "nothing").request()  # a store callback after the broker stopped
    LoopView[int](loop)(1)


# --- LoopView and watching -----------------------------------------------------------------------

def test_waiting_for_a_topic_is_woken_by_the_change(stores: tuple[Any, Any]) -> None:
    watcher, maker = stores

    async def main() -> tuple[bool, float, int]:
        loop = asyncio.get_running_loop()
        checks = 0

        def created(topics: dict[str, TopicInfo]) -> bool:
            nonlocal checks
            checks += 1
            return "t1" in topics

        async with watching(loop, watcher.watch_topics) as topics:
            loop.call_later(0.3, maker.create_topic, "t1", {0: (1,)})
            started = time.monotonic()
            found = await topics.wait_for(created, timeout=60)
            return found, time.monotonic() - started, checks

    found, waited, checks = asyncio.run(main())
    # Woken by the change, not by its timer (whose state would hold t1 by then too): well inside
    # the timeout however slow a loaded ZooKeeper is to deliver the watch.
    assert found and 0.25 < waited < 30
    # Checked when the watch first reported and when the change came, not every few milliseconds.
    assert checks <= 4


def test_wait_for_times_out_without_polling(stores: tuple[Any, Any]) -> None:
    watcher, _ = stores

    async def main() -> tuple[bool, float, int]:
        checks = 0

        def never(topics: dict[str, TopicInfo]) -> bool:
            nonlocal checks
            checks += 1
            return False

        async with watching(asyncio.get_running_loop(), watcher.watch_topics) as topics:
            started = time.monotonic()
            found = await topics.wait_for(never, timeout=0.5)
            return found, time.monotonic() - started, checks

    found, waited, checks = asyncio.run(main())
    assert not found and 0.45 < waited < 3
    assert checks <= 3  # the first state, perhaps the empty view once more at the deadline


def test_wait_for_a_state_that_already_holds_returns_at_once(stores: tuple[Any, Any]) -> None:
    watcher, maker = stores
    maker.create_topic("there", {0: (1,)})

    async def main() -> tuple[bool, Any]:
        async with watching(asyncio.get_running_loop(), watcher.watch_topics) as topics:
            found = await topics.wait_for(lambda view: "there" in view, timeout=10)
            return found, topics.state

    found, state = asyncio.run(main())
    assert found and set(state) == {"there"}


def test_the_watch_ends_with_the_block(stores: tuple[Any, Any], caplog: pytest.LogCaptureFixture) -> None:
    watcher, maker = stores
    caplog.set_level(logging.DEBUG)

    async def main() -> LoopView[dict[str, TopicInfo]]:
        async with watching(asyncio.get_running_loop(), watcher.watch_topics) as topics:
            await topics.wait_for(lambda view: True, timeout=10)
        return topics

    topics = asyncio.run(main())
    first = topics.state
    maker.create_topic("after", {0: (1,)})  # the loop is closed and the watch cancelled: no news
    time.sleep(0.3)
    assert topics.state is first
    assert "failed" not in caplog.text


def test_a_view_before_any_state() -> None:
    async def main() -> None:
        view: LoopView[int] = LoopView(asyncio.get_running_loop())
        with pytest.raises(LookupError):
            _ = view.state
        assert await view.wait_for(lambda n: True, timeout=0.05) is False
        threading.Thread(target=view, args=(0,)).start()  # None-like states are states too
        assert await view.wait_for(lambda n: n == 0, timeout=5)

    asyncio.run(main())


# --- the Reloader's state machine, walked by Hypothesis -------------------------------------------

class ReloaderMachine(RuleBasedStateMachine):
    """Requests (from other threads) and reloads that finish or fail, in any order. Whatever the
    order: never two reloads at once, never more reloads than requests, and once nothing runs, the
    last reload started after the last request (no news left unread)."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.requests = 0
        self.running = 0
        self.started: list[int] = []  # requests made when each reload started
        self.current: asyncio.Future[None] | None = None
        self.reloader = Reloader(self.loop, self._reload, "model state")

    async def _reload(self) -> None:
        self.running += 1
        assert self.running == 1, "two reloads at once"
        self.started.append(self.requests)
        self.current = self.loop.create_future()
        try:
            await self.current
        finally:
            self.running -= 1
            self.current = None

    def _pump(self) -> None:
        for _ in range(5):
            self.loop.run_until_complete(asyncio.sleep(0))

    @rule(threads=st.integers(min_value=1, max_value=3))
    def request(self, threads: int) -> None:
        self.requests += threads
        callers = [threading.Thread(target=self.reloader.request) for _ in range(threads)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        self._pump()

    @precondition(lambda self: self.current is not None)
    @rule(fails=st.booleans())
    def finish(self, fails: bool) -> None:
        assert self.current is not None
        if fails:
            self.current.set_exception(ValueError("the store is unreadable"))
        else:
            self.current.set_result(None)
        self._pump()

    @invariant()
    def one_at_a_time_and_never_stale(self) -> None:
        assert self.running <= 1
        assert len(self.started) <= self.requests
        if self.running == 0 and self.requests:
            assert self.started and self.started[-1] == self.requests

    def teardown(self) -> None:
        self.reloader.close()
        self._pump()
        self.loop.close()


ReloaderMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
test_reloader_state_machine = ReloaderMachine.TestCase


def test_the_reloader_table_is_complete() -> None:
    """Every (phase, event) has a transition: a request or an outcome can never be dropped."""
    from kafkapy.store.onloop import TRANSITIONS, _Event, _Phase

    running = {_Phase.RUNNING, _Phase.OWED}
    assert set(TRANSITIONS) == {(p, _Event.REQUEST) for p in _Phase} | {
        (p, e) for p in running for e in (_Event.DONE, _Event.FAILED)}
    assert all(next_phase in running for next_phase, run in TRANSITIONS.values() if run)
