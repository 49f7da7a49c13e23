"""What strict mode records: a Violation per misuse, kept in a broker's Violations list.

A violation names the request (decoded, with record batches summarised, so a failing test's
report stays readable), where it came from (connection and client id), what happened, and what a
well-behaved client would have sent instead.
"""

from __future__ import annotations

import enum
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from kafkapy.errors import DecodeError
from kafkapy.protocol import api_name
from kafkapy.protocol.records import RecordBatch, Records

__all__ = ["Violation", "ViolationKind", "Violations", "request_summary"]

MAGIC_AT = 16  # a record batch's magic byte: base offset (8), length (4), leader epoch (4)
SHOWN_BYTES = 32  # a bytes field longer than this is shown by its length


class ViolationKind(enum.Enum):
    """The kinds of misuse strict mode records (docs/testing.md, "Strict mode", says why each)."""

    STALE_GENERATION = "stale_generation"
    UNASSIGNED_COMMIT = "unassigned_commit"
    OUT_OF_ORDER_SEQUENCE = "out_of_order_sequence"
    DUPLICATE_SEQUENCE = "duplicate_sequence"
    UNSUPPORTED_VERSION = "unsupported_version"


@attrs.frozen
class Violation:
    kind: ViolationKind
    api_key: int
    api_version: int
    correlation_id: int
    connection: str  # ConnectionInfo.id
    client_id: str | None
    # The decoded request body (records summarised), or None for a request the broker could not
    # decode because it does not serve that API or version.
    request: Mapping[str, Any] | None
    what: str  # what the client did, and how the broker answered
    expected: str  # what a well-behaved client sends instead
    time: float = attrs.field(factory=time.time, eq=False)  # when it was recorded

    @property
    def api_name(self) -> str:
        return api_name(self.api_key)

    def __str__(self) -> str:
        request = repr(self.request) if self.request is not None else \
            "(not decoded: the broker does not serve it)"
        return (f"[{self.kind.value}] {self.api_name} v{self.api_version} #{self.correlation_id} on "
                f"{self.connection} from client {self.client_id!r}: {self.what}\n"
                f"    expected: {self.expected}\n"
                f"    request: {request}")


class Violations(list[Violation]):
    """A broker's violations, oldest first: a list (appended on the broker's loop, read from any
    thread); ``clear()`` forgets them. A cluster's is a copy of its brokers' lists whose
    ``clear()`` clears theirs too."""

    def __init__(self, violations: Iterable[Violation] = (), sources: Iterable[Violations] = ()) -> None:
        super().__init__(violations)
        self._sources = tuple(sources)
        self._lock = threading.Lock()

    def record(self, violation: Violation) -> None:
        with self._lock:
            self.append(violation)

    def clear(self) -> None:
        with self._lock:
            super().clear()
        for source in self._sources:
            source.clear()

    def report(self) -> str:
        """Every violation, one paragraph each: what a failing test shows."""
        return "\n".join(str(violation) for violation in list(self))


def request_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` as plain data: record sets as one line about their batch, long bytes by length."""
    return {key: _plain(value) for key, value in body.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return request_summary(value)
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, Records):
        return _records_summary(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return data if len(data) <= SHOWN_BYTES else f"<{len(data)} bytes>"
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _records_summary(records: Records) -> str:
    raw = bytes(records.raw)
    if len(raw) <= MAGIC_AT or raw[MAGIC_AT] != 2:
        return f"<records: {len(raw)} bytes>"
    try:
        batch = RecordBatch(raw)
    except DecodeError:
        return f"<records: {len(raw)} bytes, unreadable>"
    first = batch.base_sequence
    sequences = f"sequences {first}-{first + batch.record_count - 1}" if first >= 0 else "no sequence"
    return (f"<records: {batch.record_count} record(s), producer {batch.producer_id} epoch "
            f"{batch.producer_epoch}, {sequences}, {len(raw)} bytes>")
