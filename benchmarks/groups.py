"""Consumer groups: how long until N confluent-kafka consumers own their partitions.

Issue 16's measure: from the moment the last of N consumers subscribes to the moment every one of
them has been assigned its partitions, for N = 1, 10, 50, against kafkapy and against
librdkafka's mock cluster (``test.mock.num.brokers=1``), each in a process of its own, with the
consumers in a third. The topic is auto-created (4 partitions on both: the mock's default), so at
N = 10 and 50 most members own none; a member is done when its assignment, empty or not, arrives.
kafkapy runs with ``group.initial.rebalance.delay.ms=0`` (the embedded default); the mock's group
coordinator has no such setting to turn (see the note printed with the table). Ratios are
kafkapy/mock: issue 16's target is <= 1.0x at every N. Fewer, longer rounds than the other
benchmarks: one round forms N groups from scratch.
"""

from __future__ import annotations

import multiprocessing.connection
import statistics
import sys
import time
import uuid
from typing import Any

from benchmarks import Options, Report, machine_note, render_table, revision
from benchmarks._brokers import answer, serve_mock
from benchmarks._processes import ChildProcess

TITLE = "Consumer groups: confluent-kafka consumers until all own their partitions, kafkapy and the mock"

KAFKAPY, MOCK = "kafkapy", "mock"
SIZES = (1, 10, 50)
PARTITIONS = 4  # librdkafka's mock auto-creates topics with 4 partitions; kafkapy is told the same
_TIMEOUT_S = 120.0


def _serve_kafkapy(pipe: multiprocessing.connection.Connection) -> None:
    from kafkapy import Broker

    with Broker({"group.initial.rebalance.delay.ms": 0, "num.partitions": PARTITIONS}) as broker:
        pipe.send(broker.bootstrap_servers)
        answer(pipe)


def _group_forms(bootstrap: str, members: int) -> float:
    """Seconds from the last subscribe() to every member having been given its assignment."""
    from confluent_kafka import Consumer, Producer

    topic = f"bench-groups-{uuid.uuid4().hex[:12]}"
    # Made by auto-creation on both (the mock serves no CreateTopics without a controller).
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    producer.produce(topic, b"x")
    if producer.flush(_TIMEOUT_S):
        raise RuntimeError(f"could not produce to {topic}")
    group = f"bench-{uuid.uuid4().hex[:12]}"
    assigned: set[int] = set()
    consumers = []

    def on_assign(index: int) -> Any:
        def record(consumer: Any, partitions: list[Any]) -> None:
            assigned.add(index)  # its share, empty when members outnumber partitions
        return record

    for _ in range(members):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0,
                             "partition.assignment.strategy": "range", "session.timeout.ms": 10000,
                             "heartbeat.interval.ms": 1000})
        consumers.append(consumer)
    try:
        # warm: each client has its metadata before the clock starts, so only the group is timed
        for consumer in consumers:
            consumer.list_topics(topic, timeout=_TIMEOUT_S)
        for index, consumer in enumerate(consumers):
            consumer.subscribe([topic], on_assign=on_assign(index))
        start = time.perf_counter()
        deadline = start + _TIMEOUT_S
        while len(assigned) < members:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{members - len(assigned)} of {members} members never got partitions")
            for consumer in consumers:
                consumer.poll(0)
            time.sleep(0.001)
        return time.perf_counter() - start
    finally:
        for consumer in consumers:
            consumer.close()


def _load(pipe: multiprocessing.connection.Connection) -> None:
    while True:
        message = pipe.recv()
        if message == "stop":
            return
        bootstrap, members = message
        try:
            pipe.send(_group_forms(bootstrap, members))
        except Exception as exc:
            pipe.send(RuntimeError(f"{type(exc).__name__}: {exc}"))


def run(options: Options) -> Report:
    rounds = 1 if options.quick else 3
    sizes = (1, 10) if options.quick else SIZES
    load = ChildProcess(_load)
    servers: dict[str, ChildProcess] = {}
    brokers: dict[str, str] = {}
    samples: dict[tuple[str, int], list[float]] = {}
    errors: list[str] = []
    try:
        for name, target in ((KAFKAPY, _serve_kafkapy), (MOCK, serve_mock)):
            servers[name] = ChildProcess(target)
            brokers[name] = servers[name].receive(_TIMEOUT_S)
        for _ in range(rounds):
            for members in sizes:
                for name, address in brokers.items():  # alternating: both meet the same noise
                    try:
                        took = load.ask((address, members), timeout=_TIMEOUT_S * 2)
                        samples.setdefault((name, members), []).append(took)
                        print(f"  {name} N={members}: {took * 1e3:.0f} ms", file=sys.stderr, flush=True)
                    except Exception as exc:
                        errors.append(f"{name} N={members}: {exc}")
    finally:
        for server in servers.values():
            server.stop()
        load.stop()

    def cell(name: str, members: int) -> float | None:
        found = samples.get((name, members))
        return statistics.median(found) * 1e3 if found else None

    rows = []
    for members in sizes:
        ours, theirs = cell(KAFKAPY, members), cell(MOCK, members)
        ratio = f"{ours / theirs:.2f}x" if ours is not None and theirs else "-"
        rows.append([f"N = {members}", "failed" if ours is None else f"{ours:.0f}",
                     "failed" if theirs is None else f"{theirs:.0f}", ratio, "<= 1.0x"])
    headers = ["ms until all own partitions", KAFKAPY, MOCK, "kafkapy/mock", "target"]
    notes = [f"median of {rounds} round(s); range assignor, a {PARTITIONS}-partition topic, consumers "
             "polled from one thread; done when every member's on_assign has run; kafkapy with "
             "group.initial.rebalance.delay.ms=0. librdkafka's mock coordinator paces its rebalances "
             "with timers of its own, which no client setting reaches."]
    notes += [f"error: {e}" for e in errors]
    text = render_table(headers, rows) + "\n" + "\n".join(notes)
    markdown = (f"{machine_note()}; {revision()}.\n\n{render_table(headers, rows, markdown=True)}\n\n"
                + "\n".join(f"- {n}" for n in notes) + "\n")
    return Report(text, markdown)


if __name__ == "__main__":
    print(run(Options()).text)
