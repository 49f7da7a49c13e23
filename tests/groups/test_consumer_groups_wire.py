"""KIP-848 consumer groups in the groups module, on the wire: ConsumerGroupHeartbeat and
ConsumerGroupDescribe behind FindCoordinator, OffsetCommit/OffsetFetch v9 member epochs, the one
group-id namespace shared with classic groups, DescribeGroups/ListGroups/DeleteGroups rows, and
session expiry on the broker's clock. Expected codes are Kafka 4.0's for each case."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType, GroupsModule
from kafkapy.groups.retention import DEFAULT_OFFSETS_RETENTION_MINUTES, retention_ms
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import wait_until

SESSION_MS = 400


@pytest.fixture
def broker() -> Iterator[Broker]:
    # A session this short needs bounds that allow it, and a heartbeat interval below it (Kafka
    # refuses to start otherwise).
    with Broker({"broker.id": 1, "offsets.topic.num.partitions": 3,
                 "group.consumer.session.timeout.ms": SESSION_MS,
                 "group.consumer.min.session.timeout.ms": SESSION_MS,
                 "group.consumer.heartbeat.interval.ms": SESSION_MS // 4,
                 "group.consumer.min.heartbeat.interval.ms": SESSION_MS // 4}) as running:
        yield running


@pytest.fixture
def client(broker: Broker) -> Iterator[SimpleClient]:
    with SimpleClient(broker.bootstrap_servers) as simple:
        simple.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "t", "num_partitions": 2,
                                                             "replication_factor": 1}], "timeout_ms": 5000})
        yield simple


def ready(client: SimpleClient, group: str) -> None:
    wait_until(lambda: client.request(ApiKey.FIND_COORDINATOR, 3,
                                      {"key": group, "key_type": CoordinatorKeyType.GROUP}
                                      )["error_code"] == ErrorCode.NONE, what="a coordinator")


def heartbeat(client: SimpleClient, group: str, member_id: str, epoch: int, **fields: Any) -> Any:
    body = {"group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None, **fields}
    return client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)


def joined(client: SimpleClient, group: str) -> Any:
    ready(client, group)
    answer = heartbeat(client, group, str(uuid.uuid4()), 0, rebalance_timeout_ms=10000,
                       subscribed_topic_names=["t"], topic_partitions=[])
    assert answer["error_code"] == ErrorCode.NONE, answer
    return answer


def describe(client: SimpleClient, group: str) -> Any:
    body = {"group_ids": [group], "include_authorized_operations": False}
    return client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, body)["groups"][0]


def commit(client: SimpleClient, group: str, epoch: int, member_id: str, version: int = 9) -> ErrorCode:
    answer = client.request(ApiKey.OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member_id,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                 "committed_metadata": ""}]}]})
    return ErrorCode(answer["topics"][0]["partitions"][0]["error_code"])


def fetch(client: SimpleClient, group: str, member_id: str | None = None, epoch: int = -1) -> Any:
    return client.request(ApiKey.OFFSET_FETCH, 9, {"groups": [
        {"group_id": group, "member_id": member_id, "member_epoch": epoch,
         "topics": [{"name": "t", "partition_indexes": [0]}]}], "require_stable": False})["groups"][0]


def test_heartbeat_and_describe_through_the_module(client: SimpleClient) -> None:
    member = joined(client, "g")
    assert member["member_epoch"] == 1
    assert sorted(p for tp in member["assignment"]["topic_partitions"] for p in tp["partitions"]) == [0, 1]
    group = describe(client, "g")
    assert (group["error_code"], group["group_state"], group["group_epoch"]) == (ErrorCode.NONE, "Stable", 1)
    assert [m["member_id"] for m in group["members"]] == [member["member_id"]]
    assert describe(client, "nobody")["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_offset_commit_and_fetch_check_the_member_epoch(client: SimpleClient) -> None:
    member = joined(client, "g")
    member_id, epoch = member["member_id"], member["member_epoch"]
    assert commit(client, "g", epoch + 1, member_id) == ErrorCode.STALE_MEMBER_EPOCH
    assert commit(client, "g", epoch, "stranger") == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(client, "g", -1, "") == ErrorCode.UNKNOWN_MEMBER_ID  # not an empty group
    assert commit(client, "g", epoch, member_id, version=8) == ErrorCode.UNSUPPORTED_VERSION
    assert commit(client, "g", epoch, member_id) == ErrorCode.NONE
    assert fetch(client, "g", member_id, epoch + 1)["error_code"] == ErrorCode.STALE_MEMBER_EPOCH
    assert fetch(client, "g", "stranger", epoch)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    fetched = fetch(client, "g", member_id, epoch)
    assert fetched["error_code"] == ErrorCode.NONE
    assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 5
    assert fetch(client, "g")["topics"][0]["partitions"][0]["committed_offset"] == 5  # an admin's fetch


def test_one_namespace_with_classic_groups(client: SimpleClient) -> None:
    joined(client, "kip848")
    classic = {"session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
               "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
    # a classic member may join it (KIP-848's migration; tests/groups/test_online_migration_wire.py):
    # at JoinGroup v4+ it is first handed its member id
    asked = client.request(ApiKey.JOIN_GROUP, 7, {"group_id": "kip848", **classic})
    assert asked["error_code"] == ErrorCode.MEMBER_ID_REQUIRED and asked["member_id"]
    # its members are not classic ones: unknown to SyncGroup, Heartbeat and LeaveGroup, as in Kafka
    beat = client.request(ApiKey.HEARTBEAT, 3, {"group_id": "kip848", "generation_id": 1, "member_id": "m"})
    assert beat["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    synced = client.request(ApiKey.SYNC_GROUP, 3, {"group_id": "kip848", "generation_id": 1, "member_id": "m",
                                                   "assignments": []})
    assert synced["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    left = client.request(ApiKey.LEAVE_GROUP, 3, {"group_id": "kip848", "members": [{"member_id": "m"}]})
    assert left["error_code"] == ErrorCode.NONE
    assert left["members"][0]["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID

    ready(client, "old")
    first = client.request(ApiKey.JOIN_GROUP, 3, {"group_id": "old", **classic})
    assert first["error_code"] == ErrorCode.NONE
    # a classic group whose member's subscription does not parse cannot be upgraded online
    refused_beat = heartbeat(client, "old", str(uuid.uuid4()), 0, rebalance_timeout_ms=10000,
                             subscribed_topic_names=["t"], topic_partitions=[])
    assert refused_beat["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert describe(client, "old")["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_only_a_valid_join_takes_over_an_empty_classic_group(broker: Broker, client: SimpleClient) -> None:
    """Kafka's getOrMaybeCreateConsumerGroup replaces an Empty classic group only when a member
    joins (epoch 0), and only after the request passed its checks."""
    ready(client, "old")
    classic = {"session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
               "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
    first = client.request(ApiKey.JOIN_GROUP, 3, {"group_id": "old", **classic})
    client.request(ApiKey.SYNC_GROUP, 3, {"group_id": "old", "generation_id": first["generation_id"],
                                          "member_id": first["member_id"], "assignments": []})
    assert commit(client, "old", first["generation_id"], first["member_id"], version=7) == ErrorCode.NONE
    client.request(ApiKey.LEAVE_GROUP, 3, {"group_id": "old", "members": [{"member_id": first["member_id"]}]})
    assert broker.runtime is not None
    groups = next(m for m in broker.runtime.modules if isinstance(m, GroupsModule))

    assert heartbeat(client, "old", "m", 3)["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    no_timeout = heartbeat(client, "old", str(uuid.uuid4()), 0, subscribed_topic_names=["t"],
                           topic_partitions=[])
    assert no_timeout["error_code"] == ErrorCode.INVALID_REQUEST
    assert "old" in groups.coordinator.groups and groups.consumer.get("old") is None

    member = joined(client, "old")
    assert "old" not in groups.coordinator.groups and groups.consumer.get("old") is not None
    assert fetch(client, "old", member["member_id"], member["member_epoch"]
                 )["topics"][0]["partitions"][0]["committed_offset"] == 5


def test_a_group_holding_only_offsets_becomes_a_consumer_group_and_keeps_them(client: SimpleClient) -> None:
    ready(client, "solo")
    assert commit(client, "solo", -1, "", version=7) == ErrorCode.NONE
    member = joined(client, "solo")
    assert fetch(client, "solo", member["member_id"], member["member_epoch"]
                 )["topics"][0]["partitions"][0]["committed_offset"] == 5


def test_describe_list_and_delete_consumer_groups(client: SimpleClient) -> None:
    member = joined(client, "g")
    assert commit(client, "g", member["member_epoch"], member["member_id"]) == ErrorCode.NONE
    described = client.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"]})["groups"][0]
    assert (described["group_state"], described["protocol_type"]) == ("Stable", "consumer")
    assert [m["member_id"] for m in described["members"]] == [member["member_id"]]

    def listed(types: list[str]) -> set[tuple[str, str, str]]:
        groups = client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": types})["groups"]
        return {(g["group_id"], g["group_state"], g["group_type"]) for g in groups}
    assert listed([]) == listed(["Consumer"]) == {("g", "Stable", "consumer")}
    assert listed(["classic"]) == set()

    def delete() -> ErrorCode:
        answer = client.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
        return ErrorCode(answer["results"][0]["error_code"])
    assert delete() == ErrorCode.NON_EMPTY_GROUP
    left = heartbeat(client, "g", member["member_id"], -1)
    assert (left["error_code"], left["member_epoch"]) == (ErrorCode.NONE, -1)
    assert delete() == ErrorCode.NONE
    assert describe(client, "g")["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert fetch(client, "g")["topics"][0]["partitions"][0]["committed_offset"] == -1


def test_a_classic_member_takes_over_an_empty_consumer_group(client: SimpleClient) -> None:
    member = joined(client, "g")
    assert commit(client, "g", member["member_epoch"], member["member_id"]) == ErrorCode.NONE
    heartbeat(client, "g", member["member_id"], -1)
    too_short = client.request(ApiKey.JOIN_GROUP, 3, {
        "group_id": "g", "session_timeout_ms": 1, "rebalance_timeout_ms": 10000, "member_id": "",
        "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
    assert too_short["error_code"] == ErrorCode.INVALID_SESSION_TIMEOUT
    assert describe(client, "g")["error_code"] == ErrorCode.NONE, "refused before the group was looked at"
    joined_classic = client.request(ApiKey.JOIN_GROUP, 3, {
        "group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
        "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
    assert joined_classic["error_code"] == ErrorCode.NONE
    listed = client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})["groups"]
    assert [(g["group_id"], g["group_type"]) for g in listed] == [("g", "classic")]
    # Kafka's maybeDeleteEmptyConsumerGroup tombstones the group, not its offsets
    assert fetch(client, "g")["topics"][0]["partitions"][0]["committed_offset"] == 5


def test_a_silent_member_is_fenced_when_its_session_expires(client: SimpleClient) -> None:
    joined(client, "g")
    wait_until(lambda: describe(client, "g")["members"] == [], timeout=10 * SESSION_MS / 1000,
               what="the member fenced")
    assert describe(client, "g")["group_state"] == "Empty"


def test_offset_retention_of_consumer_groups(broker: Broker, client: SimpleClient) -> None:
    """Offsets of topics no member subscribes to expire offsets.retention.minutes after their
    commit; an empty group whose offsets all went is deleted. The pass is run at a chosen time on
    the broker's loop (its timer would run it every offsets.retention.check.interval.ms)."""
    client.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "u", "num_partitions": 1,
                                                         "replication_factor": 1}], "timeout_ms": 5000})
    member = joined(client, "g")
    member_id, epoch = member["member_id"], member["member_epoch"]
    answer = client.request(ApiKey.OFFSET_COMMIT, 9, {
        "group_id": "g", "generation_id_or_member_epoch": epoch, "member_id": member_id,
        "topics": [{"name": name, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                  "committed_metadata": ""}]} for name in ("t", "u")]})
    assert {p["error_code"] for t in answer["topics"] for p in t["partitions"]} == {ErrorCode.NONE}
    assert broker.runtime is not None and broker._loop is not None
    module = next(m for m in broker.runtime.modules if isinstance(m, GroupsModule))
    week_later = module.timers.wall_ms() + retention_ms(DEFAULT_OFFSETS_RETENTION_MINUTES) + 1

    def retention_pass(now_ms: int) -> None:
        assert broker._loop is not None
        asyncio.run_coroutine_threadsafe(module.expire_offsets(now_ms), broker._loop).result(10)

    def committed() -> dict[str, int]:
        every = {"group_id": "g", "member_id": None, "member_epoch": -1, "topics": None}
        fetched = client.request(ApiKey.OFFSET_FETCH, 9, {"groups": [every], "require_stable": False})
        return {t["name"]: p["committed_offset"]
                for t in fetched["groups"][0]["topics"] for p in t["partitions"]}

    retention_pass(module.timers.wall_ms())
    assert committed() == {"t": 5, "u": 5}
    retention_pass(week_later)
    assert committed() == {"t": 5}, "only the topic no member subscribes to expires"
    heartbeat(client, "g", member_id, -1)
    retention_pass(week_later)
    assert committed() == {}
    assert describe(client, "g")["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_offset_delete_of_a_consumer_group(client: SimpleClient) -> None:
    member = joined(client, "g")
    assert commit(client, "g", member["member_epoch"], member["member_id"]) == ErrorCode.NONE

    def delete_t0() -> ErrorCode:
        answer = client.request(ApiKey.OFFSET_DELETE, 0, {"group_id": "g", "topics": [
            {"name": "t", "partitions": [{"partition_index": 0}]}]})
        return ErrorCode(answer["topics"][0]["partitions"][0]["error_code"])
    assert delete_t0() == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    heartbeat(client, "g", member["member_id"], -1)
    assert delete_t0() == ErrorCode.NONE
    assert fetch(client, "g")["topics"][0]["partitions"][0]["committed_offset"] == -1
