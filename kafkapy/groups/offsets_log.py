"""The GroupLog over the data plane's partition logs: ``__consumer_offsets`` as Kafka keeps it.

Theory of operation
-------------------
The coordinator's decisions go to the group's partition of ``__consumer_offsets`` (Kafka's rule,
``partitioning.offsets_partition_for``) as one magic-2 record batch per ``append``: producer id
-1, create time stamped now, uncompressed unless ``offsets.topic.compression.codec`` says
otherwise (Kafka's default, 0: none). Keys and values are Kafka's own bytes (``record_codec``),
so a Kafka tool reading our topic, or we reading Kafka's, see the same records.

The batch goes into the log the way Produce puts one there (offsets from the log end, the
partition's leader epoch), and Fetch's waiters are woken. With one replica per partition the
high watermark is the log end once the append returns: that is acks=all here, as for Produce.

TxnOffsetCommit's records go in as a transactional batch of the producer's id and epoch
(``append_transactional``, Kafka's GroupMetadataManager.storeOffsets with a producer id): the
partition's producer state checks and records it first, as Produce's path does, so the batch
opens the producer's transaction there and the coordinator's COMMIT or ABORT marker closes it.

``replay`` reads the partition from its log start to the high watermark, batch by batch, in log
order, ``offsets.load.buffer.size`` bytes at a time (a batch larger than that whole). A
transactional batch's records are held per producer id until its control batch: a COMMIT marker
hands them on at the marker's place, an ABORT marker drops them, and those still open when the
log ends come last as OpenTxnRecords (pending until their marker). A record type
kafkapy has no schema for is skipped, as Kafka's loader skips it; any other undecodable record
stops the replay with a GroupRecordError naming the partition and offset.

Errors are the coordinator's, mapped from the data plane's as Kafka's group coordinator maps
them (GroupCoordinatorService): a partition that does not exist (yet) or cannot be written is
COORDINATOR_NOT_AVAILABLE, one this broker does not lead is NOT_COORDINATOR. An OSError from the
log (an append or a replay's read) takes the partition's log dir offline as a Produce's does
(``PartitionLogs.storage_failed``, KIP-112): KAFKA_STORAGE_ERROR, so NOT_COORDINATOR, and the group
module resigns the partition (``PartitionLogs.is_offline``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.partitioning import OFFSETS_TOPIC, offsets_partition_for
from kafkapy.groups.persistence import OpenTxnRecords
from kafkapy.groups.record_codec import GroupRecordError, UnknownRecordType, decode_record, encode_record
from kafkapy.groups.records import GroupRecord
from kafkapy.log.base import PartitionLog
from kafkapy.log.producer_state import COMMIT, CONTROL_RECORD_KEY, NO_SEQUENCE, ProducerStateManager
from kafkapy.protocol.records import Compression, RecordBatch, build_record_batch
from kafkapy.server.partition_loads import load_batches
from kafkapy.server.services import PartitionLogs

__all__ = ["COORDINATOR_ERRORS", "DEFAULT_LOAD_BUFFER_BYTES", "DEFAULT_OFFSETS_TOPIC_SEGMENT_BYTES",
           "NO_PRODUCER", "OffsetsTopicLog", "offsets_topic_configs"]

_log = logging.getLogger(__name__)
NO_PRODUCER = -1  # the coordinator's batches are not idempotent: producer id, epoch and sequence -1
_SEQUENCE_WRAP = 1 << 31  # sequences are int32s that wrap to 0 (Kafka's DefaultRecordBatch.incrementSequence)
DEFAULT_LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # Kafka's offsets.load.buffer.size

DEFAULT_OFFSETS_TOPIC_SEGMENT_BYTES = 100 * 1024 * 1024  # Kafka's offsets.topic.segment.bytes


def offsets_topic_configs(segment_bytes: int = DEFAULT_OFFSETS_TOPIC_SEGMENT_BYTES) -> dict[str, str]:
    """The configs Kafka creates ``__consumer_offsets`` with (GroupCoordinatorService's
    groupMetadataTopicConfigs): compacted, batches kept as the coordinator wrote them, segments of
    ``offsets.topic.segment.bytes``."""
    return {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": str(segment_bytes)}


# The data plane's error -> the coordinator's (Kafka's GroupCoordinatorService.handleOperationException).
COORDINATOR_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class OffsetsTopicLog:
    """``persistence.GroupLog`` over the partitions the data plane offers (PARTITION_LOGS)."""

    def __init__(self, partitions: PartitionLogs, partition_count: int, *,
                 compression: Compression | int | str = "none",
                 clock_ms: Callable[[], int] = _wall_clock_ms,
                 load_buffer_bytes: int = DEFAULT_LOAD_BUFFER_BYTES) -> None:
        if partition_count < 1:
            raise ValueError(f"offsets.topic.num.partitions must be at least 1, got {partition_count}")
        self._partitions = partitions
        self._partition_count = partition_count
        self._compression = compression
        self._clock_ms = clock_ms
        self._load_buffer_bytes = load_buffer_bytes  # offsets.load.buffer.size: bytes a replay reads

    @property
    def partition_count(self) -> int:
        return self._partition_count

    def partition_for(self, group_id: str) -> int:
        return offsets_partition_for(group_id, self._partition_count)

    def _leader_log(self, partition: int) -> PartitionLog:
        try:
            return self._partitions.leader_log(OFFSETS_TOPIC, partition)
        except KafkaApiError as exc:
            raise _as_coordinator_error(exc, partition) from None

    def _append_log(self, partition: int) -> PartitionLog:
        """The partition's log for the coordinator's write, which waits on every in-sync replica
        (Kafka's coordinators write with acks=-1): NOT_ENOUGH_REPLICAS below the topic's min ISR
        is COORDINATOR_NOT_AVAILABLE."""
        try:
            return self._partitions.leader_log_for_acks_all(OFFSETS_TOPIC, partition)
        except KafkaApiError as exc:
            raise _as_coordinator_error(exc, partition) from None

    def _storage_failed(self, partition: int, exc: OSError) -> KafkaApiError:
        """The partition's log dir goes offline (as a Produce's OSError takes it); the coordinator's
        error for it (KAFKA_STORAGE_ERROR is NOT_COORDINATOR)."""
        failed = self._partitions.storage_failed(OFFSETS_TOPIC, partition, exc)
        return _as_coordinator_error(failed, partition)

    async def append(self, group_id: str, records: Sequence[GroupRecord]) -> None:
        """One batch of ``records`` to the group's partition, durable (acks=all) when this returns."""
        self._append(group_id, records, None)

    async def append_transactional(self, group_id: str, records: Sequence[GroupRecord], producer_id: int,
                                   producer_epoch: int) -> None:
        """``records`` as one transactional batch of the producer's, checked by the partition's
        producer state (INVALID_PRODUCER_EPOCH for a fenced epoch) before it is appended."""
        self._append(group_id, records, (producer_id, producer_epoch))

    def needs_verification(self, group_id: str, producer_id: int) -> bool:
        """Whether a transactional commit of ``producer_id`` to the group's partition is first
        checked with the producer's transaction coordinator (KIP-890: Kafka's ReplicaManager asks
        it only while transaction.partition.verification.enable is on and the producer has no
        transaction open in the partition)."""
        return self._partitions.needs_transaction_verification(OFFSETS_TOPIC, self.partition_for(group_id),
                                                               producer_id)

    def _append(self, group_id: str, records: Sequence[GroupRecord],
                producer: tuple[int, int] | None) -> None:
        if not records:
            return
        partition = self.partition_for(group_id)
        log = self._append_log(partition)
        now = self._clock_ms()
        entries = []
        for record in records:
            key, value = encode_record(record)
            entries.append({"key": key, "value": value, "timestamp": now})
        try:
            state = None if producer is None else self._partitions.producer_state(OFFSETS_TOPIC, partition)
            producer_id, epoch = producer if producer is not None else (NO_PRODUCER, NO_PRODUCER)
            batch = build_record_batch(
                entries, base_offset=log.log_end_offset, compression=self._compression,
                producer_id=producer_id, producer_epoch=epoch,
                base_sequence=NO_PRODUCER if state is None else _next_sequence(state, producer_id, epoch),
                is_transactional=producer is not None,
                partition_leader_epoch=self._partitions.leader_epoch(OFFSETS_TOPIC, partition),
                base_timestamp=now)
            header = RecordBatch(batch)
            if state is not None and state.check_and_update(header) is not None:
                return  # the same batch again: it is in the log already
            log.append(batch, now_ms=now, header=header)
        except KafkaApiError as exc:
            raise _as_coordinator_error(exc, partition) from None
        except OSError as exc:  # the disk refused: its dir goes offline (so NOT_COORDINATOR)
            raise self._storage_failed(partition, exc) from None
        self._partitions.appended(OFFSETS_TOPIC, partition)

    def replay(self, partition: int) -> Iterator[GroupRecord | OpenTxnRecords]:
        """Every record of ``partition`` up to its high watermark, in log order, tombstones
        included (later records win); transactional ones as the module docstring says."""
        log = self._leader_log(partition)
        try:
            yield from self._replayed(log, partition)
        except OSError as exc:  # a read the disk refused: the load fails and the dir goes offline
            raise self._storage_failed(partition, exc) from None

    def _replayed(self, log: PartitionLog, partition: int) -> Iterator[GroupRecord | OpenTxnRecords]:
        open_txns: dict[int, list[GroupRecord]] = {}
        for batch in load_batches(log, self._load_buffer_bytes, end=log.high_watermark, strict=True,
                                  what=f"{OFFSETS_TOPIC}-{partition}", log=_log):
            if not isinstance(batch, RecordBatch):
                continue  # legacy batches never hold coordinator records written since 0.11
            if batch.is_control:
                held = open_txns.pop(batch.producer_id, [])
                if _is_commit(batch):
                    yield from held
            elif batch.is_transactional:
                open_txns.setdefault(batch.producer_id, []).extend(_decoded(batch, partition))
            else:
                yield from _decoded(batch, partition)
        for producer_id, held in open_txns.items():
            yield OpenTxnRecords(producer_id, tuple(held))


def _next_sequence(state: ProducerStateManager, producer_id: int, epoch: int) -> int:
    """The sequence the producer's next batch here must carry: only TxnOffsetCommit writes a
    producer's batches to this topic, so the coordinator numbers them (Kafka skips the check
    for its own appends instead; a numbered batch passes the same table Produce's do)."""
    entry = state.producers.get(producer_id)
    if entry is None or entry.producer_epoch != epoch or entry.last_seq == NO_SEQUENCE:
        return 0
    return (entry.last_seq + 1) % _SEQUENCE_WRAP


def _is_commit(batch: RecordBatch) -> bool:
    """A control batch's first record's key says COMMIT or ABORT (Kafka's ControlRecordType)."""
    for record in batch.records():
        if record.key is not None and len(record.key) >= CONTROL_RECORD_KEY.size:
            kind: int = CONTROL_RECORD_KEY.unpack_from(record.key)[1]
            return kind == COMMIT
    return False


def _decoded(batch: RecordBatch, partition: int) -> Iterator[GroupRecord]:
    for record in batch.records():
        if record.key is None:
            continue  # not a coordinator record; Kafka's loader refuses these too
        try:
            yield decode_record(record.key, record.value)
        except UnknownRecordType:
            continue  # a newer broker's record: Kafka's loader skips it as well
        except GroupRecordError as exc:
            raise GroupRecordError(f"{OFFSETS_TOPIC}-{partition} offset {record.offset}: {exc.reason}",
                                   offset=exc.offset, field=exc.field) from None


def _as_coordinator_error(exc: KafkaApiError, partition: int) -> KafkaApiError:
    code = COORDINATOR_ERRORS.get(exc.code, exc.code)
    return KafkaApiError(code, f"{OFFSETS_TOPIC}-{partition}: {exc.message or exc.code.name}")
