"""tests/kafka_python_sockets.py's mend holds: the socket of a connect that kafka-python 3.0.12
gives up on is closed (it was left to the garbage collector)."""

from __future__ import annotations

import select
import socket
from typing import Any

import pytest
from kafka.errors import KafkaConnectionError
from kafka.net.inet import KafkaNetSocket


class Writable:
    """kafka-python's selector as sock_connect uses it: wait_write until the socket is writable
    (a refused connect is too, and then says so)."""

    async def wait_write(self, sock: socket.socket, timeout_at: Any = None) -> None:
        select.select([], [sock], [], 5)


def test_a_refused_connect_closes_its_socket() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here once the probe closes
    sock = socket.socket()
    sock.setblocking(False)
    try:
        connecting = KafkaNetSocket().sock_connect(Writable(), sock, ("127.0.0.1", port))
        with pytest.raises(KafkaConnectionError, match="ECONNREFUSED"):
            connecting.send(None)
        assert sock.fileno() == -1  # closed, not left to the collector
    finally:
        sock.close()


def test_a_transport_closed_before_its_flush_closes_its_socket_with_its_selector() -> None:
    """A client closing with a request still buffered: the transport defers its close to the
    flush, and the selector closing cancels the flush."""
    from kafka.net.selector import NetworkSelector
    from kafka.net.transport import KafkaTCPTransport

    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
        try:
            client.setblocking(False)
            selector = NetworkSelector()
            transport = KafkaTCPTransport(selector, client)
            transport.write(b"a request not yet sent")
            transport.close()
            selector.close()
            assert client.fileno() == -1  # closed, not left to the collector
        finally:
            client.close()
            peer.close()
