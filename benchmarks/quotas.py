"""Connection quotas: the accept path's overhead, and how closely a per-IP rate is held.

* overhead: connections accepted per second (connect, one ApiVersions round trip, close)
  by an embedded broker with quotas configured but never hit (a broker-wide rate, a
  default ip quota and per-IP counts, all far above the load) against the same broker
  with the accept gate removed (no quota bookkeeping at all). Blocks interleaved.
* accuracy: a per-IP connection_creation_rate of 5, 50 and 500 per second
  (quota.window.num=2), attempted at twice the rate for a few seconds; the measured
  rate counts the padded first window (Kafka's Rate gives an initial credit of one
  window at quota.window.num=2).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time

from benchmarks import Options, Report, machine_note, render_table, revision

TITLE = "Connection quotas"

_FRAME = None


def _api_versions_frame() -> bytes:
    from kafkapy.protocol import encode_request

    body = encode_request(18, 0, 1, "bench", {})
    return struct.pack(">i", len(body)) + body


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
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        writer.close()


async def _accept_rate(host: str, port: int, seconds: float, workers: int = 8) -> float:
    frame = _api_versions_frame()
    done = 0
    end = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < end:
            if await _attempt(host, port, None, frame):
                done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return done / (time.perf_counter() - start)


async def _accuracy(host: str, port: int, rate: float, seconds: float, source: str) -> tuple[int, float]:
    frame = _api_versions_frame()
    attempts = int(rate * 2 * seconds)
    start = time.perf_counter()
    tasks = []
    for i in range(attempts):
        delay = start + i / (rate * 2) - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_attempt(host, port, source, frame)))
    results = await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    return sum(results), elapsed


def run(options: Options) -> Report:
    from kafkapy import Broker
    from kafkapy.quotas import QuotasModule

    seconds = 0.3 if options.quick else 2.0
    repeats = 1 if options.quick else 3
    configured = {"max.connection.creation.rate": "1000000", "max.connections.per.ip": "100000",
                  "quota.window.num": "2"}
    rows: list[list[str]] = []
    with Broker(configured) as quotas_on, Broker() as plain:
        for b in (quotas_on,):
            assert b.runtime is not None
            module = next(m for m in b.runtime.modules if isinstance(m, QuotasModule))
            assert module.connection_quotas is not None
            module.connection_quotas.set_ip_rate_quotas({}, 1e9)  # a default ip quota, never hit
        assert plain.runtime is not None
        plain.runtime.accept_gate = None  # no quota bookkeeping in the accept path
        rates: dict[str, list[float]] = {"quotas configured, not hit": [], "no quotas": []}
        for r in range(repeats):
            order = [("quotas configured, not hit", quotas_on), ("no quotas", plain)]
            if r % 2:
                order.reverse()
            for name, b in order:
                host, _, port = b.bootstrap_servers.rpartition(":")
                rates[name].append(asyncio.run(_accept_rate(host, int(port), seconds)))
        best = {name: max(v) for name, v in rates.items()}
        overhead = 1 - best["quotas configured, not hit"] / best["no quotas"]
        for name, v in rates.items():
            rows.append([name, f"{max(v):.0f}", f"{sorted(v)[len(v) // 2]:.0f}"])
    table = render_table(["accept path", "best conn/s", "median conn/s"], rows)
    md1 = render_table(["accept path", "best conn/s", "median conn/s"], rows, markdown=True)
    accuracy_rows: list[list[str]] = []
    duration = 1.0 if options.quick else 4.0
    for i, rate in enumerate((5, 50, 500)):
        source = f"127.0.0.{10 + i}"
        with Broker({"quota.window.num": "2"}) as b:
            assert b.runtime is not None
            module = next(m for m in b.runtime.modules if isinstance(m, QuotasModule))
            assert module.connection_quotas is not None
            module.connection_quotas.set_ip_rate_quotas({source: float(rate)}, None)
            host, _, port = b.bootstrap_servers.rpartition(":")
            served, elapsed = asyncio.run(_accuracy(host, int(port), rate, duration, source))
        measured = served / (elapsed + 1.0)
        accuracy_rows.append([f"{rate}/s", f"{int(rate * 2 * duration)}", str(served), f"{elapsed:.2f}",
                              f"{measured:.1f}/s", f"{(measured / rate - 1) * 100:+.0f}%"])
    headers = ["configured", "attempts", "served", "seconds", "measured", "error"]
    text = (f"{table}\noverhead of configured quotas: {overhead * 100:.1f}%\n\n"
            f"{render_table(headers, accuracy_rows)}")
    markdown = (f"{machine_note()}; {revision()}.\n\n{md1}\n\nOverhead of configured quotas: "
                f"{overhead * 100:.1f}% (best of {repeats} blocks of {seconds:g} s each).\n\n"
                f"Per-IP rate accuracy (attempts at twice the quota for {duration:g} s, quota.window.num=2; "
                f"measured = served / (seconds + 1 padded window)):\n\n"
                f"{render_table(headers, accuracy_rows, markdown=True)}\n")
    return Report(text, markdown)


if __name__ == "__main__":
    print(run(Options()).text)
