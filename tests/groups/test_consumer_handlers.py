"""ConsumerGroupHeartbeat and ConsumerGroupDescribe through the codec, at every version the
handlers declare: requests as clients encode them, responses that decode at the same version."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from consumer_sim import parts, topic_id, topics
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.consumer_group import ConsumerGroupConfig, ConsumerGroups, TopicInfo
from kafkapy.groups.consumer_handlers import (
    CONSUMER_GROUP_VERSIONS,
    ConsumerGroupHandlers,
    consumer_group_config,
)
from kafkapy.groups.records import GroupRecord
from kafkapy.protocol import decode_request, decode_response, encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.codec import encode_response_body, response_header
from kafkapy.server.config import ConfigError
from kafkapy.server.connection import ConnectionInfo
from kafkapy.server.modules import RequestContext

VERSIONS = list(range(CONSUMER_GROUP_VERSIONS.low, CONSUMER_GROUP_VERSIONS.high + 1))
HEARTBEAT, DESCRIBE = ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE
T = topic_id("t")


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def make(topic_map: dict[str, TopicInfo] | None = None, **kwargs: Any) -> ConsumerGroupHandlers:
    topic_map = topics(t=4) if topic_map is None else topic_map
    return ConsumerGroupHandlers(ConsumerGroups(lambda: topic_map), **kwargs)


def wire(api_key: ApiKey, version: int, body: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """The request as a client sends it, decoded as the broker reads it."""
    decoded = decode_request(encode_request(api_key, version, 1, "client", body))
    return decoded.body, decoded


def answer(api_key: ApiKey, version: int, response: dict[str, Any]) -> Any:
    frame = response_header(api_key, version, 1) + encode_response_body(api_key, version, response)
    return decode_response(frame, api_key, version).body


def join_body(member_id: str = "m1", **extra: Any) -> dict[str, Any]:
    return {"group_id": "g", "member_id": member_id, "member_epoch": 0, "rebalance_timeout_ms": 300_000,
            "subscribed_topic_names": ["t"], "topic_partitions": [], **extra}


def heartbeat(handlers: ConsumerGroupHandlers, version: int, body: dict[str, Any]) -> Any:
    request, _ = wire(HEARTBEAT, version, body)
    return answer(HEARTBEAT, version, asyncio.run(handlers.heartbeat(request, version, client_id="client",
                                                                       client_host="/127.0.0.1")))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_join_and_its_assignment_round_trip_through_the_codec(version: int) -> None:
    handlers = make()
    joined = heartbeat(handlers, version, join_body())
    assert joined["error_code"] == ErrorCode.NONE and joined["member_id"] == "m1"
    assert joined["member_epoch"] == 1 and joined["heartbeat_interval_ms"] == 5_000
    assert joined["assignment"]["topic_partitions"] == [{"topic_id": T, "partitions": [0, 1, 2, 3]}]
    again = heartbeat(handlers, version, {"group_id": "g", "member_id": "m1", "member_epoch": 1,
                                          "topic_partitions": joined["assignment"]["topic_partitions"]})
    assert again["member_epoch"] == 1 and again["assignment"] is None, "nothing changed, nothing resent"


def test_v0_lets_the_coordinator_name_the_member_and_v1_does_not() -> None:
    handlers = make()
    assert len(heartbeat(handlers, 0, join_body(member_id=""))["member_id"]) == 22
    refused = heartbeat(handlers, 1, join_body(member_id=""))
    assert refused["error_code"] == ErrorCode.INVALID_REQUEST
    assert refused["error_message"] == "MemberId can't be empty."
    assert refused["member_id"] is None and refused["assignment"] is None


def test_a_regex_subscription_at_v1() -> None:
    handlers = make(topics(orders=2, payments=1, other=1))
    joined = heartbeat(handlers, 1, join_body(subscribed_topic_names=None,
                                              subscribed_topic_regex="orders|pay.*"))
    assigned = {tp["topic_id"] for tp in joined["assignment"]["topic_partitions"]}
    assert assigned == {topic_id("orders"), topic_id("payments")}
    bad = heartbeat(handlers, 1, join_body("m2", subscribed_topic_names=None,
                                           subscribed_topic_regex="(?<=x)y"))
    assert bad["error_code"] == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert "SubscribedTopicRegex" in bad["error_message"]


def test_a_heartbeat_that_cannot_be_made_durable_is_refused_and_undone() -> None:
    failing = True
    written: list[GroupRecord] = []

    async def persist(group_id: str, records: Sequence[GroupRecord]) -> None:
        if failing:
            raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        written.extend(records)

    handlers = make(persist=persist)
    assert heartbeat(handlers, 1, join_body())["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert handlers.groups.groups == {}
    failing = False
    first = heartbeat(handlers, 1, join_body())
    assert first["member_epoch"] == 1 and written
    failing = True
    second = heartbeat(handlers, 1, join_body("m2"))
    assert second["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    group = handlers.groups.groups["g"]
    assert list(group.members) == ["m1"] and group.group_epoch == 1


@pytest.mark.parametrize("version", VERSIONS)
def test_describe_reports_the_group_and_its_members(version: int) -> None:
    handlers = make()
    heartbeat(handlers, version, join_body())
    heartbeat(handlers, version, join_body("m2", instance_id="i2", rack_id="r1"))
    request, _ = wire(DESCRIBE, version, {"group_ids": ["g", "missing"],
                                          "include_authorized_operations": False})
    described = answer(DESCRIBE, version, handlers.describe(request, version))
    group, missing = described["groups"]
    assert missing["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert missing["error_message"] == "Group missing not found."
    assert group["error_code"] == ErrorCode.NONE and group["group_state"] == "Reconciling"
    assert group["group_epoch"] == 2 == group["assignment_epoch"] and group["assignor_name"] == "uniform"
    members = {m["member_id"]: m for m in group["members"]}
    assert members["m2"]["instance_id"] == "i2" and members["m2"]["rack_id"] == "r1"
    assert members["m2"]["client_host"] == "/127.0.0.1" and members["m1"]["subscribed_topic_names"] == ["t"]
    target = members["m2"]["target_assignment"]["topic_partitions"]
    assert target and target[0]["topic_name"] == "t" and len(target[0]["partitions"]) == 2
    assert members["m2"]["assignment"]["topic_partitions"] == [], "m1 has not released them yet"
    if version >= 1:
        assert members["m1"]["member_type"] == 1


def test_describe_leaves_out_a_deleted_topic_s_partitions() -> None:
    """Kafka's asConsumerGroupDescribeMember skips topic ids its metadata no longer has; a blank
    topic name would reach the admin client as a topic called ""."""
    topic_map = topics(t=2, u=2)
    handlers = make(topic_map)
    heartbeat(handlers, 1, join_body(subscribed_topic_names=["t", "u"]))
    del topic_map["u"]
    request, _ = wire(DESCRIBE, 1, {"group_ids": ["g"], "include_authorized_operations": False})
    member = answer(DESCRIBE, 1, handlers.describe(request, 1))["groups"][0]["members"][0]
    for field in ("assignment", "target_assignment"):
        described = [(tp["topic_name"], tp["partitions"]) for tp in member[field]["topic_partitions"]]
        assert described == [("t", [0, 1])]


def test_the_registered_handlers_read_the_client_from_the_request_context() -> None:
    handlers = make()
    apis = handlers.apis()
    assert set(apis) == {HEARTBEAT, DESCRIBE}
    _, request = wire(HEARTBEAT, 1, join_body())
    connection = ConnectionInfo(id="c1", listener="PLAINTEXT", security_protocol="PLAINTEXT",
                                client_address=("10.0.0.7", 51234), broker_address=("127.0.0.1", 9092))
    context = RequestContext(connection, HEARTBEAT, 1, 1, "rdkafka")
    result: Any = asyncio.run(apis[HEARTBEAT].handle(context, request))  # type: ignore[arg-type]
    assert result["member_epoch"] == 1
    member = handlers.groups.groups["g"].members["m1"]
    assert (member.client_id, member.client_host) == ("rdkafka", "/10.0.0.7")


def test_expire_fences_silent_members_and_persists_it() -> None:
    clock = Clock()
    written: list[GroupRecord] = []

    async def persist(group_id: str, records: Sequence[GroupRecord]) -> None:
        written.extend(records)

    handlers = make(persist=persist, clock=clock)
    heartbeat(handlers, 1, join_body())
    assert handlers.next_deadline() == 45_000
    clock.now = 45_000
    written.clear()
    asyncio.run(handlers.expire())
    assert handlers.groups.groups["g"].members == {} and any(r.value is None for r in written)
    assert handlers.next_deadline() is None


@pytest.mark.parametrize(("failure", "retried"), [(ErrorCode.NOT_ENOUGH_REPLICAS, True),
                                                  (ErrorCode.NOT_COORDINATOR, False)])
def test_a_fencing_that_cannot_be_written_is_tried_again(failure: ErrorCode, retried: bool) -> None:
    """Kafka's coordinator timers retry a failed write 500 ms later; a member whose fencing was not
    written must not be left in the group with no deadline (it held its partitions for ever)."""
    clock = Clock()
    failing = False

    async def persist(group_id: str, records: Sequence[GroupRecord]) -> None:
        if failing:
            raise KafkaApiError(failure)

    handlers = make(persist=persist, clock=clock)
    heartbeat(handlers, 1, join_body())
    clock.now, failing = 45_000, True
    asyncio.run(handlers.expire())  # the write fails: the group is as it was
    assert list(handlers.groups.groups["g"].members) == ["m1"]
    if not retried:  # the coordinator moved: the new one times the members out
        assert handlers.next_deadline() is None
        return
    assert handlers.next_deadline() == 45_500
    clock.now, failing = 45_500, False
    asyncio.run(handlers.expire())
    assert handlers.groups.groups["g"].members == {} and handlers.next_deadline() is None


def test_a_heartbeat_not_written_leaves_every_deadline_as_it_was() -> None:
    """A static member that left (epoch -2) and a replacement whose join cannot be written: the
    leaver is still in the group, so it must still expire with its session."""
    clock = Clock()
    failing = False

    async def persist(group_id: str, records: Sequence[GroupRecord]) -> None:
        if failing:
            raise KafkaApiError(ErrorCode.NOT_ENOUGH_REPLICAS)

    handlers = make(persist=persist, clock=clock)
    heartbeat(handlers, 1, join_body("s1", instance_id="i"))
    assert heartbeat(handlers, 1, {"group_id": "g", "member_id": "s1", "member_epoch": -2,
                                   "instance_id": "i"})["member_epoch"] == -2
    clock.now, failing = 10_000, True
    refused = heartbeat(handlers, 1, join_body("s2", instance_id="i"))
    assert refused["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
    assert list(handlers.groups.groups["g"].members) == ["s1"]
    assert handlers.next_deadline() == 45_000, "neither s1's deadline cancelled nor s2's started"
    clock.now, failing = 45_000, False
    asyncio.run(handlers.expire())
    assert handlers.groups.groups["g"].members == {}


def test_the_group_consumer_settings_with_kafkas_defaults_and_class_names() -> None:
    assert consumer_group_config({}) == ConsumerGroupConfig()
    configured = consumer_group_config({
        "group.consumer.session.timeout.ms": 6_000, "group.consumer.heartbeat.interval.ms": 500,
        "group.consumer.max.size": 3,
        "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform"})
    assert configured == ConsumerGroupConfig(6_000, 500, 3, ("range", "uniform"))
    with pytest.raises(ConfigError, match=r"group\.consumer\.assignors"):
        consumer_group_config({"group.consumer.assignors": "sticky"})


TOPIC_IDS = [topic_id("t"), topic_id("u"), topic_id("nope")]
heartbeat_bodies = st.fixed_dictionaries({
    "group_id": st.sampled_from(["g", "", "h"]),
    "member_id": st.sampled_from(["m1", "m2", "", "x" * 40]),
    "member_epoch": st.integers(-4, 6),
    "instance_id": st.none() | st.sampled_from(["", "i1", "i2"]),
    "rack_id": st.none() | st.sampled_from(["", "r"]),
    "rebalance_timeout_ms": st.sampled_from([-1, 0, 1_000, 2**31 - 1]),
    "subscribed_topic_names": st.none() | st.lists(st.sampled_from(["t", "u", "", "missing"]), max_size=3),
    "subscribed_topic_regex": st.none() | st.text(alphabet="tu.*+?()[]{}|^$\\-0123456789,<=!:P", max_size=8),
    "server_assignor": st.none() | st.sampled_from(["uniform", "range", "", "sticky"]),
    "topic_partitions": st.none() | st.lists(st.fixed_dictionaries({
        "topic_id": st.sampled_from(TOPIC_IDS), "partitions": st.lists(st.integers(-1, 5), max_size=4)}),
        max_size=3),
})


owned = st.lists(st.fixed_dictionaries({"topic_id": st.sampled_from(TOPIC_IDS),
                                         "partitions": st.lists(st.integers(0, 3), max_size=3)}), max_size=2)
joins = st.fixed_dictionaries({
    "group_id": st.just("g"), "member_id": st.sampled_from(["m1", "m2", "m3"]), "member_epoch": st.just(0),
    "instance_id": st.none() | st.sampled_from(["i1", "i2"]), "rebalance_timeout_ms": st.just(1_000),
    "subscribed_topic_names": st.lists(st.sampled_from(["t", "u", "missing"]), max_size=2),
    "server_assignor": st.none() | st.sampled_from(["uniform", "range"]), "topic_partitions": st.just([])})
follow_ups = st.fixed_dictionaries({
    "group_id": st.just("g"), "member_id": st.sampled_from(["m1", "m2", "m3"]),
    "member_epoch": st.integers(-2, 4), "instance_id": st.none() | st.sampled_from(["i1", "i2"]),
    "topic_partitions": st.none() | owned})


@settings(max_examples=300, deadline=None)
@given(st.lists(heartbeat_bodies | joins | follow_ups, min_size=1, max_size=12))
def test_any_heartbeat_is_answered_with_a_response_or_one_kafka_error(bodies: list[dict[str, Any]]) -> None:
    """Whatever a client sends, the answer encodes at its version: a response, or an error code
    with nothing else changed, never an exception."""
    handlers = make(topics(t=3, u=2))
    for body in bodies:
        answered = heartbeat(handlers, 1, body)
        assert answered["error_code"] == ErrorCode.NONE or answered["assignment"] is None
    for group in handlers.groups.groups.values():
        held = [tp for m in group.members.values() for tp in parts(m.assigned) | parts(m.pending_revocation)]
        assert len(held) == len(set(held))
