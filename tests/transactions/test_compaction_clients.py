"""A compacted topic written by a real transactional producer (confluent-kafka): compaction
removes the aborted transaction's records and keeps each key's last committed value, so even a
read_uncommitted consumer no longer sees what was aborted."""

from __future__ import annotations

import pytest

from kafkapy.embedded import Broker

from .test_transactions_wire import coordinator_ready

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "changelog"


def read_all(bootstrap: str, isolation: str, expected: int) -> list[tuple[bytes, bytes]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{isolation}",
                                         "isolation.level": isolation, "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        seen: list[tuple[bytes, bytes]] = []
        for _ in range(50):
            for message in consumer.consume(num_messages=100, timeout=0.2):
                assert not message.error(), message.error()
                seen.append((message.key(), message.value()))
            if len(seen) >= expected:
                break
        return seen
    finally:
        consumer.close()


def test_compaction_drops_aborted_records_and_keeps_the_last_committed_values() -> None:
    with Broker({"transaction.state.log.num.partitions": 1}) as broker:
        # One batch per segment, so every batch but the last is cleanable at once.
        compacted = {"cleanup.policy": "compact", "segment.bytes": "100"}
        broker.seed({TOPIC: {"partitions": 1, "config": compacted}})
        coordinator_ready(broker)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                             "transactional.id": "changelog-writer", "linger.ms": 0})
        producer.init_transactions(20)
        for values, commit in (([b"a1", b"b1"], True), ([b"a-aborted", b"b-aborted"], False),
                               ([b"a2"], True), ([b"c1"], True)):
            producer.begin_transaction()
            for value in values:
                producer.produce(TOPIC, key=value[:1], value=value, partition=0)
            producer.flush(10)
            (producer.commit_transaction if commit else producer.abort_transaction)(20)
        assert read_all(broker.bootstrap_servers, "read_uncommitted", 6) == [
            (b"a", b"a1"), (b"b", b"b1"), (b"a", b"a-aborted"), (b"b", b"b-aborted"), (b"a", b"a2"),
            (b"c", b"c1")]

        removed = broker.logs.compact()
        assert sum(removed.values()) == 3  # a1 (superseded by a2) and both aborted records
        expected = [(b"b", b"b1"), (b"a", b"a2"), (b"c", b"c1")]
        assert read_all(broker.bootstrap_servers, "read_uncommitted", 3) == expected
        assert read_all(broker.bootstrap_servers, "read_committed", 3) == expected
        assert [(r.key, r.value) for r in broker.records(TOPIC) if not r.is_control] == expected
