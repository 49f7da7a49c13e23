"""Share groups in __consumer_offsets: membership written as Kafka's ShareGroup* records and
replayed by the next coordinator, with the share-partitions the group initialized
(ShareGroupStatePartitionMetadata, which DescribeShareGroupOffsets with topics null lists). On
ZooKeeper with log.dirs a restarted broker knows the group, its epoch and its members (a member
heartbeats on at its epoch instead of UNKNOWN_MEMBER_ID), a member that left stays gone, and a
deleted group stays deleted; the log holds the records Kafka's tools would show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import GroupsModule
from kafkapy.groups.records import (
    GroupRecord,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataValue,
)
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.testing import wait_until
from tests.shares.share_wire_client import TOPIC, ready, topic_id_of


def _heartbeat(client: SimpleClient, group: str, member: str, epoch: int) -> dict[str, Any]:
    return dict(client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
        "subscribed_topic_names": [TOPIC] if epoch == 0 else None}))


def _open_session(client: SimpleClient, group: str, member: str, partition: int) -> None:
    """A ShareFetch at epoch 0 on one partition: the group's share-partition is initialized."""
    answer = client.request(ApiKey.SHARE_FETCH, 1, {
        "group_id": group, "member_id": member, "share_session_epoch": 0, "max_wait_ms": 0, "min_bytes": 1,
        "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10, "forgotten_topics_data": [],
        "topics": [{"topic_id": topic_id_of(client), "partitions": [
            {"partition_index": partition, "acknowledgement_batches": []}]}]})
    assert answer["error_code"] == ErrorCode.NONE
    assert answer["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NONE


def _listed_offsets(client: SimpleClient, group: str) -> list[tuple[str, int, int]]:
    """DescribeShareGroupOffsets with topics null: (topic, partition, start offset) of each."""
    answer = client.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {
        "groups": [{"group_id": group, "topics": None}]})
    return [(t["topic_name"], p["partition_index"], p["start_offset"])
            for t in answer["groups"][0]["topics"] for p in t["partitions"]]


def _group_records(broker: Broker, group: str) -> list[GroupRecord]:
    """The ShareGroup* records of ``group`` in its __consumer_offsets partition, in log order."""
    assert broker.runtime is not None
    (groups,) = [m for m in broker.runtime.modules if isinstance(m, GroupsModule)]

    def read() -> list[GroupRecord]:
        log = groups.group_log
        return [r for r in log.replay(log.partition_for(group))
                if isinstance(r, GroupRecord) and getattr(r.key, "group_id", None) == group]
    return broker._on_loop(read)


def test_a_restarted_broker_knows_its_share_groups_members_and_epochs(zk_connect: str,
                                                                      tmp_path: Path) -> None:
    config = {"zookeeper.connect": zk_connect, "log.dirs": str(tmp_path), "broker.id": 1}
    with Broker(config) as broker:
        broker.seed({TOPIC: {"partitions": 2}})
        with SimpleClient(broker.bootstrap_servers) as client:
            ready(client, "kept", "left", "gone")
            first = _heartbeat(client, "kept", "m1", 0)
            second = _heartbeat(client, "kept", "m2", 0)
            assert first["error_code"] == second["error_code"] == ErrorCode.NONE
            _heartbeat(client, "left", "m", 0)
            assert _heartbeat(client, "left", "m", -1)["error_code"] == ErrorCode.NONE
            _heartbeat(client, "gone", "m", 0)
            _heartbeat(client, "gone", "m", -1)
            deleted = client.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["gone"]})
            assert deleted["results"][0]["error_code"] == ErrorCode.NONE
            _open_session(client, "kept", "m1", 1)  # partition 1 initialized; partition 0 never fetched
            wait_until(lambda: any(isinstance(r.value, ShareGroupStatePartitionMetadataValue)
                                   for r in _group_records(broker, "kept")),
                       what="the initialized share-partition written with the group")
            assert _listed_offsets(client, "kept") == [(TOPIC, 1, 0)]
        (before,) = broker.share_groups("kept")
        epochs = [r.value.epoch for r in _group_records(broker, "kept")
                  if isinstance(r.value, ShareGroupMetadataValue)]
        assert epochs[-1] == before.group_epoch and len(epochs) >= 2  # one record per change
        gone = _group_records(broker, "gone")
        # the epoch record's tombstone last
        assert gone[-1] == GroupRecord(ShareGroupMetadataKey("gone"), None)

    with Broker(config) as broker:  # the same ZooKeeper and log.dirs: topic ids and logs kept
        with SimpleClient(broker.bootstrap_servers) as client:
            ready(client, "kept", "left", "gone")
            (after,) = broker.share_groups("kept")
            assert after == before
            (left,) = broker.share_groups("left")
            assert left.state == "Empty" and left.members == ()
            assert broker.share_groups("gone") == []
            # Nothing loaded on this broker yet: the group's record lists the share-partition.
            assert broker.share_partitions("kept") == []
            assert _listed_offsets(client, "kept") == [(TOPIC, 1, 0)]
            # m2 goes on at its epoch (a fresh coordinator would answer UNKNOWN_MEMBER_ID).
            member = next(m for m in after.members if m.member_id == "m2")
            answer = _heartbeat(client, "kept", "m2", member.member_epoch)
            assert (answer["error_code"], answer["member_epoch"]) == (ErrorCode.NONE, member.member_epoch)
            # A new member joins at the next group epoch, not at 1.
            assert _heartbeat(client, "kept", "m3", 0)["member_epoch"] == before.group_epoch + 1
