"""The controller's elections (kafkapy.server.leadership) against a model of Kafka's rules, with
Hypothesis: brokers going down and coming back one at a time, reassignments, preferred and
unclean elections, on partitions of one to four replicas, with unclean.leader.election.enable on
or off. The model is written as Kafka's ZooKeeper controller processes events
(KafkaController.onBrokerFailure/onBrokerStartup, moveReassignedPartitionLeaderIfRequired,
processReplicaLeaderElection; PartitionLeaderElectionAlgorithms), with kafkapy's ISR: every live
replica while there is a leader (kafkapy does not replicate, so a live replica is caught up), the
last in-sync replica kept when the leader goes with no other. The real controller writes to a
MemoryStore; after each event its state must equal the model's, and a further pass write nothing.
The auto rebalance's choice (``imbalanced``) is held to a plain reading of
KafkaController.checkAndTriggerAutoLeaderRebalance."""

from __future__ import annotations

import asyncio
import uuid

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kafkapy.server.leadership import PartitionLeadership, imbalanced
from kafkapy.server.services import NO_LEADER, ClusterView, Election, EpochOwed
from kafkapy.store import BrokerRegistration, MemoryStore, PartitionState, TopicInfo

BROKERS = (1, 2, 3, 4)
TOPIC = "m"


@attrs.define
class Model:
    """One partition as Kafka's controller keeps it."""

    replicas: tuple[int, ...]
    leader: int
    epoch: int
    isr: list[int]

    def caught_up(self, live: set[int]) -> None:
        """With a leader, every live replica is in sync (kafkapy: one shared log)."""
        if self.leader != NO_LEADER:
            self.isr = [r for r in self.replicas if r in live]

    def elect(self, leader: int) -> None:
        if leader != self.leader:
            self.leader, self.epoch = leader, self.epoch + 1


def offline_election(model: Model, live: set[int], unclean: bool) -> int:
    """PartitionLeaderElectionAlgorithms.offlinePartitionLeaderElection."""
    for replica in model.replicas:
        if replica in live and replica in model.isr:
            return replica
    if unclean:
        return next((r for r in model.replicas if r in live), NO_LEADER)
    return NO_LEADER


class Elections(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.store = MemoryStore()
        self.view = ClusterView()
        self.view.controller_id = 1
        self.controller = PartitionLeadership(self.store, self.view, 1, self.loop)
        self.live: set[int] = set(BROKERS)
        self.unclean = False
        self.model: Model | None = None

    def teardown(self) -> None:
        self.loop.close()

    @initialize(replicas=st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True),
                down=st.sets(st.sampled_from(BROKERS)), unclean=st.booleans())
    def create(self, replicas: list[int], down: set[int], unclean: bool) -> None:
        """A new partition: its first live replica leads (Kafka's NewPartition -> OnlinePartition)."""
        self.live -= down
        self.unclean = unclean
        self.controller.unclean = lambda topic: self.unclean
        self.store.create_topic(TOPIC, {0: tuple(replicas)})
        leader = next((r for r in replicas if r in self.live), NO_LEADER)
        self.model = Model(tuple(replicas), leader, 0, [r for r in replicas if r in self.live])
        self.settle()

    # --- the events --------------------------------------------------------------------------

    @rule(broker=st.sampled_from(BROKERS))
    def broker_fails(self, broker: int) -> None:
        model = self.model
        assert model is not None
        if broker not in self.live:
            return
        self.live.discard(broker)
        if not model.isr:  # never had a live replica: still a new partition
            pass
        elif model.leader == broker:  # onReplicasBecomeOffline: an offline election
            leader = offline_election(model, self.live, self.unclean)
            model.elect(leader)
            if leader == NO_LEADER:
                model.isr = [broker] if broker in model.isr else model.isr[:1]  # never empty
        elif broker in model.isr and len(model.isr) > 1:
            model.isr.remove(broker)
        model.caught_up(self.live)
        self.settle()

    @rule(broker=st.sampled_from(BROKERS))
    def broker_starts(self, broker: int) -> None:
        model = self.model
        assert model is not None
        if broker in self.live:
            return
        self.live.add(broker)
        if not model.isr:  # a new partition's first live replica
            model.elect(next((r for r in model.replicas if r in self.live), NO_LEADER))
        elif model.leader == NO_LEADER:  # onBrokerStartup: triggerOnlinePartitionStateChange
            model.elect(offline_election(model, self.live, self.unclean))
        model.caught_up(self.live)
        self.settle()

    @rule(on=st.booleans())
    def set_unclean(self, on: bool) -> None:
        """unclean.leader.election.enable changes: an offline partition may elect at once."""
        model = self.model
        assert model is not None
        self.unclean = on
        if model.leader == NO_LEADER and model.isr:
            model.elect(offline_election(model, self.live, on))
            model.caught_up(self.live)
        self.controller.topic_changed(TOPIC)
        self.settle()

    @precondition(lambda self: self.model is not None and self.model.leader != NO_LEADER)
    @rule(wanted=st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True))
    def reassign(self, wanted: list[int]) -> None:
        """A completed reassignment (kafkapy completes them at once; Kafka needs the target caught
        up, so only while the partition has a leader and some target replica is live)."""
        model = self.model
        assert model is not None
        new = tuple(wanted)
        if new == model.replicas or not any(r in self.live for r in new):
            return
        previous, epoch = model.replicas, model.epoch
        model.replicas = new
        if model.leader not in new:  # moveReassignedPartitionLeaderIfRequired: reassign election
            model.leader = next(r for r in new if r in self.live)  # every live target is in sync
        model.epoch = epoch + 1  # a leader kept still gets a new epoch (updateLeaderEpoch)
        model.caught_up(self.live)
        self.store.reassign_partitions(TOPIC, {0: new})
        self.refresh()
        self.controller.owe_epochs({(TOPIC, 0): EpochOwed(previous, new, epoch + 1)})
        self.settle()

    @rule()
    def preferred_election(self) -> None:
        model = self.model
        assert model is not None
        first = model.replicas[0]
        if model.leader != first and first in self.live and first in model.isr:
            model.elect(first)
            model.caught_up(self.live)
        self.controller.elect(Election.PREFERRED, [(TOPIC, 0)])
        self.settle()

    @rule()
    def unclean_election(self) -> None:
        model = self.model
        assert model is not None
        if model.leader == NO_LEADER:  # ElectLeaders' unclean: the offline election, unclean allowed
            model.elect(offline_election(model, self.live, True))
            model.caught_up(self.live)
        self.controller.elect(Election.UNCLEAN, [(TOPIC, 0)])
        self.settle()

    # --- the controller ----------------------------------------------------------------------

    def refresh(self) -> None:
        self.view.brokers = [BrokerRegistration(b, ()) for b in sorted(self.live)]
        self.view.topics = self.store.topics()
        self.view.partition_states = self.store.partition_states()

    def settle(self) -> None:
        """The controller's passes until one writes nothing (two at most)."""
        for _ in range(3):
            self.refresh()
            writes = self.controller.changes()
            if not writes:
                return
            self.controller._write(writes)
        raise AssertionError(f"the controller does not settle: {self.controller.changes()}")

    @invariant()
    def the_controller_wrote_the_model(self) -> None:
        model = self.model
        if model is None:
            return
        state = self.store.partition_states()[TOPIC, 0]
        assert (state.leader, state.leader_epoch, list(state.isr)) == (model.leader, model.epoch, model.isr)
        if state.leader != NO_LEADER:
            assert state.leader in self.live and state.leader in state.isr
        led = self.view.leadership(TOPIC, 0)
        assert led == (state.leader, state.leader_epoch)  # what Metadata and the data plane answer


Elections.TestCase.settings = settings(max_examples=400, stateful_step_count=30, deadline=None)
test_elections_follow_kafkas_rules = Elections.TestCase


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True),
                          st.sampled_from((NO_LEADER, *BROKERS)), st.sets(st.sampled_from(BROKERS))),
                min_size=1, max_size=12),
       st.sets(st.sampled_from(BROKERS)), st.integers(0, 100))
def test_the_auto_rebalance_picks_as_kafka(partitions: list[tuple[list[int], int, set[int]]], live: set[int],
                                           percentage: int) -> None:
    topics = {TOPIC: TopicInfo(TOPIC, uuid.uuid4(), {i: tuple(r) for i, (r, _, _) in enumerate(partitions)})}
    states = {(TOPIC, i): PartitionState(leader, 3, tuple(isr))
              for i, (_, leader, isr) in enumerate(partitions)}
    expected = set()
    for broker in BROKERS:
        preferred = [i for i, (r, _, _) in enumerate(partitions) if r[0] == broker]
        if not preferred:
            continue
        not_led = [i for i in preferred if partitions[i][1] != broker]
        if len(not_led) / len(preferred) > percentage / 100:
            expected |= {(TOPIC, i) for i in not_led if broker in live and broker in partitions[i][2]}
    assert set(imbalanced(topics, states, live, percentage)) == expected
