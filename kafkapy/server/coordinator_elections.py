"""Which partitions of a coordinator's state topic this broker leads: its elections and resignations.

Kafka tells its coordinators when the broker becomes the leader of one of their partitions, or
stops being it (the transaction coordinator's onElection/onResignation, the group and share
coordinators' through their runtime's scheduleLoadOperation/scheduleUnloadOperation), and each
coordinator starts loading the partition at once, before any request names it.

Theory of operation. ``CoordinatorElections`` follows the broker's cluster view
(``ClusterView.on_change``, called on whichever thread changed it: a ZooKeeper watch's, or the
loop's) and hops onto the loop for one pass per burst of changes. A pass asks the coordinator's
``led_epoch(partition)`` for every partition of the topic (the leader epoch when this broker
leads it and can serve it, else None) and compares it with what the last pass found:

===========================  =================================  ==============================
last pass                    this pass                          call
===========================  =================================  ==============================
not led                      led under E                        ``elected(p, E, in_place)``
led under E                  led under E' != E                  ``elected(p, E', in_place)``
led under E                  not led, or the partition gone     ``resigned(p)``
===========================  =================================  ==============================

So a broker that starts (with ``log.dirs``, the topic in the store) is elected for every
partition it leads by its first pass, and a leader move elects the new leader and resigns the
old one. ``in_place`` lets the coordinator run the first slice of each load within the pass,
which finishes a short partition before any request for it can come; it is False once the pass
has spent ``IN_PLACE_BUDGET_S`` on such slices, so a pass over many long partitions does not
hold the loop (their loads are queued whole).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

from kafkapy.server.services import ClusterView
from kafkapy.store.onloop import call_soon_on

__all__ = ["IN_PLACE_BUDGET_S", "CoordinatorElections"]

IN_PLACE_BUDGET_S: Final = 0.01
"""The loop time one pass may spend on first slices: one slice's (kafkapy.server.slices)."""


class CoordinatorElections:
    """Calls ``elected`` and ``resigned`` (the table above) for the partitions of ``topic``."""

    def __init__(self, cluster: ClusterView, topic: str, led_epoch: Callable[[int], int | None],
                 elected: Callable[[int, int, bool], None], resigned: Callable[[int], None]) -> None:
        self.cluster = cluster
        self.topic = topic
        self.led_epoch = led_epoch
        self.elected = elected
        self.resigned = resigned
        self._led: dict[int, int] = {}  # partition -> the epoch the last pass found it led under
        self._seen: object = None  # what the last pass read of the view: the same again is skipped
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending = False
        self._remove: Callable[[], None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Follow the view from now on; the first pass runs now."""
        self._loop = loop
        self._remove = self.cluster.on_change(self._changed)
        self.run()

    def stop(self) -> None:
        if self._remove is not None:
            self._remove()
            self._remove = None
        self._loop = None

    def led(self) -> dict[int, int]:
        """The partitions the last pass found led here, with their epochs."""
        return dict(self._led)

    def _changed(self) -> None:
        """From any thread: one pass soon, however many changes come before it."""
        loop = self._loop
        if loop is None or self._pending:
            return
        self._pending = True
        if not call_soon_on(loop, self._pass):
            self._pending = False

    def _pass(self) -> None:
        self._pending = False
        if self._loop is not None:
            self.run()

    def run(self) -> None:
        """One pass (the table above)."""
        cluster = self.cluster
        info = cluster.topics.get(self.topic)
        partitions = sorted(info.partitions) if info is not None else []
        states = cluster.partition_states
        seen = (info, cluster.live_broker_ids(), cluster.offline_replicas,
                tuple(states.get((self.topic, p)) for p in partitions))
        if seen == self._seen:
            return
        self._seen = seen
        spent = 0.0
        for partition in partitions:
            epoch = self.led_epoch(partition)
            before = self._led.get(partition)
            if epoch is None:
                if before is not None:
                    del self._led[partition]
                    self.resigned(partition)
            elif epoch != before:
                self._led[partition] = epoch
                started = time.perf_counter()
                self.elected(partition, epoch, spent < IN_PLACE_BUDGET_S)
                spent += time.perf_counter() - started
        for partition in [p for p in self._led if info is None or p not in info.partitions]:
            del self._led[partition]
            self.resigned(partition)
