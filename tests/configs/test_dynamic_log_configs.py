"""Kafka's dynamic log configs (DynamicLogConfig, the cleaner's, the producer state's) set on BROKER
resources by real clients and the CLI, and applied to the live logs at once."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from confluent_kafka.admin import NewTopic as CfNewTopic
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient, NewTopic
from test_broker_configs import _describe, _incremental, _legacy

from kafkapy import Broker, VirtualClock
from kafkapy.cli import main
from kafkapy.configs import ConfigsModule
from kafkapy.configs.broker_log import DYNAMIC_LOG_KEYS, validate_log_settings
from kafkapy.dataplane import DataPlaneModule
from kafkapy.errors import ErrorCode
from kafkapy.server.config import ConfigError
from kafkapy.testing import wait_until

OK = ErrorCode.NONE
INVALID_CONFIG = ErrorCode.INVALID_CONFIG
INVALID_REQUEST = ErrorCode.INVALID_REQUEST
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
SET, DELETE = 0, 1
DAY_MS = 86_400_000


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": "1", "log.retention.ms": str(DAY_MS)}) as b:
        yield b


def _module(broker: Broker, kind: type[Any]) -> Any:
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, kind))


def _create(broker: Broker, *topics: NewTopic) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    try:
        admin.create_topics(list(topics))
    finally:
        admin.close()


def _earliest(broker: Broker, *topics: str) -> dict[str, int]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    try:
        offsets = consumer.beginning_offsets([TopicPartition(t, 0) for t in topics])
        return {tp.topic: offset for tp, offset in offsets.items()}
    finally:
        consumer.close()


def test_kafka_python_retention_default_deletes_only_topics_without_an_override(broker: Broker) -> None:
    a = broker.bootstrap_servers
    _create(broker, NewTopic("plain", 1, 1),
            NewTopic("kept", 1, 1, topic_configs={"retention.ms": str(DAY_MS)}))
    # every batch its own segment, cluster-wide (the default resource: over the protocol, as
    # kafka-python insists on a broker id)
    assert _incremental(a, "", [("log.segment.bytes", SET, "100")]) == (OK, None)
    producer = KafkaProducer(bootstrap_servers=a, linger_ms=0)
    for i in range(4):
        for topic in ("plain", "kept"):
            producer.send(topic, f"record {i}".encode()).get(timeout=10)
    producer.close()
    admin = KafkaAdminClient(bootstrap_servers=a, request_timeout_ms=10000)
    try:
        resource = KpConfigResource(ConfigResourceType.BROKER, "1", configs={"log.retention.ms": "1"})
        assert admin.alter_configs([resource]) == {"broker": {"1": "OK"}}
        described = admin.describe_configs([KpConfigResource(ConfigResourceType.BROKER, "1")],
                                           include_synonyms=True)["broker"]["1"]
        # an invalid value: INVALID_REQUEST (Kafka 3.2+), and nothing changes
        bad = admin.alter_configs([KpConfigResource(ConfigResourceType.BROKER, "1",
                                                    configs={"log.retention.bytes": "lots"})])
        assert bad["broker"]["1"].startswith("[Error 42] InvalidRequestError")
    finally:
        admin.close()
    entry = described["log.retention.ms"]
    assert (entry["value"], entry["config_source"]) == ("1", "DYNAMIC_BROKER_CONFIG")
    assert entry["read_only"] is False
    assert [(s["source"], s["name"], s["value"]) for s in entry["synonyms"]] == [  # Kafka's synonyms
        ("DYNAMIC_BROKER_CONFIG", "log.retention.ms", "1"),
        ("STATIC_BROKER_CONFIG", "log.retention.ms", str(DAY_MS)),
        ("DEFAULT_CONFIG", "log.retention.hours", "168"),
    ]
    assert "log.retention.bytes" not in described  # the refused value was not stored
    time.sleep(0.05)  # older than 1 ms
    removed = broker.logs.apply_retention()
    assert removed.get(("plain", 0), 0) >= 3 and ("kept", 0) not in removed
    earliest = _earliest(broker, "plain", "kept")
    assert earliest["plain"] >= 3 and earliest["kept"] == 0


def test_a_live_log_takes_the_new_default_and_the_static_one_back(broker: Broker) -> None:
    a = broker.bootstrap_servers
    _create(broker, NewTopic("plain", 1, 1), NewTopic("own", 1, 1, topic_configs={"retention.ms": "5000"}))
    producer = KafkaProducer(bootstrap_servers=a)
    for topic in ("plain", "own"):
        producer.send(topic, b"x").get(timeout=10)  # their logs exist from here on
    producer.close()
    logs = _module(broker, DataPlaneModule).partitions.logs

    def retention(topic: str) -> int:
        return int(logs.get(topic, 0).config.retention_ms)

    assert (retention("plain"), retention("own")) == (DAY_MS, 5000)
    assert _incremental(a, "", [("log.retention.ms", SET, "60000")]) == (OK, None)
    assert (retention("plain"), retention("own")) == (60000, 5000)  # the override wins
    assert _incremental(a, "1", [("log.retention.ms", SET, "30000")]) == (OK, None)
    assert retention("plain") == 30000  # this broker's value over the cluster default
    assert _incremental(a, "1", [("log.retention.ms", DELETE, None)]) == (OK, None)
    assert retention("plain") == 60000
    assert _incremental(a, "", [("log.retention.ms", DELETE, None)]) == (OK, None)
    assert retention("plain") == DAY_MS  # the static setting again
    # the topic's synonyms show each level, Kafka's order
    assert _incremental(a, "", [("log.retention.ms", SET, "60000")]) == (OK, None)
    _, _, configs = _describe(a, "plain", ["retention.ms"], resource_type=2)
    entry = configs["retention.ms"]
    assert (entry["value"], entry["config_source"]) == ("60000", DYNAMIC_DEFAULT)
    assert [(s["source"], s["name"], s["value"]) for s in entry["synonyms"]] == [
        (DYNAMIC_DEFAULT, "log.retention.ms", "60000"),
        (STATIC, "log.retention.ms", str(DAY_MS)),
        (DEFAULT, "log.retention.hours", "168"),
    ]
    # on the BROKER resource, Kafka's broker synonyms: the units of one setting
    _, _, configs = _describe(a, "1", ["log.retention.ms", "log.retention.hours"])
    assert [(s["source"], s["name"]) for s in configs["log.retention.ms"]["synonyms"]] == [
        (DYNAMIC_DEFAULT, "log.retention.ms"), (STATIC, "log.retention.ms"), (DEFAULT, "log.retention.hours")]
    hours = configs["log.retention.hours"]
    assert (hours["value"], hours["config_source"], hours["read_only"]) == ("168", DEFAULT, True)
    assert [(s["source"], s["name"]) for s in hours["synonyms"]] == [(DEFAULT, "log.retention.hours")]


def test_confluent_kafka_message_max_bytes_refuses_a_large_produce(broker: Broker) -> None:
    a = broker.bootstrap_servers
    _create(broker, NewTopic("small", 1, 1),
            NewTopic("roomy", 1, 1, topic_configs={"max.message.bytes": "100000"}))
    admin = AdminClient({"bootstrap.servers": a})

    def alter(operation: Any, value: str | None) -> None:
        entry = ConfigEntry("message.max.bytes", value, incremental_operation=operation)
        resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[entry])
        for future in admin.incremental_alter_configs([resource], request_timeout=10).values():
            future.result(timeout=10)

    def produce(topic: str) -> Any:
        errors: list[Any] = []
        producer = Producer({"bootstrap.servers": a, "message.max.bytes": 1_000_000, "retries": 0})
        producer.produce(topic, b"v" * 2000, on_delivery=lambda err, _msg: errors.append(err))
        producer.flush(10)
        assert len(errors) == 1
        return errors[0]

    assert produce("small") is None
    alter(AlterConfigOpType.SET, "1000")
    described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")], request_timeout=10)
    entry = next(iter(described.values())).result(timeout=10)["message.max.bytes"]
    assert (entry.value, entry.source, entry.is_read_only) == ("1000", DYNAMIC_BROKER, False)
    error = produce("small")
    assert error is not None and error.name() == "MSG_SIZE_TOO_LARGE"
    assert produce("roomy") is None  # its own max.message.bytes wins
    alter(AlterConfigOpType.DELETE, None)
    assert produce("small") is None


def test_a_refused_value_is_invalid_request_and_nothing_is_stored(broker: Broker) -> None:
    a = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": a})
    entry = ConfigEntry("log.retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[entry])
    with pytest.raises(KafkaException) as raised:
        for future in admin.incremental_alter_configs([resource], request_timeout=10).values():
            future.result(timeout=10)
    assert raised.value.args[0].code() == INVALID_REQUEST
    assert "Invalid value soon for configuration log.retention.ms: Not a number of type LONG" in str(
        raised.value)
    assert broker.store is not None and broker.store.entity_config("brokers/1") == {}

    def refused(name: str, ops: list[tuple[str, int, str | None]]) -> str:
        assert broker.store is not None
        entity = f"brokers/{name or '<default>'}"
        before = broker.store.entity_config(entity)
        code, message = _incremental(a, name, ops)
        assert code == INVALID_REQUEST
        assert broker.store.entity_config(entity) == before
        return message or ""

    prefix = ""  # Kafka 3.2+: the validator's message, bare
    assert refused("", [("log.segment.bytes", SET, "13")]) == (
        prefix + "Invalid value 13 for configuration log.segment.bytes: Value must be at least 14")
    assert refused("", [("log.cleanup.policy", SET, "shred")]).endswith(
        "Invalid value shred for configuration log.cleanup.policy: String must be one of: compact, delete")
    # Kafka's validateReconfiguration: local retention against the total (static: one day)
    assert refused("", [("log.local.retention.ms", SET, "-1")]) == (
        prefix + "Invalid value -1 for configuration log.local.retention.ms: Value must not be -1 as "
        f"log.retention.ms value is set as {DAY_MS}.")
    assert refused("", [("log.local.retention.ms", SET, str(DAY_MS + 1))]) == (
        prefix + f"Invalid value {DAY_MS + 1} for configuration log.local.retention.ms: Value must not be "
        f"more than log.retention.ms property value: {DAY_MS}")
    assert _incremental(a, "", [("log.local.retention.ms", SET, "1000")]) == (OK, None)
    assert refused("1", [("log.retention.ms", SET, "999")]).endswith(
        "Value must not be more than log.retention.ms property value: 999")
    assert _incremental(a, "1", [("log.retention.ms", SET, "-1")]) == (OK, None)  # unlimited: any local
    # the compaction lags, judged together as the LogConfig they make
    assert "min.compaction.lag.ms (10) > max.compaction.lag.ms (5)" in refused(
        "", [("log.cleaner.min.compaction.lag.ms", SET, "10"),
             ("log.cleaner.max.compaction.lag.ms", SET, "5")])
    # Kafka's unit synonyms stay static; a cleaner setting kafkapy does not act on is dynamic, as
    # in Kafka: stored, without effect
    assert "Cannot update these configs dynamically: Set(log.retention.hours)" in refused(
        "", [("log.retention.hours", SET, "1")])
    assert _incremental(a, "", [("log.cleaner.threads", SET, "2")]) == (OK, None)
    assert _incremental(a, "", [("log.cleaner.threads", DELETE, None)]) == (OK, None)
    # the legacy AlterConfigs replaces the broker's whole set
    whole = {"log.retention.bytes": "500", "compression.type": "zstd"}
    assert _legacy(a, "1", whole) == (OK, None)
    assert broker.store.entity_config("brokers/1") == whole
    config = _module(broker, ConfigsModule).log_config("any")
    assert (config.retention_bytes, config.compression_type) == (500, "zstd")
    assert _legacy(a, "1", {"log.retention.bytes": "x"})[0] == INVALID_REQUEST  # the legacy API too
    assert broker.store.entity_config("brokers/1") == whole
    # validate_only stores nothing
    code, _ = _incremental(a, "", [("log.retention.bytes", SET, "5")], validate_only=True)
    assert code == OK and "log.retention.bytes" not in _describe(a, "")[2]


def test_cleaner_backoff_and_producer_expiration_apply_at_once(broker: Broker) -> None:
    a = broker.bootstrap_servers
    producer = KafkaProducer(bootstrap_servers=a, enable_idempotence=True)
    producer.send("idem", b"x").get(timeout=10)
    producer.close()
    plane = _module(broker, DataPlaneModule)
    states = list(plane.partitions.home.producers.values())
    assert states and all(s.producer_id_expiration_ms == DAY_MS for s in states)
    later = int(time.time() * 1000) + 61_000
    assert plane.maintenance.expire_producers(later) == {}  # a minute idle: kept for a day
    assert _incremental(a, "", [("producer.id.expiration.ms", SET, "60000"),
                                ("log.cleaner.backoff.ms", SET, "2000")]) == (OK, None)
    assert all(s.producer_id_expiration_ms == 60000 for s in states)
    assert plane.partitions.home.producer_id_expiration_ms == 60000  # tables made from now on
    assert list(plane.maintenance.expire_producers(later)) == [("idem", 0)]  # now forgotten
    assert plane.maintenance.cleaner_backoff_ms == 2000
    code, message = _incremental(a, "1", [("producer.id.expiration.ms", SET, "0")])
    assert code == INVALID_REQUEST and "producer.id.expiration.ms" in (message or "")
    _, _, configs = _describe(a, "1", ["producer.id.expiration.ms", "log.cleaner.backoff.ms"])
    assert {n: (c["value"], c["config_source"], c["read_only"]) for n, c in configs.items()} == {
        "producer.id.expiration.ms": ("60000", DYNAMIC_DEFAULT, False),
        "log.cleaner.backoff.ms": ("2000", DYNAMIC_DEFAULT, False),
    }


def test_the_cli_alters_describes_and_deletes_broker_log_configs(capsys: pytest.CaptureFixture[str]) -> None:
    with Broker({"broker.id": "1"}) as b:
        base = ["configs", "--bootstrap-server", b.bootstrap_servers, "--entity-type", "brokers"]
        assert main([*base, "--entity-default", "--alter", "--add-config", "log.retention.ms=5000"]) == 0
        assert main([*base, "--entity-name", "1", "--alter", "--add-config",
                     "log.retention.bytes=100,log.cleanup.policy=[compact,delete]"]) == 0
        assert capsys.readouterr().out.splitlines() == [
            "Completed updating default config for brokers in the cluster.",
            "Completed updating config for broker 1.",
        ]
        config = _module(b, ConfigsModule).log_config("any")
        assert (config.retention_ms, config.retention_bytes) == (5000, 100)
        assert config.cleanup_policy == frozenset({"compact", "delete"})
        assert main([*base, "--entity-default", "--describe"]) == 0
        assert capsys.readouterr().out.splitlines() == [
            "Default configs for brokers in the cluster are:",
            "  log.retention.ms=5000 sensitive=false "
            "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5000}",
        ]
        assert main([*base, "--entity-name", "1", "--alter", "--delete-config", "log.retention.bytes"]) == 0
        assert main([*base, "--entity-name", "1", "--describe"]) == 0
        out = capsys.readouterr().out
        assert "log.retention.bytes" not in out and "log.cleanup.policy=compact,delete" in out
        assert _module(b, ConfigsModule).log_config("any").retention_bytes == -1
        # --all: every setting of the broker, sorted, each with Kafka's synonyms; unset is null
        assert main([*base, "--entity-name", "1", "--describe", "--all"]) == 0
        lines = capsys.readouterr().out.splitlines()
        names = [line.split("=", 1)[0] for line in lines[1:]]
        assert lines[0] == "All configs for broker 1 are:" and names == sorted(names)
        assert ("  log.retention.ms=5000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
                "log.retention.ms=5000, DEFAULT_CONFIG:log.retention.hours=168}") in lines
        assert "  log.roll.ms=null sensitive=false synonyms={}" in lines
        assert main([*base, "--entity-default", "--alter", "--add-config", "log.segment.bytes=1"]) == 1
        assert capsys.readouterr().err.strip() == (
            "kafkapy configs: error INVALID_REQUEST: Invalid value 1 for configuration log.segment.bytes: "
            "Value must be at least 14")


def test_on_zookeeper_a_change_through_one_broker_applies_on_another(zk_connect: str) -> None:
    config = {"zookeeper.connect": zk_connect}
    with Broker({**config, "broker.id": "1"}) as first, Broker({**config, "broker.id": "2"}) as second:
        admin = AdminClient({"bootstrap.servers": second.bootstrap_servers})
        admin.create_topics([CfNewTopic("zk-logs", 1, 1)], request_timeout=10)["zk-logs"].result(timeout=10)
        producer = Producer({"bootstrap.servers": second.bootstrap_servers})
        producer.produce("zk-logs", b"x")
        assert producer.flush(10) == 0  # the leader's log exists from here on
        assert _incremental(first.bootstrap_servers, "", [("log.retention.ms", SET, "4242")]) == (OK, None)
        assert first.store is not None
        zk = first.store.client  # type: ignore[attr-defined]
        assert json.loads(zk.get("/config/brokers/<default>")[0]) == {
            "version": 1, "config": {"log.retention.ms": "4242"}}
        other = _module(second, ConfigsModule)
        wait_until(lambda: other.log_config("zk-logs").retention_ms == 4242, timeout=5.0,
                   what="the default on the other broker")
        # the other broker's live log too, whichever broker leads it
        for b in (first, second):
            log = _module(b, DataPlaneModule).partitions.logs.get("zk-logs", 0)
            if log is not None:
                wait_until(lambda log=log: log.config.retention_ms == 4242, timeout=5.0, what="the live log")
    with Broker({**config, "broker.id": "2"}) as again:  # a restart reads the stored default
        assert _module(again, ConfigsModule).log_config("zk-logs").retention_ms == 4242
        _, _, configs = _describe(again.bootstrap_servers, "2", ["log.retention.ms"])
        assert configs["log.retention.ms"]["config_source"] == DYNAMIC_DEFAULT


def test_a_restarted_broker_applies_the_stored_default_to_the_logs_it_reads(zk_connect: str,
                                                                            tmp_path: Any) -> None:
    config = {"zookeeper.connect": zk_connect, "broker.id": "1", "log.dirs": str(tmp_path)}
    with Broker(config) as b:
        _create(b, NewTopic("plain", 1, 1),
                NewTopic("kept", 1, 1, topic_configs={"retention.ms": str(DAY_MS)}))
        assert _incremental(b.bootstrap_servers, "", [("log.segment.bytes", SET, "100")]) == (OK, None)
        producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers, linger_ms=0)
        for i in range(4):
            for topic in ("plain", "kept"):
                producer.send(topic, f"record {i}".encode()).get(timeout=10)
        producer.close()
        assert _incremental(b.bootstrap_servers, "", [("log.retention.ms", SET, "1")]) == (OK, None)
    time.sleep(0.05)
    with Broker(config) as again:
        # no client has touched either partition: the logs read from disk obey the stored settings
        removed = again.logs.apply_retention()
        assert removed.get(("plain", 0), 0) >= 3 and ("kept", 0) not in removed


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(DYNAMIC_LOG_KEYS)),
       st.one_of(st.text(max_size=30), st.integers(-(1 << 64), 1 << 64).map(str),
                 st.sampled_from(["-1", "-2", "0", "1", "14", "compact", "delete,compact", "CreateTime",
                                  "true", "0.7", "9223372036854775808", " 5 "])))
def test_any_value_of_a_dynamic_log_key_is_accepted_or_refused_naming_it(name: str, value: str) -> None:
    """The check sees stored text (a key kafkapy does not declare stays text): it accepts, or
    refuses with Kafka's ConfigError naming the key (the value echoed as given), never another
    exception."""
    try:
        validate_log_settings({name: value})
    except ConfigError as exc:
        assert f"for configuration {name}: " in str(exc) or "compaction.lag.ms" in str(exc)


def test_a_shorter_cleaner_backoff_cleans_sooner_on_a_virtual_clock() -> None:
    """log.cleaner.backoff.ms (15 s by default) lowered to 1 s: two virtual seconds later the
    compacted topic is cleaned, without a restart."""
    clock = VirtualClock()
    with Broker({"broker.id": "1"}, clock=clock) as b:
        _create(b, NewTopic("compacted", 1, 1,
                            topic_configs={"segment.bytes": "100", "cleanup.policy": "compact"}))
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0,
                             "max.in.flight.requests.per.connection": 1})
        for i in range(6):
            producer.produce("compacted", b"v%d" % i, b"same")
            assert producer.flush(10) == 0
        logs = _module(b, DataPlaneModule).partitions.logs
        assert _incremental(b.bootstrap_servers, "", [("log.cleaner.backoff.ms", SET, "1000")]) == (OK, None)
        clock.advance(2)
        assert logs.get("compacted", 0).cleaned_to > 0


def test_a_dynamic_unclean_default_elects_an_out_of_sync_replica() -> None:
    """Kafka's DynamicLogConfig turns unclean elections on for every topic without an override
    (the controller's enableDefaultUncleanLeaderElection): replicas [1, 2], 2 goes, then 1; 2
    comes back out of sync and leads once the cluster default allows it, except where the topic
    says false."""
    with Broker({"auto.leader.rebalance.enable": False}, brokers=3) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10000)
        try:
            admin.create_topics([NewTopic("by-default", replica_assignments={0: [1, 2]}),
                                 NewTopic("says-no", replica_assignments={0: [1, 2]},
                                          topic_configs={"unclean.leader.election.enable": "false"})])
        finally:
            admin.close()
        view = cluster.brokers[2]
        assert view.runtime is not None
        states = lambda: view.runtime.cluster.partition_states  # type: ignore[union-attr]  # noqa: E731
        wait_until(lambda: all((t, 0) in states() for t in ("by-default", "says-no")), 10, "the states")
        cluster.stop_broker(2)
        cluster.stop_broker(1)
        cluster.start_broker(2)
        time.sleep(0.5)
        assert (states()["by-default", 0].leader, states()["says-no", 0].leader) == (-1, -1)
        unclean = [("unclean.leader.election.enable", SET, "true")]
        assert _incremental(view.bootstrap_servers, "", unclean) == (OK, None)
        wait_until(lambda: states()["by-default", 0].leader == 2, 10, "the election the default allows")
        assert states()["says-no", 0].leader == -1
