"""A SASL listener's settings, from Kafka's keys, checked when the broker starts.

``sasl.enabled.mechanisms`` (Kafka's default GSSAPI) or its per-listener override
``listener.name.<listener>.sasl.enabled.mechanisms`` names the mechanisms; kafkapy serves those in
SERVED_MECHANISMS, and a listener left with none of them is a ConfigError naming the key. PLAIN's
users come from the JAAS config Kafka reads for it: ``listener.name.<listener>.plain.sasl.jaas.config``,
else the broker-wide ``sasl.jaas.config``; the login module must be Kafka's PlainLoginModule.
Listener names in these keys are lower case, as Kafka's ListenerName.configPrefix makes them.
"""

from __future__ import annotations

import logging

import attrs

from kafkapy.server.config import BrokerConfig, ConfigError
from kafkapy.server.sasl.jaas import parse_jaas_config
from kafkapy.server.sasl.mechanism import SaslServer
from kafkapy.server.sasl.plain import PLAIN, PlainServer
from kafkapy.server.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from kafkapy.server.sasl.scram import CredentialLookup, ScramServer

__all__ = ["SERVED_MECHANISMS", "SaslSettings", "sasl_settings"]

log = logging.getLogger(__name__)

SERVED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_USER_OPTION = "user_"  # PlainLoginModule's option prefix for a user's password


@attrs.frozen
class SaslSettings:
    """What one SASL listener serves: its mechanisms, in the configured order, and PLAIN's users."""

    mechanisms: tuple[str, ...]
    plain_users: dict[str, str] = attrs.field(factory=dict, repr=False)  # name -> password

    def server(self, mechanism: str, scram_credentials: CredentialLookup) -> SaslServer:
        """A fresh server side for one exchange with an enabled ``mechanism``; SCRAM's look
        their users up with ``scram_credentials``."""
        if mechanism == PLAIN:
            return PlainServer(self.plain_users)
        if mechanism in SCRAM_MECHANISMS:
            return ScramServer(mechanism, scram_credentials)
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


def _plain_users(config: BrokerConfig, listener: str) -> dict[str, str]:
    key = _prefix(listener) + "plain.sasl.jaas.config"
    text = config.get(key)
    if text is None:
        key = "sasl.jaas.config"
        text = config[key]
    if text is None:
        raise ConfigError(f"listener {listener} enables PLAIN but neither "
                          f"{_prefix(listener)}plain.sasl.jaas.config nor sasl.jaas.config is set")
    entry = parse_jaas_config(str(text), key)
    if entry.login_module != PLAIN_LOGIN_MODULE:
        raise ConfigError(f"invalid value for {key}: PLAIN needs {PLAIN_LOGIN_MODULE}, "
                          f"not {entry.login_module}")
    users = {name[len(_USER_OPTION):]: password for name, password in entry.options.items()
             if name.startswith(_USER_OPTION) and len(name) > len(_USER_OPTION)}
    if not users:
        log.warning("%s has no user_<name>=\"<password>\" options: no PLAIN client can authenticate on %s",
                    key, listener)
    return users


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
    return SaslSettings(served, users)
