"""PartitionLoads, the coordinators' loads in slices: done in place when one slice finishes it,
else one slice per loop step and installed at the end; stopped when the partition is no longer
led under the load's epoch, replaced by a newer load, and dropped (logged) when a slice raises."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Generator

import pytest

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.server.partition_loads import PartitionLoads

LOG = logging.getLogger("tests.partition_loads")


def replay(slices: int, fail: BaseException | None = None) -> Generator[None, None, str]:
    """A replay of ``slices`` slices returning "done", or raising ``fail`` in its last slice."""
    for _ in range(slices - 1):
        yield
    if fail is not None:
        raise fail
    return "done"


class Coordinator:
    def __init__(self) -> None:
        self.led: dict[int, int] = {0: 1}  # partition -> the epoch it is led under here
        self.installed: list[tuple[int, int, str]] = []
        self.loads = PartitionLoads("state", lambda p, epoch: self.led.get(p) == epoch,
                                    lambda p, epoch, result: self.installed.append((p, epoch, result)), LOG)


def test_one_slice_is_done_in_place_and_returned() -> None:
    async def scenario() -> None:
        coordinator = Coordinator()
        assert coordinator.loads.begin(0, 1, replay(1)) == "done"
        assert coordinator.loads.partitions() == [] and coordinator.installed == []  # the caller installs

    asyncio.run(scenario())


def test_more_slices_go_on_in_a_task_and_are_installed() -> None:
    async def scenario() -> None:
        coordinator = Coordinator()
        assert coordinator.loads.begin(0, 1, replay(5)) is None
        assert coordinator.loads.epoch_of(0) == 1
        await coordinator.loads.wait()
        assert coordinator.installed == [(0, 1, "done")]
        assert coordinator.loads.epoch_of(0) is None

    asyncio.run(scenario())


def test_a_load_stops_when_the_partition_is_no_longer_led_under_its_epoch() -> None:
    async def scenario() -> None:
        coordinator = Coordinator()
        coordinator.loads.begin(0, 1, replay(50))
        await asyncio.sleep(0)
        coordinator.led[0] = 2
        await coordinator.loads.wait()
        assert coordinator.installed == []

    asyncio.run(scenario())


def test_a_newer_load_replaces_the_one_under_way() -> None:
    async def scenario() -> None:
        coordinator = Coordinator()
        coordinator.loads.begin(0, 1, replay(50))
        coordinator.led[0] = 2
        coordinator.loads.begin(0, 2, replay(3))
        await coordinator.loads.wait()
        assert coordinator.installed == [(0, 2, "done")]

    asyncio.run(scenario())


@pytest.mark.parametrize("failure", [KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR), ValueError("bad batch")])
def test_a_slice_that_raises_drops_the_load_and_a_new_one_may_begin(failure: Exception,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        coordinator = Coordinator()
        coordinator.loads.begin(0, 1, replay(3, failure))
        await coordinator.loads.wait()
        assert coordinator.installed == [] and coordinator.loads.partitions() == []
        assert any("loading state-0 failed" in r.getMessage() for r in caplog.records)
        coordinator.loads.begin(0, 1, replay(3))
        await coordinator.loads.wait()
        assert coordinator.installed == [(0, 1, "done")]

    asyncio.run(scenario())


def test_stop_all_cancels_every_load() -> None:
    async def scenario() -> None:
        coordinator = Coordinator()
        coordinator.led[1] = 1
        coordinator.loads.begin(0, 1, replay(50))
        coordinator.loads.begin(1, 1, replay(50))
        coordinator.loads.stop_all()
        await asyncio.sleep(0.01)
        assert coordinator.loads.partitions() == [] and coordinator.installed == []

    asyncio.run(scenario())


def test_a_scheduled_load_runs_nothing_in_place_and_is_installed_by_the_runner() -> None:
    async def scenario() -> None:
        coordinator = Coordinator()
        coordinator.loads.schedule(0, 1, replay(1))
        assert coordinator.loads.epoch_of(0) == 1 and coordinator.installed == []
        await coordinator.loads.wait()
        assert coordinator.installed == [(0, 1, "done")]

    asyncio.run(scenario())


def test_loads_take_turns_one_slice_each_per_loop_step() -> None:
    """Three partitions loading at once: their slices interleave, so a short one is installed
    after its own few slices, not after the long one's."""
    order: list[str] = []

    def traced(name: str, slices: int) -> Generator[None, None, str]:
        for n in range(slices):
            order.append(f"{name}{n}")
            if n < slices - 1:
                yield
        return name

    async def scenario() -> None:
        coordinator = Coordinator()
        coordinator.led = {0: 1, 1: 1, 2: 1}
        coordinator.loads.schedule(0, 1, traced("long", 4))
        coordinator.loads.schedule(1, 1, traced("short", 1))
        coordinator.loads.schedule(2, 1, traced("mid", 2))
        await coordinator.loads.wait()
        assert order == ["long0", "short0", "mid0", "long1", "mid1", "long2", "long3"]
        assert [p for p, _, _ in coordinator.installed] == [1, 2, 0]

    asyncio.run(scenario())


def test_a_request_takes_a_slice_of_its_queued_load_and_a_short_one_ends_there() -> None:
    """A load queued behind others (the fifty partitions of a topic just made) is not waited for
    by a request for it: ``take_slice`` runs a slice now; it finishes a short load (installed,
    the request served), leaves a long one queued, and does nothing for another epoch."""
    async def scenario() -> None:
        coordinator = Coordinator()
        coordinator.led = {0: 1, 1: 1, 2: 1}
        for partition, slices in ((0, 3), (1, 1), (2, 3)):
            coordinator.loads.schedule(partition, 1, replay(slices))
        assert coordinator.loads.take_slice(1, 2) is False  # not the epoch it loads under
        assert coordinator.loads.take_slice(1, 1) is True
        assert coordinator.installed == [(1, 1, "done")] and coordinator.loads.epoch_of(1) is None
        assert coordinator.loads.take_slice(2, 1) is False  # one slice of three: still loading
        assert coordinator.loads.epoch_of(2) == 1
        assert coordinator.loads.take_slice(2, 1) is False
        assert coordinator.loads.take_slice(2, 1) is True
        assert coordinator.loads.take_slice(2, 1) is False  # nothing left to take
        await coordinator.loads.wait()
        assert sorted(coordinator.installed) == [(0, 1, "done"), (1, 1, "done"), (2, 1, "done")]

    asyncio.run(scenario())


def test_a_slice_a_request_takes_that_fails_drops_the_load() -> None:
    async def scenario() -> None:
        coordinator = Coordinator()
        coordinator.loads.schedule(0, 1, replay(1, fail=KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR, "gone")))
        assert coordinator.loads.take_slice(0, 1) is False
        assert coordinator.loads.epoch_of(0) is None and coordinator.installed == []

    asyncio.run(scenario())
