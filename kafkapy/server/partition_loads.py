"""A coordinator's loads of its state partitions, done in slices on the loop.

Kafka's coordinators load a state partition they come to lead in the background and answer
COORDINATOR_LOAD_IN_PROGRESS (retriable) for it meanwhile; a partition of millions of records
replayed in one go on kafkapy's loop would hold every other connection for seconds.

Theory of operation. A load is a generator, the partition's replay, that yields between two
slices of its work and returns what it loaded. ``begin`` runs the first slice in place: a
partition that fits in it is loaded there and then, and ``begin`` returns the result, so the
common case (a short partition) costs no task and no retry. Otherwise the rest goes on in a task,
one slice per loop step (kafkapy.server.slices), ``begin`` returns None, and the coordinator
answers COORDINATOR_LOAD_IN_PROGRESS for the partition while ``epoch_of`` names the load. Before
each slice the task asks ``still_led(partition, epoch)`` and stops the load if not (Kafka's load
loop checks its loading set before each read). At the end, ``install(partition, epoch, result)``
hands the result over. A load that raises is logged and dropped; the next request begins again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Generator
from typing import Generic, TypeVar

import attrs

from kafkapy.errors import KafkaApiError
from kafkapy.server.slices import between_slices

__all__ = ["PartitionLoads"]

_T = TypeVar("_T")


@attrs.define
class _Load:
    """A partition's load under way, begun under the partition's leader ``epoch``."""

    epoch: int
    task: asyncio.Task[None]


class PartitionLoads(Generic[_T]):
    """The loads under way of one coordinator's partitions of ``topic``."""

    def __init__(self, topic: str, still_led: Callable[[int, int], bool],
                 install: Callable[[int, int, _T], None], log: logging.Logger) -> None:
        self.topic = topic
        self.still_led = still_led
        self.install = install
        self.log = log  # the coordinator's logger: its loads are logged as its own
        self._loads: dict[int, _Load] = {}

    def begin(self, partition: int, epoch: int, steps: Generator[None, None, _T]) -> _T | None:
        """The load's result if its first slice finished it (the caller installs it); else None,
        the rest going on in a task that installs it. The first slice's exceptions are the
        caller's. A load of the partition under way is stopped first."""
        self.stop(partition)
        try:
            next(steps)
        except StopIteration as done:
            result: _T = done.value
            return result
        task = asyncio.ensure_future(self._rest(partition, epoch, steps))
        self._loads[partition] = _Load(epoch, task)
        self.log.info("loading %s-%d at epoch %d in slices", self.topic, partition, epoch)
        return None

    def epoch_of(self, partition: int) -> int | None:
        """The epoch the partition's load under way began under; None when none is."""
        load = self._loads.get(partition)
        return None if load is None else load.epoch

    def partitions(self) -> list[int]:
        return list(self._loads)

    def stop(self, partition: int) -> None:
        load = self._loads.pop(partition, None)
        if load is not None:
            load.task.cancel()

    def stop_all(self) -> None:
        for load in self._loads.values():
            load.task.cancel()
        self._loads.clear()

    async def wait(self) -> None:
        """Until no load is under way (tests, a coordinator's drain)."""
        while self._loads:
            await asyncio.gather(*(load.task for load in list(self._loads.values())), return_exceptions=True)

    async def _rest(self, partition: int, epoch: int, steps: Generator[None, None, _T]) -> None:
        """The load's other slices, one per loop step."""
        while True:
            await between_slices()
            load = self._loads.get(partition)
            if load is None or load.epoch != epoch:
                return  # stopped, or replaced by a load under a newer epoch
            if not self.still_led(partition, epoch):
                del self._loads[partition]
                self.log.info("stopped loading %s-%d: no longer led here at epoch %d", self.topic, partition,
                              epoch)
                return
            try:
                next(steps)
            except StopIteration as done:
                del self._loads[partition]
                self.install(partition, epoch, done.value)
                return
            except KafkaApiError as exc:  # unreadable (its log dir failed, say)
                del self._loads[partition]
                self.log.warning("loading %s-%d failed: %s", self.topic, partition, exc)
                return
            except Exception:  # a batch the reader refused: logged; the next request begins again
                del self._loads[partition]
                self.log.exception("loading %s-%d failed", self.topic, partition)
                return
