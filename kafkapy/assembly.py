"""The composition root: the one place a broker is put together.

``kafkapy serve``, the embedded ``kafkapy.Broker`` and the pytest fixtures all
build their broker here, in one order (hypercorn's single config, h11's rule
that the core knows no I/O wiring):

1. the module classes: the defaults below, then ``kafkapy.modules=`` (entry
   points in group ``kafkapy.modules``, or dotted paths), then the caller's;
2. the config: every module's ``config_keys`` merged in and validated, before
   anything reads it;
3. the store (ZooKeeper when zookeeper.connect is set, else on disk under metadata.log.dir when
   log.dirs is set, else in memory);
4. the runtime, then the modules, each with its own services, in dependency
   order: a module's ``needs`` and ``wants`` are built (and started) before
   it. A need nobody provides, or a cycle, is a one-line ConfigError.

kafkapy/server knows only the Module protocol and the services it hands out;
the list of default modules lives here, above the modules.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping, Sequence
from importlib.metadata import entry_points

from kafkapy.acls import AclsModule
from kafkapy.configs import ConfigsModule
from kafkapy.dataplane import DataPlaneModule
from kafkapy.faults import FaultsModule
from kafkapy.features import FeaturesModule
from kafkapy.groups import GroupsModule
from kafkapy.log.manager import configured_log_dirs
from kafkapy.quotas import QuotasModule
from kafkapy.server.broker import ALL_FAST_PATHS, BrokerRuntime
from kafkapy.server.config import BrokerConfig, ConfigError, ConfigKey
from kafkapy.server.core import CoreModule
from kafkapy.server.fastpaths import FastPaths
from kafkapy.server.modules import Module
from kafkapy.server.sasl.credentials import ScramCredentialsModule
from kafkapy.shares import ShareModule
from kafkapy.sharestate.module import ShareCoordinatorModule
from kafkapy.store.base import MetadataStore
from kafkapy.store.durable import DurableStore
from kafkapy.store.journal import NEVER
from kafkapy.store.memory import MemoryStore
from kafkapy.strict import StrictModule
from kafkapy.telemetry.client_metrics import ClientMetricsModule
from kafkapy.topics import TopicsModule
from kafkapy.transactions import TransactionsModule

__all__ = ["DEFAULT_MODULES", "assemble", "default_module_keys", "dependency_order", "load_module_class",
           "make_store", "metadata_log_dir", "module_classes"]

MODULE_GROUP = "kafkapy.modules"  # the entry-point group third-party modules register under

DEFAULT_MODULES: tuple[type[Module], ...] = (CoreModule, ConfigsModule, FeaturesModule, QuotasModule,
                                             TopicsModule, DataPlaneModule, TransactionsModule, GroupsModule,
                                             FaultsModule,
                                             StrictModule, ScramCredentialsModule, AclsModule,
                                             ShareCoordinatorModule, ShareModule, ClientMetricsModule)


def default_module_keys() -> list[ConfigKey]:
    """The config keys the default modules declare: known to a config before they are built, so a
    setting of theirs is converted and checked at once and never warned about as unknown."""
    return [key for cls in DEFAULT_MODULES for key in cls.config_keys]


def load_module_class(name: str) -> type[Module]:
    """An entry point in group ``kafkapy.modules``, or a dotted ``pkg.module:Class`` / ``pkg.Class``."""
    installed = entry_points(group=MODULE_GROUP)
    for entry in installed:
        if entry.name == name:
            loaded = entry.load()
            break
    else:
        module_name, sep, attr = name.partition(":")
        if not sep:
            module_name, _, attr = name.rpartition(".")
        if not module_name:  # a bare name, so it could only have been an entry point
            names = ", ".join(sorted({entry.name for entry in installed})) or "none"
            raise ConfigError(f"invalid value {name!r} for kafkapy.modules: no module of that name is "
                              f"installed (installed: {names})")
        try:
            loaded = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ConfigError(f"invalid value {name!r} for kafkapy.modules: {exc}") from None
    if not (isinstance(loaded, type) and issubclass(loaded, Module)):
        raise ConfigError(f"invalid value {name!r} for kafkapy.modules: not a kafkapy Module")
    return loaded


def module_classes(config: BrokerConfig, extra: Iterable[type[Module]] = ()) -> list[type[Module]]:
    """The defaults, then those ``kafkapy.modules`` names, then ``extra``; each class once."""
    classes: list[type[Module]] = list(DEFAULT_MODULES)
    for cls in [*(load_module_class(name) for name in config["kafkapy.modules"]), *extra]:
        if cls not in classes:
            classes.append(cls)
    return classes


def dependency_order(classes: Sequence[type[Module]]) -> list[type[Module]]:
    """``classes`` with every module after the providers of its needs and wants (otherwise in the
    order given). ConfigError when a need has no provider, or when modules need each other."""
    providers: dict[str, type[Module]] = {}
    for cls in classes:
        for capability in cls.provides:
            other = providers.setdefault(capability, cls)
            if other is not cls:
                raise ConfigError(f"modules {other.name} and {cls.name} both provide {capability!r}")
    for cls in classes:
        for need in cls.needs:
            if need not in providers:
                raise ConfigError(f"module {cls.name} needs {need!r}, which no enabled module provides "
                                  f"(kafkapy.modules)")
    ordered: list[type[Module]] = []
    state: dict[type[Module], str] = {}  # "visiting" on the current path, "done" once placed

    def visit(cls: type[Module], path: list[type[Module]]) -> None:
        if state.get(cls) == "done":
            return
        if state.get(cls) == "visiting":
            cycle = [*path[path.index(cls):], cls]
            raise ConfigError("modules need each other: " + " -> ".join(c.name for c in cycle))
        state[cls] = "visiting"
        for capability in (*cls.needs, *cls.wants):
            provider = providers.get(capability)
            if provider is not None and provider is not cls:
                visit(provider, [*path, cls])
        state[cls] = "done"
        ordered.append(cls)

    for cls in classes:
        visit(cls, [])
    return ordered


def metadata_log_dir(config: BrokerConfig) -> str | None:
    """Where the embedded store keeps the metadata: Kafka's metadata.log.dir, by default the first
    of log.dirs (KRaftConfigs); None when the logs are in memory, and so is the metadata."""
    log_dirs = configured_log_dirs(config["log.dirs"], config["log.dir"])
    if not log_dirs:
        return None
    return str(config["metadata.log.dir"] or log_dirs[0])


def make_store(config: BrokerConfig) -> MetadataStore:
    """ZooKeeper when zookeeper.connect is set; else the embedded store, on disk under
    ``metadata_log_dir`` with log.dirs (kafkapy.store.durable), in memory without."""
    if config["zookeeper.connect"]:
        from kafkapy.store.zookeeper import ZooKeeperStore

        return ZooKeeperStore(config["zookeeper.connect"], config["zookeeper.session.timeout.ms"],
                              config["zookeeper.connection.timeout.ms"], cluster_id=config["cluster.id"])
    directory = metadata_log_dir(config)
    if directory is not None:
        # Flushed as the partition logs are (Kafka's log.flush.interval.*; by default the OS writes back).
        flush_ms = config["log.flush.interval.ms"]
        return DurableStore(directory, cluster_id=config["cluster.id"],
                            snapshot_bytes=config["metadata.log.max.record.bytes.between.snapshots"],
                            flush_messages=config["log.flush.interval.messages"],
                            flush_ms=NEVER if flush_ms is None else flush_ms)
    return MemoryStore(cluster_id=config["cluster.id"])


def assemble(config: BrokerConfig, *, store: MetadataStore | None = None,
             extra_modules: Iterable[type[Module]] = (), fast_paths: FastPaths = ALL_FAST_PATHS,
             log_dirs_to_adopt: Mapping[int, Sequence[str]] | None = None) -> BrokerRuntime:
    """A broker ready to ``start()``, on the running loop. A store passed in stays the caller's
    (not started or closed by the broker); otherwise one is made from the config. ``fast_paths``
    is for tests that hold the fast paths equal to the plain ones. ``log_dirs_to_adopt``: the
    brokers' log dirs (broker id -> dirs) whose topics this one makes if the store starts empty
    (kafkapy.server.adoption; by default its own when the store is its own)."""
    classes = dependency_order(module_classes(config, extra_modules))
    config = config.with_keys(key for cls in classes for key in cls.config_keys)
    runtime = BrokerRuntime(config, store if store is not None else make_store(config),
                            owns_store=store is None, fast_paths=fast_paths,
                            log_dirs_to_adopt=log_dirs_to_adopt)
    runtime.install([cls(runtime.services_for(cls)) for cls in classes])
    return runtime
