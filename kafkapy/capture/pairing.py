"""Pairing requests with responses, so each response decodes with the API key
and version of the request it answers (a response does not carry them).

Kafka answers a connection's requests in the order they were sent, each
response echoing its request's correlation id. So a response is matched by
correlation id; requests older than the matched one that are still waiting
will never be answered (acks=0 Produce, or a response the capture lost) and
are reported as such. Order is the fallback only for requests whose
correlation id could not be read (a frame cut before its header ended).
"""

from __future__ import annotations

import importlib
import os
import struct
from collections.abc import Container, Iterable, Iterator
from typing import BinaryIO, Literal, NamedTuple, Protocol, cast

from kafkapy.capture.events import Unframed
from kafkapy.capture.frames import Frame, FrameEvent, FrameReader
from kafkapy.capture.tcp import DEFAULT_KAFKA_PORTS, Connection, ConnectionClosed
from kafkapy.errors import DecodeError
from kafkapy.protocol.api_keys import ApiKey

__all__ = ["Exchange", "ExchangeStatus", "Pairer", "ProtocolDecoder", "pair_frames", "read_exchanges"]

# Requests one connection may have waiting before the oldest is given up as
# unanswered: far above max.in.flight.requests.per.connection (5 by default),
# so only a client sending acks=0 Produce requests ever reaches it.
_MAX_PENDING = 1024

# Requests the consumer coordinator sends from the broker to a client (Ping,
# StopFetcher, StartFetcher): on the server's side of a connection, a frame
# that parses as a request with one of these keys is one of them.
SERVER_INITIATED_API_KEYS = frozenset({ApiKey.PING, ApiKey.STOP_FETCHER, ApiKey.START_FETCHER})

ExchangeStatus = Literal[
    "ok",  # request and response both decoded
    "empty_response",  # the broker answered with only a correlation id (an unknown or unsupported request)
    "no_response",  # the connection ended, or a later request was answered, with none for this one
    "orphan_response",  # a response to a request the capture does not have
    "truncated",  # the capture lost part of a frame, so it could not be decoded in full
    "error",  # a complete frame that does not decode
]


_I32 = struct.Struct(">i")
# Builds a named tuple from all its fields without the class's Python-level __new__
_new_tuple = tuple.__new__


class RequestHeaderLike(Protocol):
    @property
    def api_key(self) -> int: ...
    @property
    def api_version(self) -> int: ...
    @property
    def correlation_id(self) -> int: ...
    @property
    def client_id(self) -> str | None: ...


class RequestLike(RequestHeaderLike, Protocol):
    @property
    def body(self) -> object: ...  # a Body, or whatever the decoder makes of it (rows: JSON text)
    @property
    def trailing_bytes(self) -> int: ...


class ResponseLike(Protocol):
    @property
    def correlation_id(self) -> int: ...
    @property
    def body(self) -> object: ...


class ProtocolDecoder(Protocol):
    """The three decoders of kafkapy.protocol that pairing relies on. Pairing reads only the
    header fields of what they return, so the bodies may take any form (kafkapy.capture.rows
    decodes them straight to JSON)."""

    def decode_request_header(self, frame_body: bytes) -> RequestHeaderLike: ...
    def decode_request(self, frame_body: bytes) -> RequestLike: ...
    def decode_response(self, frame_body: bytes, api_key: int, api_version: int) -> ResponseLike: ...


def _default_decoder() -> ProtocolDecoder:
    # Imported when first needed: the capture layers below pairing work
    # without the protocol package.
    module = importlib.import_module("kafkapy.protocol")
    for name in ("decode_request_header", "decode_request", "decode_response"):
        if not hasattr(module, name):
            raise ImportError(f"kafkapy.protocol has no {name}()")
    return cast(ProtocolDecoder, module)


class Exchange(NamedTuple):
    """A request and its response, each as frame and decoded message.

    A named tuple, immutable like Frame and for the same reason: one is made
    per exchange, and a tuple is the cheapest immutable object to build.
    """

    conn: Connection
    status: ExchangeStatus
    request_frame: Frame | None
    response_frame: Frame | None
    header: RequestHeaderLike | None = None  # decodes even for unknown API keys
    request: RequestLike | None = None
    response: ResponseLike | None = None
    request_error: DecodeError | None = None
    response_error: DecodeError | None = None
    paired_by: Literal["correlation-id", "order"] | None = None
    # Unanswered requests only: how the connection ended before a response came ("fin", "rst",
    # "idle", "reused"), or None when the capture simply stops first. A client that hangs up with
    # requests in flight is normal (librdkafka drops its bootstrap connection so), not a loss.
    ended_by: str | None = None
    # Unanswered requests only: bytes the capture lost from the server's stream after the
    # request was sent, as (stream offset, byte count) of the latest such gap: the response may
    # have been among them. None when no loss is proven there.
    lost_after: tuple[int, int] | None = None

    @property
    def api_key(self) -> int | None:
        if self.header is not None:
            return self.header.api_key
        return self.request_frame.api_key if self.request_frame is not None else None

    @property
    def api_version(self) -> int | None:
        if self.header is not None:
            return self.header.api_version
        return self.request_frame.api_version if self.request_frame is not None else None

    @property
    def correlation_id(self) -> int | None:
        if self.header is not None:
            return self.header.correlation_id
        frame = self.request_frame or self.response_frame
        return frame.correlation_id if frame is not None else None

    @property
    def server_initiated(self) -> bool:
        """A request the broker sent to the client (the consumer coordinator's
        Ping, StopFetcher and StartFetcher), answered by the client."""
        return self.request_frame is not None and not self.request_frame.from_client

    @property
    def latency(self) -> float | None:
        """Seconds from the request's last byte to the response's first."""
        if self.request_frame is None or self.response_frame is None:
            return None
        return self.response_frame.ts - self.request_frame.end_ts


# A request waiting for its response: (frame, header, request, error, api_key, api_version).
# A plain tuple, read by unpacking: one is made per request, and a tuple display costs
# 0.06 us where tuple.__new__ of a named tuple costs 0.16 (measured, Python 3.11).
_Pending = tuple[
    Frame, RequestHeaderLike | None, RequestLike | None, DecodeError | None, int | None, int | None
]


class Pairer:
    """Feeds frame events; returns an Exchange for each request answered or
    given up on, and for each response without a request.

    ``bodies``: the API keys whose request and response bodies are decoded
    (None, the default: all). For the others only the request header is
    decoded, which is most of the saving when only headers are wanted:
    their exchanges carry no ``request`` or ``response``, and their status
    says whether the frames were complete and the header readable, not
    whether the bodies would decode.
    """

    def __init__(
        self, decoder: ProtocolDecoder | None = None, *, bodies: Container[int] | None = None
    ) -> None:
        self.decoder = decoder if decoder is not None else _default_decoder()
        self.bodies = bodies
        # per connection id: correlation id (None if unreadable) -> waiting request, oldest first
        self._pending: dict[int, dict[int | None, list[_Pending]]] = {}
        # per connection id that ever had two requests waiting under one correlation id (rare): the
        # requests in _pending beyond the first of their id, so the requests waiting are
        # len(_pending[id]) plus this, with no count kept per request. Without an entry, every id
        # waiting came with its one request, so _pending[id] lists them oldest first.
        self._extra: dict[int, int] = {}
        # per connection id: correlation id -> server-initiated request awaiting the client's answer
        self._server_pending: dict[int, dict[int, _Pending]] = {}
        # per (connection id, from the client?): the latest bytes lost from that stream, as
        # (capture time they were found missing, stream offset, byte count) (``lost``)
        self._lost: dict[tuple[int, bool], tuple[float, int, int]] = {}

    def lost(self, event: Unframed) -> None:
        """Note stream bytes the capture does not have: they may have held the answer to a
        request sent the other way before they were found missing, which then says so when it
        is given up (``Exchange.lost_after``)."""
        conn = event.conn
        if event.reason == "missing" and event.length:
            self._lost[(conn.id, conn.from_client(event.side))] = (event.ts, event.offset, event.length)

    def feed(self, event: FrameEvent) -> list[Exchange]:
        out: list[Exchange] = []
        if isinstance(event, Frame):
            if event.from_client:
                self.add_request(event, out)
            else:
                self.add_response(event, out)
        elif isinstance(event, ConnectionClosed):
            self._extra.pop(event.conn.id, None)
            ended_by = None if event.reason == "capture-end" else event.reason
            for waiting in self._pending.pop(event.conn.id, {}).values():
                out.extend(self._unanswered(p, ended_by) for p in waiting)
            out.extend(
                self._unanswered(p, ended_by) for p in self._server_pending.pop(event.conn.id, {}).values()
            )
            if self._lost:
                self._lost.pop((event.conn.id, False), None)
                self._lost.pop((event.conn.id, True), None)
            out.sort(key=lambda x: x.request_frame.offset if x.request_frame else 0)
        elif isinstance(event, Unframed):
            self.lost(event)
        return out

    def finish(self) -> list[Exchange]:
        out: list[Exchange] = []
        for pending in self._pending.values():
            for waiting in pending.values():
                out.extend(self._unanswered(p) for p in waiting)
        for server_pending in self._server_pending.values():
            out.extend(self._unanswered(p) for p in server_pending.values())
        self._pending.clear()
        self._extra.clear()
        self._server_pending.clear()
        self._lost.clear()
        return out

    def add_request(self, frame: Frame, out: list[Exchange]) -> None:
        """``feed`` for a frame from the client: the exchanges it settles go to ``out``."""
        body = frame.body
        conn_id = frame.conn.id
        server_pending = self._server_pending.get(conn_id) if self._server_pending else None
        if server_pending and len(body) >= 4:
            answered = int.from_bytes(body[:4], "big", signed=True)
            asked = server_pending.get(answered)
            if asked is not None and self._client_answer(asked, frame, out):
                del server_pending[answered]
                return
        header: RequestHeaderLike | None = None
        request: RequestLike | None = None
        error: DecodeError | None = None
        bodies = self.bodies
        if bodies is not None and (
            not bodies or len(body) < 2 or int.from_bytes(body[:2], "big", signed=True) not in bodies
        ):
            try:  # kafkapy.protocol's is its one header peek
                header = self.decoder.decode_request_header(body)
            except DecodeError as exc:
                error = exc
        else:
            try:
                # a decoded request carries its header's fields: one pass over the header, not two
                request = self.decoder.decode_request(body)
                header = request
            except DecodeError as exc:
                error = exc
                try:
                    header = self.decoder.decode_request_header(body)
                except DecodeError:
                    header = None
        if header is not None:
            api_key: int | None = header.api_key
            api_version: int | None = header.api_version
            corr: int | None = header.correlation_id
        else:
            api_key, api_version, corr = frame.api_key, frame.api_version, frame.correlation_id
        pending = self._pending.get(conn_id)
        if pending is None:
            pending = self._pending[conn_id] = {}
        entry: _Pending = (frame, header, request, error, api_key, api_version)
        same = pending.get(corr)
        if same is None:
            pending[corr] = [entry]
        else:
            same.append(entry)
            self._extra[conn_id] = self._extra.get(conn_id, 0) + 1
        if len(pending) > _MAX_PENDING or (
            self._extra and len(pending) + self._extra.get(conn_id, 0) > _MAX_PENDING
        ):
            oldest = min((w[0] for w in pending.values() if w), key=lambda p: p[0].offset)
            self._take(pending, oldest)
            out.append(self._unanswered(oldest))

    def _take(self, pending: dict[int | None, list[_Pending]], entry: _Pending) -> None:
        frame, header = entry[0], entry[1]
        corr = header.correlation_id if header is not None else frame.correlation_id
        waiting = pending[corr]
        waiting.remove(entry)
        if not waiting:
            del pending[corr]
        else:
            self._extra[frame.conn.id] -= 1  # the entry stays: the ids' order no longer tells age

    def _client_answer(self, asked: _Pending, frame: Frame, out: list[Exchange]) -> bool:
        """A client frame answering a server-initiated request, if it decodes as that answer."""
        request_frame, header, request, _, api_key, api_version = asked
        assert api_key is not None and api_version is not None
        try:
            response = self.decoder.decode_response(frame.body, api_key, api_version)
        except DecodeError:
            return False
        if getattr(response, "trailing_bytes", 0):
            return False
        out.append(
            Exchange(frame.conn, "ok", request_frame, frame, header, request, response,
                     None, None, "correlation-id")
        )  # fmt: skip
        return True

    def _server_request(self, frame: Frame) -> bool:
        """Is this server-side frame a request the broker sends (Ping, StopFetcher, StartFetcher)?"""
        body = frame.body
        if len(body) < 8 or int.from_bytes(body[:2], "big", signed=True) not in SERVER_INITIATED_API_KEYS:
            return False
        try:
            header = self.decoder.decode_request_header(body)
            request = self.decoder.decode_request(body)
        except DecodeError:
            return False
        self._server_pending.setdefault(frame.conn.id, {})[header.correlation_id] = (
            frame,
            header,
            request,
            None,
            header.api_key,
            header.api_version,
        )
        return True

    def add_response(self, frame: Frame, out: list[Exchange]) -> None:
        """``feed`` for a frame from the server: the exchanges it settles go to ``out``."""
        body = frame.body
        conn_id = frame.conn.id
        pending = self._pending.get(conn_id)
        corr = _I32.unpack_from(body)[0] if len(body) >= 4 else None
        if pending is None:
            pending = {}
            same = None
        else:
            same = pending.get(corr) if corr is not None else None
            if (
                same is not None
                and len(same) == 1
                and (len(pending) == 1 or (conn_id not in self._extra and next(iter(pending)) == corr))
            ):
                # The usual case: the one waiting request has this correlation id, or (pipelining)
                # the oldest does: with no entry in _extra, the first id waiting is the oldest
                # request's, so nothing waiting was sent before it.
                del pending[corr]
                out.append(self._exchange(same[0], frame, "correlation-id"))
                return
        paired_by: Literal["correlation-id", "order"] | None = None
        if same:
            match: _Pending | None = same[0]
            paired_by = "correlation-id"
        elif self._server_request(frame):
            return
        elif pending.get(None):
            match = pending[None][0]
            paired_by = "order"
        else:
            match = None
        if match is None:
            status: ExchangeStatus = "truncated" if frame.truncated else "orphan_response"
            out.append(Exchange(frame.conn, status, None, frame))
            return
        # Responses come in request order: anything sent before the match
        # and still waiting will never be answered.
        for older in sorted(
            (p for w in pending.values() for p in w if p[0].offset < match[0].offset),
            key=lambda p: p[0].offset,
        ):
            self._take(pending, older)
            out.append(self._unanswered(older))
        self._take(pending, match)
        out.append(self._exchange(match, frame, paired_by))

    def _exchange(
        self, req: _Pending, frame: Frame, paired_by: Literal["correlation-id", "order"] | None
    ) -> Exchange:
        request_frame, header, request, error, api_key, api_version = req
        response: ResponseLike | None = None
        response_error: DecodeError | None = None
        if len(frame.body) == 4 and not frame.truncated:
            # KIP-35's answer to a request the broker cannot handle: the
            # correlation id and nothing else. Not a decode error.
            status: ExchangeStatus = "empty_response"
        elif api_key is None or api_version is None:
            status = "truncated" if request_frame.truncated else "error"
        elif request is None and error is None:
            # A request decoded as far as its header only (see ``bodies``): so is its response.
            status = "truncated" if request_frame.truncated or frame.truncated else "ok"
        else:
            try:
                response = self.decoder.decode_response(frame.body, api_key, api_version)
                # _status, with its usual answer inlined
                status = "ok" if error is None else _status(request_frame, error, frame, None)
            except DecodeError as exc:
                response_error = exc
                status = _status(request_frame, error, frame, response_error)
        # Exchange's fields in full, without its Python-level __new__ (a tenth of the exchange's cost)
        return _new_tuple(Exchange, (frame.conn, status, request_frame, frame, header, request, response,
                                     error, response_error, paired_by, None, None))  # fmt: skip

    def _unanswered(self, req: _Pending, ended_by: str | None = None) -> Exchange:
        request_frame, header, request, error, _, _ = req
        status: ExchangeStatus = "no_response"
        if error is not None:
            status = "truncated" if request_frame.truncated or error.truncated else "error"
        elif request is None and request_frame.truncated:
            status = "truncated"  # decoded as far as its header only, which the cut spared
        lost_after = None
        if self._lost:
            # the stream the answer travels on: the server's, or the client's for a server-initiated one
            lost = self._lost.get((request_frame.conn.id, not request_frame.from_client))
            # found missing after the request's last byte went out: they may have been sent after it
            if lost is not None and lost[0] >= request_frame.end_ts:
                lost_after = lost[1:]
        return Exchange(
            request_frame.conn, status, request_frame, None, header, request, None, error,
            ended_by=ended_by, lost_after=lost_after,
        )  # fmt: skip


def _status(
    request_frame: Frame,
    request_error: DecodeError | None,
    response_frame: Frame,
    response_error: DecodeError | None,
) -> ExchangeStatus:
    if request_error is None and response_error is None:
        return "ok"
    if request_frame.truncated or response_frame.truncated:
        return "truncated"
    return "error"


def pair_frames(events: Iterable[FrameEvent], pairer: Pairer | None = None) -> Iterator[Exchange]:
    """Exchanges from a stream of frame events, then the requests left unanswered."""
    pairer = pairer or Pairer()
    for event in events:
        yield from pairer.feed(event)
    yield from pairer.finish()


def read_exchanges(
    source: str | os.PathLike[str] | BinaryIO,
    *,
    kafka_ports: Iterable[int] = DEFAULT_KAFKA_PORTS,
    decoder: ProtocolDecoder | None = None,
) -> Iterator[Exchange]:
    """Every request/response exchange in a capture file, in capture order."""
    return pair_frames(FrameReader(source, kafka_ports=kafka_ports), Pairer(decoder))
