"""Markers for partitions another broker leads go there as WriteTxnMarkers, and are sent again
until that broker answers: a commit whose partition leader is down stays PrepareCommit, and
completes once the leader is back. Both brokers are default ones: broker 2's data plane
answers WriteTxnMarkers and writes the control batch."""

from __future__ import annotations

import time
from typing import Any

from kafkapy.dataplane import DataPlaneModule
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.records import Records
from kafkapy.store import MemoryStore
from kafkapy.transactions import TRANSACTION_STATE_TOPIC

from .test_transactions_wire import (
    KafkaSocket,
    add,
    coordinator_ready,
    describe,
    end,
    init,
)


def second_broker(store: MemoryStore) -> Broker:
    return Broker({"broker.id": 2}, store=store, )


def wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def marker_in_log(broker: Broker, topic: str, partition: int) -> bool:
    """The data plane's own markers: the partition's last batch is a control batch."""
    assert broker.runtime is not None
    module = next(m for m in broker.runtime.modules if isinstance(m, DataPlaneModule))
    log = module.partitions.logs.get(topic, partition)
    if log is None or log.log_end_offset == 0:
        return False
    batches = list(Records(b"".join(log.read(log.log_start_offset, 1 << 30).chunks)).batches())
    return bool(batches) and batches[-1].is_control


def test_markers_reach_the_other_leader_and_wait_for_it() -> None:
    store = MemoryStore()
    with Broker({"broker.id": 1, "transaction.state.log.num.partitions": 5}, store=store) as first:
        store.create_topic(TRANSACTION_STATE_TOPIC, {p: (1,) for p in range(5)},
                           config={"cleanup.policy": "compact"})
        store.create_topic("orders", {0: (1,), 1: (2,)})
        coordinator_ready(first)
        with second_broker(store) as second, KafkaSocket(first.bootstrap_servers) as conn:
            wait_for(lambda: len(first.runtime.cluster.brokers) == 2)  # type: ignore[union-attr]
            _, pid, epoch = init(conn, "tx")
            assert add(conn, "tx", pid, epoch, {"orders": [0, 1]}) == {("orders", 0): 0, ("orders", 1): 0}
            assert end(conn, "tx", pid, epoch, commit=True) == ErrorCode.NONE
            assert describe(conn, "tx")[0]["transaction_state"] == "CompleteCommit"
            assert marker_in_log(first, "orders", 0) and marker_in_log(second, "orders", 1)
        # Broker 2 is gone: the next commit is decided (PrepareCommit) but waits for its marker.
        with KafkaSocket(first.bootstrap_servers) as conn:
            wait_for(lambda: len(first.runtime.cluster.brokers) == 1)  # type: ignore[union-attr]
            add(conn, "tx", pid, epoch, {"orders": [0, 1]})
            assert end(conn, "tx", pid, epoch, commit=True) == ErrorCode.NONE
            assert describe(conn, "tx")[0]["transaction_state"] == "PrepareCommit"
            assert add(conn, "tx", pid, epoch, {"orders": [0]}) == {
                ("orders", 0): ErrorCode.CONCURRENT_TRANSACTIONS}
            with second_broker(store) as back:
                wait_for(lambda: describe(conn, "tx")[0]["transaction_state"] == "CompleteCommit")
                assert marker_in_log(back, "orders", 1)
