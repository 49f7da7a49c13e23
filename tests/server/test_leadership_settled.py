"""The controller's pass skips topics it found settled (kafkapy.server.leadership's fast path):
whatever the sequence of topic creations and deletions, brokers leaving and coming back, writes
that land and views that lag, it asks for exactly the writes a plain pass over every partition
asks for."""

from __future__ import annotations

import asyncio

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
        self.refresh()

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

    @rule()
    def refresh(self) -> None:
        """The view catches up with the store (its watches fired)."""
        self.view.brokers = [BrokerRegistration(b, ()) for b in sorted(self.live)]
        self.view.topics = self.store.topics()
        self.view.partition_states = self.store.partition_states()

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


def test_a_settled_topic_is_not_looked_at_again() -> None:
    """Not vacuous: once settled, a pass walks only what changed (here: one new topic)."""
    store = MemoryStore()
    loop = asyncio.new_event_loop()
    try:
        view = ClusterView()
        view.controller_id = 1
        view.brokers = [BrokerRegistration(1, ())]
        controller = PartitionLeadership(store, view, 1, loop)
        for index in range(50):
            store.create_topic(f"t{index}", {0: (1,), 1: (1,)})
        view.topics = store.topics()
        controller._write(controller.changes())
        view.partition_states = store.partition_states()
        assert controller.changes() == []
        assert len(controller._settled) == 50
        store.create_topic("new", {0: (1,)})
        view.topics = store.topics()
        walked = [write[0] for write in controller.changes()]
        assert walked == ["new"]
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
