"""A failing log dir (KIP-112) as the rest of the cluster learns of it: the broker publishes its
offline replicas (Kafka's log dir event), the controller treats each like a replica on a stopped
broker (KafkaController.onBrokerLogDirFailure; KRaft's handleDirectoriesOffline), Metadata lists
it in ``offline_replicas``, and a real client goes on producing through the new leader.

The failure is a real one from the OS: a segment's descriptor replaced by one of a directory
(EISDIR on the next read). With log.dirs the brokers do not replicate, so the new leader starts
the partition from its own (empty) log (docs/cluster.md).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from kafka import KafkaProducer

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.partitioning import OFFSETS_TOPIC, offsets_partition_for
from kafkapy.log.segments import FileLog, FileSegment
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.store import MemoryStore
from kafkapy.testing import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_coordinator_log_dir_failure import break_log, commit, find
from test_dataplane_wire import create, partitions_of
from test_log_dir_failure import STORAGE, fetch_error, split, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket


def partition_metadata(conn: KafkaSocket, topic: str, partition: int, version: int = 9) -> dict[str, Any]:
    [found] = conn.call(ApiKey.METADATA, version, {"topics": [{"name": topic}]}).body["topics"]
    return next(p for p in found["partitions"] if p["partition_index"] == partition)


def fail_segment(broker: Broker, topic: str, partition: int, directory: Path) -> None:
    """The partition's segment descriptor now names a directory: its next read fails EISDIR."""
    log = partitions_of(broker).logs.get(topic, partition)
    assert isinstance(log, FileLog)
    segment = log.segments[0]
    assert isinstance(segment, FileSegment)
    directory_fd = os.open(directory, os.O_RDONLY)
    os.dup2(directory_fd, segment._fd)
    os.close(directory_fd)


def test_an_offline_replica_moves_leadership_and_metadata_lists_it(tmp_path: Path) -> None:
    good, bad, other = tmp_path / "good", tmp_path / "bad", tmp_path / "other"
    store = MemoryStore()
    with Broker({"broker.id": 1, "log.dirs": f"{good},{bad}"}, store=store) as first, \
            Broker({"broker.id": 2, "log.dirs": f"{other}"}, store=store) as second:
        create(first, "t", {0: (1, 2), 1: (1, 2)})
        ok, failing = split(first, "t", good, bad)
        fail_segment(first, "t", failing, bad)
        with KafkaSocket(first.bootstrap_servers) as conn:
            assert fetch_error(conn, "t", failing) == STORAGE
        wait_for(lambda: store.offline_replicas() == {1: frozenset({("t", failing)})}, "the log dir event")
        with KafkaSocket(second.bootstrap_servers) as conn:
            wait_for(lambda: partition_metadata(conn, "t", failing)["leader_id"] == 2, "the new leader")
            moved = partition_metadata(conn, "t", failing)
            assert moved["error_code"] == ErrorCode.NONE
            assert (moved["leader_epoch"], moved["isr_nodes"], moved["offline_replicas"]) == (1, [2], [1])
            kept = partition_metadata(conn, "t", ok)
            assert (kept["leader_id"], kept["isr_nodes"], kept["offline_replicas"]) == (1, [1, 2], [])
            described = conn.call(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
                "topics": [{"name": "t"}], "response_partition_limit": 2000, "cursor": None}).body
            by_index = {p["partition_index"]: p for p in described["topics"][0]["partitions"]}
            assert (by_index[failing]["leader_id"], by_index[failing]["offline_replicas"]) == (2, [1])
        with SimpleClient(first.bootstrap_servers) as client:  # broker 1 is the controller
            # the preferred replica is offline: no preferred election moves the leadership back
            answer = client.request(ApiKey.ELECT_LEADERS, 2, {
                "election_type": 0, "timeout_ms": 5000,
                "topic_partitions": [{"topic": "t", "partitions": [failing]}]})
            [result] = answer["replica_election_results"][0]["partition_result"]
            assert result["error_code"] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        producer = KafkaProducer(bootstrap_servers=first.bootstrap_servers, acks="all", retries=5,
                                 api_version=(2, 5))
        try:
            producer.send("t", b"after", partition=failing).get(timeout=20)
            producer.send("t", b"still", partition=ok).get(timeout=20)
        finally:
            producer.close(timeout=5)
        assert [r.value for r in second.records("t", failing)] == [b"after"]
        assert [r.value for r in first.records("t", ok)] == [b"first", b"still"]


def test_no_other_in_sync_replica_leaves_the_partition_without_a_leader(tmp_path: Path) -> None:
    """Leader -1 with the last ISR kept, LEADER_NOT_AVAILABLE, as for a stopped broker."""
    good, bad, other = tmp_path / "good", tmp_path / "bad", tmp_path / "other"
    store = MemoryStore()
    with Broker({"broker.id": 1, "log.dirs": f"{good},{bad}"}, store=store) as first, \
            Broker({"broker.id": 2, "log.dirs": f"{other}"}, store=store):
        create(first, "t", {0: (1,), 1: (1,)})
        _, failing = split(first, "t", good, bad)
        fail_segment(first, "t", failing, bad)
        with KafkaSocket(first.bootstrap_servers) as conn:
            assert fetch_error(conn, "t", failing) == STORAGE
            wait_for(lambda: partition_metadata(conn, "t", failing)["leader_id"] == -1, "no leader")
            found = partition_metadata(conn, "t", failing)
            assert found["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE
            assert (found["isr_nodes"], found["offline_replicas"]) == ([1], [1])


def test_an_unclean_election_does_not_pick_a_replica_in_a_failed_dir(tmp_path: Path) -> None:
    """ElectLeaders judges replicas as the controller does: once the partition's new leader stops,
    its only other replica is on a live broker but in a failed log dir, so an unclean election has
    no eligible leader (Kafka's ELIGIBLE_LEADERS_NOT_AVAILABLE) rather than electing a replica
    that would answer every request KAFKA_STORAGE_ERROR."""
    good, bad, other = tmp_path / "good", tmp_path / "bad", tmp_path / "other"
    store = MemoryStore()
    with Broker({"broker.id": 1, "log.dirs": f"{good},{bad}"}, store=store) as first, \
            contextlib.ExitStack() as second_running:
        second_running.enter_context(Broker({"broker.id": 2, "log.dirs": f"{other}"}, store=store))
        create(first, "t", {0: (1, 2), 1: (1, 2)})
        _, failing = split(first, "t", good, bad)
        fail_segment(first, "t", failing, bad)
        with KafkaSocket(first.bootstrap_servers) as conn:
            assert fetch_error(conn, "t", failing) == STORAGE
            wait_for(lambda: partition_metadata(conn, "t", failing)["leader_id"] == 2, "the new leader")
            second_running.close()  # the new leader stops: no live in-sync replica is left
            wait_for(lambda: partition_metadata(conn, "t", failing)["leader_id"] == -1, "no leader")
        with SimpleClient(first.bootstrap_servers) as client:  # broker 1 is the controller
            answer = client.request(ApiKey.ELECT_LEADERS, 2, {
                "election_type": 1, "timeout_ms": 5000,  # unclean
                "topic_partitions": [{"topic": "t", "partitions": [failing]}]})
            [result] = answer["replica_election_results"][0]["partition_result"]
            assert result["error_code"] == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_a_group_coordinator_in_a_failed_dir_moves_to_another_broker(tmp_path: Path) -> None:
    """The coordinators follow leadership: once the controller moves the __consumer_offsets
    partition off the failed replica, FindCoordinator names the other broker (not
    COORDINATOR_NOT_AVAILABLE until a restart) and a kafka-python consumer commits there."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    good, bad, other = tmp_path / "good", tmp_path / "bad", tmp_path / "other"
    settings = {"offsets.topic.num.partitions": 4, "offsets.topic.replication.factor": 2}
    store = MemoryStore()
    with Broker({"broker.id": 1, "log.dirs": f"{good},{bad}", **settings}, store=store) as first, \
            Broker({"broker.id": 2, "log.dirs": f"{other}", **settings}, store=store) as second, \
            SimpleClient(first.bootstrap_servers) as client:
        create(second, "t", {0: (2,)})
        groups = {offsets_partition_for(f"g-{i}", 4): f"g-{i}" for i in range(200)}
        for group in groups.values():
            wait_until(lambda g=group: find(client, g) == ErrorCode.NONE, what="a coordinator")
        logs = partitions_of(first).logs
        in_bad = [p for p in range(4) if logs.dir_of(OFFSETS_TOPIC, p) == bad]
        assert in_bad, "broker 1 leads two offsets partitions, one in each dir"
        failing = in_bad[0]
        group = groups[failing]
        break_log(first, OFFSETS_TOPIC, failing, bad)
        assert commit(client, group, 1) == ErrorCode.NOT_COORDINATOR  # the write in flight
        wait_for(lambda: store.offline_replicas() == {1: frozenset({(OFFSETS_TOPIC, failing)})},
                 "the log dir event")

        def coordinator() -> int:
            answer = client.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
            return int(answer["node_id"]) if answer["error_code"] == ErrorCode.NONE else -1

        wait_for(lambda: coordinator() == 2, "the coordinator on broker 2")
        consumer = KafkaConsumer(bootstrap_servers=first.bootstrap_servers, group_id=group,
                                 enable_auto_commit=False, api_version=(2, 5))
        try:
            consumer.assign([TopicPartition("t", 0)])
            consumer.commit({TopicPartition("t", 0): OffsetAndMetadata(5, "")})
            assert consumer.committed(TopicPartition("t", 0)) == 5
        finally:
            consumer.close()


def event_changes(raw: Any) -> int:
    """How many log dir event notifications were created or deleted so far: the child version of
    /log_dir_event_notification (0 while it does not exist)."""
    stat = raw.exists("/log_dir_event_notification")
    return 0 if stat is None else int(stat.cversion)


def test_on_zookeeper_the_broker_writes_kafkas_log_dir_event(tmp_path: Path, zk_connect: str) -> None:
    """A broker on ZooKeeper adds Kafka's /log_dir_event_notification/log_dir_event_<seq> (what a
    Kafka controller watches) and its offline replicas; being the controller too, it deletes the
    event once handled (the parent's child version counts the create and the delete); a restart
    clears the offline replicas."""
    from kazoo.client import KazooClient

    good, bad = tmp_path / "good", tmp_path / "bad"
    config = {"broker.id": 1, "log.dirs": f"{good},{bad}", "zookeeper.connect": zk_connect}
    raw = KazooClient(hosts=zk_connect)
    try:
        with Broker(config) as broker:
            raw.start(timeout=10)  # on the chroot the broker's store made
            create(broker, "t", {0: (1,), 1: (1,)})
            _, failing = split(broker, "t", good, bad)
            events_before = event_changes(raw)
            fail_segment(broker, "t", failing, bad)
            with KafkaSocket(broker.bootstrap_servers) as conn:
                assert fetch_error(conn, "t", failing) == STORAGE
                wait_for(lambda: partition_metadata(conn, "t", failing)["offline_replicas"] == [1],
                         "the replica offline in Metadata")
                assert partition_metadata(conn, "t", failing)["leader_id"] == -1
                wait_for(lambda: event_changes(raw) == events_before + 2,
                         "the event written and deleted")
                assert raw.get_children("/log_dir_event_notification") == []
        with Broker(config) as again, KafkaSocket(again.bootstrap_servers) as conn:
            assert raw.exists("/kafkapy/offline_replicas/1") is None
            wait_for(lambda: partition_metadata(conn, "t", failing)["leader_id"] == 1, "the leader back")
            assert partition_metadata(conn, "t", failing)["offline_replicas"] == []
    finally:
        raw.stop()
        raw.close()


def test_on_zookeeper_the_controller_deletes_the_log_dir_event_it_handled(tmp_path: Path,
                                                                          zk_connect: str) -> None:
    """Kafka's controller deletes each /log_dir_event_notification child once it has processed it
    (KafkaController.processLogDirEventNotification): here the controller (broker 1) moves the
    leadership off broker 2's failed replica, and the event broker 2 wrote is gone."""
    from kazoo.client import KazooClient

    good, bad, other = tmp_path / "good", tmp_path / "bad", tmp_path / "other"
    shared = {"zookeeper.connect": zk_connect, "auto.leader.rebalance.enable": False}
    raw = KazooClient(hosts=zk_connect)
    try:
        with Broker({"broker.id": 1, "log.dirs": f"{other}", **shared}) as first:
            raw.start(timeout=10)
            wait_for(lambda: first.runtime is not None and first.runtime.cluster.controller_id == 1,
                     "broker 1 the controller")
            with Broker({"broker.id": 2, "log.dirs": f"{good},{bad}", **shared}) as second:
                create(second, "t", {0: (2, 1), 1: (2, 1)})
                with KafkaSocket(second.bootstrap_servers) as conn:
                    wait_for(lambda: all(partition_metadata(conn, "t", p)["leader_id"] == 2 for p in (0, 1)),
                             "broker 2 leading both")
                _, failing = split(second, "t", good, bad)
                events_before = event_changes(raw)
                fail_segment(second, "t", failing, bad)
                with KafkaSocket(second.bootstrap_servers) as conn:
                    assert fetch_error(conn, "t", failing) == STORAGE
                with KafkaSocket(first.bootstrap_servers) as conn:
                    wait_for(lambda: partition_metadata(conn, "t", failing)["leader_id"] == 1,
                             "the new leader")
                    assert partition_metadata(conn, "t", failing)["offline_replicas"] == [2]
                wait_for(lambda: event_changes(raw) == events_before + 2,
                         "the event written and deleted")
                assert raw.get_children("/log_dir_event_notification") == []
                assert raw.exists("/kafkapy/offline_replicas/2") is not None  # kafkapy's own record stays
    finally:
        raw.stop()
        raw.close()
