"""``python -m benchmarks._coordinator_elections [RECORDS] [DELAY_S]``: how long a client waits for
its coordinator after the coordinator's state partition changed hands, with a large partition.

Three cases, each with one state partition of RECORDS records (300,000 by default) and a client
that starts DELAY_S seconds (0 and 5 by default) after the change:

* ``restart/transaction``: a broker restarted over ``log.dirs`` (the store kept, so the topic is
  there at start), then a confluent-kafka transactional producer's first committed transaction;
* ``restart/group``: the same over ``__consumer_offsets``, then a consumer's first group join;
* ``move/group``: ``__consumer_offsets-0``'s leader moved in a two-broker in-process cluster, then
  a consumer's first group join.

Each line gives the time from the change and from the client's start to the first commit or
join. Run it with ``PYTHONPATH`` naming the tree to measure (a checkout of the code before, say):
the loads begin when the broker comes to lead the partition (Kafka's onElection), so a client
that starts after the load has had its time waits for nothing.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker, _find_module
from kafkapy.groups.module import GroupsModule
from kafkapy.groups.records import GroupRecord, OffsetCommitKey, OffsetCommitValue
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.store.memory import MemoryStore
from kafkapy.transactions.metadata import TxnMetadata
from kafkapy.transactions.module import TransactionsModule
from kafkapy.transactions.state import TxnState

TOPIC = "payments"
IDS = 1000
TIMEOUT_S = 120


def _module(broker: Broker, kind: type[Any]) -> Any:
    assert broker.runtime is not None
    return _find_module(broker.runtime, kind)


def _fill_transactions(broker: Broker, records: int) -> None:
    txn = _module(broker, TransactionsModule)
    now = int(time.time() * 1000)

    def write() -> None:
        for n in range(records):
            tid = f"old-{n % IDS}"
            state = TxnState.ONGOING if n % 2 else TxnState.COMPLETE_COMMIT
            parts = frozenset({(TOPIC, 0)}) if state is TxnState.ONGOING else frozenset()
            value = TxnMetadata(tid, 10_000 + n % IDS, n // IDS % 100, 60_000, state, now, now, parts)
            txn.coordinator.state_log.append(0, tid, value)
    broker._on_loop(write)


def _fill_offsets(broker: Broker, groups: GroupsModule, records: int) -> None:
    now = int(time.time() * 1000)

    async def write() -> None:
        for n in range(0, records, 100):
            group = f"old-group-{n // 100 % IDS}"
            await groups.group_log.append(group, [GroupRecord(OffsetCommitKey(group, TOPIC, 0),
                                                              OffsetCommitValue(n + k, 0, "", now))
                                                  for k in range(100)])
    broker._from_thread(write())


def _transaction(bootstrap: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "after",
                                         "linger.ms": 0})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"x", partition=0)
    producer.commit_transaction(TIMEOUT_S)


def _join(bootstrap: str) -> None:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "after",
                                         "session.timeout.ms": 10_000})
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + TIMEOUT_S
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.05)
    consumer.close()


def _timed(case: str, changed: float, delay_s: float, client: Callable[[], None]) -> None:
    time.sleep(delay_s)
    started = time.monotonic()
    client()
    done = time.monotonic()
    print(f"{case:20} client {delay_s:3.0f} s after: done {done - changed:6.2f} s after the change, "
          f"{done - started:6.2f} s after the client started", flush=True)


def restart(records: int, delays: list[float], transactions: bool) -> None:
    settings: dict[str, object] = {"broker.id": 1, "transaction.state.log.num.partitions": 1,
                                   "offsets.topic.num.partitions": 1}
    with tempfile.TemporaryDirectory() as log_dir:
        settings["log.dirs"] = log_dir
        store = MemoryStore()
        with Broker(settings, store=store) as broker:
            broker.seed({TOPIC: {"partitions": 1}})
            with SimpleClient(broker.bootstrap_servers) as client:
                client.request(ApiKey.FIND_COORDINATOR, 1, {"key": "t" if transactions else "g",
                                                            "key_type": 1 if transactions else 0})
            if transactions:
                _fill_transactions(broker, records)
            else:
                _fill_offsets(broker, _module(broker, GroupsModule), records)
        for delay_s in delays:
            changed = time.monotonic()
            with Broker(settings, store=store) as broker:
                _timed("restart/transaction" if transactions else "restart/group", changed, delay_s,
                       lambda: (_transaction if transactions else _join)(broker.bootstrap_servers))


def move(records: int, delays: list[float]) -> None:
    for delay_s in delays:
        with Broker({"offsets.topic.num.partitions": 1}, brokers=2) as cluster:
            cluster.seed({TOPIC: {"partitions": 1}})
            with SimpleClient(cluster.bootstrap_servers) as client:
                client.request(ApiKey.FIND_COORDINATOR, 1, {"key": "g", "key_type": 0})
            assert cluster.runtime is not None
            leadership = cluster.runtime.cluster.leadership("__consumer_offsets", 0)
            assert leadership is not None
            leader = next(m for m in cluster.brokers if m.broker_id == leadership[0])
            _fill_offsets(cluster, _module(leader, GroupsModule), records)
            changed = time.monotonic()
            cluster.move_leader("__consumer_offsets", 0, to=1 - leadership[0])
            _timed("move/group", changed, delay_s, lambda: _join(cluster.bootstrap_servers))


def main() -> None:
    records = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    delays = [float(sys.argv[2])] if len(sys.argv) > 2 else [0.0, 5.0]
    restart(records, delays, transactions=True)
    restart(records, delays, transactions=False)
    move(records, delays)


if __name__ == "__main__":
    main()
