"""Broker throughput: kafkapy's broker against the fastest ApiVersions server Python can be.

Three processes on loopback, so each side has a core of its own on a two-core
machine: the server under test, the load generator, and this one, which only
steers them over pipes.

* kafkapy: ``kafkapy.Broker`` with its defaults, on the server process's main
  asyncio loop.
* ceiling: an ``asyncio.Protocol`` that splits frames and answers each with
  canned response bytes, the request's correlation id spliced in. The bytes
  are the kafkapy broker's own answer to the same request, so both servers
  write the same number of bytes. No decoding, no dispatch: what is left is
  asyncio's own cost, the ceiling for a pure-Python server.

The load generator is plain sockets and a selector (no asyncio), with
pre-encoded requests, so that it costs less per request than either server;
each block reports how busy it was ("gen": its CPU time over the window) to
show it was not what set the pace. Measurements:

* round trips: N connections each keep ``DEPTH`` ApiVersions v3 requests in
  flight (a response frees a slot, which is refilled at once); requests per
  second and the latency of each request, send to response.
* accepts: ``ACCEPT_WORKERS`` connections at a time, each: connect, one
  ApiVersions round trip, close (with SO_LINGER 0, a reset, so a run does not
  fill the ephemeral port range with TIME_WAIT sockets).
* the general path (not part of the target): ApiVersions answers are
  memoized by request bytes (``ApiHandler.memoize``), so two rows measure
  requests that kafkapy decodes and hands to its handler every time:
  ApiVersions from DISTINCT_CLIENTS client ids per connection in turn (every
  one misses the memo), and Metadata v12 (also encoded every time) against a
  ceiling answering kafkapy's canned Metadata response.

Blocks of the two servers are interleaved, rotating who goes first, so noise
from the shared cores hits both. Each block opens its connections, warms up,
then counts for a fixed window. Server CPU time is read in the server process
(``time.process_time``) around each block and divided by every answer of the
block, warm-up included: on a shared machine it is the steadier basis for the
ratio, and unlike the request rate it does not depend on whether the load
generator kept the server busy.

``python -m benchmarks.server --profile [--accepts]`` runs the kafkapy broker
under cProfile for a few round-trip (or accept) blocks and prints where its
time goes.
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
import os
import pstats
import selectors
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


METADATA_VERSION = 12


DISTINCT_CLIENTS = 128  # client ids the memo-off row cycles through: twice the memo's 64 entries


def _request(kind: str = "api-versions", client_id: str = CLIENT_ID) -> bytes:
    """A whole request frame: ApiVersions v3, or Metadata v12 for every topic (``"metadata"``)."""
    from kafkapy.protocol import encode_request

    if kind == "metadata":
        frame = encode_request(3, METADATA_VERSION, 1, client_id, {"topics": None})
    else:
        body = {"client_software_name": "kafkapy-bench", "client_software_version": "1.0"}
        frame = encode_request(18, API_VERSIONS_VERSION, 1, client_id, body)
    return _SIZE.pack(len(frame)) + frame


def _requests(kind: str, connection: int) -> list[bytes]:
    """The requests one connection sends in turn. ``"api-versions-distinct"``: ApiVersions v3 from
    DISTINCT_CLIENTS client ids of its own (all of one length), in turn. The broker's memo of
    answers holds 64 and starts over when full, and between two requests from one client id the
    broker sees 127 others, so no request is ever answered from the memo: each is decoded and
    handled."""
    if kind == "api-versions-distinct":
        return [_request("api-versions", f"{CLIENT_ID}-{connection:03d}-{i:03d}")
                for i in range(DISTINCT_CLIENTS)]
    return [_request(kind)]


class _Sender:
    """What one connection sends next: ``take(n)`` is its next ``n`` requests as one string."""

    def __init__(self, requests: list[bytes], depth: int) -> None:
        self.size, self.cycle, self.at = len(requests[0]), len(requests), 0
        self.ring = b"".join(requests + requests[:depth])  # up to depth from any point: one slice

    def take(self, n: int) -> bytes:
        if self.cycle == 1:
            return self.ring[:self.size] * n
        at = self.at
        self.at = (at + n) % self.cycle
        return self.ring[at * self.size:(at + n) * self.size]


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
        stats.sort_stats("tottime").print_stats("kafkapy", 40)
        stats.sort_stats("cumulative").print_stats(30)
        pipe.send(out.getvalue())
    pipe.close()


# --- load generator (its own process) -----------------------------------------------------------
#
# Plain sockets and a selector, no asyncio: the load generator must cost as little per request as it
# can, so that it is the server, not the generator, that sets the pace. Each block reports how busy
# the generator was (its CPU time over the window) so a table can show it did not run out of core.


class _Window:
    """Warm-up, then a counted window; ``tick`` says which phase ``now`` falls in."""

    def __init__(self, seconds: float) -> None:
        self.start = time.perf_counter()
        self.opens = self.start + WARMUP
        self.closes = self.opens + seconds
        self.measuring = False
        self.over = False
        self.count = 0  # answers in the window
        self.total = 0  # answers in the whole run, warm-up included: what server CPU is divided by
        self.latencies: list[tuple[float, int]] = []  # (seconds, how many requests took that long)
        self.cpu = 0.0
        self.elapsed = 0.0

    def tick(self, now: float) -> None:
        if not self.measuring and not self.over and now >= self.opens:
            self.measuring, self.opens, self.cpu = True, now, time.process_time()
        elif self.measuring and now >= self.closes:
            self.measuring, self.over = False, True
            self.elapsed, self.cpu = now - self.opens, time.process_time() - self.cpu

    def result(self) -> dict[str, Any]:
        busy = self.cpu / self.elapsed if self.elapsed else float("nan")
        return {"count": self.count, "total": self.total, "elapsed": self.elapsed,
                "latencies": self.latencies, "load_busy": busy}


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection((HOST, port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _round_trips(port: int, connections: int, depth: int, seconds: float,
                 kind: str = "api-versions") -> dict[str, Any]:
    """Every connection keeps ``depth`` requests in flight: each response read is replaced at once.
    Blocking sockets, read only when the selector says so; a send never blocks, as at most
    ``depth`` small requests are ever unanswered on a connection. Send times are kept per batch
    of requests sent together, and latencies as (seconds, how many), so the cost per response
    is counting it."""
    selector = selectors.DefaultSelector()
    socks = [_connect(port) for _ in range(connections)]
    window = _Window(seconds)
    # [socket, unparsed bytes, [send time, requests] of the batches in flight, its requests]
    for index, sock in enumerate(socks):
        sender = _Sender(_requests(kind, index), depth)
        selector.register(sock, selectors.EVENT_READ,
                          [sock, b"", deque([[time.perf_counter(), depth]]), sender.take])
        sock.sendall(sender.take(depth))
    select, perf_counter, unpack = selector.select, time.perf_counter, _SIZE.unpack_from
    latencies = window.latencies
    try:
        while not window.over:
            events = select(0.05)
            now = perf_counter()
            window.tick(now)
            for key, _ in events:
                state = key.data
                sock, buf, sent, take = state
                data = sock.recv(262144)
                if not data:
                    raise ConnectionError("the server closed a connection")
                buf = buf + data if buf else data
                pos, end, n = 0, len(buf), 0
                while end - pos >= 4:
                    stop = pos + 4 + unpack(buf, pos)[0]
                    if stop > end:
                        break
                    pos = stop
                    n += 1
                state[1] = buf[pos:] if pos < end else b""
                if not n:
                    continue
                window.total += n
                if window.measuring:
                    window.count += n
                left = n
                while left:
                    batch = sent[0]
                    taken = batch[1] if batch[1] <= left else left
                    if window.measuring:
                        latencies.append((now - batch[0], taken))
                    left -= taken
                    if taken == batch[1]:
                        sent.popleft()
                    else:
                        batch[1] -= taken
                sent.append([now, n])
                sock.sendall(take(n))
    finally:
        for sock in socks:
            selector.unregister(sock)
            sock.close()
        selector.close()
    return window.result()


def _accepts(port: int, workers: int, seconds: float) -> dict[str, Any]:
    """``workers`` connections at a time, each: connect, one ApiVersions round trip, close (with
    SO_LINGER 0, a reset, so a run does not fill the ephemeral port range with TIME_WAIT sockets);
    every closed one is replaced by a new one at once."""
    request = _request()
    selector = selectors.DefaultSelector()
    window = _Window(seconds)
    linger = struct.pack("ii", 1, 0)
    live = 0

    def start() -> None:
        nonlocal live
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        sock.setblocking(False)
        began = time.perf_counter()
        if sock.connect_ex((HOST, port)) == 0:
            sock.send(request)
            selector.register(sock, selectors.EVENT_READ, [began, b""])
        else:  # EINPROGRESS: send once connected
            selector.register(sock, selectors.EVENT_WRITE, [began, b""])
        live += 1

    for _ in range(workers):
        start()
    try:
        while live:
            events = selector.select(0.05)
            now = time.perf_counter()
            window.tick(now)
            for key, mask in events:
                sock, state = key.fileobj, key.data
                assert isinstance(sock, socket.socket)
                if mask & selectors.EVENT_WRITE:
                    error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if error:
                        raise ConnectionError(f"connect failed: {os.strerror(error)}")
                    sock.send(request)
                    selector.modify(sock, selectors.EVENT_READ, state)
                    continue
                data = sock.recv(65536)
                if not data:
                    raise ConnectionError("the server closed a connection before answering")
                buf = state[1] + data
                if len(buf) < 4 or len(buf) - 4 < _SIZE.unpack_from(buf, 0)[0]:
                    state[1] = buf
                    continue
                selector.unregister(sock)
                sock.close()
                live -= 1
                window.total += 1
                if window.measuring:
                    window.count += 1
                    window.latencies.append((now - state[0], 1))
                if not window.over:
                    start()
    finally:
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        selector.close()
    return window.result()


def _load(pipe: multiprocessing.connection.Connection) -> None:
    """Load-generator process: run each command from the pipe, send back counts and latencies."""
    while True:
        command = pipe.recv()
        if command is None:
            break
        kind, port, *args = command
        result = _round_trips(port, *args) if kind == "round-trips" else _accepts(port, *args)
        latencies = sorted(result.pop("latencies"))
        result["p50"], result["p99"] = _quantiles(latencies, (0.50, 0.99))
        pipe.send(result)
    pipe.close()


def _quantiles(ordered: list[tuple[float, int]], qs: tuple[float, ...]) -> list[float]:
    """Quantiles of weighted samples (value, weight), sorted by value."""
    total = sum(weight for _, weight in ordered)
    if not total:
        return [float("nan")] * len(qs)
    found, seen, it = [], 0, iter(ordered)
    value = float("nan")
    for q in qs:
        rank = min(total - 1, int(q * total))
        while seen <= rank:
            value, weight = next(it)
            seen += weight
        found.append(value)
    return found


# --- the harness side ---------------------------------------------------------------------------


def _server(kind: str, canned: bytes = b"", profile: bool = False) -> tuple[ChildProcess, int]:
    process = ChildProcess(_serve, kind, canned, profile)
    port = process.receive(60)
    return process, port


def _canned_response(port: int, kind: str = "api-versions") -> bytes:
    """The kafkapy broker's own response to the benchmark request, size prefix included."""
    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(_request(kind))
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError(f"the broker closed the connection before answering {kind}")
            data += chunk
    return data


@dataclasses.dataclass
class _Block:
    rate: float  # per second
    p50: float  # seconds
    p99: float
    cpu: float  # server CPU seconds per request
    load_busy: float  # the load generator's CPU time over the window's wall time


def _block(server: ChildProcess, port: int, load: ChildProcess, command: tuple[Any, ...]) -> _Block:
    cpu = server.ask("cpu")
    result = load.ask((command[0], port, *command[1:]))
    cpu = server.ask("cpu") - cpu
    return _Block(result["count"] / result["elapsed"], result["p50"], result["p99"],
                  cpu / max(1, result["total"]), result["load_busy"])


def _median(blocks: list[_Block]) -> _Block:
    return _Block(*(statistics.median(getattr(b, f.name) for b in blocks)
                    for f in dataclasses.fields(_Block)))


HEADERS = ["scenario", "kafkapy /s", "p50 ms", "p99 ms", "CPU us", "gen", "ceiling /s", "p50 ms", "p99 ms",
           "CPU us", "gen", "ratio", "ratio (CPU)"]


def _row(label: str, ours: _Block, ceiling: _Block) -> list[str]:
    def ms(x: float) -> str:
        return f"{x * 1000:.2f}"

    return [label, f"{ours.rate:,.0f}", ms(ours.p50), ms(ours.p99), f"{ours.cpu * 1e6:.1f}",
            f"{ours.load_busy:.0%}", f"{ceiling.rate:,.0f}", ms(ceiling.p50), ms(ceiling.p99),
            f"{ceiling.cpu * 1e6:.1f}", f"{ceiling.load_busy:.0%}", f"{ours.rate / ceiling.rate:.0%}",
            f"{ceiling.cpu / ours.cpu:.0%}"]


def run(options: Options) -> Report:
    repeats = 1 if options.quick else max(1, min(options.repeats, 9))
    seconds = 0.2 if options.quick else 0.8
    load = ChildProcess(_load)
    kafkapy_server, kafkapy_port = _server("kafkapy")
    canned = _canned_response(kafkapy_port)
    canned_metadata = _canned_response(kafkapy_port, "metadata")
    ceiling_server, ceiling_port = _server("ceiling", canned)
    metadata_server, metadata_port = _server("ceiling", canned_metadata)
    ceiling = (ceiling_server, ceiling_port)
    kafkapy = (kafkapy_server, kafkapy_port)
    scenarios: list[tuple[str, tuple[Any, ...], tuple[ChildProcess, int]]] = [
        (f"round trips, {n} conn x {DEPTH} in flight", ("round-trips", n, DEPTH, seconds), ceiling)
        for n in CONNECTIONS]
    scenarios.append((f"accepts ({ACCEPT_WORKERS} at a time: connect, request, close)",
                      ("accepts", ACCEPT_WORKERS, seconds), ceiling))
    scenarios.append((f"not in the target: ApiVersions missing the memo ({DISTINCT_CLIENTS} client ids "
                      f"in turn), 16 conn x {DEPTH}",
                      ("round-trips", 16, DEPTH, seconds, "api-versions-distinct"), ceiling))
    scenarios.append((f"not in the target: Metadata v{METADATA_VERSION}, 16 conn x {DEPTH} (general path)",
                      ("round-trips", 16, DEPTH, seconds, "metadata"), (metadata_server, metadata_port)))
    rows = []
    try:
        for label, command, peer in scenarios:
            servers = {"kafkapy": kafkapy, "ceiling": peer}
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
        metadata_server.stop()

    setting = f"{machine_note()}; kafkapy {revision()}"
    method = (f"Three processes on loopback: the server, a load generator (plain sockets and a selector, "
              f"no asyncio) sending pre-encoded ApiVersions v{API_VERSIONS_VERSION} requests "
              f"({len(_request())} bytes; responses {len(canned)} bytes), and the harness. ceiling: an "
              f"asyncio.Protocol server that splits frames and answers with canned response bytes (kafkapy's "
              f"own answer), the most a pure-Python asyncio server can do. Round trips: each connection "
              f"keeps {DEPTH} requests in flight. Accepts: {ACCEPT_WORKERS} connections at a time, each "
              f"connect, one round trip, close. The last two rows are outside the target; there kafkapy "
              f"decodes and handles every request, where the rows above answer ApiVersions from a memo of "
              f"answers by request bytes: ApiVersions v{API_VERSIONS_VERSION} from {DISTINCT_CLIENTS} "
              f"client ids in turn (the memo holds 64, so every request misses it; the handler's answer "
              f"is encoded once per version and reused), and Metadata v{METADATA_VERSION} for all topics "
              f"({len(_request('metadata'))} bytes; responses {len(canned_metadata)} bytes), also "
              f"encoded every time. {repeats} "
              f"interleaved blocks of {seconds:g} s (after {WARMUP:g} s of warm-up) per server and "
              f"scenario; medians shown. /s: requests (or connections) per second; p50/p99: latency "
              f"of one request (one connect + round trip for accepts); CPU us: server CPU time per "
              f"request; gen: how busy the load generator was (CPU time over wall time; well under 100% "
              f"means it was not what set the pace). ratio = kafkapy/ceiling rate (target >= 70%); "
              f"ratio (CPU) = ceiling CPU per request / kafkapy CPU per request, which does not depend on "
              f"the load generator keeping up and is the steadier figure on a shared machine.")
    text = "\n\n".join([setting, method, render_table(HEADERS, rows)])
    markdown = "\n\n".join([
        f"Measured {datetime.date.today().isoformat()} with `python -m benchmarks server --write-docs`: "
        f"{setting}.",
        method,
        render_table(HEADERS, rows, markdown=True),
    ])
    return Report(text, markdown)


def profile(connections: int = 16, seconds: float = 3.0, accepts: bool = False) -> str:
    """cProfile of the kafkapy broker process under the round-trip (or the accept) load."""
    load = ChildProcess(_load)
    server, port = _server("kafkapy", profile=True)
    command = ("accepts", port, ACCEPT_WORKERS) if accepts else ("round-trips", port, connections, DEPTH)
    try:
        load.ask((*command, 0.3))  # warm up unprofiled
        server.pipe.send("profile-on")
        result = load.ask((*command, seconds))
        server.ask("profile-off")
        server.pipe.send("stop")
        report: str = server.receive(60)
    finally:
        load.stop(None)
        server.stop()
    rate = result["count"] / result["elapsed"]
    what = (f"connections/s while profiled ({ACCEPT_WORKERS} at a time)" if accepts else
            f"round trips/s while profiled ({connections} connections x {DEPTH})")
    return f"{rate:,.0f} {what}\n\n{report}"


def _main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.server")
    parser.add_argument("--profile", action="store_true", help="profile the kafkapy broker under load")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--accepts", action="store_true", help="profile under the accept load instead")
    args = parser.parse_args()
    if args.profile:
        print(profile(args.connections, accepts=args.accepts))
    else:
        print(run(Options()).text)


if __name__ == "__main__":
    _main()
