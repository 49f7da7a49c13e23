"""The data plane against librdkafka's mock cluster: one confluent-kafka client, two brokers.

Issue 15's benchmark. Three processes besides the harness, so that on two cores no
party steals time inside another's interpreter:

* kafkapy: an embedded ``Broker`` with the defaults (memory logs);
* mock: librdkafka's mock cluster (``test.mock.num.brokers=1``), owned by a client in its
  process; its bootstrap address is the broker listed in that client's metadata;
* load: the confluent-kafka Producer and Consumer, the same code and settings for both.

Workloads, run against both brokers in one run, alternating which goes first (A B, B A, ...) so
a burst of noise from the other core hits both; the median over the blocks is reported:

* produce messages/s: 100-byte values, acks=all, linger.ms=5, one partition, until flushed;
* consume messages/s: the records just produced, read back by an assigned Consumer;
* one-at-a-time produce latency: produce one 100-byte record and flush, repeated; the p99
  (linger.ms=0 here, or both brokers would be measured at linger's 5 ms plus noise);
* MB/s with 10 KB values (produce, acks=all, linger.ms=5);
* RSS per GB held (kafkapy only: the mock keeps about 5 MB a partition and drops the oldest
  records past that, measured here, so it holds nothing to weigh): the broker process's VmRSS
  growth while 1/4 GiB (quick: 8 MiB) of 10 KB records is produced into a fresh topic, divided
  by the bytes produced;
* committed transactions/s: a transactional Producer (its own transactional.id) runs
  begin, 10 records of 100 B over 2 partitions (5 each), commit, one after another; kafkapy's
  topic is made with 2 partitions through CreateTopics first (the mock answers no CreateTopics
  and makes the topic on first use, with 4 partitions, 2 of them written), and one transaction
  warms up (coordinator lookup, InitProducerId, connections) outside the clock.

The interceptor chain's cost, kafkapy alone, in the same blocks: the one-at-a-time produce (its
p99 and the broker's CPU per produce) with no fault rule installed, with one rule for another API
(DeleteTopics), and with one rule for Produce to another topic (it matches on the API, so the
injector runs and looks for the topic in the decoded request, then passes), the three in turn, the
order alternating by block. A rule that fires is not measured: that is the fault's own cost.

A broker whose ApiVersions lacks Produce or Fetch gets "not served" in its cells instead of a
number (kafkapy before its dataplane lands); a workload that fails shows "failed" and the error
is printed below the table. Ratios are kafkapy/mock: a rate wants >= 1.0 (issue 15's target
for messages/s), the latency <= 1.5.
"""

from __future__ import annotations

import multiprocessing.connection
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks import Options, Report, machine_note, render_table, revision
from benchmarks._brokers import answer, serve_mock
from benchmarks._processes import ChildProcess

TITLE = "Data plane: confluent-kafka against kafkapy and librdkafka's mock cluster"

KAFKAPY, MOCK = "kafkapy", "mock"
SMALL, LARGE = 100, 10 * 1024  # value bytes: issue 15's 100-byte and 10 KB records
NOT_SERVED = "not served"
FAILED = "failed"
_TIMEOUT_S = 60.0
_TXN_RECORDS = 10  # per transaction, over 2 partitions (issue 17's benchmark)


def _fault_command(broker: Any) -> Callable[[str | None], bool]:
    """The ("fault", variant) command of the kafkapy broker process: the chain-cost rule of
    ``variant`` installed in place of the last (None: none)."""
    installed: list[Any] = []

    def install(variant: str | None) -> bool:
        while installed:
            installed.pop().remove()
        if variant is not None:
            installed.append(broker.faults.add(_chain_rule(variant)))
        return True
    return install


NO_RULE, OTHER_API, OTHER_TOPIC = "no rule", "one rule, another API", "one rule, Produce to another topic"
CHAIN_VARIANTS = (NO_RULE, OTHER_API, OTHER_TOPIC)


def _chain_rule(variant: str) -> Any:
    """The fault rule of a chain-cost variant: one that never fires on the benchmark's produces."""
    from kafkapy.errors import ErrorCode
    from kafkapy.faults import ErrorAnswer, FaultRule
    from kafkapy.protocol.api_keys import ApiKey

    if variant == OTHER_API:
        return FaultRule(ErrorAnswer(ErrorCode.NOT_CONTROLLER), api=ApiKey.DELETE_TOPICS)
    return FaultRule(ErrorAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER), api=ApiKey.PRODUCE,
                     topic="bench-not-this-one")


# --- the broker processes ------------------------------------------------------------------------

def _serve_kafkapy(pipe: multiprocessing.connection.Connection) -> None:
    from kafkapy import Broker

    with Broker({}) as broker:
        pipe.send(broker.bootstrap_servers)
        answer(pipe, {"fault": _fault_command(broker)})


def serves_records(bootstrap: str) -> bool:
    """Whether the broker's ApiVersions lists both Produce and Fetch."""
    from kafkapy.client import SimpleClient
    from kafkapy.protocol.api_keys import ApiKey

    with SimpleClient(bootstrap, _TIMEOUT_S, "bench") as client:
        body = client.request(ApiKey.API_VERSIONS, 0, {})
    served = {k["api_key"] for k in body["api_keys"]}
    return ApiKey.PRODUCE in served and ApiKey.FETCH in served


# --- the load process ------------------------------------------------------------------------------

class _Load:
    """The confluent-kafka workloads; each returns plain numbers for the pipe."""

    def __init__(self) -> None:
        import confluent_kafka

        self.ck = confluent_kafka

    def _producer(self, bootstrap: str, linger_ms: int) -> Any:
        return self.ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": linger_ms,
                                 "log_level": 0})

    def _produce(self, bootstrap: str, topic: str, count: int, size: int) -> float:
        """Seconds to produce ``count`` records of ``size`` bytes and have every ack."""
        producer = self._producer(bootstrap, 5)
        value = b"v" * size
        errors: list[Any] = []

        def report(error: Any, _: Any) -> None:
            if error is not None:
                errors.append(error)

        producer.produce(topic, b"warm-up", partition=0)  # metadata and connection first
        producer.flush(_TIMEOUT_S)
        start = time.perf_counter()
        for _ in range(count):
            while True:
                try:
                    producer.produce(topic, value, partition=0, on_delivery=report)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.01)
            producer.poll(0)
        left = producer.flush(_TIMEOUT_S)
        elapsed = time.perf_counter() - start
        if left or errors:
            raise RuntimeError(f"{left} records unacknowledged, {len(errors)} failed: {errors[:1]}")
        return elapsed

    def produce(self, bootstrap: str, topic: str, count: int, size: int) -> float:
        return count / self._produce(bootstrap, topic, count, size)

    def consume(self, bootstrap: str, topic: str, count: int) -> float:
        """Records per second reading ``count`` records after the warm-up record at offset 0."""
        consumer = self.ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                                     "enable.auto.commit": False, "log_level": 0})
        try:
            consumer.assign([self.ck.TopicPartition(topic, 0, 0)])
            first = consumer.poll(_TIMEOUT_S)  # the warm-up record: connection and first fetch
            if first is None or first.error():
                raise RuntimeError(f"consume: first poll gave {first and first.error()}")
            read = 0
            start = time.perf_counter()
            deadline = start + _TIMEOUT_S
            while read < count and time.perf_counter() < deadline:
                # No more than are still due, or consume() sits out its timeout waiting for the rest.
                for message in consumer.consume(num_messages=min(10_000, count - read), timeout=1.0):
                    if message.error():
                        raise RuntimeError(f"consume: {message.error()}")
                    read += 1
            elapsed = time.perf_counter() - start
        finally:
            consumer.close()
        if read < count:
            raise RuntimeError(f"consume: {read} of {count} records within {_TIMEOUT_S:g} s")
        return read / elapsed

    def latency(self, bootstrap: str, topic: str, count: int) -> list[float]:
        """Seconds from produce to ack, one record at a time."""
        producer = self._producer(bootstrap, 0)
        producer.produce(topic, b"warm-up", partition=0)
        producer.flush(_TIMEOUT_S)
        value = b"v" * SMALL
        found = []
        for _ in range(count):
            start = time.perf_counter()
            producer.produce(topic, value, partition=0)
            if producer.flush(_TIMEOUT_S):
                raise RuntimeError("latency: a record was not acknowledged")
            found.append(time.perf_counter() - start)
        return found

    def throughput(self, bootstrap: str, topic: str, count: int) -> float:
        """Megabytes (10^6) of values per second."""
        return count * LARGE / self._produce(bootstrap, topic, count, LARGE) / 1e6

    def transactions(self, bootstrap: str, topic: str, count: int, create: bool) -> float:
        """Committed transactions per second: 10 records over 2 partitions each. ``create``: make
        the topic with 2 partitions by CreateTopics (the mock answers none; it makes a produced-to
        topic itself, with 4 partitions)."""
        if create:
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
            for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
                future.result(_TIMEOUT_S)
        producer = self.ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}",
                                     "linger.ms": 0, "log_level": 0})
        producer.init_transactions(_TIMEOUT_S)
        value = b"v" * SMALL

        def transaction() -> None:
            producer.begin_transaction()
            for i in range(_TXN_RECORDS):
                producer.produce(topic, value, partition=i % 2)
            producer.commit_transaction(_TIMEOUT_S)  # flushes first, as commit must
        transaction()  # warm-up: partitions added, connections open
        start = time.perf_counter()
        for _ in range(count):
            transaction()
        return count / (time.perf_counter() - start)

    def hold(self, bootstrap: str, topic: str, total: int) -> int:
        """Produce ``total`` bytes of 10 KB values; returns the value bytes produced."""
        count = total // LARGE
        self._produce(bootstrap, topic, count, LARGE)
        return count * LARGE


def _load(pipe: multiprocessing.connection.Connection) -> None:
    load = _Load()
    while True:
        message = pipe.recv()
        if message == "stop":
            return
        name, *args = message
        try:
            result: Any = getattr(load, name)(*args)
        except Exception as exc:
            result = RuntimeError(f"{name}: {exc}")
        pipe.send(result)


# --- the harness -----------------------------------------------------------------------------------

Cell = float | str  # a number, NOT_SERVED or FAILED


def _sizes(options: Options) -> dict[str, int]:
    if options.quick:
        return {"blocks": 1, "messages": 2_000, "latency": 20, "large": 200, "hold": 8 << 20,
                "transactions": 30}
    # 20,000 records of 100 B are about 3 MB a block: within what the mock keeps of a partition (about
    # 5 MB; past that it drops the oldest, and a consumer starting at 0 is out of range).
    return {"blocks": max(2, options.repeats), "messages": 20_000, "latency": 300, "large": 3_000,
            "hold": 256 << 20, "transactions": 300}


def _run_blocks(load: ChildProcess, servers: dict[str, ChildProcess], brokers: dict[str, str],
                served: dict[str, bool], sizes: dict[str, int],
                errors: list[str]) -> dict[str, dict[str, list[Any]]]:
    """Per workload and broker, one sample per block, brokers alternating first. "latency_cpu" is the
    broker process's CPU seconds per one-at-a-time produce (time it spent on the CPU, so the
    steadier figure when other work shares the cores)."""
    samples: dict[str, dict[str, list[Any]]] = {
        w: {b: [] for b in brokers} for w in ("produce", "consume", "latency", "latency_cpu", "throughput",
                                  "transactions")}
    names = list(brokers)
    for block in range(sizes["blocks"]):
        for name in names if block % 2 == 0 else names[::-1]:
            if not served[name]:
                continue
            address = brokers[name]
            topic = f"bench-{uuid.uuid4().hex[:12]}"
            steps: list[tuple[str, tuple[Any, ...]]] = [
                ("produce", ("produce", address, topic, sizes["messages"], SMALL)),
                ("consume", ("consume", address, topic, sizes["messages"])),
                ("latency", ("latency", address, topic + "-latency", sizes["latency"])),
                ("throughput", ("throughput", address, topic + "-large", sizes["large"])),
                ("transactions", ("transactions", address, topic + "-txn", sizes["transactions"],
                                  name != MOCK)),
            ]
            for workload, message in steps:
                try:
                    if workload == "latency":  # the topic made and warm first, outside the CPU count
                        load.ask(("latency", address, topic + "-latency", 0))
                    cpu = servers[name].ask("cpu")
                    samples[workload][name].append(load.ask(message))
                    if workload == "latency":
                        # besides the produces: one producer's connection, metadata and warm-up record
                        cpu_each = (servers[name].ask("cpu") - cpu) / sizes["latency"]
                        samples["latency_cpu"][name].append(cpu_each)
                except Exception as exc:
                    errors.append(f"{name} {workload}: {exc}")
            if name == KAFKAPY:
                _chain_cost(load, servers[name], address, topic, sizes["latency"], block, samples, errors)
    return samples


def _chain_cost(load: ChildProcess, server: ChildProcess, address: str, topic: str, count: int, block: int,
                samples: dict[str, dict[str, list[Any]]], errors: list[str]) -> None:
    """The one-at-a-time produce with each chain-cost rule installed in turn (module docstring)."""
    variants = CHAIN_VARIANTS if block % 2 == 0 else CHAIN_VARIANTS[::-1]
    try:
        load.ask(("latency", address, topic + "-chain", 0))  # the topic made and the client warm
        for variant in variants:
            server.ask(("fault", None if variant == NO_RULE else variant))
            cpu = server.ask("cpu")
            latencies = load.ask(("latency", address, topic + "-chain", count))
            cpu_each = (server.ask("cpu") - cpu) / count
            samples.setdefault(f"chain_latency {variant}", {KAFKAPY: []})[KAFKAPY].append(_p99(latencies))
            samples.setdefault(f"chain_cpu {variant}", {KAFKAPY: []})[KAFKAPY].append(cpu_each)
        server.ask(("fault", None))
    except Exception as exc:
        errors.append(f"kafkapy chain cost: {exc}")


def _p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _cell(values: list[Any], served: bool, summarise: Callable[[list[Any]], float]) -> Cell:
    if not served:
        return NOT_SERVED
    return summarise(values) if values else FAILED


def _fmt(cell: Cell, digits: int) -> str:
    return cell if isinstance(cell, str) else f"{cell:,.{digits}f}"


def _ratio(ours: Cell, theirs: Cell) -> str:
    if isinstance(ours, str) or isinstance(theirs, str) or not theirs:
        return "-"
    return f"{ours / theirs:.2f}x"


def run(options: Options) -> Report:
    sizes = _sizes(options)
    load = ChildProcess(_load)
    servers: dict[str, ChildProcess] = {}
    brokers: dict[str, str] = {}
    errors: list[str] = []
    try:
        for name, target in ((KAFKAPY, _serve_kafkapy), (MOCK, serve_mock)):
            servers[name] = ChildProcess(target)
            brokers[name] = servers[name].receive(_TIMEOUT_S)
        served = {name: serves_records(address) for name, address in brokers.items()}
        samples = _run_blocks(load, servers, brokers, served, sizes, errors)
        held: dict[str, Cell] = {}
        held[MOCK] = "n/a (keeps ~5 MB)"
        for name, address in brokers.items():
            if name == MOCK:
                continue
            if not served[name]:
                held[name] = NOT_SERVED
                continue
            try:
                before = servers[name].ask("rss")
                produced = load.ask(("hold", address, f"bench-hold-{uuid.uuid4().hex[:12]}", sizes["hold"]))
                held[name] = (servers[name].ask("rss") - before) / produced
            except Exception as exc:
                errors.append(f"{name} hold: {exc}")
                held[name] = FAILED
    finally:
        for server in servers.values():
            server.stop()
        load.stop()

    def cells(workload: str, summarise: Callable[[list[Any]], float]) -> dict[str, Cell]:
        return {name: _cell(samples[workload][name], served[name], summarise) for name in brokers}

    median = statistics.median
    rows_spec: list[tuple[str, dict[str, Cell], int, str]] = [
        ("produce msg/s (100 B, acks=all, linger.ms=5)", cells("produce", median), 0, ">= 1.0x"),
        ("consume msg/s (100 B)", cells("consume", median), 0, ">= 1.0x"),
        ("produce p99 latency ms, one at a time",
         {k: v * 1e3 if isinstance(v, float) else v
          for k, v in cells("latency", lambda s: median(map(_p99, s))).items()}, 2, "<= 1.5x"),
        ("broker process CPU us per one-at-a-time produce",
         {k: v * 1e6 if isinstance(v, float) else v for k, v in cells("latency_cpu", median).items()}, 1, ""),
        ("produce MB/s (10 KB values)", cells("throughput", median), 1, ""),
        ("RSS growth per GB held (GB)", held, 2, "<= 1.15"),
    ]
    headers = ["workload", KAFKAPY, MOCK, "kafkapy/mock", "target"]
    rows = [[label, _fmt(values[KAFKAPY], digits), _fmt(values[MOCK], digits),
             _ratio(values[KAFKAPY], values[MOCK]), target] for label, values, digits, target in rows_spec]
    txn = cells("transactions", median)
    rows.append([f"committed transactions/s ({_TXN_RECORDS} records, 2 partitions)", _fmt(txn[KAFKAPY], 0),
                 _fmt(txn[MOCK], 0), _ratio(txn[KAFKAPY], txn[MOCK]), ">= 1.0x"])
    chain_headers, chain_rows = _chain_table(samples)
    notes = [f"{sizes['blocks']} block(s) per broker, alternating; per block {sizes['messages']:,} records "
             f"produced then consumed, {sizes['latency']} one-at-a-time produces, {sizes['large']:,} 10 KB "
             f"records, {sizes['transactions']} transactions; RSS growth over {sizes['hold'] >> 20} MiB "
             "of 10 KB records in a fresh topic."]
    if not served[KAFKAPY]:
        notes.append("kafkapy: its ApiVersions lacks Produce or Fetch, so nothing was measured there "
                     "(issue 15's dataplane not merged yet).")
    notes += [f"error: {e}" for e in errors]
    chain_note = ("The interceptor chain's cost (kafkapy alone, same blocks): the one-at-a-time produce "
                  "with no fault rule, and with one that never fires; ratio to no rule.")
    text = (render_table(headers, rows) + "\n" + "\n".join(notes) + "\n\n" + chain_note + "\n"
            + render_table(chain_headers, chain_rows))
    markdown = (f"{machine_note()}; {revision()}.\n\n{render_table(headers, rows, markdown=True)}\n\n"
                + "\n".join(f"- {n}" for n in notes) + "\n\n" + chain_note + "\n\n"
                + render_table(chain_headers, chain_rows, markdown=True) + "\n")
    return Report(text, markdown)


def _chain_table(samples: dict[str, dict[str, list[Any]]]) -> tuple[list[str], list[list[str]]]:
    """Median p99 and CPU per produce for each chain-cost variant, and each one's ratio to no rule."""
    def median_of(kind: str, variant: str) -> float | None:
        values = samples.get(f"{kind} {variant}", {}).get(KAFKAPY)
        return statistics.median(values) if values else None

    rows = []
    for variant in CHAIN_VARIANTS:
        row = [variant]
        for kind, scale, digits in (("chain_latency", 1e3, 2), ("chain_cpu", 1e6, 1)):
            value, base = median_of(kind, variant), median_of(kind, NO_RULE)
            row.append(FAILED if value is None else f"{value * scale:,.{digits}f}")
            row.append("-" if value is None or not base else f"{value / base:.2f}x")
        rows.append(row)
    return ["one-at-a-time produce", "p99 ms", "p99 / no rule", "broker CPU us", "CPU / no rule"], rows


if __name__ == "__main__":
    print(run(Options()).text)
