"""Loading a __transaction_state partition, as Kafka's loadTransactionsForTxnTopicPartition: a
partition within one slice loads in place; a longer one loads in slices between which the loop
runs other work, and meanwhile its ids are answered COORDINATOR_LOAD_IN_PROGRESS (InitProducerId,
AddPartitionsToTxn, its verify-only form, EndTxn, DescribeTransactions, ListTransactions); a
transaction found in PREPARE_* gets its markers once the load ends; a leadership change stops it."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping

import attrs

from kafkapy.errors import ErrorCode
from kafkapy.log import LogManager
from kafkapy.server.txn_markers import TxnMarker
from kafkapy.transactions.coordinator import CoordinatorConfig, TransactionCoordinator
from kafkapy.transactions.metadata import TopicPartition, TxnMetadata
from kafkapy.transactions.state import TxnState
from kafkapy.transactions.state_log import TopicStateLog

NOW = 1_700_000_000_000
SLICE = 10  # records a slice here
LOADING = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
PRODUCER_IDS = itertools.count(5000)


@attrs.define
class Cluster:
    """What the coordinator asks of the broker: does it lead the partition, under which epoch."""

    leads: bool = True
    epoch: int = 0
    markers: list[TxnMarker] = attrs.Factory(list)


def coordinator(logs: LogManager, cluster: Cluster) -> TransactionCoordinator:
    async def new_id() -> int:
        return next(PRODUCER_IDS)

    async def send(marker: TxnMarker) -> Mapping[TopicPartition, ErrorCode]:
        cluster.markers.append(marker)
        return dict.fromkeys(marker.partitions, ErrorCode.NONE)

    return TransactionCoordinator(
        state_log=TopicStateLog(logs.get_or_create, lambda: NOW, slice_records=SLICE), send_markers=send,
        new_producer_id=new_id, now_ms=lambda: NOW, leads=lambda partition: cluster.leads,
        leader_epoch=lambda partition: cluster.epoch, config=CoordinatorConfig(partition_count=1))


def filled(records: int) -> LogManager:
    """A partition of ``records`` records: one id's history, the last a PREPARE_COMMIT of ``pending``."""
    logs = LogManager()
    state_log = TopicStateLog(logs.get_or_create, lambda: NOW)
    for n in range(records - 1):
        state_log.append(0, f"id-{n % 7}", TxnMetadata(f"id-{n % 7}", 100 + n % 7, n // 7, 60_000,
                                                       TxnState.COMPLETE_COMMIT, NOW))
    state_log.append(0, "pending", TxnMetadata("pending", 42, 3, 60_000, TxnState.PREPARE_COMMIT, NOW,
                                               NOW, frozenset({("orders", 0)})))
    return logs


async def every_answer(txn: TransactionCoordinator) -> dict[str, object]:
    """What each coordinator request answers for an id of the partition."""
    init = await txn.init_producer_id("id-1", 1_000)
    return {
        "init": init.error,
        "add": txn.add_partitions("id-1", 101, 0, [("orders", 0)]),
        "verify": txn.verify_partitions("id-1", 101, 0, [("orders", 0)]),
        "end": await txn.end_transaction("id-1", 101, 0, True),
        "describe": txn.describe("id-1")[0],
        "list": txn.list()[0],
    }


def test_a_partition_within_one_slice_loads_in_place() -> None:
    async def scenario() -> None:
        cluster = Cluster()
        txn = coordinator(filled(SLICE - 1), cluster)
        assert txn.describe("pending")[0] == ErrorCode.NONE
        assert txn.loading() == []
        await txn.drain()
        assert [m.producer_id for m in cluster.markers] == [42]  # its PREPARE_COMMIT finished
        assert txn.describe("pending")[1].state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_a_longer_partition_loads_in_slices_answering_load_in_progress_meanwhile() -> None:
    async def scenario() -> None:
        cluster = Cluster()
        txn = coordinator(filled(20 * SLICE), cluster)
        assert await every_answer(txn) == {"init": LOADING, "add": LOADING, "end": LOADING,
                                           "describe": LOADING, "list": LOADING,
                                           "verify": {("orders", 0): LOADING}}
        assert txn.loading() == [0]
        steps = 0
        while txn.loading():  # the loop runs other work between the slices
            steps += 1
            await asyncio.sleep(0)
        assert steps >= 20 - 6  # each request above ran one slice itself; the runner the rest, one a step
        assert cluster.markers == []
        await txn.drain()
        assert [m.producer_id for m in cluster.markers] == [42]  # found in PREPARE_COMMIT: finished
        assert txn.describe("pending")[1].state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
        answers = await every_answer(txn)
        assert answers["init"] == ErrorCode.NONE and answers["list"] == ErrorCode.NONE
        assert {m.transactional_id for m in txn.list()[1]} == {f"id-{n}" for n in range(7)} | {"pending"}

    asyncio.run(scenario())


def test_a_load_is_stopped_when_leadership_moves_away_and_begun_again_under_a_new_epoch() -> None:
    async def scenario() -> None:
        cluster = Cluster()
        txn = coordinator(filled(20 * SLICE), cluster)
        assert txn.describe("id-1")[0] == LOADING
        await asyncio.sleep(0)
        cluster.leads = False  # another broker leads the partition now
        await txn.wait_for_loads()
        assert txn.loading() == [] and list(txn.loaded()) == []
        assert txn.describe("id-1")[0] == ErrorCode.NOT_COORDINATOR
        cluster.leads, cluster.epoch = True, 1  # and back here, under a newer epoch
        assert txn.describe("id-1")[0] == LOADING
        cluster.epoch = 2  # moved away and back again before the load ended
        assert txn.describe("id-1")[0] == LOADING
        await txn.wait_for_loads()
        await txn.drain()
        assert txn.describe("id-1")[0] == ErrorCode.NONE
        assert txn.coordinator_epoch("pending") == 2  # the load under epoch 1 was replaced, not installed
        assert [(m.producer_id, m.coordinator_epoch) for m in cluster.markers] == [(42, 2)]

    asyncio.run(scenario())


def test_a_reset_stops_a_load() -> None:
    async def scenario() -> None:
        txn = coordinator(filled(20 * SLICE), Cluster())
        assert txn.describe("id-1")[0] == LOADING
        txn.forget_all()
        assert txn.loading() == []
        await asyncio.sleep(0.01)
        assert list(txn.loaded()) == []

    asyncio.run(scenario())
