"""kafka-python's KafkaAdminClient.wait_for_topics against a three-broker cluster: it returns once
every partition of the topics has a leader, and times out naming what is missing, in Kafka's
Metadata terms: an unknown topic (UNKNOWN_TOPIC_OR_PARTITION), a partition whose only replica's
broker is down (LEADER_NOT_AVAILABLE, leader -1); once that broker is back the wait returns."""

from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaTimeoutError

from kafkapy.embedded import Broker

TIMEOUT_S = 20


def test_wait_for_topics_waits_for_every_partitions_leader() -> None:
    with Broker({"broker.id": 1, "auto.leader.rebalance.enable": False}, brokers=3) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers,
                                 request_timeout_ms=TIMEOUT_S * 1000)
        try:
            admin.create_topics([NewTopic("wide", 6, 3), NewTopic("single", 1, 1)])
            admin.wait_for_topics(["wide", "single"], timeout_ms=TIMEOUT_S * 1000)
            with pytest.raises(KafkaTimeoutError, match="'absent': 'UnknownTopicOrPartitionError'"):
                admin.wait_for_topics(["wide", "absent"], timeout_ms=500)

            [partition] = admin.describe_topics(["single"])[0]["partitions"]
            index = [member.broker_id for member in cluster.brokers].index(partition["leader_id"])
            cluster.stop_broker(index)
            admin.wait_for_topics(["wide"], timeout_ms=TIMEOUT_S * 1000)  # its leaders moved
            with pytest.raises(KafkaTimeoutError, match="'single': 'p0=LeaderNotAvailableError'"):
                admin.wait_for_topics(["wide", "single"], timeout_ms=500)
            cluster.start_broker(index)
            admin.wait_for_topics(["wide", "single"], timeout_ms=TIMEOUT_S * 1000)
        finally:
            admin.close()
