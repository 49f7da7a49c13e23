"""The connection-quota metrics: readable from Python, and in Prometheus text format over HTTP.

Names are KIP-612's (group ``socket-server-metrics``) plus Kafka's
``AcceptorBlockedPercent`` and three counters of what the quotas did to
connections. In Prometheus each becomes ``kafka_network_<group>_<name>`` with
dashes turned into underscores, and the tags become labels.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from kafkapy.quotas.rate import Avg, Rate
from kafkapy.server.config import ConfigError

__all__ = ["Counter", "MetricsRegistry", "start_http_endpoint"]

Tags = tuple[tuple[str, str], ...]
SOCKET_SERVER = "socket-server-metrics"
ACCEPTOR = "Acceptor"


class Counter:
    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def measure(self, now: float) -> float:
        return float(self.count)


class MetricsRegistry:
    """Metrics by (group, name, tags); each a Rate, an Avg or a Counter, measured when read."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._metrics: dict[tuple[str, str, Tags], tuple[str, Rate | Avg | Counter]] = {}
        self.lock = threading.Lock()  # the HTTP thread reads while the loop adds and removes

    def add(self, group: str, name: str, stat: Rate | Avg | Counter, description: str = "",
            **tags: str) -> None:
        with self.lock:
            self._metrics[(group, name, tuple(sorted(tags.items())))] = (description, stat)

    def remove(self, group: str, name: str, **tags: str) -> None:
        with self.lock:
            self._metrics.pop((group, name, tuple(sorted(tags.items()))), None)

    def value(self, name: str, group: str = SOCKET_SERVER, **tags: str) -> float:
        """The current value of one metric; KeyError if it does not exist."""
        with self.lock:
            _, stat = self._metrics[(group, name, tuple(sorted(tags.items())))]
            return stat.measure(self.clock())

    def snapshot(self) -> dict[tuple[str, str, Tags], float]:
        with self.lock:
            now = self.clock()
            return {key: stat.measure(now) for key, (_, stat) in self._metrics.items()}

    def descriptions(self) -> dict[tuple[str, str, Tags], str]:
        with self.lock:
            return {key: description for key, (description, _) in self._metrics.items()}

    # --- prometheus_client collector --------------------------------------------------------

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        values, descriptions = self.snapshot(), self.descriptions()
        # One family per name, labelled with every tag any of its metrics has ("" where absent):
        # connection-accept-rate comes per listener and per ip.
        labels: dict[str, list[str]] = {}
        for group, name, tags in values:
            names = labels.setdefault(_prometheus_name(group, name), [])
            names.extend(k for k, _ in tags if k not in names)
        families: dict[str, Any] = {}
        for (group, name, tags), value in sorted(values.items()):
            metric = _prometheus_name(group, name)
            family = families.get(metric)
            if family is None:
                is_counter = name.endswith("-total")
                kind = CounterMetricFamily if is_counter else GaugeMetricFamily
                family = kind(metric.removesuffix("_total") if is_counter else metric,
                              descriptions.get((group, name, tags)) or name,
                              labels=[_prometheus_label(k) for k in labels[metric]])
                families[metric] = family
            tag_values = dict(tags)
            family.add_metric([tag_values.get(k, "") for k in labels[metric]], value)
        yield from families.values()


def _prometheus_label(tag: str) -> str:
    """Kafka's tag names have dashes (client-id); Prometheus labels may not."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", tag)


def _prometheus_name(group: str, name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", f"kafka_network_{group}_{name}").lower()


def start_http_endpoint(url: str, registry: MetricsRegistry) -> tuple[Any, str]:
    """Serve the registry at ``http://host:port/path`` (port 0: ephemeral); returns the server and
    the URL actually bound. Any path answers, as prometheus_client's server does."""
    from prometheus_client import CollectorRegistry, start_http_server

    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ConfigError(f"invalid value {url!r} for metrics.listener: expected http://host:port/path")
    collectors = CollectorRegistry(auto_describe=False)
    collectors.register(registry)
    try:
        server, _ = start_http_server(parts.port or 0, parts.hostname, registry=collectors)
    except OSError as exc:
        raise ConfigError(f"cannot serve metrics.listener {url}: {exc.strerror or exc}") from None
    port = server.server_port
    return server, f"http://{parts.hostname}:{port}{parts.path or '/metrics'}"
