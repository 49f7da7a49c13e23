"""GetTelemetrySubscriptions and PushTelemetry over a socket: Kafka's answers, each error code of
ClientMetricsManager, and the pushes kept for Broker.telemetry()."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from bombs import snappy_claim
from error_log import collected_errors
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.metrics.v1 import metrics_pb2

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.compression import Compression, compress
from kafkapy.telemetry import SubscriptionError
from kafkapy.telemetry import module as telemetry_module
from kafkapy.telemetry.module import INFLATE_FACTOR
from kafkapy.testing import BrokerFactory

HOUR_MS = 3_600_000
ZERO = uuid.UUID(int=0)


def payload(name: str = "org.apache.kafka.producer.record.queue.time.avg", value: float = 2.5) -> bytes:
    metric = metrics_pb2.Metric(name=name)
    metric.gauge.data_points.append(metrics_pb2.NumberDataPoint(as_double=value, time_unix_nano=123))
    return metrics_pb2.MetricsData(resource_metrics=[metrics_pb2.ResourceMetrics(
        scope_metrics=[metrics_pb2.ScopeMetrics(metrics=[metric])])]).SerializeToString()


@pytest.fixture
def broker(kafka_broker_factory: BrokerFactory) -> Broker:
    started = kafka_broker_factory({"kafkapy.modules": "telemetry", "telemetry.max.bytes": 4096})
    started.set_client_metrics("producers", metrics=["org.apache.kafka.producer."], interval_ms=HOUR_MS)
    return started


@pytest.fixture
def client(broker: Broker) -> Iterator[SimpleClient]:
    with SimpleClient(broker.bootstrap_servers, client_id="tele-test") as connected:
        yield connected


def get(client: SimpleClient, instance_id: uuid.UUID = ZERO) -> dict[str, Any]:
    return dict(client.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": instance_id}))


def push(client: SimpleClient, instance_id: uuid.UUID, subscription_id: int, data: bytes = b"", *,
         codec: int = Compression.NONE, terminating: bool = False) -> int:
    answer = client.request(ApiKey.PUSH_TELEMETRY, 0, {
        "client_instance_id": instance_id, "subscription_id": subscription_id, "terminating": terminating,
        "compression_type": codec, "metrics": data})
    return int(answer["error_code"])


def test_served_only_with_the_telemetry_module(kafka_broker: Broker, broker: Broker) -> None:
    def advertised(started: Broker) -> set[int]:
        with SimpleClient(started.bootstrap_servers) as asking:
            answer = asking.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                             "client_software_version": "1"})
        return {api["api_key"] for api in answer["api_keys"]}

    telemetry = {ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY}
    assert not telemetry & advertised(kafka_broker)  # as Kafka without a telemetry receiver
    assert telemetry <= advertised(broker)


def test_a_new_client_gets_an_instance_id_and_its_subscription(client: SimpleClient) -> None:
    answer = get(client)
    assert answer["error_code"] == ErrorCode.NONE
    assert answer["client_instance_id"] != ZERO
    assert answer["requested_metrics"] == ["org.apache.kafka.producer."]
    # Kafka starts from its 5-minute default and takes the shortest interval matched, so a
    # subscription's longer interval is never handed out.
    assert answer["push_interval_ms"] == 300_000
    assert answer["telemetry_max_bytes"] == 4096
    assert answer["accepted_compression_types"] == [Compression.ZSTD, Compression.LZ4, Compression.GZIP,
                                                    Compression.SNAPPY]
    assert answer["delta_temporality"] is True


def test_asking_again_within_the_interval_is_throttled_unless_subscriptions_changed(
        broker: Broker, client: SimpleClient) -> None:
    first = get(client)
    instance_id = first["client_instance_id"]
    assert get(client, instance_id)["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    broker.set_client_metrics("producers", metrics=["*"], interval_ms=HOUR_MS)
    changed = broker.wait_for_sync(lambda: get(client, instance_id),
                                   lambda answer: answer["error_code"] == ErrorCode.NONE)
    assert changed["requested_metrics"] == ["*"]
    assert changed["subscription_id"] != first["subscription_id"]


def test_pushes_are_paced_by_the_interval(broker: Broker, client: SimpleClient) -> None:
    answer = get(client)
    instance_id, subscription_id = answer["client_instance_id"], answer["subscription_id"]
    # The first push after asking is taken at once (clients jitter their interval)...
    assert push(client, instance_id, subscription_id, payload()) == ErrorCode.NONE
    # ...the next only after the interval, unless it is the client's last.
    assert push(client, instance_id, subscription_id, payload()) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert push(client, instance_id, subscription_id, payload(value=9.0), terminating=True) == ErrorCode.NONE
    assert push(client, instance_id, subscription_id, payload()) == ErrorCode.INVALID_REQUEST
    # As in Kafka, that refusal clears the terminating state: the next push is paced as any.
    assert push(client, instance_id, subscription_id, payload()) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    pushes = broker.telemetry()
    assert [(p.client_instance_id, p.client_id, p.terminating) for p in pushes] == [
        (instance_id, "tele-test", False), (instance_id, "tele-test", True)]
    assert [(point.name, point.value) for p in pushes for point in p.metrics] == [
        ("org.apache.kafka.producer.record.queue.time.avg", 2.5),
        ("org.apache.kafka.producer.record.queue.time.avg", 9.0)]


def test_a_short_interval_lets_the_next_push_in(kafka_broker_factory: BrokerFactory) -> None:
    started = kafka_broker_factory({"kafkapy.modules": "telemetry"})
    started.set_client_metrics("fast", interval_ms=100)
    with SimpleClient(started.bootstrap_servers) as fast:
        answer = get(fast)
        instance_id, subscription_id = answer["client_instance_id"], answer["subscription_id"]
        assert push(fast, instance_id, subscription_id, payload()) == ErrorCode.NONE
        time.sleep(0.15)  # past the 100 ms interval (waiting longer only makes it surer)
        assert push(fast, instance_id, subscription_id, payload()) == ErrorCode.NONE


def test_an_instance_goes_with_the_connection_that_made_it(broker: Broker) -> None:
    """Kafka's ClientMetricsManager forgets a client instance when the connection that made it
    closes: a client that connects again asks and pushes at once, even after a terminating push."""
    with SimpleClient(broker.bootstrap_servers, client_id="tele-test") as first:
        answer = get(first)
        instance_id, subscription_id = answer["client_instance_id"], answer["subscription_id"]
        assert push(first, instance_id, subscription_id, payload()) == ErrorCode.NONE
        # Another connection's close leaves it alone: still paced by the hour-long interval.
        with SimpleClient(broker.bootstrap_servers, client_id="tele-test") as other:
            assert get(other, instance_id)["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert get(first, instance_id)["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert push(first, instance_id, subscription_id, terminating=True) == ErrorCode.NONE
        assert push(first, instance_id, subscription_id) == ErrorCode.INVALID_REQUEST
    with SimpleClient(broker.bootstrap_servers, client_id="tele-test") as again:
        # The close is the broker's to see: asked until it has (it follows the client's at once).
        answer = broker.wait_for_sync(lambda: get(again, instance_id),
                                      lambda answer: answer["error_code"] == ErrorCode.NONE)
        # The same instance id and subscriptions give the same subscription id.
        assert (answer["client_instance_id"], answer["subscription_id"]) == (instance_id, subscription_id)
        assert push(again, instance_id, subscription_id, payload()) == ErrorCode.NONE


def test_an_ipv6_client_address_is_matched_as_java_writes_it() -> None:
    """Kafka matches ``client_source_address`` against InetAddress.getHostAddress(), which writes
    IPv6 uncompressed: a client on ::1 is 0:0:0:0:0:0:0:1, and a pattern for ``::1`` never matches."""
    config = {"kafkapy.modules": "telemetry", "listeners": "PLAINTEXT://127.0.0.1:0,V6://[::1]:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,V6:PLAINTEXT"}
    with Broker(config) as started:
        started.set_client_metrics("java-form", metrics=["java."],
                                   match=["client_source_address=0:0:0:0:0:0:0:1"])
        started.set_client_metrics("short-form", metrics=["short."], match=["client_source_address=::1"])
        with SimpleClient(started.listeners["V6"]) as v6, SimpleClient(started.listeners["PLAINTEXT"]) as v4:
            assert get(v6)["requested_metrics"] == ["java."]
            assert get(v4)["requested_metrics"] == []


@pytest.mark.parametrize("observed", [False, True], ids=["memo", "no memo"])
def test_client_software_from_the_connections_api_versions_is_matched(observed: bool) -> None:
    """Kafka matches ``client_software_name``/``_version`` against the ClientInformation the
    connection's ApiVersions (v3+) registered: "unknown" until one did, and after a v0-v2 one.
    Without observers the second connection sending the same ApiVersions bytes is answered from
    the memo (no decoding, no handler): it registers the software all the same."""
    config = {"kafkapy.modules": "telemetry"}
    if observed:  # observers see every request: nothing is memoized
        config["observer.class.names"] = "kafkapy.observers.RequestHistory"
    with Broker(config) as broker:
        assert broker.runtime is not None
        broker.set_client_metrics("ours", metrics=["ours."],
                                  match=["client_software_name=ours-.*", "client_software_version=1\\..*"])
        broker.set_client_metrics("unknown", metrics=["unknown."], match=["client_software_name=unknown"])
        declared = {"client_software_name": "ours-client", "client_software_version": "1.2"}
        for _ in range(2):  # the second is a memo replay (unless observed)
            with SimpleClient(broker.bootstrap_servers) as ours:
                assert ours.request(ApiKey.API_VERSIONS, 3, declared)["error_code"] == ErrorCode.NONE
                assert get(ours)["requested_metrics"] == ["ours."]
        memo = broker.runtime.dispatcher.memo.tables.get(ApiKey.API_VERSIONS.to_bytes(2, "big") + b"\0\3")
        assert bool(memo) is not observed
        with SimpleClient(broker.bootstrap_servers) as other:
            other.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "ours-client",
                                                   "client_software_version": "2.0"})
            assert get(other)["requested_metrics"] == []
        with SimpleClient(broker.bootstrap_servers) as silent:  # no ApiVersions at all
            assert get(silent)["requested_metrics"] == ["unknown."]
        for _ in range(2):
            with SimpleClient(broker.bootstrap_servers) as old:
                old.request(ApiKey.API_VERSIONS, 2, {})
                assert get(old)["requested_metrics"] == ["unknown."]
        for _ in range(2):  # an invalid name is refused and registers nothing: still "unknown"
            with SimpleClient(broker.bootstrap_servers) as invalid:
                refused = invalid.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "-bad-",
                                                                   "client_software_version": "1.0"})
                assert refused["error_code"] == ErrorCode.INVALID_REQUEST
                assert get(invalid)["requested_metrics"] == ["unknown."]


def test_a_client_instance_is_matched_by_its_id_as_kafka_prints_it(broker: Broker,
                                                                  client: SimpleClient) -> None:
    """``match=client_instance_id=...`` takes the id as Kafka's Uuid prints it (URL-safe base64,
    as the Java client's clientInstanceId() shows it), and the ids handed out never print with a
    leading "-"."""
    first = get(client)
    instance_id = first["client_instance_id"]
    printed = base64.urlsafe_b64encode(instance_id.bytes).decode().rstrip("=")
    assert not printed.startswith("-")
    broker.set_client_metrics("this-one", metrics=["mine."], match=[f"client_instance_id={printed}"])
    broker.set_client_metrics("hex-form", metrics=["hex."], match=[f"client_instance_id={instance_id}"])
    # The subscriptions changed: the instance is evaluated again, and asks at once.
    assert get(client, instance_id)["requested_metrics"] == ["mine.", "org.apache.kafka.producer."]


@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec_kafka_knows_is_read(broker: Broker, client: SimpleClient, codec: Compression) -> None:
    answer = get(client)
    data = compress(codec, payload(value=float(codec)))
    assert push(client, answer["client_instance_id"], answer["subscription_id"], data,
                codec=codec) == ErrorCode.NONE
    (kept,) = broker.telemetry(client_id="tele-test")
    assert kept.compression == str(codec)
    assert kept.payload == payload(value=float(codec))
    assert [point.value for point in kept.metrics] == [float(codec)]


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD],
                         ids=str)
def test_a_push_inflating_beyond_its_bound_is_too_large(broker: Broker, client: SimpleClient,
                                                        codec: Compression) -> None:
    """A push may inflate to INFLATE_FACTOR x telemetry.max.bytes (64 KiB here): a bomb within
    telemetry.max.bytes stops there, TELEMETRY_TOO_LARGE; a large honest push just inside is read."""
    limit = INFLATE_FACTOR * 4096
    bomb = snappy_claim(1 << 30) if codec == Compression.SNAPPY else compress(codec, bytes(2 * limit))
    assert len(bomb) <= 4096
    answer = get(client)
    assert push(client, answer["client_instance_id"], answer["subscription_id"], bomb,
                codec=codec) == ErrorCode.TELEMETRY_TOO_LARGE
    assert broker.telemetry() == []
    honest = payload(name="org.apache.kafka.producer." + "x" * (limit - 100))
    assert limit - 100 < len(honest) <= limit
    fresh = get(client)
    assert push(client, fresh["client_instance_id"], fresh["subscription_id"], compress(codec, honest),
                codec=codec) == ErrorCode.NONE
    (kept,) = broker.telemetry(client_id="tele-test")
    assert kept.payload == honest


def test_the_pushes_kept_are_bounded_in_bytes_the_oldest_going_first(
        broker: Broker, client: SimpleClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Large pushes from many instances push out the oldest once PUSH_BYTES_KEPT is passed, so
    hostile clients cannot fill the broker's memory through Broker.telemetry()'s history."""
    monkeypatch.setattr(telemetry_module, "PUSH_BYTES_KEPT", 3 * 20_000)
    for value in range(5):
        answer = get(client)  # a fresh instance each time: no interval to wait for
        data = payload(name="org.apache.kafka.producer." + "x" * 20_000, value=float(value))
        assert push(client, answer["client_instance_id"], answer["subscription_id"],
                    compress(Compression.ZSTD, data), codec=Compression.ZSTD) == ErrorCode.NONE
    kept = broker.telemetry(client_id="tele-test")
    assert [push.metrics[0].value for push in kept] == [3.0, 4.0]
    assert sum(len(push.payload) for push in kept) <= 3 * 20_000


@pytest.mark.parametrize(("change", "code"), [
    ({"subscription_id": 12345}, ErrorCode.UNKNOWN_SUBSCRIPTION_ID),
    ({"compression_type": 9}, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    ({"metrics": b"\x0a" * 5000}, ErrorCode.TELEMETRY_TOO_LARGE),
    ({"metrics": b"\x0a\x05ab"}, ErrorCode.INVALID_RECORD),  # not OTLP
    ({"metrics": b"garbage", "compression_type": Compression.ZSTD}, ErrorCode.INVALID_RECORD),
    ({"client_instance_id": ZERO}, ErrorCode.INVALID_REQUEST),
    ({"client_instance_id": uuid.UUID(int=1)}, ErrorCode.INVALID_REQUEST),
])
def test_refused_pushes(broker: Broker, client: SimpleClient, change: dict[str, Any],
                        code: ErrorCode) -> None:
    answer = get(client)
    request = {"client_instance_id": answer["client_instance_id"],
               "subscription_id": answer["subscription_id"], "terminating": False,
               "compression_type": Compression.NONE, "metrics": payload(), **change}
    assert client.request(ApiKey.PUSH_TELEMETRY, 0, request)["error_code"] == code
    assert broker.telemetry() == []
    # The connection and the broker go on: the next client instance pushes.
    fresh = get(client)
    assert push(client, fresh["client_instance_id"], fresh["subscription_id"], payload()) == ErrorCode.NONE


def test_set_client_metrics_checks_as_kafka_does(broker: Broker) -> None:
    with pytest.raises(SubscriptionError, match="interval must be between 100 and 3600000"):
        broker.set_client_metrics("bad", interval_ms=10)


def test_without_the_module_the_broker_says_how_to_enable_it(kafka_broker: Broker) -> None:
    with pytest.raises(RuntimeError, match=r"kafkapy\.modules"):
        kafka_broker.telemetry()


def test_subscriptions_live_at_kafkas_znode_and_reach_every_broker(zk_connect: str) -> None:
    from kazoo.client import KazooClient

    config = {"kafkapy.modules": "telemetry", "zookeeper.connect": zk_connect}
    with Broker(config) as first, Broker(config) as second:
        first.set_client_metrics("zk-sub", metrics=["org.apache.kafka.producer."], interval_ms=1000,
                                 match=["client_id=app"])
        with SimpleClient(second.bootstrap_servers, client_id="app") as client:
            # The other broker learns of it through ZooKeeper's change notification.
            second.wait_for_sync(lambda: get(client)["requested_metrics"],
                                 lambda metrics: metrics == ["org.apache.kafka.producer."])
        host, _, chroot = zk_connect.partition("/")
        zk = KazooClient(hosts=host)
        zk.start()
        try:
            data, _ = zk.get(f"/{chroot}/config/client-metrics/zk-sub")
        finally:
            zk.stop()
            zk.close()
    assert json.loads(data) == {"version": 1, "config": {"metrics": "org.apache.kafka.producer.",
                                                         "interval.ms": "1000", "match": "client_id=app"}}


ALLOWED = {ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.THROTTLING_QUOTA_EXCEEDED,
           ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
           ErrorCode.TELEMETRY_TOO_LARGE, ErrorCode.INVALID_RECORD}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(instance=st.sampled_from(["asked", "zero", "random"]),
       subscription=st.sampled_from(["given", "other"]), codec=st.integers(-128, 127),
       data=st.binary(max_size=300), terminating=st.booleans())
def test_any_push_gets_one_of_kafkas_answers(broker: Broker, client: SimpleClient, instance: str,
                                             subscription: str, codec: int, data: bytes,
                                             terminating: bool) -> None:
    with collected_errors() as errors:
        answer = get(client)
        instance_id = {"asked": answer["client_instance_id"], "zero": ZERO, "random": uuid.uuid4()}[instance]
        subscription_id = answer["subscription_id"] + (0 if subscription == "given" else 1)
        code = push(client, instance_id, subscription_id, data, codec=codec, terminating=terminating)
    assert code in ALLOWED
    assert errors.messages == []
    fresh = get(client)  # and the broker goes on
    assert fresh["error_code"] == ErrorCode.NONE
