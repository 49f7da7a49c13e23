"""The __consumer_offsets record codec: byte-exact with Kafka's layouts, round-trips every record
kind at every value version, and answers garbage with GroupRecordError alone."""

from __future__ import annotations

import json
import struct
import uuid
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.groups import record_codec
from kafkapy.groups import records as r
from kafkapy.groups.record_codec import (
    GroupRecordError,
    UnknownRecordType,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
    kind_of,
    record_json,
)
from kafkapy.protocol.specs import FieldSpec

# --- strategies ---------------------------------------------------------------------------------

text = st.text(max_size=12)
int8 = st.integers(-(1 << 7), (1 << 7) - 1)
int32 = st.integers(-(1 << 31), (1 << 31) - 1)
int64 = st.integers(-(1 << 63), (1 << 63) - 1)
uuids = st.uuids()


def tuples(elements: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(elements, max_size=3).map(tuple)


member = st.builds(r.MemberMetadata, text, st.none() | text, text, text, int32, int32, st.binary(max_size=8),
                   st.binary(max_size=8))
topic_partitions = st.builds(r.TopicPartitions, uuids, tuples(int32))
classic = st.builds(r.ClassicMemberMetadata, int32, tuples(st.builds(r.ClassicProtocol, text,
                                                                       st.binary(max_size=8))))

RECORDS: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
    "offset_commit": (st.builds(r.OffsetCommitKey, text, text, int32),
                      st.builds(r.OffsetCommitValue, int64, int32, text, int64, int64)),
    "group_metadata": (st.builds(r.GroupMetadataKey, text),
                       st.builds(r.GroupMetadataValue, text, int32, st.none() | text, st.none() | text, int64,
                                 tuples(member))),
    "consumer_group": (st.builds(r.ConsumerGroupMetadataKey, text),
                       st.builds(r.ConsumerGroupMetadataValue, int32)),
    "partition_metadata": (
        st.builds(r.ConsumerGroupPartitionMetadataKey, text),
        st.builds(r.ConsumerGroupPartitionMetadataValue, tuples(st.builds(
            r.TopicMetadata, uuids, text, int32, tuples(st.builds(r.PartitionRacks, int32, tuples(text))))))),
    "member_metadata": (
        st.builds(r.ConsumerGroupMemberMetadataKey, text, text),
        st.builds(r.ConsumerGroupMemberMetadataValue, st.none() | text, st.none() | text, text, text,
                  tuples(text), st.none() | text, int32, st.none() | text, st.none() | classic)),
    "target_metadata": (st.builds(r.ConsumerGroupTargetAssignmentMetadataKey, text),
                        st.builds(r.ConsumerGroupTargetAssignmentMetadataValue, int32)),
    "target_member": (st.builds(r.ConsumerGroupTargetAssignmentMemberKey, text, text),
                      st.builds(r.ConsumerGroupTargetAssignmentMemberValue, tuples(topic_partitions))),
    "current_assignment": (
        st.builds(r.ConsumerGroupCurrentMemberAssignmentKey, text, text),
        st.builds(r.ConsumerGroupCurrentMemberAssignmentValue, int32, int32, int8, tuples(topic_partitions),
                  tuples(topic_partitions))),
    "share_member_metadata": (
        st.builds(r.ShareGroupMemberMetadataKey, text, text),
        st.builds(r.ShareGroupMemberMetadataValue, st.none() | text, text, text, tuples(text))),
    "share_group": (st.builds(r.ShareGroupMetadataKey, text),
                    st.builds(r.ShareGroupMetadataValue, int32, int64)),
    "share_target_metadata": (st.builds(r.ShareGroupTargetAssignmentMetadataKey, text),
                              st.builds(r.ShareGroupTargetAssignmentMetadataValue, int32)),
    "share_target_member": (st.builds(r.ShareGroupTargetAssignmentMemberKey, text, text),
                            st.builds(r.ShareGroupTargetAssignmentMemberValue, tuples(topic_partitions))),
    "share_current_assignment": (
        st.builds(r.ShareGroupCurrentMemberAssignmentKey, text, text),
        st.builds(r.ShareGroupCurrentMemberAssignmentValue, int32, int32, int8, tuples(topic_partitions))),
    "share_state_partitions": (
        st.builds(r.ShareGroupStatePartitionMetadataKey, text),
        st.builds(r.ShareGroupStatePartitionMetadataValue,
                  tuples(st.builds(r.TopicPartitionsInfo, uuids, text, tuples(int32))),
                  tuples(st.builds(r.TopicPartitionsInfo, uuids, text, tuples(int32))),
                  tuples(st.builds(r.TopicInfo, uuids, text)))),
}


@pytest.mark.parametrize("name", sorted(RECORDS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_record_kind_round_trips_as_kafka_writes_it(name: str, data: st.DataObject) -> None:
    keys, values = RECORDS[name]
    key = data.draw(keys)
    value = data.draw(st.none() | values)
    expected = value
    if isinstance(value, r.OffsetCommitValue):
        if data.draw(st.booleans()):
            value = expected = attrs.evolve(value, expire_timestamp=r.NO_EXPIRE_TIMESTAMP)  # the usual v3
        elif value.expire_timestamp != r.NO_EXPIRE_TIMESTAMP:  # written as v1, which has no leader epoch
            expected = attrs.evolve(value, leader_epoch=-1)
    key_bytes, value_bytes = encode_record(r.GroupRecord(key, value))
    assert decode_record(key_bytes, value_bytes) == r.GroupRecord(key, expected)
    assert (value_bytes is None) == (value is None)


@pytest.mark.parametrize("name", sorted(RECORDS))
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_value_version_re_encodes_byte_for_byte(name: str, data: st.DataObject) -> None:
    keys, values = RECORDS[name]
    key, value = data.draw(keys), data.draw(values)
    record_type = struct.unpack(">h", encode_key(key)[:2])[0]
    spec = kind_of(value).value_spec
    for version in range(spec.valid_versions.low, spec.valid_versions.high + 1):
        encoded = encode_value(value, version)
        assert encoded is not None and struct.unpack(">h", encoded[:2])[0] == version
        decoded = decode_value(record_type, encoded)
        assert decoded is not None and encode_value(decoded, version) == encoded


@given(key=st.binary(max_size=40), value=st.none() | st.binary(max_size=60))
@settings(max_examples=400, deadline=None)
def test_garbage_gives_a_group_record_error_and_nothing_else(key: bytes, value: bytes | None) -> None:
    try:
        decode_record(key, value)
    except GroupRecordError as exc:
        assert "\n" not in str(exc)


# --- byte-exact worked examples, each field spelled out from Kafka's schemas --------------------

def _string(s: str) -> str:
    return struct.pack(">h", len(s)).hex() + s.encode().hex()


def test_offset_commit_key_and_v3_value_bytes() -> None:
    record = r.GroupRecord(r.OffsetCommitKey("my-group", "orders", 7),
                           r.OffsetCommitValue(offset=1234, leader_epoch=5, metadata="",
                                               commit_timestamp=1_700_000_000_000))
    key, value = encode_record(record)
    assert key.hex() == "0001" + _string("my-group") + _string("orders") + "00000007"
    assert value is not None and value.hex() == (
        "0003"                  # value version 3, what Kafka writes without an expiry
        "00000000000004d2"      # offset 1234
        "00000005"              # leader epoch
        "0000"                  # metadata ""
        "0000018bcfe56800")     # commit timestamp 1_700_000_000_000


def test_an_offset_with_an_expiry_is_written_as_v1() -> None:
    value = r.OffsetCommitValue(offset=1, leader_epoch=5, metadata="m", commit_timestamp=2,
                                expire_timestamp=3)
    encoded = encode_value(value)
    assert encoded is not None and encoded.hex() == (
        "0001" "0000000000000001" + _string("m") + "0000000000000002" "0000000000000003")
    # v1 has no leader epoch: it reads back as Kafka's default
    assert decode_value(1, encoded) == attrs.evolve(value, leader_epoch=-1)


def test_group_metadata_v3_bytes() -> None:
    member = r.MemberMetadata(member_id="m-1", group_instance_id="static-1", client_id="cli",
                              client_host="/10.0.0.1", rebalance_timeout_ms=300_000,
                              session_timeout_ms=45_000, subscription=b"\x00\x01", assignment=b"")
    record = r.GroupRecord(r.GroupMetadataKey("g"), r.GroupMetadataValue(
        protocol_type="consumer", generation=2, protocol="range", leader="m-1", current_state_timestamp=-1,
        members=(member,)))
    key, value = encode_record(record)
    assert key.hex() == "0002" + _string("g")
    assert value is not None and value.hex() == (
        "0003" + _string("consumer") + "00000002" + _string("range") + _string("m-1")
        + "ffffffffffffffff"                     # current state timestamp -1
        + "00000001"                             # one member
        + _string("m-1") + _string("static-1") + _string("cli") + _string("/10.0.0.1")
        + "000493e0" "0000afc8"                  # rebalance 300000, session 45000
        + "00000002" "0001" + "00000000")        # subscription (2 bytes), empty assignment
    assert decode_record(key, value) == record


def test_a_tombstone_is_a_null_value() -> None:
    key, value = encode_record(r.GroupRecord(r.GroupMetadataKey("gone"), None))
    assert value is None
    assert decode_record(key, None) == r.GroupRecord(r.GroupMetadataKey("gone"), None)


def test_kip848_member_metadata_bytes_with_its_tagged_classic_metadata() -> None:
    value = r.ConsumerGroupMemberMetadataValue(
        instance_id=None, rack_id="rack-a", client_id="c", client_host="h", subscribed_topic_names=("t",),
        subscribed_topic_regex=None, rebalance_timeout_ms=1000, server_assignor="uniform",
        classic_member_metadata=r.ClassicMemberMetadata(10, (r.ClassicProtocol("range", b"x"),)))
    encoded = encode_value(value)
    assert encoded is not None and encoded.hex() == (
        "0000"                            # value version 0 (flexible)
        "00"                              # instance id: compact null
        "07" + b"rack-a".hex() +          # compact string: length + 1
        "02" + b"c".hex() + "02" + b"h".hex() +
        "02" "02" + b"t".hex() +          # one topic name
        "00"                              # regex null
        "000003e8"                        # rebalance timeout 1000
        "08" + b"uniform".hex() +
        "01" "00" "10"                    # one tagged field: tag 0, 16 bytes
        "01"                              # the nullable struct is present
        "0000000a" "02" "06" + b"range".hex() + "02" + b"x".hex() + "00" "00")  # ..., empty tag sections
    assert decode_value(5, encoded) == value


def test_kip848_current_assignment_bytes() -> None:
    topic = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    key = r.ConsumerGroupCurrentMemberAssignmentKey("g", "m")
    value = r.ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=4, previous_member_epoch=3, state=0,
        assigned_partitions=(r.TopicPartitions(topic, (0, 2)),), partitions_pending_revocation=())
    key_bytes, value_bytes = encode_record(r.GroupRecord(key, value))
    assert key_bytes.hex() == "0008" + _string("g") + _string("m")  # keys are never flexible
    assert value_bytes is not None and value_bytes.hex() == (
        "0000" "00000004" "00000003" "00"
        "02" + topic.hex + "03" "00000000" "00000002" "00"   # one topic, two partitions, no tags
        "01"                                                  # no partitions pending revocation
        "00")


def test_share_group_state_partition_metadata_bytes() -> None:
    """Record type 15, Kafka 4.1's layout: three compact arrays of structs, each with its tags; a
    topic is its id, name and partitions (no timestamp: Kafka's layout never had one)."""
    topic = uuid.UUID(int=7)
    key, value = encode_record(r.GroupRecord(
        r.ShareGroupStatePartitionMetadataKey("g"),
        r.ShareGroupStatePartitionMetadataValue(
            initialized_topics=(r.TopicPartitionsInfo(topic, "t", (0, 1)),),
            deleting_topics=(r.TopicInfo(topic, "t"),))))
    assert key.hex() == "000f" + _string("g")
    assert value is not None and value.hex() == (
        "0000"
        "01"                                                                   # no initializing topics
        "02" + topic.hex + "02" + "74" + "03" "00000000" "00000001" + "00"
        "02" + topic.hex + "02" + "74" + "00"                                  # one deleting topic
        "00")                                                                  # no tagged fields
    assert record_json(key, value)["key"] == {"type": 15, "data": {"groupId": "g"}}


def test_share_group_epoch_record_carries_the_metadata_hash() -> None:
    key, value = encode_record(r.GroupRecord(r.ShareGroupMetadataKey("g"), r.ShareGroupMetadataValue(3, -2)))
    assert key.hex() == "000b" + _string("g")
    assert value is not None and value.hex() == "0000" "00000003" "fffffffffffffffe" "00"


def test_record_types_0_and_1_are_both_offset_commits() -> None:
    key = r.OffsetCommitKey("g", "t", 0)
    encoded = encode_key(key)
    assert decode_key(b"\x00\x00" + encoded[2:]) == key == decode_key(encoded)


# --- clear errors -------------------------------------------------------------------------------

@pytest.mark.parametrize(("record_type", "says"), [(9, "ShareGroupPartitionMetadata"), (16, "0-8, 10-15"),
                                                    (-1, "0-8, 10-15")])
def test_an_unknown_record_type_is_one_clear_error(record_type: int, says: str) -> None:
    with pytest.raises(UnknownRecordType) as caught:
        decode_record(struct.pack(">h", record_type) + b"\x00\x01g", None)
    assert caught.value.record_type == record_type
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_an_unknown_value_version_is_one_clear_error() -> None:
    key = encode_key(r.ConsumerGroupMetadataKey("g"))
    with pytest.raises(GroupRecordError, match="ConsumerGroupMetadataValue has no version 1"):
        decode_record(key, b"\x00\x01\x00\x00\x00\x01\x00")


def test_a_cut_key_names_the_field() -> None:
    with pytest.raises(GroupRecordError, match=r"OffsetCommitKey v1.*group"):
        decode_record(b"\x00\x01\x00\x05ab", None)
    with pytest.raises(GroupRecordError, match="no version"):
        decode_record(b"\x00", None)


def test_the_attrs_values_name_every_spec_field() -> None:
    """A spec field without an attrs counterpart would be lost on decode: hold them in step, nested
    structs included."""
    def check(cls: type[Any], fields: tuple[FieldSpec, ...]) -> None:
        renames = record_codec._RENAMES.get(cls, {})
        by_snake = {f.snake: f for f in fields}
        assert {renames.get(a.name, a.name) for a in attrs.fields(cls)} == set(by_snake), cls.__name__
        for attribute, nested in record_codec._NESTED.get(cls, {}).items():
            inner = by_snake[attribute].fields
            assert inner is not None
            check(nested, inner)

    for kind in record_codec._KINDS:
        check(kind.key_class, kind.key_spec.fields)
        check(kind.value_class, kind.value_spec.fields)


# --- the console formatter's JSON ---------------------------------------------------------------

def test_record_json_is_kafkas_formatter_shape() -> None:
    topic = uuid.UUID(int=1)
    key, value = encode_record(r.GroupRecord(
        r.ConsumerGroupTargetAssignmentMemberKey("g", "m"),
        r.ConsumerGroupTargetAssignmentMemberValue((r.TopicPartitions(topic, (0,)),))))
    # Field names as Kafka's generated JsonConverters write them (FieldSpec.camelCaseName: the spec's
    # name, first letter lower), whatever case the spec file spells them in.
    assert record_json(key, value) == {
        "key": {"type": 7, "data": {"groupId": "g", "memberId": "m"}},
        "value": {"version": 0, "data": {"topicPartitions": [
            {"topicId": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": [0]}]}}}  # Kafka's Uuid.toString
    key, _ = encode_record(r.GroupRecord(r.GroupMetadataKey("g"), None))
    assert record_json(key, None) == {"key": {"type": 2, "data": {"group": "g"}}, "value": None}


def test_the_offsets_formatter_prints_an_error_for_a_record_it_cannot_read() -> None:
    from kafkapy.commands.consume import as_coordinator_json
    from kafkapy.protocol.records import Record

    good = as_coordinator_json("offsets", 3, Record(5, 1, *encode_record(commit_record())))
    assert good["partition"] == 3 and good["offset"] == 5 and good["key"]["type"] == 1
    bad = as_coordinator_json("offsets", 3, Record(6, 1, b"\x00\x63", None))
    assert bad["offset"] == 6 and "record type 99" in bad["error"]
    assert "without a key" in as_coordinator_json("offsets", 3, Record(7, 1, None, b"v"))["error"]


def commit_record() -> r.GroupRecord:
    return r.GroupRecord(r.OffsetCommitKey("g", "t", 0), r.OffsetCommitValue(1, 0, "", 2))


@given(key=st.binary(max_size=40), value=st.none() | st.binary(max_size=60))
@settings(max_examples=200, deadline=None)
def test_record_json_of_garbage_is_a_group_record_error(key: bytes, value: bytes | None) -> None:
    try:
        record_json(key, value)
    except GroupRecordError:
        pass


def test_the_example_decodes_the_records_its_docstring_shows() -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "offsets_record.py"
    lines = [line.strip().rstrip("\\").split() for line in (example.read_text().split('"""')[1]).splitlines()
             if "offsets_record.py" in line or line.strip().startswith("0003")]
    commit_args = lines[0][2:] + lines[1]
    tombstone_args = lines[2][2:]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        # The checkout under test first (a script's own directory, not the cwd, heads its sys.path).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(example.parents[1]), os.environ.get("PYTHONPATH", "")) if p)}
        return subprocess.run([sys.executable, str(example), *args], capture_output=True, text=True,
                              timeout=60, env=env)

    done = run(*commit_args)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout.splitlines()[0])
    assert printed["key"] == {"type": 1, "data": {"group": "my-group", "topic": "orders", "partition": 7}}
    assert printed["value"]["data"]["offset"] == 1234 and printed["value"]["data"]["leaderEpoch"] == 5
    assert json.loads(run(*tombstone_args).stdout.splitlines()[0]) == {
        "key": {"type": 2, "data": {"group": "my-group"}}, "value": None}
    bad = run("zz")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    unknown = run("0063")
    assert unknown.returncode == 1 and "record type 99" in unknown.stderr
