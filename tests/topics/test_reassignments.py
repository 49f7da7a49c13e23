"""Partition reassignments (KIP-455): kafka-python's admin moves a partition of a three-broker
cluster in one process while confluent-kafka produces to it and reads it back afterwards; Kafka's
refusals over raw sockets; and random requests, good and bad, that never break the cluster's
invariants (kafkapy.topics.reassignment finishes a reassignment at once)."""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from quick_clients import RDKAFKA_CLIENT, RDKAFKA_CONSUMER

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.leadership import next_state
from kafkapy.store import MemoryStore
from kafkapy.store.base import PartitionState, TopicInfo
from kafkapy.testing import wait_until
from kafkapy.topics.reassignment import plan_reassignment

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket

TIMEOUT_S = 20
TIMEOUT_MS = TIMEOUT_S * 1000
MOVED = "moved"


def _cluster() -> Broker:
    """Brokers 1, 2 and 3 on one shared MemoryStore (and so one set of logs). No auto rebalance:
    its check (5 s in) would elect the preferred leaders these tests keep elsewhere."""
    return Broker({"broker.id": 1, "auto.leader.rebalance.enable": False}, brokers=3)


def _controller(cluster: Broker) -> str:
    """The address of the cluster's controller (where raw requests must go)."""
    assert cluster.runtime is not None
    controller = cluster.runtime.cluster.controller_id
    [found] = [b for b in cluster.brokers if b.runtime is not None and b.runtime.broker_id == controller]
    return found.bootstrap_servers


def _replicas_and_leader(bootstrap: str, topic: str) -> dict[int, tuple[list[int], int, int]]:
    """{partition: (replicas, leader, leader epoch)} as kafka-python's admin reads Metadata."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
    try:
        [described] = admin.describe_topics([topic])
    finally:
        admin.close()
    return {p["partition_index"]: (list(p["replica_nodes"]), p["leader_id"], p["leader_epoch"])
            for p in described["partitions"]}


class _KeepProducing:
    """confluent-kafka producing to ``topic`` in a thread until stopped: every record's delivery
    report is counted, so a record lost across a leader move shows as a failure."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                  "message.timeout.ms": TIMEOUT_MS, **RDKAFKA_CLIENT})
        self.topic = topic
        self.values: list[bytes] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.failed.append(str(error))

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            value = f"during-{n}".encode()
            self.producer.produce(self.topic, value, partition=0, on_delivery=self._delivered)
            self.values.append(value)
            n += 1
            self.producer.poll(0.01)
        self.producer.flush(TIMEOUT_S)

    def __enter__(self) -> _KeepProducing:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT_S + 5)


def _consume_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", **RDKAFKA_CONSUMER})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: list[bytes] = []
    try:
        wait_until(lambda: _poll_into(consumer, seen) >= count, TIMEOUT_S, f"{count} records of {topic}")
    finally:
        consumer.close()
    return seen


def _poll_into(consumer: Any, seen: list[bytes]) -> int:
    message = consumer.poll(0.2)
    if message is not None and message.error() is None:
        seen.append(message.value())
    return len(seen)


def test_kafka_python_moves_a_partition_under_confluent_clients() -> None:
    from confluent_kafka import Producer
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    with _cluster() as cluster:
        bootstrap = cluster.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
        try:
            admin.create_topics([NewTopic(MOVED, replica_assignments={0: [1, 2]})], timeout_ms=TIMEOUT_MS)
            wait_until(lambda: _replicas_and_leader(bootstrap, MOVED)[0][1] == 1, TIMEOUT_S,
                       "broker 1 leading")
            before_epoch = _replicas_and_leader(bootstrap, MOVED)[0][2]
            producer = Producer({"bootstrap.servers": bootstrap, **RDKAFKA_CLIENT})
            written = [f"before-{i}".encode() for i in range(20)]
            for value in written:
                producer.produce(MOVED, value, partition=0)
            assert producer.flush(TIMEOUT_S) == 0

            with _KeepProducing(bootstrap, MOVED) as keeping:
                wait_until(lambda: len(keeping.values) >= 20, TIMEOUT_S, "records produced before the move")
                answer = admin.alter_partition_reassignments({TopicPartition(MOVED, 0): [2, 3]},
                                                             timeout_ms=TIMEOUT_MS)
                assert answer == {TopicPartition(MOVED, 0): None}
                # Answered once the reassignment is done: replicas [2, 3], broker 2 leads (broker 1
                # left the set), in the next leader epoch; nothing is left ongoing.
                assert _replicas_and_leader(bootstrap, MOVED) == {0: ([2, 3], 2, before_epoch + 1)}
                assert admin.list_partition_reassignments() == {}
                assert admin.list_partition_reassignments({MOVED: [0]}) == {}
                count = len(keeping.values)
                wait_until(lambda: len(keeping.values) >= count + 20, TIMEOUT_S, "records produced after it")
            assert keeping.failed == []
            assert len(keeping.values) >= 40  # 20 before the move was asked for, 20 after it was done
        finally:
            admin.close()
        # Every record, from before the move and across it, is read back from the new leader.
        expected = written + keeping.values
        assert _consume_all(bootstrap, MOVED, len(expected)) == expected


def test_reordering_and_growing_the_replicas() -> None:
    """Reassigning to the same set is no change (no new epoch); a new order or a larger set keeps
    the live leader (Kafka's controller moves it only if the target leaves it out: then the first
    live target replica leads), the epoch up by one each time; a preferred election then moves it
    to the first replica; a larger or smaller set is allowed unless the request (v1, KIP-860) says
    the replication factor must stay."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    with _cluster() as cluster:
        bootstrap = cluster.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
        try:
            admin.create_topics([NewTopic("grow", replica_assignments={0: [1, 2]})], timeout_ms=TIMEOUT_MS)
            wait_until(lambda: _replicas_and_leader(bootstrap, "grow")[0][1] == 1, TIMEOUT_S,
                       "broker 1 leading")
            epoch = _replicas_and_leader(bootstrap, "grow")[0][2]
            tp = TopicPartition("grow", 0)
            assert admin.alter_partition_reassignments({tp: [1, 2]}) == {tp: None}
            assert _replicas_and_leader(bootstrap, "grow") == {0: ([1, 2], 1, epoch)}
            # The leader stays, and still the epoch goes up, as Kafka's controller completes one.
            assert admin.alter_partition_reassignments({tp: [2, 1]}) == {tp: None}
            assert _replicas_and_leader(bootstrap, "grow") == {0: ([2, 1], 1, epoch + 1)}
            assert admin.alter_partition_reassignments({tp: [3, 2, 1]}) == {tp: None}
            assert _replicas_and_leader(bootstrap, "grow") == {0: ([3, 2, 1], 1, epoch + 2)}
            # A target without the leader: its first live replica leads.
            assert admin.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}
            assert _replicas_and_leader(bootstrap, "grow") == {0: ([2, 3], 2, epoch + 3)}
            assert admin.alter_partition_reassignments({tp: [3, 2]}) == {tp: None}
            assert _replicas_and_leader(bootstrap, "grow") == {0: ([3, 2], 2, epoch + 4)}
            elected = admin.elect_leaders(0, {"grow": [0]}, raise_errors=False)
            assert [p.error_code for p in elected.replica_election_results[0].partition_result] == [
                ErrorCode.NONE]
            assert _replicas_and_leader(bootstrap, "grow") == {0: ([3, 2], 3, epoch + 5)}
        finally:
            admin.close()
        with KafkaSocket(_controller(cluster)) as conn:
            refused = _alter(conn, {"grow": {0: [1]}}, version=1, allow_change=False)
            assert refused == (ErrorCode.NONE, {("grow", 0): (
                ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 1")})


# --- over raw sockets: Kafka's refusals ----------------------------------------------------------

def _alter(conn: KafkaSocket, wanted: dict[str, dict[int, list[int] | None]], version: int = 0,
           allow_change: bool = True) -> tuple[int, dict[tuple[str, int], tuple[int, str | None]]]:
    """(top-level error code, {(topic, partition): (error code, message)})."""
    body: dict[str, Any] = {"timeout_ms": TIMEOUT_MS, "topics": [
        {"name": topic, "partitions": [{"partition_index": p, "replicas": r} for p, r in partitions.items()]}
        for topic, partitions in wanted.items()]}
    if version >= 1:  # KIP-860's flag is v1's (v0 always allows a change)
        body["allow_replication_factor_change"] = allow_change
    answer = conn.call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version, body).body
    return answer["error_code"], {(t["name"], p["partition_index"]): (p["error_code"], p["error_message"])
                                  for t in answer["responses"] for p in t["partitions"]}


def _list(conn: KafkaSocket, topics: dict[str, list[int]] | None = None) -> tuple[int, list[Any]]:
    asked = None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
    answer = conn.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": asked}).body
    return answer["error_code"], list(answer["topics"])


def test_kafkas_refusals_per_partition() -> None:
    with Broker({"broker.id": 1}) as broker, KafkaSocket(broker.bootstrap_servers) as conn:
        broker.seed({"t": {"partitions": 2}})
        top, results = _alter(conn, {"t": {0: [], 1: [1, 1], 7: [1]}, "nope": {0: [1]}})
        assert top == ErrorCode.NONE
        assert results == {
            ("t", 0): (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "The manual partition assignment includes an empty replica list."),
            ("t", 1): (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "The manual partition assignment includes the broker 1 more than once."),
            ("t", 7): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:7."),
            ("nope", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope."),
        }
        top, results = _alter(conn, {"t": {0: [1, 9], 1: [-1]}}, version=1)
        unregistered = "The manual partition assignment includes broker {}, but no such broker is registered."
        assert results == {("t", 0): (ErrorCode.INVALID_REPLICA_ASSIGNMENT, unregistered.format(9)),
                           ("t", 1): (ErrorCode.INVALID_REPLICA_ASSIGNMENT, unregistered.format(-1))}
        # Cancelling: nothing is ever in progress (each reassignment finished at once).
        assert _alter(conn, {"t": {0: None}}) == (ErrorCode.NONE, {("t", 0): (
            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")})
        assert _alter(conn, {"t": {0: [1]}, "nope": {0: None}}) == (ErrorCode.NONE, {
            ("t", 0): (ErrorCode.NONE, None),
            ("nope", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope.")})
        assert _list(conn) == (ErrorCode.NONE, [])
        assert _list(conn, {"t": [0, 1], "nope": [3]}) == (ErrorCode.NONE, [])
        assert broker.runtime is not None
        assert dict(broker.runtime.cluster.topics["t"].partitions) == {0: (1,), 1: (1,)}


def test_a_missing_cluster_permission() -> None:
    refusing = {"broker.id": 1, "authorizer.class.name": "allowlist", "allowlist.rules": "*@*:DESCRIBE"}
    with Broker(refusing) as broker, KafkaSocket(broker.bootstrap_servers) as conn:
        broker.seed({"t": {"partitions": 1}})
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert _alter(conn, {"t": {0: [1]}}) == (denied, {("t", 0): (denied, "Authorization failed.")})
        assert _list(conn)[0] == ErrorCode.NONE  # DESCRIBE on the cluster is granted
    with Broker({**refusing, "allowlist.rules": "*@*:DESCRIBE_CONFIGS"}) as broker, \
            KafkaSocket(broker.bootstrap_servers) as conn:
        assert _list(conn) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])


def test_only_the_controller_reassigns() -> None:
    store = MemoryStore()
    with Broker({"broker.id": 1}, store=store) as first, \
            Broker({"broker.id": 2}, store=store.peer()) as second:
        store.create_topic("t", {0: (1,)})
        wait_until(lambda: "t" in second.runtime.cluster.topics, TIMEOUT_S, "the topic")  # type: ignore[union-attr]
        with KafkaSocket(second.bootstrap_servers) as conn:
            top, results = _alter(conn, {"t": {0: [2]}})
            assert top == ErrorCode.NOT_CONTROLLER
            assert results[("t", 0)][0] == ErrorCode.NOT_CONTROLLER
            assert _list(conn)[0] == ErrorCode.NOT_CONTROLLER
        with KafkaSocket(first.bootstrap_servers) as conn:
            assert _alter(conn, {"t": {0: [2]}}) == (ErrorCode.NONE, {("t", 0): (ErrorCode.NONE, None)})
        # The other broker's Metadata shows the move (through the store's topics watch).
        wait_until(lambda: second.runtime.cluster.leadership("t", 0) == (2, 1),  # type: ignore[union-attr]
                   TIMEOUT_S, "broker 2 leading t-0 in epoch 1 on the other broker")
        assert dict(second.runtime.cluster.topics["t"].partitions) == {0: (2,)}  # type: ignore[union-attr]


# --- the pure planning -------------------------------------------------------------------------

def test_an_owed_epoch_is_written_once_whoever_leads() -> None:
    """The leadership table's row for a completed reassignment: the leader the replicas imply in
    the next epoch, once; a leader move that already bumped the epoch pays the debt."""
    now = PartitionState(1, 4, (1, 2), 0, 9)
    assert next_state((2, 3), {1, 2, 3}, now, owed_epoch=5) == PartitionState(2, 5, (2, 3), 0, 9)
    assert next_state((1, 3), {1, 2, 3}, now, owed_epoch=5) == PartitionState(1, 5, (1, 3), 0, 9)
    assert next_state((3, 1), {1, 2}, now, owed_epoch=5) == PartitionState(1, 5, (1,), 0, 9)  # 3 is down
    paid = PartitionState(1, 5, (1, 3), 0, 10)
    assert next_state((1, 3), {1, 2, 3}, paid, owed_epoch=5) is None
    assert next_state((1, 3), {1, 2, 3}, now) == PartitionState(1, 4, (1, 3), 0, 9)  # nothing owed: ISR only
    topic = TopicInfo("t", uuid.uuid4(), {0: (1, 2)})
    assert plan_reassignment("t", topic, 0, [1, 2], {1, 2}) is None
    assert plan_reassignment("t", topic, 0, [2], {1, 2}) == (2,)


# --- random requests never break the invariants --------------------------------------------------

@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Broker]:
    with _cluster() as cluster:
        cluster.seed({"h": {"partitions": 3, "replication_factor": 2}})
        yield cluster


# Mostly the cluster's brokers (1, 2, 3), sometimes one that is not (0, 9, -1); mostly partitions
# the topic has (0 to 2), sometimes one it lacks; now and then a cancel (None) or no such topic.
BROKER_IDS = st.sampled_from([1, 2, 3, 1, 2, 3, 1, 2, 3, 0, 9, -1])
REPLICAS = st.lists(BROKER_IDS, max_size=4) | st.none()
PARTITIONS = st.dictionaries(st.sampled_from([0, 1, 2, 0, 1, 2, 3, -1]), REPLICAS, min_size=1, max_size=3)
REQUESTS = st.dictionaries(st.sampled_from(["h", "h", "h", "nope"]), PARTITIONS, min_size=1, max_size=2)
ANSWERABLE = {ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
              ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, ErrorCode.INVALID_REPLICATION_FACTOR}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(wanted=REQUESTS, version=st.sampled_from([0, 1]), allow_change=st.booleans())
def test_random_reassignments_keep_the_invariants(fuzzed: Broker,
                                                  wanted: dict[str, dict[int, list[int] | None]],
                                                  version: int, allow_change: bool) -> None:
    runtime = fuzzed.runtime
    assert runtime is not None
    view = runtime.cluster
    before = dict(view.topics["h"].partitions)
    leaders = {p: view.leadership("h", p) for p in range(3)}
    with KafkaSocket(_controller(fuzzed)) as conn:
        top, results = _alter(conn, wanted, version, allow_change)
    assert top == ErrorCode.NONE
    assert {code for code, _ in results.values()} <= ANSWERABLE
    partitions = view.topics["h"].partitions
    changed: set[int] = set()
    for (topic, index), (code, _) in results.items():
        event(ErrorCode(code).name)
        target = wanted[topic][index]
        if code == ErrorCode.NONE:  # done, and shown by the answering broker before it answered
            assert target is not None and partitions[index] == tuple(target)
            if topic == "h" and tuple(target) != before[index]:
                changed.add(index)
    live = view.live_broker_ids()
    assert sorted(partitions) == [0, 1, 2]
    for index, replicas in partitions.items():
        assert replicas and len(set(replicas)) == len(replicas) and set(replicas) <= live
        assert replicas == before[index] or index in changed  # only an accepted reassignment moves one
        leader, epoch = view.leadership("h", index)  # type: ignore[misc]
        previous = leaders[index]
        assert previous is not None
        # Kafka's reassign election, every broker up: a leader the new set keeps stays (the epoch
        # still goes up), else the set's first replica leads
        assert leader == (previous[0] if previous[0] in replicas else replicas[0])
        assert epoch == previous[1] + (index in changed)  # one epoch per completed reassignment
