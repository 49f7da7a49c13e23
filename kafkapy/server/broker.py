"""The broker's runtime: listeners bound, modules running, state registered.

One BrokerRuntime lives on one asyncio loop. ``kafkapy serve`` runs it as the
main program; the embedded ``kafkapy.Broker`` runs it on a loop in a thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from kafkapy.server.auth import Authorizer, load_authorizer
from kafkapy.server.config import BrokerConfig, ConfigError
from kafkapy.server.listeners import ListenerSpec, inter_broker_listener, resolve_listeners, ssl_context
from kafkapy.server.modules import ApiHandler, Module, load_module_class
from kafkapy.server.observers import ObserverChain
from kafkapy.store.base import BrokerRegistration, MetadataStore, RegisteredEndpoint, Watch
from kafkapy.store.memory import MemoryStore

if TYPE_CHECKING:
    from kafkapy.server.connection import ConnectionInfo, KafkaConnection
    from kafkapy.server.dispatch import Dispatcher

__all__ = ["BoundListener", "BrokerRuntime"]

log = logging.getLogger(__name__)


class BoundListener:
    """A listener after binding: the real port, and what is advertised for it."""

    def __init__(self, spec: ListenerSpec, server: asyncio.Server, host: str, port: int) -> None:
        self.spec = spec
        self.server = server
        self.host = host
        self.port = port
        advertised = spec.advertised
        self.advertised_host = advertised.host or host
        # An advertised port 0 (or an un-advertised ephemeral listener) is the port actually bound.
        self.advertised_port = advertised.port or port

    @property
    def name(self) -> str:
        return self.spec.name

    def __repr__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


class ClusterView:
    """What handlers read about the cluster, kept current by store watches so that no request
    waits on ZooKeeper. Watch callbacks replace whole values (atomic in Python), so readers on
    the loop thread never see a half-updated list."""

    def __init__(self) -> None:
        self.cluster_id = ""
        self.brokers: list[BrokerRegistration] = []
        self.controller_id = -1


def make_store(config: BrokerConfig) -> MetadataStore:
    """ZooKeeper when zookeeper.connect is set, the embedded in-memory store otherwise."""
    if config["zookeeper.connect"]:
        from kafkapy.store.zookeeper import ZooKeeperStore

        return ZooKeeperStore(config["zookeeper.connect"], config["zookeeper.session.timeout.ms"],
                              config["zookeeper.connection.timeout.ms"], cluster_id=config["cluster.id"])
    return MemoryStore(cluster_id=config["cluster.id"])


class BrokerRuntime:
    def __init__(self, config: BrokerConfig, store: MetadataStore | None = None,
                 module_classes: Sequence[type[Module]] | None = None) -> None:
        self.config = config
        self.owns_store = store is None
        self.store: MetadataStore = store if store is not None else make_store(config)
        self.cluster = ClusterView()
        self._watches: list[Watch] = []
        # name -> finalized level, kept by the features module; None while no module manages them
        self.finalized_features: dict[str, int] | None = None
        self.loop = asyncio.get_running_loop()
        self.broker_id = -1
        self.listeners: list[BoundListener] = []
        self.connections: set[KafkaConnection] = set()
        self.started_at = time.time()
        # KIP-388: configure() sees every setting, the observer's own (unknown to the broker) included.
        self.authorizer: Authorizer = load_authorizer(config["authorizer.class.name"],
                                                      {**config.originals, **config.values})
        self.observers = ObserverChain.from_config(config["observer.class.names"],
                                                   {**config.originals, **config.values})
        classes = list(module_classes) if module_classes is not None else default_module_classes(config)
        self.modules: list[Module] = [cls(self) for cls in classes]
        from kafkapy.server.dispatch import Dispatcher

        self.dispatcher: Dispatcher = Dispatcher(self)
        self.inter_broker_listener = ""
        self._stopping = False

    def feature_level(self, feature: str) -> int:
        """The finalized level of a feature (KIP-584), which gates APIs and behaviors.

        Until a features module takes over (it replaces ``self.finalized_features``), nothing is
        gated: every feature reads as finalized at the highest level any module supports."""
        if self.finalized_features is not None:
            return self.finalized_features.get(feature, 0)
        return max((m.features[feature][1] for m in self.modules if feature in m.features), default=0)

    def gate_open(self, handler: ApiHandler) -> bool:
        return handler.feature is None or self.feature_level(handler.feature) >= handler.min_feature_level

    async def start(self) -> None:
        specs = resolve_listeners(self.config)
        self.inter_broker_listener = inter_broker_listener(self.config, specs)
        store = self.store
        # Store calls may go over the network (ZooKeeper), so they run off the event loop.
        if self.owns_store:
            await asyncio.to_thread(store.start)
        try:
            requested = self.config["broker.id"]
            self.broker_id = requested if requested >= 0 else await asyncio.to_thread(
                store.allocate_broker_id, self.config["reserved.broker.max.id"])
            for spec in specs:
                self.listeners.append(await self._bind(spec))
            self.cluster.cluster_id = await asyncio.to_thread(store.cluster_id)
            await asyncio.to_thread(store.register_broker, self.registration())
            self._watches.append(await asyncio.to_thread(store.watch_brokers, self._brokers_changed))
            self._watches.append(await asyncio.to_thread(store.watch_controller, self._controller_changed))
            for module in self.modules:
                await module.start()
        except BaseException:
            await self._close_listeners()
            await self._release_store()
            raise
        for listener in self.listeners:
            log.info("listening on %s://%s:%d", listener.name, listener.host, listener.port)

    async def _bind(self, spec: ListenerSpec) -> BoundListener:
        from kafkapy.server.connection import KafkaConnection

        context = ssl_context(self.config) if spec.security_protocol == "SSL" else None
        host = spec.bind.host or "0.0.0.0"
        try:
            server = await self.loop.create_server(lambda: KafkaConnection(self, spec), host, spec.bind.port,
                                                   ssl=context, reuse_address=True)
        except OSError as exc:
            raise ConfigError(f"cannot listen on {spec.bind}: {exc.strerror or exc} (listeners)") from None
        sock = server.sockets[0].getsockname()
        return BoundListener(spec, server, sock[0], sock[1])

    def registration(self) -> BrokerRegistration:
        endpoints = tuple(RegisteredEndpoint(b.name, b.spec.security_protocol, b.advertised_host,
                                             b.advertised_port) for b in self.listeners)
        features: dict[str, tuple[int, int]] = {}
        for module in self.modules:
            features.update(module.features)
        return BrokerRegistration(self.broker_id, endpoints, self.config["broker.rack"], features)

    def _brokers_changed(self, brokers: list[BrokerRegistration]) -> None:
        self.cluster.brokers = brokers

    def _controller_changed(self, controller_id: int) -> None:
        self.cluster.controller_id = controller_id

    async def _release_store(self) -> None:
        for watch in self._watches:
            watch.cancel()
        self._watches.clear()
        if self.broker_id >= 0:
            try:
                await asyncio.to_thread(self.store.unregister_broker, self.broker_id)
            except Exception:
                log.exception("could not unregister broker %d (ignored)", self.broker_id)
        if self.owns_store:
            await asyncio.to_thread(self.store.close)

    async def admit(self, conn: ConnectionInfo) -> bool:
        if self._stopping:
            return False
        for module in self.modules:
            if not await module.on_accept(conn):
                return False
        return True

    def connection_closed(self, conn: ConnectionInfo) -> None:
        for module in self.modules:
            try:
                module.on_close(conn)
            except Exception:
                log.exception("module %s failed in on_close (ignored)", module.name)

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish (up to ``grace`` seconds), then close."""
        if self._stopping:
            return
        self._stopping = True
        for listener in self.listeners:
            listener.server.close()
        workers = [c.worker for c in self.connections if c.worker is not None and not c.worker.done()]
        if workers:
            await asyncio.wait(workers, timeout=grace)
        for conn in list(self.connections):
            conn.close()
        await self._close_listeners()
        for module in reversed(self.modules):
            try:
                await module.stop()
            except Exception:
                log.exception("module %s failed to stop (ignored)", module.name)
        await self._release_store()
        self.observers.close(grace)

    async def _close_listeners(self) -> None:
        for listener in self.listeners:
            listener.server.close()
            try:
                await asyncio.wait_for(listener.server.wait_closed(), 1.0)
            except asyncio.TimeoutError:
                pass

    def listener_for(self, name: str) -> BoundListener | None:
        for listener in self.listeners:
            if listener.name == name:
                return listener
        return None


def default_module_classes(config: BrokerConfig, extra: Iterable[str] = ()) -> list[type[Module]]:
    from kafkapy.server.core import CoreModule

    classes: list[type[Module]] = [CoreModule]
    for name in [*config["kafkapy.modules"], *extra]:
        cls = load_module_class(name)
        if cls not in classes:
            classes.append(cls)
    return classes
