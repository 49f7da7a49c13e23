"""Connection quotas: the accept path's overhead, and how closely a per-IP rate is held.

* overhead: two brokers, each in a process of its own, serve connections (connect, one
  ApiVersions round trip, close) from a load generator in a third process. One broker has
  quotas configured but never hit (a broker-wide and a listener rate, a default ip quota,
  per-IP counts with an override, max.connections, all far above the load); the other has
  its accept gate removed (no quota bookkeeping at all). Blocks alternate A B B A ... and
  each block measures the broker's process CPU time (every thread, ``time.process_time``
  in the broker) per accepted connection; CPU time leaves out the time the broker sat
  descheduled while others used the two shared cores. The overhead is the ratio of the
  medians; the median of the per-pair ratios and the wall-clock rates are shown beside it.
* accuracy: a per-IP connection_creation_rate of 5, 50 and 500 per second
  (quota.window.num=2, windows of 1 s), attempted at twice the rate by the load process
  against a broker process. The measured rate is the served connections that finished in
  the steady state (after the first two windows, whose initial credit Kafka's Rate grants)
  divided by that span, so it does not depend on how fast the burst at the start went.
"""

from __future__ import annotations

import asyncio
import multiprocessing.connection
import socket
import statistics
import struct
import time
from typing import Any

from benchmarks import Options, Report, machine_note, render_table, revision
from benchmarks._processes import ChildProcess

TITLE = "Connection quotas"

QUOTAS_ON = "quotas configured, not hit"
NO_QUOTAS = "no quotas"
# Far above what the load reaches (about 1,000 connections per second here).
_CONFIGURED = {"max.connection.creation.rate": "1000000", "max.connections": "100000",
               "max.connections.per.ip": "100000", "max.connections.per.ip.overrides": "127.0.0.2:100000",
               "listener.name.plaintext.max.connection.creation.rate": "1000000", "quota.window.num": "2"}


def _api_versions_frame() -> bytes:
    from kafkapy.protocol import encode_request

    body = encode_request(18, 0, 1, "bench", {})
    return struct.pack(">i", len(body)) + body


# --- the broker process ----------------------------------------------------------------------------

def _serve(pipe: multiprocessing.connection.Connection, config: dict[str, str], gate: bool) -> None:
    """A broker; answers "cpu" with this process's CPU seconds, ("ip_quota", ip, rate) by setting a
    per-IP quota, "stop" by stopping."""
    from kafkapy import Broker
    from kafkapy.quotas import QuotasModule

    with Broker(config) as broker:
        runtime = broker.runtime
        assert runtime is not None
        module = next(m for m in runtime.modules if isinstance(m, QuotasModule))
        quotas = module.connection_quotas
        assert quotas is not None
        if gate:
            # A default ip quota, never hit: every connection goes through the per-IP rate too.
            runtime.loop.call_soon_threadsafe(quotas.set_ip_rate_quotas, {}, 1e9)
        else:
            runtime.accept_gate = None  # no quota bookkeeping in the accept path
        pipe.send(broker.bootstrap_servers)
        while True:
            message = pipe.recv()
            if message == "stop":
                break
            if message == "cpu":
                pipe.send(time.process_time())
            else:
                _, ip, rate = message
                runtime.loop.call_soon_threadsafe(quotas.set_ip_rate_quotas, {ip: float(rate)}, None)
                pipe.send(None)


# --- the load process ------------------------------------------------------------------------------

async def _attempt(host: str, port: int, source: str | None, frame: bytes) -> bool:
    try:
        reader, writer = await asyncio.open_connection(host, port, local_addr=(source, 0) if source else None)
    except OSError:
        return False
    try:
        writer.write(frame)
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
        await asyncio.wait_for(reader.readexactly(size), 5)
        return True
    except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
        return False
    finally:
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.fileno() >= 0:
            try:  # no TIME_WAIT pile-up over thousands of connections
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        writer.close()


async def _accept_block(address: str, seconds: float, workers: int = 8) -> tuple[int, float]:
    """Connections served in about ``seconds`` by ``workers`` connecting one after another."""
    host, _, port = address.rpartition(":")
    frame = _api_versions_frame()
    done = 0
    start = time.perf_counter()
    end = start + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < end:
            if await _attempt(host, int(port), None, frame):
                done += 1

    await asyncio.gather(*(worker() for _ in range(workers)))
    return done, time.perf_counter() - start


async def _accuracy(address: str, rate: float, seconds: float, source: str) -> list[float]:
    """Attempts at twice ``rate`` for ``seconds``; the finish time of each served one."""
    host, _, port = address.rpartition(":")
    frame = _api_versions_frame()
    attempts = int(rate * 2 * seconds)
    start = time.perf_counter()
    finished: list[float] = []

    async def one() -> None:
        if await _attempt(host, int(port), source, frame):
            finished.append(time.perf_counter() - start)

    tasks = []
    for i in range(attempts):
        delay = start + i / (rate * 2) - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one()))
    await asyncio.gather(*tasks)
    return finished


def _load(pipe: multiprocessing.connection.Connection) -> None:
    while True:
        message = pipe.recv()
        if message == "stop":
            break
        kind, *args = message
        try:
            result: Any = asyncio.run(_accept_block(*args) if kind == "accept" else _accuracy(*args))
        except Exception as exc:
            result = exc
        pipe.send(result)


# --- the harness ---------------------------------------------------------------------------------

def _overhead(load: ChildProcess, servers: dict[str, tuple[ChildProcess, str]], blocks: int,
              seconds: float) -> dict[str, list[tuple[float, float]]]:
    """Per block and broker: (server CPU seconds per served connection, connections per second)."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in servers}
    names = list(servers)
    for name in names:  # warm-up: imports, caches, the first sockets
        load.ask(("accept", servers[name][1], min(seconds, 0.5)))
    for b in range(blocks):
        order = names if b % 2 == 0 else names[::-1]  # A B, B A, ...: each pair sees the same noise
        for name in order:
            server, address = servers[name]
            cpu = server.ask("cpu")
            served, elapsed = load.ask(("accept", address, seconds))
            cpu = server.ask("cpu") - cpu
            samples[name].append((cpu / max(served, 1), served / elapsed))
    return samples


def run(options: Options) -> Report:
    blocks = 2 if options.quick else 16
    seconds = 0.3 if options.quick else 1.5
    load = ChildProcess(_load)
    servers: dict[str, tuple[ChildProcess, str]] = {}
    try:
        for name, config, gate in ((QUOTAS_ON, _CONFIGURED, True), (NO_QUOTAS, {}, False)):
            server = ChildProcess(_serve, config, gate)
            servers[name] = (server, server.receive(60))
        samples = _overhead(load, servers, blocks, seconds)
    finally:
        for server, _ in servers.values():
            server.stop()
    cpu = {name: statistics.median(c for c, _ in s) for name, s in samples.items()}
    wall = {name: statistics.median(r for _, r in s) for name, s in samples.items()}
    pair_ratios = [a[0] / b[0] for a, b in zip(samples[QUOTAS_ON], samples[NO_QUOTAS])]
    overhead = cpu[QUOTAS_ON] / cpu[NO_QUOTAS] - 1
    pair_overhead = statistics.median(pair_ratios) - 1
    spread = sorted(r - 1 for r in pair_ratios)
    quartiles = (spread[len(spread) // 4], spread[(3 * len(spread)) // 4])
    headers = ["accept path", "server CPU µs/conn (median)", "conn/s (median, wall)", "blocks"]
    rows = [[name, f"{cpu[name] * 1e6:.0f}", f"{wall[name]:.0f}", str(len(samples[name]))]
            for name in samples]

    accuracy_rows: list[list[str]] = []
    steady_from = 2.0  # two 1 s windows: the initial credit of Kafka's padded Rate is spent by then
    # A 2-sample Rate of 1 s windows lets admissions bunch at window edges (a whole connection is 20%
    # of a second's quota at 5/s), so the lowest rate gets the longest run.
    durations = {5: 3.0, 50: 3.0, 500: 3.0} if options.quick else {5: 14.0, 50: 6.0, 500: 6.0}
    try:
        for i, (rate, duration) in enumerate(durations.items()):
            source = f"127.0.0.{10 + i}"
            server = ChildProcess(_serve, {"quota.window.num": "2", "quota.window.size.seconds": "1"}, True)
            try:
                address = server.receive(60)
                server.ask(("ip_quota", source, rate))
                finished = load.ask(("accuracy", address, rate, duration, source))
            finally:
                server.stop()
            steady = [t for t in finished if steady_from <= t < duration]
            measured = len(steady) / (duration - steady_from)
            accuracy_rows.append([f"{rate}/s", f"{duration:g} s", str(int(rate * 2 * duration)),
                                  str(len(finished)), str(len(steady)), f"{measured:.1f}/s",
                                  f"{(measured / rate - 1) * 100:+.0f}%"])
    finally:
        load.stop()
    acc_headers = ["configured", "run", "attempts", "served", f"served from {steady_from:g} s on", "measured",
                   "error"]
    summary = (f"overhead of configured quotas: {overhead * 100:+.1f}% server CPU per connection (ratio of "
               f"medians); median of the {len(pair_ratios)} pairwise ratios {pair_overhead * 100:+.1f}%, "
               f"quartiles {quartiles[0] * 100:+.1f}% to {quartiles[1] * 100:+.1f}%")
    text = f"{render_table(headers, rows)}\n{summary}\n\n{render_table(acc_headers, accuracy_rows)}"
    markdown = (f"{machine_note()}; {revision()}.\n\n{render_table(headers, rows, markdown=True)}\n\n"
                f"Overhead of configured quotas: **{overhead * 100:+.1f}%** server CPU per accepted "
                f"connection (ratio of the medians over {blocks} interleaved blocks of {seconds:g} s per "
                f"broker, brokers and load generator in separate processes); the median of the pairwise "
                f"ratios is "
                f"{pair_overhead * 100:+.1f}% (quartiles {quartiles[0] * 100:+.1f}% to "
                f"{quartiles[1] * 100:+.1f}%).\n\n"
                f"Per-IP rate accuracy (attempts at twice the quota, quota.window.num=2 of 1 s, broker and "
                f"load generator in separate processes; measured = connections that finished from "
                f"{steady_from:g} s to the end of the run / that span, past the initial credit):\n\n"
                f"{render_table(acc_headers, accuracy_rows, markdown=True)}\n")
    return Report(text, markdown)


if __name__ == "__main__":
    print(run(Options()).text)
