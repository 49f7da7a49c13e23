"""kafkapy's protocol client speaking the share APIs, for the share tests."""

from __future__ import annotations

import uuid
from typing import Any

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import wait_until

__all__ = ["LOCK_MS", "TOPIC", "ack_error", "acquired", "ready", "setup_topic", "share_fetch", "topic_id_of"]

TOPIC = "q"
LOCK_MS = 30_000  # Kafka's group.share.record.lock.duration.ms


def setup_topic(broker: Broker, records: int) -> tuple[SimpleClient, uuid.UUID]:
    broker.seed({TOPIC: {"partitions": 1, "records": [{"value": f"v{i}"} for i in range(records)]}})
    client = SimpleClient(broker.bootstrap_servers)
    return client, topic_id_of(client)


def topic_id_of(client: SimpleClient) -> uuid.UUID:
    metadata = client.request(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                                    "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False})
    topic_id: uuid.UUID = metadata["topics"][0]["topic_id"]
    return topic_id


def share_fetch(client: SimpleClient, topic_id: uuid.UUID, member: str, epoch: int,
           acks: list[dict[str, Any]] | None = None, max_wait_ms: int = 0) -> dict[str, Any]:
    body = {"group_id": "g", "member_id": member, "share_session_epoch": epoch, "max_wait_ms": max_wait_ms,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": acks or []}]}],
            "forgotten_topics_data": []}
    return dict(client.request(ApiKey.SHARE_FETCH, 1, body))


def ack_error(response: dict[str, Any]) -> int:
    code: int = response["responses"][0]["partitions"][0]["acknowledge_error_code"]
    return code


def acquired(response: dict[str, Any]) -> list[tuple[int, int, int]]:
    return [(a["first_offset"], a["last_offset"], a["delivery_count"])
            for t in response["responses"] for p in t["partitions"] for a in p["acquired_records"]]


def ready(client: SimpleClient, *groups: str) -> None:
    """FindCoordinator made __consumer_offsets, and the groups' partitions are loaded."""
    for group in groups:
        wait_until(lambda g=group: client.request(ApiKey.FIND_COORDINATOR, 4, {
            "key_type": 0, "coordinator_keys": [g]})["coordinators"][0]["error_code"] == ErrorCode.NONE,
            what=f"the coordinator of {group}")
        wait_until(lambda g=group: client.request(ApiKey.OFFSET_FETCH, 7, {
            "group_id": g, "topics": None, "require_stable": False})["error_code"] == ErrorCode.NONE,
            what=f"{group}'s partition loaded")
