"""Fuzzing the broker's settings: any text for any core or default module key, and listener/KRaft
settings built from their own words, give a config or one ConfigError line, the listeners a list or
one ConfigError, and a broker built with the modules' settings starts or is refused in one line
(never another exception): a bad server.properties, --override or KAFKA_* variable is refused by
name, as Kafka's KafkaConfig refuses it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kafkapy.assembly import default_module_keys
from kafkapy.server.config import CORE_KEYS, BrokerConfig, ConfigError, ConfigKey
from kafkapy.server.listeners import resolve_listeners

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text that reaches the parsers' edges: digits of other scripts, signs, separators, and anything.
_WORDS = st.sampled_from(["", " ", "-1", "0", "1", "²", "٣", "1e3", "9" * 20, "true", "PLAINTEXT", "SSL",
                          "CONTROLLER", "broker", "controller", ",", ":", "://", "=", "\x00", "é"])
# (no line breaks: a refusal quotes the value, and a .properties or --override value holds none)
_LINE_BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_TEXT = st.lists(_WORDS | st.text(st.characters(blacklist_characters=_LINE_BREAKS), max_size=8),
                 max_size=4).map("".join)


MODULE_KEYS = default_module_keys()


@FUZZ
@given(st.dictionaries(st.sampled_from(sorted({k.name for k in (*CORE_KEYS, *MODULE_KEYS)})), _TEXT,
                       max_size=4))
def test_any_text_for_any_key_is_a_config_or_one_line(raw: dict[str, str]) -> None:
    """The core keys and the default modules' (their parsers run in the keys' validators)."""
    try:
        BrokerConfig.build(raw, extra_keys=MODULE_KEYS)
    except ConfigError as refused:
        assert "\n" not in str(refused) and str(refused)


_NAMES = st.sampled_from(["PLAINTEXT", "SSL", "CONTROLLER", "INTERNAL", "controller", "a-b", ""])
_HOSTS = st.sampled_from(["127.0.0.1", "", "localhost", "0.0.0.0", "[::1]", "::1", "é", "host:1"])
_PORTS = st.sampled_from(["0", "9092", "-1", "65536", "²", "٣", "x", ""])
_ENDPOINT = st.builds(lambda n, h, p: f"{n}://{h}:{p}", _NAMES, _HOSTS, _PORTS) | _TEXT
_ENDPOINTS = st.lists(_ENDPOINT, max_size=3).map(",".join)
_LISTENER_SETTINGS: dict[str, st.SearchStrategy[Any]] = {
    "listeners": _ENDPOINTS,
    "advertised.listeners": _ENDPOINTS,
    "process.roles": st.lists(st.sampled_from(["broker", "controller", "", "x"]), max_size=3).map(",".join),
    "controller.listener.names": st.lists(_NAMES, max_size=3).map(",".join),
    "node.id": st.sampled_from(["1", "-1", "²", "x"]),
    "controller.quorum.voters": st.sampled_from(["1@localhost:9093", "", "x", "1@:²"]),
    "inter.broker.listener.name": _NAMES,
    "listener.security.protocol.map": st.lists(st.builds(lambda n, p: f"{n}:{p}", _NAMES, st.sampled_from(
        ["PLAINTEXT", "SSL", "SASL_SSL", "x", ""])), max_size=3).map(",".join),
}


@FUZZ
@given(st.fixed_dictionaries({}, optional=_LISTENER_SETTINGS))
def test_listener_and_kraft_settings_are_listeners_or_one_line(raw: dict[str, str]) -> None:
    try:
        config = BrokerConfig.build(raw)
        resolve_listeners(config)
    except ConfigError as refused:
        assert "\n" not in str(refused) and str(refused)


@pytest.mark.parametrize("caps", ["metadata.version:x", "metadata.version:²", "metadata.version"])
def test_a_feature_cap_that_is_no_level_is_refused_in_one_line(caps: str) -> None:
    """supported.features.max's levels are read at the broker's start: a level in digits int() cannot
    read (a superscript two, a digit to str.isdigit) is refused by the key's check, not at the start."""
    with pytest.raises(ConfigError, match=f"invalid value .*{caps!r} is not feature:level"):
        BrokerConfig.build({"supported.features.max": caps})


# log.dir(s) would make directories where the test runs; class names would import what they name.
_MODULE_KEY_NAMES = sorted({k.name for k in MODULE_KEYS} - {k.name for k in CORE_KEYS} -
                           {"log.dir", "log.dirs", "replica.selector.class", "alter.config.policy.class.name",
                            "create.topic.policy.class.name"})


def _near_default(key: ConfigKey) -> st.SearchStrategy[str]:
    """Kafka's default, numbers around it (past the type's range too), and any text: most pass the
    validators, so the modules are built with them."""
    default = key.default
    if isinstance(default, bool) or key.type == "boolean":
        return st.sampled_from(["true", "false", "TRUE", "yes"])
    if isinstance(default, (int, float)) and key.type in ("int", "short", "long", "double"):
        half = default // 2 if isinstance(default, int) else default / 2
        return st.sampled_from([default, default * 2, half, 0, -1, 1, 2**31, 2**63]).map(str)
    if isinstance(default, list):
        return st.just(",".join(map(str, default))) | st.sampled_from(["", ",", "x"])
    return st.just("" if default is None else str(default)) | st.sampled_from(["", "x"])


_FUZZED_KEYS = [k for k in MODULE_KEYS if k.name in _MODULE_KEY_NAMES]
_MODULE_SETTINGS = st.lists(st.sampled_from(_FUZZED_KEYS).flatmap(
    lambda key: st.tuples(st.just(key.name), st.one_of(_near_default(key), _near_default(key), _TEXT))),
    min_size=1, max_size=3).map(dict)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_MODULE_SETTINGS)
def test_a_broker_starts_or_refuses_any_module_setting_in_one_line(raw: dict[str, str]) -> None:
    """The default modules read their keys as they are built: a broker starts (in memory, on an
    ephemeral port) or is refused with one ConfigError line."""
    from kafkapy import Broker

    try:
        with Broker(raw):
            event("started")  # --hypothesis-show-statistics: how many got past the checks
    except ConfigError as refused:
        assert "\n" not in str(refused) and str(refused)
