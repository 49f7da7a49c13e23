"""`kafkapy configs --entity-type groups`: kafka-configs.sh's flags for Kafka 4's group configs."""

from __future__ import annotations

import pytest

from kafkapy import Broker
from kafkapy.cli import main
from kafkapy.testing import BrokerFactory


@pytest.fixture
def broker(kafka_broker_factory: BrokerFactory) -> Broker:
    return kafka_broker_factory()


def run(capsys: pytest.CaptureFixture[str], broker: Broker, *args: str) -> tuple[int, str, str]:
    code = main(["configs", "--bootstrap-server", broker.bootstrap_servers, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_alter_describe_and_delete_a_groups_configs(broker: Broker,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, broker, "--alter", "--entity-type", "groups", "--entity-name", "workers",
               "--add-config", "share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000") == (
        0, "Completed updating config for group workers.\n", "")
    code, out, _ = run(capsys, broker, "--describe", "--entity-type", "groups", "--entity-name", "workers")
    assert code == 0
    assert out.splitlines() == [
        "Dynamic configs for group workers are:",
        "  share.auto.offset.reset=earliest sensitive=false "
        "synonyms={DYNAMIC_GROUP_CONFIG:share.auto.offset.reset=earliest, "
        "DEFAULT_CONFIG:share.auto.offset.reset=latest}",
        "  share.record.lock.duration.ms=20000 sensitive=false "
        "synonyms={DYNAMIC_GROUP_CONFIG:share.record.lock.duration.ms=20000, "
        "DEFAULT_CONFIG:share.record.lock.duration.ms=30000}"]
    deleted = run(capsys, broker, "--alter", "--group", "workers",
                  "--delete-config", "share.auto.offset.reset")
    assert deleted == (0, "Completed updating config for group workers.\n", "")
    code, out, _ = run(capsys, broker, "--describe", "--group", "workers", "--all")
    assert "  share.auto.offset.reset=latest sensitive=false" in out
    assert "  share.record.lock.duration.ms=20000 sensitive=false" in out
    assert out.count("\n  ") == 7  # every key of the group, with --all


def test_refusals_are_one_line(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, broker, "--alter", "--group", "g", "--add-config", "session.timeout.ms=1")
    assert (code, err) == (1, "kafkapy configs: error INVALID_CONFIG: Unknown group config name: "
                              "session.timeout.ms\n")
    code, _, err = run(capsys, broker, "--describe", "--group", "g", "--topic", "t")
    assert code == 2 and "takes one --entity-name" in err
