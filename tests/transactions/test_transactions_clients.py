"""Real transactional producers against the coordinator (confluent-kafka, kafka-python,
aiokafka). confluent-kafka: init_transactions,
a committed transaction over two partitions (one marker per partition), and fencing by a second
instance with the same transactional id (the first gets librdkafka's fatal _FENCED).

Everything is the default broker: the groups module's FindCoordinator (key type TRANSACTION),
the transactions module, the data plane's markers, read back with the wire tests' ``markers_on``."""

from __future__ import annotations

import asyncio

import pytest

from kafkapy.embedded import Broker
from kafkapy.store import MemoryStore

from .test_transactions_wire import coordinator_ready, markers_on

confluent_kafka = pytest.importorskip("confluent_kafka")


def test_confluent_transactional_producer_commits_and_is_fenced() -> None:
    store = MemoryStore()
    with Broker({"broker.id": 1, "transaction.state.log.num.partitions": 5}, store=store) as broker:
        store.create_topic("out", {0: (1,), 1: (1,)})
        coordinator_ready(broker)
        config = {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "pipeline"}
        first = confluent_kafka.Producer(config)
        first.init_transactions(20)
        first.begin_transaction()
        for i in range(10):
            first.produce("out", value=b"v%d" % i, partition=i % 2)
        first.flush(10)
        first.commit_transaction(20)
        marked = markers_on(broker, ("out", 0), ("out", 1))
        [(pid, committed_epoch, committed)] = marked[("out", 0)]
        assert committed and marked[("out", 1)] == [(pid, committed_epoch, True)]

        first.begin_transaction()
        first.produce("out", value=b"late", partition=0)
        first.flush(10)
        second = confluent_kafka.Producer(config)
        second.init_transactions(20)  # aborts the first one's open transaction, then fences it
        marked = markers_on(broker, ("out", 0), ("out", 1))
        assert marked[("out", 0)][-1] == (pid, committed_epoch + 1, False)
        assert len(marked[("out", 1)]) == 1  # the aborted transaction never wrote there
        with pytest.raises(confluent_kafka.KafkaException) as raised:
            first.commit_transaction(10)
        error = raised.value.args[0]
        assert error.fatal() and error.code() == confluent_kafka.KafkaError._FENCED
        second.begin_transaction()
        second.produce("out", value=b"after", partition=1)
        second.flush(10)
        second.commit_transaction(20)
        assert markers_on(broker, ("out", 1))[("out", 1)][-1] == (pid, committed_epoch + 2, True)


def default_broker(store: MemoryStore) -> Broker:
    return Broker({"broker.id": 1, "transaction.state.log.num.partitions": 5}, store=store)


def test_kafka_python_transactional_producer_commits_and_is_fenced() -> None:
    kafka = pytest.importorskip("kafka")
    store = MemoryStore()
    with default_broker(store) as broker:
        store.create_topic("out", {0: (1,), 1: (1,)})
        coordinator_ready(broker)
        first = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id="kp")
        first.init_transactions()
        first.begin_transaction()
        for i in range(4):
            first.send("out", value=b"v", partition=i % 2)
        first.commit_transaction()
        marked = markers_on(broker, ("out", 0), ("out", 1))
        [(pid, epoch, committed)] = marked[("out", 0)]
        assert committed and marked[("out", 1)] == [(pid, epoch, True)]
        first.begin_transaction()
        first.send("out", value=b"late", partition=0)
        first.flush()
        second = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id="kp")
        second.init_transactions()
        assert markers_on(broker, ("out", 0))[("out", 0)][-1] == (pid, epoch + 1, False)
        with pytest.raises(kafka.errors.ProducerFencedError):
            first.commit_transaction()
        second.close()
        first.close()


def test_aiokafka_transactional_producer_commits() -> None:
    aiokafka = pytest.importorskip("aiokafka")
    store = MemoryStore()
    with default_broker(store) as broker:
        store.create_topic("out", {0: (1,), 1: (1,)})
        coordinator_ready(broker)

        async def transaction(commit: bool) -> None:
            producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                                                 transactional_id="aio")
            await producer.start()
            try:
                await producer.begin_transaction()
                await producer.send("out", b"a", partition=0)
                await producer.send("out", b"b", partition=1)
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
            finally:
                await producer.stop()

        asyncio.run(transaction(commit=True))
        asyncio.run(transaction(commit=False))
        marked = markers_on(broker, ("out", 0), ("out", 1))
        assert marked[("out", 0)] == marked[("out", 1)]
        [(pid, epoch, committed), (same_pid, bumped, aborted)] = marked[("out", 0)]
        # The second producer's start bumped the epoch.
        assert (committed, aborted, same_pid, bumped) == (True, False, pid, epoch + 1)
