"""Byte-rate quotas (producer_byte_rate, consumer_byte_rate) enforced on real clients, and the
precedence in which a (user, client-id) finds its quota."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from typing import Any

import pytest
from quota_wire import alter

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.quotas.client_quotas import ClientQuotas, resolve_quota
from kafkapy.quotas.metrics import MetricsRegistry
from kafkapy.quotas.module import QuotasModule
from kafkapy.server.connection import ConnectionInfo
from kafkapy.server.interceptors import PASS
from kafkapy.server.modules import RequestContext

TIMEOUT_S = 30
# A small quota and enough data that the throttle decides the time taken. A sampled rate lets a
# burst of (quota.window.num - 1) windows through unthrottled (the young sensor's padded window),
# so the tests keep 2 samples: a 1 s burst, then the quota.
QUOTA = 100_000  # bytes per second
VALUE = b"x" * 1000
COUNT = 600  # 600 kB: about 5 s at the quota, 1 s of it the burst
CONFIG = {"quota.window.num": 2, "metrics.listener": "http://127.0.0.1:0/metrics"}


def quotas_of(broker: Broker) -> QuotasModule:
    assert broker.runtime is not None
    [module] = [m for m in broker.runtime.modules if isinstance(m, QuotasModule)]
    return module


def wait_installed(broker: Broker, installed: bool = True) -> None:
    deadline = time.monotonic() + 10
    while quotas_of(broker)._client_quotas_installed is not installed:
        assert time.monotonic() < deadline, "the client quotas never reached the interceptor"
        time.sleep(0.02)


LEVELS = ["users/alice/clients/app", "users/alice/clients/<default>", "users/alice",
          "users/<default>/clients/app", "users/<default>/clients/<default>", "users/<default>",
          "clients/app", "clients/<default>"]
SENSORS = [("alice", "app"), ("alice", "app"), ("alice", ""), ("alice", "app"), ("alice", "app"),
           ("alice", ""), ("", "app"), ("", "app")]


@pytest.mark.parametrize("first", range(len(LEVELS)))
def test_precedence_is_kafkas(first: int) -> None:
    """With every level from ``first`` down set, the quota comes from ``first`` (Kafka's order)."""
    entities = {path: {"producer_byte_rate": float(i + 1)} for i, path in enumerate(LEVELS) if i >= first}
    assert resolve_quota(entities, "alice", "app", "producer_byte_rate") == (float(first + 1), SENSORS[first])
    assert resolve_quota(entities, "alice", "app", "consumer_byte_rate") is None


def test_no_quota_no_interceptor() -> None:
    with Broker() as broker:
        alter(broker.bootstrap_servers, [({"user": "bob"}, [("producer_byte_rate", 1000)])])
        wait_installed(broker)
        assert broker.runtime is not None
        assert quotas_of(broker).client_quotas in broker.runtime.dispatcher.interceptors
        alter(broker.bootstrap_servers, [({"user": "bob"}, [("producer_byte_rate", None)])])
        wait_installed(broker, False)
        assert quotas_of(broker).client_quotas not in broker.runtime.dispatcher.interceptors


def test_confluent_producer_is_throttled_to_its_quota() -> None:
    from confluent_kafka import Producer

    with Broker(CONFIG) as broker:
        alter(broker.bootstrap_servers, [({"client-id": "slow-producer"}, [("producer_byte_rate", QUOTA)])])
        wait_installed(broker)
        throttle_events: list[Any] = []
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "slow-producer",
                             "linger.ms": 5, "batch.size": 4096, "throttle_cb": throttle_events.append,
                             "compression.type": "none"})
        count = COUNT
        started = time.monotonic()
        for _ in range(count):
            producer.produce("quota-topic", VALUE, partition=0)
            producer.poll(0)
        assert producer.flush(TIMEOUT_S * 2) == 0
        elapsed = time.monotonic() - started
        assert throttle_events and max(e.throttle_time for e in throttle_events) > 0
        achieved = count * len(VALUE) / elapsed
        print(f"achieved {achieved:.0f} B/s in {elapsed:.2f} s against a quota of {QUOTA}")
        # Unthrottled it is tens of times the quota here: under twice it, and not starved.
        assert QUOTA * 0.3 < achieved < QUOTA * 2.0, (achieved, elapsed)
        metrics = quotas_of(broker).metrics
        assert metrics.value("byte-rate", group="Produce", user="", **{"client-id": "slow-producer"}) > 0
        url = quotas_of(broker).metrics_url
        assert url is not None
        text = urllib.request.urlopen(url, timeout=5).read().decode()
        assert 'kafka_network_produce_byte_rate{client_id="slow-producer",user=""}' in text


def test_kafka_python_consumer_is_throttled_to_its_quota() -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    with Broker(CONFIG) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=5)
        count = COUNT
        for _ in range(count):
            producer.send("quota-fetch", VALUE, partition=0)
        producer.flush(TIMEOUT_S)
        producer.close()
        alter(broker.bootstrap_servers, [({"client-id": "slow-consumer"}, [("consumer_byte_rate", QUOTA)])])
        wait_installed(broker)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, client_id="slow-consumer",
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 max_partition_fetch_bytes=8192, fetch_max_bytes=8192,
                                 request_timeout_ms=TIMEOUT_S * 1000)
        try:
            consumer.assign([TopicPartition("quota-fetch", 0)])
            received, throttle = 0, 0.0
            started = time.monotonic()
            while received < count:
                assert time.monotonic() - started < TIMEOUT_S * 2
                for records in consumer.poll(timeout_ms=1000).values():
                    received += len(records)
                # kafka-python's throttle-time sensor records each response's throttle_time_ms.
                throttle = max([throttle] + [group.get("throttle-time-max", 0.0)
                                             for group in consumer.metrics().values()])
            elapsed = time.monotonic() - started
        finally:
            consumer.close()
        assert throttle > 0
        achieved = count * len(VALUE) / elapsed
        print(f"achieved {achieved:.0f} B/s in {elapsed:.2f} s against a quota of {QUOTA}")
        assert QUOTA * 0.3 < achieved < QUOTA * 2.0, (achieved, elapsed)


# --- the interceptor on its own, with a clock the test moves --------------------------------------

class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def produce(records: bytes) -> Any:
    body = {"acks": 1, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
    return Request(ApiKey.PRODUCE, 9, 1, "app", body)


def context(api_key: int = 0) -> Any:
    conn = ConnectionInfo("c-1", "PLAINTEXT", "PLAINTEXT", ("127.0.0.1", 5), ("127.0.0.1", 9092),
                          principal="User:alice")
    return RequestContext(conn, api_key, 9, 1, "app")


ANSWER = {"responses": [], "throttle_time_ms": 0}


def test_throttle_time_is_kafkas_formula_and_the_channel_is_muted_for_it() -> None:
    clock = Clock()
    quotas = ClientQuotas(MetricsRegistry(clock), samples=11, window=1.0, clock=clock)
    quotas.set_entities({"users/alice": {"producer_byte_rate": 1000.0}})
    ctx = context(ApiKey.PRODUCE)

    async def run() -> tuple[Any, Any, float]:
        assert await quotas.before(ctx, produce(b"x" * 5000)) is PASS
        within = await quotas.after(ctx, produce(b"x" * 5000), ANSWER)  # 5000 B over 10 s: 500 B/s
        over = await quotas.after(ctx, produce(b"x" * 10000), ANSWER)  # 15000 B over 10 s: 1500 B/s
        clock.now += 4.7  # of the 5 s mute, 0.3 s are left: the next request waits them out
        started = time.monotonic()
        await quotas.before(ctx, produce(b""))
        return within, over, time.monotonic() - started

    within, over, waited = asyncio.run(run())
    assert within is ANSWER  # no violation: the answer untouched
    # (1500 - 1000) / 1000 * 10 s (a young sensor's window is padded to 10 windows) = 5 s
    assert over["throttle_time_ms"] == 5000
    assert waited >= 0.29  # the next request on the connection waited out the mute


def test_the_mute_is_set_by_a_violation() -> None:
    clock = Clock()
    quotas = ClientQuotas(MetricsRegistry(clock), clock=clock)
    quotas.set_entities({"clients/app": {"producer_byte_rate": 1000.0}})
    ctx = context(ApiKey.PRODUCE)
    asyncio.run(quotas.after(ctx, produce(b"x" * 20000), ANSWER))
    # 20000 B over 10 s is 2000 B/s: (2000 - 1000) / 1000 * 10 s
    assert ctx.connection.attributes["quotas.muted_until"] == pytest.approx(clock.now + 10.0)
    metrics = quotas.metrics
    assert metrics.value("byte-rate", group="Produce", user="", **{"client-id": "app"}) == 2000.0


def test_request_percentage_throttle_is_capped_at_one_window() -> None:
    clock = Clock()
    quotas = ClientQuotas(MetricsRegistry(clock), clock=clock)
    quotas.set_entities({"users/<default>": {"request_percentage": 0.001}})
    ctx = context(ApiKey.METADATA)

    async def run() -> Any:
        await quotas.before(ctx, produce(b""))
        time.sleep(0.05)  # 50 ms of handler time: 5 percent-seconds, far over 0.001 %
        return await quotas.after(ctx, produce(b""), {"throttle_time_ms": 0, "topics": []})

    answer = asyncio.run(run())
    assert answer["throttle_time_ms"] == 1000  # Kafka's ClientRequestQuotaManager.maxThrottleTimeMs


def test_a_throttled_fetch_answers_no_records_and_is_not_charged() -> None:
    """Kafka's KafkaApis: over the quota, the fetch context's throttled (empty) response goes, and
    the bytes it would have carried are unrecorded from the fetch sensor."""
    from kafkapy.protocol.chunks import RecordChunks
    from kafkapy.server.modules import ChunkedResponse

    clock = Clock()
    quotas = ClientQuotas(MetricsRegistry(clock), clock=clock)
    quotas.set_entities({"clients/app": {"consumer_byte_rate": 1000.0}})
    ctx = context(ApiKey.FETCH)
    request = Request(ApiKey.FETCH, 12, 1, "app", {})

    def fetched(size: int) -> ChunkedResponse:
        return ChunkedResponse({"throttle_time_ms": 0, "error_code": 0, "session_id": 7, "responses": [
            {"topic": "t", "partitions": [{"partition_index": 0, "records": RecordChunks([b"x" * size])}]}]})

    async def run() -> tuple[Any, Any]:
        within = await quotas.after(ctx, request, fetched(5000))  # 500 B/s: served
        over = await quotas.after(ctx, request, fetched(10000))  # would be 1500 B/s: throttled
        return within, over

    within, over = asyncio.run(run())
    assert within.body["responses"][0]["partitions"][0]["records"].size == 5000
    assert isinstance(over, ChunkedResponse)
    assert over.body["responses"] == [] and over.body["session_id"] == 7
    assert over.body["throttle_time_ms"] == 5000  # (1500 - 1000) / 1000 * 10 s
    metrics = quotas.metrics
    assert metrics.value("byte-rate", group="Fetch", user="", **{"client-id": "app"}) == 500.0


def test_a_nan_quota_never_throttles_as_in_kafka() -> None:
    """Every rate violates a NaN bound (rate <= NaN is false), and Kafka's throttle time for it,
    Math.round(NaN), is 0: requests are answered unthrottled, on a connection that stays open."""
    from kafkapy.client import SimpleClient
    from kafkapy.protocol.records import build_record_batch

    with Broker(CONFIG) as broker:
        assert alter(broker.bootstrap_servers, [({"client-id": "nan-producer"},
                                                 [("producer_byte_rate", float("nan")),
                                                  ("request_percentage", float("nan"))])]) == [(0, None)]
        wait_installed(broker)
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "nan-quota", "partition_data": [
                {"index": 0, "records": build_record_batch([{"value": VALUE}] * 100)}]}]}
        with SimpleClient(broker.bootstrap_servers, client_id="nan-producer") as client:
            [created] = client.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
                {"name": "nan-quota", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                 "configs": []}], "timeout_ms": 5000, "validate_only": False})["topics"]
            assert created["error_code"] == ErrorCode.NONE
            for _ in range(20):  # 2 MB at once: far past any finite quota
                answer = client.request(ApiKey.PRODUCE, 9, body)
                assert answer["throttle_time_ms"] == 0
                assert [p["error_code"] for t in answer["responses"] for p in t["partition_responses"]] == [
                    ErrorCode.NONE]


def test_throttle_time_is_rounded_as_kafkas_math_round() -> None:
    """QuotaUtils.throttleTime rounds to the nearest millisecond: under half a millisecond is no
    throttle at all (no mute), two thirds of one is 1 ms."""
    clock = Clock()
    quotas = ClientQuotas(MetricsRegistry(clock), clock=clock)
    quotas.set_entities({"users/alice": {"producer_byte_rate": 3000.0}})
    ctx = context(ApiKey.PRODUCE)
    # 30001 B over the young sensor's 10 s: 3000.1 B/s, a throttle of 0.33 ms, which rounds to 0
    assert asyncio.run(quotas.after(ctx, produce(b"x" * 30001), ANSWER)) is ANSWER
    assert "quotas.muted_until" not in ctx.connection.attributes
    other = context(ApiKey.PRODUCE)
    fresh = ClientQuotas(MetricsRegistry(clock), clock=clock)
    fresh.set_entities({"users/alice": {"producer_byte_rate": 3000.0}})
    # 30002 B: 3000.2 B/s, 0.67 ms, rounded to 1 ms (truncating would answer 0 yet mute)
    answer = asyncio.run(fresh.after(other, produce(b"x" * 30002), ANSWER))
    assert answer["throttle_time_ms"] == 1
    assert other.connection.attributes["quotas.muted_until"] == pytest.approx(clock.now + 0.001)


def _fetch_from(replica: int, version: int = 12) -> Request:
    body: dict[str, Any] = {"replica_id": replica, "max_wait_ms": 0, "min_bytes": 1, "topics": []}
    if version >= 15:
        body = {"replica_state": {"replica_id": replica, "replica_epoch": 1}, "max_wait_ms": 0,
                "min_bytes": 1, "topics": []}
    return Request(ApiKey.FETCH, version, 1, "app", body)


@pytest.mark.parametrize("version", [12, 15])
def test_a_follower_fetch_and_inter_broker_requests_are_exempt(version: int) -> None:
    """Kafka answers a replica's Fetch, WriteTxnMarkers (and its other inter-broker APIs) with
    sendResponseExemptThrottle: no client quota charges or throttles them."""
    from kafkapy.protocol.chunks import RecordChunks
    from kafkapy.server.modules import ChunkedResponse

    clock = Clock()
    quotas = ClientQuotas(MetricsRegistry(clock), clock=clock)
    quotas.set_entities({"clients/<default>": {"consumer_byte_rate": 1000.0, "request_percentage": 0.001}})

    def fetched() -> ChunkedResponse:
        return ChunkedResponse({"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
            {"topic": "t", "partitions": [{"partition_index": 0, "records": RecordChunks([b"x" * 50000])}]}]})

    async def run() -> None:
        follower = context(ApiKey.FETCH)
        answer = fetched()
        assert await quotas.after(follower, _fetch_from(1, version), answer) is answer
        markers = context(ApiKey.WRITE_TXN_MARKERS)
        await quotas.before(markers, Request(ApiKey.WRITE_TXN_MARKERS, 1, 2, "app", {"markers": []}))
        time.sleep(0.02)  # far over 0.001 % of a second
        markers_answer = {"markers": []}
        assert await quotas.after(markers, Request(ApiKey.WRITE_TXN_MARKERS, 1, 2, "app", {"markers": []}),
                                  markers_answer) is markers_answer
        for ctx in (follower, markers):
            assert "quotas.muted_until" not in ctx.connection.attributes
        # a consumer's fetch of the same bytes is charged and throttled
        consumer = context(ApiKey.FETCH)
        throttled = await quotas.after(consumer, _fetch_from(-1, version), fetched())
        assert isinstance(throttled, ChunkedResponse) and throttled.body["throttle_time_ms"] > 0

    asyncio.run(run())


def test_an_acks_0_produce_is_left_out_of_the_request_quota() -> None:
    """Kafka's handleProduceRequest: the request quota is not recorded for acks=0 (there is no
    answer to carry a throttle); the byte rate still is."""
    clock = Clock()
    quotas = ClientQuotas(MetricsRegistry(clock), clock=clock)
    quotas.set_entities({"users/alice": {"request_percentage": 0.001}})
    ctx = context(ApiKey.PRODUCE)
    no_acks = produce(b"x" * 10)
    no_acks.body["acks"] = 0

    async def run() -> Any:
        await quotas.before(ctx, no_acks)
        time.sleep(0.02)
        first = await quotas.after(ctx, no_acks, None)
        assert "quotas.muted_until" not in ctx.connection.attributes
        acked = produce(b"x" * 10)
        await quotas.before(ctx, acked)
        time.sleep(0.02)
        return first, await quotas.after(ctx, acked, ANSWER)

    first, acked = asyncio.run(run())
    assert first is None
    assert acked["throttle_time_ms"] == 1000  # the same request with acks=1 is throttled


def test_a_sensor_unused_for_an_hour_is_dropped() -> None:
    """Kafka's ClientQuotaManager expires a quota sensor and its metrics after an hour without a
    request (InactiveSensorExpirationTimeSeconds): client-ids that come and go do not pile up."""
    from kafkapy.quotas.client_quotas import SENSOR_EXPIRY_S

    clock = Clock()
    quotas = ClientQuotas(MetricsRegistry(clock), clock=clock)
    quotas.set_entities({"clients/<default>": {"producer_byte_rate": 1_000_000.0}})

    def charge(client: str) -> None:
        conn = ConnectionInfo("c-1", "PLAINTEXT", "PLAINTEXT", ("127.0.0.1", 5), ("127.0.0.1", 9092),
                              principal="User:alice")
        ctx = RequestContext(conn, ApiKey.PRODUCE, 9, 1, client)
        asyncio.run(quotas.after(ctx, produce(b"x" * 100), ANSWER))

    metrics = quotas.metrics
    for n in range(50):
        charge(f"short-lived-{n}")
    charge("steady")
    assert metrics.value("byte-rate", group="Produce", user="", **{"client-id": "short-lived-0"}) == 10.0
    for _ in range(int(SENSOR_EXPIRY_S // 600)):  # the steady client keeps sending every 10 minutes
        clock.now += 600
        charge("steady")
    clock.now += 60
    charge("steady")
    with pytest.raises(KeyError):
        metrics.value("byte-rate", group="Produce", user="", **{"client-id": "short-lived-0"})
    assert [client for (_, (_, client)) in quotas._sensors] == ["steady"]
    charge("short-lived-0")  # back after the hour: a fresh sensor
    assert metrics.value("byte-rate", group="Produce", user="", **{"client-id": "short-lived-0"}) == 10.0
