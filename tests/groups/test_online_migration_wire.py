"""KIP-848's online migration on the wire: what each request gets while a group changes kind with
members in it, under each ``group.consumer.migration.policy``. Expected codes are Kafka 4.0's
(GroupMetadataManager's validateOnlineUpgrade, classicGroup{Join,Sync,Heartbeat,Leave}ToConsumerGroup,
validateOnlineDowngradeWithFencedMember; ConsumerGroup.validateOffsetCommit)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType, GroupsModule
from kafkapy.groups.state import GroupState
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.consumer_protocol import (
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from kafkapy.testing import wait_until

JOIN_V = 5  # KIP-394: a new member is first handed its id
SUBSCRIPTION = encode_subscription(Subscription(("t",), version=1))
RANGE = [{"name": "range", "metadata": SUBSCRIPTION}]


def start(policy: str | None = None, **extra: Any) -> Broker:
    settings: dict[str, Any] = {"broker.id": 1, "offsets.topic.num.partitions": 3, **extra}
    if policy is not None:
        settings["group.consumer.migration.policy"] = policy
    return Broker(settings)


@pytest.fixture
def broker() -> Iterator[Broker]:
    with start() as running:
        yield running


def client_of(broker: Broker) -> SimpleClient:
    simple = SimpleClient(broker.bootstrap_servers)
    simple.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "t", "num_partitions": 2,
                                                         "replication_factor": 1}], "timeout_ms": 5000})
    find = {"key": "g", "key_type": CoordinatorKeyType.GROUP}
    wait_until(lambda: simple.request(ApiKey.FIND_COORDINATOR, 3, find)["error_code"] == ErrorCode.NONE,
               what="a coordinator")
    return simple


@pytest.fixture
def client(broker: Broker) -> Iterator[SimpleClient]:
    with client_of(broker) as simple:
        yield simple


def module_of(broker: Broker) -> GroupsModule:
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, GroupsModule))


def join(client: SimpleClient, member_id: str = "", protocols: list[dict[str, Any]] | None = None,
         protocol_type: str = "consumer") -> Any:
    return client.request(ApiKey.JOIN_GROUP, JOIN_V, {
        "group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": member_id,
        "group_instance_id": None, "protocol_type": protocol_type, "protocols": protocols or RANGE})


def joined(client: SimpleClient, protocols: list[dict[str, Any]] | None = None) -> Any:
    """A new classic member's JoinGroup, through MEMBER_ID_REQUIRED."""
    asked = join(client, protocols=protocols)
    assert asked["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
    answer = join(client, asked["member_id"], protocols)
    assert answer["error_code"] == ErrorCode.NONE, answer
    return answer


def sync(client: SimpleClient, member_id: str, generation: int,
         assignments: list[dict[str, Any]] | None = None, protocol_type: str | None = "consumer",
         protocol_name: str | None = "range") -> Any:
    return client.request(ApiKey.SYNC_GROUP, 5, {
        "group_id": "g", "generation_id": generation, "member_id": member_id, "group_instance_id": None,
        "protocol_type": protocol_type, "protocol_name": protocol_name, "assignments": assignments or []})


def beat(client: SimpleClient, member_id: str, generation: int) -> ErrorCode:
    return ErrorCode(client.request(ApiKey.HEARTBEAT, 4, {
        "group_id": "g", "generation_id": generation, "member_id": member_id,
        "group_instance_id": None})["error_code"])


def heartbeat(client: SimpleClient, member_id: str, epoch: int, **fields: Any) -> Any:
    body = {"group_id": "g", "member_id": member_id, "member_epoch": epoch, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None, **fields}
    return client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)


def consumer_join(client: SimpleClient) -> Any:
    return heartbeat(client, str(uuid.uuid4()), 0, rebalance_timeout_ms=10000, subscribed_topic_names=["t"],
                     topic_partitions=[])


def commit(client: SimpleClient, generation: int, member_id: str) -> ErrorCode:
    answer = client.request(ApiKey.OFFSET_COMMIT, 7, {
        "group_id": "g", "generation_id_or_member_epoch": generation, "member_id": member_id,
        "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 3,
                                                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    return ErrorCode(answer["topics"][0]["partitions"][0]["error_code"])


def classic_group(client: SimpleClient) -> tuple[str, int]:
    """One classic member owning both partitions of t: (its id, the generation)."""
    answer = joined(client)
    member_id, generation = answer["member_id"], answer["generation_id"]
    assignment = encode_assignment({"t": [0, 1]}, 1)
    synced = sync(client, member_id, generation, [{"member_id": member_id, "assignment": assignment}])
    assert synced["error_code"] == ErrorCode.NONE
    return member_id, generation


def owned(sync_answer: Any) -> set[int]:
    return set(decode_assignment(sync_answer["assignment"]).get("t", ()))


@pytest.mark.parametrize(("policy", "upgraded"), [("bidirectional", True), ("UPGRADE", True),
                                                  ("downgrade", False), ("disabled", False)])
def test_a_consumer_protocol_join_upgrades_a_running_classic_group_only_if_the_policy_allows(
        policy: str, upgraded: bool) -> None:
    with start(policy) as running, client_of(running) as client:
        member_id, generation = classic_group(client)
        answer = consumer_join(client)
        module = module_of(running)
        if not upgraded:  # Kafka's validateOnlineUpgrade: the group stays classic
            assert answer["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
            assert answer["error_message"] == "Group g is not a consumer group."
            assert module.consumer.get("g") is None and "g" in module.coordinator.groups
            assert beat(client, member_id, generation) == ErrorCode.NONE
            return
        assert answer["error_code"] == ErrorCode.NONE
        group = module.consumer.get("g")
        assert group is not None and "g" not in module.coordinator.groups
        assert group.group_epoch == generation + 1, "the classic generation, then the joining member's bump"
        classic = group.members[member_id]
        assert classic.classic is not None and classic.classic.session_timeout_ms == 10000
        assert classic.member_epoch == generation and classic.subscribed_topic_names == ("t",)


def test_no_upgrade_of_a_group_of_another_protocol_type() -> None:
    """(The group size limit is test_online_migration.py's, on the module.)"""
    with start() as running, client_of(running) as client:
        connect = [{"name": "default", "metadata": b"x"}]
        asked = join(client, protocol_type="connect", protocols=connect)
        join(client, asked["member_id"], protocol_type="connect", protocols=connect)
        assert consumer_join(client)["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        assert module_of(running).consumer.get("g") is None


def test_a_classic_member_of_a_consumer_group_on_the_wire(broker: Broker, client: SimpleClient) -> None:
    """JoinGroup/SyncGroup/Heartbeat/OffsetCommit of a classic member after the upgrade: it is asked
    to rejoin, rejoins at the new epoch and syncs the assignor's share; errors as Kafka's."""
    module = module_of(broker)
    member_id, generation = classic_group(client)
    modern = consumer_join(client)
    modern_id = modern["member_id"]
    assert modern["assignment"]["topic_partitions"] == [], "both partitions still held by the classic member"

    # the group epoch moved past the classic member: it must rejoin
    assert beat(client, member_id, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    assert beat(client, member_id, generation + 5) == ErrorCode.ILLEGAL_GENERATION
    assert sync(client, member_id, generation)["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS
    assert commit(client, generation, member_id) == ErrorCode.NONE, "its epoch is still the generation"
    assert commit(client, generation + 1, member_id) == ErrorCode.ILLEGAL_GENERATION
    # only classic members use the classic APIs
    assert beat(client, modern_id, modern["member_epoch"]) == ErrorCode.UNKNOWN_MEMBER_ID
    assert sync(client, modern_id, modern["member_epoch"])["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID

    # an eager rejoin (it owns nothing now): the new epoch, no leader, no members
    again = join(client, member_id)
    assert (again["error_code"], again["generation_id"], again["protocol_name"], again["leader"],
            again["members"]) == (ErrorCode.NONE, generation + 1, "range", "", [])
    assert sync(client, member_id, generation + 1, protocol_name="roundrobin"
                )["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert sync(client, member_id, generation + 1, protocol_type="connect"
                )["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    synced = sync(client, member_id, generation + 1)
    assert synced["error_code"] == ErrorCode.NONE and (synced["protocol_type"], synced["protocol_name"]) == (
        "consumer", "range")
    mine = owned(synced)
    assert len(mine) == 1
    assert beat(client, member_id, generation + 1) == ErrorCode.NONE
    given = heartbeat(client, modern_id, modern["member_epoch"], topic_partitions=[])
    assert [tp["partitions"] for tp in given["assignment"]["topic_partitions"]] == [sorted({0, 1} - mine)]

    # a new classic member must share a protocol with the classic members, and be of type consumer
    other = join(client, protocols=[{"name": "roundrobin", "metadata": SUBSCRIPTION}])
    assert (other["error_code"], other["member_id"]) == (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "")
    assert join(client, protocol_type="connect")["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL

    described = client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["g"],
                                                                   "include_authorized_operations": False})
    types = {m["member_id"]: m["member_type"] for m in described["groups"][0]["members"]}
    assert types == {member_id: 0, modern_id: 1}
    listed = client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})["groups"]
    rows = [(g["group_id"], g["group_type"], g["protocol_type"]) for g in listed]
    assert rows == [("g", "consumer", "consumer")]
    assert module.coordinator.offsets.get("g", "t", 0) is not None


def test_the_last_consumer_protocol_member_leaving_downgrades_the_group(broker: Broker,
                                                                         client: SimpleClient) -> None:
    module = module_of(broker)
    member_id, generation = classic_group(client)
    modern = consumer_join(client)
    join(client, member_id)
    sync(client, member_id, generation + 1)
    left = heartbeat(client, modern["member_id"], -1)
    assert (left["error_code"], left["member_epoch"]) == (ErrorCode.NONE, -1)
    group = module.coordinator.groups["g"]
    assert module.consumer.get("g") is None
    assert (group.state, group.protocol_type, group.generation_id) == (
        GroupState.PREPARING_REBALANCE, "consumer", generation + 1)
    # the classic member is told, rejoins and leads the classic group's next generation
    assert beat(client, member_id, generation + 1) == ErrorCode.REBALANCE_IN_PROGRESS
    again = join(client, member_id)
    assert (again["error_code"], again["generation_id"], again["leader"]) == (
        ErrorCode.NONE, generation + 2, member_id)
    assignment = encode_assignment({"t": [0, 1]}, 1)
    synced = sync(client, member_id, generation + 2, [{"member_id": member_id, "assignment": assignment}])
    assert owned(synced) == {0, 1}
    assert beat(client, member_id, generation + 2) == ErrorCode.NONE


@pytest.mark.parametrize("policy", ["upgrade", "bidirectional-but-full"])
def test_without_a_downgrade_the_classic_members_stay_in_the_consumer_group(policy: str) -> None:
    """Kafka's validateOnlineDowngradeWithFencedMember: no downgrade when the policy says upgrade
    only, or when the classic members would be more than group.max.size."""
    settings: dict[str, Any] = {"group.max.size": 1} if policy.endswith("full") else {}
    with start(policy.split("-")[0], **settings) as running, client_of(running) as client:
        module = module_of(running)
        member_id, generation = classic_group(client)
        if settings:  # a second classic member, joined to the consumer group after the upgrade
            modern = consumer_join(client)
            second = joined(client)
            assert second["generation_id"] == generation + 2
        else:
            modern = consumer_join(client)
        heartbeat(client, modern["member_id"], -1)
        group = module.consumer.get("g")
        assert group is not None and "g" not in module.coordinator.groups
        assert all(m.classic is not None for m in group.members.values())
        assert beat(client, member_id, generation) == ErrorCode.REBALANCE_IN_PROGRESS
        again = join(client, member_id)
        assert sync(client, member_id, again["generation_id"])["error_code"] == ErrorCode.NONE


def test_classic_members_leave_a_consumer_group_with_leave_group(broker: Broker,
                                                                 client: SimpleClient) -> None:
    module = module_of(broker)
    member_id, _ = classic_group(client)
    modern = consumer_join(client)
    group = module.consumer.get("g")
    assert group is not None
    epoch = group.group_epoch
    left = client.request(ApiKey.LEAVE_GROUP, 3, {"group_id": "g", "members": [
        {"member_id": member_id}, {"member_id": modern["member_id"]}, {"member_id": "stranger"}]})
    assert [m["error_code"] for m in left["members"]] == [
        ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID]
    group = module.consumer.get("g")
    assert group is not None and list(group.members) == [modern["member_id"]]
    assert group.group_epoch == epoch + 1
    assert beat(client, member_id, epoch) == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_static_member_back_on_the_classic_protocol_downgrades_the_group_without_a_rebalance(
        broker: Broker, client: SimpleClient) -> None:
    module = module_of(broker)
    member_id, generation = classic_group(client)
    modern = heartbeat(client, str(uuid.uuid4()), 0, rebalance_timeout_ms=10000, subscribed_topic_names=["t"],
                       topic_partitions=[], instance_id="i1")
    join(client, member_id)
    sync(client, member_id, generation + 1)
    group = module.consumer.get("g")
    assert group is not None
    target = {p for ps in group.target_of(modern["member_id"]).values() for p in ps}
    back = client.request(ApiKey.JOIN_GROUP, JOIN_V, {
        "group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
        "group_instance_id": "i1", "protocol_type": "consumer", "protocols": RANGE})
    assert back["error_code"] == ErrorCode.NONE and back["member_id"] != modern["member_id"]
    classic = module.coordinator.groups["g"]
    assert module.consumer.get("g") is None and classic.state is GroupState.STABLE
    assert classic.generation_id == back["generation_id"]
    synced = client.request(ApiKey.SYNC_GROUP, 5, {
        "group_id": "g", "generation_id": back["generation_id"], "member_id": back["member_id"],
        "group_instance_id": "i1", "protocol_type": "consumer", "protocol_name": "range", "assignments": []})
    assert synced["error_code"] == ErrorCode.NONE and owned(synced) == target


def test_a_downgraded_group_comes_back_classic_after_a_restart(tmp_path: Path) -> None:
    """Both conversions are records: after an upgrade and a downgrade, the loaded partition holds a
    classic group with its member and its assignment, and no consumer group."""
    settings = {"log.dirs": str(tmp_path)}
    with start(**settings) as running, client_of(running) as client:
        member_id, generation = classic_group(client)
        modern = consumer_join(client)
        join(client, member_id)
        mine = owned(sync(client, member_id, generation + 1))
        heartbeat(client, modern["member_id"], -1)
        before = module_of(running).coordinator.groups["g"]
        assert before.generation_id == generation + 1
    with start(**settings) as running, client_of(running) as client:
        module = module_of(running)
        assert module.consumer.get("g") is None
        loaded = module.coordinator.groups["g"]
        assert (loaded.state, loaded.generation_id, list(loaded.members)) == (
            GroupState.STABLE, generation + 1, [member_id])
        # the downgrade's record: its target then; the rebalance that followed wrote nothing yet
        assert decode_assignment(loaded.members[member_id].assignment) == {"t": mine}
        assert beat(client, member_id, generation + 1) == ErrorCode.NONE


def test_the_inspection_view_of_a_mixed_group(broker: Broker, client: SimpleClient) -> None:
    member_id, _ = classic_group(client)
    modern = consumer_join(client)
    view = broker.group("g")
    assert view is not None and view.kind == "consumer"
    sessions = {m.member_id: m.session_timeout_ms for m in view.members}
    assert sessions[member_id] == 10000, "the classic member's own session timeout"
    assert sessions[modern["member_id"]] == module_of(broker).consumer.groups.config.session_timeout_ms
