"""Topic configs: the TOPIC resources of DescribeConfigs/AlterConfigs/IncrementalAlterConfigs, the
configs CreateTopics carries, and the ``topic-configs`` capability the data plane reads.

Theory of operation. A topic's overrides live in the store at ``topics/<topic>`` (ZooKeeper:
/config/topics/<topic>, written with the topic, changed with a /config/changes notification).
Every broker keeps a copy of all overrides, reloaded whenever a notification names a topic or the
set of topics changes (a new topic's overrides are written without a notification, as in Kafka);
:meth:`TopicConfigs.log_config` answers from that copy, merged over the broker's ``log.*``
settings and Kafka's defaults (:class:`kafkapy.log.LogConfig`), and each change is handed to
the callbacks of :meth:`TopicConfigs.watch`. DescribeConfigs and the alters read the store itself,
so they see another broker's change at once.

DescribeConfigs reports what a ZooKeeper-mode Kafka broker reports for a topic
(``ConfigHelper.createTopicConfigEntry``): every topic config, its effective value, and as
synonyms the topic's override (DYNAMIC_TOPIC_CONFIG), then the broker synonyms found at each
broker level (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
DEFAULT_CONFIG), cut to start at the first synonym's name as Kafka's ``dropWhile`` cuts them; the
entry's source is the first synonym's (DEFAULT_CONFIG when there is none).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.topic_config import (
    BROKER_KEYS,
    TOPIC_CONFIGS,
    InvalidTopicConfig,
    InvalidTopicValue,
    LogConfig,
    TopicConfigKey,
    format_topic_value,
    parse_topic_value,
    validate_topic_config,
)
from kafkapy.server.config import CORE_KEYS, ConfigKey
from kafkapy.server.services import TOPIC_CONFIGS_CAPABILITY
from kafkapy.store.base import StoreError, Watch, check_topic_name

if TYPE_CHECKING:
    from kafkapy.server.services import BrokerServices

__all__ = [
    "BROKER_LOG_KEYS",
    "TOPIC",
    "TOPIC_CONFIGS_CAPABILITY",
    "TopicConfigs",
    "topic_config_error",
]

log = logging.getLogger(__name__)

TOPIC = 2  # Kafka's ConfigResource.Type.TOPIC
# Kafka's DescribeConfigsResponse.ConfigSource
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
# Kafka's DescribeConfigsResponse.ConfigType
_CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
_CORE_NAMES = {key.name for key in CORE_KEYS}

# The broker settings that give topic configs their defaults (log.retention.hours, ...); the topics
# module declares them (it is an installed entry point, so the config knows them before it
# starts). message.max.bytes is a core key.
BROKER_LOG_KEYS: tuple[ConfigKey, ...] = tuple(
    ConfigKey(synonym.name, synonym.type, synonym.default, f"Broker default of topic config {key.name}.",
              synonym.check)
    for synonym, key in BROKER_KEYS
    if synonym.name not in _CORE_NAMES
)

LogConfigCallback = Callable[[str, LogConfig], None]


def topic_config_error(exc: InvalidTopicConfig, resource: str) -> KafkaApiError:
    """An alter's refusal as Kafka words it: ConfigDef's value errors (ConfigException) get
    "Invalid config value for resource ...", LogConfig's own checks keep their message."""
    if isinstance(exc, InvalidTopicValue):
        return KafkaApiError(ErrorCode.INVALID_CONFIG, f"Invalid config value for resource {resource}: "
                                                       f"{exc.message}")
    return exc


class TopicConfigs:
    """Every topic's overrides, the LogConfig each one gives, and the TOPIC resource requests."""

    def __init__(self, services: BrokerServices,
                 broker_levels: Callable[[], tuple[Mapping[str, str], Mapping[str, str]]]) -> None:
        self.services = services
        self._broker_levels = broker_levels  # the dynamic (cluster default, this broker) settings
        self._overrides: dict[str, dict[str, str]] = {}
        # log_config's answers: building one checks every value (~60 µs), the data plane asks often
        self._cache: dict[str, LogConfig] = {}
        self._plain: LogConfig | None = None  # the one answer of every topic without overrides
        self._stale: dict[str, LogConfig] = {}  # answers before the broker settings changed
        self._watchers: list[LogConfigCallback] = []
        self._watch: Watch | None = None
        self._reload_task: asyncio.Task[None] | None = None
        self._reload_pending = False

    # --- the topic-configs capability ---------------------------------------------------------

    def broker_settings(self) -> dict[str, Any]:
        """The broker's settings with the dynamic ones on top (Kafka's precedence)."""
        default, override = self._broker_levels()
        return {**self.services.config.values, **default, **override}

    def log_config(self, topic: str) -> LogConfig:
        """Kafka's defaults, under the broker's log.* settings, under the topic's overrides."""
        config = self._cache.get(topic)
        if config is None:
            overrides = self._overrides.get(topic)
            if overrides:
                config = self._log_config(overrides)
            else:
                if self._plain is None:
                    self._plain = self._log_config({})
                config = self._plain
            self._cache[topic] = config
        return config

    def broker_settings_changed(self) -> None:
        """The dynamic broker settings changed: every cached answer may be stale."""
        for topic, config in self._cache.items():  # what the logs were told last
            self._stale.setdefault(topic, config)
        self._cache.clear()
        self._plain = None

    def refresh_logs(self) -> None:
        """Tell the watchers of every topic whose LogConfig the broker settings changed (Kafka's
        DynamicLogConfig.updateLogsConfig); a topic not asked about before is told anyway."""
        stale, self._stale = self._stale, {}
        for topic in sorted(self.services.cluster.topics.keys() | self._overrides.keys()):
            if stale.get(topic) != self.log_config(topic):
                self._notify(topic)

    def _log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        usable: dict[str, str] = {}
        for name, value in overrides.items():  # a hand-edited bad value is skipped, not fatal
            try:
                parse_topic_value(name, value)
            except InvalidTopicConfig as exc:
                if name in {key.name for key in TOPIC_CONFIGS}:
                    log.error("ignoring stored topic config: %s", exc.message)
                continue
            usable[name] = value
        try:
            return LogConfig.from_topic_config(usable, self.broker_settings())
        except InvalidTopicConfig as exc:
            log.error("ignoring stored topic configs %s: %s", usable, exc.message)
            return LogConfig.from_topic_config({}, self.broker_settings())

    def watch(self, callback: LogConfigCallback) -> Callable[[], None]:
        """``callback(topic, config)`` on the loop each time a topic's overrides change."""
        self._watchers.append(callback)

        def remove() -> None:
            if callback in self._watchers:
                self._watchers.remove(callback)

        return remove

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        store = self.services.store
        self._watch = await asyncio.to_thread(store.watch_topics, lambda _topics: self._changed())
        self._overrides = await asyncio.to_thread(self._read_all)

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._reload_task is not None:
            self._reload_task.cancel()

    def entity_changed(self, path: str) -> None:
        """A store thread saw a config change notification."""
        if path.startswith("topics/"):
            self._changed()

    def _changed(self) -> None:
        self.services.loop.call_soon_threadsafe(self._schedule_reload)

    def _schedule_reload(self) -> None:
        if self._reload_task is not None and not self._reload_task.done():
            self._reload_pending = True
            return
        self._reload_task = self.services.loop.create_task(self._reload())

    def _read_all(self) -> dict[str, dict[str, str]]:
        stored = self.services.store.entity_configs("topics")
        return {path.split("/", 1)[1]: config for path, config in stored.items()}

    async def _reload(self) -> None:
        while True:
            self._reload_pending = False
            try:
                fresh = await asyncio.to_thread(self._read_all)
            except StoreError:
                log.exception("could not reload topic configs (keeping the previous ones)")
                return
            self.remember(fresh)
            if not self._reload_pending:
                return

    def remember(self, fresh: dict[str, dict[str, str]]) -> None:
        """Take a new copy of every topic's overrides; tell the watchers of each that changed."""
        old, self._overrides = self._overrides, fresh
        changed = sorted(t for t in old.keys() | fresh.keys() if old.get(t, {}) != fresh.get(t, {}))
        for topic in changed:
            self._cache.pop(topic, None)
        for topic in changed:
            self._notify(topic)

    def created(self, topic: str, overrides: Mapping[str, str]) -> None:
        """This broker created a topic: its overrides are known before the store's watch says so."""
        self.remember({**self._overrides, topic: dict(overrides)} if overrides else
                      {t: c for t, c in self._overrides.items() if t != topic})

    def _notify(self, topic: str) -> None:
        config = self.log_config(topic)
        for callback in list(self._watchers):
            try:
                callback(topic, config)
            except Exception:
                log.exception("topic config watcher failed for %s (ignored)", topic)

    # --- requests -----------------------------------------------------------------------------

    @staticmethod
    def check_create(configs: Mapping[str, str | None]) -> dict[str, str]:
        """CreateTopics' configs, checked as Kafka checks them; KafkaApiError(INVALID_CONFIG)."""
        nulls = [name for name, value in configs.items() if value is None]
        if nulls:  # every one named, as Kafka's ZkAdminManager.createTopics does
            raise KafkaApiError(ErrorCode.INVALID_CONFIG,
                                f"Null value not supported for topic configs: {','.join(nulls)}")
        overrides = {name: str(value) for name, value in configs.items()}
        validate_topic_config(overrides)
        return overrides

    async def existing_overrides(self, topic: str) -> dict[str, str]:
        """The topic's stored overrides; KafkaApiError if the name is bad or the topic unknown."""
        try:
            check_topic_name(topic)
        except StoreError as exc:
            raise KafkaApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from None
        store = self.services.store
        # The watched view first; the store only for a topic the view has not caught up with.
        if topic not in self.services.cluster.topics and topic not in await asyncio.to_thread(store.topics):
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
        return await asyncio.to_thread(store.entity_config, f"topics/{topic}")

    async def store_overrides(self, topic: str, overrides: Mapping[str, str]) -> None:
        await asyncio.to_thread(self.services.store.set_entity_config, f"topics/{topic}", overrides)
        self.remember({**self._overrides, topic: dict(overrides)} if overrides else
                      {t: c for t, c in self._overrides.items() if t != topic})

    def entries(self, overrides: Mapping[str, str], synonyms: bool, documentation: bool,
                version: int) -> list[dict[str, Any]]:
        """DescribeConfigs entries of a topic with these overrides, as Kafka reports them."""
        effective = self._log_config(overrides)
        return [self._entry(key, overrides, effective, synonyms, documentation, version)
                for key in sorted(TOPIC_CONFIGS, key=lambda k: k.name)]

    def _entry(self, key: TopicConfigKey, overrides: Mapping[str, str], effective: LogConfig,
               synonyms: bool, documentation: bool, version: int) -> dict[str, Any]:
        levels: list[tuple[int, str, str | None]] = []
        value = format_topic_value(key.name, effective.value_of(key.name))
        if key.name in overrides:
            levels.append((DYNAMIC_TOPIC_CONFIG, key.name, value))
        levels += self._broker_synonyms(key)
        source = levels[0][0] if levels else DEFAULT_CONFIG
        return {
            "name": key.name,
            "value": value,
            "read_only": False,
            "config_source": source,
            "is_default": source == DEFAULT_CONFIG,
            "is_sensitive": False,
            "synonyms": [{"name": n, "value": v, "source": s} for s, n, v in levels]
            if synonyms and version >= 1 else [],
            "config_type": _CONFIG_TYPES[key.type],
            "documentation": key.doc if documentation else None,
        }

    def _broker_synonyms(self, key: TopicConfigKey) -> list[tuple[int, str, str | None]]:
        """Kafka's ConfigHelper.configSynonyms: each level in turn, each synonym at that level, then
        everything before the first synonym's own name dropped."""
        if not key.synonyms:
            return []
        default, override = self._broker_levels()
        originals = self.services.config.originals
        static_defaults = {s.name: format_topic_value(s.name, s.default) for s in key.synonyms
                           if s.default is not None}
        found: list[tuple[int, str, str | None]] = []
        for source, values in ((DYNAMIC_BROKER_CONFIG, override), (DYNAMIC_DEFAULT_BROKER_CONFIG, default),
                               (STATIC_BROKER_CONFIG, originals), (DEFAULT_CONFIG, static_defaults)):
            found += [(source, s.name, str(values[s.name])) for s in key.synonyms if s.name in values]
        first = key.synonyms[0].name
        while found and found[0][1] != first:
            found.pop(0)
        return found
