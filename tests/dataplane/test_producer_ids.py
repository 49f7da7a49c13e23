"""Producer ids come in blocks per store: brokers sharing a store never hand out the same id."""

from __future__ import annotations

from kafkapy.dataplane.producer_ids import ProducerIds
from kafkapy.store import MemoryStore
from kafkapy.store.base import PRODUCER_ID_BLOCK_SIZE


def test_blocks_roll_over_and_brokers_of_one_store_get_distinct_ids() -> None:
    store = MemoryStore()
    first, second = ProducerIds(store, 1), ProducerIds(store, 2)
    assert first.needs_block
    ids = [first.next_id() for _ in range(PRODUCER_ID_BLOCK_SIZE)]
    assert ids == list(range(PRODUCER_ID_BLOCK_SIZE))
    assert first.needs_block  # the block is used up ...
    assert second.next_id() == PRODUCER_ID_BLOCK_SIZE  # ... and the next one went to broker 2
    assert first.next_id() == 2 * PRODUCER_ID_BLOCK_SIZE
    assert ProducerIds(MemoryStore(), 1).next_id() == 0  # another store: another cluster
