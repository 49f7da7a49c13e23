"""A broker restarted over a long __transaction_state partition (log.dirs) loads it in slices, as
Kafka loads it in the background: another connection's requests are answered while the load
runs, and a real transactional producer (confluent-kafka) is told COORDINATOR_LOAD_IN_PROGRESS,
retries, and commits once the partition is loaded."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker, _find_module
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.store.memory import MemoryStore
from kafkapy.transactions.metadata import TxnMetadata
from kafkapy.transactions.module import TransactionsModule
from kafkapy.transactions.state import TxnState

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "payments"
RECORDS = 300_000  # a partition the cleaner has not compacted yet: many transactions' records
IDS = 1_000
TIMEOUT_S = 120
# Against a load of seconds: an ApiVersions answered within this came between two slices.
SLICE_WAIT_LIMIT_S = 1.0
WATCHER = "load-watcher"  # the other connection's client id


def config(log_dir: Path) -> dict[str, object]:
    return {"broker.id": 1, "log.dirs": str(log_dir), "transaction.state.log.num.partitions": 1,
            "observer.class.names": "kafkapy.observers.RequestHistory"}


def fill(broker: Broker) -> None:
    """RECORDS records in the state partition, through the state log's own append."""
    runtime = broker.runtime
    assert runtime is not None
    module = _find_module(runtime, TransactionsModule)
    assert module is not None
    state_log = module.coordinator.state_log
    now = int(time.time() * 1000)

    def write() -> None:
        for n in range(RECORDS):
            transactional_id = f"old-{n % IDS}"
            state = TxnState.ONGOING if n % 2 else TxnState.COMPLETE_COMMIT
            partitions = frozenset({(TOPIC, 0)}) if state is TxnState.ONGOING else frozenset()
            state_log.append(0, transactional_id, TxnMetadata(
                transactional_id, 10_000 + n % IDS, n // IDS % 100, 60_000, state, now, now, partitions))
    broker._on_loop(write)


@pytest.mark.slow
def test_a_long_state_partition_loads_while_others_are_served_and_a_producer_retries(tmp_path: Path) -> None:
    store = MemoryStore()
    with Broker(config(tmp_path), store=store) as broker:
        broker.seed({TOPIC: {"partitions": 1}})
        with SimpleClient(broker.bootstrap_servers) as client:  # makes __transaction_state
            answer = client.request(ApiKey.FIND_COORDINATOR, 1, {"key": "maker", "key_type": 1})
            assert answer["error_code"] == ErrorCode.NONE
        fill(broker)

    with Broker(config(tmp_path), store=store) as broker:  # the coordinator's cache starts empty
        with SimpleClient(broker.bootstrap_servers, client_id=WATCHER) as other:
            other.request(ApiKey.API_VERSIONS, 0, {})  # connected before the load
            producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                                 "transactional.id": "after-restart", "linger.ms": 0})
            failure: list[BaseException] = []

            def transact() -> None:
                try:
                    producer.init_transactions(TIMEOUT_S)
                    producer.begin_transaction()
                    producer.produce(TOPIC, value=b"committed", partition=0)
                    producer.commit_transaction(TIMEOUT_S)
                except BaseException as exc:  # raised again on the test's thread
                    failure.append(exc)

            worker = threading.Thread(target=transact, name="producer")
            worker.start()
            waits = []
            while worker.is_alive():
                started = time.monotonic()
                other.request(ApiKey.API_VERSIONS, 0, {})
                waits.append(time.monotonic() - started)
                time.sleep(0.02)
            worker.join()
        assert not failure, failure

        # every ApiVersions of the other connection came back between two slices of the load
        # (the load in one go held the loop: one waited for all of it)
        assert max(waits) < SLICE_WAIT_LIMIT_S, (max(waits), len(waits))
        history = broker.history()
        inits = [e for e in history if e.api_key == ApiKey.INIT_PRODUCER_ID]
        loading = [e for e in inits if e.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
        assert loading, [str(e) for e in inits]  # the producer was told to wait, and retried
        assert inits[-1].error_code == ErrorCode.NONE
        load_window = (loading[0].time, inits[-1].time)
        during = [e for e in history if e.client_id == WATCHER and load_window[0] < e.time < load_window[1]]
        assert len(during) >= 10, (len(during), load_window)
        print(f"load answered {len(loading)} InitProducerId LOAD_IN_PROGRESS over "
              f"{load_window[1] - load_window[0]:.1f} s; {len(during)} ApiVersions meanwhile, the longest "
              f"wait {max(waits) * 1000:.0f} ms")
        assert [r.value for r in broker.records(TOPIC) if not r.is_control] == [b"committed"]
        [view] = broker.transactions("after-restart")
        assert view.state == "CompleteCommit"
