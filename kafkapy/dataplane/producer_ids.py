"""Producer ids for InitProducerId, handed out from blocks as Kafka's ProducerIdManager does.

A broker takes a block of ids at a time from the metadata store's producer-id role
(``allocate_producer_id_block``: /latest_producer_id_block on ZooKeeper, a counter in memory) and
gives them out one by one, so producers on different brokers never share an id.
"""

from __future__ import annotations

import threading

from kafkapy.store.base import ProducerIdBlock, ProducerIdStore

__all__ = ["ProducerIds", "half_named_producer"]

_NONE = -1  # RecordBatch.NO_PRODUCER_ID and NO_PRODUCER_EPOCH


def half_named_producer(producer_id: int, producer_epoch: int) -> bool:
    """InitProducerId names a producer id without its epoch, or an epoch without an id: Kafka's
    KafkaApis answers INVALID_REQUEST (after authorization), for either kind of producer. Both
    or neither: a KIP-360 bump needs the pair to know which instance asks."""
    return (producer_id == _NONE) != (producer_epoch == _NONE)


class ProducerIds:
    """This broker's producer-id generator: the current block, a new one when it runs out."""

    def __init__(self, store: ProducerIdStore, broker_id: int) -> None:
        self.store = store
        self.broker_id = broker_id
        self.block: ProducerIdBlock | None = None
        self.next = 0
        self._lock = threading.Lock()  # next_id runs on the loop and, for a new block, in a thread

    def next_id(self) -> int:
        """Blocking when a new block is needed (then call it off the loop)."""
        with self._lock:
            if self.needs_block:
                self.block = self.store.allocate_producer_id_block(self.broker_id)
                self.next = self.block.first_id
            producer_id = self.next
            self.next += 1
            return producer_id

    @property
    def needs_block(self) -> bool:
        return self.block is None or self.next > self.block.last_id
