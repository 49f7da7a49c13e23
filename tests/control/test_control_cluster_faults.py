"""The cluster faults over HTTP, seen by real clients: a leader moved through the endpoint is the
leader confluent-kafka's Metadata names and kafka-python produces to; a coordinator cut off
answers FindCoordinator COORDINATOR_NOT_AVAILABLE until DELETEd; a kafka-python member's session
ended through the endpoint is gone from its group. Answers are checked against the OpenAPI
document's responses (``Checked``)."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient
from kafka_python_groups import poll_once, poll_until_assigned, subscribe_when_seen
from quick_clients import KAFKA_PYTHON_CLIENT

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import wait_until

from .test_control_openapi import Checked

TIMEOUT_S = 30
LEADER = "/topics/{topic}/partitions/{partition}/leader"


def metadata_leader(admin: AdminClient, topic: str, partition: int) -> int:
    leader: int = admin.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions[partition].leader
    return leader


def test_a_leader_moved_over_http_is_the_one_clients_see(controlled_cluster: tuple[Broker, Checked]) -> None:
    from kafka import KafkaProducer

    broker, checked = controlled_cluster
    seeded = {"orders": {"partitions": 1, "replication_factor": 2}}
    assert checked.call("POST", "/seed", body=seeded)[0] == 200
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    before = metadata_leader(admin, "orders", 0)
    [to] = [member.broker_id for member in broker.brokers if member.broker_id != before]
    status, moved = checked.call("POST", LEADER, "/topics/orders/partitions/0/leader", {"broker_id": to})
    assert status == 200
    assert (moved["previous_leader"], moved["leader"], moved["replicas"][0]) == (before, to, to)
    # Every broker shows it when the call answers: the very next Metadata names the new leader.
    assert metadata_leader(admin, "orders", 0) == to
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=TIMEOUT_S * 1000,
                             **KAFKA_PYTHON_CLIENT)
    try:
        producer.send("orders", b"to the new leader", partition=0).get(TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)
    assert [r.value for r in broker.records("orders")] == [b"to the new leader"]
    status, refused = checked.call("POST", LEADER, "/topics/orders/partitions/0/leader", {"broker_id": to})
    assert status == 409 and refused["error"].startswith("ELECTION_NOT_NEEDED: ")
    status, refused = checked.call("POST", LEADER, "/topics/orders/partitions/0/leader", {"broker_id": 99})
    assert status == 409 and refused["error"].startswith("BROKER_NOT_AVAILABLE: ")


def find_coordinator(bootstrap: str, group: str) -> ErrorCode:
    with SimpleClient(bootstrap) as client:
        answer = client.request(ApiKey.FIND_COORDINATOR, 3,
                                {"key": group, "key_type": CoordinatorKeyType.GROUP})
    return ErrorCode(answer.error_code)


def test_a_coordinator_cut_off_over_http_until_deleted(controlled_cluster: tuple[Broker, Checked]) -> None:
    broker, checked = controlled_cluster
    bootstrap = broker.brokers[1].bootstrap_servers
    wait_until(lambda: find_coordinator(bootstrap, "workers") == ErrorCode.NONE, what="a coordinator")
    status, outage = checked.call("POST", "/coordinators/unavailable", body={"group": "workers"})
    assert status == 201 and outage["error"] == "COORDINATOR_NOT_AVAILABLE" and outage["active"]
    assert find_coordinator(bootstrap, "workers") == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert find_coordinator(bootstrap, "others") == ErrorCode.NONE
    assert checked.call("GET", "/coordinators/unavailable")[1] == {"outages": [outage]}
    status, ended = checked.call("DELETE", "/coordinators/unavailable/{id}",
                                 f"/coordinators/unavailable/{outage['id']}")
    assert status == 200 and ended == {**outage, "active": False}
    assert find_coordinator(bootstrap, "workers") == ErrorCode.NONE
    assert checked.call("GET", "/coordinators/unavailable")[1] == {"outages": []}


def test_a_session_expired_over_http_leaves_its_group(controlled_cluster: tuple[Broker, Checked]) -> None:
    from kafka import KafkaConsumer

    broker, checked = controlled_cluster
    checked.call("POST", "/seed", body={"jobs": {"partitions": 2}})
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="workers",
                             client_id="stuck", session_timeout_ms=30_000, heartbeat_interval_ms=1_000,
                             enable_auto_commit=False, **KAFKA_PYTHON_CLIENT)
    try:
        subscribe_when_seen(consumer, "jobs", TIMEOUT_S)  # both against kafka-python's stranded rejoin
        poll_until_assigned(consumer, 2, TIMEOUT_S)
        expire, path = "/groups/{group}/members/expire", "/groups/workers/members/expire"
        status, expired = checked.call("POST", expire, path, {"client_id": "stuck"})
        assert status == 200 and expired["group"] == "workers"
        [member] = expired["expired"]
        assert member.startswith("stuck-")  # Kafka's member ids: the client id, then a UUID
        status, refused = checked.call("POST", expire, path, {"member_id": member})
        assert status == 404 and refused["error"].startswith("UNKNOWN_MEMBER_ID: ")
        # Its next heartbeat is refused and it joins again, as after a real session timeout.
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline and joins(broker) < 2:
            poll_once(consumer)
        assert joins(broker) >= 2
    finally:
        consumer.close()


def joins(broker: Broker) -> int:
    return sum(entry.api_key == ApiKey.JOIN_GROUP
               for member in broker.brokers for entry in member.history(client_id="stuck"))
