"""The five admin tools (delete-records, get-offsets, log-dirs, leader-election,
broker-api-versions) log in with --command-config to a SASL listener with ACLs: a super user runs
each, and a user without the permissions gets Kafka's refusals, each in its tool's words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkapy import Broker
from kafkapy.cli import main
from kafkapy.testing import BrokerFactory

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def _login(tmp_path: Path, user: str, password: str) -> str:
    path = tmp_path / f"{user}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="{user}" password="{password}";\n')
    return str(path)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


@pytest.fixture
def acl_broker(kafka_broker_factory: BrokerFactory) -> Broker:
    broker = kafka_broker_factory({"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                   "sasl.enabled.mechanisms": "PLAIN",
                                   "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                                   "authorizer.class.name": "acl", "super.users": "User:admin"})
    broker.seed({"orders": {"partitions": 1, "records": [{"value": "v"} for _ in range(4)]}})
    return broker


def test_the_super_user_runs_every_tool(acl_broker: Broker, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    admin = ("--bootstrap-server", acl_broker.bootstrap_servers, "--command-config",
             _login(tmp_path, "admin", "admin-secret"))
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": "orders", "partition": 0, "offset": 1}]}))
    assert _run(capsys, "delete-records", *admin, "--offset-json-file", str(offsets))[1][-1] \
        == "partition: orders-0\tlow_watermark: 1"
    assert _run(capsys, "get-offsets", *admin, "--topic", "orders", "--time", "earliest") \
        == (0, ["orders:0:1"], "")
    code, lines, _ = _run(capsys, "log-dirs", *admin, "--describe", "--topic-list", "orders")
    assert code == 0 and '"partition":"orders-0"' in lines[2]
    code, lines, _ = _run(capsys, "broker-api-versions", *admin)
    assert code == 0 and "\tDeleteRecords(21): 0 to 2 [usable: 2]," in lines
    # kafka-leader-election.sh's own name for the properties file
    admin_config = ("--bootstrap-server", acl_broker.bootstrap_servers, "--admin.config", admin[3])
    assert _run(capsys, "leader-election", *admin_config, "--election-type", "preferred", "--topic", "orders",
                "--partition", "0") == (0, ["Valid replica already elected for partitions orders-0"], "")


def test_a_user_without_permissions_gets_each_refusal(acl_broker: Broker, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    alice = ("--bootstrap-server", acl_broker.bootstrap_servers, "--command-config",
             _login(tmp_path, "alice", "alice-secret"))
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": "orders", "partition": 0, "offset": 1}]}))
    # alice may not even see the topic: as for a missing one, Metadata does not list it.
    code, lines, _ = _run(capsys, "delete-records", *alice, "--offset-json-file", str(offsets))
    assert code == 1 and lines[-1] == "partition: orders-0\terror: UNKNOWN_TOPIC_OR_PARTITION"
    code, _, err = _run(capsys, "log-dirs", *alice, "--describe")
    assert code == 1 and err.endswith("refused DescribeLogDirs: CLUSTER_AUTHORIZATION_FAILED\n")
    assert _run(capsys, "leader-election", *alice, "--election-type", "preferred", "--all-topic-partitions") \
        == (1, [], "kafkapy leader-election: Not authorized to perform leader election\n")
    code, _, err = _run(capsys, "get-offsets", *alice)
    assert code == 1 and "Could not match any topic-partitions" in err
