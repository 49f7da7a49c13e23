"""``python -m benchmarks._connection_in_process``: frames per second through the sans-I/O connection
objects against the broker's own framing, no sockets.

A stream of 20,000 small requests (Metadata v12 for one topic, 41 bytes framed, the size of a
client's routine traffic) arrives in 64 KiB reads. Three ways through it, best of 5 (process CPU
time): ``FrameBuffer.drain`` alone (the broker's splitting, no decoding); ``drain`` then
``decode_request`` of each frame (what the broker's framing and the codec cost together); and
``ServerConnection.receive_data`` (the same two, plus the queue of unanswered requests: left to
grow, all 20,000 decoded requests stay alive and the garbage collector walks them; emptied after
each read, as a server that answers keeps it). The
answers to them go the same way through ``ClientConnection.receive_data`` against ``drain`` then
``decode_response``. The gap between the second and third rows is what the connection object adds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kafkapy.protocol import decode_request, decode_response
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.connection import ClientConnection, ServerConnection
from kafkapy.protocol.framing import FrameBuffer

FRAMES = 20_000
READ = 64 * 1024
WINDOWS = 5
METADATA_KEY = int(ApiKey.METADATA)  # as ClientConnection keeps it: a plain int hashes faster than an IntEnum
METADATA = {"brokers": [{"node_id": 1, "host": "broker-1", "port": 9092}], "topics": [
    {"error_code": 0, "name": "orders", "partitions": [{"partition_index": 0, "leader_id": 1,
                                                         "replica_nodes": [1], "isr_nodes": [1]}]}]}


def _streams() -> tuple[ClientConnection, bytes, bytes]:
    """A client that sent FRAMES requests, their bytes, and the answers' bytes."""
    client, server = ClientConnection("bench"), ServerConnection()
    requests = b"".join(client.send_request(ApiKey.METADATA, 12, {"topics": [{"name": "orders"}]})
                        for _ in range(FRAMES))
    responses = b"".join(server.send_response(request, METADATA) for request in server.receive_data(requests))
    return client, requests, responses


def _reads(stream: bytes) -> list[bytes]:
    return [stream[start:start + READ] for start in range(0, len(stream), READ)]


def _best(run: Callable[[], int]) -> float:
    """Frames per second: the best of WINDOWS runs, process CPU time."""
    best = float("inf")
    for _ in range(WINDOWS):
        start = time.process_time()
        count = run()
        best = min(best, time.process_time() - start)
        assert count == FRAMES, count
    return FRAMES / best


def main() -> None:
    _, requests, responses = _streams()
    request_reads, response_reads = _reads(requests), _reads(responses)

    def drain_only(reads: list[bytes]) -> int:
        frames: list[Any] = []
        buffer = FrameBuffer(104_857_600, keep_from=None)
        for data in reads:
            buffer.drain(data, frames)
        return len(frames)

    # the baselines decode each read's frames as it comes and keep no more than the connection keeps
    def drain_and_decode_requests() -> int:
        buffer, count = FrameBuffer(104_857_600, keep_from=None), 0
        for data in request_reads:
            frames: list[Any] = []
            buffer.drain(data, frames)
            count += len([decode_request(frame) for frame in frames])
        return count

    def server_connection() -> int:
        connection = ServerConnection()
        return sum(len(connection.receive_data(data)) for data in request_reads)

    def server_connection_answering() -> int:
        connection, count = ServerConnection(), 0
        for data in request_reads:
            count += len(connection.receive_data(data))
            connection._unanswered.clear()  # as if each were answered, without timing the encoding
        return count

    def drain_and_decode_responses() -> int:
        buffer, count = FrameBuffer(104_857_600, keep_from=None), 0
        for data in response_reads:
            frames: list[Any] = []
            buffer.drain(data, frames)
            count += len([decode_response(frame, METADATA_KEY, 12) for frame in frames])
        return count

    def client_connection() -> int:
        connection = fresh_clients.pop()
        return sum(len(connection.receive_data(data)) for data in response_reads)

    fresh_clients = [_streams()[0] for _ in range(WINDOWS)]  # each has FRAMES requests in flight
    print(f"{FRAMES:,} Metadata v12 frames in {READ // 1024} KiB reads; frames per second, best of {WINDOWS}")
    rows = [("requests: FrameBuffer.drain alone", lambda: drain_only(request_reads)),
            ("requests: drain + decode_request", drain_and_decode_requests),
            ("requests: ServerConnection.receive_data", server_connection),
            ("  the same, each read's requests answered", server_connection_answering),
            ("responses: FrameBuffer.drain alone", lambda: drain_only(response_reads)),
            ("responses: drain + decode_response", drain_and_decode_responses),
            ("responses: ClientConnection.receive_data", client_connection)]
    for name, run in rows:
        print(f"{name:<44} {_best(run):>12,.0f}")


if __name__ == "__main__":
    main()
