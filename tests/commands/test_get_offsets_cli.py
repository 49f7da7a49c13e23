"""`kafkapy get-offsets`, the kafka-get-offsets.sh of kafkapy: its topic:partition:offset lines
hold what kafka-python and confluent-kafka see at each --time, its filters are GetOffsetShell's,
and a broker too old for a special time is one skip line per partition."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy import Broker
from kafkapy.cli import main
from kafkapy.commands.get_offsets import parse_rules, parse_time
from kafkapy.server.patterns import Regex

TIMEOUT_S = 20
PARTITIONS = 11  # past 10: the lines go in the order of the partitions' names, o-10 before o-2


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker() as running:
        running.seed({
            "o": {"partitions": PARTITIONS, "records": [
                {"value": "x", "partition": p, "timestamp": 1000 * (i + 1)} for p in range(PARTITIONS)
                for i in range(p % 4)]},
            "other": {"partitions": 1, "records": [{"value": "a", "timestamp": 5000},
                                                   {"value": "b", "timestamp": 9000},
                                                   {"value": "c", "timestamp": 7000}]},
            "__consumer_offsets": {"partitions": 1}})
        yield running


def _run(capsys: pytest.CaptureFixture[str], broker: Broker, *args: str) -> tuple[int, list[str], str]:
    code = main(["get-offsets", "--bootstrap-server", broker.bootstrap_servers, *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def _lines(offsets: dict[tuple[str, int], int]) -> list[str]:
    return [f"{t}:{p}:{o}" for (t, p), o in sorted(offsets.items(), key=lambda i: f"{i[0][0]}-{i[0][1]}")]


def test_latest_earliest_and_a_time_as_kafka_python_sees_them(broker: Broker,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    try:
        parts = [TopicPartition("o", p) for p in range(PARTITIONS)]
        ends = {(tp.topic, tp.partition): o for tp, o in consumer.end_offsets(parts).items()}
        starts = {(tp.topic, tp.partition): o for tp, o in consumer.beginning_offsets(parts).items()}
        at = consumer.offsets_for_times(dict.fromkeys(parts, 1500))
    finally:
        consumer.close()
    assert set(ends.values()) == {0, 1, 2, 3}
    code, lines, err = _run(capsys, broker, "--topic", "o")
    assert (code, err) == (0, "")
    assert lines == _lines(ends) and lines[:3] == ["o:0:0", "o:1:1", "o:10:2"]
    assert _run(capsys, broker, "--topic", "o", "--time", "-2")[1] == _lines(starts)
    assert _run(capsys, broker, "--topic", "o", "--time", "earliest")[1] == _lines(starts)
    # A time after a partition's last record: no offset, so no line (Kafka's UNKNOWN_OFFSET).
    found = {(tp.topic, tp.partition): o.offset for tp, o in at.items() if o is not None}
    assert found and len(found) < PARTITIONS
    assert _run(capsys, broker, "--topic", "o", "--time", "1500")[1] == _lines(found)
    assert _run(capsys, broker, "--topic", "o", "--time", "99999") == (0, [], "")


def test_max_timestamp_as_confluent_kafka_sees_it(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    asked = {TopicPartition("other", 0): OffsetSpec.max_timestamp()}
    (result,) = admin.list_offsets(asked).values()
    offset = result.result(TIMEOUT_S).offset
    assert offset == 1  # the record with the highest timestamp, 9000
    expected = (0, [f"other:0:{offset}"], "")
    assert _run(capsys, broker, "--topic", "other", "--time", "max-timestamp") == expected
    assert _run(capsys, broker, "--topic", "other", "--time", "-3")[1] == [f"other:0:{offset}"]


def test_topic_and_partition_filters(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, broker, "--topic-partitions", "o:1-3,other")[1] == ["o:1:1", "o:2:2", "other:0:3"]
    assert _run(capsys, broker, "--topic-partitions", "o:9-,:5")[1] == ["o:10:2", "o:5:1", "o:9:1"]
    assert _run(capsys, broker, "--topic-partitions", "o:-1")[1] == ["o:0:0"]
    assert _run(capsys, broker, "--topic", "o.*", "--partitions", "0")[1] == ["o:0:0", "other:0:3"]
    assert _run(capsys, broker, "--topic", "other,o", "--partitions", "0,3")[1] == ["o:0:0", "o:3:3",
                                                                                  "other:0:3"]
    everything = _run(capsys, broker)[1]
    assert "__consumer_offsets:0:0" in everything and len(everything) == PARTITIONS + 2
    without = _run(capsys, broker, "--exclude-internal-topics")[1]
    assert without == [line for line in everything if not line.startswith("__")]


def test_nothing_matched_is_one_line(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = _run(capsys, broker, "--topic", "nope")
    assert (code, lines) == (1, [])
    assert err == "kafkapy get-offsets: Could not match any topic-partitions with the specified filters\n"


@pytest.mark.parametrize(("args", "message"), [
    (("--time", "yesterday"), "Malformed time argument yesterday"),
    (("--topic-partitions", "o", "--topic", "o"),
     "--topic-partitions cannot be used with --topic or --partitions"),
    (("--topic-partitions", "o:x"), "Invalid rule specification: o:x"),
    (("--partitions", "1,a"), "--partitions expects a comma separated list of numeric partition ids"),
    (("--topic", "o("), "o( is an invalid regex."),
])
def test_usage_mistakes_are_one_line_and_exit_2(broker: Broker, capsys: pytest.CaptureFixture[str],
                                                args: tuple[str, ...], message: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["get-offsets", "--bootstrap-server", broker.bootstrap_servers, *args])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and message in err and err.count("\n") == 1


def test_a_broker_too_old_for_max_timestamp_skips_each_partition(capsys: pytest.CaptureFixture[str]) -> None:
    with Broker({"kafka.version": "2.8"}) as old:  # ListOffsets up to v6; max-timestamp is v7
        old.seed({"t": {"partitions": 2, "records": [{"value": "v"}]}})
        code, lines, err = _run(capsys, old, "--topic", "t", "--time", "max-timestamp")
        assert (code, lines) == (1, [])
        assert err.splitlines() == [
            f"Skip getting offsets for topic-partition t-{p} due to error: {old.bootstrap_servers} serves "
            "ListOffsets only up to v6; v7+ needed" for p in (0, 1)]
        assert _run(capsys, old, "--topic", "t", "--time", "latest")[0] == 0


@given(st.lists(st.text(alphabet="ab.*:-,0123456789()", max_size=8), min_size=1, max_size=3))
def test_any_rule_text_is_rules_or_one_usage_error(specs: list[str]) -> None:
    try:
        rules = parse_rules(",".join(specs))
    except argparse.ArgumentTypeError:
        return
    assert rules and all(isinstance(rule.topic, Regex) for rule in rules)


@given(st.integers(0, 50), st.integers(0, 50), st.integers(0, 60))
def test_a_range_rule_takes_low_up_to_but_not_high(low: int, high: int, partition: int) -> None:
    (rule,) = parse_rules(f"t:{low}-{high}")
    assert rule.allows("t", partition) == (low <= partition < high)
    assert not rule.allows("tt", partition)
    (single,) = parse_rules(f"t:{low}")
    assert single.allows("t", partition) == (partition == low)


@given(st.integers(-2**63, 2**63 - 1))
def test_every_long_is_a_time(value: int) -> None:
    assert parse_time(str(value)) == value
