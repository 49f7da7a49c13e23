"""A tiny blocking Kafka client over a plain socket, for the server tests.

Tests are not a package: pytest puts this directory on sys.path, so the test
modules import this as ``server_wire``.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Mapping
from typing import Any

from kafkapy.protocol import Response, decode_response, encode_request

TIMEOUT = 5.0
CLIENT_ID = "kafkapy-tests"
SIZE = struct.Struct(">i")


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def frame(body: bytes) -> bytes:
    return SIZE.pack(len(body)) + body


def request_frame(api_key: int, api_version: int, correlation_id: int,
                  body: Mapping[str, Any] | None = None) -> bytes:
    """A whole frame (size prefix included) for a request the codec knows."""
    return frame(encode_request(api_key, api_version, correlation_id, CLIENT_ID, body or {}))


def raw_header(api_key: int, api_version: int, correlation_id: int, rest: bytes = b"") -> bytes:
    """A frame body for any key/version, even ones no spec defines: header v1 with client id."""
    client = CLIENT_ID.encode()
    return struct.pack(">hhih", api_key, api_version, correlation_id, len(client)) + client + rest


class Closed(Exception):
    """The broker closed the connection."""


class KafkaSocket:
    def __init__(self, address: str, *, timeout: float = TIMEOUT,
                 ssl_context: ssl.SSLContext | None = None, server_hostname: str | None = None) -> None:
        host, port = split_address(address)
        sock = socket.create_connection((host, port), timeout=timeout)
        if ssl_context is not None:
            sock = ssl_context.wrap_socket(sock, server_hostname=server_hostname or host)
        self.sock = sock
        self.next_correlation_id = 1

    def __enter__(self) -> KafkaSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def settimeout(self, timeout: float) -> None:
        self.sock.settimeout(timeout)

    # --- sending ----------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_body(self, body: bytes) -> None:
        self.sock.sendall(frame(body))

    def send(self, api_key: int, api_version: int, body: Mapping[str, Any] | None = None,
             correlation_id: int | None = None) -> int:
        if correlation_id is None:
            correlation_id = self.next_correlation_id
            self.next_correlation_id += 1
        self.send_raw(request_frame(api_key, api_version, correlation_id, body))
        return correlation_id

    # --- receiving --------------------------------------------------------------------------

    def _read_exactly(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            try:
                chunk = self.sock.recv(n - len(data))
            except (ConnectionResetError, BrokenPipeError, ssl.SSLError) as exc:
                raise Closed(f"connection reset after {len(data)} of {n} bytes") from exc
            if not chunk:
                raise Closed(f"EOF after {len(data)} of {n} bytes")
            data += chunk
        return bytes(data)

    def read_frame(self) -> bytes:
        """The next response frame body; Closed at EOF."""
        (size,) = SIZE.unpack(self._read_exactly(4))
        assert 0 <= size < 1 << 27, f"the broker sent a frame size of {size}"
        return self._read_exactly(size)

    def read_response(self, api_key: int, api_version: int) -> Response:
        return decode_response(self.read_frame(), api_key, api_version)

    def call(self, api_key: int, api_version: int, body: Mapping[str, Any] | None = None) -> Response:
        correlation_id = self.send(api_key, api_version, body)
        response = self.read_response(api_key, api_version)
        assert response.correlation_id == correlation_id
        return response

    def wait_closed(self, timeout: float = TIMEOUT) -> bytes:
        """Read until the broker closes; returns whatever arrived before EOF (b"" expected)."""
        deadline = time.monotonic() + timeout
        received = bytearray()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"the connection is still open after {timeout}s")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return bytes(received)
            except ssl.SSLError:
                return bytes(received)
            except TimeoutError:
                continue
            if not chunk:
                return bytes(received)
            received += chunk
