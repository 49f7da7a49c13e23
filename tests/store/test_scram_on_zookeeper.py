"""SCRAM credentials on ZooKeeper, where Kafka keeps them: /config/users/<user> holds
{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=N"}}."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from typing import Any

from kazoo.client import KazooClient
from store_helpers import wait_until

from kafkapy import Broker
from kafkapy.client import SimpleClient
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.sasl.scram import MECHANISMS, credential_from_salted_password, parse_credential

SHA256 = 1  # Kafka's ScramMechanism code


def _settings(zk_connect: str, broker_id: int) -> dict[str, Any]:
    return {"broker.id": broker_id, "zookeeper.connect": zk_connect,
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256"}


def _zk_config(zk_connect: str, path: str) -> dict[str, Any]:
    zk = KazooClient(hosts=zk_connect)
    zk.start(timeout=10)
    try:
        data, _ = zk.get(path)
    finally:
        zk.stop()
        zk.close()
    return dict(json.loads(data))


def _describe(address: str, user: str) -> int:
    with SimpleClient(address) as client:
        body = client.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": user}]})
    return int(body["results"][0]["error_code"])


def test_credentials_are_kafkas_znode_and_reach_every_broker(zk_connect: str) -> None:
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
    with Broker(_settings(zk_connect, 1)) as first, Broker(_settings(zk_connect, 2)) as second:
        with SimpleClient(first.listeners["PLAINTEXT"]) as client:
            body = client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [
                {"name": "ali ce", "mechanism": SHA256, "iterations": 4096, "salt": salt,
                 "salted_password": salted}]})
        assert body["results"] == [{"user": "ali ce", "error_code": ErrorCode.NONE, "error_message": None}]
        # Kafka's path (the name sanitized as Kafka's Sanitizer does) and JSON.
        stored = _zk_config(zk_connect, "/config/users/ali%20ce")
        assert stored["version"] == 1 and list(stored["config"]) == ["SCRAM-SHA-256"]
        expected = credential_from_salted_password(MECHANISMS["SCRAM-SHA-256"], salt, salted, 4096)
        assert stored["config"]["SCRAM-SHA-256"] == expected.to_kafka()
        salt_b64 = base64.b64encode(salt).decode()
        assert stored["config"]["SCRAM-SHA-256"].startswith(f"salt={salt_b64},stored_key=")
        # The other broker learns it from the change notification.
        wait_until(lambda: _describe(second.listeners["PLAINTEXT"], "ali ce") == ErrorCode.NONE, timeout=15)


def test_a_credential_written_as_kafka_writes_it_is_served(zk_connect: str) -> None:
    """What kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[...]' leaves in ZooKeeper, read back."""
    salt = b"kafka-salt-bytes"
    credential = credential_from_salted_password(MECHANISMS["SCRAM-SHA-256"], salt,
                                                 hashlib.pbkdf2_hmac("sha256", b"pw", salt, 8192), 8192)
    # Through the root: the test's chroot does not exist yet (a client of a missing chroot warns).
    hosts, _, chroot = zk_connect.partition("/")
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=10)
    try:
        config = {"SCRAM-SHA-256": credential.to_kafka(), "producer_byte_rate": "1048576"}
        zk.create(f"/{chroot}/config/users/bob", json.dumps({"version": 1, "config": config}).encode(),
                  makepath=True)
    finally:
        zk.stop()
        zk.close()
    with Broker(_settings(zk_connect, 1)) as broker:
        with SimpleClient(broker.listeners["PLAINTEXT"]) as client:
            (result,) = client.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})["results"]
        assert result["user"] == "bob"
        assert result["credential_infos"] == [{"mechanism": SHA256, "iterations": 8192}]
        # A deletion keeps the user's quota beside it.
        with SimpleClient(broker.listeners["PLAINTEXT"]) as client:
            client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
                        {"deletions": [{"name": "bob", "mechanism": SHA256}], "upsertions": []})
        assert _zk_config(zk_connect, "/config/users/bob")["config"] == {"producer_byte_rate": "1048576"}
    assert parse_credential(credential.to_kafka()) == credential
