"""A SASL listener's settings, from Kafka's keys, checked when the broker starts.

``sasl.enabled.mechanisms`` (Kafka's default GSSAPI) or its per-listener override
``listener.name.<listener>.sasl.enabled.mechanisms`` names the mechanisms; kafkapy serves those in
SERVED_MECHANISMS, and a listener left with none of them is a ConfigError naming the key. PLAIN's
users come from the JAAS config Kafka reads for it: ``listener.name.<listener>.plain.sasl.jaas.config``,
else the broker-wide ``sasl.jaas.config``; the login module must be Kafka's PlainLoginModule.
OAUTHBEARER's validator options come the same way (``...oauthbearer.sasl.jaas.config``, Kafka's
OAuthBearerLoginModule). ``connections.max.reauth.ms`` (KIP-368) is read per mechanism, as Kafka's
SaslChannelBuilder reads it: ``listener.name.<listener>.<mechanism>.``, then ``listener.name.<listener>.``,
then the broker-wide key. Listener names and mechanisms in these keys are lower case, as Kafka's
ListenerName.configPrefix and saslMechanismConfigPrefix make them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import attrs

from kafkapy.server.config import BrokerConfig, ConfigError
from kafkapy.server.sasl.jaas import JaasEntry, parse_jaas_config
from kafkapy.server.sasl.mechanism import SaslServer
from kafkapy.server.sasl.oauthbearer import OAUTHBEARER, OAuthBearerServer
from kafkapy.server.sasl.plain import PLAIN, PlainServer
from kafkapy.server.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from kafkapy.server.sasl.scram import CredentialLookup, ScramServer
from kafkapy.server.sasl.unsecured_jws import UnsecuredValidator

__all__ = ["SERVED_MECHANISMS", "SaslSettings", "sasl_settings"]

log = logging.getLogger(__name__)

SERVED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
# Kafka's keys for validating signed tokens (KIP-768) or plugging a validator in: not served.
_SECURED_OAUTHBEARER_KEYS = ("sasl.oauthbearer.jwks.endpoint.url", "sasl.server.callback.handler.class")
MAX_REAUTH_KEY = "connections.max.reauth.ms"
_USER_OPTION = "user_"  # PlainLoginModule's option prefix for a user's password


@attrs.frozen
class SaslSettings:
    """What one SASL listener serves: its mechanisms, in the configured order, and PLAIN's users."""

    mechanisms: tuple[str, ...]
    plain_users: dict[str, str] = attrs.field(factory=dict, repr=False)  # name -> password
    oauthbearer: UnsecuredValidator = attrs.field(factory=UnsecuredValidator)
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


def _oauthbearer_validator(config: BrokerConfig, listener: str) -> UnsecuredValidator:
    """Kafka's default OAUTHBEARER validation: unsecured JWTs, with the JAAS entry's options."""
    for name in _SECURED_OAUTHBEARER_KEYS:
        for key in (f"{_prefix(listener)}oauthbearer.{name}", f"{_prefix(listener)}{name}", name):
            if config.originals.get(key):
                raise ConfigError(f"{key} is set, but kafkapy validates only unsecured OAUTHBEARER tokens "
                                  "(Kafka's default OAuthBearerUnsecuredValidatorCallbackHandler): signed "
                                  "tokens (KIP-768) and custom callback handlers are not served")
    key, entry = _jaas_entry(config, listener, OAUTHBEARER, OAUTHBEARER_LOGIN_MODULE)
    return UnsecuredValidator.from_jaas_options(entry.options, key)


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
