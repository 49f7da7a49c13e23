"""kafka-python's client-quota protocol classes over a plain socket (tests are not a package)."""

from __future__ import annotations

import itertools
import socket
import struct
from typing import Any

from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

_ids = itertools.count(1)


def _read(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def _call(address: str, request: Any, response_cls: Any, version: int, source: str | None = None) -> Any:
    host, _, port = address.rpartition(":")
    with socket.socket() as sock:
        sock.settimeout(10)
        if source is not None:
            sock.bind((source, 0))
        sock.connect((host, int(port)))
        request.with_header(correlation_id=next(_ids), client_id="quota-tests")
        sock.sendall(request.encode(version=version, header=True, framed=True))
        (size,) = struct.unpack(">i", _read(sock, 4))
        return response_cls.decode(_read(sock, size), version=version, header=True)


def alter(
    address: str,
    entries: list[tuple[dict[str, str | None], list[tuple[str, float | None]]]],
    validate_only: bool = False,
    version: int = 1,
    source: str | None = None,
) -> list[tuple[int, str | None]]:
    """entries: (entity type -> name, [(key, value or None to remove)]); returns (code, message) each."""
    E = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        entries=[
            E(
                entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                ops=[E.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops],
            )
            for entity, ops in entries
        ],
        validate_only=validate_only,
    )
    response = _call(address, request, AlterClientQuotasResponse, version, source)
    return [(e.error_code, e.error_message) for e in response.entries]


def describe(
    address: str,
    components: list[tuple[str, int, str | None]],
    strict: bool = False,
    version: int = 1,
    source: str | None = None,
) -> tuple[int, str | None, dict[Any, dict[str, float]]]:
    """components: (entity type, match type, match); returns (error, message, {entity: {key: value}})."""
    C = DescribeClientQuotasRequest.ComponentData
    request = DescribeClientQuotasRequest(
        components=[C(entity_type=t, match_type=m, match=n) for t, m, n in components], strict=strict
    )
    response = _call(address, request, DescribeClientQuotasResponse, version, source)
    found = {}
    for entry in response.entries or []:
        entity = frozenset((e.entity_type, e.entity_name) for e in entry.entity)
        found[entity] = {v.key: v.value for v in entry.values}
    return response.error_code, response.error_message, found


def ent(**names: str | None) -> frozenset[tuple[str, str | None]]:
    return frozenset((k.replace("_", "-"), v) for k, v in names.items())


def served(address: str, source: str | None = None, timeout: float = 5.0) -> bool:
    """Connect (from ``source``), ask ApiVersions v0: True if answered, False if the broker closed."""
    from kafkapy.protocol import encode_request

    host, _, port = address.rpartition(":")
    frame = encode_request(18, 0, 1, "quota-tests", {})
    with socket.socket() as sock:
        sock.settimeout(timeout)
        if source is not None:
            sock.bind((source, 0))
        sock.connect((host, int(port)))
        try:
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            (size,) = struct.unpack(">i", _read(sock, 4))
            _read(sock, size)
            return True
        except (ConnectionError, OSError):
            return False
