"""Partition leadership at thousands of topics: the controller's cost per topic created.

A test suite runs ``Broker(brokers=3)`` and creates its topics one after the other (hundreds to
thousands of them). Each creation makes the controller (kafkapy.server.leadership) write the new
partitions' states, and every broker's view (kafkapy.server.services.ClusterView) take them in.
Kafka's controller works on deltas, so a creation costs the same at 5,000 topics as at 50; work
that walks every partition per change makes the N-th creation cost O(N) and the run O(N^2).

Measured, in this process (the brokers on their loop thread, as ``with Broker()`` runs them): topics
of ``PARTITIONS`` partitions created one at a time on the store (replicas round-robin over the
brokers, as CreateTopics with default.replication.factor assigns them), each waited for until every
broker's view shows the state the controller wrote for each of its partitions, with a leader. The
peer is the run's own start: seconds per 1,000 topics in each segment (0-500, 500-2,000,
2,000-5,000) stay flat when the work per creation does not grow with the topics already there,
and grow with N when it does.

``python -m benchmarks.leadership --profile [--brokers 3] [--topics 2000] [--zookeeper host:port/chroot]``
runs one such series under cProfile and prints where the time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime
import io
import pstats
import statistics
import time
from collections.abc import Sequence
from typing import Any

from benchmarks import Options, Report, machine_note, render_table, revision

TITLE = "Partition leadership at thousands of topics"

PARTITIONS = 3
CHECKPOINTS = (500, 2_000, 5_000)
QUICK_CHECKPOINTS = (50, 200)
BROKER_COUNTS = (1, 3)
RUNS = 3  # series per broker count; each checkpoint's median is reported (the machine is shared)
WAIT_S = 30.0  # per topic: far beyond any creation; a miss is a failure, not a slow run


def _replicas(index: int, brokers: Sequence[int]) -> dict[int, tuple[int, ...]]:
    factor = min(len(brokers), 3)
    return {p: tuple(brokers[(index + p + r) % len(brokers)] for r in range(factor))
            for p in range(PARTITIONS)}


async def _create_series(cluster: Any, checkpoints: Sequence[int]) -> list[float]:
    """Seconds from the first creation to each checkpoint (topics created and led everywhere)."""
    from kafkapy.store.onloop import LoopView

    views = [member.runtime.cluster for member in cluster.brokers]
    brokers = sorted(views[0].live_broker_ids())
    loop = asyncio.get_running_loop()
    # Woken by every broker's store (ZooKeeper: a session each), after that broker's view took the news.
    stores = list({id(member.store): member.store for member in cluster.brokers}.values())
    news: LoopView[object] = LoopView(loop)
    watches = [await asyncio.to_thread(store.watch_partition_states, news) for store in stores]
    times: list[float] = []
    try:
        started = time.perf_counter()
        for index in range(checkpoints[-1]):
            name = f"topic-{index:05d}"
            await asyncio.to_thread(stores[0].create_topic, name, _replicas(index, brokers))

            def led(_: object, name: str = name) -> bool:
                # A state written by the controller, not the first epoch a view answers before it.
                return all((name, p) in view.partition_states and
                           (found := view.leadership(name, p)) is not None and found[0] >= 0
                           for view in views for p in range(PARTITIONS))

            if not await news.wait_for(led, WAIT_S):
                raise TimeoutError(f"{name} has no leader in every broker's view after {WAIT_S:g} s")
            if index + 1 in checkpoints:
                times.append(time.perf_counter() - started)
    finally:
        for watch in watches:
            watch.cancel()
    return times


def series(brokers: int, checkpoints: Sequence[int], zookeeper: str | None = None) -> list[float]:
    from kafkapy import Broker

    config: dict[str, Any] = {"zookeeper.connect": zookeeper} if zookeeper else {}
    with Broker(config, brokers=brokers) as cluster:
        # No timeout: a quadratic run on ZooKeeper takes minutes (WAIT_S bounds each topic).
        loop = cluster._loop
        assert loop is not None
        return asyncio.run_coroutine_threadsafe(_create_series(cluster, checkpoints), loop).result()


async def _profiled(profiler: cProfile.Profile, brokers: int, topics: int,
                    zookeeper: str | None) -> list[float]:
    """The series with the brokers on this thread's loop and every ``asyncio.to_thread`` call made
    in place (cProfile sees one thread): store calls and the watch callbacks they run (MemoryStore
    delivers on the writer's thread) are counted too. ZooKeeper's own event thread is not."""
    from kafkapy import Broker

    async def in_place(function: Any, /, *args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    config: dict[str, Any] = {"zookeeper.connect": zookeeper} if zookeeper else {}
    to_thread, asyncio.to_thread = asyncio.to_thread, in_place
    try:
        async with Broker(config, brokers=brokers) as cluster:
            profiler.enable()
            try:
                return await _create_series(cluster, (topics,))
            finally:
                profiler.disable()
    finally:
        asyncio.to_thread = to_thread


def run(options: Options) -> Report:
    checkpoints = QUICK_CHECKPOINTS if options.quick else CHECKPOINTS
    headers = ["brokers", *[f"to {n:,} topics" for n in checkpoints],
               *[f"s/1,000 topics {a:,}-{b:,}" for a, b in zip((0, *checkpoints), checkpoints)]]
    rows = []
    runs = 1 if options.quick else RUNS
    for brokers in BROKER_COUNTS:
        measured = [series(brokers, checkpoints) for _ in range(runs)]
        times = [statistics.median(run[i] for run in measured) for i in range(len(checkpoints))]
        segments = [(t - s) / (b - a) * 1000 for a, b, s, t in
                    zip((0, *checkpoints), checkpoints, (0.0, *times), times)]
        rows.append([str(brokers), *[f"{t:.2f} s" for t in times], *[f"{s:.2f}" for s in segments]])
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    note = (f"MemoryStore, {PARTITIONS} partitions per topic, one creation at a time, each waited for "
            f"until every broker's view shows its leaders; median of {runs} series; {revision()}, {when}. "
            f"{machine_note()}")
    return Report(text=render_table(headers, rows) + "\n" + note,
                  markdown=render_table(headers, rows, markdown=True) + "\n\n" + note)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.leadership", description=__doc__)
    parser.add_argument("--profile", action="store_true", help="one series under cProfile")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--topics", type=int, default=2_000)
    parser.add_argument("--zookeeper", help="a ZooKeeper connect string (default: MemoryStore)")
    parser.add_argument("--lines", type=int, default=30, help="profile lines to print")
    args = parser.parse_args(argv)
    if not args.profile:
        times = series(args.brokers, (args.topics,), args.zookeeper)
    else:
        profiler = cProfile.Profile()
        times = asyncio.run(_profiled(profiler, args.brokers, args.topics, args.zookeeper))
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(args.lines)
        print(out.getvalue())
    print(f"{args.topics} topics x {PARTITIONS} partitions on {args.brokers} brokers"
          f"{' (ZooKeeper)' if args.zookeeper else ''}: {times[0]:.2f} s")


if __name__ == "__main__":
    main()
