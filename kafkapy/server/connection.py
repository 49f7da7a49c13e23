"""One client connection: bytes in, frames to the dispatcher, responses out in order.

Theory of operation
-------------------
``data_received`` (or, with FastPaths.buffered_reads, ``buffer_updated`` after the
socket was read into the FrameBuffer's buffers) splits the bytes into frames with a
sans-I/O FrameBuffer and hands each complete frame to the dispatcher in turn, right
there: most requests are answered without the dispatcher suspending (see
kafkapy.server.dispatch), and the answers to all the frames of one read
leave in one write. A request whose hooks or handler really wait comes back
as an awaitable; a worker task awaits it, and every frame after it waits in
the queue, served by that task in order, until the queue is empty and the
connection is back to answering in place. So requests are processed one at a
time and responses leave in request order: pipelining works, as kfake does
it, and an answer already made never waits for a slow request behind it.
Reading pauses while the queue is long, so a fast sender cannot grow it.

A frame size that is negative or over socket.request.max.bytes closes the
connection before its body is read. Idle connections are found by the
broker's one idle sweep (BrokerRuntime), not a timer each: received bytes
and answers written stamp ``last_activity`` (an answer made in place leaves
within the read that stamped it), so a partial frame that stalls counts as
idle and is closed after connections.max.idle.ms (a little after: the sweep
runs every eighth of it).

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
import functools
import inspect
import ipaddress
import itertools
import logging
import struct
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from kafkapy.errors import DecodeError
from kafkapy.protocol import Response, decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.chunks import Chunk, frame_size
from kafkapy.protocol.framing import KEEP_FROM, FrameBuffer, FrameSizeError, ReceivedFrame
from kafkapy.server.sasl.authenticator import Authenticator, SaslState
from kafkapy.server.sasl.credentials import SCRAM_CREDENTIALS, ScramCredentialsModule
from kafkapy.server.sasl.scram import ScramCredential

if TYPE_CHECKING:
    from kafkapy.server.broker import BrokerRuntime
    from kafkapy.server.listeners import ListenerSpec

__all__ = ["BROKER_CORRELATION_MIN", "BufferedKafkaConnection", "ConnectionInfo", "KafkaConnection",
           "java_host_address"]

log = logging.getLogger(__name__)

Pending = Awaitable[bytes | list[Chunk] | None]  # a request that suspends (kafkapy.server.dispatch)

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
    # Kafka's ClientInformation of the channel: the software name and version the client's last
    # valid ApiVersions declared (v3+; before v3, or with no ApiVersions yet, "unknown" both).
    # The dispatcher keeps it, memo replays included (kafkapy.server.dispatch).
    client_software: tuple[str, str] = ("unknown", "unknown")


@functools.lru_cache(maxsize=1024)
def java_host_address(address: str) -> str:
    """A client's address as Kafka compares it (ACL hosts, client metrics' ``match``), Java's
    InetAddress.getHostAddress: an IPv4-mapped IPv6 address as IPv4, any other IPv6 address
    uncompressed, each group in lower-case hex without leading zeros (``::1`` is
    ``0:0:0:0:0:0:0:1``), a zone kept after ``%``."""
    if ":" not in address:
        return address
    bare, percent, zone = address.partition("%")
    try:
        ip = ipaddress.IPv6Address(bare)
    except ValueError:
        return address
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return ":".join(f"{int(group, 16):x}" for group in ip.exploded.split(":")) + percent + zone


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


def discard(awaitable: object) -> None:
    """Close an awaitable no task will await (its connection closed first). A coroutine never
    started runs none of its code when closed, so it cannot close the coroutines it was handed to
    await (Dispatcher._finish holds its handler's): they are closed here, else each would be
    reported "never awaited". One already started is closed where it waits, and that passes on."""
    if inspect.iscoroutine(awaitable):
        unstarted = inspect.getcoroutinestate(awaitable) == inspect.CORO_CREATED
        held = inspect.getcoroutinelocals(awaitable) if unstarted else {}
    elif inspect.isgenerator(awaitable):  # a generator-based coroutine (kafkapy.server.eager.resume)
        unstarted = inspect.getgeneratorstate(awaitable) == inspect.GEN_CREATED
        held = inspect.getgeneratorlocals(awaitable) if unstarted else {}
    else:
        return  # a future or the like: nothing runs that was not started
    for value in held.values():
        if inspect.iscoroutine(value) or inspect.isgenerator(value):
            discard(value)
    try:
        awaitable.close()
    except Exception:  # one that ignores GeneratorExit (a bug): the connection's cleanup goes on
        log.exception("closing %r failed (ignored)", awaitable)


class CloseConnection(Exception):
    """Raised by the dispatcher to end a connection without a response."""


class KafkaConnection(asyncio.Protocol):
    def __init__(self, runtime: BrokerRuntime, listener: ListenerSpec) -> None:
        self.runtime = runtime
        self.listener = listener
        self.frames = FrameBuffer(runtime.config["socket.request.max.bytes"],
                                  KEEP_FROM if runtime.fast_paths.kept_frames else None, runtime.read_buffer)
        self._drain = self.frames.drain
        self._dispatch = runtime.dispatcher.dispatch
        self._dispatch_all = runtime.dispatcher.dispatch_all
        # A SASL listener's connection: frames go through the authenticator until it completes.
        self.authenticator: Authenticator | None = None
        if listener.sasl is not None:
            self._dispatch = self._authenticating
            self._dispatch_all = self._authenticating_all
        self._is_closed = self._closed
        self._now = runtime.clock
        self.queue: collections.deque[ReceivedFrame] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.info: ConnectionInfo | None = None
        self.worker: asyncio.Task[None] | None = None
        # What the worker is to await first (a request that waits, or the admission), from when
        # the task is made until its first step takes it: a close in between discards it.
        self.handed: Awaitable[Any] | None = None
        self.closed = False
        self.admitted = False
        self.paused = False
        # True while the worker task runs (admission, a request that waits, the queue behind it):
        # frames then queue up; otherwise they are answered in place and the queue is empty.
        self.busy = True
        self.outgoing: list[Chunk] = []  # responses waiting for the next flush (the same list always)
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
        if self.listener.sasl is not None:
            wall_clock = self.runtime.wall_clock
            self.authenticator = Authenticator(self.listener.sasl, self.info.id, self._serves_api_versions,
                                               self._scram_credentials, lambda: int(wall_clock() * 1000))
        self.runtime.connections.add(self)
        self.last_activity = self._now()
        # Admission starts in place: with no module hooking accepts, or none that waits, the
        # connection is served from its first read on without a task.
        try:
            done, admitted = self.runtime.start_eagerly(self.runtime.admit(self.info))
        except Exception:
            log.exception("admitting %s failed; closing it", self._who())
            self.close()
            return
        if done:
            self._admitted(admitted)
        else:
            self.handed = admitted
            self.worker = self.runtime.loop.create_task(self._admit_then_serve())

    def data_received(self, data: bytes) -> None:
        if self.draining or self.closed:
            return
        self.last_activity = self._now()  # what the idle sweep looks at
        frames: list[ReceivedFrame] = []
        try:
            self._drain(data, frames)
        except FrameSizeError as exc:
            self._refuse_more(exc)
        self._received(frames)

    def _refuse_more(self, exc: FrameSizeError) -> None:
        log.warning("closing %s: %s", self._who(), exc)
        # Nothing more is read; requests that arrived whole before the bad size are still answered
        # in order (Kafka reads one request at a time, so it never even sees the bad size earlier).
        self.draining = True
        if self.transport is not None:
            self.transport.pause_reading()

    def _received(self, frames: list[ReceivedFrame]) -> None:
        """The frames a read completed: answered in place, or queued for the worker."""
        if frames:
            if self.outstanding or self._expired:
                frames = self._take_responses(frames)
            if self.busy:
                self._enqueue(frames)
            else:
                # Answer the frames of this read in place and in order, then write the answers in
                # one go. A request that waits goes to the worker, the frames after it to the queue.
                out = self.outgoing
                remaining = iter(frames)
                try:
                    pending = self._dispatch_all(self.info, remaining, out, self._is_closed)  # type: ignore[arg-type]
                except CloseConnection:
                    self.close()  # the answers to the requests before this one still go out
                    return
                if pending is not None:
                    self.busy = True
                    self.handed = pending
                    self.worker = self.runtime.loop.create_task(self._serve())
                    self._enqueue(list(remaining))
                elif self.closed:  # a handler closed it
                    return
                if out:  # not closed, so the transport is open: write here, not through _flush
                    if len(out) == 1:  # one answer from a fast path: no join to make
                        self.transport.write(out[0])  # type: ignore[union-attr]
                    else:
                        self.transport.writelines(out)  # type: ignore[union-attr]
                    out.clear()
        if self.draining and not self.busy:
            self.close()  # everything before the bad size is answered

    def _closed(self) -> bool:
        return self.closed

    # --- SASL (kafkapy.server.sasl.authenticator) ------------------------------------------

    def _scram_credentials(self, mechanism: str, user: str) -> ScramCredential | None:
        """The stored credential, from the module that keeps them (none without it)."""
        for module in self.runtime.modules:
            if SCRAM_CREDENTIALS in module.provides and isinstance(module, ScramCredentialsModule):
                return module.lookup(mechanism, user)
        return None

    def _serves_api_versions(self, version: int) -> bool:
        low, high = self.runtime.dispatcher.served_versions().get(ApiKey.API_VERSIONS, (0, -1))
        return low <= version <= high

    def _authenticating(self, conn: ConnectionInfo, frame: ReceivedFrame, out: list[Chunk]) -> Pending | None:
        """``Dispatcher.dispatch`` on a SASL listener: the authenticator answers the frame, or passes
        it to the dispatcher (ApiVersions, and everything once authenticated); CloseConnection when
        the authenticator fails, after its answer."""
        authenticator = self.authenticator
        assert authenticator is not None
        if authenticator.complete:  # a session with an end: in session, re-authenticating, or ended
            step = authenticator.receive(frame)
            if step.dispatch:
                return self.runtime.dispatcher.dispatch(conn, frame, out)
            if step.close and step.response is None:
                raise CloseConnection  # a session past its end: closed at once, as Kafka's SocketServer does
        elif authenticator.state is SaslState.FAILED:
            return None  # read before the failure: dropped while the close is delayed
        else:
            limit = self.runtime.config["sasl.server.max.receive.size"]
            if len(frame) > limit:
                log.info("Failed authentication with %s (Invalid receive (size = %d larger than %d))",
                         conn.id, len(frame), limit)
                raise CloseConnection
            step = authenticator.receive(frame)
            if step.dispatch:
                return self.runtime.dispatcher.dispatch(conn, frame, out)
        if step.response is not None:
            out.append(_SIZE.pack(len(step.response)))
            out.append(step.response)
        if authenticator.complete:  # this frame completed an exchange
            conn.principal = authenticator.principal
            if not authenticator.gating:  # the session has no end: from now on as any connection
                self._dispatch = self.runtime.dispatcher.dispatch
                self._dispatch_all = self.runtime.dispatcher.dispatch_all
        if step.close:
            self._close_after_failed_authentication()
        return None

    def _close_after_failed_authentication(self) -> None:
        """Kafka's connection.failed.authentication.delay.ms: read nothing more, send the answer,
        close a little later, so the client reads why before it sees the close."""
        delay_ms = self.runtime.config["connection.failed.authentication.delay.ms"]
        if not delay_ms:
            raise CloseConnection
        if self.transport is not None:
            self.transport.pause_reading()
        if self.outgoing and not self.flush_scheduled:
            self.flush_scheduled = True
            self.runtime.loop.call_soon(self._flush)
        self.runtime.loop.call_later(delay_ms / 1000, self.close)

    def _authenticating_all(self, conn: ConnectionInfo, frames: Iterator[ReceivedFrame], out: list[Chunk],
                            closed: Callable[[], bool]) -> Pending | None:
        """``Dispatcher.dispatch_all`` on a SASL listener: frame by frame through the authenticator,
        and the frames after the one that completes it through the dispatcher's own loop."""
        authenticator = self.authenticator
        assert authenticator is not None
        for frame in frames:
            if not authenticator.gating:
                rest = itertools.chain((frame,), frames)
                return self.runtime.dispatcher.dispatch_all(conn, rest, out, closed)
            pending = self._authenticating(conn, frame, out)
            if pending is not None or closed() or authenticator.state is SaslState.FAILED:
                return pending
        return None

    def _enqueue(self, frames: list[ReceivedFrame]) -> None:
        """Frames that wait for the worker; reading pauses while too many do."""
        self.queue.extend(frames)
        if len(self.queue) > MAX_QUEUED_FRAMES and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def _take_responses(self, frames: list[ReceivedFrame]) -> list[ReceivedFrame]:
        """Resolve the frames that answer the broker's own requests; the rest are requests."""
        requests = []
        for frame in frames:
            if len(frame) >= 4 and self._is_response(_SIZE.unpack_from(frame, 0)[0]):
                self._response_received(bytes(frame))
            else:
                requests.append(frame)
        return requests

    def eof_received(self) -> bool | None:
        return None  # close once the buffered requests are answered? Kafka closes at once.

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.runtime.connections.discard(self)
        worker = self.worker
        if worker is not None and not worker.done():
            worker.cancel()  # its answers have nowhere to go: a long-polling Fetch stops waiting
        if self.handed is not None:  # the worker never started (cancelled, or the loop stopped)
            handed, self.handed = self.handed, None
            discard(handed)
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

    def _admitted(self, admitted: bool) -> None:
        if not admitted:
            self.close()
            return
        self.admitted = True
        self.busy = False  # nothing can have arrived yet

    async def _admit_then_serve(self) -> None:
        admission, self.handed = self.handed, None
        assert admission is not None
        try:
            admitted = await admission
        except Exception:
            log.exception("admitting %s failed; closing it", self._who())
            admitted = False
        if not admitted:
            self.close()
            return
        self.admitted = True
        await self._serve()

    async def _serve(self) -> None:
        """The worker, while the connection is busy: finish the request that waits (``handed``),
        then serve the queue in order (awaiting what waits) until it is empty and answers are made
        in place again. A request left waiting when the connection closes is discarded, not dropped."""
        assert self.info is not None and self.transport is not None
        pending: Pending | None = self.handed
        self.handed = None
        dispatch, out, queue = self._dispatch, self.outgoing, self.queue
        try:
            while not self.closed:
                if pending is not None:
                    response = await pending
                    pending = None
                    if response is not None:
                        self._queue_output(response)
                    continue
                if not queue:
                    break
                frame = queue.popleft()
                if self.paused and not self.draining and len(queue) < MAX_QUEUED_FRAMES // 2:
                    self.paused = False
                    self.transport.resume_reading()
                pending = dispatch(self.info, frame, out)
                if out and not self.flush_scheduled:
                    self.flush_scheduled = True
                    self.runtime.loop.call_soon(self._flush)
        except CloseConnection:
            self.close()  # the answers to the requests before this one still go out
            return
        except Exception:  # a bug: never leave frames queued behind a dead worker
            log.exception("serving %s failed; closing it", self._who())
            self.close()
            return
        finally:
            self.busy = False
            if pending is not None:  # closed before it was awaited
                discard(pending)
        if self.draining:
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
            self._given_up(correlation_id)
            raise TimeoutError(f"no response to api key {api_key} within {timeout:.3f}s") from None
        except asyncio.CancelledError:
            # The waiter is gone (a replaced registration's pinger), not the client's answer: when
            # it comes it is still a response, to drop, never a request to serve.
            if future.cancelled() or not future.done():  # wait_for cancels it on the way out
                self._given_up(correlation_id)
            raise
        finally:
            self.outstanding.pop(correlation_id, None)

    def _given_up(self, correlation_id: int) -> None:
        """Remember an id whose answer may still come (the last MAX_EXPIRED of them)."""
        self._expired[correlation_id] = None
        if len(self._expired) > MAX_EXPIRED:
            del self._expired[next(iter(self._expired))]

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

    def _queue_output(self, frame: bytes | list[Chunk]) -> None:
        """Responses produced in one loop step leave in one write (one syscall, not one each);
        a handler that really waits lets the loop run the flush, so nothing sits behind it.
        A frame of several buffers (a ChunkedResponse) is queued as its buffers."""
        if isinstance(frame, list):
            self.outgoing.append(_SIZE.pack(frame_size(frame)))
            self.outgoing.extend(frame)
        else:
            self.outgoing.append(_SIZE.pack(len(frame)))
            self.outgoing.append(frame)
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.runtime.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self.flush_scheduled = False
        outgoing = self.outgoing
        if not outgoing:
            return
        transport = self.transport
        if transport is not None and not self.closed and not transport.is_closing():
            transport.writelines(outgoing)
            # A write is activity too, as in Kafka's Selector: an answer to a request that waited
            # (a long poll, a fault delay) leaves the client a whole idle timeout to send the next.
            self.last_activity = self._now()
        outgoing.clear()

    def idle_since(self, now: float, timeout: float) -> bool:
        """Whether the idle sweep should close this connection: open, not working on a request,
        and nothing received for ``timeout`` seconds."""
        return not self.closed and not self.busy and now - self.last_activity >= timeout

    def close(self) -> None:
        if not self.closed and self.transport is not None:
            self._flush()
            self.closed = True
            # Closed already (a TLS handshake's task cancelled as it completed): a second close
            # of a TLS transport forgets its protocol, and abort() could no longer let it go.
            if not self.transport.is_closing():
                self.transport.close()

    def abort(self) -> None:
        """Let the socket go now, without waiting for what is left to write or a TLS close_notify."""
        if self.transport is not None:
            self.closed = True
            self.transport.abort()

    def _who(self) -> str:
        return self.info.id if self.info is not None else "connection"


class BufferedKafkaConnection(KafkaConnection, asyncio.BufferedProtocol):
    """A KafkaConnection whose transport reads into its FrameBuffer's buffers (FastPaths.buffered_reads):
    a large frame's bytes straight into the body the log may keep, other reads into the read buffer
    the broker's connections share, instead of a fresh ``bytes`` each (kafkapy.protocol.framing).
    Every frame then takes the same way as through ``data_received``."""

    def __init__(self, runtime: BrokerRuntime, listener: ListenerSpec) -> None:
        super().__init__(runtime, listener)
        # asyncio asks for a buffer before every read: the FrameBuffer's own method answers it.
        self.get_buffer = self.frames.get_buffer  # type: ignore[method-assign]
        self._read_into = self.frames.buffer_updated

    def buffer_updated(self, nbytes: int) -> None:
        if self.draining or self.closed:
            return
        self.last_activity = self._now()  # what the idle sweep looks at
        frames: list[ReceivedFrame] = []
        try:
            self._read_into(nbytes, frames)
        except FrameSizeError as exc:
            self._refuse_more(exc)
        self._received(frames)
