"""A minimal blocking client for one request at a time, used by the CLI tools.

Not a Kafka client library: it opens a connection, sends a request, reads the
answer, and turns every failure into a one-line ClientError.
"""

from __future__ import annotations

import argparse
import socket
import struct
from collections.abc import Mapping
from typing import Any

from kafkapy.errors import DecodeError, KafkaPyError
from kafkapy.protocol import api_name, decode_response, encode_request
from kafkapy.protocol.schema import Body

__all__ = ["ClientError", "SimpleClient", "host_port_argument", "parse_host_port"]


class ClientError(KafkaPyError):
    """A failure to report in one line, without a traceback."""


def parse_host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ClientError(f"--bootstrap-server {text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def host_port_argument(text: str) -> str:
    """argparse ``type`` for ``--bootstrap-server``: a malformed address is a usage error (exit 2)
    reported before anything connects, by the same rule :func:`parse_host_port` applies."""
    try:
        parse_host_port(text)
    except ClientError:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (port 1-65535)") from None
    return text


class SimpleClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "kafkapy-cli") -> None:
        self.host, self.port = parse_host_port(bootstrap)
        self.timeout = timeout
        self.client_id = client_id
        self._sock: socket.socket | None = None
        self._correlation = 0

    def __enter__(self) -> SimpleClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _connection(self) -> socket.socket:
        if self._sock is None:
            try:
                self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            except OSError as exc:
                reason = exc.strerror or exc
                raise ClientError(f"cannot connect to {self.host}:{self.port}: {reason}") from None
        return self._sock

    def send(self, api_key: int, api_version: int, body: Mapping[str, Any]) -> None:
        """Send one request that gets no answer (a Produce with acks=0)."""
        self._correlation += 1
        frame = encode_request(api_key, api_version, self._correlation, self.client_id, body)
        sock = self._connection()
        try:
            sock.sendall(struct.pack(">i", len(frame)) + frame)
        except OSError as exc:
            self.close()
            reason = exc.strerror or exc
            raise ClientError(f"connection to {self.host}:{self.port} failed: {reason}") from None

    def request(self, api_key: int, api_version: int, body: Mapping[str, Any]) -> Body:
        """Send one request and return the decoded response body."""
        self._correlation += 1
        frame = encode_request(api_key, api_version, self._correlation, self.client_id, body)
        sock = self._connection()
        try:
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            (size,) = struct.unpack(">i", self._read(sock, 4, api_key))
            data = self._read(sock, size, api_key)
        except TimeoutError:
            self.close()
            raise ClientError(f"no answer from {self.host}:{self.port} within {self.timeout:g}s") from None
        except OSError as exc:
            self.close()
            reason = exc.strerror or exc
            raise ClientError(f"connection to {self.host}:{self.port} failed: {reason}") from None
        name = f"{api_name(api_key)} (api key {api_key}) v{api_version}"
        if len(data) == 4:  # the KIP-35 draft's empty response: not served there
            raise ClientError(f"{self.host}:{self.port} does not serve {name}")
        try:
            return decode_response(data, api_key, api_version).body
        except DecodeError as exc:
            where = f"{self.host}:{self.port}"
            raise ClientError(f"cannot decode the {name} response from {where}: {exc}") from None

    def _read(self, sock: socket.socket, n: int, api_key: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = sock.recv(n - len(chunks))
            if not chunk:
                self.close()
                raise ClientError(f"{self.host}:{self.port} closed the connection without answering "
                                  f"(does it serve {api_name(api_key)}, api key {api_key}?)")
            chunks += chunk
        return bytes(chunks)
