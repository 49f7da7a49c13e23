"""The one interface through which functionality plugs into the broker.

A module declares the API keys it serves (with versions), hooks on connection
accept/close and on every request, the features it supports (for feature
gating), its config keys, and what it provides to other modules and needs from
them. The broker's ApiVersions answer is derived from the enabled modules'
declarations, never listed by hand. A module is built with the broker's
services (kafkapy.server.services), its only way to the broker; the
composition root (kafkapy.assembly) builds the modules in dependency order.

Modules are chosen by ``kafkapy.modules=`` (entry-point names or dotted
paths; third parties register under the entry-point group ``kafkapy.modules``)
and loaded by the composition root, kafkapy.assembly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import attrs

from kafkapy.protocol.versions import VersionRange
from kafkapy.server.config import ConfigKey

if TYPE_CHECKING:
    from kafkapy.protocol import Request
    from kafkapy.protocol.framing import ReceivedFrame
    from kafkapy.server.connection import ConnectionInfo
    from kafkapy.server.services import BrokerServices

__all__ = ["NO_RESPONSE", "Answer", "ApiHandler", "ChunkedResponse", "EncodedResponse", "FromFrame",
           "Handler", "Module", "RequestContext"]


class RequestContext(NamedTuple):
    """What a handler knows about the request besides its body (a named tuple: immutable, and
    the cheapest object to build once per request)."""

    connection: ConnectionInfo
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None  # from the dispatcher always a str: a null one (or header v0's none) is ""


@attrs.frozen
class EncodedResponse:
    """A response body together with its encoding at the request's version (no header), for
    answers that repeat unchanged: the dispatcher sends ``data`` and observers see ``body``."""

    body: Mapping[str, Any]
    data: bytes


@attrs.frozen
class ChunkedResponse:
    """A response body whose ``records`` fields are RecordChunks (kafkapy.protocol.chunks): the
    dispatcher writes it as several buffers, the stored record batches themselves among them,
    with ``transport.writelines``; nothing is joined in Python."""

    body: Mapping[str, Any]


# A handler returns the response body (or an EncodedResponse or ChunkedResponse), or None when
# the request takes no response (Produce with acks=0). It may be a coroutine function, or a plain
# function when it never waits: that saves a coroutine per request.
Answer = Mapping[str, Any] | EncodedResponse | ChunkedResponse | None
Handler = Callable[[RequestContext, "Request"], Awaitable[Answer] | Answer]
# A fast path from the frame (``ApiHandler.from_frame``): given the connection and a request frame
# (no size prefix), the whole answer on the wire (size prefix included), NO_RESPONSE when it was
# handled and takes none, or None, having changed nothing, to leave the frame to the plain path.
# The frame is bytes, or a large frame's own bytearray (FastPaths.kept_frames): read it, never keep
# or change it unless the answer is given from it.
FromFrame = Callable[["ConnectionInfo", "ReceivedFrame"], bytes | None]
NO_RESPONSE = b""


@attrs.frozen
class ApiHandler:
    versions: VersionRange
    handle: Handler
    # A feature that must be finalized at >= level for the API to be served (KIP-584 gating).
    feature: str | None = None
    min_feature_level: int = 1
    # True when the answer is a function of the request's version and its bytes after the
    # correlation id (client id, body), and of broker state that only changes along with the
    # routing table (modules, feature gates: Dispatcher.rebuild). The dispatcher then answers a
    # request it has answered before, byte for byte, from a bounded memo: no decoding, no handler.
    # Not while observers or request hooks are configured (they see every request).
    # ApiVersions qualifies: each client library sends the same bytes on every connection.
    memoize: bool = False
    # True for a coroutine handler that neither calls asyncio.current_task() nor enters
    # asyncio.timeout() (nor asyncio.wait_for: asyncio.timeout() inside on Python 3.12+) before it
    # first suspends, or awaits kafkapy.server.eager.into_task() first: it is then started in
    # place, inside the read that brought the request (kafkapy.server.eager, the ``eager`` fast
    # path), and a request that never waits is answered there, with no task and no extra loop
    # steps; one that suspends is finished by the connection's worker, as any coroutine handler is.
    in_place: bool = False
    # A fast path for the common request of one version, straight from the frame's bytes: called
    # once per served version, it gives that version's FromFrame (or None). The dispatcher offers
    # it a frame only when nothing watches or wraps the request (no observers, no module request
    # hooks, no interceptor that applies; FastPaths.from_frame on), and it must answer exactly as
    # the plain path would, or decline before any effect (kafkapy.dataplane.produce_frame).
    from_frame: Callable[[int], FromFrame | None] | None = None


class Module:
    """Base class for broker modules; every hook is optional."""

    name: ClassVar[str] = "module"
    config_keys: ClassVar[tuple[ConfigKey, ...]] = ()
    # feature name -> (min_version, max_version) supported by this module
    features: ClassVar[Mapping[str, tuple[int, int]]] = {}
    # What other modules may look up with BrokerServices.provider (capability names), what must be
    # provided for this module to run, and what it uses when present: the root builds and starts
    # the providers first, and a missing need or a cycle is a ConfigError.
    provides: ClassVar[tuple[str, ...]] = ()
    needs: ClassVar[tuple[str, ...]] = ()
    wants: ClassVar[tuple[str, ...]] = ()

    def __init__(self, services: BrokerServices) -> None:
        self.services = services

    def apis(self) -> Mapping[int, ApiHandler]:
        return {}

    async def start(self) -> None:
        """Called once the broker's listeners are bound, before serving."""

    async def stop(self) -> None:
        """Called at shutdown, after listeners stop accepting."""

    async def on_accept(self, connection: ConnectionInfo) -> bool:
        """Return False to close the new connection before it is served. Runs in a task (so
        ``asyncio.timeout()`` and ``asyncio.wait_for`` work from its first line)."""
        return True

    def on_close(self, connection: ConnectionInfo) -> None:
        """A connection ended (either side)."""

    async def on_request(self, context: RequestContext, request: Request) -> None:
        """Seen before the handler runs, for every decoded request."""
