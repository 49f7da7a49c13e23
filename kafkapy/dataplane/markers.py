"""The TXN_MARKERS capability and WriteTxnMarkers (27), v0-v2: end-transaction markers into
the partitions this broker leads.

The transaction coordinator calls :meth:`MarkerWriter.write_markers` (the data-plane module
offers it as TXN_MARKERS) for the partitions this broker leads; WriteTxnMarkers requests from
other brokers and tools go through the same code. Per partition: leadership
(UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER), then
``kafkapy.log.end_txn_marker.append_end_txn_marker`` (the producer state closes the transaction
or refuses the marker with INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED; the control
batch; the aborted-transaction index), then whoever waits on the partition is woken: the LSO
moved, so a read_committed long poll reads on.

WriteTxnMarkers needs CLUSTER_ACTION on the cluster, as in Kafka. v2's ``transaction_version``
(KIP-890's TV2 epoch rules) is read and not acted on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafkapy.dataplane.partitions import Partitions
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.end_txn_marker import append_end_txn_marker
from kafkapy.log.topic_config import LogConfig
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.codec import body_fitter
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import CLUSTER_RESOURCE
from kafkapy.server.modules import Answer, RequestContext
from kafkapy.server.txn_markers import TxnMarker

__all__ = ["WRITE_TXN_MARKERS_VERSIONS", "MarkerWriter"]

WRITE_TXN_MARKERS_VERSIONS = VersionRange(0, 2)


class MarkerWriter:
    """Writes end-transaction markers into the partitions this broker leads."""

    def __init__(self, partitions: Partitions, log_config: Callable[[str], LogConfig],
                 authorize: Callable[[str, str, str, str, str], bool],
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.partitions = partitions
        self.log_config = log_config
        self.authorize = authorize  # the broker's: (principal, host, operation, resource type, name)
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._watchers: list[Callable[[TxnMarker, str, int], None]] = []

    def watch(self, callback: Callable[[TxnMarker, str, int], None]) -> Callable[[], None]:
        """TxnMarkerEvents: ``callback(marker, topic, partition)`` after each marker written."""
        self._watchers.append(callback)

        def stop() -> None:
            if callback in self._watchers:
                self._watchers.remove(callback)
        return stop

    def write(self, marker: TxnMarker, topic: str, partition: int) -> ErrorCode:
        """One partition's marker; NONE or the partition's error (nothing written then)."""
        partitions = self.partitions
        try:
            log = partitions.leader_log(topic, partition)
            state = partitions.home.producer_state(topic, partition, log)
            append_end_txn_marker(
                log, state, producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                committed=marker.committed, coordinator_epoch=marker.coordinator_epoch,
                leader_epoch=partitions.leader_epoch(topic, partition), now_ms=self.clock_ms(),
                timestamp_type=self.log_config(topic).message_timestamp_type)
        except KafkaApiError as refused:
            return ErrorCode(refused.code)
        except OSError as exc:  # the log's dir failed: KAFKA_STORAGE_ERROR, the coordinator retries
            return ErrorCode(partitions.storage_failed(topic, partition, exc).code)
        partitions.appended(topic, partition)
        for watcher in list(self._watchers):
            watcher(marker, topic, partition)
        return ErrorCode.NONE

    def write_markers(self, markers: Sequence[TxnMarker]) -> Mapping[tuple[int, str, int], ErrorCode]:
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
                               coordinator_epoch=asked["coordinator_epoch"],
                               partitions=tuple((t["name"], index) for t in asked.get("topics") or []
                                                for index in t.get("partition_indexes") or []))
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
