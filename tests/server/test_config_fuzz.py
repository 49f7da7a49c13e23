"""Fuzzing the broker's settings: any text for any core key, and listener/KRaft settings built from
their own words, give a config or one ConfigError line, and the listeners a list or one ConfigError
(never another exception): a bad server.properties, --override or KAFKA_* variable is refused by
name, as Kafka's KafkaConfig refuses it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.server.config import CORE_KEYS, BrokerConfig, ConfigError
from kafkapy.server.listeners import resolve_listeners

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text that reaches the parsers' edges: digits of other scripts, signs, separators, and anything.
_WORDS = st.sampled_from(["", " ", "-1", "0", "1", "²", "٣", "1e3", "9" * 20, "true", "PLAINTEXT", "SSL",
                          "CONTROLLER", "broker", "controller", ",", ":", "://", "=", "\x00", "é"])
# (no line breaks: a refusal quotes the value, and a .properties or --override value holds none)
_LINE_BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_TEXT = st.lists(_WORDS | st.text(st.characters(blacklist_characters=_LINE_BREAKS), max_size=8),
                 max_size=4).map("".join)


@FUZZ
@given(st.dictionaries(st.sampled_from(sorted(k.name for k in CORE_KEYS)), _TEXT, max_size=4))
def test_any_text_for_any_core_key_is_a_config_or_one_line(raw: dict[str, str]) -> None:
    try:
        BrokerConfig.build(raw)
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
