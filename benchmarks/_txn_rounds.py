"""``python -m benchmarks._txn_rounds [ROUNDS] [TRANSACTIONS] [BASE_TREE]``: issue 17's committed
transactions/s alone, kafkapy against librdkafka's mock, in many short alternating rounds.

The dataplane benchmark measures transactions once per block, after four other workloads; on a
shared, loaded machine one sample says little. This runs only ``_Load.transactions`` (the same
client code and settings), rotating which broker goes first each round, and reports the median
rate of each, the ratio to the mock, and the CPU time of kafkapy's loop thread per transaction
(the steadier figure: it leaves out time the broker sat descheduled). With ``BASE_TREE`` (a
directory holding another revision's ``kafkapy/`` and ``protocol_specs/``, e.g. from
``git archive <commit> kafkapy protocol_specs | tar -x -C DIR``) a second kafkapy broker runs
that code, for a before/after in the same run (docs/performance.md, issue 17, round 6).
"""

from __future__ import annotations

import asyncio
import multiprocessing.connection
import statistics
import sys
import time
import uuid

from benchmarks._brokers import serve_mock
from benchmarks._processes import ChildProcess
from benchmarks.dataplane import _load

MOCK = "mock"


def _serve_kafkapy(pipe: multiprocessing.connection.Connection, tree: str | None) -> None:
    """An embedded broker (from ``tree`` when given); answers "cpu" with its loop thread's CPU seconds."""
    if tree is not None:
        sys.path.insert(0, tree)
    import kafkapy
    from kafkapy import Broker

    if tree is not None and not kafkapy.__file__.startswith(tree):
        raise RuntimeError(f"kafkapy came from {kafkapy.__file__}, not {tree}")
    with Broker({}) as broker:
        loop = broker._loop
        assert loop is not None
        pipe.send(broker.bootstrap_servers)
        while pipe.recv() != "stop":
            pipe.send(asyncio.run_coroutine_threadsafe(_thread_time(), loop).result())


async def _thread_time() -> float:
    return time.thread_time()


def main(rounds: int = 9, count: int = 300, base: str | None = None) -> None:
    load = ChildProcess(_load)
    servers = {"kafkapy": ChildProcess(_serve_kafkapy, None)}
    if base is not None:
        servers["base"] = ChildProcess(_serve_kafkapy, base)
    servers[MOCK] = ChildProcess(serve_mock)
    names = list(servers)
    rates: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    try:
        address = {name: server.receive(60) for name, server in servers.items()}
        for round_ in range(rounds):
            for name in names[round_ % len(names):] + names[:round_ % len(names)]:
                topic = f"bench-{uuid.uuid4().hex[:12]}-txn"
                before = servers[name].ask("cpu") if name != MOCK else 0.0
                rates[name].append(load.ask(("transactions", address[name], topic, count, name != MOCK)))
                if name != MOCK:
                    cpu[name].append((servers[name].ask("cpu") - before) / count)
    finally:
        for server in servers.values():
            server.stop()
        load.stop()
    mock = statistics.median(rates[MOCK])
    for name in names:
        rate = statistics.median(rates[name])
        loop_cpu = (f"; loop thread CPU {statistics.median(cpu[name]) * 1e3:.3f} ms/transaction"
                    if cpu[name] else "")
        print(f"{name:8} {rate:6.0f} tx/s, {rate / mock:.2f}x the mock{loop_cpu}; "
              f"rounds {' '.join(f'{r:.0f}' for r in rates[name])}")


if __name__ == "__main__":
    arguments = sys.argv[1:]
    main(int(arguments[0]) if arguments else 9, int(arguments[1]) if len(arguments) > 1 else 300,
         arguments[2] if len(arguments) > 2 else None)
