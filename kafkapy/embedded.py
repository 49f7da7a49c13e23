"""An in-process broker for test suites: ``with Broker() as broker:`` or ``await broker.start()``.

As a context manager it runs on its own event loop in a background thread, so
synchronous test code and blocking clients can talk to it. Inside asyncio code,
``await broker.start()`` runs it on the caller's loop instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from kafkapy.assembly import DEFAULT_MODULES, assemble
from kafkapy.dataplane.maintenance import LogMaintenance
from kafkapy.dataplane.module import DataPlaneModule
from kafkapy.faults import Faults, FaultsModule
from kafkapy.inspection import StoredRecord, stored_records
from kafkapy.observers.history import HistoryEntry, RequestHistory
from kafkapy.server.broker import ALL_FAST_PATHS, BrokerRuntime
from kafkapy.server.config import BrokerConfig
from kafkapy.server.fastpaths import FastPaths
from kafkapy.server.modules import Module
from kafkapy.store.base import MetadataStore

__all__ = ["Broker", "BrokerLogs"]

T = TypeVar("T")
TopicPartition = tuple[str, int]

# listeners: ephemeral ports, so tests never collide. group.initial.rebalance.delay.ms: 0, not
# Kafka's 3000, so a test's group forms at once (Kafka's own config/server.properties sets 0 too).
EMBEDDED_DEFAULTS: dict[str, Any] = {"listeners": "PLAINTEXT://127.0.0.1:0",
                                     "group.initial.rebalance.delay.ms": 0}


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


class Broker:
    def __init__(self, config: Mapping[str, Any] | None = None, *, store: MetadataStore | None = None,
                 modules: list[type[Module]] | None = None, fast_paths: FastPaths = ALL_FAST_PATHS) -> None:
        default_keys = [key for cls in DEFAULT_MODULES for key in cls.config_keys]
        self.config = BrokerConfig.build({**EMBEDDED_DEFAULTS, **(config or {})}, extra_keys=default_keys)
        self.store = store
        self.module_classes = modules
        self.fast_paths = fast_paths  # all on, unless a test compares them with the plain paths
        self.runtime: BrokerRuntime | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # --- on the caller's loop -------------------------------------------------------------

    async def start(self) -> Broker:
        runtime = assemble(self.config, store=self.store, extra_modules=self.module_classes or (),
                           fast_paths=self.fast_paths)
        await runtime.start()
        self.runtime, self.store = runtime, runtime.store
        return self

    async def stop(self) -> None:
        if self.runtime is not None:
            await self.runtime.stop()

    async def __aenter__(self) -> Broker:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- on a background thread ------------------------------------------------------------

    def __enter__(self) -> Broker:
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            try:
                self._loop.run_until_complete(self.start())
            except BaseException as exc:
                started.set_exception(exc)
                self._loop.close()
                return
            started.set_result(None)
            self._loop.run_forever()
            self._loop.close()

        self._thread = threading.Thread(target=run, name="kafkapy-broker", daemon=True)
        self._thread.start()
        started.result()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        self._thread = None

    # --- what tests need to connect ------------------------------------------------------

    @property
    def listeners(self) -> dict[str, str]:
        """Listener name to the "host:port" clients should use (the advertised endpoint)."""
        runtime = self._running()
        return {b.name: f"{b.advertised_host}:{b.advertised_port}" for b in runtime.listeners}

    @property
    def bootstrap_servers(self) -> str:
        return next(iter(self.listeners.values()))

    @property
    def broker_id(self) -> int:
        return self._running().broker_id

    @property
    def logs(self) -> BrokerLogs:
        """``broker.logs.apply_retention()`` / ``broker.logs.compact()``."""
        return BrokerLogs(self)

    @property
    def faults(self) -> Faults:
        """Fault injection: ``broker.faults.add(FaultRule(...))`` or ``with broker.faults.injected(rule):``
        (kafkapy.faults)."""
        module = next((m for m in self._running().modules if isinstance(m, FaultsModule)), None)
        if module is None:
            raise RuntimeError("the broker runs no faults module")
        return module.faults

    def call_on_loop(self, action: Callable[[LogMaintenance], T]) -> T:
        """``action(maintenance)`` on the broker's loop (where logs change), from any thread."""
        maintenance = self._dataplane().maintenance
        return self._on_loop(lambda: action(maintenance))

    # --- inspection ------------------------------------------------------------------------

    def records(self, topic: str, partition: int | None = None, from_offset: int = 0) -> list[StoredRecord]:
        """The records the log of ``topic`` holds (one partition, or all in turn) from ``from_offset``,
        decoded, with producer id, sequence and transaction flags (kafkapy.inspection)."""
        partitions = self._dataplane().partitions
        return self._on_loop(lambda: stored_records(partitions, topic, partition, from_offset))

    def history(self, *, connection: str | None = None, client_id: str | None = None,
                since: float | None = None) -> list[HistoryEntry]:
        """The requests the broker answered, oldest first (kafkapy.observers.history); the broker must
        run the RequestHistory observer (``observer.class.names``; the pytest fixtures add it)."""
        observer = self.history_observer
        if observer is None:
            raise RuntimeError("the broker keeps no request history: add kafkapy.observers.RequestHistory "
                               "to observer.class.names")
        return observer.entries(connection=connection, client_id=client_id, since=since)

    @property
    def history_observer(self) -> RequestHistory | None:
        return next((o for o in self._running().observers.observers if isinstance(o, RequestHistory)), None)

    def wait_for_sync(self, observe: Callable[[], T], until: Callable[[T], object] = bool, *,
                      timeout: float = 10.0, what: str | None = None) -> T:
        """Call ``observe`` until ``until`` holds for what it returns, and return that; after
        ``timeout`` seconds an AssertionError that shows the last thing observed. For tests on
        the thread that runs blocking clients (``with Broker()``)."""
        deadline = time.monotonic() + timeout
        while True:
            seen = observe()
            if until(seen):
                return seen
            if time.monotonic() >= deadline:
                raise AssertionError(_timed_out(timeout, what or _name(until), seen))
            time.sleep(0.02)

    async def wait_for(self, observe: Callable[[], T], until: Callable[[T], object] = bool, *,
                       timeout: float = 10.0, what: str | None = None) -> T:
        """``wait_for_sync`` for asyncio tests: it sleeps with the loop, so a broker on this loop
        (``await broker.start()``) goes on serving meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            seen = observe()
            if until(seen):
                return seen
            if time.monotonic() >= deadline:
                raise AssertionError(_timed_out(timeout, what or _name(until), seen))
            await asyncio.sleep(0.02)

    def _dataplane(self) -> DataPlaneModule:
        dataplane = next((m for m in self._running().modules if isinstance(m, DataPlaneModule)), None)
        if dataplane is None:
            raise RuntimeError("the broker runs no data plane")
        return dataplane

    def _on_loop(self, action: Callable[[], T]) -> T:
        """``action()`` on the broker's loop (where its state changes), from any thread."""
        loop = self._loop
        if loop is None or threading.current_thread() is self._thread:
            return action()

        async def run() -> T:
            return action()
        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout=60)

    def _running(self) -> BrokerRuntime:
        if self.runtime is None:
            raise RuntimeError("the broker is not started: use `with Broker() as b:` or `await b.start()`")
        return self.runtime


def _name(until: Callable[..., object]) -> str:
    return str(getattr(until, "__name__", "condition"))


def _timed_out(timeout: float, what: str, seen: object) -> str:
    shown = repr(seen)
    if len(shown) > 2000:  # enough to see what went wrong, not a screenful per record
        shown = shown[:2000] + f"... ({len(shown)} characters)"
    return f"timed out after {timeout:g} s waiting for {what}; last seen: {shown}"
