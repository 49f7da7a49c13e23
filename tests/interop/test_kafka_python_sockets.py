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
