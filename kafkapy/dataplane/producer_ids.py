"""Producer ids for InitProducerId, handed out from blocks as Kafka's ProducerIdManager does.

A broker takes a block of PRODUCER_ID_BLOCK_SIZE ids at a time from the metadata store and
gives them out one by one, so producers on different brokers never share an id.
``allocate_block`` is the one place that talks to the store: once the store has its
producer-id role (``allocate_producer_id_block``, /latest_producer_id_block on ZooKeeper), it
is used; until then ids come from a counter kept per store object, which is exact for brokers
sharing one in-memory store (one process) but not across ZooKeeper brokers in other processes.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

__all__ = ["PRODUCER_ID_BLOCK_SIZE", "ProducerIdBlock", "ProducerIds", "allocate_block"]

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE

_next_block_start: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()
_lock = threading.Lock()  # stores are called from worker threads


class ProducerIdBlock:
    """Ids ``first`` .. ``first + size - 1``, owned by one broker."""

    def __init__(self, first: int, size: int) -> None:
        self.first = first
        self.size = size
        self.next = first

    @property
    def exhausted(self) -> bool:
        return self.next >= self.first + self.size


def allocate_block(store: Any, broker_id: int) -> ProducerIdBlock:
    """The next block of producer ids for ``broker_id`` from ``store``."""
    allocate = getattr(store, "allocate_producer_id_block", None)
    if allocate is not None:
        block = allocate(broker_id)
        return ProducerIdBlock(int(block.first_producer_id), int(block.size))
    with _lock:
        first = _next_block_start.get(store, 0)
        _next_block_start[store] = first + PRODUCER_ID_BLOCK_SIZE
    return ProducerIdBlock(first, PRODUCER_ID_BLOCK_SIZE)


class ProducerIds:
    """This broker's producer-id generator: the current block, a new one when it runs out."""

    def __init__(self, store: Any, broker_id: int) -> None:
        self.store = store
        self.broker_id = broker_id
        self.block: ProducerIdBlock | None = None
        self._lock = threading.Lock()  # next_id runs on the loop and, for a new block, in a thread

    def next_id(self) -> int:
        """Blocking when a new block is needed (then call it off the loop)."""
        with self._lock:
            if self.block is None or self.block.exhausted:
                self.block = allocate_block(self.store, self.broker_id)
            producer_id = self.block.next
            self.block.next += 1
            return producer_id

    @property
    def needs_block(self) -> bool:
        return self.block is None or self.block.exhausted
