"""A minimal blocking client for one request at a time, used by the CLI tools.

Not a Kafka client library: it opens a connection, sends a request, reads the
answer, and turns every failure into a one-line ClientError. A connection may be TLS
(``ssl_context``) and may authenticate before its first request (``authenticate``, called with
the client once connected: the CLI's SASL exchanges, kafkapy.commands._security).
"""

from __future__ import annotations

import argparse
import socket
import ssl
import struct
from collections.abc import Callable, Mapping
from typing import Any

from kafkapy.errors import DecodeError, KafkaPyError
from kafkapy.protocol import api_name, decode_response, encode_request
from kafkapy.protocol.schema import Body

__all__ = ["ClientError", "SimpleClient", "host_port_argument", "parse_bootstrap", "parse_host_port"]


class ClientError(KafkaPyError):
    """A failure to report in one line, without a traceback."""


def parse_host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdecimal() or not 0 < int(port) < 65536:
        raise ClientError(f"--bootstrap-server {text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    """``--bootstrap-server`` as Kafka's tools take it: HOST:PORT, or several separated by commas
    (``Broker(brokers=3).bootstrap_servers``), blanks around them ignored."""
    entries = [entry.strip() for entry in text.split(",") if entry.strip()]
    if not entries:
        raise ClientError(f"--bootstrap-server {text!r} is not HOST:PORT")
    return [parse_host_port(entry) for entry in entries]


def host_port_argument(text: str) -> str:
    """argparse ``type`` for ``--bootstrap-server``: a malformed address is a usage error (exit 2)
    reported before anything connects, by the same rule :func:`parse_bootstrap` applies."""
    try:
        parse_bootstrap(text)
    except ClientError:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT[,HOST:PORT...] (port 1-65535)") from None
    return text


class SimpleClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "kafkapy-cli", *,
                 ssl_context: ssl.SSLContext | None = None,
                 authenticate: Callable[[SimpleClient], None] | None = None) -> None:
        self.addresses = parse_bootstrap(bootstrap)
        self.host, self.port = self.addresses[0]  # the one connected to, once connected
        self.timeout = timeout
        self.client_id = client_id
        self.ssl_context = ssl_context
        self.authenticate = authenticate
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
            sock = self._connect_to_one()
            if self.ssl_context is not None:
                try:
                    sock = self.ssl_context.wrap_socket(sock, server_hostname=self.host)
                except (ssl.SSLError, ssl.CertificateError, OSError) as exc:
                    sock.close()
                    reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc
                    raise ClientError(f"TLS handshake with {self.host}:{self.port} failed: "
                                      f"{reason}") from None
            self._sock = sock
            if self.authenticate is not None:
                try:
                    self.authenticate(self)  # its requests find this socket
                except BaseException:
                    self.close()
                    raise
            return sock
        return self._sock

    def _connect_to_one(self) -> socket.socket:
        """The first bootstrap address that takes the connection, as Kafka's clients go on to the
        next when one is down."""
        failures = []
        for host, port in self.addresses:
            try:
                sock = socket.create_connection((host, port), timeout=self.timeout)
            except OSError as exc:
                failures.append(f"{host}:{port}: {exc.strerror or exc}")
                continue
            self.host, self.port = host, port
            return sock
        raise ClientError(f"cannot connect to {'; nor to '.join(failures)}")

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
