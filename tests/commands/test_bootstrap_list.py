"""``--bootstrap-server`` takes a comma-separated list, as Kafka's tools do: the value
``Broker(brokers=3).bootstrap_servers`` gives works as it is, and a dead first address is passed over."""

from __future__ import annotations

import socket

import pytest

from kafkapy import Broker
from kafkapy.cli import main
from kafkapy.client import ClientError, SimpleClient, parse_bootstrap
from kafkapy.protocol.api_keys import ApiKey


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _refused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # bound, never listening: connecting is refused


def test_the_bootstrap_list_of_a_cluster_works_as_given(capsys: pytest.CaptureFixture[str]) -> None:
    with Broker(brokers=3) as cluster:
        assert cluster.bootstrap_servers.count(",") == 2
        with SimpleClient(cluster.bootstrap_servers, 10.0) as client:
            body = client.request(ApiKey.CREATE_TOPICS, 4, {
                "topics": [{"name": "listed", "num_partitions": 3, "replication_factor": 3, "assignments": [],
                            "configs": []}], "timeout_ms": 10_000, "validate_only": False})
        assert body["topics"][0]["error_code"] == 0
        code, out, err = _run(capsys, "topics", "--bootstrap-server", cluster.bootstrap_servers, "--list")
        assert code == 0, err
        assert "listed" in out.split()
        # A command that must reach the controller finds it from any of them.
        code, _, err = _run(capsys, "features", "--bootstrap-server", cluster.bootstrap_servers, "describe")
        assert code == 0, err


def test_a_dead_address_first_is_passed_over() -> None:
    with Broker() as broker:
        dead = f"127.0.0.1:{_refused_port()}"
        with SimpleClient(f"{dead}, {broker.bootstrap_servers}", 5.0) as client:
            body = client.request(ApiKey.API_VERSIONS, 0, {})
            assert body["error_code"] == 0
            assert f"{client.host}:{client.port}" == broker.bootstrap_servers


def test_every_address_dead_names_each_failure() -> None:
    first, second = _refused_port(), _refused_port()
    client = SimpleClient(f"127.0.0.1:{first},127.0.0.1:{second}", 5.0)
    with pytest.raises(ClientError) as raised:
        client.request(ApiKey.API_VERSIONS, 0, {})
    message = str(raised.value)
    assert message.startswith(f"cannot connect to 127.0.0.1:{first}: ")
    assert f"; nor to 127.0.0.1:{second}: " in message and "\n" not in message


@pytest.mark.parametrize("text", ["", ",", "a:1,b", "a:1,:2", "a:1,b:0"])
def test_a_malformed_entry_is_refused(text: str) -> None:
    with pytest.raises(ClientError, match="is not HOST:PORT"):
        parse_bootstrap(text)


def test_a_malformed_list_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["acls", "--bootstrap-server", "127.0.0.1:9092,oops", "--list"])
    assert exited.value.code == 2
    assert "HOST:PORT[,HOST:PORT...]" in capsys.readouterr().err
