"""``python -m benchmarks._framing_in_process``: a 226 KB Produce that spans four reads, no sockets.

Frames one Produce v9 of a 2,000-record batch (100-byte values, 226 KB: what confluent-kafka sends
in the produce msg/s workload) arriving in four reads, through ``FrameBuffer.drain`` alone and
through ``drain`` then ``Dispatcher.dispatch_all`` of an embedded broker (answered from the frame),
and prints the best of 5 windows of 100 (process CPU time), per request; before that, two wall-clock
loops of ``drain`` alone: that frame, dropped as soon as it is out, and one small frame per read.
Run it from two checkouts in turn to compare them (docs/performance.md, "Round 7: frames that span
reads").
"""

from __future__ import annotations

import inspect
import itertools
import time
from typing import Any

from kafkapy import Broker
from kafkapy.protocol import encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.framing import FrameBuffer
from kafkapy.protocol.records import build_record_batch
from kafkapy.server.connection import ConnectionInfo

WINDOWS = 5
REQUESTS = 100  # per window: each appends 226 KB to the log


def _chunks() -> list[bytes]:
    batch = build_record_batch([{"value": b"v" * 100} for _ in range(2000)])
    frame = encode_request(ApiKey.PRODUCE, 9, 7, "bench", {
        "transactional_id": None, "acks": 1, "timeout_ms": 30000,
        "topic_data": [{"name": "bench", "partition_data": [{"index": 0, "records": batch}]}]})
    wire = len(frame).to_bytes(4, "big") + frame
    cuts = [0, len(wire) // 4, len(wire) // 2, 3 * len(wire) // 4, len(wire)]
    return [wire[a:b] for a, b in itertools.pairwise(cuts)]


def _buffer(**kept: Any) -> FrameBuffer:
    """A FrameBuffer as the connection makes one (on a checkout whose FrameBuffer takes keep_from)."""
    if "keep_from" in inspect.signature(FrameBuffer).parameters:
        return FrameBuffer(100 * 1024 * 1024, **kept)
    return FrameBuffer(100 * 1024 * 1024)


def _drain_dropped(chunks: list[bytes]) -> float:
    """drain alone, each request's frames dropped at once: best of 7 windows of 2,000, seconds each."""
    buffer, best = _buffer(), float("inf")
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(2000):
            out: list[Any] = []
            for chunk in chunks:
                buffer.drain(chunk, out)
            del out
        best = min(best, (time.perf_counter() - start) / 2000)
    return best


def _drain_small() -> float:
    """drain of one 44-byte frame per read (an ApiVersions round trip's): best of 7 windows of 200,000."""
    wire, buffer, best = (40).to_bytes(4, "big") + b"x" * 40, _buffer(), float("inf")
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(200_000):
            out: list[Any] = []
            buffer.drain(wire, out)
        best = min(best, (time.perf_counter() - start) / 200_000)
    return best


def main() -> None:
    chunks = _chunks()
    print(f"one Produce v9 of {sum(map(len, chunks)):,} bytes in {len(chunks)} reads")
    print(f"drain, each frame dropped at once: {_drain_dropped(chunks) * 1e6:.1f} us")
    print(f"drain of one 44-byte frame per read: {_drain_small() * 1e9:.0f} ns")
    connection = ConnectionInfo(id="bench", listener="PLAINTEXT", security_protocol="PLAINTEXT",
                                client_address=("127.0.0.1", 1), broker_address=("127.0.0.1", 2),
                                principal="User:ANONYMOUS")
    variants: dict[str, dict[str, Any]] = {"as the connection frames": {}}
    if "keep_from" in inspect.signature(FrameBuffer).parameters:
        variants["every frame handed out as bytes (kept_frames off)"] = {"keep_from": None}
    for name, kept in variants.items():
        buffer = _buffer(**kept)
        best = float("inf")
        for _ in range(WINDOWS):
            start = time.process_time()
            for _ in range(REQUESTS):
                frames: list[Any] = []
                for chunk in chunks:
                    buffer.drain(chunk, frames)
            best = min(best, time.process_time() - start)
        print(f"drain, {name}: {best / REQUESTS * 1e6:.1f} us")
    for name, kept in variants.items():
        with Broker({"auto.create.topics.enable": False}) as broker:
            broker.seed({"bench": {"partitions": 1}})
            assert broker.runtime is not None
            dispatcher = broker.runtime.dispatcher
            buffer = _buffer(**kept)

            def run(buffer: FrameBuffer = buffer, dispatcher: Any = dispatcher) -> float:
                best = float("inf")
                for _ in range(WINDOWS):
                    out: list[Any] = []
                    start = time.process_time()
                    for _ in range(REQUESTS):
                        frames: list[Any] = []
                        for chunk in chunks:
                            buffer.drain(chunk, frames)
                        dispatcher.dispatch_all(connection, iter(frames), out, lambda: False)
                    best = min(best, time.process_time() - start)
                    assert len(out) >= REQUESTS and b"bench" in b"".join(out[:3])  # answered
                return best
            best = broker._on_loop(run)
        print(f"drain + dispatch_all, {name}: {best / REQUESTS * 1e6:.1f} us")


if __name__ == "__main__":
    main()
