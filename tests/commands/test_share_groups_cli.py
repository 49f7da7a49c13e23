"""``kafkapy share-groups`` as a process, against kafkapy's share groups with confluent-kafka's
ShareConsumer (librdkafka 2.16, KIP-932).

The columns and messages are kafka-share-groups.sh's (Kafka 4.1); what the command shows is checked
against what the real consumers did: the start offsets after they accepted every record, their
members and assignments while they run, and a reset's effect on the records a consumer gets next.
One broker serves the module; each test has its own group.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from kafkapy import Broker
from kafkapy.cli import main
from kafkapy.testing import BrokerFactory
from tests.commands.records_cli import MockCluster, kafkapy

ck = pytest.importorskip("confluent_kafka")

TOPIC = "jobs"
PARTITIONS = 2
PER_PARTITION = 5
OLD_PER_PARTITION = 3  # the first records of each partition are an hour older than the rest
RECORDS = PARTITIONS * PER_PARTITION
NOW_MS = int(time.time() * 1000)
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    # Members hear of a new assignment at their next heartbeat: one a second, not Kafka's 5.
    settings = {"share.auto.offset.reset": "earliest", "group.share.heartbeat.interval.ms": 1000,
                "group.share.min.heartbeat.interval.ms": 1000}
    with Broker(settings) as running:
        running.seed({TOPIC: {"partitions": PARTITIONS}})
        producer = ck.Producer({"bootstrap.servers": running.bootstrap_servers, "linger.ms": 0})
        for partition in range(PARTITIONS):
            for i in range(PER_PARTITION):
                stamp = NOW_MS - HOUR_MS if i < OLD_PER_PARTITION else NOW_MS
                producer.produce(TOPIC, b"%d-%d" % (partition, i), partition=partition, timestamp=stamp)
        assert producer.flush(10) == 0
        yield running


def share_groups(broker: Broker, *args: str) -> subprocess.CompletedProcess[bytes]:
    return kafkapy("share-groups", "--bootstrap-server", broker.bootstrap_servers, *args)


def rows(result: subprocess.CompletedProcess[bytes]) -> list[list[str]]:
    assert result.returncode == 0, result.stderr.decode()
    return [line.split() for line in result.stdout.decode().splitlines() if line.strip()]


def consumer(broker: Broker, group: str, client_id: str = "cli-test") -> Any:
    made = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                             "client.id": client_id, "share.acknowledgement.mode": "explicit"})
    made.subscribe([TOPIC])
    return made


def accept(consumers: list[Any], want: int, seconds: float = 30.0) -> list[Any]:
    """Poll the consumers in turn, accepting every record, until ``want`` came; then commit."""
    got: list[Any] = []
    deadline = time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        for each in consumers:
            for message in each.poll(0.2):
                if message.error() is None:
                    got.append(message)
                    each.acknowledge(message, ck.AcknowledgeType.ACCEPT)
    for each in consumers:
        each.commit_sync(10)
    assert len(got) == want
    return got


def consumed_group(broker: Broker, group: str) -> None:
    """A share group whose one member accepted every record and left."""
    member = consumer(broker, group)
    try:
        accept([member], RECORDS)
    finally:
        member.close()


def start_offsets(broker: Broker, group: str) -> dict[int, tuple[str, str]]:
    header, *lines = rows(share_groups(broker, "--describe", "--group", group))
    assert header == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
    return {int(r[2]): (r[3], r[4]) for r in lines if r[0] == group and r[1] == TOPIC}


def test_list_and_describe_while_consumers_run(broker: Broker) -> None:
    first, second = consumer(broker, "live", "first"), consumer(broker, "live", "second")
    try:
        accept([first, second], RECORDS)
        deadline = time.monotonic() + 15  # both members on their own partition
        while time.monotonic() < deadline:
            members = rows(share_groups(broker, "--describe", "--group", "live", "--members"))
            if len(members) == 3 and all(m[4] == "1" for m in members[1:]):
                break
            for each in (first, second):
                each.poll(0.2)
        assert members[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert sorted(m[3] for m in members[1:]) == ["first", "second"]
        assert sorted(m[5] for m in members[1:]) == [f"{TOPIC}:0", f"{TOPIC}:1"]

        assert "live" in share_groups(broker, "--list").stdout.decode().split()
        # kafka-consumer-groups.sh's list leaves share groups out (protocol type "share")
        consumer_groups = kafkapy("groups", "--bootstrap-server", broker.bootstrap_servers, "--list")
        assert consumer_groups.returncode == 0 and "live" not in consumer_groups.stdout.decode().split()
        assert ["live", "Stable"] in rows(share_groups(broker, "--list", "--state"))
        assert rows(share_groups(broker, "--list", "--state", "stable,EMPTY"))[0] == ["GROUP", "STATE"]
        assert ["live", "Stable"] not in rows(share_groups(broker, "--list", "--state", "Empty"))

        # Every record accepted: each start offset is at the log end, nothing left to deliver.
        assert start_offsets(broker, "live") == {p: (str(PER_PARTITION), "0") for p in range(PARTITIONS)}
        verbose = rows(share_groups(broker, "--describe", "--group", "live", "--offsets", "--verbose"))
        assert verbose[0] == ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"]

        members = rows(share_groups(broker, "--describe", "--group", "live", "--members", "--verbose"))
        assert members[0][5] == "MEMBER-EPOCH" and all(int(m[5]) > 0 for m in members[1:])

        header, state = rows(share_groups(broker, "--describe", "--group", "live", "--state"))
        assert header == ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"]
        assert state[0] == "live" and state[-2:] == ["Stable", "2"]
        assert state[2] == f"({broker.brokers[0].broker_id})"
        header, state = rows(share_groups(broker, "--describe", "--group", "live", "--state", "--verbose"))
        assert header[-3:] == ["GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"]
        assert int(state[-3]) >= 2 and state[-3] == state[-2]  # two joins; the assignment caught up

        described = json.loads(share_groups(broker, "--describe", "--all-groups", "--json").stdout)
        assert {(g["group"], g["partition"], g["start_offset"]) for g in described["groups"]} >= {
            ("live", p, PER_PARTITION) for p in range(PARTITIONS)}

        # Members hold the group: what would pull records from under them is refused.
        refused = share_groups(broker, "--reset-offsets", "--group", "live", "--to-earliest", "--execute")
        assert refused.returncode == 1
        assert refused.stderr.decode().strip() == "Share group 'live' is not empty."
        refused = share_groups(broker, "--delete", "--group", "live")
        assert refused.returncode == 1
        assert refused.stderr.decode().splitlines() == [
            "Error: Deletion of some share groups failed:",
            "* Group 'live' could not be deleted due to: NON_EMPTY_GROUP: Share group 'live' is not EMPTY."]
        refused = share_groups(broker, "--delete-offsets", "--group", "live", "--topic", TOPIC)
        assert refused.returncode == 1 and refused.stderr.decode().startswith("Error: ")
        assert "not empty" in refused.stderr.decode()
        assert start_offsets(broker, "live") == {p: (str(PER_PARTITION), "0") for p in range(PARTITIONS)}
    finally:
        first.close()
        second.close()

    empty = share_groups(broker, "--describe", "--group", "live", "--members")
    assert (empty.returncode, empty.stdout) == (0, b"")
    assert empty.stderr.decode().strip() == "Share group 'live' has no active members."
    assert rows(share_groups(broker, "--describe", "--group", "live", "--state"))[1][-2:] == ["Empty", "0"]


def test_reset_offsets_dry_run_and_execute(broker: Broker) -> None:
    consumed_group(broker, "resets")
    done = {p: (str(PER_PARTITION), "0") for p in range(PARTITIONS)}
    assert start_offsets(broker, "resets") == done

    dry = rows(share_groups(broker, "--reset-offsets", "--group", "resets", "--all-topics", "--to-earliest"))
    assert dry == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                   *(["resets", TOPIC, str(p), "0"] for p in range(PARTITIONS))]
    assert start_offsets(broker, "resets") == done  # a dry run changes nothing

    executed = share_groups(broker, "--reset-offsets", "--group", "resets", "--to-earliest", "--execute")
    assert rows(executed) == dry  # no --topic: every partition the group has a start offset for
    assert start_offsets(broker, "resets") == {p: ("0", str(PER_PARTITION)) for p in range(PARTITIONS)}
    # A consumer of the group gets every record again, for the second time in the group's life.
    again = consumer(broker, "resets")
    try:
        assert sorted(m.value() for m in accept([again], RECORDS)) == sorted(
            b"%d-%d" % (p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION))
    finally:
        again.close()

    half_hour_ago = datetime.fromtimestamp((NOW_MS - HOUR_MS // 2) / 1000, timezone.utc)
    when = half_hour_ago.strftime("%Y-%m-%dT%H:%M:%S.000")
    by_time = share_groups(broker, "--reset-offsets", "--group", "resets", "--topic", f"{TOPIC}:0",
                           "--to-datetime", when, "--execute", "--json")
    assert json.loads(by_time.stdout) == {"executed": True, "offsets": [
        {"group": "resets", "topic": TOPIC, "partition": 0, "new_offset": OLD_PER_PARTITION}]}
    assert start_offsets(broker, "resets") == {
        0: (str(OLD_PER_PARTITION), str(PER_PARTITION - OLD_PER_PARTITION)), 1: (str(PER_PARTITION), "0")}

    latest = rows(share_groups(broker, "--reset-offsets", "--group", "resets", "--topic", TOPIC,
                               "--to-latest", "--dry-run"))
    assert [r[3] for r in latest[1:]] == [str(PER_PARTITION)] * PARTITIONS
    assert start_offsets(broker, "resets")[0] == (str(OLD_PER_PARTITION), "2")  # dry run again

    missing = share_groups(broker, "--reset-offsets", "--group", "resets", "--topic", f"{TOPIC}:0,7",
                           "--to-earliest", "--execute")
    assert missing.returncode == 1
    assert missing.stderr.decode() == f'kafkapy share-groups: The partitions "{TOPIC}-7" does not exist\n'
    assert start_offsets(broker, "resets")[0] == (str(OLD_PER_PARTITION), "2")  # nothing reset


def test_delete_offsets_then_delete_the_group(broker: Broker) -> None:
    consumed_group(broker, "cleanup")
    result = share_groups(broker, "--delete-offsets", "--group", "cleanup", "--topic", TOPIC,
                          "--topic", "nosuch")
    assert result.returncode == 1  # one topic failed
    assert [line.split(None, 1) for line in result.stdout.decode().splitlines()] == [
        ["TOPIC", "STATUS"], [TOPIC, "Successful"],
        ["nosuch", "Error: This server does not host this topic."]]
    described = share_groups(broker, "--describe", "--group", "cleanup")
    assert described.stdout.decode().strip() == "Share group 'cleanup' has no offset information."

    deleted = share_groups(broker, "--delete", "--group", "cleanup")
    assert deleted.stdout.decode().strip() == "Deletion of requested share groups ('cleanup') was successful."
    assert "cleanup" not in share_groups(broker, "--list").stdout.decode().split()
    again = share_groups(broker, "--delete", "--group", "cleanup")
    assert again.returncode == 1
    assert "* Group 'cleanup' could not be deleted due to: GROUP_ID_NOT_FOUND: Group 'cleanup' is not a " \
           "share group." in again.stderr.decode()
    unknown = share_groups(broker, "--describe", "--group", "cleanup")
    assert unknown.returncode == 1
    assert unknown.stderr.decode().strip() == "Error: Share group 'cleanup' does not exist."


@pytest.mark.parametrize(("args", "message"), [
    ((), "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
         "--delete-offsets."),
    (("--list", "--describe"), "Command must include exactly one action"),
    (("--describe",), "Option --describe takes one of these options: --all-groups, --group"),
    (("--describe", "--group", "g", "--members", "--state"),
     "Option --describe takes at most one of these options: --members, --offsets, --state"),
    (("--describe", "--group", "g", "--state", "Stable"),
     "Option --describe does not take a value for --state"),
    (("--delete",), "Option --delete takes the options --group or --all-groups"),
    (("--delete", "--group", "g", "--all-groups"),
     "Option --delete takes either --group or --all-groups, not both."),
    (("--delete", "--group", "g", "--topic", "t"), "Option --delete does not take the option: --topic"),
    (("--delete-offsets", "--group", "g"),
     "Option --delete-offsets takes the following options: --group, --topic"),
    (("--reset-offsets", "--group", "g", "--to-earliest", "--dry-run", "--execute"),
     "Option --reset-offsets only accepts one of --execute and --dry-run"),
    (("--reset-offsets", "--to-earliest"), "Option --reset-offsets takes the option: --group"),
    (("--reset-offsets", "--group", "g"), "Option --reset-offsets requires one of the following scenarios: "
                                          "--to-datetime, --to-earliest, --to-latest"),
    (("--reset-offsets", "--group", "g", "--to-earliest", "--to-latest"),
     'Option "--to-earliest" can\'t be used with option "--to-latest"'),
    (("--reset-offsets", "--group", "g", "--to-datetime", "yesterday"), "--to-datetime 'yesterday'"),
    (("--list", "--group", "g"), 'Option "--group" can\'t be used with option "--list"'),
    (("--describe", "--group", "g", "--topic", "t"),
     'Option "--topic" can\'t be used with option "--describe"'),
    (("--list", "--members"), "Option --members is only available with --describe"),
    (("--describe", "--group", "g", "--execute"), "Option --execute is only available with --reset-offsets"),
    (("--list", "--state", "Stable,Bogus"),
     "Invalid state list 'Stable,Bogus'. Valid states are: Empty, Stable, Dead"),
])
def test_bad_option_combinations_are_one_line(args: tuple[str, ...], message: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The checks come before any connection (this address has no broker), so the command's entry
    point runs in this process; the test below runs one as a process."""
    assert main(["share-groups", "--bootstrap-server", "127.0.0.1:9", *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith("kafkapy share-groups: ") and message in err, err


def test_a_usage_mistake_as_a_process() -> None:
    result = kafkapy("share-groups", "--bootstrap-server", "127.0.0.1:9", "--delete")
    assert result.returncode == 2
    assert result.stderr.decode() == \
        "kafkapy share-groups: Option --delete takes the options --group or --all-groups\n"


def test_a_broker_without_share_group_apis_is_one_line() -> None:
    mock = MockCluster()  # librdkafka's mock serves no ListGroups, let alone v5
    result = kafkapy("share-groups", "--bootstrap-server", mock.bootstrap, "--list")
    assert result.returncode == 1
    assert result.stderr.decode().strip().endswith("does not serve ListGroups (api key 16)")


def test_a_broker_down_is_one_line() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    result = kafkapy("share-groups", "--bootstrap-server", f"127.0.0.1:{port}", "--list", "--timeout", "2")
    assert result.returncode == 1
    err = result.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("kafkapy share-groups: ") and "Traceback" not in err, err


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret";')


def _login(tmp_path: Path, password: str) -> str:
    path = tmp_path / "admin.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="admin" password="{password}";\n')
    return str(path)


def test_command_config_logs_in(kafka_broker_factory: BrokerFactory, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """Over SASL/PLAIN: offsets set for a group no member has joined yet (as Kafka lets them be),
    then the group listed and described; a wrong password is one line."""
    secured = kafka_broker_factory({"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                    "sasl.enabled.mechanisms": "PLAIN",
                                    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    secured.seed({"orders": {"partitions": 1, "records": [{"value": "v"} for _ in range(4)]}})
    admin = ["share-groups", "--bootstrap-server", secured.bootstrap_servers, "--command-config",
             _login(tmp_path, "admin-secret")]
    assert main([*admin, "--reset-offsets", "--group", "early", "--topic", "orders", "--to-earliest",
                 "--execute"]) == 0
    assert main([*admin, "--list"]) == 0
    assert main([*admin, "--describe", "--group", "early"]) == 0
    out, _ = capsys.readouterr()
    assert [line.split() for line in out.splitlines()] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["early", "orders", "0", "0"],
        ["early"],
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], ["early", "orders", "0", "0", "4"]]
    wrong = [*admin[:3], "--command-config", _login(tmp_path, "nope"), "--list"]
    assert main(wrong) == 1
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("kafkapy share-groups: ") and "Traceback" not in err, err


def test_every_partition_in_a_cluster(kafka_broker_factory: BrokerFactory) -> None:
    """Three brokers, a partition led by each: the command finds the group's coordinator from any
    broker, and describes and resets the start offsets of every partition, not only those of the
    partitions the coordinator leads (docs/share-groups.md, "Not (yet) done": its answer to the
    request with topics null lists only those, so the command also asks for the topics by name)."""
    cluster = kafka_broker_factory({"share.auto.offset.reset": "earliest"}, brokers=3)
    cluster.seed({TOPIC: {"partitions": 3, "records": [{"value": f"v{i}"} for i in range(9)]}})
    member = ck.ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "spread",
                               "share.acknowledgement.mode": "explicit"})
    member.subscribe([TOPIC])
    try:
        accept([member], 9)
    finally:
        member.close()
    last = cluster.bootstrap_servers.split(",")[-1]
    listed = kafkapy("share-groups", "--bootstrap-server", last, "--list")
    assert listed.stdout.decode().split() == ["spread"]  # from every broker: one of them coordinates it
    described = rows(kafkapy("share-groups", "--bootstrap-server", last, "--describe", "--group", "spread"))
    assert [r[2:4] for r in described[1:]] == [["0", "3"], ["1", "3"], ["2", "3"]]
    reset = rows(kafkapy("share-groups", "--bootstrap-server", last, "--reset-offsets", "--group", "spread",
                         "--to-earliest", "--execute"))
    assert [r[2:] for r in reset[1:]] == [["0", "0"], ["1", "0"], ["2", "0"]]
    described = rows(kafkapy("share-groups", "--bootstrap-server", last, "--describe", "--group", "spread"))
    assert [r[2:4] for r in described[1:]] == [["0", "0"], ["1", "0"], ["2", "0"]]
