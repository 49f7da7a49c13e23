"""The controller's part of leadership: every partition's state (leader, leader epoch, ISR) in the store.

Theory of operation
-------------------
A partition's leader is its first live replica (``services.partition_leader``). Kafka's
controller records each leader in the partition's state with a leader epoch that goes up by one
on every change, and brokers and clients use the epoch to fence whoever still talks to the old
leader (KIP-101, KIP-320). Here the same state lives in the store's PartitionStateStore role
(ZooKeeper: Kafka's /brokers/topics/<t>/partitions/<p>/state).

Who writes: the controller only (the broker the store elected, ``cluster.controller_id``), as in
Kafka. Every broker runs a ``PartitionLeadership``; it acts only while its broker is the
controller. A reconcile compares, for each partition of the cluster view, the state the view
holds with ``next_state`` (the table below) and writes the difference with a compare-and-set on
the partition epoch. That makes it race-free without a lock:

* a write based on a stale read fails (PartitionStateConflict) instead of losing an update, and
  the store's partition-state watch, which brought the newer state, asks for a reconcile again;
* a controller that lost its place in the middle of a pass (a new one was elected) can land at
  most the writes it had read for; the new controller reads those states and corrects them, and
  epochs only ever go up, so no epoch is handed out twice for different leaders;
* a burst of changes (brokers, topics, controller, states) folds into at most one more pass
  (``kafkapy.store.onloop.Reloader``), and a pass that finds nothing to change writes nothing.

Fast path: a pass works on what changed since the pass before, as Kafka's controller works on
deltas. ``next_state`` is a function of a topic's replicas, its partitions' states, the live
brokers and the epochs owed, so a topic none of those changed for would get nothing again. The
view's topics and states are snapshots of one lineage (kafkapy.store.base, "Snapshots"), so
``changed_keys`` between the ones the last pass read and today's names the changed topics and
partitions in time proportional to the change. A pass looks at those topics, the topics the last
pass asked writes for (a write may be lost: it is looked at again until the view shows it
settled) and those owing an epoch; it looks at every topic when the live brokers change (a broker's
loss moves every partition it led, and changes every ISR it is in), when this broker has just
become the controller, and for ``changes(full=True)``, the plain pass. At 2,000 topics the plain
pass per creation made creating them O(N^2) (benchmarks/leadership.py; docs/performance.md);
tests/server/test_leadership_settled.py holds the two passes equal.

What ``next_state`` writes, given the stored state and the leader the live brokers imply:

=======================================  ===================  =======================================
stored state                             implied leader        written
=======================================  ===================  =======================================
none                                     any (-1 included)     leader, epoch 0, ISR = live replicas
leader L, epoch below one owed (below)   any                   the implied leader, epoch + 1,
                                                               ISR = live replicas
leader L                                 L, same ISR           nothing
leader L                                 L, another ISR        same leader and epoch, the new ISR
leader L                                 M != L                M, epoch + 1, ISR = live replicas
=======================================  ===================  =======================================

An epoch is owed when a partition reassignment completes (``owe_epochs``, from
kafkapy.topics.reassignment): Kafka's controller bumps the leader epoch then even when the
leader stays, so whoever still works from the old replica set is fenced. The reconcile writes it,
so partition states keep one writer, whose writes land (and reach every broker's view) in order.
It is written only once the view shows the new replicas (a pass on a view that still has the old
ones would bump the old leader's epoch, and the leader move after it would bump it again). The
debt is paid once the view shows the epoch, by that write or by a leader move; it is forgotten
when the partition's replicas become something else, when the partition goes, or when this
broker stops being the controller.

Until the controller has written a move, ``services.partition_leadership`` answers no leader for
the partition, so no broker serves it under an epoch that is not its own.

Moving a leader on purpose (``move_leader``, the tests' cluster fault) is Kafka's reassignment
plus preferred-leader election in one: the controller rewrites the partition's replica list with
the new leader first (the preferred replica), and the reconcile that the topics watch asks for
writes the move through the table above (last row: epoch + 1). The leader rule stays the one
rule; the new leader keeps the partition while it is up, and gets it back after a restart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.server.services import INITIAL_LEADER_EPOCH, ClusterView, EpochOwed, partition_leader
from kafkapy.store.base import (
    NO_PARTITION_EPOCH,
    PartitionState,
    PartitionStateConflict,
    PartitionStateStore,
    TopicInfo,
    TopicStore,
    UnknownTopic,
)
from kafkapy.store.onloop import Reloader
from kafkapy.store.persistent import changed_keys

__all__ = ["ControllerStore", "PartitionLeadership", "led_by", "next_state"]

log = logging.getLogger("kafkapy.server.leadership")

# One change to write: (topic, partition, the new state, the partition epoch it replaces).
_Write = tuple[str, int, PartitionState, int]


def next_state(replicas: Sequence[int], live: Collection[int], current: PartitionState | None,
               owed_epoch: int | None = None) -> PartitionState | None:
    """The state a partition should have now (the module's table), or None if ``current`` is it.
    ``owed_epoch``: the leader epoch a completed reassignment owes the partition, if any."""
    leader = partition_leader(replicas, live)
    isr = tuple(r for r in replicas if r in live)
    if current is None:
        return PartitionState(leader, INITIAL_LEADER_EPOCH, isr)
    if owed_epoch is not None and current.leader_epoch < owed_epoch:
        return attrs.evolve(current, leader=leader, leader_epoch=current.leader_epoch + 1, isr=isr)
    if current.leader == leader:
        return None if tuple(current.isr) == isr else attrs.evolve(current, isr=isr)
    return attrs.evolve(current, leader=leader, leader_epoch=current.leader_epoch + 1, isr=isr)


def led_by(replicas: Sequence[int], leader: int) -> tuple[int, ...]:
    """``replicas`` reordered so that ``leader`` is the preferred (first) replica, the others in
    their order; a broker that is not a replica takes the old preferred one's place (the
    replication factor stays)."""
    if leader in replicas:
        return (leader, *(r for r in replicas if r != leader))
    return (leader, *replicas[1:])


@attrs.frozen(eq=False)
class _Seen:
    """The view as one pass read it: the next pass looks at what changed since."""

    topics: Mapping[str, TopicInfo]
    states: Mapping[tuple[str, int], PartitionState]
    live: frozenset[int]


class ControllerStore(PartitionStateStore, TopicStore, Protocol):
    """What the controller writes: partition states, and replica lists when it moves a leader."""


class PartitionLeadership:
    """Writes partition states while this broker is the controller (see the module's docstring)."""

    def __init__(self, store: ControllerStore, cluster: ClusterView, broker_id: int,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self.cluster = cluster
        self.broker_id = broker_id
        self._reloader = Reloader(loop, self._reconcile, "partition leadership")
        self._seen: _Seen | None = None  # what the last pass as the controller read (the fast path)
        self._unsettled: set[str] = set()  # topics the last pass asked writes for
        self._owed: dict[tuple[str, int], EpochOwed] = {}  # (topic, partition) -> its debt
        self.last_pass_topics = 0  # how many topics the last pass looked at (tests, benchmarks)

    def owe_epochs(self, owed: Mapping[tuple[str, int], EpochOwed]) -> None:
        """Partition reassignments completed: each partition's state must reach the leader epoch
        owed (the module's table). On the loop; nothing while not the controller."""
        if self.cluster.controller_id != self.broker_id:
            return
        self._owed.update(owed)  # a later reassignment's debt replaces an earlier one's
        self.request()

    def request(self) -> None:
        """Something changed (brokers, topics, the controller, states): reconcile soon. Any thread."""
        self._reloader.request()

    async def idle(self) -> None:
        await self._reloader.idle()

    def close(self) -> None:
        self._reloader.close()

    def changes(self, full: bool = False) -> list[_Write]:
        """What the cluster view says must be written now (nothing unless this broker is the
        controller), by topic and partition. ``full``: look at every topic (the plain path)."""
        cluster = self.cluster
        owed = self._owed
        if cluster.controller_id != self.broker_id:
            owed.clear()
            self._seen = None
            self._unsettled.clear()
            return []
        seen = self._seen
        now = _Seen(cluster.topics, cluster.partition_states, cluster.live_broker_ids())
        topics, states, live = now.topics, now.states, now.live
        for key in [(t, p) for t, p in owed if t not in topics or p not in topics[t].partitions]:
            del owed[key]
        names: Collection[str]
        if full or seen is None or seen.live != live:
            names = list(topics)
        else:
            changed = changed_keys(seen.topics, topics)
            changed.update(topic for topic, _ in changed_keys(seen.states, states))
            changed.update(self._unsettled)
            changed.update(topic for topic, _ in owed)
            names = changed
        self._seen = now
        self._unsettled = unsettled = set()
        self.last_pass_topics = len(names)
        writes: list[_Write] = []
        for name in sorted(names):
            info = topics.get(name)
            if info is None:
                continue  # deleted: its states went with it
            before = len(writes)
            for index, replicas in info.partitions.items():
                current = states.get((name, index))
                epoch_owed = None
                debt = owed.get((name, index))
                if debt is not None:
                    if (current is not None and current.leader_epoch >= debt.leader_epoch) or \
                            replicas not in (debt.previous, debt.replicas):
                        del owed[name, index]  # paid, or the replicas changed again since
                    elif replicas == debt.replicas:
                        epoch_owed = debt.leader_epoch
                    # else the view still shows the replicas from before: not yet
                wanted = next_state(replicas, live, current, epoch_owed)
                if wanted is not None:
                    expected = NO_PARTITION_EPOCH if current is None else current.partition_epoch
                    writes.append((name, index, wanted, expected))
            if len(writes) > before:  # looked at again next pass, whatever becomes of these writes
                unsettled.add(name)
        return writes

    async def move_leader(self, topic: str, partition: int, to: int) -> tuple[int, ...]:
        """Make live broker ``to`` the leader of ``topic``-``partition`` (module docstring) and
        return the partition's new replica list; the state follows from the reconcile. Refused
        with Kafka's codes: NOT_CONTROLLER, UNKNOWN_TOPIC_OR_PARTITION, ELIGIBLE_LEADERS_NOT_AVAILABLE
        (one live broker: nowhere to move), BROKER_NOT_AVAILABLE (``to`` is not a live broker),
        ELECTION_NOT_NEEDED (it leads already)."""
        cluster = self.cluster
        if cluster.controller_id != self.broker_id:
            raise KafkaApiError(ErrorCode.NOT_CONTROLLER, f"broker {self.broker_id} is not the controller "
                                f"(broker {cluster.controller_id} is)")
        info = cluster.topics.get(topic)
        replicas = info.partitions.get(partition) if info is not None else None
        if replicas is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{partition}")
        live = cluster.live_broker_ids()
        if len(live) == 1:
            raise KafkaApiError(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"one live broker ({min(live)}): "
                                f"there is no other to move {topic}-{partition}'s leader to")
        if to not in live:
            raise KafkaApiError(ErrorCode.BROKER_NOT_AVAILABLE,
                                f"broker {to} is not a live broker (live: {sorted(live)})")
        if partition_leader(replicas, live) == to:
            raise KafkaApiError(ErrorCode.ELECTION_NOT_NEEDED, f"{topic}-{partition} is led by broker {to} "
                                f"already (live brokers: {sorted(live)})")
        reassigned = led_by(replicas, to)
        try:
            await asyncio.to_thread(self.store.reassign_partitions, topic, {partition: reassigned})
        except UnknownTopic:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                f"no partition {topic}-{partition}") from None
        log.info("%s-%d: moving the leader to broker %d (replicas %s)", topic, partition, to,
                 list(reassigned))
        return reassigned

    async def _reconcile(self) -> None:
        writes = self.changes()
        if writes:
            await asyncio.to_thread(self._write, writes)

    def _write(self, writes: list[_Write]) -> None:
        for topic, partition, state, expected in writes:
            try:
                written = self.store.set_partition_state(topic, partition, state, expected)
            except PartitionStateConflict:
                continue  # someone wrote first; the states watch brings it and asks again
            except UnknownTopic:
                continue  # deleted meanwhile
            log.debug("%s-%d: leader %d, leader epoch %d, isr %s", topic, partition, written.leader,
                     written.leader_epoch, list(written.isr))
