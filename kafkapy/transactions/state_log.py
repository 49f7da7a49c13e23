"""__transaction_state as the coordinator's StateLog: records appended to, and replayed from,
the data plane's partition logs.

Each change is one magic-2 batch of one record (key: TransactionLogKey, value:
TransactionLogValue or null), uncompressed, as Kafka's coordinator writes it (it forces
compression none and acks=all on this topic). The log is reached through ``leader_log``, which
raises NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION like a Produce would: the coordinator
turns those into NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE. Replay reads every batch from the
log start, skipping control batches; after compaction only the latest value per id is left,
which gives the same answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

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
                 leader_epoch: Callable[[str, int], int] = lambda topic, partition: -1) -> None:
        self.leader_log = leader_log
        self.now_ms = now_ms
        self.appended = appended  # wakes long-polling fetchers of the partition
        self.topic = topic
        self.leader_epoch = leader_epoch  # stamped on each batch, as a leader's append stamps it

    def append(self, partition: int, transactional_id: str, metadata: TxnMetadata | None) -> None:
        target = self.leader_log(self.topic, partition)
        batch = one_record_batch(encode_key(transactional_id), encode_value(metadata),
                                 base_offset=target.log_end_offset, base_timestamp=self.now_ms(),
                                 partition_leader_epoch=self.leader_epoch(self.topic, partition))
        target.append(batch, header=RecordBatch(batch))  # built here: no need to frame it again
        self.appended(self.topic, partition)

    def replay(self, partition: int) -> dict[str, TxnMetadata]:
        source = self.leader_log(self.topic, partition)
        read = source.read(source.log_start_offset, 1 << 62)
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
