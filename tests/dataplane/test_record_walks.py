"""A Produce batch of very many tiny records, over the wire: its record walk (a million records in
670 bytes of zstd) is checked in slices between which the broker serves every other connection,
and it still gets Kafka's verdict; the answers of its own connection keep their order, and the
partition's appends theirs (docs/log-append.md, "The record walk is sliced"). So is a batch of
one record that inflates to hundreds of MB: it is inflated in slices ("Inflation is sliced").

No client sends such a batch, so the batches are built here (benchmarks/record_walks.py's
builders): a valid v2 header around the records."""

from __future__ import annotations

import select
import struct
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from benchmarks.record_walks import batch_of, bomb_records, tiny_records, zstd_zeros_batch
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.log.append import MAX_RECORD_ERRORS
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.compression import MAX_INFLATED_BYTES, Compression

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket

# Enough records that their walk (about 0.7 us a record) outlasts what the test does meanwhile on a
# loaded machine by a wide margin: the race it reads is the walk against those requests. The test's
# thread shares the GIL with the broker's loop, which lets it go between slices
# (kafkapy/server/slices.py); without that, this test failed three runs in five.
_RECORDS = 4_000_000


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1}) as b:
        assert b.store is not None and b.runtime is not None
        b.store.create_topic("walks", {0: (1,), 1: (1,)}, config={"max.message.bytes": "2000000"})
        while "walks" not in b.runtime.cluster.topics:
            time.sleep(0.001)
        yield b


def _produce_body(partition: int, records: bytes) -> dict[str, Any]:
    return {"transactional_id": None, "acks": 1, "timeout_ms": 30_000, "topic_data": [
        {"name": "walks", "partition_data": [{"index": partition, "records": records}]}]}


def _unanswered(conn: KafkaSocket) -> bool:
    """Whether nothing has arrived on ``conn`` yet."""
    return not select.select([conn.sock], [], [], 0)[0]


def _served_meanwhile(other: KafkaSocket, bomber: KafkaSocket, topic_name: str, partitions: int) -> None:
    """``other``'s ApiVersions and Metadata (of ``topic_name``, which has ``partitions``) are
    answered, each while nothing has arrived yet on ``bomber``."""
    versions = other.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                   "client_software_version": "1"})
    assert versions.body["error_code"] == ErrorCode.NONE
    assert _unanswered(bomber)
    [topic] = other.call(ApiKey.METADATA, 12, {"topics": [{"name": topic_name, "topic_id": None}],
                                               "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False}).body["topics"]
    assert topic["error_code"] == ErrorCode.NONE and len(topic["partitions"]) == partitions
    assert _unanswered(bomber)


def test_other_connections_are_served_while_a_bomb_is_checked_and_the_bomb_gets_kafkas_verdict(
        broker: Broker) -> None:
    """While the 2 KB batch of four million faulty records is walked (seconds of the broker's CPU),
    another connection's ApiVersions and Metadata, and a real producer's sends, are each answered
    before the bomb's answer has begun to arrive: between two slices of the walk
    (WALK_SLICE_RECORDS records, milliseconds), the loop serves whoever is waiting. Unsliced, the
    first of them waits for the whole walk and comes after the bomb's answer."""
    bomb = batch_of(bomb_records(_RECORDS), _RECORDS, Compression.ZSTD)
    assert len(bomb) < 4000
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0, "log_level": 0})
    producer.produce("walks", b"warm-up", partition=1)
    assert producer.flush(30) == 0
    with KafkaSocket(broker.bootstrap_servers, timeout=60) as bomber, \
            KafkaSocket(broker.bootstrap_servers, timeout=60) as other:
        other.call(ApiKey.API_VERSIONS, 0)  # connected, outside the race
        produced = bomber.send(ApiKey.PRODUCE, 9, _produce_body(0, bomb))
        asked_after = bomber.send(ApiKey.API_VERSIONS, 0)  # pipelined behind the bomb
        time.sleep(0.1)  # the broker has read the bomb and begun its walk
        for _ in range(3):
            _served_meanwhile(other, bomber, "walks", 2)
        delivered: list[Any] = []
        producer.produce("walks", b"meanwhile", partition=1,
                         on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(30) == 0 and delivered == [None]
        assert _unanswered(bomber)

        # The bomb's verdict, as validate_records gives it unsliced; then the request behind it.
        answer = bomber.read_response(ApiKey.PRODUCE, 9)
        assert answer.correlation_id == produced
        [partition] = answer.body["responses"][0]["partition_responses"]
        assert (partition["error_code"], partition["base_offset"]) == (ErrorCode.INVALID_RECORD, -1)
        errors = partition["record_errors"]  # the first MAX_RECORD_ERRORS of them; the message counts all
        assert len(errors) == MAX_RECORD_ERRORS
        assert [(e["batch_index"], e["batch_index_error_message"]) for e in (errors[0], errors[-1])] == [
            (1, "Record offset delta 0 is not its index 1"),
            (MAX_RECORD_ERRORS, f"Record offset delta 0 is not its index {MAX_RECORD_ERRORS}")]
        assert partition["error_message"].startswith(
            f"One or more records have been rejected due to {_RECORDS - 1} record errors in total")
        assert bomber.read_response(ApiKey.API_VERSIONS, 0).correlation_id == asked_after
    assert broker.records("walks", 0) == []
    assert [r.value for r in broker.records("walks", 1)] == [b"warm-up", b"meanwhile"]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD], ids=str)
def test_a_long_valid_batch_is_stored_in_its_connections_order(broker: Broker, codec: Compression) -> None:
    """A valid batch of more records than one slice is accepted and stored whole; the Produce
    pipelined behind it on the same connection, to the same partition, is answered after it and
    stored after it, as Kafka answers a connection's requests in order."""
    count = 50_007  # five slices of the walk (WALK_SLICE_RECORDS) and some
    long_batch = batch_of(tiny_records(count, in_order=True), count, codec)
    small = batch_of(tiny_records(3, in_order=True), 3, codec)
    with KafkaSocket(broker.bootstrap_servers, timeout=60) as conn:
        first = conn.send(ApiKey.PRODUCE, 9, _produce_body(0, long_batch))
        second = conn.send(ApiKey.PRODUCE, 9, _produce_body(0, small))
        answers = [conn.read_response(ApiKey.PRODUCE, 9) for _ in range(2)]
    assert [a.correlation_id for a in answers] == [first, second]
    [long_answer], [small_answer] = (a.body["responses"][0]["partition_responses"] for a in answers)
    assert long_answer["error_code"] == small_answer["error_code"] == ErrorCode.NONE
    assert small_answer["base_offset"] == long_answer["base_offset"] + count
    stored = [r.key for r in broker.records("walks", 0)][long_answer["base_offset"]:]
    assert stored == [None if i % 2 else b"k" for i in range(count)] + [b"k", None, b"k"]


def test_other_connections_are_served_while_small_batches_inflate_to_hundreds_of_mb(broker: Broker) -> None:
    """One Produce of nine zstd batches of a few KB, each one record of zeros: eight of 200 MB,
    valid (max.message.bytes counts compressed bytes) and stored, as Kafka stores them, and one of
    300 MB, past the inflation bound (MAX_INFLATED_BYTES), refused INVALID_RECORD; and a small
    batch to a tenth partition, stored. Each payload is inflated 4 MiB at a time (milliseconds),
    the loop serving other connections between two steps, so another connection's ApiVersions and
    Metadata are answered before the Produce's answer begins. Inflated in one go (0.2-0.4 s of C
    each), the first of them came after it."""
    assert broker.store is not None and broker.runtime is not None
    broker.store.create_topic("inflations", {p: (1,) for p in range(10)})
    while "inflations" not in broker.runtime.cluster.topics:
        time.sleep(0.001)
    valid = zstd_zeros_batch(200_000_000)
    beyond = zstd_zeros_batch(300_000_000)
    assert len(valid) < 25_000 and len(beyond) < 25_000 and 300_000_000 > MAX_INFLATED_BYTES
    small = batch_of(tiny_records(3, in_order=True), 3, Compression.ZSTD)
    batches = [valid] * 4 + [beyond] + [valid] * 4 + [small]
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30_000, "topic_data": [
        {"name": "inflations", "partition_data": [{"index": p, "records": batch}
                                                  for p, batch in enumerate(batches)]}]}
    with KafkaSocket(broker.bootstrap_servers, timeout=60) as bomber, \
            KafkaSocket(broker.bootstrap_servers, timeout=60) as other:
        other.call(ApiKey.API_VERSIONS, 0)  # connected, outside the race
        produced = bomber.send(ApiKey.PRODUCE, 9, body)
        time.sleep(0.05)  # the broker has read the Produce and begun to inflate
        for _ in range(2):
            _served_meanwhile(other, bomber, "inflations", 10)
        answer = bomber.read_response(ApiKey.PRODUCE, 9)
        assert answer.correlation_id == produced
        partitions = answer.body["responses"][0]["partition_responses"]
        assert [(p["index"], p["error_code"], p["base_offset"]) for p in partitions] == [
            (p, ErrorCode.INVALID_RECORD if p == 4 else ErrorCode.NONE, -1 if p == 4 else 0)
            for p in range(10)]
        ends = other.call(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "inflations", "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                                   "timestamp": -1} for p in range(10)]}]})
        assert [p["offset"] for p in ends.body["topics"][0]["partitions"]] == [1, 1, 1, 1, 0, 1, 1, 1, 1, 3]
    assert [r.value for r in broker.records("inflations", 9)] == [None, None, None]


def test_other_connections_are_served_while_a_long_batch_is_recompressed(broker: Broker) -> None:
    """A zstd batch of 6 KB holding one record of 128 MB of zeros, to a topic whose
    compression.type is uncompressed: it is inflated, rebuilt without compression (as Kafka's
    LogValidator rebuilds it), and then 128 MB is larger than max.message.bytes, so it gets
    MESSAGE_TOO_LARGE, as in Kafka. The rebuild (seconds of copying in one go) is made a slice at a
    time too (recompression_steps), and another connection's ApiVersions and Metadata are answered
    before the Produce's answer begins; rebuilt in one go, the first of them came after it."""
    assert broker.store is not None and broker.runtime is not None
    broker.store.create_topic("rebuilt", {0: (1,)}, config={"compression.type": "uncompressed"})
    while "rebuilt" not in broker.runtime.cluster.topics:
        time.sleep(0.001)
    batch = zstd_zeros_batch(128_000_000)
    assert len(batch) < 10_000
    with KafkaSocket(broker.bootstrap_servers, timeout=60) as bomber, \
            KafkaSocket(broker.bootstrap_servers, timeout=60) as other:
        other.call(ApiKey.API_VERSIONS, 0)  # connected, outside the race
        produced = bomber.send(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": 1, "timeout_ms": 30_000,
            "topic_data": [{"name": "rebuilt", "partition_data": [{"index": 0, "records": batch}]}]})
        time.sleep(0.15)  # inflated by now (about 0.1 s, in steps): the rebuild has begun
        for _ in range(2):
            _served_meanwhile(other, bomber, "rebuilt", 1)
        answer = bomber.read_response(ApiKey.PRODUCE, 9)
    assert answer.correlation_id == produced
    [partition] = answer.body["responses"][0]["partition_responses"]
    assert (partition["error_code"], partition["base_offset"]) == (ErrorCode.MESSAGE_TOO_LARGE, -1)
    assert broker.records("rebuilt", 0) == []


def _old_producers_wrapper(count: int) -> bytes:
    """What an old producer (Produce v2, magic 1) sends for ``count`` empty messages in one gzip
    wrapper: the inner messages differ only in their offsets, which their CRC-32 leaves out."""
    body = struct.pack(">bbqii", 1, 0, 1_700_000_000_000, -1, 0)  # magic, attributes, timestamp, key, value
    message = struct.pack(">I", zlib.crc32(body)) + body
    inner = b"".join(struct.pack(">qi", offset, len(message)) + message for offset in range(count))
    gzip = zlib.compressobj(6, zlib.DEFLATED, 31)
    value = gzip.compress(inner) + gzip.flush()
    wrapper = struct.pack(">bbqii", 1, int(Compression.GZIP), 1_700_000_000_000, -1, len(value)) + value
    wrapper = struct.pack(">I", zlib.crc32(wrapper)) + wrapper
    return struct.pack(">qi", count - 1, len(wrapper)) + wrapper


def test_others_are_served_while_an_old_producers_messages_are_up_converted(broker: Broker) -> None:
    """A Produce v2 of one gzip wrapper of 600,000 magic-1 messages (1.6 MB): each message is read,
    its CRC-32 checked and written into the record batch stored (kafkapy.log.message_format),
    seconds of the broker's CPU. That is done a slice at a time (CONVERSION_SLICE_MESSAGES), so
    another connection's ApiVersions and Metadata are answered before the Produce's answer begins;
    converted in one go, the first of them came after it. The batch is stored whole."""
    count = 600_000
    wrapper = _old_producers_wrapper(count)
    assert len(wrapper) < 2_000_000  # the topic's max.message.bytes
    with KafkaSocket(broker.bootstrap_servers, timeout=60) as bomber, \
            KafkaSocket(broker.bootstrap_servers, timeout=60) as other:
        other.call(ApiKey.API_VERSIONS, 0)  # connected, outside the race
        end_before = _log_end(other, 1)
        produced = bomber.send(ApiKey.PRODUCE, 2, {"acks": 1, "timeout_ms": 30_000, "topic_data": [
            {"name": "walks", "partition_data": [{"index": 1, "records": wrapper}]}]})
        time.sleep(0.1)  # the broker has read the Produce and begun to convert
        for _ in range(3):
            _served_meanwhile(other, bomber, "walks", 2)
        answer = bomber.read_response(ApiKey.PRODUCE, 2)
        assert answer.correlation_id == produced
        [partition] = answer.body["responses"][0]["partition_responses"]
        assert (partition["error_code"], partition["base_offset"]) == (ErrorCode.NONE, end_before)
        assert _log_end(other, 1) == end_before + count


def _log_end(conn: KafkaSocket, partition: int) -> int:
    ends = conn.call(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "walks", "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                          "timestamp": -1}]}]})
    return int(ends.body["topics"][0]["partitions"][0]["offset"])
