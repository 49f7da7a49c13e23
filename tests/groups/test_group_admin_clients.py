"""The admin clients' group calls against the coordinator, as a user makes them: kafka-python's
KafkaAdminClient list/alter/reset/delete_group_offsets, delete_groups and remove_group_members,
and confluent-kafka's delete_consumer_groups.

On a group with a live member the coordinator refuses what Kafka refuses (an admin commit
UNKNOWN_MEMBER_ID, an offset delete GROUP_SUBSCRIBED_TO_TOPIC, a group delete NON_EMPTY_GROUP);
removing the member empties the group, and its offsets are then altered, reset (to the earliest,
the latest, a timestamp, a number clamped to the log) and deleted, and the group deleted. Unknown
groups, topics and partitions get Kafka's answers (KafkaApis and the group coordinator: an
unknown group's offsets are none, not an error). On three brokers each call reaches each group's
own coordinator."""

from __future__ import annotations

import time
from collections.abc import Iterator

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient, MemberToRemove, NewTopic, OffsetSpec, OffsetTimestamp
from kafka.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NoError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from kafka.structs import OffsetAndMetadata
from kafka_python_admin import admin_of, create_topic, open_admin
from quick_clients import KAFKA_PYTHON_CONSUMER, RDKAFKA_CLIENT

from kafkapy.embedded import Broker
from kafkapy.testing import wait_until

TIMEOUT_S = 20
TOPIC = "orders"
PARTITIONS = 3
PER_PARTITION = 10
FIRST_TIMESTAMP = 1_700_000_000_000



def produce(broker: Broker) -> None:
    """PER_PARTITION records on each partition, record i of the topic at FIRST_TIMESTAMP + i."""
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, **RDKAFKA_CLIENT})
    for i in range(PARTITIONS * PER_PARTITION):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS,
                         timestamp=FIRST_TIMESTAMP + i)
    assert producer.flush(TIMEOUT_S) == 0


def commit(broker: Broker, group: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` (partition -> offset) for ``group`` as a standalone consumer does."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                         "enable.auto.commit": False, **RDKAFKA_CLIENT})
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, p, o) for p, o in offsets.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def tp(partition: int, topic: str = TOPIC) -> TopicPartition:
    return TopicPartition(topic, partition)


def committed(admin: KafkaAdminClient, group: str) -> dict[int, tuple[int, str]]:
    """The group's committed offsets on TOPIC by partition, with their metadata."""
    [(name, offsets)] = admin.list_group_offsets(group).items()
    assert name == group
    return {p.partition: (o.offset, o.metadata) for p, o in offsets.items() if p.topic == TOPIC}


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1, "group.min.session.timeout.ms": 1000}) as running:
        create_topic(running, TOPIC, PARTITIONS)
        produce(running)
        yield running


@pytest.fixture
def admin(broker: Broker) -> Iterator[KafkaAdminClient]:
    yield from open_admin(broker)


def test_a_group_with_a_member_refuses_admin_changes_until_the_member_is_removed(
        broker: Broker, admin: KafkaAdminClient) -> None:
    consumer = kafka.KafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap_servers, group_id="live",
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   session_timeout_ms=10_000, **KAFKA_PYTHON_CONSUMER)
    try:
        read = 0
        deadline = time.monotonic() + TIMEOUT_S
        while read < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            read += sum(len(records) for records in consumer.poll(100).values())
        assert read == PARTITIONS * PER_PARTITION
        consumer.commit()
        assert committed(admin, "live") == {p: (PER_PARTITION, "") for p in range(PARTITIONS)}

        # Kafka's ClassicGroup.validateOffsetCommit: generation -1 commits only into an empty group.
        assert admin.alter_group_offsets("live", {tp(0): OffsetAndMetadata(1, "", None)}) == {
            tp(0): UnknownMemberIdError}
        # OffsetDelete keeps the offsets of a topic the group consumes.
        assert admin.delete_group_offsets("live", [tp(0)]) == {tp(0): GroupSubscribedToTopicError}
        assert admin.delete_groups(["live"]) == {"live": "NonEmptyGroupError"}
        assert committed(admin, "live")[0] == (PER_PARTITION, "")

        [member] = admin.describe_groups(["live"])["live"]["members"]
        removed = admin.remove_group_members("live", [MemberToRemove(member_id=member["member_id"]),
                                                      MemberToRemove(member_id="never-joined")])
        assert removed == {member["member_id"]: NoError, "never-joined": UnknownMemberIdError}
        described = admin.describe_groups(["live"])["live"]
        assert (described["group_state"], described["members"]) == ("Empty", [])

        assert admin.alter_group_offsets("live", {tp(0): OffsetAndMetadata(4, "by admin", None)}) == {
            tp(0): NoError}
        assert committed(admin, "live")[0] == (4, "by admin")
        assert admin.delete_groups(["live"]) == {"live": "OK"}
        assert admin.list_groups() == []
    finally:
        consumer.close(autocommit=False)


def test_an_empty_groups_offsets_are_altered_reset_and_deleted(broker: Broker,
                                                               admin: KafkaAdminClient) -> None:
    commit(broker, "batch", {0: 3, 1: 4, 2: 5})
    assert committed(admin, "batch") == {0: (3, ""), 1: (4, ""), 2: (5, "")}
    assert admin.list_group_offsets({"batch": [tp(1)]}) == {"batch": {tp(1): OffsetAndMetadata(4, "", -1)}}

    altered = admin.alter_group_offsets("batch", {tp(0): OffsetAndMetadata(7, "replayed", None),
                                                  tp(5): OffsetAndMetadata(1, "", None),
                                                  tp(0, "missing"): OffsetAndMetadata(1, "", None)})
    # KafkaApis.handleOffsetCommitRequest: a topic or partition the metadata lacks is refused alone.
    assert altered == {tp(0): NoError, tp(5): UnknownTopicOrPartitionError,
                       tp(0, "missing"): UnknownTopicOrPartitionError}
    assert committed(admin, "batch") == {0: (7, "replayed"), 1: (4, ""), 2: (5, "")}

    # Record i of partition p has timestamp FIRST_TIMESTAMP + p + PARTITIONS * i: the first at or
    # after FIRST_TIMESTAMP + 7 on partition 1 is its record 2 (FIRST_TIMESTAMP + 7).
    reset = admin.reset_group_offsets("batch", {tp(0): OffsetSpec.EARLIEST,
                                                tp(1): OffsetTimestamp(FIRST_TIMESTAMP + 7), tp(2): 99})
    assert reset == {tp(0): {"error": NoError, "offset": 0}, tp(1): {"error": NoError, "offset": 2},
                     tp(2): {"error": NoError, "offset": PER_PARTITION}}  # 99 clamped to the log end
    assert committed(admin, "batch") == {0: (0, "replayed"), 1: (2, ""), 2: (PER_PARTITION, "")}
    admin.reset_group_offsets("batch", {tp(0): OffsetSpec.LATEST})
    assert committed(admin, "batch")[0] == (PER_PARTITION, "replayed")

    deleted = admin.delete_group_offsets("batch", [tp(1), tp(7), tp(0, "missing")])
    assert deleted == {tp(1): NoError, tp(7): UnknownTopicOrPartitionError,
                       tp(0, "missing"): UnknownTopicOrPartitionError}
    assert committed(admin, "batch") == {0: (PER_PARTITION, "replayed"), 2: (PER_PARTITION, "")}

    assert admin.delete_groups(["batch", "never"]) == {"batch": "OK", "never": "GroupIdNotFoundError"}
    assert admin.list_group_offsets(["batch"]) == {"batch": {}}


def test_unknown_groups_get_kafkas_answers(broker: Broker, admin: KafkaAdminClient) -> None:
    # OffsetFetch: no group, no offsets (GroupCoordinator answers an empty list, not an error).
    assert admin.list_group_offsets(["nobody"]) == {"nobody": {}}
    with pytest.raises(GroupIdNotFoundError):
        admin.delete_group_offsets("nobody", [tp(0)])
    with pytest.raises(UnknownMemberIdError):  # LeaveGroup of a group that does not exist
        admin.remove_group_members("nobody", [MemberToRemove(member_id="m")])
    confluent = AdminClient({"bootstrap.servers": broker.bootstrap_servers})  # kept: its futures need it
    futures = confluent.delete_consumer_groups(["nobody"], request_timeout=TIMEOUT_S)
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        futures["nobody"].result(TIMEOUT_S)
    assert raised.value.args[0].code() == confluent_kafka.KafkaError.GROUP_ID_NOT_FOUND


def test_a_static_member_is_removed_by_its_instance_id(broker: Broker, admin: KafkaAdminClient) -> None:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "static",
                                         "group.instance.id": "worker-1", "session.timeout.ms": 6000,
                                         **RDKAFKA_CLIENT})
    try:
        consumer.subscribe([TOPIC])
        wait_until(lambda: consumer.poll(0.1) is None and consumer.assignment(), TIMEOUT_S,
                   what="an assignment")
        [member] = admin.describe_groups(["static"])["static"]["members"]
        assert member["group_instance_id"] == "worker-1"

        assert admin.remove_group_members("static", [MemberToRemove(group_instance_id="worker-1",
                                                                    reason="decommissioned")]) == {
            "worker-1": NoError}
        described = admin.describe_groups(["static"])["static"]
        assert (described["group_state"], described["members"]) == ("Empty", [])
        assert admin.remove_group_members("static", [MemberToRemove(group_instance_id="worker-1")]) == {
            "worker-1": UnknownMemberIdError}
    finally:
        consumer.close()


def test_members_of_a_consumer_protocol_group_are_not_removed_by_leave_group(
        broker: Broker, admin: KafkaAdminClient) -> None:
    """Kafka 4's classicGroupLeaveToConsumerGroup: a KIP-848 member (one that does not use the
    classic protocol) named by member id or by instance id is UNKNOWN_MEMBER_ID, and stays; the
    admin's offset changes are refused as for a classic group with members."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "modern",
                                         "group.protocol": "consumer", "group.instance.id": "worker-2",
                                         **RDKAFKA_CLIENT})
    try:
        consumer.subscribe([TOPIC])
        wait_until(lambda: consumer.poll(0.1) is None and consumer.assignment(), TIMEOUT_S,
                   what="an assignment")
        [listed] = admin.list_groups()
        assert (listed["group_id"], listed["group_type"], listed["group_state"]) == (
            "modern", "consumer", "Stable")
        member_id = consumer.memberid()
        assert member_id
        assert admin.remove_group_members("modern", [MemberToRemove(member_id=member_id)]) == {
            member_id: UnknownMemberIdError}
        assert admin.remove_group_members("modern", [MemberToRemove(group_instance_id="worker-2")]) == {
            "worker-2": UnknownMemberIdError}
        assert admin.delete_groups(["modern"]) == {"modern": "NonEmptyGroupError"}
        # ConsumerGroup.validateOffsetCommit: epoch -1 commits only into an empty group.
        assert admin.alter_group_offsets("modern", {tp(0): OffsetAndMetadata(1, "", None)}) == {
            tp(0): UnknownMemberIdError}
        assert admin.delete_group_offsets("modern", [tp(0)]) == {tp(0): GroupSubscribedToTopicError}
    finally:
        consumer.close()


def test_group_calls_reach_each_groups_coordinator_on_three_brokers() -> None:
    with Broker({"broker.id": 1}, brokers=3) as cluster:
        admin = admin_of(cluster)
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
            admin.wait_for_topics([TOPIC], timeout_ms=TIMEOUT_S * 1000)
            produce(cluster)
            groups = [f"app-{i}" for i in range(8)]
            for i, group in enumerate(groups):
                commit(cluster, group, {p: i + p for p in range(PARTITIONS)})
            coordinators = {group: admin._manager.run(admin._find_coordinator_id, group) for group in groups}
            assert set(coordinators.values()) == {1, 2, 3}  # the groups are spread over the brokers

            # One OffsetFetch (v8, several groups) per coordinator.
            listed = admin.list_group_offsets(groups)
            assert {g: {p.partition: o.offset for p, o in offsets.items()}
                    for g, offsets in listed.items()} == {
                group: {p: i + p for p in range(PARTITIONS)} for i, group in enumerate(groups)}

            for group in groups:
                assert admin.alter_group_offsets(group, {tp(0): OffsetAndMetadata(9, "", None)}) == {
                    tp(0): NoError}
                assert admin.reset_group_offsets(group, {tp(1): OffsetSpec.EARLIEST})[tp(1)] == {
                    "error": NoError, "offset": 0}
                assert admin.delete_group_offsets(group, [tp(2)]) == {tp(2): NoError}
            assert all({p.partition: o.offset for p, o in offsets.items()} == {0: 9, 1: 0}
                       for offsets in admin.list_group_offsets(groups).values())

            assert admin.delete_groups(groups[:4]) == {group: "OK" for group in groups[:4]}
            confluent = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
            futures = confluent.delete_consumer_groups(groups[4:], request_timeout=TIMEOUT_S)
            results = {group: future.result(TIMEOUT_S) for group, future in futures.items()}
            assert results == dict.fromkeys(groups[4:])  # None: deleted
            assert admin.list_groups() == []
        finally:
            admin.close()
