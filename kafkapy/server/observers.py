"""KIP-388 observers: user classes that see every request and response.

Each class named in ``observer.class.names`` is built with no arguments,
``configure(configs)`` is called with the broker's settings, then
``record_request``/``record_response`` for every request and response (the
empty responses to unknown requests included, with ``None`` as the struct),
and ``close(timeout)`` at shutdown. The last argument of both record calls is a
:class:`CorrelationId`: the request's correlation id, with ``connection_id``, the KIP's id for
pairing a request with its response.

Thread-safety contract: a broker calls its observers from its one event-loop
thread, in request order per connection, so an observer needs no locking for
its own state unless it shares that state with other threads (several
embedded brokers in one process each have their own loop and thread). Calls
are synchronous and on the request path: an observer that blocks slows the
broker, so hand slow work to a thread of your own.

An observer's exception is logged and swallowed: it never affects the
response, the connection, or the other observers.

kafkapy extension: an observer that defines ``record_frame(connection,
from_client, frame)`` also receives every raw frame body (used by the capture
observer to write pcaps).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkapy.server.connection import ConnectionInfo

__all__ = ["CorrelationId", "ObserverChain", "ReadOnlyStruct", "load_observer"]

log = logging.getLogger(__name__)


class ReadOnlyStruct(Mapping[str, Any]):
    """A read-only view of a decoded struct: nested structs are views, arrays tuples."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return _view(self._data[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        return f"ReadOnlyStruct({dict(self._data)!r})"


class CorrelationId(int):
    """The ``correlation_id`` observers get: the request's correlation id, which also names its
    connection in ``connection_id``.

    KIP-388 pairs a ``recordRequest`` call with its ``recordResponse`` call by this argument, and
    passes the connection id there (a connection serves one request at a time). The correlation id
    alone cannot pair them: every client numbers its requests alike, and a request held on one
    connection is answered after later ones on others. So the value stays the int observers
    already compare with frames and logs, and ``connection_id`` is the KIP's pairing id.
    """

    connection_id: str

    def __new__(cls, value: int, connection_id: str) -> CorrelationId:
        self = super().__new__(cls, value)
        self.connection_id = connection_id
        return self


def _view(value: Any) -> Any:
    if isinstance(value, Mapping):
        return ReadOnlyStruct(value)
    if isinstance(value, list):
        return tuple(_view(v) for v in value)
    return value


def load_observer(path: str) -> Any:
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    from kafkapy.server.config import ConfigError

    try:
        cls = getattr(importlib.import_module(module_name), attr)
        return cls()
    except Exception as exc:
        raise ConfigError(f"invalid value {path!r} for observer.class.names: {exc!r}") from None


class ObserverChain:
    def __init__(self, observers: Sequence[Any] = ()) -> None:
        self.observers = list(observers)
        self.active = bool(self.observers)
        self.frame_observers = [o for o in self.observers if hasattr(o, "record_frame")]
        self.wants_frames = bool(self.frame_observers)

    @classmethod
    def from_config(cls, class_names: Sequence[str], configs: Mapping[str, Any]) -> ObserverChain:
        observers = [load_observer(name) for name in class_names]
        for observer in observers:
            try:
                observer.configure(dict(configs))
            except Exception as exc:
                from kafkapy.server.config import ConfigError

                raise ConfigError(f"observer {type(observer).__name__} rejected its configuration: "
                                  f"{exc!r} (observer.class.names)") from None
        return cls(observers)

    def record_request(self, body: Mapping[str, Any] | None, conn: ConnectionInfo, api_key: int,
                       api_version: int, correlation_id: int) -> None:
        view = None if body is None else ReadOnlyStruct(body)
        paired = CorrelationId(correlation_id, conn.id)
        for observer in self.observers:
            try:
                observer.record_request(view, conn.client_address[0], conn.principal, api_key, api_version,
                                        paired)
            except Exception:
                log.exception("observer %s failed in record_request (ignored)", type(observer).__name__)

    def record_response(self, body: Mapping[str, Any] | None, conn: ConnectionInfo, api_version: int,
                        correlation_id: int) -> None:
        view = None if body is None else ReadOnlyStruct(body)
        paired = CorrelationId(correlation_id, conn.id)
        for observer in self.observers:
            try:
                observer.record_response(view, api_version, paired)
            except Exception:
                log.exception("observer %s failed in record_response (ignored)", type(observer).__name__)

    def record_frame(self, conn: ConnectionInfo, from_client: bool, frame: bytes) -> None:
        for observer in self.frame_observers:
            try:
                observer.record_frame(conn, from_client, frame)
            except Exception:
                log.exception("observer %s failed in record_frame (ignored)", type(observer).__name__)

    def close(self, timeout: float) -> None:
        for observer in self.observers:
            try:
                observer.close(timeout)
            except Exception:
                log.exception("observer %s failed to close (ignored)", type(observer).__name__)
