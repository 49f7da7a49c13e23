"""One client connection: bytes in, frames to the dispatcher, responses out in order.

Theory of operation
-------------------
``data_received`` feeds a sans-I/O FrameBuffer and queues every complete
frame. A single worker task per connection takes frames off the queue and
awaits the dispatcher for each in turn, so requests are processed one at a
time and responses leave in request order: pipelining works, as kfake does
it. Reading pauses while the queue is long, so a fast sender cannot grow it.

A frame size that is negative or over socket.request.max.bytes closes the
connection before its body is read. The idle timer is one restartable
TimerHandle (hypercorn's idea): any received bytes restart it, so a partial
frame that stalls counts as idle and is closed after connections.max.idle.ms.

Server-initiated requests (the seed-001 coordinator's Ping/StopFetcher/StartFetcher) go out on the
client's own connection through ``request()``, with correlation ids the broker allocates from
``BROKER_CORRELATION_MIN`` (2**30) up, a range no request header can start with (a request starts
with its int16 API key, and none is >= 0x4000). A client frame whose first four bytes are the id of
an outstanding broker request is its response: it is taken out in ``data_received`` (so it never
waits behind requests being served), decoded with that request's API key and version, and resolves
its future. An answer that comes after its request timed out is dropped too (the last
``MAX_EXPIRED`` timed-out ids are remembered). Every other frame is a request, as before. When the
counter wraps, ids still awaited or remembered are skipped. The client's own correlation ids never
meet these: they lead the broker's responses, going the other way.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import struct
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from kafkapy.errors import DecodeError
from kafkapy.protocol import Response, decode_response, encode_request
from kafkapy.server.framing import FrameBuffer, FrameSizeError

if TYPE_CHECKING:
    from kafkapy.server.broker import BrokerRuntime
    from kafkapy.server.listeners import ListenerSpec

__all__ = ["BROKER_CORRELATION_MIN", "ConnectionInfo", "KafkaConnection"]

log = logging.getLogger(__name__)

_ids = itertools.count(1)
_SIZE = struct.Struct(">i")
MAX_QUEUED_FRAMES = 64  # pause reading beyond this many unprocessed frames
BROKER_CORRELATION_MIN = 2**30  # correlation ids of broker-initiated requests: [2**30, 2**31)
BROKER_CLIENT_ID = "kafkapy-broker"
MAX_EXPIRED = 256  # timed-out broker request ids whose late answers are still recognized


@attrs.define(eq=False)
class ConnectionInfo:
    """What modules and observers know about a connection."""

    id: str
    listener: str
    security_protocol: str
    client_address: tuple[str, int]
    broker_address: tuple[str, int]
    principal: str = "User:ANONYMOUS"
    attributes: dict[str, Any] = attrs.field(factory=dict)  # per-module state


# The attribute keywords Java's X500Principal.getName() (RFC 2253) prints by name.
_RFC2253_NAMES = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
                  "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
                  "domainComponent": "DC", "userId": "UID"}


def _rfc2253_value(value: str) -> str:
    escaped = "".join(f"\\{c}" if c in ',+"\\<>;' else c for c in value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def rfc2253(subject: Any) -> str:
    """A certificate subject as Kafka's default SSL principal names it: "CN=alice,OU=Streams,O=Acme".

    ``subject`` is ``SSLSocket.getpeercert()["subject"]``: RDNs in certificate order, which RFC 2253
    prints last to first.
    """
    return ",".join("+".join(f"{_RFC2253_NAMES.get(k, k)}={_rfc2253_value(v)}" for k, v in rdn)
                    for rdn in reversed(tuple(subject)))


class CloseConnection(Exception):
    """Raised by the dispatcher to end a connection without a response."""


class KafkaConnection(asyncio.Protocol):
    def __init__(self, runtime: BrokerRuntime, listener: ListenerSpec) -> None:
        self.runtime = runtime
        self.listener = listener
        self.frames = FrameBuffer(runtime.config["socket.request.max.bytes"])
        self.queue: collections.deque[bytes] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.info: ConnectionInfo | None = None
        self.worker: asyncio.Task[None] | None = None
        self.idle: asyncio.TimerHandle | None = None
        self.closed = False
        self.admitted = False
        self.paused = False
        self.outgoing: list[bytes] = []  # responses waiting for the next flush
        self.flush_scheduled = False
        self.last_activity = 0.0
        self.draining = False  # a bad frame size arrived: answer what came before it, then close
        self.on_lost: Callable[[], None] | None = None  # the accept loop's release of a quota slot
        # broker-initiated requests awaiting their response: correlation id -> (key, version, future)
        self.outstanding: dict[int, tuple[int, int, asyncio.Future[Response]]] = {}
        self._next_correlation = BROKER_CORRELATION_MIN
        self._expired: dict[int, None] = {}  # timed-out broker request ids, oldest first

    # --- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername") or ("", 0)
        sock = transport.get_extra_info("sockname") or ("", 0)
        principal = "User:ANONYMOUS"
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            cert = ssl_object.getpeercert()
            if cert:
                principal = f"User:{rfc2253(cert.get('subject', ()))}"
        self.info = ConnectionInfo(
            id=f"{self.listener.name}-{peer[0]}:{peer[1]}-{next(_ids)}",
            listener=self.listener.name, security_protocol=self.listener.security_protocol,
            client_address=(peer[0], peer[1]), broker_address=(sock[0], sock[1]), principal=principal)
        self.runtime.connections.add(self)
        self._restart_idle()
        self.worker = self.runtime.loop.create_task(self._admit_then_serve())

    def data_received(self, data: bytes) -> None:
        if self.draining:
            return
        self._restart_idle()
        self.frames.feed(data)
        try:
            while (frame := self.frames.next_frame()) is not None:
                if (self.outstanding or self._expired) and len(frame) >= 4 and \
                        self._is_response(_SIZE.unpack_from(frame, 0)[0]):
                    self._response_received(frame)
                else:
                    self.queue.append(frame)
        except FrameSizeError as exc:
            log.warning("closing %s: %s", self._who(), exc)
            # Nothing more is read; requests that arrived whole before the bad size are still answered
            # in order (Kafka reads one request at a time, so it never even sees the bad size earlier).
            self.draining = True
            if self.transport is not None:
                self.transport.pause_reading()
            if not self.queue:
                self.close()
            elif self.admitted and (self.worker is None or self.worker.done()):
                self.worker = self.runtime.loop.create_task(self._serve())
            return
        if self.queue and self.admitted and (self.worker is None or self.worker.done()):
            self.worker = self.runtime.loop.create_task(self._serve())
        if len(self.queue) > MAX_QUEUED_FRAMES and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool | None:
        return None  # close once the buffered requests are answered? Kafka closes at once.

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.idle is not None:
            self.idle.cancel()
            self.idle = None
        self.runtime.connections.discard(self)
        outstanding, self.outstanding = self.outstanding, {}
        for _, _, future in outstanding.values():
            if not future.done():
                future.set_exception(ConnectionError("the connection closed"))
        if self.info is not None and self.admitted:
            self.runtime.connection_closed(self.info)
        if self.on_lost is not None:
            on_lost, self.on_lost = self.on_lost, None
            on_lost()

    # --- serving ---------------------------------------------------------------------------

    async def _admit_then_serve(self) -> None:
        assert self.info is not None
        if not await self.runtime.admit(self.info):
            self.close()
            return
        self.admitted = True
        await self._serve()

    async def _serve(self) -> None:
        assert self.info is not None and self.transport is not None
        dispatcher = self.runtime.dispatcher
        while self.queue and not self.closed:
            frame = self.queue.popleft()
            if self.paused and not self.draining and len(self.queue) < MAX_QUEUED_FRAMES // 2:
                self.paused = False
                self.transport.resume_reading()
            try:
                response = await dispatcher.dispatch(self.info, frame)
            except CloseConnection:
                self._flush()  # answers to the requests before this one still go out
                self.close()
                return
            if response is not None:
                self._queue_output(response)
        if self.draining:
            self._flush()
            self.close()

    def send(self, frame: bytes) -> None:
        """Write a whole frame body (server-initiated requests use this)."""
        self._queue_output(frame)

    async def request(self, api_key: int, api_version: int, body: Mapping[str, Any],
                      timeout: float) -> Response:
        """Send a request to the client on this connection and wait for its response.

        TimeoutError after ``timeout`` seconds, ConnectionError if the connection is or gets closed,
        DecodeError if the answer cannot be parsed."""
        if self.closed or self.transport is None or self.transport.is_closing():
            raise ConnectionError("the connection is closed")
        correlation_id = self._allocate()
        frame = encode_request(api_key, api_version, correlation_id, BROKER_CLIENT_ID, body)
        future: asyncio.Future[Response] = self.runtime.loop.create_future()
        self.outstanding[correlation_id] = (api_key, api_version, future)
        self.send(frame)
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            self._expired[correlation_id] = None
            if len(self._expired) > MAX_EXPIRED:
                del self._expired[next(iter(self._expired))]
            raise TimeoutError(f"no response to api key {api_key} within {timeout:.3f}s") from None
        finally:
            self.outstanding.pop(correlation_id, None)

    def _allocate(self) -> int:
        """The next broker correlation id not in use. After 2**30 requests on one connection the
        counter wraps and could come back to an id still awaited, or one whose late answer is still
        expected: reusing it would hand one request's answer to the other. At most len(outstanding)
        + MAX_EXPIRED ids are skipped."""
        while True:
            correlation_id = self._next_correlation
            self._next_correlation = (correlation_id + 1 if correlation_id < 2**31 - 1
                                      else BROKER_CORRELATION_MIN)
            if not self._is_response(correlation_id):
                return correlation_id

    def _is_response(self, correlation_id: int) -> bool:
        return correlation_id in self.outstanding or correlation_id in self._expired

    def _response_received(self, frame: bytes) -> None:
        correlation_id = _SIZE.unpack_from(frame, 0)[0]
        entry = self.outstanding.pop(correlation_id, None)
        if entry is None:
            self._expired.pop(correlation_id, None)
            log.debug("%s: dropping a response with no outstanding request (%d)", self._who(), correlation_id)
            return
        api_key, api_version, future = entry
        if future.done():
            return
        try:
            future.set_result(decode_response(frame, api_key, api_version))
        except DecodeError as exc:
            future.set_exception(exc)

    def _queue_output(self, frame: bytes) -> None:
        """Responses produced in one loop step leave in one write (one syscall, not one each);
        a handler that really waits lets the loop run the flush, so nothing sits behind it."""
        self.outgoing.append(_SIZE.pack(len(frame)))
        self.outgoing.append(frame)
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.runtime.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self.flush_scheduled = False
        if not self.outgoing:
            return
        data, self.outgoing = b"".join(self.outgoing), []
        transport = self.transport
        if transport is not None and not self.closed and not transport.is_closing():
            transport.write(data)

    def _restart_idle(self) -> None:
        # Lazy: data only stamps the time; the timer re-arms itself for the remainder when it fires.
        self.last_activity = self.runtime.loop.time()
        if self.idle is None:
            timeout = self.runtime.config["connections.max.idle.ms"] / 1000
            self.idle = self.runtime.loop.call_later(timeout, self._idle_expired)

    def _idle_expired(self) -> None:
        loop = self.runtime.loop
        timeout = self.runtime.config["connections.max.idle.ms"] / 1000
        remaining = self.last_activity + timeout - loop.time()
        busy = self.worker is not None and not self.worker.done()
        if busy or remaining > 0:  # still working on a request, or heard from since: not idle
            self.idle = loop.call_later(remaining if remaining > 0 else timeout, self._idle_expired)
            return
        self.idle = None
        log.info("closing idle connection %s (connections.max.idle.ms)", self._who())
        self.close()

    def close(self) -> None:
        if not self.closed and self.transport is not None:
            self._flush()
            self.closed = True
            self.transport.close()

    def _who(self) -> str:
        return self.info.id if self.info is not None else "connection"
