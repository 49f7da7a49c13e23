"""An in-process broker for test suites: ``with Broker() as broker:`` or ``await broker.start()``.

As a context manager it runs on its own event loop in a background thread, so
synchronous test code and blocking clients can talk to it. Inside asyncio code,
``await broker.start()`` runs it on the caller's loop instead.

``Broker(brokers=3)`` is a cluster in one process: three brokers on one loop sharing one
metadata store (and so one set of in-memory logs), ids 0, 1, 2 (or broker.id, +1, +2), on
consecutive ports from the configured one (ephemeral ones for port 0). ``broker.brokers[i]``
is one of them; ``stop_broker(i)``/``start_broker(i)`` close and reopen its listeners on the
same ports. The controller moves the leaderships of a broker that stops; one that comes back leads
nothing until a preferred election (ElectLeaders, or the controller's auto rebalance:
``auto.leader.rebalance.enable``, every ``leader.imbalance.check.interval.seconds`` on the
broker's clock) gives its partitions back, as in Kafka (kafkapy.server.leadership).

Seeding, snapshots and reset (``seed``, ``snapshot``, ``restore``, ``reset``) let one
long-lived broker serve a whole test suite; the seed shape is kafkapy.seeding's.

``Broker(clock=VirtualClock())`` runs on virtual time (kafkapy.server.clock): every broker timer
(sessions, rebalances, transaction timeouts, Fetch long-polls, retention, quotas, idle
connections) waits for ``clock.advance(seconds)``. As a context manager it runs on the clock's
own loop thread, which every broker given that clock shares; ``await broker.start()`` must run on
the clock's loop (``clock.run(main())``).

Cluster faults (``move_leader``, ``move_coordinator``, ``coordinator_unavailable``,
``expire_session``) act on the
whole cluster, whichever of its brokers they are called on (kafkapy.faults.cluster,
kafkapy.faults.coordinators).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import heapq
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import attrs

from kafkapy.assembly import assemble, default_module_keys, make_store
from kafkapy.control import ControlServer
from kafkapy.dataplane.maintenance import LogMaintenance
from kafkapy.dataplane.module import DataPlaneModule
from kafkapy.dataplane.partitions import LogHome
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.faults import (
    ClusterFaults,
    CoordinatorOutage,
    CoordinatorOutages,
    FaultRules,
    Faults,
    FaultsModule,
)
from kafkapy.faults.cluster import LeaderMove, expire_session, move_coordinator, move_leader
from kafkapy.groups.group_configs import check_broker_group_settings
from kafkapy.groups.module import GroupsModule
from kafkapy.inspection import Isolation, StoredRecord, stored_records
from kafkapy.inspection.connections import ConnectionView, connection_views
from kafkapy.inspection.group_waits import GroupWanted, pollers, seen_group
from kafkapy.inspection.groups import GroupView, group_views
from kafkapy.inspection.log_offsets import LogOffsets, log_offsets
from kafkapy.inspection.producers import ProducerView, producer_views
from kafkapy.inspection.reset import empty_coordinator_logs, forget_groups_and_transactions
from kafkapy.inspection.shares import (
    ShareGroupView,
    SharePartitionView,
    share_group_views,
    share_partition_views,
)
from kafkapy.inspection.transactions import TransactionView, transaction_views
from kafkapy.log.manager import configured_log_dirs
from kafkapy.observers.history import HISTORY_OBSERVER, HistoryEntry, RequestHistory, with_history
from kafkapy.protocol.records import build_record_batch
from kafkapy.seeding import SeedError, TopicSeed, parse_seed, placed
from kafkapy.server.broker import ALL_FAST_PATHS, BrokerRuntime
from kafkapy.server.clock import VirtualClock, VirtualTimeLoop, close_stopped_loop, sleep_real
from kafkapy.server.config import BrokerConfig, ConfigError
from kafkapy.server.fastpaths import FastPaths
from kafkapy.server.leadership import next_state
from kafkapy.server.listeners import parse_endpoints
from kafkapy.server.modules import Module
from kafkapy.server.services import NO_LEADER
from kafkapy.shares import ShareModule
from kafkapy.store.base import MetadataStore, UnknownTopic
from kafkapy.strict import STRICT, StrictModule, Violations
from kafkapy.telemetry import (
    CLIENT_METRICS,
    ClientMetricsModule,
    Subscription,
    TelemetryModule,
    TelemetryPush,
    parse_subscription,
)
from kafkapy.topics.module import TopicsModule
from kafkapy.transactions.module import TransactionsModule

__all__ = ["Broker", "BrokerLogs", "Snapshot", "waited_for"]

T = TypeVar("T")
TopicPartition = tuple[str, int]

# listeners: ephemeral ports, so tests never collide. group.initial.rebalance.delay.ms: 0, not
# Kafka's 3000, so a test's group forms at once (Kafka's own config/server.properties sets 0 too).
# KIP-848 consumer groups' and KIP-932 share groups' heartbeats every 500 ms, not Kafka's 5 s: a
# member hears of its new assignment in a heartbeat's answer, so a test's second consumer had its
# partitions after about 5 s (0.6 s now, confluent-kafka).
EMBEDDED_DEFAULTS: dict[str, Any] = {"listeners": "PLAINTEXT://127.0.0.1:0",
                                     "group.initial.rebalance.delay.ms": 0,
                                     "group.consumer.heartbeat.interval.ms": 500,
                                     "group.consumer.min.heartbeat.interval.ms": 500,
                                     "group.share.heartbeat.interval.ms": 500,
                                     "group.share.min.heartbeat.interval.ms": 500}
# The defaults above that Kafka checks against other settings (an interval within its bounds and
# below the session timeout): left out when they would break those checks beside a test's own
# settings, so that the test's choice is checked against Kafka's defaults, not against ours.
QUICK_HEARTBEATS: frozenset[str] = frozenset(
    f"group.{kind}.{bound}heartbeat.interval.ms" for kind in ("consumer", "share") for bound in ("", "min."))
# records per seeded batch: small records stay well under Kafka's 1 MiB max.message.bytes
SEED_BATCH_RECORDS = 500
SETTLE_TIMEOUT_S = 10.0  # how long a cluster change may take to show in every broker's view
SETTLE_POLL_S = 0.002
# What history() says on a broker that keeps none: how to turn it on, each way a broker is made.
NO_HISTORY = ("the broker keeps no request history: start it with Broker(history=True) (or "
              f"observer.class.names={HISTORY_OBSERVER}, which kafkapy serve takes as "
              f"--override observer.class.names={HISTORY_OBSERVER}); kafkapy's pytest fixtures "
              "keep one")
# What a question to a stopped broker answers (its loop is closed: it was "Event loop is closed").
_STOPPED = ("the broker has stopped: ask it inside its `with Broker()` block (before `stop()`), "
            "or keep what the test needs (records(), groups(), snapshot()) before it ends")


@attrs.frozen
class Snapshot:
    """What ``broker.snapshot()`` saw: ``topics`` in kafkapy.seeding's shape (configs and
    records, so ``broker.seed(snapshot.topics)`` makes them again) and each group's committed
    offsets, ``{group: {(topic, partition): offset}}``."""

    topics: dict[str, dict[str, Any]]
    offsets: dict[str, dict[tuple[str, int], int]]


def member_config(config: Mapping[str, Any], index: int,
                  racks: Sequence[str | None] | None = None) -> dict[str, Any]:
    """The configuration of broker ``index`` of an in-process cluster built from ``config``: its
    id (broker.id + index, from 0 when unset), its listeners' ports (+ index, 0 stays 0), its
    rack when ``racks`` names one per broker, and its own ``broker-<id>`` directory under each of
    ``log.dirs`` (or ``log.dir``): a log dir is one broker's (its meta.properties names it)."""
    member = dict(config)
    if racks is not None:
        member["broker.rack"] = racks[index]
    base = int(config.get("broker.id", config.get("node.id", -1)))
    member["broker.id"] = (base if base >= 0 else 0) + index
    member.pop("node.id", None)  # its synonym: BrokerConfig gives it the member's id
    for key in ("log.dirs", "log.dir"):
        if config.get(key):
            paths = config[key] if isinstance(config[key], list) else str(config[key]).split(",")
            member[key] = ",".join(str(Path(str(p).strip()) / f"broker-{member['broker.id']}")
                                   for p in paths if str(p).strip())
    for key in ("listeners", "advertised.listeners"):
        if config.get(key):
            member[key] = ",".join(str(attrs.evolve(e, port=e.port + index if e.port else 0))
                                   for e in parse_endpoints(config[key], key))
    return member


def _pinned(config: Mapping[str, Any], runtime: BrokerRuntime) -> dict[str, Any]:
    """``config`` with its listeners' ports as bound, so a restart reopens the same addresses."""
    bound = {listener.name: listener.port for listener in runtime.listeners}
    endpoints = parse_endpoints(config["listeners"], "listeners")
    return {**config, "listeners": ",".join(str(attrs.evolve(e, port=bound.get(e.name, e.port)))
                                            for e in endpoints)}


class BrokerLogs:
    """Run the data plane's log maintenance now, so tests need not wait for its timer."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def apply_retention(self, now_ms: int | None = None) -> dict[TopicPartition, int]:
        """Retention per topic config now; answers segments deleted per partition."""
        return self._broker.call_on_loop(lambda m: m.apply_retention(now_ms))

    def compact(self, now_ms: int | None = None) -> dict[TopicPartition, int]:
        """Compaction of every compacted topic now; answers records removed per partition."""
        return self._broker.call_on_loop(lambda m: m.compact(now_ms))


def _host_port(host: str, port: int) -> str:
    """A bootstrap address as clients parse it: an IPv6 host in brackets (a zone kept inside)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _group_settings_agree(values: Mapping[str, Any]) -> bool:
    try:
        check_broker_group_settings(values)
    except ConfigError:
        return False
    return True


class Broker:
    def __init__(self, config: Mapping[str, Any] | None = None, *, brokers: int = 1,
                 store: MetadataStore | None = None, modules: list[type[Module]] | None = None,
                 fast_paths: FastPaths = ALL_FAST_PATHS,
                 defaults: Mapping[str, Any] = EMBEDDED_DEFAULTS, clock: VirtualClock | None = None,
                 control: str | None = None, control_allow_remote: bool = False,
                 strict: bool = False, racks: Sequence[str | None] | None = None,
                 history: bool = False) -> None:
        """``defaults``: settings under ``config`` (a test's ephemeral port; ``kafkapy serve``
        passes none, so it keeps Kafka's). ``clock``: a VirtualClock to run on instead of real time.
        ``control``: serve the HTTP control endpoint there ("127.0.0.1:0"; kafkapy.control) while
        the broker runs. ``strict``: ``kafkapy.strict=true`` (kafkapy.strict). ``racks``: each
        broker's ``broker.rack``, one per broker (None: no rack), for rack-aware clients.
        ``history``: keep the request history ``history()`` reads (the RequestHistory observer in
        ``observer.class.names``, as the pytest fixtures do); off by default, since any observer
        takes requests off the fast paths (docs/testing.md, "Inspection")."""
        if brokers < 1:
            raise ConfigError(f"brokers must be at least 1, not {brokers}")
        if racks is not None and len(racks) != brokers:
            raise ConfigError(f"racks names {len(racks)} racks for {brokers} brokers: one per broker")
        default_keys = default_module_keys()
        given = {**defaults, **(config or {})}
        if racks is not None and brokers == 1:
            given["broker.rack"] = racks[0]
        if strict:
            given[STRICT] = True
        if history:
            given = with_history(given)
        self._strict_lists: list[Violations] = []  # strict mode's lists, kept once the broker is down
        if brokers > 1:
            # Replicas on more than one broker, so a broker taken down leaves its partitions a
            # leader (Kafka's own default is 1; 3 is what a three-broker cluster is run with).
            given.setdefault("default.replication.factor", min(brokers, 3))
            # The same for the coordinators' topics (Kafka's default is 3; its server.properties,
            # and so kafkapy's default, 1): with one replica a group's or a transactional id's
            # coordinator is gone while its broker is down, so a pipeline cannot fail over.
            for internal in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                             "share.coordinator.state.topic.replication.factor"):
                given.setdefault(internal, min(brokers, 3))
        self.config = BrokerConfig.build(given, extra_keys=default_keys)
        ours = QUICK_HEARTBEATS.intersection(defaults).difference(config or {})
        if ours and not _group_settings_agree(self.config.values):
            for key in ours:
                del given[key]
            self.config = BrokerConfig.build(given, extra_keys=default_keys)
        self._given = given
        self.module_classes = modules
        self.fast_paths = fast_paths  # all on, unless a test compares them with the plain paths
        self.clock = clock
        self.runtime: BrokerRuntime | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False  # a Broker (a whole cluster) runs once: its store and logs close
        self._cluster: Broker | None = None  # set on the brokers of a cluster: the whole
        self._owns_store = False
        # Set by a cluster on its first broker: every broker's log dirs, adopted if the store
        # starts empty (kafkapy.server.adoption).
        self._log_dirs_to_adopt: Mapping[int, Sequence[str]] | None = None
        # The coordinator outages of this broker, or of this cluster, which its brokers share.
        self._coordinator_outages = CoordinatorOutages()
        if brokers > 1 and store is None and not self.config["zookeeper.connect"]:
            # One store for the cluster's brokers: with log.dirs, on disk in metadata.log.dir (by
            # default the first of the log.dirs given here, beside the brokers' broker-<id> dirs).
            store, self._owns_store = make_store(self.config), True
        self.store = store
        # One Broker per member of a cluster (sharing the store); [self] for a single broker.
        self.brokers: list[Broker] = [self]
        if brokers > 1:
            self.brokers = [Broker(member_config(given, i, racks), store=store, modules=modules,
                                   fast_paths=fast_paths, defaults={}, clock=clock) for i in range(brokers)]
            for member in self.brokers:
                member._cluster = self
        # The HTTP control endpoint (kafkapy.control): checked now, so a bad address fails here.
        self.control: ControlServer | None = None
        self._control_server = None if control is None else \
            ControlServer(self, control, allow_remote=control_allow_remote)

    @property
    def is_cluster(self) -> bool:
        return self.brokers != [self]

    # --- on the caller's loop -------------------------------------------------------------

    async def start(self) -> Broker:
        if self._stopped:
            raise RuntimeError("this Broker has stopped and does not start again (its store and logs "
                               "are closed): make a new Broker()")
        if self.clock is not None:
            loop = asyncio.get_running_loop()
            if not (isinstance(loop, VirtualTimeLoop) and loop.virtual_clock is self.clock):
                raise RuntimeError("Broker(clock=...) runs on its clock's loop: use `with Broker(clock=c)`, "
                                   "or await start() inside c.run(...)")
        await self._start_brokers()
        if self._control_server is not None and self.control is None:
            try:
                self.control = await self._control_server.start()
            except BaseException:  # its port taken, say: the brokers go down again
                await self.stop()
                raise
        return self

    async def _start_brokers(self) -> Broker:
        if self.is_cluster:
            try:
                if self._owns_store and self.store is not None:  # reads the metadata kept on disk
                    await asyncio.to_thread(self.store.start)
                    # An empty store: the first broker to start makes the topics of every broker's
                    # log dirs written before the metadata was kept (kafkapy.server.adoption).
                    self.brokers[0]._log_dirs_to_adopt = {
                        member.config["broker.id"]: configured_log_dirs(member.config["log.dirs"],
                                                                        member.config["log.dir"])
                        for member in self.brokers}
                for member in self.brokers:
                    member._loop, member._thread = self._loop, self._thread
                    await member.start()
                self.runtime = self.brokers[0].runtime
                await self._settle()
            except BaseException:  # a port taken, say: the brokers already up go down again
                await self.stop()
                raise
            return self
        runtime = assemble(self.config, store=self.store, extra_modules=self.module_classes or (),
                           fast_paths=self.fast_paths, log_dirs_to_adopt=self._log_dirs_to_adopt)
        self._log_dirs_to_adopt = None  # once: a broker started again finds the topics made
        await runtime.start()
        self.runtime, self.store = runtime, runtime.store
        faults_module = _find_module(runtime, FaultsModule)
        if faults_module is not None:  # one set of outages for the cluster, kept over restarts
            faults_module.coordinator_outages = (self._cluster or self)._coordinator_outages
        if self._cluster is not None:
            # A restarted member comes back on the ports it had (clients know those addresses).
            self._given = _pinned(self._given, runtime)
            self.config = BrokerConfig.build(self._given,
                                             extra_keys=default_module_keys())
        return self

    async def stop(self) -> None:
        if self.control is not None:
            control, self.control = self.control, None
            await control.stop()
        if self.is_cluster:
            for member in reversed(self.brokers):
                await member.stop()
            self.runtime = None
            if self._owns_store and self.store is not None:
                self.store.close()
            self._stopped = True
            return
        if self.runtime is not None:
            runtime = self.runtime
            if self._cluster is not None:  # a cluster's broker that is down has no runtime to ask
                self.runtime = None
            await runtime.stop()
            self._stopped = self._cluster is None

    # --- the HTTP control endpoint ----------------------------------------------------------------

    async def serve_control_async(self, address: str = "127.0.0.1:0", *,
                                  allow_remote: bool = False) -> ControlServer:
        """Serve the HTTP control endpoint (kafkapy.control) on ``address`` until the broker stops;
        ``broker.control.url`` is where. Loopback addresses only, unless ``allow_remote``."""
        if self.control is not None:
            raise RuntimeError(f"the control endpoint already serves {self.control.url}")
        self.control = await ControlServer(self, address, allow_remote=allow_remote).start()
        return self.control

    def serve_control(self, address: str = "127.0.0.1:0", *, allow_remote: bool = False) -> ControlServer:
        """``serve_control_async`` from the test's thread (``with Broker()``)."""
        result: ControlServer = self._from_thread(self.serve_control_async(address,
                                                                           allow_remote=allow_remote))
        return result

    # --- the brokers of a cluster ----------------------------------------------------------------

    async def stop_broker_async(self, index: int) -> None:
        """Take broker ``index`` down (listeners closed, unregistered) and wait until the other
        brokers' views show its leaderships moved."""
        self._member_index(index)
        self.brokers[index]._violation_sources()  # strict mode: its violations stay readable
        await self.brokers[index].stop()
        self.runtime = self._first_running()
        await self._settle()

    async def start_broker_async(self, index: int) -> None:
        """Bring broker ``index`` back on its ports and wait until every broker sees it and the
        controller has written what its return changes (ISRs; leaders only of partitions that
        had none: the others stay where they are, as in Kafka)."""
        member = self.brokers[self._member_index(index)]
        if member.runtime is None:
            await member.start()
        self.runtime = self._first_running()
        await self._settle()

    def _member_index(self, index: int) -> int:
        """``index`` if it is one of this cluster's brokers; else one ValueError listing them (a
        negative index would have taken one from the end, as Python's lists do)."""
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self.brokers):
            ids = ", ".join(f"{i}: broker {m.config['broker.id']}" for i, m in enumerate(self.brokers))
            last = len(self.brokers) - 1
            raise ValueError(f"no broker at index {index!r}: the brokers are indexed 0-{last}"
                             + (f" ({ids})" if self.is_cluster else ""))
        return index

    def stop_broker(self, index: int) -> None:
        """``stop_broker_async`` from the test's thread (``with Broker(brokers=N)``)."""
        self._from_thread(self.stop_broker_async(index))

    def start_broker(self, index: int) -> None:
        """``start_broker_async`` from the test's thread (``with Broker(brokers=N)``)."""
        self._from_thread(self.start_broker_async(index))

    def _running_members(self) -> list[Broker]:
        return [m for m in self.brokers if m.runtime is not None]

    def _first_running(self) -> BrokerRuntime | None:
        return next((m.runtime for m in self.brokers if m.runtime is not None), None)

    def _unsettled(self) -> str | None:
        """What some running broker's view still lacks (None once all agree with the live set):
        every running broker listed, every partition's state one the controller leaves as it is
        (kafkapy.server.leadership.next_state)."""
        running = self._running_members()
        live = {m.broker_id for m in running}
        controller = next((m.runtime.leadership for m in running if m.runtime is not None
                           and m.runtime.leadership is not None
                           and m.runtime.cluster.controller_id == m.broker_id), None)
        unclean = controller.unclean if controller is not None else (lambda topic: False)
        for member in running:
            assert member.runtime is not None
            cluster = member.runtime.cluster
            if set(cluster.live_broker_ids()) != live:
                seen = sorted(cluster.live_broker_ids())
                return f"broker {member.broker_id} sees brokers {seen}, not {sorted(live)}"
            states = cluster.partition_states
            for name, info in cluster.topics.items():
                for index, replicas in info.partitions.items():
                    state = states.get((name, index))
                    wanted = next_state(replicas, cluster.live_replicas_of(name, index), state,
                                        unclean=functools.partial(unclean, name))
                    if wanted is not None:
                        return f"broker {member.broker_id} sees {name}-{index} in {state}, not {wanted}"
        return None

    async def _settle(self, timeout: float = SETTLE_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        with _working_elsewhere():
            while (missing := self._unsettled()) is not None:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"the cluster did not settle within {timeout:g} s: {missing}")
                await sleep_real(SETTLE_POLL_S)  # other threads (store watches) settle it, in real time

    def _from_thread(self, coroutine: Any) -> Any:
        loop = self._loop
        if loop is not None and loop.is_closed():  # a stopped broker's (the clock's loop lives on)
            coroutine.close()
            raise RuntimeError(_STOPPED)
        if loop is None or threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("on the broker's own loop, await the *_async form instead")
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=60)

    async def __aenter__(self) -> Broker:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- on a background thread ------------------------------------------------------------

    def __enter__(self) -> Broker:
        if self.clock is not None:
            return self._enter_clock(self.clock)
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            try:
                self._loop.run_until_complete(self.start())
            except BaseException as exc:
                close_stopped_loop(self._loop)  # closed before __enter__ raises: nothing left behind
                started.set_exception(exc)
                return
            started.set_result(None)
            self._loop.run_forever()
            close_stopped_loop(self._loop)

        self._thread = threading.Thread(target=run, name="kafkapy-broker", daemon=True)
        self._thread.start()
        started.result()
        return self

    def _enter_clock(self, clock: VirtualClock) -> Broker:
        """``__enter__`` on the clock's loop thread (shared with its other brokers)."""
        self._loop, self._thread = clock.acquire_thread()
        try:
            asyncio.run_coroutine_threadsafe(self.start(), self._loop).result()
        except BaseException:
            self._loop = self._thread = None
            clock.release_thread()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._cluster is not None:  # one broker of a cluster: only it goes down
            self._cluster.stop_broker(self._cluster.brokers.index(self))
            return
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self.stop(), loop).result(timeout=30)
        if self.clock is not None:  # the clock's thread: it stops with its last broker
            self._loop = self._thread = None
            self.clock.release_thread()
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        self._thread = None

    # --- what tests need to connect ------------------------------------------------------

    @property
    def listeners(self) -> dict[str, str]:
        """Listener name to the "host:port" clients should use (the advertised endpoint; a listener
        left out of ``advertised.listeners``, served but not advertised: where it is bound). An IPv6
        host is bracketed (``[::1]:9092``), as Kafka's listener syntax writes it and clients
        (librdkafka, the Java client) parse it: ``::1:9092`` is no address to them."""
        runtime = self._running()
        return {b.name: _host_port(b.advertised_host, b.advertised_port) for b in runtime.listeners}

    @property
    def bootstrap_servers(self) -> str:
        """Every running broker's first advertised listener, comma-separated (one address for one
        broker): a client bootstrapped on a listener that is not advertised would find no broker."""
        if self.is_cluster:
            return ",".join(member.bootstrap_servers for member in self._running_members())
        first = next(b for b in self._running().listeners if b.is_advertised)
        return _host_port(first.advertised_host, first.advertised_port)

    @property
    def broker_id(self) -> int:
        if self._cluster is not None and self.runtime is None:  # a cluster's broker while it is down
            return int(self.config["broker.id"])
        return self._running().broker_id

    @property
    def logs(self) -> BrokerLogs:
        """``broker.logs.apply_retention()`` / ``broker.logs.compact()``."""
        return BrokerLogs(self)

    @property
    def faults(self) -> FaultRules:
        """Fault injection: ``broker.faults.add(FaultRule(...))`` or ``with broker.faults.injected(rule):``
        (kafkapy.faults). A cluster's: on every running broker (kafkapy.faults.spread), where a
        rule on one would fail only what reached it; ``cluster.brokers[i].faults`` for one."""
        if self.is_cluster:
            self._running()  # a stopped cluster says so
            return ClusterFaults(lambda: [m._own_faults() for m in self._running_members()])
        return self._own_faults()

    def _own_faults(self) -> Faults:
        module = next((m for m in self._running().modules if isinstance(m, FaultsModule)), None)
        if module is None:
            raise RuntimeError("the broker runs no faults module")
        return module.faults

    # --- strict mode -------------------------------------------------------------------------

    @property
    def violations(self) -> Violations:
        """The protocol misuse strict mode recorded (kafkapy.strict), oldest first; ``clear()``
        forgets it. A cluster's lists every broker's, those of brokers now down included."""
        sources = [source for member in self.brokers for source in member._violation_sources()]
        if not sources:
            raise RuntimeError("the broker is not strict: Broker(strict=True) or kafkapy.strict=true")
        if not self.is_cluster:
            return sources[-1]
        combined = sorted((v for source in sources for v in list(source)), key=lambda v: v.time)
        return Violations(combined, sources)

    def _violation_sources(self) -> list[Violations]:
        """This broker's strict lists: one per start (a cluster's broker restarted has a new one)."""
        kept = self._strict_lists
        if self.runtime is not None:
            module = _find_module(self.runtime, StrictModule)
            if module is not None and module.enabled and not any(module.violations is k for k in kept):
                kept.append(module.violations)
        return kept

    def call_on_loop(self, action: Callable[[LogMaintenance], T]) -> T:
        """``action(maintenance)`` on the broker's loop (where logs change), from any thread."""
        maintenance = self._dataplane().maintenance
        return self._on_loop(lambda: action(maintenance))

    # --- cluster faults (kafkapy.faults.cluster, kafkapy.faults.coordinators) -------------------

    def move_leader(self, topic: str, partition: int, *, to: int) -> LeaderMove:
        """Make broker ``to`` the leader of ``topic``-``partition`` through the controller (the
        leader epoch goes up by one) and return once every running broker shows it. One
        KafkaApiError when it cannot (kafkapy.faults.cluster.move_leader): on a single broker
        always (ELIGIBLE_LEADERS_NOT_AVAILABLE), when ``to`` is not running
        (BROKER_NOT_AVAILABLE) or leads already (ELECTION_NOT_NEEDED)."""
        result: LeaderMove = self._from_thread(self.move_leader_async(topic, partition, to=to))
        return result

    async def move_leader_async(self, topic: str, partition: int, *, to: int) -> LeaderMove:
        return await move_leader(self._running_runtimes(), topic, partition, to)

    def move_coordinator(self, *, transactional_id: str | None = None, group: str | None = None,
                         to: int) -> LeaderMove:
        """Make broker ``to`` the coordinator of ``transactional_id`` or ``group`` (one of them): the
        leader of its partition of ``__transaction_state`` / ``__consumer_offsets`` (the views'
        ``state_partition``) moves as ``move_leader`` moves it, and the new coordinator loads the
        id's state from that partition. The client's next request to the old one is answered
        NOT_COORDINATOR and it finds the new one. Also COORDINATOR_NOT_AVAILABLE before any id of
        that kind has a coordinator (kafkapy.faults.cluster.move_coordinator)."""
        result: LeaderMove = self._from_thread(
            self.move_coordinator_async(transactional_id=transactional_id, group=group, to=to))
        return result

    async def move_coordinator_async(self, *, transactional_id: str | None = None, group: str | None = None,
                                     to: int) -> LeaderMove:
        return await move_coordinator(self._running_runtimes(), transactional_id=transactional_id,
                                      group=group, to=to)

    def coordinator_unavailable(self, *, group: str | None = None, transactional_id: str | None = None,
                                error: ErrorCode = ErrorCode.COORDINATOR_NOT_AVAILABLE) -> CoordinatorOutage:
        """Cut off the coordinator of ``group`` and/or ``transactional_id`` on every broker until
        the handle's ``remove()`` (or the end of its ``with`` block): FindCoordinator answers
        COORDINATOR_NOT_AVAILABLE and requests to the coordinator answer ``error``
        (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS, for which
        FindCoordinator answers as usual). Any thread."""
        return (self._cluster or self)._coordinator_outages.add(group, transactional_id, error)

    def expire_session(self, group: str, *, member_id: str | None = None,
                       client_id: str | None = None) -> list[str]:
        """End now, as a session timeout would, the session of ``group``'s member ``member_id`` (or
        of its members with ``client_id``): a classic member is removed and the group rebalances,
        a KIP-848 member is fenced. Returns the member ids expired."""
        result: list[str] = self._from_thread(self.expire_session_async(group, member_id=member_id,
                                                                        client_id=client_id))
        return result

    async def expire_session_async(self, group: str, *, member_id: str | None = None,
                                   client_id: str | None = None) -> list[str]:
        return await expire_session(self._running_runtimes(), group, member_id=member_id, client_id=client_id)

    def _running_runtimes(self) -> list[BrokerRuntime]:
        """Every running broker of this broker's cluster (itself alone when it is one broker)."""
        whole = self._cluster or self
        return [m.runtime for m in whole.brokers if m.runtime is not None]

    # --- seeding, snapshots, reset -----------------------------------------------------------

    def seed(self, data: Mapping[str, Any] | Sequence[TopicSeed]) -> None:
        """Create the topics ``data`` names (``{"topic": {"partitions": 3, "config": {...},
        "records": [...]}}``, kafkapy.seeding) and append their records, through the topics
        module's create path and Produce's append path. A topic that exists gets the records only.
        From the test's thread; ``await seed_async(...)`` on the broker's loop."""
        self._from_thread(self.seed_async(data))

    async def seed_async(self, data: Mapping[str, Any] | Sequence[TopicSeed]) -> None:
        # TopicSeeds as they are; anything else (a mapping, or ["orders"] by mistake) is read, or
        # refused in one SeedError saying what seed data looks like
        given = data if isinstance(data, Sequence) and not isinstance(data, str) else None
        topics = list(given) if given is not None and all(isinstance(t, TopicSeed) for t in given) \
            else parse_seed(data)
        runtime = self._running()
        topics_module = _module(runtime, TopicsModule)
        for topic in topics:
            code = await topics_module.create_internal_topic(
                topic.name, topic.partitions or runtime.config["num.partitions"],
                topic.replication_factor or runtime.config["default.replication.factor"], topic.config,
                kind="seeded topic")
            if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                raise SeedError(f"topic {topic.name!r} cannot be created: {code.name}")
        await self._settle_topics({topic.name for topic in topics})
        for topic in topics:
            self._append_seeded(topic)

    async def _settle_topics(self, names: set[str], timeout: float = SETTLE_TIMEOUT_S) -> None:
        """Wait until every running broker's view has ``names`` with their leaders written."""
        deadline = time.monotonic() + timeout
        with _working_elsewhere():
            while True:
                missing = next((f"broker {m.broker_id} does not see topic {name!r}"
                                for m in self._running_members()
                                for name in names if name not in m._running().cluster.topics), None)
                missing = missing or self._unsettled()
                if missing is None:
                    return
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"seeded topics not ready within {timeout:g} s: {missing}")
                await sleep_real(SETTLE_POLL_S)  # other threads (store watches) settle it, in real time

    def _append_seeded(self, topic: TopicSeed) -> None:
        if not topic.records:
            return
        by_id = {m.broker_id: m for m in self._running_members()}
        cluster = self._running().cluster
        now_ms = int(self._running().wall_clock() * 1000)  # the broker's time (virtual, with a clock)
        for partition, records in placed(topic.records, len(cluster.topics[topic.name].partitions)).items():
            found = cluster.leadership(topic.name, partition)
            leader = by_id.get(found[0] if found is not None else NO_LEADER)
            if leader is None:
                raise SeedError(f"{topic.name}-{partition} has no running leader to append to")
            dataplane = leader._dataplane()
            for start in range(0, len(records), SEED_BATCH_RECORDS):
                batch = build_record_batch([
                    {"key": r.key, "value": r.value, "headers": list(r.headers),
                     "timestamp": now_ms if r.timestamp is None else r.timestamp}
                    for r in records[start:start + SEED_BATCH_RECORDS]])
                code = dataplane.append_batch(topic.name, partition, batch)
                if code != ErrorCode.NONE:
                    raise SeedError(f"records for {topic.name}-{partition} were refused: {code.name}")

    def snapshot(self) -> Snapshot:
        """The topics (not the internal ``__`` ones: their state is the groups' and transactions'),
        their configs and data records, and the groups' committed offsets, as they are now."""
        return self._on_loop(self._snapshot)

    def _snapshot(self) -> Snapshot:
        runtime = self._running()
        partitions = self._dataplane().partitions
        topics: dict[str, dict[str, Any]] = {}
        for name, info in sorted(runtime.cluster.topics.items()):
            if name.startswith("__"):
                continue
            records = [{"key": r.key, "value": r.value, "headers": [list(h) for h in r.headers],
                        "partition": r.partition, "timestamp": r.timestamp}
                       for r in stored_records(partitions, name, isolation=Isolation.READ_COMMITTED,
                                               open_transactions_aborted=True)]
            topics[name] = {"partitions": len(info.partitions),
                            "replication_factor": len(next(iter(info.partitions.values()))),
                            "config": dict(runtime.store.entity_config(f"topics/{name}")),
                            "records": records}
        offsets: dict[str, dict[tuple[str, int], int]] = {}
        for member in self._running_members():
            groups = _find_module(member._running(), GroupsModule)
            if groups is None:
                continue
            store = groups.coordinator.offsets
            for group in store.groups():
                for topic, partition in store.partitions(group):
                    value = store.get(group, topic, partition)
                    if value is not None and topic in topics:
                        offsets.setdefault(group, {})[(topic, partition)] = value.offset
        return Snapshot(topics, offsets)

    def restore(self, snapshot: Snapshot) -> None:
        """``reset()``, then the snapshot's topics seeded again and its offsets committed again
        (as a consumer outside group management commits: generation -1). Offsets start again
        at 0: a log whose start had moved (retention, DeleteRecords) is renumbered."""
        self._from_thread(self.restore_async(snapshot))

    async def restore_async(self, snapshot: Snapshot) -> None:
        await self.reset_async()
        await self.seed_async(snapshot.topics)
        for group, committed in snapshot.offsets.items():
            await self._commit(group, committed)

    async def _commit(self, group: str, committed: Mapping[tuple[str, int], int]) -> None:
        from kafkapy.groups.offsets import OffsetEntry  # the groups module's own commit entry

        for member in self._running_members():
            groups = _find_module(member._running(), GroupsModule)
            if groups is None:
                continue
            try:
                groups.check_coordinator(group)
            except KafkaApiError:
                continue
            outcome: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
            entries = [OffsetEntry(t, p, offset, -1, "") for (t, p), offset in committed.items()]
            groups.coordinator.commit_offsets(group, -1, "", None, entries, outcome.set_result)
            code = await outcome
            if code != ErrorCode.NONE:
                raise SeedError(f"group {group!r}: committing the snapshot's offsets failed: {code.name}")
            return
        raise SeedError(f"group {group!r}: no running broker coordinates it")

    def reset(self) -> None:
        """Delete every topic but the internal ones, with their logs, and forget every group (its
        members and offsets) and every transactional id (open transactions dropped); what tests
        made is gone, the brokers and their connections stay (kafkapy.inspection.reset)."""
        self._from_thread(self.reset_async())

    async def reset_async(self) -> None:
        runtime = self._running()
        store = runtime.store
        homes = self._log_homes()
        for name in [n for n in runtime.cluster.topics if not n.startswith("__")]:
            _delete_topic(store, homes, name)
        for member in self._running_members():
            forget_groups_and_transactions(member._running().modules)
        for home in homes:
            empty_coordinator_logs(home)
        (self._cluster or self)._coordinator_outages.clear()  # an outage is about groups gone now

    def delete_topics(self, *names: str) -> None:
        """Delete ``names`` (those that exist) with their logs at once, as reset deletes topics;
        the ``kafka_topic`` fixture's cleanup. From the test's thread; ``delete_topics_async`` on
        the broker's loop."""
        self._from_thread(self.delete_topics_async(*names))

    async def delete_topics_async(self, *names: str) -> None:
        store, homes = self._running().store, self._log_homes()
        for name in names:
            _delete_topic(store, homes, name)

    def _log_homes(self) -> list[LogHome]:
        """One log home for a shared MemoryStore; one per broker on ZooKeeper or log.dirs."""
        return list({id(home): home for home in (m._dataplane().partitions.home
                                                 for m in self._running_members())}.values())

    # --- inspection ------------------------------------------------------------------------

    def records(self, topic: str, partition: int | None = None, from_offset: int = 0, *,
                isolation: Isolation | str = Isolation.LOG) -> list[StoredRecord]:
        """The records the log of ``topic`` holds (one partition, or all in turn) from ``from_offset``,
        decoded, with producer id, sequence and transaction flags (kafkapy.inspection).
        ``isolation="read_committed"`` (or ``"read_uncommitted"``) gives only what a consumer at
        that level keeps: no markers, nothing past the last stable offset (high watermark), no
        aborted transaction's records."""
        view = Isolation.of(isolation)
        partitions = self._dataplane().partitions
        return self._on_loop(lambda: stored_records(partitions, topic, partition, from_offset, view))

    def log_offsets(self, topic: str, partition: int | None = None) -> list[LogOffsets]:
        """Where the log of ``topic`` (one partition, or each in turn) stands: log start, last stable
        offset, high watermark, log end and the aborted transactions, so a test sees what a
        read_committed consumer may read and why (kafkapy.inspection.log_offsets)."""
        return self._on_loop(lambda: sorted(
            (offsets for member in self._running_members()
             for offsets in log_offsets(member._dataplane().partitions, topic, partition)),
            key=lambda offsets: offsets.partition))

    def producers(self, topic: str | None = None, partition: int | None = None) -> list[ProducerView]:
        """The idempotent and transactional producers each partition's leader knows (of ``topic``,
        of one ``partition``): epoch, last sequence, an open transaction's first offset. Frozen
        values, read on the broker's loop (kafkapy.inspection.producers)."""
        return self._on_loop(lambda: sorted(
            (view for member in self._running_members()
             for view in producer_views(member._dataplane().partitions, topic, partition)),
            key=lambda view: (view.topic, view.partition, view.producer_id)))

    def connections(self) -> list[ConnectionView]:
        """The client connections each running broker holds open: listener, principal, and on a SASL
        listener its mechanism, how many times it has authenticated (re-authentications, KIP-368,
        included) and when its session ends. Frozen values, read on the broker's loop
        (kafkapy.inspection.connections)."""
        return self._on_loop(lambda: [
            view for member in self._running_members()
            for view in connection_views(member.broker_id, member._running().connections)])

    # --- inspection of the coordinators (kafkapy.inspection.groups, .transactions) ----------------

    def groups(self, *group_ids: str) -> list[GroupView]:
        """Every group (or those named), as its coordinator holds it now: members with their
        subscriptions and assignments, generation, committed and pending offsets. Frozen values,
        read on the broker's loop; each group from the broker that coordinates it."""
        wanted = group_ids or None
        return self._on_loop(lambda: sorted(
            (view for member in self._running_members()
             for module in _modules(member._running(), GroupsModule)
             for view in group_views(module, _topic_names(member._running()), wanted)),
            key=lambda view: view.group_id))

    def group(self, group_id: str) -> GroupView | None:
        """One group (None if no coordinator knows it)."""
        return next(iter(self.groups(group_id)), None)

    def share_groups(self, *group_ids: str) -> list[ShareGroupView]:
        """Every KIP-932 share group (or those named), sorted by id: state, group epoch, members
        with their subscriptions and assignments. Frozen values, read on the broker's loop."""
        wanted = group_ids or None
        return self._on_loop(lambda: sorted(
            (view for member in self._running_members()
             for module in _modules(member._running(), ShareModule)
             for view in share_group_views(module, member._running().broker_id,
                                           _topic_names(member._running()), wanted)),
            key=lambda view: view.group_id))

    def share_partitions(self, group_id: str | None = None) -> list[SharePartitionView]:
        """Every share-partition (of one group): its start and end offsets and each in-flight
        record's state, delivery count and holder, sorted by group, topic, partition; each read
        from the broker that leads the partition."""
        return self._on_loop(lambda: sorted(
            (view for member in self._running_members()
             for module in _modules(member._running(), ShareModule)
             for view in share_partition_views(module, member._running().broker_id,
                                               _topic_names(member._running()), group_id)),
            key=lambda view: (view.group_id, view.topic, view.partition)))

    def transactions(self, *transactional_ids: str) -> list[TransactionView]:
        """Every transactional id (or those named) as its coordinator holds it now: state,
        producer id and epoch, timeout, the open transaction's partitions and start."""
        wanted = transactional_ids or None
        return self._on_loop(lambda: sorted(
            (view for member in self._running_members()
             for module in _modules(member._running(), TransactionsModule)
             for view in transaction_views(module, wanted)),
            key=lambda view: view.transactional_id))

    def transaction(self, transactional_id: str) -> TransactionView | None:
        return next(iter(self.transactions(transactional_id)), None)

    def history(self, *, connection: str | None = None, client_id: str | None = None,
                since: float | None = None) -> list[HistoryEntry]:
        """The requests the broker answered, oldest first (kafkapy.observers.history); the broker must
        run the RequestHistory observer (``Broker(history=True)``; the pytest fixtures add it). A
        cluster answers for every running broker, merged by arrival: a client talks to each
        partition's leader, so one broker's history alone misses most of a test's requests."""
        if self.is_cluster:
            members = self._running_members()
            if not members:
                self._running()  # raises: the cluster is not started
            return list(heapq.merge(*(m.history(connection=connection, client_id=client_id, since=since)
                                      for m in members), key=lambda entry: entry.time))
        observer = self.history_observer
        if observer is None:
            raise RuntimeError(NO_HISTORY)
        return observer.entries(connection=connection, client_id=client_id, since=since)

    # --- client telemetry (KIP-714; kafkapy.telemetry) ------------------------------------------------

    def set_client_metrics(self, name: str, *, metrics: Sequence[str] = ("*",),
                           interval_ms: int | None = None, match: Sequence[str] = ()) -> None:
        """Create or replace the ``CLIENT_METRICS`` subscription ``name``, as
        ``kafka-client-metrics.sh --alter`` would: metric name prefixes (``*`` for all), the push
        interval (Kafka's default 300,000 ms when None) and ``attribute=regex`` matches (every one
        must match). Every broker keeps it (DescribeConfigs shows it); clients that ask for their
        subscription from now on get it where the telemetry module runs
        (``kafkapy.modules=telemetry``). A config Kafka would refuse raises SubscriptionError."""
        config = {"metrics": ",".join(metrics)}
        if interval_ms is not None:
            config["interval.ms"] = str(interval_ms)
        if match:
            config["match"] = ",".join(match)
        subscription = parse_subscription(name, config)
        self._running().store.set_entity_config(f"{CLIENT_METRICS}/{name}", config)
        self._await_subscription(name, subscription)

    def delete_client_metrics(self, name: str) -> None:
        """Remove the subscription ``name`` (clients stop pushing what only it asked for)."""
        self._running().store.set_entity_config(f"{CLIENT_METRICS}/{name}", {})
        self._await_subscription(name, None)

    def _await_subscription(self, name: str, subscription: Subscription | None) -> None:
        """Return once every running broker holds ``subscription`` (the store's watch brings it to
        its client-metrics module), so that what a client asks next already sees it."""
        def held() -> bool:
            return all(module.subscriptions.get(name) == subscription for member in self._running_members()
                       for module in _modules(member._running(), ClientMetricsModule))
        self.wait_for_sync(lambda: self._on_loop(held), what=f"client metrics subscription {name!r} applied")

    def telemetry(self, client_id: str | None = None) -> list[TelemetryPush]:
        """The metrics pushes the broker accepted (of clients with this ``client_id``), oldest
        first: each with the client instance id, the subscription it answered and the decoded
        data points. Needs the telemetry module (``kafkapy.modules=telemetry``)."""
        def read() -> list[TelemetryPush]:
            pushes = [push for member in self._running_members()
                      for module in _modules(member._running(), TelemetryModule) for push in module.pushes
                      if client_id is None or push.client_id == client_id]
            return sorted(pushes, key=lambda push: push.received_ms)
        self._telemetry_modules()
        return self._on_loop(read)

    def _telemetry_modules(self) -> list[TelemetryModule]:
        modules = _modules(self._running(), TelemetryModule)
        if not modules:
            raise RuntimeError("the broker runs no telemetry module: start it with "
                               "{'kafkapy.modules': 'telemetry'}")
        return modules

    @property
    def history_observer(self) -> RequestHistory | None:
        return next((o for o in self._running().observers.observers if isinstance(o, RequestHistory)), None)

    def wait_for_sync(self, observe: Callable[[], T], until: Callable[[T], object] = bool, *,
                      timeout: float = 10.0, what: str | None = None,
                      show: Callable[[T], str] = repr) -> T:
        """Call ``observe`` until ``until`` holds for what it returns, and return that; after
        ``timeout`` seconds an AssertionError that shows the last thing observed (written by
        ``show``). For tests on the thread that runs blocking clients (``with Broker()``)."""
        deadline = time.monotonic() + timeout
        while True:
            seen = observe()
            if until(seen):
                return seen
            if time.monotonic() >= deadline:
                raise AssertionError(_timed_out(timeout, what or waited_for(until), show(seen)))
            time.sleep(0.02)

    async def wait_for(self, observe: Callable[[], T], until: Callable[[T], object] = bool, *,
                       timeout: float = 10.0, what: str | None = None,
                       show: Callable[[T], str] = repr) -> T:
        """``wait_for_sync`` for asyncio tests: it sleeps with the loop, so a broker on this loop
        (``await broker.start()``) goes on serving meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            seen = observe()
            if until(seen):
                return seen
            if time.monotonic() >= deadline:
                raise AssertionError(_timed_out(timeout, what or waited_for(until), show(seen)))
            await sleep_real(0.02)

    def wait_for_group(self, group_id: str, *, state: str | None = "Stable", members: int | None = None,
                       timeout: float = 10.0, poll: Iterable[Any] | Any = ()) -> GroupView:
        """Wait until the group is in ``state`` (Kafka's name, classic or KIP-848; None: any) with
        ``members`` members (None: any number), and return its view (``group()``). ``poll``: the
        consumers (or callables) to poll between looks, for clients that join only while polled
        (kafkapy.inspection.group_waits). On timeout, an AssertionError with what was last seen.
        On a cluster, or any of its brokers, the group is read from its coordinator, wherever it is."""
        wanted, calls = GroupWanted(group_id, state, members), pollers(poll)
        inspected = self._cluster or self

        def observe() -> GroupView | None:
            for call in calls:
                call()
            return inspected.group(group_id)
        view = self.wait_for_sync(observe, wanted.met, timeout=timeout, what=str(wanted), show=seen_group)
        assert view is not None  # wanted.met holds for views only
        return view

    async def wait_for_group_async(self, group_id: str, *, state: str | None = "Stable",
                                   members: int | None = None, timeout: float = 10.0) -> GroupView:
        """``wait_for_group`` for asyncio tests: it sleeps with the loop, so aiokafka consumers (which
        join from their own tasks) and a broker on this loop go on meanwhile."""
        wanted, inspected = GroupWanted(group_id, state, members), self._cluster or self
        view = await self.wait_for(lambda: inspected.group(group_id), wanted.met, timeout=timeout,
                                   what=str(wanted), show=seen_group)
        assert view is not None
        return view

    def _dataplane(self) -> DataPlaneModule:
        dataplane = next((m for m in self._running().modules if isinstance(m, DataPlaneModule)), None)
        if dataplane is None:
            raise RuntimeError("the broker runs no data plane")
        return dataplane

    def _on_loop(self, action: Callable[[], T]) -> T:
        """``action()`` on the broker's loop (where its state changes), from any thread."""
        loop = self._loop
        if loop is not None and loop.is_closed():
            raise RuntimeError(_STOPPED)
        if loop is None or threading.current_thread() is self._thread:
            return action()

        async def run() -> T:
            return action()
        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout=60)

    def _running(self) -> BrokerRuntime:
        if self.is_cluster:  # cluster-wide questions go to any running broker: they share the logs
            self.runtime = self._first_running()
        if self.runtime is None:
            raise RuntimeError("the broker is not started: use `with Broker() as b:` or `await b.start()`")
        return self.runtime


M = TypeVar("M", bound=Module)


def _find_module(runtime: BrokerRuntime, kind: type[M]) -> M | None:
    return next((m for m in runtime.modules if isinstance(m, kind)), None)


def _module(runtime: BrokerRuntime, kind: type[M]) -> M:
    found = _find_module(runtime, kind)
    if found is None:
        raise RuntimeError(f"the broker runs no {kind.__name__}")
    return found


def _delete_topic(store: MetadataStore, homes: Sequence[LogHome], name: str) -> None:
    try:
        store.delete_topic(name)  # every broker's view follows from the store's watch
    except UnknownTopic:
        pass
    for home in homes:
        with home.lock:  # the logs go with it (a topic made again starts empty anyway)
            home.forget_topic(name)


def _modules(runtime: BrokerRuntime, kind: type[M]) -> list[M]:
    return [m for m in runtime.modules if isinstance(m, kind)]


def _topic_names(runtime: BrokerRuntime) -> dict[uuid.UUID, str]:
    return {info.topic_id: name for name, info in runtime.cluster.topics.items()}


def waited_for(until: Callable[..., object]) -> str:
    """What a wait waited for, unless the test said: a function's name, or where a lambda is (each
    lambda is "<lambda>", which tells a reader of a failed wait nothing)."""
    name = str(getattr(until, "__name__", "condition"))
    code = getattr(until, "__code__", None)
    if name == "<lambda>" and code is not None:
        return f"the lambda at {os.path.basename(code.co_filename)}:{code.co_firstlineno}"
    return name


def _working_elsewhere() -> contextlib.AbstractContextManager[None]:
    """The running loop counts as busy meanwhile, if it is a virtual clock's (autojump holds)."""
    loop = asyncio.get_running_loop()
    return loop.working_elsewhere() if isinstance(loop, VirtualTimeLoop) else contextlib.nullcontext()


def _timed_out(timeout: float, what: str, shown: str) -> str:
    if len(shown) > 2000:  # enough to see what went wrong, not a screenful per record
        shown = shown[:2000] + f"... ({len(shown)} characters)"
    return f"timed out after {timeout:g} s waiting for {what}; last seen: {shown}"
