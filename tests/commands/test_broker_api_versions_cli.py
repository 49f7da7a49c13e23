"""`kafkapy broker-api-versions`, the kafka-broker-api-versions.sh of kafkapy: every broker's
ranges as kafka-python learns them, against brokers emulating Kafka 2.8 and today's kafkapy, in
Kafka's NodeApiVersions form, with the version kafkapy's codec would use."""

from __future__ import annotations

import re

import pytest

from kafkapy import Broker
from kafkapy.cli import main
from kafkapy.commands.broker_api_versions import CLIENT_APIS, format_api_versions
from kafkapy.protocol import catalogue
from kafkapy.protocol.api_keys import ApiKey
from tests.commands.records_cli import MockCluster, kafkapy

HEADER = re.compile(r"^(\S+):(\d+) \(id: (-?\d+) rack: (\S+)\) -> \($")
LINE = re.compile(r"^\t(\w+)\((\d+)\): (?:(\d+)(?: to (\d+))? \[usable: (\d+)\]|UNSUPPORTED),?$")


def _parse(out: str) -> dict[int, dict[int, tuple[int, int] | None]]:
    """{broker id: {api key: (min, max), or None for UNSUPPORTED}}, checking each usable version."""
    brokers: dict[int, dict[int, tuple[int, int] | None]] = {}
    current: dict[int, tuple[int, int] | None] = {}
    lines = out.splitlines()
    for number, line in enumerate(lines):
        if header := HEADER.match(line):
            current = brokers[int(header[3])] = {}
        elif line == ")":
            assert not lines[number - 1].endswith(",")  # the last API has no comma
        else:
            match = LINE.match(line)
            assert match is not None, line
            name, key = match[1], int(match[2])
            if match[3] is None:
                current[key] = None
                continue
            low, high = int(match[3]), int(match[4] or match[3])
            assert name == catalogue()[key].name
            assert int(match[5]) == min(high, catalogue()[key].max_version)
            current[key] = (low, high)
    return brokers


def _kafka_python_view(bootstrap: str, broker_ids: list[int]) -> dict[int, dict[int, tuple[int, int]]]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return {node: {int(k): (low, high) for k, (low, high) in
                       admin.get_broker_version_data(node).api_versions.items()} for node in broker_ids}
    finally:
        admin.close()


@pytest.mark.parametrize("release", ["2.8", None])
def test_every_broker_as_kafka_python_sees_it(release: str | None,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    config = {"advertise.private.api.keys": False, **({"kafka.version": release} if release else {})}
    with Broker(config, brokers=3) as cluster:
        code = main(["broker-api-versions", "--bootstrap-server", cluster.bootstrap_servers])
        out, err = capsys.readouterr()
        assert (code, err) == (0, "")
        shown = _parse(out)
        ids = sorted(m.broker_id for m in cluster.brokers)
        assert sorted(shown) == ids
        assert out.splitlines()[0] == f"{cluster.brokers[0].bootstrap_servers} (id: {ids[0]} rack: null) -> ("
        seen = _kafka_python_view(cluster.bootstrap_servers, ids)
    for node in ids:
        served = {key: versions for key, versions in shown[node].items() if versions is not None}
        assert served == seen[node]
        unsupported = {key for key, versions in shown[node].items() if versions is None}
        assert unsupported == CLIENT_APIS - served.keys()
    if release == "2.8":  # Kafka 2.8 had no DescribeTopicPartitions (3.7) and Produce up to v9
        assert shown[ids[0]][ApiKey.DESCRIBE_TOPIC_PARTITIONS] is None
        assert shown[ids[0]][ApiKey.PRODUCE] == (0, 9)
        assert "\tProduce(0): 0 to 9 [usable: 9],\n" in out
    else:
        assert shown[ids[0]][ApiKey.DESCRIBE_TOPIC_PARTITIONS] is not None


def test_a_broker_without_the_admin_apis_shows_them_unsupported() -> None:
    mock = MockCluster()  # librdkafka's mock: records and groups, none of the admin APIs
    result = kafkapy("broker-api-versions", "--bootstrap-server", mock.bootstrap)  # the real executable
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode()
    assert "\tDeleteRecords(21): UNSUPPORTED,\n" in out and "\tElectLeaders(43): UNSUPPORTED,\n" in out
    assert "\tListOffsets(2): 0 to 7 [usable: 7],\n" in out
    (mock_broker,) = _parse(out).values()
    assert mock_broker[ApiKey.API_VERSIONS] == (0, 2)


def test_unknown_keys_and_ranges_kafkapy_cannot_use() -> None:
    produce_max = catalogue()[ApiKey.PRODUCE].max_version
    text = format_api_versions({ApiKey.PRODUCE: (produce_max + 1, produce_max + 3), 4242: (0, 1),
                                ApiKey.FETCH: (5, 5)})
    lines = text.splitlines()
    assert lines[0] == "(" and lines[-1] == ")"
    assert lines[1] == f"\tProduce(0): {produce_max + 1} to {produce_max + 3} [unusable: node too new],"
    assert lines[2] == "\tFetch(1): 5 [usable: 5],"
    assert lines[-2] == "\tUNKNOWN(4242): 0 to 1"
    assert "\tListOffsets(2): UNSUPPORTED," in lines


def test_no_broker_to_ask_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["broker-api-versions", "--bootstrap-server", "127.0.0.1:1", "--timeout", "2"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("kafkapy broker-api-versions: cannot connect to 127.0.0.1:1")
    assert err.count("\n") == 1
