"""``python -m benchmarks._txn_in_process [--per-request] [--cold KB]``: the broker's CPU per
committed transaction, no sockets.

The requests confluent-kafka sends for one transaction of issue 17's benchmark (AddPartitionsToTxn
v0, one Produce v10 with a batch of 5 transactional records for each of the two partitions, as
librdkafka sends them to their common leader, EndTxn v1; before round 14 this sent a Produce per
partition), through
``Dispatcher.dispatch_all`` of an embedded broker on its own loop (as a connection's read hands
them over, so the fast paths from the frame answer what they take; before round 8 this called
``dispatch``, the plain path), a request that suspends awaited as its connection would. Prints
the best of 5 windows of process CPU time per transaction. Run it from two checkouts in turn to
compare them without the noise of loopback sockets and a client (docs/performance.md, issue 17).

``--cold KB`` writes KB kilobytes of memory before every request and before the step after EndTxn
(outside the timed part), evicting that much of the CPU caches, as the client and other tenants do
in the 1.2 ms a real client pauses between transactions. Each request is then timed alone with the
loop thread's CPU clock, and the figure per transaction is the sum of the steps' medians
(docs/performance.md, round 14).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from kafkapy import Broker
from kafkapy.client import SimpleClient
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol import decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.server.connection import ConnectionInfo

TOPIC = "bench-txn"
TRANSACTIONAL_ID = "bench-txn-in-process"
RECORDS = 5  # per partition, 2 partitions: issue 17's 10 records a transaction
VALUE = b"v" * 100
WINDOWS = 5
PER_WINDOW = 400


def _connection(name: str) -> ConnectionInfo:
    return ConnectionInfo(id=name, listener="PLAINTEXT", security_protocol="PLAINTEXT",
                          client_address=("127.0.0.1", 1), broker_address=("127.0.0.1", 2),
                          principal="User:ANONYMOUS")


def _setup(bootstrap: str) -> tuple[int, int]:
    """The topic, the coordinator, and the producer id and epoch."""
    with SimpleClient(bootstrap, 10.0, "bench") as client:
        client.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": TOPIC, "num_partitions": 2,
                                                              "replication_factor": 1, "assignments": [],
                                                              "configs": []}], "timeout_ms": 10_000})
        for _ in range(100):
            found = client.request(ApiKey.FIND_COORDINATOR, 2,
                                   {"key": TRANSACTIONAL_ID, "key_type": CoordinatorKeyType.TRANSACTION})
            if found["error_code"] == ErrorCode.NONE:
                break
            time.sleep(0.05)
        init = client.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": TRANSACTIONAL_ID,
                                                           "transaction_timeout_ms": 60_000,
                                                           "producer_id": -1, "producer_epoch": -1})
        assert init["error_code"] == ErrorCode.NONE, init
        return init["producer_id"], init["producer_epoch"]


def _frames(producer_id: int, epoch: int, first: int, count: int) -> list[list[tuple[str, bytes]]]:
    """Per transaction, the frames in order, each with the connection it goes on."""
    txns = []
    for n in range(first, first + count):
        add = encode_request(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 1, "rdkafka", {
            "v3_and_below_transactional_id": TRANSACTIONAL_ID, "v3_and_below_producer_id": producer_id,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": TOPIC, "partitions": [0, 1]}]})
        batch = build_record_batch([{"value": VALUE} for _ in range(RECORDS)], producer_id=producer_id,
                                   producer_epoch=epoch, base_sequence=n * RECORDS, is_transactional=True)
        produce = encode_request(ApiKey.PRODUCE, 10, 2, "rdkafka", {
            "transactional_id": TRANSACTIONAL_ID, "acks": -1, "timeout_ms": 30_000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": batch}
                                                              for partition in (0, 1)]}]})
        end = encode_request(ApiKey.END_TXN, 1, 3, "rdkafka", {
            "transactional_id": TRANSACTIONAL_ID, "producer_id": producer_id, "producer_epoch": epoch,
            "committed": True})
        txns.append([("coordinator", add), ("leader", produce), ("coordinator", end)])
    return txns


def _codes(value: Any) -> list[int]:
    """Every error code in a decoded response body."""
    if isinstance(value, dict):
        return [code for key, item in value.items()
                for code in ([item] if key.endswith("error_code") else _codes(item))]
    if isinstance(value, list):
        return [code for item in value for code in _codes(item)]
    return []


async def _run(dispatcher: Any, txns: list[list[tuple[str, bytes]]], check: bool,
               steps: list[list[float]] | None = None, evict: Callable[[], None] | None = None) -> None:
    """Each frame as its connection would: answered in place, or the awaitable awaited; a loop step
    between transactions, as between an answer and the next request over a socket. With
    ``check``, every answer is decoded and must hold no error (outside the timed windows). With
    ``steps`` (one list per frame of a transaction, and one for the step after EndTxn), each
    one's wall time is appended to its list (its thread CPU time with ``evict``, which runs before
    each step, untimed)."""
    connections = {"coordinator": _connection("coordinator"), "leader": _connection("leader")}
    out: list[Any] = []
    clock = time.perf_counter if evict is None else time.thread_time
    for frames in txns:
        for index, (connection, frame) in enumerate(frames):
            if evict is not None:
                evict()
            started = clock()
            pending = dispatcher.dispatch_all(connections[connection], iter([frame]), out, _open)
            if pending is not None:
                answered = await pending
                out.append(b"\x00\x00\x00\x00")  # where the size goes; not checked below
                if isinstance(answered, list):
                    out.extend(answered)
                elif answered is not None:
                    out.append(answered)
            if steps is not None:
                steps[index].append(clock() - started)
            if check:
                key, version = int.from_bytes(frame[:2], "big"), int.from_bytes(frame[2:4], "big")
                wire = b"".join(bytes(chunk) for chunk in out)
                body = decode_response(wire[4:], key, version).body
                assert not any(_codes(body)), (ApiKey(key).name, body)
            out.clear()
        # A client's next request comes in a later loop step than the answer to EndTxn; what the
        # coordinator does after answering (the markers, CompleteCommit) runs before it.
        if evict is not None:
            evict()
        started = clock()
        await asyncio.sleep(0)
        if steps is not None:
            steps[-1].append(clock() - started)


def _open() -> bool:
    return False


STEPS = ("AddPartitionsToTxn", "Produce", "EndTxn", "the step after EndTxn")


def _evictor(kilobytes: int) -> Callable[[], None]:
    """Overwrites ``kilobytes`` of memory from a second buffer of the same size: both pass
    through the caches, pushing out what the broker's last request left there."""
    target = bytearray(kilobytes << 10)
    source = bytes(b"\x5a" * len(target))

    def evict() -> None:
        target[:] = source
    return evict


def main(per_request: bool = False, cold_kilobytes: int = 0) -> None:
    """``per_request``: also print each request's median wall time (and the step after EndTxn:
    the markers and CompleteCommit), from the window with the least CPU. ``cold_kilobytes``:
    evict that much of the caches before each step (module docstring)."""
    if cold_kilobytes:
        _main_cold(cold_kilobytes)
        return
    best: list[list[float]] = []
    with Broker() as broker:
        assert broker.runtime is not None and broker._loop is not None
        producer_id, epoch = _setup(broker.bootstrap_servers)
        dispatcher = broker.runtime.dispatcher
        done = 50
        warm = _frames(producer_id, epoch, 0, done)
        asyncio.run_coroutine_threadsafe(_run(dispatcher, warm, True), broker._loop).result()
        windows = []
        for _ in range(WINDOWS):
            txns = _frames(producer_id, epoch, done, PER_WINDOW)
            done += PER_WINDOW
            steps: list[list[float]] | None = [[] for _ in STEPS] if per_request else None
            started = time.process_time()
            asyncio.run_coroutine_threadsafe(_run(dispatcher, txns, False, steps), broker._loop).result()
            windows.append((time.process_time() - started) / PER_WINDOW * 1e6)
            if steps is not None and min(windows) == windows[-1]:
                best = steps
        markers = [r for r in broker.records(TOPIC, 1) if r.is_control]
    if len(markers) != done:
        raise SystemExit(f"{len(markers)} markers for {done} transactions: not every one committed")
    print(f"us per transaction: best {min(windows):.1f}, windows {' '.join(f'{w:.0f}' for w in windows)}")
    if best:
        print("us per request, medians: " + ", ".join(
            f"{name} {statistics.median(times) * 1e6:.1f}" for name, times in zip(STEPS, best, strict=True)))


def _nothing() -> None:
    """The hot windows' stand-in for the eviction, so both kinds time the same way."""


def _main_cold(kilobytes: int) -> None:
    """Hot and cold windows alternated, each step timed alone (the eviction is not timed)."""
    evict = _evictor(kilobytes)
    with Broker() as broker:
        assert broker.runtime is not None and broker._loop is not None
        producer_id, epoch = _setup(broker.bootstrap_servers)
        dispatcher = broker.runtime.dispatcher
        done = 50
        asyncio.run_coroutine_threadsafe(_run(dispatcher, _frames(producer_id, epoch, 0, done), True),
                                         broker._loop).result()
        for cold in (False, True) * 2:
            steps: list[list[float]] = [[] for _ in STEPS]
            txns = _frames(producer_id, epoch, done, PER_WINDOW)
            done += PER_WINDOW
            before_step = evict if cold else _nothing
            asyncio.run_coroutine_threadsafe(_run(dispatcher, txns, False, steps, before_step),
                                             broker._loop).result()
            medians = [statistics.median(times) * 1e6 for times in steps]
            label = f"cold ({kilobytes} KB evicted)" if cold else "hot"
            print(f"{label}: {sum(medians):.1f} us per transaction; "
                  + ", ".join(f"{name} {median:.1f}" for name, median in zip(STEPS, medians, strict=True)))


def _parse() -> Any:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._txn_in_process")
    parser.add_argument("--per-request", action="store_true")
    parser.add_argument("--cold", type=int, default=0, metavar="KB",
                        help="evict this many kilobytes of cache before each step")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = _parse()
    main(arguments.per_request, arguments.cold)
