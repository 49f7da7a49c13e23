"""``python -m benchmarks._txn_timeline [TRANSACTIONS] [--pcap PATH] [--pin]``: where one
committed transaction's wall time goes, seen from the wire, for kafkapy and for librdkafka's mock.

issue 17's workload (``_Load.transactions``: confluent-kafka, linger.ms=0, 10 records over 2
partitions, commit) runs against each broker while ``dumpcap`` records the loopback traffic of
their ports (needs the right to capture on ``lo``). tshark's Kafka dissector gives each request
and response its time; the transactions are cut at each AddPartitionsToTxn that follows an EndTxn
answer. Printed per broker: the requests of a typical transaction in order with the client's
gap before each (time from the previous answer to this request: the client's share), the
broker's time to answer each (request to response: the broker's share, with the loopback), and
how often each kind of request was retried within one transaction (CONCURRENT_TRANSACTIONS and
the like); then the medians of both shares per transaction. Issue 17's round 7 reads it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import multiprocessing.connection
import os
import signal
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from benchmarks._brokers import serve_mock
from benchmarks._processes import ChildProcess
from benchmarks.dataplane import _load, _serve_kafkapy
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

MOCK, KAFKAPY = "mock", "kafkapy"
_FIELDS = ("frame.time_epoch", "tcp.srcport", "tcp.dstport", "kafka.request_key", "kafka.response_key",
           "kafka.correlation_id", "kafka.error")


@dataclass(frozen=True)
class Exchange:
    """One request and its answer on the client's connection, times in seconds."""

    api: ApiKey
    sent: float
    answered: float
    errors: tuple[int, ...]


@contextlib.contextmanager
def _capture(ports: list[int], path: str) -> Iterator[None]:
    ports_filter = " or ".join(f"tcp port {port}" for port in ports)
    process = subprocess.Popen(["dumpcap", "-q", "-i", "lo", "-f", ports_filter, "-w", path],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # dumpcap opens the interface before the first packet matters
    try:
        yield
    finally:
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        process.wait(10)


def _exchanges(path: str, port: int) -> list[Exchange]:
    """Every request to ``port`` matched with its response by (connection, correlation id)."""
    out = subprocess.run(["tshark", "-r", path, "-d", f"tcp.port=={port},kafka", "-Y",
                          f"tcp.port=={port} && kafka", "-T", "fields", "-E", "separator=\t",
                          *[arg for field in _FIELDS for arg in ("-e", field)]],
                         capture_output=True, text=True, check=True).stdout
    pending: dict[tuple[int, int], tuple[ApiKey, float]] = {}
    exchanges: list[Exchange] = []
    for line in out.splitlines():
        when, src, dst, requests, _, correlations, errors = (line.split("\t") + [""] * 7)[:7]
        client = int(src) if int(dst) == port else int(dst)
        if int(dst) == port and requests:
            for key, correlation in zip(requests.split(","), correlations.split(","), strict=False):
                pending[(client, int(correlation))] = (ApiKey(int(key)), float(when))
        elif int(src) == port and correlations:  # the dissector names no key for some responses (Produce v10)
            error_codes = tuple(int(e) for e in errors.split(",") if e)
            for correlation in correlations.split(","):
                sent = pending.pop((client, int(correlation)), None)
                if sent is not None:
                    exchanges.append(Exchange(sent[0], sent[1], float(when), error_codes))
    exchanges.sort(key=lambda exchange: exchange.sent)
    return exchanges


def _transactions(exchanges: list[Exchange]) -> list[list[Exchange]]:
    """Cut at each AddPartitionsToTxn after an EndTxn answer: a transaction's requests, in order."""
    kinds = (ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.PRODUCE, ApiKey.END_TXN)
    relevant = [e for e in exchanges if e.api in kinds]
    cuts: list[list[Exchange]] = []
    current: list[Exchange] = []
    ended = False
    for exchange in relevant:
        if exchange.api is ApiKey.ADD_PARTITIONS_TO_TXN and ended:
            cuts.append(current)
            current, ended = [], False
        current.append(exchange)
        ended = ended or (exchange.api is ApiKey.END_TXN and not any(exchange.errors))
    return cuts[2:]  # the init and warm-up transactions left out


def _report(name: str, transactions: list[list[Exchange]]) -> None:
    shapes = collections.Counter(tuple(e.api.name for e in t) for t in transactions)
    print(f"\n== {name}: {len(transactions)} transactions")
    for shape, count in shapes.most_common(4):
        print(f"  {count:4} x {' > '.join(shape)}")
    retried: collections.Counter[str] = collections.Counter()
    for transaction in transactions:
        for exchange in transaction:
            for error in exchange.errors:
                if error:
                    retried[f"{exchange.api.name} {ErrorCode(error).name}"] += 1
    for what, count in retried.most_common():
        print(f"  answered {what}: {count} ({count / len(transactions):.2f} per transaction)")
    common = [t for t in transactions if tuple(e.api.name for e in t) == shapes.most_common(1)[0][0]]
    print("  the commonest shape, medians in ms: client gap before the request | broker to answer")
    for index in range(len(common[0])):
        if index == 0:  # the gap before a transaction's first request: since the last one's last answer
            gaps = [b[0].sent - a[-1].answered for a, b in itertools.pairwise(common)]
        else:
            gaps = [t[index].sent - t[index - 1].answered for t in common]
        waits = [t[index].answered - t[index].sent for t in common]
        print(f"    {common[0][index].api.name:24} {statistics.median(gaps) * 1e3:7.3f} | "
              f"{statistics.median(waits) * 1e3:7.3f}")
    whole = [t[-1].answered - t[0].sent for t in transactions]
    broker = [_awaited(t) for t in transactions]
    between = [b[0].sent - a[-1].answered for a, b in itertools.pairwise(transactions)]
    print(f"  per transaction (median ms): first request to last answer {_ms(whole)}, of which awaiting "
          f"answers {_ms(broker)}; from the EndTxn answer to the next AddPartitionsToTxn {_ms(between)} "
          f"(deciles {' '.join(f'{q * 1e3:.2f}' for q in statistics.quantiles(between, n=10))})")
    cycle = [b[0].sent - a[0].sent for a, b in itertools.pairwise(transactions)]
    print(f"  cycle (median ms): {_ms(cycle)} -> {1 / statistics.median(cycle):.0f} tx/s")


def _awaited(transaction: list[Exchange]) -> float:
    """How long at least one request was unanswered: the two Produces overlap."""
    total, reach = 0.0, float("-inf")
    for exchange in sorted(transaction, key=lambda e: e.sent):
        start = max(exchange.sent, reach)
        if exchange.answered > start:
            total += exchange.answered - start
        reach = max(reach, exchange.answered)
    return total


def _ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1e3:.3f}"


def _pinned(pipe: multiprocessing.connection.Connection, serve: Callable[..., None], cpus: set[int]) -> None:
    """``serve`` on ``cpus`` only (its threads, started after this, inherit the mask)."""
    os.sched_setaffinity(0, cpus)
    serve(pipe)


def main(count: int = 300, keep: str | None = None, pin: bool = False) -> None:
    """``keep``: a path to keep the capture at. ``pin``: each broker on CPU 1 and the client on
    CPU 0, so that the kernel never runs the client's threads on the core the broker is busy on
    (the client's gaps then show how much of their length that sharing was)."""
    load = ChildProcess(_load)
    if pin:
        assert load.process.pid is not None  # started
        os.sched_setaffinity(load.process.pid, {0})  # before the client makes its threads
    servers = {name: ChildProcess(_pinned, serve, {1}) if pin else ChildProcess(serve)
               for name, serve in ((KAFKAPY, _serve_kafkapy), (MOCK, serve_mock))}
    with tempfile.TemporaryDirectory() as directory:
        path = keep or os.path.join(directory, "txn.pcap")
        try:
            address = {name: server.receive(60) for name, server in servers.items()}
            ports = [int(a.rsplit(":", 1)[1]) for a in address.values()]
            with _capture(ports, path):
                for name in (KAFKAPY, MOCK):
                    topic = f"bench-{uuid.uuid4().hex[:12]}-txn"
                    rate = load.ask(("transactions", address[name], topic, count, name != MOCK))
                    print(f"{name}: {rate:.0f} tx/s (captured)")
        finally:
            for server in servers.values():
                server.stop()
            load.stop()
        for name in (KAFKAPY, MOCK):
            port = int(address[name].rsplit(":", 1)[1])
            _report(name, _transactions(_exchanges(path, port)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("transactions", nargs="?", type=int, default=300)
    parser.add_argument("--pcap", help="keep the capture at this path")
    parser.add_argument("--pin", action="store_true", help="brokers on CPU 1, the client on CPU 0")
    arguments = parser.parse_args()
    main(arguments.transactions, arguments.pcap, arguments.pin)
