"""`kafkapy log-dirs --describe`, the kafka-log-dirs.sh of kafkapy: its JSON holds each log
directory and partition size kafka-python's describe_log_dirs reads, for every broker or the
ones --broker-list names, and the topics --topic-list names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafkapy import Broker
from kafkapy.cli import main
from tests.commands.records_cli import MockCluster


def _run(capsys: pytest.CaptureFixture[str], bootstrap: str, *args: str) -> tuple[int, list[str], str]:
    code = main(["log-dirs", "--bootstrap-server", bootstrap, "--describe", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def _kafka_python_view(bootstrap: str) -> dict[int, dict[str, dict[str, int]]]:
    """{broker: {log dir: {"topic-partition": size}}} as kafka-python reads DescribeLogDirs."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return {entry["broker"]: {d["log_dir"]: {f"{t['name']}-{p['partition_index']}": p["partition_size"]
                                                 for t in d["topics"] for p in t["partitions"]}
                                  for d in entry["log_dirs"]} for entry in admin.describe_log_dirs()}
    finally:
        admin.close()


def _our_view(document: dict[str, Any]) -> dict[int, dict[str, dict[str, int]]]:
    return {b["broker"]: {d["logDir"]: {p["partition"]: p["size"] for p in d["partitions"]}
                          for d in b["logDirs"]} for b in document["brokers"]}


def test_two_log_dirs_as_kafka_python_sees_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    with Broker({"broker.id": 3, "log.dirs": ",".join(dirs)}) as broker:
        broker.seed({"big": {"partitions": 2, "records": [{"value": "x" * 500, "partition": p}
                                                          for p in (0, 1) for _ in range(3)]},
                     "small": {"partitions": 1, "records": [{"value": "y"}]}})
        code, lines, err = _run(capsys, broker.bootstrap_servers)
        expected = _kafka_python_view(broker.bootstrap_servers)
        assert (code, err) == (0, "")
        assert lines[:2] == ["Querying brokers for log directories information",
                             "Received log directory information from brokers 3"]
        document = json.loads(lines[2])
        assert document["version"] == 1 and _our_view(document) == expected
        assert sorted(expected[3]) == dirs
        sizes = {name: size for found in expected[3].values() for name, size in found.items()}
        assert set(sizes) == {"big-0", "big-1", "small-0"} and sizes["big-0"] > sizes["small-0"] > 0
        for log_dir in document["brokers"][0]["logDirs"]:
            assert log_dir["error"] is None
            assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in log_dir["partitions"])
        only = json.loads(_run(capsys, broker.bootstrap_servers, "--topic-list", "small,nope")[1][2])
        assert {name for found in _our_view(only)[3].values() for name in found} == {"small-0"}


def test_broker_list_picks_brokers_and_an_unknown_one_is_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    with Broker({"broker.id": 1}, brokers=3) as cluster:
        cluster.seed({"t": {"partitions": 3, "records": [{"value": "v", "partition": p} for p in range(3)]}})
        code, lines, _ = _run(capsys, cluster.bootstrap_servers, "--broker-list", "3,1")
        assert code == 0 and lines[1] == "Received log directory information from brokers 1,3"
        shown = _our_view(json.loads(lines[2]))
        assert sorted(shown) == [1, 3]
        everywhere = _kafka_python_view(cluster.bootstrap_servers)
        assert shown == {b: found for b, found in everywhere.items() if b in (1, 3)}
        code, lines, err = _run(capsys, cluster.bootstrap_servers, "--broker-list", "1,7")
        assert (code, lines) == (1, [])
        assert err == ("kafkapy log-dirs: ERROR: The given brokers do not exist from --broker-list: 7. "
                       "Current existent brokers: 1,2,3\n")


def test_usage_mistakes_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["--broker-list", "one"], []):
        with pytest.raises(SystemExit) as exited:
            main(["log-dirs", "--bootstrap-server", "127.0.0.1:1", *args])
        err = capsys.readouterr().err
        assert exited.value.code == 2 and err.count("\n") == 1


def test_a_broker_without_describe_log_dirs_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    mock = MockCluster()
    code, _, err = _run(capsys, mock.bootstrap)
    assert code == 1 and err.count("\n") == 1
    assert err.endswith("does not serve DescribeLogDirs (api key 35)\n")
