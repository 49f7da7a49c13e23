"""Cluster-level faults seen on the wire, through kafkapy's blocking client: a leader moved through
the controller (epochs, fencing, nothing lost), a coordinator cut off (what FindCoordinator and
the coordinator answer, per outage kind), a session ended now (classic and KIP-848)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.faults import CoordinatorOutages, ErrorAnswer, FaultRule
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.server.coordinator_outages import OUTAGE_ERRORS
from kafkapy.testing import wait_until


@pytest.fixture(scope="module")
def cluster() -> Iterator[Broker]:
    # no auto rebalance: leaders move only when these tests move them
    with Broker({"auto.leader.rebalance.enable": False}, brokers=3) as running:
        yield running


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker() as running:
        yield running


def metadata(client: SimpleClient, topic: str) -> dict[int, Any]:
    answer = client.request(ApiKey.METADATA, 12, {"topics": [{"name": topic}],
                                                  "allow_auto_topic_creation": False})
    return {p.partition_index: p for p in answer.topics[0].partitions}


def produce(client: SimpleClient, topic: str, value: bytes) -> Any:
    batch = build_record_batch([(None, value)])
    answer = client.request(ApiKey.PRODUCE, 9, {"acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return answer.responses[0].partition_responses[0]


def fetch(client: SimpleClient, topic: str, leader_epoch: int, version: int = 12) -> Any:
    answer = client.request(ApiKey.FETCH, version, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                    "partition_max_bytes": 1 << 20,
                                                    "current_leader_epoch": leader_epoch}]}]})
    return answer["responses"][0]["partitions"][0]


def client_of(cluster: Broker, broker_id: int) -> SimpleClient:
    return SimpleClient(next(m for m in cluster.brokers if m.broker_id == broker_id).bootstrap_servers)


# --- move_leader ------------------------------------------------------------------------------------

def test_a_moved_leader_has_the_next_epoch_and_the_old_one_is_fenced(cluster: Broker) -> None:
    cluster.seed({"moving": {"partitions": 1, "records": [{"value": "before"}]}})
    with SimpleClient(cluster.brokers[0].bootstrap_servers) as client:
        before = metadata(client, "moving")[0]
    old, epoch = before.leader_id, before.leader_epoch
    to = next(r for r in before.replica_nodes if r != old)

    move = cluster.move_leader("moving", 0, to=to)

    assert (move.previous_leader, move.leader, move.leader_epoch) == (old, to, epoch + 1)
    assert move.replicas[0] == to and sorted(move.replicas) == sorted(before.replica_nodes)
    for member in cluster.brokers:  # every broker's Metadata names the new leader and epoch
        with SimpleClient(member.bootstrap_servers) as client:
            after = metadata(client, "moving")[0]
        assert (after.leader_id, after.leader_epoch) == (to, epoch + 1)
        assert list(after.replica_nodes) == list(move.replicas)
    with client_of(cluster, old) as client:
        refused = produce(client, "moving", b"to the old leader")
        assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        # A consumer's Fetch v11+ may be served by a follower (KIP-392), at the current epoch;
        # an older one only by the leader.
        follower_read = fetch(client, "moving", epoch + 1)
        assert follower_read["error_code"] == ErrorCode.NONE
        assert [r.value for batch in follower_read["records"] for r in batch] == [b"before"]
        leader_only = fetch(client, "moving", epoch + 1, version=10)
        assert leader_only["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with client_of(cluster, to) as client:
        assert fetch(client, "moving", epoch)["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
        assert produce(client, "moving", b"after").error_code == ErrorCode.NONE
        read = fetch(client, "moving", epoch + 1)
    assert read["error_code"] == ErrorCode.NONE
    assert [r.value for batch in read["records"] for r in batch] == [b"before", b"after"]  # nothing lost
    assert [r.value for r in cluster.records("moving")] == [b"before", b"after"]


def test_the_moved_leader_is_preferred_and_a_preferred_election_brings_it_back(cluster: Broker) -> None:
    """The move makes ``to`` the preferred replica: after a restart it leads nothing (Kafka keeps
    the leader where the failover put it) until a preferred election (ElectLeaders) moves it back."""
    cluster.seed({"preferred": {"partitions": 1}})
    with SimpleClient(cluster.brokers[0].bootstrap_servers) as client:
        before = metadata(client, "preferred")[0]
    to = next(r for r in before.replica_nodes if r != before.leader_id)
    move = cluster.move_leader("preferred", 0, to=to)
    index = next(i for i, m in enumerate(cluster.brokers) if m.broker_id == to)
    cluster.stop_broker(index)
    cluster.start_broker(index)
    controller = cluster.runtime.cluster.controller_id  # type: ignore[union-attr]
    with SimpleClient(cluster.brokers[0].bootstrap_servers) as client:
        stayed = metadata(client, "preferred")[0]
        assert stayed.leader_id != to and stayed.leader_epoch == move.leader_epoch + 1  # away only
        assert to in stayed.isr_nodes
    at = next(m for m in cluster.brokers if m.broker_id == controller)
    with SimpleClient(at.bootstrap_servers) as client:
        answer = client.request(ApiKey.ELECT_LEADERS, 2, {"election_type": 0, "timeout_ms": 10_000,
                                                          "topic_partitions": [{"topic": "preferred",
                                                                                "partitions": [0]}]})
        assert [p.error_code for r in answer.replica_election_results for p in r.partition_result] == [
            ErrorCode.NONE]
    with SimpleClient(cluster.brokers[0].bootstrap_servers) as client:  # its view may lag the controller's
        wait_until(lambda: metadata(client, "preferred")[0].leader_id == to, 10, "the election seen")
        back = metadata(client, "preferred")[0]
    assert back.leader_epoch == move.leader_epoch + 2  # and back


@pytest.mark.parametrize(("to", "code"), [("leader", ErrorCode.ELECTION_NOT_NEEDED),
                                          (9, ErrorCode.BROKER_NOT_AVAILABLE)])
def test_a_move_that_cannot_be_is_one_clear_error(cluster: Broker, to: Any, code: ErrorCode) -> None:
    cluster.seed({"stays": {"partitions": 1}})
    with SimpleClient(cluster.brokers[0].bootstrap_servers) as client:
        before = metadata(client, "stays")[0]
    with pytest.raises(KafkaApiError) as refused:
        cluster.move_leader("stays", 0, to=before.leader_id if to == "leader" else to)
    assert refused.value.code == code
    with pytest.raises(KafkaApiError) as unknown:
        cluster.brokers[1].move_leader("no-such-topic", 0, to=0)  # any broker of the cluster asks
    assert unknown.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with SimpleClient(cluster.brokers[0].bootstrap_servers) as client:
        assert metadata(client, "stays")[0].leader_epoch == before.leader_epoch


@pytest.mark.parametrize("index", [3, -1, 1.0])
def test_a_broker_index_the_cluster_has_not_is_one_clear_error(cluster: Broker, index: Any) -> None:
    """stop_broker(-1) took the last broker down without a word (a list's index from the end),
    and stop_broker(3) of three raised a bare IndexError."""
    for action in (cluster.stop_broker, cluster.start_broker):
        with pytest.raises(ValueError, match=r"no broker at index .*indexed 0-2 "
                                             r"\(0: broker 0, 1: broker 1, 2: broker 2\)"):
            action(index)
    assert [m.runtime is not None for m in cluster.brokers] == [True, True, True]


def test_a_clusters_faults_put_a_rule_on_every_broker(cluster: Broker) -> None:
    """cluster.faults was broker 0's alone: a rule failed only the requests that reached broker 0,
    so a test's producer, writing to each partition's leader, saw a third of what it asked for."""
    cluster.seed({"everywhere": {"partitions": 3, "replication_factor": 1}})
    leaders = {}
    with SimpleClient(cluster.brokers[0].bootstrap_servers) as client:
        for index, found in metadata(client, "everywhere").items():
            leaders[found.leader_id] = index
    assert sorted(leaders) == [0, 1, 2]  # one partition led by each broker

    def produce_to_each() -> list[ErrorCode]:
        codes = []
        for leader, index in sorted(leaders.items()):
            with client_of(cluster, leader) as client:
                answer = client.request(ApiKey.PRODUCE, 9, {"acks": -1, "timeout_ms": 5000, "topic_data": [
                    {"name": "everywhere", "partition_data": [
                        {"index": index, "records": build_record_batch([(None, b"v")])}]}]})
                codes.append(ErrorCode(answer.responses[0].partition_responses[0].error_code))
        return codes

    rule = FaultRule(ErrorAnswer(ErrorCode.NOT_ENOUGH_REPLICAS), api=ApiKey.PRODUCE, topic="everywhere")
    with cluster.faults.injected(rule) as handle:
        assert produce_to_each() == [ErrorCode.NOT_ENOUGH_REPLICAS] * 3
        assert (handle.matched, handle.fired) == (3, 3)
        assert len(cluster.faults.handles) == 3  # one copy on each broker
    assert handle.removed and cluster.faults.handles == ()
    assert produce_to_each() == [ErrorCode.NONE] * 3
    with cluster.brokers[1].faults.injected(rule):  # one broker's, when that is what a test wants
        assert produce_to_each() == [ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NONE]


def test_a_single_broker_cannot_move_a_leader(broker: Broker) -> None:
    broker.seed({"alone": {}})
    for to in (broker.broker_id, broker.broker_id + 1):
        with pytest.raises(KafkaApiError, match="one live broker") as refused:
            broker.move_leader("alone", 0, to=to)
        assert refused.value.code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


# --- coordinator_unavailable ------------------------------------------------------------------------

def find_coordinator(client: SimpleClient, key: str, key_type: int = 0, version: int = 3) -> tuple[int, int]:
    """(error code, node id) of FindCoordinator at ``version`` (v4+: the batched form)."""
    if version >= 4:
        answer = client.request(ApiKey.FIND_COORDINATOR, version,
                                {"key_type": key_type, "coordinator_keys": [key]})
        found = answer.coordinators[0]
        return found.error_code, found.node_id
    answer = client.request(ApiKey.FIND_COORDINATOR, version, {"key": key, "key_type": key_type})
    return answer.error_code, answer.node_id


def coordinator_client(broker: Broker, group: str, key_type: int = 0) -> SimpleClient:
    with SimpleClient(broker.brokers[0].bootstrap_servers) as client:
        _, node = wait_until(lambda: (found := find_coordinator(client, group, key_type))[0] == 0 and found,
                             what=f"a coordinator for {group}")
    return client_of(broker, node) if broker.is_cluster else SimpleClient(broker.bootstrap_servers)


def commit(client: SimpleClient, group: str, offset: int) -> int:
    answer = client.request(ApiKey.OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                      "committed_metadata": ""}]}]})
    return int(answer.topics[0].partitions[0].error_code)


def committed(client: SimpleClient, group: str) -> tuple[int, int]:
    """(error code, offset) of the group's orders-0 by OffsetFetch v8."""
    answer = client.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}],
                                                     "require_stable": False})
    found = answer.groups[0]
    offsets = [p.committed_offset for t in found.topics for p in t.partitions]
    return found.error_code, (offsets[0] if offsets else -1)


def test_the_coordinators_move_with_their_partitions_when_their_broker_goes_down() -> None:
    """Broker(brokers=3) gives __consumer_offsets and __transaction_state three replicas, so a
    group's and a transactional id's coordinators move to another broker (offsets and all)
    when theirs stops, rather than being unavailable until it is back."""
    with Broker({"offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1},
                brokers=3) as running:
        running.seed({"orders": {"partitions": 1}})
        with coordinator_client(running, "g") as client:
            assert commit(client, "g", 42) == ErrorCode.NONE
        for key, key_type in (("g", CoordinatorKeyType.GROUP), ("tx", CoordinatorKeyType.TRANSACTION)):
            with coordinator_client(running, key, key_type) as client:
                gone = find_coordinator(client, key, key_type)[1]
            running.stop_broker(gone)
            with SimpleClient(running.bootstrap_servers.split(",")[0]) as any_client:
                code, moved = find_coordinator(any_client, key, key_type)
            assert code == ErrorCode.NONE and moved != gone
            if key_type == CoordinatorKeyType.GROUP:
                with client_of(running, moved) as client:
                    assert wait_until(lambda: (found := committed(client, "g"))[0] == ErrorCode.NONE
                                      and found) == (ErrorCode.NONE, 42)
            running.start_broker(gone)


@pytest.mark.parametrize("error", list(OUTAGE_ERRORS), ids=lambda code: code.name)
def test_an_outage_answers_as_kafka_does_while_the_partition_is_not_served(cluster: Broker,
                                                                            error: ErrorCode) -> None:
    group = f"outage-{error.name.lower()}"
    cluster.seed({"orders": {"partitions": 1}})
    with coordinator_client(cluster, group) as client:
        assert commit(client, group, 5) == ErrorCode.NONE
        with cluster.coordinator_unavailable(group=group, error=error) as outage:
            for member in cluster.brokers:  # every broker answers FindCoordinator the same
                with SimpleClient(member.bootstrap_servers) as any_client:
                    for version in (3, 4):
                        code, node = find_coordinator(any_client, group, version=version)
                        assert code == OUTAGE_ERRORS[error]
                        assert (node == -1) == (code != ErrorCode.NONE)
            assert commit(client, group, 6) == error
            assert committed(client, group)[0] == error
            assert find_coordinator(client, "another-group")[0] == ErrorCode.NONE  # only that group
        assert outage.removed
        assert find_coordinator(client, group)[0] == ErrorCode.NONE
        assert committed(client, group) == (ErrorCode.NONE, 5)  # nothing written meanwhile
        assert commit(client, group, 6) == ErrorCode.NONE


def test_a_transactional_ids_coordinator_can_be_cut_off(broker: Broker) -> None:
    txn = "txn-outage"
    with coordinator_client(broker, txn, key_type=CoordinatorKeyType.TRANSACTION) as client:
        outage = broker.coordinator_unavailable(transactional_id=txn, error=ErrorCode.NOT_COORDINATOR)
        found = find_coordinator(client, txn, key_type=CoordinatorKeyType.TRANSACTION)
        assert found == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
        init = {"transactional_id": txn, "transaction_timeout_ms": 60000, "producer_id": -1,
                "producer_epoch": -1}
        assert client.request(ApiKey.INIT_PRODUCER_ID, 4, init).error_code == ErrorCode.NOT_COORDINATOR
        outage.remove()
        answer = client.request(ApiKey.INIT_PRODUCER_ID, 4, init)
        assert answer.error_code == ErrorCode.NONE and answer.producer_id >= 0


def test_outages_reject_nonsense() -> None:
    outages = CoordinatorOutages()
    with pytest.raises(ValueError, match="group id or a transactional id"):
        outages.add()
    with pytest.raises(ValueError, match="an outage answers one of"):
        outages.add("g", error=ErrorCode.UNKNOWN_SERVER_ERROR)
    first = outages.add("g", error=ErrorCode.NOT_COORDINATOR)
    second = outages.add("g")
    assert outages.group_outage("g") == ErrorCode.COORDINATOR_NOT_AVAILABLE  # the later one decides
    second.remove()
    assert outages.group_outage("g") == ErrorCode.NOT_COORDINATOR
    first.remove()
    first.remove()  # again: nothing
    assert outages.group_outage("g") is None and outages.outages == ()


# --- expire_session ---------------------------------------------------------------------------------

def join(client: SimpleClient, group: str) -> Any:
    """JoinGroup v5, again with the member id handed out (KIP-394's MEMBER_ID_REQUIRED)."""
    def request(member_id: str) -> Any:
        return client.request(ApiKey.JOIN_GROUP, 5, {
            "group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]})
    first = request("")
    return request(first.member_id) if first.error_code == ErrorCode.MEMBER_ID_REQUIRED else first


def test_an_expired_classic_member_is_removed_and_the_group_rebalances(broker: Broker) -> None:
    group = "expiring-classic"
    with coordinator_client(broker, group) as client:
        joined = join(client, group)
        assert joined.error_code == ErrorCode.NONE and joined.generation_id == 1
        sync = client.request(ApiKey.SYNC_GROUP, 3, {
            "group_id": group, "generation_id": 1, "member_id": joined.member_id, "group_instance_id": None,
            "assignments": [{"member_id": joined.member_id, "assignment": b""}]})
        assert sync.error_code == ErrorCode.NONE
        assert broker.expire_session(group, member_id=joined.member_id) == [joined.member_id]
        beat = client.request(ApiKey.HEARTBEAT, 3, {"group_id": group, "generation_id": 1,
                                                    "member_id": joined.member_id, "group_instance_id": None})
        assert beat.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        described = client.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group],
                                                                "include_authorized_operations": False})
        assert (described.groups[0].group_state, described.groups[0].members) == ("Empty", [])
        again = join(client, group)  # the rebalance without it made generation 2, Empty
        assert (again.error_code, again.generation_id) == (ErrorCode.NONE, 3)
        assert again.member_id != joined.member_id
        with pytest.raises(KafkaApiError) as unknown:
            broker.expire_session(group, client_id="no-such-client")
        assert unknown.value.code == ErrorCode.UNKNOWN_MEMBER_ID
        assert broker.expire_session(group, client_id="kafkapy-cli") == [again.member_id]
    with pytest.raises(KafkaApiError) as missing:
        broker.expire_session("no-such-group", member_id="m")
    assert missing.value.code == ErrorCode.GROUP_ID_NOT_FOUND
    with pytest.raises(ValueError, match="member_id or client_id"):
        broker.expire_session(group)


def test_expiring_a_session_before_any_group_exists_says_the_group_is_not_there() -> None:
    """A fresh broker has no __consumer_offsets yet: that answered NOT_COORDINATOR, 'no running
    broker coordinates group', where the docs (and a test author) expect GROUP_ID_NOT_FOUND."""
    with Broker() as fresh:
        with pytest.raises(KafkaApiError, match="'billing' does not exist") as missing:
            fresh.expire_session("billing", client_id="consumer-1")
        assert missing.value.code == ErrorCode.GROUP_ID_NOT_FOUND


def test_an_expired_consumer_protocol_member_is_fenced(broker: Broker) -> None:
    group = "expiring-kip848"
    broker.seed({"kip848": {"partitions": 2}})
    with coordinator_client(broker, group) as client:
        beat = client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
            "group_id": group, "member_id": "", "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["kip848"], "server_assignor": None,
            "topic_partitions": []})
        assert beat.error_code == ErrorCode.NONE and beat.member_epoch >= 1
        assert broker.expire_session(group, member_id=beat.member_id) == [beat.member_id]
        fenced = client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
            "group_id": group, "member_id": beat.member_id, "member_epoch": beat.member_epoch,
            "instance_id": None, "rack_id": None, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
            "server_assignor": None, "topic_partitions": None})
    assert fenced.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_reset_ends_coordinator_outages(broker: Broker) -> None:
    """A long-lived broker's next test must not inherit an outage its last test left in place."""
    group = "outage-then-reset"
    with coordinator_client(broker, group) as client:
        broker.coordinator_unavailable(group=group)
        assert find_coordinator(client, group)[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE
        broker.reset()
        assert find_coordinator(client, group)[0] == ErrorCode.NONE


def test_a_clusters_handle_counts_the_when_errors_of_every_broker(cluster: Broker) -> None:
    """A when= that raises on a body does not match it, on each broker; the cluster's handle sums
    what each broker counted, as it sums matched and fired."""
    rule = FaultRule(ErrorAnswer(ErrorCode.NOT_COORDINATOR),
                     when=lambda body: body["transactional_id"] == "x")
    with cluster.faults.injected(rule) as handle:
        for broker in cluster.brokers:
            with SimpleClient(broker.bootstrap_servers) as client:
                answer = client.request(ApiKey.METADATA, 9, {"topics": [],
                                                             "allow_auto_topic_creation": False})
                assert answer.brokers  # answered, not refused: the rule does not match a Metadata
    assert (handle.when_errors, handle.matched, handle.fired) == (3, 0, 0)
