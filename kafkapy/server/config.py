"""The broker's configuration: one typed, frozen object from Kafka-style properties.

Sources, in increasing precedence: defaults, a server.properties file, a
dict, and ``--override key=value`` pairs. Keys Kafka has keep Kafka's names
and defaults; every broker key Kafka defines is known, those kafkapy does not
act on taken quietly (INERT_KEYS, from server/kafka_keys.py). An unknown key
warns (Kafka logs unused keys too); an invalid value fails at start with a
ConfigError naming the key: a value Kafka's validator refuses (its Range, ValidString, ... as
kafkapy.validators states them) in Kafka's words, "Invalid value 0 for configuration
num.io.threads: Value must be at least 1".
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from kafkapy.errors import KafkaPyError
from kafkapy.server.kafka_keys import INERT_TABLE, TLS_STORE_TABLE
from kafkapy.validators import AtLeast, EachOneOf, NonNull, OneOf, Validator

__all__ = ["INERT_KEYS", "LISTENER_PREFIX", "SSL_CLIENT_AUTH", "USE_DEFAULT_BUFFER_SIZE", "BrokerConfig",
           "ConfigError", "ConfigKey", "load_properties", "parse_overrides", "parse_properties", "refusal"]

log = logging.getLogger(__name__)


class ConfigError(KafkaPyError):
    """A configuration value that cannot be used; the message names the key."""


@attrs.frozen
class ConfigKey:
    """A declared configuration key: its type, Kafka's default, and why it exists. ``acted_on``
    is False for a Kafka key kafkapy takes without effect (its doc says why)."""

    name: str
    type: str  # "int", "short", "long", "double", "boolean", "string", "list", "password", "class"
    default: Any
    doc: str
    validator: Callable[[Any], str | None] | None = None
    acted_on: bool = True


SSL_CLIENT_AUTH = OneOf(("required", "requested", "none"))  # Kafka's SslClientAuth, lower-cased
LISTENER_PREFIX = "listener.name."  # listener.name.<listener in lower case>.<key>: one listener's setting
USE_DEFAULT_BUFFER_SIZE = -1  # Kafka's Selectable.USE_DEFAULT_BUFFER_SIZE: leave the OS's socket buffer


def _kafka_release(value: Any) -> str | None:
    from kafkapy.protocol.releases import kafka_release

    try:
        kafka_release(str(value))
    except ValueError as exc:
        return str(exc)
    return None


CORE_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("broker.id", "int", -1,
              "This broker's id; -1 takes the one in log.dirs' meta.properties, else the metadata store "
              "assigns one above reserved.broker.max.id.",
              AtLeast(-1)),
    # KRaft's name for the id (config/kraft/server.properties sets node.id, not broker.id): Kafka reads
    # either for both (KafkaConfig.populateSynonyms), so a KRaft file keeps its broker's id here.
    ConfigKey("node.id", "int", -1, "Kafka's synonym of broker.id: either one sets both."),
    # KRaft's (kafkapy.server.kraft): the process's roles and the controller's listeners, which a
    # broker does not serve; kafkapy runs no controller, so a controller-only process is refused.
    ConfigKey("process.roles", "list", [],
              "Kafka's KRaft roles: broker, or broker,controller (the controller's listeners, named by "
              "controller.listener.names, are not served); controller alone is refused, as kafkapy runs no "
              "KRaft controller. Unset: not KRaft.",
              EachOneOf(("broker", "controller"))),
    ConfigKey("controller.listener.names", "string", None,
              "The KRaft controller's listeners: left out of those the broker serves and advertises."),
    ConfigKey("reserved.broker.max.id", "int", 1000, "Kafka's default: generated ids start above it.",
              AtLeast(0)),
    ConfigKey("broker.rack", "string", None, "Rack reported in Metadata."),
    ConfigKey("listeners", "string", "PLAINTEXT://127.0.0.1:9092",
              "Comma-separated NAME://host:port; port 0 picks an ephemeral port."),
    ConfigKey("advertised.listeners", "string", None, "What clients are told; defaults to listeners."),
    ConfigKey("listener.security.protocol.map", "string",
              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
              "Listener name to security protocol (Kafka's default map)."),
    ConfigKey("inter.broker.listener.name", "string", None,
              "Listener brokers use between themselves; defaults to the PLAINTEXT listener."),
    ConfigKey("security.inter.broker.protocol", "string", "PLAINTEXT",
              "Kafka's other way to name the inter-broker listener: the listener named after this "
              "protocol. Setting it and inter.broker.listener.name both is a config error, as in Kafka.",
              OneOf(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))),
    ConfigKey("socket.request.max.bytes", "int", 104857600,
              "Kafka's default: a larger (or negative) frame size closes the connection unread.",
              AtLeast(1)),
    ConfigKey("connections.max.idle.ms", "long", 600000,
              "Kafka's default idle timeout; negative: never closed as idle, as in Kafka's Selector."),
    # Kafka's default is 102400 for both. A fixed size turns off the kernel's autotuning of the
    # socket's buffers, which on loopback cut a consumer's Fetch throughput of 10 KB records to
    # about a third (550 against 1,270-1,700 MB/s, docs/broker.md); a test broker has no network to
    # be fair to, so kafkapy leaves the OS default unless a size is set.
    ConfigKey("socket.send.buffer.bytes", "int", USE_DEFAULT_BUFFER_SIZE,
              "SO_SNDBUF of each accepted connection; -1 (kafkapy's default; Kafka's is 102400) "
              "leaves the OS default."),
    ConfigKey("socket.receive.buffer.bytes", "int", USE_DEFAULT_BUFFER_SIZE,
              "SO_RCVBUF of each accepted connection; -1 (kafkapy's default; Kafka's is 102400) "
              "leaves the OS default."),
    ConfigKey("num.network.threads", "int", 3,
              "Accepted for compatibility; one asyncio loop serves every connection.", AtLeast(1)),
    ConfigKey("message.max.bytes", "int", 1048588, "Kafka's default; reported in BrokerMetadata.",
              AtLeast(0)),
    ConfigKey("quota.window.num", "int", 11, "Kafka's default number of quota samples.", AtLeast(1)),
    ConfigKey("quota.window.size.seconds", "int", 1, "Kafka's default quota sample length.", AtLeast(1)),
    ConfigKey("observer.class.names", "list", [], "Dotted class paths of observers (KIP-388)."),
    ConfigKey("ssl.certfile", "string", None, "PEM certificate for SSL listeners."),
    ConfigKey("ssl.keyfile", "string", None, "PEM private key for SSL listeners."),
    ConfigKey("ssl.cafile", "string", None, "PEM CA bundle for verifying client certificates."),
    ConfigKey("ssl.client.auth", "string", "none", "Kafka's values: none, requested, required; "
              "listener.name.<l>.ssl.client.auth for one listener.", SSL_CLIENT_AUTH),
    ConfigKey("sasl.enabled.mechanisms", "list", ["GSSAPI"],
              "Kafka's default. SASL mechanisms of SASL listeners (kafkapy serves PLAIN, SCRAM-SHA-256, "
              "SCRAM-SHA-512 and OAUTHBEARER); "
              "listener.name.<l>.sasl.enabled.mechanisms overrides it for one listener."),
    ConfigKey("sasl.jaas.config", "password", None,
              "A JAAS login module entry (PlainLoginModule with user_<name>=\"<password>\" options, or "
              "OAuthBearerLoginModule with unsecuredValidator* options) for SASL listeners without "
              "listener.name.<l>.<mechanism>.sasl.jaas.config."),
    ConfigKey("max.request.partition.size.limit", "int", 2000,
              "Kafka's default: the most partitions one DescribeTopicPartitions answer lists (a client's "
              "response_partition_limit can only lower it); the rest follow by the answer's cursor.",
              AtLeast(1)),
    ConfigKey("sasl.server.max.receive.size", "int", 524288,
              "Kafka's default: a frame larger than this before SASL authentication completes closes the "
              "connection (an unauthenticated client cannot make the broker hold large frames).",
              AtLeast(1)),
    ConfigKey("connections.max.reauth.ms", "long", 0,
              "Kafka's default (0: off). The longest a SASL session lasts before the client must "
              "re-authenticate (KIP-368); listener.name.<l>.<mechanism>.connections.max.reauth.ms per "
              "listener and mechanism. An OAUTHBEARER session also ends when its token expires."),
    # KIP-768: Kafka's OAuthBearerValidatorCallbackHandler (signed OAUTHBEARER tokens), used when
    # listener.name.<l>.oauthbearer.sasl.server.callback.handler.class names it; each may be set per
    # listener (listener.name.<l>.oauthbearer.<key>). kafkapy.server.sasl.settings checks them.
    ConfigKey("sasl.oauthbearer.jwks.endpoint.url", "string", None,
              "Where the identity provider's JSON Web Key Set is: https://, http:// or file:// (a file "
              "is read once, at start; an endpoint is fetched at start and refreshed)."),
    ConfigKey("sasl.oauthbearer.jwks.endpoint.refresh.ms", "long", 3600000,
              "Kafka's default: how often the JWKS endpoint is fetched again (a token with an unknown kid "
              "asks for an earlier refresh, at most once a minute per kid)."),
    ConfigKey("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "long", 100,
              "Kafka's default: the first wait between attempts of a failing JWKS refresh (it doubles)."),
    ConfigKey("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "long", 10000,
              "Kafka's default: how long a failing JWKS refresh is retried before the keys held are kept."),
    ConfigKey("sasl.oauthbearer.clock.skew.seconds", "int", 30,
              "Kafka's default: the leeway, in seconds, for a token's exp and nbf at the broker's clock."),
    ConfigKey("sasl.oauthbearer.expected.audience", "list", None,
              "The audiences a token's aud must hold one of; unset: a token with an aud is refused."),
    ConfigKey("sasl.oauthbearer.expected.issuer", "string", None, "The iss a token must have, if set."),
    ConfigKey("sasl.oauthbearer.scope.claim.name", "string", "scope",
              "Kafka's default: the claim holding a signed token's scope."),
    ConfigKey("sasl.oauthbearer.sub.claim.name", "string", "sub",
              "Kafka's default: the claim holding a signed token's subject (the principal)."),
    ConfigKey("connection.failed.authentication.delay.ms", "int", 100,
              "Kafka's default: a connection whose SASL authentication failed is closed this long after "
              "the answer, so the client reads the answer first (and cannot retry in a tight loop).",
              AtLeast(0)),
    ConfigKey("kafka.version", "string", None,
              "Serve what this Apache Kafka release served (2.8, 3.9, 4.0; kafkapy.protocol.releases): "
              "its ApiVersions ranges, clipped to kafkapy's, and its refusals. Unset: kafkapy's own.",
              _kafka_release),
    ConfigKey("unknown.request.behavior", "string", "empty",
              "empty: answer unknown requests with an empty response (KIP-35 draft); "
              "close: close the connection as modern Kafka does.", OneOf(("empty", "close"))),
    ConfigKey("advertise.private.api.keys", "boolean", True,
              "List the private API keys in ApiVersions; some clients reject keys they do not know."),
    ConfigKey("kafkapy.modules", "list", [], "Extra modules to enable, by entry-point name or dotted path."),
    ConfigKey("cluster.id", "string", None, "Fixed cluster id; by default the store makes a stable one."),
    ConfigKey("authorizer.class.name", "string", "",
              "Dotted class path of an authorizer, or a built-in short name (allowlist, acl; Kafka's "
              "AclAuthorizer and StandardAuthorizer class names mean acl); empty allows all.", NonNull()),
    ConfigKey("super.users", "string", "", "Kafka's format: User:alice;User:bob. Always allowed."),
    # Connection quotas (KIP-402, KIP-612), read by the quotas module; Kafka's names and defaults.
    ConfigKey("max.connection.creation.rate", "int", 2147483647,
              "Broker-wide connections accepted per second, inter-broker listener exempt (KIP-612). "
              "listener.name.<l>.max.connection.creation.rate limits one listener.", AtLeast(0)),
    ConfigKey("max.connections", "int", 2147483647,
              "Connections open at once, broker-wide (KIP-402); listener.name.<l>.max.connections per "
              "listener.",
              AtLeast(0)),
    ConfigKey("max.connections.per.ip", "int", 2147483647,
              "Connections open at once from one address; 0 is allowed only with overrides.", AtLeast(0)),
    ConfigKey("max.connections.per.ip.overrides", "string", "",
              "Comma-separated host-or-ip:count overrides of max.connections.per.ip."),
    ConfigKey("metrics.listener", "string", None,
              "http://host:port/path serving the broker's metrics in Prometheus text format; unset: none."),
    ConfigKey("allowlist.rules", "string", "",
              "authorizer.class.name=allowlist grants: PRINCIPAL@ADDRESS-OR-CIDR:OPERATION[,OPERATION];... "
              "(* for any principal or address)."),
    ConfigKey("auto.leader.rebalance.enable", "boolean", True,
              "Kafka's: the controller moves leadership back to preferred replicas when the leader "
              "imbalance is above leader.imbalance.per.broker.percentage."),
    ConfigKey("leader.imbalance.check.interval.seconds", "long", 300,
              "Kafka's: how often the controller checks the leader balance (the broker's clock).",
              AtLeast(1)),
    ConfigKey("leader.imbalance.per.broker.percentage", "int", 10,
              "Kafka's: the share of a broker's preferred partitions others may lead, in percent."),
    ConfigKey("zookeeper.connect", "string", None,
              "host:port[,host:port...][/chroot]; unset means the embedded store: on disk under "
              "metadata.log.dir with log.dirs, else in memory."),
    ConfigKey("zookeeper.session.timeout.ms", "int", 18000, "Kafka's default ZooKeeper session timeout.",
              AtLeast(1)),
    ConfigKey("zookeeper.connection.timeout.ms", "int", None,
              "How long to wait for ZooKeeper at start; Kafka's default is the session timeout."),
    ConfigKey("metadata.log.dir", "string", None,
              "Where the cluster's metadata is kept when log.dirs is set and zookeeper.connect is not "
              "(kafkapy's journal and snapshot files, not KRaft's log); unset: the first of log.dirs, as "
              "in Kafka."),
    ConfigKey("metadata.log.max.record.bytes.between.snapshots", "long", 20971520,
              "Kafka's default: the metadata journal is compacted into a new snapshot once it holds this "
              "many bytes (or the last snapshot's size, if larger).", AtLeast(1)),
    ConfigKey("supported.features.max", "list", [],
              "feature:level,... caps the feature levels this broker supports (KIP-584), e.g. to emulate "
              "an older broker in a rolling upgrade; a level below the feature's minimum drops it.",
              lambda v: _feature_caps_problem(v)),
    ConfigKey("features.finalize.on.start", "boolean", True,
              "On the first start of a fresh cluster, finalize every supported feature at its default "
              "level (KIP-584); false leaves the finalized features empty."),
)


# Kafka's key and trust stores, which the TLS listeners read (kafkapy.server.tls_stores).
CORE_KEYS += tuple(ConfigKey(name, kind, default, why, validator)
                   for name, kind, default, why, _, validator in TLS_STORE_TABLE)

# Kafka's keys kafkapy takes without effect (server/kafka_keys.py says why, key by key).
INERT_KEYS: tuple[ConfigKey, ...] = tuple(
    ConfigKey(name, kind, default, why, validator, acted_on=False)
    for name, kind, default, why, _, validator in INERT_TABLE)


def _feature_caps_problem(items: list[str]) -> str | None:
    for item in items:
        name, sep, level = item.rpartition(":")
        if not sep or not name or not level.strip().lstrip("-").isdecimal():
            return f"{item!r} is not feature:level"
    return None


_TAG_KEY = re.compile(r"^tag\.(.+)$")


_INTEGER_RANGES: Final = {"short": (-(2**15), 2**15 - 1), "int": (-(2**31), 2**31 - 1),
                          "long": (-(2**63), 2**63 - 1)}


def _convert(key: ConfigKey, raw: Any) -> Any:
    if raw is None:
        return None
    kind = key.type
    if kind in _INTEGER_RANGES:
        refusal = f"Not a number of type {kind.upper()}"  # Kafka's ConfigDef words
        if isinstance(raw, bool):
            raise ValueError(refusal)
        try:
            number = int(str(raw).strip())
        except ValueError:
            raise ValueError(refusal) from None
        low, high = _INTEGER_RANGES[kind]
        if not low <= number <= high:
            raise ValueError(refusal)
        return number
    if kind == "double":
        try:
            return float(str(raw).strip())
        except ValueError:
            raise ValueError("Not a number of type DOUBLE") from None
    if kind == "boolean":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise ValueError("expected true or false")
        return text == "true"
    if kind == "list":
        if isinstance(raw, (list, tuple)):
            return [str(x).strip() for x in raw if str(x).strip()]
        return [part.strip() for part in str(raw).split(",") if part.strip()]
    return str(raw).strip()


def refusal(key: ConfigKey, value: Any, name: str | None = None) -> str | None:
    """Why a typed value of ``key`` (set as ``name``, a listener-prefixed spelling, if given) is
    refused, as one line; None if it is not. A Kafka validator (kafkapy.validators) words it as
    Kafka's ConfigException does; kafkapy's own checks keep their words."""
    name = name or key.name
    if isinstance(key.validator, Validator):
        return key.validator.refusal(name, value)
    problem = key.validator(value) if value is not None and key.validator is not None else None
    return f"invalid value {value!r} for {name}: {problem}" if problem else None


def _checked(key: ConfigKey, raw: Any) -> Any:
    """The typed value of one setting, or a ConfigError that names the key."""
    try:
        value = _convert(key, raw)
    except ValueError as exc:
        raise ConfigError(f"invalid value {raw!r} for {key.name}: {exc}") from None
    refused = refusal(key, value)
    if refused:
        raise ConfigError(refused)
    return value


@attrs.frozen
class BrokerConfig:
    """Every setting the broker and its modules read, typed and validated."""

    values: Mapping[str, Any]
    tags: Mapping[str, str]  # tag.<name>=<value>, the KIP-35 draft's user tags
    originals: Mapping[str, str]

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @classmethod
    def build(cls, settings: Mapping[str, Any] | None = None, *, properties: str | Path | None = None,
              overrides: Iterable[str] = (), extra_keys: Iterable[ConfigKey] = (),
              declared: Callable[[], Iterable[str]] = tuple) -> BrokerConfig:
        """The config of these settings. ``declared`` names keys that modules to be built later
        declare: asked only when a setting looks unknown, to know whether to warn about it."""
        raw: dict[str, Any] = {}
        if properties is not None:
            raw.update(load_properties(Path(properties)))
        raw.update(settings or {})
        raw.update(parse_overrides(overrides))
        _populate_id_synonyms(raw)
        keys = {k.name: k for k in (*CORE_KEYS, *INERT_KEYS, *extra_keys)}
        values: dict[str, Any] = {}
        tags: dict[str, str] = {}
        unknown = []
        for name, value in raw.items():
            match = _TAG_KEY.match(name)
            if match:
                tags[match.group(1)] = str(value)
            elif name.startswith(LISTENER_PREFIX):
                _warn_unread_listener_key(name)
            elif name not in keys:
                unknown.append(name)
        if unknown:
            declared_keys = _declared_elsewhere(raw) | set(declared())
            for name in unknown:
                if name not in declared_keys:
                    log.warning("unknown configuration key %r (ignored)%s", name,
                                _did_you_mean(name, (*keys, *declared_keys)))
        for name, key in keys.items():
            values[name] = _checked(key, raw.get(name, key.default))
        if values["node.id"] != values["broker.id"]:  # Kafka's check and words (KafkaConfig.validateValues)
            raise ConfigError("You must set `node.id` to the same value as `broker.id`.")
        # Per-listener keys (listener.name.<l>.<key>) are kept verbatim for the modules that read them.
        values.update({k: v for k, v in raw.items() if k.startswith(LISTENER_PREFIX)})
        return cls(values=values, tags=tags, originals={k: str(v) for k, v in raw.items()})


    def with_keys(self, extra_keys: Iterable[ConfigKey]) -> BrokerConfig:
        """This config with module-declared keys added (converted and validated from the original
        settings); keys it already has are left alone. A module key's value is a ConfigError
        here if invalid, as a core key's is in build()."""
        values = dict(self.values)
        added = False
        for key in extra_keys:
            if key.name in values:
                continue
            values[key.name] = _checked(key, self.originals.get(key.name, key.default))
            added = True
        return attrs.evolve(self, values=values) if added else self


def _warn_unread_listener_key(name: str) -> None:
    """A per-listener key is read under the listener's name in lower case (Kafka's
    ListenerName.configPrefix, and every reader here): ``listener.name.SASL_PLAINTEXT.x`` is
    never read, which Kafka reports as a key it does not know, so it is warned about, not kept
    quietly while the start fails for the key it was meant to be."""
    listener, _, rest = name[len(LISTENER_PREFIX):].partition(".")
    if listener != listener.lower():
        log.warning("configuration key %r is never read (ignored): a listener's name is written in "
                    "lower case there; did you mean %r?", name, f"{LISTENER_PREFIX}{listener.lower()}.{rest}")


def _populate_id_synonyms(raw: dict[str, Any]) -> None:
    """broker.id from node.id when only node.id is set, and the other way round, as Kafka's
    KafkaConfig.populateSynonyms does before it reads either."""
    if "broker.id" not in raw and "node.id" in raw:
        raw["broker.id"] = raw["node.id"]
    elif "node.id" not in raw and "broker.id" in raw:
        raw["node.id"] = raw["broker.id"]


def _did_you_mean(unknown: str, known: Iterable[str]) -> str:
    """``; did you mean 'broker.id'?`` for the nearest known key, or nothing. Keyword spellings
    (``broker_id``, ``Broker-Id``) are read as Kafka's dotted lower-case names first."""
    import difflib

    spelled = re.sub(r"[_\-]", ".", unknown).lower()
    by_spelling = {name.lower(): name for name in known}
    if spelled in by_spelling:
        return f"; did you mean {by_spelling[spelled]!r}?"
    # 0.8: difflib's ratio above which two keys differ by a typo or two, not in meaning.
    nearest = difflib.get_close_matches(spelled, list(by_spelling), n=1, cutoff=0.8)
    return f"; did you mean {by_spelling[nearest[0]]!r}?" if nearest else ""


def _declared_elsewhere(raw: Mapping[str, Any]) -> set[str]:
    """Keys that modules and observers declare (their ``config_keys``): those of every installed
    module (entry points ``kafkapy.modules``) and of the modules and observers this config names.
    Consulted only when a key looks unknown, so a normal start imports nothing extra."""
    import importlib
    from importlib.metadata import entry_points

    classes: list[Any] = []
    for entry in entry_points(group="kafkapy.modules"):
        try:
            classes.append(entry.load())
        except Exception:
            log.debug("cannot load module entry point %s", entry.name, exc_info=True)
    for setting in ("kafkapy.modules", "observer.class.names"):
        for path in _convert(ConfigKey(setting, "list", [], ""), raw.get(setting, [])) or []:
            module_name, sep, attr = path.partition(":")
            if not sep:
                module_name, _, attr = path.rpartition(".")
            try:
                classes.append(getattr(importlib.import_module(module_name), attr))
            except Exception:
                continue  # the broker reports a bad class path itself, naming the key
    return {key.name for cls in classes for key in getattr(cls, "config_keys", ())}


def load_properties(path: Path) -> dict[str, str]:
    """Java .properties, read as java.util.Properties.load(InputStream) reads Kafka's server.properties.

    The file is ISO-8859-1 (every byte is a character, so no file fails to decode); other characters
    are written as ``\\uXXXX``. ``key=value``, ``key: value`` or ``key value``; ``#`` and ``!``
    comments; an odd number of trailing backslashes continues a line; ``\\t \\n \\r \\f`` and
    ``\\uXXXX`` escapes in keys and values, any other escaped character stands for itself.
    """
    try:
        text = path.read_bytes().decode("iso-8859-1")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    return parse_properties(text, str(path))


def parse_properties(text: str, source: str) -> dict[str, str]:
    """The properties of a .properties text (load_properties' rules); ``source`` names it in errors."""
    result: dict[str, str] = {}
    for number, logical in _logical_lines(text):
        try:
            key, value = _split_property(logical)
        except ValueError as exc:
            raise ConfigError(f"{source}, line {number}: {exc}") from None
        result[key] = value
    return result


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, text) of each property: comments and blank lines dropped, continuations
    joined with the next line's leading whitespace removed (Java's LineReader)."""
    pending: str | None = None
    first = 0
    for number, line in enumerate(re.split(r"\r\n|\r|\n", text), 1):
        stripped = line.lstrip(" \t\f")
        if pending is None:
            if not stripped or stripped[0] in "#!":
                continue  # a comment ending in a backslash does not continue
            first, pending = number, ""
        if (len(stripped) - len(stripped.rstrip("\\"))) % 2 == 1:  # an odd number of \ continues
            pending += stripped[:-1]
            continue
        yield first, pending + stripped
        pending = None
    if pending:
        yield first, pending


_ESCAPED = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _split_property(line: str) -> tuple[str, str]:
    """Key and value of one logical line: the key ends at the first unescaped ``=``, ``:`` or
    whitespace; whitespace, then at most one ``=`` or ``:``, then whitespace separate it from the value."""
    end = 0
    while end < len(line) and line[end] not in "=: \t\f":
        end += 2 if line[end] == "\\" else 1
    end = min(end, len(line))
    rest = line[end:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(line[:end]), _unescape(rest)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 == len(text):
            out.append(char)  # Java drops a lone trailing backslash; a logical line never has one
            i += 1
            continue
        escaped = text[i + 1]
        if escaped == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f"malformed \\uXXXX escape {text[i:i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPED.get(escaped, escaped))
            i += 2
    # Java strings are UTF-16: a character beyond U+FFFF is written as two escaped surrogates.
    return "".join(out).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    result = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} is not KEY=VALUE")
        result[key.strip()] = value.strip()
    return result
