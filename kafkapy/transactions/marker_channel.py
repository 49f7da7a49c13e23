"""WriteTxnMarkers to the brokers leading a transaction's other partitions (Kafka's
TransactionMarkerChannelManager, reduced to what a coordinator here needs), over the
inter-broker channel (kafkapy.server.broker_channel).

A broker that cannot be reached, or an answer that cannot be read, counts as
NOT_LEADER_OR_FOLLOWER for its partitions: the coordinator tries them again after a backoff, as
it does when leadership moves.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.broker_channel import BrokerChannel
from kafkapy.server.txn_markers import TxnMarker
from kafkapy.store.base import BrokerRegistration
from kafkapy.transactions.metadata import TopicPartition

__all__ = ["MarkerChannel"]

WRITE_TXN_MARKERS_VERSION = 1  # Kafka 2.8+ and what kafkapy's data plane serves; flexible
_UNREACHABLE = ErrorCode.NOT_LEADER_OR_FOLLOWER


class MarkerChannel:
    """Sends WriteTxnMarkers to other brokers; per partition NONE or why not."""

    def __init__(self, brokers: Callable[[], Collection[BrokerRegistration]], listener: Callable[[], str],
                 client_id: str = "kafkapy-txn-coordinator") -> None:
        self.channel = BrokerChannel(brokers, listener, client_id)

    async def write(self, broker_id: int, marker: TxnMarker) -> Mapping[TopicPartition, ErrorCode]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in marker.partitions:
            by_topic.setdefault(topic, []).append(partition)
        body = {"markers": [{"producer_id": marker.producer_id, "producer_epoch": marker.producer_epoch,
                             "transaction_result": marker.committed,
                             "coordinator_epoch": marker.coordinator_epoch,
                             "topics": [{"name": t, "partition_indexes": p} for t, p in by_topic.items()]}]}
        answer = await self.channel.request(broker_id, ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION,
                                            body)
        if answer is None:
            return dict.fromkeys(marker.partitions, _UNREACHABLE)
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

    def close(self) -> None:
        self.channel.close()
