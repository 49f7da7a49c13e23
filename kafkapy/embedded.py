"""An in-process broker for test suites: ``with Broker() as broker:`` or ``await broker.start()``.

As a context manager it runs on its own event loop in a background thread, so
synchronous test code and blocking clients can talk to it. Inside asyncio code,
``await broker.start()`` runs it on the caller's loop instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from kafkapy.assembly import DEFAULT_MODULES, assemble
from kafkapy.dataplane.maintenance import LogMaintenance
from kafkapy.dataplane.module import DataPlaneModule
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

    def call_on_loop(self, action: Callable[[LogMaintenance], T]) -> T:
        """``action(maintenance)`` on the broker's loop (where logs change), from any thread."""
        runtime = self._running()
        dataplane = next((m for m in runtime.modules if isinstance(m, DataPlaneModule)), None)
        if dataplane is None:
            raise RuntimeError("the broker runs no data plane")
        maintenance = dataplane.maintenance
        loop = self._loop
        if loop is None or threading.current_thread() is self._thread:
            return action(maintenance)

        async def run() -> T:
            return action(maintenance)
        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout=60)

    def _running(self) -> BrokerRuntime:
        if self.runtime is None:
            raise RuntimeError("the broker is not started: use `with Broker() as b:` or `await b.start()`")
        return self.runtime
