"""CoordinatorElections, the table of its module docstring over a real ClusterView: a partition
come to be led here is elected, led under a new epoch elected again, no longer led (or gone with
its topic) resigned; a burst of changes is one pass; the first slices in place stop at the pass's
budget; nothing is called once stopped."""

from __future__ import annotations

import asyncio
import time
import uuid

from kafkapy.server.coordinator_elections import IN_PLACE_BUDGET_S, CoordinatorElections
from kafkapy.server.services import ClusterView
from kafkapy.store.base import PartitionState, TopicInfo

TOPIC = "state"


class Coordinator:
    def __init__(self, cluster: ClusterView, partitions: int) -> None:
        self.cluster = cluster
        self.led: dict[int, int | None] = dict.fromkeys(range(partitions))  # what led_epoch answers
        self.calls: list[tuple[object, ...]] = []
        self.slow = 0.0  # seconds each election takes
        self.elections = CoordinatorElections(cluster, TOPIC, lambda p: self.led[p], self.elected,
                                              self.resigned)
        cluster.topics = {TOPIC: TopicInfo(TOPIC, uuid.UUID(int=1), {p: (1,) for p in range(partitions)})}

    def elected(self, partition: int, epoch: int, in_place: bool) -> None:
        self.calls.append(("elected", partition, epoch, in_place))
        time.sleep(self.slow)

    def resigned(self, partition: int) -> None:
        self.calls.append(("resigned", partition))

    def move(self, partition: int, epoch: int | None) -> None:
        """This broker leads ``partition`` under ``epoch`` now (None: not); the view's state changes."""
        self.led[partition] = epoch
        states = dict(self.cluster.partition_states)
        states[(TOPIC, partition)] = PartitionState(1 if epoch is not None else 2, epoch or 0, (1,), 0, 0)
        self.cluster.partition_states = states


def test_the_table() -> None:
    async def scenario() -> None:
        coordinator = Coordinator(ClusterView(), 2)
        coordinator.led[0] = 3
        coordinator.elections.start(asyncio.get_running_loop())
        assert coordinator.calls == [("elected", 0, 3, True)]  # the first pass, at start
        coordinator.move(1, 0)
        coordinator.move(0, 4)  # a burst: one pass after it
        assert len(coordinator.calls) == 1
        await asyncio.sleep(0)
        assert coordinator.calls[1:] == [("elected", 0, 4, True), ("elected", 1, 0, True)]
        coordinator.move(0, None)
        await asyncio.sleep(0)
        assert coordinator.calls[3:] == [("resigned", 0)]
        coordinator.cluster.topics = {}  # the topic deleted
        await asyncio.sleep(0)
        assert coordinator.calls[4:] == [("resigned", 1)]
        assert coordinator.elections.led() == {}
        coordinator.elections.stop()
        coordinator.move(0, 5)
        await asyncio.sleep(0)
        assert coordinator.calls[5:] == []

    asyncio.run(scenario())


def test_first_slices_in_place_stop_at_the_passes_budget() -> None:
    async def scenario() -> None:
        coordinator = Coordinator(ClusterView(), 3)
        coordinator.led = {0: 1, 1: 1, 2: 1}
        coordinator.slow = IN_PLACE_BUDGET_S
        coordinator.elections.start(asyncio.get_running_loop())
        assert [call[3] for call in coordinator.calls] == [True, False, False]

    asyncio.run(scenario())
