"""``python -m benchmarks._txn_profile [TRANSACTIONS] [--no-profile] [--top N]``: the broker's CPU per
committed transaction over sockets, split by the API of each read, with cProfile on the loop thread.

issue 17's workload (``_Load.transactions``: confluent-kafka, linger.ms=0, 10 records over 2
partitions, commit) runs in a child process against an embedded broker in this one. Each read
the broker's connections take (``_received``, past the transport's copy) is timed with the loop
thread's CPU clock and filed under the API key of its first frame; what the loop thread spends
outside reads (the step after the EndTxn answer: the markers and CompleteCommit, the syscalls,
the loop itself) is the rest.
With the profiler on, the reads cost more than without it, but the split and the call counts
are what steer: run ``--no-profile`` for the plain figures. Issue 17's round 8 reads it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import pstats
import struct
import time
from collections.abc import Callable
from typing import Any

from benchmarks._processes import ChildProcess
from benchmarks.dataplane import _load
from kafkapy import Broker
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.framing import ReceivedFrame
from kafkapy.server.connection import KafkaConnection

_KEY_VERSION = struct.Struct(">hh")


def _timed_reads(spent: dict[str, list[float]]) -> Callable[[], None]:
    """Wrap every connection's ``_received`` (what both read paths, ``data_received`` and the
    buffered ``buffer_updated``, hand a read's frames to) with the thread's CPU clock; returns the
    undo. The read's copy and the syscall stay outside, as they are in the transport."""
    original = KafkaConnection._received
    clock = time.thread_time

    def received(self: KafkaConnection, frames: list[ReceivedFrame]) -> None:
        started = clock()
        original(self, frames)
        used = clock() - started
        name = "?"
        if frames and len(frames[0]) >= 4:
            key, version = _KEY_VERSION.unpack_from(frames[0], 0)
            name = f"{ApiKey(key).name if key in ApiKey._value2member_map_ else key} v{version}"
        spent[name].append(used)

    KafkaConnection._received = received  # type: ignore[method-assign]

    def undo() -> None:
        KafkaConnection._received = original  # type: ignore[method-assign]
    return undo


async def _thread_time() -> float:
    return time.thread_time()


def main(count: int, profile: bool, top: int, sort: str = "tottime") -> None:
    load = ChildProcess(_load)
    spent: dict[str, list[float]] = collections.defaultdict(list)
    profiler = cProfile.Profile(time.thread_time) if profile else None
    try:
        with Broker({}) as broker:
            loop = broker._loop
            assert loop is not None
            address = broker.bootstrap_servers
            load.ask(("transactions", address, "bench-warm-txn", 50, True))  # warm: coordinator, topic
            undo = _timed_reads(spent)
            if profiler is not None:
                loop.call_soon_threadsafe(profiler.enable)
            before = asyncio.run_coroutine_threadsafe(_thread_time(), loop).result()
            rate = load.ask(("transactions", address, "bench-profile-txn", count, True))
            after = asyncio.run_coroutine_threadsafe(_thread_time(), loop).result()
            if profiler is not None:
                loop.call_soon_threadsafe(profiler.disable)
                asyncio.run_coroutine_threadsafe(_thread_time(), loop).result()
            undo()
    finally:
        load.stop()
    total = (after - before) / count * 1e6
    print(f"{count} transactions, {rate:.0f} tx/s; loop thread CPU {total:.1f} us/transaction"
          f"{' (profiled)' if profile else ''}")
    reads = 0.0
    for name, times in sorted(spent.items(), key=lambda item: -sum(item[1])):
        reads += sum(times)
        print(f"  {name:28} {len(times) / count:5.2f} reads/txn, {sum(times) / count * 1e6:7.1f} us/txn, "
              f"median {sorted(times)[len(times) // 2] * 1e6:6.1f} us/read")
    print(f"  {'outside reads':28} {'':14} {total - reads / count * 1e6:7.1f} us/txn "
          "(the loop, the syscalls, the step after the EndTxn answer)")
    if profiler is not None:
        stats = pstats.Stats(profiler)
        stats.sort_stats(sort).print_stats(top)


def _parse() -> Any:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._txn_profile")
    parser.add_argument("transactions", type=int, nargs="?", default=300)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--sort", default="tottime", help="a pstats sort key: tottime, cumulative, ncalls")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = _parse()
    main(arguments.transactions, not arguments.no_profile, arguments.top, arguments.sort)

