"""The coordinators load a state partition when their broker comes to lead it, before any request
names it (Kafka's onElection / scheduleLoadOperation), and drop it, stopping a load under way,
when they resign: at a restart over log.dirs (the topic in the store), and on a leader move in an
in-process cluster, for the transaction, group and share coordinators."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from quick_clients import commit_offset

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker, _find_module
from kafkapy.errors import ErrorCode
from kafkapy.groups.module import GroupsModule
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.sharestate.coordinator import SHARE_STATE_TOPIC
from kafkapy.sharestate.module import ShareCoordinatorModule
from kafkapy.store.memory import MemoryStore
from kafkapy.testing import wait_until
from kafkapy.transactions.coordinator import TRANSACTION_STATE_TOPIC
from kafkapy.transactions.metadata import TxnMetadata
from kafkapy.transactions.module import TransactionsModule
from kafkapy.transactions.records import decode_key, decode_value
from kafkapy.transactions.state import TxnState

confluent_kafka = pytest.importorskip("confluent_kafka")

OFFSETS = "__consumer_offsets"
TOPIC = "payments"
TIMEOUT_S = 20


def module(broker: Broker, kind: type[Any]) -> Any:
    assert broker.runtime is not None
    found = _find_module(broker.runtime, kind)
    assert found is not None
    return found


def leader(cluster: Broker, topic: str) -> int:
    assert cluster.runtime is not None
    found = cluster.runtime.cluster.leadership(topic, 0)
    assert found is not None
    return found[0]


def member(cluster: Broker, broker_id: int) -> Broker:
    return next(m for m in cluster.brokers if m.runtime is not None and m.broker_id == broker_id)


def test_a_restarted_broker_loads_its_transaction_partition_and_finishes_a_prepared_commit_unasked(
        tmp_path: Path) -> None:
    """The partition holds a transaction in PrepareCommit: after the restart, with no request at
    all, the coordinator loads the partition and writes the transaction's markers and its
    CompleteCommit, as Kafka's coordinator does on election."""
    store = MemoryStore()
    settings = {"broker.id": 1, "log.dirs": str(tmp_path), "transaction.state.log.num.partitions": 1,
                # the coordinator's timers load the partitions they look at: not within this test
                "transaction.abort.timed.out.transaction.cleanup.interval.ms": 600_000}
    with Broker(settings, store=store) as broker:
        broker.seed({TOPIC: {"partitions": 1}})
        with SimpleClient(broker.bootstrap_servers) as client:  # makes __transaction_state
            assert client.request(ApiKey.FIND_COORDINATOR, 1, {"key": "maker", "key_type": 1})[
                "error_code"] == ErrorCode.NONE
        txn = module(broker, TransactionsModule)
        now = int(time.time() * 1000)
        prepared = TxnMetadata("pending", 4242, 0, 60_000, TxnState.PREPARE_COMMIT, now, now,
                               frozenset({(TOPIC, 0)}))
        broker._on_loop(lambda: txn.coordinator.state_log.append(0, "pending", prepared))

    with Broker(settings, store=store) as broker:  # no client connects
        def last_state() -> TxnState | None:
            records = broker.records(TRANSACTION_STATE_TOPIC)
            states = [decode_value(decode_key(r.key), r.value) for r in records
                      if r.key is not None and decode_key(r.key) == "pending"]
            last = states[-1]
            return None if last is None else last.state
        wait_until(lambda: last_state() is TxnState.COMPLETE_COMMIT, TIMEOUT_S, "the commit completed")
        assert [r.is_control for r in broker.records(TOPIC)] == [True]  # its COMMIT marker
        txn = module(broker, TransactionsModule)
        assert broker._on_loop(txn.coordinator.loaded_partitions) == {0: 0}


def test_a_transaction_coordinator_moved_loads_on_the_new_leader_and_the_old_one_resigns() -> None:
    with Broker({"transaction.state.log.num.partitions": 1}, brokers=2) as cluster:
        cluster.seed({TOPIC: {"partitions": 1}})
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                             "transactional.id": "mover", "linger.ms": 0})
        producer.init_transactions(TIMEOUT_S)
        first = leader(cluster, TRANSACTION_STATE_TOPIC)
        old = module(member(cluster, first), TransactionsModule).coordinator
        new = module(member(cluster, 1 - first), TransactionsModule).coordinator
        assert cluster._on_loop(new.loaded_partitions) == {}

        moved = cluster.move_leader(TRANSACTION_STATE_TOPIC, 0, to=1 - first)
        wait_until(lambda: cluster._on_loop(new.loaded_partitions) == {0: moved.leader_epoch}, TIMEOUT_S,
                   "the new leader's load")
        wait_until(lambda: cluster._on_loop(old.loaded_partitions) == {}, TIMEOUT_S, "its resignation")
        # and the producer goes on with the new coordinator
        producer.begin_transaction()
        producer.produce(TOPIC, value=b"after the move", partition=0)
        producer.commit_transaction(TIMEOUT_S)
        [view] = cluster.transactions("mover")
        assert (view.coordinator, view.state) == (1 - first, "CompleteCommit")


def test_a_group_coordinator_moved_loads_on_the_new_leader_and_the_old_one_resigns() -> None:
    with Broker({"offsets.topic.num.partitions": 1}, brokers=2) as cluster:
        cluster.seed({TOPIC: {"partitions": 1}})
        commit_offset(cluster.bootstrap_servers, "movers", TOPIC, 5)
        first = leader(cluster, OFFSETS)
        old = module(member(cluster, first), GroupsModule)
        new = module(member(cluster, 1 - first), GroupsModule)
        assert cluster._on_loop(lambda: new.coordinates_now("movers")) is False

        cluster.move_leader(OFFSETS, 0, to=1 - first)
        wait_until(lambda: cluster._on_loop(lambda: new.coordinates_now("movers")), TIMEOUT_S,
                   "the new leader's load")
        wait_until(lambda: cluster._on_loop(old.loaded_partitions) == [], TIMEOUT_S, "its resignation")
        group = cluster.group("movers")
        assert group is not None and group.committed() == {(TOPIC, 0): 5}


def test_a_share_coordinator_moved_loads_on_the_new_leader_and_the_old_one_resigns() -> None:
    with Broker({"share.coordinator.state.topic.num.partitions": 1}, brokers=2) as cluster:
        cluster.seed({TOPIC: {"partitions": 1}})
        assert cluster.runtime is not None
        topic_id = cluster.runtime.cluster.topics[TOPIC].topic_id
        anyone = module(cluster, ShareCoordinatorModule)
        assert cluster._from_thread(anyone.ensure_state_topic())
        wait_until(lambda: all(SHARE_STATE_TOPIC in m.runtime.cluster.topics
                               for m in cluster.brokers if m.runtime is not None), TIMEOUT_S, "the topic")
        first = leader(cluster, SHARE_STATE_TOPIC)
        old = module(member(cluster, first), ShareCoordinatorModule).coordinator
        new = module(member(cluster, 1 - first), ShareCoordinatorModule).coordinator
        key = ("sharers", topic_id, 0)
        cluster._on_loop(lambda: old.initialize(key, 1, 0))
        assert cluster._on_loop(new.loaded_partitions) == {}

        moved = cluster.move_leader(SHARE_STATE_TOPIC, 0, to=1 - first)
        wait_until(lambda: cluster._on_loop(new.loaded_partitions) == {0: moved.leader_epoch}, TIMEOUT_S,
                   "the new leader's load")
        assert key in cluster._on_loop(lambda: dict(new.shard.states))
        wait_until(lambda: cluster._on_loop(old.loaded_partitions) == {}, TIMEOUT_S, "its resignation")
        assert key not in cluster._on_loop(lambda: dict(old.shard.states))


def test_a_load_under_way_stops_when_the_broker_resigns() -> None:
    """A long __transaction_state partition moved to the other broker, and back while that one is
    still loading it: its load stops there (nothing installed), and the first broker loads it."""
    with Broker({"transaction.state.log.num.partitions": 1}, brokers=2) as cluster:
        with SimpleClient(cluster.bootstrap_servers) as client:  # makes __transaction_state
            assert client.request(ApiKey.FIND_COORDINATOR, 1, {"key": "maker", "key_type": 1})[
                "error_code"] == ErrorCode.NONE
        wait_until(lambda: all(TRANSACTION_STATE_TOPIC in m.runtime.cluster.topics
                               for m in cluster.brokers if m.runtime is not None), TIMEOUT_S, "the topic")
        first = leader(cluster, TRANSACTION_STATE_TOPIC)
        home = module(member(cluster, first), TransactionsModule).coordinator
        away = module(member(cluster, 1 - first), TransactionsModule).coordinator
        now = int(time.time() * 1000)

        def fill() -> None:  # about a second of loading: 160 slices
            for n in range(40_000):
                name = f"id-{n % 500}"
                home.state_log.append(0, name, TxnMetadata(name, 1000 + n % 500, n // 500, 60_000,
                                                           TxnState.COMPLETE_COMMIT, now, now))
        cluster._on_loop(fill)

        moved = cluster.move_leader(TRANSACTION_STATE_TOPIC, 0, to=1 - first)
        assert cluster._on_loop(away.loading) == [0]  # elected there, and loading
        cluster.move_leader(TRANSACTION_STATE_TOPIC, 0, to=first)
        assert cluster._on_loop(lambda: (away.loading(), away.loaded_partitions())) == ([], {})
        wait_until(lambda: cluster._on_loop(home.loaded_partitions) == {0: moved.leader_epoch + 1}, TIMEOUT_S,
                   "the load back home")
        assert cluster._on_loop(away.loaded_partitions) == {}
        assert len(cluster._on_loop(lambda: list(home.loaded()))) == 500


def test_on_zookeeper_a_restarted_broker_loads_its_partitions_unasked(zk_connect: str,
                                                                      tmp_path: Path) -> None:
    """The store keeps the topics (ZooKeeper, whose watches call on their own thread): a broker
    restarted over its log.dirs is elected for its state partitions at start and loads them with
    no client connected, what a real producer and consumer left there included."""
    settings = {"broker.id": 1, "zookeeper.connect": zk_connect, "log.dirs": str(tmp_path),
                "transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1,
                "transaction.abort.timed.out.transaction.cleanup.interval.ms": 600_000}
    with Broker(settings) as broker:
        broker.seed({TOPIC: {"partitions": 1}})
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                             "transactional.id": "zk-writer", "linger.ms": 0})
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce(TOPIC, value=b"one", partition=0)
        producer.commit_transaction(TIMEOUT_S)
        commit_offset(broker.bootstrap_servers, "zk-readers", TOPIC, 1)

    with Broker(settings) as broker:  # no client connects
        txn, groups = module(broker, TransactionsModule), module(broker, GroupsModule)
        def loaded() -> tuple[object, ...]:
            return txn.coordinator.loaded_partitions(), groups.coordinates_now("zk-readers")
        wait_until(lambda: broker._on_loop(loaded) == ({0: 0}, True), TIMEOUT_S, "both partitions loaded")
        [view] = broker.transactions("zk-writer")
        assert view.state == "CompleteCommit"
        group = broker.group("zk-readers")
        assert group is not None and group.committed() == {(TOPIC, 0): 1}
