"""Clients of the message formats before record batches (magic 0 and 1) against kafkapy, as
against Kafka 2.8-3.9: Produce v0-v2, Fetch v0-v3 and ListOffsets v0, with their messages converted
to record batches on the way in and back on the way out (kafkapy.log.message_format).

The clients are real: kafka-python pinned to old ``api_version``s (a common line in older
applications, which then skip ApiVersions), kcat and confluent-kafka with
``api.version.request=false`` and a 0.8/0.9 ``broker.version.fallback`` (librdkafka asks
ApiVersions from 0.10 on, so these are the fallbacks that keep it on the old versions).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.compression import Compression
from kafkapy.protocol.records import Records, build_record_batch
from kafkapy.testing import wait_until

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
TIMEOUT_S = 20
SENT = [(b"k0", b"v0"), (None, b"v1"), (b"k2", None), (b"k3", b"v3" * 50), (b"k4", b"v4")]


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker() as running:
        yield running


def consume_kafka_python(broker: Broker, topic: str, count: int, api_version: tuple[int, ...] | None,
                         **options: Any) -> list[Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, api_version=api_version,
                             auto_offset_reset="earliest", enable_auto_commit=False, **options)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4"])
@pytest.mark.parametrize("api_version", [(0, 9), (0, 10, 0), (0, 10, 1)],
                         ids=["magic0", "magic1", "magic1-fetch3"])
def test_kafka_python_on_old_api_versions_produces_and_consumes(
        broker: Broker, api_version: tuple[int, ...], codec: str | None) -> None:
    """(0, 9): Produce v1 with magic 0, Fetch v1, ListOffsets v0; (0, 10, 0): Produce v2 with
    magic 1, Fetch v2; (0, 10, 1): Fetch v3, ListOffsets v1. What the old consumer and a current
    one read is what the old producer sent, timestamps included where magic 1 has them."""
    from kafka import KafkaProducer

    topic = "legacy"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, api_version=api_version,
                             compression_type=codec, linger_ms=20)
    try:
        futures = [producer.send(topic, key=key, value=value, partition=0, timestamp_ms=1_700_000_000_000 + i)
                   for i, (key, value) in enumerate(SENT)]
        offsets = [future.get(timeout=TIMEOUT_S).offset for future in futures]
    finally:
        producer.close(timeout=TIMEOUT_S)
    assert offsets == list(range(len(SENT)))
    with_timestamps = api_version >= (0, 10)
    for reader in (api_version, None):
        got = consume_kafka_python(broker, topic, len(SENT), reader)
        assert [(r.offset, r.key, r.value) for r in got] == [(i, k, v) for i, (k, v) in enumerate(SENT)]
        if with_timestamps and reader is not None:
            assert [r.timestamp for r in got] == [1_700_000_000_000 + i for i in range(len(SENT))]
        if not with_timestamps and reader is None:
            assert {r.timestamp for r in got} == {-1}  # magic 0 has none; stored as Kafka stores it


@pytest.mark.parametrize("codec", [None, "gzip"])
def test_a_negative_timestamp_from_an_old_producer_is_refused_as_kafkas_builder_refuses_it(
        broker: Broker, codec: str | None) -> None:
    """kafka-python on Produce v2 (magic 1) sends a message timestamped -5. Kafka up-converts it
    with MemoryRecordsBuilder, whose appendWithOffset throws IllegalArgumentException on a negative
    timestamp other than -1 (NO_TIMESTAMP), and the partition is answered UNKNOWN_SERVER_ERROR
    (kafka-python's UnknownError); nothing is stored. -1 is stored as no timestamp. kafkapy stored
    the -5 before."""
    from kafka import KafkaProducer
    from kafka.errors import UnknownError

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, api_version=(0, 10, 1),
                             compression_type=codec)
    try:
        with pytest.raises(UnknownError):
            producer.send("negative", b"before-epoch", partition=0, timestamp_ms=-5).get(timeout=TIMEOUT_S)
        stored = producer.send("negative", b"none", partition=0, timestamp_ms=-1).get(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=TIMEOUT_S)
    assert (stored.offset, stored.timestamp) == (0, -1)
    assert [(r.timestamp, r.value) for r in broker.records("negative", 0)] == [(-1, b"none")]


def test_an_old_consumer_reads_a_transactional_producers_records_without_markers_or_headers(
        broker: Broker) -> None:
    """Fetch v3 has no isolation level: as Kafka, committed and aborted records alike, the
    transaction markers left out (an old consumer would take them for data), headers dropped."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "legacy-reader",
                         "linger.ms": 0})
    producer.init_transactions(TIMEOUT_S)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        producer.produce("txn", key=outcome.encode(), value=b"x", partition=0, headers=[("h", b"1")])
        producer.flush(TIMEOUT_S)
        (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(TIMEOUT_S)
    got = consume_kafka_python(broker, "txn", 3, (0, 10, 1))
    assert [(r.offset, r.key, r.headers) for r in got] == [
        (0, b"commit", []), (2, b"abort", []), (4, b"commit", [])]
    # A current read_committed consumer of the same log skips the aborted one.
    committed = consume_kafka_python(broker, "txn", 2, None, isolation_level="read_committed")
    assert [(r.offset, r.key, r.headers) for r in committed] == [(0, b"commit", [("h", b"1")]),
                                                                 (4, b"commit", [("h", b"1")])]


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (`make install` installs it)")
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
@pytest.mark.parametrize("fallback", ["0.8.2", "0.9.0"])
def test_kcat_on_the_0_8_and_0_9_protocol(broker: Broker, fallback: str, codec: str) -> None:
    """librdkafka with ``api.version.request=false``: Produce v0/v1 with magic 0, Fetch v0/v1,
    ListOffsets v0 to find the beginning."""
    assert KCAT is not None
    base = [KCAT, "-b", broker.bootstrap_servers, "-X", "api.version.request=false",
            "-X", f"broker.version.fallback={fallback}", "-t", "kc", "-p", "0"]
    produced = subprocess.run([*base, "-P", "-z", codec, "-K", ":"], input=b"a:1\nb:2\n:3\n",
                              capture_output=True, timeout=TIMEOUT_S)
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = subprocess.run([*base, "-C", "-o", "beginning", "-e", "-f", "%o %k=%s\\n"],
                              capture_output=True, timeout=TIMEOUT_S)
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.decode().splitlines() == ["0 a=1", "1 b=2", "2 =3"]


def test_confluent_kafka_on_the_0_9_protocol(broker: Broker) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    old = {"bootstrap.servers": broker.bootstrap_servers, "api.version.request": False,
           "broker.version.fallback": "0.9.0"}
    producer = Producer({**old, "compression.type": "gzip", "linger.ms": 5})
    for i in range(20):
        producer.produce("cf", key=b"%d" % i, value=b"value-%d" % i, partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({**old, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("cf", 0, 0)])
        got: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    assert got == [(i, b"%d" % i, b"value-%d" % i) for i in range(20)]


# --- the wire, request by request ------------------------------------------------------------

def _legacy_message_set(magic: int, values: list[bytes]) -> bytes:
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for offset, value in enumerate(values):
        builder.append(offset, timestamp=1_700_000_000_000 if magic else None, key=None, value=value)
    return bytes(builder.build())


def _produce(client: SimpleClient, version: int, topic: str, records: bytes) -> Any:
    return client.request(ApiKey.PRODUCE, version, {
        "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": Records(records)}]}]})


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_answer_in_their_own_shape(broker: Broker, version: int) -> None:
    with SimpleClient(broker.bootstrap_servers) as client:
        for _ in range(50):  # the first Produce auto-creates the topic
            answer = _produce(client, version, "wire", _legacy_message_set(min(version, 1), [b"a", b"b"]))
            [[partition]] = [t["partition_responses"] for t in answer["responses"]]
            if partition["error_code"] != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                break
            time.sleep(0.05)
        assert partition["error_code"] == ErrorCode.NONE
        assert partition["base_offset"] == 0
        assert ("throttle_time_ms" in answer) == (version >= 1)
        assert ("log_append_time_ms" in partition) == (version >= 2)
        corrupt = bytearray(_legacy_message_set(1, [b"c"]))
        corrupt[-1] ^= 1
        refused = _produce(client, version, "wire", bytes(corrupt))
        assert refused["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.CORRUPT_MESSAGE


def test_list_offsets_v0_answers_segment_starts_and_the_end(broker: Broker) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for i in range(3):
        producer.send("lo", value=b"%d" % i, partition=0).get(timeout=TIMEOUT_S)
    producer.close(timeout=TIMEOUT_S)

    def offsets(timestamp: int, most: int = 10) -> tuple[int, list[int]]:
        answer = client.request(ApiKey.LIST_OFFSETS, 0, {"replica_id": -1, "topics": [
            {"name": "lo",
             "partitions": [{"partition_index": 0, "timestamp": timestamp, "max_num_offsets": most}]}]})
        [partition] = answer["topics"][0]["partitions"]
        return partition["error_code"], partition["old_style_offsets"]

    with SimpleClient(broker.bootstrap_servers) as client:
        assert offsets(-1) == (ErrorCode.NONE, [3, 0])  # the end, then the one segment's start
        assert offsets(-1, most=1) == (ErrorCode.NONE, [3])
        assert offsets(-2) == (ErrorCode.NONE, [0])
        assert offsets(0) == (ErrorCode.NONE, [])  # nothing was written that early
        assert offsets(-3) == (ErrorCode.UNSUPPORTED_VERSION, [])  # v0 knows only -1 and -2


def fetch_partition(client: SimpleClient, topic: str, version: int) -> Any:
    """Partition 0 of ``topic`` from offset 0, in a Fetch of ``version`` (its fields only)."""
    body: dict[str, Any] = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1,
                            "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                        "partition_max_bytes": 1 << 20}]}]}
    if version >= 3:
        body["max_bytes"] = 1 << 20
    if version >= 7:
        body.update(session_id=0, session_epoch=-1)
    [partition] = client.request(ApiKey.FETCH, version, body)["responses"][0]["partitions"]
    return partition


@pytest.mark.parametrize("version", [0, 2, 3])
def test_a_zstd_batch_cannot_be_fetched_in_the_old_formats(version: int) -> None:
    from kafka import KafkaProducer

    with Broker() as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type="zstd")
        producer.send("z", value=b"v" * 1000, partition=0).get(timeout=TIMEOUT_S)
        producer.close(timeout=TIMEOUT_S)
        with SimpleClient(broker.bootstrap_servers) as client:
            [batch] = fetch_partition(client, "z", 4)["records"]
            assert batch.compression == Compression.ZSTD
            refused = fetch_partition(client, "z", version)["error_code"]
            assert refused == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_a_zstd_topic_is_refused_to_fetches_older_than_v10() -> None:
    """KIP-110, as Kafka's maybeConvertFetchedData: by the topic's compression.type, not its
    batches (these were sent uncompressed)."""
    from kafka import KafkaProducer

    with Broker({"compression.type": "zstd"}) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        producer.send("zt", value=b"v", partition=0).get(timeout=TIMEOUT_S)
        producer.close(timeout=TIMEOUT_S)
        with SimpleClient(broker.bootstrap_servers) as client:
            codes = {version: fetch_partition(client, "zt", version)["error_code"]
                     for version in (3, 4, 9, 10)}
    refused = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert codes == {3: refused, 4: refused, 9: refused, 10: ErrorCode.NONE}


@pytest.mark.parametrize(("release", "produce", "fetch", "list_offsets"), [
    ("2.8", (0, 9), (0, 12), (0, 6)),
    ("3.9", (0, 11), (0, 17), (0, 9)),
    ("4.0", (0, 12), (4, 17), (1, 10)),
])
def test_emulated_releases_advertise_their_own_lowest_versions(
        release: str, produce: tuple[int, int], fetch: tuple[int, int],
        list_offsets: tuple[int, int]) -> None:
    with Broker({"kafka.version": release}) as broker, SimpleClient(broker.bootstrap_servers) as client:
        answer = client.request(ApiKey.API_VERSIONS, 0, {})
    ranges = {key["api_key"]: (key["min_version"], key["max_version"]) for key in answer["api_keys"]}
    assert (ranges[ApiKey.PRODUCE], ranges[ApiKey.FETCH], ranges[ApiKey.LIST_OFFSETS]) == (
        produce, fetch, list_offsets)


def test_kafka_4_refuses_the_old_produce_versions() -> None:
    """Kafka 4.0 advertises Produce v0-v2 (KAFKA-18659) but refuses them, partition by partition."""
    with Broker({"kafka.version": "4.0"}) as broker, SimpleClient(broker.bootstrap_servers) as client:
        answer = _produce(client, 2, "refused", _legacy_message_set(1, [b"a"]))
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.UNSUPPORTED_VERSION


def test_an_old_clients_traffic_captured_by_the_broker_decodes_to_its_records(tmp_path: Path) -> None:
    """For traffic analysts: the broker's own capture (CaptureObserver) of kafka-python on (0, 9)
    with LZ4 (magic-0 messages, Kafka 0.8's frame checksum) and on (0, 10, 0) with gzip (magic 1)
    decodes, both ways, to the records sent: the producers' messages and the broker's converted
    answers alike."""
    from kafka import KafkaProducer

    from kafkapy.capture.rows import decode_capture

    pcap = tmp_path / "legacy.pcap"
    config = {"observer.class.names": "kafkapy.observers.CaptureObserver", "capture.path": str(pcap)}
    with Broker(config) as broker:
        port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
        for api_version, codec in (((0, 9), "lz4"), ((0, 10, 0), "gzip")):
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, api_version=api_version,
                                     compression_type=codec, linger_ms=20)
            sent = [producer.send("cap", key=b"k%d" % i, value=b"%s-%d" % (codec.encode(), i), partition=0)
                    for i in range(3)]
            for future in sent:
                future.get(timeout=TIMEOUT_S)
            producer.close(timeout=TIMEOUT_S)
            consume_kafka_python(broker, "cap", 3, api_version)
    rows = [row for row in decode_capture(pcap, kafka_ports=[port]) if row["api_key"] in (0, 1)]
    assert rows and all(row["status"] == "ok" for row in rows)

    def values(records: list[dict[str, Any]]) -> list[str]:
        return [base64.b64decode(r["value"]).decode() for r in records]

    produced = [values(p["records"]) for row in rows if row["api_key"] == 0
                for t in json.loads(row["request"])["topic_data"] for p in t["partition_data"]]
    fetched = [values(p["records"]) for row in rows if row["api_key"] == 1 and row["response"]
               for t in json.loads(row["response"])["responses"] for p in t["partitions"] if p["records"]]
    assert {(row["api_key"], row["api_version"]) for row in rows} == {(0, 1), (1, 1), (0, 2), (1, 2)}
    assert produced == [["lz4-0", "lz4-1", "lz4-2"], ["gzip-0", "gzip-1", "gzip-2"]]
    assert ["lz4-0", "lz4-1", "lz4-2"] in fetched
    assert ["lz4-0", "lz4-1", "lz4-2", "gzip-0", "gzip-1", "gzip-2"] in fetched


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_a_first_batch_over_partition_max_bytes_goes_whole_only_from_v3(broker: Broker, version: int) -> None:
    """Kafka's hardMaxBytesLimit (ReplicaManager.readFromLog, before KIP-74): Fetch v0-v2 read at
    most partition_max_bytes, a partial batch that converts to no message, so the partition
    answers no records, at once (the bytes read count for min_bytes); v3 sends the batch whole."""
    with SimpleClient(broker.bootstrap_servers) as client:
        batch = build_record_batch([{"value": b"x" * 1000}])
        wait_until(lambda: _produce(client, 3, "big", batch)["responses"][0]["partition_responses"][0][
            "error_code"] == ErrorCode.NONE, what="the topic")
        body: dict[str, Any] = {"replica_id": -1, "max_wait_ms": 10_000, "min_bytes": 1,
                                "topics": [{"topic": "big", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                            "partition_max_bytes": 100}]}]}
        if version >= 3:
            body["max_bytes"] = 100
        started = time.monotonic()
        [partition] = client.request(ApiKey.FETCH, version, body)["responses"][0]["partitions"]
        assert time.monotonic() - started < 5  # not held for max_wait_ms
        assert partition["error_code"] == ErrorCode.NONE
        size = len(bytes(partition["records"])) if partition["records"] is not None else 0
        if version < 3:
            assert size == 0
        else:
            assert size > 1000  # the one message, whole
