"""Listeners as Kafka configures them: names, security protocols, advertised endpoints."""

from __future__ import annotations

import logging
import re
import ssl

import attrs

from kafkapy.server.config import LISTENER_PREFIX, SSL_CLIENT_AUTH, BrokerConfig, ConfigError
from kafkapy.server.kraft import broker_listener_names, controller_listener_names, process_roles
from kafkapy.server.sasl import SaslSettings, sasl_settings
from kafkapy.server.tls_stores import load_key_store, load_trust_store, setting

__all__ = ["Endpoint", "ListenerSpec", "parse_endpoints", "resolve_listeners", "ssl_context"]

log = logging.getLogger(__name__)

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
    # None: served but not advertised (left out of advertised.listeners), so no broker has an
    # endpoint on it and a Metadata request arriving on it lists none, as in Kafka
    advertised: Endpoint | None
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
    """The listeners to bind, and what each advertises. As Kafka's KafkaConfig: advertised.listeners,
    when set, is the whole list advertised (a listener it leaves out is served, not advertised);
    unset, every listener advertises itself. Kafka's checks in its order and words."""
    binds = parse_endpoints(config["listeners"], "listeners")
    if not binds:
        raise ConfigError("invalid value for listeners: at least one listener is required")
    told = config["advertised.listeners"]
    advertised_list = binds if told is None else parse_endpoints(told, "advertised.listeners")
    names = [bind.name for bind in binds]
    # A KRaft controller's listeners are neither bound nor advertised: kafkapy runs no controller.
    served = broker_listener_names(config, names)
    controllers = controller_listener_names(config)
    advertised = {e.name: e for e in advertised_list if e.name not in controllers}
    _check_advertised(config, names, list(advertised))
    protocols = _protocol_map(config)
    specs = []
    for bind in binds:
        if bind.name not in served:
            continue
        protocol = protocols.get(bind.name)
        if protocol is None:
            raise ConfigError(
                f"invalid value for listeners: {bind.name} is not in listener.security.protocol.map")
        sasl = sasl_settings(config, bind.name) if protocol.startswith("SASL") else None
        specs.append(ListenerSpec(bind.name, protocol, bind, advertised.get(bind.name), sasl))
    if any(endpoint.host == NONROUTABLE_HOST for endpoint in advertised.values()):  # Kafka's check and words
        raise ConfigError("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                          "Use a routable IP address.")
    return specs


def _check_advertised(config: BrokerConfig, listeners: list[str], advertised: list[str]) -> None:
    """KafkaConfig's checks of a broker's advertised listeners (controller listeners left out), in
    its order and words: at least one; the inter-broker listener among them; all of them listeners."""
    if not advertised:
        raise ConfigError("There must be at least one broker advertised listener." + (
            " Perhaps all listeners appear in controller.listener.names?" if process_roles(config) else ""))
    inter = config["inter.broker.listener.name"]
    if inter is not None and _PROTOCOL_KEY in config.originals:
        # Kafka's KafkaConfig.getInterBrokerListenerNameAndSecurityProtocol, its words
        raise ConfigError(f"Only one of inter.broker.listener.name and {_PROTOCOL_KEY} should be set.")
    # Kafka names the inter-broker listener after security.inter.broker.protocol when it is set
    # (kafkapy, unlike Kafka, does not require a PLAINTEXT listener when neither key is set)
    named = str(inter).upper() if inter is not None else (
        str(config[_PROTOCOL_KEY]) if _PROTOCOL_KEY in config.originals else None)
    if named is not None and named not in advertised:
        raise ConfigError("inter.broker.listener.name must be a listener name defined in "
                          "advertised.listeners. The valid options based on currently configured listeners "
                          f"are {','.join(advertised)}")
    if not set(advertised) <= set(listeners):
        raise ConfigError("advertised.listeners listener names must be equal to or a subset of the ones "
                          f"defined in listeners. Found {','.join(advertised)}. The valid options based on "
                          f"the current configuration are {','.join(dict.fromkeys(listeners))}")


_PROTOCOL_KEY = "security.inter.broker.protocol"


def inter_broker_listener(config: BrokerConfig, specs: list[ListenerSpec]) -> str:
    """Kafka's rule: the listener named by inter.broker.listener.name, else the one named after
    security.inter.broker.protocol when that is set; unset, the advertised one whose protocol is
    PLAINTEXT, else the first advertised (where Kafka requires a PLAINTEXT listener)."""
    name = config["inter.broker.listener.name"]
    if name:
        return str(name).upper()
    if _PROTOCOL_KEY in config.originals:
        return str(config[_PROTOCOL_KEY])
    advertised = [spec for spec in specs if spec.advertised is not None]
    for spec in advertised:
        if spec.security_protocol == "PLAINTEXT":
            return spec.name
    return advertised[0].name


_KAFKAPY_FILES = ("ssl.certfile", "ssl.keyfile", "ssl.cafile")


def ssl_context(config: BrokerConfig, listener: str, security_protocol: str = "SSL") -> ssl.SSLContext:
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
    context.verify_mode = _VERIFY_MODES[client_auth(config, listener, security_protocol)]
    return context


_VERIFY_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def client_auth(config: BrokerConfig, listener: str, security_protocol: str) -> str:
    """The listener's ssl.client.auth: ``listener.name.<listener>.ssl.client.auth`` over the plain
    key, checked by the key's validator as Kafka parses a listener's prefixed keys at start. A
    SASL_SSL listener takes only its own (Kafka's ChannelBuilders: SASL authenticates its clients),
    with Kafka's warning when the plain key asks for certificates."""
    value = setting(config, listener, "ssl.client.auth") or "none"
    own = config.get(f"{LISTENER_PREFIX}{listener.lower()}.ssl.client.auth")
    if security_protocol == "SASL_SSL" and own is None:
        if value != "none":
            log.warning("Broker configuration 'ssl.client.auth' is applied only to SSL listeners. "
                        "Listener-prefixed configuration can be used to enable SSL client authentication "
                        "for SASL_SSL listeners. In future releases, broker-wide option without listener "
                        "prefix may be applied to SASL_SSL listeners as well. All configuration options "
                        "intended for specific listeners should be listener-prefixed.")
        return "none"
    refusal = SSL_CLIENT_AUTH.refusal("ssl.client.auth", value)
    if refusal is not None:
        raise ConfigError(refusal)
    return value
