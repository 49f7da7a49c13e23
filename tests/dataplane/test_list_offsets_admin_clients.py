"""kafka-python's KafkaAdminClient.list_partition_offsets against the partitions' leaders, as a
user asks it: the earliest, the latest, the latest stable (read_committed) and the max-timestamp
offsets, offsets by timestamp, and the local and tiered specs, routed to each leader of a
three-broker cluster. The answers are Kafka's (Partition.fetchOffsetForTimestamp): read_committed
sees nothing at or past the last stable offset, so a timestamp whose first match is in an open
transaction finds no offset; -5 (latest tiered) without tiered storage is offset -1; under
LogAppendTime the max-timestamp offset is the newest batch's first record."""

from __future__ import annotations

from collections.abc import Iterator

import confluent_kafka
import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic, OffsetSpec
from kafka.protocol.consumer.offsets import IsolationLevel
from kafka.structs import OffsetAndTimestamp
from quick_clients import RDKAFKA_CLIENT, warm_transaction_coordinator

from kafkapy.embedded import Broker

TIMEOUT_S = 20
TOPIC = "prices"
COMMITTED = IsolationLevel.READ_COMMITTED
NONE_FOUND = OffsetAndTimestamp(-1, -1, None)


@pytest.fixture
def cluster() -> Iterator[Broker]:
    with Broker({"broker.id": 1}, brokers=3) as running:
        yield running


@pytest.fixture
def admin(cluster: Broker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers,
                              request_timeout_ms=TIMEOUT_S * 1000)
    client.create_topics([NewTopic(TOPIC, 3, 3)])
    client.wait_for_topics([TOPIC], timeout_ms=TIMEOUT_S * 1000)
    yield client
    client.close()


def produce(producer: confluent_kafka.Producer, partition: int, timestamps: list[int]) -> None:
    for timestamp in timestamps:
        producer.produce(TOPIC, value=b"v", partition=partition, timestamp=timestamp)
    assert producer.flush(TIMEOUT_S) == 0


def test_offsets_by_spec_and_timestamp_from_each_leader(cluster: Broker, admin: KafkaAdminClient) -> None:
    plain = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, **RDKAFKA_CLIENT})
    for partition in range(3):
        produce(plain, partition, [1000 * (partition + 1) + i for i in range(4)])
    leaders = {p["partition_index"]: p["leader_id"] for p in admin.describe_topics([TOPIC])[0]["partitions"]}
    assert set(leaders.values()) == {1, 2, 3}  # one leader each: three ListOffsets requests

    tps = [TopicPartition(TOPIC, p) for p in range(3)]
    assert {tp.partition: found.offset for tp, found in admin.list_partition_offsets(
        dict.fromkeys(tps, OffsetSpec.LATEST)).items()} == {0: 4, 1: 4, 2: 4}
    newest = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.MAX_TIMESTAMP))
    assert {tp.partition: (found.offset, found.timestamp) for tp, found in newest.items()} == {
        0: (3, 1003), 1: (3, 2003), 2: (3, 3003)}
    at = admin.list_partition_offsets({tps[0]: 1002, tps[1]: 0, tps[2]: 9999})
    assert at == {tps[0]: OffsetAndTimestamp(2, 1002, 0), tps[1]: OffsetAndTimestamp(0, 2000, 0),
                  tps[2]: NONE_FOUND}

    admin.delete_records({tps[0]: 2})
    specs = admin.list_partition_offsets({tps[0]: OffsetSpec.EARLIEST, tps[1]: OffsetSpec.EARLIEST_LOCAL,
                                          tps[2]: OffsetSpec.LATEST_TIERED})
    assert specs == {tps[0]: OffsetAndTimestamp(2, -1, 0), tps[1]: OffsetAndTimestamp(0, -1, 0),
                     tps[2]: NONE_FOUND}  # no tiered storage: -1 (Kafka's UnifiedLog)


def test_read_committed_offsets_stop_at_an_open_transaction(cluster: Broker, admin: KafkaAdminClient) -> None:
    warm_transaction_coordinator(cluster.bootstrap_servers)
    plain = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, **RDKAFKA_CLIENT})
    transactional = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                              **RDKAFKA_CLIENT, "transactional.id": "pricing"})
    transactional.init_transactions(TIMEOUT_S)
    produce(plain, 0, [5000, 5001])                  # offsets 0, 1
    transactional.begin_transaction()
    produce(transactional, 0, [9000])                # offset 2: open, the last stable offset
    produce(plain, 0, [6000])                        # offset 3
    tp = TopicPartition(TOPIC, 0)

    def offsets(spec: int, level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED) -> tuple[int, int]:
        found = admin.list_partition_offsets({tp: spec}, isolation_level=level)[tp]
        return found.offset, found.timestamp

    assert offsets(OffsetSpec.LATEST) == (4, -1)
    assert offsets(OffsetSpec.LATEST, COMMITTED) == (2, -1)
    assert offsets(OffsetSpec.MAX_TIMESTAMP) == (2, 9000)
    assert offsets(OffsetSpec.MAX_TIMESTAMP, COMMITTED) == (-1, -1)
    assert offsets(5001, COMMITTED) == (1, 5001)
    assert offsets(5500, COMMITTED) == (-1, -1)  # its first match, offset 2, is past the stable offset
    transactional.commit_transaction(TIMEOUT_S)
    assert offsets(OffsetSpec.LATEST, COMMITTED) == (5, -1)  # the commit marker is offset 4
    assert offsets(5500, COMMITTED) == (2, 9000)


def test_max_timestamp_under_log_append_time_is_the_newest_batchs_first_record(cluster: Broker) -> None:
    """KIP-734 on a LogAppendTime topic: every record of a batch bears the batch's append time, so
    Kafka's RecordBatch.offsetOfMaxTimestamp answers the first record of the newest batch."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        stamped = NewTopic("stamped", 1, 1, topic_configs={"message.timestamp.type": "LogAppendTime"})
        admin.create_topics([stamped])
        admin.wait_for_topics(["stamped"], timeout_ms=TIMEOUT_S * 1000)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=50)
        producer.send("stamped", b"first", partition=0)
        producer.flush(TIMEOUT_S)
        sent = [producer.send("stamped", value, partition=0) for value in (b"a", b"b", b"c")]
        producer.flush(TIMEOUT_S)
        [first, *_] = [future.get(TIMEOUT_S) for future in sent]
        producer.close()
        tp = TopicPartition("stamped", 0)
        found = admin.list_partition_offsets({tp: OffsetSpec.MAX_TIMESTAMP})[tp]
    finally:
        admin.close()
    assert first.offset == 1  # one batch of three records, offsets 1-3
    assert (found.offset, found.timestamp) == (1, first.timestamp)
