"""Offsets and groups live in __consumer_offsets: with log.dirs they outlive the broker.

A broker is stopped and a new one started on the same directories (a fresh in-memory store, so
the topics are made again, as after `kafkapy serve` restarts without ZooKeeper): the coordinator
replays the group's partition and answers the commits made before the restart, and the group's
metadata (generation, protocol) comes back with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import wait_until


def _find(client: SimpleClient, group: str) -> Any:
    return wait_until(lambda: (lambda a: a if a["error_code"] == ErrorCode.NONE else None)(
        client.request(ApiKey.FIND_COORDINATOR, 3,
                       {"key": group, "key_type": CoordinatorKeyType.GROUP})), what="a coordinator")


def _fetch(client: SimpleClient, group: str) -> Any:
    def answered() -> Any:
        answer = client.request(ApiKey.OFFSET_FETCH, 7, {"group_id": group, "topics": None})
        return answer if answer["error_code"] == ErrorCode.NONE else None
    return wait_until(answered, what="offsets loaded")


def test_offsets_and_group_survive_a_restart_with_log_dirs(tmp_path: Path) -> None:
    settings = {"broker.id": 1, "log.dirs": str(tmp_path), "offsets.topic.num.partitions": 3}
    with Broker(settings) as broker, SimpleClient(broker.bootstrap_servers) as client:
        client.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "t", "num_partitions": 2,
                                                             "replication_factor": 1}], "timeout_ms": 5000})
        _find(client, "g")
        first = client.request(ApiKey.JOIN_GROUP, 3, {
            "group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"m"}]})
        assert first["error_code"] == ErrorCode.NONE
        synced = client.request(ApiKey.SYNC_GROUP, 3, {
            "group_id": "g", "generation_id": first["generation_id"], "member_id": first["member_id"],
            "assignments": [{"member_id": first["member_id"], "assignment": b"a"}]})
        assert synced["error_code"] == ErrorCode.NONE
        committed = client.request(ApiKey.OFFSET_COMMIT, 7, {
            "group_id": "g", "generation_id_or_member_epoch": first["generation_id"],
            "member_id": first["member_id"], "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 17, "committed_metadata": "x"},
                {"partition_index": 1, "committed_offset": 4, "committed_metadata": None}]}]})
        assert {p["error_code"] for p in committed["topics"][0]["partitions"]} == {ErrorCode.NONE}
        leaving = [{"member_id": first["member_id"]}]
        client.request(ApiKey.LEAVE_GROUP, 3, {"group_id": "g", "members": leaving})
    with Broker(settings) as broker, SimpleClient(broker.bootstrap_servers) as client:
        _find(client, "g")  # makes __consumer_offsets again over the same directories
        fetched = _fetch(client, "g")
        assert [(p["partition_index"], p["committed_offset"], p["metadata"])
                for p in fetched["topics"][0]["partitions"]] == [(0, 17, "x"), (1, 4, "")]
        described = client.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"]})["groups"][0]
        assert (described["group_state"], described["protocol_type"]) == ("Empty", "consumer")
        rejoined = client.request(ApiKey.JOIN_GROUP, 3, {
            "group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"m"}]})
        # generation 1 formed the group, 2 emptied it; the restarted coordinator goes on from there
        assert rejoined["generation_id"] == 3
