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
        assert "error 42" in capsys.readouterr().err
        assert main([*base, "--alter", "--add-config", "x=1", "--ip", "1.2.3.4", "--user", "u"]) == 2
