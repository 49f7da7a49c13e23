"""The controller's pass looks only at what changed since the pass before (kafkapy.server.
leadership's fast path): whatever the sequence of topic creations, deletions, partition additions
and reassignments, brokers leaving and coming back, the controller moving away and back, writes
that land or are lost and views that lag, it asks for exactly the writes a plain pass over every
partition asks for; and its work follows the change, not the cluster."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkapy.server.leadership import PartitionLeadership
from kafkapy.server.services import ClusterView, EpochOwed
from kafkapy.store import BrokerRegistration, MemoryStore

BROKERS = (1, 2, 3)
NAMES = ("a", "b", "c", "d")
replica_lists = st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True).map(tuple)


class SettledTopics(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = MemoryStore()
        self.loop = asyncio.new_event_loop()
        self.view = ClusterView()
        self.view.controller_id = 1
        self.controller = PartitionLeadership(self.store, self.view, 1, self.loop)
        self.live = set(BROKERS)
        # What the store's watches deliver (snapshots of one lineage), as a broker's view gets them.
        self.delivered: dict[str, Any] = {}
        self.store.watch_topics(lambda topics: self.delivered.__setitem__("topics", topics))
        self.store.watch_partition_states(lambda states: self.delivered.__setitem__("states", states))
        self.refresh(snapshots=True)

    def teardown(self) -> None:
        self.loop.close()

    def plain(self) -> PartitionLeadership:
        """A controller with nothing settled yet, over the same view and owing the same epochs:
        the plain pass."""
        plain = PartitionLeadership(self.store, self.view, 1, self.loop)
        plain._owed = dict(self.controller._owed)
        return plain

    @rule(name=st.sampled_from(NAMES), partitions=st.lists(replica_lists, min_size=1, max_size=3))
    def create(self, name: str, partitions: list[tuple[int, ...]]) -> None:
        if name not in self.store.topics():
            self.store.create_topic(name, dict(enumerate(partitions)))

    @rule(name=st.sampled_from(NAMES), more=st.lists(replica_lists, min_size=1, max_size=2))
    def add_partitions(self, name: str, more: list[tuple[int, ...]]) -> None:
        topics = self.store.topics()
        if name in topics:
            first = len(topics[name].partitions)
            self.store.add_partitions(name, {first + i: replicas for i, replicas in enumerate(more)})

    @rule(name=st.sampled_from(NAMES), replicas=replica_lists)
    def reassign_without_debt(self, name: str, replicas: tuple[int, ...]) -> None:
        """A replica list rewritten with no epoch owed (a leader moved on purpose: move_leader)."""
        if name in self.store.topics():
            self.store.reassign_partitions(name, {0: replicas})

    @rule(controller=st.sampled_from((1, 2)))
    def elect(self, controller: int) -> None:
        """The view's controller: this broker (1) or another one, which owes nothing."""
        self.view.controller_id = controller

    @rule(name=st.sampled_from(NAMES))
    def delete(self, name: str) -> None:
        if name in self.store.topics():
            self.store.delete_topic(name)

    @rule(name=st.sampled_from(NAMES), replicas=replica_lists)
    def reassign(self, name: str, replicas: tuple[int, ...]) -> None:
        """A completed reassignment of partition 0: new replicas, and the next epoch owed."""
        topics = self.store.topics()
        state = self.store.partition_states().get((name, 0))
        if name in topics and state is not None and topics[name].partitions[0] != replicas:
            self.store.reassign_partitions(name, {0: replicas})
            self.controller.owe_epochs({(name, 0): EpochOwed(topics[name].partitions[0], replicas,
                                                             state.leader_epoch + 1)})

    @rule(broker=st.sampled_from(BROKERS))
    def toggle(self, broker: int) -> None:
        self.live ^= {broker}

    @rule(snapshots=st.booleans())
    def refresh(self, snapshots: bool) -> None:
        """The view catches up with the store: with what its watches delivered, or with plain
        dicts read anew (which share nothing with what the last pass read)."""
        self.view.brokers = [BrokerRegistration(b, ()) for b in sorted(self.live)]
        if snapshots:
            self.view.topics = self.delivered["topics"]
            self.view.partition_states = self.delivered["states"]
        else:
            self.view.topics = self.store.topics()
            self.view.partition_states = self.store.partition_states()

    @rule(topics=st.booleans())
    def refresh_one(self, topics: bool) -> None:
        """Only one of the two watches has fired yet."""
        if topics:
            self.view.topics = self.delivered["topics"]
        else:
            self.view.partition_states = self.delivered["states"]

    @rule(land=st.booleans())
    def reconcile(self, land: bool) -> None:
        """A pass; its writes land in the store, or are lost (a store that failed them)."""
        writes = self.controller.changes()
        if land:
            self.controller._write(writes)

    @invariant()
    def asks_for_what_a_plain_pass_asks_for(self) -> None:
        assert self.controller.changes() == self.plain().changes(full=True)


SettledTopics.TestCase.settings = settings(max_examples=300, stateful_step_count=30, deadline=None)
test_settled_topics = SettledTopics.TestCase


def test_a_pass_looks_at_what_changed_and_at_everything_when_a_broker_goes() -> None:
    """Not vacuous: with the view fed by the store's watches, as a broker's is, a pass after one
    topic's creation among 500 looks at that topic alone; a broker's loss looks at every topic
    and moves every partition it led."""
    store = MemoryStore()
    loop = asyncio.new_event_loop()
    try:
        view = ClusterView()
        view.controller_id = 1
        view.brokers = [BrokerRegistration(b, ()) for b in BROKERS]
        store.watch_topics(lambda topics: setattr(view, "topics", topics))
        store.watch_partition_states(lambda states: setattr(view, "partition_states", states))
        controller = PartitionLeadership(store, view, 1, loop)
        for index in range(500):
            store.create_topic(f"t{index:03d}", {0: (1, 2), 1: (2, 3)})
        controller._write(controller.changes())
        assert controller.last_pass_topics == 500  # its first pass as the controller: everything
        assert controller.changes() == [] and controller.last_pass_topics == 500  # its own writes
        assert controller.changes() == [] and controller.last_pass_topics == 0
        store.create_topic("new", {0: (3,)})
        writes = controller.changes()
        assert [(topic, p) for topic, p, _, _ in writes] == [("new", 0)]
        assert controller.last_pass_topics == 1
        controller._write(writes)
        assert controller.changes() == [] and controller.last_pass_topics == 1  # the write, seen
        view.brokers = [BrokerRegistration(b, ()) for b in (1, 3)]  # broker 2 is gone
        moved = controller.changes()
        assert controller.last_pass_topics == 501
        assert {(topic, p, state.leader) for topic, p, state, _ in moved if p == 1} == {
            (f"t{index:03d}", 1, 3) for index in range(500)}
        assert len(moved) == 1000  # every ISR it was in shrinks too
    finally:
        loop.close()


def test_an_owed_epoch_waits_for_the_new_replicas_and_is_written_once() -> None:
    """A completed reassignment's epoch (kafkapy.topics.reassignment): nothing while the view still
    shows the old replicas, then one write in the next epoch, whether the leader stays or moves."""
    store = MemoryStore()
    loop = asyncio.new_event_loop()
    try:
        view = ClusterView()
        view.controller_id = 1
        view.brokers = [BrokerRegistration(b, ()) for b in BROKERS]
        controller = PartitionLeadership(store, view, 1, loop)
        store.create_topic("t", {0: (1, 2), 1: (1, 2)})
        view.topics = store.topics()
        controller._write(controller.changes())
        view.partition_states = store.partition_states()
        store.reassign_partitions("t", {0: (1, 3), 1: (2, 3)})  # partition 0 keeps its leader, 1 moves
        controller.owe_epochs({("t", 0): EpochOwed((1, 2), (1, 3), 1),
                               ("t", 1): EpochOwed((1, 2), (2, 3), 1)})
        assert controller.changes() == []  # the view still has the old replicas
        view.topics = store.topics()
        writes = controller.changes()
        assert [(topic, p, state.leader, state.leader_epoch, state.isr) for topic, p, state, _ in writes] == [
            ("t", 0, 1, 1, (1, 3)), ("t", 1, 2, 1, (2, 3))]
        controller._write(writes)
        view.partition_states = store.partition_states()
        assert controller.changes() == [] and controller._owed == {}
    finally:
        loop.close()
