"""Real transactional producers against the coordinator (confluent-kafka, kafka-python,
aiokafka). confluent-kafka: init_transactions,
a committed transaction over two partitions (one marker per partition), and fencing by a second
instance with the same transactional id (the first gets librdkafka's fatal _FENCED).

FindCoordinator is the group coordinator module's API (being written in parallel); until it is
among the default modules, a stand-in here answers key type TRANSACTION through the
TRANSACTION_COORDINATOR capability, the way that module is to call it; from then on the tests
use the groups module's FindCoordinator. Markers are read with
the wire tests' ``markers_on`` (recorded, or read from the partitions once the data plane writes
them)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kafkapy.assembly import DEFAULT_MODULES
from kafkapy.embedded import Broker
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.modules import ApiHandler, Module, RequestContext
from kafkapy.store import MemoryStore
from kafkapy.transactions import TRANSACTION_COORDINATOR, TransactionCoordinatorLocator, TransactionsModule

from .test_transactions_wire import MARKER_MODULES, WRITTEN, coordinator_ready, markers_on

confluent_kafka = pytest.importorskip("confluent_kafka")


class StandInFindCoordinator(Module):
    """FindCoordinator for transactional ids only, through TRANSACTION_COORDINATOR."""

    name = "stand-in-find-coordinator"

    def apis(self) -> dict[int, ApiHandler]:
        return {ApiKey.FIND_COORDINATOR: ApiHandler(VersionRange(0, 4), self.find)}

    async def find(self, ctx: RequestContext, request: Request) -> dict[str, Any]:
        locator = self.services.provider(TRANSACTION_COORDINATOR, Module)
        assert isinstance(locator, TransactionCoordinatorLocator)
        keys = request.body.get("coordinator_keys") or [request.body.get("key")]
        found = []
        for key in keys:
            code, node = await locator.find_transaction_coordinator(key)
            endpoint = node.endpoints[0] if node is not None else None
            found.append({"key": key, "node_id": node.broker_id if node is not None else -1,
                          "host": endpoint.host if endpoint else "",
                          "port": endpoint.port if endpoint else -1,
                          "error_code": code, "error_message": None})
        if ctx.api_version >= 4:
            return {"throttle_time_ms": 0, "coordinators": found}
        first = found[0]
        return {"throttle_time_ms": 0, "error_code": first["error_code"], "error_message": None,
                "node_id": first["node_id"], "host": first["host"], "port": first["port"]}


# The stand-in only while the groups module (which serves FindCoordinator) is not a default one.
STAND_IN: list[type[Module]] = ([] if any(cls.name == "groups" for cls in DEFAULT_MODULES)
                                else [StandInFindCoordinator])


def test_confluent_transactional_producer_commits_and_is_fenced() -> None:
    WRITTEN.clear()
    store = MemoryStore()
    with Broker({"broker.id": 1, "transaction.state.log.num.partitions": 5}, store=store,
                modules=[TransactionsModule, *MARKER_MODULES, *STAND_IN]) as broker:
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


def broker_with_stand_ins(store: MemoryStore) -> Broker:
    return Broker({"broker.id": 1, "transaction.state.log.num.partitions": 5}, store=store,
                  modules=[TransactionsModule, *MARKER_MODULES, *STAND_IN])


def test_kafka_python_transactional_producer_commits_and_is_fenced() -> None:
    kafka = pytest.importorskip("kafka")
    WRITTEN.clear()
    store = MemoryStore()
    with broker_with_stand_ins(store) as broker:
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
    WRITTEN.clear()
    store = MemoryStore()
    with broker_with_stand_ins(store) as broker:
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
