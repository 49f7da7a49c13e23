"""A reset that lands while a coordinator is between two steps: what was on its way is dropped,
never written after the reset (which would bring a forgotten group or transaction back on the
next load)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping

from kafkapy.embedded import Broker, _find_module
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.module import GroupsModule
from kafkapy.groups.offsets import OffsetEntry
from kafkapy.log import LogManager
from kafkapy.server.txn_markers import TxnMarker
from kafkapy.transactions.coordinator import TransactionCoordinator
from kafkapy.transactions.metadata import TopicPartition
from kafkapy.transactions.state import TxnState
from kafkapy.transactions.state_log import TopicStateLog

PRODUCER_IDS = itertools.count(500)


def test_a_transaction_ending_across_a_reset_is_not_completed_afterwards() -> None:
    async def scenario() -> None:
        logs = LogManager()
        state_log = TopicStateLog(logs.get_or_create, lambda: 1_700_000_000_000)
        markers_sent = asyncio.Event()
        release = asyncio.Event()

        async def send(marker: TxnMarker) -> Mapping[TopicPartition, ErrorCode]:
            markers_sent.set()
            await release.wait()  # a marker to another broker, answered after the reset
            return dict.fromkeys(marker.partitions, ErrorCode.NONE)

        async def new_id() -> int:
            return next(PRODUCER_IDS)

        txn = TransactionCoordinator(state_log=state_log, send_markers=send, new_producer_id=new_id,
                                     now_ms=lambda: 1_700_000_000_000, leads=lambda partition: True)
        init = await txn.init_producer_id("t", 10_000)
        assert txn.add_partitions("t", init.producer_id, 0, [("a", 0)]) == ErrorCode.NONE
        ending = asyncio.ensure_future(txn.end_transaction("t", init.producer_id, 0, True))
        await markers_sent.wait()
        assert txn.get("t").state is TxnState.PREPARE_COMMIT  # type: ignore[union-attr]
        log = logs.get(state_log.topic, txn.partition_for("t"))
        assert log is not None
        written = log.log_end_offset

        txn.forget_all()
        log.truncate_fully_and_start_at(written)  # what reset does to __transaction_state
        assert txn.get("t") is None  # a new request meanwhile: the partition is loaded again, empty
        release.set()
        await ending
        assert log.log_end_offset == written  # no CompleteCommit appended after the reset
        assert txn.get("t") is None and state_log.replay(txn.partition_for("t")) == {}
        # the producer's next request is answered as for an id the coordinator does not know
        answer = await txn.end_transaction("t", init.producer_id, 0, True)
        assert answer == ErrorCode.INVALID_PRODUCER_ID_MAPPING

    asyncio.run(scenario())


def test_an_offset_commit_queued_before_a_reset_is_dropped() -> None:
    async def scenario() -> None:
        broker = Broker()
        await broker.start()
        try:
            await broker.seed_async({"t": {}})
            assert broker.runtime is not None
            groups = _find_module(broker.runtime, GroupsModule)
            assert groups is not None
            assert await groups._offsets_topic.ensure()  # what the first FindCoordinator does
            deadline = asyncio.get_running_loop().time() + 30
            while True:  # then loaded by the first request for the group
                try:
                    groups.check_coordinator("g")
                    break
                except KafkaApiError as refused:
                    # Not 500 tries of 10 ms and on regardless: a commit before the load would be
                    # refused for that, not for the reset.
                    assert asyncio.get_running_loop().time() < deadline, refused
                    await asyncio.sleep(0.01)
            outcome: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
            # the write is queued (a task), and the reset runs before it
            groups.coordinator.commit_offsets("g", -1, "", None, [OffsetEntry("t", 0, 5, -1, "")],
                                              outcome.set_result)
            await broker.reset_async()
            assert await outcome == ErrorCode.NOT_COORDINATOR  # the client finds the coordinator again
            assert broker.groups() == []
            # nothing in __consumer_offsets for a reload to bring back
            partition = groups.group_log.partition_for("g")
            assert [r for r in groups.group_log.replay(partition)] == []
        finally:
            await broker.stop()

    asyncio.run(scenario())
