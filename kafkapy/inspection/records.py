"""What a partition's log holds, as decoded records: for tests that assert on what was written.

Reads go through the data plane's partition logs (the same ``read`` Fetch uses) and the one
batch reader (kafkapy.protocol.records), plus what only the broker knows: each record's producer
id, sequence and transaction flags.

:class:`Isolation` picks the view. ``LOG`` is the log as it is, transaction markers and aborted
records included, up to its end. ``READ_UNCOMMITTED`` and ``READ_COMMITTED`` are what a consumer
at that isolation level ends up with: below the high watermark, or below the last stable offset
with the aborted transactions' records dropped (the partition's aborted-transaction index, as a
read_committed Fetch lists it, and the rule a consumer applies to that list: a share group's
read_committed leader applies the same one, kafkapy.shares.isolation), never a marker. An
exactly-once test asserts on the last view without running a consumer.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Iterator

import attrs

from kafkapy.dataplane.partitions import Partitions
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.base import PartitionLog
from kafkapy.log.txn_index import AbortedTxn
from kafkapy.protocol.records import RecordBatch, Records
from kafkapy.shares.isolation import BatchHeader, undeliverable

__all__ = ["Isolation", "StoredRecord", "check_partition", "stored_records"]

_READ_ALL = 1 << 62  # max_bytes for a read that returns the whole log


class Isolation(enum.Enum):
    """Which of a log's records :func:`stored_records` gives."""

    LOG = "log"  # every record the log holds, markers and aborted transactions included
    READ_UNCOMMITTED = "read_uncommitted"  # what a read_uncommitted consumer keeps
    READ_COMMITTED = "read_committed"  # what a read_committed consumer keeps

    @classmethod
    def of(cls, value: Isolation | str) -> Isolation:
        """``value`` as an Isolation; ValueError naming the choices for anything else."""
        if isinstance(value, Isolation):
            return value
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(repr(member.value) for member in cls)
            raise ValueError(f"isolation must be one of {choices}, not {value!r}") from None


@attrs.frozen
class StoredRecord:
    """One record as the log holds it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int | None
    producer_id: int  # -1: not from an idempotent or transactional producer
    producer_epoch: int
    sequence: int  # -1 without a producer id
    is_transactional: bool
    is_control: bool  # a transaction marker (its key says commit or abort)


def stored_records(partitions: Partitions, topic: str, partition: int | None = None,
                   from_offset: int = 0, isolation: Isolation = Isolation.LOG, *,
                   open_transactions_aborted: bool = False) -> list[StoredRecord]:
    """The records of ``topic`` (one partition, or every partition in turn) at or after
    ``from_offset``, as ``isolation`` sees them. A topic not made yet has none (a test waits for
    it to appear); a partition the topic does not have is Kafka's UNKNOWN_TOPIC_OR_PARTITION, not
    an empty log that would pass for one nothing was written to.

    ``open_transactions_aborted`` (READ_COMMITTED only) reads up to the high watermark as if
    every open transaction had just been aborted: the records a snapshot keeps, since a restore
    drops the transactions themselves."""
    info = partitions.cluster.topics.get(topic)
    if info is None:
        return []
    if partition is not None:
        check_partition(topic, partition, info.partitions)
    indexes = sorted(info.partitions) if partition is None else [partition]
    return [record for index in indexes
            for record in _partition_records(partitions, topic, index, from_offset, isolation,
                                             open_transactions_aborted)]


def check_partition(topic: str, partition: int, partitions: Collection[int]) -> None:
    """KafkaApiError(UNKNOWN_TOPIC_OR_PARTITION) for a partition ``topic`` has not, saying how many it has."""
    if partition not in partitions:
        raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            f"no partition {topic}-{partition}: the topic has {len(partitions)} "
                            f"partition(s), numbered from 0")


def _partition_records(partitions: Partitions, topic: str, partition: int, from_offset: int,
                       isolation: Isolation, open_transactions_aborted: bool) -> Iterator[StoredRecord]:
    log = partitions.logs.get(topic, partition)
    if log is None:
        return
    start = max(from_offset, log.log_start_offset)
    if isolation is Isolation.LOG:
        limit = log.log_end_offset
    elif isolation is Isolation.READ_UNCOMMITTED or open_transactions_aborted:
        limit = log.high_watermark
    else:
        limit = log.last_stable_offset
    if start >= limit:
        return
    read = log.read(start, _READ_ALL, max_offset=limit)
    batches = [batch for batch in Records(b"".join(read.chunks)).batches()
               if isinstance(batch, RecordBatch)]  # the log stores magic 2 only
    dropped: set[tuple[int, int]] = set()
    if isolation is Isolation.READ_COMMITTED:
        aborted = log.collect_aborted_txns(start, limit)
        if open_transactions_aborted:
            aborted += _open_transactions(partitions, topic, partition, log)
        dropped = undeliverable((_header(batch) for batch in batches), aborted)
    for batch in batches:
        last = batch.base_offset + batch.last_offset_delta
        if (batch.is_control and isolation is not Isolation.LOG) or (batch.base_offset, last) in dropped:
            continue
        for record in batch.record_list():
            if record.offset < start or record.offset >= limit:  # start: the log start, if later
                continue
            sequence = batch.base_sequence
            if sequence >= 0:
                sequence += record.offset - batch.base_offset
            yield StoredRecord(topic, partition, record.offset, record.key, record.value,
                               tuple((key, value) for key, value in record.headers), record.timestamp,
                               batch.producer_id, batch.producer_epoch, sequence, batch.is_transactional,
                               batch.is_control)


def _header(batch: RecordBatch) -> BatchHeader:
    return BatchHeader(batch.base_offset, batch.base_offset + batch.last_offset_delta, batch.producer_id,
                       batch.attributes)


def _open_transactions(partitions: Partitions, topic: str, partition: int,
                       log: PartitionLog) -> Iterable[AbortedTxn]:
    """The partition's open transactions as if aborted at the log's end: each producer's records
    from its transaction's first offset on."""
    state = partitions.home.producers.get((topic, partition))
    if state is None:
        return ()
    end = log.log_end_offset
    return [AbortedTxn(producer_id, first_offset, end, end)
            for first_offset, producer_id in state.ongoing.items()]
