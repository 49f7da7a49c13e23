"""A SASL listener's settings, from Kafka's keys, checked when the broker starts.

``sasl.enabled.mechanisms`` (Kafka's default GSSAPI) or its per-listener override
``listener.name.<listener>.sasl.enabled.mechanisms`` names the mechanisms; kafkapy serves those in
SERVED_MECHANISMS, and a listener left with none of them is a ConfigError naming the key. PLAIN's
users come from the JAAS config Kafka reads for it: ``listener.name.<listener>.plain.sasl.jaas.config``,
else the broker-wide ``sasl.jaas.config``; the login module must be Kafka's PlainLoginModule.
OAUTHBEARER's validator options come the same way (``...oauthbearer.sasl.jaas.config``, Kafka's
OAuthBearerLoginModule). Signed OAUTHBEARER tokens (KIP-768) are validated when the listener names
Kafka's OAuthBearerValidatorCallbackHandler in ``listener.name.<listener>.oauthbearer.sasl.server.
callback.handler.class``, as Kafka chooses its validator; its ``sasl.oauthbearer.*`` settings are read
as Kafka's ConfigurationUtils reads them (oauth_setting). ``connections.max.reauth.ms`` (KIP-368) is
read per mechanism, as Kafka's SaslChannelBuilder reads it: ``listener.name.<listener>.<mechanism>.``,
then ``listener.name.<listener>.``, then the broker-wide key. Listener names and mechanisms in these
keys are lower case, as Kafka's ListenerName.configPrefix and saslMechanismConfigPrefix make them.
"""

from __future__ import annotations

import logging
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from kafkapy.server.config import BrokerConfig, ConfigError
from kafkapy.server.sasl.jaas import JaasEntry, parse_jaas_config
from kafkapy.server.sasl.mechanism import SaslServer
from kafkapy.server.sasl.oauthbearer import OAUTHBEARER, OAuthBearerServer, TokenValidator
from kafkapy.server.sasl.plain import PLAIN, PlainServer
from kafkapy.server.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from kafkapy.server.sasl.scram import CredentialLookup, ScramServer
from kafkapy.server.sasl.unsecured_jws import UnsecuredValidator

if TYPE_CHECKING:
    from kafkapy.server.sasl.jwks import KeySource
    from kafkapy.server.sasl.signed_jws import SignedValidator

__all__ = ["SERVED_MECHANISMS", "SaslSettings", "jaas_trust_context", "sasl_settings"]

log = logging.getLogger(__name__)

SERVED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
CALLBACK_HANDLER_KEY = "sasl.server.callback.handler.class"
SIGNED_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
UNSECURED_VALIDATOR = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                       "OAuthBearerUnsecuredValidatorCallbackHandler")
# The handler class names kafkapy serves (Kafka's 3.x name of the signed one is deprecated, still served).
DEPRECATED_SIGNED_VALIDATOR = ("org.apache.kafka.common.security.oauthbearer.secured."
                               "OAuthBearerValidatorCallbackHandler")
VALIDATORS = {SIGNED_VALIDATOR: "signed", DEPRECATED_SIGNED_VALIDATOR: "signed",
              UNSECURED_VALIDATOR: "unsecured"}
JWKS_URL_KEY = "sasl.oauthbearer.jwks.endpoint.url"
# Kafka's signed-token settings (SaslConfigs) and their defaults.
OAUTH_DEFAULTS: dict[str, str | None] = {
    JWKS_URL_KEY: None,
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "3600000",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "100",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "10000",
    "sasl.oauthbearer.clock.skew.seconds": "30",
    "sasl.oauthbearer.expected.audience": None,
    "sasl.oauthbearer.expected.issuer": None,
    "sasl.oauthbearer.scope.claim.name": "scope",
    "sasl.oauthbearer.sub.claim.name": "sub",
}
# JAAS options Kafka's JaasOptionsUtils reads to trust an https JWKS endpoint (PEM only here).
TRUSTSTORE_LOCATION_OPTION = "ssl.truststore.location"
TRUSTSTORE_TYPE_OPTION = "ssl.truststore.type"
TRUSTSTORE_CERTIFICATES_OPTION = "ssl.truststore.certificates"
MAX_REAUTH_KEY = "connections.max.reauth.ms"
_USER_OPTION = "user_"  # PlainLoginModule's option prefix for a user's password


@attrs.frozen
class SaslSettings:
    """What one SASL listener serves: its mechanisms, in the configured order, and PLAIN's users."""

    mechanisms: tuple[str, ...]
    plain_users: dict[str, str] = attrs.field(factory=dict, repr=False)  # name -> password
    oauthbearer: TokenValidator = attrs.field(factory=UnsecuredValidator)
    max_reauth_ms: dict[str, int] = attrs.field(factory=dict)  # mechanism -> connections.max.reauth.ms

    def server(self, mechanism: str, scram_credentials: CredentialLookup,
               now_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> SaslServer:
        """A fresh server side for one exchange with an enabled ``mechanism``; SCRAM's look
        their users up with ``scram_credentials``, OAUTHBEARER's check token times at ``now_ms()``."""
        if mechanism == PLAIN:
            return PlainServer(self.plain_users)
        if mechanism in SCRAM_MECHANISMS:
            return ScramServer(mechanism, scram_credentials)
        if mechanism == OAUTHBEARER:
            return OAuthBearerServer(self.oauthbearer, now_ms)
        raise ValueError(f"{mechanism} is not enabled")

    def start(self) -> None:
        """Load what the listener's validators need (a signed-token validator's JWKS): once, at
        broker start, off the event loop; ConfigError naming the key if it cannot be had."""
        self.oauthbearer.start()

    def close(self) -> None:
        """Stop what ``start`` started (a JWKS refresh thread)."""
        self.oauthbearer.close()


def _prefix(listener: str) -> str:
    return f"listener.name.{listener.lower()}."


def _enabled_mechanisms(config: BrokerConfig, listener: str) -> tuple[str, tuple[str, ...]]:
    """(the key the list came from, the list)."""
    key = _prefix(listener) + "sasl.enabled.mechanisms"
    raw = config.get(key)
    if raw is None:
        key = "sasl.enabled.mechanisms"
        raw = config[key]
    items = raw if isinstance(raw, list) else str(raw).split(",")
    return key, tuple(str(item).strip().upper() for item in items if str(item).strip())


def _jaas_entry(config: BrokerConfig, listener: str, mechanism: str,
                login_module: str) -> tuple[str, JaasEntry]:
    """(the key it came from, the JAAS entry) ``mechanism`` reads on ``listener``; ConfigError if
    there is none or its login module is not ``login_module``."""
    key = f"{_prefix(listener)}{mechanism.lower()}.sasl.jaas.config"
    text = config.get(key)
    if text is None:
        key = "sasl.jaas.config"
        text = config[key]
    if text is None:
        raise ConfigError(f"listener {listener} enables {mechanism} but neither {_prefix(listener)}"
                          f"{mechanism.lower()}.sasl.jaas.config nor sasl.jaas.config is set")
    entry = parse_jaas_config(str(text), key)
    if entry.login_module != login_module:
        raise ConfigError(f"invalid value for {key}: {mechanism} needs {login_module}, "
                          f"not {entry.login_module}")
    return key, entry


def _plain_users(config: BrokerConfig, listener: str) -> dict[str, str]:
    key, entry = _jaas_entry(config, listener, PLAIN, PLAIN_LOGIN_MODULE)
    users = {name[len(_USER_OPTION):]: password for name, password in entry.options.items()
             if name.startswith(_USER_OPTION) and len(name) > len(_USER_OPTION)}
    if not users:
        log.warning("%s has no user_<name>=\"<password>\" options: no PLAIN client can authenticate on %s",
                    key, listener)
    return users


def oauth_setting(config: BrokerConfig, listener: str, name: str) -> tuple[str, str | None]:
    """(the key it came from, its text) for OAUTHBEARER setting ``name`` on ``listener``, looked up as
    Kafka's ConfigurationUtils does over the listener's configs: ``listener.name.<l>.oauthbearer.<name>``,
    ``oauthbearer.<name>``, ``listener.name.<l>.<name>``, ``<name>``, else Kafka's default."""
    prefix = _prefix(listener)
    for key in (f"{prefix}oauthbearer.{name}", f"oauthbearer.{name}", f"{prefix}{name}", name):
        raw = config.get(key, config.originals.get(key))  # typed if declared (a list stays a list)
        if raw is not None:
            return key, ",".join(map(str, raw)) if isinstance(raw, (list, tuple)) else str(raw)
    return name, OAUTH_DEFAULTS.get(name)


def _handler(config: BrokerConfig, listener: str) -> str:
    """The validator the listener's OAUTHBEARER callback handler names, "signed" or "unsecured" (Kafka
    reads only the mechanism-prefixed key; its default is the unsecured validator)."""
    key = f"{_prefix(listener)}oauthbearer.{CALLBACK_HANDLER_KEY}"
    handler = config.originals.get(key)
    if handler is None:
        handler = config.originals.get(f"oauthbearer.{CALLBACK_HANDLER_KEY}")
        key = f"oauthbearer.{CALLBACK_HANDLER_KEY}"
    if handler is None:
        key = f"{_prefix(listener)}oauthbearer.{CALLBACK_HANDLER_KEY}"
        if config.originals.get(CALLBACK_HANDLER_KEY):
            log.warning("%s is set, but Kafka reads a server callback handler only from %s (ignored)",
                        CALLBACK_HANDLER_KEY, key)
        return "unsecured"
    kind = VALIDATORS.get(handler.strip())
    if kind is None:
        raise ConfigError(f"invalid value {handler.strip()!r} for {key}: kafkapy serves Kafka's own "
                          f"OAUTHBEARER validators ({SIGNED_VALIDATOR} for signed tokens, "
                          f"{UNSECURED_VALIDATOR}, the default), not custom callback handlers")
    return kind


def _oauthbearer_validator(config: BrokerConfig, listener: str) -> TokenValidator:
    """The validator Kafka's OAUTHBEARER callback handler for ``listener`` would be: unsecured JWTs
    (the default), with the JAAS entry's options, or signed ones (KIP-768)."""
    key, entry = _jaas_entry(config, listener, OAUTHBEARER, OAUTHBEARER_LOGIN_MODULE)
    if _handler(config, listener) == "signed":
        return _signed_validator(config, listener, entry)
    url_key, url = oauth_setting(config, listener, JWKS_URL_KEY)
    if url:
        log.warning("%s is set, but listener %s validates unsecured OAUTHBEARER tokens: as in Kafka, the "
                    "JWKS is used only when %soauthbearer.%s is %s", url_key, listener, _prefix(listener),
                    CALLBACK_HANDLER_KEY, SIGNED_VALIDATOR)
    return UnsecuredValidator.from_jaas_options(entry.options, key)


def _text(config: BrokerConfig, listener: str, name: str) -> str | None:
    """A string setting, trimmed; None if unset or blank (ConfigurationUtils.validateString)."""
    raw = oauth_setting(config, listener, name)[1]
    return raw.strip() or None if raw is not None else None


def _long(config: BrokerConfig, listener: str, name: str, minimum: int) -> int:
    key, raw = oauth_setting(config, listener, name)
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"invalid value {raw!r} for {key}: not a number") from None
    if value < minimum:
        raise ConfigError(f"invalid value {value} for {key}: must be at least {minimum}")
    return value


def _signed_validator(config: BrokerConfig, listener: str, entry: JaasEntry) -> SignedValidator:
    try:
        from kafkapy.server.sasl.signed_jws import SignedValidator
    except ImportError as exc:
        key = f"{_prefix(listener)}oauthbearer.{CALLBACK_HANDLER_KEY}"
        raise ConfigError(f"invalid value for {key}: validating signed OAUTHBEARER tokens needs the "
                          f"'cryptography' package: pip install 'kafkapy[oauth]' ({exc})") from None
    audience = _text(config, listener, "sasl.oauthbearer.expected.audience")
    for name in ("sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.sub.claim.name"):
        if _text(config, listener, name) is None:
            key = oauth_setting(config, listener, name)[0]
            raise ConfigError(f"invalid value for {key}: must not be empty")
    return SignedValidator(
        _key_source(config, listener, entry),
        clock_skew_s=_long(config, listener, "sasl.oauthbearer.clock.skew.seconds", -(2**31)),
        expected_audience=tuple(a.strip() for a in (audience or "").split(",") if a.strip()),
        expected_issuer=_text(config, listener, "sasl.oauthbearer.expected.issuer"),
        scope_claim_name=_text(config, listener, "sasl.oauthbearer.scope.claim.name") or "scope",
        sub_claim_name=_text(config, listener, "sasl.oauthbearer.sub.claim.name") or "sub")


def _key_source(config: BrokerConfig, listener: str, entry: JaasEntry) -> KeySource:
    """VerificationKeyResolverFactory: a file read once, or an http(s) endpoint refreshed."""
    from kafkapy.server.sasl.jwks import FileJwks, HttpJwks

    key, raw = oauth_setting(config, listener, JWKS_URL_KEY)
    url = (raw or "").strip()
    if not url:
        raise ConfigError(f"{key} must be set: {SIGNED_VALIDATOR} validates tokens with the keys it names")
    parsed = urllib.parse.urlsplit(url)
    scheme = parsed.scheme.lower()
    if scheme not in ("http", "https", "file"):
        raise ConfigError(f"invalid value {url!r} for {key}: only http, https and file URLs are supported")
    if scheme == "file":
        path = Path(urllib.request.url2pathname(parsed.path)).absolute()
        if not path.is_file():
            raise ConfigError(f"invalid value {url!r} for {key}: {path} is not a readable file")
        return FileJwks(path, url)
    context = jaas_trust_context(entry.options, key) if scheme == "https" else None
    return HttpJwks(url, _long(config, listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms", 1),
                    _long(config, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 0),
                    _long(config, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 0),
                    context)


def jaas_trust_context(options: Mapping[str, str], key: str) -> ssl.SSLContext:
    """The TLS context for an https OAuth endpoint (a broker's JWKS, a client's token endpoint): the
    system's CAs, or the JAAS entry's PEM trust store (``ssl.truststore.location`` or
    ``ssl.truststore.certificates`` with ``ssl.truststore.type=PEM``, as Kafka's JaasOptionsUtils
    reads them); ConfigError naming ``key`` if that store cannot be used."""
    context = ssl.create_default_context()
    location = options.get(TRUSTSTORE_LOCATION_OPTION, "").strip()
    certificates = options.get(TRUSTSTORE_CERTIFICATES_OPTION, "").strip()
    if location or certificates:
        kind = options.get(TRUSTSTORE_TYPE_OPTION, "JKS").strip().upper()
        if kind != "PEM":
            raise ConfigError(f"invalid value for {key}'s JAAS entry: {TRUSTSTORE_TYPE_OPTION} {kind} is not "
                              "served; kafkapy reads PEM trust stores only")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # only the store's CAs, as Kafka trusts them
        try:
            if location:
                context.load_verify_locations(cafile=location)
            if certificates:
                context.load_verify_locations(cadata=certificates)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"invalid trust store for {key} (JAAS {TRUSTSTORE_LOCATION_OPTION}/"
                              f"{TRUSTSTORE_CERTIFICATES_OPTION}): {exc}") from None
    return context  # the host name is always checked (Kafka's HTTPS client checks it whatever the options)


def _max_reauth_ms(config: BrokerConfig, listener: str, mechanism: str) -> int:
    """connections.max.reauth.ms for ``mechanism`` on ``listener`` (0 or less: no limit)."""
    prefix = _prefix(listener)
    for key in (f"{prefix}{mechanism.lower()}.{MAX_REAUTH_KEY}", f"{prefix}{MAX_REAUTH_KEY}"):
        raw = config.get(key)
        if raw is not None:
            try:
                return int(raw)
            except (TypeError, ValueError):
                raise ConfigError(f"invalid value {raw!r} for {key}: not a long") from None
    return int(config[MAX_REAUTH_KEY])


def sasl_settings(config: BrokerConfig, listener: str) -> SaslSettings:
    """The settings of SASL listener ``listener``; ConfigError naming the key at fault."""
    key, enabled = _enabled_mechanisms(config, listener)
    served = tuple(m for m in enabled if m in SERVED_MECHANISMS)
    if not served:
        raise ConfigError(f"invalid value {','.join(enabled) or '(empty)'} for {key}: listener {listener} "
                          f"enables no SASL mechanism kafkapy serves ({', '.join(SERVED_MECHANISMS)})")
    skipped = [m for m in enabled if m not in SERVED_MECHANISMS]
    if skipped:
        log.warning("%s: listener %s does not serve %s (kafkapy serves %s)", key, listener,
                    ", ".join(skipped), ", ".join(SERVED_MECHANISMS))
    users = _plain_users(config, listener) if PLAIN in served else {}
    validator = _oauthbearer_validator(config, listener) if OAUTHBEARER in served else UnsecuredValidator()
    return SaslSettings(served, users, validator, {m: _max_reauth_ms(config, listener, m) for m in served})
