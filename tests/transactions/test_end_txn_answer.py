"""When EndTxn is answered, and what a request after the answer sees.

With every partition on the coordinator's broker, EndTxn is answered once PrepareCommit is in
``__transaction_state``, as Kafka answers it, and the markers and CompleteCommit are written in
the loop's next step: a request in the same read as EndTxn still sees PrepareCommit, and
anything sent after the answer was read sees the transaction complete (no
CONCURRENT_TRANSACTIONS for the next one). The coordinator's requests are started in place
(ApiHandler.in_place); with the ``eager`` fast path off they run in the worker task and answer
the same bytes.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol import decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.server.fastpaths import FastPaths
from kafkapy.store import MemoryStore

from .test_transactions_wire import (
    KafkaSocket,
    add,
    broker,
    coordinator_ready,
    describe,
    end,
    init,
    markers_on,
)

__all__ = ["broker"]  # the fixture, used by name


def _frame(api_key: ApiKey, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    data = encode_request(api_key, version, correlation_id, "end-txn-tests", body)
    return struct.pack(">i", len(data)) + data


def test_a_request_read_with_end_txn_sees_prepare_one_sent_after_the_answer_sees_it_complete(
        broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        _, pid, epoch = init(conn, "tx")
        assert add(conn, "tx", pid, epoch, {"orders": [0, 1]}) == {("orders", 0): 0, ("orders", 1): 0}
        conn.send_raw(_frame(ApiKey.END_TXN, 3, 101, {"transactional_id": "tx", "producer_id": pid,
                                                       "producer_epoch": epoch, "committed": True})
                      + _frame(ApiKey.DESCRIBE_TRANSACTIONS, 0, 102, {"transactional_ids": ["tx"]}))
        answered = decode_response(conn.read_frame(), ApiKey.END_TXN, 3)
        behind = decode_response(conn.read_frame(), ApiKey.DESCRIBE_TRANSACTIONS, 0)
        assert (answered.correlation_id, answered.body["error_code"]) == (101, ErrorCode.NONE)
        # Read with EndTxn: answered before the markers, as Kafka answers.
        assert behind.body["transaction_states"][0]["transaction_state"] == "PrepareCommit"
        # Sent after the answer: complete, markers in, and the next transaction may begin at once.
        [state] = describe(conn, "tx")
        assert (state["transaction_state"], state["topics"]) == ("CompleteCommit", [])
        assert markers_on(broker, ("orders", 0), ("orders", 1)) == {
            ("orders", 0): [(pid, epoch, True)], ("orders", 1): [(pid, epoch, True)]}
        assert add(conn, "tx", pid, epoch, {"orders": [0]}) == {("orders", 0): ErrorCode.NONE}
        assert end(conn, "tx", pid, epoch, commit=False) == ErrorCode.NONE
        assert add(conn, "tx", pid, epoch, {"orders": [1]}) == {("orders", 1): ErrorCode.NONE}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _one_transaction(pid: int, epoch: int, n: int, commit: bool) -> list[tuple[ApiKey, int, dict[str, Any]]]:
    batch = build_record_batch([(None, b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=n,
                               is_transactional=True, base_timestamp=1_700_000_000_000)
    produced = [{"name": "orders", "partition_data": [{"index": p, "records": batch} for p in (0, 1)]}]
    return [
        (ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": "orders", "partitions": [0, 1]}]}),
        (ApiKey.PRODUCE, 9, {"transactional_id": "tx", "acks": -1, "timeout_ms": 5000,
                             "topic_data": produced}),
        (ApiKey.END_TXN, 3, {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch,
                             "committed": commit}),
    ]


def _transactions(fast_paths: FastPaths, port: int) -> list[bytes]:
    """Three transactions (commit, abort, commit) over the wire, one request at a time: every answer
    (none of them holds a wall-clock time)."""
    store = MemoryStore()
    config = {"broker.id": 1, "cluster.id": "end-txn-cluster", "transaction.state.log.num.partitions": 5,
              "listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    answers = []
    with Broker(config, store=store, fast_paths=fast_paths) as b:
        store.create_topic("orders", {0: (1,), 1: (1,)})
        coordinator_ready(b)
        with KafkaSocket(b.bootstrap_servers) as conn:
            _, pid, epoch = init(conn, "tx")
            for n, commit in enumerate((True, False, True)):
                for key, version, body in _one_transaction(pid, epoch, n, commit):
                    conn.send_raw(_frame(key, version, n, body))
                    answers.append(conn.read_frame())
                    decode_response(answers[-1], key, version)  # well formed
    return answers


def test_the_coordinator_answers_byte_for_byte_in_place_and_in_the_worker() -> None:
    port = _free_port()
    in_place = _transactions(FastPaths(), port)
    assert _transactions(FastPaths(eager=False), port) == in_place
    ends = [decode_response(frame, ApiKey.END_TXN, 3).body for frame in in_place[2::3]]
    assert [body["error_code"] for body in ends] == [ErrorCode.NONE] * 3
