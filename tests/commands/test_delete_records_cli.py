"""`kafkapy delete-records`, the kafka-delete-records.sh of kafkapy: the low watermarks it prints
are where real clients then start reading, each partition's refusal is its own line, and a bad
file is one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kafkapy import Broker
from kafkapy.cli import main
from kafkapy.client import ClientError
from kafkapy.commands._partition_files import read_json_file
from kafkapy.commands.delete_records import parse_offset_json
from tests.commands.records_cli import MockCluster

TIMEOUT_S = 20


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker() as running:
        running.seed({"d": {"partitions": 2, "records": [
            {"value": f"v{i}", "partition": p} for p in (0, 1) for i in range(10)]}})
        yield running


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _file(tmp_path: Path, document: Any) -> str:
    path = tmp_path / "offsets.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def _offsets(partitions: list[tuple[str, int, int]]) -> dict[str, Any]:
    return {"partitions": [{"topic": t, "partition": p, "offset": o} for t, p, o in partitions],
            "version": 1}


def test_deletes_and_consumers_start_at_the_new_low_watermark(broker: Broker, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from kafka import KafkaConsumer, TopicPartition

    plan = _file(tmp_path, _offsets([("d", 0, 4), ("d", 1, -1)]))
    code, out, err = _run(capsys, "delete-records", "--bootstrap-server", broker.bootstrap_servers,
                          "--offset-json-file", plan)
    assert (code, err) == (0, "")
    assert out == ("Executing records delete operation\nRecords delete operation completed:\n"
                   "partition: d-0\tlow_watermark: 4\npartition: d-1\tlow_watermark: 10\n")

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    try:
        parts = [TopicPartition("d", 0), TopicPartition("d", 1)]
        assert consumer.beginning_offsets(parts) == {parts[0]: 4, parts[1]: 10}
    finally:
        consumer.close()
    reader = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "dr",
                                       "log_level": 0})
    try:
        reader.assign([confluent_kafka.TopicPartition("d", 0, confluent_kafka.OFFSET_BEGINNING)])
        first = reader.poll(TIMEOUT_S)
        assert first is not None and first.error() is None
        assert (first.offset(), first.value()) == (4, b"v4")
    finally:
        reader.close()

    # Again at a lower offset: nothing moves back (Kafka answers the current low watermark).
    code, out, _ = _run(capsys, "delete-records", "--bootstrap-server", broker.bootstrap_servers,
                        "--offset-json-file", _file(tmp_path, _offsets([("d", 0, 2)])))
    assert code == 0 and "partition: d-0\tlow_watermark: 4\n" in out


def test_each_refused_partition_is_its_own_line(broker: Broker, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    plan = _file(tmp_path, _offsets([("d", 0, 11), ("d", 7, 0), ("missing", 0, 0), ("d", 1, -1)]))
    code, out, err = _run(capsys, "delete-records", "--bootstrap-server", broker.bootstrap_servers,
                          "--offset-json-file", plan)
    assert code == 1
    assert out.splitlines()[2:] == ["partition: d-0\terror: OFFSET_OUT_OF_RANGE",
                                    "partition: d-1\tlow_watermark: 10",
                                    "partition: d-7\terror: UNKNOWN_TOPIC_OR_PARTITION",
                                    "partition: missing-0\terror: UNKNOWN_TOPIC_OR_PARTITION"]
    assert err == "kafkapy delete-records: 3 of 4 partition(s) failed\n"


@pytest.mark.parametrize(("document", "message"), [
    ("{not json", "is not valid JSON"),
    ({"version": 1}, "Missing partitions field"),
    ({"version": 2, "partitions": []}, "Not supported version field value 2"),
    ({"partitions": [{"topic": "d", "partition": 0}]}, 'a partition needs "offset"'),
    ({"partitions": [{"topic": "d", "partition": "0", "offset": 1}]}, '"partition" must be an integer'),
    (_offsets([("d", 0, 1), ("d", 0, 2)]), "Offset json file contains duplicate topic partitions: d-0"),
])
def test_a_bad_file_is_one_line(broker: Broker, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                document: Any, message: str) -> None:
    code, out, err = _run(capsys, "delete-records", "--bootstrap-server", broker.bootstrap_servers,
                          "--offset-json-file", _file(tmp_path, document))
    assert (code, out) == (1, "")
    assert err.startswith("kafkapy delete-records: ") and message in err and err.count("\n") == 1


def test_a_broker_without_delete_records_is_one_line(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    mock = MockCluster()  # librdkafka's mock serves records, but not DeleteRecords
    mock.write("m", [{"value": b"x", "partition": 0}])
    code, _, err = _run(capsys, "delete-records", "--bootstrap-server", mock.bootstrap,
                        "--offset-json-file", _file(tmp_path, _offsets([("m", 0, 1)])))
    assert code == 1
    assert err.endswith("does not serve DeleteRecords (api key 21)\n") and err.count("\n") == 1


def test_a_missing_file_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "delete-records", "--bootstrap-server", "127.0.0.1:1",
                        "--offset-json-file", "/nonexistent/offsets.json")
    assert (code, err) == (1, "kafkapy delete-records: cannot read /nonexistent/offsets.json: "
                              "No such file or directory\n")


entries = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 3), st.integers(-1, 2**40)),
                   max_size=6)


@given(entries)
def test_the_reader_keeps_every_partition_or_names_the_duplicates(found: list[tuple[str, int, int]]) -> None:
    document = _offsets(found)
    keys = [(t, p) for t, p, _ in found]
    if len(set(keys)) == len(keys):
        assert parse_offset_json(document) == found
        assert parse_offset_json({"partitions": document["partitions"]}) == found  # version defaults to 1
    else:
        with pytest.raises(ClientError, match="duplicate topic partitions"):
            parse_offset_json(document)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=3),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.sampled_from(["partitions", "version", "topic", "partition",
                                                              "offset"]), inner, max_size=4),
                           max_leaves=12)


@given(json_values)
@example({"partitions": [{"topic": "d", "partition": 2**31, "offset": 1}]})  # was taken: EncodeError
@example({"partitions": [{"topic": "d", "partition": 0, "offset": 2**63}]})  # (a traceback) when sent
def test_any_json_is_a_list_or_one_client_error(document: Any) -> None:
    """Partitions are Java ints and offsets longs, as Kafka's tool reads them; anything else is
    one ClientError, not a traceback from the request encoder later."""
    try:
        parsed = parse_offset_json(document)
    except ClientError as refused:
        assert "\n" not in str(refused)
        return
    assert all(isinstance(t, str) and type(p) is int and -(2**31) <= p < 2**31 and type(o) is int
               and -(2**63) <= o < 2**63 for t, p, o in parsed)


@pytest.mark.parametrize(("raw", "problem"), [(b"[" * 100_000, "is not valid JSON"),  # was RecursionError
                                              (b'{"partitions": \xff}', "cannot read")])
def test_a_partition_file_that_is_not_json_text_is_one_client_error(tmp_path: Path, raw: bytes,
                                                                    problem: str) -> None:
    path = tmp_path / "offsets.json"
    path.write_bytes(raw)
    with pytest.raises(ClientError, match=problem):
        read_json_file(str(path))
