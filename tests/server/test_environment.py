"""``kafkapy serve --env``: KAFKA_* variables and CLUSTER_ID read as the apache/kafka image reads them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kafkapy.server.environment import (
    IMAGE_DEFAULT_CLUSTER_ID,
    IMAGE_DEFAULT_SETTINGS,
    setting_name,
    settings_from_environment,
)
from tests.serve_in_process import serve_in_process
from tests.test_cli import Served

TIMEOUT_S = 20
WORKTREE = str(Path(__file__).resolve().parents[2])  # the child imports this tree's kafkapy


@pytest.mark.parametrize(("variable", "key"), [
    ("KAFKA_ADVERTISED_LISTENERS", "advertised.listeners"),
    ("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "listener.security.protocol.map"),
    ("KAFKA_LISTENER_NAME_SSL__INTERNAL_SSL_CLIENT_AUTH", "listener.name.ssl_internal.ssl.client.auth"),
    ("KAFKA_SOME___DASHED_KEY", "some-dashed.key"),
    ("KAFKA_KAFKA_METRICS_REPORTERS", "kafka.metrics.reporters"),  # KAFKA-17911: the prefix only
])
def test_a_variable_names_a_key_by_the_images_rule(variable: str, key: str) -> None:
    assert setting_name(variable) == key


def test_the_images_own_variables_and_others_are_not_settings() -> None:
    environ = {"KAFKA_HEAP_OPTS": "-Xmx1G", "KAFKA_OPTS": "-Dx=y", "KAFKA_LOG4J_ROOT_LOGLEVEL": "WARN",
               "KAFKA_JMX_HOSTNAME": "h", "KAFKA_VERSION": "3.9.0", "PATH": "/bin",
               "kafka_num_partitions": "2", "KAFKA_NUM_PARTITIONS": "3", "CLUSTER_ID": "abc"}
    assert settings_from_environment(environ, {}) == {"num.partitions": "3", "cluster.id": "abc"}


def test_the_environment_wins_over_the_file_and_values_are_read_as_properties() -> None:
    environ = {"KAFKA_NUM_PARTITIONS": "3", "KAFKA_SASL_JAAS_CONFIG": 'a required user_x="y";',
               "KAFKA_LOG_DIRS": r"C:\\logs"}
    file_settings = {"num.partitions": "1", "broker.id": "4"}
    assert settings_from_environment(environ, file_settings) == {
        "num.partitions": "3", "broker.id": "4", "sasl.jaas.config": 'a required user_x="y";',
        "log.dirs": "C:\\logs", "cluster.id": IMAGE_DEFAULT_CLUSTER_ID}


def test_listeners_come_from_the_advertised_ones_unless_set_or_a_controller() -> None:
    advertised = {"KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://broker:19092,HOST://localhost:9092"}
    derived = settings_from_environment(advertised, None)["listeners"]
    assert derived == "PLAINTEXT://0.0.0.0:19092,HOST://0.0.0.0:9092"
    given = {**advertised, "KAFKA_LISTENERS": "PLAINTEXT://:19092,HOST://:9092"}
    assert settings_from_environment(given, None)["listeners"] == "PLAINTEXT://:19092,HOST://:9092"
    controller = {**advertised, "KAFKA_PROCESS_ROLES": "controller"}
    assert "listeners" not in settings_from_environment(controller, None)


def test_with_no_settings_and_no_file_the_images_default_file_runs() -> None:
    default_file = {**IMAGE_DEFAULT_SETTINGS, "cluster.id": "abc"}
    assert settings_from_environment({"CLUSTER_ID": "abc"}, None) == default_file
    assert settings_from_environment({}, {"broker.id": "1"}) == {"broker.id": "1",
                                                                "cluster.id": IMAGE_DEFAULT_CLUSTER_ID}


def test_zookeeper_keeps_its_own_cluster_id() -> None:
    assert "cluster.id" not in settings_from_environment({"KAFKA_ZOOKEEPER_CONNECT": "zk:2181"}, None)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def serve_environment(**variables: str) -> dict[str, str]:
    """A ``kafkapy serve`` child's environment: this one's without its KAFKA_* variables, this tree's
    kafkapy first (PYTHONPATH), and ``variables``."""
    keep = {name: value for name, value in os.environ.items() if not name.startswith("KAFKA_")}
    return {**keep, "PYTHONPATH": WORKTREE, **variables}


def test_serve_env_runs_a_docker_compose_kraft_node_for_a_real_client() -> None:
    port = _free_port()
    environment = serve_environment(
        KAFKA_NODE_ID="5", KAFKA_PROCESS_ROLES="broker,controller", CLUSTER_ID="4L6g3nShT-eMCtK--X86sw",
        KAFKA_CONTROLLER_QUORUM_VOTERS="5@localhost:29093", KAFKA_CONTROLLER_LISTENER_NAMES="CONTROLLER",
        KAFKA_LISTENER_SECURITY_PROTOCOL_MAP="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PLAIN-HOST:PLAINTEXT",
        KAFKA_LISTENERS="PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0,PLAIN-HOST://:" + str(port),
        KAFKA_ADVERTISED_LISTENERS=f"PLAINTEXT://127.0.0.1:0,PLAIN-HOST://127.0.0.1:{port}",
        KAFKA_INTER_BROKER_LISTENER_NAME="PLAINTEXT", KAFKA_NUM_PARTITIONS="3",
        KAFKA_AUTO_CREATE_TOPICS_ENABLE="true", KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR="1",
        KAFKA_HEAP_OPTS="-Xmx1G")
    server = Served("--env", env=environment)
    try:
        server.wait_listening()
        bootstrap = f"127.0.0.1:{port}"
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("from-env", b"v")
        assert producer.flush(TIMEOUT_S) == 0
        metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=TIMEOUT_S)
        assert metadata.cluster_id == "4L6g3nShT-eMCtK--X86sw" and list(metadata.brokers) == [5]
        assert str(metadata.brokers[5]) == f"127.0.0.1:{port}/5"  # the listener asked on, advertised
        assert len(metadata.topics["from-env"].partitions) == 3
        assert server.stop() == 0
        listening = [line.split("listening on ")[1].split("://")[0]
                     for line in server.stderr if "listening on" in line]
        assert sorted(listening) == ["PLAIN-HOST", "PLAINTEXT"]  # the controller's listener is not served
        assert not [line for line in server.stderr if "WARNING" in line], server.stderr
    finally:
        server.kill()


def test_serve_env_listens_where_it_advertises_and_override_wins(tmp_path: Path) -> None:
    port = _free_port()
    config = tmp_path / "server.properties"
    config.write_text("broker.id=1\nnum.partitions=1\n", encoding="utf-8")
    environment = serve_environment(KAFKA_ADVERTISED_LISTENERS=f"PLAINTEXT://127.0.0.1:{port}",
                               KAFKA_NUM_PARTITIONS="2", KAFKA_BROKER_ID="2")
    server = Served("--env", "--config", str(config), "--override", "broker.id=3", env=environment)
    try:
        name, host, bound = server.wait_listening()
        assert (name, host, bound) == ("PLAINTEXT", "0.0.0.0", port)
        metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=TIMEOUT_S)
        assert list(metadata.brokers) == [3]
        Producer({"bootstrap.servers": f"127.0.0.1:{port}"}).produce("two", b"v")
        assert server.stop() == 0
    finally:
        server.kill()


def test_serve_reads_the_variables_only_with_env() -> None:
    environment = serve_environment(KAFKA_BROKER_ID="seven")
    result = subprocess.run([sys.executable, "-m", "kafkapy.cli", "serve", "--env"], env=environment,
                            capture_output=True, text=True, timeout=60)
    assert result.stderr == ("kafkapy serve: error: invalid value 'seven' for broker.id: "
                             "Not a number of type INT\n")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    server = Served("--override", "listeners=PLAINTEXT://127.0.0.1:0", env=environment)
    try:
        assert server.wait_listening()[0] == "PLAINTEXT"
        assert server.stop() == 0
    finally:
        server.kill()
    code, stderr = serve_in_process("--env", "--override", "broker.id=eight")
    assert code == 2 and "'eight' for broker.id" in stderr
