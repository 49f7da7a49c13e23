"""The coordinators' loads read their state partitions ``*.load.buffer.size`` bytes at a time, as
Kafka's loaders do, and a batch larger than the buffer whole (Kafka grows its buffer for it, with
a warning): any buffer size, one byte included, loads what the default loads and what a model of
the writes says (Hypothesis, over the transaction, group and share coordinators' loaders); and the
brokers' keys reach the loaders."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker, _find_module
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.module import GroupsModule
from kafkapy.groups.offsets_log import OffsetsTopicLog
from kafkapy.groups.partitioning import OFFSETS_TOPIC
from kafkapy.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecord,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kafkapy.log import LogManager
from kafkapy.log.base import PartitionLog
from kafkapy.log.producer_state import ProducerStateManager
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.partition_loads import load_batches
from kafkapy.sharestate.coordinator import SHARE_STATE_TOPIC, ShareCoordinator
from kafkapy.sharestate.module import ShareCoordinatorModule
from kafkapy.sharestate.state import StateBatch
from kafkapy.store.memory import MemoryStore
from kafkapy.testing import wait_until
from kafkapy.transactions.metadata import TxnMetadata
from kafkapy.transactions.module import TransactionsModule
from kafkapy.transactions.state import TxnState
from kafkapy.transactions.state_log import TopicStateLog

NOW = 1_700_000_000_000
DEFAULT = 5 * 1024 * 1024  # Kafka's default of the three keys
buffer_sizes = st.one_of(st.integers(1, 600), st.just(DEFAULT))


class Logs:
    """The PartitionLogs the group coordinator's log needs, over a LogManager (one replica)."""

    def __init__(self) -> None:
        self.manager = LogManager()

    def leader_log(self, topic: str, partition: int) -> PartitionLog:
        return self.manager.get_or_create(topic, partition)

    def leader_log_for_acks_all(self, topic: str, partition: int) -> PartitionLog:
        return self.leader_log(topic, partition)

    def leader_epoch(self, topic: str, partition: int) -> int:
        return 0

    def appended(self, topic: str, partition: int) -> None:
        pass

    def producer_state(self, topic: str, partition: int) -> ProducerStateManager:
        raise AssertionError("no transactional commits here")

    def needs_transaction_verification(self, topic: str, partition: int, producer_id: int) -> bool:
        return False

    def storage_failed(self, topic: str, partition: int, exc: OSError) -> KafkaApiError:
        return KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc))

    def is_offline(self, topic: str, partition: int) -> bool:
        return False


def test_a_batch_larger_than_the_buffer_is_read_whole_with_kafkas_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    manager = LogManager()
    state_log = TopicStateLog(manager.get_or_create, lambda: NOW)
    for n in range(3):
        state_log.append(0, f"id-{n}", TxnMetadata(f"id-{n}", n, 0, 60_000, TxnState.EMPTY, NOW))
    source = manager.get_or_create("__transaction_state", 0)
    with caplog.at_level(logging.WARNING):
        batches = list(load_batches(source, 1, what="__transaction_state-0", log=logging.getLogger("t")))
    assert [b.base_offset for b in batches] == [0, 1, 2]
    # the buffer grew once, to the batches' size (they are all as long), as Kafka's does
    assert [r.getMessage() for r in caplog.records] == [
        f"loaded __transaction_state-0 with a buffer larger ({batches[0].size_in_bytes} bytes) than the "
        "configured load buffer size (1 bytes)"]


# (transactional id index, tombstone, producer epoch, partitions in the transaction)
txn_ops = st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.integers(0, 100), st.integers(0, 12)),
                   max_size=40)


@settings(max_examples=60, deadline=None)
@given(txn_ops, buffer_sizes)
def test_transaction_state_loads_the_same_with_any_buffer(ops: list[tuple[int, bool, int, int]],
                                                          buffer: int) -> None:
    manager = LogManager()
    writer = TopicStateLog(manager.get_or_create, lambda: NOW)
    model: dict[str, TxnMetadata] = {}
    for index, tombstone, epoch, partitions in ops:
        transactional_id = f"transactional-{index}"
        value = None if tombstone else TxnMetadata(
            transactional_id, 1000 + index, epoch, 60_000,
            TxnState.ONGOING if partitions else TxnState.EMPTY, NOW, NOW,
            frozenset((f"topic-{n}", n) for n in range(partitions)))
        writer.append(0, transactional_id, value)
        if value is None:
            model.pop(transactional_id, None)
        else:
            model[transactional_id] = value
    loaded = TopicStateLog(manager.get_or_create, lambda: NOW, load_buffer_bytes=buffer).replay(0)
    assert loaded == model


# (group index, offset or a generation for the group's metadata, records in the batch)
group_ops = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10_000), st.integers(1, 6), st.booleans()),
                     max_size=30)


@settings(max_examples=60, deadline=None)
@given(group_ops, buffer_sizes)
def test_consumer_offsets_load_the_same_with_any_buffer(ops: list[tuple[int, int, int, bool]],
                                                        buffer: int) -> None:
    logs = Logs()
    writer = OffsetsTopicLog(logs, 1, clock_ms=lambda: NOW)
    appended: list[GroupRecord] = []

    async def write() -> None:
        for group_index, number, count, metadata in ops:
            group = f"group-{group_index}"
            records = [
                GroupRecord(GroupMetadataKey(group), GroupMetadataValue("consumer", number, "range", "", NOW))
                if metadata and n == 0 else
                GroupRecord(OffsetCommitKey(group, "t", n), OffsetCommitValue(number + n, 0, "m" * n, NOW))
                for n in range(count)]
            await writer.append(group, records)
            appended.extend(records)
    asyncio.run(write())
    reader = OffsetsTopicLog(logs, 1, clock_ms=lambda: NOW, load_buffer_bytes=buffer)
    assert list(reader.replay(0)) == appended


# (what, share-partition, state epoch, start offset, batch length)
share_ops = st.lists(st.tuples(st.sampled_from(["initialize", "write", "delete"]), st.integers(0, 3),
                               st.integers(0, 3), st.integers(0, 50), st.integers(0, 6)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(share_ops, buffer_sizes)
def test_share_state_loads_the_same_with_any_buffer(ops: list[tuple[str, int, int, int, int]],
                                                    buffer: int) -> None:
    manager = LogManager()

    def coordinator(load_buffer_bytes: int = DEFAULT) -> ShareCoordinator:
        return ShareCoordinator(manager.get_or_create, lambda partition: 0, lambda: 1, 3, lambda: NOW,
                                load_buffer_bytes=load_buffer_bytes)
    writer = coordinator()
    for what, index, epoch, start, length in ops:
        key = ("sharers", uuid.UUID(int=9), index)
        try:
            if what == "initialize":
                writer.initialize(key, epoch, start)
            elif what == "write":
                batches = tuple(StateBatch(start + 9 * n, start + 9 * n + length, 2, 1)
                                for n in range(length))
                writer.write(key, epoch, epoch, start, batches)
            else:
                writer.delete(key)
        except KafkaApiError:
            pass  # refused (a stale epoch, say): nothing written
    reader = coordinator(buffer)
    reader.on_election(0, 0)
    assert reader.loaded_partitions() == {0: 0}
    assert reader.shard.states == writer.shard.states


def _module(broker: Broker, kind: type[Any]) -> Any:
    assert broker.runtime is not None
    return _find_module(broker.runtime, kind)


def test_the_brokers_load_buffer_keys_reach_the_three_loaders(tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """State in all three topics, then a restart with every load buffer at one byte: each
    coordinator loads its partition (on election, unasked) reading one batch at a time, and says
    so as Kafka's loaders do."""
    store = MemoryStore()
    settings_ = {"broker.id": 1, "log.dirs": str(tmp_path), "transaction.state.log.num.partitions": 1,
                 "offsets.topic.num.partitions": 1, "share.coordinator.state.topic.num.partitions": 1}
    with Broker(settings_, store=store) as broker:
        broker.seed({"events": {"partitions": 1}})
        with SimpleClient(broker.bootstrap_servers) as client:
            for key_type, key in ((0, "readers"), (1, "writer")):
                assert client.request(ApiKey.FIND_COORDINATOR, 1, {"key": key, "key_type": key_type})[
                    "error_code"] == ErrorCode.NONE
            assert client.request(ApiKey.OFFSET_COMMIT, 2, {
                "group_id": "readers", "generation_id_or_member_epoch": -1, "member_id": "",
                "retention_time_ms": -1, "topics": [{"name": "events", "partitions": [
                    {"partition_index": 0, "committed_offset": 3, "committed_metadata": ""}]}]},
            )["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
        txn = _module(broker, TransactionsModule)
        broker._on_loop(lambda: txn.coordinator.state_log.append(0, "writer", TxnMetadata(
            "writer", 7, 0, 60_000, TxnState.EMPTY, int(time.time() * 1000))))
        shares = _module(broker, ShareCoordinatorModule)
        assert broker._from_thread(shares.ensure_state_topic())
        assert broker.runtime is not None
        topic_id = broker.runtime.cluster.topics["events"].topic_id
        broker._on_loop(lambda: shares.coordinator.initialize(("sharers", topic_id, 0), 1, 0))

    tiny = {"transaction.state.log.load.buffer.size": 1, "offsets.load.buffer.size": 1,
            "share.coordinator.load.buffer.size": 1}
    with caplog.at_level(logging.WARNING), Broker({**settings_, **tiny}, store=store) as broker:
        txn, groups = _module(broker, TransactionsModule), _module(broker, GroupsModule)
        shares = _module(broker, ShareCoordinatorModule)
        def loaded() -> tuple[object, ...]:
            return (txn.coordinator.loaded_partitions(), groups.loaded_partitions(),
                    shares.coordinator.loaded_partitions())
        wait_until(lambda: broker._on_loop(loaded) == ({0: 0}, [0], {0: 0}), 10, "the three loads")
        group = broker.group("readers")
        assert group is not None and group.committed() == {("events", 0): 3}
        assert [t.transactional_id for t in broker.transactions()] == ["writer"]
    grown = {r.getMessage().split(" with ")[0] for r in caplog.records
             if "load buffer size (1 bytes)" in r.getMessage()}
    assert grown == {f"loaded {t}-0" for t in ("__transaction_state", OFFSETS_TOPIC, SHARE_STATE_TOPIC)}
