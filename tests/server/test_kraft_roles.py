"""A KRaft server.properties (process.roles, controller.listener.names, the quorum keys) as Kafka's
broker reads it: the controller's listeners are not served, and a controller-only node is refused."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from kafkapy import Broker
from kafkapy.server.config import ConfigError
from tests.serve_in_process import serve_in_process
from tests.test_cli import Served, kafkapy

TIMEOUT_S = 20

# Kafka 3.9's config/kraft/server.properties (the apache/kafka image's default), on ephemeral ports.
COMBINED: dict[str, Any] = {
    "process.roles": "broker,controller", "node.id": "1", "controller.quorum.voters": "1@localhost:9093",
    "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
    "inter.broker.listener.name": "PLAINTEXT",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,"
                                      "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
}


def _refusal(settings: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as refused:
        with Broker(settings):
            pass
    return str(refused.value)


def test_a_combined_node_serves_its_broker_listener_and_not_the_controllers() -> None:
    advertised = "PLAINTEXT://127.0.0.1:0,CONTROLLER://localhost:9093"
    with Broker({**COMBINED, "advertised.listeners": advertised}) as broker:
        assert set(broker.listeners) == {"PLAINTEXT"}
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        brokers = admin.list_topics(timeout=TIMEOUT_S).brokers
        assert [str(b) for b in brokers.values()] == [f"{broker.bootstrap_servers}/1"]


def test_a_cluster_from_one_kraft_file_serves_each_brokers_listener_only() -> None:
    """Broker(brokers=3) (serve --brokers 3) makes nodes 1, 2 and 3 of the file's node 1: the voter
    checks, about a quorum kafkapy does not run, are not made."""
    with Broker(COMBINED, brokers=3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        assert sorted(admin.list_topics(timeout=TIMEOUT_S).brokers) == [1, 2, 3]
        assert all(set(member.listeners) == {"PLAINTEXT"} for member in cluster.brokers)


def test_a_broker_only_node_serves_and_its_controller_listener_is_elsewhere() -> None:
    settings = {**COMBINED, "process.roles": "broker", "node.id": "2", "listeners": "PLAINTEXT://127.0.0.1:0"}
    with Broker(settings) as broker:
        assert set(broker.listeners) == {"PLAINTEXT"} and broker.broker_id == 2


@pytest.mark.parametrize(("changes", "refusal"), [
    ({"process.roles": "controller"},
     "process.roles=controller: kafkapy runs no KRaft controller (its metadata is kept in memory, or in "
     "ZooKeeper with zookeeper.connect), so a controller-only node has nothing to serve: leave it out, and "
     "start each broker with process.roles=broker or broker,controller"),
    ({"process.roles": "broker,broker"}, "Duplicate role names found in `process.roles`: "
                                          "ArrayBuffer(broker, broker)"),
    ({"node.id": None}, "Missing configuration `node.id` which is required when `process.roles` is defined "
                        "(i.e. when running in KRaft mode)."),
    ({"controller.quorum.voters": None},
     "If using process.roles, either controller.quorum.bootstrap.servers must contain the set of bootstrap "
     "controllers or controller.quorum.voters must contain a parseable set of controllers."),
    ({"listeners": "PLAINTEXT://127.0.0.1:0"},
     "controller.listener.names must contain at least one value appearing in the 'listeners' configuration "
     "when running the KRaft controller role"),
    ({"process.roles": "broker", "node.id": "2"},
     "controller.listener.names must not contain a value appearing in the 'listeners' configuration when "
     "running KRaft with just the broker role"),
    ({"controller.listener.names": "CONTROLLER,PLAINTEXT"},
     "There must be at least one broker advertised listener. Perhaps all listeners appear in "
     "controller.listener.names?"),
    ({"process.roles": None}, "controller.listener.names must be empty when not running in KRaft mode: "
                              "[CONTROLLER]"),
], ids=["controller-only", "duplicate", "no-node-id", "no-quorum", "no-controller-listener",
        "broker-with-controller-listener", "no-broker-listener", "names-without-kraft"])
def test_kafkas_checks_of_the_kraft_keys_in_its_words(changes: dict[str, Any], refusal: str) -> None:
    settings = {**COMBINED, **changes}
    assert _refusal({k: v for k, v in settings.items() if v is not None}) == refusal


def test_a_listener_name_with_a_dash_is_kafkas_too() -> None:
    """The apache/kafka image's SSL example names a listener SSL-INTERNAL."""
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0,PLAIN-INTERNAL://127.0.0.1:0",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,PLAIN-INTERNAL:PLAINTEXT",
                "inter.broker.listener.name": "PLAIN-INTERNAL"}
    with Broker(settings) as broker:
        assert set(broker.listeners) == {"PLAINTEXT", "PLAIN-INTERNAL"}


def _properties(path: Path, settings: dict[str, Any]) -> str:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()), encoding="utf-8")
    return str(path)


def test_serve_with_kafkas_kraft_file_serves_one_listener_to_a_real_client(tmp_path: Path) -> None:
    config = _properties(tmp_path / "server.properties", COMBINED)
    server = Served("--config", config)
    try:
        name, host, port = server.wait_listening()
        assert name == "PLAINTEXT"
        bootstrap = f"{host}:{port}"
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("kraft-file", b"v")
        assert producer.flush(TIMEOUT_S) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["kraft-file"])
        message = consumer.poll(TIMEOUT_S)
        consumer.close()
        assert message is not None and message.value() == b"v"
        assert server.stop() == 0
        assert sum("listening on" in line for line in server.stderr) == 1, server.stderr
    finally:
        server.kill()


def test_serve_refuses_a_controller_only_node_in_one_line(tmp_path: Path) -> None:
    config = _properties(tmp_path / "controller.properties",
                         {**COMBINED, "process.roles": "controller", "listeners": "CONTROLLER://127.0.0.1:0"})
    result = kafkapy("serve", "--config", config)
    assert result.returncode == 2
    assert result.stderr.startswith("kafkapy serve: error: process.roles=controller: kafkapy runs no KRaft")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_serve_in_process_refuses_a_broker_given_the_controllers_listener() -> None:
    code, stderr = serve_in_process("--override", "process.roles=broker", "--override", "node.id=2",
                                    "--override", "controller.quorum.voters=1@localhost:9093",
                                    "--override", "controller.listener.names=CONTROLLER",
                                    "--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
                                    "--override", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,"
                                                  "CONTROLLER:PLAINTEXT")
    assert code == 2 and "must not contain a value appearing in the 'listeners'" in stderr


def test_the_controller_port_is_not_bound(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    with Broker({**COMBINED, "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{free}"}):
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", free), timeout=2).close()
