"""Retention and compaction at run time, with real clients: the scheduler, the on-demand helpers
(``broker.logs``), and topic config changes reaching existing logs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kafkapy import VirtualClock
from kafkapy.embedded import Broker
from kafkapy.testing import wait_until

TIMEOUT_S = 20
HOUR_MS = 60 * 60 * 1000


def create_topic(broker: Broker, name: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    [future] = admin.create_topics([NewTopic(name, 1, 1, config=config)]).values()
    future.result(timeout=TIMEOUT_S)


def produce(broker: Broker, topic: str, records: list[tuple[bytes, bytes | None]],
            timestamp_ms: int = 0) -> None:
    """One record per request (linger 0, one in flight), so small segment.bytes rolls often."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0,
                         "max.in.flight.requests.per.connection": 1, "enable.idempotence": False})
    for key, value in records:
        producer.produce(topic, value, key, timestamp=timestamp_ms)
        producer.flush(TIMEOUT_S)
    assert producer.flush(TIMEOUT_S) == 0


def consume_all(broker: Broker, topic: str, start: int) -> list[Any]:
    """Everything from ``start`` (an offset the log may no longer hold) to the end."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, start)])
    messages = []
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            if message.error().code() == message.error()._PARTITION_EOF:
                break
            raise AssertionError(message.error())
        messages.append(message)
    consumer.close()
    return messages


def low_watermark(broker: Broker, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "watermarks"})
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
        return int(low)
    finally:
        consumer.close()


def test_retention_moves_earliest_and_a_consumer_resets_as_kafka() -> None:
    with Broker({"log.retention.check.interval.ms": HOUR_MS}) as broker:
        create_topic(broker, "old", {"segment.bytes": "100", "retention.ms": str(HOUR_MS)})
        produce(broker, "old", [(b"k%d" % i, b"value-%d" % i) for i in range(6)],
                timestamp_ms=int(time.time() * 1000) - 2 * HOUR_MS)
        assert low_watermark(broker, "old") == 0
        removed = broker.logs.apply_retention()
        assert removed and removed[("old", 0)] >= 1
        # Every segment is past retention.ms, the active one too: Kafka rolls it and deletes all.
        assert low_watermark(broker, "old") == 6
        assert broker.logs.apply_retention() == {}  # nothing left to remove
        # A consumer asking for offset 0 is out of range: auto.offset.reset=earliest moves it to
        # the new log start, as against Kafka; a new record lands at offset 6.
        produce(broker, "old", [(b"k", b"after")])
        messages = consume_all(broker, "old", 0)
        assert [(m.offset(), m.value()) for m in messages] == [(6, b"after")]


def set_topic_config(broker: Broker, topic: str, name: str, value: str) -> None:
    """An IncrementalAlterConfigs SET through confluent-kafka's admin client."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
    [future] = admin.incremental_alter_configs(
        [ConfigResource("TOPIC", topic, incremental_configs=[entry])]).values()
    future.result(timeout=TIMEOUT_S)


def committed_consumer_position(broker: Broker, topic: str, group: str, reset: str) -> tuple[int, list[Any]]:
    """A kafka-python group consumer resuming from its committed offset: its position, and what it read."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             auto_offset_reset=reset, enable_auto_commit=False,
                             request_timeout_ms=TIMEOUT_S * 1000, consumer_timeout_ms=2000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        read = list(consumer)
        return consumer.position(tp), read
    finally:
        consumer.close()


def commit_offset(broker: Broker, topic: str, group: str, offset: int) -> None:
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             enable_auto_commit=False, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close()


@pytest.mark.parametrize("backend", ["memory", "log.dirs"])
def test_retention_ms_1_empties_the_partition_and_consumers_reset(tmp_path: Path, backend: str) -> None:
    """Kafka's deleteSegments takes the active segment too (after a roll): retention.ms=1 set
    through the admin API empties the partition, log start = log end; a consumer's committed
    offset is out of range and auto.offset.reset decides, as against Kafka. With log.dirs the
    empty log and its start offset survive a restart."""
    settings: dict[str, Any] = {"log.retention.check.interval.ms": HOUR_MS}
    if backend == "log.dirs":
        settings.update({"log.dirs": str(tmp_path), "broker.id": 1})
    with Broker(settings) as broker:
        create_topic(broker, "gone", {"segment.bytes": "200"})
        produce(broker, "gone", [(b"k%d" % i, b"value-%d" % i) for i in range(8)])
        commit_offset(broker, "gone", "early", 3)
        assert broker.logs.apply_retention() == {}  # 7 days by default
        set_topic_config(broker, "gone", "retention.ms", "1")
        time.sleep(0.01)  # the records' timestamps are now more than 1 ms old
        removed = wait_until(broker.logs.apply_retention, what="retention.ms=1 applied")
        assert removed[("gone", 0)] >= 2  # the rolled segments and the active one
        assert low_watermark(broker, "gone") == 8
        assert consume_all(broker, "gone", 0) == []  # offset 0: reset to earliest, which is the end
        # The committed offset 3 is out of range: auto.offset.reset moves the consumer on.
        assert committed_consumer_position(broker, "gone", "early", "earliest") == (8, [])
        assert committed_consumer_position(broker, "gone", "early", "latest") == (8, [])
    if backend == "memory":
        return
    with Broker(settings) as broker:  # the topic is kept (the store's metadata.log.dir), its config too
        assert broker.store.entity_config("topics/gone") == {"segment.bytes": "200", "retention.ms": "1"}
        assert low_watermark(broker, "gone") == 8
        produce(broker, "gone", [(b"k", b"after")])
        assert [(m.offset(), m.value()) for m in consume_all(broker, "gone", 0)] == [(8, b"after")]


def test_young_records_survive_retention() -> None:
    with Broker() as broker:
        create_topic(broker, "young", {"segment.bytes": "100", "retention.ms": str(HOUR_MS)})
        produce(broker, "young", [(b"k", b"v%d" % i) for i in range(4)])
        assert broker.logs.apply_retention() == {}
        assert low_watermark(broker, "young") == 0


def test_compacted_topic_keeps_the_latest_value_per_key() -> None:
    with Broker() as broker:
        create_topic(broker, "table", {"segment.bytes": "100", "cleanup.policy": "compact"})
        records = [(b"key-%d" % (i % 3), b"value-%d" % i) for i in range(12)]
        produce(broker, "table", records)
        removed = broker.logs.compact()
        assert removed[("table", 0)] > 0
        messages = consume_all(broker, "table", 0)
        assert len(messages) == len(records) - removed[("table", 0)]
        latest = {key: value for key, value in records}
        assert {m.key(): m.value() for m in messages} == latest
        # Offsets keep their gaps, and only records a later one overwrote are gone.
        kept = {m.offset() for m in messages}
        for offset, (key, value) in enumerate(records):
            if offset in kept:
                assert messages[[m.offset() for m in messages].index(offset)].value() == value
            else:
                assert key in [k for k, _ in records[offset + 1:]]
        assert broker.logs.compact() == {}


def test_a_tombstone_stays_delete_retention_ms_after_the_cleaning_that_found_it() -> None:
    """KIP-534: however old a tombstone's timestamp, compaction keeps it for delete.retention.ms
    from the cleaning that first kept it, stamping that horizon into its batch; clients read the
    rewritten batch with the records' own timestamps."""
    from kafka import KafkaConsumer, TopicPartition

    day_ms = 24 * HOUR_MS
    with Broker() as broker:
        create_topic(broker, "deletes", {"segment.bytes": "100", "cleanup.policy": "compact"})
        produce(broker, "deletes", [(b"a", b"1"), (b"b", b"1")], timestamp_ms=1_000)
        produce(broker, "deletes", [(b"a", None)], timestamp_ms=2_000)
        produce(broker, "deletes", [(b"c", b"1")], timestamp_ms=3_000)  # the active segment
        now = int(time.time() * 1000)
        assert broker.logs.compact(now) == {("deletes", 0): 1}  # a@0 only: its tombstone stays
        messages = consume_all(broker, "deletes", 0)
        assert [(m.offset(), m.key(), m.value(), m.timestamp()[1]) for m in messages] == [
            (1, b"b", b"1", 1_000), (2, b"a", None, 2_000), (3, b"c", b"1", 3_000)]
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
        consumer.assign([TopicPartition("deletes", 0)])
        consumer.seek(TopicPartition("deletes", 0), 0)
        read: list[tuple[int, bytes | None, int]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(read) < 3 and time.monotonic() < deadline:
            for batch in consumer.poll(500).values():
                read.extend((r.offset, r.value, r.timestamp) for r in batch)
        consumer.close()
        assert read == [(1, b"1", 1_000), (2, None, 2_000), (3, b"1", 3_000)]
        assert broker.logs.compact(now + day_ms - 1) == {}  # a day after that cleaning, not before
        assert broker.logs.compact(now + day_ms) == {("deletes", 0): 1}
        assert [m.offset() for m in consume_all(broker, "deletes", 0)] == [1, 3]


def test_delete_topics_are_not_compacted() -> None:
    with Broker() as broker:
        create_topic(broker, "plain", {"segment.bytes": "100"})
        produce(broker, "plain", [(b"same", b"v%d" % i) for i in range(5)])
        assert broker.logs.compact() == {}
        assert len(consume_all(broker, "plain", 0)) == 5


def test_records_of_a_compact_only_topic_cannot_be_deleted() -> None:
    """DeleteRecords needs delete in cleanup.policy (Kafka's Partition.deleteRecordsOnLeader):
    POLICY_VIOLATION for compact alone, the log start unmoved; compact,delete may."""
    from confluent_kafka import KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    with Broker() as broker:
        create_topic(broker, "table", {"cleanup.policy": "compact"})
        create_topic(broker, "both", {"cleanup.policy": "compact,delete"})
        for topic in ("table", "both"):
            produce(broker, topic, [(b"k%d" % i, b"v") for i in range(3)])
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        asked = [TopicPartition("table", 0, 2), TopicPartition("both", 0, 2)]
        futures = admin.delete_records(asked, request_timeout=TIMEOUT_S)
        with pytest.raises(Exception) as refused:
            futures[asked[0]].result()
        assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION
        assert futures[asked[1]].result().low_watermark == 2
        assert low_watermark(broker, "table") == 0 and low_watermark(broker, "both") == 2


def test_the_scheduler_applies_retention_on_its_interval() -> None:
    with Broker({"log.retention.check.interval.ms": 200}) as broker:
        create_topic(broker, "timed", {"segment.bytes": "100", "retention.ms": str(HOUR_MS)})
        produce(broker, "timed", [(b"k", b"v%d" % i) for i in range(5)],
                timestamp_ms=int(time.time() * 1000) - 2 * HOUR_MS)
        wait_until(lambda: low_watermark(broker, "timed") > 0, what="the retention timer")


def test_the_cleaner_applies_retention_to_compacted_logs_on_its_backoff() -> None:
    """Kafka's retention timer (LogManager.cleanupLogs) leaves compacted logs to the cleaner
    thread, which deletes their old segments every log.cleaner.backoff.ms; with the cleaner
    disabled nothing ever deletes them."""
    settings = {"log.retention.check.interval.ms": 200, "log.cleaner.backoff.ms": HOUR_MS}
    old = int(time.time() * 1000) - 2 * HOUR_MS
    config = {"segment.bytes": "100", "retention.ms": str(HOUR_MS), "cleanup.policy": "compact,delete"}
    with Broker(settings) as broker:
        create_topic(broker, "both", config)
        create_topic(broker, "plain", {"segment.bytes": "100", "retention.ms": str(HOUR_MS)})
        produce(broker, "both", [(b"k%d" % i, b"v") for i in range(5)], timestamp_ms=old)
        produce(broker, "plain", [(b"k%d" % i, b"v") for i in range(5)], timestamp_ms=old)
        wait_until(lambda: low_watermark(broker, "plain") > 0, what="the retention timer")
        time.sleep(0.5)  # two more retention passes
        assert low_watermark(broker, "both") == 0  # not the retention timer's
    with Broker({**settings, "log.cleaner.backoff.ms": 200}) as broker:
        create_topic(broker, "both", config)
        produce(broker, "both", [(b"k%d" % i, b"v") for i in range(5)], timestamp_ms=old)
        wait_until(lambda: low_watermark(broker, "both") > 0, what="the cleaner's retention")


def test_the_cleaner_compacts_dirty_logs_after_its_backoff() -> None:
    with Broker({"log.cleaner.backoff.ms": 200}) as broker:
        create_topic(broker, "cleaned", {"segment.bytes": "100", "cleanup.policy": "compact"})
        produce(broker, "cleaned", [(b"same", b"v%d" % i) for i in range(6)])
        wait_until(lambda: len(consume_all(broker, "cleaned", 0)) < 6, what="the cleaner")


def test_the_cleaner_offset_checkpoint_spares_a_restart_the_cleaning(tmp_path: Path) -> None:
    """cleaner-offset-checkpoint (Kafka's LogCleanerManager): written after each cleaning, read
    back on open, so after a restart the cleaner finds the log clean (dirty ratio 0) instead of
    compacting every compacted log again; new writes make it dirty again."""
    settings = {"log.dirs": str(tmp_path), "broker.id": 1, "log.cleaner.backoff.ms": HOUR_MS}
    checkpoint = tmp_path / "cleaner-offset-checkpoint"
    with Broker(settings) as broker:
        create_topic(broker, "table", {"segment.bytes": "100", "cleanup.policy": "compact"})
        produce(broker, "table", [(b"same", b"v%d" % i) for i in range(8)])
        assert broker.call_on_loop(lambda m: m.compact(only_dirty=True))[("table", 0)] > 0
        cleaned_to = checkpoint_of(checkpoint)[("table", 0)]  # written by the pass, not by a close
        assert 0 < cleaned_to < 8
        assert broker.call_on_loop(lambda m: m.compact(only_dirty=True)) == {}
    with Broker(settings) as broker:  # the topic and its config are kept
        messages = consume_all(broker, "table", 0)  # the log is open, its topic config applied
        assert messages[-1].value() == b"v7"
        assert broker.call_on_loop(lambda m: m.compact(only_dirty=True)) == {}  # clean: nothing to do
        produce(broker, "table", [(b"same", b"w%d" % i) for i in range(8)])
        assert broker.call_on_loop(lambda m: m.compact(only_dirty=True))[("table", 0)] > 0
        assert checkpoint_of(checkpoint)[("table", 0)] > cleaned_to
    # Without the checkpoint, the same log would be cleaned again at once.
    checkpoint.unlink()
    with Broker(settings) as broker:
        consume_all(broker, "table", 0)
        assert not checkpoint.exists()
        broker.call_on_loop(lambda m: m.compact(only_dirty=True))
        assert ("table", 0) in checkpoint_of(checkpoint)  # the whole log was dirty: cleaned again


def test_a_disabled_cleaner_leaves_compacted_topics_alone() -> None:
    with Broker({"log.cleaner.backoff.ms": 100, "log.cleaner.enable": False}) as broker:
        create_topic(broker, "kept", {"segment.bytes": "100", "cleanup.policy": "compact"})
        produce(broker, "kept", [(b"same", b"v%d" % i) for i in range(6)])
        time.sleep(0.5)
        assert len(consume_all(broker, "kept", 0)) == 6


def test_altered_topic_configs_reach_existing_logs() -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    with Broker() as broker:
        create_topic(broker, "altered", {"segment.bytes": "100"})
        produce(broker, "altered", [(b"k", b"v%d" % i) for i in range(5)],
                timestamp_ms=int(time.time() * 1000) - 2 * HOUR_MS)
        assert broker.logs.apply_retention() == {}  # 7 days' retention by default
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        entry = ConfigEntry("retention.ms", str(HOUR_MS), incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource("TOPIC", "altered", incremental_configs=[entry])
        [future] = admin.incremental_alter_configs([resource]).values()
        future.result(timeout=TIMEOUT_S)
        wait_until(lambda: broker.logs.apply_retention() != {}, what="the new retention.ms")
        assert low_watermark(broker, "altered") > 0


@pytest.mark.parametrize("scheduler_ms", [500, None], ids=["flush-scheduler", "no-scheduler"])
def test_the_flush_scheduler_flushes_logs_whose_flush_ms_passed(tmp_path: Path,
                                                                scheduler_ms: int | None) -> None:
    """Kafka's kafka-log-flusher task: every log.flush.scheduler.interval.ms, the logs whose
    flush.ms passed are flushed (the recovery point moves) without another append. Kafka's default
    period is Long.MAX_VALUE: then only appends and rolls flush."""
    clock = VirtualClock()
    settings: dict[str, Any] = {"log.dirs": str(tmp_path), "broker.id": 1}
    if scheduler_ms is not None:
        settings["log.flush.scheduler.interval.ms"] = scheduler_ms
    with Broker(settings, clock=clock) as broker:
        create_topic(broker, "lazy", {"flush.ms": "1000"})
        produce(broker, "lazy", [(b"k", b"v%d" % i) for i in range(3)])
        clock.advance(60)
        recovery = checkpoint_of(tmp_path / "recovery-point-offset-checkpoint")
        assert recovery[("lazy", 0)] == (3 if scheduler_ms else 0)


@pytest.mark.parametrize("key", ["log.retention.check.interval.ms", "log.cleaner.backoff.ms",
                                 "log.flush.offset.checkpoint.interval.ms",
                                 "log.flush.start.offset.checkpoint.interval.ms",
                                 "replica.high.watermark.checkpoint.interval.ms"])
def test_periods_must_be_positive(key: str) -> None:
    from kafkapy.server.config import ConfigError

    with pytest.raises(ConfigError, match=key), Broker({key: 0}):
        pass


def test_the_cleaner_waits_for_min_cleanable_dirty_ratio() -> None:
    """A timer pass compacts a log only once enough of it was written since its last cleaning;
    on demand, compact() cleans whatever it can."""
    import threading

    from kafkapy.dataplane.maintenance import LogMaintenance, dirty_ratio
    from kafkapy.log import LogConfig, LogManager
    from kafkapy.protocol.records import build_record_batch

    logs = LogManager(default_config=LogConfig(segment_bytes=100, cleanup_policy=("compact",)))
    log = logs.get_or_create("t", 0)

    def write(*keys: bytes) -> None:
        for key in keys:
            record = {"key": key, "value": b"value", "timestamp": 1_700_000_000_000}
            log.append(build_record_batch([record], base_offset=log.log_end_offset), now_ms=0)

    maintenance = LogMaintenance(lambda: logs, lock=threading.Lock(), retention_check_interval_ms=1,
                                 cleaner_enable=True, cleaner_backoff_ms=1, clock=time.monotonic)
    write(*(b"k%d" % i for i in range(12)), b"k0", b"filler")  # k0 again, in a rolled segment
    assert len(log.segments) > 10 and dirty_ratio(log, 0) == 1.0
    now = 1_700_000_001_000  # past the records' timestamps (min.compaction.lag.ms 0)
    assert maintenance.compact(now_ms=now, only_dirty=True) == {("t", 0): 1}
    cleaned_to = log.active.base_offset
    write(b"k1", b"filler")  # k1 again: one dirty segment of a dozen
    assert 0 < dirty_ratio(log, cleaned_to) < 0.5
    assert maintenance.compact(now_ms=now, only_dirty=True) == {}
    assert maintenance.compact(now_ms=now)[("t", 0)] > 0


def test_writes_held_back_by_min_compaction_lag_do_not_make_a_log_dirty() -> None:
    """Kafka's ratio counts only the bytes a cleaning may reach: segments younger than
    min.compaction.lag.ms are neither dirty nor in the total, so a timer pass leaves a log whose
    new writes are all that young, instead of cleaning its one old dirty segment."""
    import threading

    from kafkapy.dataplane.maintenance import LogMaintenance, dirty_ratio
    from kafkapy.log import LogConfig, LogManager
    from kafkapy.protocol.records import build_record_batch

    config = LogConfig(segment_bytes=100, cleanup_policy=("compact",), min_compaction_lag_ms=HOUR_MS)
    logs = LogManager(default_config=config)
    log = logs.get_or_create("t", 0)

    def write(timestamp: int, *keys: bytes) -> None:
        for key in keys:
            record = {"key": key, "value": b"value", "timestamp": timestamp}
            log.append(build_record_batch([record], base_offset=log.log_end_offset), now_ms=0)

    maintenance = LogMaintenance(lambda: logs, lock=threading.Lock(), retention_check_interval_ms=1,
                                 cleaner_enable=True, cleaner_backoff_ms=1, clock=time.monotonic)
    now = 1_700_000_000_000
    old, young = now - 2 * HOUR_MS, now - 1_000
    write(old, *(b"k%d" % i for i in range(6)), b"k0", b"filler")
    assert maintenance.compact(now_ms=now, only_dirty=True) == {("t", 0): 1}
    write(old, b"k1")  # one old dirty segment (it rolls at the next write)
    write(young, *(b"n%d" % i for i in range(12)))  # a dozen too young to clean
    assert 0 < dirty_ratio(log, log.cleaned_to, now) < 0.5
    assert maintenance.compact(now_ms=now, only_dirty=True) == {}
    assert maintenance.compact(now_ms=now) == {("t", 0): 1}  # on demand: whatever it can


def test_the_pytest_fixture_brokers_offer_the_helpers(kafka_broker_factory: Any) -> None:
    broker = kafka_broker_factory({"log.cleaner.min.cleanable.ratio": 0.9})
    create_topic(broker, "fixture", {"segment.bytes": "100", "retention.ms": str(HOUR_MS)})
    produce(broker, "fixture", [(b"k", b"v%d" % i) for i in range(4)],
            timestamp_ms=int(time.time() * 1000) - 2 * HOUR_MS)
    assert broker.logs.apply_retention()[("fixture", 0)] >= 1
    assert broker.logs.compact() == {}


def test_brokers_sharing_in_memory_logs_each_clean_only_the_partitions_they_lead() -> None:
    from kafkapy.store import MemoryStore

    store = MemoryStore()
    with Broker({"broker.id": 1}, store=store) as first, Broker({"broker.id": 2}, store=store) as second:
        store.create_topic("shared", {0: (1, 2), 1: (2, 1)},
                           config={"segment.bytes": "100", "retention.ms": str(HOUR_MS)})
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": first.bootstrap_servers, "linger.ms": 0,
                             "max.in.flight.requests.per.connection": 1})
        old = int(time.time() * 1000) - 2 * HOUR_MS
        for i in range(8):
            producer.produce("shared", b"v%d" % i, b"k", partition=i % 2, timestamp=old)
            producer.flush(TIMEOUT_S)
        assert producer.flush(TIMEOUT_S) == 0
        assert set(first.logs.apply_retention()) == {("shared", 0)}
        assert set(second.logs.apply_retention()) == {("shared", 1)}


def test_a_failed_pass_does_not_stop_the_timer() -> None:
    import asyncio
    import threading

    from kafkapy.dataplane.maintenance import LogMaintenance
    from kafkapy.log import LogManager

    calls: list[int] = []
    logs = LogManager()

    def flaky() -> LogManager:
        calls.append(len(calls))
        if len(calls) == 1:
            raise OSError("disk gone for a moment")
        return logs

    async def run() -> None:
        loop = asyncio.get_running_loop()
        maintenance = LogMaintenance(flaky, lock=threading.Lock(), retention_check_interval_ms=10,
                                     cleaner_enable=False, cleaner_backoff_ms=10, clock=loop.time)
        maintenance.start(loop)
        await asyncio.sleep(0.2)
        maintenance.stop()
        count = len(calls)
        await asyncio.sleep(0.05)
        assert len(calls) == count  # stopped means stopped

    asyncio.run(run())
    assert len(calls) >= 3


def checkpoint_of(path: Path) -> dict[tuple[str, int], int]:
    from kafkapy.log.checkpoint import read_offsets

    return read_offsets(path)


def test_checkpoints_are_written_on_kafkas_timers(tmp_path: Path) -> None:
    """recovery-point-offset-checkpoint every log.flush.offset.checkpoint.interval.ms,
    log-start-offset-checkpoint every log.flush.start.offset.checkpoint.interval.ms and
    replication-offset-checkpoint every replica.high.watermark.checkpoint.interval.ms (Kafka's
    defaults: 60 s, 60 s, 5 s), on the broker's clock: no clean shutdown needed."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    clock = VirtualClock()
    settings = {"log.dirs": str(tmp_path), "broker.id": 1, "log.flush.interval.messages": 1,
                "log.retention.check.interval.ms": HOUR_MS}
    with Broker(settings, clock=clock) as broker:
        create_topic(broker, "ticks", {})
        produce(broker, "ticks", [(b"k", b"v%d" % i) for i in range(5)])
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        [future] = admin.delete_records([TopicPartition("ticks", 0, 2)]).values()
        assert future.result(timeout=TIMEOUT_S).low_watermark == 2
        recovery = tmp_path / "recovery-point-offset-checkpoint"
        log_start = tmp_path / "log-start-offset-checkpoint"
        high_watermarks = tmp_path / "replication-offset-checkpoint"
        assert ("ticks", 0) not in checkpoint_of(recovery)  # nothing written before its timer
        clock.advance(5)
        assert checkpoint_of(high_watermarks)[("ticks", 0)] == 5
        assert ("ticks", 0) not in checkpoint_of(recovery) | checkpoint_of(log_start)
        clock.advance(55)
        assert checkpoint_of(recovery)[("ticks", 0)] == 5  # flushed per message, checkpointed now
        assert checkpoint_of(log_start)[("ticks", 0)] == 2
        produce(broker, "ticks", [(b"k", b"later")])
        clock.advance(59)
        assert checkpoint_of(recovery)[("ticks", 0)] == 5  # not yet a period since the last write
        clock.advance(1)
        assert checkpoint_of(recovery)[("ticks", 0)] == 6



@pytest.mark.parametrize("log_dirs", [False, True], ids=["memory", "log-dirs"])
def test_the_periodic_cleaner_cleans_on_its_own_thread_and_swaps_in_on_the_loop(
        tmp_path: Path, log_dirs: bool) -> None:
    """With a real clock, the cleaner's pass (every log.cleaner.backoff.ms) plans on the loop,
    cleans on the kafkapy-log-cleaner thread and swaps the result in on the loop
    (kafkapy.log.cleaning), while a producer keeps appending: every key's latest value is read
    back, nothing appended during the cleaning is lost, and the cleaner offset is checkpointed."""
    import threading

    settings: dict[str, Any] = {"log.cleaner.backoff.ms": 100}
    if log_dirs:
        settings.update({"log.dirs": str(tmp_path), "broker.id": 1})
    with Broker(settings) as broker:
        create_topic(broker, "table", {"segment.bytes": "200", "cleanup.policy": "compact",
                                       "min.cleanable.dirty.ratio": "0.01"})
        records = [(b"key-%d" % (i % 4), b"value-%d" % i) for i in range(60)]
        produce(broker, "table", records)
        from kafkapy.dataplane import DataPlaneModule

        assert broker.runtime is not None
        [module] = [m for m in broker.runtime.modules if isinstance(m, DataPlaneModule)]
        log = module.partitions.logs.get("table", 0)
        assert log is not None
        wait_until(lambda: log.cleaned_to > 0, timeout=TIMEOUT_S, what="the periodic cleaner's cleaning")
        assert any(thread.name.startswith("kafkapy-log-cleaner") for thread in threading.enumerate())
        later = [(b"key-%d" % (i % 4), b"later-%d" % i) for i in range(8)]
        produce(broker, "table", later)
        messages = consume_all(broker, "table", 0)
        assert len(messages) < len(records) + len(later)  # cleaned
        assert {m.key(): m.value() for m in messages} == dict(records + later)
        if log_dirs:
            wait_until(lambda: ("table", 0) in checkpoint_of(tmp_path / "cleaner-offset-checkpoint"),
                       timeout=TIMEOUT_S, what="the cleaner offset checkpointed")
