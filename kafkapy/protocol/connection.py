"""One Kafka connection's bookkeeping, without I/O: h11's model for Kafka's wire protocol.

Whoever writes a proxy, a client or a test server has the same chores on top of the codec:
splitting a byte stream into size-prefixed frames, writing the prefix, remembering which API and
version each correlation id was sent with (a response does not say, and its header version depends
on both), and refusing a frame over a limit. :class:`ClientConnection` and
:class:`ServerConnection` do them; the caller owns the socket.

Theory of operation. Bytes go in through ``receive_data`` and come out as events, in order: a
client gets :class:`ResponseReceived` (the decoded response with the request it answers), a server
gets the codec's :class:`~kafkapy.protocol.codec.Request`. Calls go out as bytes:
``send_request`` and ``send_response`` return the whole frame, size prefix included. Frames are
split by :class:`~kafkapy.protocol.framing.FrameBuffer`, the broker's own splitter, so a partial
frame waits for its bytes, and a size over ``max_frame_bytes`` is refused as soon as its four size
bytes arrive. Records fields stay lazy, as the codec leaves them.

A Kafka connection answers in order: a broker handles one request of a connection at a time, and
Kafka's NetworkClient requires each response's correlation id to be its oldest in-flight request's
(AbstractResponse.parseResponse throws CorrelationIdMismatchException otherwise). Both objects keep
that queue, so a response to the wrong request is an error, not a silent mismatch. A Produce with
``acks=0`` gets no response (Kafka's expectResponse is false for it), so it never joins the queue.

Errors. Everything this module refuses is a :class:`ProtocolError`, with the Kafka error code the
situation maps to; the codec's DecodeError, when it is the cause, is its ``__cause__``. Bytes from the
peer that cannot be read close the connection (Kafka closes it too: a frame that does not parse
leaves the stream's position unknown); calls the caller should not make (a response to a request
not received) raise without closing it. The states are a table, :data:`TRANSITIONS`.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Mapping
from typing import Any, NamedTuple

from kafkapy.errors import DecodeError, ErrorCode, KafkaPyError
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.catalogue import api_name, catalogue
from kafkapy.protocol.codec import (
    Request,
    Response,
    UnsupportedVersionError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafkapy.protocol.framing import FrameBuffer, FrameSizeError, ReceivedFrame
from kafkapy.protocol.header import peek_request_header
from kafkapy.protocol.schema import Body

__all__ = [
    "DEFAULT_CLIENT_MAX_FRAME_BYTES",
    "DEFAULT_SERVER_MAX_FRAME_BYTES",
    "TRANSITIONS",
    "ClientConnection",
    "ConnectionState",
    "ProtocolError",
    "ResponseReceived",
    "SentRequest",
    "ServerConnection",
    "StateInput",
]

#: Kafka's socket.request.max.bytes default: the largest request a broker reads.
DEFAULT_SERVER_MAX_FRAME_BYTES = 104_857_600
#: librdkafka's receive.message.max.bytes default: the largest response a client reads (Kafka's
#: Java client sets no limit; fetch.max.bytes, 50 MiB by default, keeps Fetch responses below it).
DEFAULT_CLIENT_MAX_FRAME_BYTES = 100_000_000
#: Kafka's clients count correlation ids from 0 and wrap before the last 8 ints, which
#: SaslClientAuthenticator reserves for its own requests (MIN_RESERVED_CORRELATION_ID).
_CORRELATION_WRAP = 2**31 - 8
_SIZE_BYTES = 4
Buffer = bytes | bytearray | memoryview


class ProtocolError(KafkaPyError):
    """The connection cannot go on as asked: the one exception this module raises for the peer's
    bytes (``remote``) or a call out of turn. ``error_code`` is what Kafka would name it;
    ``events`` holds what the same ``receive_data`` decoded before the bad frame."""

    def __init__(self, reason: str, *, error_code: ErrorCode = ErrorCode.CORRUPT_MESSAGE,
                 remote: bool = True) -> None:
        self.reason = reason
        self.error_code = error_code
        self.remote = remote
        self.events: list[Any] = []
        super().__init__(reason)


class ConnectionState(enum.Enum):
    """Where a connection is; :data:`TRANSITIONS` says what moves it."""

    OPEN = "open"  # bytes may flow both ways
    CLOSED = "closed"  # closed by the caller, by the peer's end of stream, or by the peer's bad bytes


class StateInput(enum.Enum):
    """What moves a connection between states: the keys of :data:`TRANSITIONS` with the state."""

    SEND = "send"
    RECEIVE = "receive"
    END_OF_STREAM = "take the end of the stream"
    PEER_ERROR = "take an error from the peer"
    CLOSE = "close"


#: (state, what happens) -> the next state. A pair not listed is refused with ProtocolError.
TRANSITIONS: Mapping[tuple[ConnectionState, StateInput], ConnectionState] = {
    (ConnectionState.OPEN, StateInput.SEND): ConnectionState.OPEN,
    (ConnectionState.OPEN, StateInput.RECEIVE): ConnectionState.OPEN,
    (ConnectionState.OPEN, StateInput.END_OF_STREAM): ConnectionState.CLOSED,
    (ConnectionState.OPEN, StateInput.PEER_ERROR): ConnectionState.CLOSED,
    (ConnectionState.OPEN, StateInput.CLOSE): ConnectionState.CLOSED,
    (ConnectionState.CLOSED, StateInput.CLOSE): ConnectionState.CLOSED,
}


class SentRequest(NamedTuple):
    """What a client remembers of a request until its response comes: the response says none of it."""

    api_key: int
    api_version: int
    correlation_id: int


class ResponseReceived(NamedTuple):
    """A client's event: one decoded response and the request it answers."""

    request: SentRequest
    response: Response


def _expects_response(api_key: int, body: Mapping[str, Any]) -> bool:
    """False for Produce with acks=0, which a broker never answers (Kafka's expectResponse)."""
    return not (api_key == ApiKey.PRODUCE and body.get("acks") == 0)


def _framed(frame: bytes) -> bytes:
    return len(frame).to_bytes(_SIZE_BYTES, "big") + frame


class _Connection:
    """What both ends share: the state table, the frame splitter and its limit."""

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.state = ConnectionState.OPEN
        self.error: ProtocolError | None = None  # the peer error that closed the connection
        # keep_from=None: every frame is handed out as bytes, which the decoders read fastest
        self._frames = FrameBuffer(max_frame_bytes, keep_from=None)

    def _move(self, happening: StateInput) -> None:
        next_state = TRANSITIONS.get((self.state, happening))
        if next_state is None:
            why = f": {self.error.reason}" if self.error is not None else ""
            raise ProtocolError(f"cannot {happening.value} on a closed connection{why}",
                                error_code=ErrorCode.NETWORK_EXCEPTION, remote=False)
        self.state = next_state

    def _fail(self, error: ProtocolError) -> ProtocolError:
        self._move(StateInput.PEER_ERROR)
        self.error = error
        return error

    def close(self) -> None:
        """The caller is done with the connection: every later send or receive is refused."""
        self._move(StateInput.CLOSE)

    @property
    def buffered_bytes(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return self._frames.pending

    def _split(self, data: Buffer) -> tuple[list[ReceivedFrame], ProtocolError | None]:
        """Whole frames of ``data``, and the error of a frame size refused after them; ``b""`` is the
        end of the stream, as in h11. The caller decodes the frames, then raises ``_fail`` of the
        first error."""
        if not data:
            pending = self._frames.pending
            self._move(StateInput.END_OF_STREAM)
            if pending:
                raise self._peer_gone(f"the stream ended {pending} bytes into a frame")
            self._end_of_stream()
            return [], None
        self._move(StateInput.RECEIVE)
        frames: list[ReceivedFrame] = []
        try:
            self._frames.drain(data, frames)
        except FrameSizeError as exc:
            return frames, ProtocolError(f"frame size {exc.size} is {'negative' if exc.size < 0 else 'over'} "
                                         f"max_frame_bytes ({self.max_frame_bytes})")
        return frames, None

    def _peer_gone(self, reason: str) -> ProtocolError:
        error = self.error = ProtocolError(reason, error_code=ErrorCode.NETWORK_EXCEPTION)
        return error

    def _end_of_stream(self) -> None:
        """Hook: what an end of stream with no partial frame leaves undone."""


class ClientConnection(_Connection):
    """The client's end: requests out, responses in, each response paired with its request."""

    def __init__(self, client_id: str | None = "kafkapy", *,
                 max_frame_bytes: int = DEFAULT_CLIENT_MAX_FRAME_BYTES) -> None:
        super().__init__(max_frame_bytes)
        self.client_id = client_id
        self._next_correlation_id = 0
        self._in_flight: deque[SentRequest] = deque()

    @property
    def in_flight(self) -> tuple[SentRequest, ...]:
        """Requests sent and not yet answered, oldest first (acks=0 Produce requests are never here)."""
        return tuple(self._in_flight)

    def send_request(self, api_key: int, api_version: int, body: Mapping[str, Any], *,
                     client_id: str | None = None) -> bytes:
        """The frame to write for one request, size prefix included, under the next correlation id.
        A body the codec refuses raises its EncodeError and changes nothing."""
        self._move(StateInput.SEND)
        correlation_id = self._next_correlation_id
        frame = encode_request(api_key, api_version, correlation_id,
                               self.client_id if client_id is None else client_id, body)
        self._next_correlation_id = (correlation_id + 1) % _CORRELATION_WRAP
        if _expects_response(api_key, body):
            self._in_flight.append(SentRequest(int(api_key), api_version, correlation_id))
        return _framed(frame)

    def receive_data(self, data: Buffer) -> list[ResponseReceived]:
        """The responses ``data`` completes, in order; ``b""`` says the peer closed the stream.
        Raises ProtocolError, and closes the connection, for a frame over ``max_frame_bytes``, a
        response to no request or to one but the oldest, or a response that does not decode; the
        responses before it in ``data`` are then on the error's ``events``."""
        events: list[ResponseReceived] = []
        frames, too_large = self._split(data)
        try:
            for frame in frames:
                events.append(self._response(frame))
        except ProtocolError as exc:
            exc.events = events
            raise self._fail(exc) from exc.__cause__
        if too_large is not None:
            too_large.events = events
            raise self._fail(too_large)
        return events

    def _response(self, frame: ReceivedFrame) -> ResponseReceived:
        if len(frame) < 4:
            raise ProtocolError(f"a response of {len(frame)} bytes has no correlation id")
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        if not self._in_flight:
            raise ProtocolError(f"a response with correlation id {correlation_id} came when no request "
                                "is waiting for one")
        request = self._in_flight[0]
        if correlation_id != request.correlation_id:
            known = any(sent.correlation_id == correlation_id for sent in self._in_flight)
            raise ProtocolError(
                f"a response with correlation id {correlation_id} came where the oldest request's "
                f"({api_name(request.api_key)} v{request.api_version}, correlation id "
                f"{request.correlation_id}) was due"
                + (": responses must come in request order" if known else ", and no request has that id"))
        try:
            response = decode_response(frame, request.api_key, request.api_version)
        except DecodeError as exc:
            raise ProtocolError(f"the response to correlation id {correlation_id} does not decode: {exc}",
                                error_code=exc.error_code) from exc
        self._in_flight.popleft()
        return ResponseReceived(request, response)

    def _end_of_stream(self) -> None:
        if self._in_flight:
            waiting, oldest = len(self._in_flight), self._in_flight[0]
            raise self._peer_gone(f"the stream ended with {waiting} request{'s' if waiting != 1 else ''} "
                                  f"unanswered (the oldest correlation id {oldest.correlation_id})")


class ServerConnection(_Connection):
    """The broker's end: requests in, responses out, each in the order its request came."""

    def __init__(self, *, max_frame_bytes: int = DEFAULT_SERVER_MAX_FRAME_BYTES) -> None:
        super().__init__(max_frame_bytes)
        self._unanswered: deque[Request] = deque()

    @property
    def unanswered(self) -> tuple[Request, ...]:
        """Requests received that still owe a response, oldest first."""
        return tuple(self._unanswered)

    def receive_data(self, data: Buffer) -> list[Request]:
        """The requests ``data`` completes, decoded, in order; ``b""`` says the peer closed the
        stream. Raises ProtocolError, and closes the connection, for a frame over
        ``max_frame_bytes`` or a request that does not decode (an unknown API key or version
        included); the requests before it are then on the error's ``events``."""
        events: list[Request] = []
        frames, too_large = self._split(data)
        for frame in frames:
            try:
                request = self._decoded(frame)
            except DecodeError as exc:
                error = ProtocolError(f"a request does not decode: {exc}", error_code=exc.error_code)
                error.events = events
                raise self._fail(error) from exc
            if _expects_response(request.api_key, request.body):
                self._unanswered.append(request)
            events.append(request)
        if too_large is not None:
            too_large.events = events
            raise self._fail(too_large)
        return events

    @staticmethod
    def _decoded(frame: ReceivedFrame) -> Request:
        """The request, or DecodeError. An ApiVersions request at a version the catalogue lacks is
        taken as Kafka takes it (RequestContext.isUnsupportedApiVersionsRequest): its header is read
        and its body is not (a client newer than the server may have changed it), so the server can
        answer UNSUPPORTED_VERSION at v0 and the client retry at a lower version."""
        try:
            return decode_request(frame)
        except UnsupportedVersionError as exc:
            if exc.api_key != ApiKey.API_VERSIONS:
                raise
        header = peek_request_header(frame)
        return Request(header.api_key, header.api_version, header.correlation_id, header.client_id, Body(),
                       0, header.header_version)

    def send_response(self, request: Request, body: Mapping[str, Any]) -> bytes:
        """The frame to write for the response to ``request``, size prefix included, at the
        request's version and header version. ``request`` must be the oldest unanswered one. An
        ApiVersions request at a version the catalogue lacks is answered at v0, as Kafka answers it
        (with ``error_code`` UNSUPPORTED_VERSION and the versions the server has)."""
        self._move(StateInput.SEND)
        if not self._unanswered or self._unanswered[0] is not request:
            due = self._unanswered[0] if self._unanswered else None
            raise ProtocolError(
                f"no response is due to {api_name(request.api_key)} v{request.api_version} (correlation id "
                f"{request.correlation_id}): "
                + (f"the oldest unanswered request is correlation id {due.correlation_id}" if due
                   else "no request is waiting for one"), error_code=ErrorCode.INVALID_REQUEST, remote=False)
        version = request.api_version
        if request.api_key == ApiKey.API_VERSIONS and version not in catalogue()[request.api_key].versions:
            version = 0
        frame = encode_response(request.api_key, version, request.correlation_id, body)
        self._unanswered.popleft()
        return _framed(frame)
