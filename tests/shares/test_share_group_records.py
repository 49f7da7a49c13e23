"""A share group as ShareGroup* records and back: whatever sequence of group states is written
as differences (``changes``), through the real __consumer_offsets codec, replaying the log gives
the last state back, and a group written away (tombstones) is gone."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.groups.record_codec import decode_record, encode_record
from kafkapy.groups.records import GroupRecord, ShareGroupMemberMetadataKey, ShareGroupMetadataKey
from kafkapy.shares.group_records import Initialized, Written, changes, records_of, replay
from kafkapy.shares.share_group import ShareGroup, ShareGroupState, ShareMember

TOPICS = [uuid.UUID(int=i) for i in range(1, 4)]
DEADLINE = 1_000


def _assignment() -> st.SearchStrategy[dict[uuid.UUID, frozenset[int]]]:
    return st.dictionaries(st.sampled_from(TOPICS), st.frozensets(st.integers(0, 5), min_size=1), max_size=2)


@st.composite
def groups(draw: st.DrawFn, group_id: str = "g") -> ShareGroup:
    member_ids = draw(st.lists(st.sampled_from(["m1", "m2", "m3", "m4"]), unique=True, max_size=3))
    topics = st.lists(st.sampled_from(["a", "b"]), unique=True, max_size=2).map(tuple)
    racks = st.none() | st.sampled_from(["r1", "r2"])
    members = {m: ShareMember(m, draw(st.integers(0, 50)), draw(topics), draw(racks),
                              draw(st.sampled_from(["c", ""])), "/127.0.0.1", draw(_assignment()), DEADLINE)
               for m in member_ids}
    target = {m: draw(_assignment()) for m in member_ids}
    return ShareGroup(group_id, draw(st.integers(1, 100)), draw(st.integers(0, 100)),
                      ShareGroupState.STABLE if members else ShareGroupState.EMPTY, members, target)


initialized_sets = st.dictionaries(st.sampled_from(TOPICS),
                                   st.tuples(st.just("t"), st.frozensets(st.integers(0, 5), min_size=1)),
                                   max_size=2)


def _through_the_codec(records: list[GroupRecord]) -> list[GroupRecord]:
    return [decode_record(*encode_record(record)) for record in records]


@settings(max_examples=150, deadline=None)
@given(states=st.lists(st.tuples(groups(), initialized_sets), min_size=1, max_size=5), deleted=st.booleans())
def test_replaying_the_written_differences_gives_the_last_state(
        states: list[tuple[ShareGroup, Initialized]], deleted: bool) -> None:
    log: list[GroupRecord] = []
    written: Written = {}
    for group, initialized in states:
        now = records_of(group, initialized)
        log.extend(_through_the_codec(changes(written, now)))
        written = now
    if deleted:
        log.extend(_through_the_codec(changes(written, {})))
        assert replay(log, DEADLINE) == {}
        return
    group, initialized = states[-1]
    (loaded,) = replay(log, DEADLINE).values()
    assert loaded.group == group
    assert loaded.initialized == {t: v for t, v in initialized.items() if v[1]}
    assert loaded.written == written
    assert changes(loaded.written, records_of(loaded.group, loaded.initialized)) == []


def test_tombstones_go_members_first_and_the_epoch_record_last() -> None:
    member = ShareMember("m", 3, ("a",), None, "c", "/h", {}, 0)
    group = ShareGroup("g", 3, 3, ShareGroupState.STABLE, {"m": member}, {"m": {}})
    gone = changes(records_of(group), {})
    assert all(record.value is None for record in gone)
    assert gone[-1].key == ShareGroupMetadataKey("g")
    assert [r.key for r in gone].index(ShareGroupMemberMetadataKey("g", "m")) < len(gone) - 2


def test_a_member_without_metadata_is_a_fragment_and_not_replayed() -> None:
    member = ShareMember("m", 3, ("a",), None, "c", "/h", {TOPICS[0]: frozenset({0})}, DEADLINE)
    group = ShareGroup("g", 3, 3, ShareGroupState.STABLE, {"m": member}, {"m": {TOPICS[0]: frozenset({0})}})
    records = [r for r in changes({}, records_of(group)) if r.key != ShareGroupMemberMetadataKey("g", "m")]
    (loaded,) = replay(records, DEADLINE).values()
    assert loaded.group.members == {} and loaded.group.target == {}
    assert loaded.group.state is ShareGroupState.EMPTY


def test_the_offsets_formatter_shows_a_share_groups_records() -> None:
    """What `kafkapy consume --formatter offsets` and `dump-log --offsets-decoder` print."""
    from kafkapy.commands.consume import as_coordinator_json
    from kafkapy.protocol.records import Record

    member = ShareMember("m", 4, ("a",), None, "c", "/h", {TOPICS[0]: frozenset({1})}, 0)
    group = ShareGroup("g", 4, 4, ShareGroupState.STABLE, {"m": member}, {"m": {TOPICS[0]: frozenset({1})}})
    printed = [as_coordinator_json("offsets", 0, Record(offset, 1, *encode_record(record)))
               for offset, record in enumerate(changes({}, records_of(group)))]
    assert [p["key"]["type"] for p in printed] == [11, 12, 10, 13, 14]
    assert printed[0]["value"] == {"version": 0, "data": {"epoch": 4, "metadataHash": 0}}
    assert printed[4]["value"]["data"] == {"memberEpoch": 4, "previousMemberEpoch": -1, "state": 0,
                                           "assignedPartitions": [{"topicId": "AAAAAAAAAAAAAAAAAAAAAQ",
                                                                   "partitions": [1]}]}

