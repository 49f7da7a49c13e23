"""`kafkapy topics --create/--delete/--alter` and the `--describe` filters, as kafka-topics.sh has
them, run in process against embedded brokers and checked with real clients (librdkafka and
kafka-python); one run of the installed `kafkapy` executable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from records_cli import MockCluster

import kafkapy
from kafkapy.cli import main
from kafkapy.commands.topics import _Usage, parse_configs, parse_replica_assignment, topic_pattern
from kafkapy.embedded import Broker
from kafkapy.testing import BrokerFactory, wait_until

TIMEOUT_S = 20


def run(capsys: pytest.CaptureFixture[str], bootstrap: str, *args: str) -> tuple[int, str, str]:
    code = main(["topics", "--bootstrap-server", bootstrap, *args])
    out, err = capsys.readouterr()
    return code, out, err


def metadata(bootstrap: str) -> dict[str, dict[int, list[int]]]:
    """Topic -> partition -> replicas, as librdkafka's Metadata reads them."""
    from confluent_kafka.admin import AdminClient

    listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=TIMEOUT_S)
    return {name: {p.id: list(p.replicas) for p in topic.partitions.values()}
            for name, topic in listed.topics.items()}


def topic_configs(bootstrap: str, topic: str) -> dict[str, Any]:
    """The topic's configs and their sources, as librdkafka's DescribeConfigs reads them."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
    return {name: (entry.value, entry.source) for name, entry in future.result(TIMEOUT_S).items()}


def kafka_python_topics(bootstrap: str) -> set[str]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


# --- create -------------------------------------------------------------------------------------

def test_create_without_counts_takes_the_brokers_defaults(kafka_broker_factory: BrokerFactory,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    broker = kafka_broker_factory({"num.partitions": 3})
    bs = broker.bootstrap_servers
    assert run(capsys, bs, "--create", "--topic", "orders") == (0, "Created topic orders.\n", "")
    assert metadata(bs)["orders"] == {0: [broker.broker_id], 1: [broker.broker_id], 2: [broker.broker_id]}


def test_create_with_counts_and_configs(kafka_cluster: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka.admin import ConfigSource

    # Through each broker: two of them are not the controller, and the command finds it.
    for member in kafka_cluster.brokers:
        bs = member.bootstrap_servers
        topic = f"wide-{member.broker_id}"
        code, out, err = run(capsys, bs, "--create", "--topic", topic, "--partitions", "4",
                             "--replication-factor", "3", "--config", "retention.ms = 60000",
                             "--config", "cleanup.policy=compact")
        assert (code, out, err) == (0, f"Created topic {topic}.\n", "")
        replicas = metadata(bs)[topic]
        assert sorted(replicas) == [0, 1, 2, 3] and all(sorted(r) == [0, 1, 2] for r in replicas.values())
        configs = topic_configs(bs, topic)
        assert configs["retention.ms"] == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        assert configs["cleanup.policy"] == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


def test_create_with_a_replica_assignment(kafka_cluster: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    bs = kafka_cluster.brokers[0].bootstrap_servers
    code, out, _ = run(capsys, bs, "--create", "--topic", "placed", "--replica-assignment", "2:1, 0:2,1:0")
    assert (code, out) == (0, "Created topic placed.\n")
    assert metadata(bs)["placed"] == {0: [2, 1], 1: [0, 2], 2: [1, 0]}


def test_create_refusals(kafka_cluster: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    bs = kafka_cluster.brokers[1].bootstrap_servers
    assert run(capsys, bs, "--create", "--topic", "once")[0] == 0
    code, out, err = run(capsys, bs, "--create", "--topic", "once", "--partitions", "2")
    assert (code, out) == (1, "")
    assert err == "kafkapy topics: error TOPIC_ALREADY_EXISTS (topic once): Topic 'once' already exists.\n"
    assert run(capsys, bs, "--create", "--topic", "once", "--if-not-exists") == (0, "", "")
    code, _, err = run(capsys, bs, "--create", "--topic", "big", "--replication-factor", "4")
    assert code == 1 and err.startswith("kafkapy topics: error INVALID_REPLICATION_FACTOR (topic big): ")
    assert err.count("\n") == 1
    code, _, err = run(capsys, bs, "--create", "--topic", "bogus", "--config", "cleanup.policy=bogus")
    assert code == 1 and err.startswith("kafkapy topics: error INVALID_CONFIG (topic bogus): ")
    assert "cleanup.policy" in err and err.count("\n") == 1
    code, _, err = run(capsys, bs, "--create", "--topic", "gone", "--replica-assignment", "0:7")
    assert code == 1 and "INVALID_REPLICA_ASSIGNMENT" in err and err.count("\n") == 1
    assert not {"big", "bogus", "gone"} & metadata(bs).keys()


@pytest.mark.parametrize(("args", "message"), [
    (["--replication-factor", "0"], "the replication factor must be between 1 and 32767 inclusive"),
    (["--replication-factor", "32768"], "the replication factor must be between 1 and 32767 inclusive"),
    (["--partitions", "0"], "the partitions must be greater than 0"),
    (["--partitions", "2", "--replica-assignment", "0"], "--replica-assignment goes without --partitions"),
    (["--replication-factor", "1", "--replica-assignment", "0"], "--replica-assignment goes without"),
    (["--config", "retention.ms"], "configs must be in the format \"key=val\""),
    (["--config", "a=b=c"], "configs must be in the format \"key=val\""),
    (["--replica-assignment", "0:0"], "partition 0 lists broker(s) 0 more than once"),
    (["--replica-assignment", "0:1,2"], "partition 1 has replication factor 1 (2), partition 0 has 2"),
    (["--replica-assignment", "0:x"], "partition 0 is '0:x'"),
    (["--replica-assignment", "1_0"], "partition 0 is '1_0'"),
    (["--if-exists"], "--if-exists goes with --describe or --delete or --alter, not --create"),
    (["--topic", "second"], "--create takes one --topic"),
])
def test_create_usage_errors_send_nothing(args: list[str], message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # Port 9 (discard) is never listened on here: the command must refuse before connecting.
    code, out, err = run(capsys, "127.0.0.1:9", "--create", "--topic", "t", *args)
    assert (code, out) == (2, "") and err.startswith("kafkapy topics: error: ") and message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(("args", "message"), [
    (["--delete"], "--delete needs --topic"),
    (["--alter", "--topic", "t"], "--alter needs --partitions"),
    (["--alter", "--topic", "t", "--partitions", "3", "--config", "a=b"],
     "--config goes with --create, not --alter; change topic configs with kafkapy configs"),
    (["--delete", "--topic", "t", "--partitions", "3"],
     "--partitions goes with --create or --alter, not --delete"),
    (["--list", "--under-replicated-partitions"],
     "--under-replicated-partitions goes with --describe, not --list"),
    (["--delete", "--topic", "t", "--exclude-internal"],
     "--exclude-internal goes with --list or --describe, not --delete"),
    (["--describe", "--topics-with-overrides", "--at-min-isr-partitions"],
     "--topics-with-overrides goes without the partition filters"),
    (["--describe", "--topic", "(unclosed"], "(unclosed is an invalid regex."),
    (["--describe", "--if-exists"], "--describe --if-exists needs --topic"),
    (["--alter", "--topic", "t", "--partitions", "3", "--replica-assignment", "0:0"],  # before connecting
     "--replica-assignment: partition 0 lists broker(s) 0 more than once"),
])
def test_other_usage_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "127.0.0.1:9", *args)
    assert (code, out, err) == (2, "", f"kafkapy topics: error: {message}\n")


def test_the_collision_warning(kafka_broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, kafka_broker.bootstrap_servers, "--create", "--topic", "plain-name")
    assert (code, out) == (0, "Created topic plain-name.\n")
    for name in ("with.period", "with_underscore"):
        code, out, _ = run(capsys, kafka_broker.bootstrap_servers, "--create", "--topic", name)
        warning, created = out.splitlines()
        assert code == 0 and warning.startswith("WARNING: ") and "'.' and '_'" in warning
        assert created == f"Created topic {name}."


def test_create_and_delete_over_sasl_with_acls(kafka_broker_factory: BrokerFactory, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    users = {"admin": "admin-secret", "alice": "alice-secret"}
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="admin" password="admin-secret" '
            + " ".join(f'user_{user}="{password}"' for user, password in users.items()) + ";")
    broker = kafka_broker_factory({"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                   "sasl.enabled.mechanisms": "PLAIN",
                                   "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
                                   "authorizer.class.name": "acl", "super.users": "User:admin"})
    configs = {}
    for user, password in users.items():
        path = tmp_path / f"{user}.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                        f'username="{user}" password="{password}";\n')
        configs[user] = str(path)
    alice = (broker.bootstrap_servers, "--command-config", configs["alice"])
    admin = (broker.bootstrap_servers, "--command-config", configs["admin"])
    code, out, err = run(capsys, *alice, "--create", "--topic", "hers")
    assert (code, out) == (1, "")
    assert err.startswith("kafkapy topics: error TOPIC_AUTHORIZATION_FAILED (topic hers)")
    assert err.count("\n") == 1
    assert run(capsys, *admin, "--create", "--topic", "secured") == (0, "Created topic secured.\n", "")
    # alice may not describe it, so no pattern of hers finds it (as Kafka's listing hides it)
    code, _, err = run(capsys, *alice, "--delete", "--topic", "secured")
    assert (code, err) == (1, "kafkapy topics: Topic 'secured' does not exist as expected\n")
    assert run(capsys, *admin, "--delete", "--topic", "secured") == (0, "", "")
    code, out, _ = run(capsys, *admin, "--list")
    assert (code, out) == (0, "\n")


def test_not_controller_answers_are_retried_until_the_timeout(kafka_broker: Broker,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from kafkapy.errors import ErrorCode
    from kafkapy.faults import ErrorAnswer, FaultRule
    from kafkapy.protocol.api_keys import ApiKey

    bs = kafka_broker.bootstrap_servers
    # The controller moved away twice between Metadata and CreateTopics: asked again, it applies it.
    not_controller = ErrorAnswer(ErrorCode.NOT_CONTROLLER)
    handle = kafka_broker.faults.add(FaultRule(not_controller, api=ApiKey.CREATE_TOPICS, times=2))
    assert run(capsys, bs, "--create", "--topic", "moved") == (0, "Created topic moved.\n", "")
    assert handle.fired == 2
    handle.remove()
    # It never settles: one line once --timeout has passed, and nothing deleted.
    kafka_broker.faults.add(FaultRule(not_controller, api=ApiKey.DELETE_TOPICS))
    code, out, err = run(capsys, bs, "--delete", "--topic", "moved", "--timeout", "1")
    assert (code, out) == (1, "")
    assert err == f"kafkapy topics: broker {kafka_broker.broker_id}: NOT_CONTROLLER (still after 1s)\n"
    assert "moved" in metadata(bs)


def test_a_broker_without_the_admin_apis_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    mock = MockCluster()  # librdkafka's mock cluster serves neither CreateTopics nor DescribeConfigs
    try:
        mock.write("present", [{"value": b"x", "partition": 0}])
        started = time.monotonic()
        code, out, err = run(capsys, mock.bootstrap, "--create", "--topic", "made", "--timeout", "120")
        assert (code, out) == (1, "")
        assert err == f"kafkapy topics: {mock.bootstrap} does not serve CreateTopics (api key 19)\n"
        # Not a retriable error: no waiting for --timeout (2 min, so a slow machine is no matter).
        assert time.monotonic() - started < 60
        code, out, err = run(capsys, mock.bootstrap, "--describe", "--topics-with-overrides")
        assert (code, out) == (1, "") and "does not serve DescribeConfigs" in err and err.count("\n") == 1
        # A plain describe still shows what Metadata and ListOffsets say, and notes the rest.
        code, out, err = run(capsys, mock.bootstrap, "--describe", "--topic", "present")
        assert code == 0 and _rows(out.split("\n\n")[0])[0] == ("present", "0")
        assert err == "kafkapy topics: note: the broker does not serve DescribeConfigs; configs shown as -\n"
    finally:
        mock.close()


# --- delete -------------------------------------------------------------------------------------

def test_delete_by_name_and_by_regex(kafka_cluster: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    bs = kafka_cluster.brokers[2].bootstrap_servers
    for name in ("logs.a", "logs.b", "logs-c", "keep"):
        assert run(capsys, bs, "--create", "--topic", name)[0] == 0
    assert run(capsys, bs, "--delete", "--topic", "keep") == (0, "", "")
    assert "keep" not in kafka_python_topics(bs)
    # A regular expression as Kafka reads it: '\.' a period, the whole name must match.
    assert run(capsys, bs, "--delete", "--topic", r"logs\..*") == (0, "", "")
    assert kafka_python_topics(bs) & {"logs.a", "logs.b", "logs-c"} == {"logs-c"}
    code, out, err = run(capsys, bs, "--delete", "--topic", "keep")
    assert (code, out, err) == (1, "", "kafkapy topics: Topic 'keep' does not exist as expected\n")
    assert run(capsys, bs, "--delete", "--topic", "keep", "--if-exists") == (0, "", "")
    # Commas are alternatives (Kafka's TopicFilter).
    assert run(capsys, bs, "--delete", "--topic", "nothing, logs-c") == (0, "", "")
    assert "logs-c" not in kafka_python_topics(bs)


# --- alter --------------------------------------------------------------------------------------

def test_alter_adds_partitions_a_producer_then_writes_to(kafka_cluster: Broker,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka import Producer

    bs = kafka_cluster.brokers[1].bootstrap_servers
    assert run(capsys, bs, "--create", "--topic", "grow", "--partitions", "2",
               "--replication-factor", "2")[0] == 0
    assert run(capsys, bs, "--alter", "--topic", "grow", "--partitions", "4") == (0, "", "")
    assert sorted(metadata(bs)["grow"]) == [0, 1, 2, 3]
    producer = Producer({"bootstrap.servers": bs, "linger.ms": 0, "acks": "all"})
    delivered: list[Any] = []
    producer.produce("grow", value=b"new", partition=3,
                     on_delivery=lambda err, msg: delivered.append((err, msg)))
    assert producer.flush(TIMEOUT_S) == 0
    ((error, message),) = delivered
    assert error is None and (message.partition(), message.offset()) == (3, 0)
    # Fewer partitions: the broker refuses, in one line.
    code, out, err = run(capsys, bs, "--alter", "--topic", "grow", "--partitions", "3")
    assert (code, out) == (1, "")
    assert err == ("kafkapy topics: error INVALID_PARTITIONS (topic grow): Topic currently has 4 partitions, "
                   "which is higher than the requested 3.\n")
    # An assignment covers every partition; the entries past the existing four place the new ones.
    assert run(capsys, bs, "--alter", "--topic", "grow", "--partitions", "6",
               "--replica-assignment", "0:1,1:2,2:0,0:1,2:1,1:0") == (0, "", "")
    placed = metadata(bs)["grow"]
    assert (placed[4], placed[5]) == ([2, 1], [1, 0])
    code, _, err = run(capsys, bs, "--alter", "--topic", "absent", "--partitions", "2")
    assert (code, err) == (1, "kafkapy topics: Topic 'absent' does not exist as expected\n")
    assert run(capsys, bs, "--alter", "--topic", "absent", "--partitions", "2", "--if-exists") == (0, "", "")


# --- describe -----------------------------------------------------------------------------------

def _rows(out: str) -> list[tuple[str, str]]:
    """(topic, partition) of each row of the partition table."""
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["TOPIC", "PARTITION"]
    return [(line.split()[0], line.split()[1]) for line in lines[1:]]


def test_describe_filters_after_a_broker_stops(kafka_cluster: Broker,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    bs = kafka_cluster.brokers[0].bootstrap_servers
    assert run(capsys, bs, "--create", "--topic", "full", "--partitions", "2", "--replication-factor", "3",
               "--config", "min.insync.replicas=2")[0] == 0
    assert run(capsys, bs, "--create", "--topic", "lonely", "--replica-assignment", "2,0")[0] == 0
    assert run(capsys, bs, "--create", "--topic", "pair", "--replica-assignment", "0:1")[0] == 0
    filters = ("--under-replicated-partitions", "--unavailable-partitions", "--under-min-isr-partitions",
               "--at-min-isr-partitions")
    # Healthy: nothing under-replicated, unavailable or under its minimum; 'lonely' (one replica,
    # min.insync.replicas 1) is at its minimum.
    for flag in filters[:3]:
        assert run(capsys, bs, "--describe", flag) == (0, "", ""), flag  # nothing to report: no output
    code, out, _ = run(capsys, bs, "--describe", "--at-min-isr-partitions")
    assert code == 0 and _rows(out) == [("lonely", "0"), ("lonely", "1")]

    kafka_cluster.stop_broker(2)  # returns once the other brokers' views show it gone
    # 'lonely'-0 loses its only replica: no leader, and (as in Kafka) its ISR keeps that replica,
    # so it is unavailable and under its minimum, but neither under-replicated nor below min ISR size
    code, out, _ = run(capsys, bs, "--describe", "--under-replicated-partitions")
    assert code == 0 and _rows(out) == [("full", "0"), ("full", "1")]
    code, out, _ = run(capsys, bs, "--describe", "--unavailable-partitions")
    assert code == 0 and _rows(out) == [("lonely", "0")]
    assert out.splitlines()[1].split()[2] == "-1"  # no leader
    code, out, _ = run(capsys, bs, "--describe", "--under-min-isr-partitions")
    assert code == 0 and _rows(out) == [("lonely", "0")]
    code, out, _ = run(capsys, bs, "--describe", "--at-min-isr-partitions")
    assert code == 0 and _rows(out) == [("full", "0"), ("full", "1"), ("lonely", "0"), ("lonely", "1")]
    # Filters combine (any of them), and take --topic as the other actions do.
    code, out, _ = run(capsys, bs, "--describe", "--topic", "l.*", "--unavailable-partitions",
                       "--at-min-isr-partitions")
    assert code == 0 and _rows(out) == [("lonely", "0"), ("lonely", "1")]
    code, out, _ = run(capsys, bs, "--describe", "--unavailable-partitions", "--json")
    (lonely,) = json.loads(out)["topics"]
    assert (lonely["topic"], [p["partition"] for p in lonely["partitions"]]) == ("lonely", [0])


def test_describe_shows_overrides_and_topics_with_overrides(kafka_broker: Broker,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    bs = kafka_broker.bootstrap_servers
    assert run(capsys, bs, "--create", "--topic", "tuned", "--partitions", "2",
               "--config", "retention.ms=1000", "--config", "cleanup.policy=compact")[0] == 0
    assert run(capsys, bs, "--create", "--topic", "stock")[0] == 0
    code, out, err = run(capsys, bs, "--describe")
    assert (code, err) == (0, "")
    partitions, topics = out.split("\n\n")
    assert _rows(partitions) == [("stock", "0"), ("tuned", "0"), ("tuned", "1")]
    assert [line.split() for line in topics.splitlines()] == [
        ["TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "CONFIGS"],
        ["stock", "1", "1", "-"],
        ["tuned", "2", "1", "cleanup.policy=compact,retention.ms=1000"]]
    code, out, _ = run(capsys, bs, "--describe", "--topics-with-overrides")
    assert [line.split()[0] for line in out.splitlines()] == ["TOPIC", "tuned"]
    code, out, _ = run(capsys, bs, "--describe", "--topic", "tuned", "--json")
    (tuned,) = json.loads(out)["topics"]
    assert tuned["configs"] == {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert (tuned["partition_count"], tuned["replication_factor"]) == (2, 1)


def test_exclude_internal(kafka_broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka.admin import AdminClient

    bs = kafka_broker.bootstrap_servers
    assert run(capsys, bs, "--create", "--topic", "user-topic")[0] == 0
    admin = AdminClient({"bootstrap.servers": bs})
    (future,) = admin.describe_consumer_groups(["g"]).values()
    future.result(TIMEOUT_S)  # finding the group's coordinator made __consumer_offsets
    assert wait_until(lambda: "__consumer_offsets" in metadata(bs))
    code, out, _ = run(capsys, bs, "--list")
    assert out.split() == ["__consumer_offsets", "user-topic"]
    code, out, _ = run(capsys, bs, "--list", "--exclude-internal")
    assert out.split() == ["user-topic"]
    # As Kafka: a pattern matches internal topics too, unless --exclude-internal.
    code, out, _ = run(capsys, bs, "--list", "--topic", ".*")
    assert out.split() == ["__consumer_offsets", "user-topic"]
    code, out, err = run(capsys, bs, "--describe", "--topic", "__.*", "--exclude-internal")
    # nothing left to match
    assert (code, out, err) == (1, "", "kafkapy topics: Topic '__.*' does not exist as expected\n")
    code, out, _ = run(capsys, bs, "--describe", "--exclude-internal")
    assert {row[0] for row in _rows(out.split("\n\n")[0])} == {"user-topic"}


# --- the parsers --------------------------------------------------------------------------------

@given(st.lists(st.lists(st.integers(0, 50), min_size=1, max_size=4, unique=True), min_size=1, max_size=8)
       .filter(lambda a: len({len(r) for r in a}) == 1))
def test_replica_assignment_round_trips(assignment: list[list[int]]) -> None:
    text = ",".join(":".join(map(str, replicas)) for replicas in assignment)
    assert parse_replica_assignment(text) == assignment


@given(st.text(max_size=30))
def test_the_parsers_take_any_text_without_a_traceback(text: str) -> None:
    for parse in (parse_replica_assignment, lambda t: parse_configs([t]), topic_pattern):
        try:
            parse(text)
        except _Usage as exc:
            assert "\n" not in str(exc) or "\n" in text


def test_config_syntax_is_kafkas() -> None:
    assert parse_configs(["a = 1", " b=x y", "c=[1,2]"]) == {"a": "1", "b": "x y", "c": "[1,2]"}
    for bad in ("a", "a=", "=1", "a=1=2"):
        with pytest.raises(_Usage):
            parse_configs([bad])


def test_topic_patterns_are_kafkas() -> None:
    assert topic_pattern(" 'a.b, c' ").pattern == "a.b|c"
    assert topic_pattern("a.b").matches("a_b") and not topic_pattern("a").matches("ab")
    # Java syntax RE2 lacks runs on re here (the user's own pattern, in the user's own process)
    assert topic_pattern("(?!__).*").matches("orders") and not topic_pattern("(?!__).*").matches("__x")


# --- the real executable ------------------------------------------------------------------------

def test_the_installed_executable_creates_and_deletes(kafka_broker: Broker) -> None:
    executable = Path(sys.executable).parent / "kafkapy"
    assert executable.exists(), "the package's console script (pyproject's [project.scripts])"
    # The executable of the shared venv, importing the kafkapy under test.
    env = {**os.environ, "PYTHONPATH": str(Path(kafkapy.__file__).parents[1])}
    bs = kafka_broker.bootstrap_servers

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(executable), "topics", "--bootstrap-server", bs, *args], env=env,
                              capture_output=True, text=True, timeout=60)

    created = cli("--create", "--topic", "from-shell", "--partitions", "2")
    assert (created.returncode, created.stdout, created.stderr) == (0, "Created topic from-shell.\n", "")
    assert sorted(metadata(bs)["from-shell"]) == [0, 1]
    again = cli("--create", "--topic", "from-shell")
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    deleted = cli("--delete", "--topic", "from-shell")
    assert (deleted.returncode, deleted.stdout, deleted.stderr) == (0, "", "")
    assert "from-shell" not in kafka_python_topics(bs)
