"""Log dirs an older kafkapy wrote (partition logs, no kafkapy-metadata files) are adopted.

An older kafkapy kept its topics in memory and its records under log.dirs: that is a broker
given a MemoryStore, which the tests below write the dirs with (its logs take each run's topic
ids, and meta.properties names no cluster). Started again with today's store, which starts
empty, the broker makes their topics from the dirs (kafkapy.server.adoption), with the ids the
logs hold, so real clients find their records, committed offsets and transactions.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafkapy import Broker
from kafkapy.log.manager import LogManager
from kafkapy.log.partition_metadata import kafka_uuid, read_partition_metadata
from kafkapy.server.config import ConfigError
from kafkapy.store.memory import MemoryStore

TIMEOUT_S = 20
ADOPTION_LOG = "kafkapy.server.adoption"


def older_kafkapy(config: dict[str, Any], **kwargs: Any) -> Broker:
    """A broker as kafkapy ran before it kept its metadata: topics in memory, records on disk."""
    return Broker(config, store=MemoryStore(), **kwargs)


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(TIMEOUT_S) == 0


def consume(bootstrap: str, topics: list[str], count: int, group: str, **settings: Any) -> list[bytes]:
    """``count`` values read by ``group`` from where it committed (else the beginning)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, **settings})
    consumer.subscribe(topics)
    values: list[bytes] = []
    try:
        while len(values) < count:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, f"read {values}, then nothing"
            assert message.error() is None, message.error()
            values.append(message.value())
        consumer.commit(message, asynchronous=False)
    finally:
        consumer.close()
    return values


def committed(bootstrap: str, group: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        (found,) = consumer.committed([TopicPartition(topic, partition)], timeout=TIMEOUT_S)
    finally:
        consumer.close()
    return int(found.offset)


def adoption_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == ADOPTION_LOG]


def test_topics_records_offsets_and_transactions_of_an_older_kafkapy_are_served(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = {"log.dirs": str(tmp_path), "broker.id": 1}
    with older_kafkapy(config) as old:
        produce(old.bootstrap_servers, "orders", [b"o0", b"o1", b"o2", b"o3"])
        assert consume(old.bootstrap_servers, ["orders"], 3, "billing") == [b"o0", b"o1", b"o2"]
        producer = Producer({"bootstrap.servers": old.bootstrap_servers, "transactional.id": "payer"})
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce("payments", b"p0", partition=0)
        producer.produce("payments", b"p1", partition=0)
        producer.commit_transaction(TIMEOUT_S)
        old_ids = {name: info.topic_id for name, info in old.store.topics().items()}  # type: ignore[union-attr]
    assert sorted(old_ids) == ["__consumer_offsets", "__transaction_state", "orders", "payments"]
    assert not list(tmp_path.glob("kafkapy-metadata.*"))

    caplog.set_level(logging.INFO, logger=ADOPTION_LOG)
    with Broker(config) as broker:
        assert broker.store is not None
        topics = broker.store.topics()
        assert {name: info.topic_id for name, info in topics.items()} == old_ids
        assert topics["orders"].partitions == {0: (1,)}
        assert len(topics["__consumer_offsets"].partitions) == 50  # offsets.topic.num.partitions
        assert broker.store.entity_config("topics/__consumer_offsets")["cleanup.policy"] == "compact"
        assert broker.store.entity_config("topics/orders") == {}
        assert committed(broker.bootstrap_servers, "billing", "orders", 0) == 3
        assert consume(broker.bootstrap_servers, ["orders"], 1, "billing") == [b"o3"]
        assert consume(broker.bootstrap_servers, ["payments"], 2, "auditor",
                       **{"isolation.level": "read_committed"}) == [b"p0", b"p1"]
        payer = broker.transaction("payer")
        assert payer is not None and payer.state == "CompleteCommit"
    lines = adoption_lines(caplog)
    assert [level for level, _ in lines] == [logging.INFO] * 4 + [logging.WARNING]
    assert lines[2][1] == f"Adopted topic orders from its logs: id {kafka_uuid(old_ids['orders'])}, " \
                          f"partition count 1, on brokers [1]"
    assert lines[-1][1].startswith("4 topics adopted from log dirs")

    caplog.clear()
    with Broker(config) as broker:  # kept now: nothing to adopt
        assert broker.store is not None
        assert {name: info.topic_id for name, info in broker.store.topics().items()} == old_ids
        assert committed(broker.bootstrap_servers, "billing", "orders", 0) == 4
    assert adoption_lines(caplog) == []


def write_logs(log_dir: Path, broker_id: int, partitions: dict[tuple[str, int], uuid.UUID | None]) -> None:
    """Empty partition logs as kafkapy's log code leaves them (None: no partition.metadata)."""
    logs = LogManager([log_dir], broker_id=broker_id)
    for (topic, partition), topic_id in partitions.items():
        logs.get_or_create(topic, partition, topic_id=topic_id)
    logs.close()


def test_gaps_logs_without_ids_and_what_is_left(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    kept, first, second = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    write_logs(tmp_path, 1, {("kept", 0): kept, ("kept", 2): kept, ("pre-ids", 0): None,
                             ("bad+name", 0): uuid.uuid4(), ("split", 0): first, ("split", 1): second,
                             ("huge", 2_000_000_000): uuid.uuid4()})
    caplog.set_level(logging.INFO, logger=ADOPTION_LOG)
    with Broker({"log.dirs": str(tmp_path), "broker.id": 1}) as broker:
        assert broker.store is not None
        topics = broker.store.topics()
        assert sorted(topics) == ["kept", "pre-ids"]
        assert topics["kept"].topic_id == kept
        assert topics["kept"].partitions == {0: (1,), 1: (1,), 2: (1,)}  # the gap made again
        produce(broker.bootstrap_servers, "pre-ids", [b"x"])
        # the new id is written into the log, as Kafka writes partition.metadata on learning it
        assert read_partition_metadata(tmp_path / "pre-ids-0") == topics["pre-ids"].topic_id
        produce(broker.bootstrap_servers, "kept", [b"y"], partition=1)
    (*_, (level, summary)) = adoption_lines(caplog)
    assert level == logging.WARNING
    assert summary.startswith("2 topics adopted from log dirs")
    assert f"; left: {tmp_path / 'bad+name-0'}: Topic name is invalid: 'bad+name' contains one or more " \
           f"characters other than ASCII alphanumerics, '.', '_' and '-'" in summary
    ids = ", ".join(sorted(kafka_uuid(i) for i in (first, second)))
    assert f"; left: topic split: its partitions hold different topic ids ({ids})" in summary
    assert "; left: topic huge: its partition 2000000000 would make more than 9999 partitions (Kafka's " \
           "controller makes no more at once)" in summary
    # Left, with their records: set aside as Kafka's KRaft broker sets aside a log whose topic id
    # the metadata does not hold (renamed -stray), so a topic made later under the name is served.
    (split,) = tmp_path.glob("split-1.*-stray")
    assert read_partition_metadata(split) == second


def test_a_log_dir_of_another_broker_refuses_the_start_before_anything_is_adopted(tmp_path: Path) -> None:
    write_logs(tmp_path, 1, {("orders", 0): uuid.uuid4()})
    with pytest.raises(ConfigError) as refused:
        with Broker({"log.dirs": str(tmp_path), "broker.id": 2}):
            pass
    assert str(refused.value) == (f"log.dirs {tmp_path}: {tmp_path / 'meta.properties'} is broker 1's, "
                                  f"not 2's: to serve its logs set broker.id=1; for a new broker, empty the "
                                  f"directory")
    with Broker({"log.dirs": str(tmp_path), "broker.id": 1}) as broker:  # the store stayed empty
        assert broker.store is not None and sorted(broker.store.topics()) == ["orders"]


def test_a_store_that_holds_metadata_adopts_nothing(tmp_path: Path) -> None:
    config = {"log.dirs": str(tmp_path), "broker.id": 1}
    with Broker(config) as broker:
        assert broker.store is not None
        broker.store.create_topic("made", {0: (1,)})
    write_logs(tmp_path, 1, {("stray", 0): uuid.uuid4()})  # not the first start: not adopted
    with Broker(config) as broker:
        assert broker.store is not None and sorted(broker.store.topics()) == ["made"]


def test_an_in_process_cluster_adopts_each_brokers_partitions(tmp_path: Path) -> None:
    config = {"log.dirs": str(tmp_path), "auto.leader.rebalance.enable": False}
    with older_kafkapy(config, brokers=2) as old:
        assert old.store is not None
        old.store.create_topic("orders", {0: (0, 1), 1: (1, 0)})
        produce(old.bootstrap_servers, "orders", [b"a0", b"a1", b"a2"], partition=0)
        produce(old.bootstrap_servers, "orders", [b"b0"], partition=1)
        old.move_leader("orders", 0, to=1)  # the records stay on broker 0 (no replication)
        produce(old.bootstrap_servers, "orders", [b"c0"], partition=0)
        orders = old.store.topics()["orders"].topic_id
    assert {p.name for p in (tmp_path / "broker-0").iterdir() if p.name.startswith("orders")} == {"orders-0"}
    assert {p.name for p in (tmp_path / "broker-1").iterdir() if p.name.startswith("orders")} == \
        {"orders-0", "orders-1"}
    with Broker(config, brokers=2) as cluster:
        assert cluster.store is not None
        adopted = cluster.store.topics()["orders"]
        assert adopted.topic_id == orders
        # each partition on the brokers holding it, the one holding the most first (its leader)
        assert adopted.partitions == {0: (0, 1), 1: (1,)}
        served = consume(cluster.bootstrap_servers, ["orders"], 4, "reader")
        assert sorted(served) == [b"a0", b"a1", b"a2", b"b0"]  # c0 stays on broker 1's copy, unread
