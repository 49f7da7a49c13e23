"""Kafka frames over a plain socket, for tests that send what no client would."""

from __future__ import annotations

import socket
import struct


def exchange(sock: socket.socket, frame: bytes) -> bytes:
    """One request frame out (size-prefixed), its whole response frame in, without the prefix."""
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    size = struct.unpack(">i", receive(sock, 4))[0]
    return receive(sock, size)


def receive(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes, or an assertion that the broker closed the connection first."""
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data
