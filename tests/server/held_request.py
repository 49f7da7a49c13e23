"""Modules that hold every DescribeCluster (or Metadata) until the test lets it go.

The tests of what waits behind a request that waits (and what does not) tell the two apart by
what has arrived while it is held, not by the clock: on a loaded machine an answer made at once
can take longer than any sleep a test can afford to give the slow one.

Tests are not a package: pytest puts this directory on sys.path, so the test modules import this
as ``held_request``.
"""

from __future__ import annotations

import asyncio
import select
import socket
import threading
from typing import ClassVar

from kafkapy import Broker
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.connection import KafkaConnection
from kafkapy.server.modules import Module, RequestContext
from kafkapy.server.services import BrokerServices
from kafkapy.testing import wait_until


class HeldDescribeCluster(Module):
    """DescribeCluster waits until ``release`` is set, as a hook that really awaits something would;
    ``entered`` is set once one is waiting."""

    name = "held-describe-cluster"
    held_key: ClassVar[int] = ApiKey.DESCRIBE_CLUSTER

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self.entered = threading.Event()
        self.release = threading.Event()

    async def on_request(self, context: RequestContext, request: Request) -> None:
        if context.api_key == self.held_key:
            self.entered.set()
            while not self.release.is_set():  # a threading.Event: the test's thread sets it
                await asyncio.sleep(0.01)


class HeldMetadata(HeldDescribeCluster):
    """The same for Metadata."""

    name = "held-metadata"
    held_key = ApiKey.METADATA


def held(broker: Broker) -> HeldDescribeCluster:
    """The broker's instance of the module (its ``release`` is per broker)."""
    assert broker.runtime is not None
    (module,) = [m for m in broker.runtime.modules if isinstance(m, HeldDescribeCluster)]
    return module


def the_connection(broker: Broker) -> KafkaConnection:
    """The broker's one client connection (the test's socket), once its loop has accepted it."""
    runtime = broker.runtime
    assert runtime is not None
    (connection,) = wait_until(lambda: list(runtime.connections), what="the broker to accept the connection")
    return connection


def nothing_to_read(sock: socket.socket, seconds: float = 0.3) -> bool:
    """No byte (and no close) arrives within ``seconds``: on a slow machine only a weaker check."""
    readable, _, _ = select.select([sock], [], [], seconds)
    return not readable
