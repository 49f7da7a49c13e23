"""``kafkapy configs`` against a served broker, printing kafka-configs.sh's format."""

from __future__ import annotations

import pytest

from kafkapy import Broker
from kafkapy.cli import main


def test_configs_cli_alter_describe_delete(capsys: pytest.CaptureFixture[str]) -> None:
    with Broker() as b:
        a = b.bootstrap_servers
        base = ["configs", "--bootstrap-server", a]
        add = "connection_creation_rate=100"
        assert (
            main([*base, "--alter", "--add-config", add, "--entity-type", "ips", "--entity-name", "1.2.3.4"])
            == 0
        )
        assert main([*base, "--alter", "--add-config", "connection_creation_rate=7", "--ip-defaults"]) == 0
        assert (
            main(
                [
                    *base,
                    "--alter",
                    "--add-config",
                    "producer_byte_rate=1024",
                    "--user",
                    "alice",
                    "--client",
                    "c1",
                ]
            )
            == 0
        )
        capsys.readouterr()
        assert main([*base, "--describe", "--ip", "1.2.3.4"]) == 0
        assert (
            capsys.readouterr().out == "Quota configs for ip '1.2.3.4' are connection_creation_rate=100.0\n"
        )
        assert main([*base, "--describe", "--entity-type", "ips", "--entity-default"]) == 0
        assert (
            capsys.readouterr().out == "Quota configs for the default ip are connection_creation_rate=7.0\n"
        )
        assert main([*base, "--describe", "--entity-type", "users", "--entity-type", "clients"]) == 0
        assert capsys.readouterr().out == (
            "Quota configs for user-principal 'alice', client-id 'c1' are producer_byte_rate=1024.0\n"
        )
        assert main([*base, "--alter", "--delete-config", "connection_creation_rate", "--ip", "1.2.3.4"]) == 0
        capsys.readouterr()
        assert main([*base, "--describe", "--entity-type", "ips"]) == 0
        assert (
            capsys.readouterr().out == "Quota configs for the default ip are connection_creation_rate=7.0\n"
        )
        assert (
            main([*base, "--alter", "--add-config", "connection_creation_rate=1.5", "--ip", "1.2.3.4"]) == 1
        )
        assert "error INVALID_REQUEST" in capsys.readouterr().err
        assert main([*base, "--alter", "--add-config", "x=1", "--ip", "1.2.3.4", "--user", "u"]) == 2


def test_configs_cli_dynamic_broker_configs(capsys: pytest.CaptureFixture[str]) -> None:
    with Broker({"broker.id": "5"}) as b:
        base = ["configs", "--bootstrap-server", b.bootstrap_servers]
        assert (
            main(
                [
                    *base,
                    "--alter",
                    "--add-config",
                    "max.connections=900",
                    "--entity-type",
                    "brokers",
                    "--entity-default",
                ]
            )
            == 0
        )
        assert capsys.readouterr().out == "Completed updating default config for brokers in the cluster.\n"
        overrides = (
            "max.connections.per.ip.overrides=[127.0.0.2:3,127.0.0.3:4],max.connection.creation.rate=50"
        )
        assert main([*base, "--alter", "--add-config", overrides, "--broker", "5"]) == 0
        assert capsys.readouterr().out == "Completed updating config for broker 5.\n"
        assert main([*base, "--describe", "--broker-defaults"]) == 0
        assert capsys.readouterr().out == (
            "Default configs for brokers in the cluster are:\n"
            "  max.connections=900 sensitive=false "
            "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:max.connections=900}\n"
        )
        assert main([*base, "--describe", "--entity-type", "brokers", "--entity-name", "5"]) == 0
        assert capsys.readouterr().out == (
            "Dynamic configs for broker 5 are:\n"
            "  max.connection.creation.rate=50 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
            "max.connection.creation.rate=50, DEFAULT_CONFIG:max.connection.creation.rate=2147483647}\n"
            "  max.connections.per.ip.overrides=127.0.0.2:3,127.0.0.3:4 sensitive=false synonyms="
            "{DYNAMIC_BROKER_CONFIG:max.connections.per.ip.overrides=127.0.0.2:3,127.0.0.3:4, "
            "DEFAULT_CONFIG:max.connections.per.ip.overrides=}\n"
        )
        assert b.runtime is not None
        quotas = next(m for m in b.runtime.modules if m.name == "quotas").connection_quotas  # type: ignore[attr-defined]
        assert (quotas.max_connections, quotas.per_ip_overrides) == (900, {"127.0.0.2": 3, "127.0.0.3": 4})
        assert (
            main([*base, "--alter", "--delete-config", "max.connection.creation.rate", "--broker", "5"]) == 0
        )
        assert quotas.broker_rate.bound is None  # back to Kafka's default, Int.MaxValue: no limit
        capsys.readouterr()
        assert main([*base, "--alter", "--add-config", "max.connections=many", "--broker-defaults"]) == 1
        assert "error INVALID_REQUEST" in capsys.readouterr().err
        assert main([*base, "--describe", "--broker", "9"]) == 1
        assert "error INVALID_REQUEST" in capsys.readouterr().err
        assert main([*base, "--describe", "--broker", "5", "--ip", "1.2.3.4"]) == 2
