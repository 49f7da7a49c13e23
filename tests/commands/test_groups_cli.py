"""``kafkapy groups`` as a process, against kafkapy's group coordinator with real consumers.

The columns and messages are kafka-consumer-groups.sh's; the group is made by confluent-kafka
consumers, so what the command shows is checked against what a real client did.
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kafkapy import Broker
from kafkapy.commands._group_cli import topic_arguments
from kafkapy.commands._groups import GroupClient, GroupDescription, MemberDescription, decode_assignment
from kafkapy.commands.groups import _describe, _offset_rows, _reset_plan, _timestamp_ms, _Usage, duration_ms
from kafkapy.errors import ErrorCode
from tests.commands.records_cli import MockCluster, kafkapy

TOPIC = "orders"
PARTITIONS = 3
RECORDS = 12


def groups(broker: Broker, *args: str) -> subprocess.CompletedProcess[bytes]:
    return kafkapy("groups", "--bootstrap-server", broker.bootstrap_servers, *args)


def rows(result: subprocess.CompletedProcess[bytes]) -> list[list[str]]:
    assert result.returncode == 0, result.stderr.decode()
    header, *lines = result.stdout.decode().splitlines()
    return [header.split(), *(line.split() for line in lines if line.strip())]


@pytest.fixture()
def broker() -> Iterator[Broker]:
    with Broker() as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])["orders"].result(10)
        producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap_servers})
        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
        assert producer.flush(10) == 0
        yield running


def consume_all(broker: Broker, group: str, protocol: str = "classic") -> confluent_kafka.Consumer:
    """A member of ``group`` that read and committed every record, left running."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                         "client.id": "cli-test", "group.protocol": protocol})
    consumer.subscribe([TOPIC])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < RECORDS and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
            consumer.commit(message=message, asynchronous=False)
    assert seen == RECORDS
    return consumer


def test_describe_list_reset_delete(broker: Broker) -> None:
    consumer = consume_all(broker, "billing")
    try:
        assert groups(broker, "--list").stdout.decode().split() == ["billing"]
        header, *described = rows(groups(broker, "--describe", "--group", "billing"))
        assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                          "CONSUMER-ID", "HOST", "CLIENT-ID"]
        assert sorted(int(r[2]) for r in described) == list(range(PARTITIONS))
        for row in described:
            assert row[3] == row[4] == str(RECORDS // PARTITIONS) and row[5] == "0"
            assert row[6] != "-" and row[8] == "cli-test"
        state = rows(groups(broker, "--describe", "--group", "billing", "--state"))
        assert state[1][-2:] == ["Stable", "1"]
        refused = groups(broker, "--reset-offsets", "--group", "billing", "--all-topics", "--to-earliest")
        assert refused.returncode == 1
        assert b"can only be reset if the group 'billing' is inactive, but the current state is Stable" \
            in refused.stderr
    finally:
        consumer.close()

    empty = groups(broker, "--describe", "--group", "billing")
    assert b"Consumer group 'billing' has no active members." in empty.stderr
    assert all(row[6] == "-" for row in rows(empty)[1:])

    dry = rows(groups(broker, "--reset-offsets", "--group", "billing", "--topic", f"{TOPIC}:0",
                      "--shift-by", "-1"))
    assert dry == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["billing", TOPIC, "0", "3"]]
    assert rows(groups(broker, "--describe", "--group", "billing"))[1][3] == "4"  # a dry run commits nothing

    executed = groups(broker, "--reset-offsets", "--group", "billing", "--all-topics", "--to-earliest",
                      "--execute", "--json")
    assert json.loads(executed.stdout)["offsets"] == [
        {"group": "billing", "topic": TOPIC, "partition": p, "new_offset": 0} for p in range(PARTITIONS)]
    lags = [row[5] for row in rows(groups(broker, "--describe", "--group", "billing"))[1:]]
    assert lags == [str(RECORDS // PARTITIONS)] * PARTITIONS

    deleted = groups(broker, "--delete", "--group", "billing")
    assert deleted.stdout.decode().strip() == \
        "Deletion of requested consumer groups ('billing') was successful."
    assert groups(broker, "--list").stdout.decode().split() == []


def test_describe_a_kip848_consumer_group(broker: Broker) -> None:
    """A group.protocol=consumer group is described through ConsumerGroupDescribe, so its members'
    partitions show (DescribeGroups carries no assignment bytes for it)."""
    consumer = consume_all(broker, "modern", protocol="consumer")
    try:
        described = rows(groups(broker, "--describe", "--group", "modern"))[1:]
        assert sorted(int(r[2]) for r in described) == list(range(PARTITIONS))
        assert all(r[3] == r[4] == str(RECORDS // PARTITIONS) and r[6] != "-" and r[8] == "cli-test"
                   for r in described)
        state = rows(groups(broker, "--describe", "--group", "modern", "--state"))
        assert state[1][-3:] == ["uniform", "Stable", "1"]
        members = rows(groups(broker, "--describe", "--group", "modern", "--members"))
        assert members[1][-1] == str(PARTITIONS)
    finally:
        consumer.close()
    deleted = groups(broker, "--delete", "--group", "modern")
    assert deleted.stdout.decode().strip() == \
        "Deletion of requested consumer groups ('modern') was successful."


def test_delete_of_an_active_group_fails_per_group(broker: Broker) -> None:
    consumer = consume_all(broker, "busy")
    try:
        result = groups(broker, "--delete", "--group", "busy")
        assert result.returncode == 1
        assert b"* Group 'busy' could not be deleted due to: NON_EMPTY_GROUP" in result.stderr
    finally:
        consumer.close()


def commit_one(broker: Broker, group: str, partition: int, offset: int) -> None:
    """An empty group with one committed offset, committed by a consumer that never joined."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, partition, offset)],
                        asynchronous=False)
    finally:
        consumer.close()


def test_reset_skips_an_active_group_and_resets_the_others(broker: Broker) -> None:
    """As kafka-consumer-groups.sh, a group with members is refused on its own: the other groups of
    the same command are still reset (kafkapy stopped at the refused group, leaving the rest)."""
    commit_one(broker, "idle", 0, 1)
    consumer = consume_all(broker, "live")
    try:
        result = groups(broker, "--reset-offsets", "--group", "live", "--group", "idle",
                        "--topic", f"{TOPIC}:0", "--to-latest", "--execute")
        assert result.returncode == 1
        assert result.stderr.decode().strip() == ("Error: Assignments can only be reset if the group 'live' "
                                                  "is inactive, but the current state is Stable.")
        table = [line.split() for line in result.stdout.decode().splitlines()]
        assert table == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["idle", TOPIC, "0", "4"]]
        assert rows(groups(broker, "--describe", "--group", "idle"))[1][3] == "4"
    finally:
        consumer.close()


def test_shift_by_needs_a_committed_offset(broker: Broker) -> None:
    """Kafka refuses to shift a partition the group has no offset for, rather than shifting from
    the log end: partitions 1 and 2 have none here."""
    commit_one(broker, "partial", 0, 2)
    result = groups(broker, "--reset-offsets", "--group", "partial", "--topic", TOPIC, "--shift-by", "-1")
    assert result.returncode == 2
    assert result.stderr.decode().strip() == ("kafkapy groups: Cannot shift offset for partition orders-1 "
                                              "since there is no current committed offset")
    shifted = rows(groups(broker, "--reset-offsets", "--group", "partial", "--topic", f"{TOPIC}:0",
                          "--shift-by", "-1"))
    assert shifted[1] == ["partial", TOPIC, "0", "1"]


def test_list_state_filter_and_describe_state(broker: Broker) -> None:
    """--list --state takes Kafka's comma-separated, case-blind list (one filter string before, so
    ``Stable,Empty`` matched no group); --describe --state shows the coordinator as host:port (id)
    and an empty group's "no active members" line."""
    commit_one(broker, "quiet", 0, 1)
    consumer = consume_all(broker, "busy")
    try:
        listed = rows(groups(broker, "--list", "--state", "stable,EMPTY"))
        assert sorted(listed[1:]) == [["busy", "Stable"], ["quiet", "Empty"]]
        assert rows(groups(broker, "--list", "--state", "Empty"))[1:] == [["quiet", "Empty"]]
        wrong = groups(broker, "--list", "--state", "Stable,Busy")
        assert wrong.returncode == 2
        assert wrong.stderr.decode().strip() == (
            "kafkapy groups: Invalid state list 'Stable,Busy'. Valid states are: PreparingRebalance, "
            "CompletingRebalance, Stable, Dead, Empty, Assigning, Reconciling")
        described = groups(broker, "--describe", "--group", "quiet", "--state")
        assert described.stderr.decode().strip() == "Consumer group 'quiet' has no active members."
        header, line = described.stdout.decode().splitlines()
        assert header.split("  ")[0].split() == ["GROUP", "COORDINATOR", "(ID)"]
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        assert line.split() == ["quiet", f"{host}:{port}", f"({broker.broker_id})", "-", "Empty", "0"]
    finally:
        consumer.close()


def test_describe_members_columns(broker: Broker) -> None:
    """--members shows GROUP-INSTANCE-ID only when a member is static, and --verbose's ASSIGNMENT
    as kafka-consumer-groups.sh prints it, ``orders(0,1,2)`` (kafkapy printed the column always and
    the partitions as ``orders-0,orders-1,...``)."""
    plain = consume_all(broker, "plain")
    static = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "pinned",
                                       "group.instance.id": "pin-1", "client.id": "cli-test"})
    try:
        static.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while not static.assignment() and time.monotonic() < deadline:
            static.poll(0.2)
        assert len(static.assignment()) == PARTITIONS
        header, row = rows(groups(broker, "--describe", "--group", "plain", "--members", "--verbose"))
        assert header == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert row[0] == "plain" and row[-2:] == [str(PARTITIONS), f"{TOPIC}(0,1,2)"]
        header, row = rows(groups(broker, "--describe", "--group", "pinned", "--members"))
        assert header == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert row[2] == "pin-1" and row[-1] == str(PARTITIONS)
    finally:
        plain.close()
        static.close()


def test_usage_mistakes_are_one_line(broker: Broker) -> None:
    result = groups(broker, "--reset-offsets", "--group", "g", "--all-topics")
    assert result.returncode == 2
    assert result.stderr.decode().strip().count("\n") == 0 and b"--to-earliest" in result.stderr


def test_delete_with_a_topic_is_refused_and_keeps_the_group(broker: Broker) -> None:
    """kafka-consumer-groups.sh refuses --delete with --topic (--delete-offsets is the per-topic
    form); kafkapy ignored the --topic and deleted the whole group with every offset."""
    commit_one(broker, "keeper", 0, 2)
    result = groups(broker, "--delete", "--group", "keeper", "--topic", TOPIC)
    assert result.returncode == 2
    assert result.stderr.decode().strip() == ("kafkapy groups: The consumer does not support topic-specific "
                                              "offset deletion from a consumer group.")
    assert groups(broker, "--list").stdout.decode().split() == ["keeper"]
    for refused, message in ((("--list", "--group", "keeper"),
                              "Option --group can't be used with option --list"),
                             (("--describe", "--group", "keeper", "--topic", TOPIC),
                              "Option --topic can't be used with option --describe"),
                             (("--describe", "--group", "keeper", "--state", "Stable"),
                              "Option --describe does not take a value for --state")):
        result = groups(broker, *refused)
        assert (result.returncode, result.stderr.decode().strip()) == (2, f"kafkapy groups: {message}")


def test_all_groups_means_the_consumer_groups(broker: Broker) -> None:
    """--all-groups takes what --list lists, as Kafka's listConsumerGroups: a share group is not
    described, reset or deleted by --delete --all-groups (kafkapy deleted it with the others)."""
    made = kafkapy("share-groups", "--bootstrap-server", broker.bootstrap_servers, "--reset-offsets",
                   "--group", "sharing", "--topic", TOPIC, "--to-earliest", "--execute")
    assert made.returncode == 0, made.stderr.decode()
    commit_one(broker, "plain", 0, 1)
    assert groups(broker, "--list").stdout.decode().split() == ["plain"]
    described = rows(groups(broker, "--describe", "--all-groups", "--state"))
    assert [row[0] for row in described[1:]] == ["plain"]
    deleted = groups(broker, "--delete", "--all-groups")
    assert deleted.stdout.decode().strip() == \
        "Deletion of requested consumer groups ('plain') was successful."
    shared = kafkapy("share-groups", "--bootstrap-server", broker.bootstrap_servers, "--list")
    assert shared.stdout.decode().split() == ["sharing"]


def test_describe_shows_a_negative_lag(broker: Broker) -> None:
    """An offset committed past the log end shows LAG end - offset, negative, as Kafka's describe
    shows it (kafkapy printed 0, hiding that the group is ahead of the log)."""
    commit_one(broker, "ahead", 0, 100)
    _header, row = rows(groups(broker, "--describe", "--group", "ahead"))
    assert row[1:6] == [TOPIC, "0", "100", str(RECORDS // PARTITIONS), str(RECORDS // PARTITIONS - 100)]


def test_list_type(broker: Broker) -> None:
    """kafka-consumer-groups.sh 4's --list --type: a GROUP TYPE (STATE) table, filtered by the
    comma-separated, case-blind types given (kafkapy refused the option)."""
    classic = consume_all(broker, "old-style")
    modern = consume_all(broker, "new-style", protocol="consumer")
    try:
        assert sorted(rows(groups(broker, "--list", "--type"))[1:]) == [
            ["new-style", "Consumer"], ["old-style", "Classic"]]
        assert rows(groups(broker, "--list", "--type", "CLASSIC", "--state")) == [
            ["GROUP", "TYPE", "STATE"], ["old-style", "Classic", "Stable"]]
        assert rows(groups(broker, "--list", "--type", "consumer,share"))[1:] == [["new-style", "Consumer"]]
        wrong = groups(broker, "--list", "--type", "modern")
        assert (wrong.returncode, wrong.stderr.decode().strip()) == (
            2, "kafkapy groups: Invalid types list 'modern'. Valid types are: Consumer, Classic, Share")
        misplaced = groups(broker, "--describe", "--group", "old-style", "--type")
        assert misplaced.returncode == 2
    finally:
        classic.close()
        modern.close()


def test_reset_of_a_partition_the_topic_lacks_fails_at_once(broker: Broker) -> None:
    """--topic orders:0,5 of a 3-partition topic is UNKNOWN_TOPIC_OR_PARTITION without waiting out
    --timeout, as Kafka's ListOffsets fails it (kafkapy waited the 10 s), and nothing is reset."""
    commit_one(broker, "lacking", 0, 2)
    started = time.monotonic()
    result = groups(broker, "--reset-offsets", "--group", "lacking", "--topic", f"{TOPIC}:0,5",
                    "--to-earliest", "--execute")
    assert time.monotonic() - started < 8
    assert (result.returncode, result.stderr.decode().strip()) == (
        1, f"kafkapy groups: {TOPIC}-5: UNKNOWN_TOPIC_OR_PARTITION")
    assert rows(groups(broker, "--describe", "--group", "lacking"))[1][3] == "2"


def test_describe_shows_dashes_for_a_deleted_topic_at_once(broker: Broker) -> None:
    """A member described as owning a partition of a topic deleted since (the group has not
    rebalanced yet) gets "-" for LOG-END-OFFSET and LAG, as kafka-consumer-groups.sh shows an
    unknown partition (KAFKA-17218), and the other rows their numbers: kafkapy asked the gone
    partition's leader until --timeout ran out and failed the whole command."""
    broker.seed({"gone": {"partitions": 1, "records": [{"value": "a"}]}})
    broker.delete_topics("gone")
    commit_one(broker, "after-delete", 0, 2)
    member = MemberDescription("m-1", None, "app", "/127.0.0.1", (("gone", 0), (TOPIC, 0)))
    group = GroupDescription("after-delete", ErrorCode.NONE, "Stable", "consumer", "range", (member,), 0)
    started = time.monotonic()
    with GroupClient(broker.bootstrap_servers, timeout=3) as client:
        described = _offset_rows(client, group)
    assert time.monotonic() - started < 2
    assert [(r["topic"], r["partition"], r["current_offset"], r["log_end_offset"], r["lag"])
            for r in described] == [("gone", 0, None, None, None), (TOPIC, 0, 2, RECORDS // PARTITIONS, 2)]


def test_a_broker_without_group_apis_is_a_one_line_error() -> None:
    mock = MockCluster()  # librdkafka's mock serves groups to members, but not ListGroups
    result = kafkapy("groups", "--bootstrap-server", mock.bootstrap, "--list")
    assert result.returncode == 1
    assert result.stderr.decode().strip().endswith("does not serve ListGroups (api key 16)")


def test_decode_assignment() -> None:
    data = struct.pack(">hi", 1, 2) + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 3) \
        + struct.pack(">h", 2) + b"bb" + struct.pack(">ii", 1, 7) + struct.pack(">i", -1)
    assert decode_assignment(data) == (("a", 0), ("a", 3), ("bb", 7))
    assert decode_assignment(b"") == ()
    assert decode_assignment(b"\x00\x01\x00") == ()  # not an assignment: shown as none, not a failure


def test_delete_offsets_refused_while_subscribed_then_done(broker: Broker) -> None:
    """OffsetDelete: a live member subscribed to the topic keeps its offsets (GROUP_SUBSCRIBED_TO_TOPIC,
    per partition); once the group is empty they go, and a real consumer of the group starts over
    from auto.offset.reset."""
    consumer = consume_all(broker, "audit")
    try:
        refused = groups(broker, "--delete-offsets", "--group", "audit", "--topic", f"{TOPIC}:0")
        assert refused.returncode == 1
        assert b"Encounter some partition level error" in refused.stderr
        assert refused.stdout.decode().splitlines()[-1].split() == \
            [TOPIC, "0", "Error:", "GROUP_SUBSCRIBED_TO_TOPIC"]
    finally:
        consumer.close()

    done = groups(broker, "--delete-offsets", "--group", "audit", "--topic", TOPIC, "--topic", "nowhere")
    assert done.returncode == 1  # the unknown topic fails; the known one's partitions are deleted
    table_rows = [line.split() for line in done.stdout.decode().splitlines() if line.strip()]
    assert table_rows[0] == ["TOPIC", "PARTITION", "STATUS"]
    assert table_rows[1:] == [["nowhere", "Not", "Provided", "Error:", "UNKNOWN_TOPIC_OR_PARTITION"],
                              *([TOPIC, str(p), "Successful"] for p in range(PARTITIONS))]
    described = json.loads(groups(broker, "--describe", "--group", "audit", "--json").stdout)["groups"]
    assert described == []  # no offsets left, no members

    # A real consumer of the group finds no committed offset: it reads from the start again.
    again = consume_all(broker, "audit")
    again.close()

    fine = groups(broker, "--delete-offsets", "--group", "audit", "--topic", f"{TOPIC}:1,2", "--json")
    assert fine.returncode == 0, fine.stderr
    assert json.loads(fine.stdout) == {"group": "audit", "error": None, "partitions": [
        {"topic": TOPIC, "partition": 1, "error": None}, {"topic": TOPIC, "partition": 2, "error": None}]}
    left = rows(groups(broker, "--describe", "--group", "audit"))[1:]
    assert [(r[2], r[3]) for r in left] == [("0", str(RECORDS // PARTITIONS))]


def test_delete_offsets_of_an_unknown_group_and_usage(broker: Broker) -> None:
    missing = groups(broker, "--delete-offsets", "--group", "ghost", "--topic", TOPIC)
    assert missing.returncode == 1
    assert missing.stderr.decode().strip() == "Error: 'ghost' does not exist."
    two = groups(broker, "--delete-offsets", "--group", "a", "--group", "b", "--topic", TOPIC)
    assert two.returncode == 2 and b"exactly one --group" in two.stderr
    no_topic = groups(broker, "--delete-offsets", "--group", "a")
    assert no_topic.returncode == 2 and b"needs --topic" in no_topic.stderr


def test_export_then_reset_from_the_file(broker: Broker, tmp_path: Any) -> None:
    """--export writes the plan as kafka-consumer-groups.sh's CSV; --from-file applies it (clamped into
    the log, as Kafka clamps it), here for two groups at once with the group column."""
    for group in ("east", "west"):
        consume_all(broker, group).close()
    exported = groups(broker, "--reset-offsets", "--group", "east", "--topic", TOPIC, "--shift-by", "-2",
                      "--export")
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.decode().split() == [f"{TOPIC},{p},2" for p in range(PARTITIONS)]

    plan = tmp_path / "plan.csv"
    plan.write_text(f"east,{TOPIC},0,1\neast,{TOPIC},1,99\nwest,{TOPIC},2,-5\n")
    applied = groups(broker, "--reset-offsets", "--group", "east", "--group", "west",
                     "--from-file", str(plan), "--execute", "--json")
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout)["offsets"] == [
        {"group": "east", "topic": TOPIC, "partition": 0, "new_offset": 1},
        {"group": "east", "topic": TOPIC, "partition": 1, "new_offset": RECORDS // PARTITIONS},  # clamped
        {"group": "west", "topic": TOPIC, "partition": 2, "new_offset": 0}]  # clamped up to the start
    east = {r[2]: r[3] for r in rows(groups(broker, "--describe", "--group", "east"))[1:]}
    assert east == {"0": "1", "1": "4", "2": "4"}

    single = tmp_path / "single.csv"
    single.write_text(f"{TOPIC},0,3\n")
    assert rows(groups(broker, "--reset-offsets", "--group", "west", "--from-file", str(single)))[1] == \
        ["west", TOPIC, "0", "3"]
    broken = tmp_path / "broken.csv"
    broken.write_text(f"{TOPIC},zero,3\n")
    bad = groups(broker, "--reset-offsets", "--group", "west", "--from-file", str(broken))
    assert bad.returncode == 2 and b"line 1: partition and offset must be numbers" in bad.stderr
    no_plan = groups(broker, "--reset-offsets", "--group", "east", "--group", "west",
                     "--from-file", str(single))
    assert no_plan.returncode == 2 and b"expected group,topic,partition,offset" in no_plan.stderr


_csv_cells = (st.integers(-(2**64), 2**64).map(str) | st.text("t,\" \r\n0x", max_size=6)
              | st.sampled_from(["1_0", "+3", "\u0663", "9" * 5000]))


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=60) | st.lists(st.lists(_csv_cells, max_size=5).map(",".join), max_size=4)
       .map("\n".join).map(str.encode), st.sampled_from([["g"], ["g", "h"]]))
@example(b"t,0,5\n\xff\n", ["g"])  # not UTF-8: was a UnicodeDecodeError traceback
@example(b"t,99999999999,5\n", ["g"])  # past Java's int: was taken (and retried for 10 s)
@example(b"t," + b"9" * 200_000 + b",5\n", ["g"])  # past csv's field limit: was a csv.Error traceback
def test_any_from_file_bytes_give_a_plan_or_one_usage_error(
        tmp_path_factory: pytest.TempPathFactory, raw: bytes, group_ids: list[str]) -> None:
    path = tmp_path_factory.mktemp("plan") / "plan.csv"
    path.write_bytes(raw)
    try:
        plan = _reset_plan(str(path), group_ids)
    except _Usage as refused:
        assert "\n" not in str(refused).replace(raw.decode("utf-8", "replace"), "")
        return
    assert all(type(p) is int and -(2**31) <= p < 2**31 and -(2**63) <= o < 2**63
               for offsets in plan.values() for (_, p), o in offsets.items())


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text("t:,0123456789-_ x", max_size=12), min_size=1, max_size=3))
@example(["t:99999999999"])  # past Java's int: was taken, then retried for 10 s as an unknown partition
def test_any_topic_arguments_give_partitions_or_one_usage_error(entries: list[str]) -> None:
    try:
        parsed = topic_arguments(entries)
    except _Usage:
        return
    assert all(-(2**31) <= p < 2**31 for _, partitions in parsed for p in partitions or [])


@settings(max_examples=100, deadline=None)
@given(st.from_regex(r"P([0-9]{1,16}D)?(T([0-9]{1,16}H)?([0-9]{1,16}M)?([0-9]{1,16}(\.[0-9]{1,3})?S)?)?",
                     fullmatch=True))
@example("P9999999999999D")  # was an EncodeError traceback from the ListOffsets request
def test_any_duration_is_a_timestamp_or_one_usage_error(duration: str) -> None:
    try:
        when = _timestamp_ms(argparse.Namespace(to_datetime=None, by_duration=duration))
    except _Usage:
        return
    assert when is not None and -(2**63) <= when < 2**63


@pytest.mark.parametrize(("text", "ms"), [
    ("PT1H", 3_600_000), ("pt1h30m", 5_400_000), ("P1D", 86_400_000), ("P1DT2H3M4.5S", 93_784_500),
    ("PT1,25S", 1_250), ("-PT1H", -3_600_000), ("PT-1.5S", -1_500), ("P-1DT+2H", -79_200_000),
])
def test_by_duration_reads_what_java_duration_parse_reads(text: str, ms: int) -> None:
    """Kafka parses --by-duration with java.time.Duration.parse: letters in either case, signs on
    the whole and on each part, a comma or a dot before the fraction (kafkapy refused all of these)."""
    assert duration_ms(text) == ms


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "P2W", "PT1H1D", "1H", "PT1.S1"])
def test_by_duration_refuses_what_java_refuses(text: str) -> None:
    with pytest.raises(_Usage):
        duration_ms(text)


class _StateOnly:
    """A GroupClient stand-in that knows one group's state and nothing else."""

    def __init__(self, state: str) -> None:
        self.state = state

    def describe_group(self, group_id: str) -> GroupDescription:
        return GroupDescription(group_id, ErrorCode.NONE, self.state, "consumer", "range", (), 1)

    def committed(self, group_id: str) -> list[Any]:
        return []

    def address(self, node: int) -> str:
        return "broker:9092"


@pytest.mark.parametrize(("state", "said"), [
    ("PreparingRebalance", "Warning: Consumer group 'g' is rebalancing."),
    ("CompletingRebalance", "Warning: Consumer group 'g' is rebalancing."),
    ("Reconciling", "Warning: Consumer group 'g' is rebalancing."),
    ("Empty", "Consumer group 'g' has no active members."),
    ("Stable", None),
])
def test_describe_says_what_kafka_says_of_the_state(state: str, said: str | None) -> None:
    """As ConsumerGroupCommand: a rebalancing group gets a warning, an empty one "no active
    members" (by its state, in every --describe view)."""
    for view in ({"state": None, "members": False}, {"state": [], "members": False},
                 {"state": None, "members": True}):
        warn: list[str] = []
        args = argparse.Namespace(all_groups=False, group=["g"], json=False, verbose=False, **view)
        _describe(_StateOnly(state), args, warn)  # type: ignore[arg-type]
        assert warn == ([] if said is None else [said])
