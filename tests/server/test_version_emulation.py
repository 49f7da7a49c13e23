"""kafka.version: the broker advertises and serves what an Apache Kafka release did, seen through
real clients' ApiVersions view, and refuses what that release refused."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from kafkapy.client import ClientError, SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol import decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.protocol.releases import KAFKA_RELEASES, kafka_release
from kafkapy.server.config import BrokerConfig, ConfigError

TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def own_versions() -> Iterator[dict[int, tuple[int, int]]]:
    with Broker() as broker:
        assert broker.runtime is not None
        yield dict(broker.runtime.dispatcher.served_versions())


def served(broker: Broker) -> dict[int, tuple[int, int]]:
    assert broker.runtime is not None
    return dict(broker.runtime.dispatcher.served_versions())


def produce_body(topic: str) -> dict[str, Any]:
    return {"acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": build_record_batch([(b"k", b"v")])}]}]}


@pytest.mark.parametrize(("release", "inferred"), [("2.8", (2, 8)), ("3.9", (3, 9)), ("4.0", (4, 0))])
def test_kafka_python_sees_the_release(release: str, inferred: tuple[int, int],
                                       own_versions: dict[int, tuple[int, int]]) -> None:
    """kafka-python infers the broker's release from its ApiVersions answer alone."""
    from kafka.admin import KafkaAdminClient

    with Broker({"kafka.version": release}) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=TIMEOUT_MS)
        try:
            advertised = {int(key): versions for key, versions in admin.api_versions().items()}
            assert admin._client.check_version() == inferred
        finally:
            admin.close()
    table = kafka_release(release)
    for key, (low, high) in advertised.items():
        released = table.advertised[ApiKey(key)]
        assert released.low <= low <= high <= released.high
        if key in own_versions:
            assert high == min(own_versions[key][1], released.high)
    assert set(advertised) <= {int(key) for key in table.advertised}
    assert advertised[ApiKey.API_VERSIONS] == (0, 3 if release == "2.8" else 4)


def test_without_kafka_version_the_broker_is_newer_than_any_release(
        own_versions: dict[int, tuple[int, int]]) -> None:
    assert own_versions[ApiKey.PRODUCE][1] > KAFKA_RELEASES["4.0"].advertised[ApiKey.PRODUCE].high


def test_4_0_advertises_produce_v0_but_refuses_it_per_partition() -> None:
    with Broker({"kafka.version": "4.0"}) as broker, SimpleClient(broker.bootstrap_servers) as client:
        assert served(broker)[ApiKey.PRODUCE] == (0, 12)  # KAFKA-18659
        client.request(ApiKey.METADATA, 9, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
        for version in (0, 2):
            answer = client.request(ApiKey.PRODUCE, version, produce_body("t"))
            errors = [(t.name, p.index, p.error_code)
                      for t in answer.responses for p in t.partition_responses]
            assert errors == [("t", 0, ErrorCode.UNSUPPORTED_VERSION)]
        assert broker.records("t") == []  # refused: nothing written
        ok = client.request(ApiKey.PRODUCE, 3, produce_body("t"))
        assert ok.responses[0].partition_responses[0].error_code in (ErrorCode.NONE,
                                                                     ErrorCode.LEADER_NOT_AVAILABLE)


def test_4_0_does_not_serve_what_kip_896_removed() -> None:
    with Broker({"kafka.version": "4.0"}) as broker, SimpleClient(broker.bootstrap_servers) as client:
        assert served(broker)[ApiKey.FETCH][0] == 4
        with pytest.raises(ClientError, match="does not serve"):
            client.request(ApiKey.FETCH, 3, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0,
                                             "topics": []})


def test_2_8_does_not_serve_later_versions_and_answers_api_versions_v4_with_its_range() -> None:
    with Broker({"kafka.version": "2.8.2"}) as broker, SimpleClient(broker.bootstrap_servers) as client:
        with pytest.raises(ClientError, match="does not serve"):
            client.request(ApiKey.PRODUCE, 10, produce_body("t"))
        # ApiVersions v4 is past 2.8's v3: the v0 fallback answer names 2.8's range, as Kafka does.
        sock = client._connection()
        frame = encode_request(ApiKey.API_VERSIONS, 4, 99, "me", {"client_software_name": "x",
                                                                 "client_software_version": "1"})
        sock.sendall(len(frame).to_bytes(4, "big") + frame)
        size = int.from_bytes(client._read(sock, 4, ApiKey.API_VERSIONS), "big")
        body = decode_response(client._read(sock, size, ApiKey.API_VERSIONS), ApiKey.API_VERSIONS, 0).body
        assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
        ranges = [(k.api_key, k.min_version, k.max_version) for k in body.api_keys]
        assert ranges == [(ApiKey.API_VERSIONS, 0, 3)]


@pytest.mark.parametrize("release", ["2.8", "4.0"])
def test_confluent_kafka_produces_and_consumes_against_the_release(release: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    with Broker({"kafka.version": release}) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": "lz4",
                             "linger.ms": 0})
        for i in range(3):
            producer.produce("emulated", value=b"v%d" % i, partition=0)
        assert producer.flush(20) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "emulated",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("emulated", 0, 0)])
        got = []
        try:
            for _ in range(40):
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    got.append(message.value())
                if len(got) == 3:
                    break
        finally:
            consumer.close()
        assert got == [b"v0", b"v1", b"v2"]
        assert [r.value for r in broker.records("emulated")] == got


def test_the_release_tables_hold_their_shape() -> None:
    for name, release in KAFKA_RELEASES.items():
        assert release.name == name
        assert all(versions and versions.low >= 0 for versions in release.advertised.values())
        for key, refused in release.refused.items():
            assert refused.low >= release.advertised[key].low and refused.high < release.advertised[key].high
    # KIP-896's new minimums in 4.0, as Kafka's specs note them ("removed in Apache Kafka 4.0")
    minimums = {ApiKey.FETCH: 4, ApiKey.LIST_OFFSETS: 1, ApiKey.OFFSET_COMMIT: 2, ApiKey.OFFSET_FETCH: 1,
                ApiKey.CREATE_TOPICS: 2, ApiKey.DELETE_TOPICS: 1, ApiKey.OFFSET_FOR_LEADER_EPOCH: 2,
                ApiKey.WRITE_TXN_MARKERS: 1, ApiKey.DESCRIBE_CONFIGS: 1, ApiKey.DESCRIBE_LOG_DIRS: 1}
    four = KAFKA_RELEASES["4.0"]
    assert {key: four.advertised[key].low for key in minimums} == minimums
    assert four.refused == {ApiKey.PRODUCE: KAFKA_RELEASES["4.0"].refused[ApiKey.PRODUCE]}


@pytest.mark.parametrize("value", ["1.5", "2.8.x", "4.0.0.1", "latest"])
def test_unknown_releases_are_one_clear_config_error(value: str) -> None:
    with pytest.raises(ConfigError, match=r"kafka\.version.*2\.8, 3\.9, 4\.0"):
        BrokerConfig.build({"kafka.version": value})


@pytest.mark.parametrize(("release", "produce", "fetch", "api_versions"), [
    ("2.8", (0, 9), (0, 12), (0, 3)), ("4.0", (0, 12), (4, 17), (0, 4))])
def test_librdkafka_logs_the_releases_ranges(release: str, produce: tuple[int, int], fetch: tuple[int, int],
                                             api_versions: tuple[int, int]) -> None:
    """What librdkafka says it learned from ApiVersions (its APIVERSION debug log)."""
    from confluent_kafka import Producer

    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())
    logger = logging.getLogger(f"librdkafka-{release}")
    logger.addHandler(Keep())
    logger.setLevel(logging.DEBUG)
    with Broker({"kafka.version": release}) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "debug": "feature",
                             "logger": logger})
        producer.produce("seen", b"v")
        assert producer.flush(20) == 0
    learned = {int(key): (int(low), int(high)) for key, low, high in
               re.findall(r"ApiKey \w+ \((\d+)\) Versions (\d+)\.\.(\d+)", "\n".join(lines))}
    assert (learned[ApiKey.PRODUCE], learned[ApiKey.FETCH], learned[ApiKey.API_VERSIONS]) == (
        produce, fetch, api_versions)


@pytest.mark.parametrize("version", ["2.8.²", "2.8.x", "2.8.1.1", "9.9"])
def test_a_release_that_is_not_one_is_a_value_error_naming_the_known_ones(version: str) -> None:
    """"2.8.²" passed str.isdigit (a superscript two is a digit to it, not to int())."""
    with pytest.raises(ValueError, match=r"unknown Kafka release .*; kafkapy knows 2\.8, "):
        kafka_release(version)
