"""librdkafka (confluent-kafka) pushes its metrics to kafkapy (KIP-714), and a test reads them."""

from __future__ import annotations

import gc
import time

from kafkapy.embedded import Broker
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.telemetry import TelemetryPush
from kafkapy.testing import BrokerFactory

TIMEOUT_S = 10


def telemetry_broker(factory: BrokerFactory) -> Broker:
    return factory({"kafkapy.modules": "telemetry"})


def pushed_names(pushes: list[TelemetryPush]) -> set[str]:
    return {name for push in pushes for name in push.names()}


def test_a_producer_and_a_consumer_push_what_they_are_subscribed_to(
        kafka_broker_factory: BrokerFactory) -> None:
    from confluent_kafka import Consumer, Producer

    broker = telemetry_broker(kafka_broker_factory)
    broker.set_client_metrics("apps", metrics=["org.apache.kafka.producer.", "org.apache.kafka.consumer."],
                              interval_ms=200, match=["client_id=app-.*"])
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "app-producer"})
    for index in range(20):
        producer.produce("metered", str(index).encode())
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "app-consumer",
                         "group.id": "metered", "auto.offset.reset": "earliest"})
    consumer.subscribe(["metered"])
    try:
        read = 0
        deadline = time.monotonic() + TIMEOUT_S
        while read < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            read += message is not None and message.error() is None
        assert read == 20
        names = broker.wait_for_sync(
            lambda: pushed_names(broker.telemetry(client_id="app-consumer")),
            lambda seen: any(name.startswith("org.apache.kafka.consumer.") for name in seen))
    finally:
        consumer.close()
    # The producer pushes every 200 ms on librdkafka's own thread: waited for, not assumed to have
    # pushed before the consumer did.
    producer_names = broker.wait_for_sync(
        lambda: pushed_names(broker.telemetry(client_id="app-producer")),
        lambda seen: "org.apache.kafka.producer.record.queue.time.avg" in seen)
    assert all(name.startswith("org.apache.kafka.producer.") for name in producer_names)
    assert all(name.startswith("org.apache.kafka.consumer.") for name in names)
    # One client instance each, every push answering the subscription it was handed.
    pushes = broker.telemetry()
    assert {push.client_id for push in pushes} == {"app-producer", "app-consumer"}
    assert len({push.client_instance_id for push in pushes}) == 2
    assert all(push.compression == "zstd" for push in pushes)  # the first codec kafkapy offers


def test_a_client_no_subscription_matches_pushes_nothing(kafka_broker_factory: BrokerFactory) -> None:
    from confluent_kafka import Producer

    broker = telemetry_broker(kafka_broker_factory)
    broker.set_client_metrics("others", metrics=["*"], interval_ms=100, match=["client_id=someone-else"])
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "unmatched"})
    producer.produce("quiet", b"x")
    assert producer.flush(TIMEOUT_S) == 0
    time.sleep(1.0)  # ten of the subscription's intervals: a matched client would have pushed
    assert broker.telemetry() == []


def test_a_closing_producer_sends_its_last_push(kafka_broker_factory: BrokerFactory) -> None:
    from confluent_kafka import Producer

    broker = telemetry_broker(kafka_broker_factory)
    broker.set_client_metrics("all", metrics=["*"], interval_ms=500)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "closing"})
    producer.produce("closing", b"x")
    assert producer.flush(TIMEOUT_S) == 0
    broker.wait_for_sync(lambda: broker.telemetry(client_id="closing"))  # the first push
    del producer
    gc.collect()  # the handle is destroyed: librdkafka pushes once more, terminating
    pushes = broker.wait_for_sync(lambda: broker.telemetry(client_id="closing"),
                                  lambda seen: any(push.terminating for push in seen))
    assert [push.terminating for push in pushes][-1] is True


def test_a_client_on_ipv6_is_matched_by_its_address_as_java_writes_it(
        kafka_broker_factory: BrokerFactory) -> None:
    """librdkafka connected over ::1 gets the subscription whose ``match`` names the address as
    Kafka writes it (0:0:0:0:0:0:0:1), and pushes."""
    from confluent_kafka import Producer

    broker = kafka_broker_factory({"kafkapy.modules": "telemetry",
                                   "listeners": "PLAINTEXT://127.0.0.1:0,V6://[::1]:0",
                                   "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,V6:PLAINTEXT"})
    broker.set_client_metrics("v6", metrics=["org.apache.kafka.producer."], interval_ms=200,
                              match=["client_source_address=0:0:0:0:0:0:0:1"])
    producer = Producer({"bootstrap.servers": broker.listeners["V6"], "client.id": "v6-producer"})
    producer.produce("over-v6", b"x")
    assert producer.flush(TIMEOUT_S) == 0
    pushes = broker.wait_for_sync(lambda: broker.telemetry(client_id="v6-producer"))
    assert all(name.startswith("org.apache.kafka.producer.") for name in pushed_names(pushes))


def test_librdkafka_is_matched_by_the_software_its_api_versions_declared(
        kafka_broker_factory: BrokerFactory) -> None:
    """confluent-kafka declares client software "confluent-kafka-python", version
    "<its version>-rdkafka-<librdkafka's>", in ApiVersions v3: a subscription matching that reaches
    it, one naming other software (with every metric) does not."""
    import confluent_kafka
    from confluent_kafka import Producer

    broker = telemetry_broker(kafka_broker_factory)
    version = f"{confluent_kafka.__version__}-rdkafka-{confluent_kafka.libversion()[0]}"
    escaped = version.replace(".", "[.]")
    broker.set_client_metrics("python", metrics=["org.apache.kafka.producer.record.queue.time."],
                              interval_ms=200, match=["client_software_name=confluent-kafka-python",
                                                      f"client_software_version={escaped}"])
    broker.set_client_metrics("java", metrics=["*"], interval_ms=100,
                              match=["client_software_name=apache-kafka-java"])
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "by-software"})
    producer.produce("software", b"x")
    assert producer.flush(TIMEOUT_S) == 0
    pushes = broker.wait_for_sync(lambda: broker.telemetry(client_id="by-software"))
    names = pushed_names(pushes)
    assert names and all(name.startswith("org.apache.kafka.producer.record.queue.time.") for name in names)


def test_a_client_with_metrics_push_disabled_never_asks(kafka_broker_factory: BrokerFactory) -> None:
    """librdkafka's ``enable.metrics.push=false`` (default true): no GetTelemetrySubscriptions, so
    no push, whatever subscription matches it."""
    from confluent_kafka import Producer

    broker = telemetry_broker(kafka_broker_factory)
    broker.set_client_metrics("all", metrics=["*"], interval_ms=100)
    quiet = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "opted-out",
                      "enable.metrics.push": False})
    pushing = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "opted-in"})
    for producer in (quiet, pushing):
        producer.produce("opt", b"x")
        assert producer.flush(TIMEOUT_S) == 0
    # The default client pushes within a few of the 100 ms intervals; by then the other would have.
    broker.wait_for_sync(lambda: broker.telemetry(client_id="opted-in"))
    time.sleep(0.5)
    assert broker.telemetry(client_id="opted-out") == []
    asked = {entry.client_id for entry in broker.history()
             if entry.api_key == ApiKey.GET_TELEMETRY_SUBSCRIPTIONS}
    assert asked == {"opted-in"}
