"""The broker's partition registry: which partitions this broker leads, and their logs.

Every data-plane handler (Produce, ListOffsets, DeleteRecords, ..., and Fetch through the
``PartitionSource`` protocol it defines) asks ``Partitions`` for a partition's log. The
answer follows the topics view (``services.cluster.topics``, fed by the store's watch):

* a topic or partition the view does not hold: UNKNOWN_TOPIC_OR_PARTITION;
* a partition whose leader (``ClusterView.leadership``: the leader and epoch the controller
  stored, the answer Metadata gives) is another broker, or none (down, or while the controller
  has not written an election yet): NOT_LEADER_OR_FOLLOWER;
* otherwise the log, created empty the first time.

Where the logs live (``LogHome``): with ``log.dirs`` each broker owns a LogManager over its
directories (Kafka's layout, recovered at start). Without, logs are in memory and kept per
metadata store: brokers of one in-process cluster share a MemoryStore object, so they share one
LogManager (and the producer state beside it), and a partition keeps its records when its
leadership moves. On ZooKeeper each broker process has its own memory, so a partition's log
lives on its leader (replication is a later issue).

A topic deleted and created again under the same name gets a new topic id; the first access
after that drops the old logs, so the new topic starts empty. Each log records its topic id
(``partition.metadata`` with log.dirs); where topic ids outlive the broker (ZooKeeper), a log on
disk holding another id is refused as Kafka refuses it (InconsistentTopicIdException): the
partition answers NOT_LEADER_OR_FOLLOWER with Kafka's message, and the broker logs one line.

A log dir that fails (KIP-112; kafkapy.log.manager) takes its partitions offline: each answers
KAFKA_STORAGE_ERROR, before leadership and leader epochs are looked at (Kafka's
ReplicaManager.getPartitionOrError sees HostedPartition.Offline first). An OSError from a log
(``storage_failed``) fails the log's dir; one the background writer met is handled at the next
lookup or when the writer wakes the loop (``handle_reported_failures``). When no dir is left the
broker stops (``on_all_dirs_failed``).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log import LogConfig, LogManager
from kafkapy.log.manager import AllLogDirsFailed, storage_error
from kafkapy.log.partition_metadata import InconsistentTopicId
from kafkapy.log.producer_state import ProducerStateManager
from kafkapy.log.segmented import SegmentedLog
from kafkapy.protocol.records import RecordBatch
from kafkapy.server.services import INITIAL_LEADER_EPOCH
from kafkapy.store.base import TopicStore

UNDEFINED_LEADER_EPOCH = -1  # a request's current_leader_epoch when the client knows none

if TYPE_CHECKING:
    from kafkapy.server.services import ClusterView

__all__ = ["INITIAL_LEADER_EPOCH", "LogHome", "Partitions", "memory_home", "topic_partitions"]

_log = logging.getLogger(__name__)



class LogHome:
    """A LogManager and, per partition, the idempotent-producer table that goes with its log."""

    def __init__(self, logs: LogManager, *, producer_id_expiration_ms: int) -> None:
        self.logs = logs
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[tuple[str, int], ProducerStateManager] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}  # the topic id each topic's logs were made for
        # Brokers of one in-process cluster run on loops of their own (Broker() as a context
        # manager) and share a memory home: making a log or a producer table is done under it.
        self.lock = threading.Lock()
        # The registries of the brokers sharing this home: an append on the leader wakes the
        # fetches waiting on a follower too (KIP-392: consumers may read from followers).
        self.views: weakref.WeakSet[Partitions] = weakref.WeakSet()

    def producer_state(self, topic: str, partition: int, log: SegmentedLog) -> ProducerStateManager:
        """The partition's producer table; built from the log's snapshot and tail the first time
        (so it survives a restart with log.dirs), then kept in step with every append. Its open
        transactions hold the log's last stable offset back, and the ABORT markers replayed
        restore transaction index entries a crash lost."""
        key = (topic, partition)
        state = self.producers.get(key)
        if state is not None:
            return state
        with self.lock:
            state = self.producers.get(key)
            if state is not None:
                return state
            state = ProducerStateManager(producer_id_expiration_ms=self.producer_id_expiration_ms)
            state.recover(log, lambda offset: _batches_from(log, offset), log.clock(),
                          log_start_offset=log.log_start_offset, on_aborted=log.restore_aborted_txn)
            log.snapshot_source = state.snapshot
            log.unstable_offset_source = lambda: state.first_unstable_offset
            log.producers_source = state.last_records
            self.producers[key] = state
        return state

    def remember_topic_ids(self) -> None:
        """Each loaded log's topic id as the one its topic's logs were made for, once the strays
        are set aside (each log left is of a topic the metadata holds): a topic deleted and made
        again after a restart then drops the logs it finds from before, as within one run. Not in
        memory, where logs take the new id a restarted store gives, nor on ZooKeeper, where a log
        of another id is refused, not dropped."""
        for (topic, _), log in self.logs.logs.items():
            if log.topic_id is not None:
                self.topic_ids.setdefault(topic, log.topic_id)

    def recover_producer_states(self) -> None:
        """Build every log's producer table now, as Kafka does when it loads a log: a log read from
        log.dirs must know its open transactions (its LSO) before anyone reads it."""
        for (topic, partition), log in list(self.logs.logs.items()):
            if (topic, partition) not in self.logs.logs:
                continue  # its dir failed under an earlier one
            try:
                self.producer_state(topic, partition, log)
            except OSError as exc:  # part of loading the log, as in Kafka: its dir goes offline
                directory = self.logs.dir_of(topic, partition)
                if directory is None:
                    raise
                _log.error("Error while loading log dir %s: %s", directory.absolute(), exc)
                self.fail_dir(directory, exc)

    def fail_dir(self, directory: Path, exc: OSError) -> list[tuple[str, int]]:
        """``directory`` met ``exc``: it goes offline (LogManager.fail_dir) with the producer
        tables of its partitions; answers those partitions."""
        with self.lock:
            gone = self.logs.fail_dir(directory, exc)
            self._drop_producers(gone)
        return gone

    def handle_reported_failures(self) -> list[tuple[str, int]]:
        """The dirs the background writer found failing, taken offline here (on the loop)."""
        with self.lock:
            gone = self.logs.handle_reported_failures()
            self._drop_producers(gone)
        return gone

    def _drop_producers(self, keys: list[tuple[str, int]]) -> None:
        for key in keys:
            self.producers.pop(key, None)

    def drop_deleted_topic(self, topic: str, topic_id: uuid.UUID) -> bool:
        """The topic ``topic_id`` named ``topic`` was deleted: its logs go (Kafka's broker deletes
        a deleted topic's replicas when the metadata tells it), unless a log under the name holds
        another id (a topic made again since, already in use). Answers whether any were dropped."""
        with self.lock:
            held = [log.topic_id for (name, _), log in self.logs.logs.items() if name == topic]
            if not held or any(held_id not in (None, topic_id) for held_id in held):
                return False
            self.forget_topic(topic)
            return True

    def forget_topic(self, topic: str) -> None:
        self.logs.delete_topic(topic)
        for key in [k for k in self.producers if k[0] == topic]:
            del self.producers[key]
        self.topic_ids.pop(topic, None)


def _batches_from(log: SegmentedLog, offset: int) -> Iterator[RecordBatch]:
    """The batches holding ``offset`` and after: the tail past a producer snapshot, so recovery
    reads only that (Kafka's rebuildProducerState), not the whole log."""
    first = max(bisect.bisect_right(log.segments, offset, key=lambda s: s.base_offset) - 1, 0)
    for segment in log.segments[first:]:
        start = segment.find_batch(offset) if segment.base_offset <= offset else 0
        for i in range(segment.batch_count if start is None else start, segment.batch_count):
            batch = segment.batch(i)
            if batch.last_offset >= offset:
                yield batch


def topic_partitions(store: TopicStore) -> frozenset[tuple[uuid.UUID, int]]:
    """Each (topic id, partition) ``store`` holds: what a partition log on disk must be one of, else
    it is a stray (LogManager's ``is_stray``)."""
    return frozenset((info.topic_id, p) for info in store.topics().values() for p in info.partitions)


# One home per MemoryStore object: the brokers of an in-process cluster share it (and its logs).
_MEMORY_HOMES: weakref.WeakKeyDictionary[object, LogHome] = weakref.WeakKeyDictionary()


def memory_home(store: object, make: Callable[[], LogHome]) -> LogHome:
    """The in-memory LogHome of ``store``, made by ``make`` for the first broker that asks."""
    home = _MEMORY_HOMES.get(store)
    if home is None:
        home = _MEMORY_HOMES[store] = make()
    return home


class Partitions:
    """The partitions this broker leads and their logs (fetch's ``PartitionSource``)."""

    def __init__(self, home: LogHome, cluster: ClusterView, broker_id: Callable[[], int],
                 log_config: Callable[[str], LogConfig], *, shared: bool = False,
                 loop: asyncio.AbstractEventLoop | None = None,
                 transaction_verification: bool = True) -> None:
        self.home = home
        # KIP-890 part 1's transaction.partition.verification.enable, for Produce and for the
        # coordinators' transactional appends alike (Kafka's ReplicaManager reads the one setting)
        self.transaction_verification = transaction_verification
        # The in-process cluster's brokers share their logs (one memory home): a follower's log is
        # then the leader's, as Kafka's follower holds a copy of it.
        self.shared = shared
        self.loop = loop  # where this broker's fetches wait (woken from another loop thread-safely)
        if shared:
            home.views.add(self)
        self.cluster = cluster
        self._broker_id = broker_id
        self._log_config = log_config
        self._listeners: dict[tuple[str, int], list[Callable[[], None]]] = {}
        self._refused: dict[tuple[str, int], uuid.UUID] = {}  # logged once per partition and id
        # Told Kafka's fatal line when no log dir is left (the broker then stops).
        self.on_all_dirs_failed: Callable[[str], None] | None = None
        # With a dir that failed at start unlisted: the partitions that existed then are not new
        # (Kafka's controller says isNew only for replicas it just made), so no log is made for
        # them elsewhere; a topic made later (a new topic id) is new.
        self._present_at_start: frozenset[tuple[uuid.UUID, int]] | None = None
        if home.logs.unlisted_offline:
            self._present_at_start = frozenset((info.topic_id, p) for info in cluster.topics.values()
                                               for p in info.partitions)

    @property
    def logs(self) -> LogManager:
        return self.home.logs

    def leadership(self, topic: str, partition: int) -> tuple[int, int]:
        """The partition's (leader, leader epoch) by the cluster view (its stored state);
        UNKNOWN_TOPIC_OR_PARTITION if the view has no such partition."""
        found = self.cluster.leadership(topic, partition)
        if found is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                f"This server does not host this topic-partition: {topic}-{partition}.")
        return found

    def leader_of(self, topic: str, partition: int) -> int:
        """The partition's leader by the topics view; UNKNOWN_TOPIC_OR_PARTITION if it has none."""
        return self.leadership(topic, partition)[0]

    @property
    def shares_logs(self) -> bool:
        """Whether a follower here holds the leader's records (the in-process cluster's shared
        logs); where each broker keeps its own, kafkapy does not replicate and it holds none."""
        return self.shared

    def check_online(self, topic: str, partition: int) -> None:
        """KAFKA_STORAGE_ERROR for a partition whose log dir failed (after handling the failures
        the background writer reported)."""
        if self.is_offline(topic, partition):
            raise storage_error(topic, partition)

    def is_offline(self, topic: str, partition: int) -> bool:
        """Whether ``check_online`` would refuse the partition (its log dir failed)."""
        logs = self.home.logs
        if logs.failures_reported:
            self.handle_reported_failures()
        return bool(logs.offline_partitions) and (topic, partition) in logs.offline_partitions

    def storage_failed(self, topic: str, partition: int, exc: OSError) -> KafkaApiError:
        """Kafka's LogDirFailureChannel for an I/O error on ``topic-partition``'s log: its dir
        goes offline (its partitions' waiting fetches woken to answer so); answers the
        KAFKA_STORAGE_ERROR to give."""
        _log.error("I/O error on the log of %s-%d: %s", topic, partition, exc)
        directory = self.home.logs.dir_of(topic, partition)
        if directory is not None:
            self.fail_dir(directory, exc)
        return storage_error(topic, partition)

    def fail_dir(self, directory: Path, exc: OSError) -> None:
        """``directory`` failed (LogHome.fail_dir): its partitions' waiting fetches are woken to
        answer KAFKA_STORAGE_ERROR; with no dir left the broker stops."""
        try:
            gone = self.home.fail_dir(directory, exc)
        except AllLogDirsFailed as fatal:
            self._all_failed(fatal)
            return
        for key in gone:
            self._wake(*key)

    def handle_reported_failures(self) -> None:
        try:
            gone = self.home.handle_reported_failures()
        except AllLogDirsFailed as fatal:
            self._all_failed(fatal)
            return
        for key in gone:
            self._wake(*key)

    def _all_failed(self, fatal: AllLogDirsFailed) -> None:
        _log.critical("%s", fatal)
        if self.on_all_dirs_failed is not None:
            self.on_all_dirs_failed(str(fatal))

    def leader_log(self, topic: str, partition: int) -> SegmentedLog:
        """The log of a partition this broker leads (made empty the first time), with the
        current leader epoch started in its epoch cache."""
        self.check_online(topic, partition)
        leader, epoch = self.leadership(topic, partition)
        if leader != self._broker_id():
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                f"This server is not the leader for partition {topic}-{partition} "
                                f"(the leader is broker {leader}).")
        return self._log(topic, partition, epoch)

    def leader_log_for_acks_all(self, topic: str, partition: int) -> SegmentedLog:
        """:meth:`leader_log`, for a write that waits on every in-sync replica (a coordinator's to
        its state topic, as Kafka's coordinators write with acks=-1): refused NOT_ENOUGH_REPLICAS
        while fewer replicas are in sync than the topic's ``min.insync.replicas`` (capped at its
        replication factor), as Kafka's Partition.appendRecordsToLeader refuses it."""
        log = self.leader_log(topic, partition)
        needed = self.min_in_sync(topic, partition)
        if needed <= 1:  # the leader alone (the common case: one broker, or the default of 1)
            return log
        in_sync = self.cluster.in_sync_replicas(topic, partition)
        if len(in_sync) < needed:
            raise KafkaApiError(ErrorCode.NOT_ENOUGH_REPLICAS,
                                f"The size of the current ISR {sorted(in_sync)} is insufficient to satisfy "
                                f"the min.isr requirement of {needed} for partition {topic}-{partition}")
        return log

    def min_in_sync(self, topic: str, partition: int, config: LogConfig | None = None) -> int:
        """How many replicas an acks=all write needs in sync: ``min.insync.replicas`` (of
        ``config``, the topic's LogConfig when the caller holds it) capped at the partition's
        replication factor (Kafka's Partition.effectiveMinIsr)."""
        wanted = (config or self._log_config(topic)).min_insync_replicas
        if wanted <= 1:
            return wanted
        info = self.cluster.topics.get(topic)
        replicas = info.partitions.get(partition, ()) if info is not None else ()
        return min(wanted, len(replicas))

    def replica_log(self, topic: str, partition: int) -> SegmentedLog:
        """The log of a partition this broker holds a replica of: the leader's own, or a
        follower's where the brokers share their logs (what a consumer may read from a follower,
        KIP-392). Elsewhere a follower holds none of the records: NOT_LEADER_OR_FOLLOWER, as a
        broker that is no replica answers."""
        self.check_online(topic, partition)
        leader, epoch = self.leadership(topic, partition)
        me = self._broker_id()
        replicas = self.cluster.topics[topic].partitions.get(partition, ())
        if leader != me and (not self.shared or me not in replicas):
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                f"This server is not a replica of partition {topic}-{partition}.")
        return self._log(topic, partition, epoch)

    def _log(self, topic: str, partition: int, epoch: int) -> SegmentedLog:
        home = self.home
        topic_id = self.cluster.topics[topic].topic_id
        log = home.logs.get(topic, partition)
        if log is None or log.topic_id is not topic_id or home.topic_ids.get(topic) != topic_id:
            with home.lock:
                known = home.topic_ids.get(topic)
                if known != topic_id:
                    if known is not None:  # deleted and created again: the old records are gone
                        home.forget_topic(topic)
                    home.topic_ids[topic] = topic_id
                present = self._present_at_start
                is_new = present is None or (topic_id, partition) not in present
                try:
                    log = home.logs.get_or_create(topic, partition, self._log_config(topic), topic_id,
                                                  is_new=is_new)
                except InconsistentTopicId as exc:
                    # Kafka refuses to lead this partition from that log (its LeaderAndIsr answer is
                    # INCONSISTENT_TOPIC_ID), so clients see a partition without a leader here.
                    if self._refused.get((topic, partition)) != topic_id:
                        self._refused[(topic, partition)] = topic_id
                        _log.error("partition %s-%d refused: %s", topic, partition, exc)
                    raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, str(exc)) from None
        if log.epochs.latest_epoch < epoch:
            try:
                log.start_leader_epoch(epoch)
            except OSError as exc:  # the leader-epoch-checkpoint could not be written
                raise self.storage_failed(topic, partition, exc) from None
        return log

    def producer_state(self, topic: str, partition: int) -> ProducerStateManager:
        """The idempotent-producer table of a partition this broker leads."""
        return self.home.producer_state(topic, partition, self.leader_log(topic, partition))

    def needs_transaction_verification(self, topic: str, partition: int, producer_id: int) -> bool:
        """Whether a transactional write of ``producer_id`` to a partition led here is first checked
        with the producer's transaction coordinator (Kafka's
        ReplicaManager.maybeStartTransactionVerificationForPartition): only while
        transaction.partition.verification.enable is on, and only before the producer's transaction
        is open in the partition (UnifiedLog.maybeStartTransactionVerification: once its first
        batch is in, the transaction is known to hold the partition)."""
        if not self.transaction_verification:
            return False
        try:
            return not self.producer_state(topic, partition).in_transaction(producer_id)
        except KafkaApiError:
            return True  # not led here: asked anyway, and the write answers the leadership

    def replica_producer_state(self, topic: str, partition: int) -> ProducerStateManager | None:
        """The producer table of a partition this broker holds a replica of (Kafka's
        getPartitionOrError: what any replica answers, DescribeProducers). A follower's is the
        leader's where the brokers share their logs (None while the leader has not made the log:
        no producers yet); where each keeps its own, kafkapy does not replicate, so a follower
        holds none of the records and answers NOT_LEADER_OR_FOLLOWER, as a broker that is not a
        replica does."""
        leader, _ = self.leadership(topic, partition)
        me = self._broker_id()
        if leader == me:
            return self.producer_state(topic, partition)
        if not self.shared or me not in self.cluster.topics[topic].partitions.get(partition, ()):
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                f"This server is not a replica of partition {topic}-{partition}.")
        home = self.home
        log = home.logs.get(topic, partition)
        if log is None or log.topic_id != self.cluster.topics[topic].topic_id:
            return None
        return home.producer_state(topic, partition, log)

    def check_leader_epoch(self, topic: str, partition: int, current: int) -> None:
        """A client's ``current_leader_epoch`` (KIP-320; -1: none) against the partition's, asked
        before leadership as Kafka's Partition.getLocalLog asks it on a broker holding a replica:
        older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH, so a follower tells a client
        with a stale or a future epoch so rather than NOT_LEADER_OR_FOLLOWER. A broker that is no
        replica leaves the answer to leadership (Kafka's ReplicaManager answers it before)."""
        if current == UNDEFINED_LEADER_EPOCH:
            return
        self.check_online(topic, partition)
        leader, epoch = self.leadership(topic, partition)
        me = self._broker_id()
        if leader != me and me not in self.cluster.topics[topic].partitions.get(partition, ()):
            return
        if current < epoch:
            raise KafkaApiError(ErrorCode.FENCED_LEADER_EPOCH,
                                f"The leader epoch {current} of {topic}-{partition} is older than {epoch}.")
        if current > epoch:
            raise KafkaApiError(ErrorCode.UNKNOWN_LEADER_EPOCH,
                                f"The leader epoch {current} of {topic}-{partition} is newer than {epoch}.")

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's current leader epoch, from its stored state (UNKNOWN_TOPIC_OR_PARTITION
        if there is no such partition)."""
        return self.leadership(topic, partition)[1]

    def topic_id(self, topic: str) -> uuid.UUID | None:
        info = self.cluster.topics.get(topic)
        return info.topic_id if info is not None else None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.cluster.topic_name(topic_id)

    def on_append(self, topic: str, partition: int, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` right after each append that moves the partition's high watermark."""
        key = (topic, partition)
        self._listeners.setdefault(key, []).append(callback)

        def remove() -> None:
            callbacks = self._listeners.get(key)
            if callbacks is not None and callback in callbacks:
                callbacks.remove(callback)
                if not callbacks:
                    del self._listeners[key]
        return remove

    def has_waiters(self, topic: str, partition: int) -> bool:
        """Whether anything (a long-polling Fetch) waits for an append to the partition."""
        return bool(self._listeners.get((topic, partition)))

    def appended(self, topic: str, partition: int) -> None:
        """The high watermark of ``topic-partition`` moved: wake whoever waits on it, here and, where
        the logs are shared, on the other brokers (a consumer fetching from a follower)."""
        self._wake(topic, partition)
        if self.shared and len(self.home.views) > 1:  # a lone broker (the usual case) pays one len()
            for view in list(self.home.views):
                if view is self:
                    continue
                if view.loop is None or view.loop is self.loop:
                    view._wake(topic, partition)
                elif not view.loop.is_closed():
                    view.loop.call_soon_threadsafe(view._wake, topic, partition)

    def _wake(self, topic: str, partition: int) -> None:
        callbacks = self._listeners.get((topic, partition))
        if callbacks:  # nearly always none: no list made per Produce
            for callback in list(callbacks):
                callback()
