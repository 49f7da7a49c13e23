"""The controller's writes of partition states, under races: two brokers that both believe they
are the controller (a handover in progress), each with its own stale view of the cluster, write
to one MemoryStore. Compare-and-set on the partition epoch must keep every epoch naming one
leader, epochs rising, and the state converging on what the live brokers imply."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.server.leadership import PartitionLeadership, next_state
from kafkapy.server.services import ClusterView, partition_leadership
from kafkapy.store import BrokerRegistration, MemoryStore, PartitionState

BROKERS = (1, 2, 3)
TOPICS = {"a": {0: (1, 2), 1: (2, 3, 1)}, "b": {0: (3,)}}


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, ())


class RacingControllers(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = MemoryStore()
        for name, partitions in TOPICS.items():
            self.store.create_topic(name, partitions)
        self.live: set[int] = set(BROKERS)
        self.loop = asyncio.new_event_loop()
        self.controllers = []
        for broker_id in (1, 2):
            view = ClusterView()
            view.controller_id = broker_id  # both think they are the controller
            self.controllers.append(PartitionLeadership(self.store, view, broker_id, self.loop))
            self.refresh(len(self.controllers) - 1)
        self.history: dict[tuple[str, int], dict[int, int]] = {}  # epoch -> leader, per partition
        self.last: dict[tuple[str, int], PartitionState] = {}

    def teardown(self) -> None:
        self.loop.close()

    @rule(broker=st.sampled_from(BROKERS))
    def toggle(self, broker: int) -> None:
        """A broker goes away or comes back (the store's truth; the views learn it later)."""
        self.live ^= {broker}

    @rule(which=st.sampled_from((0, 1)))
    def refresh(self, which: int) -> None:
        """One controller's view catches up with the store (its watches fired)."""
        view = self.controllers[which].cluster
        view.brokers = [registration(b) for b in sorted(self.live)]
        view.topics = self.store.topics()
        view.partition_states = self.store.partition_states()

    @rule(which=st.sampled_from((0, 1)))
    def reconcile(self, which: int) -> None:
        """One controller writes what its (maybe stale) view says must change."""
        controller = self.controllers[which]
        controller._write(controller.changes())

    @invariant()
    def every_epoch_names_one_leader_and_epochs_rise(self) -> None:
        for key, state in self.store.partition_states().items():
            leaders = self.history.setdefault(key, {})
            assert leaders.setdefault(state.leader_epoch, state.leader) == state.leader, (key, leaders, state)
            before = self.last.get(key)
            if before is not None:
                assert state.leader_epoch >= before.leader_epoch
                assert state.partition_epoch >= before.partition_epoch
                if state.leader != before.leader:
                    assert state.leader_epoch > before.leader_epoch
            self.last[key] = state

    @rule()
    def settle(self) -> None:
        """Both views catch up and each controller makes a pass: whatever the races before, the
        store then holds what the live brokers imply, and another pass would write nothing."""
        for which in (0, 1):
            self.refresh(which)
            self.reconcile(which)
        self.refresh(0)
        for (topic, partition), state in self.store.partition_states().items():
            assert next_state(TOPICS[topic][partition], self.live, state) is None
        assert self.controllers[0].changes() == []


RacingControllers.TestCase.settings = settings(max_examples=400, stateful_step_count=40, deadline=None)
test_racing_controllers = RacingControllers.TestCase


def test_a_refreshed_controller_settles_the_cluster() -> None:
    """After any races, a controller with an up-to-date view writes the live brokers' truth, and a
    second pass writes nothing."""
    store = MemoryStore()
    store.create_topic("t", {0: (1, 2), 1: (2, 1)})
    loop = asyncio.new_event_loop()
    try:
        view = ClusterView()
        view.controller_id = 1
        controller = PartitionLeadership(store, view, 1, loop)
        for live in ({1, 2}, {1}, {2}, {1, 2}):
            view.brokers = [registration(b) for b in sorted(live)]
            view.topics = store.topics()
            view.partition_states = store.partition_states()
            controller._write(controller.changes())
            view.partition_states = store.partition_states()
            assert controller.changes() == []
        states = store.partition_states()
        # partition 0 (1, 2): 1 leads (epoch 0), alone in the ISR once 2 goes; when 1 goes too, 2
        # comes back out of sync: no leader (epoch 1, ISR still [1]) until 1 is back (epoch 2).
        # Partition 1 (2, 1): 2 (0), 1 when 2 goes (1), none when 1 goes (2), 1 again (3): as
        # Kafka, where only an in-sync replica leads without an unclean election.
        first, second = states["t", 0], states["t", 1]
        assert (first.leader, first.leader_epoch, first.isr) == (1, 2, (1, 2))
        assert (second.leader, second.leader_epoch, second.isr) == (1, 3, (2, 1))
    finally:
        loop.close()


def test_a_stale_controller_cannot_hand_out_an_epoch_twice() -> None:
    """The race the compare-and-set is for: B read epoch 0 and saw broker 1 gone; A, newer, saw 1
    and 2 gone and wrote epoch 1 (no leader). B's write of epoch 1 (leader 2) is refused."""
    store = MemoryStore()
    store.create_topic("t", {0: (1, 2)})
    loop = asyncio.new_event_loop()
    try:
        views = []
        for broker_id in (1, 2):
            view = ClusterView()
            view.controller_id = broker_id
            view.topics = store.topics()
            views.append(PartitionLeadership(store, view, broker_id, loop))
        first, second = views
        first.cluster.brokers = [registration(1), registration(2)]
        first._write(first.changes())  # epoch 0, leader 1
        second.cluster.brokers = [registration(2)]
        second.cluster.partition_states = store.partition_states()  # B: 1 gone, state at epoch 0
        first.cluster.brokers = []
        first.cluster.partition_states = store.partition_states()
        first._write(first.changes())  # A: epoch 1, no leader
        second._write(second.changes())  # B's write, based on epoch 0, is refused
        state = store.partition_states()[("t", 0)]
        assert (state.leader, state.leader_epoch) == (-1, 1)
    finally:
        loop.close()


# --- ClusterView's cached leadership: held equal to working it out afresh ---------------------------

@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("brokers", "topics", "states", "ask")),
                          st.sets(st.sampled_from(BROKERS)), st.integers(0, 3)), max_size=40))
def test_cached_leadership_equals_the_plain_rule(steps: list[tuple[str, set[int], int]]) -> None:
    view = ClusterView()
    store = MemoryStore()
    for name, partitions in TOPICS.items():
        store.create_topic(name, partitions)
    for what, brokers, epoch in steps:
        if what == "brokers":
            view.brokers = [registration(b) for b in sorted(brokers)]
        elif what == "topics":
            view.topics = {n: i for n, i in store.topics().items() if len(n) <= epoch + 1}
        elif what == "states":
            view.partition_states = {(t, p): PartitionState(min(brokers, default=-1), epoch, tuple(brokers))
                                     for t, parts in TOPICS.items() for p in parts}
        for topic, parts in TOPICS.items():
            for partition in (*parts, 9):
                info = view.topics.get(topic)
                replicas = info.partitions.get(partition) if info is not None else None
                live = {b.broker_id for b in view.brokers}
                plain = None if replicas is None else partition_leadership(
                    replicas, live, view.partition_states.get((topic, partition)))
                assert view.leadership(topic, partition) == plain


def test_a_replica_in_a_failed_log_dir_counts_as_down_for_its_partition_only() -> None:
    """KIP-112 (Kafka's controller after a log dir event, ReplicationControlManager's
    handleDirectoriesOffline): the leader's replica goes offline, so leadership moves to the next
    live in-sync replica and the ISR shrinks; the broker's other partitions keep it. With no other
    in-sync replica: leader -1, the last ISR kept. A change of the offline set alone makes the pass
    look at every topic, as a broker leaving does."""
    store = MemoryStore()
    store.create_topic("t", {0: (1, 2), 1: (1, 2)})
    store.create_topic("solo", {0: (1,)})
    loop = asyncio.new_event_loop()
    try:
        view = ClusterView()
        view.controller_id = 1
        controller = PartitionLeadership(store, view, 1, loop)
        view.brokers = [registration(1), registration(2)]
        view.topics = store.topics()
        view.offline_replicas = store.offline_replicas()
        view.partition_states = store.partition_states()
        controller._write(controller.changes())
        view.partition_states = store.partition_states()
        assert controller.changes() == []
        store.set_offline_replicas(1, [("t", 0), ("solo", 0)])
        view.offline_replicas = store.offline_replicas()
        assert view.leadership("t", 0) == (-1, 0)  # until the controller writes the election
        controller._write(controller.changes())
        view.partition_states = states = store.partition_states()
        assert (states["t", 0].leader, states["t", 0].leader_epoch, states["t", 0].isr) == (2, 1, (2,))
        assert (states["t", 1].leader, states["t", 1].isr) == (1, (1, 2))
        solo = states["solo", 0]
        assert (solo.leader, solo.leader_epoch, solo.isr) == (-1, 1, (1,))
        assert view.leadership("t", 0) == (2, 1) and view.in_sync_replicas("t", 0) == [2]
        assert controller.changes() == []
        with pytest.raises(KafkaApiError) as refused:  # the cluster fault cannot move it back there
            loop.run_until_complete(controller.move_leader("t", 0, 1))
        assert refused.value.code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        store.register_broker(registration(1))  # the broker's restart: its dirs are back
        view.offline_replicas = store.offline_replicas()
        controller._write(controller.changes())
        states = store.partition_states()
        assert states["t", 0].isr == (1, 2) and states["t", 0].leader == 2  # no move back by itself
        assert (states["solo", 0].leader, states["solo", 0].leader_epoch) == (1, 2)
    finally:
        loop.close()
