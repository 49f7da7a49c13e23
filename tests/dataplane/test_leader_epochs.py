"""Leader epochs: the controller's table (kafkapy.server.leadership.next_state), checked directly
and against a model with Hypothesis; then real clients (kafka-python, confluent-kafka) on a
two-broker in-process cluster whose leader moves away and back: Metadata shows each epoch, and
producers and consumers carry on with nothing lost or repeated; and the epochs in the batches,
ListOffsets and OffsetForLeaderEpoch on the raw wire."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy import VirtualClock
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.server.leadership import next_state
from kafkapy.server.services import NO_LEADER, Election, partition_leadership
from kafkapy.store import MemoryStore, PartitionState
from kafkapy.testing import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from leadership_clients import metadata_leader
from server_wire import KafkaSocket

TIMEOUT_S = 20


# --- the controller's table ---------------------------------------------------------------------

def test_next_state_follows_the_table() -> None:
    assert next_state((2, 1), {1, 2}, None) == PartitionState(2, 0, (2, 1))  # new: first live
    assert next_state((2, 1), set(), None) == PartitionState(NO_LEADER, 0, ())
    stored = PartitionState(2, 4, (2, 1), 0, 9)
    assert next_state((2, 1), {1, 2}, stored) is None
    assert next_state((2, 1, 3), {1, 2, 3}, stored) == PartitionState(2, 4, (2, 1, 3), 0, 9)  # ISR only
    assert next_state((2, 1), {1}, stored) == PartitionState(1, 5, (1,), 0, 9)  # offline: in-sync 1
    assert next_state((2, 1), set(), stored) == PartitionState(NO_LEADER, 5, (2,), 0, 9)  # keeps 2 in sync
    # 1 leads; the preferred 2 comes back: it joins the ISR, 1 keeps leading
    led_by_1 = PartitionState(1, 5, (1,), 0, 10)
    assert next_state((2, 1), {1, 2}, led_by_1) == PartitionState(1, 5, (2, 1), 0, 10)
    # leaderless with 2 the last in sync: 1 coming back is out of sync, 2 coming back leads
    orphan = PartitionState(NO_LEADER, 5, (2,), 0, 11)
    assert next_state((2, 1), {1}, orphan) is None
    assert next_state((2, 1), {1}, orphan, unclean=True) == PartitionState(1, 6, (1,), 0, 11)
    assert next_state((2, 1), {1}, orphan, election=Election.UNCLEAN) == PartitionState(1, 6, (1,), 0, 11)
    assert next_state((2, 1), {1, 2}, orphan) == PartitionState(2, 6, (2, 1), 0, 11)
    # a preferred election moves it back, only to a live in-sync preferred replica
    both = PartitionState(1, 5, (2, 1), 0, 12)
    preferred = next_state((2, 1), {1, 2}, both, election=Election.PREFERRED)
    assert preferred == PartitionState(2, 6, (2, 1), 0, 12)
    assert next_state((2, 1), {1}, led_by_1, election=Election.PREFERRED) is None
    # reassigned: a target keeping the live leader keeps it (the epoch owed goes up); one without
    # it elects its first live target replica
    assert next_state((3, 2), {1, 2, 3}, stored, owed_epoch=5) == PartitionState(2, 5, (3, 2), 0, 9)
    assert next_state((3, 1), {1, 2, 3}, stored, owed_epoch=5) == PartitionState(3, 5, (3, 1), 0, 9)


def test_partition_leadership_has_no_leader_until_a_move_is_written() -> None:
    assert partition_leadership((2, 1), {1, 2}, None) == (2, 0)
    assert partition_leadership((2, 1), {1, 2}, PartitionState(2, 3, (2, 1))) == (2, 3)
    assert partition_leadership((2, 1), {1}, PartitionState(2, 3, (2, 1))) == (NO_LEADER, 3)
    assert partition_leadership((2, 1), {1}, PartitionState(1, 4, (1,))) == (1, 4)
    assert partition_leadership((2, 1), {1, 2}, PartitionState(1, 4, (2, 1))) == (1, 4)  # stays with 1
    assert partition_leadership((3, 2), {1, 2, 3}, PartitionState(1, 4, (2, 1))) == (NO_LEADER, 4)  # moved


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4, unique=True),
       st.lists(st.sets(st.integers(1, 4)), min_size=1, max_size=30))
def test_epochs_rise_exactly_with_each_leader_change(replicas: list[int], lives: list[set[int]]) -> None:
    """Against a model: the controller reconciles after every change of the live brokers. The
    epoch goes up by one exactly when the leader changes, so an epoch names one leader; a live
    leader keeps its partition; a leader comes only from the ISR; a second pass writes nothing.
    (tests/server/test_leader_elections_model.py models the whole table.)"""
    state: PartitionState | None = None
    for live in lives:
        wanted = next_state(replicas, live, state)
        if wanted is not None:
            epoch = state.partition_epoch if state is not None else -1
            wanted = PartitionState(wanted.leader, wanted.leader_epoch, wanted.isr, 0, epoch + 1)
        after = wanted or state
        assert after is not None
        if state is not None:
            changed = after.leader != state.leader
            assert after.leader_epoch == state.leader_epoch + changed
            if state.leader in live:
                assert after.leader == state.leader
            if changed and after.leader != NO_LEADER and state.isr:
                assert after.leader in state.isr
        if after.leader != NO_LEADER:
            assert after.isr == tuple(r for r in replicas if r in live)
        state = after
        assert next_state(replicas, live, state) is None
        assert partition_leadership(replicas, live, state) == (
            state.leader if state.leader in live else NO_LEADER, state.leader_epoch)


# --- a leader moving under real clients -----------------------------------------------------------

def elect_preferred(bootstrap: str, topic: str) -> None:
    """A preferred-leader election of partition 0 from kafka-python's admin client (ElectLeaders),
    which answers once the controller has written it."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        response = admin.elect_leaders(0, {topic: [0]}, raise_errors=False)
    finally:
        admin.close()
    [result] = response.replica_election_results
    assert [p.error_code for p in result.partition_result] == [ErrorCode.NONE]


# The leader moves back only on the preferred elections these tests ask for, not on the
# controller's auto rebalance (its first check comes 5 s in, which a slow run would reach).
NO_AUTO_REBALANCE = {"auto.leader.rebalance.enable": False}


def wait_for_state(broker: Broker, topic: str, leader: int, epoch: int) -> None:
    def there() -> bool:
        assert broker.runtime is not None
        state = broker.runtime.cluster.partition_states.get((topic, 0))
        return state is not None and (state.leader, state.leader_epoch) == (leader, epoch)
    wait_until(there, timeout=10, what=f"{topic}-0 led by {leader} in epoch {epoch}")


class KafkaPythonClients:
    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        self.producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000,
                                      retry_backoff_ms=50, metadata_max_age_ms=1000)
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                      request_timeout_ms=TIMEOUT_S * 1000, retry_backoff_ms=50,
                                      metadata_max_age_ms=1000)
        self.topic = topic
        self.consumer.assign([TopicPartition(topic, 0)])
        self.consumer.seek(TopicPartition(topic, 0), 0)

    def produce(self, values: list[bytes]) -> None:
        futures = [self.producer.send(self.topic, value=v, partition=0) for v in values]
        self.producer.flush(timeout=TIMEOUT_S)
        for future in futures:
            future.get(timeout=TIMEOUT_S)

    def consume(self, count: int) -> list[tuple[int, bytes]]:
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in self.consumer.poll(timeout_ms=500).values():
                got += [(r.offset, r.value) for r in records]
        return got

    def close(self) -> None:
        self.producer.close(timeout=5)
        self.consumer.close()


class ConfluentClients:
    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition

        common = {"bootstrap.servers": bootstrap, "topic.metadata.refresh.interval.ms": 1000,
                  "retry.backoff.ms": 50}
        self.producer = Producer({**common, "enable.idempotence": True, "linger.ms": 5})
        self.consumer = Consumer({**common, "group.id": "unused", "enable.auto.commit": False})
        self.topic = topic
        self.consumer.assign([TopicPartition(topic, 0, 0)])

    def produce(self, values: list[bytes]) -> None:
        errors: list[Any] = []
        for v in values:
            self.producer.produce(self.topic, value=v, partition=0,
                                  on_delivery=lambda err, msg: errors.append(err) if err else None)
        assert self.producer.flush(TIMEOUT_S) == 0
        assert errors == []

    def consume(self, count: int) -> list[tuple[int, bytes]]:
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            message = self.consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append((message.offset() or 0, message.value() or b""))
        return got

    def close(self) -> None:
        self.consumer.close()


@pytest.mark.parametrize("clients", [KafkaPythonClients, ConfluentClients], ids=["kafka-python", "confluent"])
def test_a_leader_moves_away_and_back_and_the_clients_lose_nothing(
        clients: Callable[[str, str], Any]) -> None:
    store = MemoryStore()
    with Broker({"broker.id": 1, **NO_AUTO_REBALANCE}, store=store) as first:
        second = Broker({"broker.id": 2, **NO_AUTO_REBALANCE}, store=store).__enter__()
        try:
            assert first.store is not None
            first.store.create_topic("moving", {0: (2, 1)})  # broker 2 is the preferred leader
            wait_for_state(first, "moving", 2, 0)
            assert metadata_leader(first.bootstrap_servers, "moving") == (2, 0)
            # bootstrapped from broker 1 alone, which stays up throughout
            running = clients(first.bootstrap_servers, "moving")
            try:
                batches = [[b"%s-%d" % (stage, i) for i in range(40)] for stage in (b"a", b"b", b"c")]
                running.produce(batches[0])
                got = running.consume(40)
                second.close()  # the leader goes: broker 1 leads in epoch 1
                wait_for_state(first, "moving", 1, 1)
                assert metadata_leader(first.bootstrap_servers, "moving") == (1, 1)
                running.produce(batches[1])
                got += running.consume(40)
                # the preferred leader is back: it rejoins the ISR, and broker 1 keeps leading
                second = Broker({"broker.id": 2, **NO_AUTO_REBALANCE}, store=store).__enter__()
                wait_until(lambda: first.runtime is not None and first.runtime.cluster.partition_states[
                    "moving", 0].isr == (2, 1), timeout=10, what="broker 2 back in the ISR")
                assert metadata_leader(first.bootstrap_servers, "moving") == (1, 1)
                elect_preferred(first.bootstrap_servers, "moving")  # until a preferred election
                wait_for_state(first, "moving", 2, 2)
                assert metadata_leader(first.bootstrap_servers, "moving") == (2, 2)
                running.produce(batches[2])
                got += running.consume(40)
            finally:
                running.close()
            assert got == list(enumerate(batches[0] + batches[1] + batches[2]))
            # every batch carries the epoch of the leader that wrote it; the epoch cache knows them
            log = store_log(first, "moving")
            epochs = [batch.partition_leader_epoch for segment in log.segments for batch in segment.batches()]
            assert epochs == sorted(epochs) and set(epochs) == {0, 1, 2}
            assert [e for e, _ in log.epochs.entries] == [0, 1, 2]
        finally:
            second.close()


def store_log(broker: Broker, topic: str) -> Any:
    from kafkapy.dataplane import DataPlaneModule

    assert broker.runtime is not None
    [module] = [m for m in broker.runtime.modules if isinstance(m, DataPlaneModule)]
    return module.partitions.logs.get(topic, 0)


# --- the wire ------------------------------------------------------------------------------------

def fetch(conn: KafkaSocket, topic: str, *, current: int = -1, last_fetched: int = -1,
          offset: int = 0, version: int = 12, topic_id: Any = None) -> dict[str, Any]:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{("topic_id" if version >= 13 else "topic"): topic_id or topic, "partitions": [
                {"partition": 0, "current_leader_epoch": current, "fetch_offset": offset,
                 "last_fetched_epoch": last_fetched, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}]}
    [answer] = conn.call(ApiKey.FETCH, version, body).body["responses"][0]["partitions"]
    return dict(answer)


def test_epochs_on_the_wire_fence_old_clients_and_show_divergence() -> None:
    store = MemoryStore()
    record = build_record_batch([{"key": None, "value": b"v", "timestamp": 1}])
    produce = {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
               "topic_data": [{"name": "e", "partition_data": [{"index": 0, "records": record}]}]}
    with Broker({"broker.id": 1}, store=store) as first:
        with Broker({"broker.id": 2}, store=store) as second:
            assert first.store is not None
            first.store.create_topic("e", {0: (2, 1)})
            wait_for_state(second, "e", 2, 0)
            with KafkaSocket(second.bootstrap_servers) as conn:
                for _ in range(2):
                    conn.call(ApiKey.PRODUCE, 9, produce)
        wait_for_state(first, "e", 1, 1)
        with KafkaSocket(first.bootstrap_servers) as conn:
            conn.call(ApiKey.PRODUCE, 9, produce)  # offset 2, in epoch 1
            assert fetch(conn, "e", current=0)["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
            assert fetch(conn, "e", current=2)["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
            assert fetch(conn, "e", current=1)["error_code"] == ErrorCode.NONE
            # FENCED_LEADER_EPOCH at v16+ names the current leader and its epoch (KIP-951)
            assert first.runtime is not None
            topic_id = first.runtime.cluster.topics["e"].topic_id
            fenced = fetch(conn, "e", current=0, version=16, topic_id=topic_id)
            assert fenced["current_leader"] == {"leader_id": 1, "leader_epoch": 1}
            # a fetcher at offset 3 that last read epoch 0 diverged: epoch 0 ends at offset 2
            diverged = fetch(conn, "e", current=1, last_fetched=0, offset=3)
            assert (diverged["error_code"], diverged["diverging_epoch"]) == (0, {"epoch": 0, "end_offset": 2})
            assert diverged["records"] in (b"", None) or len(diverged["records"]) == 0
            unknown = fetch(conn, "e", current=1, last_fetched=5, offset=2)  # newer than any here
            assert unknown["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
            fine = fetch(conn, "e", current=1, last_fetched=1, offset=2)
            assert fine["diverging_epoch"] == {"epoch": -1, "end_offset": -1} and fine["records"]
            body = {"replica_id": -1, "topics": [{"topic": "e", "partitions": [
                {"partition": 0, "current_leader_epoch": 1, "leader_epoch": 0}]}]}
            [answer] = conn.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body).body["topics"][0]["partitions"]
            assert (answer["leader_epoch"], answer["end_offset"]) == (0, 2)
            body["topics"][0]["partitions"][0]["current_leader_epoch"] = 0  # type: ignore[index]
            [old] = conn.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body).body["topics"][0]["partitions"]
            assert old["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
            listed = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "e", "partitions": [
                {"partition_index": 0, "current_leader_epoch": 1, "timestamp": -1}]}]}
            [latest] = conn.call(ApiKey.LIST_OFFSETS, 9, listed).body["topics"][0]["partitions"]
            assert (latest["offset"], latest["leader_epoch"]) == (3, 1)
            metadata = conn.call(ApiKey.METADATA, 12, {"topics": [{"name": "e", "topic_id": None}],
                                                        "allow_auto_topic_creation": False,
                                                        "include_topic_authorized_operations": False})
            [partition] = metadata.body["topics"][0]["partitions"]
            assert (partition["leader_id"], partition["leader_epoch"]) == (1, 1)


# --- ZooKeeper ----------------------------------------------------------------------------------

def test_zookeeper_keeps_kafkas_state_znode_across_broker_restarts(zk_connect: str) -> None:
    """The state lives at Kafka's path in Kafka's JSON; a restarted cluster continues its epochs."""
    from kazoo.client import KazooClient

    config = {"zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": 6000, **NO_AUTO_REBALANCE}
    with Broker({**config, "broker.id": 1}) as first:
        with Broker({**config, "broker.id": 2}) as second:
            assert second.store is not None
            second.store.create_topic("zk", {0: (2, 1)})
            wait_for_state(first, "zk", 2, 0)
        wait_for_state(first, "zk", 1, 1)  # broker 2 left: broker 1 leads in epoch 1
    hosts, _, chroot = zk_connect.partition("/")
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=10)
    try:
        data, stat = zk.get(f"/{chroot}/brokers/topics/zk/partitions/0/state")
    finally:
        zk.stop()
        zk.close()
    assert json.loads(data) == {"controller_epoch": 0, "leader": 1, "version": 1, "leader_epoch": 1,
                                "isr": [1]}
    assert stat.version == 1
    with Broker({**config, "broker.id": 1}) as again:  # the state outlived every broker
        wait_for_state(again, "zk", 1, 1)
        assert metadata_leader(again.bootstrap_servers, "zk") == (1, 1)
        with Broker({**config, "broker.id": 2}):
            # broker 2, the preferred replica, rejoins the ISR; broker 1 leads until an election
            wait_until(lambda: again.runtime is not None and again.runtime.cluster.partition_states[
                "zk", 0].isr == (2, 1), timeout=10, what="broker 2 back in the ISR")
            assert metadata_leader(again.bootstrap_servers, "zk") == (1, 1)
            elect_preferred(again.bootstrap_servers, "zk")
            wait_for_state(again, "zk", 2, 2)
            assert metadata_leader(again.bootstrap_servers, "zk") == (2, 2)


def test_zookeeper_auto_rebalance_on_the_virtual_clock(zk_connect: str) -> None:
    """On ZooKeeper too the returning preferred replica leads nothing until the controller's auto
    rebalance, which runs when the brokers' virtual clock passes its check."""
    clock = VirtualClock()
    config = {"zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": 6000}
    with Broker({**config, "broker.id": 1}, clock=clock) as first:
        second = Broker({**config, "broker.id": 2}, clock=clock).__enter__()
        try:
            assert first.store is not None and first.runtime is not None
            first.store.create_topic("zk-rebalanced", {0: (2, 1)})
            wait_for_state(first, "zk-rebalanced", 2, 0)
            second.close()
            wait_for_state(first, "zk-rebalanced", 1, 1)
            second = Broker({**config, "broker.id": 2}, clock=clock).__enter__()
            wait_until(lambda: first.runtime is not None and first.runtime.cluster.partition_states[
                "zk-rebalanced", 0].isr == (2, 1), timeout=10, what="broker 2 back in the ISR")
            states = first.runtime.cluster.partition_states
            assert (states["zk-rebalanced", 0].leader, states["zk-rebalanced", 0].leader_epoch) == (1, 1)
            clock.advance(300)
            wait_for_state(first, "zk-rebalanced", 2, 2)
            assert metadata_leader(first.bootstrap_servers, "zk-rebalanced") == (2, 2)
        finally:
            second.close()


def test_the_leader_epoch_checkpoint_holds_the_real_epochs(tmp_path: Path) -> None:
    """With log.dirs each broker keeps its own log: a leader starts its epoch at its log end
    (Kafka's makeLeader), and Kafka's leader-epoch-checkpoint file lists the epochs it led in."""
    store = MemoryStore()
    record = build_record_batch([{"key": None, "value": b"v", "timestamp": 1}])
    produce = {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
               "topic_data": [{"name": "cp", "partition_data": [{"index": 0, "records": record}]}]}
    one = {"broker.id": 1, "log.dirs": str(tmp_path / "one"), **NO_AUTO_REBALANCE}
    two = {"broker.id": 2, "log.dirs": str(tmp_path / "two"), **NO_AUTO_REBALANCE}
    with Broker(two, store=store) as second:
        with Broker(one, store=store) as first:
            assert first.store is not None
            first.store.create_topic("cp", {0: (1, 2)})
            wait_for_state(first, "cp", 1, 0)
            with KafkaSocket(first.bootstrap_servers) as conn:
                for _ in range(3):
                    conn.call(ApiKey.PRODUCE, 9, produce)
        wait_for_state(second, "cp", 2, 1)
        with KafkaSocket(second.bootstrap_servers) as conn:  # broker 2's own, empty log, in epoch 1
            assert conn.call(ApiKey.PRODUCE, 9, produce).body["responses"][0]["partition_responses"][0][
                "base_offset"] == 0
        with Broker(one, store=store) as first, KafkaSocket(first.bootstrap_servers) as conn:
            wait_for_state(first, "cp", 2, 1)  # broker 1 is back in the ISR; 2 leads until an election
            elect_preferred(second.bootstrap_servers, "cp")
            wait_for_state(first, "cp", 1, 2)
            answer = conn.call(ApiKey.PRODUCE, 9, produce).body["responses"][0]["partition_responses"][0]
            assert answer["base_offset"] == 3
    assert (tmp_path / "two" / "cp-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"
    assert (tmp_path / "one" / "cp-0" / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n2 3\n"
