"""group.coordinator.rebalance.protocols: the group types the coordinator serves, checked and
gated as Kafka's KafkaConfig and KafkaApis do."""

from __future__ import annotations

import re
import time

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.config import ConfigError

TIMEOUT_S = 20


def _heartbeat(broker: Broker) -> ErrorCode:
    """A first ConsumerGroupHeartbeat's answer, once FindCoordinator has made __consumer_offsets."""
    deadline = time.monotonic() + TIMEOUT_S
    with SimpleClient(broker.bootstrap_servers) as client:
        client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
        while True:
            answer = client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
                "group_id": "g", "member_id": "m-1", "member_epoch": 0, "rebalance_timeout_ms": 30_000,
                "subscribed_topic_names": ["t"], "server_assignor": None, "topic_partitions": [],
                "instance_id": None, "rack_id": None})
            code = ErrorCode(answer["error_code"])
            if code not in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) \
                    or time.monotonic() > deadline:
                return code
            time.sleep(0.05)


def test_group_coordinator_rebalance_protocols_gates_consumer_groups() -> None:
    """Kafka's KafkaApis.isConsumerGroupProtocolEnabled: ConsumerGroupHeartbeat is refused
    UNSUPPORTED_VERSION when the list has no consumer; its default (4.0's) has it."""
    with Broker() as broker:
        assert _heartbeat(broker) == ErrorCode.NONE
    with Broker({"group.coordinator.rebalance.protocols": "classic"}) as broker:
        assert _heartbeat(broker) == ErrorCode.UNSUPPORTED_VERSION
    with pytest.raises(ConfigError, match=re.escape("Disabling the 'CLASSIC' protocol is not supported.")), \
            Broker({"group.coordinator.rebalance.protocols": "consumer"}):
        pass
    with pytest.raises(ConfigError, match=r"group\.coordinator\.rebalance\.protocols"), \
            Broker({"group.coordinator.rebalance.protocols": "classic,streams"}):
        pass
