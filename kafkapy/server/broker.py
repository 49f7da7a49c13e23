"""The broker's runtime: listeners bound, modules running, state registered.

One BrokerRuntime lives on one asyncio loop. It is built by the composition
root (kafkapy.assembly), which ``kafkapy serve``, the embedded
``kafkapy.Broker`` and the pytest fixtures all use. Modules never see it: each
gets a ``ModuleServices`` (the BrokerServices protocol), a narrow view of it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from kafkapy.log.manager import MetaPropertiesMismatch, configured_log_dirs, stored_broker_id
from kafkapy.protocol.framing import READ_SIZE
from kafkapy.server import eager
from kafkapy.server.accept import in_place_transport
from kafkapy.server.adoption import adopt_log_dirs
from kafkapy.server.auth import Authorizer, StoreBackedAuthorizer, load_authorizer
from kafkapy.server.clock import call_later_real, wait_real, wall_clock_of
from kafkapy.server.config import USE_DEFAULT_BUFFER_SIZE, BrokerConfig, ConfigError, ConfigKey
from kafkapy.server.conformance import conforms
from kafkapy.server.connection import BufferedKafkaConnection, KafkaConnection
from kafkapy.server.fastpaths import FastPaths
from kafkapy.server.leadership import PartitionLeadership, Rebalance, TopicLogConfigs
from kafkapy.server.listeners import ListenerSpec, inter_broker_listener, resolve_listeners, ssl_context
from kafkapy.server.modules import ApiHandler, Module
from kafkapy.server.observers import ObserverChain
from kafkapy.server.sasl import SaslSettings
from kafkapy.server.services import (
    FINALIZED_FEATURES,
    TOPIC_CONFIGS_CAPABILITY,
    AcceptGate,
    ClusterView,
    Election,
    EpochOwed,
    InternalTopicShape,
)
from kafkapy.store.base import (
    BrokerRegistration,
    LogDirEventQueue,
    MetadataStore,
    OfflineReplicas,
    PartitionStates,
    RegisteredEndpoint,
    TopicInfo,
    Watch,
)
from kafkapy.store.durable import DurableStore

if TYPE_CHECKING:
    from kafkapy.server.connection import ConnectionInfo
    from kafkapy.server.dispatch import Dispatcher
    from kafkapy.server.interceptors import Interceptor

__all__ = ["BoundListener", "BrokerRuntime", "ModuleServices"]

T = TypeVar("T")

ALL_FAST_PATHS = FastPaths()

log = logging.getLogger(__name__)


LISTEN_BACKLOG = 100  # asyncio's default for create_server
IDLE_RECHECK_MIN_S = 0.01  # the idle sweep's shortest wait: a deadline just past is not a busy loop


class BoundListener:
    """A listener after binding: the real port, and what is advertised for it."""

    def __init__(self, spec: ListenerSpec, sock: socket.socket, host: str, port: int,
                 context: ssl.SSLContext | None = None, local_host_name: str | None = None) -> None:
        self.spec = spec
        self.sock = sock
        self.context = context
        self.accept_task: asyncio.Task[None] | None = None  # while a throttled accept waits
        self.accepting = False  # the loop watches the socket for connections to accept
        self.host = host
        self.port = port
        # A listener left out of advertised.listeners is served but registered with no endpoint;
        # its address below is then where it is bound, for the tests that connect to it.
        self.is_advertised = spec.advertised is not None
        advertised = spec.advertised or spec.bind
        # An empty host (PLAINTEXT://:9092, Kafka's default listener) binds every interface and is
        # advertised as the machine's name, as Kafka advertises InetAddress.getLocalHost's
        # canonical name: the bound 0.0.0.0 is no address a client can reach the broker at.
        self.advertised_host = advertised.host or local_host_name or host
        # An advertised port 0 (or an ephemeral listener advertising itself) is the port actually bound.
        self.advertised_port = advertised.port or port

    @property
    def name(self) -> str:
        return self.spec.name

    def __repr__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


class ModuleServices:
    """One module's view of the runtime (kafkapy.server.services.BrokerServices): what it may
    read, and the few methods through which it may change broker state."""

    def __init__(self, runtime: BrokerRuntime, module_name: str) -> None:
        self._runtime = runtime
        self.log = logging.getLogger(f"kafkapy.modules.{module_name}")
        self.store = runtime.store
        self.config = runtime.config
        self.cluster = runtime.cluster
        self.loop = runtime.loop
        self.clock = runtime.clock
        self.wall_clock = runtime.wall_clock
        self.authorizer = runtime.authorizer

    @property
    def broker_id(self) -> int:
        return self._runtime.broker_id

    @property
    def listener_names(self) -> list[str]:
        return [listener.name for listener in self._runtime.listeners]

    @property
    def inter_broker_listener(self) -> str:
        return self._runtime.inter_broker_listener

    @property
    def supported_features(self) -> Mapping[str, tuple[int, int]]:
        return self._runtime.supported_features

    @property
    def finalized_features(self) -> Mapping[str, int] | None:
        return self._runtime.finalized_features

    @property
    def finalized_epoch(self) -> int:
        return self._runtime.finalized_epoch

    def feature_level(self, feature: str) -> int:
        return self._runtime.feature_level(feature)

    def default_feature_levels(self) -> Mapping[str, int]:
        levels: dict[str, int] = {}
        for module in self._runtime.modules:
            levels.update(getattr(type(module), "default_feature_levels", {}))
        return levels

    def set_finalized_features(self, epoch: int, features: Mapping[str, int]) -> None:
        runtime = self._runtime
        runtime.finalized_epoch = epoch
        runtime.finalized_features = dict(features)
        runtime.dispatcher.rebuild()  # gates follow the levels; ApiVersions is re-derived

    def served_versions(self) -> Mapping[int, tuple[int, int]]:
        return self._runtime.dispatcher.served_versions()

    def owe_leader_epochs(self, owed: Mapping[tuple[str, int], EpochOwed]) -> None:
        leadership = self._runtime.leadership
        if leadership is not None:
            leadership.owe_epochs(owed)

    def elect_leaders(self, kind: Election, partitions: Collection[tuple[str, int]]) -> None:
        leadership = self._runtime.leadership
        if leadership is not None:
            leadership.elect(kind, partitions)

    def provider(self, capability: str, kind: type[T]) -> T | None:
        for module in self._runtime.modules:
            if capability in module.provides:
                if not isinstance(module, kind):
                    raise ConfigError(f"module {module.name} provides {capability!r} but is not a "
                                      f"{kind.__name__}")
                return module
        return None

    def register_internal_topic(self, name: str, shape: Callable[[], InternalTopicShape]) -> None:
        self._runtime.internal_topics[name] = shape

    def internal_topic_shape(self, name: str) -> InternalTopicShape | None:
        shape = self._runtime.internal_topics.get(name)
        return None if shape is None else shape()

    def connections(self) -> Collection[KafkaConnection]:
        return self._runtime.connections

    def connection_for(self, info: ConnectionInfo) -> KafkaConnection | None:
        return self._runtime.connection_for(info)

    def module_config_keys(self) -> tuple[ConfigKey, ...]:
        return tuple(key for module in self._runtime.modules for key in module.config_keys)

    def install_accept_gate(self, gate: AcceptGate) -> None:
        self._runtime.accept_gate = gate

    def remove_accept_gate(self, gate: AcceptGate) -> None:
        if self._runtime.accept_gate is gate:
            self._runtime.accept_gate = None

    def install_interceptor(self, interceptor: Interceptor) -> None:
        self._runtime.dispatcher.install_interceptor(interceptor)

    def remove_interceptor(self, interceptor: Interceptor) -> None:
        self._runtime.dispatcher.remove_interceptor(interceptor)

    def fail(self, reason: str) -> None:
        self._runtime.fail(reason)

    @property
    def stopping(self) -> bool:
        return self._runtime.stopping

    def on_stop(self, callback: Callable[[], None]) -> Callable[[], None]:
        return self._runtime.on_stop(callback)


class BrokerRuntime:
    """Listeners, connections and modules on one loop. Build it with kafkapy.assembly (which
    merges the modules' config keys into ``config`` and orders them), then ``install`` the
    modules built with ``services_for``, then ``start``."""

    def __init__(self, config: BrokerConfig, store: MetadataStore, *, owns_store: bool,
                 fast_paths: FastPaths = ALL_FAST_PATHS,
                 log_dirs_to_adopt: Mapping[int, Sequence[str]] | None = None) -> None:
        self.config = config
        # Whose log dirs (broker id -> dirs) this broker adopts the topics of when its store starts
        # empty (kafkapy.server.adoption); None: its own, if it owns the store.
        self.log_dirs_to_adopt = log_dirs_to_adopt
        self._send_buffer: int = config["socket.send.buffer.bytes"]
        self.fast_paths = fast_paths
        # Coroutines of the accept gate and admission: stepped in place, or left to a task.
        self.start_eagerly = eager.start if fast_paths.eager else eager.deferred
        self.owns_store = owns_store
        self.store = store
        self.cluster = ClusterView()
        self._watches: list[Watch] = []
        self.leadership: PartitionLeadership | None = None  # the controller's writer, set by start()
        # The coordinators' state topics by name, with how each is made (register_internal_topic).
        self.internal_topics: dict[str, Callable[[], InternalTopicShape]] = {}
        self._unwatch_unclean: Callable[[], None] | None = None
        # name -> finalized level, kept by the module that provides FINALIZED_FEATURES; None while
        # no module manages them
        self.finalized_features: dict[str, int] | None = None
        self.finalized_epoch = -1  # KIP-584's epoch of finalized_features; -1: unknown
        # Why the broker shut itself down (e.g. an incompatible finalized feature); `failed` is set
        # once that shutdown is complete, so `kafkapy serve` can exit non-zero.
        self.failure: str | None = None
        self.failed = asyncio.Event()
        self._failing: asyncio.Task[None] | None = None
        self.loop = asyncio.get_running_loop()
        # The clock the loop schedules by; asyncio's own is time.monotonic, called straight (it is
        # read on every receive).
        self.clock = time.monotonic if type(self.loop).time is asyncio.BaseEventLoop.time else self.loop.time
        # Epoch seconds for what is written down (record timestamps, commit times): time.time on
        # asyncio's own clock; on another (a VirtualClock's loop) it moves with that clock.
        self.wall_clock = time.time if self.clock is time.monotonic else wall_clock_of(self.loop)
        self._idle_sweep: asyncio.TimerHandle | None = None
        self.broker_id = -1
        self.listeners: list[BoundListener] = []
        self._sasl_started: list[SaslSettings] = []  # SASL listeners whose validators have keys to close
        self.connections: set[KafkaConnection] = set()
        self.started_at = time.time()
        # KIP-388: configure() sees every setting, the observer's own (unknown to the broker) included.
        self.authorizer: Authorizer = load_authorizer(config["authorizer.class.name"],
                                                      {**config.originals, **config.values})
        self.observers = ObserverChain.from_config(config["observer.class.names"],
                                                   {**config.originals, **config.values})
        self.modules: list[Module] = []
        self.accept_hooks: list[Module] = []
        self.close_hooks: list[Module] = []
        self.supported_features: dict[str, tuple[int, int]] = {}
        self.inter_broker_listener = ""
        self._stopping = False
        # What parked requests (long polls, joins) want called when stop() begins, to answer now.
        self._stop_callbacks: dict[object, Callable[[], None]] = {}
        self.accept_gate: AcceptGate | None = None
        self._handshakes: set[asyncio.Task[None]] = set()  # accepted sockets not yet served
        self._make_transport = in_place_transport(self.loop) if fast_paths.in_place_accept else None
        self._connection_class = BufferedKafkaConnection if fast_paths.buffered_reads else KafkaConnection
        # Where buffered reads land, shared by every connection of this loop (kafkapy.protocol.framing).
        self.read_buffer = memoryview(bytearray(READ_SIZE)) if fast_paths.buffered_reads else None

    def services_for(self, module_class: type[Module]) -> ModuleServices:
        """The services handed to a module of this class when it is built."""
        return ModuleServices(self, module_class.name)

    def install(self, modules: Sequence[Module]) -> None:
        """Take the modules (built in dependency order): hooks, features and routes follow them."""
        from kafkapy.server.dispatch import Dispatcher

        self.modules = list(modules)
        # Only the modules that hook accept/close are called on every connection.
        self.accept_hooks = [m for m in self.modules if type(m).on_accept is not Module.on_accept]
        self.close_hooks = [m for m in self.modules if type(m).on_close is not Module.on_close]
        if any(FINALIZED_FEATURES in m.provides for m in self.modules):
            self.finalized_features = {}  # nothing is finalized until that module reads the state
        self.supported_features = self._supported_features()
        self.dispatcher: Dispatcher = Dispatcher(self)

    def feature_level(self, feature: str) -> int:
        """The finalized level of a feature (KIP-584), which gates APIs and behaviors.

        Until a module that provides FINALIZED_FEATURES is enabled, nothing is gated: every feature
        reads as finalized at the highest level any module supports."""
        if self.finalized_features is not None:
            return self.finalized_features.get(feature, 0)
        return max((m.features[feature][1] for m in self.modules if feature in m.features), default=0)

    def gate_open(self, handler: ApiHandler) -> bool:
        return handler.feature is None or self.feature_level(handler.feature) >= handler.min_feature_level

    def _supported_features(self) -> dict[str, tuple[int, int]]:
        """The union of the modules' features, capped by supported.features.max (KIP-584)."""
        features: dict[str, tuple[int, int]] = {}
        for module in self.modules:
            features.update(module.features)
        for item in self.config.get("supported.features.max") or ():
            name, _, level = item.rpartition(":")
            if name not in features:
                log.warning("supported.features.max names %r, which no module supports (ignored)", name)
                continue
            low, high = features[name]
            if int(level) < low:
                del features[name]
            else:
                features[name] = (low, min(high, int(level)))
        return features

    def fail(self, reason: str) -> None:
        """Shut down in an orderly way because the broker cannot go on; ``failure`` keeps the reason
        and ``failed`` is set once stopped (``kafkapy serve`` then exits non-zero)."""
        if self.failure is not None or self._stopping:
            return
        self.failure = reason
        log.error("broker %d shutting down: %s", self.broker_id, reason)

        async def shut_down() -> None:
            try:
                await self.stop()
            finally:
                self.failed.set()

        self._failing = self.loop.create_task(shut_down())

    async def start(self) -> None:
        specs = resolve_listeners(self.config)
        self.inter_broker_listener = inter_broker_listener(self.config, specs)
        try:
            for spec in specs:  # a signed-token validator fetches its JWKS: network, off the loop
                if spec.sasl is not None:
                    await asyncio.to_thread(spec.sasl.start)
                    self._sasl_started.append(spec.sasl)
        except BaseException:
            await self._close_sasl()
            raise
        store = self.store
        # Store calls may go over the network (ZooKeeper), so they run off the event loop.
        if self.owns_store:
            await asyncio.to_thread(store.start)
        try:
            requested = self.config["broker.id"]
            if requested < 0:  # the id this broker's log dirs were written by, before a new one
                stored = await asyncio.to_thread(stored_broker_id, configured_log_dirs(
                    self.config.get("log.dirs"), self.config.get("log.dir")))
                requested = -1 if stored is None else stored
            self.broker_id = requested if requested >= 0 else await asyncio.to_thread(
                store.allocate_broker_id, self.config["reserved.broker.max.id"])
            await asyncio.to_thread(self._adopt_log_dirs)
            for spec in specs:
                self.listeners.append(await self._bind(spec))
            self.cluster.cluster_id = await asyncio.to_thread(store.cluster_id)
            await asyncio.to_thread(store.register_broker, self.registration())
            events = store if conforms(store, LogDirEventQueue) else None
            self.leadership = PartitionLeadership(store, self.cluster, self.broker_id, self.loop,
                                                  Rebalance.from_config(self.config), events)
            self._watches.append(await asyncio.to_thread(store.watch_brokers, self._brokers_changed))
            self._watches.append(await asyncio.to_thread(store.watch_controller, self._controller_changed))
            self._watches.append(await asyncio.to_thread(store.watch_topics, self._topics_changed))
            self._watches.append(await asyncio.to_thread(store.watch_partition_states,
                                                         self._partition_states_changed))
            self._watches.append(await asyncio.to_thread(store.watch_offline_replicas,
                                                         self._offline_replicas_changed))
            if events is not None:  # after the offline replicas' watch, whose news it follows
                self._watches.append(await asyncio.to_thread(events.watch_log_dir_events,
                                                             self.leadership.log_dir_events_queued))
            if isinstance(self.authorizer, StoreBackedAuthorizer):
                await self.authorizer.attach(store, self.loop)
            for module in self.modules:
                await module.start()
            self._follow_unclean_settings()
            for listener in self.listeners:
                self._watch(listener)
            self._sweep_idle()
        except BaseException:
            await self._close_listeners()
            if isinstance(self.authorizer, StoreBackedAuthorizer):
                await self.authorizer.detach()
            await self._release_store()
            await self._close_sasl()
            raise
        for listener in self.listeners:
            log.info("listening on %s://%s:%d", listener.name, listener.host, listener.port)

    def _adopt_log_dirs(self) -> None:
        """A store that starts empty beside log dirs an older kafkapy wrote: their topics made
        before any module starts (kafkapy.server.adoption). A dir of another broker or cluster
        fails the start before anything is made, in the data plane's words."""
        store = self.store
        if not (isinstance(store, DurableStore) and store.adopts):
            return
        log_dirs = self.log_dirs_to_adopt
        if log_dirs is None:
            if not self.owns_store:
                return
            log_dirs = {self.broker_id: configured_log_dirs(self.config.get("log.dirs"),
                                                            self.config.get("log.dir"))}
        store.begin_adoption()
        try:
            adopt_log_dirs(store, log_dirs, store.cluster_id(), self.internal_topics)
        except MetaPropertiesMismatch as exc:
            dirs = ",".join(d for broker_dirs in log_dirs.values() for d in broker_dirs)
            raise ConfigError(f"log.dirs {dirs}: {exc}") from None
        store.end_adoption()

    async def _bind(self, spec: ListenerSpec) -> BoundListener:
        context = ssl_context(self.config, spec.name, spec.security_protocol) if spec.uses_tls else None
        host = spec.bind.host or "0.0.0.0"
        # The broker owns its accept loop (not loop.create_server), so that a connection quota can
        # hold back one listener's accepts without touching the others (KIP-612).
        sock: socket.socket | None = None
        try:
            family, kind, proto, _, address = (await self.loop.getaddrinfo(
                host, spec.bind.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE))[0]
            sock = socket.socket(family, kind, proto)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # As Kafka's acceptor: the receive buffer on the listening socket, before listen(), so
            # accepted connections inherit it and their TCP window is offered from the first SYN.
            receive_buffer = self.config["socket.receive.buffer.bytes"]
            if receive_buffer != USE_DEFAULT_BUFFER_SIZE:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
        except OSError as exc:
            if sock is not None:
                sock.close()
            raise ConfigError(f"cannot listen on {spec.bind}: {exc.strerror or exc} (listeners)") from None
        name = sock.getsockname()
        # the name may take a DNS lookup: off the loop, and only for a listener that needs it
        told = spec.advertised or spec.bind
        local_host_name = None if told.host else await asyncio.to_thread(socket.getfqdn)
        return BoundListener(spec, sock, name[0], name[1], context, local_host_name)

    # The accept loop: the listening socket stays registered with the event loop, and every time it
    # is readable the connections pending are accepted in one go (as asyncio's own servers do), so
    # a busy listener costs no selector call per connection. The accept gate is started in place;
    # when it really waits (a connection quota), the listener stops watching its socket, so it
    # accepts nothing until the wait is over (and only that listener).

    def _watch(self, listener: BoundListener) -> None:
        if not self._stopping and not listener.accepting and listener.sock.fileno() >= 0:
            self.loop.add_reader(listener.sock, self._accept_ready, listener)
            listener.accepting = True

    def _unwatch(self, listener: BoundListener) -> None:
        if listener.accepting:
            listener.accepting = False
            if listener.sock.fileno() >= 0:
                self.loop.remove_reader(listener.sock)

    def _accept_ready(self, listener: BoundListener) -> None:
        for _ in range(LISTEN_BACKLOG):
            if self._stopping:
                return
            try:
                sock, address = listener.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors, or the like: back off a little
                log.warning("accept on %s failed: %s", listener, exc.strerror or exc)
                self._unwatch(listener)
                call_later_real(self.loop, 0.1, lambda: self._watch(listener))  # real: not a broker timer
                return
            sock.setblocking(False)
            # As Kafka's acceptor: TCP keepalive, so a peer whose host vanished is found by the
            # kernel, not only by connections.max.idle.ms (asyncio's transports set TCP_NODELAY).
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                if self._send_buffer != USE_DEFAULT_BUFFER_SIZE:  # Kafka's socket.send.buffer.bytes
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer)
            except OSError:  # reset already: serving it finds that out
                pass
            gate = self.accept_gate
            if gate is not None:
                try:
                    done, waiting = self.start_eagerly(gate.acceptor_wait(listener.name))
                except BaseException:
                    sock.close()
                    raise
                if not done:
                    self._unwatch(listener)
                    listener.accept_task = self.loop.create_task(
                        self._accept_after(listener, sock, str(address[0]), gate, waiting))
                    return
            self._hand_over(listener, sock, str(address[0]), gate)

    async def _accept_after(self, listener: BoundListener, sock: socket.socket, address: str,
                            gate: AcceptGate, waiting: Awaitable[None]) -> None:
        """A throttled accept: once the gate lets it through, serve it and watch the socket again."""
        try:
            await waiting
        except BaseException:
            sock.close()
            raise
        listener.accept_task = None
        self._hand_over(listener, sock, address, gate)
        self._watch(listener)

    def _hand_over(self, listener: BoundListener, sock: socket.socket, address: str,
                   gate: AcceptGate | None) -> None:
        """Serve an accepted socket. A plaintext one whose admission does not wait (no gate, or a
        gate that answers at once) gets its transport right here: no task, no waiter. TLS needs its
        handshake, and an admission that waits its time, so those go on in a task."""
        admission: Awaitable[bool] | None = None
        if listener.context is None and self._make_transport is not None:
            if gate is None:
                self._serve_plain(listener, sock, address, None)
                return
            try:
                done, admitted = self.start_eagerly(gate.admit(listener.name, address))
            except Exception:
                log.exception("admitting a connection from %s on %s failed; closing it", address, listener)
                sock.close()
                gate.released(listener.name, address, False)
                return
            if done:
                if admitted:
                    self._serve_plain(listener, sock, address, gate)
                else:
                    sock.close()
                    gate.released(listener.name, address, False)
                return
            admission = admitted
        self._handshakes.add(self.loop.create_task(
            self._start_connection(listener, sock, address, gate, admission)))

    def _serve_plain(self, listener: BoundListener, sock: socket.socket, address: str,
                     gate: AcceptGate | None) -> None:
        """A plaintext socket, admitted: its transport is made at once (what asyncio's own servers
        do, less the task and the waiter each accept costs them); connection_made follows."""
        assert self._make_transport is not None
        if self._stopping:
            sock.close()
            if gate is not None:
                gate.released(listener.name, address, True)
            return
        connection = self._connection_class(self, listener.spec)
        if gate is not None:
            name = listener.name
            connection.on_lost = lambda: gate.released(name, address, True)
        try:
            self._make_transport(sock, connection)
        except OSError as exc:
            log.info("connection from %s on %s failed before it was served: %s", address, listener, exc)
            sock.close()
            if gate is not None:
                gate.released(listener.name, address, True)

    async def _start_connection(self, listener: BoundListener, sock: socket.socket, address: str,
                                gate: AcceptGate | None, admission: Awaitable[bool] | None = None) -> None:
        """An accepted socket that needs a task: its admission waits (``admission``, already
        started), or its TLS handshake does."""
        served = admitted = False
        connection: KafkaConnection | None = None
        try:
            if admission is not None:
                if not await admission:
                    return
            elif gate is not None and not await gate.admit(listener.name, address):
                return
            admitted = True
            if self._stopping:
                return
            connection = self._connection_class(self, listener.spec)
            if gate is not None:
                name = listener.name
                connection.on_lost = lambda: gate.released(name, address, True)
            await self.loop.connect_accepted_socket(lambda: connection, sock, ssl=listener.context)
            served = True
        except (OSError, ssl.SSLError, asyncio.TimeoutError) as exc:
            log.info("connection from %s on %s failed before it was served: %s", address, listener, exc)
        finally:
            self._handshakes.discard(asyncio.current_task())
            if not served and connection is not None and connection.transport is not None:
                connection.abort()  # cancelled (a stop) as its handshake completed: served, and let go
            elif not served:
                sock.close()
                if gate is not None:
                    gate.released(listener.name, address, admitted)

    def registration(self) -> BrokerRegistration:
        endpoints = tuple(RegisteredEndpoint(b.name, b.spec.security_protocol, b.advertised_host,
                                             b.advertised_port) for b in self.listeners if b.is_advertised)
        return BrokerRegistration(self.broker_id, endpoints, self.config["broker.rack"],
                                  dict(self.supported_features), dict(self.config.tags))

    # Each change may move a leader: the controller's PartitionLeadership looks (any thread).
    def _brokers_changed(self, brokers: list[BrokerRegistration]) -> None:
        self.cluster.brokers = brokers
        self._leaders_may_move()

    def _controller_changed(self, controller_id: int) -> None:
        self.cluster.controller_id = controller_id
        self._leaders_may_move()

    def _topics_changed(self, topics: Mapping[str, TopicInfo]) -> None:
        self.cluster.topics = topics
        self._leaders_may_move()

    def _partition_states_changed(self, states: PartitionStates) -> None:
        self.cluster.partition_states = states
        self._leaders_may_move()

    def _offline_replicas_changed(self, offline: OfflineReplicas) -> None:
        self.cluster.offline_replicas = offline
        self._leaders_may_move()

    def _follow_unclean_settings(self) -> None:
        """The controller's offline elections read each topic's unclean.leader.election.enable
        from the configs module (when one is enabled), and look at the topic again on a change."""
        leadership = self.leadership
        configs = next((m for m in self.modules if TOPIC_CONFIGS_CAPABILITY in m.provides), None)
        if leadership is None or not isinstance(configs, TopicLogConfigs):
            return
        leadership.unclean = lambda topic: configs.log_config(topic).unclean_leader_election_enable
        self._unwatch_unclean = configs.watch_log_configs(lambda topic, _: leadership.topic_changed(topic))

    def _leaders_may_move(self) -> None:
        if self.leadership is not None:
            self.leadership.request()

    async def _release_store(self) -> None:
        if self.leadership is not None:
            self.leadership.close()  # a broker on its way out writes no more states
        if self._unwatch_unclean is not None:
            self._unwatch_unclean()
            self._unwatch_unclean = None
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
        if self.accept_hooks:
            # Admission is stepped in place (no task yet), and a module's on_accept may need a task
            # from its first line: asyncio.timeout() does, and so does asyncio.wait_for on Python
            # 3.12+ (asyncio.timeout() inside). With no hooks a connection still costs no task.
            await eager.into_task()
        for module in self.accept_hooks:
            if not await module.on_accept(conn):
                return False
        return True

    def _sweep_idle(self) -> None:
        """Close the connections idle for connections.max.idle.ms, then come back when the next
        one could be: one timer for all connections, none per connection. Sleeping until the
        earliest deadline, rather than ticking, is what lets a virtual clock jump days at once."""
        timeout = self.config["connections.max.idle.ms"] / 1000
        if timeout < 0:  # Kafka's Selector keeps no idle expiry for a negative timeout
            return
        now = self.clock()
        next_sweep = now + timeout  # a connection accepted from now on idles out no sooner
        for connection in list(self.connections):
            if connection.closed:
                continue
            deadline = connection.last_activity + timeout
            if deadline > now:
                next_sweep = min(next_sweep, deadline)
            elif connection.busy:  # at work on a request: look again shortly
                next_sweep = min(next_sweep, now + min(max(timeout / 8, IDLE_RECHECK_MIN_S), 1.0))
            else:
                log.info("closing idle connection %s (connections.max.idle.ms)", connection.info.id
                         if connection.info is not None else "connection")
                connection.close()
        if not self._stopping:
            delay = max(next_sweep - now, IDLE_RECHECK_MIN_S)
            self._idle_sweep = self.loop.call_later(delay, self._sweep_idle)

    def connection_for(self, info: ConnectionInfo) -> KafkaConnection | None:
        """The live connection behind a ConnectionInfo (for modules that send requests on it)."""
        for connection in self.connections:
            if connection.info is info:
                return connection
        return None

    def connection_closed(self, conn: ConnectionInfo) -> None:
        for module in self.close_hooks:
            try:
                module.on_close(conn)
            except Exception:
                log.exception("module %s failed in on_close (ignored)", module.name)

    @property
    def stopping(self) -> bool:
        return self._stopping

    def on_stop(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` when ``stop`` begins (at once if it has), until the remover is called."""
        if self._stopping:
            callback()
        token = object()
        self._stop_callbacks[token] = callback

        def remove() -> None:
            self._stop_callbacks.pop(token, None)
        return remove

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish (up to ``grace`` seconds), then close.
        Requests parked waiting on others (a Fetch's long poll, a JoinGroup waiting for the rest of
        its group) are told first (``on_stop``) and answer at once: Kafka closes the sockets and
        answers none of them, and waiting them out would hold every test's teardown."""
        if self._stopping:
            return
        self._stopping = True
        if self._idle_sweep is not None:
            self._idle_sweep.cancel()
            self._idle_sweep = None
        for callback in list(self._stop_callbacks.values()):
            try:
                callback()
            except Exception:
                log.exception("a stop callback failed (ignored)")
        await self._close_listeners()
        workers = [c.worker for c in self.connections if c.worker is not None and not c.worker.done()]
        # The grace is real seconds: a virtual clock standing still must not hold a shutdown.
        if workers:
            await wait_real(workers, grace)
        # Past the grace: requests still waiting (a long-polling Fetch) end with their connection.
        late = [c.worker for c in self.connections if c.worker is not None and not c.worker.done()]
        for conn in list(self.connections):
            conn.close()
        for worker in late:
            worker.cancel()
        if late:
            await wait_real(late, 1.0)
        await asyncio.sleep(0)  # the closes' connection_lost
        # A TLS close waits for the client's close_notify (up to 30 s), which Kafka clients do not
        # send: its socket would outlive the loop. Let it go after our own, as Kafka does.
        for conn in list(self.connections):
            conn.abort()
        await self._close_listeners()
        for module in reversed(self.modules):
            try:
                await module.stop()
            except Exception:
                log.exception("module %s failed to stop (ignored)", module.name)
        if isinstance(self.authorizer, StoreBackedAuthorizer):
            await self.authorizer.detach()
        await self._release_store()
        await self._close_sasl()
        self.observers.close(grace)

    async def _close_sasl(self) -> None:
        """Stop the SASL listeners' validators (a JWKS refresh thread), off the loop."""
        started, self._sasl_started = self._sasl_started, []
        for settings in started:
            await asyncio.to_thread(settings.close)

    async def _close_listeners(self) -> None:
        tasks = [*self._handshakes]
        for listener in self.listeners:
            self._unwatch(listener)
            if listener.accept_task is not None:
                tasks.append(listener.accept_task)
                listener.accept_task = None
        for task in tasks:
            task.cancel()
        if tasks:
            await wait_real(tasks, 1.0)
        for listener in self.listeners:
            listener.sock.close()
