"""OffsetsTopicLog against a model: appends, clock moves and compactions in any order, and after each
step replay agrees with the list of everything appended.

* replay yields a subsequence of what was appended to the partition, in order (compaction only
  removes records);
* folding replay (later records win, a tombstone removes its key) gives the model's fold: the
  state a coordinator rebuilds never changes through compaction, whether tombstones were still
  kept or already dropped after delete.retention.ms;
* with no compaction yet, replay is exactly what was appended.

The logs are the data plane's own (Partitions over an in-memory LogManager) with tiny segments, so
segments roll and compaction has something to do.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkapy.dataplane.partitions import LogHome, Partitions
from kafkapy.groups.offsets_log import OffsetsTopicLog
from kafkapy.groups.partitioning import OFFSETS_TOPIC
from kafkapy.groups.records import (
    GroupKey,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecord,
    GroupValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kafkapy.log import LogConfig, LogManager
from kafkapy.server.services import ClusterView
from kafkapy.store.base import BrokerRegistration, TopicInfo

BROKER = 1
PARTITIONS = 2
DELETE_RETENTION_MS = 1_000
T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=300, cleanup_policy=frozenset({"compact"}),
                   delete_retention_ms=DELETE_RETENTION_MS)

groups = st.sampled_from(["alpha", "beta", "gamma"])


def records_of(group: str) -> st.SearchStrategy[list[GroupRecord]]:
    commit = st.builds(OffsetCommitValue, st.integers(0, 1000), st.just(0), st.just(""), st.just(T0))
    metadata = st.builds(GroupMetadataValue, st.just("consumer"), st.integers(0, 9), st.just("range"),
                         st.none(), st.just(T0))
    one = st.one_of(
        st.builds(GroupRecord,
                  st.builds(OffsetCommitKey, st.just(group), st.sampled_from("xy"), st.integers(0, 2)),
                  st.none() | commit),
        st.builds(GroupRecord, st.just(GroupMetadataKey(group)), st.none() | metadata))
    return st.lists(one, min_size=1, max_size=3)


def fold(records: list[GroupRecord]) -> dict[GroupKey, GroupValue]:
    state: dict[GroupKey, GroupValue] = {}
    for record in records:
        if record.value is None:
            state.pop(record.key, None)
        else:
            state[record.key] = record.value
    return state


def is_subsequence(part: list[Any], whole: list[Any]) -> bool:
    remaining = iter(whole)
    return all(any(item == candidate for candidate in remaining) for item in part)


class OffsetsTopicModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        cluster = ClusterView()
        cluster.brokers = [BrokerRegistration(BROKER, ())]
        cluster.topics = {OFFSETS_TOPIC: TopicInfo(OFFSETS_TOPIC, uuid.uuid4(),
                                                   {p: (BROKER,) for p in range(PARTITIONS)})}
        home = LogHome(LogManager(default_config=CONFIG), producer_id_expiration_ms=60_000)
        self.partitions = Partitions(home, cluster, lambda: BROKER, lambda topic: CONFIG)
        self.now = T0
        self.log = OffsetsTopicLog(self.partitions, PARTITIONS, clock_ms=lambda: self.now)
        self.appended: dict[int, list[GroupRecord]] = {p: [] for p in range(PARTITIONS)}
        self.compacted = False
        self.loop = asyncio.new_event_loop()

    def teardown(self) -> None:
        self.loop.close()

    @rule(data=st.data(), group=groups)
    def append(self, data: st.DataObject, group: str) -> None:
        records = data.draw(records_of(group))
        self.loop.run_until_complete(self.log.append(group, records))
        self.appended[self.log.partition_for(group)].extend(records)

    @rule(ms=st.integers(1, 2 * DELETE_RETENTION_MS))
    def time_passes(self, ms: int) -> None:
        self.now += ms

    @rule()
    def compact(self) -> None:
        removed = sum(self.partitions.leader_log(OFFSETS_TOPIC, partition).compact(self.now)
                      for partition in range(PARTITIONS))
        event("compaction removed records" if removed else "compaction removed nothing")
        self.compacted = True

    @invariant()
    def replay_agrees_with_what_was_appended(self) -> None:
        for partition, appended in self.appended.items():
            replayed = list(self.log.replay(partition))
            if not self.compacted:
                assert replayed == appended
            assert is_subsequence(replayed, appended)
            assert fold(replayed) == fold(appended)
            if self.compacted and any(r.value is None for r in appended) and \
                    not any(r.value is None for r in replayed):
                event("every tombstone dropped")


OffsetsTopicModel.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_offsets_topic_log_against_its_model = OffsetsTopicModel.TestCase
