"""GROUP config resources (KIP-848, KIP-932): the configs a single group may set over the broker's.

Kafka 4 lets an admin give one group its own session timeout, heartbeat interval and, for share
groups, record lock duration and start position (``kafka-configs.sh --entity-type groups``, or
DescribeConfigs / AlterConfigs / IncrementalAlterConfigs on ConfigResource type GROUP, 32 on the
wire). They are kept where Kafka's ZooKeeper layout would keep them, store entity
``groups/<group id>`` (the id sanitized as Kafka's Sanitizer does), so every broker's change
watch sees a change made through any of them.

A group's effective value of a key is its own when set, else the broker's setting the key falls
back to (``consumer.session.timeout.ms`` -> ``group.consumer.session.timeout.ms``; Kafka's
GroupCoordinatorConfig.extractGroupConfigMap), else Kafka's default. A value is checked as
Kafka's GroupConfig.validate checks it: known names only, the key's type, and for the timeouts the
broker's ``group.*.min/max.*`` bounds, with a session timeout above the heartbeat interval.

The groups module owns this resource type (one owner): consumer groups read
:meth:`GroupConfigs.value` at each heartbeat, the shares module at each join, fetch and lock.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from kafkapy.configs.module import (
    CONFIG_TYPES,
    DEFAULT_CONFIG,
    GROUP_CONFIG,
    GROUP_RESOURCE,
    ConfigResourceOwner,
)
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.offset_reset import LATEST, parse_share_offset_reset, refusal
from kafkapy.server.config import ConfigError, ConfigKey
from kafkapy.server.operations import ResourceType
from kafkapy.store.base import Watch, desanitize, sanitize
from kafkapy.store.onloop import Reloader
from kafkapy.validators import AtLeast, Between

if TYPE_CHECKING:
    from kafkapy.server.services import BrokerServices

__all__ = ["GROUPS", "GROUP_BOUND_KEYS", "GROUP_KEYS", "GroupConfigKey", "GroupConfigs",
           "check_broker_group_settings", "offset_reset_problem", "timeout_overrides"]

GROUPS = "groups"  # the store's entity type: ZooKeeper /config/groups/<group id>
# Kafka's words for an empty group name: ConfigHelper's (DescribeConfigs), the controller's
# ControllerConfigurationValidator (the alters)
EMPTY_GROUP_NAME = ("Group name must not be empty", "Default group resources are not allowed.")
READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"


@attrs.frozen
class GroupConfigKey:
    """One key of Kafka's GroupConfig: its type, the broker setting it falls back to, Kafka's
    default (when the broker has no such setting), its ConfigDef floor or choices, and the broker
    settings bounding it (GroupConfig.validateValues)."""

    name: str
    type: str  # "int" or "string"
    broker_key: str | None
    default: Any
    doc: str
    at_least: int | None = None
    choices: tuple[str, ...] = ()
    low_key: str | None = None
    high_key: str | None = None
    #: A string key's own check beyond ``choices``: (name, value) -> Kafka's message, or None.
    check: Callable[[str, str], str | None] | None = None


def _bounds(prefix: str, what: str) -> tuple[str, str]:
    return f"group.{prefix}.min.{what}", f"group.{prefix}.max.{what}"


def offset_reset_problem(name: str, value: str) -> str | None:
    """Kafka's message for a share.auto.offset.reset it refuses (kafkapy.groups.offset_reset)."""
    try:
        parse_share_offset_reset(value)
    except ValueError:
        return refusal(name, value)
    return None


GROUP_KEYS: tuple[GroupConfigKey, ...] = (
    GroupConfigKey("consumer.session.timeout.ms", "int", "group.consumer.session.timeout.ms", 45_000,
                   "The timeout to detect client failures when using the consumer group protocol.", 1,
                   (), *_bounds("consumer", "session.timeout.ms")),
    GroupConfigKey("consumer.heartbeat.interval.ms", "int", "group.consumer.heartbeat.interval.ms", 5_000,
                   "The heartbeat interval given to the members of a consumer group.", 1,
                   (), *_bounds("consumer", "heartbeat.interval.ms")),
    GroupConfigKey("share.session.timeout.ms", "int", "group.share.session.timeout.ms", 45_000,
                   "The timeout to detect client failures when using the share group protocol.", 1,
                   (), *_bounds("share", "session.timeout.ms")),
    GroupConfigKey("share.heartbeat.interval.ms", "int", "group.share.heartbeat.interval.ms", 5_000,
                   "The heartbeat interval given to the members of a share group.", 1,
                   (), *_bounds("share", "heartbeat.interval.ms")),
    GroupConfigKey("share.record.lock.duration.ms", "int", "group.share.record.lock.duration.ms", 30_000,
                   "The record acquisition lock duration in milliseconds for share groups.", 1000,
                   (), *_bounds("share", "record.lock.duration.ms")),
    # kafkapy's broker-wide share.auto.offset.reset (its only setting before group configs) is the fallback.
    GroupConfigKey("share.auto.offset.reset", "string", "share.auto.offset.reset", LATEST,
                   "The strategy to initialize the share-partition start offset: latest, earliest, or "
                   "by_duration:<ISO-8601 duration> (the first record at or after now less the duration).",
                   check=offset_reset_problem),
    # Kafka 4.1's; no broker-wide key (GroupConfig.SHARE_ISOLATION_LEVEL_DEFAULT), read at each
    # share fetch (kafkapy.shares.isolation).
    GroupConfigKey("share.isolation.level", "string", None, READ_UNCOMMITTED,
                   "Controls how to read records written transactionally. If set to read_committed, the "
                   "share group only delivers transactional records which have been committed.",
                   None, (READ_COMMITTED, READ_UNCOMMITTED)),
)
_BY_NAME = {key.name: key for key in GROUP_KEYS}
_SESSION_OVER_HEARTBEAT = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                           ("share.session.timeout.ms", "share.heartbeat.interval.ms"))

#: The broker settings that bound a group's values: Kafka's names and defaults
#: (GroupCoordinatorConfig, ShareGroupConfig).
GROUP_BOUND_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("group.consumer.min.session.timeout.ms", "int", 45_000,
              "The smallest consumer.session.timeout.ms a consumer group may set (Kafka's default).",
              AtLeast(1)),
    ConfigKey("group.consumer.max.session.timeout.ms", "int", 60_000,
              "The largest consumer.session.timeout.ms a consumer group may set (Kafka's default).",
              AtLeast(1)),
    ConfigKey("group.consumer.min.heartbeat.interval.ms", "int", 5_000,
              "The smallest consumer.heartbeat.interval.ms a consumer group may set (Kafka's default).",
              AtLeast(1)),
    ConfigKey("group.consumer.max.heartbeat.interval.ms", "int", 15_000,
              "The largest consumer.heartbeat.interval.ms a consumer group may set (Kafka's default).",
              AtLeast(1)),
    ConfigKey("group.share.min.session.timeout.ms", "int", 45_000,
              "The smallest share.session.timeout.ms a share group may set (Kafka's default).",
              AtLeast(1)),
    ConfigKey("group.share.max.session.timeout.ms", "int", 60_000,
              "The largest share.session.timeout.ms a share group may set (Kafka's default).",
              AtLeast(1)),
    ConfigKey("group.share.min.heartbeat.interval.ms", "int", 5_000,
              "The smallest share.heartbeat.interval.ms a share group may set (Kafka's default).",
              AtLeast(1)),
    ConfigKey("group.share.max.heartbeat.interval.ms", "int", 15_000,
              "The largest share.heartbeat.interval.ms a share group may set (Kafka's default).",
              AtLeast(1)),
    ConfigKey("group.share.min.record.lock.duration.ms", "int", 15_000,
              "The smallest share.record.lock.duration.ms a share group may set (Kafka's default, "
              "1000 to 30000).", Between(1_000, 30_000)),
    ConfigKey("group.share.max.record.lock.duration.ms", "int", 60_000,
              "The largest share.record.lock.duration.ms a share group may set (Kafka's default, "
              "30000 to 3600000).", Between(30_000, 3_600_000)),
)
_BOUND_DEFAULTS = {key.name: key.default for key in GROUP_BOUND_KEYS}

_RELATIONS: dict[str, tuple[Callable[[Any, Any], bool], str]] = {
    ">=": (operator.ge, "greater than or equal to"), "<=": (operator.le, "less than or equal to"),
    "<": (operator.lt, "less than")}


def _settings_rules(kind: str) -> tuple[tuple[str, str, str], ...]:
    g = f"group.{kind}"
    return (
        (f"{g}.max.heartbeat.interval.ms", ">=", f"{g}.min.heartbeat.interval.ms"),
        (f"{g}.heartbeat.interval.ms", ">=", f"{g}.min.heartbeat.interval.ms"),
        (f"{g}.heartbeat.interval.ms", "<=", f"{g}.max.heartbeat.interval.ms"),
        (f"{g}.max.session.timeout.ms", ">=", f"{g}.min.session.timeout.ms"),
        (f"{g}.session.timeout.ms", ">=", f"{g}.min.session.timeout.ms"),
        (f"{g}.session.timeout.ms", "<=", f"{g}.max.session.timeout.ms"),
        (f"{g}.heartbeat.interval.ms", "<", f"{g}.session.timeout.ms"),
    )


#: What a broker's group settings must satisfy to start, in Kafka's order (GroupCoordinatorConfig's
#: and ShareGroupConfig's requires): (key, relation, other key).
BROKER_SETTINGS_RULES: tuple[tuple[str, str, str], ...] = (
    *_settings_rules("consumer"),
    *_settings_rules("share"),
    ("group.share.record.lock.duration.ms", ">=", "group.share.min.record.lock.duration.ms"),
    ("group.share.max.record.lock.duration.ms", ">=", "group.share.record.lock.duration.ms"),
    ("group.share.max.share.sessions", ">=", "group.share.max.size"),
)


def check_broker_group_settings(config: Mapping[str, Any]) -> None:
    """ConfigError, with Kafka's message, for the first rule the broker's settings break; a rule
    whose keys are not all there (their module is not loaded) is not checked."""
    for key, relation, other in BROKER_SETTINGS_RULES:
        left, right = config.get(key), config.get(other)
        if left is None or right is None:
            continue
        holds, words = _RELATIONS[relation]
        if not holds(left, right):
            raise ConfigError(f"{key} must be {words} {other}")


def _invalid(message: str) -> KafkaApiError:
    return KafkaApiError(ErrorCode.INVALID_CONFIG, message)


def _parse(key: GroupConfigKey, raw: str) -> Any:
    """A stored or requested string as the key's value; INVALID_CONFIG in ConfigDef's wording."""
    text = raw.strip()
    if key.type == "int":
        try:
            number = int(text)
        except ValueError:
            raise _invalid(f"Invalid value {raw} for configuration {key.name}: "
                           "Not a number of type INT") from None
        if not -(2**31) <= number < 2**31:
            raise _invalid(f"Invalid value {raw} for configuration {key.name}: Not a number of type INT")
        if key.at_least is not None and number < key.at_least:
            raise _invalid(f"Invalid value {number} for configuration {key.name}: "
                           f"Value must be at least {key.at_least}")
        return number
    if key.choices and text not in key.choices:
        raise _invalid(f"Invalid value {raw} for configuration {key.name}: "
                       f"String must be one of: {', '.join(key.choices)}")
    problem = key.check(key.name, text) if key.check is not None else None
    if problem is not None:
        raise _invalid(problem)
    return text



class GroupConfigs:
    """The GROUP config resources of a cluster, as this broker last read them from the store."""

    def __init__(self, services: BrokerServices) -> None:
        self.services = services
        self.stored: dict[str, dict[str, str]] = {}  # group id -> its set keys, as stored
        self._watch: Watch | None = None
        self._reloads = Reloader(services.loop, self._reload, "group configs")

    def owner(self) -> ConfigResourceOwner:
        """What the configs module asks of GROUP resources."""
        return ConfigResourceOwner(GROUP_RESOURCE, GROUP_CONFIG, self._read, self.check, self._write,
                                   acl_resource=ResourceType.GROUP, describe=self.describe,
                                   names=self._configured, empty_name=EMPTY_GROUP_NAME)

    def _configured(self) -> list[str]:
        return [group_id for group_id, config in self.stored.items() if config]

    # --- effective values -----------------------------------------------------------------------

    def broker_value(self, key: GroupConfigKey) -> Any:
        """What a group that does not set ``key`` gets: the broker's setting, else Kafka's default."""
        value = self.services.config.get(key.broker_key) if key.broker_key is not None else None
        return key.default if value is None else value

    def _bound(self, name: str | None) -> int | None:
        if name is None:
            return None
        value = self.services.config.get(name)
        return int(_BOUND_DEFAULTS[name] if value is None else value)

    def value(self, group_id: str, name: str) -> Any:
        """The group's effective value of ``name`` (one of GROUP_KEYS)."""
        key = _BY_NAME[name]
        raw = self.stored.get(group_id, {}).get(name)
        if raw is not None:
            try:
                return _parse(key, raw)
            except KafkaApiError:  # written by hand, unchecked: the broker's value stands
                self.services.log.warning("group %r: ignoring stored %s=%r", group_id, name, raw)
        return self.broker_value(key)

    def overrides(self, group_id: str) -> Mapping[str, str]:
        return self.stored.get(group_id, {})

    # --- the resource owner's parts ---------------------------------------------------------------

    def check(self, group_id: str, config: Mapping[str, str]) -> None:
        """Kafka's GroupConfig.validate of the would-be config (an empty one removes it)."""
        unknown = sorted(set(config) - set(_BY_NAME))
        if unknown:
            raise _invalid(f"Unknown group config name: {unknown[0]}")
        values = {key.name: _parse(key, config[key.name]) if key.name in config else self.broker_value(key)
                  for key in GROUP_KEYS}
        for key in GROUP_KEYS:
            if key.name not in config:
                continue
            low, high = self._bound(key.low_key), self._bound(key.high_key)
            if low is not None and values[key.name] < low:
                raise _invalid(f"{key.name} must be greater than or equal to {key.low_key}")
            if high is not None and values[key.name] > high:
                raise _invalid(f"{key.name} must be less than or equal to {key.high_key}")
        for session, heartbeat in _SESSION_OVER_HEARTBEAT:
            if (session in config or heartbeat in config) and values[session] <= values[heartbeat]:
                raise _invalid(f"{session} must be greater than {heartbeat}")

    def describe(self, group_id: str, stored: Mapping[str, str], synonyms: bool,
                 documentation: bool) -> list[dict[str, Any]]:
        """Every key, as Kafka's ConfigHelper describes a group: a set one with source
        GROUP_CONFIG, any other with the broker's value and source DEFAULT_CONFIG."""
        entries = []
        for key in sorted(GROUP_KEYS, key=lambda k: k.name):
            broker = str(self.broker_value(key))
            levels = [(GROUP_CONFIG, stored[key.name])] if key.name in stored else []
            levels.append((DEFAULT_CONFIG, broker))
            source, value = levels[0]
            entries.append({
                "name": key.name, "value": value, "read_only": False, "config_source": source,
                "is_default": source == DEFAULT_CONFIG, "is_sensitive": False,
                "synonyms": [{"name": key.name, "value": v, "source": s} for s, v in levels]
                if synonyms else [],
                "config_type": CONFIG_TYPES[key.type], "documentation": key.doc if documentation else None})
        return entries

    def _path(self, group_id: str) -> str:
        return f"{GROUPS}/{sanitize(group_id)}"

    async def _read(self, group_id: str) -> dict[str, str]:
        return await asyncio.to_thread(self.services.store.entity_config, self._path(group_id))

    async def _write(self, group_id: str, config: Mapping[str, str]) -> None:
        await asyncio.to_thread(self.services.store.set_entity_config, self._path(group_id), config)
        self._take(group_id, config)  # at once, so the client that altered it sees it when answered

    # --- following the store ------------------------------------------------------------------------

    async def start(self) -> None:
        store = self.services.store
        self._watch = await asyncio.to_thread(store.watch_entity_configs, self._entity_changed)
        await self._reload()

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._reloads.close()

    def _entity_changed(self, path: str) -> None:
        """On a store thread: some entity's config changed (perhaps through another broker)."""
        if path.startswith(GROUPS + "/"):
            self._reloads.request()

    async def _reload(self) -> None:
        stored = await asyncio.to_thread(self.services.store.entity_configs, GROUPS)
        self.stored = {desanitize(path[len(GROUPS) + 1:]): dict(config) for path, config in stored.items()}

    def _take(self, group_id: str, config: Mapping[str, str]) -> None:
        if config:
            self.stored[group_id] = dict(config)
        else:
            self.stored.pop(group_id, None)


def timeout_overrides(configs: GroupConfigs, kind: str) -> Callable[[str], tuple[int, int] | None]:
    """(session timeout, heartbeat interval) of a group (``kind`` "consumer" or "share") that has
    a config, else None (the broker's stand)."""
    def lookup(group_id: str) -> tuple[int, int] | None:
        if not configs.stored.get(group_id):
            return None
        return (configs.value(group_id, f"{kind}.session.timeout.ms"),
                configs.value(group_id, f"{kind}.heartbeat.interval.ms"))
    return lookup
