"""`kafkapy reassign-partitions`, the kafka-reassign-partitions.sh of kafkapy: --list, --execute,
--verify and --cancel against three brokers in one process, bootstrapped from a broker that is not
the controller (the tool finds the controller through Metadata), and its JSON reader."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kafkapy import Broker
from kafkapy.cli import main
from kafkapy.client import ClientError
from kafkapy.commands.reassign_partitions import parse_log_dir_moves, parse_reassignment_json
from kafkapy.testing import wait_until

TIMEOUT_S = 20


@pytest.fixture
def cluster() -> Iterator[Broker]:
    from kafka.admin import KafkaAdminClient, NewTopic

    with Broker({"broker.id": 1}, brokers=3) as running:
        admin = KafkaAdminClient(bootstrap_servers=running.bootstrap_servers,
                                 request_timeout_ms=TIMEOUT_S * 1000)
        try:
            admin.create_topics([NewTopic("c", replica_assignments={0: [1, 2], 1: [2, 3]})],
                                timeout_ms=TIMEOUT_S * 1000)
        finally:
            admin.close()
        yield running


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _plan(tmp_path: Path, partitions: list[tuple[str, int, list[int]]]) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for t, p, r in partitions]}))
    return str(path)


def test_list_execute_verify_cancel(cluster: Broker, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert cluster.runtime is not None and cluster.runtime.cluster.controller_id == 1
    not_controller = cluster.brokers[2].bootstrap_servers  # broker 3
    tool = ("reassign-partitions", "--bootstrap-server", not_controller)
    plan = _plan(tmp_path, [("c", 0, [2, 3]), ("c", 1, [3, 1])])
    assert _run(capsys, *tool, "--list") == (0, "No partition reassignments found.\n", "")
    assert _run(capsys, *tool, "--reassignment-json-file", plan, "--verify") == (0, (
        "Status of partition reassignment:\n"
        "There is no active reassignment of partition c-0, but replica set is 1,2 rather than 2,3.\n"
        "There is no active reassignment of partition c-1, but replica set is 2,3 rather than 3,1.\n"), "")
    rollback = ('{"version":1,"partitions":['
                '{"topic":"c","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
                '{"topic":"c","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}')
    assert _run(capsys, *tool, "--reassignment-json-file", plan, "--execute") == (0, (
        f"Current partition replica assignment\n\n{rollback}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Successfully started partition reassignments for c-0,c-1\n"), "")
    view = cluster.runtime.cluster
    assert dict(view.topics["c"].partitions) == {0: (2, 3), 1: (3, 1)}
    wait_until(lambda: [view.leadership("c", p) for p in (0, 1)] == [(2, 1), (3, 1)], TIMEOUT_S,
               "brokers 2 and 3 leading in epoch 1")
    assert _run(capsys, *tool, "--reassignment-json-file", plan, "--verify") == (0, (
        "Status of partition reassignment:\n"
        "Reassignment of partition c-0 is completed.\n"
        "Reassignment of partition c-1 is completed.\n"), "")
    assert _run(capsys, *tool, "--reassignment-json-file", plan, "--cancel") == (
        0, "None of the specified partition reassignments are active.\n", "")
    assert _run(capsys, *tool, "--list") == (0, "No partition reassignments found.\n", "")


def test_refusals_and_bad_files(cluster: Broker, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tool = ("reassign-partitions", "--bootstrap-server", cluster.brokers[0].bootstrap_servers)
    plan = _plan(tmp_path, [("c", 0, [2, 9]), ("c", 1, [3, 1]), ("nope", 0, [1])])
    code, out, err = _run(capsys, *tool, "--reassignment-json-file", plan, "--execute")
    assert code == 1
    assert out.endswith("Save this to use as the --reassignment-json-file option during rollback\n")
    assert err == ("Error reassigning partitions:\n"
                   "c-0: The manual partition assignment includes broker 9, but no such broker is "
                   "registered.\nnope-0: Unable to find a topic named nope.\n")
    assert cluster.runtime is not None
    # the good one moved, the refused ones did not
    assert dict(cluster.runtime.cluster.topics["c"].partitions) == {0: (1, 2), 1: (3, 1)}
    (tmp_path / "bad.json").write_text('{"version": 1, "partitions": [')
    code, _, err = _run(capsys, *tool, "--reassignment-json-file", str(tmp_path / "bad.json"), "--execute")
    assert code == 1 and err.startswith("kafkapy reassign-partitions: the reassignment JSON is not JSON:")
    code, _, err = _run(capsys, *tool, "--verify")
    assert (code, err) == (1, "kafkapy reassign-partitions: --execute, --verify and --cancel need "
                              "--reassignment-json-file\n")
    # A partition no topic has cannot have a status: one line and exit 1, as Kafka's tool fails on
    # it (kafkapy printed "replica set is  rather than 1" and exited 0).
    missing = _plan(tmp_path, [("c", 1, [3, 1]), ("c", 7, [1]), ("nope", 0, [1])])
    assert _run(capsys, *tool, "--reassignment-json-file", missing, "--verify") == (
        1, "", "kafkapy reassign-partitions: Unable to find partition: c-7, nope-0\n")


def test_the_json_reader() -> None:
    assert parse_reassignment_json('{"version":1,"partitions":[{"topic":"t","partition":2,"replicas":[3,1],'
                                   '"log_dirs":["any","any"]}]}') == {("t", 2): [3, 1]}
    for text, problem in [
        ('{"version":2,"partitions":[]}', '"version": 1'),
        ('{"version":1,"partitions":[]}', "Partition reassignment list cannot be empty"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}',
         "Duplicate reassignment for partition t-0"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}', "Duplicate replica assignment"),
        ('{"partitions":[{"topic":"t","partition":true,"replicas":[1]}]}', "a partition number"),
        ('{"partitions":[{"topic":"t"}]}', '"replicas"'),
    ]:
        with pytest.raises(ClientError, match=problem):
            parse_reassignment_json(text)


JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=3) | st.floats(0, 2)
                       | st.sampled_from([2**31 - 1, 2**31, -(2**31) - 1, 2**63]),
                       lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.sampled_from(["version", "partitions", "topic", "partition",
                                                          "replicas"]), inner, max_size=4), max_leaves=12)


@given(document=JSONISH)
# Each was taken: a partition or broker id past Java's int failed in the request encoder (a
# traceback from --execute/--verify), "version": true passed as 1.
@example(document={"partitions": [{"topic": "t", "partition": 2**31, "replicas": [1]}]})
@example(document={"partitions": [{"topic": "t", "partition": 0, "replicas": [1, -(2**31) - 1]}]})
@example(document={"version": True, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]})
def test_any_json_gives_a_plan_or_one_clear_error(document: object) -> None:
    """Any JSON document; the text reader below."""
    try:
        plan = parse_reassignment_json(json.dumps(document))
    except ClientError as refused:
        assert "\n" not in str(refused)
        return
    ints = range(-(2**31), 2**31)
    assert plan and all(isinstance(t, str) and type(p) is int and p in ints and len(set(r)) == len(r)
                        and all(type(b) is int and b in ints for b in r) for (t, p), r in plan.items())
    assert json.loads(json.dumps(document)).get("version", 1) == 1


@pytest.mark.parametrize("text", ["[" * 100_000, "{", "", "\x00"])
def test_any_text_gives_a_plan_or_one_clear_error(text: str) -> None:
    """Thousands of nested arrays were a RecursionError traceback."""
    with pytest.raises(ClientError, match="not JSON"):
        parse_reassignment_json(text)


def test_log_dirs_in_the_file_move_the_replicas_between_log_dirs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Kafka's tool sends a reassignment's "log_dirs" as AlterReplicaLogDirs after it, and --verify
    says where each move is."""
    a, b = tmp_path / "a", tmp_path / "b"
    with Broker({"broker.id": 1, "log.dirs": f"{a},{b}"}) as broker:
        broker.seed({"t": {"partitions": 2, "records": [{"value": "v", "partition": p} for p in (0, 1)]}})
        logs = {p: next(d for d in (a, b) if (d / f"t-{p}").is_dir()) for p in (0, 1)}
        other = {p: b if logs[p] == a else a for p in (0, 1)}
        tool = ("reassign-partitions", "--bootstrap-server", broker.bootstrap_servers)
        path = tmp_path / "dirs.json"
        path.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "t", "partition": 0, "replicas": [1], "log_dirs": [str(other[0])]},
            {"topic": "t", "partition": 1, "replicas": [1], "log_dirs": ["any"]}]}))
        code, out, err = _run(capsys, *tool, "--reassignment-json-file", str(path), "--execute")
        assert (code, err) == (0, "")
        assert out.splitlines()[-2:] == [
            "Successfully started partition reassignments for t-0,t-1",
            f"Successfully started moving log directory to {other[0]} for replica t-0 with broker 1 "]
        wait_until(lambda: (other[0] / "t-0").is_dir() and not (logs[0] / "t-0").exists(), TIMEOUT_S,
                   "the move of t-0")
        assert (logs[1] / "t-1").is_dir()  # "any": left where it is
        code, out, _ = _run(capsys, *tool, "--reassignment-json-file", str(path), "--verify")
        assert code == 0 and out.splitlines()[-1] == "Reassignment of replica t-0-1 completed successfully."
        # a dir the broker does not have: Kafka's tool fails on it
        path.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "t", "partition": 1, "replicas": [1], "log_dirs": [str(tmp_path / "c")]}]}))
        code, out, err = _run(capsys, *tool, "--reassignment-json-file", str(path), "--execute")
        assert code == 1 and err == ("kafkapy reassign-partitions: Failed to alter dir for t-1-1: "
                                     "LOG_DIR_NOT_FOUND\n")
        code, out, _ = _run(capsys, *tool, "--reassignment-json-file", str(path), "--verify")
        assert out.splitlines()[-1] == (f"Partition t-1 on broker 1 is not being moved from log dir "
                                        f"{logs[1]} to {tmp_path / 'c'}.")


def test_log_dirs_must_match_the_replicas() -> None:
    assert parse_log_dir_moves('{"version":1,"partitions":[{"topic":"t","partition":2,"replicas":[3,1],'
                               '"log_dirs":["/d","any"]}]}') == {("t", 2, 3): "/d"}
    with pytest.raises(ClientError, match=r"^Size of replicas list \[3, 1\] is different from size of "
                                          r"log dirs list \[/d\] for partition t-2$"):
        parse_log_dir_moves('{"partitions":[{"topic":"t","partition":2,"replicas":[3,1],"log_dirs":["/d"]}]}')
    with pytest.raises(ClientError, match='"log_dirs" is a list'):
        parse_log_dir_moves('{"partitions":[{"topic":"t","partition":2,"replicas":[3],"log_dirs":"/d"}]}')
