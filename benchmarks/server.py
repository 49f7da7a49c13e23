"""Broker throughput: kafkapy's broker against the fastest ApiVersions server Python can be.

Three processes on loopback, so each side has a core of its own on a two-core
machine: the server under test, the load generator, and this one, which only
steers them over pipes.

* kafkapy: ``kafkapy.Broker`` with its defaults, on the server process's main
  asyncio loop.
* ceiling: an ``asyncio.Protocol`` that splits frames and answers each with
  canned ApiVersions response bytes, the request's correlation id spliced in.
  The bytes are the kafkapy broker's own answer to the same request, so both
  servers write the same number of bytes. No decoding, no dispatch: what is
  left is asyncio's own cost, the ceiling for a pure-Python server.

The load generator uses asyncio Protocols and pre-encoded request bytes. Two
measurements:

* round trips: N connections each keep ``DEPTH`` ApiVersions v3 requests in
  flight (a response frees a slot, which is refilled at once); requests per
  second and the latency of each request, send to response.
* accepts: ``ACCEPT_WORKERS`` concurrent loops of connect, one ApiVersions
  round trip, close (with SO_LINGER 0, a reset, so a run does not fill the
  ephemeral port range with TIME_WAIT sockets).

Blocks of the two servers are interleaved, rotating who goes first, so noise
from the shared cores hits both. Each block opens its connections, warms up,
then counts for a fixed window. Server CPU time per request is read in the
server process (``time.process_time``) around each window: on a shared
machine it is the steadier basis for the ratio, and unlike the request rate it
does not depend on whether the load generator kept the server busy.

``python -m benchmarks.server --profile`` runs the kafkapy broker under
cProfile for a few round-trip blocks and prints where its time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import datetime
import io
import multiprocessing
import multiprocessing.connection
import pstats
import socket
import statistics
import struct
import time
from collections import deque
from typing import Any

from benchmarks import Options, Report, machine_note, render_table, revision
from benchmarks._processes import ChildProcess

TITLE = "Broker throughput"

HOST = "127.0.0.1"
DEPTH = 16  # requests in flight per connection
CONNECTIONS = (1, 16, 256)
ACCEPT_WORKERS = 16  # concurrent connect / round trip / close loops
WARMUP = 0.3  # seconds of load before a window counts
CLIENT_ID = "bench-load"
API_VERSIONS_VERSION = 3

_SIZE = struct.Struct(">i")


def _request() -> bytes:
    from kafkapy.protocol import encode_request

    body = {"client_software_name": "kafkapy-bench", "client_software_version": "1.0"}
    frame = encode_request(18, API_VERSIONS_VERSION, 1, CLIENT_ID, body)
    return _SIZE.pack(len(frame)) + frame


# --- servers (each in its own process) ----------------------------------------------------------


class _CannedApiVersions(asyncio.Protocol):
    """The ceiling: split frames, answer each with the canned bytes and the request's correlation id."""

    def __init__(self, head: bytes, tail: bytes) -> None:
        self.head, self.tail = head, tail  # response = head (size prefix) + correlation id + tail
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, end, out = 0, len(buf), []
        while end - pos >= 4:
            size = int.from_bytes(buf[pos:pos + 4], "big")
            if end - pos - 4 < size:
                break
            out.append(self.head + buf[pos + 8:pos + 12] + self.tail)
            pos += 4 + size
        if pos:
            del buf[:pos]
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


def _serve(pipe: multiprocessing.connection.Connection, kind: str, canned: bytes, profile: bool) -> None:
    """Server process: start, send the port, then answer "cpu" and "stop" on the pipe."""
    import logging

    logging.basicConfig(level=logging.WARNING)
    # When a block ends the load generator closes its sockets with responses still owed; asyncio
    # then warns once per write to each dead socket, which says nothing about speed.
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    # CPU time, not wall time: on two shared cores a wall-clock profile charges whatever call was
    # running when the load generator preempted the broker (mostly socket.send) with its time.
    profiler = cProfile.Profile(time.process_time) if profile else None

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stopped = loop.create_future()

        def command() -> None:
            message = pipe.recv()
            if message == "cpu":
                pipe.send(time.process_time())
            elif message == "profile-on" and profiler is not None:
                profiler.enable()
            elif message == "profile-off" and profiler is not None:
                profiler.disable()
                pipe.send(None)
            elif message == "stop" and not stopped.done():
                stopped.set_result(None)

        loop.add_reader(pipe.fileno(), command)
        if kind == "kafkapy":
            from kafkapy import Broker

            async with Broker({"listeners": f"PLAINTEXT://{HOST}:0"}) as broker:
                pipe.send(int(broker.bootstrap_servers.rsplit(":", 1)[1]))
                await stopped
        else:
            head, tail = canned[:4], canned[8:]
            server = await loop.create_server(lambda: _CannedApiVersions(head, tail), HOST, 0,
                                              reuse_address=True)
            pipe.send(server.sockets[0].getsockname()[1])
            await stopped
            server.close()
        loop.remove_reader(pipe.fileno())

    asyncio.run(main())
    if profiler is not None:
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(30)
        pipe.send(out.getvalue())
    pipe.close()


# --- load generator (its own process) -----------------------------------------------------------


@dataclasses.dataclass
class _Window:
    measuring: bool = False
    running: bool = True
    count: int = 0
    latencies: list[float] = dataclasses.field(default_factory=list)


class _Pipelined(asyncio.Protocol):
    """Keeps ``depth`` requests in flight; every response frees a slot that is refilled at once."""

    def __init__(self, request: bytes, depth: int, window: _Window, ready: asyncio.Future[None]) -> None:
        self.request, self.depth, self.window, self.ready = request, depth, window, ready
        self.buf = bytearray()
        self.sent: deque[float] = deque()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not self.ready.done():
            self.ready.set_result(None)

    def start(self) -> None:
        assert self.transport is not None
        now = time.perf_counter()
        self.sent.extend([now] * self.depth)
        self.transport.write(self.request * self.depth)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, end, n = 0, len(buf), 0
        while end - pos >= 4:
            size = int.from_bytes(buf[pos:pos + 4], "big")
            if end - pos - 4 < size:
                break
            pos += 4 + size
            n += 1
        if not n:
            return
        del buf[:pos]
        now = time.perf_counter()
        window, sent = self.window, self.sent
        if window.measuring:
            window.count += n
            latencies = window.latencies
            for _ in range(n):
                latencies.append(now - sent.popleft())
        else:
            for _ in range(n):
                sent.popleft()
        if window.running and self.transport is not None:
            sent.extend([now] * n)
            self.transport.write(self.request * n)


class _OneShot(asyncio.Protocol):
    """One request, one response, then done."""

    def __init__(self, request: bytes, done: asyncio.Future[None]) -> None:
        self.request, self.done = request, done
        self.buf = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) >= 4 and len(self.buf) - 4 >= int.from_bytes(self.buf[:4], "big"):
            if not self.done.done():
                self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(exc or ConnectionError("closed before the response"))


async def _round_trips(port: int, connections: int, depth: int, seconds: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    request, window = _request(), _Window()
    protocols = []
    for _ in range(connections):
        ready: asyncio.Future[None] = loop.create_future()
        _, protocol = await loop.create_connection(
            lambda r=ready: _Pipelined(request, depth, window, r), HOST, port)  # type: ignore[misc]
        protocols.append(protocol)
    for protocol in protocols:
        protocol.start()
    await asyncio.sleep(WARMUP)
    window.measuring = True
    start = time.perf_counter()
    await asyncio.sleep(seconds)
    window.measuring = False
    elapsed = time.perf_counter() - start
    window.running = False
    await asyncio.sleep(0.05)
    for protocol in protocols:
        if protocol.transport is not None:
            protocol.transport.close()
    await asyncio.sleep(0.05)
    return {"count": window.count, "elapsed": elapsed, "latencies": window.latencies}


async def _accepts(port: int, workers: int, seconds: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    request, window = _request(), _Window()

    async def worker() -> None:
        while window.running:
            done: asyncio.Future[None] = loop.create_future()
            began = time.perf_counter()
            transport, _ = await loop.create_connection(lambda d=done: _OneShot(request, d), HOST, port)  # type: ignore[misc]
            try:
                await done
            finally:
                transport.close()
            if window.measuring:
                window.count += 1
                window.latencies.append(time.perf_counter() - began)

    tasks = [loop.create_task(worker()) for _ in range(workers)]
    await asyncio.sleep(WARMUP)
    window.measuring = True
    start = time.perf_counter()
    await asyncio.sleep(seconds)
    window.measuring = False
    elapsed = time.perf_counter() - start
    window.running = False
    await asyncio.gather(*tasks)
    return {"count": window.count, "elapsed": elapsed, "latencies": window.latencies}


def _load(pipe: multiprocessing.connection.Connection) -> None:
    """Load-generator process: run each command from the pipe, send back counts and latencies."""
    while True:
        command = pipe.recv()
        if command is None:
            break
        kind, port, *args = command
        run = _round_trips(port, *args) if kind == "round-trips" else _accepts(port, *args)
        result = asyncio.run(run)
        latencies = sorted(result.pop("latencies"))
        result["p50"] = _quantile(latencies, 0.50)
        result["p99"] = _quantile(latencies, 0.99)
        pipe.send(result)
    pipe.close()


def _quantile(ordered: list[float], q: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- the harness side ---------------------------------------------------------------------------


def _server(kind: str, canned: bytes = b"", profile: bool = False) -> tuple[ChildProcess, int]:
    process = ChildProcess(_serve, kind, canned, profile)
    port = process.receive(60)
    return process, port


def _canned_response(port: int) -> bytes:
    """The kafkapy broker's own response to the benchmark request, size prefix included."""
    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(_request())
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError("the broker closed the connection before answering ApiVersions")
            data += chunk
    return data


@dataclasses.dataclass
class _Block:
    rate: float  # per second
    p50: float  # seconds
    p99: float
    cpu: float  # server CPU seconds per request


def _block(server: ChildProcess, port: int, load: ChildProcess, command: tuple[Any, ...]) -> _Block:
    cpu = server.ask("cpu")
    result = load.ask((command[0], port, *command[1:]))
    cpu = server.ask("cpu") - cpu
    count = max(1, result["count"])
    return _Block(result["count"] / result["elapsed"], result["p50"], result["p99"], cpu / count)


def _median(blocks: list[_Block]) -> _Block:
    return _Block(statistics.median(b.rate for b in blocks), statistics.median(b.p50 for b in blocks),
                  statistics.median(b.p99 for b in blocks), statistics.median(b.cpu for b in blocks))


HEADERS = ["scenario", "kafkapy /s", "p50 ms", "p99 ms", "CPU us", "ceiling /s", "p50 ms", "p99 ms",
           "CPU us", "ratio", "ratio (CPU)"]


def _row(label: str, ours: _Block, ceiling: _Block) -> list[str]:
    def ms(x: float) -> str:
        return f"{x * 1000:.2f}"

    return [label, f"{ours.rate:,.0f}", ms(ours.p50), ms(ours.p99), f"{ours.cpu * 1e6:.1f}",
            f"{ceiling.rate:,.0f}", ms(ceiling.p50), ms(ceiling.p99), f"{ceiling.cpu * 1e6:.1f}",
            f"{ours.rate / ceiling.rate:.0%}", f"{ceiling.cpu / ours.cpu:.0%}"]


def run(options: Options) -> Report:
    repeats = 1 if options.quick else max(1, min(options.repeats, 5))
    seconds = 0.2 if options.quick else 0.8
    load = ChildProcess(_load)
    kafkapy_server, kafkapy_port = _server("kafkapy")
    canned = _canned_response(kafkapy_port)
    ceiling_server, ceiling_port = _server("ceiling", canned)
    servers = {"kafkapy": (kafkapy_server, kafkapy_port), "ceiling": (ceiling_server, ceiling_port)}
    scenarios: list[tuple[str, tuple[Any, ...]]] = [
        (f"round trips, {n} conn x {DEPTH} in flight", ("round-trips", n, DEPTH, seconds))
        for n in CONNECTIONS]
    scenarios.append((f"accepts ({ACCEPT_WORKERS} concurrent connect/request/close)",
                      ("accepts", ACCEPT_WORKERS, seconds)))
    rows = []
    try:
        for label, command in scenarios:
            blocks: dict[str, list[_Block]] = {name: [] for name in servers}
            names = list(servers)
            for r in range(repeats):
                for name in names[r % 2:] + names[:r % 2]:
                    server, port = servers[name]
                    blocks[name].append(_block(server, port, load, command))
            rows.append(_row(label, _median(blocks["kafkapy"]), _median(blocks["ceiling"])))
    finally:
        load.stop(None)
        kafkapy_server.stop()
        ceiling_server.stop()

    setting = f"{machine_note()}; kafkapy {revision()}"
    method = (f"Three processes on loopback: the server, an asyncio load generator sending pre-encoded "
              f"ApiVersions v{API_VERSIONS_VERSION} requests ({len(_request())} bytes; responses "
              f"{len(canned)} bytes), and the harness. ceiling: an asyncio.Protocol server that splits "
              f"frames and answers with canned response bytes, the most a pure-Python asyncio server can "
              f"do. Round trips: each connection keeps {DEPTH} requests in flight. Accepts: "
              f"{ACCEPT_WORKERS} concurrent loops of connect, one round trip, close. {repeats} "
              f"interleaved blocks of {seconds:g} s (after {WARMUP:g} s of warm-up) per server and "
              f"scenario; medians shown. /s: requests (or connections) per second; p50/p99: latency "
              f"of one request (one connect + round trip for accepts); CPU us: server CPU time per "
              f"request. ratio = kafkapy/ceiling rate (target >= 70%); ratio (CPU) = ceiling CPU per "
              f"request / kafkapy CPU per request, which does not depend on the load generator keeping "
              f"up.")
    text = "\n\n".join([setting, method, render_table(HEADERS, rows)])
    markdown = "\n\n".join([
        f"Measured {datetime.date.today().isoformat()} with `python -m benchmarks server --write-docs`: "
        f"{setting}.",
        method,
        render_table(HEADERS, rows, markdown=True),
    ])
    return Report(text, markdown)


def profile(connections: int = 16, seconds: float = 3.0) -> str:
    """cProfile of the kafkapy broker process under the round-trip load."""
    load = ChildProcess(_load)
    server, port = _server("kafkapy", profile=True)
    try:
        load.ask(("round-trips", port, connections, DEPTH, 0.3))  # warm up unprofiled
        server.pipe.send("profile-on")
        result = load.ask(("round-trips", port, connections, DEPTH, seconds))
        server.ask("profile-off")
        server.pipe.send("stop")
        report: str = server.receive(60)
    finally:
        load.stop(None)
        server.stop()
    rate = result["count"] / result["elapsed"]
    return f"{rate:,.0f} round trips/s while profiled ({connections} connections x {DEPTH})\n\n{report}"


def _main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.server")
    parser.add_argument("--profile", action="store_true", help="profile the kafkapy broker under load")
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    if args.profile:
        print(profile(args.connections))
    else:
        print(run(Options()).text)


if __name__ == "__main__":
    _main()
