"""The broker's configuration: properties files, dicts, overrides, Kafka's names and defaults."""

from __future__ import annotations

import logging
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy import Broker
from kafkapy.server.config import BrokerConfig, ConfigError, load_properties, parse_overrides

PROPERTIES = """\
# A server.properties as Kafka ships them
! bang comments too
   # and indented ones
broker.id=7
socket.request.max.bytes : 2048
connections.max.idle.ms 1500
listeners=PLAINTEXT://127.0.0.1:0,\\
          INTERNAL://127.0.0.1:0
listener.security.protocol.map = PLAINTEXT:PLAINTEXT,\\
    INTERNAL:PLAINTEXT
# a comment ending in a backslash does not continue \\
quota.window.num=5

observer.class.names=pkg.mod.First, pkg.mod.Second
tag.rack = r1
tag.equation=a=b
advertise.private.api.keys=false
"""


@pytest.fixture
def properties_file(tmp_path: Path) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(PROPERTIES, encoding="utf-8")
    return path


def test_properties_file_parsing(properties_file: Path) -> None:
    raw = load_properties(properties_file)
    assert raw == {
        "broker.id": "7",
        "socket.request.max.bytes": "2048",
        "connections.max.idle.ms": "1500",
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "quota.window.num": "5",
        "observer.class.names": "pkg.mod.First, pkg.mod.Second",
        "tag.rack": "r1",
        "tag.equation": "a=b",
        "advertise.private.api.keys": "false",
    }


def test_properties_file_gives_typed_values(properties_file: Path) -> None:
    config = BrokerConfig.build(properties=properties_file)
    assert config["broker.id"] == 7
    assert config["socket.request.max.bytes"] == 2048
    assert config["connections.max.idle.ms"] == 1500
    assert config["quota.window.num"] == 5
    assert config["observer.class.names"] == ["pkg.mod.First", "pkg.mod.Second"]
    assert config["advertise.private.api.keys"] is False
    assert config.tags == {"rack": "r1", "equation": "a=b"}
    assert config["listeners"] == "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0"


def test_continuation_with_an_escaped_backslash_and_a_blank_line(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    # Java: an odd number of trailing backslashes continues the line, an even number does not.
    path.write_text("a=one\\\\\nb=two\\\\\\\n  more\nc=three\\\n\nd=four\n", encoding="utf-8")
    raw = load_properties(path)
    assert raw["a"].startswith("one") and "b" in raw  # "a" did not swallow the next line
    assert raw["b"].startswith("two") and raw["b"].endswith("more")
    assert raw["c"] == "three"
    assert raw["d"] == "four"


def test_missing_properties_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.properties"):
        BrokerConfig.build(properties=tmp_path / "nope.properties")


def test_config_is_one_frozen_attrs_object() -> None:
    config = BrokerConfig.build({"broker.id": "3"})
    assert attrs.has(type(config))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        config.values = {}  # type: ignore[misc]
    assert config["broker.id"] == 3 and config.get("broker.id") == 3


def test_dict_values_may_be_native_types() -> None:
    config = BrokerConfig.build({"broker.id": 4, "advertise.private.api.keys": False,
                                 "observer.class.names": ["a.B", " c.D "], "connections.max.idle.ms": 99})
    assert config["broker.id"] == 4
    assert config["advertise.private.api.keys"] is False
    assert config["observer.class.names"] == ["a.B", "c.D"]
    assert config["connections.max.idle.ms"] == 99


def test_precedence_file_then_dict_then_overrides(properties_file: Path) -> None:
    config = BrokerConfig.build({"broker.id": "8", "quota.window.num": "6"}, properties=properties_file,
                                overrides=["broker.id=9", "tag.rack=r2"])
    assert config["broker.id"] == 9  # override beats dict beats file
    assert config["quota.window.num"] == 6  # dict beats file
    assert config["socket.request.max.bytes"] == 2048  # file beats default
    assert config.tags["rack"] == "r2"


def test_parse_overrides() -> None:
    assert parse_overrides(["a=1", " b = two ", "c=x=y", "d="]) == {"a": "1", "b": "two", "c": "x=y", "d": ""}
    for bad in ("novalue", "=value"):
        with pytest.raises(ConfigError, match="KEY=VALUE"):
            parse_overrides([bad])


def test_kafka_names_and_defaults() -> None:
    config = BrokerConfig.build()
    kafka_defaults = {
        "broker.id": -1,
        "reserved.broker.max.id": 1000,
        "socket.request.max.bytes": 104857600,
        "connections.max.idle.ms": 600000,
        "num.network.threads": 3,
        "quota.window.num": 11,
        "quota.window.size.seconds": 1,
        "message.max.bytes": 1048588,
        "observer.class.names": [],
        "ssl.client.auth": "none",
        "advertised.listeners": None,
        "inter.broker.listener.name": None,
    }
    for key, default in kafka_defaults.items():
        assert config[key] == default, key
    protocol_map = dict(item.split(":") for item in config["listener.security.protocol.map"].split(","))
    assert protocol_map == {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    assert config.tags == {}


def test_unknown_key_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafkapy.server.config"):
        config = BrokerConfig.build({"made.up.setting": "x", "broker.id": "1", "tag.zone": "z",
                                     "listener.name.internal.ssl.keystore.location": "k"})
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "made.up.setting" in warned[0]
    assert config.tags == {"zone": "z"}
    assert config["listener.name.internal.ssl.keystore.location"] == "k"
    assert config.originals["made.up.setting"] == "x"  # kept for modules and observers that read it


def test_keys_that_modules_and_observers_declare_do_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    """Module keys (an installed module's, via entry points) and the keys of observers the config
    names are known, though the core config does not declare them; a real typo still warns."""
    with caplog.at_level(logging.WARNING, logger="kafkapy.server.config"):
        BrokerConfig.build({"coordinator.min.session.timeout.ms": "1000",
                            "observer.class.names": "kafkapy.observers.CaptureObserver",
                            "capture.path": "/tmp/kafkapy-test.pcap",
                            "coordinator.min.sesion.timeout.ms": "1"})
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "coordinator.min.sesion.timeout.ms" in warned[0]


def test_unknown_key_in_overrides_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafkapy.server.config"):
        BrokerConfig.build(overrides=["num.partitionz=3"])
    assert any("num.partitionz" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(("key", "value"), [
    ("broker.id", "abc"),
    ("broker.id", "-2"),
    ("broker.id", "1.5"),
    ("broker.id", True),
    ("socket.request.max.bytes", "0"),
    ("socket.request.max.bytes", ""),
    ("connections.max.idle.ms", "soon"),
    ("num.network.threads", "0"),
    ("quota.window.num", "0"),
    ("quota.window.size.seconds", "-1"),
    ("ssl.client.auth", "maybe"),
    ("unknown.request.behavior", "ignore"),
    ("advertise.private.api.keys", "yes"),
])
def test_invalid_value_names_the_key(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig.build({key: value})
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig.build(overrides=[f"{key}={value}"] if isinstance(value, str) else [f"{key}=x"])


@pytest.mark.parametrize(("key", "value", "message"), [
    ("num.partitions", "abc", "invalid value 'abc' for num.partitions: Not a number of type INT"),
    ("num.partitions", str(2**31), f"invalid value '{2**31}' for num.partitions: Not a number of type INT"),
    ("log.retention.ms", str(2**63),
     f"invalid value '{2**63}' for log.retention.ms: Not a number of type LONG"),
    ("log.retention.ms", "1.5", "invalid value '1.5' for log.retention.ms: Not a number of type LONG"),
    ("connections.max.idle.ms", "soon",
     "invalid value 'soon' for connections.max.idle.ms: Not a number of type LONG"),
])
def test_a_number_that_is_not_of_the_keys_type_is_refused_in_kafkas_words(key: str, value: str,
                                                                          message: str) -> None:
    """Kafka's ConfigDef: an INT is 32 bits, a LONG 64 ("Not a number of type INT")."""
    with pytest.raises(ConfigError) as refused:
        Broker({key: value})  # the modules' keys (num.partitions: the topics module's) are checked too
    assert str(refused.value) == message


def test_invalid_value_fails_before_the_broker_starts() -> None:
    with pytest.raises(ConfigError, match=r"socket\.request\.max\.bytes"):
        Broker({"socket.request.max.bytes": "lots"})


@pytest.mark.parametrize(("settings", "key"), [
    ({"listeners": "PLAINTEXT//127.0.0.1:0"}, "listeners"),
    ({"listeners": "PLAINTEXT://127.0.0.1:70000"}, "listeners"),
    ({"listeners": ""}, "listeners"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map"),
    ({"advertised.listeners": "PLAINTEXT:/x:1"}, "advertised.listeners"),
    ({"observer.class.names": "no.such.module.Observer"}, "observer.class.names"),
])
def test_invalid_values_checked_at_start_name_the_key(settings: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        with Broker(settings):
            pass


# --- properties files are ISO-8859-1 with \uXXXX escapes, as java.util.Properties reads them ---

def test_a_latin1_byte_in_a_comment_or_value_is_read_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_bytes(b"# Configur\xe9 by hand\nbroker.id=5\ntag.city=Montr\xe9al\n")
    config = BrokerConfig.build(properties=path)
    assert config["broker.id"] == 5 and config.tags == {"city": "Montréal"}


def test_java_escapes_in_keys_and_values(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("tag.city=Montr\\u00e9al\ntag.a\\=b\\ c = x\\ty\\\\z\\q\nkey\\:colon:v\n  :empty\n"
                    "tag.tail=ends\\\n", encoding="ascii")
    assert load_properties(path) == {"tag.city": "Montréal", "tag.a=b c": "x\ty\\zq", "key:colon": "v",
                                     "": "empty", "tag.tail": "ends"}


def test_a_malformed_unicode_escape_is_one_config_error_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\n\n# comment\ntag.x=\\u00g9\n", encoding="ascii")
    with pytest.raises(ConfigError, match=r"server\.properties, line 4: malformed \\uXXXX"):
        load_properties(path)


_PROPERTY_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


def _java_store_escape(text: str, *, key: bool) -> str:
    """How java.util.Properties.store(OutputStream) writes a key or value (saveConvert, ISO-8859-1)."""
    out = []
    for i, char in enumerate(text):
        if char == " " and (key or i == 0):
            out.append("\\ ")
        elif char in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[char])
        elif char in "\\=:#!":
            out.append("\\" + char)
        elif not " " <= char <= "~":
            out.extend(f"\\u{unit:04X}" for unit in _utf16_units(char))
        else:
            out.append(char)
    return "".join(out)


def _utf16_units(char: str) -> list[int]:
    data = char.encode("utf-16-be")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


@given(st.dictionaries(_PROPERTY_TEXT, _PROPERTY_TEXT, max_size=6))
def test_what_java_stores_reads_back(tmp_path_factory: pytest.TempPathFactory,
                                     properties: dict[str, str]) -> None:
    path = tmp_path_factory.mktemp("props") / "server.properties"
    lines = [f"{_java_store_escape(k, key=True)}={_java_store_escape(v, key=False)}"
             for k, v in properties.items()]
    path.write_bytes(("#a comment\n" + "\n".join(lines) + "\n").encode("iso-8859-1"))
    assert load_properties(path) == properties


def test_a_keyword_spelling_of_a_key_suggests_kafkas_name(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafkapy.server.config"):
        config = BrokerConfig.build({"broker_id": 1, "socket.request.max.byte": 5, "made.up.setting": "/x"})
    warned = sorted(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert warned == [
        "unknown configuration key 'broker_id' (ignored); did you mean 'broker.id'?",
        "unknown configuration key 'made.up.setting' (ignored)",
        "unknown configuration key 'socket.request.max.byte' (ignored); did you mean "
        "'socket.request.max.bytes'?",
    ]
    assert config["broker.id"] == -1  # still only a warning, as in Kafka


def test_a_module_key_typo_suggests_the_module_key(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafkapy.server.config"):
        BrokerConfig.build({"coordinator.min.sesion.timeout.ms": "1"})
    assert any("did you mean 'coordinator.min.session.timeout.ms'?" in r.getMessage() for r in caplog.records)


# --- the example config/server.properties ---

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "server.properties"


def _shipped_settings(*, commented: bool) -> dict[str, str]:
    import re

    pattern = r"^#([a-z][\w.]*)=(.*)$" if commented else r"^([a-z][\w.]*)=(.*)$"
    return {m.group(1): m.group(2) for line in SHIPPED.read_text(encoding="iso-8859-1").splitlines()
            if (m := re.match(pattern, line))}


def test_the_shipped_server_properties_holds_kafkas_defaults(caplog: pytest.LogCaptureFixture) -> None:
    """Every key it sets or shows commented out is one kafkapy knows, with a valid value; the
    keys it sets, and the commented ones that have a default, hold that default (broker.id is 0,
    as in Kafka's own example file)."""
    from importlib.metadata import entry_points

    from kafkapy.server.config import CORE_KEYS

    live, shown = _shipped_settings(commented=False), _shipped_settings(commented=True)
    assert len(live) >= 4 and len(shown) >= 30
    with caplog.at_level(logging.WARNING, logger="kafkapy.server.config"):
        config = BrokerConfig.build(properties=SHIPPED)
        BrokerConfig.build({**shown, **live})  # uncommented, every value is valid
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert config["broker.id"] == 0
    defaults = {k.name: k.default for k in CORE_KEYS}
    for entry in entry_points(group="kafkapy.modules"):
        defaults.update({k.name: k.default for k in getattr(entry.load(), "config_keys", ())})
    for key, value in {**shown, **live}.items():
        assert key in defaults or key.startswith("tag."), key
        if key in defaults and key != "broker.id" and defaults[key] not in (None, "", []):
            assert str(value).lower() == str(defaults[key]).lower(), key


def test_the_issue_case_broker_with_the_fixtures_keyword_spelling(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafkapy.server.config"):
        Broker({"broker_id": 1})  # configured, not started
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "unknown configuration key 'broker_id' (ignored); did you mean 'broker.id'?"]


def test_node_id_is_broker_ids_synonym_as_in_kafka() -> None:
    """Kafka's config/kraft/server.properties names the broker by node.id alone: Kafka reads either
    key for both (KafkaConfig.populateSynonyms), so its broker is 1, not a generated 1001."""
    assert BrokerConfig.build(overrides=["node.id=3"])["broker.id"] == 3
    assert BrokerConfig.build(overrides=["broker.id=4"])["node.id"] == 4
    with Broker({"node.id": 5}) as broker:
        assert broker.broker_id == 5
    with Broker({"node.id": 5}, brokers=2) as cluster:  # a cluster's ids count up from it
        assert [member.broker_id for member in cluster.brokers] == [5, 6]
    with pytest.raises(ConfigError) as refused:  # Kafka's check and words (KafkaConfig.validateValues)
        BrokerConfig.build(overrides=["node.id=1", "broker.id=2"])
    assert str(refused.value) == "You must set `node.id` to the same value as `broker.id`."


def test_a_listener_key_under_an_upper_case_name_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    """Kafka reads listener.name.<listener>.<key> under the listener's name in lower case, and so
    does kafkapy: the upper-case spelling (the name as `listeners` writes it) was kept without a
    word, and the start then failed for want of the key it was meant to be."""
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";'
    with caplog.at_level(logging.WARNING, logger="kafkapy.server.config"):
        BrokerConfig.build({"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                            "listener.name.SASL_PLAINTEXT.plain.sasl.jaas.config": jaas,
                            "listener.name.sasl_plaintext.max.connections": "5"})
    assert [r.getMessage() for r in caplog.records] == [
        "configuration key 'listener.name.SASL_PLAINTEXT.plain.sasl.jaas.config' is never read (ignored): "
        "a listener's name is written in lower case there; did you mean "
        "'listener.name.sasl_plaintext.plain.sasl.jaas.config'?"]
