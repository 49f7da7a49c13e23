"""The CLIENT_METRICS config resources (KIP-714 subscriptions), kept on every broker.

A Kafka broker always knows them: its ClientMetricsManager is made whether or not a telemetry
receiver is configured, and DescribeConfigs, IncrementalAlterConfigs and AlterConfigs serve
CLIENT_METRICS resources either way (ConfigHelper, ConfigAdminManager); only
GetTelemetrySubscriptions and PushTelemetry wait for a receiver. So this default module keeps the
subscriptions: it reads them from the store (entity ``client-metrics/<name>``, ZooKeeper's
/config/client-metrics/<name>), follows the store's changes (another broker's writes), and owns the
resource type in the configs module. The telemetry module, the receiver (``kafkapy.modules=
telemetry``), matches clients against what it holds (the CLIENT_METRICS_SUBSCRIPTIONS capability).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kafkapy.configs.module import (
    CLIENT_METRICS_CONFIG,
    CLIENT_METRICS_RESOURCE,
    DYNAMIC_CONFIGS,
    ConfigResourceOwner,
    ConfigsModule,
)
from kafkapy.errors import KafkaApiError
from kafkapy.server.modules import Module
from kafkapy.store.base import Watch
from kafkapy.store.onloop import Reloader
from kafkapy.telemetry.subscriptions import Subscription, SubscriptionError, parse_subscription

if TYPE_CHECKING:
    from kafkapy.server.services import BrokerServices

__all__ = ["CLIENT_METRICS", "CLIENT_METRICS_SUBSCRIPTIONS", "ClientMetricsModule"]

CLIENT_METRICS = "client-metrics"  # the store's entity type: ZooKeeper /config/client-metrics/<name>
CLIENT_METRICS_SUBSCRIPTIONS = "client-metrics-subscriptions"  # what ClientMetricsModule provides
# Kafka's words for an empty subscription name: ConfigHelper's (DescribeConfigs), ClientMetricsConfigs'
EMPTY_NAME = ("Client metrics subscription name must not be empty", "Subscription name can't be empty")


class ClientMetricsModule(Module):
    """The subscriptions, as stored and checked; ``version`` moves with every change, so a client
    instance made before it is made again (Kafka's subscription update)."""

    name = "client-metrics"
    provides = (CLIENT_METRICS_SUBSCRIPTIONS,)
    wants = (DYNAMIC_CONFIGS,)  # CLIENT_METRICS resources over the config APIs

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self.subscriptions: dict[str, Subscription] = {}
        self.version = 0
        self._watch: Watch | None = None
        self._reloads = Reloader(services.loop, self._reload, "client metrics subscriptions")

    async def start(self) -> None:
        store = self.services.store
        self._watch = await asyncio.to_thread(store.watch_entity_configs, self._entity_changed)
        await self._reload()
        configs = self.services.provider(DYNAMIC_CONFIGS, ConfigsModule)
        if configs is not None:
            configs.register_resource(ConfigResourceOwner(
                CLIENT_METRICS_RESOURCE, CLIENT_METRICS_CONFIG, self._read_config, _check_config,
                self._write_config, frozenset({"metrics", "match"}), names=self.subscriptions.keys,
                filters_keys=False, empty_name=EMPTY_NAME))

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._reloads.close()

    async def _read_config(self, name: str) -> dict[str, str]:
        return await asyncio.to_thread(self.services.store.entity_config, f"{CLIENT_METRICS}/{name}")

    async def _write_config(self, name: str, config: Mapping[str, str]) -> None:
        path = f"{CLIENT_METRICS}/{name}"
        await asyncio.to_thread(self.services.store.set_entity_config, path, config)
        self._take(path, config)  # here at once, so the client that altered it sees it when answered

    def _entity_changed(self, path: str) -> None:
        """On a store thread: some entity's config changed (perhaps through another broker)."""
        if path.startswith(CLIENT_METRICS + "/"):
            self._reloads.request()

    async def _reload(self) -> None:
        """Every subscription read again (one read at a time, so a late read never undoes a newer
        one: kafkapy.store.onloop.Reloader)."""
        stored = await asyncio.to_thread(self.services.store.entity_configs, CLIENT_METRICS)
        for name in set(self.subscriptions) - {path[len(CLIENT_METRICS) + 1:] for path in stored}:
            self._take(f"{CLIENT_METRICS}/{name}", {})
        for path, config in stored.items():
            self._take(path, config)

    def _take(self, path: str, config: Mapping[str, str]) -> None:
        name = path[len(CLIENT_METRICS) + 1:]
        if not config:
            if self.subscriptions.pop(name, None) is not None:
                self.version += 1
            return
        try:
            subscription = parse_subscription(name, config)
        except SubscriptionError as exc:  # written by something that did not check it
            self.services.log.warning("client metrics subscription %r ignored: %s", name, exc)
            return
        if self.subscriptions.get(name) != subscription:
            self.subscriptions[name] = subscription
            self.version += 1


def _check_config(name: str, config: Mapping[str, str]) -> None:
    """A CLIENT_METRICS resource's would-be config, as Kafka's ClientMetricsConfigs checks it
    (none at all removes the subscription)."""
    if not config:
        return
    try:
        parse_subscription(name, config)
    except SubscriptionError as exc:
        raise KafkaApiError(exc.code, str(exc)) from None
