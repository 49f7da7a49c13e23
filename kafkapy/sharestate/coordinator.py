"""The share coordinator over ``__share_group_state``'s partition logs (Kafka's
ShareCoordinatorService with its runtime, reduced to one process's needs).

Theory of operation
-------------------
A share-partition's state lives in the ``__share_group_state`` partition its coordinator key hashes
to (``state.state_partition_for``); the leader of that partition is its coordinator. Each
operation first makes sure this broker leads the partition (NOT_COORDINATOR otherwise) and has
loaded it under the current leader epoch. A partition is loaded when this broker comes to lead
it (``on_election``, Kafka's scheduleLoadOperation, called by the module from the cluster view:
kafkapy.server.coordinator_elections), and again when it is led under a new epoch (it moved away
and back, another coordinator wrote meanwhile); an operation that finds it neither loaded nor
loading (the election's pass has not run yet) begins the load itself. It is read from its log
start to its end, ``share.coordinator.load.buffer.size`` bytes at a time, and replayed into a
shard of its own, in slices of ``REPLAY_SLICE_RECORDS`` records: the first slice runs in place,
so a partition that fits in it is loaded before any request for it comes; a longer one goes on
in the background, one slice per loop step (kafkapy.server.partition_loads), and meanwhile its
keys are answered COORDINATOR_LOAD_IN_PROGRESS, as Kafka's CoordinatorRuntime answers a partition
in LOADING (share partition leaders retry it: persister.py). Before each slice the load checks
that the partition is still led here under the epoch it began with, and stops if not. Once
replayed, the partition's keys join the coordinator's shard whole.

Then the shard (``state.ShareStateShard``) decides, the record goes to the log as one magic-2
batch of one uncompressed record (as the transaction coordinator writes its own), and only then is
it replayed into the shard: a failed append changes nothing. Append errors are mapped to the
coordinator's, as Kafka's CoordinatorRuntime maps them (NOT_LEADER_OR_FOLLOWER is NOT_COORDINATOR, a
missing partition COORDINATOR_NOT_AVAILABLE). An OSError from the log takes the partition's log dir
offline as a Produce's does (KIP-112): KAFKA_STORAGE_ERROR, so NOT_COORDINATOR, and the partition
is not led here any more (the module's ``leader_epoch`` says None for it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator
from typing import Final

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.base import PartitionLog
from kafkapy.protocol.one_record_batch import one_record_batch
from kafkapy.protocol.records import RecordBatch
from kafkapy.server.internal_topics import APPEND_ERRORS
from kafkapy.server.partition_loads import PartitionLoads, load_batches
from kafkapy.sharestate.records import ShareStateRecordError, decode_record, encode_record
from kafkapy.sharestate.state import (
    SharePartitionKey,
    ShareStateRecord,
    ShareStateShard,
    ShareStateValue,
    StateBatch,
    state_partition_for,
)

__all__ = ["LOAD_BUFFER_BYTES", "SHARE_STATE_TOPIC", "ShareCoordinator", "share_state_topic_configs"]

SHARE_STATE_TOPIC = "__share_group_state"
LOAD_BUFFER_BYTES: Final = 5 * 1024 * 1024
"""Bytes read at a time while loading: Kafka's share.coordinator.load.buffer.size default."""
REPLAY_SLICE_RECORDS: Final = 128
"""Records replayed between two yields of a load: under 10 ms of the loop's time (a state record
replays in about 50 us on the 2-core machine that measured it)."""
_LOADING_MESSAGE = "The coordinator is loading and hence can't process requests."  # Kafka's Errors text

log = logging.getLogger(__name__)


def share_state_topic_configs(segment_bytes: int, min_isr: int) -> dict[str, str]:
    """The configs Kafka creates ``__share_group_state`` with (ShareCoordinatorService's
    shareGroupStateTopicConfigs, as KIP-932 defines them): delete, not compact (snapshots make
    old records useless, and Kafka prunes them itself), batches kept as written."""
    return {"cleanup.policy": "delete", "compression.type": "producer", "segment.bytes": str(segment_bytes),
            "min.insync.replicas": str(min_isr)}


class ShareCoordinator:
    """The shard of the state partitions led here, loaded on election, written through the log."""

    def __init__(self, leader_log: Callable[[str, int], PartitionLog],
                 leader_epoch: Callable[[int], int | None], partition_count: Callable[[], int],
                 snapshot_every: int, now_ms: Callable[[], int],
                 appended: Callable[[str, int], None] = lambda topic, partition: None,
                 storage_failed: Callable[[str, int, OSError], KafkaApiError] | None = None,
                 append_log: Callable[[str, int], PartitionLog] | None = None,
                 slice_records: int = REPLAY_SLICE_RECORDS,
                 load_buffer_bytes: int = LOAD_BUFFER_BYTES) -> None:
        self._leader_log = leader_log
        # where a state record is written: refused NOT_ENOUGH_REPLICAS below the topic's min ISR
        # (Kafka's share coordinator writes with acks=-1); leader_log if not given
        self._append_log = append_log or leader_log
        # An OSError on a state partition's log: its dir goes offline (PartitionLogs.storage_failed)
        self._on_storage_failure = storage_failed
        self._leader_epoch = leader_epoch  # of a state partition led here; None when not led here
        self._partition_count = partition_count
        self._now_ms = now_ms
        self._appended = appended
        self.shard = ShareStateShard(snapshot_every)
        self._loaded: dict[int, int] = {}  # state partition -> the leader epoch it was loaded under
        self._loads: PartitionLoads[tuple[ShareStateShard, int]] = PartitionLoads(
            SHARE_STATE_TOPIC, self._still_led, self._install, log)
        self._slice_records = slice_records
        self._load_buffer_bytes = load_buffer_bytes  # share.coordinator.load.buffer.size

    def forget_all(self) -> None:
        """Every loaded state partition goes (kafkapy.inspection.reset, which empties the logs)."""
        self.close()
        self.shard.forget(list(self.shard.states))
        self._loaded.clear()

    def close(self) -> None:
        """Every load under way stops (the broker stops, or a reset)."""
        self._loads.stop_all()

    def loaded_partitions(self) -> dict[int, int]:
        """The state partitions loaded here, each with the leader epoch it was loaded under."""
        return dict(self._loaded)

    def loading(self) -> list[int]:
        """The state partitions whose load is going on."""
        return self._loads.partitions()

    async def wait_for_loads(self) -> None:
        """Until no load is going on (tests)."""
        await self._loads.wait()

    def partition_for(self, key: SharePartitionKey) -> int:
        return state_partition_for(key, self._partition_count())

    # -- operations ----------------------------------------------------------------------------

    def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None:
        self._ready(key)
        self._commit(self.shard.initialize(key, state_epoch, start_offset, self._now_ms()))

    def read(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateValue:
        self._ready(key)
        state, record = self.shard.read(key, leader_epoch, self._now_ms())
        if record is not None:
            self._commit(record)
        return state

    def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: tuple[StateBatch, ...]) -> None:
        self._ready(key)
        self._commit(self.shard.write(key, state_epoch, leader_epoch, start_offset, batches,
                                      self._now_ms()))

    def summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareStateValue:
        self._ready(key)
        return self.shard.summary(key, leader_epoch)

    def delete(self, key: SharePartitionKey) -> None:
        self._ready(key)
        record = self.shard.delete(key)
        if record is not None:
            self._commit(record)

    # -- loading and writing -------------------------------------------------------------------

    def _ready(self, key: SharePartitionKey) -> None:
        """NOT_COORDINATOR unless this broker leads the key's state partition; loads it if need be."""
        partition = self.partition_for(key)
        epoch = self._leader_epoch(partition)
        if epoch is None:
            self._unload(partition)
            raise KafkaApiError(ErrorCode.NOT_COORDINATOR, "This is not the share coordinator of the key.")
        if self._loaded.get(partition) != epoch:
            self._load(partition, epoch)

    def _unload(self, partition: int) -> None:
        """The partition's keys go and its load, if one is going on, stops."""
        self._loads.stop(partition)
        if self._loaded.pop(partition, None) is not None:
            self.shard.forget(k for k in self.shard.states if self.partition_for(k) == partition)

    def _load(self, partition: int, epoch: int) -> None:
        """Loaded in place if the replay fits in one slice; else it goes on in the background and
        this raises COORDINATOR_LOAD_IN_PROGRESS."""
        if self._loads.epoch_of(partition) == epoch:
            loaded = self._loads.take_slice(partition, epoch)  # a short one queued ends here
        else:
            loaded = self._begin_load(partition, epoch, in_place=True)
        if not loaded:
            raise KafkaApiError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, _LOADING_MESSAGE)

    def _begin_load(self, partition: int, epoch: int, *, in_place: bool) -> bool:
        """The partition's keys go and its replay begins: its first slice now if ``in_place``
        (True, and installed, if that finished it), else all of it in the background."""
        self._unload(partition)
        steps = self._replay_in_slices(partition)
        if not in_place:
            self._loads.schedule(partition, epoch, steps)
            return False
        replayed = self._loads.begin(partition, epoch, steps)
        if replayed is None:
            return False
        self._install(partition, epoch, replayed)
        return True

    def on_election(self, partition: int, epoch: int, in_place: bool = True) -> None:
        """Kafka's scheduleLoadOperation: this broker leads ``partition`` under ``epoch`` now, and
        its load begins before any request names one of its keys (nothing to do if it is loaded or
        loading under that epoch already)."""
        if self._loaded.get(partition) == epoch or self._loads.epoch_of(partition) == epoch:
            return
        try:
            self._begin_load(partition, epoch, in_place=in_place)
        except KafkaApiError as exc:  # unreadable (its log dir failed, say): a request tries again
            log.warning("could not load %s-%d: %s", SHARE_STATE_TOPIC, partition, exc)

    def on_resignation(self, partition: int) -> None:
        """Kafka's scheduleUnloadOperation: the partition's keys and any load under way go."""
        self._unload(partition)

    def _still_led(self, partition: int, epoch: int) -> bool:
        try:
            return self._leader_epoch(partition) == epoch
        except KafkaApiError:  # the topic is gone
            return False

    def _install(self, partition: int, epoch: int, replayed: tuple[ShareStateShard, int]) -> None:
        """A replayed partition's keys into the coordinator's shard."""
        loaded, records = replayed
        self.shard.adopt(loaded)
        self._loaded[partition] = epoch
        log.info("loaded %s-%d (%d records) under leader epoch %d", SHARE_STATE_TOPIC, partition, records,
                 epoch)

    def _replay_in_slices(self, partition: int) -> Generator[None, None, tuple[ShareStateShard, int]]:
        """The partition replayed into a shard of its own, yielding after every slice of records;
        returns the shard and the count of records. An OSError reading the log takes its dir
        offline (the coordinator's error, as an append's)."""
        loaded = ShareStateShard(self.shard.snapshot_every)
        records = 0
        try:
            for record in self._replay(partition):
                loaded.replay(record)
                records += 1
                if records % self._slice_records == 0:
                    yield
        except OSError as exc:
            raise _as_coordinator_error(self._storage_failed(SHARE_STATE_TOPIC, partition, exc)) from None
        return loaded, records

    def _replay(self, partition: int) -> Iterator[ShareStateRecord]:
        source = self._log(partition)
        for batch in load_batches(source, self._load_buffer_bytes, end=source.log_end_offset,
                                  what=f"{SHARE_STATE_TOPIC}-{partition}", log=log):
            if not isinstance(batch, RecordBatch) or batch.is_control:
                continue
            for record in batch.records():
                if record.key is None:
                    continue
                try:
                    yield decode_record(record.key, record.value)
                except ShareStateRecordError as exc:  # a newer broker's record: Kafka skips it too
                    log.warning("%s-%d offset %d skipped: %s", SHARE_STATE_TOPIC, partition,
                                record.offset, exc)

    def _commit(self, record: ShareStateRecord) -> None:
        """Append ``record`` to its partition, then replay it into the shard."""
        partition = self.partition_for(record.key)
        target = self._log(partition, self._append_log)
        key, value = encode_record(record)
        epoch = self._leader_epoch(partition)
        batch = one_record_batch(key, value, base_offset=target.log_end_offset, base_timestamp=self._now_ms(),
                                 partition_leader_epoch=-1 if epoch is None else epoch)
        try:
            target.append(batch, header=RecordBatch(batch))
        except KafkaApiError as exc:
            raise _as_coordinator_error(exc) from None
        except OSError as exc:  # the disk refused: its dir goes offline (so NOT_COORDINATOR)
            raise _as_coordinator_error(self._storage_failed(SHARE_STATE_TOPIC, partition, exc)) from None
        self._appended(SHARE_STATE_TOPIC, partition)
        self.shard.replay(record)

    def _storage_failed(self, topic: str, partition: int, exc: OSError) -> KafkaApiError:
        if self._on_storage_failure is not None:
            return self._on_storage_failure(topic, partition, exc)
        return KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"{topic}-{partition}: {exc}")

    def _log(self, partition: int, which: Callable[[str, int], PartitionLog] | None = None) -> PartitionLog:
        try:
            return (which or self._leader_log)(SHARE_STATE_TOPIC, partition)
        except KafkaApiError as exc:
            raise _as_coordinator_error(exc) from None


def _as_coordinator_error(exc: KafkaApiError) -> KafkaApiError:
    return KafkaApiError(APPEND_ERRORS.get(exc.code, ErrorCode.UNKNOWN_SERVER_ERROR), exc.message)
