"""A topic's compression.type, as Kafka's LogValidator applies it: a batch whose codec is not the
topic's (unless the topic says ``producer``) is stored rebuilt with the topic's codec, its records,
timestamps and producer fields unchanged; consumers read what was produced. The from-frame path
declines such batches to the plain one, so both paths store the same."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.embedded import Broker
from kafkapy.log.append import recompressed, recompression_target, validate_records
from kafkapy.log.topic_config import LogConfig
from kafkapy.protocol.compression import Compression, compress, compression_of, decompress
from kafkapy.protocol.records import (
    COMPRESSION_MASK,
    V2_ATTRIBUTES_AT,
    V2_HEADER_SIZE,
    RecordBatch,
    Records,
    build_record_batch,
)
from kafkapy.server.fastpaths import FastPaths

TIMEOUT_S = 20.0
# (topic's compression.type, the producer's codec, the codec stored)
CASES = [("gzip", "lz4", Compression.GZIP), ("uncompressed", "snappy", Compression.NONE),
         ("zstd", "none", Compression.ZSTD), ("lz4", "lz4", Compression.LZ4),
         ("producer", "snappy", Compression.SNAPPY)]


def stored_codecs(broker: Broker, topic: str) -> list[int]:
    log = broker._dataplane().partitions.logs.get(topic, 0)
    assert log is not None
    data = b"".join(bytes(chunk) for chunk in log.read(0, 1 << 30).chunks)
    return [batch.attributes & COMPRESSION_MASK for batch in Records(data).batches()]


def consumed(bootstrap: str, topic: str, count: int) -> list[tuple[Any, ...]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[Any, ...]] = []
        deadline = time.monotonic() + 60  # a minute of room on a loaded machine; nothing waits that long
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                got.append((message.key(), message.value(), message.headers(), message.timestamp()[1]))
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("fast_paths", [FastPaths(), FastPaths(from_frame=False)],
                         ids=["from-frame", "plain"])
def test_batches_are_stored_with_the_topics_codec(fast_paths: FastPaths) -> None:
    with Broker(fast_paths=fast_paths) as broker:
        broker.seed({f"t-{i}": {"partitions": 1, "config": {"compression.type": topic_codec}}
                     for i, (topic_codec, _, _) in enumerate(CASES)})
        for i, (_, producer_codec, stored) in enumerate(CASES):
            topic = f"t-{i}"
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20,
                                 "compression.type": producer_codec, "enable.idempotence": True})
            sent = [(b"k%d" % n, b"value-%d " % n * 30, [("h", b"%d" % n)], 1_700_000_000_000 + n)
                    for n in range(12)]
            for key, value, headers, timestamp in sent:
                producer.produce(topic, value, key=key, headers=headers, timestamp=timestamp, partition=0)
            assert producer.flush(TIMEOUT_S) == 0
            assert set(stored_codecs(broker, topic)) == {stored}, (topic, CASES[i])
            assert consumed(broker.bootstrap_servers, topic, len(sent)) == sent
            assert [r.sequence for r in broker.records(topic)] == list(range(len(sent)))


records = st.lists(st.fixed_dictionaries({
    "key": st.none() | st.binary(max_size=20), "value": st.none() | st.binary(max_size=200),
    "headers": st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2),
    "timestamp": st.integers(0, 2**41)}), min_size=1, max_size=20)
codecs = st.sampled_from(list(Compression))


@settings(max_examples=60, deadline=None)
@given(records, codecs, st.sampled_from(["uncompressed", "gzip", "snappy", "lz4", "zstd"]),
       st.booleans(), st.integers(0, 2**20))  # a producer id with sequence -1 is INVALID_RECORD
def test_a_rebuilt_batch_holds_the_same_records_and_producer_fields(
        given_records: list[dict[str, Any]], source: Compression, topic_codec: str, transactional: bool,
        sequence: int) -> None:
    data = bytearray(build_record_batch(given_records, compression=source, producer_id=7, producer_epoch=3,
                                        base_sequence=sequence, is_transactional=transactional))
    config = LogConfig(compression_type=topic_codec)
    plan = validate_records(data, config, now_ms=2**41)
    target = recompression_target(config, data[V2_ATTRIBUTES_AT + 1])
    if target is None:
        assert topic_codec == ("uncompressed" if source is Compression.NONE else source.name.lower())
        return
    rebuilt = recompressed(data, plan, target)
    validate_records(rebuilt, config, now_ms=2**41)  # a valid batch (CRC, counts, sizes)
    before, after = RecordBatch(bytes(data[:plan.size])), RecordBatch(bytes(rebuilt))
    assert after.compression == target
    fields = ("base_offset", "last_offset_delta", "producer_id", "producer_epoch", "base_sequence",
              "is_transactional", "timestamp_type", "base_timestamp", "max_timestamp")
    assert [getattr(after, f) for f in fields] == [getattr(before, f) for f in fields]
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in after.record_list()] == \
        [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in before.record_list()]


LEVEL_CASES = [("gzip", "compression.gzip.level", 1), ("lz4", "compression.lz4.level", 12),
               ("zstd", "compression.zstd.level", 19)]


def _word_salad(count: int) -> list[bytes]:
    """Values that compress differently at different levels (unlike repeated bytes)."""
    words = [b"%x" % (n * 2654435761 % 99991) for n in range(400)]
    return [b" ".join(words[(n * 7 + i * 13) % len(words)] for i in range(25)) for n in range(count)]


def test_a_rebuilt_batch_is_compressed_at_the_topics_level() -> None:
    """KIP-390: ``compression.<codec>.level`` decides how a batch rebuilt for the topic's codec is
    compressed; the default level gives other bytes, so the setting is what made them."""
    with Broker() as broker:
        broker.seed({f"level-{codec}": {"partitions": 1,
                                        "config": {"compression.type": codec, key: str(level)}}
                     for codec, key, level in LEVEL_CASES})
        values = _word_salad(300)
        for codec, _, level in LEVEL_CASES:
            topic = f"level-{codec}"
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 200,
                                 "compression.type": "snappy"})
            for value in values:
                producer.produce(topic, value, partition=0)
            assert producer.flush(TIMEOUT_S) == 0
            log = broker._dataplane().partitions.logs.get(topic, 0)
            assert log is not None
            data = b"".join(bytes(chunk) for chunk in log.read(0, 1 << 30).chunks)
            batches = list(Records(data).batches())
            assert batches and {b.compression for b in batches} == {compression_of(codec)}
            at_default_level = []
            for batch in batches:
                payload = bytes(batch.raw[V2_HEADER_SIZE:])
                inflated = decompress(batch.compression, payload)
                assert payload == compress(batch.compression, inflated, level)
                at_default_level.append(payload == compress(batch.compression, inflated))
            # A batch of a record or two compresses alike at any level; the larger ones do not.
            assert not all(at_default_level)
            assert [r.value for r in broker.records(topic)] == values
