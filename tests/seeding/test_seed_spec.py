"""kafkapy.seeding: the seed shape read and checked (one SeedError for anything wrong, never a
traceback), records placed where the Java client's partitioner would put them, seed files."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.seeding import (
    RecordSeed,
    SeedError,
    TopicSeed,
    load_seed_file,
    parse_seed,
    parse_seed_text,
    placed,
)


def test_a_full_topic_is_read_with_text_as_utf8() -> None:
    [topic] = parse_seed({"orders": {
        "partitions": 3, "replication_factor": 1, "config": {"cleanup.policy": "compact", "flag": True},
        "records": [{"key": "k", "value": "vé", "headers": {"h": "x", "n": None}, "partition": 2,
                     "timestamp": 1700000000000},
                    {"key": None, "value": b"\x00raw", "headers": [["h", "1"], ["h", "2"]]}]}})
    assert topic == TopicSeed("orders", 3, 1, {"cleanup.policy": "compact", "flag": "true"}, (
        RecordSeed(b"k", "vé".encode(), (("h", b"x"), ("n", None)), 2, 1700000000000),
        RecordSeed(None, b"\x00raw", (("h", b"1"), ("h", b"2")), None, None)))


def test_a_bare_topic_takes_the_broker_defaults() -> None:
    assert parse_seed({"empty": None, "also": {}}) == [TopicSeed("empty"), TopicSeed("also")]


@pytest.mark.parametrize(("data", "message"), [
    ([], "seed data must be a mapping"),
    ({"": {}}, "a topic name must be non-empty text"),
    ({"t": []}, "topic 't': expected a mapping"),
    ({"t": {"partitions": 0}}, "topic 't' partitions: expected an integer of at least 1"),
    ({"t": {"partitions": True}}, "expected an integer"),
    ({"t": {"replicas": 3}}, "topic 't': unknown field(s) replicas"),
    ({"t": {"config": ["a"]}}, "config must be a mapping"),
    ({"t": {"records": "abc"}}, "records must be a list"),
    ({"t": {"records": [1]}}, "topic 't' record 0: expected a mapping"),
    ({"t": {"records": [{"val": 1}]}}, "record 0: unknown field(s) val"),
    ({"t": {"records": [{"value": 5}]}}, "record 0 value: expected text, bytes or null, not int"),
    ({"t": {"records": [{"headers": 5}]}}, "headers must be a mapping or a list"),
    ({"t": {"records": [{"headers": {"h": 1}}]}}, "header 'h': expected text, bytes or null"),
    ({"t": {"partitions": 2, "records": [{"partition": 2}]}}, "partition 2 of a topic with 2 partitions"),
    ({"t": {"records": [{"timestamp": -5}]}}, "timestamp: expected an integer of at least 0"),
])
def test_bad_seed_data_is_one_clear_error(data: Any, message: str) -> None:
    with pytest.raises(SeedError) as raised:
        parse_seed(data)
    assert message in str(raised.value)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.binary(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4), max_leaves=12)
_fields = st.sampled_from(["partitions", "replication_factor", "config", "records", "key", "value",
                           "headers", "partition", "timestamp"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=4), st.dictionaries(_fields, _json, max_size=5) | _json, max_size=3))
def test_any_data_gives_topics_or_a_seed_error(data: dict[str, Any]) -> None:
    try:
        topics = parse_seed(data)
    except SeedError:
        return
    assert [t.name for t in topics] == list(data)


# Utils.murmur2 of these keys as Kafka's own UtilsTest states them (Java ints).
JAVA_MURMUR2 = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
                b"a-little-bit-longer-string": -1486304829,
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, b"abc": 479470107}


@pytest.mark.parametrize("partitions", [1, 2, 3, 7, 12])
def test_keyed_records_go_where_the_java_clients_partitioner_puts_them(partitions: int) -> None:
    records = [RecordSeed(key, b"v") for key in JAVA_MURMUR2]
    for partition, there in placed(records, partitions).items():
        for record in there:
            assert record.key is not None
            assert partition == (JAVA_MURMUR2[record.key] & 0x7FFFFFFF) % partitions  # Utils.toPositive


def test_unkeyed_records_rotate_and_explicit_partitions_stay() -> None:
    records = [RecordSeed(None, b"a"), RecordSeed(None, b"b"), RecordSeed(b"k", b"c", partition=0),
               RecordSeed(None, b"d")]
    assert {p: [r.value for r in rs] for p, rs in placed(records, 2).items()} == {0: [b"a", b"c", b"d"],
                                                                                  1: [b"b"]}


def test_seed_files_json_and_their_errors(tmp_path: Path) -> None:
    good = tmp_path / "seed.json"
    good.write_text(json.dumps({"t": {"partitions": 2, "records": [{"value": "v"}]}}))
    assert load_seed_file(good) == [TopicSeed("t", 2, records=(RecordSeed(None, b"v"),))]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SeedError, match=r"bad\.json: not valid JSON"):
        load_seed_file(bad)
    with pytest.raises(SeedError, match="cannot read seed file"):
        load_seed_file(tmp_path / "missing.json")


def test_yaml_seed_files_are_read_with_pyyaml(tmp_path: Path) -> None:
    """PyYAML is in the [test] extras, so this runs in CI."""
    seed = tmp_path / "seed.yaml"
    seed.write_text("t:\n  partitions: 2\n  records:\n    - {key: k, value: v}\n")
    assert load_seed_file(seed) == [TopicSeed("t", 2, records=(RecordSeed(b"k", b"v"),))]


def test_without_pyyaml_a_yaml_seed_file_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An install without PyYAML (its import blocked, as Python does for a None in sys.modules):
    one SeedError saying what to install, and JSON still read."""
    monkeypatch.setitem(sys.modules, "yaml", None)
    seed = tmp_path / "seed.yml"
    seed.write_text("t: {partitions: 1}\n")
    with pytest.raises(SeedError, match=r"seed\.yml: YAML seed files need PyYAML \(pip install pyyaml\)"):
        load_seed_file(seed)
    assert parse_seed_text('{"t": {"partitions": 1}}') == [TopicSeed("t", 1)]


@pytest.mark.parametrize(("raw", "suffix"), [(b"[" * 100_000, ".json"), (b"[" * 100_000, ".yaml"),
                                             (b'{"t": \xff}', ".json")])
def test_a_deeply_nested_or_undecodable_seed_file_is_one_seed_error(tmp_path: Path, raw: bytes,
                                                                    suffix: str) -> None:
    """Each was a RecursionError or UnicodeDecodeError traceback."""
    path = tmp_path / f"seed{suffix}"
    path.write_bytes(raw)
    with pytest.raises(SeedError, match=f"seed.*{suffix}"):
        load_seed_file(path)
