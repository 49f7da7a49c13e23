"""``python -m benchmarks._produce_in_process``: the broker's CPU per common Produce, no sockets.

One Produce v9 (acks 1) of one batch of 1, 10 or 100 records of 100 bytes, uncompressed, lz4 and
zstd, through ``Dispatcher.dispatch_all`` of an embedded broker on its own loop (as a
connection's read hands it over): with every fast path (Produce from the frame answers it) and
with the from-frame path off (decode, ProduceHandler, encode). Prints the best of 5 windows of
process CPU time per request, for each case. Run it from two checkouts in turn to compare them
without the noise of loopback sockets and a client (as ``_dispatch_in_process``).

``--history``: every fast path, without and with ``Broker(history=True)`` (the RequestHistory
observer), what keeping the request history costs the common Produce.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import attrs

from kafkapy import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol import decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.server.connection import ConnectionInfo
from kafkapy.server.fastpaths import FastPaths

TOPIC = "bench-produce"
VALUE = b"v" * 100
WINDOWS = 5
RECORDS_PER_WINDOW = 20_000  # requests per window: this many records, at least 200 requests
CASES = [(records, codec) for records in (1, 10, 100) for codec in ("none", "lz4", "zstd")]


def _frame(records: int, codec: str) -> bytes:
    batch = build_record_batch([{"value": VALUE} for _ in range(records)], compression=codec)
    return encode_request(ApiKey.PRODUCE, 9, 7, "bench", {
        "transactional_id": None, "acks": 1, "timeout_ms": 30_000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})


async def _window(dispatcher: Any, connection: ConnectionInfo, frame: bytes, requests: int) -> bytes:
    """The last answer's bytes (size prefix dropped), after ``requests`` of ``frame``."""
    out: list[Any] = []
    for _ in range(requests):
        out.clear()
        pending = dispatcher.dispatch_all(connection, iter([frame]), out, lambda: False)
        if pending is not None:
            await pending
    last = b"".join(bytes(chunk) for chunk in out)
    return last[4:]


def _measure(fast_paths: FastPaths, history: bool = False) -> dict[str, float]:
    connection = ConnectionInfo(id="bench", listener="PLAINTEXT", security_protocol="PLAINTEXT",
                                client_address=("127.0.0.1", 1), broker_address=("127.0.0.1", 2),
                                principal="User:ANONYMOUS")
    results = {}
    with Broker(fast_paths=fast_paths, history=history) as broker:
        assert broker.runtime is not None and broker._loop is not None and broker.store is not None
        broker.store.create_topic(TOPIC, {0: (broker.runtime.broker_id,)})
        while TOPIC not in broker.runtime.cluster.topics:
            time.sleep(0.01)
        dispatcher = broker.runtime.dispatcher

        def run(frame: bytes, requests: int) -> bytes:
            return asyncio.run_coroutine_threadsafe(_window(dispatcher, connection, frame, requests),
                                                    broker._loop).result()  # type: ignore[arg-type]

        for records, codec in CASES:
            frame = _frame(records, codec)
            requests = max(200, RECORDS_PER_WINDOW // records)
            answer = decode_response(run(frame, 200), ApiKey.PRODUCE, 9).body  # warm-up, checked
            [[partition]] = [topic["partition_responses"] for topic in answer["responses"]]
            if partition["error_code"] != ErrorCode.NONE:
                raise SystemExit(f"Produce answered {ErrorCode(partition['error_code']).name}")
            windows = []
            for _ in range(WINDOWS):
                started = time.process_time()
                run(frame, requests)
                windows.append((time.process_time() - started) / requests * 1e6)
            results[f"{records}x{codec}"] = min(windows)
    return results


def main() -> None:
    plain = attrs.evolve(FastPaths(), from_frame=False)
    variants = [("from-frame", FastPaths(), False), ("plain", plain, False)]
    if "--history" in sys.argv:
        variants = [("no history", FastPaths(), False), ("history", FastPaths(), True)]
    for label, fast_paths, history in variants:
        results = _measure(fast_paths, history)
        print(f"{label}: " + " ".join(f"{name}={us:.1f}us" for name, us in results.items()), flush=True)


if __name__ == "__main__":
    main()
