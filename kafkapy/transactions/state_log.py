"""__transaction_state as the coordinator's StateLog: records appended to, and replayed from,
the data plane's partition logs.

Each change is one magic-2 batch of one record (key: TransactionLogKey, value:
TransactionLogValue or null), uncompressed, as Kafka's coordinator writes it (it forces
compression none and acks=all on this topic). The log is reached through ``leader_log``, which
raises NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION like a Produce would: the coordinator
turns those into NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE. An OSError from the log (an append
or a replay's read) takes the partition's log dir offline as a Produce's does, and is
KAFKA_STORAGE_ERROR (so NOT_COORDINATOR). Replay reads every batch from the
log start, skipping control batches; after compaction only the latest value per id is left,
which gives the same answer.

A partition can hold millions of records (every transaction writes several; the cleaner compacts
them only later), so replay is a generator that yields after every ``REPLAY_SLICE_RECORDS``
records and reads ``transaction.state.log.load.buffer.size`` bytes at a time
(``load_buffer_bytes``, Kafka's default ``LOAD_BUFFER_BYTES``; partition_loads.load_batches): the
coordinator runs it in slices (kafkapy.server.slices) and the loop serves everyone else between
them. ``replay`` is the same
walk in one go.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from typing import Final

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.base import PartitionLog
from kafkapy.protocol.one_record_batch import one_record_batch
from kafkapy.protocol.records import RecordBatch
from kafkapy.protocol.steps import all_at_once
from kafkapy.server.partition_loads import load_batches
from kafkapy.transactions.coordinator import TRANSACTION_STATE_TOPIC
from kafkapy.transactions.metadata import TxnMetadata
from kafkapy.transactions.records import (
    TransactionLogError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

__all__ = ["LOAD_BUFFER_BYTES", "REPLAY_SLICE_RECORDS", "TopicStateLog"]

log = logging.getLogger(__name__)

Replay = Generator[None, None, dict[str, TxnMetadata]]  # yields between slices, returns the ids

REPLAY_SLICE_RECORDS: Final = 256
"""Records decoded between two yields of a replay: under 10 ms of the loop's time (a record with
two partitions reads in about 35 us on the 2-core machine that measured it)."""
LOAD_BUFFER_BYTES: Final = 5 * 1024 * 1024
"""Bytes per read while replaying: Kafka's transaction.state.log.load.buffer.size default (a batch
larger than the buffer is read whole all the same)."""


class TopicStateLog:
    """The coordinator's StateLog over the partitions of ``__transaction_state``."""

    def __init__(self, leader_log: Callable[[str, int], PartitionLog], now_ms: Callable[[], int],
                 appended: Callable[[str, int], None] = lambda topic, partition: None,
                 topic: str = TRANSACTION_STATE_TOPIC,
                 leader_epoch: Callable[[str, int], int] = lambda topic, partition: -1,
                 storage_failed: Callable[[str, int, OSError], KafkaApiError] | None = None,
                 append_log: Callable[[str, int], PartitionLog] | None = None,
                 slice_records: int = REPLAY_SLICE_RECORDS,
                 load_buffer_bytes: int = LOAD_BUFFER_BYTES) -> None:
        self.leader_log = leader_log
        # where a state record is written: the leader's log, refused NOT_ENOUGH_REPLICAS below the
        # topic's min ISR (Kafka writes __transaction_state with acks=-1); leader_log if not given
        self.append_log = append_log or leader_log
        self.now_ms = now_ms
        self.appended = appended  # wakes long-polling fetchers of the partition
        self.topic = topic
        self.leader_epoch = leader_epoch  # stamped on each batch, as a leader's append stamps it
        # An OSError on the log: its dir goes offline (PartitionLogs.storage_failed) and the
        # coordinator gets KAFKA_STORAGE_ERROR, which it answers as NOT_COORDINATOR.
        self.storage_failed = storage_failed
        self.slice_records = slice_records  # records a replay reads between two yields
        self.load_buffer_bytes = load_buffer_bytes  # bytes a replay reads at a time

    def _failed(self, partition: int, exc: OSError) -> KafkaApiError:
        if self.storage_failed is not None:
            return self.storage_failed(self.topic, partition, exc)
        return KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self.topic}-{partition}: {exc}")

    def append(self, partition: int, transactional_id: str, metadata: TxnMetadata | None) -> None:
        target = self.append_log(self.topic, partition)
        batch = one_record_batch(encode_key(transactional_id), encode_value(metadata),
                                 base_offset=target.log_end_offset, base_timestamp=self.now_ms(),
                                 partition_leader_epoch=self.leader_epoch(self.topic, partition))
        try:
            target.append(batch, header=RecordBatch(batch))  # built here: no need to frame it again
        except OSError as exc:
            raise self._failed(partition, exc) from None
        self.appended(self.topic, partition)

    def replay(self, partition: int) -> dict[str, TxnMetadata]:
        """Every transactional id of the partition and its latest value, in one go."""
        return all_at_once(self.replay_in_slices(partition, slice_records=0))[0]

    def replay_in_slices(self, partition: int, slice_records: int | None = None,
                         read_bytes: int | None = None) -> Replay:
        """``replay`` as a generator: it yields after every ``slice_records`` records (0: never;
        None: the log's ``slice_records``) and returns the ids, reading ``read_bytes`` at a time
        (None: the log's ``load_buffer_bytes``). A tombstone removes its id; a record whose key or
        value version this broker does not know is skipped, as Kafka skips it (a newer broker
        wrote it)."""
        if slice_records is None:
            slice_records = self.slice_records
        source = self.leader_log(self.topic, partition)
        ids: dict[str, TxnMetadata] = {}
        since_yield = 0
        batches = load_batches(source, self.load_buffer_bytes if read_bytes is None else read_bytes,
                               what=f"{self.topic}-{partition}", log=log)
        try:
            for batch in batches:
                if not isinstance(batch, RecordBatch) or batch.is_control:
                    continue
                for record in batch.records():
                    self._apply(partition, ids, record.offset, record.key, record.value)
                    since_yield += 1
                    if since_yield == slice_records:
                        since_yield = 0
                        yield
        except OSError as exc:
            raise self._failed(partition, exc) from None
        return ids

    def _apply(self, partition: int, ids: dict[str, TxnMetadata], offset: int,
               key: bytes | None, value: bytes | None) -> None:
        """One record into ``ids``: the id's latest value, or the id gone for a tombstone."""
        if key is None:
            return
        try:
            transactional_id = decode_key(key)
            metadata = decode_value(transactional_id, value)
        except TransactionLogError as exc:
            # Kafka skips unknown key versions too (they belong to a newer broker).
            log.warning("%s-%d offset %d skipped: %s", self.topic, partition, offset, exc)
            return
        if metadata is None:
            ids.pop(transactional_id, None)
        else:
            ids[transactional_id] = metadata
