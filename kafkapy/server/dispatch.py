"""From a frame to a response: routing, unknown requests, observers, modules.

Data flows one way: frame bytes, decoded request, module hooks, the handler
of the module that serves the key, response body, response bytes. Unknown
API keys and unsupported versions get the KIP-35 draft's empty response (just
the correlation id) unless ``unknown.request.behavior=close``; ApiVersions at
an unsupported version gets what Java Kafka sends instead, a v0 body with
UNSUPPORTED_VERSION, so clients can negotiate down. A handler (or interceptor) that raises
KafkaApiError gets that code in the response's top-level error fields.

``dispatch`` answers in place when the handler is a plain function (the core
APIs are: they read state the broker keeps current), so a connection needs no
task per request, and the answers to all the frames of one read leave in one
write. A coroutine handler (or hooks and interceptors, which are coroutines)
comes back as an awaitable that finishes the job: the connection awaits it in
its worker task, so the handler runs inside a task from its first line and
``asyncio.timeout()`` works anywhere in it; unless it is declared ``ApiHandler.in_place``, when
it is started right here and only the rest of one that suspends goes to the worker. Requests
answered before, byte for byte, are replayed from a memo (kafkapy.server.memo).

With ``kafka.version`` set, the routing table is clipped to what that Kafka release advertised
(kafkapy.protocol.releases): what it did not serve is answered as unknown, and what it advertised
but refused (Produce v0-v2 in 4.0) gets UNSUPPORTED_VERSION per partition.
"""

from __future__ import annotations

import inspect
import logging
import struct
import types
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

import attrs

from kafkapy.errors import DecodeError, ErrorCode, KafkaApiError
from kafkapy.protocol import Request, encode_response, fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.catalogue import get_api
from kafkapy.protocol.chunks import Chunk, encode_response_chunks, frame_size, joined
from kafkapy.protocol.codec import (
    RequestDecoder,
    ResponseEncoder,
    request_decoder,
    response_encoder,
    response_header,
)
from kafkapy.protocol.error_answers import error_answer
from kafkapy.protocol.framing import ReceivedFrame
from kafkapy.protocol.header import peek_request_header, unpack_request_prefix
from kafkapy.protocol.releases import KafkaRelease, kafka_release
from kafkapy.protocol.schema import Body
from kafkapy.protocol.versions import NONE as NO_VERSIONS
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.connection import CloseConnection, ConnectionInfo
from kafkapy.server.core import client_information
from kafkapy.server.eager import start as eager_start
from kafkapy.server.eager import stepped as eager_step
from kafkapy.server.interceptors import Interceptor, run_chain
from kafkapy.server.memo import AnswerMemo, Table
from kafkapy.server.modules import (
    Answer,
    ApiHandler,
    ChunkedResponse,
    EncodedResponse,
    FromFrame,
    Handler,
    Module,
    RequestContext,
)

if TYPE_CHECKING:
    from kafkapy.server.broker import BrokerRuntime

__all__ = ["API_VERSIONS_FALLBACK_MAX", "Dispatcher", "Frame"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_API_VERSIONS = int(ApiKey.API_VERSIONS)  # compared on every request: a plain int compares fastest
_CORRELATION = _SIZE
_SIZE_CORRELATION = struct.Struct(">ii")
_CoroutineType = types.CoroutineType
_new_context = tuple.__new__
API_VERSIONS_FALLBACK_MAX = 4  # ApiVersions v0-v4 are served
_API_KEYS = frozenset(ApiKey)

# A response frame (without size prefix): one bytes, or several buffers (a ChunkedResponse).
Frame = bytes | list[Chunk]
Pending = Awaitable[Frame | None]  # what a request that suspends comes back as
# What plain-function handlers return (besides other mappings): never awaitable, no need to ask.
_ANSWERS = frozenset({dict, Body, EncodedResponse, ChunkedResponse, type(None)})


class _Plan(NamedTuple):
    """What requests of one API version need, found once."""

    api_key: int
    api_version: int
    handle: Handler
    decode: RequestDecoder
    encode: ResponseEncoder
    tag: bytes  # what the response header has after the correlation id (an empty tag section)
    # request bytes after the correlation id -> (size prefix, answer bytes after the correlation id)
    memo: Table | None  # the memo table of this API version (kafkapy.server.memo), if memoized


class _Route:
    """One served API key: its handler, the versions it serves, and a plan per version."""

    __slots__ = ("gated", "handle", "handler", "high", "low", "memoize", "refused", "versions")

    def __init__(self, handler: ApiHandler, memoize: bool, refused: VersionRange = NO_VERSIONS,
                 eager: bool = False) -> None:
        self.handler = handler
        # ApiHandler.in_place: the handler's coroutine is started in place (the eager fast path).
        self.handle = eager_step(handler.handle) if eager and handler.in_place else handler.handle
        self.low, self.high = handler.versions.low, handler.versions.high
        self.gated = handler.feature is not None
        self.memoize = memoize and not refused
        self.refused = refused  # advertised, but answered UNSUPPORTED_VERSION (kafka.version)
        self.versions: dict[int, _Plan] = {}

    def plan(self, api_key: int, api_version: int, memo: Table | None) -> _Plan:
        """Raises UnsupportedVersionError for a version the handler claims but no spec has."""
        plan = self.versions.get(api_version)
        if plan is None:
            handle = _refuse_unsupported if api_version in self.refused else self.handle
            plan = _Plan(api_key, api_version, handle, request_decoder(api_key, api_version),
                         response_encoder(api_key, api_version),
                         response_header(api_key, api_version, 0)[4:], memo if self.memoize else None)
            self.versions[api_version] = plan
        return plan


def _refuse_unsupported(context: RequestContext, request: Request) -> Answer:
    """A version the emulated release advertised but refused (kafkapy.protocol.releases): Kafka's
    UNSUPPORTED_VERSION, per partition where the response has partitions."""
    try:
        return error_answer(context.api_key, context.api_version, request.body, ErrorCode.UNSUPPORTED_VERSION)
    except ValueError:  # nowhere in this answer to say it: the connection closes
        raise KafkaApiError(ErrorCode.UNSUPPORTED_VERSION) from None


class Dispatcher:
    def __init__(self, runtime: BrokerRuntime) -> None:
        self.runtime = runtime
        self.handlers: dict[int, ApiHandler] = {}
        self.routes: dict[int, _Route] = {}
        self.memo = AnswerMemo()  # answers by request bytes (kafkapy.server.memo)
        self.request_hooks: list[Module] = []
        self.interceptors: list[Interceptor] = []  # in order, outermost first
        self._wrapped = False  # whether requests go through hooks or interceptors
        self.observers = runtime.observers
        emulated = runtime.config["kafka.version"]
        self.release: KafkaRelease | None = None if emulated is None else kafka_release(emulated)
        self.rebuild()

    def install_interceptor(self, interceptor: Interceptor) -> None:
        """Add ``interceptor`` to the end (innermost) of the chain (kafkapy.server.interceptors)."""
        self.interceptors.append(interceptor)
        self.rebuild()

    def remove_interceptor(self, interceptor: Interceptor) -> None:
        if interceptor in self.interceptors:
            self.interceptors.remove(interceptor)
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
        if self.release is not None:
            handlers = self._as_released(handlers, self.release)
        self.handlers = handlers
        self.request_hooks = [m for m in self.runtime.modules
                              if type(m).on_request is not Module.on_request]
        self._wrapped = bool(self.request_hooks or self.interceptors)
        # The chain stepped in place (kafkapy.server.interceptors); module hooks never are.
        self._chain_in_place = self.runtime.fast_paths.in_place_chain and not self.request_hooks
        # Memo hits skip every check, the feature gate's too; gate_open is the runtime's to answer,
        # not only the routing table's, so gated APIs are never memoized. Nor is anything while
        # hooks, interceptors or observers are there: they see every request.
        plain = not self._wrapped and not self.runtime.observers.active and self.runtime.fast_paths.memo
        refused = self.release.refused if self.release is not None else {}
        self.routes = {key: _Route(handler, plain and handler.memoize and handler.feature is None,
                                   refused.get(ApiKey(key), NO_VERSIONS), self.runtime.fast_paths.eager)
                       for key, handler in handlers.items()}
        self.memo = AnswerMemo()  # the plans are new, their memos too
        self.plans: dict[bytes, _Plan] = {}  # by a frame's first four bytes (key and version)
        # ApiHandler.from_frame's answerers by the same four bytes, made with the plans; none while
        # module hooks see every request (the FastPaths.from_frame switch).
        self.frame_paths: dict[bytes, FromFrame] = {}
        self._from_frames = self.runtime.fast_paths.from_frame and not self.request_hooks
        self._served: dict[int, tuple[int, int]] | None = None

    @staticmethod
    def _as_released(handlers: dict[int, ApiHandler], release: KafkaRelease) -> dict[int, ApiHandler]:
        """The handlers clipped to what ``release`` advertised; keys it did not serve are dropped."""
        clipped = {}
        for key, handler in handlers.items():
            released = release.advertised.get(ApiKey(key)) if key in _API_KEYS else None
            if released is None:
                continue
            served = handler.versions
            refused = release.refused.get(ApiKey(key), NO_VERSIONS)
            if refused and refused.high + 1 >= served.low:  # refusing takes a codec, not a handler
                served = VersionRange(min(served.low, refused.low), served.high)
            versions = served.intersect(released)
            if versions:
                clipped[key] = attrs.evolve(handler, versions=versions)
        return clipped

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

    def dispatch_all(self, conn: ConnectionInfo, frames: Iterator[ReceivedFrame], out: list[Chunk],
                     closed: Callable[[], bool]) -> Pending | None:
        """``dispatch`` the frames in turn, until one suspends (its awaitable is returned, and
        ``frames`` holds the ones after it) or ``closed()`` says a handler closed the connection.
        A request answered before, byte for byte, is answered from the memo right in this loop,
        and one an ``ApiHandler.from_frame`` fast path takes is answered by it here. A large frame
        kept as received (a bytearray, FastPaths.kept_frames) skips the memo (its keys are bytes)."""
        tables = self.memo.tables  # AnswerMemo.replay, inline: two dict gets per frame
        frame_paths = self.frame_paths
        observers = self.observers
        for frame in frames:
            if type(frame) is bytes:
                prefix = frame[:4]  # API key and version
                table = tables.get(prefix)
                if table is not None:
                    answer = table.get(frame[8:])
                    if answer is not None:  # (size prefix, answer after the correlation id, software)
                        out.append(answer[0])
                        out.append(frame[4:8])
                        out.append(answer[1])
                        if answer[2] is not None:  # AnswerMemo.replay's client software, inline
                            conn.client_software = answer[2]
                        continue
            else:
                prefix = bytes(frame[:4])
            from_frame = frame_paths.get(prefix)
            if from_frame is not None and not observers.active and (
                    not self.interceptors or self._none_applies(conn, frame)):
                try:
                    wire = from_frame(conn, frame)
                except Exception:
                    log.exception("the fast path of api key %d v%d failed; closing %s",
                                  *unpack_request_prefix(frame, 0)[:2], conn.id)
                    raise CloseConnection from None
                if wire is not None:
                    if wire:  # else NO_RESPONSE
                        out.append(wire)
                    continue
            pending = self.dispatch(conn, frame, out)
            if pending is not None:
                return pending
            if closed():
                return None
        return None

    def dispatch(self, conn: ConnectionInfo, frame: ReceivedFrame, out: list[Chunk]) -> Pending | None:
        """Answer one request frame: the response goes onto ``out`` as wire bytes (size prefix,
        then the frame), unless it takes none. If the request's hooks or handler suspend, the
        result is instead an awaitable of the response frame (without size prefix) or None.
        CloseConnection (raised here or by the awaitable) ends the connection without an answer."""
        if type(frame) is not bytes:  # a large frame kept as received: the plain path reads bytes
            frame = bytes(frame)
        if len(frame) < 8:
            log.warning("closing %s: %d-byte frame is too short for a request header", conn.id, len(frame))
            raise CloseConnection
        # An API version served before (and not feature-gated) has its plan one dict get away, by
        # the frame's first four bytes; anything else is routed by key and version first.
        plan = self.plans.get(frame[:4])
        if plan is None:
            plan = self._route(conn, frame, out)
            if plan is None:
                return None  # answered as an unknown request
        api_key, api_version, memo = plan.api_key, plan.api_version, plan.memo
        observers = self.observers
        if observers.wants_frames:
            observers.record_frame(conn, True, frame)
        try:
            request = plan.decode(frame)
        except DecodeError as exc:
            self._unparsable(conn, api_key, api_version, exc)
        correlation_id = request.correlation_id
        software = None
        if api_key == _API_VERSIONS:  # as Kafka's SocketServer, before any handler sees it
            software = client_information(api_version, request.body)
            if software is not None:
                conn.client_software = software
        if observers.active:
            observers.record_request(request.body, conn, api_key, api_version, correlation_id)
        # A null client id (or none, header v0) is the empty one, as Kafka's RequestHeader.parse has it.
        context = _new_context(RequestContext,
                               (conn, api_key, api_version, correlation_id, request.client_id or ""))
        try:
            answer: Any = (self._through_chain(plan.handle, context, request) if self._wrapped
                           else plan.handle(context, request))
            kind = type(answer)
            # A plain-function handler has answered already; a coroutine (or other awaitable)
            # runs in the connection's worker task, from its start (see the module docstring).
            if kind is _CoroutineType or (kind not in _ANSWERS and inspect.isawaitable(answer)):
                return self._finish(conn, context, plan, answer)
        except CloseConnection:
            raise
        except KafkaApiError as refusal:
            answer = self._refusal(conn, context, refusal)
        except Exception:
            log.exception("handler for api key %d v%d failed; closing %s", api_key, api_version, conn.id)
            raise CloseConnection from None
        response = self._respond(conn, context, plan, answer)
        if response is not None:
            if isinstance(response, list):
                out.append(_SIZE.pack(frame_size(response)))
                out.extend(response)
                return None
            out.append(_SIZE.pack(len(response)))
            out.append(response)
            if memo is not None:
                AnswerMemo.remember(memo, frame, response, software)
        return None

    def _route(self, conn: ConnectionInfo, frame: bytes, out: list[Chunk]) -> _Plan | None:
        """The plan for a frame's API key and version, made (and kept) on first use; None when
        the frame was answered as an unknown request instead."""
        api_key, api_version, correlation_id = unpack_request_prefix(frame, 0)
        route = self.routes.get(api_key)
        if route is None or not route.low <= api_version <= route.high or \
                (route.gated and not self.runtime.gate_open(route.handler)):
            if self.interceptors:
                self._tell_unrouted(conn, frame, api_key, api_version, correlation_id)
            unknown = self._unknown(conn, api_key, api_version, correlation_id)
            out.append(_SIZE.pack(len(unknown)))
            out.append(unknown)
            return None
        plan = route.versions.get(api_version)
        if plan is None:
            try:
                plan = route.plan(api_key, api_version, self.memo.table(frame) if route.memoize else None)
            except DecodeError as exc:
                self._unparsable(conn, api_key, api_version, exc)
        if not route.gated:  # a gate is the runtime's to answer on every request
            self.plans[frame[:4]] = plan
            from_frame = route.handler.from_frame
            if self._from_frames and from_frame is not None and plan.handle is route.handle:  # not refused
                answerer = from_frame(api_version)
                if answerer is not None:
                    self.frame_paths[frame[:4]] = answerer
        return plan

    def _none_applies(self, conn: ConnectionInfo, frame: ReceivedFrame) -> bool:
        """Whether no installed interceptor applies to the request (``Interceptor.applies``), so
        it may take a fast path from the frame; a header that does not read goes the plain way."""
        try:
            header = peek_request_header(frame)
        except DecodeError:
            return False
        context = _new_context(RequestContext, (conn, header.api_key, header.api_version,
                                                header.correlation_id, header.client_id or ""))
        for interceptor in self.interceptors:
            if interceptor.applies(context):
                return False
        return True

    def _tell_unrouted(self, conn: ConnectionInfo, frame: bytes, api_key: int, api_version: int,
                       correlation_id: int) -> None:
        """The interceptors' ``unrouted`` notice: told, not asked (the answer is the dispatcher's)."""
        try:
            client_id = peek_request_header(frame).client_id or ""
        except DecodeError:
            client_id = None
        context = _new_context(RequestContext, (conn, api_key, api_version, correlation_id, client_id))
        for interceptor in self.interceptors:
            interceptor.unrouted(context)

    def _unparsable(self, conn: ConnectionInfo, api_key: int, api_version: int, exc: DecodeError) -> NoReturn:
        log.warning("closing %s from %s:%d: cannot parse %s: %s", conn.id, *conn.client_address,
                    f"api key {api_key} v{api_version}", exc)
        raise CloseConnection from None

    def _through_chain(self, handle: Handler, context: RequestContext, request: Request) -> Any:
        """The request through the hooks and the interceptors that apply to it: the answer, or an
        awaitable of it (kafkapy.server.interceptors says when the chain is stepped in place)."""
        chain = []
        in_place = self._chain_in_place
        for interceptor in self.interceptors:
            if interceptor.applies(context):
                chain.append(interceptor)
                in_place = in_place and interceptor.steps_in_place
        if not chain and not self.request_hooks:
            return handle(context, request)  # as if none were installed
        through = (self._hooks_then_handle(handle, context, request, chain) if self.request_hooks
                   else run_chain(chain, handle, context, request))
        if not in_place:
            return through
        return eager_start(through)[1]  # the answer, or an awaitable of it for the worker task

    async def _hooks_then_handle(self, handle: Handler, context: RequestContext,
                                 request: Request, chain: list[Interceptor]) -> Answer:
        for module in self.request_hooks:
            await module.on_request(context, request)
        if chain:
            return await run_chain(chain, handle, context, request)
        answer = handle(context, request)
        if inspect.isawaitable(answer):
            return await answer
        return answer

    async def _finish(self, conn: ConnectionInfo, context: RequestContext, plan: _Plan,
                      answer: Awaitable[Answer]) -> Frame | None:
        """A request whose hooks or handler are a coroutine, awaited in the connection's task."""
        try:
            body = await answer
        except CloseConnection:
            raise
        except KafkaApiError as refusal:
            body = self._refusal(conn, context, refusal)
        except Exception:
            log.exception("handler for api key %d v%d failed; closing %s", context.api_key,
                          context.api_version, conn.id)
            raise CloseConnection from None
        return self._respond(conn, context, plan, body)

    @staticmethod
    def _refusal(conn: ConnectionInfo, context: RequestContext, refusal: KafkaApiError) -> Answer:
        """A handler's KafkaApiError as the response's top-level error_code (and error_message
        where the version has one); every other field takes its default. A response with no
        top-level error_code cannot say it: the connection closes, as for a failed handler."""
        body = fit_body(context.api_key, "response", context.api_version,
                        {"error_code": refusal.code, "error_message": refusal.message})
        if "error_code" not in body:
            log.warning("closing %s: api key %d v%d has no top-level error code for %s", conn.id,
                        context.api_key, context.api_version, refusal)
            raise CloseConnection from None
        return body

    def _respond(self, conn: ConnectionInfo, context: RequestContext, plan: _Plan,
                 body: Answer) -> Frame | None:
        if body is None:
            return None
        if isinstance(body, ChunkedResponse):
            if self.runtime.fast_paths.chunked_responses:
                return self._respond_in_chunks(conn, context, body)
            plain: Mapping[str, Any] = joined(body.body)  # the plain path: records copied into one frame
            body = plain
        if isinstance(body, EncodedResponse):
            tag = plan.tag
            response = _CORRELATION.pack(context.correlation_id) + tag + body.data if tag else \
                _CORRELATION.pack(context.correlation_id) + body.data
            body = body.body
        else:
            try:
                response = plan.encode(context.correlation_id, body)
            except Exception:
                log.exception("cannot encode the response to api key %d v%d; closing %s", context.api_key,
                              context.api_version, conn.id)
                raise CloseConnection from None
        observers = self.runtime.observers
        if observers.active:
            observers.record_response(body, conn, context.api_version, context.correlation_id)
            if observers.wants_frames:
                observers.record_frame(conn, False, response)
        return response

    def _respond_in_chunks(self, conn: ConnectionInfo, context: RequestContext,
                           answer: ChunkedResponse) -> list[Chunk]:
        try:
            chunks = encode_response_chunks(context.api_key, context.api_version, context.correlation_id,
                                            answer.body)
        except Exception:
            log.exception("cannot encode the response to api key %d v%d; closing %s", context.api_key,
                          context.api_version, conn.id)
            raise CloseConnection from None
        observers = self.runtime.observers
        if observers.active:  # observers get bytes: a copy, made only for them
            observers.record_response(joined(answer.body), conn, context.api_version, context.correlation_id)
            if observers.wants_frames:
                observers.record_frame(conn, False, b"".join(chunks))
        return chunks

    def _unknown(self, conn: ConnectionInfo, api_key: int, api_version: int, correlation_id: int) -> bytes:
        observers = self.runtime.observers
        if observers.active:
            observers.record_request(None, conn, api_key, api_version, correlation_id)
        if api_key == ApiKey.API_VERSIONS:
            low, high = self.served_versions().get(ApiKey.API_VERSIONS, (0, API_VERSIONS_FALLBACK_MAX))
            body = {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": [
                {"api_key": ApiKey.API_VERSIONS, "min_version": low, "max_version": high}]}
            response = encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body)
            if observers.active:
                observers.record_response(body, conn, 0, correlation_id)
            return response
        if self.runtime.config["unknown.request.behavior"] == "close":
            log.info("closing %s: unsupported api key %d v%d", conn.id, api_key, api_version)
            raise CloseConnection
        if observers.active:
            observers.record_response(None, conn, api_version, correlation_id)
        return struct.pack(">i", correlation_id)  # the KIP-35 draft's empty response
