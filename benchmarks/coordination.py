"""Consumer coordinator (seed 001): one coordinator holding thousands of registered consumers.

Seed 001's own figure: a single coordinator broker should manage about 5,000 consumers, each
pinged every ``session_timeout / 3`` (30 s sessions: every 10 s, about 500 pings/s in all).

Three processes on loopback:

* the broker: ``kafkapy.Broker`` with ``kafkapy.modules=coordination`` and the in-memory store,
  one topic per group (as many partitions as the group has consumers);
* the load: every consumer simulated in one asyncio process, each with a real socket of its own.
  A consumer is an ``asyncio.Protocol`` that sends RegisterConsumer and answers the coordinator's
  Ping, StopFetcher and StartFetcher at once (auto-commit off, so no offsets in the answers);
* this harness, which steers both over pipes and reads the broker's CPU time from
  ``/proc/<pid>/stat``.

Measured: the time to register every consumer (all RegisterConsumer answers in) and until every
group has settled (each member started, the partitions covered); the full rebalance when one more
consumer joins a group (RegisterConsumer sent until the last member of the group answered its
StartFetcher... as seen by the consumers: the last StartFetcher received); and the broker's CPU use
at steady state, pings only.

The population is ``KAFKAPY_BENCH_CONSUMERS`` consumers (default 5,000; 500 with ``--quick``).
Both processes raise ``RLIMIT_NOFILE`` (5,000 sockets are over 10,000 descriptors on one machine).
"""

from __future__ import annotations

import asyncio
import datetime
import multiprocessing
import multiprocessing.connection
import os
import resource
import struct
import time
from collections.abc import Callable
from typing import Any

from benchmarks import Options, Report, machine_note, render_table, revision
from benchmarks._processes import ChildProcess

TITLE = "Consumer coordinator"

HOST = "127.0.0.1"
SESSION_MS = 30_000  # pings every 10 s per consumer
CONSUMERS = 5_000
QUICK_CONSUMERS = 500
CONNECT_CONCURRENCY = 200  # registrations in flight at once
FD_LIMIT = 65_536

REGISTER_CONSUMER, PING, STOP_FETCHER, START_FETCHER = 1001, 1002, 1003, 1004
_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")  # request header: api key, version, correlation id


def _raise_fd_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for wanted in ((FD_LIMIT, max(hard, FD_LIMIT)), (hard, hard)):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, wanted)
            return wanted[0]
        except (ValueError, OSError):
            continue
    return soft


def _groups(consumers: int) -> list[tuple[str, int]]:
    """(group, size): one group of 100, the rest split into few large groups."""
    sizes = [100] if consumers <= 200 else [100, (consumers - 100) // 5]
    sizes.append(consumers - sum(sizes))
    return [(f"g{size}", size) for size in sizes if size > 0]


# --- the broker process -------------------------------------------------------------------------


def _serve(pipe: multiprocessing.connection.Connection, groups: list[tuple[str, int]],
           profile: bool = False) -> None:
    import cProfile
    import io
    import logging
    import pstats

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    _raise_fd_limit()
    # CPU time, not wall time: the load process shares the two cores.
    profiler = cProfile.Profile(time.process_time) if profile else None

    async def main() -> None:
        from kafkapy import Broker

        loop = asyncio.get_running_loop()
        stopped = loop.create_future()

        def command() -> None:
            message = pipe.recv()
            if message == "profile-on" and profiler is not None:
                profiler.enable()
            elif message == "profile-off" and profiler is not None:
                profiler.disable()
                out = io.StringIO()
                stats = pstats.Stats(profiler, stream=out)
                stats.sort_stats("tottime").print_stats(20)
                stats.sort_stats("cumulative").print_stats(25)
                pipe.send(out.getvalue())
            elif message == "stop" and not stopped.done():
                stopped.set_result(None)

        loop.add_reader(pipe.fileno(), command)
        config = {"listeners": f"PLAINTEXT://{HOST}:0", "kafkapy.modules": "coordination"}
        async with Broker(config) as broker:
            assert broker.runtime is not None
            store, leader = broker.runtime.store, broker.broker_id
            for group, size in groups:
                await asyncio.to_thread(store.create_topic, f"t-{group}", {p: (leader,) for p in range(size)})
            pipe.send(int(broker.bootstrap_servers.rsplit(":", 1)[1]))
            await stopped
        loop.remove_reader(pipe.fileno())

    asyncio.run(main())
    pipe.close()


# --- the load process: every consumer, raw sockets ----------------------------------------------


class _Consumer(asyncio.Protocol):
    """One registered consumer: answers Ping, StopFetcher and StartFetcher at once."""

    def __init__(self, load: _Load, group: str, consumer_id: str) -> None:
        from kafkapy.coordination.assignment import Subscription
        from kafkapy.protocol import encode_request, encode_response

        self.load, self.group, self.consumer_id = load, group, consumer_id
        register = encode_request(REGISTER_CONSUMER, 0, 1, "bench-consumer", {
            "group_id": group, "consumer_id": consumer_id,
            "topic_count": Subscription("static", {f"t-{group}": 1}).to_json(), "auto_commit": False,
            "auto_offset_reset": "smallest", "session_timeout_ms": SESSION_MS})
        self.register = _SIZE.pack(len(register)) + register
        # Answers with correlation id 0, spliced in per request (the id is the frame's first field).
        self.answers = {}
        for api_key in (PING, STOP_FETCHER, START_FETCHER):
            body: dict[str, Any] = {"request_type_id": api_key, "error_code": 0, "consumer_id": consumer_id}
            if api_key != START_FETCHER:
                body["offset_info"] = None
            frame = encode_response(api_key, 0, 0, body)
            self.answers[api_key] = (_SIZE.pack(len(frame)), frame[4:])
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.registered: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.started = False  # holds a StartFetcher not yet revoked by a StopFetcher
        self.started_at = 0.0
        self.partitions = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.register)

    def connection_lost(self, exc: Exception | None) -> None:
        self.load.lost += 1
        self.started = False
        if not self.registered.done():
            self.registered.set_result(-1)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, end, out = 0, len(buf), []
        while end - pos >= 4:
            size = int.from_bytes(buf[pos:pos + 4], "big")
            if end - pos - 4 < size:
                break
            frame = bytes(buf[pos + 4:pos + 4 + size])
            pos += 4 + size
            answer = self.handle(frame)
            if answer:
                out.append(answer)
        if pos:
            del buf[:pos]
        if out and self.transport is not None:
            self.transport.write(b"".join(out))

    def handle(self, frame: bytes) -> bytes | None:
        from kafkapy.protocol import decode_request, decode_response

        if _SIZE.unpack_from(frame, 0)[0] == 1:  # our RegisterConsumer's answer
            error = decode_response(frame, REGISTER_CONSUMER, 0).body["error_code"]
            if not self.registered.done():
                self.registered.set_result(error)
            return None
        api_key, _, correlation = _HEAD.unpack_from(frame, 0)
        if api_key == PING:
            self.load.pings += 1
        elif api_key == STOP_FETCHER:
            self.started = False
            self.partitions = 0
        elif api_key == START_FETCHER:
            body = decode_request(frame).body
            self.partitions = sum(len(o["assigned_parts"]) for o in body["ownership_info"])
            self.started, self.started_at = True, time.perf_counter()
        else:
            return None
        size, tail = self.answers[api_key]
        return size + _SIZE.pack(correlation) + tail


class _Load:
    def __init__(self, port: int, partitions: dict[str, int]) -> None:
        self.port = port
        self.partitions = partitions  # group -> partitions of its topic
        self.members: dict[str, list[_Consumer]] = {group: [] for group in partitions}
        self.pings = 0
        self.lost = 0
        self.errors = 0
        self.joined = 0

    async def connect(self, group: str, consumer_id: str, gate: asyncio.Semaphore | None = None) -> None:
        loop = asyncio.get_running_loop()
        if gate is not None:
            await gate.acquire()
        try:
            _, consumer = await loop.create_connection(lambda: _Consumer(self, group, consumer_id), HOST,
                                                       self.port)
            self.members[group].append(consumer)
            if await consumer.registered != 0:
                self.errors += 1
        finally:
            if gate is not None:
                gate.release()

    def settled(self, group: str, since: float = 0.0) -> bool:
        members = self.members[group]
        return (all(m.started and m.started_at >= since for m in members)
                and sum(m.partitions for m in members) == self.partitions[group])

    async def until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.perf_counter() + timeout
        while not condition():
            if time.perf_counter() > deadline:
                raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
            await asyncio.sleep(0.005)

    async def register(self, groups: list[tuple[str, int]]) -> dict[str, Any]:
        gate = asyncio.Semaphore(CONNECT_CONCURRENCY)
        start = time.perf_counter()
        await asyncio.gather(*(self.connect(group, f"c{i}", gate)
                               for group, size in groups for i in range(size)))
        registered = time.perf_counter() - start
        await self.until(lambda: all(self.settled(g) for g, _ in groups), 600, "every group to settle")
        return {"registered": registered, "settled": time.perf_counter() - start, "errors": self.errors,
                "lost": self.lost}

    async def join(self, group: str) -> float:
        """One more consumer joins: seconds until every member answered its new StartFetcher."""
        self.joined += 1
        start = time.perf_counter()
        await self.connect(group, f"joiner{self.joined}")
        await self.until(lambda: self.settled(group, start), 120, f"group {group} to rebalance")
        return max(m.started_at for m in self.members[group]) - start


def _load(pipe: multiprocessing.connection.Connection) -> None:
    _raise_fd_limit()

    async def main() -> None:
        port, partitions = pipe.recv()
        load = _Load(port, partitions)
        loop = asyncio.get_running_loop()
        commands: asyncio.Queue[Any] = asyncio.Queue()
        loop.add_reader(pipe.fileno(), lambda: commands.put_nowait(pipe.recv()))
        while True:
            command = await commands.get()
            if command is None:
                break
            kind, *args = command
            try:
                if kind == "register":
                    result: Any = await load.register(*args)
                elif kind == "join":
                    result = await load.join(*args)
                else:  # "pings"
                    result = {"pings": load.pings, "lost": load.lost, "time": time.perf_counter()}
            except Exception as exc:
                result = exc
            pipe.send(result)
        loop.remove_reader(pipe.fileno())

    asyncio.run(main())
    pipe.close()


# --- the harness ---------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(options: Options) -> Report:
    _raise_fd_limit()
    default = QUICK_CONSUMERS if options.quick else CONSUMERS
    consumers = int(os.environ.get("KAFKAPY_BENCH_CONSUMERS", default))
    window = SESSION_MS / 3000 * (1 if options.quick else 2)  # whole ping periods
    groups = _groups(consumers)
    broker = ChildProcess(_serve, groups)
    load = ChildProcess(_load)
    try:
        port = broker.receive(60)
        assert broker.process.pid is not None
        pid = broker.process.pid
        load.pipe.send((port, dict(groups)))
        cpu = _cpu_seconds(pid)
        registration = load.ask(("register", groups))
        registration_cpu = _cpu_seconds(pid) - cpu
        every_pinger_running = time.monotonic() + SESSION_MS / 3000 + 1.0  # the last one's first ping
        joins = []
        for group, size in groups:
            cpu = _cpu_seconds(pid)
            seconds = load.ask(("join", group))
            joins.append((group, size, seconds, _cpu_seconds(pid) - cpu))
        # Steady state: every consumer's pinger running, the last rebalance's stragglers gone.
        time.sleep(max(1.0, every_pinger_running - time.monotonic()))
        before, cpu = load.ask(("pings",)), _cpu_seconds(pid)
        time.sleep(window)
        after, cpu = load.ask(("pings",)), _cpu_seconds(pid) - cpu
        elapsed = after["time"] - before["time"]
        ping_rate = (after["pings"] - before["pings"]) / elapsed
        steady = cpu / elapsed
    finally:
        load.stop(None)
        broker.stop()

    headers = ["measurement", "consumers", "seconds", "broker CPU s"]
    rows = [["register every consumer (answers in)", f"{consumers:,}",
             f"{registration['registered']:.2f}", ""],
            ["... until every group settled", f"{consumers:,}", f"{registration['settled']:.2f}",
             f"{registration_cpu:.2f}"]]
    rows += [[f"rebalance: 1 joins group of {size:,}", f"{size + 1:,}", f"{seconds:.3f}", f"{cpu_s:.2f}"]
             for group, size, seconds, cpu_s in joins]
    steady_line = (f"Steady state (pings only) over {elapsed:.0f} s: {ping_rate:,.0f} pings/s answered, "
                   f"broker CPU {steady:.1%} of one core "
                   f"({steady / max(ping_rate, 1e-9) * 1e6:.0f} us per ping). "
                   f"Registration errors: {registration['errors']}; connections the broker closed: "
                   f"{after['lost']}.")
    setting = f"{machine_note()}; kafkapy {revision()}"
    method = (f"Three processes on loopback: a kafkapy broker (coordination module, in-memory store), one "
              f"asyncio process simulating all {consumers:,} consumers over real sockets (raw protocol, "
              f"answering Ping/StopFetcher/StartFetcher at once, no auto-commit), and the harness. Groups: "
              f"{', '.join(f'{size:,}' for _, size in groups)} consumers, each on a topic of its own with as "
              f"many partitions as consumers, one stream each. Session timeout {SESSION_MS // 1000} s "
              f"(a ping every {SESSION_MS // 3000} s per consumer). Registration: {CONNECT_CONCURRENCY} "
              f"RegisterConsumer in flight at once; every registration queues a rebalance of its group "
              f"(merged while one is queued). Rebalance: one more consumer registers; the time until the "
              f"last member of the group received its StartFetcher. Broker CPU from /proc/<pid>/stat. "
              f"Target (seed 001): 5,000 consumers on one coordinator, rebalances under 5 s.")
    table = render_table(headers, rows)
    text = "\n\n".join([setting, method, table, steady_line])
    markdown = "\n\n".join([
        f"Measured {datetime.date.today().isoformat()} with "
        f"`python -m benchmarks coordination --write-docs`: {setting}.",
        method, render_table(headers, rows, markdown=True), steady_line])
    return Report(text, markdown)


def profile(consumers: int = 2_000) -> str:
    """cProfile of the broker while one consumer joins the largest group."""
    groups = _groups(consumers)
    broker = ChildProcess(_serve, groups, True)
    load = ChildProcess(_load)
    try:
        load.pipe.send((broker.receive(60), dict(groups)))
        load.ask(("register", groups))
        group, size = groups[-1]
        broker.pipe.send("profile-on")
        seconds = load.ask(("join", group))
        report: str = broker.ask("profile-off")
    finally:
        load.stop(None)
        broker.stop()
    return f"one consumer joined a group of {size:,}: rebalanced in {seconds:.3f} s\n\n{report}"


def _main() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.coordination")
    parser.add_argument("--profile", action="store_true",
                        help="profile the broker while one consumer joins the largest group")
    parser.add_argument("--consumers", type=int, default=2_000, help="population for --profile")
    args = parser.parse_args()
    if args.profile:
        print(profile(args.consumers))
    else:
        print(run(Options()).text)


if __name__ == "__main__":
    _main()
