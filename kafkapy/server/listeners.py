"""Listeners as Kafka configures them: names, security protocols, advertised endpoints."""

from __future__ import annotations

import re
import ssl

import attrs

from kafkapy.server.config import BrokerConfig, ConfigError
from kafkapy.server.kraft import broker_listener_names, controller_listener_names
from kafkapy.server.sasl import SaslSettings, sasl_settings
from kafkapy.server.tls_stores import load_key_store, load_trust_store

__all__ = ["Endpoint", "ListenerSpec", "parse_endpoints", "resolve_listeners", "ssl_context"]

_ENDPOINT = re.compile(r"^([A-Za-z0-9_\-]+)://(\[[^\]]*\]|[^:\[\]]*):(-?\d+)$")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@attrs.frozen
class Endpoint:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@attrs.frozen
class ListenerSpec:
    """A listener to bind, and what clients are told about it."""

    name: str
    security_protocol: str
    bind: Endpoint
    advertised: Endpoint
    sasl: SaslSettings | None = None  # a SASL_PLAINTEXT or SASL_SSL listener's mechanisms and users

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")


def parse_endpoints(text: str | None, key: str) -> list[Endpoint]:
    endpoints = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        match = _ENDPOINT.match(item)
        if match is None:
            raise ConfigError(f"invalid value {item!r} for {key}: expected NAME://host:port")
        name, host, port = match.group(1).upper(), match.group(2).strip("[]"), int(match.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(f"invalid value {item!r} for {key}: port out of range")
        endpoints.append(Endpoint(name, host, port))
    names = [e.name for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(f"invalid value {text!r} for {key}: listener names must be unique")
    return endpoints


def _protocol_map(config: BrokerConfig) -> dict[str, str]:
    mapping = {}
    for item in str(config["listener.security.protocol.map"]).split(","):
        name, sep, protocol = item.strip().partition(":")
        if not sep or protocol.upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(f"invalid value {item!r} for listener.security.protocol.map")
        mapping[name.upper()] = protocol.upper()
    return mapping


# Every interface to bind, no address to connect to: Kafka refuses to advertise it (KafkaConfig's
# validateValues), so that a broker never tells clients elsewhere to connect to themselves.
NONROUTABLE_HOST = "0.0.0.0"


def resolve_listeners(config: BrokerConfig) -> list[ListenerSpec]:
    binds = parse_endpoints(config["listeners"], "listeners")
    if not binds:
        raise ConfigError("invalid value for listeners: at least one listener is required")
    advertised = {e.name: e for e in parse_endpoints(config["advertised.listeners"], "advertised.listeners")}
    # A KRaft controller's listeners are neither bound nor advertised: kafkapy runs no controller.
    names = [bind.name for bind in binds]
    served = broker_listener_names(config, names, list(advertised) or names)
    binds = [bind for bind in binds if bind.name in served]
    advertised = {name: endpoint for name, endpoint in advertised.items()
                  if name in served or name not in controller_listener_names(config)}
    protocols = _protocol_map(config)
    specs = []
    for bind in binds:
        protocol = protocols.get(bind.name)
        if protocol is None:
            raise ConfigError(
                f"invalid value for listeners: {bind.name} is not in listener.security.protocol.map")
        sasl = sasl_settings(config, bind.name) if protocol.startswith("SASL") else None
        specs.append(ListenerSpec(bind.name, protocol, bind, advertised.get(bind.name, bind), sasl))
    unknown = set(advertised) - {s.name for s in specs}
    if unknown:
        raise ConfigError(f"invalid value for advertised.listeners: {sorted(unknown)} are not listeners")
    if any(spec.advertised.host == NONROUTABLE_HOST for spec in specs):  # Kafka's check and words
        raise ConfigError("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                          "Use a routable IP address.")
    inter = config["inter.broker.listener.name"]
    if inter is not None and _PROTOCOL_KEY in config.originals:
        # Kafka's KafkaConfig.getInterBrokerListenerNameAndSecurityProtocol, its words
        raise ConfigError(f"Only one of inter.broker.listener.name and {_PROTOCOL_KEY} should be set.")
    if inter is not None and inter.upper() not in {s.name for s in specs}:
        raise ConfigError(f"invalid value {inter!r} for inter.broker.listener.name: no such listener")
    if _PROTOCOL_KEY in config.originals and config[_PROTOCOL_KEY] not in {s.name for s in specs}:
        # Kafka names the inter-broker listener after the protocol, and requires it (its words)
        raise ConfigError(f"{_PROTOCOL_KEY}={config[_PROTOCOL_KEY]}: inter.broker.listener.name must be a "
                          "listener name defined in advertised.listeners. The valid options based on "
                          f"currently configured listeners are {','.join(s.name for s in specs)}")
    return specs


_PROTOCOL_KEY = "security.inter.broker.protocol"


def inter_broker_listener(config: BrokerConfig, specs: list[ListenerSpec]) -> str:
    """Kafka's rule: the listener named by inter.broker.listener.name, else the one named after
    security.inter.broker.protocol when that is set; unset, the one whose protocol is PLAINTEXT."""
    name = config["inter.broker.listener.name"]
    if name:
        return str(name).upper()
    if _PROTOCOL_KEY in config.originals:
        return str(config[_PROTOCOL_KEY])
    for spec in specs:
        if spec.security_protocol == "PLAINTEXT":
            return spec.name
    return specs[0].name


_KAFKAPY_FILES = ("ssl.certfile", "ssl.keyfile", "ssl.cafile")


def ssl_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener: Kafka's PEM key and trust stores
    (kafkapy.server.tls_stores), or kafkapy's own PEM files (ssl.certfile, ssl.keyfile, ssl.cafile)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    certfile, keyfile, cafile = (config[key] for key in _KAFKAPY_FILES)
    has_key_store = load_key_store(context, config, listener)
    if has_key_store and certfile:
        raise ConfigError(f"invalid SSL settings for listener {listener}: both ssl.certfile and Kafka's "
                          "ssl.keystore.* name its certificate: set one")
    if not has_key_store and not certfile:
        raise ConfigError(f"an SSL or SASL_SSL listener ({listener}) needs its certificate and key: "
                          "ssl.keystore.type=PEM with ssl.keystore.location (a PEM file of both), or "
                          "ssl.keystore.certificate.chain and ssl.keystore.key; or ssl.certfile and "
                          "ssl.keyfile")
    has_trust_store = load_trust_store(context, config, listener)
    if has_trust_store and cafile:
        raise ConfigError(f"invalid SSL settings for listener {listener}: both ssl.cafile and Kafka's "
                          "ssl.truststore.* name the CAs of client certificates: set one")
    try:
        if certfile:
            context.load_cert_chain(certfile, keyfile)
        if cafile:
            context.load_verify_locations(cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"invalid SSL files (ssl.certfile/ssl.keyfile/ssl.cafile): {exc}") from None
    context.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                           "required": ssl.CERT_REQUIRED}[config["ssl.client.auth"]]
    return context
