"""The quotas module: DescribeClientQuotas (48) and AlterClientQuotas (49), and connection quotas.

Client quotas live in the metadata store under Kafka's entity paths (``users/<u>``,
``clients/<c>``, ``users/<u>/clients/<c>``, ``ips/<ip>``, ``<default>`` for the
default entity); the store posts a change notification per change and every
broker's watch reloads the ``ips`` quotas it enforces, so a change applies
cluster-wide without a restart. ``ips`` quotas are enforced in the accept path
(kafkapy.quotas.connections); user and client-id byte-rate and request quotas
by an interceptor (kafkapy.quotas.client_quotas), reloaded the same way.

The ``ip`` entity type, and per-IP rate enforcement, exist only while the
feature ``kafkapy.ip_quota`` is finalized at level 1 or more.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from kafkapy.configs.module import DYNAMIC_CONFIGS, ConfigsModule, DynamicConfigs
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange
from kafkapy.quotas.client_quotas import BYTE_RATE_KEYS, ClientQuotas
from kafkapy.quotas.connections import (
    _LISTENER_KEYS,
    DYNAMIC_KEYS,
    ConnectionQuotas,
    parse_per_ip_overrides,
    resolve,
)
from kafkapy.quotas.metrics import MetricsRegistry, start_http_endpoint
from kafkapy.server.auth import CLUSTER_RESOURCE
from kafkapy.server.config import ConfigError
from kafkapy.server.modules import ApiHandler, Module, RequestContext
from kafkapy.store.base import DEFAULT_ENTITY, Watch, desanitize, sanitize
from kafkapy.store.onloop import Reloader

if TYPE_CHECKING:
    from kafkapy.server.services import BrokerServices

__all__ = ["IP_QUOTA_FEATURE", "QUOTA_KEYS", "QuotasModule"]

log = logging.getLogger(__name__)

IP_QUOTA_FEATURE = "kafkapy.ip_quota"

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
# Kafka's QuotaConfigs: key -> type, by entity kind.
CLIENT_KEYS = {"producer_byte_rate": "LONG", "consumer_byte_rate": "LONG", "request_percentage": "DOUBLE",
               "controller_mutation_rate": "DOUBLE"}
IP_KEYS = {"connection_creation_rate": "INT"}
QUOTA_KEYS = {**CLIENT_KEYS, **IP_KEYS}
_LIMITS = {"INT": 2147483647, "LONG": 9223372036854775807}
_STORE_TYPE = {USER: "users", CLIENT_ID: "clients", IP: "ips"}

Entity = dict[str, "str | None"]  # entity type -> name (None: the default entity)


def entity_path(entity: Mapping[str, str | None]) -> str:
    def part(name: str | None) -> str:
        return DEFAULT_ENTITY if name is None else sanitize(name)

    if IP in entity:
        return f"ips/{part(entity[IP])}"
    if USER in entity and CLIENT_ID in entity:
        return f"users/{part(entity[USER])}/clients/{part(entity[CLIENT_ID])}"
    if USER in entity:
        return f"users/{part(entity[USER])}"
    return f"clients/{part(entity[CLIENT_ID])}"


def parse_entity_path(path: str) -> Entity:
    parts = path.split("/")

    def name(raw: str) -> str | None:
        return None if raw == DEFAULT_ENTITY else desanitize(raw)

    if len(parts) == 4:
        return {USER: name(parts[1]), CLIENT_ID: name(parts[3])}
    kind = {"users": USER, "clients": CLIENT_ID, "ips": IP}[parts[0]]
    return {kind: name(parts[1])}


def valid_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def format_value(key_type: str, value: float) -> str:
    """A quota as the store keeps it: an integer key's whole number, else Java's Double.toString
    spelling of NaN and infinity (what Kafka's tools and ``float`` both read)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return str(int(value + 1e-6)) if key_type in _LIMITS else repr(float(value))


def _no_duplicate_keys(ops: list[Mapping[str, Any]]) -> None:
    """INVALID_REQUEST when one entry names a key twice (set or removed): KRaft's
    ClientQuotaControlManager changes nothing of that entity then, where the last op would win."""
    seen: set[str] = set()
    for op in ops:
        key = op.get("key") or ""
        if key in seen:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                f"Duplicate quota key {key}: the entity's quotas are not changed")
        seen.add(key)


class QuotasModule(Module):
    name = "quotas"
    features: ClassVar[Mapping[str, tuple[int, int]]] = {IP_QUOTA_FEATURE: (1, 1)}
    # The quota settings become dynamic broker configs when the configs module is there.
    wants = (DYNAMIC_CONFIGS,)

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self.metrics = MetricsRegistry(services.clock)  # quota windows and mutes on the broker's clock
        self.connection_quotas: ConnectionQuotas | None = None
        self.metrics_url: str | None = None
        self._http: Any = None
        self._watch: Watch | None = None
        self._alter_lock = asyncio.Lock()
        self._reloads = Reloader(services.loop, self._reload_ip_quotas, "ip quotas")
        self._client_reloads = Reloader(services.loop, self._reload_client_quotas, "client quotas")
        self.client_quotas = ClientQuotas(self.metrics,
                                          int(services.config.values["quota.window.num"]),
                                          float(services.config.values["quota.window.size.seconds"]),
                                          clock=services.clock)
        self._client_quotas_installed = False
        self.settings: dict[str, Any] = dict(services.config.values)
        self._dynamic: dict[str, Any] = dict(services.config.values)  # static + stored dynamic configs
        self._local: dict[str, Any] = {}  # reconfigure()'s values, on top

    def apis(self) -> Mapping[int, ApiHandler]:
        return {ApiKey.DESCRIBE_CLIENT_QUOTAS: ApiHandler(VersionRange(0, 1), self.describe_client_quotas),
                ApiKey.ALTER_CLIENT_QUOTAS: ApiHandler(VersionRange(0, 1), self.alter_client_quotas)}

    def ip_quotas_enabled(self) -> bool:
        return self.services.feature_level(IP_QUOTA_FEATURE) >= 1

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        runtime = self.services
        overrides = await asyncio.to_thread(parse_per_ip_overrides,
                                            str(self.settings.get("max.connections.per.ip.overrides") or ""))
        quotas = ConnectionQuotas(self.settings, runtime.listener_names,
                                  runtime.inter_broker_listener, self.metrics, self.ip_quotas_enabled,
                                  evict=self._evict_lowest_priority, clock=runtime.clock)
        quotas.configure(self.settings, overrides)
        self.connection_quotas = quotas
        configs = runtime.provider(DYNAMIC_CONFIGS, ConfigsModule)
        if configs is not None:  # dynamic broker configs over the wire (DescribeConfigs, AlterConfigs)
            await configs.register(DynamicConfigs(frozenset(DYNAMIC_KEYS), frozenset(_LISTENER_KEYS),
                                                  self._validate_settings, self._apply_dynamic))
        self._watch = await asyncio.to_thread(runtime.store.watch_entity_configs, self._entity_changed)
        await self._reload_ip_quotas()
        await self._reload_client_quotas()
        url = self.settings.get("metrics.listener")
        if url:
            self._http, self.metrics_url = await asyncio.to_thread(start_http_endpoint, url, self.metrics)
            log.info("metrics on %s", self.metrics_url)
        runtime.install_accept_gate(quotas)

    async def stop(self) -> None:
        if self.connection_quotas is not None:
            self.services.remove_accept_gate(self.connection_quotas)
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._reloads.close()
        self._client_reloads.close()
        if self._client_quotas_installed:
            self.services.remove_interceptor(self.client_quotas)
            self._client_quotas_installed = False
        self.client_quotas.close()
        if self._http is not None:
            http, self._http = self._http, None
            await asyncio.to_thread(http.shutdown)
            http.server_close()

    def _validate_settings(self, settings: Mapping[str, Any]) -> None:
        """ConfigError unless the connection-quota settings are valid together (in a thread: resolves
        the hosts of max.connections.per.ip.overrides)."""
        overrides = parse_per_ip_overrides(str(settings.get("max.connections.per.ip.overrides") or ""))
        assert self.connection_quotas is not None
        self.connection_quotas.check(settings, overrides)

    async def _apply_dynamic(self, settings: Mapping[str, Any]) -> None:
        """The configs module's effective settings (static, then stored dynamic values); values
        set with reconfigure() stay on top."""
        self._dynamic = dict(settings)
        await self._configure({**settings, **self._local})

    async def reconfigure(self, updates: Mapping[str, Any]) -> None:
        """Change dynamic connection-quota settings from Python, on this broker only and not stored
        (over the wire, AlterConfigs on the BROKER resource is the way; see docs/quotas.md):
        max.connection.creation.rate, max.connections, max.connections.per.ip(.overrides) and their
        listener.name.<l>. forms. A value None drops the local value. ConfigError if invalid; then
        nothing changes."""
        local = dict(self._local)
        for key, value in updates.items():
            base = key.split(".", 3)[3] if key.startswith("listener.name.") and key.count(".") >= 3 else key
            if base not in DYNAMIC_KEYS or (base != key and base not in _LISTENER_KEYS):
                raise ConfigError(f"{key} is not a dynamic connection-quota setting")
            if value is None:
                local.pop(key, None)
            else:
                local[key] = value
        await self._configure({**self._dynamic, **local})
        self._local = local

    async def _configure(self, settings: Mapping[str, Any]) -> None:
        overrides = await asyncio.to_thread(parse_per_ip_overrides,
                                            str(settings.get("max.connections.per.ip.overrides") or ""))
        assert self.connection_quotas is not None
        self.connection_quotas.configure(settings, overrides)
        self.settings = dict(settings)

    def _evict_lowest_priority(self, excess: int) -> None:
        """KIP-402: the broker is ``excess`` connections over max.connections (an inter-broker
        connection got in, or the limit went down): close the least recently active served
        connections on the other listeners, as Kafka's processors close their Selector's least
        recently used channel. Connections already closing count as room being made."""
        quotas = self.connection_quotas
        assert quotas is not None
        candidates = [c for c in self.services.connections()
                      if c.info is not None and c.admitted and not quotas.protected(c.listener.name)]
        excess -= sum(1 for c in candidates if c.closed)
        open_ones = sorted((c for c in candidates if not c.closed), key=lambda c: c.last_activity)
        for victim in open_ones[:max(excess, 0)]:
            log.info("closing %s, the least recently active connection, to keep max.connections",
                     victim.info.id if victim.info is not None else victim)
            victim.close()

    # --- dynamic ip quotas --------------------------------------------------------------------

    def _entity_changed(self, path: str) -> None:
        if path.startswith("ips/"):  # on a store thread
            self._reloads.request()
        else:
            self._client_reloads.request()

    async def _reload_client_quotas(self) -> None:
        """The byte-rate and request quotas of users and client-ids; the interceptor is installed
        only while one is set (so a broker without them pays nothing per request)."""
        entities = await asyncio.to_thread(self._read_client_quotas)
        self.client_quotas.set_entities(entities)
        if entities and not self._client_quotas_installed:
            self.services.install_interceptor(self.client_quotas)
            self._client_quotas_installed = True
        elif not entities and self._client_quotas_installed:
            self.services.remove_interceptor(self.client_quotas)
            self._client_quotas_installed = False

    def _read_client_quotas(self) -> dict[str, dict[str, float]]:
        entities: dict[str, dict[str, float]] = {}
        for path, config in self._read_entities(clients=True, ips=False).items():
            values: dict[str, float] = {}
            for key in BYTE_RATE_KEYS:
                raw = config.get(key)
                if raw is None:
                    continue
                try:
                    values[key] = float(raw)
                except ValueError:
                    log.warning("ignoring %s: %s %r is not a number", path, key, raw)
            if values:
                entities[path] = values
        return entities

    async def _reload_ip_quotas(self) -> None:
        specific, default = await asyncio.to_thread(self._read_ip_quotas)
        if self.connection_quotas is not None:
            self.connection_quotas.set_ip_rate_quotas(specific, default)

    def _read_ip_quotas(self) -> tuple[dict[str, float], float | None]:
        specific: dict[str, float] = {}
        default: float | None = None
        for path, config in self.services.store.entity_configs("ips").items():
            raw = config.get("connection_creation_rate")
            if raw is None:
                continue
            try:
                value = float(raw)
            except ValueError:
                log.warning("ignoring %s: connection_creation_rate %r is not a number", path, raw)
                continue
            if math.isnan(value):
                value = 0.0  # Kafka's broker takes the rate as an Int, and NaN.toInt is 0
            name = parse_entity_path(path)[IP]
            if name is None:
                default = value
                continue
            try:
                specific[resolve(name)] = value
            except OSError as exc:
                log.warning("ignoring the quota of ip %r: it does not resolve (%s)", name, exc)
        return specific, default

    # --- DescribeClientQuotas -----------------------------------------------------------------

    def _authorized(self, ctx: RequestContext, operation: str) -> bool:
        conn = ctx.connection
        return self.services.authorizer.authorize(conn.principal, conn.client_address[0], operation,
                                                  "CLUSTER", CLUSTER_RESOURCE)

    async def describe_client_quotas(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        def error(code: int, message: str) -> dict[str, Any]:
            return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "entries": None}

        if not self._authorized(ctx, "DESCRIBE_CONFIGS"):
            return error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
        body = request.body
        try:
            components = self._filter(body.get("components") or [])
        except KafkaApiError as exc:
            return error(exc.code, exc.message or "")
        strict = bool(body.get("strict"))
        want_ips = self.ip_quotas_enabled() and (USER not in components and CLIENT_ID not in components)
        want_clients = IP not in components
        stored = await asyncio.to_thread(self._read_entities, want_clients, want_ips)
        entries = []
        for path, config in sorted(stored.items()):
            entity = parse_entity_path(path)
            if not self._matches(entity, components, strict):
                continue
            keys = IP_KEYS if IP in entity else CLIENT_KEYS
            values = []
            for key, raw in config.items():
                if key in keys:
                    try:
                        values.append({"key": key, "value": float(raw)})
                    except ValueError:
                        continue
            if values:
                entries.append({"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
                                "values": values})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "entries": entries}

    def _filter(self, components: list[Mapping[str, Any]]) -> dict[str, tuple[int, str | None]]:
        result: dict[str, tuple[int, str | None]] = {}
        for component in components:
            entity_type = component.get("entity_type") or ""
            match_type = component.get("match_type")
            match = component.get("match")
            if entity_type == "":
                raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                    "Unexpected empty filter component entity type")
            if entity_type not in ENTITY_TYPES or (entity_type == IP and not self.ip_quotas_enabled()):
                raise KafkaApiError(ErrorCode.UNSUPPORTED_VERSION,
                                    f"Custom entity type '{entity_type}' not supported")
            if entity_type in result:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                    f"Duplicate {entity_type} filter component entity type")
            if match_type not in (0, 1, 2):
                raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Unexpected match type: {match_type}")
            if match_type == 0 and match is None:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Exact match of {entity_type} without a name")
            if match_type != 0 and match is not None:  # ClientQuotasImage.describe refuses it so
                kind = "default" if match_type == 1 else "any"
                raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                    f"Match type {kind} of {entity_type} with a match string {match!r}")
            result[entity_type] = (match_type, match if match_type == 0 else None)
        if IP in result and (USER in result or CLIENT_ID in result):
            raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                "Invalid entity filter component combination, IP filter "
                                "component should not be used with user or clientId filter "
                                "component.")
        return result

    @staticmethod
    def _matches(entity: Entity, components: Mapping[str, tuple[int, str | None]], strict: bool) -> bool:
        for entity_type, (match_type, match) in components.items():
            if entity_type not in entity:
                return False
            name = entity[entity_type]
            if match_type == 0 and name != match:
                return False
            if match_type == 1 and name is not None:
                return False
        return not strict or all(t in components for t in entity)

    def _read_entities(self, clients: bool, ips: bool) -> dict[str, dict[str, str]]:
        store = self.services.store
        found: dict[str, dict[str, str]] = {}
        for kind in (("users", "clients", "users/clients") if clients else ()) + (("ips",) if ips else ()):
            found.update(store.entity_configs(kind))
        return found

    # --- AlterClientQuotas --------------------------------------------------------------------

    async def alter_client_quotas(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        body = request.body
        requested = body.get("entries") or []
        authorized = self._authorized(ctx, "ALTER_CONFIGS")
        validate_only = bool(body.get("validate_only"))
        results = []
        async with self._alter_lock:
            for entry in requested:
                echo = [{"entity_type": e.get("entity_type"), "entity_name": e.get("entity_name")}
                        for e in entry.get("entity") or []]
                code, message = 0, None
                if not authorized:
                    code, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
                else:
                    try:
                        _no_duplicate_keys(entry.get("ops") or [])
                        entity = await self._validate_entity(entry.get("entity") or [])
                        ops = self._validate_ops(entity, entry.get("ops") or [])
                        if not validate_only:
                            await asyncio.to_thread(self._apply, entity_path(entity), ops)
                    except KafkaApiError as exc:
                        code, message = exc.code, exc.message
                results.append({"error_code": code, "error_message": message, "entity": echo})
        return {"throttle_time_ms": 0, "entries": results}

    async def _validate_entity(self, components: list[Mapping[str, Any]]) -> Entity:
        if not components:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
        entity: Entity = {}
        for component in components:
            entity_type = component.get("entity_type")
            name = component.get("entity_name")
            if entity_type not in ENTITY_TYPES or (entity_type == IP and not self.ip_quotas_enabled()):
                raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                    f"Unhandled client quota entity type: {entity_type}")
            if name is not None and name == "":
                raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Empty {entity_type} not supported")
            if entity_type in entity:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                    f"Duplicate client quota entity type: {entity_type}")
            entity[entity_type] = name
        if IP in entity and len(entity) > 1:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                "Invalid quota entity combination, IP entity should not be "
                                "combined with User/ClientId entity.")
        ip = entity.get(IP)
        if ip is not None and not valid_ip_literal(ip):
            try:
                await asyncio.wait_for(self.services.loop.getaddrinfo(ip, None), 10.0)
            except (OSError, asyncio.TimeoutError, UnicodeError):
                raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                    f"{ip} is not a valid IP or resolvable host.") from None
        return entity

    @staticmethod
    def _validate_ops(entity: Entity, ops: list[Mapping[str, Any]]) -> dict[str, str | None]:
        keys = IP_KEYS if IP in entity else CLIENT_KEYS
        result: dict[str, str | None] = {}
        for op in ops:
            key = op.get("key") or ""
            if op.get("remove"):
                result[key] = None  # removing a key that is not there (or unknown) changes nothing
                continue
            key_type = keys.get(key)
            if key_type is None:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
            value = op.get("value")
            if not isinstance(value, (int, float)):
                raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Configuration {key} must be a number")
            # KRaft's ClientQuotaControlManager checks with comparisons (<= 0, past the type's
            # maximum, a fractional remainder), none of which NaN meets: it stores NaN for any key.
            # Infinity is a valid DOUBLE and too large for an integer key.
            if math.isnan(value):
                result[key] = format_value(key_type, math.nan)
                continue
            if value <= 0:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                    f"Configuration {key} must be positive, not {value}")
            if key_type in _LIMITS:
                if value > _LIMITS[key_type]:
                    raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                        f"Configuration {key} must be a {key_type} value")
                whole = int(value + 1e-6)
                # Kafka's getErrorForIntegralQuotaValue: the remainder of a division by 1 above 1e-6
                # (so 2.9999999 is fractional, 3.0000001 is not).
                if math.fmod(value, 1.0) > 1e-6 or whole > _LIMITS[key_type]:
                    raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                        f"Configuration {key} must be a {key_type} value")
            result[key] = format_value(key_type, float(value))
        return result

    def _apply(self, path: str, ops: Mapping[str, str | None]) -> None:
        store = self.services.store
        config = dict(store.entity_config(path))
        before = dict(config)
        for key, value in ops.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        if config != before:
            store.set_entity_config(path, config)  # empty: the entity is deleted
