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


@pytest.mark.parametrize(("send", "receive"), [(None, None), (300_000, 200_000)])
def test_socket_buffer_sizes_are_set_on_accepted_connections(send: int | None, receive: int | None) -> None:
    settings = {} if send is None else {"socket.send.buffer.bytes": send,
                                        "socket.receive.buffer.bytes": receive}
    with Broker(settings) as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        with socket.create_connection((host, int(port))):
            served = _served_socket(broker)
            assert served.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == \
                _kernel_buffer(socket.SO_SNDBUF, send or 102400)  # Kafka's default
            assert served.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == \
                _kernel_buffer(socket.SO_RCVBUF, receive or 102400)
