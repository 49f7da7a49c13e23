"""A coordinator's loads of its state partitions, done in slices on the loop.

Kafka's coordinators load a state partition as soon as they come to lead it (the transaction
coordinator's onElection, the group and share coordinators' scheduleLoadOperation), in the
background, and answer COORDINATOR_LOAD_IN_PROGRESS (retriable) for it meanwhile; a partition of
millions of records replayed in one go on kafkapy's loop would hold every other connection for
seconds.

Theory of operation. A load is a generator, the partition's replay, that yields between two
slices of its work and returns what it loaded. ``begin`` runs the first slice in place: a
partition that fits in it is loaded there and then, and ``begin`` returns the result, so the
common case (a short partition) costs no waiting and no retry. Otherwise the rest is queued and
``begin`` returns None; ``schedule`` queues the whole load. One runner task per coordinator
takes the queued loads in turn, one slice per loop step (kafkapy.server.slices), so however many
partitions load at once (a broker starting over fifty) the loop gives them one slice between two
rounds of everything else, and a short partition is not held behind a long one. Meanwhile a
request for the partition runs one slice of its load itself (``take_slice``): a short partition
queued behind others is loaded by it, and a longer one is answered COORDINATOR_LOAD_IN_PROGRESS
while ``epoch_of`` names the load. Before each slice the runner asks ``still_led(partition,
epoch)`` and drops the load if not (Kafka's load loop checks its loading set before each read).
At the end, ``install(partition, epoch, result)`` hands the result over. A load that raises is
logged and dropped.

Reading: ``load_batches`` reads the log ``buffer_bytes`` at a time (Kafka's
``*.load.buffer.size``), whole batches; a batch larger than the buffer is read whole all the
same (Kafka's loader grows its buffer for it, with a warning), so a tiny buffer loads everything.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Generator, Iterator
from typing import Generic, TypeVar

import attrs

from kafkapy.errors import KafkaApiError
from kafkapy.log.base import PartitionLog
from kafkapy.protocol.records import Batch, Records
from kafkapy.server.slices import between_slices

__all__ = ["PartitionLoads", "load_batches"]

_T = TypeVar("_T")


def load_batches(source: PartitionLog, buffer_bytes: int, *, end: int | None = None, strict: bool = False,
                 what: str = "", log: logging.Logger | None = None) -> Iterator[Batch]:
    """Every batch of ``source`` from its log start (up to ``end``, exclusive, or its log end), read
    ``buffer_bytes`` at a time as a coordinator's load reads it (``*.load.buffer.size``). A batch
    larger than the buffer comes whole (the read's minimum of one batch); the buffer then grows to
    it, with Kafka's warning, once per size. OSError (the disk refused a read) is the caller's."""
    offset = source.log_start_offset
    buffer = buffer_bytes
    while end is None or offset < end:
        read = source.read(offset, buffer_bytes, max_offset=end)
        if not read.chunks:
            return
        size = sum(len(chunk) for chunk in read.chunks)
        if size > buffer:
            buffer = size
            if log is not None:
                log.warning("loaded %s with a buffer larger (%d bytes) than the configured load buffer "
                            "size (%d bytes)", what, size, buffer_bytes)
        for chunk in read.chunks:
            for batch in Records(chunk).batches(strict=strict):
                offset = batch.last_offset + 1
                yield batch


@attrs.define
class _Load(Generic[_T]):
    """A partition's load under way, begun under the partition's leader ``epoch``."""

    epoch: int
    steps: Generator[None, None, _T]


class PartitionLoads(Generic[_T]):
    """The loads under way of one coordinator's partitions of ``topic``."""

    def __init__(self, topic: str, still_led: Callable[[int, int], bool],
                 install: Callable[[int, int, _T], None], log: logging.Logger) -> None:
        self.topic = topic
        self.still_led = still_led
        self.install = install
        self.log = log  # the coordinator's logger: its loads are logged as its own
        self._loads: dict[int, _Load[_T]] = {}  # in the order the runner takes them
        self._runner: asyncio.Task[None] | None = None

    def begin(self, partition: int, epoch: int, steps: Generator[None, None, _T]) -> _T | None:
        """The load's result if its first slice finished it (the caller installs it); else None,
        the rest queued for the runner, which installs it. The first slice's exceptions are the
        caller's. A load of the partition under way is stopped first."""
        self.stop(partition)
        try:
            next(steps)
        except StopIteration as done:
            result: _T = done.value
            return result
        self._queue(partition, epoch, steps)
        return None

    def schedule(self, partition: int, epoch: int, steps: Generator[None, None, _T]) -> None:
        """The whole load queued for the runner (none of it in place); a load of the partition
        under way is stopped first."""
        self.stop(partition)
        self._queue(partition, epoch, steps)

    def _queue(self, partition: int, epoch: int, steps: Generator[None, None, _T]) -> None:
        self._loads[partition] = _Load(epoch, steps)
        self.log.info("loading %s-%d at epoch %d in slices", self.topic, partition, epoch)
        if self._runner is None or self._runner.done():
            self._runner = asyncio.ensure_future(self._run())

    def epoch_of(self, partition: int) -> int | None:
        """The epoch the partition's load under way began under; None when none is."""
        load = self._loads.get(partition)
        return None if load is None else load.epoch

    def partitions(self) -> list[int]:
        return list(self._loads)

    def stop(self, partition: int) -> None:
        load = self._loads.pop(partition, None)
        if load is not None:
            load.steps.close()

    def stop_all(self) -> None:
        for partition in list(self._loads):
            self.stop(partition)
        if self._runner is not None:
            self._runner.cancel()
            self._runner = None

    async def wait(self) -> None:
        """Until no load is under way (tests, a coordinator's drain)."""
        while self._loads and self._runner is not None:
            await asyncio.gather(self._runner, return_exceptions=True)

    async def _run(self) -> None:
        """The queued loads' slices, one per loop step, taking the loads in turn."""
        while self._loads:
            await between_slices()
            if not self._loads:
                return
            partition = next(iter(self._loads))
            load = self._loads.pop(partition)
            if not self.still_led(partition, load.epoch):
                load.steps.close()
                self.log.info("stopped loading %s-%d: no longer led here at epoch %d", self.topic, partition,
                              load.epoch)
                continue
            if self._slice(partition, load) is False and partition not in self._loads:
                self._loads[partition] = load  # to the back of the queue (unless a newer load replaced it)

    def take_slice(self, partition: int, epoch: int) -> bool:
        """One slice of the partition's queued load under ``epoch``, run now by a request that
        would otherwise be answered COORDINATOR_LOAD_IN_PROGRESS; True when that finished it (and
        it is installed). So a short partition queued behind others (the fifty of a topic just
        made) serves its first request without waiting its turn, as Kafka's empty partitions are
        loaded before a client could ask."""
        load = self._loads.get(partition)
        if load is None or load.epoch != epoch:
            return False
        del self._loads[partition]  # as the runner holds a load it slices: not under way meanwhile
        finished = self._slice(partition, load)
        if finished is False and partition not in self._loads:
            self._loads[partition] = load
        return finished is True

    def _slice(self, partition: int, load: _Load[_T]) -> bool | None:
        """One slice of ``load``: True when it finished (installed), False when more is left,
        None when it failed (logged; the next request begins the load again)."""
        try:
            next(load.steps)
        except StopIteration as done:
            self._install(partition, load.epoch, done.value)
            return True
        except KafkaApiError as exc:  # unreadable (its log dir failed, say)
            self.log.warning("loading %s-%d failed: %s", self.topic, partition, exc)
            return None
        except Exception:  # a batch the reader refused
            self.log.exception("loading %s-%d failed", self.topic, partition)
            return None
        return False

    def _install(self, partition: int, epoch: int, result: _T) -> None:
        try:
            self.install(partition, epoch, result)
        except Exception:  # the coordinator's own failure: logged, and the runner goes on
            self.log.exception("installing %s-%d failed", self.topic, partition)
