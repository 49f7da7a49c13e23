"""The controller's part of leadership: every partition's state (leader, leader epoch, ISR) in the store.

Theory of operation
-------------------
A partition's leader is the one the controller wrote in its state, as in Kafka: Metadata and the
data plane read it (``services.partition_leadership``), and it stays where it is until one of
Kafka's controller's elections moves it (Election.scala, PartitionLeaderElectionAlgorithms):

* the leader goes offline: the first replica, in assignment order, that is live and in the ISR;
  none: no leader, unless the topic's ``unclean.leader.election.enable`` allows the first live
  replica (an unclean election);
* a reassignment whose target does not hold the leader, or whose leader is down: the first live,
  in-sync target replica. A reassignment that keeps a live leader keeps it (the epoch goes up:
  below);
* a preferred election (ElectLeaders, a leader move, the auto rebalance): the first replica, if it
  is live and in the ISR;
* an unclean election asked for (ElectLeaders): a leaderless partition's first live replica.

"Live" is per partition: a replica a broker holds in a failed log dir (KIP-112, the store's
LogDirStore; ``ClusterView.live_replicas_of``) is down for its partition as if its broker had
stopped, as Kafka's controller marks it offline after a log dir event, until the broker restarts.
On ZooKeeper the broker also queues Kafka's log dir event notification; the controller deletes
those queued once a pass has seen the offline replicas they announce, as Kafka's controller
deletes the notifications it processed (``log_dir_events_queued``).

So a broker that comes back leads nothing until an election gives it something: one leader change
per failure, not two. Each change raises the leader epoch by one, and brokers and clients use the
epoch to fence whoever still talks to the old leader (KIP-101, KIP-320). The state lives in the
store's PartitionStateStore role (ZooKeeper: Kafka's /brokers/topics/<t>/partitions/<p>/state).

The ISR. kafkapy does not replicate: an in-process cluster's brokers share one in-memory log per
partition, so a live replica is never behind its leader. The ISR is therefore every live replica
while the partition has a leader (a replica that comes back is caught up at once and joins it),
and it shrinks as replicas go. When the last in-sync replica goes, Kafka keeps it in the ISR (the
ISR never becomes empty), so the partition waits for that broker: another replica coming back is
not in sync and leads only through an unclean election. With several in-sync replicas lost in the
same pass, the one kept is the last leader. An ISR that is empty (a partition that never had a
live replica) is a new partition: its first live replica leads when one comes.

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
brokers, the epochs owed and the elections asked, so a topic none of those changed for would get
nothing again. The view's topics and states are snapshots of one lineage (kafkapy.store.base,
"Snapshots"), so ``changed_keys`` between the ones the last pass read and today's names the
changed topics and partitions in time proportional to the change. A pass looks at those topics,
the topics the last pass asked writes for (a write may be lost: it is looked at again until the
view shows it settled), those owing an epoch or asked an election; it looks at every topic when
the live brokers or the offline replicas change (a broker's loss moves every partition it led, and
changes every ISR it is in), when this broker has just become the controller, and for
``changes(full=True)``, the plain pass. At 2,000 topics the plain pass per creation made creating them O(N^2)
(benchmarks/leadership.py; docs/performance.md); tests/server/test_leadership_settled.py holds the
two passes equal.

What ``next_state`` writes: the row says who leads, from the stored state (leader L, ISR); the ISR
written is the live replicas while there is a leader, the last in-sync replica otherwise (above).

==============================  =======================================================  ==========
stored state                    leader written                                           epoch
==============================  =======================================================  ==========
none, or an empty ISR (new)     the first live replica, or none                          0 (none)
L live and a replica            L                                                        same
L down, or none                 the first replica live and in the ISR; if none, the      + 1 if the
                                first live replica when unclean elections are on; else   leader
                                none                                                     changes
L no longer a replica           the first live target replica in sync (every live one
(reassigned)                    if L is live, the live ISR members if not); else none
==============================  =======================================================  ==========

Then, on that result, an election asked for: preferred, the first replica if it is live and in
the ISR; unclean, on a partition still without a leader, the first live replica. And a state
whose leader epoch is below one owed (below) gets epoch + 1 even if nothing else changed.

An epoch is owed when a partition reassignment completes (``owe_epochs``, from
kafkapy.topics.reassignment): Kafka's controller bumps the leader epoch then even when the
leader stays, so whoever still works from the old replica set is fenced. The reconcile writes it,
so partition states keep one writer, whose writes land (and reach every broker's view) in order.
It is written only once the view shows the new replicas (a pass on a view that still has the old
ones would bump the old leader's epoch, and the leader move after it would bump it again). The
debt is paid once the view shows the epoch, by that write or by a leader move; it is forgotten
when the partition's replicas become something else, when the partition goes, or when this
broker stops being the controller. An election asked for (``elect``) waits the same way for the
replicas it was asked on, and is forgotten once a pass finds it changes nothing (done, or no
longer possible).

Until the controller has written a move, ``services.partition_leadership`` answers no leader for
the partition, so no broker serves it under an epoch that is not its own.

The auto rebalance (Kafka's ``auto.leader.rebalance.enable``, on by default): while this broker
is the controller, 5 s after it became it and then every ``leader.imbalance.check.interval.seconds``
on the broker's clock (a virtual clock moves it), for each broker, the share of the partitions it
is the preferred replica of that someone else leads; above
``leader.imbalance.per.broker.percentage`` percent, a preferred election for each of those whose
preferred replica is live and in the ISR (``imbalanced``; KafkaController's
checkAndTriggerAutoLeaderRebalance).

Moving a leader on purpose (``move_leader``, the tests' cluster fault) is Kafka's reassignment
plus preferred-leader election in one: the controller rewrites the partition's replica list with
the new leader first (the preferred replica) and asks a preferred election on that list, which
the reconcile writes (epoch + 1).
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.topic_config import LogConfig
from kafkapy.server.services import (
    INITIAL_LEADER_EPOCH,
    NO_LEADER,
    ClusterView,
    Election,
    EpochOwed,
    partition_leader,
)
from kafkapy.store.base import (
    NO_PARTITION_EPOCH,
    LogDirEventQueue,
    PartitionState,
    PartitionStateConflict,
    PartitionStateStore,
    StoreError,
    TopicInfo,
    TopicStore,
    UnknownTopic,
)
from kafkapy.store.onloop import Reloader
from kafkapy.store.persistent import changed_keys

if TYPE_CHECKING:
    from kafkapy.server.config import BrokerConfig

__all__ = ["FIRST_REBALANCE_CHECK_S", "ControllerStore", "PartitionLeadership", "Rebalance",
           "TopicLogConfigs", "imbalanced", "led_by", "next_state"]

log = logging.getLogger("kafkapy.server.leadership")

# One change to write: (topic, partition, the new state, the partition epoch it replaces).
_Write = tuple[str, int, PartitionState, int]
# The replicas an election is asked on, and those the view may still show before them.
_OnReplicas = tuple[tuple[int, ...], tuple[int, ...]]

# Kafka's controller checks the leader balance first this long after it becomes the controller.
FIRST_REBALANCE_CHECK_S = 5.0


class _Row(enum.Enum):
    """The rows of the module's table: what the stored state says about the partition."""

    NEW = "new"  # no state, or no in-sync replica ever
    LED = "led"  # the stored leader is live and a replica
    OFFLINE = "offline"  # the stored leader is down, or there is none
    REASSIGNED = "reassigned"  # the stored leader is no longer a replica


def _first(replicas: Sequence[int], eligible: Collection[int]) -> int:
    return next((r for r in replicas if r in eligible), NO_LEADER)


# A topic's unclean.leader.election.enable, or what reads it (asked only when it decides).
_Unclean = bool | Callable[[], bool]


def _elect_new(replicas: Sequence[int], live: Collection[int], current: PartitionState | None,
               unclean: _Unclean) -> int:
    return partition_leader(replicas, live)


def _keep(replicas: Sequence[int], live: Collection[int], current: PartitionState | None,
          unclean: _Unclean) -> int:
    assert current is not None
    return current.leader


def _elect_offline(replicas: Sequence[int], live: Collection[int], current: PartitionState | None,
                   unclean: _Unclean) -> int:
    """Kafka's offlinePartitionLeaderElection: the first live in-sync replica, else (unclean) the
    first live one."""
    assert current is not None
    found = _first(replicas, [r for r in current.isr if r in live])
    if found == NO_LEADER and (unclean() if callable(unclean) else unclean):
        return partition_leader(replicas, live)
    return found


def _elect_reassigned(replicas: Sequence[int], live: Collection[int], current: PartitionState | None,
                      unclean: _Unclean) -> int:
    """Kafka's reassignPartitionLeaderElection: the first live in-sync target replica; every live
    one caught up from a live leader, from a dead one only those in sync when it went."""
    assert current is not None
    return _first(replicas, live if current.leader in live else [r for r in current.isr if r in live])


# The module's table: who leads, by what the stored state says.
_ELECTIONS: dict[_Row, Callable[[Sequence[int], Collection[int], PartitionState | None, _Unclean], int]] = {
    _Row.NEW: _elect_new,
    _Row.LED: _keep,
    _Row.OFFLINE: _elect_offline,
    _Row.REASSIGNED: _elect_reassigned,
}


def _row(replicas: Sequence[int], live: Collection[int], current: PartitionState | None) -> _Row:
    if current is None or not current.isr:
        return _Row.NEW
    if current.leader != NO_LEADER and current.leader not in replicas:
        return _Row.REASSIGNED
    return _Row.LED if current.leader in live else _Row.OFFLINE


def _last_in_sync(replicas: Sequence[int], current: PartitionState | None) -> tuple[int, ...]:
    """The ISR of a partition left without a leader: Kafka never empties it, so the last in-sync
    replica stays (the last leader when it was one)."""
    if current is None:
        return ()
    kept = [r for r in current.isr if r in replicas]
    if current.leader in kept:
        return (current.leader,)
    return tuple(kept[:1])


def next_state(replicas: Sequence[int], live: Collection[int], current: PartitionState | None,
               owed_epoch: int | None = None, election: Election | None = None,
               unclean: _Unclean = False) -> PartitionState | None:
    """The state a partition should have now (the module's table), or None if ``current`` is it.
    ``owed_epoch``: the leader epoch a completed reassignment owes the partition, if any;
    ``election``: an election asked for; ``unclean``: the topic's unclean.leader.election.enable
    (or what reads it, asked only when it decides)."""
    leader = _ELECTIONS[_row(replicas, live, current)](replicas, live, current, unclean)
    isr = tuple(r for r in replicas if r in live) if leader != NO_LEADER else _last_in_sync(replicas, current)
    if election is Election.PREFERRED and replicas and replicas[0] in isr and replicas[0] in live:
        leader = replicas[0]
    elif election is Election.UNCLEAN and leader == NO_LEADER:
        leader = partition_leader(replicas, live)
        if leader != NO_LEADER:
            isr = tuple(r for r in replicas if r in live)
    if current is None:
        return PartitionState(leader, INITIAL_LEADER_EPOCH, isr)
    owed = owed_epoch is not None and current.leader_epoch < owed_epoch
    if leader != current.leader or owed:
        return attrs.evolve(current, leader=leader, leader_epoch=current.leader_epoch + 1, isr=isr)
    return None if tuple(current.isr) == isr else attrs.evolve(current, isr=isr)


def imbalanced(topics: Mapping[str, TopicInfo], states: Mapping[tuple[str, int], PartitionState],
               live: Collection[int], percentage: int) -> list[tuple[str, int]]:
    """The partitions the auto rebalance elects their preferred leader for (KafkaController's
    checkAndTriggerAutoLeaderRebalance): per broker, the partitions it is the preferred replica
    of; if the share of them led by another broker is above ``percentage`` percent, those of
    them whose preferred replica is live and in the ISR."""
    preferred_by: dict[int, list[tuple[str, int]]] = {}
    for name, info in topics.items():
        for index, replicas in info.partitions.items():
            if replicas:
                preferred_by.setdefault(replicas[0], []).append((name, index))
    chosen: list[tuple[str, int]] = []
    for broker, keys in sorted(preferred_by.items()):
        elsewhere = [key for key in keys if key in states and states[key].leader != broker]
        if len(elsewhere) / len(keys) > percentage / 100:
            chosen.extend(key for key in elsewhere if broker in live and broker in states[key].isr)
    return sorted(chosen)


def led_by(replicas: Sequence[int], leader: int) -> tuple[int, ...]:
    """``replicas`` reordered so that ``leader`` is the preferred (first) replica, the others in
    their order; a broker that is not a replica takes the old preferred one's place (the
    replication factor stays)."""
    if leader in replicas:
        return (leader, *(r for r in replicas if r != leader))
    return (leader, *replicas[1:])


@attrs.frozen
class Rebalance:
    """Kafka's auto leader rebalance settings (auto.leader.rebalance.enable and the two below)."""

    enable: bool = True
    interval_s: float = 300.0  # leader.imbalance.check.interval.seconds
    percentage: int = 10  # leader.imbalance.per.broker.percentage

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Rebalance:
        return cls(bool(config["auto.leader.rebalance.enable"]),
                   float(config["leader.imbalance.check.interval.seconds"]),
                   int(config["leader.imbalance.per.broker.percentage"]))


@attrs.frozen
class _Asked:
    """An election asked for: written once the view shows ``replicas`` (not while it shows
    ``previous``), forgotten once it changes nothing."""

    kind: Election
    replicas: tuple[int, ...]
    previous: tuple[int, ...]


@attrs.frozen(eq=False)
class _Seen:
    """The view as one pass read it: the next pass looks at what changed since."""

    topics: Mapping[str, TopicInfo]
    states: Mapping[tuple[str, int], PartitionState]
    live: frozenset[int]
    offline: Mapping[int, frozenset[tuple[str, int]]]


@runtime_checkable
class TopicLogConfigs(Protocol):
    """What the controller reads of the configs module (TOPIC_CONFIGS_CAPABILITY): a topic's
    unclean.leader.election.enable, and when it changes."""

    def log_config(self, topic: str) -> LogConfig: ...
    def watch_log_configs(self, callback: Callable[[str, LogConfig], None]) -> Callable[[], None]: ...


class ControllerStore(PartitionStateStore, TopicStore, Protocol):
    """What the controller writes: partition states, and replica lists when it moves a leader."""


class PartitionLeadership:
    """Writes partition states while this broker is the controller (see the module's docstring)."""

    def __init__(self, store: ControllerStore, cluster: ClusterView, broker_id: int,
                 loop: asyncio.AbstractEventLoop, rebalance: Rebalance | None = None,
                 log_dir_events: LogDirEventQueue | None = None) -> None:
        self.store = store
        # Kafka's log dir event notifications, deleted once a pass has handled them (ZooKeeper)
        self.log_dir_events = log_dir_events
        self._events_queued: tuple[str, ...] = ()
        self.cluster = cluster
        self.broker_id = broker_id
        self.loop = loop
        self.rebalance = rebalance if rebalance is not None else Rebalance(enable=False)
        # A topic's unclean.leader.election.enable (the broker sets it once its configs module runs).
        self.unclean: Callable[[str], bool] = lambda topic: False
        self._reloader = Reloader(loop, self._reconcile, "partition leadership")
        self._seen: _Seen | None = None  # what the last pass as the controller read (the fast path)
        self._unsettled: set[str] = set()  # topics the last pass asked writes for
        self._owed: dict[tuple[str, int], EpochOwed] = {}  # (topic, partition) -> its debt
        self._asked: dict[tuple[str, int], _Asked] = {}  # (topic, partition) -> an election asked
        self._rebalance_timer: asyncio.TimerHandle | None = None
        self._closed = False
        self.last_pass_topics = 0  # how many topics the last pass looked at (tests, benchmarks)

    def owe_epochs(self, owed: Mapping[tuple[str, int], EpochOwed]) -> None:
        """Partition reassignments completed: each partition's state must reach the leader epoch
        owed (the module's table). On the loop; nothing while not the controller."""
        if self.cluster.controller_id != self.broker_id:
            return
        self._owed.update(owed)  # a later reassignment's debt replaces an earlier one's
        self.request()

    def elect(self, kind: Election, partitions: Collection[tuple[str, int]],
              replicas: Mapping[tuple[str, int], _OnReplicas] | None = None) -> None:
        """Ask ``kind`` elections of ``partitions`` on the replicas the view shows now, or on those
        ``replicas`` names (the new list, and the one the view may still show before it). On the
        loop; nothing while not the controller."""
        if self.cluster.controller_id != self.broker_id:
            return
        topics = self.cluster.topics
        for key in partitions:
            topic, index = key
            if replicas is not None and key in replicas:
                wanted, previous = replicas[key]
            else:
                info = topics.get(topic)
                current = info.partitions.get(index) if info is not None else None
                if current is None:
                    continue
                wanted = previous = tuple(current)
            self._asked[key] = _Asked(kind, wanted, previous)
        self.request()

    def topic_changed(self, topic: str) -> None:
        """Something ``next_state`` reads about ``topic`` besides the view changed (its unclean
        setting): look at it again. Any thread."""
        self._unsettled.add(topic)
        self.request()

    def request(self) -> None:
        """Something changed (brokers, topics, the controller, states): reconcile soon. Any thread."""
        self._reloader.request()

    def log_dir_events_queued(self, names: tuple[str, ...]) -> None:
        """The store's log dir event notifications now (LogDirEventQueue's watch): the next pass
        as the controller handles them and deletes them, as Kafka's controller does. Delivered
        after the offline replicas they announce reached the view (that watch fires first), so
        the pass that deletes them has moved leadership off those replicas. Any thread."""
        self._events_queued = names
        if names:
            self.request()

    async def idle(self) -> None:
        await self._reloader.idle()

    def close(self) -> None:
        self._closed = True
        self._stop_rebalance()
        self._reloader.close()

    def changes(self, full: bool = False) -> list[_Write]:
        """What the cluster view says must be written now (nothing unless this broker is the
        controller), by topic and partition. ``full``: look at every topic (the plain path)."""
        cluster = self.cluster
        owed = self._owed
        asked = self._asked
        if cluster.controller_id != self.broker_id:
            owed.clear()
            asked.clear()
            self._seen = None
            self._unsettled.clear()
            return []
        seen = self._seen
        now = _Seen(cluster.topics, cluster.partition_states, cluster.live_broker_ids(),
                    cluster.offline_replicas)
        topics, states = now.topics, now.states
        for debts in (owed, asked):
            for key in [(t, p) for t, p in debts if t not in topics or p not in topics[t].partitions]:
                del debts[key]
        names: Collection[str]
        if full or seen is None or seen.live != now.live or seen.offline != now.offline:
            names = list(topics)
        else:
            changed = changed_keys(seen.topics, topics)
            changed.update(topic for topic, _ in changed_keys(seen.states, states))
            changed.update(self._unsettled)
            changed.update(topic for topic, _ in owed)
            changed.update(topic for topic, _ in asked)
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
            unclean = functools.partial(self.unclean, name)
            for index, replicas in info.partitions.items():
                key = (name, index)
                current = states.get(key)
                live = cluster.live_replicas_of(name, index)  # a replica in a failed dir is down
                epoch_owed = None
                debt = owed.get(key)
                if debt is not None:
                    if (current is not None and current.leader_epoch >= debt.leader_epoch) or \
                            replicas not in (debt.previous, debt.replicas):
                        del owed[key]  # paid, or the replicas changed again since
                    elif replicas == debt.replicas:
                        epoch_owed = debt.leader_epoch
                    # else the view still shows the replicas from before: not yet
                wanted = next_state(replicas, live, current, epoch_owed, None, unclean)
                election = asked.get(key)
                if election is not None:
                    if replicas == election.replicas:
                        elected = next_state(replicas, live, current, epoch_owed, election.kind, unclean)
                        if elected == wanted:
                            del asked[key]  # done, or not possible any more
                        wanted = elected
                    elif replicas != election.previous:
                        del asked[key]  # the replicas changed again since
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
        PREFERRED_LEADER_NOT_AVAILABLE (``to`` holds the partition in a failed log dir: the
        preferred election would fail), ELECTION_NOT_NEEDED (it leads already)."""
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
        if to not in cluster.live_replicas_of(topic, partition):  # KIP-112: its log dir failed
            raise KafkaApiError(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                f"broker {to} holds {topic}-{partition} in a failed log dir")
        leadership = cluster.leadership(topic, partition)
        if leadership is not None and leadership[0] == to:
            raise KafkaApiError(ErrorCode.ELECTION_NOT_NEEDED, f"{topic}-{partition} is led by broker {to} "
                                f"already (live brokers: {sorted(live)})")
        reassigned = led_by(replicas, to)
        try:
            await asyncio.to_thread(self.store.reassign_partitions, topic, {partition: reassigned})
        except UnknownTopic:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                f"no partition {topic}-{partition}") from None
        key = (topic, partition)
        self.elect(Election.PREFERRED, [key], {key: (reassigned, tuple(replicas))})
        log.info("%s-%d: moving the leader to broker %d (replicas %s)", topic, partition, to,
                 list(reassigned))
        return reassigned

    async def _reconcile(self) -> None:
        events = self._events_queued  # those this pass handles: their offline sets are in the view
        writes = self.changes()
        self._follow_controller()
        if writes:
            await asyncio.to_thread(self._write, writes)
        if events and self.log_dir_events is not None and self.cluster.controller_id == self.broker_id:
            await asyncio.to_thread(self._delete_events, self.log_dir_events, events)

    @staticmethod
    def _delete_events(queue: LogDirEventQueue, names: tuple[str, ...]) -> None:
        """Kafka's controller deletes the notifications it processed, whatever became of them
        (processLogDirEventNotification's finally); a store that cannot leaves them for the next
        pass, which the watch's next delivery (or any change) asks for."""
        try:
            queue.delete_log_dir_events(names)
        except StoreError as exc:
            log.info("log dir event notifications left for the next pass: %s", exc)
        else:
            log.debug("log dir event notifications handled and deleted: %s", ", ".join(names))

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

    # --- the auto rebalance ---------------------------------------------------------------------

    def _follow_controller(self) -> None:
        """On the loop, after each pass: the rebalance check runs while this broker is the
        controller, first FIRST_REBALANCE_CHECK_S after it became it."""
        controller = self.cluster.controller_id == self.broker_id
        if not controller or not self.rebalance.enable or self._closed:
            self._stop_rebalance()
        elif self._rebalance_timer is None:
            self._rebalance_timer = self.loop.call_later(FIRST_REBALANCE_CHECK_S, self._check_balance)

    def _stop_rebalance(self) -> None:
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None

    def _check_balance(self) -> None:
        self._rebalance_timer = None
        cluster = self.cluster
        if self._closed or cluster.controller_id != self.broker_id:
            return
        chosen = imbalanced(cluster.topics, cluster.partition_states, cluster.live_broker_ids(),
                            self.rebalance.percentage)
        if chosen:
            log.info("leader imbalance: preferred elections for %d partitions", len(chosen))
            self.elect(Election.PREFERRED, chosen)
        self._rebalance_timer = self.loop.call_later(self.rebalance.interval_s, self._check_balance)
