"""WriteTxnMarkers to the brokers leading a transaction's other partitions (Kafka's
TransactionMarkerChannelManager, reduced to what a coordinator here needs).

One connection per broker, on the inter-broker listener, opened on first need and dropped on
any failure; requests on it go one at a time. A broker that cannot be reached, or an answer that
cannot be read, counts as NOT_LEADER_OR_FOLLOWER for its partitions: the coordinator tries them
again after a backoff, as it does when leadership moves. Only PLAINTEXT listeners are dialled
(kafkapy's brokers have no inter-broker TLS or SASL client yet).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Collection, Mapping

from kafkapy.errors import DecodeError, ErrorCode
from kafkapy.protocol import decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.txn_markers import TxnMarker
from kafkapy.store.base import BrokerRegistration
from kafkapy.transactions.metadata import TopicPartition

__all__ = ["MarkerChannel"]

WRITE_TXN_MARKERS_VERSION = 1  # Kafka 2.8+ and what kafkapy's data plane serves; flexible
_SIZE = struct.Struct(">i")
_CONNECT_TIMEOUT_S = 5.0
_REQUEST_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms for the marker channel
_UNREACHABLE = ErrorCode.NOT_LEADER_OR_FOLLOWER


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.lock = asyncio.Lock()
        self.correlation_id = 0


class MarkerChannel:
    """Sends WriteTxnMarkers to other brokers; per partition NONE or why not."""

    def __init__(self, brokers: Callable[[], Collection[BrokerRegistration]], listener: Callable[[], str],
                 client_id: str = "kafkapy-txn-coordinator") -> None:
        self.brokers = brokers
        self.listener = listener
        self.client_id = client_id
        self._connections: dict[int, _Connection] = {}

    async def write(self, broker_id: int, marker: TxnMarker) -> Mapping[TopicPartition, ErrorCode]:
        unreachable = dict.fromkeys(marker.partitions, _UNREACHABLE)
        try:
            connection = await self._connect(broker_id)
        except (OSError, asyncio.TimeoutError):
            return unreachable
        if connection is None:
            return unreachable
        by_topic: dict[str, list[int]] = {}
        for topic, partition in marker.partitions:
            by_topic.setdefault(topic, []).append(partition)
        body = {"markers": [{"producer_id": marker.producer_id, "producer_epoch": marker.producer_epoch,
                             "transaction_result": marker.committed,
                             "coordinator_epoch": marker.coordinator_epoch,
                             "topics": [{"name": t, "partition_indexes": p} for t, p in by_topic.items()]}]}
        try:
            async with connection.lock:
                connection.correlation_id += 1
                frame = encode_request(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION,
                                       connection.correlation_id, self.client_id, body)
                connection.writer.write(_SIZE.pack(len(frame)) + frame)
                await connection.writer.drain()
                head = await asyncio.wait_for(connection.reader.readexactly(4), _REQUEST_TIMEOUT_S)
                (size,) = _SIZE.unpack(head)
                data = await asyncio.wait_for(connection.reader.readexactly(size), _REQUEST_TIMEOUT_S)
            answer = decode_response(data, ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION).body
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, DecodeError):
            self._drop(broker_id)
            return unreachable
        results: dict[TopicPartition, ErrorCode] = {}
        for written in answer["markers"] or ():
            for topic in written["topics"] or ():
                for partition in topic["partitions"] or ():
                    try:
                        code = ErrorCode(partition["error_code"])
                    except ValueError:
                        code = ErrorCode.UNKNOWN_SERVER_ERROR
                    results[(topic["name"], partition["partition_index"])] = code
        return {tp: results.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in marker.partitions}

    async def _connect(self, broker_id: int) -> _Connection | None:
        known = self._connections.get(broker_id)
        if known is not None:
            return known
        registration = next((b for b in self.brokers() if b.broker_id == broker_id), None)
        endpoint = registration.endpoint(self.listener()) if registration is not None else None
        if endpoint is None or endpoint.security_protocol != "PLAINTEXT":
            return None
        reader, writer = await asyncio.wait_for(asyncio.open_connection(endpoint.host, endpoint.port),
                                                _CONNECT_TIMEOUT_S)
        connection = self._connections.setdefault(broker_id, _Connection(reader, writer))
        if connection.writer is not writer:  # another task connected meanwhile
            writer.close()
        return connection

    def _drop(self, broker_id: int) -> None:
        connection = self._connections.pop(broker_id, None)
        if connection is not None:
            connection.writer.close()

    def close(self) -> None:
        for broker_id in list(self._connections):
            self._drop(broker_id)
