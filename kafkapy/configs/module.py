"""The configs module: dynamic broker configs and topic configs over the wire (DescribeConfigs 32,
AlterConfigs 33, IncrementalAlterConfigs 44) for resources of type BROKER and TOPIC, as Kafka keeps
them on ZooKeeper, and the list of config resources (ListConfigResources 74). TOPIC resources, and
the ``topic-configs`` capability, are configs/topics.py's.

Theory of operation. A broker's effective value of a setting is, in Kafka's order of precedence:
this broker's dynamic override (store entity ``brokers/<id>``, source DYNAMIC_BROKER_CONFIG), the
cluster-wide dynamic default (``brokers/<default>``, DYNAMIC_DEFAULT_BROKER_CONFIG), the static
setting (server.properties or overrides, STATIC_BROKER_CONFIG), then kafkapy's default
(DEFAULT_CONFIG). Resource name "" addresses the cluster default, a broker id that broker's
overrides; as in Kafka, only the broker that receives the request may be named.

Other modules own the settings: each registers the keys it can change at run time with
:meth:`ConfigsModule.register`, a validator that sees the would-be effective settings (so a
combination can be refused, such as max.connections.per.ip=0 without overrides) and a callback
that applies them. An alter validates first, then writes the store; the store's change
notification reaches every broker's watch (this one included), which recomputes its effective
settings and calls the owners. So a change applies cluster-wide without a restart, and a restarted
broker reads the stored values at start.

A module may also own a whole resource type (Kafka's CLIENT_METRICS subscriptions are the
telemetry module's, GROUP configs the groups module's): it registers a
:class:`ConfigResourceOwner` with :meth:`ConfigsModule.register_resource`, and the three APIs
hand it that type's resources: it reads, checks, stores (and may describe) their configs; the
operations, authorization (on the cluster, or on the named resource as the owner says) and
answers stay here.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from kafkapy.configs.broker_log import DYNAMIC_LOG_KEYS, validate_log_settings
from kafkapy.configs.broker_loggers import alter_loggers, check_logger_ops, logger_entries
from kafkapy.configs.topics import (
    TOPIC,
    TOPIC_CONFIGS_CAPABILITY,
    LogConfigCallback,
    TopicConfigs,
    topic_config_error,
)
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.topic_config import TOPIC_CONFIGS, InvalidTopicConfig, LogConfig
from kafkapy.protocol import Request, fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import CLUSTER_RESOURCE
from kafkapy.server.config import CORE_KEYS, INERT_KEYS, LISTENER_PREFIX, ConfigError, ConfigKey
from kafkapy.server.kafka_keys import (
    CLUSTER_WIDE,
    KAFKA_INTERNAL_KEYS,
    LISTENER_ONLY_KEYS,
    PER_BROKER,
    UPDATE_MODES,
)
from kafkapy.server.modules import ApiHandler, Module, RequestContext
from kafkapy.server.operations import ResourceType
from kafkapy.server.policies import AlterConfigRequest, PolicyViolation, load_policy
from kafkapy.store.base import DEFAULT_ENTITY, Watch
from kafkapy.store.onloop import Reloader
from kafkapy.validators import Validator, java_double

if TYPE_CHECKING:
    from kafkapy.server.services import BrokerServices

__all__ = ["CLIENT_METRICS_CONFIG", "CLIENT_METRICS_RESOURCE", "CONFIG_TYPES", "DEFAULT_CONFIG",
           "DYNAMIC_CONFIGS", "GROUP_CONFIG", "GROUP_RESOURCE", "TOPIC_CONFIGS_CAPABILITY",
           "ConfigResourceOwner", "ConfigsModule", "DynamicConfigs", "apply_operations", "effective_settings"]

log = logging.getLogger(__name__)

DYNAMIC_CONFIGS = "dynamic-configs"  # what ConfigsModule provides: owners of dynamic keys register


BROKER = 4  # Kafka's ConfigResource.Type
BROKER_LOGGER = 8
CLIENT_METRICS_RESOURCE = 16  # Kafka 3.7+: KIP-714 subscriptions
GROUP_RESOURCE = 32  # Kafka 4.0+: KIP-848 / KIP-932 group configs
RESOURCE_TYPE_NAMES = {
    0: "UNKNOWN",
    2: "TOPIC",
    4: "BROKER",
    8: "BROKER_LOGGER",
    16: "CLIENT_METRICS",
    32: "GROUP",
}
# What ListConfigResources v1 lists, in the order Kafka's answer lists them (KIP-1142)
LISTED_RESOURCE_TYPES = (GROUP_RESOURCE, CLIENT_METRICS_RESOURCE, BROKER_LOGGER, BROKER, TOPIC)
# Kafka's DescribeConfigsResponse.ConfigSource
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 4, 5
CLIENT_METRICS_CONFIG, GROUP_CONFIG = 7, 8
# Kafka's DescribeConfigsResponse.ConfigType, by kafkapy's ConfigKey.type
CONFIG_TYPES = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs operations
_INT_RANGE = {"short": (-32768, 32767), "int": (-2147483648, 2147483647),
              "long": (-9223372036854775808, 9223372036854775807)}


@attrs.frozen
class DynamicConfigs:
    """What a module lets change at run time: its keys (by their plain names), which of them may
    also be set per listener (``listener.name.<l>.<key>``), a validator of the would-be effective
    settings (raises ConfigError; runs in a thread, so it may resolve host names) and the callback
    that applies the effective settings (on the event loop)."""

    keys: frozenset[str]
    listener_keys: frozenset[str]
    validate: Callable[[Mapping[str, Any]], None]
    apply: Callable[[Mapping[str, Any]], Awaitable[None]]


@attrs.frozen
class ConfigResourceOwner:
    """A module that keeps the configs of one resource type: what the config APIs ask of it.
    ``read`` gives a resource's stored config (empty when there is none), ``check`` raises
    KafkaApiError with Kafka's code for a config Kafka would refuse, ``write`` stores one (an
    empty config removes the resource); ``list_keys`` are the keys APPEND and SUBTRACT apply to.
    ``acl_resource`` is what the principal needs DESCRIBE_CONFIGS / ALTER_CONFIGS on: the cluster
    (CLIENT_METRICS) or the named resource itself ("GROUP": GROUP_AUTHORIZATION_FAILED when not).
    ``describe`` gives the DescribeConfigs entries of (name, stored config, synonyms?,
    documentation?) when the owner lists more than what is stored (defaults, with their sources)."""

    resource_type: int
    source: int  # the DescribeConfigs ConfigSource of its entries
    read: Callable[[str], Awaitable[dict[str, str]]]
    check: Callable[[str, Mapping[str, str]], None]
    write: Callable[[str, Mapping[str, str]], Awaitable[None]]
    list_keys: frozenset[str] = frozenset()
    acl_resource: ResourceType = ResourceType.CLUSTER
    describe: Callable[[str, Mapping[str, str], bool, bool], list[dict[str, Any]]] | None = None
    names: Callable[[], Iterable[str]] = tuple  # the resources that hold a config, for ListConfigResources
    # Whether DescribeConfigs' configuration_keys narrow the entries (Kafka's CLIENT_METRICS
    # description lists every stored key whatever was asked).
    filters_keys: bool = True
    # Kafka's INVALID_REQUEST message for an empty resource name: (DescribeConfigs', the alters');
    # None: "<type> resource name must not be empty" for both
    empty_name: tuple[str, str] | None = None


def base_name(name: str) -> str:
    """``listener.name.<l>.<key>`` -> ``<key>``; any other name as is."""
    if name.startswith(LISTENER_PREFIX):
        parts = name.split(".", 3)
        if len(parts) == 4 and parts[2]:
            return parts[3]
    return name


def effective_settings(
    static: Mapping[str, Any], default: Mapping[str, Any], override: Mapping[str, Any]
) -> dict[str, Any]:
    """Kafka's precedence: the broker's override, then the cluster default, then the static value."""
    return {**static, **default, **override}


def _format(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def check_entries(entries: Iterable[tuple[str | None, str | None]]) -> None:
    """Kafka's first checks of one resource of an alter (ConfigAdminManager.preprocess), whatever
    its type: no key twice, and no null value (but for a DELETE), every null one named."""
    names = [name for name, _ in entries]
    if len(set(names)) != len(names):
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [name or "" for name, value in entries if value is None]
    if nulls:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")


def apply_operations(
    current: Mapping[str, str], ops: list[Mapping[str, Any]], is_list: Callable[[str], bool],
    default_of: Callable[[str], str | None],
) -> dict[str, str]:
    """IncrementalAlterConfigs' SET/DELETE/APPEND/SUBTRACT on a stored config, as Kafka applies them
    (APPEND/SUBTRACT only on LIST keys, starting from ``default_of`` when the key is not set; on
    another key INVALID_CONFIG, as both Kafka's ZooKeeper-mode broker and its controller refuse it)."""
    check_entries([(op.get("name"), op.get("value") if op.get("config_operation") != DELETE else "")
                   for op in ops])
    config = dict(current)
    for op in ops:
        name, operation, value = op.get("name") or "", op.get("config_operation"), op.get("value")
        if operation == SET:
            config[name] = value or ""  # never None: check_entries refused that
        elif operation == DELETE:
            config.pop(name, None)
        elif operation in (APPEND, SUBTRACT):
            if not is_list(name):
                verb = "append" if operation == APPEND else "subtract"
                raise KafkaApiError(ErrorCode.INVALID_CONFIG,
                                    f"Config value {verb} is not allowed for config key: {name}")
            old = config.get(name)
            current_value = old if old is not None else (default_of(name) or "")
            items = [v for v in current_value.split(",") if v.strip()]
            given = [v.strip() for v in (value or "").split(",") if v.strip()]
            if operation == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            config[name] = ",".join(items)
        else:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Unknown alter config operation: {operation}")
    return config


_TOPIC_KEYS = {key.name: key for key in TOPIC_CONFIGS}
_INERT_DYNAMIC = frozenset(name for name, mode in UPDATE_MODES.items()
                           if mode in (PER_BROKER, CLUSTER_WIDE) and name not in LISTENER_ONLY_KEYS)
# Kafka's DynamicListenerConfig keys may also be set per listener (listener.name.<l>.<key>)
_INERT_PER_LISTENER = frozenset(name for name, mode in UPDATE_MODES.items() if mode == PER_BROKER)


async def _nothing_to_apply(settings: Mapping[str, Any]) -> None:
    """The inert keys' apply: kafkapy has nothing they change."""
# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the broker settings that are one setting in
# different units (any of them names the whole group, in this order)
_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
_BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {name: group for group in _SYNONYM_GROUPS for name in group}
_BROKER_SYNONYMS["log.flush.interval.ms"] = ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")


class ConfigsModule(Module):
    name = "configs"
    provides = (DYNAMIC_CONFIGS, TOPIC_CONFIGS_CAPABILITY)
    config_keys = (
        ConfigKey("alter.config.policy.class.name", "class", None,
                  "Kafka's AlterConfigPolicy: a class (pkg.mod:Class) whose validate(request) may refuse a "
                  "TOPIC or BROKER config change, answered POLICY_VIOLATION (kafkapy.server.policies)."),
    )

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self._owners: list[DynamicConfigs] = []
        self._resources: dict[int, ConfigResourceOwner] = {}
        self._keys: dict[str, ConfigKey] = {}
        self.default: dict[str, str] = {}  # brokers/<default>, as stored
        self.override: dict[str, str] = {}  # brokers/<this broker's id>, as stored
        self._watch: Watch | None = None
        self._alter_lock = asyncio.Lock()
        self._reloads = Reloader(services.loop, self._reload, "dynamic broker configs")
        self.topics = TopicConfigs(services, lambda: (self.default, self.override))
        policy_key = "alter.config.policy.class.name"
        self._policy = load_policy(policy_key, services.config[policy_key] or "", services.config.values)

    def apis(self) -> Mapping[int, ApiHandler]:
        return {
            ApiKey.DESCRIBE_CONFIGS: ApiHandler(VersionRange(0, 4), self.describe_configs),
            ApiKey.ALTER_CONFIGS: ApiHandler(VersionRange(0, 2), self.alter_configs),
            ApiKey.INCREMENTAL_ALTER_CONFIGS: ApiHandler(VersionRange(0, 1), self.incremental_alter_configs),
            ApiKey.LIST_CONFIG_RESOURCES: ApiHandler(VersionRange(0, 1), self.list_config_resources),
        }

    # --- the topic-configs capability -----------------------------------------------------------

    def log_config(self, topic: str) -> LogConfig:
        """Kafka's defaults merged with the broker's log.* settings and the topic's overrides."""
        return self.topics.log_config(topic)

    def broker_settings(self) -> dict[str, Any]:
        """The static settings with the dynamic ones in force on top (BrokerSettings)."""
        return self.topics.broker_settings()

    def watch_log_configs(self, callback: LogConfigCallback) -> Callable[[], None]:
        """``callback(topic, config)`` on the loop whenever a topic's config changes; returns the
        function that removes it."""
        return self.topics.watch(callback)

    # --- registration and lifecycle -----------------------------------------------------------

    async def register(self, owner: DynamicConfigs) -> None:
        """Add a module's dynamic keys; its ``apply`` runs now with the current effective settings
        (stored values included), then after every change."""
        self._owners.append(owner)
        await owner.apply(self.settings_for(owner, self.default, self.override))

    def register_resource(self, owner: ConfigResourceOwner) -> None:
        """Hand the configs of ``owner.resource_type`` to ``owner`` from now on."""
        self._resources[owner.resource_type] = owner

    def dynamic(self, name: str) -> DynamicConfigs | None:
        """The owner of a dynamic key (plain or listener-prefixed), or None if it is not dynamic."""
        base = base_name(name)
        listener = base != name
        for owner in self._owners:
            if (base in owner.listener_keys) if listener else (name in owner.keys):
                return owner
        return None

    def settings_for(
        self, owner: DynamicConfigs, default: Mapping[str, str], override: Mapping[str, str]
    ) -> dict[str, Any]:
        """The effective settings an owner sees: static values with the dynamic ones (converted to
        the key's type) on top, for the owner's keys only."""

        def converted(stored: Mapping[str, str]) -> dict[str, Any]:
            return {k: self._convert(k, v) for k, v in stored.items() if self.dynamic(k) is owner}

        return effective_settings(self.services.config.values, converted(default), converted(override))

    async def start(self) -> None:
        self._keys = {k.name: k for k in (*CORE_KEYS, *INERT_KEYS)}
        self._keys.update({k.name: k for k in self.services.module_config_keys()})
        self._watch = await asyncio.to_thread(self.services.store.watch_entity_configs, self._entity_changed)
        self.default, self.override = await asyncio.to_thread(self._read)
        await self.topics.start()
        # Kafka's DynamicLogConfig: the log.* defaults of topic configs are this module's own.
        await self.register(DynamicConfigs(DYNAMIC_LOG_KEYS, frozenset(), validate_log_settings,
                                           self._log_settings_changed))
        # Kafka's dynamic keys that kafkapy takes without effect: stored and described as Kafka
        # would, typed (by _validate), applied to nothing.
        await self.register(DynamicConfigs(_INERT_DYNAMIC, _INERT_PER_LISTENER, lambda settings: None,
                                           _nothing_to_apply))

    async def _log_settings_changed(self, settings: Mapping[str, Any]) -> None:
        """The logs whose LogConfig the broker settings moved get it now (overrides still win)."""
        self.topics.refresh_logs()

    async def stop(self) -> None:
        self.topics.stop()
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._reloads.close()

    def _path(self, broker_id: int | None) -> str:
        return f"brokers/{DEFAULT_ENTITY if broker_id is None else broker_id}"

    def _read(self) -> tuple[dict[str, str], dict[str, str]]:
        store = self.services.store
        return store.entity_config(self._path(None)), store.entity_config(self._path(self.services.broker_id))

    def _entity_changed(self, path: str) -> None:
        self.topics.entity_changed(path)
        if path in (self._path(None), self._path(self.services.broker_id)):  # on a store thread
            self._reloads.request()

    async def _reload(self) -> None:
        default, override = await asyncio.to_thread(self._read)
        changed = (default, override) != (self.default, self.override)
        self.default, self.override = default, override
        if changed:
            self.topics.broker_settings_changed()
            for owner in self._owners:
                try:
                    await owner.apply(self.settings_for(owner, default, override))
                except Exception:  # validated before it was stored; a bad hand edit is logged
                    log.exception("could not apply dynamic broker configs %s / %s", default, override)

    # --- values and validation ----------------------------------------------------------------

    def _key(self, name: str) -> ConfigKey | None:
        return self._keys.get(base_name(name))

    def _convert(self, name: str, raw: str) -> Any:
        """A stored string as the key's type; KafkaApiError (INVALID_CONFIG) in Kafka's wording."""
        key = self._key(name)
        kind = key.type if key is not None else "string"
        text = raw.strip()
        if kind in _INT_RANGE:
            low, high = _INT_RANGE[kind]
            try:
                number = int(text)
            except ValueError:
                raise KafkaApiError(
                    ErrorCode.INVALID_CONFIG,
                    f"Invalid value {raw} for configuration {name}: Not a number of type {kind.upper()}",
                ) from None
            if not low <= number <= high:
                raise KafkaApiError(
                    ErrorCode.INVALID_CONFIG,
                    f"Invalid value {raw} for configuration {name}: Not a number of type {kind.upper()}",
                )
            return number
        return text

    def _check_value(self, name: str, raw: str) -> None:
        """An altered value, typed, then held to its key's validator: Kafka's (kafkapy.validators)
        in Kafka's words, naming the key without its listener prefix as Kafka's
        validateConfigTypes does; KafkaApiError (INVALID_CONFIG) if refused."""
        value = self._convert(name, raw)
        key = self._key(name)
        if key is None or key.validator is None:
            return
        if key.type == "list":
            value = [part.strip() for part in raw.split(",") if part.strip()]
        elif key.type == "double":
            try:
                value = float(raw.strip())
            except ValueError:
                raise KafkaApiError(ErrorCode.INVALID_CONFIG, f"Invalid value {raw} for configuration "
                                    f"{name}: Not a number of type DOUBLE") from None
        if isinstance(key.validator, Validator):
            refused = key.validator.refusal(base_name(name), value)
        else:  # a check of kafkapy's own
            problem = key.validator(value)
            refused = f"Invalid value {raw} for configuration {name}: Value {problem}" if problem else None
        if refused:
            raise KafkaApiError(ErrorCode.INVALID_CONFIG, refused)

    def _check_names(self, names: Iterable[str], broker_id: int | None) -> None:
        """Kafka's checks on the keys of an alter (DynamicBrokerConfig.validateConfigs, in its
        order): each must be dynamic, the SSL stores only per listener, and a per-broker key
        only on a broker, not the cluster default."""
        names = list(names)
        fixed = sorted(n for n in names if self.dynamic(n) is None and n not in LISTENER_ONLY_KEYS)
        if fixed:
            known = [n for n in fixed if self._key(n) is not None and base_name(n) == n]
            unknown = [n for n in fixed if n not in known]
            parts = []
            if known:
                # Kafka's DynamicBrokerConfig prints the names as a Scala Set
                parts.append(f"Cannot update these configs dynamically: Set({', '.join(known)})")
            if unknown:
                parts.append(f"Unknown or not dynamic in kafkapy: {', '.join(unknown)}")
            raise KafkaApiError(ErrorCode.INVALID_CONFIG, "; ".join(parts))
        unprefixed = sorted(n for n in names if n in LISTENER_ONLY_KEYS)
        if unprefixed:
            raise KafkaApiError(ErrorCode.INVALID_CONFIG, "These security configs can be dynamically updated "
                                f"only per-listener using the listener prefix: Set({', '.join(unprefixed)})")
        per_broker = sorted(n for n in names if UPDATE_MODES.get(base_name(n)) == PER_BROKER)
        if broker_id is None and per_broker:
            raise KafkaApiError(ErrorCode.INVALID_CONFIG, "Cannot update these configs at default cluster "
                                f"level, broker id must be specified: Set({', '.join(per_broker)})")

    async def _validate(self, broker_id: int | None, config: Mapping[str, str]) -> None:
        """Type-check every value, then let each owner judge the effective settings it would see."""
        for name, value in config.items():
            self._check_value(name, value)
        default = dict(config) if broker_id is None else self.default
        override = self.override if broker_id is None else dict(config)
        for owner in self._owners:
            try:
                await asyncio.to_thread(owner.validate, self.settings_for(owner, default, override))
            except ConfigError as exc:
                raise KafkaApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    # --- resources and authorization ----------------------------------------------------------

    def _broker_id(self, resource_type: int, name: str, *, alter: bool = False) -> int | None:
        """None for the cluster default (""), else this broker's id; KafkaApiError otherwise, in
        the words of Kafka's ConfigHelper (DescribeConfigs) or, for an alter, of its
        ConfigAdminManager.validateResourceNameIsCurrentNodeId."""
        if resource_type != BROKER:
            kind = RESOURCE_TYPE_NAMES.get(resource_type, str(resource_type))
            raise KafkaApiError(
                ErrorCode.INVALID_REQUEST,
                f"Unsupported resource type: {kind}",
            )
        if not name:
            return None
        try:
            broker_id = int(name)
        except ValueError:
            kind = "Node" if alter else "Broker"
            raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                f"{kind} id must be an integer, but it is: {name}") from None
        if broker_id != self.services.broker_id:
            expected = self.services.broker_id
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, (
                f"Unexpected broker id, expected {expected}, but received {name}" if alter
                else f"Unexpected broker id, expected {expected} or empty string, but received {name}"))
        return broker_id

    def _logger_broker(self, name: str, what: str) -> None:
        """A BROKER_LOGGER resource names this broker (no default resource): KafkaApiError if not.
        ``what`` is the word Kafka's message uses (DescribeConfigs "Broker", an alter "Node")."""
        if not name and what == "Broker":
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        try:
            broker_id = int(name)
        except ValueError:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                f"{what} id must be an integer, but it is: {name}") from None
        if broker_id != self.services.broker_id:
            expected = self.services.broker_id
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, (
                f"Unexpected broker id, expected {expected} but received {name}" if what == "Broker"
                else f"Unexpected node id. Expected {expected}, but received {name}"))

    @staticmethod
    async def _owned(owner: ConfigResourceOwner, name: str, *, alter: bool) -> dict[str, str]:
        if not name:
            if owner.empty_name is not None:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST, owner.empty_name[alter])
            kind = RESOURCE_TYPE_NAMES.get(owner.resource_type, str(owner.resource_type))
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"{kind} resource name must not be empty")
        return await owner.read(name)

    def _topic_authorized(self, ctx: RequestContext, operation: str, topic: str) -> bool:
        conn = ctx.connection
        return self.services.authorizer.authorize(conn.principal, conn.client_address[0], operation,
                                                  "TOPIC", topic)

    def _cluster_allows(self, ctx: RequestContext, operation: str, known: bool | None) -> bool:
        """True, or CLUSTER_AUTHORIZATION_FAILED; asked once a request (``known`` is the answer
        so far, None before the first resource that needs it)."""
        allowed = self._authorized(ctx, operation) if known is None else known
        if not allowed:
            raise KafkaApiError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
        return allowed

    def _owner_allows(self, ctx: RequestContext, owner: ConfigResourceOwner, operation: str, name: str,
                      known: bool | None) -> bool | None:
        """Authorization of an owned resource: on the cluster (the answer so far is ``known``), or
        on the resource itself; returns the cluster answer to carry on."""
        if owner.acl_resource is ResourceType.CLUSTER:
            return self._cluster_allows(ctx, operation, known)
        conn = ctx.connection
        refused = (ErrorCode.GROUP_AUTHORIZATION_FAILED if owner.acl_resource is ResourceType.GROUP
                   else ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if not self.services.authorizer.authorize(conn.principal, conn.client_address[0], operation,
                                                  owner.acl_resource.name, name):
            raise KafkaApiError(refused)
        return known

    def _authorized(self, ctx: RequestContext, operation: str) -> bool:
        conn = ctx.connection
        return self.services.authorizer.authorize(
            conn.principal, conn.client_address[0], operation, "CLUSTER", CLUSTER_RESOURCE
        )

    # --- DescribeConfigs ----------------------------------------------------------------------

    async def describe_configs(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        body = request.body
        synonyms = bool(body.get("include_synonyms"))
        documentation = bool(body.get("include_documentation"))
        authorized = None
        results = []
        for resource in body.get("resources") or []:
            resource_type = resource.get("resource_type")
            name = resource.get("resource_name") or ""
            result: dict[str, Any] = {
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "resource_type": resource_type,
                "resource_name": name,
                "configs": [],
            }
            try:
                if resource_type == TOPIC:
                    if not self._topic_authorized(ctx, "DESCRIBE_CONFIGS", name):
                        raise KafkaApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                            "Topic authorization failed.")
                    keys = resource.get("configuration_keys")
                    try:
                        overrides = await self.topics.existing_overrides(name)
                    except KafkaApiError as exc:  # Kafka describes an unknown topic by its code alone
                        if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                            raise KafkaApiError(exc.code) from None
                        raise
                    entries = self.topics.entries(overrides, synonyms, documentation, ctx.api_version)
                    result["configs"] = [e for e in entries if keys is None or e["name"] in keys]
                    results.append(result)
                    continue
                resource_owner = self._resources.get(resource_type)
                if resource_owner is not None:
                    authorized = self._owner_allows(ctx, resource_owner, "DESCRIBE_CONFIGS", name, authorized)
                    keys = resource.get("configuration_keys")
                    stored = await self._owned(resource_owner, name, alter=False)
                    entries = (resource_owner.describe(name, stored, synonyms and ctx.api_version >= 1,
                                                       documentation)
                               if resource_owner.describe is not None else
                               [_owned_entry(resource_owner, key, value)
                                for key, value in sorted(stored.items())])
                    result["configs"] = [e for e in entries if keys is None or e["name"] in keys
                                         or not resource_owner.filters_keys]
                    results.append(result)
                    continue
                if resource_type == BROKER_LOGGER:
                    authorized = self._cluster_allows(ctx, "DESCRIBE_CONFIGS", authorized)
                    self._logger_broker(name, "Broker")
                    result["configs"] = logger_entries(resource.get("configuration_keys"))
                    results.append(result)
                    continue
                broker_id = self._broker_id(resource_type, name)
                authorized = self._cluster_allows(ctx, "DESCRIBE_CONFIGS", authorized)
                keys = resource.get("configuration_keys")
                entries = self._describe(broker_id, synonyms, documentation, ctx.api_version)
                result["configs"] = [e for e in entries if keys is None or e["name"] in keys]
            except KafkaApiError as exc:
                result.update(error_code=exc.code, error_message=exc.message)
            results.append(result)
        return fit_body(ApiKey.DESCRIBE_CONFIGS, "response", ctx.api_version,
                        {"throttle_time_ms": 0, "results": results})

    def _describe(
        self, broker_id: int | None, synonyms: bool, documentation: bool, version: int
    ) -> list[dict[str, Any]]:
        static = self.services.config.values
        originals = self.services.config.originals
        if broker_id is None:  # Kafka: the default resource lists only the dynamic defaults
            names = sorted(self.default)
        else:
            # Kafka's ConfigHelper lists every config but its internal ones, which only when set
            names = sorted(n for n in set(static) | set(self.default) | set(self.override)
                           if n not in KAFKA_INTERNAL_KEYS or n in originals or n in self.default
                           or n in self.override)

        def static_default(name: str) -> str | None:
            key = self._key(name)
            return _format(key.default) if key is not None else None

        # Each level's value of a name (None: not set there); the default resource shows only its own.
        per_level: list[tuple[int, Callable[[str], str | None]]] = [
            (DYNAMIC_BROKER_CONFIG, self.override.get),
            (DYNAMIC_DEFAULT_BROKER_CONFIG, self.default.get),
            (STATIC_BROKER_CONFIG, lambda n: _format(static.get(n)) if n in originals else None),
            (DEFAULT_CONFIG, static_default),
        ]
        if broker_id is None:
            per_level = per_level[1:2]
        entries = []
        for name in names:
            key = self._key(name)
            # Highest precedence first: Kafka's synonym order, each level in turn, each of the
            # name's synonyms (log.retention.ms: .minutes, .hours) at that level, then those
            # before the first of the name itself dropped (Kafka's ConfigHelper.configSynonyms).
            synonyms_of = _BROKER_SYNONYMS.get(name, (name,))
            levels: list[tuple[int, str, str | None]] = []
            for level, values in per_level:
                levels += [(level, n, values(n)) for n in synonyms_of if values(n) is not None]
            while levels and levels[0][1] != name:
                levels.pop(0)
            source, _, value = levels[0] if levels else (DEFAULT_CONFIG, name, None)
            # Kafka's PASSWORD keys; listener-prefixed settings are kept verbatim, so judged by name
            sensitive = (key is not None and key.type == "password") or "password" in name \
                or name.endswith("sasl.jaas.config")
            entry: dict[str, Any] = {
                "name": name,
                "value": None if sensitive else value,
                # Kafka's: read-only unless dynamic (the SSL stores are, though only per listener)
                "read_only": self.dynamic(name) is None and name not in LISTENER_ONLY_KEYS,
                "config_source": source,
                "is_default": source == DEFAULT_CONFIG,
                "is_sensitive": sensitive,
                "synonyms": [
                    {"name": n, "value": None if sensitive else v, "source": s} for s, n, v in levels
                ]
                if synonyms and version >= 1
                else [],
                "config_type": CONFIG_TYPES.get(key.type, 0) if key is not None else 0,
                "documentation": key.doc if documentation and key is not None else None,
            }
            entries.append(entry)
        return entries

    # --- ListConfigResources ------------------------------------------------------------------

    def list_config_resources(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        """Which resources have configs, for principals that may DESCRIBE_CONFIGS on the cluster.

        v0 is KIP-714's ListClientMetricsResources: subscriptions only. v1 (KIP-1142) names the
        types wanted, none meaning all that Kafka lists; a type outside those refuses the whole
        request with UNSUPPORTED_VERSION, as Kafka does. Kafka lists the types in one order
        whatever order was asked; within a type names are sorted (broker ids as numbers), so
        answers do not depend on dict order. Brokers are those with an endpoint on the
        request's listener, the ones a client there can reach.
        """
        def answer(code: ErrorCode, resources: list[dict[str, Any]]) -> dict[str, Any]:
            return {"throttle_time_ms": 0, "error_code": code, "config_resources": resources}

        if not self._authorized(ctx, "DESCRIBE_CONFIGS"):
            return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
        if ctx.api_version == 0:
            wanted = {CLIENT_METRICS_RESOURCE}
        else:
            asked = set(request.body["resource_types"])
            if not asked <= set(LISTED_RESOURCE_TYPES):
                return answer(ErrorCode.UNSUPPORTED_VERSION, [])
            wanted = asked or set(LISTED_RESOURCE_TYPES)
        listener = ctx.connection.listener
        broker_ids = sorted(b.broker_id for b in self.services.cluster.brokers if b.endpoint(listener))
        resources: list[dict[str, Any]] = []
        for resource_type in LISTED_RESOURCE_TYPES:
            if resource_type not in wanted:
                continue
            if resource_type in (BROKER, BROKER_LOGGER):
                names = [str(broker_id) for broker_id in broker_ids]
            elif resource_type == TOPIC:
                names = sorted(self.services.cluster.topics)
            else:
                owner = self._resources.get(resource_type)
                names = sorted(owner.names()) if owner is not None else []
            resources.extend({"resource_name": name, "resource_type": resource_type} for name in names)
        return answer(ErrorCode.NONE, resources)

    # --- AlterConfigs and IncrementalAlterConfigs ---------------------------------------------

    async def alter_configs(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        async def replace(current: Mapping[str, str], resource: Mapping[str, Any]) -> dict[str, str]:
            # AlterConfigs replaces the whole set; a key twice or a null value refuses the resource.
            entries = [(c.get("name"), c.get("value")) for c in resource.get("configs") or []]
            check_entries(entries)
            return {name or "": value or "" for name, value in entries}

        return await self._alter(ctx, request, replace, incremental=False)

    async def incremental_alter_configs(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        async def edit(current: Mapping[str, str], resource: Mapping[str, Any]) -> dict[str, str]:
            ops = list(resource.get("configs") or [])
            if resource.get("resource_type") == TOPIC:
                return apply_operations(
                    current, ops, lambda n: n in _TOPIC_KEYS and _TOPIC_KEYS[n].type == "list",
                    lambda n: ",".join(map(str, _TOPIC_KEYS[n].default)))  # type: ignore[call-overload]

            owner = self._resources.get(int(resource.get("resource_type") or 0))
            if owner is not None:
                return apply_operations(current, ops, owner.list_keys.__contains__, lambda n: "")

            def is_list(name: str) -> bool:
                key = self._key(name)
                return key is not None and key.type == "list"

            def default_of(name: str) -> str | None:
                # Kafka starts from the resource's stored value, else the key's own default: never
                # from server.properties (its configProps hold the dynamic values only)
                key = self._key(name)
                return _format(key.default) if key is not None else None

            return apply_operations(current, ops, is_list, default_of)

        return await self._alter(ctx, request, edit, incremental=True)

    async def _alter(
        self,
        ctx: RequestContext,
        request: Request,
        build: Callable[[Mapping[str, str], Mapping[str, Any]], Awaitable[dict[str, str]]],
        *, incremental: bool,
    ) -> Mapping[str, Any]:
        body = request.body
        validate_only = bool(body.get("validate_only"))
        authorized = None
        responses = []
        resources = list(body.get("resources") or [])
        # Kafka answers every entry of a resource named twice INVALID_REQUEST, and applies neither.
        named = Counter((r.get("resource_type"), r.get("resource_name") or "") for r in resources)
        async with self._alter_lock:
            for resource in resources:
                resource_type = resource.get("resource_type")
                name = resource.get("resource_name") or ""
                code, message = 0, None
                try:
                    if named[resource_type, name] > 1:
                        raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                            "Each resource must appear at most once.")
                    if resource_type == BROKER_LOGGER:
                        authorized = self._alter_loggers(ctx, name, resource, incremental, validate_only,
                                                         authorized)
                        responses.append({"error_code": ErrorCode.NONE, "error_message": None,
                                          "resource_type": resource_type, "resource_name": name})
                        continue
                    if resource_type == TOPIC:
                        await self._alter_topic(ctx, name, resource, build, validate_only)
                        responses.append({"error_code": ErrorCode.NONE, "error_message": None,
                                          "resource_type": resource_type, "resource_name": name})
                        continue
                    resource_owner = self._resources.get(resource_type)
                    if resource_owner is not None:
                        authorized = self._owner_allows(ctx, resource_owner, "ALTER_CONFIGS", name,
                                                        authorized)
                        config = await build(await self._owned(resource_owner, name, alter=True), resource)
                        resource_owner.check(name, config)
                        if not validate_only:
                            await resource_owner.write(name, config)
                        responses.append({"error_code": ErrorCode.NONE, "error_message": None,
                                          "resource_type": resource_type, "resource_name": name})
                        continue
                    # Kafka 3.2+ checks a BROKER resource's name and config on the receiving broker
                    # first (ConfigAdminManager.preprocess), before its authorization
                    broker_id = self._broker_id(resource_type, name, alter=True)
                    config = await build(self.default if broker_id is None else self.override, resource)
                    try:
                        self._check_names(config, broker_id)
                        await self._validate(broker_id, config)
                    except KafkaApiError as exc:
                        # Kafka 3.2+ validates a BROKER resource on the broker that gets the request
                        # (ConfigAdminManager.preprocess, both alter APIs) and answers a refused
                        # config INVALID_REQUEST with the validator's bare message (KAFKA-13609);
                        # 2.8's ZkAdminManager said INVALID_CONFIG, "Invalid config value for
                        # resource ...".
                        raise KafkaApiError(ErrorCode.INVALID_REQUEST if exc.code == ErrorCode.INVALID_CONFIG
                                            else exc.code, exc.message) from None
                    authorized = self._cluster_allows(ctx, "ALTER_CONFIGS", authorized)
                    self._check_policy(BROKER, name, resource)
                    if not validate_only:
                        await asyncio.to_thread(
                            self.services.store.set_entity_config, self._path(broker_id), config
                        )
                        # Apply here too, so the caller sees its change once answered.
                        if broker_id is None:
                            self.default = config
                        else:
                            self.override = config
                        self.topics.broker_settings_changed()
                        for owner in self._owners:
                            await owner.apply(self.settings_for(owner, self.default, self.override))
                except KafkaApiError as exc:
                    code, message = exc.code, exc.message
                responses.append(
                    {
                        "error_code": code,
                        "error_message": message,
                        "resource_type": resource_type,
                        "resource_name": name,
                    }
                )
        return {"throttle_time_ms": 0, "responses": responses}

    def _check_policy(self, resource_type: int, name: str, resource: Mapping[str, Any]) -> None:
        """``alter.config.policy.class.name``'s verdict on a checked alteration: the configs the
        request names, with the values it gives (Kafka's ZooKeeper-mode configEntriesMap)."""
        if self._policy is None:
            return
        named = {c.get("name") or "": c.get("value") for c in resource.get("configs") or []}
        try:
            self._policy.validate(AlterConfigRequest(resource_type, name, named))
        except PolicyViolation as exc:
            raise KafkaApiError(ErrorCode.POLICY_VIOLATION, str(exc)) from None
        except Exception as exc:
            log.exception("alter.config.policy.class.name failed on %s %r",
                          RESOURCE_TYPE_NAMES.get(resource_type), name)
            raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                f"the alter config policy failed: {exc!r}") from None

    def _alter_loggers(self, ctx: RequestContext, name: str, resource: Mapping[str, Any], incremental: bool,
                       validate_only: bool, authorized: bool | None) -> bool:
        """A BROKER_LOGGER resource of an alter, as Kafka's broker takes it (RuntimeLoggerManager):
        IncrementalAlterConfigs only, ALTER_CONFIGS on the cluster, this broker's id, every op
        checked before any applies. Returns the cluster authorization, to carry on."""
        ops = list(resource.get("configs") or [])
        if not incremental:
            check_entries([(c.get("name"), c.get("value")) for c in ops])
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {BROKER_LOGGER}")
        check_entries([(op.get("name"), op.get("value") if op.get("config_operation") != DELETE else "")
                       for op in ops])
        allowed = self._cluster_allows(ctx, "ALTER_CONFIGS", authorized)
        self._logger_broker(name, "Node")
        check_logger_ops(ops)
        if not validate_only:
            alter_loggers(ops, log)
        return allowed

    async def _alter_topic(
        self, ctx: RequestContext, topic: str, resource: Mapping[str, Any],
        build: Callable[[Mapping[str, str], Mapping[str, Any]], Awaitable[dict[str, str]]],
        validate_only: bool,
    ) -> None:
        """AlterConfigs/IncrementalAlterConfigs of one topic, checked as Kafka's
        AdminZkClient.validateTopicConfig checks it, then stored (a change notification follows)."""
        if not self._topic_authorized(ctx, "ALTER_CONFIGS", topic):
            raise KafkaApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
        if not topic:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
        current = await self.topics.existing_overrides(topic)
        config = await build(current, resource)
        try:
            self.topics.check_create(config)
        except InvalidTopicConfig as exc:
            raise topic_config_error(exc, f"ConfigResource(type=TOPIC, name='{topic}')") from None
        self._check_policy(TOPIC, topic, resource)
        if not validate_only:
            await self.topics.store_overrides(topic, config)


def _owned_entry(owner: ConfigResourceOwner, name: str, value: str) -> dict[str, Any]:
    """A stored entry of an owned resource, as Kafka describes CLIENT_METRICS ones: only what is
    set, never read-only or sensitive, no synonyms, no type (UNKNOWN)."""
    return {"name": name, "value": value, "read_only": False, "config_source": owner.source,
            "is_default": False, "is_sensitive": False, "synonyms": [], "config_type": 0,
            "documentation": None}
