"""ShareGroupHeartbeat's checks on the wire, in Kafka 4.2's order (KafkaApis, GroupCoordinatorService,
GroupMetadataManager): the group's READ, the member id (1 to 36 characters, also on ShareFetch and
ShareAcknowledge), DESCRIBE on every subscribed topic, the request's own validity, then the group:
GROUP_ID_NOT_FOUND for a heartbeat or leave of a group that does not exist, the previous member
epoch accepted (the answer that moved a member on may be lost) and an epoch 0 from a member whose
epoch moved on fenced, the assignment sent again to a full request; and the broker's share
session limit."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from share_wire_client import TOPIC, ready, setup_topic, share_fetch

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import BrokerFactory

LONG_MEMBER_ID = "m" * 37  # one past a UUID's 36 characters


@pytest.fixture
def client(kafka_broker_factory: BrokerFactory) -> Iterator[SimpleClient]:
    broker = kafka_broker_factory({"share.auto.offset.reset": "earliest"})
    simple, _ = setup_topic(broker, 1)
    with simple:
        ready(simple, "g", "nobody", "classic")
        yield simple


def beat(client: SimpleClient, member: str, epoch: int, topics: list[str] | None = None,
         group: str = "g", rack: str | None = None) -> dict[str, Any]:
    return dict(client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": rack,
        "subscribed_topic_names": topics}))


def test_a_heartbeat_or_leave_for_a_group_that_does_not_exist_is_group_id_not_found(
        client: SimpleClient) -> None:
    for epoch in (1, -1):
        answer = beat(client, "m", epoch, group="nobody")
        assert answer["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND, epoch
        assert answer["error_message"] in ("Share group nobody not found.", "Group nobody not found.")
    assert beat(client, "m", 0, [TOPIC], group="nobody")["error_code"] == ErrorCode.NONE
    assert beat(client, "stranger", 1, group="nobody")["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID


def test_the_previous_epoch_is_accepted_and_a_rejoin_after_the_epoch_moved_is_fenced(
        client: SimpleClient) -> None:
    assert beat(client, "a", 0, [TOPIC])["member_epoch"] == 1
    assert beat(client, "b", 0, [TOPIC])["member_epoch"] == 2
    moved = beat(client, "a", 1)
    assert moved["error_code"] == ErrorCode.NONE and moved["member_epoch"] == 2
    # the answer above lost: a heartbeats again at 1, its previous epoch, and is told 2 again
    lost = beat(client, "a", 1)
    assert lost["error_code"] == ErrorCode.NONE and lost["member_epoch"] == 2
    assert beat(client, "a", 3)["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH  # ahead
    # an epoch 0 from a member the group still holds at 2 (previous 1) is neither: fenced
    rejoin = beat(client, "a", 0, [TOPIC])
    assert rejoin["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    assert "previous member epoch (1)" in rejoin["error_message"]


def test_a_full_request_gets_the_assignment_again(client: SimpleClient) -> None:
    joined = beat(client, "a", 0, [TOPIC])
    assert joined["assignment"] is not None
    assert beat(client, "a", 1)["assignment"] is None  # nothing changed, nothing sent
    full = beat(client, "a", 1, [TOPIC])  # what a member sends after an error
    assert full["assignment"] == joined["assignment"]


@pytest.mark.parametrize(("fields", "message"), [
    ({"member": LONG_MEMBER_ID}, "Invalid member id in the request."),
    ({"member": ""}, "Invalid member id in the request."),
    ({"member": " "}, "MemberId can't be empty."),
    ({"group": " "}, "GroupId can't be empty."),
    ({"rack": ""}, "RackId can't be empty."),
    ({"epoch": -2}, "MemberEpoch is invalid."),
    ({"topics": None}, "SubscribedTopicNames must be set in first request."),
])
def test_malformed_heartbeats_are_invalid_request_before_the_group_is_looked_at(
        client: SimpleClient, fields: dict[str, Any], message: str) -> None:
    """Kafka validates before the coordinator looks at the group: a malformed request for a
    classic group's id is INVALID_REQUEST, not GROUP_ID_NOT_FOUND."""
    classic = client.request(ApiKey.JOIN_GROUP, 5, {
        "group_id": "classic", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}], "reason": None})
    assert classic["error_code"] == ErrorCode.MEMBER_ID_REQUIRED  # the group exists, classic
    request = {"member": "m", "epoch": 0, "topics": [TOPIC], "group": "classic", "rack": None, **fields}
    answer = beat(client, request["member"], request["epoch"], request["topics"], request["group"],
                  request["rack"])
    assert (answer["error_code"], answer["error_message"]) == (ErrorCode.INVALID_REQUEST, message)


def test_share_fetch_and_acknowledge_refuse_a_member_id_longer_than_a_uuid(
        kafka_broker_factory: BrokerFactory) -> None:
    broker = kafka_broker_factory({"share.auto.offset.reset": "earliest"})
    simple, topic_id = setup_topic(broker, 1)
    with simple:
        fetched = share_fetch(simple, topic_id, LONG_MEMBER_ID, 0)
        assert (fetched["error_code"], fetched["error_message"]) == (
            ErrorCode.INVALID_REQUEST, "Invalid member id in the request.")
        acknowledged = simple.request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
            "group_id": "g", "member_id": LONG_MEMBER_ID, "share_session_epoch": 1, "topics": []})
        assert acknowledged["error_code"] == ErrorCode.INVALID_REQUEST
        # 36 characters is a member id; an epoch below -1 is the session's question, as in Kafka
        longest = share_fetch(simple, topic_id, "m" * 36, 0)
        assert longest["error_code"] == ErrorCode.NONE
        stale = share_fetch(simple, topic_id, "m" * 36, -5)
        assert stale["error_code"] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert share_fetch(simple, topic_id, "x", -5)["error_code"] == ErrorCode.SHARE_SESSION_NOT_FOUND


class NoDescribeOnSecrets:
    """A user's authorizer (a dotted-path class): everything allowed but DESCRIBE on topic 'secret'."""

    def configure(self, configs: Any) -> None:
        pass

    def authorize(self, principal: str, client_address: str, operation: str, resource_type: str,
                  resource_name: str) -> bool:
        return not (operation == "DESCRIBE" and resource_type == "TOPIC" and resource_name == "secret")


def test_subscribing_to_a_topic_without_describe_is_topic_authorization_failed() -> None:
    with Broker({"authorizer.class.name": f"{__name__}.NoDescribeOnSecrets"}) as broker:
        broker.seed({TOPIC: {"partitions": 1}, "secret": {"partitions": 1}})
        with SimpleClient(broker.bootstrap_servers) as client:
            ready(client, "g")
            refused = beat(client, "m", 0, [TOPIC, "secret"])
            assert refused["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            assert broker.share_groups() == []  # refused before the group was made
            assert beat(client, "m", 0, [TOPIC])["error_code"] == ErrorCode.NONE
            changed = beat(client, "m", 1, ["secret"])
            assert changed["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_past_group_share_max_share_sessions_a_new_session_is_refused_after_max_wait(
        kafka_broker_factory: BrokerFactory) -> None:
    """Kafka's ShareSessionCache holds at most group.share.max.share.sessions: a ShareFetch that
    would open one more waits its MaxWaitMs (IdleShareFetchTimerTask) and answers
    SHARE_SESSION_LIMIT_REACHED; a member's own session is replaced, and a closed one makes room."""
    broker = kafka_broker_factory({"share.auto.offset.reset": "earliest", "group.share.max.size": 1,
                                   "group.share.max.share.sessions": 1})
    simple, topic_id = setup_topic(broker, 1)
    with simple:
        assert share_fetch(simple, topic_id, "a", 0)["error_code"] == ErrorCode.NONE
        assert share_fetch(simple, topic_id, "a", 0)["error_code"] == ErrorCode.NONE  # its own, again
        began = time.monotonic()
        refused = share_fetch(simple, topic_id, "b", 0, max_wait_ms=300)
        assert refused["error_code"] == ErrorCode.SHARE_SESSION_LIMIT_REACHED
        assert time.monotonic() - began >= 0.3
        assert share_fetch(simple, topic_id, "a", -1)["error_code"] == ErrorCode.NONE  # a closes its
        assert share_fetch(simple, topic_id, "b", 0)["error_code"] == ErrorCode.NONE
