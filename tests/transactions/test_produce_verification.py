"""KIP-890 part 1 on the wire (Kafka 3.6+, ``transaction.partition.verification.enable``, on by
default): a transactional batch for a partition where its producer has no open transaction is
checked with the transaction coordinator before it is appended, and refused when the partition is
not in the producer's transaction. The hanging transaction a late batch after an abort used to
start cannot happen any more. Kafka's words: ReplicaManager.handleProduceAppend (the codes per
Produce version), AddPartitionsToTxnManager (the verify-only AddPartitionsToTxn to the
coordinator, which may be another broker)."""

from __future__ import annotations

import time
from typing import Any

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.store import MemoryStore
from kafkapy.transactions import TRANSACTION_STATE_TOPIC

from .test_transactions_wire import KafkaSocket, add, broker, coordinator_ready, end, init, markers_on

__all__ = ["broker"]  # the fixture
BROKER = 4  # ConfigResource type


def produce(conn: KafkaSocket, transactional_id: str, producer_id: int, epoch: int, sequence: int,
            topic: str = "orders", partition: int = 0, version: int = 9) -> dict[str, Any]:
    batch = build_record_batch([{"value": b"v%d" % sequence}], producer_id=producer_id, producer_epoch=epoch,
                               base_sequence=sequence, is_transactional=True)
    body = conn.call(ApiKey.PRODUCE, version, {
        "transactional_id": transactional_id, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}).body
    return dict(body["responses"][0]["partition_responses"][0])


def data_batches(broker: Broker, topic: str, partition: int) -> int:
    return len({r.offset for r in broker.records(topic, partition) if not r.is_control})


def test_a_late_batch_after_an_abort_is_refused_and_opens_no_transaction(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        _, pid, epoch = init(conn, "tx")
        assert add(conn, "tx", pid, epoch, {"orders": [0]}) == {("orders", 0): ErrorCode.NONE}
        assert produce(conn, "tx", pid, epoch, 0)["error_code"] == ErrorCode.NONE
        assert end(conn, "tx", pid, epoch, commit=False) == ErrorCode.NONE
        assert markers_on(broker, ("orders", 0))[("orders", 0)] == [(pid, epoch, False)]
        # The batch a producer had in flight when it aborted arrives late: not in any transaction.
        late = produce(conn, "tx", pid, epoch, 1)
        assert (late["error_code"], late["error_message"]) == (
            ErrorCode.INVALID_TXN_STATE, "Partition was not added to the transaction")
        assert produce(conn, "tx", pid, epoch, 1, version=11)["error_code"] == ErrorCode.TRANSACTION_ABORTABLE
        assert data_batches(broker, "orders", 0) == 1
        # no open transaction holds read_committed consumers back: the LSO is the log end
        answer = conn.call(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 1, "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}).body
        assert answer["topics"][0]["partitions"][0]["offset"] == 2  # the batch and the ABORT marker


def test_a_partition_not_added_is_refused_and_an_added_one_taken(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        _, pid, epoch = init(conn, "tx")
        add(conn, "tx", pid, epoch, {"orders": [0]})
        refused = produce(conn, "tx", pid, epoch, 0, partition=1, version=3)
        assert refused["error_code"] == ErrorCode.INVALID_TXN_STATE
        assert produce(conn, "tx", pid, epoch, 0)["error_code"] == ErrorCode.NONE
        assert produce(conn, "tx", pid, epoch, 1)["error_code"] == ErrorCode.NONE  # open here: no question
        # a fenced epoch (another InitProducerId bumped it) and an id the coordinator does not know
        while init(conn, "tx")[0] != ErrorCode.NONE:  # CONCURRENT_TRANSACTIONS while the open one aborts
            time.sleep(0.01)
        fenced = produce(conn, "tx", pid, epoch, 0, partition=1)
        assert fenced["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH
        assert produce(conn, "nobody", pid + 7, 0, 0, partition=1)["error_code"] == \
            ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert data_batches(broker, "orders", 1) == 0


def test_verification_can_be_turned_off() -> None:
    """``transaction.partition.verification.enable=false`` (static, or as a dynamic broker config):
    the batch is appended unasked (and starts the hanging transaction the check prevents)."""
    store = MemoryStore()
    with Broker({"broker.id": 1, "transaction.state.log.num.partitions": 5,
                 "transaction.partition.verification.enable": False}, store=store) as b, \
            KafkaSocket(b.bootstrap_servers) as conn:
        store.create_topic("orders", {0: (1,)})
        coordinator_ready(b)
        _, pid, epoch = init(conn, "tx")
        assert produce(conn, "tx", pid, epoch, 0)["error_code"] == ErrorCode.NONE
    with Broker({"broker.id": 1}) as b, KafkaSocket(b.bootstrap_servers) as conn:
        b.seed({"orders": {"partitions": 1}})
        # no coordinator to ask yet (no __transaction_state): a retriable refusal
        assert produce(conn, "nobody", 9, 0, 0)["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
        altered = conn.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, {"validate_only": False, "resources": [
            {"resource_type": BROKER, "resource_name": "", "configs": [
                {"name": "transaction.partition.verification.enable", "config_operation": 0,
                 "value": "false"}]}]}).body
        assert altered["responses"][0]["error_code"] == ErrorCode.NONE
        deadline = time.monotonic() + 10
        while produce(conn, "nobody", 9, 0, 0)["error_code"] != ErrorCode.NONE:
            assert time.monotonic() < deadline
            time.sleep(0.02)


def test_the_coordinator_on_another_broker_is_asked_over_the_wire() -> None:
    """Broker 2 leads the partition, broker 1 coordinates the id: broker 2 sends a verify-only
    AddPartitionsToTxn to broker 1 (the Produce is answered once it has answered). While the
    coordinator is down, the batch is refused NOT_ENOUGH_REPLICAS, which producers retry."""
    store = MemoryStore()
    with Broker({"broker.id": 1, "transaction.state.log.num.partitions": 5}, store=store) as first:
        store.create_topic(TRANSACTION_STATE_TOPIC, {p: (1,) for p in range(5)},
                           config={"cleanup.policy": "compact"})
        store.create_topic("orders", {0: (2,), 1: (2,)})
        coordinator_ready(first)
        with Broker({"broker.id": 2, "transaction.state.log.num.partitions": 5}, store=store) as second, \
                KafkaSocket(first.bootstrap_servers) as coordinator, \
                KafkaSocket(second.bootstrap_servers) as leader:
            deadline = time.monotonic() + 10
            while len(second.runtime.cluster.brokers) < 2:  # type: ignore[union-attr]
                assert time.monotonic() < deadline
                time.sleep(0.02)
            _, pid, epoch = init(coordinator, "tx")
            add(coordinator, "tx", pid, epoch, {"orders": [0]})
            assert produce(leader, "tx", pid, epoch, 0)["error_code"] == ErrorCode.NONE
            refused = produce(leader, "tx", pid, epoch, 0, partition=1, version=11)
            assert refused["error_code"] == ErrorCode.TRANSACTION_ABORTABLE
            assert end(coordinator, "tx", pid, epoch, commit=False) == ErrorCode.NONE
        assert data_batches(first, "orders", 1) == 0
    # the coordinator's broker stopped: nobody to ask
    with Broker({"broker.id": 2, "transaction.state.log.num.partitions": 5}, store=store) as second, \
            KafkaSocket(second.bootstrap_servers) as leader:
        unverified = produce(leader, "tx", pid, epoch, 1)
        assert unverified["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
        assert unverified["error_message"].startswith(
            "Unable to verify the partition has been added to the transaction. Underlying error: ")
