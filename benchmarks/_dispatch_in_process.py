"""``python -m benchmarks._dispatch_in_process``: the dispatcher's CPU per request, no sockets.

Calls ``Dispatcher.dispatch_all`` of an embedded broker straight, on batches of 16 identical
frames, and prints the best of 5 windows of 20,000 requests (process CPU time): Metadata v12
for all topics (the general path: decode, handler, encode) and ApiVersions v3 (answered from
the memo). Run it from two checkouts in turn to compare them without the noise of loopback
sockets and a load generator on a shared machine (docs/performance.md, issue 13).
"""

from __future__ import annotations

import time

from kafkapy import Broker
from kafkapy.protocol import encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.connection import ConnectionInfo

REQUESTS = 20_000
BATCH = 16
WINDOWS = 5

FRAMES = {
    "metadata-v12": encode_request(ApiKey.METADATA, 12, 7, "bench", {
        "topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}),
    "apiversions-v3-memo": encode_request(ApiKey.API_VERSIONS, 3, 7, "bench", {
        "client_software_name": "bench", "client_software_version": "1"}),
}


def main() -> None:
    connection = ConnectionInfo(id="bench", listener="PLAINTEXT", security_protocol="PLAINTEXT",
                                client_address=("127.0.0.1", 1), broker_address=("127.0.0.1", 2),
                                principal="User:ANONYMOUS")
    with Broker() as broker:
        assert broker.runtime is not None
        dispatcher = broker.runtime.dispatcher
        out: list[bytes] = []
        results = {}
        for name, frame in FRAMES.items():
            batch = [frame] * BATCH
            for _ in range(200):  # warm-up: plans made, memo filled
                dispatcher.dispatch_all(connection, iter(batch), out, lambda: False)
                out.clear()
            windows = []
            for _ in range(WINDOWS):
                started = time.process_time()
                for _ in range(REQUESTS // BATCH):
                    dispatcher.dispatch_all(connection, iter(batch), out, lambda: False)
                    out.clear()
                windows.append((time.process_time() - started) / REQUESTS * 1e6)
            results[name] = min(windows)
    print(" ".join(f"{name}={us:.3f}us" for name, us in results.items()))


if __name__ == "__main__":
    main()
