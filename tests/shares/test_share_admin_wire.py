"""Share groups' admin APIs on the wire: ShareGroupDescribe, DescribeShareGroupOffsets,
AlterShareGroupOffsets and DeleteShareGroupOffsets, with Kafka's errors."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from share_wire_client import TOPIC, acquired, ready, setup_topic, share_fetch

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import BrokerFactory


@pytest.fixture
def broker(kafka_broker_factory: BrokerFactory) -> Broker:
    return kafka_broker_factory({"share.auto.offset.reset": "earliest"})


def _join(client: SimpleClient, member: str, epoch: int = 0) -> dict[str, Any]:
    return dict(client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": "g", "member_id": member, "member_epoch": epoch, "rack_id": "r1",
        "subscribed_topic_names": [TOPIC] if epoch == 0 else None}))


def _offsets(client: SimpleClient, version: int = 1, topics: Any = None, group: str = "g") -> dict[str, Any]:
    answer = client.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version, {
        "groups": [{"group_id": group, "topics": topics}]})
    row: dict[str, Any] = answer["groups"][0]
    return row


def test_describe_lists_members_their_assignment_and_the_group_epochs(broker: Broker) -> None:
    client, topic_id = setup_topic(broker, 0)
    with client:
        ready(client, "g")
        _join(client, "m1")
        _join(client, "m2")
        described = client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
            "group_ids": ["g", "nobody"], "include_authorized_operations": False})["groups"]
        group, missing = described
        assert group["error_code"] == ErrorCode.NONE and group["group_state"] == "Stable"
        assert group["group_epoch"] == 2 and group["assignor_name"] == "simple"
        members = {m["member_id"]: m for m in group["members"]}
        assert sorted(members) == ["m1", "m2"] and members["m1"]["rack_id"] == "r1"
        assert members["m2"]["assignment"]["topic_partitions"] == [
            {"topic_id": topic_id, "topic_name": TOPIC, "partitions": [0]}]
        assert missing["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_describe_offsets_gives_the_start_offset_and_lag(broker: Broker) -> None:
    client, topic_id = setup_topic(broker, 4)
    with client:
        ready(client, "g")
        _join(client, "m1")
        assert _offsets(client)["topics"] == []  # nothing fetched yet
        unfetched = _offsets(client, topics=[{"topic_name": TOPIC, "partitions": [0]}])
        assert unfetched["topics"][0]["partitions"][0]["start_offset"] == -1
        assert acquired(share_fetch(client, topic_id, "m1", 0)) == [(0, 3, 1)]
        share_fetch(client, topic_id, "m1", 1, acks=[{"first_offset": 0, "last_offset": 3,
                                                 "acknowledge_types": [1, 1, 2, 1]}])
        row = _offsets(client)["topics"][0]
        assert row["topic_name"] == TOPIC and row["topic_id"] == topic_id
        partition = row["partitions"][0]
        assert partition["start_offset"] == 2  # 0 and 1 accepted; 2 released (acquired again), 3 accepted
        assert partition["lag"] == 1  # offset 2 is still owed; 3 is done
        assert "lag" not in _offsets(client, version=0)["topics"][0]["partitions"][0]


def test_describe_offsets_answers_no_state_as_minus_one_without_an_error(broker: Broker) -> None:
    """Kafka 4.2's GroupCoordinatorService.describeShareGroupOffsets: a topic, partition or group
    with nothing kept is start offset -1, lag -1 and no error ("absence of data, rather than an
    error", as OffsetFetch); with all topics asked, a group with none initialized lists none."""
    client, topic_id = setup_topic(broker, 1)
    with client:
        ready(client, "g", "absent")
        unknown = _offsets(client, topics=[{"topic_name": "nope", "partitions": [0]},
                                           {"topic_name": TOPIC, "partitions": [7]}])
        rows = [(t["topic_id"], p["partition_index"], p["start_offset"], p["lag"], p["error_code"])
                for t in unknown["topics"] for p in t["partitions"]]
        assert unknown["error_code"] == ErrorCode.NONE
        assert sorted(rows, key=str) == sorted([(uuid.UUID(int=0), 0, -1, -1, ErrorCode.NONE),
                                                (topic_id, 7, -1, -1, ErrorCode.NONE)], key=str)
        absent = _offsets(client, group="absent")
        assert (absent["error_code"], absent["topics"]) == (ErrorCode.NONE, [])
        named = _offsets(client, group="absent", topics=[{"topic_name": TOPIC, "partitions": [0]}])
        assert named["topics"][0]["partitions"][0]["start_offset"] == -1


class NoDescribeOnSecrets:
    """A user's authorizer (a dotted-path class): everything allowed but DESCRIBE on topic 'secret'
    while ``hidden`` (class-wide: the broker makes the instance)."""

    hidden = True

    def configure(self, configs: Any) -> None:
        pass

    def authorize(self, principal: str, client_address: str, operation: str, resource_type: str,
                  resource_name: str) -> bool:
        secret = operation == "DESCRIBE" and resource_type == "TOPIC" and resource_name == "secret"
        return not (secret and NoDescribeOnSecrets.hidden)


def test_describing_a_group_assigned_a_topic_without_describe_is_topic_authorization_failed() -> None:
    """KafkaApis.handleShareGroupDescribe: a group whose members hold a topic the caller may not
    describe is answered TOPIC_AUTHORIZATION_FAILED, with no members."""
    with Broker({"authorizer.class.name": f"{__name__}.NoDescribeOnSecrets"}) as broker:
        broker.seed({"secret": {"partitions": 1}})
        with SimpleClient(broker.bootstrap_servers) as client:
            ready(client, "g")
            NoDescribeOnSecrets.hidden = False
            try:  # the member may describe it when it joins; the admin below may not
                joined = client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
                    "group_id": "g", "member_id": "m", "member_epoch": 0, "rack_id": None,
                    "subscribed_topic_names": ["secret"]})
                assert joined["error_code"] == ErrorCode.NONE
            finally:
                NoDescribeOnSecrets.hidden = True
            described = client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
                "group_ids": ["g"], "include_authorized_operations": False})["groups"][0]
            assert described["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            assert described["members"] == []


def test_describe_offsets_of_a_topic_without_describe_is_topic_authorization_failed() -> None:
    """KafkaApis.describeShareGroupOffsetsForGroup: a named topic the caller may not describe is
    answered, each partition TOPIC_AUTHORIZATION_FAILED; it was left out."""
    with Broker({"authorizer.class.name": f"{__name__}.NoDescribeOnSecrets"}) as broker:
        broker.seed({TOPIC: {"partitions": 1}, "secret": {"partitions": 2}})
        with SimpleClient(broker.bootstrap_servers) as client:
            ready(client, "g")
            answer = _offsets(client, topics=[{"topic_name": TOPIC, "partitions": [0]},
                                              {"topic_name": "secret", "partitions": [0, 1]}])
            codes = {t["topic_name"]: [p["error_code"] for p in t["partitions"]] for t in answer["topics"]}
            assert codes == {TOPIC: [ErrorCode.NONE],
                             "secret": [ErrorCode.TOPIC_AUTHORIZATION_FAILED] * 2}


def test_alter_and_delete_need_an_empty_group_and_move_where_it_starts(broker: Broker) -> None:
    client, topic_id = setup_topic(broker, 5)
    with client:
        ready(client, "g")
        _join(client, "m1")
        alter = {"group_id": "g", "topics": [{"topic_name": TOPIC, "partitions": [
            {"partition_index": 0, "start_offset": 3}]}]}
        busy = client.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter)
        assert busy["error_code"] == ErrorCode.NON_EMPTY_GROUP
        delete = {"group_id": "g", "topics": [{"topic_name": TOPIC}]}
        busy = client.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, delete)
        assert busy["error_code"] == ErrorCode.NON_EMPTY_GROUP
        _join(client, "m1", epoch=-1)
        altered = client.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter)
        assert altered["error_code"] == ErrorCode.NONE
        assert altered["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
        assert acquired(share_fetch(client, topic_id, "m1", 0)) == [(3, 4, 1)]
        share_fetch(client, topic_id, "m1", -1)  # closes the session: 3 and 4 go back
        deleted = client.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, delete)
        assert deleted["error_code"] == ErrorCode.NONE
        assert deleted["responses"][0]["error_code"] == ErrorCode.NONE
        assert _offsets(client)["topics"] == []
        assert acquired(share_fetch(client, topic_id, "m1", 0)) == [(0, 4, 1)]  # from share.auto.offset.reset


def test_alter_refuses_bad_partitions_and_offsets(broker: Broker) -> None:
    client, _ = setup_topic(broker, 0)
    with client:
        ready(client, "fresh")
        answer = client.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": "fresh", "topics": [
            {"topic_name": TOPIC, "partitions": [{"partition_index": 9, "start_offset": 0},
                                                 {"partition_index": 0, "start_offset": -5}]},
            {"topic_name": "nope", "partitions": [{"partition_index": 0, "start_offset": 0}]}]})
        codes = [[p["error_code"] for p in t["partitions"]] for t in answer["responses"]]
        assert codes == [[ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_REQUEST],
                         [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]]
        assert answer["responses"][1]["topic_id"] == uuid.UUID(int=0)
        missing = client.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": "absent", "topics": []})
        assert missing["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_consumer_groups_id_is_not_a_share_group_to_the_admin_apis(broker: Broker) -> None:
    client, _ = setup_topic(broker, 0)
    with client:
        ready(client, "kip848")
        client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
            "group_id": "kip848", "member_id": "c", "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 10_000, "subscribed_topic_names": [TOPIC], "server_assignor": None,
            "topic_partitions": []})
        described = client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
            "group_ids": ["kip848"], "include_authorized_operations": False})["groups"][0]
        assert described["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        # Kafka reads offsets from the share state, whatever the group: a consumer group has none
        offsets = _offsets(client, group="kip848")
        assert (offsets["error_code"], offsets["topics"]) == (ErrorCode.NONE, [])


def test_list_groups_shows_share_groups_and_delete_groups_deletes_an_empty_one(broker: Broker) -> None:
    client, topic_id = setup_topic(broker, 2)
    with client:
        ready(client, "g")
        _join(client, "m1")
        assert acquired(share_fetch(client, topic_id, "m1", 0)) == [(0, 1, 1)]
        listed = client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
        assert listed["groups"] == [{"group_id": "g", "protocol_type": "share", "group_state": "Stable",
                                     "group_type": "share"}]
        assert client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})[
            "groups"] == []
        busy = client.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})["results"][0]
        assert busy["error_code"] == ErrorCode.NON_EMPTY_GROUP
        _join(client, "m1", epoch=-1)
        empty = client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": ["empty"], "types_filter": []})
        assert [g["group_id"] for g in empty["groups"]] == ["g"]
        gone = client.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})["results"][0]
        assert gone["error_code"] == ErrorCode.NONE
        described = client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
            "group_ids": ["g"], "include_authorized_operations": False})["groups"][0]
        assert described["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        # its share-partition went too: a new group of that id starts at share.auto.offset.reset
        _join(client, "m2")
        assert acquired(share_fetch(client, topic_id, "m2", 0)) == [(0, 1, 1)]


_ADMIN_ERRORS = {ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.NON_EMPTY_GROUP,
                 ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
_NAMES = st.sampled_from([TOPIC, "nope", ""])
_GROUPS = st.sampled_from(["g", "absent", "busy"])


@pytest.fixture(scope="module")
def admin_broker() -> Iterator[Broker]:
    with Broker({"share.auto.offset.reset": "earliest"}) as broker:
        broker.seed({TOPIC: {"partitions": 2, "records": [{"value": "v"}]}})
        with SimpleClient(broker.bootstrap_servers) as client:
            ready(client, "g", "absent", "busy")
            client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
                "group_id": "busy", "member_id": "m", "member_epoch": 0, "rack_id": None,
                "subscribed_topic_names": [TOPIC]})
        yield broker


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(group=_GROUPS, name=_NAMES, indexes=st.lists(st.integers(-2, 3), max_size=3),
       offset=st.integers(-3, 2**40), api=st.sampled_from(["describe", "offsets", "alter", "delete"]))
def test_fuzzed_admin_requests_get_kafkas_errors(admin_broker: Broker, group: str, name: str,
                                                indexes: list[int], offset: int, api: str) -> None:
    with SimpleClient(admin_broker.bootstrap_servers) as client:
        if api == "describe":
            rows = client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
                "group_ids": [group], "include_authorized_operations": True})["groups"]
            codes = [r["error_code"] for r in rows]
        elif api == "offsets":
            answer = client.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [
                {"group_id": group, "topics": [{"topic_name": name, "partitions": indexes}]}]})["groups"][0]
            codes = [answer["error_code"]]
            codes += [p["error_code"] for t in answer["topics"] for p in t["partitions"]]
        elif api == "alter":
            answer = client.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
                {"topic_name": name, "partitions": [{"partition_index": i, "start_offset": offset}
                                                    for i in indexes]}]})
            codes = [answer["error_code"]]
            codes += [p["error_code"] for t in answer["responses"] for p in t["partitions"]]
        else:
            answer = client.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {
                "group_id": group, "topics": [{"topic_name": name}]})
            codes = [answer["error_code"]] + [t["error_code"] for t in answer["responses"]]
        assert set(codes) <= _ADMIN_ERRORS


def test_describe_groups_refuses_a_share_group_as_not_classic(broker: Broker) -> None:
    client, _ = setup_topic(broker, 0)
    with client:
        ready(client, "g")
        _join(client, "m1")
        asked = {"groups": ["g"], "include_authorized_operations": False}
        v6 = client.request(ApiKey.DESCRIBE_GROUPS, 6, asked)
        assert (v6["groups"][0]["error_code"], v6["groups"][0]["error_message"]) == (
            ErrorCode.GROUP_ID_NOT_FOUND, "Group g is not a classic group.")
        v5 = client.request(ApiKey.DESCRIBE_GROUPS, 5, asked)
        assert (v5["groups"][0]["error_code"], v5["groups"][0]["group_state"]) == (ErrorCode.NONE, "Dead")


def test_delete_offsets_of_a_topic_the_group_keeps_nothing_of_is_unknown_topic_or_partition(
        broker: Broker) -> None:
    """Kafka's GroupMetadataManager.sharePartitionsEligibleForOffsetDeletion: only topics with the
    group's share state are deleted; another existing topic answers UNKNOWN_TOPIC_OR_PARTITION,
    "There is no offset information to delete." (it answered no error, deleting nothing)."""
    client, topic_id = setup_topic(broker, 2)
    broker.seed({"other": {"partitions": 1}})
    with client:
        ready(client, "g")
        _join(client, "m1")
        share_fetch(client, topic_id, "m1", 0)
        share_fetch(client, topic_id, "m1", -1)
        _join(client, "m1", epoch=-1)  # the group is empty again
        deleted = client.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {
            "group_id": "g", "topics": [{"topic_name": TOPIC}, {"topic_name": "other"}]})
        rows = {t["topic_name"]: (t["error_code"], t["error_message"]) for t in deleted["responses"]}
        assert rows == {TOPIC: (ErrorCode.NONE, None), "other": (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")}
