"""`kafkapy leader-election`, the kafka-leader-election.sh of kafkapy: against three brokers in one
process, bootstrapped from one that is not the controller, its lines say what confluent-kafka's
elect_leaders answers, before and after a preferred replica goes down, and once it is back (the
election then moves leadership back to it); and its usage rules."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from quick_clients import RDKAFKA_CLIENT

from kafkapy import Broker
from kafkapy.cli import main
from kafkapy.client import ClientError
from kafkapy.commands._partition_files import partition_entries
from kafkapy.commands.leader_election import election_report
from kafkapy.errors import ErrorCode
from kafkapy.testing import wait_until
from kafkapy.topics.elections import ElectionType
from tests.commands.records_cli import MockCluster

TIMEOUT_S = 20
TOPIC = "elected"


@pytest.fixture
def cluster() -> Iterator[Broker]:
    # no auto rebalance: leadership returns only on the elections these tests ask for
    with Broker({"broker.id": 1, "auto.leader.rebalance.enable": False}, brokers=3) as running:
        running.seed({TOPIC: {"partitions": 3, "replication_factor": 3}})
        yield running


def _run(capsys: pytest.CaptureFixture[str], bootstrap: str, *args: str) -> tuple[int, list[str], str]:
    code = main(["leader-election", "--bootstrap-server", bootstrap, *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def _confluent(cluster: Broker, kind: str, partitions: list[int] | None) -> dict[int, ErrorCode]:
    from confluent_kafka import ElectionType as Kind
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **RDKAFKA_CLIENT})
    asked = None if partitions is None else [TopicPartition(TOPIC, p) for p in partitions]
    results = admin.elect_leaders(Kind[kind], asked).result(TIMEOUT_S)
    return {tp.partition: ErrorCode.NONE if e is None else ErrorCode(e.code()) for tp, e in results.items()}


def test_elections_as_confluent_kafka_sees_them(cluster: Broker, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert cluster.runtime is not None and cluster.runtime.cluster.controller_id == 1
    not_controller = cluster.brokers[2].bootstrap_servers  # broker 3: the tool finds the controller
    assert _confluent(cluster, "PREFERRED", None) == {}
    everything = ("--election-type", "preferred", "--all-topic-partitions")
    assert _run(capsys, not_controller, *everything) == (0, [], "")
    one = ("--election-type", "PREFERRED", "--topic", TOPIC, "--partition", "1")
    expected = (0, [f"Valid replica already elected for partitions {TOPIC}-1"], "")
    assert _run(capsys, not_controller, *one) == expected
    plan = tmp_path / "partitions.json"
    plan.write_text(json.dumps({"partitions": [{"topic": TOPIC, "partition": p} for p in (2, 0, 9)]}))
    assert _confluent(cluster, "PREFERRED", [0, 2, 9]) == {0: ErrorCode.ELECTION_NOT_NEEDED,
                                                           2: ErrorCode.ELECTION_NOT_NEEDED,
                                                           9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    code, lines, err = _run(capsys, not_controller, "--election-type", "preferred", "--path-to-json-file",
                            str(plan))
    assert (code, lines) == (1, [f"Valid replica already elected for partitions {TOPIC}-0, {TOPIC}-2",
                                 f"Error completing leader election (PREFERRED) for partition: {TOPIC}-9: "
                                 f"UNKNOWN_TOPIC_OR_PARTITION: No such partition as {TOPIC}-9"])
    assert err == "kafkapy leader-election: 1 replica(s) could not be elected\n"

    # The preferred replica of partition 0 goes down: another one leads, and the preferred one
    # cannot be elected; an unclean election is not needed while a replica leads.
    view = cluster.runtime.cluster
    down = view.topics[TOPIC].partitions[0][0]
    moved = sorted(p for p in range(3) if view.topics[TOPIC].partitions[p][0] == down)
    cluster.stop_broker(next(i for i, m in enumerate(cluster.brokers) if m.broker_id == down))
    def led_by_live_replicas() -> bool:
        assert cluster.runtime is not None
        leaders = [(cluster.runtime.cluster.leadership(TOPIC, p) or (-1,))[0] for p in range(3)]
        return all(leader not in (down, -1) for leader in leaders)

    wait_until(led_by_live_replicas, TIMEOUT_S, "every partition led by a live replica")
    live = next(m.bootstrap_servers for m in cluster.brokers if m.broker_id != down)
    not_live = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert _confluent(cluster, "PREFERRED", None) == dict.fromkeys(moved, not_live)
    code, lines, err = _run(capsys, live, "--election-type", "preferred", "--all-topic-partitions")
    assert (code, lines) == (1, [f"Error completing leader election (PREFERRED) for partition: {TOPIC}-{p}: "
                                 "PREFERRED_LEADER_NOT_AVAILABLE: The preferred replica is not live and in "
                                 "the ISR." for p in moved])
    assert err == f"kafkapy leader-election: {len(moved)} replica(s) could not be elected\n"
    assert _run(capsys, live, "--election-type", "unclean", "--topic", TOPIC, "--partition", str(moved[0])) \
        == (0, [f"Valid replica already elected for partitions {TOPIC}-{moved[0]}"], "")

    # Back, the preferred replica leads nothing until the election moves its partitions to it.
    cluster.start_broker(next(i for i, m in enumerate(cluster.brokers) if m.broker_id == down))

    def leader(partition: int) -> int:  # a running broker's view (``view`` may be the stopped one's)
        assert cluster.runtime is not None
        return (cluster.runtime.cluster.leadership(TOPIC, partition) or (-1,))[0]

    assert all(leader(p) != down for p in moved)
    assert _run(capsys, live, "--election-type", "preferred", "--all-topic-partitions") == (0, [
        "Successfully completed leader election (PREFERRED) for partitions "
        + ", ".join(f"{TOPIC}-{p}" for p in moved)], "")
    wait_until(lambda: all(leader(p) == down for p in moved), TIMEOUT_S, "the preferred replica leads again")
    assert _confluent(cluster, "PREFERRED", None) == {}


def test_the_report_of_elections_that_happened() -> None:
    """The report's lines for every outcome, unclean successes included (a cluster here rarely has
    a partition an unclean election would move), checked alone."""
    lines, failed = election_report(ElectionType.UNCLEAN, {
        ("b", 1): (ErrorCode.NONE, None), ("a", 0): (ErrorCode.NONE, None),
        ("a", 2): (ErrorCode.ELECTION_NOT_NEEDED, "already"),
        ("c", 0): (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None)})
    assert lines == ["Successfully completed leader election (UNCLEAN) for partitions a-0, b-1",
                     "Valid replica already elected for partitions a-2",
                     "Error completing leader election (UNCLEAN) for partition: c-0: "
                     "ELIGIBLE_LEADERS_NOT_AVAILABLE"]
    assert failed == 1


def test_a_refused_election_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    refusing = {"broker.id": 1, "authorizer.class.name": "allowlist", "allowlist.rules": "*@*:DESCRIBE"}
    with Broker(refusing) as broker:
        code, lines, err = _run(capsys, broker.bootstrap_servers, "--election-type", "preferred",
                                "--all-topic-partitions")
    assert (code, lines) == (1, [])
    assert err == "kafkapy leader-election: Not authorized to perform leader election\n"


def test_a_broker_without_elect_leaders_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    mock = MockCluster()
    code, _, err = _run(capsys, mock.bootstrap, "--election-type", "preferred", "--all-topic-partitions")
    assert code == 1 and err.count("\n") == 1
    assert err.endswith("does not serve ElectLeaders (api key 43)\n")


@pytest.mark.parametrize(("args", "message"), [
    (["--election-type", "preferred"], "One and only one of the following options is required: "
                                       "--topic, --all-topic-partitions, --path-to-json-file"),
    (["--election-type", "preferred", "--all-topic-partitions", "--topic", "t", "--partition", "0"],
     "One and only one of the following options is required"),
    (["--election-type", "preferred", "--topic", "t"], "Missing required option(s): --partition"),
    (["--election-type", "preferred", "--all-topic-partitions", "--partition", "0"],
     "Option --partition is only allowed if --topic is used"),
    (["--election-type", "fastest", "--all-topic-partitions"], "'fastest' is not preferred or unclean"),
    (["--all-topic-partitions"], "--election-type"),
])
def test_usage_mistakes_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], args: list[str],
                                                message: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["leader-election", "--bootstrap-server", "127.0.0.1:1", *args])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and message in err and err.count("\n") == 1


@pytest.mark.parametrize(("document", "message"), [
    ("null", "Replica election data is empty"),
    ('{"version": 1}', 'Replica election data is missing "partitions" field'),
    ('{"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]}',
     "Replica election data contains duplicate partitions: t-0"),
    ("{oops", "is not valid JSON"),
])
def test_a_bad_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], document: str,
                                message: str) -> None:
    plan = tmp_path / "partitions.json"
    plan.write_text(document)
    code, lines, err = _run(capsys, "127.0.0.1:1", "--election-type", "preferred", "--path-to-json-file",
                            str(plan))
    assert (code, lines) == (1, []) and message in err and err.count("\n") == 1


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=3),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.sampled_from(["partitions", "topic", "partition"]), inner,
                                             max_size=3), max_leaves=10)


@given(json_values)
@example({"partitions": [{"topic": "t", "partition": -(2**31) - 1}]})  # was taken: EncodeError when sent
def test_the_partition_file_reader_gives_partitions_or_one_client_error(document: Any) -> None:
    try:
        entries = partition_entries(document, "missing")
    except ClientError:
        return
    assert all(isinstance(t, str) and type(p) is int and -(2**31) <= p < 2**31 and entry["topic"] == t
               for t, p, entry in entries)
