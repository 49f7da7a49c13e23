"""Kafka's broker config keys: every one is known (a server.properties or docker-compose settings
written for Kafka start kafkapy without a warning), DescribeConfigs lists them as Kafka does, and
the dynamic ones kafkapy does not act on alter as Kafka's do. The keys kafkapy acts on are tested
beside their modules."""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource, ConfigSource
from kafka.admin import ConfigResource as KafkaPythonResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from kafkapy.assembly import DEFAULT_MODULES
from kafkapy.cli import main
from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.config import CORE_KEYS, INERT_KEYS, BrokerConfig, ConfigError
from kafkapy.server.kafka_keys import (
    INERT_TABLE,
    KAFKA_INTERNAL_KEYS,
    LISTENER_ONLY_KEYS,
    PER_BROKER,
    READ_ONLY,
    TLS_STORE_TABLE,
    UPDATE_MODES,
)

TIMEOUT_S = 20
# A typical Kafka broker's settings (a server.properties, a docker-compose's KAFKA_*): all Kafka's.
TYPICAL_KAFKA_SETTINGS = {
    "transaction.state.log.min.isr": "1", "share.coordinator.state.topic.min.isr": "1",
    "group.coordinator.rebalance.protocols": "classic,consumer", "num.io.threads": "8",
    "socket.send.buffer.bytes": "102400", "socket.receive.buffer.bytes": "102400",
    "num.recovery.threads.per.data.dir": "1", "replica.lag.time.max.ms": "30000",
    "controlled.shutdown.enable": "true", "inter.broker.protocol.version": "3.9",
    "log.message.format.version": "3.0", "num.replica.fetchers": "1", "replica.fetch.max.bytes": "1048576",
    "queued.max.requests": "500", "background.threads": "10", "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": "134217728", "metric.reporters": "",
    "sasl.mechanism.inter.broker.protocol": "PLAIN", "security.inter.broker.protocol": "PLAINTEXT",
    "broker.id.generation.enable": "true", "offsets.commit.timeout.ms": "5000",
    "offsets.load.buffer.size": "5242880",
    # Kafka defines it too (ServerConfigs: its broker-to-broker clients' timeout)
    "request.timeout.ms": "30000",
}


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_kafkas_broker_keys_start_a_broker_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafkapy.server.config"), \
            Broker({**TYPICAL_KAFKA_SETTINGS, "confluent.support.metrics.enable": "false",
                    "num.io.thread": "8"}):
        pass
    # a key Kafka does not define keeps its warning, and a typo its did-you-mean
    assert sorted(_warnings(caplog)) == [
        "unknown configuration key 'confluent.support.metrics.enable' (ignored)",
        "unknown configuration key 'num.io.thread' (ignored); did you mean 'num.io.threads'?",
    ]


# The settings of Kafka 3.9's config/server.properties (ZooKeeper) and config/kraft/server.properties.
KAFKA_39_ZOOKEEPER = (
    "broker.id=0 num.network.threads=3 num.io.threads=8 socket.send.buffer.bytes=102400 "
    "socket.receive.buffer.bytes=102400 socket.request.max.bytes=104857600 log.dirs=/tmp/kafka-logs "
    "num.partitions=1 num.recovery.threads.per.data.dir=1 offsets.topic.replication.factor=1 "
    "transaction.state.log.replication.factor=1 transaction.state.log.min.isr=1 log.retention.hours=168 "
    "log.retention.check.interval.ms=300000 zookeeper.connect=localhost:2181 "
    "zookeeper.connection.timeout.ms=18000 group.initial.rebalance.delay.ms=0")
KAFKA_39_KRAFT = (
    "process.roles=broker,controller node.id=1 controller.quorum.voters=1@localhost:9093 "
    "listeners=PLAINTEXT://:9092,CONTROLLER://:9093 inter.broker.listener.name=PLAINTEXT "
    "advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093 "
    "controller.listener.names=CONTROLLER listener.security.protocol.map=CONTROLLER:PLAINTEXT,"
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL num.network.threads=3 "
    "num.io.threads=8 socket.send.buffer.bytes=102400 socket.receive.buffer.bytes=102400 "
    "socket.request.max.bytes=104857600 log.dirs=/tmp/kraft-combined-logs num.partitions=1 "
    "num.recovery.threads.per.data.dir=1 offsets.topic.replication.factor=1 "
    "transaction.state.log.replication.factor=1 transaction.state.log.min.isr=1 log.retention.hours=168 "
    "log.segment.bytes=1073741824 log.retention.check.interval.ms=300000")


@pytest.mark.parametrize("settings", [KAFKA_39_ZOOKEEPER, KAFKA_39_KRAFT], ids=["zookeeper", "kraft"])
def test_kafkas_own_server_properties_are_known(settings: str, caplog: pytest.LogCaptureFixture) -> None:
    from kafkapy.assembly import default_module_keys

    with caplog.at_level(logging.WARNING, logger="kafkapy.server.config"):
        BrokerConfig.build(overrides=settings.split(), extra_keys=default_module_keys())
    assert _warnings(caplog) == []


def test_a_key_kafkapy_does_not_act_on_is_typed_as_kafka_types_it() -> None:
    config = BrokerConfig.build({"num.io.threads": "16", "log.cleaner.io.buffer.load.factor": "0.5"})
    assert (config["num.io.threads"], config["log.cleaner.io.buffer.load.factor"]) == (16, 0.5)
    with pytest.raises(ConfigError, match=r"invalid value 'many' for num\.io\.threads"):
        BrokerConfig.build({"num.io.threads": "many"})
    with pytest.raises(ConfigError, match=r"group\.share\.max\.groups"):  # a SHORT
        BrokerConfig.build({"group.share.max.groups": "40000"})


def test_the_inert_catalogue_holds_no_key_kafkapy_acts_on() -> None:
    from kafkapy.coordination.module import CONFIG_KEYS as COORDINATION_KEYS
    from kafkapy.telemetry.module import CONFIG_KEYS as TELEMETRY_KEYS

    acted = [k.name for k in (*CORE_KEYS, *COORDINATION_KEYS, *TELEMETRY_KEYS)]
    acted += [k.name for cls in DEFAULT_MODULES for k in cls.config_keys]
    inert = [k.name for k in INERT_KEYS]
    assert len(set(inert)) == len(inert) and not set(inert) & set(acted)
    assert all(not k.acted_on and k.doc for k in INERT_KEYS)
    assert all(k.acted_on for k in CORE_KEYS)
    tls_stores = {name for name, *_ in TLS_STORE_TABLE}  # acted on, with Kafka's update modes
    assert tls_stores <= {k.name for k in CORE_KEYS}
    assert set(UPDATE_MODES) == set(inert) | tls_stores and KAFKA_INTERNAL_KEYS <= set(inert)


DOCS = Path(__file__).resolve().parents[2] / "docs" / "broker.md"


def _docs_table() -> str:
    """docs/broker.md's list of the keys kafkapy takes without effect, from the catalogue: one row
    per reason, the most keys first, each key marked * when Kafka changes it at run time."""
    by_reason: dict[str, list[str]] = defaultdict(list)
    for name, _, _, why, mode, _ in INERT_TABLE:
        by_reason[why].append(f"`{name}`" + ("" if mode == READ_ONLY else " *"))
    rows = sorted(by_reason.items(), key=lambda item: -len(item[1]))
    return "\n".join(["| why kafkapy has no use for them | keys (* dynamic in Kafka) |", "|---|---|",
                      *(f"| {why} | {', '.join(sorted(keys))} |" for why, keys in rows)])


def test_the_docs_list_the_keys_kafkapy_takes_without_effect() -> None:
    section = DOCS.read_text().split("<!-- kafka-keys:begin -->")[1].split("<!-- kafka-keys:end -->")[0]
    assert section.strip() == _docs_table(), "docs/broker.md's table, regenerated:\n" + _docs_table()


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1, "num.io.threads": 16, "unstable.api.versions.enable": "true"}) as broker:
        yield broker


def _described(broker: Broker) -> dict[str, ConfigEntry]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    return entries


def test_describe_configs_lists_every_kafka_key_with_kafkas_default_and_flags(broker: Broker) -> None:
    entries = _described(broker)
    listed = {k.name for k in INERT_KEYS} - KAFKA_INTERNAL_KEYS | {"unstable.api.versions.enable"}
    assert listed <= set(entries)
    assert not (KAFKA_INTERNAL_KEYS - {"unstable.api.versions.enable"}) & set(entries)  # listed when set

    def seen(name: str) -> tuple[str | None, ConfigSource, bool, bool]:
        entry = entries[name]
        return entry.value, ConfigSource(entry.source), entry.is_read_only, entry.is_sensitive

    static, default = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG
    assert seen("num.io.threads") == ("16", static, False, False)  # Kafka: dynamic, cluster-wide
    assert seen("unstable.api.versions.enable") == ("true", static, True, False)
    assert seen("transaction.state.log.min.isr") == ("2", default, True, False)
    assert seen("share.coordinator.state.topic.min.isr") == ("2", default, True, False)
    assert seen("ssl.keystore.password") == (None, default, False, True)  # a PASSWORD: no value
    assert seen("log.cleaner.io.max.bytes.per.second") == (
        "1.7976931348623157E308", default, False, False)
    assert seen("principal.builder.class") == (
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", default, False, False)
    assert seen("zookeeper.set.acl") == ("false", default, True, False)
    assert seen("request.timeout.ms") == ("30000", default, True, False)
    assert seen("group.coordinator.rebalance.protocols") == ("classic,consumer", default, True, False)
    assert seen("security.inter.broker.protocol") == ("PLAINTEXT", default, True, False)
    assert seen("socket.send.buffer.bytes") == ("-1", default, True, False)  # kafkapy's: the OS sizes it


def test_kafka_python_describes_them_too(broker: Broker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers,
                             request_timeout_ms=TIMEOUT_S * 1000)
    try:
        described = admin.describe_configs([KafkaPythonResource(ConfigResourceType.BROKER, "1")],
                                           config_filter="all")
    finally:
        admin.close()
    [(_, entries)] = described["broker"].items()
    assert {k.name for k in INERT_KEYS} - KAFKA_INTERNAL_KEYS <= set(entries)
    assert (entries["num.io.threads"]["value"], entries["num.io.threads"]["config_source"]) == (
        "16", "STATIC_BROKER_CONFIG")
    assert (entries["num.replica.fetchers"]["value"], entries["num.replica.fetchers"]["config_source"]) == (
        "1", "DEFAULT_CONFIG")


def test_a_dynamic_key_kafkapy_does_not_act_on_is_stored_and_described(broker: Broker) -> None:
    def alter(name: str, key: str, value: str) -> None:
        """IncrementalAlterConfigs SET (the clients cannot name the default resource "")."""
        with SimpleClient(broker.bootstrap_servers) as client:
            answer = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
                "validate_only": False, "resources": [{
                    "resource_type": 4, "resource_name": name,
                    "configs": [{"name": key, "config_operation": 0, "value": value}]}]})
        [response] = answer["responses"]
        if response["error_code"] != ErrorCode.NONE:
            raise AssertionError(response["error_message"])

    alter("1", "num.replica.fetchers", "4")
    alter("", "background.threads", "20")  # cluster-wide: the default resource takes it
    entries = _described(broker)
    assert (entries["num.replica.fetchers"].value, entries["num.replica.fetchers"].source) == (
        "4", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert (entries["background.threads"].value, entries["background.threads"].source) == (
        "20", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    # Kafka's refusals, in its words
    assert "sasl.kerberos.service.name" in {n for n, m in UPDATE_MODES.items() if m == PER_BROKER}
    default_level = "Cannot update these configs at default cluster level, broker id must be specified"
    with pytest.raises(AssertionError, match=re.escape(f"{default_level}: Set(sasl.kerberos.service.name)")):
        alter("", "sasl.kerberos.service.name", "kafka")
    assert "ssl.keystore.location" in LISTENER_ONLY_KEYS
    per_listener = ("These security configs can be dynamically updated only per-listener using the "
                    "listener prefix")
    with pytest.raises(AssertionError, match=re.escape(f"{per_listener}: Set(ssl.keystore.location)")):
        alter("1", "ssl.keystore.location", "/tmp/ks.jks")
    alter("1", "listener.name.plaintext.ssl.keystore.location", "/tmp/ks.jks")
    with pytest.raises(AssertionError, match="Cannot update these configs dynamically"):
        alter("1", "zookeeper.set.acl", "true")


def test_the_configs_cli_lists_them(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["configs", "--bootstrap-server", broker.bootstrap_servers, "--entity-type", "brokers",
                 "--entity-name", "1", "--describe", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.strip().startswith("num.io.threads=16 sensitive=false") for line in lines)
    assert any(line.strip().startswith("ssl.key.password=null sensitive=true") for line in lines)


def test_the_state_topics_replication_factors_are_shorts_as_in_kafka(broker: Broker) -> None:
    """Kafka's SHORT keys (DescribeConfigs' config_type 4), and so held to a short's range."""
    with SimpleClient(broker.bootstrap_servers) as client:
        answer = client.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
    types = {entry["name"]: entry["config_type"] for entry in answer["results"][0]["configs"]}
    short = 4  # Kafka's DescribeConfigsResponse.ConfigType.SHORT
    for name in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                 "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr",
                 "group.share.max.groups"):
        assert types[name] == short, name
    assert types["transaction.state.log.min.isr"] == 3  # INT
    with pytest.raises(ConfigError, match=r"offsets\.topic\.replication\.factor"), \
            Broker({"offsets.topic.replication.factor": 40_000}):
        pass
