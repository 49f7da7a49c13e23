"""Requests from this broker to another one, on the inter-broker listener (what Kafka's
NodeToNodeChannelManager / InterBrokerSendThread do), for coordinators that talk to brokers:
the transaction coordinator's WriteTxnMarkers (kafkapy.transactions.marker_channel) and the
share-partition leader's share-state requests (kafkapy.sharestate.persister).

One connection per broker, opened on first need and dropped on any failure; requests on it go
one at a time. A broker that cannot be reached, or an answer that cannot be read, is None: the
caller says what that means for its request (the coordinators retry later, as on a leader move).
Only PLAINTEXT listeners are dialled (kafkapy's brokers have no inter-broker TLS or SASL client
yet).

A request may be started by a coroutine stepped in place (kafkapy.server.eager: EndTxn's markers
to another broker's partitions), where no task runs yet. Its waits use ``asyncio.wait_for``,
which since Python 3.12 is ``asyncio.timeout()`` inside and raises outside a task (3.11's made a
task of its own), so ``request`` first moves into the caller's task (``into_task``).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Collection, Mapping
from typing import Any

from kafkapy.errors import DecodeError
from kafkapy.protocol import decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.eager import into_task
from kafkapy.store.base import BrokerRegistration

__all__ = ["BrokerChannel"]

_SIZE = struct.Struct(">i")
_CONNECT_TIMEOUT_S = 5.0
_REQUEST_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms for its inter-broker channels


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.lock = asyncio.Lock()
        self.correlation_id = 0


class BrokerChannel:
    """Sends one request to another broker and answers its body, or None when it could not."""

    def __init__(self, brokers: Callable[[], Collection[BrokerRegistration]], listener: Callable[[], str],
                 client_id: str) -> None:
        self.brokers = brokers
        self.listener = listener
        self.client_id = client_id
        self._connections: dict[int, _Connection] = {}

    async def request(self, broker_id: int, api_key: ApiKey, version: int,
                      body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        await into_task()  # asyncio.wait_for below needs a task (Python 3.12+): see the module docstring
        try:
            connection = await self._connect(broker_id)
        except (OSError, asyncio.TimeoutError):
            return None
        if connection is None:
            return None
        try:
            async with connection.lock:
                connection.correlation_id += 1
                frame = encode_request(api_key, version, connection.correlation_id, self.client_id, body)
                connection.writer.write(_SIZE.pack(len(frame)) + frame)
                await connection.writer.drain()
                head = await asyncio.wait_for(connection.reader.readexactly(4), _REQUEST_TIMEOUT_S)
                (size,) = _SIZE.unpack(head)
                data = await asyncio.wait_for(connection.reader.readexactly(size), _REQUEST_TIMEOUT_S)
            answer: Mapping[str, Any] = decode_response(data, api_key, version).body
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, DecodeError):
            self._drop(broker_id)
            return None
        return answer

    async def _connect(self, broker_id: int) -> _Connection | None:
        known = self._connections.get(broker_id)
        if known is not None:
            return known
        registration = next((b for b in self.brokers() if b.broker_id == broker_id), None)
        endpoint = registration.endpoint(self.listener()) if registration is not None else None
        if endpoint is None or endpoint.security_protocol != "PLAINTEXT":
            return None
        reader, writer = await asyncio.wait_for(asyncio.open_connection(endpoint.host, endpoint.port),
                                                _CONNECT_TIMEOUT_S)
        connection = self._connections.setdefault(broker_id, _Connection(reader, writer))
        if connection.writer is not writer:  # another task connected meanwhile
            writer.close()
        return connection

    def _drop(self, broker_id: int) -> None:
        connection = self._connections.pop(broker_id, None)
        if connection is not None:
            connection.writer.close()

    def close(self) -> None:
        for broker_id in list(self._connections):
            self._drop(broker_id)
