"""BROKER_LOGGER resources (KIP-412): the broker's loggers described and their levels changed at
run time, through kafka-python's admin and over the wire with Kafka's refusals
(ConfigHelper.describeConfigs, RuntimeLoggerManager)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from kafkapy.configs.broker_loggers import TRACE
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket

BROKER_LOGGER = 8
SET, DELETE, APPEND = 0, 1, 2
LOGGER = "kafkapy.tests.broker_loggers"  # a logger of this test's own, so no other one's level moves


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    made = logging.getLogger(LOGGER)
    made.setLevel(logging.NOTSET)
    yield made
    made.setLevel(logging.NOTSET)


def test_kafka_python_describes_sets_and_resets_a_level(logger: logging.Logger) -> None:
    with Broker({"broker.id": 1}) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=10_000)
        try:
            resource = ConfigResource(ConfigResourceType.BROKER_LOGGER, "1")
            logging.getLogger(LOGGER.rsplit(".", 1)[0]).setLevel(logging.ERROR)
            loggers = admin.describe_configs([resource])["broker_logger"]["1"]
            # without a level of its own a logger shows the one it inherits (its parent's ERROR)
            assert loggers[LOGGER]["value"] == "ERROR"
            assert "root" in loggers
            assert (loggers[LOGGER]["config_source"], loggers[LOGGER]["read_only"]) == (
                "DYNAMIC_BROKER_LOGGER_CONFIG", False)
            assert admin.alter_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, "1",
                                                       {LOGGER: "TRACE"})]) == {"broker_logger": {"1": "OK"}}
            assert logger.level == TRACE
            assert admin.describe_configs([resource])["broker_logger"]["1"][LOGGER]["value"] == "TRACE"
            refused = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, "1",
                                                          {LOGGER: "debug"})])["broker_logger"]["1"]
            assert "Cannot set the log level of kafkapy.tests.broker_loggers to debug" in refused
            assert logger.level == TRACE
            assert admin.reset_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, "1",
                                                       {LOGGER: None})]) == {"broker_logger": {"1": "OK"}}
            assert logger.level == logging.NOTSET
        finally:
            admin.close()
            logging.getLogger(LOGGER.rsplit(".", 1)[0]).setLevel(logging.NOTSET)


def alter(conn: KafkaSocket, name: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False,
          api: ApiKey = ApiKey.INCREMENTAL_ALTER_CONFIGS) -> tuple[int, str | None]:
    configs: list[dict[str, Any]] = [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]
    body = {"validate_only": validate_only,
            "resources": [{"resource_type": BROKER_LOGGER, "resource_name": name, "configs": configs}]}
    [answer] = conn.call(api, 1, body).body["responses"]
    return answer["error_code"], answer["error_message"]


def describe(conn: KafkaSocket, name: str, keys: list[str] | None = None
             ) -> tuple[int, str | None, dict[str, str]]:
    wanted = {"resource_type": BROKER_LOGGER, "resource_name": name, "configuration_keys": keys}
    body = {"resources": [wanted], "include_synonyms": True, "include_documentation": True}
    [result] = conn.call(ApiKey.DESCRIBE_CONFIGS, 4, body).body["results"]
    return result["error_code"], result["error_message"], {e["name"]: e["value"] for e in result["configs"]}


def test_kafkas_refusals(logger: logging.Logger) -> None:
    with Broker({"broker.id": 1}) as b, KafkaSocket(b.bootstrap_servers) as c:
        logger.setLevel(logging.INFO)
        assert describe(c, "1", [LOGGER, "no.such.logger"]) == (0, None, {LOGGER: "INFO"})
        logger.setLevel(logging.NOTSET)
        assert describe(c, "") == (ErrorCode.INVALID_REQUEST, "Broker id must not be empty", {})
        assert describe(c, "2") == (ErrorCode.INVALID_REQUEST,
                                    "Unexpected broker id, expected 1 but received 2", {})
        assert alter(c, "x", [(LOGGER, SET, "INFO")]) == (ErrorCode.INVALID_REQUEST,
                                                           "Node id must be an integer, but it is: x")
        assert alter(c, "2", [(LOGGER, SET, "INFO")]) == (ErrorCode.INVALID_REQUEST,
                                                           "Unexpected node id. Expected 1, but received 2")
        assert alter(c, "1", [("no.such.logger", SET, "INFO")]) == (ErrorCode.INVALID_CONFIG,
                                                                     "Logger no.such.logger does not exist!")
        assert alter(c, "1", [("root", DELETE, None)]) == (
            ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
        assert alter(c, "1", [(LOGGER, APPEND, "INFO")]) == (
            ErrorCode.INVALID_REQUEST, "APPEND operation is not allowed for the BROKER_LOGGER resource")
        # every op is checked before any applies; validate_only applies none
        both = [(LOGGER, SET, "INFO"), ("no.such.logger", SET, "INFO")]
        assert alter(c, "1", both)[0] == ErrorCode.INVALID_CONFIG
        assert alter(c, "1", [(LOGGER, SET, "ERROR")], validate_only=True) == (0, None)
        assert logger.level == logging.NOTSET
        # the legacy AlterConfigs does not take loggers
        resource = {"resource_type": BROKER_LOGGER, "resource_name": "1",
                    "configs": [{"name": LOGGER, "value": "INFO"}]}
        [answer] = c.call(ApiKey.ALTER_CONFIGS, 1, {"validate_only": False, "resources": [resource]}).body[
            "responses"]
        assert (answer["error_code"], answer["error_message"]) == (ErrorCode.INVALID_REQUEST,
                                                                   "Unknown resource type 8")
        assert logger.level == logging.NOTSET


def test_loggers_need_the_clusters_configs_operations(logger: logging.Logger) -> None:
    config = {"broker.id": 1, "authorizer.class.name": "allowlist", "allowlist.rules": "*@*:DESCRIBE_CONFIGS"}
    with Broker(config) as b, KafkaSocket(b.bootstrap_servers) as c:
        assert describe(c, "1", [LOGGER])[0] == ErrorCode.NONE
        assert alter(c, "1", [(LOGGER, SET, "INFO")])[0] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert logger.level == logging.NOTSET
    with Broker({**config, "allowlist.rules": "*@*:CREATE"}) as b, KafkaSocket(b.bootstrap_servers) as c:
        assert describe(c, "1", [LOGGER])[0] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
