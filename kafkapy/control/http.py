"""A small HTTP/1.1 server on asyncio streams, for a JSON API with a few dozen requests a test.

Theory of operation
-------------------
One task per connection reads a request head (request line and headers, at most
``MAX_HEAD_BYTES``), then exactly ``Content-Length`` bytes of body, or a chunked body (Go's
and Java's clients send one for a body of unknown length), at most ``MAX_BODY_BYTES``; hands an
``HttpRequest`` to the application and writes its ``HttpResponse``.
The connection is kept for the next request unless the client says ``Connection: close`` or
speaks HTTP/1.0, and closed after ``IDLE_TIMEOUT_S`` without one. A head or body that cannot
be read is answered 400 (413, 501) with a JSON error and the connection closed, since the
stream's framing can no longer be trusted; nothing the client sends ends the server.

No web framework: the standard library's http.server is threaded and blocking (it would run
beside the broker's loop, not on it), and a framework would be a dependency for a handful of
routes. The application (kafkapy.control.routes) sees parsed requests only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import attrs

__all__ = ["HttpRequest", "HttpResponse", "HttpServer", "json_error"]

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 64 * 1024  # request line and headers: far beyond what any client sends
MAX_BODY_BYTES = 64 * 1024 * 1024  # a seed file of tens of thousands of records fits
IDLE_TIMEOUT_S = 60.0  # a kept-alive connection with no next request is closed after this
READ_TIMEOUT_S = 30.0  # a head or body that stops arriving half way


@attrs.frozen
class HttpRequest:
    method: str
    path: str  # percent-decoded, without the query
    query: Mapping[str, str]  # the last value of each name
    headers: Mapping[str, str]  # names lower-cased
    body: bytes


@attrs.frozen
class HttpResponse:
    status: int
    body: bytes
    content_type: str = "application/json"

    @classmethod
    def json(cls, status: int, value: Any) -> HttpResponse:
        return cls(status, json.dumps(value).encode() + b"\n")


def json_error(status: int, message: str) -> HttpResponse:
    """The one error shape: ``{"error": "one line", "status": 400}``."""
    line = " ".join(message.split())  # one line, whatever the message held
    return HttpResponse.json(status, {"error": line, "status": status})


_METHOD = re.compile(r"[A-Z]{1,20}")


class _BadRequest(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


Application = Callable[[HttpRequest], Awaitable[HttpResponse]]


class HttpServer:
    """Serves ``application`` on ``host:port`` (port 0: ephemeral) on the running loop."""

    def __init__(self, application: Application) -> None:
        self._application = application
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen; answers the address bound (the port chosen, for port 0)."""
        self._server = await asyncio.start_server(self._serve_connection, host, port, limit=MAX_HEAD_BYTES)
        bound = self._server.sockets[0].getsockname()
        return str(bound[0]), int(bound[1])

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._server.wait_closed()
        self._server = None

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                try:
                    request, keep_alive = await self._read_request(reader, writer)
                except _BadRequest as bad:
                    await _write(writer, json_error(bad.status, str(bad)), keep_alive=False)
                    return
                if request is None:  # the client closed, or went idle
                    return
                response = await self._application(request)
                await _write(writer, response, keep_alive=keep_alive)
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away mid-request: nothing to answer
        except asyncio.CancelledError:
            # stop() ends the connection. The task ends normally, not cancelled: asyncio's
            # start_server (3.11) asks a finished connection task for its exception, which
            # re-raises a cancellation and logs it as an unhandled error.
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _read_request(self, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> tuple[HttpRequest | None, bool]:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT_S)
        except asyncio.TimeoutError:
            return None, False
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                raise _BadRequest(HTTPStatus.BAD_REQUEST, "the request head ended early") from None
            return None, False
        except asyncio.LimitOverrunError:
            raise _BadRequest(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                              f"the request head is over {MAX_HEAD_BYTES} bytes") from None
        method, target, version, headers = _parse_head(head)
        if headers.get("expect", "").lower() == "100-continue":
            # curl sends this for bodies over 1 KiB and waits a second for the go-ahead
            await _write_continue(writer)
        coding = headers.get("transfer-encoding", "").strip().lower()
        try:
            if coding == "chunked":
                body = await asyncio.wait_for(_read_chunked(reader), READ_TIMEOUT_S)
            elif coding:
                raise _BadRequest(HTTPStatus.NOT_IMPLEMENTED, f"transfer coding {coding!r} is not supported: "
                                                              "send Content-Length or chunked")
            else:
                body = await asyncio.wait_for(_read_sized(reader, headers), READ_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise _BadRequest(HTTPStatus.REQUEST_TIMEOUT, "the body stopped arriving") from None
        except asyncio.LimitOverrunError:
            raise _BadRequest(HTTPStatus.BAD_REQUEST, f"a chunk line is over {MAX_HEAD_BYTES} bytes") \
                from None
        split = urlsplit(target)
        connection = headers.get("connection", "").lower()
        keep_alive = version == "HTTP/1.1" and connection != "close"
        request = HttpRequest(method, unquote(split.path), dict(parse_qsl(split.query)), headers, body)
        return request, keep_alive


async def _read_sized(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    length_text = headers.get("content-length", "0")
    if not (length_text.isascii() and length_text.isdigit()):  # RFC 9110 8.6: 1*DIGIT
        raise _BadRequest(HTTPStatus.BAD_REQUEST, f"Content-Length {length_text!r} is not a number")
    length = int(length_text)
    if length > MAX_BODY_BYTES:
        raise _BadRequest(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                          f"the body of {length} bytes is over the {MAX_BODY_BYTES} bytes allowed")
    return await reader.readexactly(length) if length else b""


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    """A chunked body (RFC 9112 7.1), as Go's and Java's clients send a body of unknown length:
    hex size lines (extensions ignored), data, a zero size, then trailers, which are dropped."""
    body = bytearray()
    while True:
        line = await reader.readuntil(b"\r\n")
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise _BadRequest(HTTPStatus.BAD_REQUEST, f"not a chunk size: {size_text[:20]!r}") from None
        if size < 0 or len(body) + size > MAX_BODY_BYTES:
            raise _BadRequest(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                              f"the body is over the {MAX_BODY_BYTES} bytes allowed")
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return bytes(body)
        body += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise _BadRequest(HTTPStatus.BAD_REQUEST, "a chunk does not end with CRLF")


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    try:
        text = head.decode("latin-1")  # HTTP's header octets (RFC 9110 5.5)
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise _BadRequest(HTTPStatus.BAD_REQUEST, "the request head is not text") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not _METHOD.fullmatch(parts[0]) or parts[2] not in ("HTTP/1.0", "HTTP/1.1") \
            or not parts[1].startswith("/"):
        raise _BadRequest(HTTPStatus.BAD_REQUEST, f"not an HTTP/1.x request line: {lines[0][:100]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise _BadRequest(HTTPStatus.BAD_REQUEST, f"not a header line: {line[:100]!r}")
        headers[name.lower()] = value.strip()
    return parts[0], parts[1], parts[2], headers


async def _write(writer: asyncio.StreamWriter, response: HttpResponse, *, keep_alive: bool) -> None:
    reason = HTTPStatus(response.status).phrase
    head = (f"HTTP/1.1 {response.status} {reason}\r\nContent-Type: {response.content_type}\r\n"
            f"Content-Length: {len(response.body)}\r\nConnection: {'keep-alive' if keep_alive else 'close'}"
            "\r\n\r\n")
    writer.write(head.encode("latin-1") + response.body)
    await writer.drain()


async def _write_continue(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    await writer.drain()
