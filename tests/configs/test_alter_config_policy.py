"""alter.config.policy.class.name (Kafka's AlterConfigPolicy): TOPIC and BROKER alterations, both
APIs, validate_only too, are put to the policy once kafkapy's own checks pass; a refusal is
POLICY_VIOLATION with the policy's message and changes nothing (ZkAdminManager.validateConfigPolicy)."""

from __future__ import annotations

import sys
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
import config_policies
from server_wire import KafkaSocket

TOPIC, BROKER = 2, 4


def test_a_refused_alteration_is_a_policy_violation() -> None:
    config_policies.SEEN.clear()
    config = {"broker.id": 1, "alter.config.policy.class.name": "config_policies:NoShortRetention"}
    with Broker(config) as b, KafkaSocket(b.bootstrap_servers) as c:
        b.seed({"t": {"partitions": 1}})
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        entry = ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.TOPIC, "t", incremental_configs=[entry])
        [future] = admin.incremental_alter_configs([resource], request_timeout=10).values()
        try:
            future.result(timeout=10)
            raise AssertionError("the policy should have refused")
        except KafkaException as refused:
            error = refused.args[0]
            assert (error.code(), error.str()) == (KafkaError.POLICY_VIOLATION,
                                                   "retention of 1000 ms is too short")
        seen = config_policies.SEEN[-1]
        assert (seen.resource_type, seen.resource_name) == (TOPIC, "t")
        assert dict(seen.configs) == {"retention.ms": "1000"}
        assert b.store is not None and b.store.entity_config("topics/t") == {}
        # the legacy API, a BROKER resource, validate_only: asked the same; an allowed value passes
        legacy = {"validate_only": True, "resources": [
            {"resource_type": BROKER, "resource_name": "1",
             "configs": [{"name": "log.retention.ms", "value": "5"}]},
            {"resource_type": TOPIC, "resource_name": "t",
             "configs": [{"name": "retention.ms", "value": "7200000"}]}]}
        answer = [(r["resource_type"], r["error_code"], r["error_message"])
                  for r in c.call(ApiKey.ALTER_CONFIGS, 1, legacy).body["responses"]]
        assert answer == [(BROKER, ErrorCode.POLICY_VIOLATION, "retention of 5 ms is too short"),
                          (TOPIC, 0, None)]
        assert b.store.entity_config("topics/t") == {}  # validate_only
        # kafkapy's own checks come first: an invalid value is INVALID_CONFIG, not put to the policy
        asked = len(config_policies.SEEN)
        bad = {"validate_only": False, "resources": [
            {"resource_type": TOPIC, "resource_name": "t",
             "configs": [{"name": "retention.ms", "value": "-7"}]}]}
        [result] = c.call(ApiKey.ALTER_CONFIGS, 1, bad).body["responses"]
        assert result["error_code"] == ErrorCode.INVALID_CONFIG and len(config_policies.SEEN) == asked
