"""Accepted sockets get the options Kafka's acceptor gives them (configureAcceptedSocketChannel):
TCP keepalive (set at accept, so on every listener) and TCP_NODELAY."""

from __future__ import annotations

import socket

from server_wire import KafkaSocket

from kafkapy import Broker
from kafkapy.testing import wait_until


def test_accepted_sockets_have_keepalive_and_nodelay() -> None:
    with Broker() as b, KafkaSocket(b.bootstrap_servers) as conn:
        assert conn.call(18, 0).body["error_code"] == 0
        runtime = b.runtime
        assert runtime is not None
        wait_until(lambda: len(runtime.connections) == 1, what="the connection served")
        (connection,) = runtime.connections
        assert connection.transport is not None
        sock = connection.transport.get_extra_info("socket")
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) != 0
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
