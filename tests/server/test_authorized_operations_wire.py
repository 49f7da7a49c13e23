"""KIP-430 on the wire, every API and version with the field, asked and not asked: Metadata v8+
(the cluster's v8-v10), DescribeCluster, DescribeTopicPartitions, DescribeGroups v3+,
ConsumerGroupDescribe and ShareGroupDescribe. Three brokers: no authorizer (every supported
operation), the allowlist authorizer granting READ and ALTER_CONFIGS (their implied DESCRIBE and
DESCRIBE_CONFIGS come along), and one granting only ALTER_CONFIGS (no DESCRIBE: refused topics keep
the default, the cluster answers 0)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.auth import AUTHORIZED_OPERATIONS_OMITTED
from kafkapy.server.operations import SUPPORTED_OPERATIONS, ResourceType, from_bitfield
from kafkapy.testing import wait_until

OMITTED = AUTHORIZED_OPERATIONS_OMITTED
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
GRANTS = {  # broker -> what the principal (User:ANONYMOUS on PLAINTEXT) may do on each type
    "open": {kind: {op.name for op in SUPPORTED_OPERATIONS[kind]} for kind in (TOPIC, GROUP, CLUSTER)},
    "read": {TOPIC: {"READ", "DESCRIBE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS"},
             GROUP: {"READ", "DESCRIBE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS"},
             CLUSTER: {"DESCRIBE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS"}},
}
CONFIGS = {"open": {},
           "read": {"authorizer.class.name": "allowlist", "allowlist.rules": "*@*:READ,ALTER_CONFIGS"}}
ASK_CLUSTER = {"include_cluster_authorized_operations": True}


def names(field: int) -> set[str]:
    return {op.name for op in from_bitfield(field)}


@pytest.fixture(scope="module", params=sorted(GRANTS))
def served(request: pytest.FixtureRequest) -> Iterator[tuple[Broker, dict[ResourceType, set[str]]]]:
    with Broker({"broker.id": 1, "offsets.topic.num.partitions": 1, **CONFIGS[request.param]}) as broker:
        broker.seed({"t": {"partitions": 1}})
        yield broker, GRANTS[request.param]


@pytest.fixture
def client(served: tuple[Broker, Any]) -> Iterator[SimpleClient]:
    with SimpleClient(served[0].bootstrap_servers) as simple:
        yield simple


def metadata(client: SimpleClient, version: int, asked: bool, topics: list[str]) -> Any:
    body: dict[str, Any] = {"topics": [{"name": name, "topic_id": None} for name in topics],
                            "allow_auto_topic_creation": False, "include_topic_authorized_operations": asked}
    if version <= 10:
        body["include_cluster_authorized_operations"] = asked
    return client.request(ApiKey.METADATA, version, body)


@pytest.mark.parametrize("version", range(8, 14))
def test_metadata(client: SimpleClient, served: tuple[Broker, Any], version: int) -> None:
    grants = served[1]
    answer = metadata(client, version, True, ["t", "missing"])
    topic, missing = answer["topics"]
    assert names(topic["topic_authorized_operations"]) == grants[TOPIC]
    # a topic it may describe but that does not exist: Kafka computes it too
    assert missing["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert names(missing["topic_authorized_operations"]) == grants[TOPIC]
    if version <= 10:
        assert names(answer["cluster_authorized_operations"]) == grants[CLUSTER]
    else:
        assert "cluster_authorized_operations" not in answer
    not_asked = metadata(client, version, False, ["t"])
    assert not_asked["topics"][0]["topic_authorized_operations"] == OMITTED
    if version <= 10:
        assert not_asked["cluster_authorized_operations"] == OMITTED


@pytest.mark.parametrize("version", range(0, 3))
def test_describe_cluster(client: SimpleClient, served: tuple[Broker, Any], version: int) -> None:
    asked = client.request(ApiKey.DESCRIBE_CLUSTER, version, ASK_CLUSTER)
    assert names(asked["cluster_authorized_operations"]) == served[1][CLUSTER]
    not_asked = client.request(ApiKey.DESCRIBE_CLUSTER, version,
                               {"include_cluster_authorized_operations": False})
    assert not_asked["cluster_authorized_operations"] == OMITTED


def test_describe_topic_partitions_always_answers_them(client: SimpleClient,
                                                       served: tuple[Broker, Any]) -> None:
    """DescribeTopicPartitions has no flag: Kafka computes them for every topic it describes."""
    answer = client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
        "topics": [{"name": "t"}, {"name": "missing"}], "response_partition_limit": 100, "cursor": None})
    by_name = {t["name"]: t for t in answer["topics"]}
    assert by_name["t"]["error_code"] == ErrorCode.NONE
    assert by_name["missing"]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    for topic in by_name.values():
        assert names(topic["topic_authorized_operations"]) == served[1][TOPIC]


def ready(client: SimpleClient, group: str) -> None:
    body = {"key_type": 0, "coordinator_keys": [group]}
    wait_until(lambda: client.request(ApiKey.FIND_COORDINATOR, 4, body)["coordinators"][0]["error_code"]
               == ErrorCode.NONE, what="a coordinator")


@pytest.mark.parametrize("version", range(3, 7))
def test_describe_groups(client: SimpleClient, served: tuple[Broker, Any], version: int) -> None:
    ready(client, "classic")
    committed = client.request(ApiKey.OFFSET_COMMIT, 8, {
        "group_id": "classic", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]})
    assert committed["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    body = {"groups": ["classic"], "include_authorized_operations": True}
    (group,) = client.request(ApiKey.DESCRIBE_GROUPS, version, body)["groups"]
    assert group["error_code"] == ErrorCode.NONE and group["group_state"] == "Empty"
    assert names(group["authorized_operations"]) == served[1][GROUP]
    body["include_authorized_operations"] = False
    (group,) = client.request(ApiKey.DESCRIBE_GROUPS, version, body)["groups"]
    assert group["authorized_operations"] == OMITTED


@pytest.mark.parametrize("version", range(0, 2))
def test_consumer_group_describe(client: SimpleClient, served: tuple[Broker, Any], version: int) -> None:
    ready(client, "modern")
    joined = client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": "modern", "member_id": str(uuid.uuid4()), "member_epoch": 0, "instance_id": None,
        "rack_id": None, "rebalance_timeout_ms": 10000, "subscribed_topic_names": ["t"],
        "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})
    assert joined["error_code"] == ErrorCode.NONE, joined
    body = {"group_ids": ["modern", "nobody"], "include_authorized_operations": True}
    group, nobody = client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, version, body)["groups"]
    assert group["error_code"] == ErrorCode.NONE
    assert names(group["authorized_operations"]) == served[1][GROUP]
    assert nobody["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND and nobody["authorized_operations"] == OMITTED
    body["include_authorized_operations"] = False
    group, _ = client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, version, body)["groups"]
    assert group["authorized_operations"] == OMITTED


def test_share_group_describe(client: SimpleClient, served: tuple[Broker, Any]) -> None:
    ready(client, "sharing")
    joined = client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": "sharing", "member_id": str(uuid.uuid4()), "member_epoch": 0, "rack_id": None,
        "subscribed_topic_names": ["t"]})
    assert joined["error_code"] == ErrorCode.NONE, joined
    body = {"group_ids": ["sharing", "nobody"], "include_authorized_operations": True}
    group, nobody = client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, body)["groups"]
    assert group["error_code"] == ErrorCode.NONE
    assert names(group["authorized_operations"]) == served[1][GROUP]
    assert nobody["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND and nobody["authorized_operations"] == OMITTED
    body["include_authorized_operations"] = False
    group, _ = client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, body)["groups"]
    assert group["authorized_operations"] == OMITTED


def test_without_describe_refused_topics_keep_the_default_and_the_cluster_answers_none() -> None:
    """Kafka's handleTopicMetadataRequest and DescribeCluster: no DESCRIBE on the cluster gives 0
    (asked, but nothing allowed to see); a topic refused keeps Int.MinValue."""
    with Broker({"authorizer.class.name": "allowlist", "allowlist.rules": "*@*:ALTER_CONFIGS"}) as broker:
        broker.seed({"t": {"partitions": 1}})
        with SimpleClient(broker.bootstrap_servers) as client:
            answer = metadata(client, 10, True, ["t"])
            assert answer["topics"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            assert answer["topics"][0]["topic_authorized_operations"] == OMITTED
            assert answer["cluster_authorized_operations"] == 0
            described = client.request(ApiKey.DESCRIBE_CLUSTER, 1, ASK_CLUSTER)
            assert described["cluster_authorized_operations"] == 0
            partitions = client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
                "topics": [{"name": "t"}], "response_partition_limit": 100, "cursor": None})
            assert partitions["topics"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            assert partitions["topics"][0]["topic_authorized_operations"] == OMITTED


class RecordingAuthorizer:
    """A user's authorizer (a dotted-path class, only ``authorize``) that allows everything and
    keeps every question, class-wide: the broker makes the instance."""

    questions: list[tuple[str, str, str]] = []

    def configure(self, configs: Any) -> None:
        pass

    def authorize(self, principal: str, client_address: str, operation: str, resource_type: str,
                  resource_name: str) -> bool:
        self.questions.append((operation, resource_type, resource_name))
        return True


def test_computed_only_when_asked() -> None:
    """Not asked, Metadata and DescribeCluster ask the authorizer nothing beyond their own checks;
    asked, one question per supported operation of each resource answered."""
    questions = RecordingAuthorizer.questions
    with Broker({"authorizer.class.name": f"{__name__}.RecordingAuthorizer"}) as broker:
        broker.seed({"t": {"partitions": 1}})
        with SimpleClient(broker.bootstrap_servers) as client:
            questions.clear()
            metadata(client, 10, False, ["t"])
            client.request(ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False})
            assert questions == [("DESCRIBE", "TOPIC", "t")]
            questions.clear()
            answer = metadata(client, 10, True, ["t"])
            assert names(answer["topics"][0]["topic_authorized_operations"]) == GRANTS["open"][TOPIC]
            asked = {(op.name, "TOPIC", "t") for op in SUPPORTED_OPERATIONS[TOPIC]} | {
                (op.name, "CLUSTER", "kafka-cluster") for op in SUPPORTED_OPERATIONS[CLUSTER]}
            assert set(questions) == asked  # DESCRIBE on t is also the Metadata check
