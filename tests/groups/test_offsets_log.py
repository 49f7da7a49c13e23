"""OffsetsTopicLog over a real broker's data plane: what is appended replays, across a restart with
log.dirs too, in Kafka's batch and record layout; compaction keeps each key's latest record and
drops tombstones after delete.retention.ms; errors are the coordinator's."""

from __future__ import annotations

import asyncio
import json
import struct
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kafkapy.dataplane.module import DataPlaneModule
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.offsets_log import OffsetsTopicLog, offsets_topic_configs
from kafkapy.groups.partitioning import OFFSETS_TOPIC
from kafkapy.groups.record_codec import GroupRecordError, encode_record
from kafkapy.groups.records import (
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecord,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    TopicPartitions,
)
from kafkapy.log import LogConfig
from kafkapy.protocol.records import RecordBatch, Records, build_record_batch
from kafkapy.server.services import PARTITION_LOGS, PartitionLogsProvider
from kafkapy.store.memory import MemoryStore

T = TypeVar("T")
PARTITIONS = 3
DAY_MS = 24 * 60 * 60 * 1000


def commit(group: str, topic: str, partition: int, offset: int, at: int = 1_700_000_000_000) -> GroupRecord:
    return GroupRecord(OffsetCommitKey(group, topic, partition),
                       OffsetCommitValue(offset=offset, leader_epoch=0, metadata="", commit_timestamp=at))


def group_metadata(group: str, generation: int) -> GroupRecord:
    member = MemberMetadata("m-1", None, "client", "/127.0.0.1", 60_000, 45_000, b"sub", b"assignment")
    return GroupRecord(GroupMetadataKey(group), GroupMetadataValue("consumer", generation, "range", "m-1",
                                                                   1_700_000_000_000, (member,)))


def run(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(scenario())


@asynccontextmanager
async def broker_with_offsets_topic(config: dict[str, Any], store: MemoryStore,
                                    topic_config: dict[str, str] | None = None,
                                    assignment: dict[int, tuple[int, ...]] | None = None,
                                    ) -> AsyncIterator[tuple[Broker, OffsetsTopicLog]]:
    """A broker on this loop, __consumer_offsets created (compacted) unless it exists, and the
    OffsetsTopicLog over the partition logs its data plane provides."""
    broker = await Broker(config, store=store).start()
    try:
        assert broker.runtime is not None
        if OFFSETS_TOPIC not in store.topics():
            leaders = assignment or {p: (broker.broker_id,) for p in range(PARTITIONS)}
            configs = {**offsets_topic_configs(), **(topic_config or {})}
            store.create_topic(OFFSETS_TOPIC, leaders, config=configs)
        # Back once the topics view holds the topic and the configs module its compact policy.
        deadline = time.monotonic() + 5
        while OFFSETS_TOPIC not in broker.runtime.cluster.topics \
                or not dataplane(broker).log_config(OFFSETS_TOPIC).compacts:
            assert time.monotonic() < deadline, "the broker never saw __consumer_offsets"
            await asyncio.sleep(0.01)
        provider = next(m for m in broker.runtime.modules if PARTITION_LOGS in m.provides)
        assert isinstance(provider, PartitionLogsProvider)
        yield broker, OffsetsTopicLog(provider.partition_logs(), PARTITIONS)
    finally:
        await broker.stop()


def dataplane(broker: Broker) -> DataPlaneModule:
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, DataPlaneModule))


def test_the_dataplane_provides_its_partition_logs() -> None:
    assert PARTITION_LOGS in DataPlaneModule.provides


def test_the_topic_configs_are_kafkas_and_valid_here() -> None:
    configs = offsets_topic_configs()
    assert configs == {"cleanup.policy": "compact", "compression.type": "producer",
                       "segment.bytes": "104857600"}
    config = LogConfig.from_topic_config(configs, {})
    assert config.compacts and config.segment_bytes == 100 * 1024 * 1024


def test_appended_records_replay_in_order_per_partition() -> None:
    async def scenario() -> None:
        async with broker_with_offsets_topic({}, MemoryStore()) as (_, log):
            first = [group_metadata("alpha", 1), commit("alpha", "t", 0, 10), commit("alpha", "t", 1, 20)]
            second = [commit("alpha", "t", 0, 11), GroupRecord(OffsetCommitKey("alpha", "t", 1), None)]
            await log.append("alpha", first)
            await log.append("alpha", second)
            await log.append("alpha", [])  # nothing: no empty batch
            other = next(g for g in (f"g{i}" for i in range(100))
                         if log.partition_for(g) != log.partition_for("alpha"))
            await log.append(other, [commit(other, "t", 0, 1)])
            assert list(log.replay(log.partition_for("alpha"))) == first + second
            assert list(log.replay(log.partition_for(other))) == [commit(other, "t", 0, 1)]
    run(scenario)


def test_one_append_is_one_batch_as_kafkas_coordinator_writes_it() -> None:
    async def scenario() -> None:
        async with broker_with_offsets_topic({}, MemoryStore()) as (broker, log):
            records = [group_metadata("g", 1), commit("g", "t", 0, 5)]
            await log.append("g", records)
            partition = log.partition_for("g")
            stored = dataplane(broker).partitions.leader_log(OFFSETS_TOPIC, partition)
            [chunk] = stored.read(0, 1 << 20).chunks
            [batch] = list(Records(chunk).batches(strict=True))
            assert isinstance(batch, RecordBatch)
            assert (batch.base_offset, batch.last_offset, batch.magic) == (0, 1, 2)
            assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
            assert batch.compression.name.lower() == "none" and not batch.is_transactional
            assert [(r.key, r.value) for r in batch.records()] == [encode_record(r) for r in records]
    run(scenario)


def test_replay_after_a_restart_with_log_dirs_gives_back_what_was_appended(tmp_path: Path) -> None:
    store = MemoryStore()
    config = {"log.dirs": str(tmp_path), "broker.id": 1}
    assignment = ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(uuid.UUID(int=7), (0, 1)),))
    appended = [group_metadata("g", 1), commit("g", "orders", 0, 42), commit("g", "orders", 1, 7),
                GroupRecord(OffsetCommitKey("g", "orders", 1), None), group_metadata("g", 2),
                GroupRecord(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(epoch=4)),
                GroupRecord(ConsumerGroupTargetAssignmentMemberKey("g", "m"), assignment)]

    async def write() -> int:
        async with broker_with_offsets_topic(config, store) as (_, log):
            for record in appended:
                await log.append("g", [record])
            partition = log.partition_for("g")
            # In the file once append returns (written, not buffered: a kill -9 would keep it),
            # before any clean shutdown has flushed or closed anything.
            [segment] = (tmp_path / f"{OFFSETS_TOPIC}-{partition}").glob("*.log")
            on_disk = segment.read_bytes()
            assert all(encode_record(record)[0] in on_disk for record in appended)
            return partition

    async def read(partition: int) -> list[GroupRecord]:
        async with broker_with_offsets_topic(config, store) as (_, log):
            return list(log.replay(partition))

    partition = run(write)
    assert list((tmp_path / f"{OFFSETS_TOPIC}-{partition}").glob("*.log")), "no segment on disk"
    assert run(lambda: read(partition)) == appended


def test_compaction_keeps_the_latest_record_per_key_and_drops_old_tombstones() -> None:
    async def scenario() -> None:
        topic_config = {"segment.bytes": "200", "delete.retention.ms": str(DAY_MS)}
        async with broker_with_offsets_topic({}, MemoryStore(), topic_config) as (broker, log):
            for offset in range(10):
                await log.append("g", [commit("g", "t", 0, offset), commit("g", "t", 1, 100 + offset)])
            await log.append("g", [GroupRecord(OffsetCommitKey("g", "t", 1), None)])
            await log.append("g", [group_metadata("g", 3)])  # rolls the tombstone's segment
            partition = log.partition_for("g")
            now = int(time.time() * 1000)
            removed = dataplane(broker).maintenance.compact(now)
            assert removed.get((OFFSETS_TOPIC, partition), 0) > 0
            latest = list(log.replay(partition))
            assert latest == [commit("g", "t", 0, 9), GroupRecord(OffsetCommitKey("g", "t", 1), None),
                              group_metadata("g", 3)]
            # past delete.retention.ms the tombstone goes too
            dataplane(broker).maintenance.compact(now + 2 * DAY_MS)
            assert list(log.replay(partition)) == [commit("g", "t", 0, 9), group_metadata("g", 3)]
    run(scenario)


def test_replay_skips_control_batches_and_unknown_record_types_and_names_a_corrupt_record() -> None:
    async def scenario() -> None:
        async with broker_with_offsets_topic({}, MemoryStore()) as (broker, log):
            partition = log.partition_for("g")
            stored = dataplane(broker).partitions.leader_log(OFFSETS_TOPIC, partition)
            await log.append("g", [commit("g", "t", 0, 1)])
            marker = build_record_batch([{"key": b"\x00\x00\x00\x00", "value": b"\x00\x00\x00\x00\x00\x00"}],
                                        base_offset=stored.log_end_offset, is_control=True, producer_id=5,
                                        producer_epoch=0, is_transactional=True)
            stored.append(marker)
            share = build_record_batch([{"key": struct.pack(">h", 9) + b"\x00\x01g", "value": b"\x00\x00"}],
                                       base_offset=stored.log_end_offset)
            stored.append(share)
            await log.append("g", [commit("g", "t", 0, 2)])
            assert list(log.replay(partition)) == [commit("g", "t", 0, 1), commit("g", "t", 0, 2)]
            corrupt = build_record_batch([{"key": b"\x00\x01\x00\x09cut", "value": None}],
                                         base_offset=stored.log_end_offset)
            stored.append(corrupt)
            with pytest.raises(GroupRecordError, match=f"{OFFSETS_TOPIC}-{partition} offset 4"):
                list(log.replay(partition))
    run(scenario)


def test_errors_are_the_coordinators() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        async with broker_with_offsets_topic({}, store, assignment={0: (0,), 1: (99,), 2: (99,)}) as (_, log):
            group = next(g for g in (f"g{i}" for i in range(100)) if log.partition_for(g) == 1)
            with pytest.raises(KafkaApiError) as caught:
                await log.append(group, [commit(group, "t", 0, 1)])
            assert caught.value.code is ErrorCode.NOT_COORDINATOR
            with pytest.raises(KafkaApiError) as caught:
                list(log.replay(2))
            assert caught.value.code is ErrorCode.NOT_COORDINATOR
        broker = await Broker({}, store=MemoryStore()).start()
        try:
            assert broker.runtime is not None
            provider = next(m for m in broker.runtime.modules if isinstance(m, PartitionLogsProvider))
            missing = OffsetsTopicLog(provider.partition_logs(), PARTITIONS)
            with pytest.raises(KafkaApiError) as caught:
                await missing.append("g", [commit("g", "t", 0, 1)])
            assert caught.value.code is ErrorCode.COORDINATOR_NOT_AVAILABLE
        finally:
            await broker.stop()
    run(scenario)


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        OffsetsTopicLog(None, 0)  # type: ignore[arg-type]


def test_clients_read_what_was_appended_and_the_cli_decodes_it() -> None:
    """Fetch serves the partition like any other: confluent-kafka reads our batch, and
    ``kafkapy consume --formatter offsets`` prints Kafka's JSON of each record."""
    async def scenario() -> None:
        async with broker_with_offsets_topic({}, MemoryStore()) as (broker, log):
            records = [group_metadata("g", 1), commit("g", "orders", 2, 42),
                       GroupRecord(OffsetCommitKey("g", "orders", 3), None)]
            await log.append("g", records)
            partition = log.partition_for("g")
            cli = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kafkapy.cli", "consume", "-b", broker.bootstrap_servers,
                "-t", OFFSETS_TOPIC, "-p", str(partition), "-e", "--formatter", "offsets",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await asyncio.wait_for(cli.communicate(), 60)
            assert cli.returncode == 0, err.decode()
            lines = [json.loads(line) for line in out.splitlines()]
            assert [line["offset"] for line in lines] == [0, 1, 2]
            assert lines[1]["key"] == {"type": 1, "data": {"group": "g", "topic": "orders", "partition": 2}}
            assert lines[1]["value"] == {"version": 3, "data": {
                "offset": 42, "leaderEpoch": 0, "metadata": "", "commitTimestamp": 1_700_000_000_000}}
            assert lines[0]["key"]["type"] == 2
            assert lines[0]["value"]["data"]["members"][0]["memberId"] == "m-1"
            assert lines[2]["value"] is None
            read = await asyncio.to_thread(read_with_confluent, broker.bootstrap_servers, partition,
                                           len(records))
            assert read == [encode_record(r) for r in records]
    run(scenario)


def read_with_confluent(bootstrap: str, partition: int,
                        count: int) -> list[tuple[bytes | None, bytes | None]]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                                         "enable.auto.commit": False, "log_level": 0})
    try:
        start = confluent_kafka.TopicPartition(OFFSETS_TOPIC, partition, confluent_kafka.OFFSET_BEGINNING)
        consumer.assign([start])
        found: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while len(found) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            found.append((message.key(), message.value()))
        return found
    finally:
        consumer.close()
