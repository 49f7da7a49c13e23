"""Workarounds for kafka-python 3.0.12 leaving sockets open, applied to the suite's process.

The suite treats an unclosed socket as a failure, and the garbage collector reports one at
whatever test runs when it collects, so a client library's leak fails an unrelated test at
random. Both mends below finish a close the library itself began; neither changes a byte a
client sends or reads.

- ``KafkaNetSocket.sock_connect`` (kafka/net/inet.py) makes a non-blocking socket and awaits its
  connect, and never closes it when that await ends another way: the connect refused or timed
  out, or the connecting task closed because the client closed meanwhile. A group member closed
  while it reconnects to its coordinator leaves one connected to the broker (the kernel finishes
  the handshake).
- ``KafkaTCPTransport.close`` (kafka/net/transport.py) leaves the socket to its write task when
  bytes are still buffered, and that task closes it only after the flush. A client closing with a
  request not yet sent (a LeaveGroup, a heartbeat racing the close) cancels the write task when its
  selector closes, so the flush never ends and the connected socket is never closed.
"""

from __future__ import annotations

import os
import socket
from typing import Any

__all__ = [
    "close_sockets_of_cancelled_flushes",
    "close_sockets_of_failed_connects",
    "mend_kafka_python_sockets",
    "name_the_test_of_each_socket",
]


def mend_kafka_python_sockets() -> None:
    close_sockets_of_failed_connects()
    close_sockets_of_cancelled_flushes()
    name_the_test_of_each_socket()


class SocketNamingItsTest(socket.socket):
    """A kafka-python socket that says which test made it: a leak is reported by the collector
    during a later test, and the name is what finds the client that leaked (sockets are made on
    the client's I/O thread, so a stack would show only its loop)."""

    __slots__ = ("made_during",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.made_during = os.environ.get("PYTEST_CURRENT_TEST", "no test")

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, made during {self.made_during}>"


def name_the_test_of_each_socket() -> None:
    try:
        from kafka.net.inet import KafkaNetSocket
    except ImportError:
        return
    if not hasattr(KafkaNetSocket, "socket"):
        return

    def make_socket(self: Any, family: int = socket.AF_UNSPEC, sock_type: int = socket.SOCK_STREAM,
                    proto: int = socket.IPPROTO_TCP) -> socket.socket:
        return SocketNamingItsTest(family, sock_type, proto)

    KafkaNetSocket.socket = make_socket


def close_sockets_of_failed_connects() -> None:
    try:
        from kafka.net.inet import KafkaNetSocket
    except ImportError:  # another kafka-python: nothing to mend
        return
    original = getattr(KafkaNetSocket, "sock_connect", None)
    if original is None or getattr(original, "closes_its_socket", False):
        return  # another kafka-python: nothing to mend, or mended already

    async def sock_connect(self: Any, net: Any, sock: Any, sockaddr: Any, timeout_at: Any = None) -> Any:
        try:
            return await original(self, net, sock, sockaddr, timeout_at=timeout_at)
        except BaseException:
            sock.close()
            raise

    sock_connect.closes_its_socket = True  # type: ignore[attr-defined]
    KafkaNetSocket.sock_connect = sock_connect


def close_sockets_of_cancelled_flushes() -> None:
    try:
        from kafka.net.transport import KafkaTCPTransport
    except ImportError:
        return
    original = getattr(KafkaTCPTransport, "_write_to_sock", None)
    if original is None or getattr(original, "closes_its_socket", False):
        return

    async def _write_to_sock(self: Any) -> Any:
        try:
            return await original(self)
        except BaseException:
            # Closed by its owner and waiting only to flush: the flush is over, so is the socket.
            # The selector has already forgotten it (the wait's own cleanup ran first).
            sock = self._sock
            if self._closed and sock is not None:
                self._sock = None
                sock.close()
            raise

    _write_to_sock.closes_its_socket = True  # type: ignore[attr-defined]
    KafkaTCPTransport._write_to_sock = _write_to_sock
