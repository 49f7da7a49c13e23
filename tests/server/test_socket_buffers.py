"""socket.send.buffer.bytes and socket.receive.buffer.bytes: SO_SNDBUF and SO_RCVBUF of the
connections a listener accepts, as Kafka's acceptor sets them (-1: the OS's default)."""

from __future__ import annotations

import socket
import time

import pytest

from kafkapy.embedded import Broker

TIMEOUT_S = 20


def _kernel_buffer(option: int, size: int) -> int:
    """What this OS reports for a socket buffer set to ``size`` (Linux doubles it)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, option, size)
        return probe.getsockopt(socket.SOL_SOCKET, option)


def _served_socket(broker: Broker) -> socket.socket:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        runtime = broker.runtime
        connections = list(runtime.connections) if runtime is not None else []
        if connections and connections[0].transport is not None:
            sock: socket.socket = connections[0].transport.get_extra_info("socket")
            return sock
        time.sleep(0.01)
    raise AssertionError("no connection was accepted")


def _os_default_accepted() -> tuple[int, int]:
    """SO_SNDBUF and SO_RCVBUF of a freshly accepted connection nobody sized."""
    with socket.create_server(("127.0.0.1", 0)) as server, \
            socket.create_connection(server.getsockname()[:2]):
        accepted, _ = server.accept()
        with accepted:
            return (accepted.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                    accepted.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))


@pytest.mark.parametrize(("send", "receive"), [(None, None), (300_000, 200_000), (102_400, 102_400)])
def test_socket_buffer_sizes_are_set_on_accepted_connections(send: int | None, receive: int | None) -> None:
    """Unset, the OS sizes them (kafkapy's default -1, where Kafka's is 102400: docs/broker.md);
    set, as Kafka's acceptor sets them."""
    settings = {} if send is None else {"socket.send.buffer.bytes": send,
                                        "socket.receive.buffer.bytes": receive}
    with Broker(settings) as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        with socket.create_connection((host, int(port))):
            served = _served_socket(broker)
            expected = _os_default_accepted() if send is None or receive is None else (
                _kernel_buffer(socket.SO_SNDBUF, send), _kernel_buffer(socket.SO_RCVBUF, receive))
            assert (served.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                    served.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)) == expected
