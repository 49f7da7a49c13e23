"""The groups module on the wire, request by request: FindCoordinator (single and batched keys,
key types), the KIP-394 first join, JoinGroup's refusals, SyncGroup/Heartbeat/LeaveGroup (batched,
static), OffsetCommit/OffsetFetch (v7 and multi-group v8+), DescribeGroups, ListGroups filters,
DeleteGroups and OffsetDelete, and NOT_COORDINATOR from a broker that does not lead the group's
partition. Expected codes are Kafka's for each case."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.groups.partitioning import OFFSETS_TOPIC, offsets_partition_for
from kafkapy.protocol import fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.store.memory import MemoryStore
from kafkapy.testing import wait_until

SUBSCRIPTION = b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # v1: topics [t], no user data
UNKNOWN_KEY_TYPE = 7  # no CoordinatorKeyType has this value


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1, "offsets.topic.num.partitions": 5}) as running:
        yield running


@pytest.fixture
def client(broker: Broker) -> Iterator[SimpleClient]:
    with SimpleClient(broker.bootstrap_servers) as simple:
        simple.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "t", "num_partitions": 2,
                                                             "replication_factor": 1}], "timeout_ms": 5000})
        yield simple


def find(client: SimpleClient, group: str, version: int = 3) -> Any:
    return client.request(ApiKey.FIND_COORDINATOR, version,
                          {"key": group, "key_type": CoordinatorKeyType.GROUP})


def join(client: SimpleClient, group: str, member_id: str = "", version: int = 7, **extra: Any) -> Any:
    body = {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
            "member_id": member_id, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": SUBSCRIPTION}], **extra}
    return client.request(ApiKey.JOIN_GROUP, version, body)


def joined_member(client: SimpleClient, group: str, **extra: Any) -> Any:
    """A member through KIP-394's two-step first join; the JoinGroup answer."""
    find(client, group)
    wait_until(lambda: find(client, group)["error_code"] == ErrorCode.NONE, what="a coordinator")
    first = join(client, group, **extra)
    if first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED:
        return join(client, group, first["member_id"], **extra)
    return first


def sync(client: SimpleClient, group: str, answer: Any, assignment: bytes = b"a") -> Any:
    return client.request(ApiKey.SYNC_GROUP, 3, {
        "group_id": group, "generation_id": answer["generation_id"], "member_id": answer["member_id"],
        "assignments": [{"member_id": answer["member_id"], "assignment": assignment}]})


def test_find_coordinator_creates_the_offsets_topic_and_names_this_broker(broker: Broker,
                                                                         client: SimpleClient) -> None:
    answer = find(client, "g")
    assert answer["error_code"] == ErrorCode.NONE
    assert (answer["node_id"], answer["port"]) == (1, int(broker.bootstrap_servers.rsplit(":", 1)[1]))
    metadata = client.request(ApiKey.METADATA, 9, {"topics": [{"name": OFFSETS_TOPIC}]})
    (topic,) = metadata["topics"]
    assert len(topic["partitions"]) == 5


def test_find_coordinator_batched_keys_and_key_types(client: SimpleClient) -> None:
    answer = client.request(ApiKey.FIND_COORDINATOR, 4,
                            {"key_type": CoordinatorKeyType.GROUP, "coordinator_keys": ["a", "b"]})
    assert [(c["key"], c["error_code"], c["node_id"]) for c in answer["coordinators"]] == \
        [("a", ErrorCode.NONE, 1), ("b", ErrorCode.NONE, 1)]
    transactions = {"key_type": CoordinatorKeyType.TRANSACTION, "coordinator_keys": ["tx"]}
    wait_until(lambda: client.request(ApiKey.FIND_COORDINATOR, 4, transactions)["coordinators"][0][
        "error_code"] == ErrorCode.NONE, what="a transaction coordinator")
    unknown = client.request(ApiKey.FIND_COORDINATOR, 4,
                             {"key_type": UNKNOWN_KEY_TYPE, "coordinator_keys": ["x"]})
    assert unknown["coordinators"][0]["error_code"] == ErrorCode.INVALID_REQUEST


def test_first_join_needs_a_member_id_from_v4(client: SimpleClient) -> None:
    find(client, "g")  # the offsets topic is made; from then on, every partition this broker leads loads
    first = join(client, "g", version=4)
    assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED and first["member_id"]
    second = join(client, "g", first["member_id"], version=4)
    assert second["error_code"] == ErrorCode.NONE
    assert second["leader"] == second["member_id"] == first["member_id"]
    assert second["generation_id"] == 1 and second["protocol_name"] == "range"
    assert [m["member_id"] for m in second["members"]] == [first["member_id"]]
    old = join(client, "g-old", version=3)  # before v4 a member id comes with the first answer
    assert old["error_code"] == ErrorCode.NONE and old["member_id"]


@pytest.mark.parametrize(("change", "code"), [
    ({"session_timeout_ms": 10}, ErrorCode.INVALID_SESSION_TIMEOUT),
    ({"member_id": "nobody"}, ErrorCode.UNKNOWN_MEMBER_ID),
    ({"protocol_type": ""}, ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
    ({"group_id": ""}, ErrorCode.INVALID_GROUP_ID),
])
def test_join_refusals(client: SimpleClient, change: dict[str, Any], code: ErrorCode) -> None:
    find(client, "g")
    body = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}], **change}
    assert client.request(ApiKey.JOIN_GROUP, 7, body)["error_code"] == code


@pytest.mark.parametrize(("api_key", "version", "body"), [
    (ApiKey.SYNC_GROUP, 3, {"generation_id": 1, "member_id": "m", "assignments": []}),
    (ApiKey.HEARTBEAT, 3, {"generation_id": 1, "member_id": "m"}),
    (ApiKey.LEAVE_GROUP, 0, {"member_id": "m"}),
    (ApiKey.LEAVE_GROUP, 3, {"members": [{"member_id": "m"}]}),
    (ApiKey.OFFSET_DELETE, 0, {"topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]}),
])
def test_an_empty_group_id_is_invalid(client: SimpleClient, api_key: ApiKey, version: int,
                                      body: dict[str, Any]) -> None:
    """Kafka's GroupCoordinatorService refuses the empty group id with INVALID_GROUP_ID for
    JoinGroup (test_join_refusals), SyncGroup, Heartbeat, LeaveGroup and OffsetDelete; OffsetCommit
    and OffsetFetch take it, for old clients."""
    find(client, "")
    wait_until(lambda: find(client, "")["error_code"] == ErrorCode.NONE, what="a coordinator")
    answer = client.request(api_key, version, {"group_id": "", **body})
    assert answer["error_code"] == ErrorCode.INVALID_GROUP_ID
    committed = commit(client, "", 5)
    assert committed["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE


def test_join_with_another_protocol_type_is_inconsistent(client: SimpleClient) -> None:
    joined_member(client, "g")
    other = join(client, "g", version=3, protocol_type="connect")
    assert other["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_sync_heartbeat_and_leave(client: SimpleClient) -> None:
    member = joined_member(client, "g")
    assert sync(client, "g", member)["assignment"] == b"a"
    heartbeat = {"group_id": "g", "generation_id": member["generation_id"], "member_id": member["member_id"]}
    assert client.request(ApiKey.HEARTBEAT, 3, heartbeat)["error_code"] == ErrorCode.NONE
    stale = {**heartbeat, "generation_id": member["generation_id"] + 5}
    assert client.request(ApiKey.HEARTBEAT, 3, stale)["error_code"] == ErrorCode.ILLEGAL_GENERATION
    unknown = {**heartbeat, "member_id": "nobody"}
    assert client.request(ApiKey.HEARTBEAT, 3, unknown)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    left = client.request(ApiKey.LEAVE_GROUP, 4, {"group_id": "g", "members": [
        {"member_id": member["member_id"]}, {"member_id": "nobody"}]})
    assert [m["error_code"] for m in left["members"]] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    described = client.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"]})["groups"][0]
    assert (described["group_state"], described["members"]) == ("Empty", [])


def test_static_member_fencing(client: SimpleClient) -> None:
    first = joined_member(client, "g", group_instance_id="i1")
    sync(client, "g", first)
    again = join(client, "g", group_instance_id="i1")  # the same instance id, a new incarnation
    assert again["error_code"] == ErrorCode.NONE and again["member_id"] != first["member_id"]
    assert again["generation_id"] == first["generation_id"], "a static rejoin in Stable does not rebalance"
    heartbeat = {"group_id": "g", "generation_id": first["generation_id"], "member_id": first["member_id"],
                 "group_instance_id": "i1"}
    assert client.request(ApiKey.HEARTBEAT, 3, heartbeat)["error_code"] == ErrorCode.FENCED_INSTANCE_ID
    # An admin removes the static member by instance id alone (LeaveGroup v3+).
    left = client.request(ApiKey.LEAVE_GROUP, 3, {"group_id": "g", "members": [
        {"member_id": "", "group_instance_id": "i1"}]})
    assert left["members"][0]["error_code"] == ErrorCode.NONE


def commit(client: SimpleClient, group: str, offset: int, version: int = 7, generation: int = -1,
           member_id: str = "", metadata: str = "m") -> Any:
    return client.request(ApiKey.OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_metadata": metadata},
            {"partition_index": 9, "committed_offset": offset, "committed_metadata": metadata}]}]})


def test_offsets_commit_and_fetch(client: SimpleClient) -> None:
    find(client, "solo")
    wait_until(lambda: find(client, "solo")["error_code"] == ErrorCode.NONE, what="a coordinator")
    committed = commit(client, "solo", 42)  # generation -1: a consumer outside group management
    assert [(p["partition_index"], p["error_code"]) for p in committed["topics"][0]["partitions"]] == \
        [(0, ErrorCode.NONE), (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    too_long = commit(client, "solo", 43, metadata="x" * 5000)
    assert too_long["topics"][0]["partitions"][0]["error_code"] == ErrorCode.OFFSET_METADATA_TOO_LARGE
    # Kafka measures the metadata as a Java string (UTF-16 units), not in encoded bytes: 3000 'é'
    # (6000 bytes of UTF-8) fit under 4096; 2049 emoji (two units each) do not.
    accented = commit(client, "solo", 44, metadata="é" * 3000)
    assert accented["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    emoji = commit(client, "solo", 45, metadata="\U0001F600" * 2049)
    assert emoji["topics"][0]["partitions"][0]["error_code"] == ErrorCode.OFFSET_METADATA_TOO_LARGE
    commit(client, "solo", 42)
    fetched = client.request(ApiKey.OFFSET_FETCH, 7, {"group_id": "solo", "require_stable": True,
                                                      "topics": [{"name": "t", "partition_indexes": [0, 1]}]})
    assert [(p["partition_index"], p["committed_offset"], p["metadata"])
            for p in fetched["topics"][0]["partitions"]] == [(0, 42, "m"), (1, -1, "")]
    every = client.request(ApiKey.OFFSET_FETCH, 8, {"groups": [
        {"group_id": "solo", "topics": None}, {"group_id": "nobody", "topics": None}]})
    by_group = {g["group_id"]: g for g in every["groups"]}
    solo = by_group["solo"]["topics"]
    assert [(t["name"], [p["committed_offset"] for p in t["partitions"]]) for t in solo] == [("t", [42])]
    assert by_group["nobody"]["topics"] == [] and by_group["nobody"]["error_code"] == ErrorCode.NONE


def test_offsets_by_topic_id_from_v10(client: SimpleClient) -> None:
    """v10 names topics by id both ways; the offsets are the same ones v9 sees by name, an id no
    topic has is UNKNOWN_TOPIC_ID, and "every committed partition" answers ids."""
    find(client, "ids")
    wait_until(lambda: find(client, "ids")["error_code"] == ErrorCode.NONE, what="a coordinator")
    (topic,) = client.request(ApiKey.METADATA, 12, {"topics": [{"name": "t"}]})["topics"]
    topic_id, stranger = topic["topic_id"], uuid.uuid4()
    committed = client.request(ApiKey.OFFSET_COMMIT, 10, {
        "group_id": "ids", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
            {"topic_id": topic_id, "partitions": [{"partition_index": 1, "committed_offset": 7}]},
            {"topic_id": stranger, "partitions": [{"partition_index": 0, "committed_offset": 7}]}]})
    assert [(t["topic_id"], [(p["partition_index"], p["error_code"]) for p in t["partitions"]])
            for t in committed["topics"]] == [(topic_id, [(1, ErrorCode.NONE)]),
                                              (stranger, [(0, ErrorCode.UNKNOWN_TOPIC_ID)])]
    by_name = client.request(ApiKey.OFFSET_FETCH, 9, {"groups": [
        {"group_id": "ids", "topics": [{"name": "t", "partition_indexes": [1]}]}]})
    assert by_name["groups"][0]["topics"][0]["partitions"][0]["committed_offset"] == 7
    by_id = client.request(ApiKey.OFFSET_FETCH, 10, {"groups": [
        {"group_id": "ids", "topics": [{"topic_id": topic_id, "partition_indexes": [0, 1]},
                                       {"topic_id": stranger, "partition_indexes": [0]}]},
        {"group_id": "ids", "topics": None}]})
    asked, every = by_id["groups"]
    assert [(t["topic_id"], [(p["partition_index"], p["committed_offset"], p["error_code"])
                             for p in t["partitions"]]) for t in asked["topics"]] == [
        (topic_id, [(0, -1, ErrorCode.NONE), (1, 7, ErrorCode.NONE)]),
        (stranger, [(0, -1, ErrorCode.UNKNOWN_TOPIC_ID)])]
    assert [(t["topic_id"], [p["committed_offset"] for p in t["partitions"]]) for t in every["topics"]] == \
        [(topic_id, [7])]


def test_commit_checks_membership(client: SimpleClient) -> None:
    member = joined_member(client, "g")
    assert commit(client, "g", 1, generation=member["generation_id"], member_id=member["member_id"]
                  )["topics"][0]["partitions"][0]["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS
    # CompletingRebalance: the member and generation are checked first (Kafka 4.0's
    # validateOffsetCommit), and a commit naming neither is a stranger's once the group has members.
    assert commit(client, "g", 1, generation=member["generation_id"], member_id="nobody"
                  )["topics"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(client, "g", 1, generation=member["generation_id"] - 1, member_id=member["member_id"]
                  )["topics"][0]["partitions"][0]["error_code"] == ErrorCode.ILLEGAL_GENERATION
    assert commit(client, "g", 1)["topics"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    sync(client, "g", member)
    assert commit(client, "g", 1, generation=member["generation_id"], member_id=member["member_id"]
                  )["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    assert commit(client, "g", 1, generation=member["generation_id"] + 1, member_id=member["member_id"]
                  )["topics"][0]["partitions"][0]["error_code"] == ErrorCode.ILLEGAL_GENERATION
    assert commit(client, "g", 1, generation=member["generation_id"], member_id="nobody"
                  )["topics"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(client, "never", 1, generation=3, member_id="x"
                  )["topics"][0]["partitions"][0]["error_code"] == ErrorCode.ILLEGAL_GENERATION
    # From v9 a generation of a group that does not exist is GROUP_ID_NOT_FOUND (Kafka 4.0).
    assert commit(client, "never", 1, version=9, generation=3, member_id="x"
                  )["topics"][0]["partitions"][0]["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_commit_answers_in_kafkas_order(client: SimpleClient) -> None:
    """The group's checks come before the coordinator's metadata check: every partition it got
    carries the group's error. A commit with no partition left for the coordinator does not
    make a group."""
    find(client, "never")
    wait_until(lambda: find(client, "never")["error_code"] == ErrorCode.NONE, what="a coordinator")
    refused = commit(client, "never", 1, generation=3, member_id="x", metadata="x" * 5000)
    assert [(p["partition_index"], p["error_code"]) for p in refused["topics"][0]["partitions"]] == \
        [(0, ErrorCode.ILLEGAL_GENERATION), (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    nothing = client.request(ApiKey.OFFSET_COMMIT, 7, {
        "group_id": "nothing", "generation_id_or_member_epoch": -1, "member_id": "",
        "topics": [{"name": "t", "partitions": [{"partition_index": 9, "committed_offset": 1}]}]})
    assert nothing["topics"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    described = client.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["nothing"]})["groups"][0]
    assert described["group_state"] == "Dead", "no group was made"


def test_commit_without_read_on_the_group_fails_every_partition() -> None:
    """KafkaApis checks the group's READ before anything else: GROUP_AUTHORIZATION_FAILED for
    every partition, also those of topics the caller may not read or that do not exist."""
    config = {"broker.id": 1, "offsets.topic.num.partitions": 5, "authorizer.class.name": "allowlist",
              "allowlist.rules": "*@*:DESCRIBE"}
    with Broker(config) as broker, SimpleClient(broker.bootstrap_servers) as client:
        wait_until(lambda: find(client, "g")["error_code"] == ErrorCode.NONE, what="a coordinator")
        answer = commit(client, "g", 1)
        assert [p["error_code"] for p in answer["topics"][0]["partitions"]] == \
            [ErrorCode.GROUP_AUTHORIZATION_FAILED] * 2


def test_list_describe_delete(client: SimpleClient) -> None:
    member = joined_member(client, "busy")
    sync(client, "busy", member)
    commit(client, "idle", 7)
    listed = client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert {(g["group_id"], g["group_state"], g["group_type"]) for g in listed["groups"]} == \
        {("busy", "Stable", "classic"), ("idle", "Empty", "classic")}
    stable = client.request(ApiKey.LIST_GROUPS, 4, {"states_filter": ["stable"]})
    assert [g["group_id"] for g in stable["groups"]] == ["busy"]
    described = client.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["busy", "ghost"]})["groups"]
    assert (described[0]["group_state"], described[0]["protocol_data"]) == ("Stable", "range")
    assert described[0]["members"][0]["member_assignment"] == b"a"
    assert described[0]["members"][0]["member_metadata"] == SUBSCRIPTION
    assert (described[1]["error_code"], described[1]["group_state"]) == (ErrorCode.NONE, "Dead")
    v6 = client.request(ApiKey.DESCRIBE_GROUPS, 6, {"groups": ["ghost"]})["groups"][0]
    assert v6["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    deleted = client.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["busy", "idle", "ghost"]})
    assert [r["error_code"] for r in deleted["results"]] == \
        [ErrorCode.NON_EMPTY_GROUP, ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND]
    fetched = client.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "idle", "topics": None}]})
    assert fetched["groups"][0]["topics"] == []


def test_offset_delete(client: SimpleClient) -> None:
    member = joined_member(client, "g")  # subscribed to t (SUBSCRIPTION)
    sync(client, "g", member)
    commit(client, "g", 3, generation=member["generation_id"], member_id=member["member_id"])
    body = {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]}
    subscribed = client.request(ApiKey.OFFSET_DELETE, 0, body)
    assert subscribed["topics"][0]["partitions"][0]["error_code"] == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    client.request(ApiKey.LEAVE_GROUP, 3, {"group_id": "g", "members": [{"member_id": member["member_id"]}]})
    gone = client.request(ApiKey.OFFSET_DELETE, 0, body)
    assert gone["error_code"] == ErrorCode.NONE
    assert gone["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    fetched = client.request(ApiKey.OFFSET_FETCH, 7, {"group_id": "g", "topics": None})
    assert fetched["topics"] == []
    missing = client.request(ApiKey.OFFSET_DELETE, 0, {**body, "group_id": "ghost"})
    assert missing["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_another_brokers_group_is_not_coordinated_here() -> None:
    store = MemoryStore()
    with Broker({"broker.id": 1, "offsets.topic.num.partitions": 4}, store=store) as one, \
            Broker({"broker.id": 2, "offsets.topic.num.partitions": 4}, store=store) as two:
        with SimpleClient(one.bootstrap_servers) as client:
            answer = client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": CoordinatorKeyType.GROUP,
                                                                 "coordinator_keys": ["a", "b", "c", "d"]})
            leaders = {c["key"]: c["node_id"] for c in answer["coordinators"]}
        assert set(leaders.values()) == {1, 2}, leaders
        group = next(key for key, node in leaders.items() if node == 2)
        assert offsets_partition_for(group, 4) in {0, 1, 2, 3}
        with SimpleClient(one.bootstrap_servers) as client:
            assert join(client, group)["error_code"] == ErrorCode.NOT_COORDINATOR
        with SimpleClient(two.bootstrap_servers) as client:
            wait_until(lambda: join(client, group)["error_code"] == ErrorCode.MEMBER_ID_REQUIRED,
                       what="the group's own coordinator to answer")


GROUP_APIS = {
    ApiKey.FIND_COORDINATOR: (0, 6,
                              {"key": "g", "key_type": CoordinatorKeyType.GROUP, "coordinator_keys": ["g"]}),
    ApiKey.JOIN_GROUP: (0, 9, {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                               "member_id": "", "protocol_type": "consumer",
                               "protocols": [{"name": "range", "metadata": b""}]}),
    ApiKey.SYNC_GROUP: (0, 5, {"group_id": "g", "generation_id": 1, "member_id": "m", "assignments": []}),
    ApiKey.HEARTBEAT: (0, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"}),
    ApiKey.LEAVE_GROUP: (0, 5, {"group_id": "g", "member_id": "m", "members": [{"member_id": "m"}]}),
    ApiKey.OFFSET_COMMIT: (2, 10, {"group_id": "g", "topics": [
        {"name": "t", "topic_id": uuid.uuid4(),
         "partitions": [{"partition_index": 0, "committed_offset": 1}]}]}),
    ApiKey.OFFSET_FETCH: (1, 10, {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}],
                                  "groups": [{"group_id": "g", "topics": None}]}),
    ApiKey.DESCRIBE_GROUPS: (0, 6, {"groups": ["g"]}),
    ApiKey.LIST_GROUPS: (0, 5, {}),
    ApiKey.DELETE_GROUPS: (0, 2, {"groups_names": ["g"]}),
    ApiKey.OFFSET_DELETE: (0, 0, {"group_id": "g", "topics": []}),
}


@pytest.mark.parametrize("api_key", list(GROUP_APIS))
def test_every_version_is_answered(client: SimpleClient, api_key: ApiKey) -> None:
    """Each version of each API gets an answer that decodes (no field a version lacks, no closed
    connection), whatever the group's state: the first FindCoordinator makes the topic."""
    find(client, "g")
    low, high, body = GROUP_APIS[api_key]
    for version in range(low, high + 1):
        if api_key == ApiKey.JOIN_GROUP:  # a group each: a join would wait for the last version's member
            body = {**body, "group_id": f"join-v{version}"}
        answer = client.request(api_key, version, fit_body(api_key, "request", version, body))
        assert isinstance(answer, dict), (api_key, version)


def test_a_coordinator_move_loads_the_groups_offsets() -> None:
    """The broker that takes over a __consumer_offsets partition loads its groups from the log
    (in-process brokers share their logs through the store), so committed offsets move with it."""
    store = MemoryStore()
    config = {"offsets.topic.num.partitions": 2, "offsets.topic.replication.factor": 2}
    brokers = {1: Broker({"broker.id": 1, **config}, store=store), 2: Broker({"broker.id": 2, **config},
                                                                             store=store)}
    for broker in brokers.values():
        broker.__enter__()
    try:
        store.create_topic("t", {0: (1, 2)})
        with SimpleClient(brokers[1].bootstrap_servers) as client:
            find = {"key": "moving", "key_type": CoordinatorKeyType.GROUP}
            found = wait_until(lambda: (answer := client.request(ApiKey.FIND_COORDINATOR, 3, find))[
                "error_code"] == ErrorCode.NONE and answer, what="a coordinator for the group")
        old = found["node_id"]
        with SimpleClient(brokers[old].bootstrap_servers) as client:
            answer = client.request(ApiKey.OFFSET_COMMIT, 8, {
                "group_id": "moving", "generation_id_or_member_epoch": -1, "member_id": "",
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                         "committed_metadata": "m"}]}]})
            assert answer["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
        brokers[old].__exit__(None, None, None)
        new = 2 if old == 1 else 1

        def fetched() -> Any:
            with SimpleClient(brokers[new].bootstrap_servers) as client:
                body = client.request(ApiKey.OFFSET_FETCH, 7, {"group_id": "moving", "topics": None})
            if body["error_code"] != ErrorCode.NONE:
                return None
            return [(t["name"], p["partition_index"], p["committed_offset"], p["metadata"])
                    for t in body["topics"] for p in t["partitions"]]
        assert wait_until(fetched, timeout=15, what="the new coordinator to serve the group") == \
            [("t", 0, 42, "m")]
    finally:
        for broker in brokers.values():
            if broker.runtime is not None:
                broker.__exit__(None, None, None)


def test_a_join_waiting_on_other_members_is_answered_not_coordinator_when_the_broker_stops() -> None:
    """A second member's JoinGroup waits for the first to rejoin; the broker stopping answers it
    NOT_COORDINATOR at once, as Kafka's coordinator does when its groups move away in a controlled
    shutdown, rather than holding the stop and then closing the socket under it."""
    answers: list[Any] = []
    with Broker({"broker.id": 1, "offsets.topic.num.partitions": 5}) as broker, \
            SimpleClient(broker.bootstrap_servers) as first:
        first.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "t", "num_partitions": 2,
                                                            "replication_factor": 1}], "timeout_ms": 5000})
        leader = joined_member(first, "g")
        assert sync(first, "g", leader)["error_code"] == ErrorCode.NONE

        def second_member() -> None:
            with SimpleClient(broker.bootstrap_servers, timeout=30) as second:
                answers.append(joined_member(second, "g"))

        thread = threading.Thread(target=second_member)
        thread.start()
        def second_waits() -> bool:
            view = broker.group("g")
            return view is not None and view.state == "PreparingRebalance" and len(view.members) == 2
        wait_until(second_waits, what="the second member's join waiting for the first")
    thread.join(30)
    assert not thread.is_alive()
    assert answers and answers[0]["error_code"] == ErrorCode.NOT_COORDINATOR
