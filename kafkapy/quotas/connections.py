"""Connection quotas in the accept path: Kafka's ConnectionQuotas (KIP-402 counts, KIP-612 rates).

Theory of operation
-------------------
The broker's accept loop (one per listener) calls :meth:`acceptor_wait` after
each accept. It records the connection in the broker-wide rate (unless the
listener is the protected inter-broker one, with more than one listener) and
in the listener's rate, each bounded by its configured limit (a listener's limits default to
the broker-wide values, as Kafka's do). On a violation
the throttle time comes from :meth:`Rate.throttle_time`, bounded by one quota
window, and the accept loop sleeps that long: that listener accepts nothing
meanwhile, and no other listener is affected. It also waits while no
connection slot is free (``max.connections``, the listener's
``listener.name.<l>.max.connections``), as Kafka's acceptor does.

Then, in the connection's own task, :meth:`admit` applies the per-IP rules.
Per-IP rate (an ``ips`` entity's ``connection_creation_rate``, the IP's own
entry first, then ``ips/<default>``): the attempt is recorded; over the quota
it is un-recorded (it was not accepted) from the IP's, the broker-wide and the listener's
rates, gives its connection slot back, is held for the throttle time (bounded by one quota
window) and then closed, never served: what Kafka's acceptor does
with its throttled sockets. KIP-612's text has the connection checked again
after the delay and served if the rate allows; every connection held back then
wakes at the instant the oldest sample expires and all of them pass together,
so a storm got about twice its quota through. Per-IP count
(``max.connections.per.ip`` and its overrides): over it, closed at once.
Nothing a connection waits for here holds back another IP or listener, and a
connection is handed to request processing only once admitted.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import math
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from kafkapy.quotas.metrics import ACCEPTOR, SOCKET_SERVER, Counter, MetricsRegistry
from kafkapy.quotas.rate import Avg, Rate
from kafkapy.server.config import ConfigError
from kafkapy.server.wakeup import Wakeup

__all__ = ["DYNAMIC_KEYS", "ConnectionQuotas", "normalize_ip", "parse_per_ip_overrides"]

log = logging.getLogger(__name__)

INT_MAX = 2147483647
DYNAMIC_KEYS = ("max.connection.creation.rate", "max.connections", "max.connections.per.ip",
                "max.connections.per.ip.overrides")
_LISTENER_KEYS = ("max.connection.creation.rate", "max.connections")


@functools.lru_cache(maxsize=4096)  # on every accept and close; the same peers come back
def normalize_ip(address: str) -> str:
    """One spelling per address: compressed IPv6, IPv4-mapped IPv6 as IPv4."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def _rate_bound(rate: int) -> float | None:
    """A creation-rate bound for a Rate; Kafka's default, Int.MaxValue connections per second,
    can never be exceeded, so it is no bound at all (and spares the check on every accept)."""
    return None if rate >= INT_MAX else float(rate)


def resolve(host: str) -> str:
    """An IP literal as is, else the first address the host resolves to (Java's InetAddress.getByName);
    OSError if it does not resolve."""
    try:
        return normalize_ip(str(ipaddress.ip_address(host)))
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return normalize_ip(str(infos[0][4][0]))


def parse_per_ip_overrides(text: str) -> dict[str, int]:
    """``host-or-ip:count,...`` (Kafka's max.connections.per.ip.overrides), hosts resolved."""
    result: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        try:
            value = int(count)
        except ValueError:
            value = -1
        if not sep or not host or value < 0:
            raise ConfigError(f"invalid value {text!r} for max.connections.per.ip.overrides: "
                              f"{item!r} is not host:count")
        try:
            result[resolve(host)] = value
        except OSError as exc:
            raise ConfigError(f"invalid value {text!r} for max.connections.per.ip.overrides: "
                              f"cannot resolve {host!r}: {exc}") from None
    return result


def _listener_setting(settings: Mapping[str, Any], listener: str, key: str) -> Any:
    prefix = f"listener.name.{listener.lower()}."
    for name, value in settings.items():
        if name.lower() == prefix + key:
            return value
    return None


def _int_setting(name: str, value: Any, minimum: int = 0) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"invalid value {value!r} for {name}: expected an integer") from None
    if number < minimum:
        raise ConfigError(f"invalid value {value!r} for {name}: must be at least {minimum}")
    return number


class _ListenerQuota:
    def __init__(self, name: str, samples: int, window: float) -> None:
        self.name = name
        self.rate = Rate(samples, window)
        self.max_connections = INT_MAX
        self.applied = (INT_MAX, INT_MAX)  # the creation rate and count limit in force
        self.count = 0
        self.throttle_time = Avg(samples, window)  # ms, broker-wide or listener rate throttling
        self.ip_throttle_time = Avg(samples, window)  # ms, per-IP rate throttling
        self.blocked = Rate(samples, window)  # seconds the acceptor was blocked, per second
        self.accepted = Counter()
        self.throttled = Counter()
        self.dropped = Counter()


class ConnectionQuotas:
    """The accept gate (see kafkapy.server.services.AcceptGate) enforcing connection quotas."""

    def __init__(self, settings: Mapping[str, Any], listeners: list[str], inter_broker_listener: str,
                 metrics: MetricsRegistry, ip_quotas_enabled: Callable[[], bool] = lambda: True,
                 clock: Callable[[], float] = time.monotonic,
                 evict: Callable[[int], None] = lambda excess: None) -> None:
        self.clock = clock
        self.evict = evict  # closes `excess` connections on other listeners (KIP-402)
        self.metrics = metrics
        self.samples = int(settings["quota.window.num"])
        self.window = float(settings["quota.window.size.seconds"])
        self.ip_quotas_enabled = ip_quotas_enabled
        self.inter_broker_listener = inter_broker_listener
        self.broker_rate = Rate(self.samples, self.window)
        metrics.add(SOCKET_SERVER, "broker-connection-accept-rate", self.broker_rate,
                    "Broker-wide rate of connections accepted per second")
        self.listeners: dict[str, _ListenerQuota] = {}
        for name in listeners:
            quota = _ListenerQuota(name, self.samples, self.window)
            self.listeners[name] = quota
            metrics.add(SOCKET_SERVER, "connection-accept-rate", quota.rate,
                        "Rate of connections accepted per second on a listener", listener=name)
            metrics.add(SOCKET_SERVER, "connection-accept-throttle-time", quota.throttle_time,
                        "Average ms an accept was delayed by the broker-wide or listener rate quota",
                        listener=name)
            metrics.add(SOCKET_SERVER, "ip-connection-accept-throttle-time", quota.ip_throttle_time,
                        "Average ms a connection was delayed by its IP's rate quota", listener=name)
            metrics.add(ACCEPTOR, "AcceptorBlockedPercent", quota.blocked,
                        "Fraction of time the listener's acceptor was blocked by a quota", listener=name)
            metrics.add(SOCKET_SERVER, "connections-accepted-total", quota.accepted,
                        "Connections handed to request processing", listener=name)
            metrics.add(SOCKET_SERVER, "connections-throttled-total", quota.throttled,
                        "Connections delayed by a rate quota (broker, listener or IP)", listener=name)
            metrics.add(SOCKET_SERVER, "connections-dropped-total", quota.dropped,
                        "Connections closed by a per-IP quota (rate or count)", listener=name)
        self.total = 0
        self.max_connections = INT_MAX
        self.max_per_ip = INT_MAX
        self.per_ip_overrides: dict[str, int] = {}
        self.ip_counts: dict[str, int] = {}
        # Per-IP connection_creation_rate: resolved address -> quota, and the <default>.
        self.ip_rate_quotas: dict[str, float] = {}
        self.ip_default_rate: float | None = None
        self.ip_rates: dict[str, Rate] = {}
        self._slot_freed = Wakeup()
        self.configure(settings)

    # --- configuration ----------------------------------------------------------------------

    def configure(self, settings: Mapping[str, Any], overrides: dict[str, int] | None = None) -> None:
        """Apply the broker and listener limits (at start, and on a dynamic update). Validates
        everything before changing anything; ConfigError names the key."""
        broker_rate, max_connections, max_per_ip, overrides, per_listener = self._parse(settings, overrides)
        self.broker_rate.bound = _rate_bound(broker_rate)
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = overrides
        for name, (rate, count) in per_listener.items():
            quota = self.listeners[name]
            quota.rate.bound = _rate_bound(rate)
            quota.max_connections = count
            quota.applied = (rate, count)
        self._slot_freed.set()  # a raised limit may free a waiting acceptor
        self._enforce_max_connections()  # a lowered one closes connections, as Kafka's processors do

    def check(self, settings: Mapping[str, Any], overrides: dict[str, int] | None = None) -> None:
        """ConfigError unless ``configure(settings, overrides)`` would succeed as a dynamic update;
        changes nothing. As Kafka's ListenerConnectionQuota.validateReconfiguration, a listener
        whose limits change may not get a count or creation rate below 1, whether it is its own
        ``listener.name.<l>.`` value or the broker-wide one it inherits (a static 0 is taken)."""
        per_listener = self._parse(settings, overrides)[4]
        for name, (rate, count) in per_listener.items():
            if (rate, count) == self.listeners[name].applied:
                continue
            if count <= 0:
                raise ConfigError(f"Invalid max.connections {count}")
            if rate <= 0:
                raise ConfigError(f"Invalid max.connection.creation.rate {rate}")

    def _parse(self, settings: Mapping[str, Any], overrides: dict[str, int] | None
               ) -> tuple[int, int, int, dict[str, int], dict[str, tuple[int, int]]]:
        """The broker-wide limits, and each listener's (creation rate, count limit): its own
        ``listener.name.<l>.`` value, else the broker-wide one, as Kafka configures a listener's
        quota from the broker config with the listener prefix overriding (valuesWithPrefixOverride).
        So the inter-broker listener, exempt from the broker-wide sensor and count, still has
        max.connection.creation.rate and max.connections as its own listener limits."""
        broker_rate = _int_setting("max.connection.creation.rate", settings["max.connection.creation.rate"])
        max_connections = _int_setting("max.connections", settings["max.connections"])
        max_per_ip = _int_setting("max.connections.per.ip", settings["max.connections.per.ip"])
        if overrides is None:
            overrides = parse_per_ip_overrides(str(settings.get("max.connections.per.ip.overrides") or ""))
        if max_per_ip == 0 and not overrides:
            raise ConfigError("invalid value 0 for max.connections.per.ip: it may be zero only if "
                              "max.connections.per.ip.overrides is set")
        per_listener: dict[str, tuple[int, int]] = {}
        for name in self.listeners:
            values = []
            for key, inherited in zip(_LISTENER_KEYS, (broker_rate, max_connections), strict=True):
                raw = _listener_setting(settings, name, key)
                full = f"listener.name.{name.lower()}.{key}"
                values.append(inherited if raw is None else _int_setting(full, raw))
            per_listener[name] = (values[0], values[1])
        return broker_rate, max_connections, max_per_ip, overrides, per_listener

    def _enforce_max_connections(self) -> None:
        if self.total > self.max_connections:
            self.evict(self.total - self.max_connections)

    def set_ip_rate_quotas(self, specific: Mapping[str, float], default: float | None) -> None:
        """The ips entities' connection_creation_rate (addresses already resolved)."""
        self.ip_rate_quotas = dict(specific)
        self.ip_default_rate = default
        for address in list(self.ip_rates):
            quota = self.ip_rate_quota(address)
            if quota is None:
                self._drop_ip_sensor(address)
            else:
                self.ip_rates[address].bound = quota

    def ip_rate_quota(self, address: str) -> float | None:
        """The IP's connection_creation_rate: its own entry first, then <default>; None: unlimited."""
        if not self.ip_quotas_enabled():
            return None
        quota = self.ip_rate_quotas.get(address)
        return quota if quota is not None else self.ip_default_rate

    def _drop_ip_sensor(self, address: str) -> None:
        if self.ip_rates.pop(address, None) is not None:
            self.metrics.remove(SOCKET_SERVER, "connection-accept-rate", ip=address)

    # --- the accept gate ----------------------------------------------------------------------

    def protected(self, listener: str) -> bool:
        return listener == self.inter_broker_listener and len(self.listeners) > 1

    def _slot_available(self, quota: _ListenerQuota) -> bool:
        if quota.count >= quota.max_connections:
            return False
        return self.protected(quota.name) or self.total < self.max_connections

    def _record_and_throttle(self, quota: _ListenerQuota, now: float) -> float:
        throttle = 0.0
        if not self.protected(quota.name):
            throttle = self.broker_rate.record_checked(1.0, now)
        throttle = max(throttle, quota.rate.record_checked(1.0, now))
        return min(throttle, self.window)  # Kafka bounds it by the quota window

    async def acceptor_wait(self, listener: str) -> None:
        quota = self.listeners[listener]
        start = self.clock()
        throttle = self._record_and_throttle(quota, start)
        if throttle > 0:
            quota.throttled.count += 1
            quota.throttle_time.record(throttle * 1000.0, start)
        if throttle > 0 or not self._slot_available(quota):
            end = start + throttle
            while True:
                remaining = end - self.clock()
                if remaining <= 0 and self._slot_available(quota):
                    break
                self._slot_freed.clear()
                await self._slot_freed.wait(remaining if remaining > 0 else None)
            now = self.clock()
            quota.blocked.record(min(now - start, self.window), now)
        self.total += 1
        quota.count += 1
        if self.total > self.max_connections:  # only an inter-broker connection gets past the limit
            self.evict(self.total - self.max_connections)

    async def admit(self, listener: str, address: str) -> bool:
        quota = self.listeners[listener]
        ip = normalize_ip(address)
        rate_quota = self.ip_rate_quota(ip)
        if rate_quota is not None:
            rate = self._ip_rate(ip, rate_quota)
            now = self.clock()
            throttle = rate.record_checked(1.0, now)
            if throttle > 0:
                # Not accepted: un-recorded from the IP's rate, and from the broker-wide and listener
                # rates acceptor_wait recorded it in, so a throttled storm from one IP does not slow
                # every other client's accepts down (Kafka's updateListenerMetrics).
                rate.record(-1.0, now)
                if not self.protected(listener):
                    self.broker_rate.record(-1.0, now)
                quota.rate.record(-1.0, now)
                delay = min(throttle, self.window)
                quota.throttled.count += 1
                quota.ip_throttle_time.record(delay * 1000.0, now)
                # Held, unread, for the delay, so that a client which reconnects at once is slowed
                # down too; then closed (Kafka's acceptor and its throttledSockets). Held sockets
                # take no connection slot (Kafka never counted them), so max.connections and the
                # listener's limit admit others meanwhile; the slot comes back just before
                # ``released`` gives it up.
                self._uncount(quota)
                try:
                    await asyncio.sleep(delay)
                finally:
                    self.total += 1
                    quota.count += 1
                quota.dropped.count += 1
                log.debug("closing a connection from %s on %s: connection_creation_rate %g exceeded",
                          ip, listener, rate_quota)
                return False
        limit = self.per_ip_overrides.get(ip, self.max_per_ip)
        count = self.ip_counts.get(ip, 0)
        if count >= limit:
            quota.dropped.count += 1
            log.info("closing a connection from %s on %s: too many connections from it (%d)", ip, listener,
                     limit)
            return False
        self.ip_counts[ip] = count + 1
        quota.accepted.count += 1
        return True

    def _uncount(self, quota: _ListenerQuota) -> None:
        quota.count -= 1
        self.total -= 1
        self._slot_freed.set()

    def released(self, listener: str, address: str, admitted: bool) -> None:
        quota = self.listeners[listener]
        self._uncount(quota)
        if admitted:
            ip = normalize_ip(address)
            count = self.ip_counts.get(ip, 0) - 1
            if count > 0:
                self.ip_counts[ip] = count
            else:
                self.ip_counts.pop(ip, None)

    def _ip_rate(self, ip: str, bound: float) -> Rate:
        rate = self.ip_rates.get(ip)
        if rate is None:
            rate = self.ip_rates[ip] = Rate(self.samples, self.window, bound)
            self.metrics.add(SOCKET_SERVER, "connection-accept-rate", rate,
                             "Rate of connections accepted per second from an IP", ip=ip)
        else:
            rate.bound = bound
        return rate

    def ip_accept_rate(self, ip: str) -> float:
        rate = self.ip_rates.get(normalize_ip(ip))
        return math.nan if rate is None else rate.measure(self.clock())
