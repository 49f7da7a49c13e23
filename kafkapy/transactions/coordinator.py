"""The transaction coordinator: Kafka's rules for transactional producers, without the wire.

Theory of operation. Each transactional id lives in one partition of ``__transaction_state``
(``transaction_partition_for``), and the broker leading that partition is its coordinator. The
coordinator keeps, per partition it leads, the latest ``TxnMetadata`` of every id there; the
cache is filled by replaying the partition when this broker comes to lead it (``on_election``,
Kafka's onElection: at start with log.dirs, after a move of leadership) and dropped when the
partition is no longer led here (``on_resignation``). The module calls both from the cluster
view (kafkapy.server.coordinator_elections); a request that finds a partition led here but
neither loaded nor loading (the election's pass has not run yet) begins the load itself.

Loading (Kafka's loadTransactionsForTxnTopicPartition): the first slice of the replay
(``StateLog.replay_in_slices``) runs in place, within the election's pass, so a partition that
fits in it (the common case) is loaded before any request for it comes. A longer one goes on in
the background, one slice per loop step (kafkapy.server.partition_loads), and until it ends every
request for its ids is answered COORDINATOR_LOAD_IN_PROGRESS (retriable: clients back off and ask
again), ListTransactions too (as Kafka, while any partition led here loads); the timers skip it.
Before each slice the load checks that the partition is still led here under the epoch it began
with: if not, it stops (Kafka's load loop checks the same), and the election under the new epoch
starts a new one. The loaded ids go into the cache whole, then the transactions left in PREPARE_*
get their markers.

Every change follows one pattern (Kafka's prepareTransition/completeTransition): check the
request against the current value, build the next value (``TxnMetadata.transit``, checked
against the state table), append the next value to the log, and only then put it in the cache.
A failed append leaves the cache as it was. The append is a plain call (``StateLog.append``:
the partition's log is this broker's, and with one replica in the log is as durable as acks=all
gets), so nothing runs between the check and the swap, and Kafka's pending-state guard (a
concurrent request answered CONCURRENT_TRANSACTIONS while an append is on its way) has nothing
to guard: a request can only meet a transaction between whole changes, where PREPARE_* is what
answers CONCURRENT_TRANSACTIONS.

Ending a transaction: PREPARE_COMMIT/PREPARE_ABORT is appended first, which decides the
outcome; then the markers go to every partition of the transaction (``MarkerSender``), then
COMPLETE_COMMIT/COMPLETE_ABORT is appended. Kafka answers EndTxn once the PREPARE record is
durable and sends markers in the background. kafkapy does too when every partition is led here
(``is_local``): the markers and COMPLETE_* are written by one plain callback in the loop's
next step (``loop.call_soon``: no task, and through ``write_local_markers``, which never waits),
so the answer leaves first (the client's next step overlaps the broker's), yet nothing read
after the answer was sent (the client's next request, a consumer's Fetch, a test's look at the
logs through the loop) can see the transaction unfinished. Markers go out after PREPARE_* is in
the log, and COMPLETE_* only after every marker is. With a
partition on another broker, kafkapy tries the markers once before answering (so a client that
saw its commit answered sees a completed transaction when every partition is reachable), and
keeps retrying in the background for partitions it could not reach.

Fencing: InitProducerId for an id whose transaction is ONGOING bumps the epoch
(PREPARE_EPOCH_FENCE, in memory), aborts the transaction under the bumped epoch and answers
CONCURRENT_TRANSACTIONS; the producer retries and gets the epoch after that. The timeout
(``abort_timed_out``) aborts the same way, so the old producer is fenced either way.

Errors are answered as Kafka's codes; PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for old
request versions in the module, which knows the version.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Collection, Generator, Iterable, Mapping
from typing import Protocol

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.partitioning import java_string_hash
from kafkapy.server.internal_topics import APPEND_ERRORS
from kafkapy.server.partition_loads import PartitionLoads
from kafkapy.server.txn_markers import TxnMarker
from kafkapy.transactions.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TxnMetadata,
    epoch_exhausted,
)
from kafkapy.transactions.state import TxnState

__all__ = ["TRANSACTION_STATE_TOPIC", "CoordinatorConfig", "InitResult", "LocalMarkerWriter", "MarkerSender",
           "StateLog", "TransactionCoordinator", "transaction_partition_for"]

TRANSACTION_STATE_TOPIC = "__transaction_state"
_INT32_MIN = -(1 << 31)
log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=4096)  # asked five times a transaction; the hash is a Python loop
def transaction_partition_for(transactional_id: str, partition_count: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions``."""
    hashed = java_string_hash(transactional_id)
    return (0 if hashed == _INT32_MIN else abs(hashed)) % partition_count


class StateLog(Protocol):
    """Where the coordinator makes its changes durable: a partition of __transaction_state."""

    def append(self, partition: int, transactional_id: str, metadata: TxnMetadata | None) -> None:
        """Append one record (None: a tombstone), durable as acks=all when it returns; KafkaApiError
        when it cannot (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, ...)."""

    def replay_in_slices(self, partition: int) -> Generator[None, None, dict[str, TxnMetadata]]:
        """Every transactional id of the partition, its latest value (tombstoned ids left out),
        returned by a generator that yields between two slices of the walk; KafkaApiError when
        the partition cannot be read."""


# Sends one transaction's markers; per partition NONE or why that partition has none yet.
MarkerSender = Callable[[TxnMarker], Awaitable[Mapping[TopicPartition, ErrorCode]]]
# The same for partitions this broker leads, written before it returns (the data plane's TXN_MARKERS).
LocalMarkerWriter = Callable[[TxnMarker], Mapping[TopicPartition, ErrorCode]]


@attrs.frozen
class CoordinatorConfig:
    partition_count: int = 50  # transaction.state.log.num.partitions (Kafka's default)
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms (Kafka's default, 15 minutes)
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms (7 days)
    marker_retry_backoff_ms: int = 100  # retry.backoff.ms, Kafka's default for the marker channel


@attrs.frozen
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


# Marker errors after which the partition is tried again (Kafka's marker completion handler);
# INVALID_PRODUCER_EPOCH and TRANSACTION_COORDINATOR_FENCED stop sending: a newer coordinator
# or producer epoch owns the partition.
_STOP_SENDING = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


class _Refused(Exception):
    """A request that is answered with ``code`` and changes nothing."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


class TransactionCoordinator:
    """The coordinator's state and rules; its I/O goes through ``state_log``, ``send_markers``
    and ``new_producer_id``."""

    def __init__(self, *, state_log: StateLog, send_markers: MarkerSender,
                 new_producer_id: Callable[[], Awaitable[int]], now_ms: Callable[[], int],
                 leads: Callable[[int], bool], config: CoordinatorConfig = CoordinatorConfig(),
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 topic_exists: Callable[[str], bool] = lambda topic: True,
                 is_local: Callable[[TopicPartition], bool] = lambda tp: False,
                 leader_epoch: Callable[[int], int] = lambda partition: 0,
                 write_local_markers: LocalMarkerWriter | None = None) -> None:
        self.state_log = state_log
        self.send_markers = send_markers
        self.new_producer_id = new_producer_id
        self.now_ms = now_ms
        self.leads = leads
        self.config = config
        self.sleep = sleep
        self.topic_exists = topic_exists
        self.is_local = is_local  # the partition is led here: its marker is written without waiting
        # Markers for partitions led here, as a plain call; without it they go through send_markers.
        self.write_local_markers = write_local_markers
        # A __transaction_state partition's leader epoch now. Loaded under one epoch, a partition
        # is read again under the next (another coordinator may have written it meanwhile), and
        # its markers carry that epoch as their coordinator epoch, as Kafka's coordinatorEpoch.
        self.leader_epoch = leader_epoch
        self._loaded: dict[int, dict[str, TxnMetadata]] = {}  # partition -> id -> its latest value
        self._loaded_epochs: dict[int, int] = {}  # partition -> the leader epoch it was loaded under
        self._loads = PartitionLoads(TRANSACTION_STATE_TOPIC, self._still_led, self._install, log)
        self._tasks: set[asyncio.Task[None]] = set()  # marker retries in the background
        self._soon: dict[str, asyncio.Handle] = {}  # by id: local transactions finished in the next loop step
        self.resets = 0  # forget_all() calls: a transaction ending across one stops there

    # --- where an id lives ---------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return transaction_partition_for(transactional_id, self.config.partition_count)

    def _ids_of(self, transactional_id: str) -> dict[str, TxnMetadata]:
        """The loaded ids of the partition holding ``transactional_id``; NOT_COORDINATOR unless led
        here, COORDINATOR_LOAD_IN_PROGRESS while it loads."""
        partition = self.partition_for(transactional_id)
        if not self.leads(partition):
            self._unload(partition)
            raise _Refused(ErrorCode.NOT_COORDINATOR)
        ids = self._loaded.get(partition)
        if ids is None or self._loaded_epochs.get(partition) != self.leader_epoch(partition):
            ids = self._load(partition)
        return ids

    def coordinator_epoch(self, transactional_id: str) -> int:
        """The epoch this coordinator holds ``transactional_id``'s partition under (its markers')."""
        return self._loaded_epochs.get(self.partition_for(transactional_id), 0)

    def _load(self, partition: int) -> dict[str, TxnMetadata]:
        """The partition's ids if its replay fits in one slice (loaded in place); else its replay
        goes on in the background and this raises COORDINATOR_LOAD_IN_PROGRESS."""
        epoch = self.leader_epoch(partition)
        if self._loads.epoch_of(partition) == epoch:
            if not self._loads.take_slice(partition, epoch):  # a short one queued ends here
                raise _Refused(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            return self._loaded[partition]
        try:
            ids = self._begin_load(partition, epoch, in_place=True)
        except KafkaApiError as exc:  # unreadable (its log dir failed, say): not loaded, not led here
            raise _Refused(APPEND_ERRORS.get(exc.code, ErrorCode.UNKNOWN_SERVER_ERROR)) from None
        if ids is None:
            raise _Refused(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return ids

    def _begin_load(self, partition: int, epoch: int, *, in_place: bool) -> dict[str, TxnMetadata] | None:
        """Kafka's loadTransactionsForTxnTopicPartition: what was loaded of the partition goes, and
        its replay begins (``in_place``: its first slice now, the ids returned and installed if that
        finished it; else all of it in the background). KafkaApiError when it cannot be read."""
        self._unload(partition)  # a load under an older epoch stops; the cache of one goes
        steps = self.state_log.replay_in_slices(partition)
        if not in_place:
            self._loads.schedule(partition, epoch, steps)
            return None
        ids = self._loads.begin(partition, epoch, steps)
        if ids is not None:
            self._install(partition, epoch, ids)
        return ids

    # --- elections (kafkapy.server.coordinator_elections) ---------------------------------------

    def on_election(self, partition: int, epoch: int, in_place: bool = True) -> None:
        """Kafka's onElection: this broker leads ``partition`` under ``epoch`` now, and its load
        begins before any request names one of its ids (nothing to do if it is loaded or loading
        under that epoch already)."""
        if self._loads.epoch_of(partition) == epoch or (
                partition in self._loaded and self._loaded_epochs.get(partition) == epoch):
            return
        log.info("elected as the coordinator of %s-%d at epoch %d", TRANSACTION_STATE_TOPIC, partition, epoch)
        try:
            self._begin_load(partition, epoch, in_place=in_place)
        except KafkaApiError as exc:  # unreadable (its log dir failed, say): a request tries again
            log.warning("could not load %s-%d: %s", TRANSACTION_STATE_TOPIC, partition, exc)

    def on_resignation(self, partition: int) -> None:
        """Kafka's onResignation: another broker leads ``partition`` (or none does); its ids and
        any load under way go."""
        if partition in self._loaded or self._loads.epoch_of(partition) is not None:
            log.info("resigned as the coordinator of %s-%d", TRANSACTION_STATE_TOPIC, partition)
        self._unload(partition)

    def _still_led(self, partition: int, epoch: int) -> bool:
        return self.leads(partition) and self.leader_epoch(partition) == epoch

    def _install(self, partition: int, epoch: int, ids: dict[str, TxnMetadata]) -> None:
        """A replayed partition into the cache; transactions left in PREPARE_* get their markers
        sent again (after the cache holds them, so their COMPLETE_* can be written)."""
        self._loaded[partition] = ids
        self._loaded_epochs[partition] = epoch
        for metadata in ids.values():
            if metadata.state.is_completing:
                self._spawn(self._finish(metadata))

    def _unload(self, partition: int) -> None:
        """The partition's cache dropped and its load, if one is going on, stopped."""
        self._loaded.pop(partition, None)
        self._loaded_epochs.pop(partition, None)
        self._loads.stop(partition)

    def load_soon(self, partition: int) -> None:
        """Begin loading ``partition`` unless it is loaded or loading (FindCoordinator names this
        broker before the election's pass has run: the load starts before the id's first request)."""
        if self.leads(partition):
            self.on_election(partition, self.leader_epoch(partition))

    def loaded_partitions(self) -> dict[int, int]:
        """The partitions loaded here, each with the leader epoch it was loaded under (inspection;
        no side effects)."""
        return {partition: self._loaded_epochs[partition] for partition in self._loaded}

    def loading(self) -> list[int]:
        """The partitions led here whose load is going on (ListTransactions' answer waits for them)."""
        return [partition for partition in self._loads.partitions() if self.leads(partition)]

    async def wait_for_loads(self) -> None:
        """Until no load is going on (tests)."""
        await self._loads.wait()

    def loaded(self) -> Iterable[TxnMetadata]:
        """Every id of every partition led here and loaded (for listing, timeouts, expiry)."""
        for partition in list(self._loaded):
            if not self.leads(partition):
                self._unload(partition)
                continue
            if self._loaded_epochs.get(partition) != self.leader_epoch(partition):
                try:
                    self._load(partition)
                except _Refused:
                    continue
            yield from list(self._loaded[partition].values())

    def load_led_partitions(self) -> None:
        """Load (or begin loading) every partition led here that is not loaded yet (ListTransactions,
        the timers)."""
        for partition in range(self.config.partition_count):
            if partition not in self._loaded and self.leads(partition):
                try:
                    self._load(partition)
                except _Refused:
                    continue

    def get(self, transactional_id: str) -> TxnMetadata | None:
        try:
            return self._ids_of(transactional_id).get(transactional_id)
        except _Refused:
            return None

    def _write(self, next_value: TxnMetadata | None, transactional_id: str) -> None:
        """Append ``next_value`` (None: a tombstone) and put it in the cache once durable."""
        partition = self.partition_for(transactional_id)
        ids = self._loaded.get(partition)
        if ids is None or self._loaded_epochs[partition] != self.leader_epoch(partition):
            raise _Refused(ErrorCode.NOT_COORDINATOR)  # resigned, reset or moved since the request began
        try:
            self.state_log.append(partition, transactional_id, next_value)
        except KafkaApiError as exc:
            raise _Refused(APPEND_ERRORS.get(exc.code, ErrorCode.UNKNOWN_SERVER_ERROR)) from None
        if next_value is None:
            ids.pop(transactional_id, None)
        else:
            ids[transactional_id] = next_value

    # --- InitProducerId -------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> InitResult:
        """Kafka's handleInitProducerId for a transactional id; ``expected`` is the client's
        current (producer id, epoch) when it asks for a KIP-360 bump."""
        try:
            return await self._init(transactional_id, timeout_ms, expected)
        except _Refused as refused:
            return InitResult(refused.code)

    async def _init(self, transactional_id: str, timeout_ms: int,
                    expected: tuple[int, int] | None) -> InitResult:
        if not transactional_id:
            raise _Refused(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            raise _Refused(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        ids = self._ids_of(transactional_id)
        current = ids.get(transactional_id)
        now = self.now_ms()
        if current is None:
            producer_id = await self.new_producer_id()
            current = TxnMetadata(transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms,
                                  TxnState.EMPTY, now)
        if expected is not None and not self._may_bump(current, *expected):
            raise _Refused(ErrorCode.PRODUCER_FENCED)
        state = current.state
        if state.is_completing:
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state is TxnState.ONGOING:
            await self._fence_and_abort(current)
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
        if epoch_exhausted(current.producer_epoch) and (expected is None
                                                         or expected[1] == current.producer_epoch):
            # Rotation: a new producer id at epoch 0 (Kafka's prepareProducerIdRotation).
            next_value = current.transit(
                TxnState.EMPTY, now, producer_id=await self.new_producer_id(), producer_epoch=0,
                previous_producer_id=current.producer_id,
                last_producer_epoch=current.producer_epoch if expected is not None else NO_PRODUCER_EPOCH,
                timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1)
        else:
            epoch, last_epoch = self._bumped_epoch(current, None if expected is None else expected[1])
            next_value = current.transit(TxnState.EMPTY, now, producer_epoch=epoch,
                                         last_producer_epoch=last_epoch, timeout_ms=timeout_ms,
                                         partitions=frozenset(), start_ms=-1)
        self._write(next_value, transactional_id)
        return InitResult(ErrorCode.NONE, next_value.producer_id, next_value.producer_epoch)

    @staticmethod
    def _may_bump(current: TxnMetadata, producer_id: int, epoch: int) -> bool:
        """Kafka's isValidProducerId: a new id, the current id, or a retry after a rotation."""
        return (current.producer_epoch == NO_PRODUCER_EPOCH or producer_id == current.producer_id
                or (producer_id == current.previous_producer_id and epoch_exhausted(epoch)))

    @staticmethod
    def _bumped_epoch(current: TxnMetadata, expected_epoch: int | None) -> tuple[int, int]:
        """(new epoch, last epoch) as Kafka's prepareIncrementProducerEpoch: a retried KIP-360
        request whose bump already happened gets the same epoch again."""
        bumped = current.producer_epoch + 1
        if expected_epoch is None:
            return bumped, NO_PRODUCER_EPOCH
        if current.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == current.producer_epoch:
            return bumped, current.producer_epoch
        if expected_epoch == current.last_producer_epoch:
            return current.producer_epoch, current.last_producer_epoch
        raise _Refused(ErrorCode.PRODUCER_FENCED)

    # --- AddPartitionsToTxn, AddOffsetsToTxn -----------------------------------------------------

    def _checked(self, transactional_id: str, producer_id: int, epoch: int) -> TxnMetadata:
        """The id's value, if the request's producer id and epoch are its current ones."""
        if not transactional_id:
            raise _Refused(ErrorCode.INVALID_REQUEST)
        current = self._ids_of(transactional_id).get(transactional_id)
        if current is None or current.producer_id != producer_id:
            raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if current.producer_epoch != epoch:
            raise _Refused(ErrorCode.PRODUCER_FENCED)
        return current

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: Collection[TopicPartition]) -> ErrorCode:
        """Kafka's handleAddPartitionsToTransaction: the partitions join the (new or ongoing)
        transaction. Answered once the ONGOING record is in the log, as Kafka answers."""
        try:
            current = self._checked(transactional_id, producer_id, epoch)
            if current.state.is_completing:
                raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
            if current.state is TxnState.ONGOING and current.partitions.issuperset(partitions):
                return ErrorCode.NONE
            now = self.now_ms()
            start = current.start_ms if current.state is TxnState.ONGOING else now
            next_value = current.transit(TxnState.ONGOING, now, start_ms=start,
                                         partitions=current.partitions | frozenset(partitions))
            self._write(next_value, transactional_id)
        except _Refused as refused:
            return refused.code
        return ErrorCode.NONE

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Collection[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890's verify-only AddPartitionsToTxn: NONE for the partitions already in the
        transaction, TRANSACTION_ABORTABLE for the others; nothing changes. A TxnOffsetCommit
        check (is the group's offsets partition in the producer's transaction?) is this call."""
        try:
            current = self._checked(transactional_id, producer_id, epoch)
            if current.state.is_completing:
                raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
        except _Refused as refused:
            return dict.fromkeys(partitions, refused.code)
        return {tp: ErrorCode.NONE if tp in current.partitions else ErrorCode.TRANSACTION_ABORTABLE
                for tp in partitions}

    # --- EndTxn ---------------------------------------------------------------------------------

    async def end_transaction(self, transactional_id: str, producer_id: int, epoch: int,
                              committed: bool) -> ErrorCode:
        """Kafka's handleEndTransaction (Transactions V1: the epoch stays as it is)."""
        try:
            current = self._to_end(transactional_id, producer_id, epoch, committed)
            if current is not None:
                local = all(map(self.is_local, current.partitions))
                prepared = self._prepare(current, committed)
                if local:
                    self._finish_soon(prepared)
                else:
                    await self._finish(prepared)
        except _Refused as refused:
            return refused.code
        return ErrorCode.NONE

    def end_transaction_now(self, transactional_id: str, producer_id: int, epoch: int,
                            committed: bool) -> ErrorCode | None:
        """``end_transaction`` when it needs no waiting: the same answer and the same effects,
        or None, with nothing done, when a partition of the transaction is led by another
        broker (its marker is tried before answering, which waits)."""
        try:
            current = self._to_end(transactional_id, producer_id, epoch, committed)
            if current is not None:
                if not all(map(self.is_local, current.partitions)):
                    return None
                self._finish_soon(self._prepare(current, committed))
        except _Refused as refused:
            return refused.code
        return ErrorCode.NONE

    def _to_end(self, transactional_id: str, producer_id: int, epoch: int,
                committed: bool) -> TxnMetadata | None:
        """The ONGOING transaction EndTxn ends; None for a retry of an end that completed."""
        if not transactional_id:
            raise _Refused(ErrorCode.INVALID_REQUEST)
        current = self._ids_of(transactional_id).get(transactional_id)
        if current is None or current.producer_id != producer_id:
            raise _Refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if epoch != current.producer_epoch:
            raise _Refused(ErrorCode.PRODUCER_FENCED)
        state = current.state
        if state is (TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT):
            return None  # a retried EndTxn of a transaction that has completed
        if state is (TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT):
            raise _Refused(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state is not TxnState.ONGOING:
            raise _Refused(ErrorCode.INVALID_TXN_STATE)
        return current

    def _prepare(self, current: TxnMetadata, committed: bool) -> TxnMetadata:
        """PREPARE_COMMIT or PREPARE_ABORT in the log: the outcome is decided."""
        prepared = current.transit(TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT,
                                   self.now_ms())
        self._write(prepared, current.transactional_id)
        return prepared

    def _finish_soon(self, prepared: TxnMetadata) -> None:
        """Finish a transaction whose partitions are all led here in the loop's next step, after
        the answer went out: a plain callback when the markers can be written in place, else a task."""
        if self.write_local_markers is None:
            self._spawn(self._finish(prepared))
            return
        loop = asyncio.get_running_loop()
        self._soon[prepared.transactional_id] = loop.call_soon(self._finish_local, prepared)

    def _finish_local(self, prepared: TxnMetadata) -> None:
        """``_finish`` with the markers written in place; a partition that refused its marker
        (leadership moved since EndTxn) is retried in the background, as ``_finish`` retries."""
        self._soon.pop(prepared.transactional_id, None)
        write = self.write_local_markers
        assert write is not None
        epoch = self.coordinator_epoch(prepared.transactional_id)
        left: set[TopicPartition] | None = set()
        if prepared.partitions:
            remaining = set(prepared.partitions)
            left = self._unmarked(prepared, remaining, write(self._marker(prepared, remaining)))
        if left is None:
            return
        if left:
            self._spawn(self._finish_later(prepared, left, epoch))
            return
        try:
            self._complete_now(prepared)
        except _Refused as refused:
            log.warning("could not complete the transaction of %s: %s", prepared.transactional_id,
                        refused.code.name)

    async def _fence_and_abort(self, current: TxnMetadata) -> None:
        """Bump the epoch of an ONGOING transaction (PREPARE_EPOCH_FENCE, never written) and abort
        it under the bumped epoch: the producer that had it is fenced."""
        now = self.now_ms()
        fence = current.transit(TxnState.PREPARE_EPOCH_FENCE, now, producer_epoch=current.producer_epoch + 1,
                                last_producer_epoch=NO_PRODUCER_EPOCH)
        prepared = fence.transit(TxnState.PREPARE_ABORT, now)
        self._write(prepared, current.transactional_id)
        await self._finish(prepared)

    async def _finish(self, prepared: TxnMetadata) -> None:
        """Markers to every partition, then COMPLETE_*: one try here, the partitions it could not
        reach again in the background. Under one coordinator epoch: if the partition is loaded
        again under another meanwhile, that load's own finishing takes over."""
        epoch = self.coordinator_epoch(prepared.transactional_id)
        remaining = await self._send_once(prepared, set(prepared.partitions))
        if remaining is None or self.coordinator_epoch(prepared.transactional_id) != epoch:
            return
        if remaining:
            self._spawn(self._finish_later(prepared, remaining, epoch))
            return
        await self._complete(prepared)

    async def _finish_later(self, prepared: TxnMetadata, remaining: set[TopicPartition], epoch: int) -> None:
        while remaining:
            await self.sleep(self.config.marker_retry_backoff_ms / 1000)
            if (self.get(prepared.transactional_id) != prepared
                    or self.coordinator_epoch(prepared.transactional_id) != epoch):
                return  # resigned, moved on, or loaded again (that load finishes it)
            left = await self._send_once(prepared, remaining)
            if left is None:
                return
            remaining = left
        if self.coordinator_epoch(prepared.transactional_id) == epoch:
            await self._complete(prepared)

    def _marker(self, prepared: TxnMetadata, remaining: set[TopicPartition]) -> TxnMarker:
        return TxnMarker(prepared.producer_id, prepared.producer_epoch,
                         prepared.state is TxnState.PREPARE_COMMIT,
                         self.coordinator_epoch(prepared.transactional_id), tuple(sorted(remaining)))

    async def _send_once(self, prepared: TxnMetadata,
                         remaining: set[TopicPartition]) -> set[TopicPartition] | None:
        """The partitions still without their marker after one try; None to stop sending."""
        if not remaining:
            return remaining
        resets = self.resets
        results = await self.send_markers(self._marker(prepared, remaining))
        if resets != self.resets:
            return None  # the coordinator was reset meanwhile: this transaction is forgotten
        return self._unmarked(prepared, remaining, results)

    def _unmarked(self, prepared: TxnMetadata, remaining: set[TopicPartition],
                  results: Mapping[TopicPartition, ErrorCode]) -> set[TopicPartition] | None:
        """The partitions of ``remaining`` whose marker is still due after ``results``; None to
        stop sending (a newer producer or coordinator epoch owns a partition)."""
        left = set()
        for tp in remaining:
            code = results.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
            if code == ErrorCode.NONE:
                continue
            if code in _STOP_SENDING:
                log.warning("stopped sending markers for %s: %s from %s-%d", prepared.transactional_id,
                            code.name, *tp)
                return None
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not self.topic_exists(tp[0]):
                continue  # the topic was deleted: nothing to mark
            left.add(tp)
        return left

    def _complete_now(self, prepared: TxnMetadata) -> None:
        """COMPLETE_COMMIT or COMPLETE_ABORT in the log, once every marker is written."""
        committed = prepared.state is TxnState.PREPARE_COMMIT
        target = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        completed = prepared.transit(target, self.now_ms(), partitions=frozenset(),
                                     last_producer_epoch=prepared.producer_epoch)
        self._write(completed, prepared.transactional_id)

    async def _complete(self, prepared: TxnMetadata) -> None:
        try:
            self._complete_now(prepared)
        except _Refused as refused:
            # The outcome is in the log as PREPARE_*: the next coordinator finishes it on load.
            log.warning("could not complete the transaction of %s: %s", prepared.transactional_id,
                        refused.code.name)

    def _spawn(self, work: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the loads and the background marker retries (tests; shutdown cancels them instead)."""
        await self._loads.wait()
        await asyncio.sleep(0)  # the transactions finished in the next loop step
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._loads.stop_all()
        for handle in self._soon.values():
            handle.cancel()
        self._soon.clear()

    def forget_all(self) -> None:
        """Every transactional id gone, open transactions dropped without markers (a broker
        reset, whose caller empties ``__transaction_state`` and the partitions the transactions
        wrote to). A producer still connected then hears Kafka's answer for an id the coordinator
        does not know: INVALID_PRODUCER_ID_MAPPING, until it calls InitProducerId again."""
        self.resets += 1
        self.cancel()
        self._loaded.clear()
        self._loaded_epochs.clear()

    # --- timers ---------------------------------------------------------------------------------

    async def abort_timed_out(self) -> list[str]:
        """Abort every ONGOING transaction open longer than its timeout (Kafka's
        abortTimedOutTransactions); the ids aborted."""
        now = self.now_ms()
        aborted = []
        for metadata in list(self.loaded()):
            if (metadata.state is TxnState.ONGOING and metadata.start_ms + metadata.timeout_ms < now):
                try:
                    await self._fence_and_abort(metadata)
                except _Refused as refused:
                    log.info("could not abort the timed-out transaction of %s: %s", metadata.transactional_id,
                             refused.code.name)
                    continue
                aborted.append(metadata.transactional_id)
        return aborted

    async def expire_transactional_ids(self) -> list[str]:
        """Forget ids idle (EMPTY or COMPLETE_*) for transactional.id.expiration.ms: a tombstone
        each (Kafka's removeExpiredTransactionalIds, by way of DEAD)."""
        now = self.now_ms()
        expired = []
        for metadata in list(self.loaded()):
            if (metadata.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
                    and metadata.last_update_ms + self.config.transactional_id_expiration_ms <= now):
                metadata.transit(TxnState.DEAD, now)  # the table's check; DEAD itself is the tombstone
                try:
                    self._write(None, metadata.transactional_id)
                except _Refused:
                    continue
                expired.append(metadata.transactional_id)
        return expired

    # --- DescribeTransactions, ListTransactions ----------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        try:
            current = self._ids_of(transactional_id).get(transactional_id)
        except _Refused as refused:
            return refused.code, None
        if current is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, current

    def list(self, states: Collection[TxnState] | None = None, producer_ids: Collection[int] = (),
             min_duration_ms: int = -1,
             matches: Callable[[str], bool] = lambda name: True) -> tuple[ErrorCode, list[TxnMetadata]]:
        """Kafka's listTransactionStates: ``states`` None and empty ``producer_ids`` match
        everything; the duration filter (KIP-994) keeps those whose start is longer ago than
        ``min_duration_ms``, as Kafka compares it (an id with no transaction has start -1).
        COORDINATOR_LOAD_IN_PROGRESS, nothing listed, while a partition led here loads."""
        self.load_led_partitions()
        if self.loading():
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        now = self.now_ms()
        found = []
        for metadata in self.loaded():
            if states is not None and metadata.state not in states:
                continue
            if producer_ids and metadata.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and now - metadata.start_ms <= min_duration_ms:
                continue
            if not matches(metadata.transactional_id):
                continue
            found.append(metadata)
        return ErrorCode.NONE, found
