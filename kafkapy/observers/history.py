"""RequestHistory: what each connection asked and how it was answered, for test failure reports.

Enable it with ``observer.class.names=kafkapy.observers.RequestHistory`` (the pytest fixtures
do); ``request.history.size`` bounds it (the oldest entries go first). Read it with
:meth:`RequestHistory.entries`, or ``broker.history()`` on an embedded broker.

Theory of operation
-------------------
As for the AuditObserver, KIP-388's ``record_request`` carries no client id and
``record_response`` no connection, so the entry is driven by ``record_frame``: the request frame
opens an entry for its connection (API, version, correlation id and client id from the
header), ``record_response`` (called next for that request, synchronously) notes the answer's
error code, and the response frame that follows closes the entry. A connection serves one
request at a time, so one open entry per connection is enough. A request that gets no answer
(Produce acks=0, a dropped connection) stays in the history with ``answered`` False.

Requests the broker does not route (an API key or version it does not serve) come with no frame:
``record_request`` (with no body) and ``record_response`` follow each other at once, and the entry
is made from them, with the client's host for its connection (KIP-388 gives no more) and no
client id. Its error code is UNSUPPORTED_VERSION, what the KIP-35 empty answer and ApiVersions'
fallback answer both mean.

The error code is the response's top-level ``error_code`` when it is set, else the first
non-zero one inside (a partition's), else NONE: the one that explains a failure.

Entries are written on the broker's loop thread and read from the test's, under a lock.
"""

from __future__ import annotations

import collections
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from kafkapy.errors import DecodeError, ErrorCode
from kafkapy.protocol import api_name, peek_request_header
from kafkapy.server.config import ConfigKey

if TYPE_CHECKING:
    from kafkapy.server.connection import ConnectionInfo

__all__ = ["HISTORY_OBSERVER", "HISTORY_SIZE", "HistoryEntry", "RequestHistory", "with_history"]

HISTORY_SIZE = "request.history.size"
DEFAULT_HISTORY_SIZE = 10_000  # entries: a few MB at most, enough for one test's story
HISTORY_OBSERVER = "kafkapy.observers.RequestHistory"  # its name for observer.class.names


@attrs.frozen
class HistoryEntry:
    connection: str  # ConnectionInfo.id
    client_address: tuple[str, int]
    client_id: str | None
    api_key: int
    api_version: int
    correlation_id: int
    time: float  # time.time() when the request arrived
    error_code: int | None = None  # None: not answered
    answered: bool = False

    @property
    def api_name(self) -> str:
        return api_name(self.api_key)

    def __str__(self) -> str:
        code = self.error_code
        if code is None:
            outcome = "no answer"
        else:
            outcome = ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"error {code}"
        clock = time.strftime("%H:%M:%S", time.localtime(self.time)) + f".{int(self.time * 1000) % 1000:03d}"
        return (f"{clock} {self.connection} client {self.client_id!r} {self.api_name} v{self.api_version} "
                f"#{self.correlation_id}: {outcome}")


class RequestHistory:
    """A KIP-388 observer keeping the last ``request.history.size`` requests (module docstring)."""

    config_keys: ClassVar[tuple[ConfigKey, ...]] = (
        ConfigKey(HISTORY_SIZE, "int", DEFAULT_HISTORY_SIZE,
                  "Requests the RequestHistory observer keeps, the oldest dropped first (kafkapy)."),
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: collections.deque[HistoryEntry] = collections.deque(maxlen=DEFAULT_HISTORY_SIZE)
        self._open: weakref.WeakKeyDictionary[ConnectionInfo, HistoryEntry] = weakref.WeakKeyDictionary()
        self._error: int | None = None  # the error code of the response being recorded
        self._unrouted: HistoryEntry | None = None  # a request with no frame, until its response

    def configure(self, configs: Mapping[str, Any]) -> None:
        size = int(configs.get(HISTORY_SIZE, DEFAULT_HISTORY_SIZE))
        with self._lock:
            self._entries = collections.deque(self._entries, maxlen=max(size, 1))

    def record_request(self, body: Any, client_address: str, principal: str, api_key: int, api_version: int,
                       correlation_id: int) -> None:
        """Only requests the broker does not route: the others' frames (record_frame) carry more."""
        if body is None:
            self._unrouted = HistoryEntry(client_address, (client_address, 0), None, api_key, api_version,
                                          correlation_id, time.time())
            with self._lock:
                self._entries.append(self._unrouted)

    def record_response(self, body: Mapping[str, Any] | None, api_version: int, correlation_id: int) -> None:
        unrouted, self._unrouted = self._unrouted, None
        if unrouted is not None:
            self._replace(unrouted, attrs.evolve(unrouted, error_code=ErrorCode.UNSUPPORTED_VERSION,
                                                 answered=True))
            return
        self._error = ErrorCode.NONE if body is None else _error_code(body)

    def record_frame(self, connection: ConnectionInfo, from_client: bool, frame: bytes) -> None:
        if from_client:
            self._unrouted = None  # one before this went unanswered (unknown.request.behavior=close)
            try:
                header = peek_request_header(frame)
            except DecodeError:
                return
            entry = HistoryEntry(connection.id, connection.client_address, header.client_id, header.api_key,
                                 header.api_version, header.correlation_id, time.time())
            with self._lock:
                self._entries.append(entry)
            self._open[connection] = entry
            return
        opened = self._open.pop(connection, None)
        if opened is None:
            return
        self._replace(opened, attrs.evolve(opened, error_code=self._error, answered=True))

    def _replace(self, entry: HistoryEntry, answered: HistoryEntry) -> None:
        with self._lock:  # where it stands (searched from the newest end: it is near it)
            for index in range(len(self._entries) - 1, -1, -1):
                if self._entries[index] is entry:
                    self._entries[index] = answered
                    break

    def close(self, timeout: float) -> None:
        """Nothing to release: the entries stay readable after the broker stops."""

    def entries(self, *, connection: str | None = None, client_id: str | None = None,
                since: float | None = None) -> list[HistoryEntry]:
        """The entries kept, oldest first; only one connection's, client's, or since a time, if given."""
        with self._lock:
            kept = list(self._entries)
        return [e for e in kept if (connection is None or e.connection == connection)
                and (client_id is None or e.client_id == client_id) and (since is None or e.time >= since)]


def _error_code(body: Mapping[str, Any]) -> int:
    top = body.get("error_code")
    if top:
        return int(top)
    return next((code for code in _nested_codes(body) if code), int(top or ErrorCode.NONE))


def _nested_codes(value: Any) -> Iterator[int]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key == "error_code" and isinstance(item, int):
                yield item
            elif isinstance(item, (Mapping, tuple, list)):
                yield from _nested_codes(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _nested_codes(item)


def with_history(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with the RequestHistory observer added to ``observer.class.names`` (the pytest
    fixtures' brokers and ``kafkapy serve --control`` keep a history)."""
    names = config.get("observer.class.names") or []
    names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    if HISTORY_OBSERVER not in names and "kafkapy.observers.history.RequestHistory" not in names:
        names.append(HISTORY_OBSERVER)
    return {**config, "observer.class.names": names}
