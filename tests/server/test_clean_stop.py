"""An embedded broker stops with nothing pending on its loop and nothing logged as an error, even
while clients' requests wait in it: a Fetch long poll, a JoinGroup held for the initial rebalance
delay, an EndTxn waiting for its markers. A task left pending when the loop closes is reported
("Task was destroyed but it is pending!") only when it is collected, far from the stop."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
import ssl
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from fd_guard import open_descriptors
from kafka import KafkaConsumer
from kafka.structs import TopicPartition

from kafkapy import Broker
from kafkapy.faults import FaultRule, Stall
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.clock import VirtualClock
from kafkapy.server.modules import Module
from kafkapy.testing import wait_until


class Trouble(logging.Handler):
    """What asyncio warns of, and what kafkapy warns of (the clients' own errors about the broker
    going away are theirs)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING and record.name.startswith(("asyncio", "kafkapy")):
            self.messages.append(f"{record.name} {record.levelname}: {record.getMessage()}")


@contextlib.contextmanager
def watched_stop() -> Iterator[list[str]]:
    """What the stop leaves behind: error logs, unraisable exceptions (a task destroyed while
    pending, an exception in ``__del__``) and warnings of our own making."""
    found: list[str] = []
    trouble = Trouble()
    root = logging.getLogger()
    root.addHandler(trouble)
    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: found.append(f"unraisable: {unraisable.exc_value!r}")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield found
            gc.collect()
    finally:
        sys.unraisablehook = hook
        root.removeHandler(trouble)
    found.extend(trouble.messages)
    found.extend(f"warning: {w.category.__name__}: {w.message}" for w in caught
                 if issubclass(w.category, (ResourceWarning, RuntimeWarning)) and not _never_connected(w))


def _never_connected(caught: warnings.WarningMessage) -> bool:
    """kafka-python 3.0.12 leaves the socket of a refused connect to the collector (kafka/net/inet.py):
    an unclosed socket bound to no address, connected to none. The broker's are all on 127.0.0.1."""
    text = str(caught.message)
    return text.startswith("unclosed <socket.socket") and "laddr=('0.0.0.0'" in text and "raddr" not in text


def closed(broker: Broker) -> list[str]:
    """Close ``broker``: what its stop logged or warned, and the tasks its loop still held."""
    loop = broker._loop
    assert loop is not None
    with watched_stop() as found:
        broker.close()
        assert loop.is_closed()
        found.extend(f"pending: {task!r}" for task in asyncio.all_tasks(loop))
    return found


def stop_while(broker: Broker, waiting: Callable[[], bool]) -> None:
    """Close ``broker`` once ``waiting()``, and check it left nothing behind on its loop."""
    try:
        wait_until(waiting, 30, "a request waiting in the broker")
    except BaseException:
        broker.close()  # not left running (its threads and sockets) into the tests after this one
        raise
    assert closed(broker) == []


def busy(broker: Broker) -> bool:
    """A connection of some broker of ``broker`` has a request waiting (its worker task runs)."""
    members = broker.brokers if broker.is_cluster else [broker]
    return any(c.worker is not None and not c.worker.done()
               for member in members if member.runtime is not None for c in member.runtime.connections)


@contextlib.contextmanager
def in_thread(work: Callable[[], Any]) -> Iterator[None]:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join(60)
    assert not thread.is_alive()


def stop_while_polling(broker: Broker, consumer: KafkaConsumer) -> None:
    """Stop ``broker`` once its request is waiting, the consumer polling on a thread meanwhile."""
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            with contextlib.suppress(Exception):
                consumer.poll(100)

    with in_thread(poll):
        try:
            stop_while(broker, lambda: busy(broker))
        finally:
            done.set()


def test_a_fetch_long_poll(tmp_path: Any) -> None:
    broker = Broker({"auto.create.topics.enable": False}).__enter__()
    broker.seed({"polled": {}})
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, fetch_max_wait_ms=25_000,
                             request_timeout_ms=30_000)
    try:
        consumer.assign([TopicPartition("polled", 0)])
        stop_while_polling(broker, consumer)
    finally:
        consumer.close()


def test_a_join_group_held_for_the_initial_rebalance_delay() -> None:
    broker = Broker({"group.initial.rebalance.delay.ms": 60_000}).__enter__()
    broker.seed({"joined": {}})
    consumer = KafkaConsumer("joined", group_id="held", bootstrap_servers=broker.bootstrap_servers,
                             request_timeout_ms=305_000)
    try:
        stop_while_polling(broker, consumer)
    finally:
        consumer.close(autocommit=False)


@pytest.mark.slow
def test_an_end_txn_waiting_for_its_markers() -> None:
    """Three brokers, the transaction's partitions led by all of them; WriteTxnMarkers stalls, so
    the coordinator's EndTxn waits for its markers when the cluster stops."""
    cluster = Broker({"transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
                      "offsets.topic.replication.factor": 1}, brokers=3).__enter__()
    cluster.seed({"txn": {"partitions": 6}})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "stopped",
                         "transaction.timeout.ms": 60_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition in range(6):
        producer.produce("txn", b"v", partition=partition)
    assert producer.flush(30) == 0
    for member in cluster.brokers:
        member.faults.add(FaultRule(Stall(), api=ApiKey.WRITE_TXN_MARKERS))

    def commit() -> None:
        # The EndTxn reaches the broker at once; once the cluster stops the commit can only run out
        # its time (it ends this test's thread), so the time is not longer than the wait for that.
        with contextlib.suppress(Exception):
            producer.commit_transaction(10)

    with in_thread(commit):
        stop_while(cluster, lambda: busy(cluster))


class Forgetful(Module):
    """A module that starts a task and never ends it: its stop() forgets it."""

    name = "forgetful"

    async def start(self) -> None:
        self.task = self.services.loop.create_task(self.forever())

    async def forever(self) -> None:
        await asyncio.Event().wait()


class Hasty(Module):
    """A module whose stop() cancels its task and returns at once, while the task's cleanup still
    has something to await."""

    name = "hasty"

    async def start(self) -> None:
        self.task = self.services.loop.create_task(self.tidy_on_cancel())

    async def tidy_on_cancel(self) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.2)

    async def stop(self) -> None:
        self.task.cancel()


@pytest.mark.parametrize("clock", [None, VirtualClock], ids=["own loop", "virtual clock's loop"])
def test_what_a_module_leaves_running_is_named_cancelled_and_ended(clock: type[VirtualClock] | None) -> None:
    """The loop closes with nothing pending; the tasks left are named in one warning (before,
    they were destroyed pending whenever collected: "Task was destroyed but it is pending!")."""
    broker = Broker(modules=[Forgetful, Hasty], clock=clock and clock()).__enter__()
    assert closed(broker) == [
        "kafkapy.server.clock WARNING: 2 task(s) still pending as the broker's loop closes "
        "(cancelled): Forgetful.forever, Hasty.tidy_on_cancel"]


def _sockets_on(port: int) -> list[str]:
    """This process's sockets whose local port is ``port`` (/proc/net/tcp: the broker's side of
    its connections), with their TCP state."""
    inodes = {target[len("socket:["):-1] for target in open_descriptors().values()
              if target.startswith("socket:")}
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[9] in inodes:
                found.append(f"{fields[1]} -> {fields[2]} state {fields[3]}")
    return found


def test_tls_connections_are_let_go(tmp_path: Path) -> None:
    """Closing a TLS connection sends a close_notify and waits for the client's, which a Kafka
    client need not send: the broker's sockets must not outlive its stop all the same (they stayed
    open until collected, or in CLOSE_WAIT once the client went)."""
    import trustme
    from confluent_kafka import Producer

    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    (tmp_path / "server.pem").write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    server.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    broker = Broker({"listeners": "SSL://127.0.0.1:0", "ssl.certfile": str(tmp_path / "server.pem"),
                     "ssl.keyfile": str(tmp_path / "server.key")}).__enter__()
    port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SSL",
                         "ssl.ca.location": str(tmp_path / "ca.pem")})
    producer.produce("tls", b"v")
    assert producer.flush(30) == 0
    context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    # A TLS client that reads nothing more: it never answers the broker's close_notify.
    with socket.create_connection(("127.0.0.1", port)) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1"):
        runtime = broker.runtime
        assert runtime is not None
        stop_while(broker, lambda: len(runtime.connections) >= 2)
        assert _sockets_on(port) == []
    del producer


def test_a_stopped_broker_says_so_when_asked_or_entered_again() -> None:
    """After its ``with`` block a broker's loop is closed: records(), seed() and the cluster faults
    said "Event loop is closed" (and warned of a coroutine never awaited), and entering it again
    said the metadata store was closed."""
    broker = Broker()
    with broker:
        broker.seed({"kept": {"records": [{"value": "v"}]}})
        kept = broker.records("kept")
    assert [r.value for r in kept] == [b"v"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine ... was never awaited" either
        for ask in (lambda: broker.records("kept"), lambda: broker.seed({"more": {}}), broker.groups,
                    lambda: broker.move_leader("kept", 0, to=1)):
            with pytest.raises(RuntimeError, match=r"^the broker has stopped: ask it inside"):
                ask()
        gc.collect()
    with pytest.raises(RuntimeError, match=r"does not start again .*make a new Broker"):
        broker.__enter__()
