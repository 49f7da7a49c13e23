"""The kafka_topic fixture: a fresh topic per test on the test's broker or the session's, deleted after it."""

from __future__ import annotations

import pytest

from kafkapy.embedded import Broker
from kafkapy.faults import ApiKey, ErrorAnswer, ErrorCode, FaultRule, FaultRules
from kafkapy.server.clock import VirtualClock
from kafkapy.testing import KafkaTopic

SEEN: list[str] = []  # the names the tests below were given, in order


def partitions_of(broker: Broker, name: str) -> int | None:
    info = broker._running().cluster.topics.get(name)
    return None if info is None else len(info.partitions)


def test_first_use_gets_a_topic_of_its_own(kafka_topic: KafkaTopic, kafka_session_broker: Broker) -> None:
    SEEN.append(kafka_topic.name)
    assert kafka_topic.broker is kafka_session_broker and str(kafka_topic) == kafka_topic.name
    assert kafka_topic.name.startswith("test_first_use_gets_a_topic_of_its_own-")
    assert partitions_of(kafka_session_broker, kafka_topic.name) == kafka_topic.partitions == 1

    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka_topic.bootstrap_servers, "linger.ms": 0})
    producer.produce(kafka_topic.name, value=b"mine")
    assert producer.flush(20) == 0
    assert [r.value for r in kafka_session_broker.records(kafka_topic.name)] == [b"mine"]


def test_second_use_gets_another_and_the_first_is_gone(kafka_topic: KafkaTopic,
                                                       kafka_session_broker: Broker) -> None:
    assert SEEN and kafka_topic.name != SEEN[0]
    assert partitions_of(kafka_session_broker, SEEN[0]) is None
    assert kafka_session_broker.records(SEEN[0]) == []
    assert kafka_session_broker.records(kafka_topic.name) == []  # nothing of the first test's here


@pytest.mark.kafka_topic(partitions=3, config={"cleanup.policy": "compact"},
                         records=[{"key": "k", "value": "v", "partition": 2}])
def test_a_marker_sets_partitions_config_and_records(kafka_topic: KafkaTopic,
                                                     kafka_session_broker: Broker) -> None:
    assert partitions_of(kafka_session_broker, kafka_topic.name) == kafka_topic.partitions == 3
    assert kafka_session_broker.snapshot().topics[kafka_topic.name]["config"] == {"cleanup.policy": "compact"}
    assert [(r.partition, r.key) for r in kafka_session_broker.records(kafka_topic.name)] == [(2, b"k")]


@pytest.mark.parametrize("kafka_topic", [2, {"partitions": 4}], indirect=True)
def test_indirect_parametrization_sets_partitions(kafka_topic: KafkaTopic,
                                                  kafka_session_broker: Broker) -> None:
    assert partitions_of(kafka_session_broker, kafka_topic.name) == kafka_topic.partitions in (2, 4)
    assert "[" not in kafka_topic.name  # the parameter id is made a legal topic name


@pytest.mark.kafka_topic(config={"retention.ms": 60_000}, records=[{"value": "old"}])
def test_with_kafka_clock_the_topic_is_on_the_clocks_broker(
        kafka_clock: VirtualClock, kafka_topic: KafkaTopic, kafka_broker: Broker,
        kafka_session_broker: Broker) -> None:
    """A test asking for kafka_clock gets its topic on kafka_broker, the broker on that clock, so
    advance() reaches the topic's timers (retention here); it was refused at setup, the session's
    broker keeping real time, and with kafka_broker alone the topic went to the session's broker,
    where kafka_broker.records() found nothing of it."""
    assert kafka_topic.broker is kafka_broker
    assert partitions_of(kafka_session_broker, kafka_topic.name) is None
    assert [r.value for r in kafka_broker.records(kafka_topic.name)] == [b"old"]
    kafka_clock.advance(61 + 300)  # retention.ms, then log.retention.check.interval.ms (5 min)
    assert kafka_broker.records(kafka_topic.name) == []


def test_beside_kafka_broker_the_topic_is_on_it(kafka_broker: Broker, kafka_topic: KafkaTopic,
                                                kafka_session_broker: Broker) -> None:
    assert kafka_topic.broker is kafka_broker
    assert kafka_topic.bootstrap_servers == kafka_broker.bootstrap_servers
    assert partitions_of(kafka_broker, kafka_topic.name) == 1
    assert partitions_of(kafka_session_broker, kafka_topic.name) is None


def test_beside_kafka_cluster_the_topic_is_on_it(kafka_cluster: Broker, kafka_topic: KafkaTopic) -> None:
    assert kafka_topic.broker is kafka_cluster and partitions_of(kafka_cluster, kafka_topic.name) == 1


def test_beside_kafka_faults_the_topic_is_on_the_faulted_broker(kafka_topic: KafkaTopic,
                                                                kafka_faults: FaultRules) -> None:
    """A rule added through kafka_faults reaches the topic's requests: both are kafka_broker's,
    where the topic was on the session's broker and the rules on another, so none ever fired."""
    from confluent_kafka import Producer

    handle = kafka_faults.add(FaultRule(ErrorAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER), api=ApiKey.PRODUCE,
                                        topic=kafka_topic.name, times=1))
    producer = Producer({"bootstrap.servers": kafka_topic.bootstrap_servers, "linger.ms": 0})
    producer.produce(kafka_topic.name, value=b"retried")
    assert producer.flush(20) == 0
    assert handle.fired == 1
    assert [r.value for r in kafka_topic.broker.records(kafka_topic.name)] == [b"retried"]
