"""broker.records, broker.history and wait_for, against what real producers did."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from quick_clients import KAFKA_PYTHON_CLIENT

from kafkapy.client import ClientError, SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.protocol import encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import wait_until

TIMEOUT_S = 20
HISTORY = "kafkapy.observers.RequestHistory"


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker({"observer.class.names": HISTORY, "num.partitions": 2}) as running:
        yield running


def test_records_are_decoded_with_what_only_the_broker_knows(broker: Broker) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                         "linger.ms": 0, "compression.type": "gzip"})
    for i in range(4):
        producer.produce("inspected", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2,
                         headers=[("h", b"%d" % i)], timestamp=1_700_000_000_000 + i)
    assert producer.flush(TIMEOUT_S) == 0
    everything = broker.records("inspected")
    assert [(r.partition, r.offset, r.key, r.value) for r in everything] == [
        (0, 0, b"k0", b"v0"), (0, 1, b"k2", b"v2"), (1, 0, b"k1", b"v1"), (1, 1, b"k3", b"v3")]
    assert [r.headers for r in everything] == [(("h", b"0"),), (("h", b"2"),), (("h", b"1"),), (("h", b"3"),)]
    assert [r.timestamp for r in everything] == [1_700_000_000_000 + i for i in (0, 2, 1, 3)]
    assert len({r.producer_id for r in everything}) == 1 and everything[0].producer_id >= 0
    assert [r.sequence for r in everything] == [0, 1, 0, 1]
    assert not any(r.is_transactional or r.is_control for r in everything)
    assert [r.value for r in broker.records("inspected", partition=1, from_offset=1)] == [b"v3"]
    assert broker.records("inspected", partition=0, from_offset=5) == []
    assert broker.records("no-such-topic") == []


def test_a_partition_the_topic_has_not_is_unknown_topic_or_partition(broker: Broker) -> None:
    """A confluent-kafka producer writes to both partitions of a two-partition topic: asking for
    a third partition's records (or producers) is Kafka's UNKNOWN_TOPIC_OR_PARTITION, where it was
    [] and a test asserting "nothing written to partition 2" passed on a typo. A topic not made yet
    still has no records, so a wait loop can start before the producer."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                         "linger.ms": 0})
    for partition in (0, 1):
        producer.produce("two-partitions", value=b"v%d" % partition, partition=partition)
    assert producer.flush(TIMEOUT_S) == 0
    assert [r.value for r in broker.records("two-partitions", partition=1)] == [b"v1"]
    for missing in (2, -1):
        with pytest.raises(KafkaApiError) as refused:
            broker.records("two-partitions", partition=missing)
        assert refused.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert str(refused.value) == (f"UNKNOWN_TOPIC_OR_PARTITION: no partition two-partitions-{missing}: "
                                      "the topic has 2 partition(s), numbered from 0")
        with pytest.raises(KafkaApiError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            broker.producers("two-partitions", missing)
    assert [view.partition for view in broker.producers("two-partitions", 1)] == [1]
    assert broker.records("not-made-yet", partition=3) == []
    assert broker.producers("not-made-yet", 3) == []


def test_records_below_the_log_start_are_gone_though_their_batch_stays(broker: Broker) -> None:
    """DeleteRecords in the middle of a batch moves the log start, and Kafka serves nothing below
    it; the batch stays in the log whole. records() showed the deleted records at every isolation."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    broker.seed({"trimmed": {"partitions": 1, "records": [{"value": str(i)} for i in range(5)]}})  # one batch
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    [deleted] = admin.delete_records([TopicPartition("trimmed", 0, 3)]).values()
    assert deleted.result(TIMEOUT_S).low_watermark == 3
    for isolation in ("log", "read_uncommitted", "read_committed"):
        assert [r.offset for r in broker.records("trimmed", isolation=isolation)] == [3, 4]
    assert [r.offset for r in broker.records("trimmed", from_offset=4)] == [4]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "trimmed-reader",
                         "auto.offset.reset": "earliest"})
    try:  # what a consumer reads from the start
        consumer.assign([TopicPartition("trimmed", 0)])
        read = [consumer.poll(TIMEOUT_S) for _ in range(2)]
        assert [m.offset() for m in read if m is not None and not m.error()] == [3, 4]
    finally:
        consumer.close()


def test_records_of_a_plain_producer_have_no_producer_id(broker: Broker) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1, enable_idempotence=False,
                             **KAFKA_PYTHON_CLIENT)
    try:
        producer.send("plain", value=b"x", partition=0).get(TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)
    [record] = broker.records("plain")
    assert (record.producer_id, record.sequence, record.key, record.value) == (-1, -1, None, b"x")


def test_history_has_api_version_client_and_error_per_connection(broker: Broker) -> None:
    with SimpleClient(broker.bootstrap_servers, client_id="historian") as client:
        client.request(ApiKey.METADATA, 9, {"topics": [{"name": "seen"}], "allow_auto_topic_creation": True})
        client.request(ApiKey.CREATE_TOPICS, 5, {"topics": [{"name": "bad name!", "num_partitions": 1,
                                                            "replication_factor": 1}], "timeout_ms": 1000})
        client.request(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "topics": [
            {"name": "never-created", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    mine = broker.history(client_id="historian")
    assert [(e.api_key, e.api_version, e.correlation_id) for e in mine] == [
        (ApiKey.METADATA, 9, 1), (ApiKey.CREATE_TOPICS, 5, 2), (ApiKey.LIST_OFFSETS, 5, 3)]
    assert len({e.connection for e in mine}) == 1
    assert all(e.answered for e in mine)
    # the first non-zero code inside: topics' (being auto-created; an invalid name), a partition's
    assert [e.error_code for e in mine] == [ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert broker.history(connection=mine[0].connection) == mine
    assert "ListOffsets v5 #3: UNKNOWN_TOPIC_OR_PARTITION" in str(mine[-1])


def test_history_is_bounded() -> None:
    with Broker({"observer.class.names": HISTORY, "request.history.size": 3}) as small, \
            SimpleClient(small.bootstrap_servers) as client:
        for _ in range(5):
            client.request(ApiKey.METADATA, 9, {"topics": []})
        assert [e.correlation_id for e in small.history()] == [3, 4, 5]


def test_history_needs_its_observer_and_says_how_to_turn_it_on() -> None:
    with Broker() as plain, pytest.raises(RuntimeError) as refused:
        plain.history()
    assert str(refused.value) == (
        "the broker keeps no request history: start it with Broker(history=True) (or "
        "observer.class.names=kafkapy.observers.RequestHistory, which kafkapy serve takes as "
        "--override observer.class.names=kafkapy.observers.RequestHistory); kafkapy's pytest fixtures "
        "keep one")


def test_history_true_keeps_it_on_every_broker_of_a_cluster() -> None:
    """Broker(history=True), no observer named: a confluent-kafka producer's Produce requests are in
    the history of the broker that leads each partition, and an observer the test names is kept."""
    from confluent_kafka import Producer

    with Broker({"observer.class.names": "kafkapy.observers.AuditObserver"}, brokers=2,
                history=True) as cluster:
        cluster.seed({"kept": {"partitions": 2, "replication_factor": 1}})
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "client.id": "recorded",
                             "linger.ms": 0})
        for partition in (0, 1):
            producer.produce("kept", b"v", partition=partition)
        assert producer.flush(TIMEOUT_S) == 0
        produces = [sum(e.api_key == ApiKey.PRODUCE for e in member.history(client_id="recorded"))
                    for member in cluster.brokers]
        assert produces == [1, 1]  # one partition led by each
        # The cluster's own history is every broker's, merged by arrival (it was broker 0's alone).
        whole = cluster.history(client_id="recorded")
        assert sum(e.api_key == ApiKey.PRODUCE for e in whole) == 2
        assert len(whole) == sum(len(member.history(client_id="recorded")) for member in cluster.brokers)
        assert [e.time for e in whole] == sorted(e.time for e in whole)
        assert all(member.config["observer.class.names"] == ["kafkapy.observers.AuditObserver",
                                                            "kafkapy.observers.RequestHistory"]
                   for member in cluster.brokers)


def test_wait_for_sync_returns_what_it_saw_or_says_what_it_saw(broker: Broker) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, **KAFKA_PYTHON_CLIENT)
    try:
        producer.send("awaited", value=b"a", partition=0)
        got = broker.wait_for_sync(lambda: broker.records("awaited"), lambda records: len(records) == 1)
    finally:
        producer.close(TIMEOUT_S)
    assert [r.value for r in got] == [b"a"]
    with pytest.raises(AssertionError, match=r"two records; last seen: \[StoredRecord\(.*value=b'a'"):
        broker.wait_for_sync(lambda: broker.records("awaited"), lambda records: len(records) == 2,
                             timeout=0.05, what="two records")  # the message, not the wait, is the point
    # unnamed, a lambda is named by where it is: the message said "waiting for <lambda>"
    with pytest.raises(AssertionError, match=r"for the lambda at test_inspection\.py:\d+; last seen: \["):
        broker.wait_for_sync(lambda: broker.records("awaited"), lambda records: not records, timeout=0.05)
    with pytest.raises(AssertionError, match=r"waiting for the lambda at test_inspection\.py:\d+$"):
        wait_until(lambda: False, timeout=0.05)
    with pytest.raises(AssertionError, match=r"waiting for is_file$"):
        wait_until(Path("/no/such/file").is_file, timeout=0.05)


def test_wait_for_on_the_brokers_own_loop() -> None:
    async def run() -> None:
        async with Broker({"observer.class.names": HISTORY}) as local:
            host, port = local.bootstrap_servers.split(":")
            _reader, writer = await asyncio.open_connection(host, int(port))
            frame = encode_request(ApiKey.METADATA, 9, 7, "async", {"topics": []})
            writer.write(len(frame).to_bytes(4, "big") + frame)
            seen = await local.wait_for(lambda: local.history(client_id="async"),
                                        lambda entries: entries and entries[0].answered, timeout=5)
            assert seen[0].correlation_id == 7
            with pytest.raises(AssertionError, match=r"timed out after 0\.1 s waiting for nothing"):
                await local.wait_for(lambda: [], timeout=0.1, what="nothing")
            writer.close()
    asyncio.run(run())


def test_history_keeps_requests_the_broker_does_not_serve() -> None:
    with Broker({"observer.class.names": HISTORY, "kafka.version": "2.8"}) as old, \
            SimpleClient(old.bootstrap_servers, client_id="too-new") as client:
        with pytest.raises(ClientError, match="does not serve"):
            client.request(ApiKey.PRODUCE, 12, {"acks": 1, "timeout_ms": 1, "topic_data": []})
        client.request(ApiKey.METADATA, 9, {"topics": []})
        entries = old.history()
    assert [(e.api_key, e.api_version, e.client_id, e.error_code) for e in entries] == [
        (ApiKey.PRODUCE, 12, None, ErrorCode.UNSUPPORTED_VERSION),
        (ApiKey.METADATA, 9, "too-new", ErrorCode.NONE)]
    assert entries[0].connection == "127.0.0.1"  # KIP-388 tells an observer no more of it
