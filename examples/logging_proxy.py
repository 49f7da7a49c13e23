"""A Kafka proxy that logs every request, built on kafkapy's sans-I/O connection objects.

    python examples/logging_proxy.py        # a kafka-python producer and consumer through the proxy

The proxy listens on its own port and opens one upstream connection per client connection to an
embedded kafkapy broker. Each request is decoded by a ServerConnection, sent on by a
ClientConnection (which gives it its own correlation id and remembers its API and version), and
the response goes back under the client's correlation id. Metadata and FindCoordinator answers
name the proxy instead of the broker, or the client would bypass it after its first request. All
sockets are asyncio's; the protocol objects never see one. It prints one line per exchange, then
a JSON summary (requests per API and the record the consumer read).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkapy import Broker
from kafkapy.protocol import api_name
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.connection import ClientConnection, ProtocolError, ServerConnection

READ_SIZE = 65536


class LoggingProxy:
    """Forwards each client connection to ``upstream``, one request at a time, as a broker serves them."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.address: tuple[str, int] = ("127.0.0.1", 0)
        self.seen: Counter[str] = Counter()
        self._stopping = asyncio.Event()  # bound to the proxy's loop on first use (Python 3.10+)
        self._loop: asyncio.AbstractEventLoop | None = None

    def run(self, ready: threading.Event) -> None:
        """Serve on a thread of its own until ``stop``; ``ready`` is set once ``address`` is bound."""
        asyncio.run(self._serve(ready))

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)

    async def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.address = server.sockets[0].getsockname()[:2]
        ready.set()
        async with server:
            await self._stopping.wait()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        downstream, upstream = ServerConnection(), ClientConnection()
        try:
            while data := await reader.read(READ_SIZE):
                for request in downstream.receive_data(data):
                    up_writer.write(upstream.send_request(request.api_key, request.api_version, request.body,
                                                          client_id=request.client_id))
                    answered = []
                    while upstream.in_flight:  # none for a Produce with acks=0
                        answered += upstream.receive_data(await up_reader.read(READ_SIZE))
                    name = f"{api_name(request.api_key)} v{request.api_version}"
                    self.seen[api_name(request.api_key)] += 1
                    for event in answered:
                        print(f"{name:<22} client id {request.client_id!r}, correlation id "
                              f"{request.correlation_id} (upstream {event.request.correlation_id})")
                        writer.write(downstream.send_response(request, self._rewrite(request.api_key,
                                                                                     event.response.body)))
                    await writer.drain()
        except ProtocolError as exc:  # one line, and only this connection ends
            print(f"connection closed: {exc}")
        finally:
            up_writer.close()
            writer.close()

    def _rewrite(self, api_key: int, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """Answers that name brokers name the proxy, so the client keeps talking through it."""
        host, port = self.address
        if api_key == ApiKey.METADATA:
            return {**body, "brokers": [{**b, "host": host, "port": port} for b in body["brokers"]]}
        if api_key == ApiKey.FIND_COORDINATOR:
            if body.get("coordinators"):  # v4+: one entry per key
                coordinators = [{**c, "host": host, "port": port} for c in body["coordinators"]]
                return {**body, "coordinators": coordinators}
            if body.get("host"):
                return {**body, "host": host, "port": port}
        return body


def main() -> None:
    with Broker({"advertise.private.api.keys": "false"}) as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        proxy = LoggingProxy((host, int(port)))
        ready = threading.Event()
        thread = threading.Thread(target=proxy.run, args=(ready,), daemon=True)
        thread.start()
        ready.wait(10)
        bootstrap = "{}:{}".format(*proxy.address)

        producer = KafkaProducer(bootstrap_servers=bootstrap)
        producer.send("proxied", key=b"k", value=b"through the proxy").get(timeout=30)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                 consumer_timeout_ms=10_000)
        consumer.assign([TopicPartition("proxied", 0)])
        record = next(iter(consumer))
        consumer.close()
        proxy.stop()
        thread.join(10)
    print(json.dumps({"requests": dict(sorted(proxy.seen.items())),
                      "consumed": {"key": record.key.decode(), "value": record.value.decode()}}, indent=2))


if __name__ == "__main__":
    main()
