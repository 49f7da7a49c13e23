"""With the ACL authorizer, the APIs kafkapy serves ask Kafka's operation on Kafka's resource and
answer Kafka's error: a walk over the data plane and Metadata as User:ANONYMOUS (the plaintext
listener's principal), first with no ACLs at all, then with ACLs granted one by one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafkapy import Broker
from kafkapy.client import SimpleClient
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.store.base import AclResource, StoredAcl
from kafkapy.testing import wait_until

ANONYMOUS = "User:ANONYMOUS"


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"authorizer.class.name": "acl", "auto.create.topics.enable": True}) as running:
        running.seed({"t": {"partitions": 1, "records": [{"value": "seeded"}]}})
        yield running


def grant(broker: Broker, pattern_type: str, resource_type: str, name: str, operation: str,
          check: tuple[str, str, str]) -> None:
    """Store an ALLOW for User:ANONYMOUS, as CreateAcls would; wait until the authorizer says yes
    to ``check`` (operation, resource type, name)."""
    runtime = broker.runtime
    assert runtime is not None
    resource = AclResource(pattern_type, resource_type, name)
    stored, version = runtime.store.resource_acls(resource)
    allow = StoredAcl(ANONYMOUS, "Allow", operation, "*")
    runtime.store.set_resource_acls(resource, stored | {allow}, version)
    wait_until(lambda: runtime.authorizer.authorize(ANONYMOUS, "127.0.0.1", *check), what=str(check))


def metadata(client: SimpleClient, names: list[str] | None) -> dict[str, int]:
    topics = None if names is None else [{"name": name} for name in names]
    body = client.request(ApiKey.METADATA, 12, {"topics": topics, "allow_auto_topic_creation": True})
    return {t["name"]: t["error_code"] for t in body["topics"]}


def fetch(client: SimpleClient) -> int:
    partition = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": "t", "partitions": [partition]}],
            "forgotten_topics_data": [], "rack_id": ""}
    [answer] = client.request(ApiKey.FETCH, 12, body)["responses"]
    return int(answer["partitions"][0]["error_code"])


def per_partition(body: Any, topics_key: str = "topics", partitions_key: str = "partitions") -> int:
    return int(body[topics_key][0][partitions_key][0]["error_code"])


def list_offsets(client: SimpleClient) -> int:
    partition = {"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}
    return per_partition(client.request(ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": "t", "partitions": [partition]}]}))


def offset_for_leader_epoch(client: SimpleClient) -> int:
    return per_partition(client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, {"replica_id": -1, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}))


def describe_producers(client: SimpleClient) -> int:
    return per_partition(client.request(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
        {"name": "t", "partition_indexes": [0]}]}))


def init_producer_id(client: SimpleClient) -> int:
    return int(client.request(ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout_ms": 1, "producer_id": -1, "producer_epoch": -1,
    })["error_code"])


def produce(client: SimpleClient) -> int:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": build_record_batch([{"value": b"v"}])}]}]}
    return per_partition(client.request(ApiKey.PRODUCE, 9, body), "responses", "partition_responses")


def test_every_data_plane_api_asks_kafkas_operation(broker: Broker) -> None:
    denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    with SimpleClient(broker.bootstrap_servers) as client:
        # No ACLs (allow.everyone.if.no.acl.found is false): nothing but refusals.
        assert metadata(client, None) == {}  # a listing leaves out what may not be described
        assert metadata(client, ["t", "new"]) == {"t": denied, "new": denied}
        assert "new" not in broker.runtime.cluster.topics  # type: ignore[union-attr]  # not auto-created
        assert (fetch(client), list_offsets(client), offset_for_leader_epoch(client),
                describe_producers(client), produce(client)) == (denied,) * 5
        assert init_producer_id(client) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

        grant(broker, "LITERAL", "Topic", "t", "Read", ("DESCRIBE", "TOPIC", "t"))  # READ implies DESCRIBE
        assert metadata(client, None) == {"t": ErrorCode.NONE}
        assert (fetch(client), list_offsets(client), offset_for_leader_epoch(client),
                describe_producers(client)) == (ErrorCode.NONE,) * 4
        assert produce(client) == denied  # READ is not WRITE
        assert init_producer_id(client) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

        grant(broker, "PREFIXED", "Topic", "t", "Write", ("WRITE", "TOPIC", "t"))
        assert produce(client) == ErrorCode.NONE
        assert init_producer_id(client) == ErrorCode.NONE  # WRITE on some topic will do (Kafka)

        grant(broker, "LITERAL", "Topic", "new", "Create", ("CREATE", "TOPIC", "new"))
        assert metadata(client, ["new"])["new"] == denied  # may create it, may not describe it
        grant(broker, "LITERAL", "Topic", "new", "Describe", ("DESCRIBE", "TOPIC", "new"))
        assert metadata(client, ["new"])["new"] in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)
        wait_until(lambda: "new" in broker.runtime.cluster.topics)  # type: ignore[union-attr]


def test_without_an_authorizer_nothing_is_refused() -> None:
    with Broker({"auto.create.topics.enable": False}) as running:
        running.seed({"t": {"partitions": 1}})
        with SimpleClient(running.bootstrap_servers) as client:
            assert metadata(client, None) == {"t": ErrorCode.NONE}
            answers = (fetch(client), list_offsets(client), offset_for_leader_epoch(client),
                       describe_producers(client), produce(client), init_producer_id(client))
            assert answers == (ErrorCode.NONE,) * 6


def test_a_fetch_from_a_replica_needs_cluster_action(broker: Broker) -> None:
    """Kafka: a follower's Fetch (replica id 0 or more) asks CLUSTER_ACTION, not READ."""
    grant(broker, "LITERAL", "Topic", "t", "Read", ("READ", "TOPIC", "t"))
    partition = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}
    body = {"replica_id": 7, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": "t", "partitions": [partition]}],
            "forgotten_topics_data": [], "rack_id": ""}
    with SimpleClient(broker.bootstrap_servers) as client:
        assert fetch(client) == ErrorCode.NONE  # as a consumer: READ will do
        [answer] = client.request(ApiKey.FETCH, 12, body)["responses"]
        assert answer["partitions"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        grant(broker, "LITERAL", "Cluster", "kafka-cluster", "ClusterAction",
              ("CLUSTER_ACTION", "CLUSTER", "kafka-cluster"))
        [answer] = client.request(ApiKey.FETCH, 12, body)["responses"]
        assert answer["partitions"][0]["error_code"] == ErrorCode.NONE


def test_offset_for_leader_epoch_takes_cluster_action_instead_of_describe(broker: Broker) -> None:
    """Kafka's handleOffsetForLeaderEpochRequest: CLUSTER_ACTION on the cluster (a follower's
    principal) answers for every topic; without it DESCRIBE on each topic is asked (KIP-320)."""
    with SimpleClient(broker.bootstrap_servers) as client:
        assert offset_for_leader_epoch(client) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        grant(broker, "LITERAL", "Cluster", "kafka-cluster", "ClusterAction",
              ("CLUSTER_ACTION", "CLUSTER", "kafka-cluster"))
        assert offset_for_leader_epoch(client) == ErrorCode.NONE
        assert list_offsets(client) == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # DESCRIBE only there
