"""Kafka's validators of broker keys (its ConfigDef's Range, ValidString, ValidList, ...) held at
start and in alters of BROKER resources: every key kafkapy knows that has one takes the values in
range and refuses the others in Kafka's words, naming the key and the value; an alter of a dynamic
key is refused as Kafka 3.2+ refuses it (INVALID_REQUEST with the validator's bare message,
ConfigAdminManager.preprocess), validate_only alike, and nothing is stored."""

from __future__ import annotations

import os
import string
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from test_broker_configs import _describe, _incremental, _legacy

from kafkapy import Broker
from kafkapy.assembly import default_module_keys
from kafkapy.configs import ConfigsModule
from kafkapy.errors import ErrorCode
from kafkapy.server.config import CORE_KEYS, INERT_KEYS, BrokerConfig, ConfigError, ConfigKey
from kafkapy.server.kafka_keys import PER_BROKER, UPDATE_MODES
from kafkapy.validators import (
    AtLeast,
    Between,
    EachOneOf,
    HostPorts,
    MinusOneOr,
    NonEmptyString,
    NonNull,
    OneOf,
    java_text,
)

ROOT = Path(__file__).resolve().parents[2]
SET = 0
DEFAULT_CONFIG, INT_TYPE = 5, 3  # DescribeConfigs' ConfigSource and ConfigType
_TYPE_RANGES = {"short": (-(2**15), 2**15 - 1), "int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
_DOUBLE_LIMIT = 1e300  # far inside Java's double range, so every value prints as Java prints it
_WORD = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=12)


def _all_keys() -> dict[str, ConfigKey]:
    return {key.name: key for key in (*CORE_KEYS, *INERT_KEYS, *default_module_keys())}


# Every key kafkapy knows whose validator is one of Kafka's (the vocabulary of kafkapy.validators)
# that values can be generated for (HostPorts and NonNull have examples of their own below)
_GENERATED = (AtLeast, Between, MinusOneOr, OneOf, EachOneOf, NonEmptyString)
RANGED = sorted((key for key in _all_keys().values()
                 if isinstance(key.validator, _GENERATED)),
                key=lambda key: key.name)


def _numbers(kind: str, low: float, high: float) -> st.SearchStrategy[Any]:
    """Values of ``kind`` in [low, high], clipped to the type's own range."""
    if kind == "double":
        return st.floats(max(low, -_DOUBLE_LIMIT), min(high, _DOUBLE_LIMIT), allow_nan=False)
    type_low, type_high = _TYPE_RANGES[kind]
    return st.integers(max(int(low), type_low), min(int(high), type_high))


def _type_bounds(kind: str) -> tuple[float, float]:
    return (-_DOUBLE_LIMIT, _DOUBLE_LIMIT) if kind == "double" else _TYPE_RANGES[kind]


def _below(kind: str, low: float) -> st.SearchStrategy[Any] | None:
    floor = _type_bounds(kind)[0]
    if low <= floor:
        return None
    if kind == "double":
        return st.floats(-_DOUBLE_LIMIT, low, exclude_max=True, allow_nan=False)
    return st.integers(int(floor), int(low) - 1)


def _above(kind: str, high: float) -> st.SearchStrategy[Any] | None:
    ceiling = _type_bounds(kind)[1]
    if high >= ceiling:
        return None
    if kind == "double":
        return st.floats(high, _DOUBLE_LIMIT, exclude_min=True, allow_nan=False)
    return st.integers(int(high) + 1, int(ceiling))


def _any_case(choice: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(choice), max_size=len(choice)).map(
        lambda upper: "".join(c.upper() if u else c.lower() for c, u in zip(choice, upper)))


def inside(key: ConfigKey) -> st.SearchStrategy[Any]:
    """Values Kafka's validator of ``key`` takes."""
    check = key.validator
    if isinstance(check, AtLeast):
        return _numbers(key.type, check.low, _type_bounds(key.type)[1])
    if isinstance(check, Between):
        return _numbers(key.type, check.low, check.high)
    if isinstance(check, MinusOneOr):
        high = _type_bounds(key.type)[1] if check.high is None else check.high
        return st.just(-1) | _numbers(key.type, check.low, high)
    if isinstance(check, OneOf):
        choices = st.sampled_from(check.choices)
        return choices.flatmap(_any_case) if check.ignore_case else choices
    if isinstance(check, EachOneOf):
        return st.lists(st.sampled_from(check.choices), min_size=1).map(",".join)
    assert isinstance(check, NonEmptyString)
    return _WORD


def _refused_value(key: ConfigKey) -> st.SearchStrategy[tuple[Any, str, str]] | None:
    """(a value Kafka's validator of ``key`` refuses, the value as the message names it, Kafka's
    reason), or None when the key's type holds no such value."""
    check = key.validator

    def number(reason: str) -> Any:
        return lambda v: (v, java_text(float(v) if key.type == "double" else v), reason)

    if isinstance(check, (AtLeast, Between)):
        ways = []
        below = _below(key.type, check.low)
        if below is not None:
            ways.append(below.map(number(f"Value must be at least {java_text(check.low)}")))
        above = _above(key.type, check.high) if isinstance(check, Between) else None
        if above is not None:
            ways.append(above.map(number(f"Value must be no more than {java_text(check.high)}")))
        return st.one_of(ways) if ways else None
    if isinstance(check, MinusOneOr):
        ways = [st.integers(_TYPE_RANGES[key.type][0], check.low - 1).filter(lambda v: v != -1)]
        if check.high is not None:
            ways.append(st.integers(check.high + 1, _TYPE_RANGES[key.type][1]))
        return st.one_of(ways).map(number(check.message))
    if isinstance(check, OneOf):
        known = {c.upper() for c in check.choices} if check.ignore_case else set(check.choices)
        bad = _WORD.filter(lambda w: (w.upper() if check.ignore_case else w) not in known)
        listed = ", ".join(c.upper() if check.ignore_case else c for c in check.choices)
        reason = f"String must be one of{' (case insensitive)' if check.ignore_case else ''}: {listed}"
        return bad.map(lambda w: (w, w, reason))
    if isinstance(check, EachOneOf):
        bad = _WORD.filter(lambda w: w not in check.choices)
        reason = "String must be one of: " + ", ".join(check.choices)
        return st.tuples(st.lists(st.sampled_from(check.choices), max_size=3), bad).map(
            lambda pair: (",".join([*pair[0], pair[1]]), pair[1], reason))
    assert isinstance(check, NonEmptyString)
    return st.just(("", "", "String must be non-empty"))


REFUSABLE = [key for key in RANGED if _refused_value(key) is not None]


def _build(name: str, value: Any) -> BrokerConfig:
    return BrokerConfig.build({name: value}, extra_keys=default_module_keys())


def test_the_validators_cover_kafkas_ranged_keys() -> None:
    """A sample of Kafka's ConfigDef facts, so a lost validator fails here by name."""
    keys = _all_keys()
    expected = {
        "num.io.threads": AtLeast(1), "background.threads": AtLeast(1), "message.max.bytes": AtLeast(0),
        "log.segment.bytes": AtLeast(14), "log.roll.hours": AtLeast(1), "fetch.max.bytes": AtLeast(1024),
        "remote.log.manager.task.retry.jitter": Between(0, 0.5), "group.share.max.groups": Between(1, 100),
        "log.cleaner.min.cleanable.ratio": Between(0, 1), "password.encoder.iterations": AtLeast(1024),
        "process.roles": EachOneOf(("broker", "controller")),
        "log.cleanup.policy": EachOneOf(("compact", "delete")),
        "ssl.client.auth": OneOf(("required", "requested", "none")), "authorizer.class.name": NonNull(),
        "remote.log.metadata.manager.listener.name": NonEmptyString(),
        "controller.quorum.voters": HostPorts(with_ids=True),
        "group.consumer.session.timeout.ms": AtLeast(1),
    }
    assert {name: keys[name].validator for name in expected} == expected
    assert len(RANGED) >= 120


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(RANGED).flatmap(lambda key: st.tuples(st.just(key), inside(key))))
def test_a_value_in_range_is_taken_at_start(key_and_value: tuple[ConfigKey, Any]) -> None:
    key, value = key_and_value
    config = _build(key.name, value)
    if key.type in _TYPE_RANGES:
        assert config[key.name] == value


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(REFUSABLE).flatmap(lambda key: st.tuples(st.just(key), _refused_value(key))))  # type: ignore[arg-type]
def test_a_value_out_of_range_is_refused_at_start_naming_key_and_value(
        key_and_refusal: tuple[ConfigKey, tuple[Any, str, str]]) -> None:
    key, (value, shown, reason) = key_and_refusal
    with pytest.raises(ConfigError) as refused:
        _build(key.name, value)
    assert str(refused.value) == f"Invalid value {shown} for configuration {key.name}: {reason}"


@pytest.mark.parametrize(("name", "value", "message"), [
    ("num.io.threads", "0", "Invalid value 0 for configuration num.io.threads: Value must be at least 1"),
    ("group.consumer.migration.policy", "sideways", "Invalid value sideways for configuration "
     "group.consumer.migration.policy: String must be one of (case insensitive): DISABLED, DOWNGRADE, "
     "UPGRADE, BIDIRECTIONAL"),
    ("remote.log.manager.copier.thread.pool.size", "0", "Invalid value 0 for configuration "
     "remote.log.manager.copier.thread.pool.size: Value can be -1 or greater than 0"),
    ("compression.gzip.level", "10", "Invalid value 10 for configuration compression.gzip.level: "
     "Value must be between 1 and 9, or equal to -1"),
    ("log.cleaner.min.cleanable.ratio", "2", "Invalid value 2.0 for configuration "
     "log.cleaner.min.cleanable.ratio: Value must be no more than 1"),
    ("authorizer.class.name", None, "Invalid value null for configuration authorizer.class.name: "
     "entry must be non null"),
    ("controller.quorum.voters", "1@localhost:9093,2@:x", "Failed to parse host name from entry 2@:x for the "
     "configuration controller.quorum.voters. Each entry should be in the form `{id}@{host}:{port}`."),
    ("controller.quorum.voters", "localhost:9093", "Invalid configuration value for "
     "controller.quorum.voters. Each entry should be in the form `{id}@{host}:{port}`."),
    ("controller.quorum.voters", "one@localhost:9093", "Failed to parse voter ID as an integer from one"),
    ("controller.quorum.bootstrap.servers", "localhost", 'Failed to parse host name from localhost for the '
     'configuration controller.quorum.bootstrap.servers. Each entry should be in the form "{host}:{port}"'),
])
def test_kafkas_special_validators_word_their_refusal_as_kafka_does(name: str, value: Any,
                                                                   message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        _build(name, value)
    assert str(refused.value) == message


def test_kafkas_quorum_lists_are_taken_in_their_forms() -> None:
    config = _build("controller.quorum.voters", "1@localhost:9093,2@[::1]:9094")
    assert config["controller.quorum.voters"] == ["1@localhost:9093", "2@[::1]:9094"]
    assert _build("controller.quorum.bootstrap.servers", "a:1,b.example:2")


def test_the_embedded_broker_refuses_to_start_with_kafkas_line() -> None:
    with pytest.raises(ConfigError) as refused, Broker({"num.io.threads": 0}):
        pass
    assert str(refused.value) == "Invalid value 0 for configuration num.io.threads: Value must be at least 1"


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this tree's kafkapy, not the venv's
    return subprocess.run([sys.executable, "-m", "kafkapy.cli", "serve", *args], capture_output=True,
                          text=True, timeout=60, env=env)


def test_serve_refuses_an_out_of_range_override_in_one_line_and_exits_2() -> None:
    done = _serve("--override", "num.io.threads=0", "--override", "listeners=PLAINTEXT://127.0.0.1:0")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "kafkapy serve: error: Invalid value 0 for configuration num.io.threads: Value must be at least 1"]


def test_serve_refuses_an_out_of_range_properties_file_in_one_line(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("listeners=PLAINTEXT://127.0.0.1:0\nprocess.roles=broker,voter\n")
    done = _serve("--config", str(properties))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "kafkapy serve: error: Invalid value voter for configuration process.roles: String must be one of: "
        "broker, controller"]


# --- alters of dynamic keys ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": "1"}) as b:
        yield b


def _configs(broker: Broker) -> ConfigsModule:
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, ConfigsModule))


def _dynamic_refusable(broker: Broker) -> list[ConfigKey]:
    configs = _configs(broker)
    return [key for key in REFUSABLE if configs.dynamic(key.name) is not None]


def _stored(broker: Broker) -> tuple[dict[str, str], dict[str, str]]:
    assert broker.store is not None
    return broker.store.entity_config("brokers/<default>"), broker.store.entity_config("brokers/1")


def test_the_dynamic_keys_with_validators_include_inert_and_acted_on_ones(broker: Broker) -> None:
    names = {key.name for key in _dynamic_refusable(broker)}
    assert {"num.io.threads", "log.cleaner.threads", "remote.fetch.max.wait.ms", "max.connections",
            "log.segment.bytes", "log.cleanup.policy", "compression.type",
            "log.cleaner.min.cleanable.ratio"} <= names


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_an_out_of_range_dynamic_value_is_refused_by_both_alters_and_nothing_is_stored(
        broker: Broker, data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(_dynamic_refusable(broker)))
    value, shown, reason = data.draw(_refused_value(key))  # type: ignore[arg-type]
    at_default = UPDATE_MODES.get(key.name) != PER_BROKER and data.draw(st.booleans())
    resource = "" if at_default else "1"
    validate_only = data.draw(st.booleans())
    text = repr(value) if isinstance(value, float) else str(value)
    before = _stored(broker)
    expected = (ErrorCode.INVALID_REQUEST, f"Invalid value {shown} for configuration {key.name}: {reason}")
    address = broker.bootstrap_servers
    assert _incremental(address, resource, [(key.name, SET, text)], validate_only) == expected
    assert _legacy(broker.bootstrap_servers, resource, {key.name: text}) == expected
    assert _stored(broker) == before


def test_confluent_kafka_is_refused_per_resource_and_validate_only_applies_nothing(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("kept", 1, 1)], request_timeout=10)["kept"].result(timeout=10)
    refused = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("num.io.threads", "0", incremental_operation=AlterConfigOpType.SET)])
    taken = ConfigResource(ResourceType.TOPIC, "kept", incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    for validate_only in (True, False):
        before = _stored(broker)
        futures = admin.incremental_alter_configs([refused, taken], validate_only=validate_only,
                                                  request_timeout=10)
        with pytest.raises(KafkaException) as raised:
            futures[refused].result(timeout=10)
        error: KafkaError = raised.value.args[0]
        assert error.code() == KafkaError.INVALID_REQUEST
        assert error.str() == "Invalid value 0 for configuration num.io.threads: Value must be at least 1"
        assert futures[taken].result(timeout=10) is None  # the other resource of the request is unaffected
        assert _stored(broker) == before
        assert broker.store is not None
        expected = {} if validate_only else {"retention.ms": "60000"}
        assert broker.store.entity_config("topics/kept") == expected
    # DescribeConfigs: the key's value, documentation and mode as before the refusals
    code, _, described = _describe(broker.bootstrap_servers, "1", ["num.io.threads"])
    assert code == ErrorCode.NONE
    entry = described["num.io.threads"]
    assert (entry["value"], entry["read_only"], entry["config_source"]) == ("8", False, DEFAULT_CONFIG)
    assert entry["documentation"] and entry["config_type"] == INT_TYPE


def test_kafka_python_legacy_alter_is_refused_with_kafkas_message(broker: Broker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    try:
        answer = admin.alter_configs([KpConfigResource(ConfigResourceType.BROKER, "1",
                                                       configs={"log.cleanup.policy": "compact,shred"})])
    finally:
        admin.close()
    assert answer["broker"]["1"].startswith("[Error 42] InvalidRequestError")
    assert answer["broker"]["1"].endswith(
        "Invalid value shred for configuration log.cleanup.policy: String must be one of: compact, delete")
    assert _stored(broker)[1] == {}
