"""A lost ZooKeeper connection (the session living on) holds a read until the store reconnects.

A TCP relay sits between the store and the real ZooKeeper server, so the test can cut the
connection while a read is in flight, as a loaded machine's missed ping does.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from kafkapy.store.zookeeper import ZooKeeperStore


class Relay:
    """Forwards TCP between clients and one server; can hold traffic and cut every connection."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        self.held = threading.Event()  # set once data waits at a held relay
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
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if not self.flowing.is_set():
                    self.held.set()
                self.flowing.wait()
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
