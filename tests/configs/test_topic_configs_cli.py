"""``kafkapy configs --entity-type topics`` against a served broker, as kafka-configs.sh prints it."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import given
from hypothesis import strategies as st

from kafkapy import Broker
from kafkapy.cli import main
from kafkapy.commands.configs import _parse_add, _split_configs, _Usage


def test_topic_configs_cli_alter_describe_delete(capsys: pytest.CaptureFixture[str]) -> None:
    with Broker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("orders", 1, 1)], request_timeout=10)["orders"].result(timeout=10)
        base = ["configs", "--bootstrap-server", b.bootstrap_servers]
        topic = ["--entity-type", "topics", "--entity-name", "orders"]
        capsys.readouterr()
        assert (
            main(
                [
                    *base,
                    *topic,
                    "--alter",
                    "--add-config",
                    "retention.ms=1000,cleanup.policy=[compact,delete]",
                ]
            )
            == 0
        )
        assert capsys.readouterr().out == "Completed updating config for topic orders.\n"
        assert main([*base, *topic, "--describe"]) == 0
        assert capsys.readouterr().out.splitlines() == [
            "Dynamic configs for topic orders are:",
            "  cleanup.policy=compact,delete sensitive=false "
            "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
            "DEFAULT_CONFIG:log.cleanup.policy=delete}",
            "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}",
        ]
        assert main([*base, "--topic", "orders", "--alter", "--delete-config", "retention.ms"]) == 0
        capsys.readouterr()
        assert main([*base, "--topic", "orders", "--describe", "--all"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0] == "All configs for topic orders are:"
        assert "  retention.ms=604800000 sensitive=false synonyms={}" in lines
        assert (
            "  segment.bytes=1073741824 sensitive=false "
            "synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}"
        ) in lines
        # a value Kafka refuses: one line naming Kafka's reason, exit 1
        assert main([*base, *topic, "--alter", "--add-config", "segment.bytes=1"]) == 1
        err = capsys.readouterr().err
        assert err.startswith(
            "kafkapy configs: error INVALID_CONFIG: Invalid config value for resource "
            "ConfigResource(type=TOPIC, name='orders'): Invalid value 1 for configuration "
            "segment.bytes: Value must be at least 14"
        )
        assert len(err.splitlines()) == 1
        assert main([*base, "--topic", "nope", "--describe"]) == 1
        assert "error UNKNOWN_TOPIC_OR_PARTITION" in capsys.readouterr().err
        # a topic with another entity is a usage error
        assert main([*base, "--topic", "orders", "--ip", "1.2.3.4", "--describe"]) == 2


def test_describe_without_a_name_describes_every_topic_and_group(capsys: pytest.CaptureFixture[str]) -> None:
    """As kafka-configs.sh 4.1: the names come from ListConfigResources v1 (groups: those with configs)."""
    with Broker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        made = admin.create_topics([NewTopic("orders", 1, 1), NewTopic("audit", 1, 1)], request_timeout=10)
        for future in made.values():
            future.result(timeout=10)
        base = ["configs", "--bootstrap-server", b.bootstrap_servers]
        assert main([*base, "--topic", "orders", "--alter", "--add-config", "retention.ms=1000"]) == 0
        assert main([*base, "--group", "billing", "--alter", "--add-config",
                     "consumer.session.timeout.ms=50000"]) == 0
        capsys.readouterr()
        assert main([*base, "--entity-type", "topics", "--describe"]) == 0
        assert capsys.readouterr().out.splitlines() == [
            "Dynamic configs for topic audit are:",
            "Dynamic configs for topic orders are:",
            "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}",
        ]
        assert main([*base, "--entity-type", "groups", "--describe"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0] == "Dynamic configs for group billing are:"
        assert lines[1].startswith("  consumer.session.timeout.ms=50000 sensitive=false")
        assert len(lines) == 2


def test_describe_without_a_name_needs_kafka_4_1(capsys: pytest.CaptureFixture[str]) -> None:
    with Broker({"kafka.version": "4.0"}) as b:
        capsys.readouterr()
        assert main(["configs", "--bootstrap-server", b.bootstrap_servers, "--entity-type", "topics",
                     "--describe"]) == 1
        assert capsys.readouterr().err == (
            "kafkapy configs: listing every topic needs ListConfigResources v1 (Kafka 4.1 and later); "
            "name one with --entity-name\n")


@given(st.text("ab.=,[] 1e-+x", max_size=30) | st.text(max_size=20))
def test_any_add_config_text_gives_pairs_or_one_usage_error(text: str) -> None:
    """--add-config for topics/brokers (K=V, brackets keep commas) and for quotas (K=number)."""
    for parse in (_split_configs, _parse_add):
        try:
            pairs = parse(text)
        except _Usage as refused:
            assert "\n" not in str(refused).replace(text, "")
            continue
        assert all(isinstance(key, str) for key, _ in pairs)
    try:
        pairs = _split_configs(text)
    except _Usage:
        return
    assert all(key and key == key.strip() for key, _ in pairs)


def test_delete_config_of_an_unset_key_fails_and_changes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """As kafka-configs.sh: deleting a config the entity does not set (a typo, a default) is
    "Invalid config(s): ..." and nothing is altered, for topics, brokers and quotas alike; and
    --delete-config may be repeated (kafkapy kept only the last one and said it was done)."""
    with Broker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("orders", 1, 1)], request_timeout=10)["orders"].result(timeout=10)
        base = ["configs", "--bootstrap-server", b.bootstrap_servers]
        assert main([*base, "--topic", "orders", "--alter", "--add-config",
                     "retention.ms=1000,segment.ms=60000,flush.ms=5000"]) == 0
        capsys.readouterr()
        assert main([*base, "--topic", "orders", "--alter", "--delete-config", "retention.ms,retention.mx",
                     "--delete-config", "max.message.bytes"]) == 1
        assert capsys.readouterr().err == \
            "kafkapy configs: Invalid config(s): retention.mx,max.message.bytes\n"
        assert main([*base, "--topic", "orders", "--describe"]) == 0
        assert [line.split("=")[0].strip() for line in capsys.readouterr().out.splitlines()[1:]] == [
            "flush.ms", "retention.ms", "segment.ms"]
        assert main([*base, "--topic", "orders", "--alter", "--delete-config", "retention.ms",
                     "--delete-config", "segment.ms"]) == 0
        capsys.readouterr()
        assert main([*base, "--topic", "orders", "--describe"]) == 0
        kept = [line.split("=")[0].strip() for line in capsys.readouterr().out.splitlines()[1:]]
        assert kept == ["flush.ms"]

        broker = ["--broker", str(b.broker_id)]
        assert main([*base, *broker, "--alter", "--delete-config", "log.retention.ms"]) == 1
        assert capsys.readouterr().err == "kafkapy configs: Invalid config(s): log.retention.ms\n"
        assert main([*base, "--broker-defaults", "--alter", "--add-config", "log.retention.ms=5000"]) == 0
        # set on the cluster default, not on the broker
        assert main([*base, *broker, "--alter", "--delete-config", "log.retention.ms"]) == 1
        assert main([*base, "--broker-defaults", "--alter", "--delete-config", "log.retention.ms"]) == 0

        user = ["--entity-type", "users", "--entity-name", "alice"]
        capsys.readouterr()
        assert main([*base, *user, "--alter", "--add-config", "producer_byte_rate=1024"]) == 0
        assert capsys.readouterr().out == "Completed updating config for user alice.\n"  # Kafka's words
        assert main([*base, "--entity-type", "clients", "--entity-default", "--alter", "--add-config",
                     "consumer_byte_rate=2048"]) == 0
        assert capsys.readouterr().out == "Completed updating default config for clients in the cluster.\n"
        assert main([*base, *user, "--alter", "--delete-config", "consumer_byte_rate"]) == 1
        assert capsys.readouterr().err == "kafkapy configs: Invalid config(s): consumer_byte_rate\n"
        assert main([*base, *user, "--alter", "--delete-config", "producer_byte_rate"]) == 0


def test_describe_brokers_without_a_name_describes_each_then_the_default(
        capsys: pytest.CaptureFixture[str]) -> None:
    """kafka-configs.sh --entity-type brokers --describe: every live broker's dynamic configs, then the
    cluster default's (kafkapy refused it as a usage error)."""
    with Broker({"broker.id": "5"}) as b:
        base = ["configs", "--bootstrap-server", b.bootstrap_servers]
        assert main([*base, "--broker", "5", "--alter", "--add-config", "log.retention.ms=7000"]) == 0
        assert main([*base, "--broker-defaults", "--alter", "--add-config", "log.retention.bytes=100"]) == 0
        capsys.readouterr()
        assert main([*base, "--entity-type", "brokers", "--describe"]) == 0
        assert capsys.readouterr().out.splitlines() == [
            "Dynamic configs for broker 5 are:",
            "  log.retention.ms=7000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=7000, "
            "DEFAULT_CONFIG:log.retention.hours=168}",
            "Default configs for brokers in the cluster are:",
            "  log.retention.bytes=100 sensitive=false "
            "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=100}",
        ]
