"""From a frame to a response: routing, unknown requests, observers, modules.

Data flows one way: frame bytes, decoded request, module hooks, the handler
of the module that serves the key, response body, response bytes. Unknown
API keys and unsupported versions get the KIP-35 draft's empty response (just
the correlation id) unless ``unknown.request.behavior=close``; ApiVersions at
an unsupported version gets what Java Kafka sends instead, a v0 body with
UNSUPPORTED_VERSION, so clients can negotiate down.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING

from kafkapy.errors import DecodeError
from kafkapy.protocol import decode_request, encode_response
from kafkapy.protocol.catalogue import get_api
from kafkapy.protocol.codec import response_header
from kafkapy.server.connection import CloseConnection, ConnectionInfo
from kafkapy.server.modules import ApiHandler, EncodedResponse, Module, RequestContext

if TYPE_CHECKING:
    from kafkapy.server.broker import BrokerRuntime

__all__ = ["API_VERSIONS_FALLBACK_MAX", "Dispatcher"]

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">hhi")
API_VERSIONS = 18
UNSUPPORTED_VERSION = 35
API_VERSIONS_FALLBACK_MAX = 4  # ApiVersions v0-v4 are served


class Dispatcher:
    def __init__(self, runtime: BrokerRuntime) -> None:
        self.runtime = runtime
        self.handlers: dict[int, ApiHandler] = {}
        self.request_hooks: list[Module] = []
        self.rebuild()

    def rebuild(self) -> None:
        """Derive the routing table from the enabled modules (and, later, feature gates)."""
        handlers: dict[int, ApiHandler] = {}
        for module in self.runtime.modules:
            for key, handler in module.apis().items():
                if key in handlers:
                    raise ValueError(f"API key {key} is claimed by two modules (second: {module.name})")
                api = get_api(key)
                if api is None:
                    raise ValueError(f"module {module.name} serves API key {key}, which has no spec")
                handlers[key] = handler
        self.handlers = handlers
        self._served: dict[int, tuple[int, int]] | None = None
        self.request_hooks = [m for m in self.runtime.modules
                              if type(m).on_request is not Module.on_request]

    def served_versions(self) -> dict[int, tuple[int, int]]:
        """What ApiVersions advertises: every served key, clipped to what the codec knows.
        Cached until the next rebuild (modules and feature gates call it when they change)."""
        if self._served is not None:
            return self._served
        served = {}
        for key, handler in self.handlers.items():
            api = get_api(key)
            assert api is not None
            versions = handler.versions.intersect(api.versions)
            if versions and self.runtime.gate_open(handler):
                served[key] = (versions.low, versions.high)
        self._served = served
        return served

    async def dispatch(self, conn: ConnectionInfo, frame: bytes) -> bytes | None:
        if len(frame) < 8:
            log.warning("closing %s: %d-byte frame is too short for a request header", conn.id, len(frame))
            raise CloseConnection
        api_key, api_version, correlation_id = _HEADER.unpack_from(frame, 0)
        handler = self.handlers.get(api_key)
        if handler is None or api_version not in handler.versions or not self.runtime.gate_open(handler):
            return self._unknown(conn, api_key, api_version, correlation_id)
        observers = self.runtime.observers
        if observers.wants_frames:
            observers.record_frame(conn, True, frame)
        try:
            request = decode_request(frame)
        except DecodeError as exc:
            log.warning("closing %s from %s:%d: cannot parse %s: %s", conn.id, *conn.client_address,
                        f"api key {api_key} v{api_version}", exc)
            raise CloseConnection from None
        if observers.active:
            observers.record_request(request.body, conn, api_key, api_version, correlation_id)
        context = RequestContext(conn, self.runtime, api_key, api_version, correlation_id, request.client_id)
        for module in self.request_hooks:
            await module.on_request(context, request)
        try:
            body = await handler.handle(context, request)
        except CloseConnection:
            raise
        except Exception:
            log.exception("handler for api key %d v%d failed; closing %s", api_key, api_version, conn.id)
            raise CloseConnection from None
        if body is None:
            return None
        if isinstance(body, EncodedResponse):
            response = response_header(api_key, api_version, correlation_id) + body.data
            body = body.body
        else:
            response = encode_response(api_key, api_version, correlation_id, body)
        if observers.active:
            observers.record_response(body, api_version, correlation_id)
            if observers.wants_frames:
                observers.record_frame(conn, False, response)
        return response

    def _unknown(self, conn: ConnectionInfo, api_key: int, api_version: int, correlation_id: int) -> bytes:
        observers = self.runtime.observers
        if observers.active:
            observers.record_request(None, conn, api_key, api_version, correlation_id)
        if api_key == API_VERSIONS:
            body = {"error_code": UNSUPPORTED_VERSION, "api_keys": [
                {"api_key": API_VERSIONS, "min_version": 0, "max_version": API_VERSIONS_FALLBACK_MAX}]}
            response = encode_response(API_VERSIONS, 0, correlation_id, body)
            if observers.active:
                observers.record_response(body, 0, correlation_id)
            return response
        if self.runtime.config["unknown.request.behavior"] == "close":
            log.info("closing %s: unsupported api key %d v%d", conn.id, api_key, api_version)
            raise CloseConnection
        if observers.active:
            observers.record_response(None, api_version, correlation_id)
        return struct.pack(">i", correlation_id)  # the KIP-35 draft's empty response
