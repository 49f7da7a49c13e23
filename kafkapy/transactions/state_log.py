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
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.base import PartitionLog
from kafkapy.protocol.one_record_batch import one_record_batch
from kafkapy.protocol.records import RecordBatch, Records
from kafkapy.transactions.coordinator import TRANSACTION_STATE_TOPIC
from kafkapy.transactions.metadata import TxnMetadata
from kafkapy.transactions.records import (
    TransactionLogError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

__all__ = ["TopicStateLog"]

log = logging.getLogger(__name__)


class TopicStateLog:
    """The coordinator's StateLog over the partitions of ``__transaction_state``."""

    def __init__(self, leader_log: Callable[[str, int], PartitionLog], now_ms: Callable[[], int],
                 appended: Callable[[str, int], None] = lambda topic, partition: None,
                 topic: str = TRANSACTION_STATE_TOPIC,
                 leader_epoch: Callable[[str, int], int] = lambda topic, partition: -1,
                 storage_failed: Callable[[str, int, OSError], KafkaApiError] | None = None,
                 append_log: Callable[[str, int], PartitionLog] | None = None) -> None:
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
        source = self.leader_log(self.topic, partition)
        try:
            read = source.read(source.log_start_offset, 1 << 62)
        except OSError as exc:
            raise self._failed(partition, exc) from None
        ids: dict[str, TxnMetadata] = {}
        for batch in Records(b"".join(read.chunks)).batches():
            if not isinstance(batch, RecordBatch) or batch.is_control:
                continue
            for record in batch.records():
                if record.key is None:
                    continue
                try:
                    transactional_id = decode_key(record.key)
                    value = decode_value(transactional_id, record.value)
                except TransactionLogError as exc:
                    # Kafka skips unknown key versions too (they belong to a newer broker).
                    log.warning("%s-%d offset %d skipped: %s", self.topic, partition, record.offset, exc)
                    continue
                if value is None:
                    ids.pop(transactional_id, None)
                else:
                    ids[transactional_id] = value
        return ids
