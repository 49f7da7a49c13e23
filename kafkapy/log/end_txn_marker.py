"""Writing an end-transaction marker into a partition log (Kafka's append with the coordinator
as origin).

A transaction ends in a partition with a marker: a control batch, Kafka's EndTransactionMarker
(``MemoryRecords.withEndTransactionMarker``): attributes with the control and transactional
bits, the producer's id and epoch, base sequence -1, the partition's leader epoch, and one
record whose key is ``version int16 (0), type int16 (0 ABORT, 1 COMMIT)`` (ControlRecordType)
and whose value is ``version int16 (0), coordinator_epoch int32``. :func:`append_end_txn_marker`
does what Kafka's UnifiedLog.append does with one: the producer state closes the transaction
(or refuses the marker: INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, nothing
written), the batch goes to the log end, and an ABORT that closed a transaction adds its entry
to the transaction index of the segment holding the marker.
"""

from __future__ import annotations

from kafkapy.log.base import PartitionLog
from kafkapy.log.producer_state import (
    ABORT,
    COMMIT,
    CONTROL_RECORD_KEY,
    END_TXN_MARKER_VALUE,
    CompletedTxn,
    ProducerStateManager,
)
from kafkapy.protocol.one_record_batch import one_record_batch
from kafkapy.protocol.records import RecordBatch

__all__ = ["append_end_txn_marker", "end_txn_marker_batch"]

CONTROL_RECORD_KEY_VERSION = 0  # ControlRecordType.CURRENT_CONTROL_RECORD_KEY_VERSION
END_TXN_MARKER_VERSION = 0  # EndTransactionMarker.CURRENT_END_TXN_MARKER_VERSION
NO_SEQUENCE = -1  # RecordBatch.NO_SEQUENCE: markers carry none


def end_txn_marker_batch(*, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                         base_offset: int, leader_epoch: int, timestamp_ms: int,
                         timestamp_type: int) -> bytes:
    """One control batch holding one EndTransactionMarker record, Kafka's layout."""
    key = CONTROL_RECORD_KEY.pack(CONTROL_RECORD_KEY_VERSION, COMMIT if committed else ABORT)
    value = END_TXN_MARKER_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    return one_record_batch(key, value, base_offset=base_offset, base_timestamp=timestamp_ms,
                            producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                            is_transactional=True, is_control=True, timestamp_type=timestamp_type,
                            partition_leader_epoch=leader_epoch)


def append_end_txn_marker(log: PartitionLog, state: ProducerStateManager, *, producer_id: int,
                          producer_epoch: int, committed: bool, coordinator_epoch: int, leader_epoch: int,
                          now_ms: int, timestamp_type: int) -> CompletedTxn | None:
    """Append the marker at the log end; answers the transaction it closed, if one was open.
    Raises ProducerStateError (with Kafka's code) before anything is written."""
    offset = log.log_end_offset
    batch = end_txn_marker_batch(producer_id=producer_id, producer_epoch=producer_epoch, committed=committed,
                                 coordinator_epoch=coordinator_epoch, base_offset=offset,
                                 leader_epoch=leader_epoch, timestamp_ms=now_ms,
                                 timestamp_type=timestamp_type)
    # Checked, then appended, then applied: a snapshot taken if the append rolls a segment holds
    # the state before the marker, as Kafka's does (the replay from it applies the marker).
    state.check_marker(producer_id, producer_epoch, coordinator_epoch, offset)
    log.append(bytearray(batch), now_ms=now_ms, header=RecordBatch(batch))  # built here: not framed again
    completed = state.complete_transaction(producer_id, producer_epoch, coordinator_epoch, offset, now_ms,
                                           aborted=not committed)
    if completed is not None and completed.is_aborted:
        log.add_aborted_txn(state.aborted_entry(completed))
    return completed
