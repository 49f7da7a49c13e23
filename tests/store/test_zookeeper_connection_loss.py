"""A lost ZooKeeper connection (the session living on) holds a request until the store
reconnects; a write whose reply was lost is sent again and counts as done when it had landed.

A TCP relay sits between the store and the real ZooKeeper server, so the test can cut the
connection while a request is in flight, as a loaded machine's missed ping does.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TypeVar

import pytest
from store_helpers import Recorder, registration, wait_until

from kafkapy.store import PartitionState, StoreError
from kafkapy.store.base import NO_PARTITION_EPOCH
from kafkapy.store.zookeeper import ZooKeeperStore

T = TypeVar("T")
MULTI_REQUEST = struct.pack(">i", 14)  # ZooKeeper's opcode for a transaction, after length and xid


class Relay:
    """Forwards TCP between clients and one server; can hold traffic and cut every connection."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.flowing = threading.Event()  # the client's requests pass
        self.flowing.set()
        self.replies = threading.Event()  # the server's replies pass
        self.replies.set()
        self.held = threading.Event()  # set once data waits at a held relay
        self.hold_replies_after_multi = False  # hold the replies from the next multi-op request on
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, server]
            for source, sink, gate in ((client, server, self.flowing), (server, client, self.replies)):
                threading.Thread(target=self._pump, args=(source, sink, gate), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, gate: threading.Event) -> None:
        try:
            while data := source.recv(65536):
                if gate is self.flowing and self.hold_replies_after_multi and data[8:12] == MULTI_REQUEST:
                    self.hold_replies_after_multi = False
                    self.replies.clear()
                if not gate.is_set():
                    self.held.set()
                gate.wait()
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            end.close()

    def cut(self) -> None:
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for end in sockets:
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()

    def close(self) -> None:
        self.flowing.set()
        self.replies.set()
        self.listener.close()
        self.cut()


@pytest.fixture
def relay(zk_connect: str) -> Iterator[tuple[Relay, str]]:
    address, _, chroot = zk_connect.partition("/")
    host, port = address.rsplit(":", 1)
    relay = Relay((host, int(port)))
    yield relay, f"127.0.0.1:{relay.port}/{chroot}"
    relay.close()


def test_a_read_waits_out_a_lost_connection(relay: tuple[Relay, str]) -> None:
    proxy, connect = relay
    store = ZooKeeperStore(connect, session_timeout_ms=6000, connection_timeout_ms=10000)
    store.start()
    try:
        store.set_entity_config("topics/orders", {"retention.ms": "1000"})
        session = store.client.client_id[0]
        proxy.flowing.clear()  # the read's request is held, as behind a stalled link
        answer: Future[dict[str, str]] = Future()

        def read() -> None:
            try:
                answer.set_result(store.entity_config("topics/orders"))
            except BaseException as exc:  # handed to the test thread
                answer.set_exception(exc)

        threading.Thread(target=read, daemon=True).start()
        assert proxy.held.wait(10)
        proxy.cut()  # the connection drops with the read outstanding: ConnectionLoss
        proxy.flowing.set()
        assert answer.result(timeout=15) == {"retention.ms": "1000"}
        assert store.client.client_id[0] == session  # the same session, reconnected
    finally:
        store.close()


def _in_thread(call: Callable[[], T]) -> Future[T]:
    answer: Future[T] = Future()

    def run() -> None:
        try:
            answer.set_result(call())
        except BaseException as exc:  # handed to the test thread
            answer.set_exception(exc)

    threading.Thread(target=run, daemon=True).start()
    return answer


def _lose_the_reply(proxy: Relay, write: Callable[[], T], landed: Callable[[], bool],
                    from_the_multi: bool = False) -> T:
    """Run ``write`` with the server's replies held (``from_the_multi``: from its transaction on, so
    its reads before are answered); once the server has applied it (``landed``, read past the
    relay), cut the connection, so the store only learns of it by asking again."""
    if from_the_multi:
        proxy.hold_replies_after_multi = True
    else:
        proxy.replies.clear()
    answer = _in_thread(write)
    deadline = time.monotonic() + 10
    while not landed():
        assert time.monotonic() < deadline, "the write never reached the server"
        time.sleep(0.02)
    proxy.cut()
    proxy.replies.set()
    return answer.result(timeout=15)


@pytest.fixture
def stores(relay: tuple[Relay, str],
           zk_connect: str) -> Iterator[tuple[Relay, ZooKeeperStore, ZooKeeperStore]]:
    """The relay, a store behind it, and a store connected directly (to see what landed)."""
    proxy, connect = relay
    store = ZooKeeperStore(connect, session_timeout_ms=6000, connection_timeout_ms=10000)
    direct = ZooKeeperStore(zk_connect)
    store.start()
    direct.start()
    try:
        yield proxy, store, direct
    finally:
        store.close()
        direct.close()


def test_a_compare_and_set_whose_reply_was_lost_counts_as_done(
        stores: tuple[Relay, ZooKeeperStore, ZooKeeperStore]) -> None:
    proxy, store, direct = stores
    store.create_topic("t", {0: (1, 2)})
    store.set_partition_state("t", 0, PartitionState(1, 0, (1, 2)), NO_PARTITION_EPOCH)
    moved = _lose_the_reply(
        proxy, lambda: store.set_partition_state("t", 0, PartitionState(2, 1, (2,)), 0),
        lambda: direct.partition_states()[("t", 0)].leader == 2)
    # Not a conflict: the resend met the store's own write, at the version it made.
    assert moved == PartitionState(2, 1, (2,), 0, 1)
    assert direct.partition_states()[("t", 0)] == moved


def test_an_ephemeral_create_whose_reply_was_lost_is_the_sessions_own(
        stores: tuple[Relay, ZooKeeperStore, ZooKeeperStore]) -> None:
    proxy, store, direct = stores
    _lose_the_reply(proxy, lambda: store.register_broker(registration(4)),
                    lambda: [b.broker_id for b in direct.brokers()] == [4])
    assert [b.broker_id for b in store.brokers()] == [4]  # registered once, not "already registered"
    # Another session's node is not taken for the store's own: that stays an error.
    with pytest.raises(StoreError, match="already registered"):
        direct.register_broker(registration(4))


def test_a_topic_create_whose_reply_was_lost_is_created_once(
        stores: tuple[Relay, ZooKeeperStore, ZooKeeperStore]) -> None:
    proxy, store, direct = stores
    created = _lose_the_reply(proxy, lambda: store.create_topic("orders", {0: (1,), 1: (1,)},
                                                                config={"cleanup.policy": "compact"}),
                              lambda: "orders" in direct.topics(), from_the_multi=True)
    # Not "already exists": the resend met the store's own transaction, the same topic id.
    assert direct.topics()["orders"] == created
    assert direct.entity_config("topics/orders") == {"cleanup.policy": "compact"}
    # A topic someone else made is still refused.
    with pytest.raises(StoreError, match="already exists"):
        store.create_topic("orders", {0: (1,)})


def test_a_topic_delete_whose_reply_was_lost_is_done(
        stores: tuple[Relay, ZooKeeperStore, ZooKeeperStore]) -> None:
    proxy, store, direct = stores
    store.create_topic("gone", {0: (1,)}, config={"retention.ms": "1"})
    store.set_partition_state("gone", 0, PartitionState(1, 0, (1,)), NO_PARTITION_EPOCH)
    _lose_the_reply(proxy, lambda: store.delete_topic("gone"), lambda: "gone" not in direct.topics(),
                    from_the_multi=True)
    assert "gone" not in direct.topics() and ("gone", 0) not in direct.partition_states()
    assert direct.entity_config("topics/gone") == {}


def test_watches_still_see_changes_after_a_dropped_connection(relay: tuple[Relay, str],
                                                              zk_connect: str) -> None:
    """kazoo forgets every watch when the connection drops, the session living on; the topics
    and partition-state readers, which read again only what their watches name, must then read
    everything once more to set them again (ZooKeeperStore.connection_drops), or they would
    never hear of another change."""
    proxy, connect = relay
    store = ZooKeeperStore(connect, session_timeout_ms=6000, connection_timeout_ms=10000)
    writer = ZooKeeperStore(zk_connect, session_timeout_ms=6000, connection_timeout_ms=10000)
    store.start()
    writer.start()
    try:
        topics = Recorder()
        states = Recorder()
        store.watch_topics(topics)
        store.watch_partition_states(states)
        writer.create_topic("before", {0: (1,)})
        writer.set_partition_state("before", 0, PartitionState(1, 0, (1,)), NO_PARTITION_EPOCH)
        topics.wait_for(lambda seen: "before" in seen)
        states.wait_for(lambda seen: ("before", 0) in seen)
        session, drops = store.client.client_id[0], store.connection_drops
        proxy.cut()
        wait_until(lambda: store.connection_drops > drops and store.client.connected)
        assert store.client.client_id[0] == session  # the same session, reconnected
        writer.create_topic("after", {0: (1,)})
        writer.set_partition_state("after", 0, PartitionState(1, 0, (1,)), NO_PARTITION_EPOCH)
        writer.set_partition_state("before", 0, PartitionState(1, 1, (1,)), 0)
        topics.wait_for(lambda seen: set(seen) == {"before", "after"})
        states.wait_for(lambda seen: ("after", 0) in seen and seen[("before", 0)].leader_epoch == 1)
    finally:
        writer.close()
        store.close()
