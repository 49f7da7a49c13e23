"""Client telemetry (KIP-714): GetTelemetrySubscriptions and PushTelemetry, and the pushes kept
for tests to read.

Kafka serves these two APIs only when a telemetry receiver is configured; kafkapy's receiver is
this module, enabled with ``kafkapy.modules=telemetry``. Then a client that supports KIP-714
(librdkafka 2.5 and later, Java clients 3.7 and later) asks for its subscription on connecting
and, if a ``CLIENT_METRICS`` subscription matches it, pushes the metrics it names every interval.
Each push is decompressed, read as OTLP (:mod:`kafkapy.telemetry.otlp`) and kept: tests read them
with ``Broker.telemetry()``. The subscriptions themselves are kept by the client-metrics module
(:mod:`kafkapy.telemetry.client_metrics`), which every broker runs, as every Kafka broker serves
the CLIENT_METRICS config resources with or without a receiver.

The checks are Kafka's ClientMetricsManager's: a client instance is kept for
``max(60 s, 3 x its push interval)`` after its last request, and forgotten when the connection
that made it closes (so a client that reconnects starts afresh); a GetTelemetrySubscriptions sooner
than the push interval after the last request is throttled (THROTTLING_QUOTA_EXCEEDED), unless
the subscriptions changed since; a push sooner than the interval after the last push is throttled
too, except the first after a GetTelemetrySubscriptions (the client jitters its interval) and a
terminating one; after a terminating push, nothing more (INVALID_REQUEST); a stale subscription id
gets UNKNOWN_SUBSCRIPTION_ID, a codec outside the accepted list UNSUPPORTED_COMPRESSION_TYPE, a
payload over ``telemetry.max.bytes`` TELEMETRY_TOO_LARGE, and a payload that does not decompress
or is not OTLP INVALID_RECORD (where Kafka's receiver plugin fails). A payload that would inflate
beyond :data:`INFLATE_FACTOR` times ``telemetry.max.bytes`` is refused TELEMETRY_TOO_LARGE too,
before it is inflated further: Kafka's receiver inflates a push whole and without a bound.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from kafkapy.errors import DecodeError, ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.compression import Compression, InflationLimitExceeded, decompress
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.config import ConfigKey
from kafkapy.server.connection import ConnectionInfo, java_host_address
from kafkapy.server.modules import ApiHandler, Module, RequestContext
from kafkapy.store.base import encode_uuid
from kafkapy.telemetry.client_metrics import (
    CLIENT_METRICS,
    CLIENT_METRICS_SUBSCRIPTIONS,
    ClientMetricsModule,
)
from kafkapy.telemetry.otlp import MetricPoint, OtlpError, decode_metrics
from kafkapy.telemetry.subscriptions import (
    ClientAttributes,
    Subscription,
    effective_subscription,
)
from kafkapy.validators import AtLeast

if TYPE_CHECKING:
    from kafkapy.protocol import Request
    from kafkapy.server.services import BrokerServices

__all__ = ["CLIENT_METRICS", "TelemetryModule", "TelemetryPush"]

# The codecs offered to clients, in Kafka's order of preference.
ACCEPTED_COMPRESSION = (Compression.ZSTD, Compression.LZ4, Compression.GZIP, Compression.SNAPPY)
INSTANCE_EXPIRY_MS = 60_000  # Kafka's client instance cache expiry (at least 3 push intervals)
INSTANCES_KEPT = 16_384  # Kafka's cache size: one per active client connection
PUSHES_KEPT = 10_000  # the newest pushes kept for Broker.telemetry()
# ... and at most this many inflated payload bytes among them: 10,000 pushes of 16 MiB each would
# be 160 GB, so a few clients pushing large payloads must push out the oldest, not fill memory.
PUSH_BYTES_KEPT = 64 * 1024 * 1024
# A push may inflate to this many times telemetry.max.bytes (which bounds the compressed bytes):
# OTLP metrics, names and attribute keys repeated in every data point, compress some 4-8 times, so
# an honest push stays well inside; a bomb (1 MB of zstd can claim 32 GB) stops at 16 MiB.
INFLATE_FACTOR = 16
_KNOWN_CODECS = frozenset(int(codec) for codec in Compression)
_RESERVED = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})  # Kafka's Uuid.RESERVED
# ConnectionInfo.attributes key: the client instance last made (or remade) on that connection,
# forgotten when it closes (Kafka's clientConnectionIdMap and its disconnect listener).
_MADE_HERE = "telemetry.instance"

CONFIG_KEYS = (
    ConfigKey("telemetry.max.bytes", "int", 1024 * 1024,
              "The largest metrics payload a PushTelemetry may carry (Kafka's default, 1 MiB).",
              AtLeast(1)),
)


@attrs.frozen
class TelemetryPush:
    """One accepted PushTelemetry: who pushed, under which subscription, and what it held."""

    client_instance_id: uuid.UUID
    client_id: str | None
    subscription_id: int
    terminating: bool
    compression: str
    payload: bytes  # the OTLP MetricsData, decompressed
    metrics: tuple[MetricPoint, ...]
    received_ms: int

    def names(self) -> set[str]:
        return {point.name for point in self.metrics}


@attrs.define
class _Instance:
    """A client instance as Kafka's ClientMetricsInstance keeps it."""

    attributes: ClientAttributes
    subscriptions_version: int
    metrics: tuple[str, ...]
    interval_ms: int
    subscription_id: int
    last_get_ms: int | None = None  # None: never (Kafka's zero timestamps, long past)
    last_push_ms: int | None = None
    last_seen_ms: int = 0
    terminating: bool = False

    def may_get(self, now_ms: int) -> bool:
        """An ask is taken when nothing was taken within the interval before it."""
        last = max((t for t in (self.last_get_ms, self.last_push_ms) if t is not None), default=None)
        if last is not None and now_ms - last < self.interval_ms:
            return False
        self.last_get_ms = now_ms
        return True

    def may_push(self, now_ms: int) -> bool:
        """A push is taken right after an accepted ask (clients jitter their interval), else an
        interval after the last push."""
        last_get, last_push = self.last_get_ms, self.last_push_ms
        accept = (last_push is None or (last_get is not None and last_get > last_push)
                  or now_ms - last_push >= self.interval_ms)
        if accept:
            self.last_push_ms = now_ms
        return accept


class TelemetryModule(Module):
    name = "telemetry"
    config_keys = CONFIG_KEYS
    needs = (CLIENT_METRICS_SUBSCRIPTIONS,)  # the subscriptions clients are matched against

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self._client_metrics: ClientMetricsModule | None = None  # found at start (a need)
        self._instances: collections.OrderedDict[uuid.UUID, _Instance] = collections.OrderedDict()
        self.pushes: collections.deque[TelemetryPush] = collections.deque()
        self._pushes_bytes = 0  # the inflated payload bytes of self.pushes
        self._max_bytes: int = services.config["telemetry.max.bytes"]

    def apis(self) -> Mapping[int, ApiHandler]:
        return {
            ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: ApiHandler(VersionRange(0, 0), self.get_subscriptions),
            ApiKey.PUSH_TELEMETRY: ApiHandler(VersionRange(0, 0), self.push),
        }

    # --- subscriptions: the client-metrics module's ---------------------------------------------

    async def start(self) -> None:
        self._client_metrics = self.services.provider(CLIENT_METRICS_SUBSCRIPTIONS, ClientMetricsModule)

    @property
    def subscriptions(self) -> Mapping[str, Subscription]:
        """The CLIENT_METRICS subscriptions (kept by the client-metrics module, on every broker)."""
        return self._client_metrics.subscriptions if self._client_metrics is not None else {}

    @property
    def _subscriptions_version(self) -> int:
        return self._client_metrics.version if self._client_metrics is not None else 0

    # --- client instances -----------------------------------------------------------------------

    def _now_ms(self) -> int:
        return int(self.services.clock() * 1000)

    def _instance(self, ctx: RequestContext, instance_id: uuid.UUID, now_ms: int) -> _Instance:
        """The kept instance, made anew when unknown, expired, or when the subscriptions changed
        since it was made (then its request timestamps start over, as in Kafka)."""
        instance = self._instances.get(instance_id)
        if instance is not None and now_ms - instance.last_seen_ms > max(INSTANCE_EXPIRY_MS,
                                                                          3 * instance.interval_ms):
            instance = None
        if instance is None or instance.subscriptions_version != self._subscriptions_version:
            address, port = ctx.connection.client_address[:2]
            attributes = (instance.attributes if instance is not None else
                          ClientAttributes(instance_id, ctx.client_id, java_host_address(address), port,
                                           *ctx.connection.client_software))
            metrics, interval_ms, subscription_id = effective_subscription(self.subscriptions.values(),
                                                                           attributes)
            instance = _Instance(attributes, self._subscriptions_version, metrics, interval_ms,
                                 subscription_id)
            ctx.connection.attributes[_MADE_HERE] = instance_id
        instance.last_seen_ms = now_ms
        self._instances[instance_id] = instance
        self._instances.move_to_end(instance_id)
        while len(self._instances) > INSTANCES_KEPT:
            self._instances.popitem(last=False)
        return instance

    def on_close(self, connection: ConnectionInfo) -> None:
        """The instance this connection made goes with it, as in Kafka: a client that connects
        again is a new instance to the broker (no pacing or terminating state carried over)."""
        instance_id = connection.attributes.pop(_MADE_HERE, None)
        if instance_id is not None:
            self._instances.pop(instance_id, None)

    # --- GetTelemetrySubscriptions (71) ---------------------------------------------------------

    def get_subscriptions(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        asked = request.body.get("client_instance_id")
        instance_id = asked if isinstance(asked, uuid.UUID) and asked.int != 0 else self._new_instance_id()
        now_ms = self._now_ms()
        instance = self._instance(ctx, instance_id, now_ms)
        # Kafka's check reads as if a client whose last push failed on its subscription id or
        # codec could ask again at once, but its condition is always true: every early ask is
        # throttled. kafkapy answers as Kafka does.
        if not instance.may_get(now_ms):
            return _get_refusal(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "client_instance_id": instance_id,
                "subscription_id": instance.subscription_id,
                "accepted_compression_types": [int(codec) for codec in ACCEPTED_COMPRESSION],
                "push_interval_ms": instance.interval_ms, "telemetry_max_bytes": self._max_bytes,
                "delta_temporality": True, "requested_metrics": list(instance.metrics)}

    def _new_instance_id(self) -> uuid.UUID:
        """A random id, as Kafka's Uuid.randomUuid makes one: never reserved, and never one whose
        printed form starts with "-" (it would read as an option on a command line)."""
        while True:
            candidate = uuid.uuid4()
            if candidate not in self._instances and candidate not in _RESERVED and \
                    not encode_uuid(candidate).startswith("-"):
                return candidate

    # --- PushTelemetry (72) ---------------------------------------------------------------------

    def push(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        body = request.body
        instance_id = body.get("client_instance_id")
        if not isinstance(instance_id, uuid.UUID) or instance_id in _RESERVED:
            return _push_answer(ErrorCode.INVALID_REQUEST)
        now_ms = self._now_ms()
        instance = self._instance(ctx, instance_id, now_ms)
        terminating = bool(body.get("terminating"))
        try:
            code = self._refusal(instance, body, terminating, now_ms)
        finally:
            instance.terminating = terminating
        if code is not None:
            return _push_answer(code)
        payload = body.get("metrics") or b""
        if payload:
            codec = Compression(body["compression_type"])
            try:
                plain = decompress(codec, payload, limit=INFLATE_FACTOR * self._max_bytes)
                points = decode_metrics(plain)
            except InflationLimitExceeded as exc:
                self.services.log.info("telemetry push from client instance %s refused: %s", instance_id, exc)
                return _push_answer(ErrorCode.TELEMETRY_TOO_LARGE)
            except (DecodeError, OtlpError) as exc:
                self.services.log.info("telemetry push from client instance %s refused: %s", instance_id, exc)
                return _push_answer(ErrorCode.INVALID_RECORD)
            self._keep(TelemetryPush(instance_id, instance.attributes.client_id, instance.subscription_id,
                                     terminating, str(codec), plain, tuple(points),
                                     int(self.services.wall_clock() * 1000)))
        return _push_answer(ErrorCode.NONE)

    def _keep(self, push: TelemetryPush) -> None:
        """Keep the newest pushes within PUSHES_KEPT and PUSH_BYTES_KEPT (always the newest one)."""
        self.pushes.append(push)
        self._pushes_bytes += len(push.payload)
        while len(self.pushes) > 1 and (len(self.pushes) > PUSHES_KEPT
                                        or self._pushes_bytes > PUSH_BYTES_KEPT):
            self._pushes_bytes -= len(self.pushes.popleft().payload)

    def _refusal(self, instance: _Instance, body: Mapping[str, Any], terminating: bool,
                 now_ms: int) -> ErrorCode | None:
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST
        if not instance.may_push(now_ms) and not terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if body.get("subscription_id") != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if body.get("compression_type") not in _KNOWN_CODECS:  # Kafka takes any codec it knows
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if len(body.get("metrics") or b"") > self._max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return None


def _get_refusal(code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "client_instance_id": uuid.UUID(int=0),
            "subscription_id": 0, "accepted_compression_types": [], "push_interval_ms": 0,
            "telemetry_max_bytes": 0, "delta_temporality": False, "requested_metrics": []}


def _push_answer(code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code}
