"""DescribeTopicPartitions (KIP-966) over raw sockets: topics in name order, pages of partitions with a
cursor to the next, Kafka's errors, and the authorizer's say on each topic."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy import Broker
from kafkapy.client import SimpleClient
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey

TOPICS = {"alpha": 3, "beta": 1, "gamma": 5, "delta": 2}  # name -> partitions
NO_TOPIC_ID = uuid.UUID(int=0)


def describe(client: SimpleClient, names: list[str] | None = None, limit: int = 2000,
             cursor: tuple[str, int] | None = None) -> Any:
    body = {"topics": [{"name": n} for n in names or []], "response_partition_limit": limit,
            "cursor": None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]}}
    return client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body)


def pages(client: SimpleClient, names: list[str] | None, limit: int) -> list[tuple[str, int]]:
    """Every (topic, partition) listed, following the cursor page by page."""
    listed: list[tuple[str, int]] = []
    cursor = None
    for _ in range(100):
        answer = describe(client, names, limit, cursor)
        for topic in answer["topics"]:
            listed.extend((topic["name"], p["partition_index"]) for p in topic["partitions"])
        if answer["next_cursor"] is None:
            return listed
        cursor = (answer["next_cursor"]["topic_name"], answer["next_cursor"]["partition_index"])
    raise AssertionError("the cursor never ran out")


@pytest.fixture(scope="module")
def broker() -> Any:
    with Broker({"max.request.partition.size.limit": 4}) as b:
        b.seed({name: {"partitions": count} for name, count in TOPICS.items()})  # led once it returns
        yield b


@pytest.fixture
def client(broker: Broker) -> Any:
    with SimpleClient(broker.bootstrap_servers) as c:
        yield c


def test_every_topic_in_name_order_with_what_metadata_says(client: SimpleClient) -> None:
    answer = describe(client, limit=100)  # the broker's limit (4) wins over the client's
    listed = [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in answer["topics"]]
    assert listed == [("alpha", [0, 1, 2]), ("beta", [0])]
    assert answer["next_cursor"] == {"topic_name": "delta", "partition_index": 0}
    metadata = client.request(ApiKey.METADATA, 12, {"topics": [{"name": "alpha", "topic_id": None}],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
    (expected,) = metadata["topics"]
    (alpha, _) = answer["topics"]
    assert alpha["topic_id"] == expected["topic_id"] and alpha["is_internal"] is False
    for ours, theirs in zip(alpha["partitions"], expected["partitions"], strict=True):
        for field in ("error_code", "leader_id", "leader_epoch", "replica_nodes", "isr_nodes",
                      "offline_replicas"):
            assert ours[field] == theirs[field], field
        assert ours["eligible_leader_replicas"] == [] and ours["last_known_elr"] == []


def test_a_full_page_ends_inside_a_topic_and_the_cursor_goes_on_from_there(client: SimpleClient) -> None:
    answer = describe(client, ["gamma"], limit=2)
    assert [p["partition_index"] for p in answer["topics"][0]["partitions"]] == [0, 1]
    assert answer["next_cursor"] == {"topic_name": "gamma", "partition_index": 2}
    answer = describe(client, ["gamma"], limit=2, cursor=("gamma", 4))
    assert [p["partition_index"] for p in answer["topics"][0]["partitions"]] == [4]
    assert answer["next_cursor"] is None


@settings(max_examples=30, deadline=None)
@given(names=st.one_of(st.none(), st.lists(st.sampled_from([*TOPICS, "missing"]), min_size=1, unique=True)),
       limit=st.integers(-3, 12))
def test_the_pages_add_up_to_one_listing(broker: Broker, names: list[str] | None, limit: int) -> None:
    with SimpleClient(broker.bootstrap_servers) as client:
        listed = pages(client, names, limit)
    wanted = sorted(TOPICS) if names is None else sorted(n for n in names if n in TOPICS)
    assert listed == [(name, index) for name in wanted for index in range(TOPICS[name])]


def test_unknown_topics_and_bad_cursors_get_kafkas_errors(client: SimpleClient) -> None:
    answer = describe(client, ["nope", "beta"])
    by_name = {t["name"]: t for t in answer["topics"]}
    assert by_name["nope"]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert by_name["nope"]["topic_id"] == NO_TOPIC_ID and by_name["nope"]["partitions"] == []
    assert by_name["beta"]["error_code"] == ErrorCode.NONE
    for cursor in (("alpha", -1), ("gamma", 0)):  # a negative partition; a topic not named
        refused = describe(client, ["alpha", "beta"], cursor=cursor)
        assert [(t["name"], t["error_code"]) for t in refused["topics"]] == [
            ("alpha", ErrorCode.INVALID_REQUEST), ("beta", ErrorCode.INVALID_REQUEST)]
        assert refused["next_cursor"] is None


def test_internal_topics_are_marked_internal_here_and_in_metadata() -> None:
    from kafka.admin import KafkaAdminClient

    expected = [("__consumer_offsets", True), ("plain", False)]
    with Broker() as b:
        b.seed({"__consumer_offsets": {"partitions": 1}, "plain": {"partitions": 1}})
        with SimpleClient(b.bootstrap_servers) as client:
            answer = describe(client)
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)  # a real client's Metadata
        try:
            described = admin.describe_topics(["__consumer_offsets", "plain"])
        finally:
            admin.close()
    assert [(t["name"], t["is_internal"]) for t in answer["topics"]] == expected
    assert sorted((t["name"], t["is_internal"]) for t in described) == expected


def test_the_authorizer_decides_per_topic() -> None:
    config = {"authorizer.class.name": "allowlist", "allowlist.rules": "*@*:DESCRIBE_CONFIGS"}
    with Broker(config) as b:
        b.seed({"hidden": {"partitions": 1}})
        with SimpleClient(b.bootstrap_servers) as client:
            assert describe(client)["topics"] == []  # listing all: the topic is left out
            (refused,) = describe(client, ["hidden"])["topics"]
            assert refused["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            assert refused["topic_id"] == NO_TOPIC_ID and refused["partitions"] == []
