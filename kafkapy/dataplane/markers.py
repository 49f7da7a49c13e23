"""End-transaction markers: the TXN_MARKERS capability and WriteTxnMarkers (27), v0-v2.

A transaction ends when its coordinator has a marker written into every partition the
transaction wrote to. A marker is a control batch, Kafka's EndTransactionMarker
(``MemoryRecords.withEndTransactionMarker``): attributes with the control and transactional
bits, the producer's id and epoch, base sequence -1, the partition's leader epoch, and one
record whose key is ``version int16 (0), type int16 (0 ABORT, 1 COMMIT)`` (ControlRecordType)
and whose value is ``version int16 (0), coordinator_epoch int32``. Per partition, in Kafka's
order (UnifiedLog.append with the coordinator as origin):

1. leadership (``Partitions.leader_log``): UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER;
2. the producer state closes the transaction (``complete_transaction``): an older producer
   epoch is INVALID_PRODUCER_EPOCH, an older coordinator epoch TRANSACTION_COORDINATOR_FENCED,
   and nothing is written then;
3. the control batch is appended at the log end; an ABORT that closed a transaction adds its
   entry to the transaction index, with the LSO after it;
4. whoever waits on the partition is woken: the LSO moved, so a read_committed long poll reads on.

The coordinator uses :meth:`MarkerWriter.write_markers` (the data-plane module offers it as
TXN_MARKERS) for the partitions this broker leads; WriteTxnMarkers requests from other brokers
and tools go through the same code. WriteTxnMarkers needs CLUSTER_ACTION on the cluster, as in
Kafka. v2's ``transaction_version`` (KIP-890's TV2 epoch rules) is read and not acted on.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafkapy.dataplane.partitions import Partitions
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.topic_config import LogConfig
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.codec import body_fitter
from kafkapy.protocol.records import build_record_batch
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import CLUSTER_RESOURCE
from kafkapy.server.modules import Answer, RequestContext
from kafkapy.server.txn_markers import TxnMarker

__all__ = ["ABORT", "COMMIT", "WRITE_TXN_MARKERS_VERSIONS", "MarkerWriter", "end_txn_marker_batch"]

WRITE_TXN_MARKERS_VERSIONS = VersionRange(0, 2)
ABORT, COMMIT = 0, 1  # ControlRecordType
_CONTROL_KEY = struct.Struct(">hh")  # ControlRecordType key: version, type
_MARKER_VALUE = struct.Struct(">hi")  # EndTransactionMarker value: version, coordinator_epoch
_CONTROL_KEY_VERSION = 0  # ControlRecordType.CURRENT_CONTROL_RECORD_KEY_VERSION
_END_TXN_MARKER_VERSION = 0  # EndTransactionMarker.CURRENT_END_TXN_MARKER_VERSION
NO_SEQUENCE = -1  # RecordBatch.NO_SEQUENCE: markers carry none


def end_txn_marker_batch(*, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                         base_offset: int, leader_epoch: int, timestamp_ms: int,
                         timestamp_type: int) -> bytes:
    """One control batch holding one EndTransactionMarker record, Kafka's layout."""
    key = _CONTROL_KEY.pack(_CONTROL_KEY_VERSION, COMMIT if committed else ABORT)
    value = _MARKER_VALUE.pack(_END_TXN_MARKER_VERSION, coordinator_epoch)
    return build_record_batch([{"key": key, "value": value, "timestamp": timestamp_ms}],
                              base_offset=base_offset, producer_id=producer_id,
                              producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                              is_transactional=True, is_control=True, timestamp_type=timestamp_type,
                              partition_leader_epoch=leader_epoch, max_timestamp=timestamp_ms)


class MarkerWriter:
    """Writes end-transaction markers into the partitions this broker leads."""

    def __init__(self, partitions: Partitions, log_config: Callable[[str], LogConfig],
                 authorize: Callable[[str, str, str, str, str], bool],
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.partitions = partitions
        self.log_config = log_config
        self.authorize = authorize  # the broker's: (principal, host, operation, resource type, name)
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))

    def write(self, marker: TxnMarker, topic: str, partition: int) -> ErrorCode:
        """One partition's marker; NONE or the partition's error (nothing written then)."""
        partitions = self.partitions
        try:
            log = partitions.leader_log(topic, partition)
            state = partitions.home.producer_state(topic, partition, log)
            offset = log.log_end_offset
            now = self.clock_ms()
            batch = end_txn_marker_batch(
                producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                committed=marker.committed, coordinator_epoch=marker.coordinator_epoch, base_offset=offset,
                leader_epoch=partitions.leader_epoch(topic, partition), timestamp_ms=now,
                timestamp_type=self.log_config(topic).message_timestamp_type)
            completed = state.complete_transaction(
                marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, offset, now,
                aborted=not marker.committed)
        except KafkaApiError as refused:
            return ErrorCode(refused.code)
        log.append(bytearray(batch), now_ms=now)
        if completed is not None and completed.is_aborted:
            log.add_aborted_txn(state.aborted_entry(completed))
        partitions.appended(topic, partition)
        return ErrorCode.NONE

    async def write_markers(self, markers: Sequence[TxnMarker]) -> Mapping[tuple[int, str, int], ErrorCode]:
        """TxnMarkerWriter: with one replica, in the log is as durable as acks=all gets."""
        return {(marker.producer_id, topic, partition): self.write(marker, topic, partition)
                for marker in markers for topic, partition in marker.partitions}

    def handle(self, ctx: RequestContext, request: Request) -> Answer:
        """WriteTxnMarkers: every marker's partitions, each with its own error code."""
        conn = ctx.connection
        allowed = self.authorize(conn.principal, conn.client_address[0], "CLUSTER_ACTION", "CLUSTER",
                                 CLUSTER_RESOURCE)
        results = []
        for asked in request.body.get("markers") or []:
            marker = TxnMarker(producer_id=asked["producer_id"], producer_epoch=asked["producer_epoch"],
                               committed=bool(asked["transaction_result"]),
                               coordinator_epoch=asked["coordinator_epoch"], partitions=())
            topics: list[dict[str, Any]] = []
            for topic in asked.get("topics") or []:
                name = topic["name"]
                answers = [{"partition_index": index,
                            "error_code": self.write(marker, name, index) if allowed
                            else ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
                           for index in topic.get("partition_indexes") or []]
                topics.append({"name": name, "partitions": answers})
            results.append({"producer_id": marker.producer_id, "topics": topics})
        return body_fitter(ApiKey.WRITE_TXN_MARKERS, "response", ctx.api_version)({"markers": results})
