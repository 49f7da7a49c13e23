"""AddPartitionsToTxn and EndTxn from the frame (kafkapy.transactions.from_frame), held equal to
the plain path.

Two brokers on one virtual clock (so both stamp the same times), one with every fast path and one
with ``FastPaths(from_frame=False)``, get the same frames through their dispatchers' ``dispatch_all``
(what a connection's read calls): generated AddPartitionsToTxn v0-v3 and EndTxn v0-v4 requests,
good and bad (ids the coordinator does not know or has not given the producer, wrong epochs, an
empty id, unknown topics and partitions, duplicates, ending twice or in the wrong state, any byte
of the frame changed, frames cut short or with a byte more). After each request the answers (or
the connection closing) must be equal, and after each example what the coordinators hold, the
bytes of ``__transaction_state`` and of every partition (the markers) too; the fast path must
have answered some of them, and a valid request of every version must be answered by it.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from frame_paths import CountedPaths, answer_one_read
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kafkapy import Broker
from kafkapy.client import SimpleClient
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol import decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.clock import VirtualClock
from kafkapy.server.connection import ConnectionInfo
from kafkapy.server.fastpaths import FastPaths
from kafkapy.testing import wait_until
from kafkapy.transactions.from_frame import ADD_PARTITIONS_VERSIONS, END_TXN_VERSIONS
from kafkapy.transactions.module import TransactionsModule

WALL_START = 1_750_000_000.0
TOPICS = {"a": {"partitions": 2}, "b": {"partitions": 1}}
IDS = ("t1", "t2")  # given producer ids at setup; "t3" never is
CONNECTION = ConnectionInfo(id="txn-from-frame-test", listener="PLAINTEXT", security_protocol="PLAINTEXT",
                            client_address=("127.0.0.1", 40001), broker_address=("127.0.0.1", 9092))
_correlation = itertools.count(1)




def _init(broker: Broker, transactional_id: str) -> tuple[int, int]:
    with SimpleClient(broker.bootstrap_servers, 10.0, "txn-from-frame") as client:
        # Until the coordinator answers, however long a loaded machine takes to make its topic
        # (200 tries 20 ms apart went on to InitProducerId regardless).
        find = {"key": transactional_id, "key_type": CoordinatorKeyType.TRANSACTION}
        wait_until(lambda: client.request(ApiKey.FIND_COORDINATOR, 2, find)["error_code"] == ErrorCode.NONE,
                   30, "the transaction coordinator")
        init = client.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": transactional_id,
                                                           "transaction_timeout_ms": 60_000})
    assert init["error_code"] == ErrorCode.NONE, init
    return init["producer_id"], init["producer_epoch"]


@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[Broker, Broker]]:
    clock = VirtualClock(wall_start=WALL_START)
    config = {"auto.create.topics.enable": False, "cluster.id": "txn-from-frame",
              "transaction.state.log.num.partitions": 1}
    with contextlib.ExitStack() as stack:
        fast = stack.enter_context(Broker(config, clock=clock))
        plain = stack.enter_context(Broker(config, clock=clock, fast_paths=FastPaths(from_frame=False)))
        for broker in (fast, plain):
            broker.seed(TOPICS)
            for transactional_id in IDS:
                _init(broker, transactional_id)
        assert fast.runtime is not None
        fast.runtime.dispatcher.frame_paths = CountedPaths()
        yield fast, plain


def _producers(broker: Broker) -> dict[str, tuple[int, int]]:
    """Each id's current producer id and epoch at the broker's coordinator."""
    def run() -> dict[str, tuple[int, int]]:
        assert broker.runtime is not None
        [module] = [m for m in broker.runtime.modules if isinstance(m, TransactionsModule)]
        found = {}
        for transactional_id in IDS:
            metadata = module.coordinator.get(transactional_id)
            assert metadata is not None
            found[transactional_id] = (metadata.producer_id, metadata.producer_epoch)
        return found
    return broker._on_loop(run)


def _answer(broker: Broker, frame: bytes | bytearray) -> bytes | str:
    return answer_one_read(broker, CONNECTION, frame)


def _state(broker: Broker) -> dict[str, Any]:
    """What the coordinator holds per id, and every partition log's bytes and offsets (read in a
    later loop step than the requests, so a transaction's markers and CompleteCommit are in)."""
    def run() -> dict[str, Any]:
        assert broker.runtime is not None
        [module] = [m for m in broker.runtime.modules if isinstance(m, TransactionsModule)]
        home = broker._dataplane().partitions.home
        logs = {key: (b"".join(bytes(c) for c in log.read(log.log_start_offset, 1 << 24).chunks),
                      log.log_end_offset, log.last_stable_offset)
                for key, log in home.logs.logs.items()}
        return {"ids": {i: module.coordinator.get(i) for i in (*IDS, "t3")}, "logs": logs}
    return broker._on_loop(run)


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """One AddPartitionsToTxn or EndTxn, as a client would send it or not quite."""
    kind = draw(st.sampled_from(["add", "add", "end"]))
    versions = ADD_PARTITIONS_VERSIONS if kind == "add" else END_TXN_VERSIONS
    topics = [{"name": draw(st.sampled_from(["a", "a", "b", "missing"])),
               "partitions": draw(st.lists(st.sampled_from([0, 1, 1, 7]), max_size=3))}
              for _ in range(draw(st.sampled_from([1, 1, 1, 2, 0])))]
    return {"kind": kind, "version": draw(st.sampled_from(versions)),
            "id": draw(st.sampled_from(["t1", "t1", "t2", "t3", ""])),
            "producer_id": draw(st.sampled_from(["right", "right", "right", "other"])),
            "epoch": draw(st.sampled_from([0, 0, 0, 1, -1])),
            "topics": topics, "committed": draw(st.booleans()),
            "change": draw(st.sampled_from([None] * 8 + ["byte", "cut", "more"])),
            "at": draw(st.integers(0, 10_000)), "xor": draw(st.integers(1, 255))}


def _frame(request: dict[str, Any], producers: dict[str, tuple[int, int]], correlation_id: int) -> bytes:
    producer_id, epoch = producers.get(request["id"], (4242, 0))
    if request["producer_id"] == "other":
        producer_id += 1000
    epoch += request["epoch"]
    version = request["version"]
    if request["kind"] == "add":
        frame = encode_request(ApiKey.ADD_PARTITIONS_TO_TXN, version, correlation_id, "txn-from-frame", {
            "v3_and_below_transactional_id": request["id"], "v3_and_below_producer_id": producer_id,
            "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": request["topics"]})
    else:
        frame = encode_request(ApiKey.END_TXN, version, correlation_id, "txn-from-frame", {
            "transactional_id": request["id"], "producer_id": producer_id, "producer_epoch": epoch,
            "committed": request["committed"]})
    data = bytearray(frame)
    if request["change"] == "byte":
        data[8 + request["at"] % (len(data) - 8)] ^= request["xor"]  # the key and version kept
    elif request["change"] == "cut":
        del data[max(10, request["at"] % len(data)):]
    elif request["change"] == "more":
        data += b"\x00"
    return bytes(data)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(requests(), min_size=1, max_size=6))
def test_the_path_from_the_frame_answers_and_stores_as_the_plain_path(
        brokers: tuple[Broker, Broker], sent: list[dict[str, Any]]) -> None:
    fast, plain = brokers
    for request in sent:
        correlation_id = next(_correlation)
        answered = CountedPaths.answered
        fast_answer = _answer(fast, _frame(request, _producers(fast), correlation_id))
        plain_answer = _answer(plain, _frame(request, _producers(plain), correlation_id))
        assert fast_answer == plain_answer, request
        event("answered from the frame" if CountedPaths.answered > answered else "left to the plain path")
    assert _state(fast) == _state(plain)


def _ok(answer: bytes | str, api_key: ApiKey, version: int) -> list[int]:
    """The error codes of an answer (size prefix included)."""
    assert isinstance(answer, bytes)
    body = decode_response(answer[4:], api_key, version).body
    if api_key == ApiKey.END_TXN:
        return [body["error_code"]]
    return [p["partition_error_code"] for t in body["results_by_topic_v3_and_below"]
            for p in t["results_by_partition"]]


@pytest.mark.parametrize("version", ADD_PARTITIONS_VERSIONS)
def test_a_producer_s_transaction_takes_the_path_from_the_frame(brokers: tuple[Broker, Broker],
                                                                version: int) -> None:
    """AddPartitionsToTxn at ``version`` and EndTxn at each version in turn, valid and committed:
    both answered from the frame, NONE, with the same bytes as the plain path."""
    fast, plain = brokers
    for end_version in END_TXN_VERSIONS:
        for kind, request in (("add", {"version": version, "topics": [{"name": "a", "partitions": [0, 1]},
                                                                      {"name": "b", "partitions": [0]}]}),
                              ("end", {"version": end_version, "committed": end_version % 2 == 0})):
            request.update(kind=kind, id="t1", producer_id="right", epoch=0, change=None)
            correlation_id = next(_correlation)
            answered = CountedPaths.answered
            fast_answer = _answer(fast, _frame(request, _producers(fast), correlation_id))
            plain_answer = _answer(plain, _frame(request, _producers(plain), correlation_id))
            assert CountedPaths.answered == answered + 1, request
            assert fast_answer == plain_answer
            api_key = ApiKey.ADD_PARTITIONS_TO_TXN if kind == "add" else ApiKey.END_TXN
            assert set(_ok(fast_answer, api_key, request["version"])) == {ErrorCode.NONE}
    assert _state(fast) == _state(plain)
