"""A read_committed share group's view of a log read: which batches it must never be given.

A plain consumer at read_committed gets the aborted transactions with its Fetch response and
drops their batches itself; a ShareFetch response has no such field, so the share-partition
leader decides (Kafka's SharePartition.filterAbortedTransactionalAcquiredRecords, KIP-932's
``share.isolation.level``). Reading only below the last stable offset keeps open transactions
out; of what is read, ``undeliverable`` names the batches to archive instead of acquiring:

* a transactional data batch of a producer inside one of that producer's aborted transactions
  (the aborted-transaction index gives each as first offset .. ABORT marker offset), as Kafka
  archives them;
* every control batch (commit and abort markers): Kafka acquires them and relies on the client to
  acknowledge them as a GAP; kafkapy archives them at once, so no client ever holds a marker's
  offset (librdkafka need not know to acknowledge it) and the start offset moves past it.

Sans I/O: batch headers come in as bytes (whole v2 batches, as the log hands them out), the
aborted transactions as the log's AbortedTxn entries.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from kafkapy.log.txn_index import AbortedTxn
from kafkapy.protocol.records import CONTROL_BIT, TRANSACTIONAL_BIT, RecordBatch

__all__ = ["READ_COMMITTED", "READ_UNCOMMITTED", "BatchHeader", "batch_header", "undeliverable"]

#: ``share.isolation.level``'s values (Kafka's IsolationLevel names).
READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"
_MAGIC_AT, _V2 = 16, 2


@attrs.frozen
class BatchHeader:
    """What isolation needs of a record batch's header."""

    first_offset: int
    last_offset: int
    producer_id: int
    attributes: int

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)


def batch_header(batch: memoryview | bytes) -> BatchHeader | None:
    """The header of one whole batch; None for a pre-v2 (magic 0/1) batch, which is never
    transactional."""
    if len(batch) <= _MAGIC_AT or batch[_MAGIC_AT] != _V2:
        return None
    header = RecordBatch(batch)
    return BatchHeader(header.base_offset, header.base_offset + header.last_offset_delta,
                       header.producer_id, header.attributes)


def undeliverable(batches: Iterable[BatchHeader], aborted: Iterable[AbortedTxn]) -> set[tuple[int, int]]:
    """The (first, last) offsets of the batches a read_committed share group must not be given:
    control batches, and the data batches of aborted transactions."""
    by_producer: dict[int, list[AbortedTxn]] = {}
    for txn in aborted:
        by_producer.setdefault(txn.producer_id, []).append(txn)
    skipped: set[tuple[int, int]] = set()
    for batch in batches:
        if batch.is_control:
            skipped.add((batch.first_offset, batch.last_offset))
        elif batch.is_transactional and any(
                txn.first_offset <= batch.first_offset and batch.last_offset < txn.last_offset
                for txn in by_producer.get(batch.producer_id, ())):
            skipped.add((batch.first_offset, batch.last_offset))
    return skipped
