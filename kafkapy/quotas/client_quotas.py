"""Byte-rate and request quotas for (user, client-id): Kafka's ClientQuotaManager, as an interceptor.

Theory of operation
-------------------
Every client quota a broker enforces is one of ``producer_byte_rate`` (bytes of
Produce requests per second), ``consumer_byte_rate`` (bytes of Fetch responses
per second) and ``request_percentage`` (percent of a second spent handling
requests; Kafka counts handler thread time, here it is the wall time from the
start of handling to the answer, waits included). A request's quota is found in
the stored entities in Kafka's precedence order (``ClientQuotaManager``), the
first that sets the key wins::

    users/<user>/clients/<client-id>     users/<default>/clients/<client-id>
    users/<user>/clients/<default>       users/<default>/clients/<default>
    users/<user>                         users/<default>
                                         clients/<client-id>
                                         clients/<default>

(left column first, top to bottom). The level that matched decides which
sensor is charged, as Kafka's metric tags do: a ``users/<default>`` quota gives
every user a sensor of its own, a ``clients/<c>`` quota one per client-id
shared by all users.

Each sensor is a :class:`~kafkapy.quotas.rate.Rate` over ``quota.window.num``
(11) windows of ``quota.window.size.seconds`` (1 s). After the handler, the
request's amount is recorded; over the bound, the throttle time is Kafka's
``QuotaUtils.throttleTime``, ``(rate - bound) / bound * windowSize``; the
request quota's is capped at one window (Kafka's
``ClientRequestQuotaManager.maxThrottleTimeMs``), the byte-rate ones are not.

KIP-219: the answer goes out at once with ``throttle_time_ms`` set, and the
connection is muted for that long: the next request on it is not handled
before the throttle ends (its ``before`` waits; requests on a connection are
answered in order, so nothing behind it is either). A client that honours
``throttle_time_ms`` sends nothing meanwhile anyway. A throttled Fetch is answered with no
partitions, its bytes taken off the sensor again, as Kafka answers one (the consumer fetches the
same offsets once the mute ends).

Cost: the interceptor is installed only while some stored entity sets one of
these keys; with none, requests take the plain path. While installed, it
``applies`` only to what a stored key can charge (every request with a
``request_percentage`` somewhere; else Produce for ``producer_byte_rate``, Fetch
for ``consumer_byte_rate``) and to requests on a muted connection: the rest skip
the chain. Its hooks are stepped in place (``steps_in_place``: they only sleep).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.chunks import RecordChunks
from kafkapy.quotas.metrics import MetricsRegistry
from kafkapy.quotas.rate import Rate
from kafkapy.server.interceptors import PASS, Interceptor, Pass
from kafkapy.server.modules import ChunkedResponse, EncodedResponse
from kafkapy.store.base import DEFAULT_ENTITY, sanitize

if TYPE_CHECKING:
    from kafkapy.protocol import Request
    from kafkapy.server.modules import Answer, RequestContext

__all__ = ["BYTE_RATE_KEYS", "ClientQuotas", "answer_size", "produce_size", "resolve_quota"]

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
# Inter-broker requests Kafka answers without charging or throttling them (KafkaApis'
# sendResponseExemptThrottle): a broker's own traffic is never slowed by a client quota.
EXEMPT_APIS = frozenset({ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS, ApiKey.ALTER_PARTITION})
# Kafka's ClientQuotaManager drops a sensor (and its metrics) unused for an hour
# (InactiveSensorExpirationTimeSeconds), so client-ids that come and go do not pile up; kafkapy
# looks for such sensors at most once a minute.
SENSOR_EXPIRY_S = 3600.0
_SWEEP_INTERVAL_S = 60.0
BYTE_RATE_KEYS = (PRODUCE, FETCH, REQUEST)
# Kafka's metric groups of the three quota sensors (QuotaType).
_GROUPS = {PRODUCE: "Produce", FETCH: "Fetch", REQUEST: "Request"}
_MUTED_UNTIL = "quotas.muted_until"  # ConnectionInfo.attributes key: monotonic time the mute ends
_STARTED = "quotas.started"  # ConnectionInfo.attributes key: correlation id -> when handling began

SensorKey = tuple[str, str]  # the metric tags (user, client-id); "" where the level has none


def _levels(user: str, client: str) -> list[tuple[str, SensorKey]]:
    """The entity paths to look in, in Kafka's precedence order, each with the sensor it charges."""
    u, c, d = sanitize(user), sanitize(client), DEFAULT_ENTITY
    return [(f"users/{u}/clients/{c}", (user, client)), (f"users/{u}/clients/{d}", (user, client)),
            (f"users/{u}", (user, "")),
            (f"users/{d}/clients/{c}", (user, client)), (f"users/{d}/clients/{d}", (user, client)),
            (f"users/{d}", (user, "")),
            (f"clients/{c}", ("", client)), (f"clients/{d}", ("", client))]


def resolve_quota(entities: Mapping[str, Mapping[str, float]], user: str, client: str,
                  key: str) -> tuple[float, SensorKey] | None:
    """The quota ``key`` for (user, client-id) and the sensor it charges, or None if unset."""
    for path, sensor in _levels(user, client):
        bound = entities.get(path, {}).get(key)
        if bound is not None:
            return bound, sensor
    return None


def produce_size(request: Request) -> int:
    """The bytes a Produce request is charged: its record sets (the bulk of Kafka's request.sizeInBytes)."""
    return sum(len(p["records"] or b"") for t in request.body["topic_data"] for p in t["partition_data"])


def answer_size(answer: Answer) -> int:
    """The bytes a Fetch response is charged: its record sets."""
    if isinstance(answer, (ChunkedResponse, EncodedResponse)):
        body: Any = answer.body
    elif answer is None:
        return 0
    else:
        body = answer
    total = 0
    for topic in body.get("responses") or ():
        for partition in topic.get("partitions") or ():
            records = partition.get("records")
            if records is not None:
                total += records.size if isinstance(records, RecordChunks) else len(records)
    return total


def _with_throttle(answer: Answer, throttle_ms: int) -> Answer:
    if isinstance(answer, ChunkedResponse):
        return ChunkedResponse({**answer.body, "throttle_time_ms": throttle_ms})
    if isinstance(answer, EncodedResponse):  # re-encoded by the dispatcher from the body
        return {**answer.body, "throttle_time_ms": throttle_ms}
    if answer is None:
        return None
    return {**answer, "throttle_time_ms": throttle_ms}


def from_follower(request: Request) -> bool:
    """A Fetch from a replica (replica id 0 or more, in the field or, from v15, in replica_state):
    Kafka answers it exempt from the client quotas."""
    state = request.body.get("replica_state")
    replica = state["replica_id"] if state is not None else request.body.get("replica_id", -1)
    return int(replica) >= 0


def throttle_ms(seconds: float) -> int:
    """Kafka's QuotaUtils.throttleTime: the throttle in milliseconds, rounded as Math.round does."""
    return math.floor(seconds * 1000 + 0.5)


def _user(principal: str) -> str:
    return principal.split(":", 1)[1] if ":" in principal else principal


class ClientQuotas(Interceptor):
    """Charges Produce bytes, Fetch bytes and request time to the (user, client-id) sensors."""

    steps_in_place = True

    def __init__(self, metrics: MetricsRegistry, samples: int = 11, window: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.metrics = metrics
        self.samples = samples
        self.window = window
        self.clock = clock
        self.entities: dict[str, dict[str, float]] = {}
        self._sensors: dict[tuple[str, SensorKey], Rate] = {}
        self._last_used: dict[tuple[str, SensorKey], float] = {}
        self._next_sweep = clock() + _SWEEP_INTERVAL_S
        self._resolved: dict[tuple[str, str, str], tuple[float, SensorKey] | None] = {}
        # What ``applies`` reads: whether some entity sets request_percentage (then every request
        # is charged), else the API keys a byte rate is charged on.
        self._every_request = False
        self._charged: frozenset[int] = frozenset()

    def set_entities(self, entities: Mapping[str, Mapping[str, float]]) -> None:
        """New stored quotas: bounds change in place, so a sensor keeps its history (as Kafka's do)."""
        self.entities = {path: dict(values) for path, values in entities.items()}
        self._resolved.clear()  # each sensor takes its new bound when next charged
        keys = {key for values in self.entities.values() for key in values}
        self._every_request = REQUEST in keys
        self._charged = frozenset(api for key, api in ((PRODUCE, ApiKey.PRODUCE), (FETCH, ApiKey.FETCH))
                                  if key in keys)

    def applies(self, context: RequestContext) -> bool:
        """False only where ``before`` would not wait and nothing would be charged: no stored key
        charges this API, and the connection is not muted now."""
        if self._every_request or context.api_key in self._charged:
            return True
        muted_until = context.connection.attributes.get(_MUTED_UNTIL)
        return muted_until is not None and muted_until > self.clock()

    def close(self) -> None:
        for sensor in list(self._sensors):
            self._drop(sensor)

    def _drop(self, sensor: tuple[str, SensorKey]) -> None:
        key, (user, client) = sensor
        self.metrics.remove(_GROUPS[key], "byte-rate" if key != REQUEST else "request-time",
                            user=user, **{"client-id": client})
        del self._sensors[sensor]
        self._last_used.pop(sensor, None)

    def _expire(self, now: float) -> None:
        """Drop the sensors unused for SENSOR_EXPIRY_S, and the quotas resolved for them."""
        self._next_sweep = now + _SWEEP_INTERVAL_S
        idle = [sensor for sensor, used in self._last_used.items() if now - used >= SENSOR_EXPIRY_S]
        for sensor in idle:
            self._drop(sensor)
        if idle or len(self._resolved) > 2 * len(self._sensors) + 1000:
            self._resolved.clear()  # a cache: rebuilt by the next requests

    def _sensor(self, key: str, user: str, client: str, now: float | None = None) -> Rate | None:
        if now is None:
            now = self.clock()
        if now >= self._next_sweep:
            self._expire(now)
        cache = (key, user, client)
        if cache in self._resolved:
            found = self._resolved[cache]
        else:
            found = self._resolved[cache] = resolve_quota(self.entities, user, client, key)
        if found is None:
            return None
        bound, sensor = found
        self._last_used[(key, sensor)] = now
        rate = self._sensors.get((key, sensor))
        if rate is not None:
            rate.bound = bound
        else:
            rate = Rate(self.samples, self.window, bound)
            self._sensors[(key, sensor)] = rate
            self.metrics.add(_GROUPS[key], "byte-rate" if key != REQUEST else "request-time", rate,
                             f"the {key} of one quota entity (Kafka's {_GROUPS[key]} quota sensor)",
                             user=sensor[0], **{"client-id": sensor[1]})
        return rate

    async def before(self, context: RequestContext, request: Request) -> Answer | Pass:
        attributes = context.connection.attributes
        muted_until = attributes.get(_MUTED_UNTIL)
        if muted_until is not None:
            wait = muted_until - self.clock()
            if wait > 0:
                await asyncio.sleep(wait)  # KIP-219: the channel is muted until the throttle ends
        attributes.setdefault(_STARTED, {})[context.correlation_id] = time.perf_counter()
        return PASS

    async def after(self, context: RequestContext, request: Request, answer: Answer) -> Answer:
        conn = context.connection
        started = conn.attributes.get(_STARTED, {}).pop(context.correlation_id, time.perf_counter())
        api_key = context.api_key
        if api_key in EXEMPT_APIS or (api_key == ApiKey.FETCH and from_follower(request)):
            return answer  # Kafka's exempt answers: nothing charged, no throttle
        user, client = _user(conn.principal), context.client_id or ""
        now = self.clock()
        throttle = 0.0
        fetched, fetch_rate = 0, None
        if api_key == ApiKey.PRODUCE:
            rate = self._sensor(PRODUCE, user, client, now)
            if rate is not None:
                throttle = rate.record_checked(produce_size(request), now)
        elif api_key == ApiKey.FETCH:
            rate = self._sensor(FETCH, user, client, now)
            if rate is not None:
                fetched, fetch_rate = answer_size(answer), rate
                throttle = rate.record_checked(fetched, now)
        # Kafka's handleProduceRequest leaves an acks=0 Produce out of the request quota.
        acks_zero = api_key == ApiKey.PRODUCE and request.body.get("acks") == 0
        rate = None if acks_zero else self._sensor(REQUEST, user, client, now)
        if rate is not None:
            spent = time.perf_counter() - started
            # Kafka records a request's thread time as a percentage of a second.
            throttle = max(throttle, min(rate.record_checked(spent * 100.0, now), self.window))
        # A bound of 0 (stored by hand) gives an infinite throttle, which Kafka's int conversion of
        # Math.round(Infinity) turns into -1: no throttle.
        throttled_ms = throttle_ms(throttle) if math.isfinite(throttle) else 0
        if throttled_ms <= 0:
            return answer  # Kafka throttles only a throttle time of 1 ms or more
        conn.attributes[_MUTED_UNTIL] = now + throttled_ms / 1000
        if context.api_key == ApiKey.FETCH:
            # Kafka (KafkaApis.handleFetchRequest): a throttled fetch answers no records, and the
            # bytes it would have carried are taken off the fetch sensor again.
            answer = _without_records(answer)
            if fetch_rate is not None:
                fetch_rate.record(-fetched, now)
        if not _has_throttle(answer):  # an answer without the field (none, or an old version)
            return answer
        return _with_throttle(answer, throttled_ms)


def _without_records(answer: Answer) -> Answer:
    """A Fetch answer as Kafka's fetch context's getThrottledResponse: no partitions, the session
    and error kept (the session still reads from the fetcher's offsets, so nothing is skipped)."""
    if isinstance(answer, ChunkedResponse):
        return ChunkedResponse({**answer.body, "responses": []})
    if isinstance(answer, Mapping):
        return {**answer, "responses": []}
    return answer


def _has_throttle(answer: Answer) -> bool:
    body: Any = answer.body if isinstance(answer, (ChunkedResponse, EncodedResponse)) else answer
    return isinstance(body, Mapping) and "throttle_time_ms" in body
