"""AuditObserver: request counts and bytes per (principal, client id, API), KIP-388's cost attribution.

Enable it with ``observer.class.names=kafkapy.observers.AuditObserver``; it
takes no settings. Read it with :meth:`AuditObserver.snapshot` (one
:class:`AuditRow` per principal, client id and API) and
:meth:`AuditObserver.topic_snapshot` (Produce and Fetch record bytes per
topic, the KIP's own example). A test reaches the live instance through
``AuditObserver.instances()`` or ``broker.runtime.observers.observers``.

Theory of operation
-------------------
The KIP's ``record_request`` carries no client id and ``record_response`` no
connection, so the counting is driven by the kafkapy extension
``record_frame``, which the dispatcher calls with the connection and the raw
frame, synchronously and in this order for every request it can route::

    record_frame(conn, True, request)   client id read from the request header
    record_request(body, ...)           Produce: record bytes per topic
    ... the handler runs; other connections' requests may interleave here ...
    record_response(body, ...)          Fetch: body kept for the frame call next
    record_frame(conn, False, response)

Between a request and its response other connections run, so the key a
response is charged to is kept per connection (a weak map on ConnectionInfo,
gone with the connection); a connection serves one request at a time, so one
slot per connection is enough. Requests the dispatcher answers without
routing (unknown API keys, unsupported versions) reach ``record_request`` and
``record_response`` with no frame call around them: they are counted with
client id ``None``, request bytes 0, and response bytes computed from what
the broker sends for them (the 4-byte correlation id, or ApiVersions'
fallback body).

Bytes are frame sizes without the 4-byte size prefix, as Kafka's
request-size and response-size metrics count them; add 4 per message for
bytes on the wire. Record bytes are the length of each ``records`` field
(whole batches, compressed as sent).

Counters are updated on the broker's loop thread and read from any thread
(tests read them from the main thread), so one lock guards them.
"""

from __future__ import annotations

import struct
import threading
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from kafkapy.protocol import api_name, encode_response
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.catalogue import request_header_version
from kafkapy.protocol.strings import decode_string

if TYPE_CHECKING:
    from kafkapy.server.connection import ConnectionInfo

__all__ = ["AuditKey", "AuditObserver", "AuditRow", "TopicRow"]

_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
EMPTY_RESPONSE_BYTES = 4  # the KIP-35 draft's answer to an unknown request: the correlation id alone

# (principal, client id, api key)
AuditKey = tuple[str, "str | None", int]


@attrs.frozen
class AuditRow:
    principal: str
    client_id: str | None
    api_key: int
    api_name: str
    requests: int
    request_bytes: int
    responses: int
    response_bytes: int


@attrs.frozen
class TopicRow:
    """Record bytes per topic; a topic named only by id (Produce v13+, Fetch v13+) shows its UUID."""

    principal: str
    client_id: str | None
    topic: str
    produced_bytes: int
    fetched_bytes: int


@attrs.define
class _Counters:
    requests: int = 0
    request_bytes: int = 0
    responses: int = 0
    response_bytes: int = 0


class AuditObserver:
    """Counts requests, responses and their bytes per (principal, client id, API)."""

    _live: ClassVar[weakref.WeakSet[AuditObserver]] = weakref.WeakSet()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[AuditKey, _Counters] = {}
        # (principal, client id, topic) -> [produced bytes, fetched bytes]
        self._topics: dict[tuple[str, str | None, str], list[int]] = {}
        # The request frame just seen, until record_request picks it up: (conn, key, correlation id).
        self._framed: tuple[ConnectionInfo, AuditKey, int] | None = None
        # A request answered without frames, until record_response: (key, correlation id).
        self._unframed: tuple[AuditKey, int] | None = None
        # The response body record_response just saw, for the response frame call: (correlation id, body).
        self._response: tuple[int, Mapping[str, Any]] | None = None
        self._inflight: weakref.WeakKeyDictionary[ConnectionInfo, AuditKey] = weakref.WeakKeyDictionary()
        self._live.add(self)

    @classmethod
    def instances(cls) -> list[AuditObserver]:
        """The live AuditObservers in this process (one per broker that loaded the class)."""
        return list(cls._live)

    # --- KIP-388 ---------------------------------------------------------------------------

    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def record_frame(self, connection: ConnectionInfo, from_client: bool, frame: bytes) -> None:
        if from_client:
            parsed = _client_id(frame)
            if parsed is None:
                return  # the dispatcher closes the connection; nothing was served
            api_key, correlation_id, client_id = parsed
            key: AuditKey = (connection.principal, client_id, api_key)
            self._framed = (connection, key, correlation_id)
            self._inflight[connection] = key
            with self._lock:
                counters = self._slot(key)
                counters.requests += 1
                counters.request_bytes += len(frame)
            return
        key_out = self._inflight.pop(connection, None)
        if key_out is None:
            return  # a server-initiated frame, or a response to a request we never saw
        response, self._response = self._response, None
        with self._lock:
            counters = self._slot(key_out)
            counters.responses += 1
            counters.response_bytes += len(frame)
            if (key_out[2] == ApiKey.FETCH and response is not None and len(frame) >= 4
                    and int.from_bytes(frame[:4], "big", signed=True) == response[0]):
                for topic in response[1].get("responses", ()):
                    name = _topic(topic, "topic")
                    size = sum(len(p["records"]) for p in topic.get("partitions", ()) if p.get("records"))
                    self._topic_bytes(key_out, name)[1] += size

    def record_request(self, request: Mapping[str, Any] | None, client_address: str, principal: str,
                       api_key: int, api_version: int, correlation_id: int) -> None:
        framed, self._framed = self._framed, None
        self._unframed = None
        if framed is not None and framed[1][2] == api_key and framed[2] == correlation_id \
                and framed[0].principal == principal and framed[0].client_address[0] == client_address:
            if api_key == ApiKey.PRODUCE and request is not None:
                with self._lock:
                    for topic in request.get("topic_data", ()):
                        name = _topic(topic, "name")
                        size = sum(len(p["records"]) for p in topic.get("partition_data", ())
                                   if p.get("records"))
                        self._topic_bytes(framed[1], name)[0] += size
            return
        key: AuditKey = (principal, None, api_key)
        self._unframed = (key, correlation_id)
        with self._lock:
            counters = self._slot(key)
            counters.requests += 1

    def record_response(self, response: Mapping[str, Any] | None, api_version: int,
                        correlation_id: int) -> None:
        unframed, self._unframed = self._unframed, None
        if unframed is not None and unframed[1] == correlation_id:
            if response is None:
                size = EMPTY_RESPONSE_BYTES
            else:  # ApiVersions' UNSUPPORTED_VERSION fallback, always v0
                size = len(encode_response(ApiKey.API_VERSIONS, 0, correlation_id, response))
            with self._lock:
                counters = self._slot(unframed[0])
                counters.responses += 1
                counters.response_bytes += size
            return
        self._response = (correlation_id, response) if response is not None else None

    def close(self, timeout: float) -> None:
        self._inflight.clear()

    # --- reading ---------------------------------------------------------------------------

    def snapshot(self) -> list[AuditRow]:
        """One row per (principal, client id, API), sorted; a copy, safe from any thread."""
        with self._lock:
            items = [(k, attrs.evolve(c)) for k, c in self._counters.items()]
        rows = [AuditRow(p, cid, key, api_name(key), c.requests, c.request_bytes, c.responses,
                         c.response_bytes) for (p, cid, key), c in items]
        return sorted(rows, key=lambda r: (r.principal, r.client_id or "", r.api_key))

    def topic_snapshot(self) -> list[TopicRow]:
        """Produce and Fetch record bytes per (principal, client id, topic), sorted."""
        with self._lock:
            items = [(k, list(v)) for k, v in self._topics.items()]
        rows = [TopicRow(p, cid, topic, produced, fetched) for (p, cid, topic), (produced, fetched) in items]
        return sorted(rows, key=lambda r: (r.principal, r.client_id or "", r.topic))

    def reset(self) -> None:
        with self._lock:
            self._counters.clear()
            self._topics.clear()

    def _slot(self, key: AuditKey) -> _Counters:
        found = self._counters.get(key)
        if found is None:
            found = self._counters[key] = _Counters()
        return found

    def _topic_bytes(self, key: AuditKey, topic: str) -> list[int]:
        slot = (key[0], key[1], topic)
        found = self._topics.get(slot)
        if found is None:
            found = self._topics[slot] = [0, 0]
        return found


def _client_id(frame: bytes) -> tuple[int, int, str | None] | None:
    """(api key, correlation id, client id) from a request frame, or None if the header is cut short.

    By hand rather than with decode_request_header: this runs for every request, and the client id
    is a plain int16-length string in request header v1 and v2 alike (v2 adds tagged fields after it).
    """
    if len(frame) < 8:
        return None
    api_key, api_version, correlation_id = _HEADER.unpack_from(frame, 0)
    if request_header_version(api_key, api_version) == 0:
        return api_key, correlation_id, None  # header v0 (ControlledShutdown v0) has no client id
    if len(frame) < 10:
        return None
    size = int.from_bytes(frame[8:10], "big", signed=True)
    if size < 0:
        return api_key, correlation_id, None
    if len(frame) < 10 + size:
        return None
    return api_key, correlation_id, decode_string(frame[10:10 + size])


def _topic(entry: Mapping[str, Any], name_field: str) -> str:
    name = entry.get(name_field)
    return str(name) if name else str(entry.get("topic_id", ""))
