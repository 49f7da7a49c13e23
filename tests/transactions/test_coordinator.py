"""The coordinator's edges that a random walk rarely reaches: the exact timeout boundary, an
exhausted epoch (a new producer id), and an append that fails (nothing changes, Kafka's code)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log import LogManager
from kafkapy.server.txn_markers import TxnMarker
from kafkapy.transactions.coordinator import TransactionCoordinator
from kafkapy.transactions.metadata import MAX_PRODUCER_EPOCH, TopicPartition, TxnMetadata
from kafkapy.transactions.state import TxnState
from kafkapy.transactions.state_log import TopicStateLog

PRODUCER_IDS = itertools.count(100)  # one allocator for every coordinator, as the store's blocks are


@attrs.define
class Clock:
    now: int = 1_700_000_000_000


class FailingLog(TopicStateLog):
    """The real log, until told to fail as a partition that moved away would."""

    failure: ErrorCode | None = None

    def append(self, partition: int, transactional_id: str, metadata: TxnMetadata | None) -> None:
        if self.failure is not None:
            raise KafkaApiError(self.failure)
        super().append(partition, transactional_id, metadata)


def coordinator(clock: Clock, log: TopicStateLog | None = None) -> TransactionCoordinator:
    async def new_id() -> int:
        return next(PRODUCER_IDS)

    async def send(marker: TxnMarker) -> Mapping[TopicPartition, ErrorCode]:
        return dict.fromkeys(marker.partitions, ErrorCode.NONE)

    return TransactionCoordinator(
        state_log=log or TopicStateLog(LogManager().get_or_create, lambda: clock.now), send_markers=send,
        new_producer_id=new_id, now_ms=lambda: clock.now, leads=lambda partition: True)


def test_a_transaction_times_out_only_after_its_timeout() -> None:
    async def scenario() -> None:
        clock = Clock()
        txn = coordinator(clock)
        init = await txn.init_producer_id("t", 1_000)
        assert txn.add_partitions("t", init.producer_id, 0, [("a", 0)]) == ErrorCode.NONE
        clock.now += 1_000
        assert await txn.abort_timed_out() == []  # Kafka: start + timeout < now
        clock.now += 1
        assert await txn.abort_timed_out() == ["t"]
        found = txn.get("t")
        assert found is not None and (found.state, found.producer_epoch) == (TxnState.COMPLETE_ABORT, 1)

    asyncio.run(scenario())


def test_an_exhausted_epoch_rotates_the_producer_id() -> None:
    async def scenario() -> None:
        clock = Clock()
        log = TopicStateLog(LogManager().get_or_create, lambda: clock.now)
        first = await coordinator(clock, log).init_producer_id("t", 1_000)
        # The log says the id is at the last epoch a client may hold (Short.MaxValue - 1) ...
        exhausted = TxnMetadata("t", first.producer_id, MAX_PRODUCER_EPOCH - 1, 1_000, TxnState.EMPTY,
                                clock.now)
        log.append(coordinator(clock).partition_for("t"), "t", exhausted)
        txn = coordinator(clock, log)  # ... and a coordinator takes the partition over
        rotated = await txn.init_producer_id("t", 1_000, (first.producer_id, MAX_PRODUCER_EPOCH - 1))
        assert (rotated.error, rotated.producer_epoch) == (ErrorCode.NONE, 0)
        assert rotated.producer_id != first.producer_id
        after = txn.get("t")
        assert after is not None and after.previous_producer_id == first.producer_id
        # A retry of that request (the answer was lost) is not fenced: the old id was exhausted.
        retried = await txn.init_producer_id("t", 1_000, (first.producer_id, MAX_PRODUCER_EPOCH - 1))
        assert retried.error == ErrorCode.NONE and retried.producer_id == rotated.producer_id

    asyncio.run(scenario())


def test_a_failed_append_changes_nothing_and_answers_as_kafka() -> None:
    async def scenario() -> None:
        clock = Clock()
        log = FailingLog(LogManager().get_or_create, lambda: clock.now)
        txn = coordinator(clock, log)
        init = await txn.init_producer_id("t", 1_000)
        before = txn.get("t")
        for failure, answered in [(ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
                                  (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.COORDINATOR_NOT_AVAILABLE),
                                  (ErrorCode.CORRUPT_MESSAGE, ErrorCode.UNKNOWN_SERVER_ERROR)]:
            log.failure = failure
            assert txn.add_partitions("t", init.producer_id, 0, [("a", 0)]) == answered
            assert txn.get("t") == before
        log.failure = None
        assert txn.add_partitions("t", init.producer_id, 0, [("a", 0)]) == ErrorCode.NONE

    asyncio.run(scenario())


def test_not_led_partitions_are_not_coordinated() -> None:
    async def scenario() -> None:
        clock = Clock()
        txn = coordinator(clock)
        txn.leads = lambda partition: False
        assert (await txn.init_producer_id("t", 1_000)).error == ErrorCode.NOT_COORDINATOR
        assert txn.describe("t") == (ErrorCode.NOT_COORDINATOR, None)

    asyncio.run(scenario())


def test_end_txn_with_local_partitions_is_answered_at_prepare_and_finished_in_the_next_step() -> None:
    """Kafka answers EndTxn once PrepareCommit is durable; with every partition local (``is_local``)
    kafkapy does too, and the markers and CompleteCommit follow in the loop's next step. A
    partition that is not local keeps the answer until the markers were tried."""
    async def scenario() -> None:
        clock = Clock()
        sent: list[TxnMarker] = []

        async def send(marker: TxnMarker) -> Mapping[TopicPartition, ErrorCode]:
            sent.append(marker)
            return dict.fromkeys(marker.partitions, ErrorCode.NONE)

        async def new_id() -> int:
            return next(PRODUCER_IDS)

        txn = TransactionCoordinator(
            state_log=TopicStateLog(LogManager().get_or_create, lambda: clock.now), send_markers=send,
            new_producer_id=new_id, now_ms=lambda: clock.now, leads=lambda partition: True,
            is_local=lambda tp: tp[0] == "here")
        init = await txn.init_producer_id("t", 1_000)
        for partitions, answered_at in [([("here", 0), ("here", 1)], TxnState.PREPARE_COMMIT),
                                        ([("here", 0), ("there", 0)], TxnState.COMPLETE_COMMIT)]:
            sent.clear()
            assert txn.add_partitions("t", init.producer_id, 0, partitions) == ErrorCode.NONE
            assert await txn.end_transaction("t", init.producer_id, 0, True) == ErrorCode.NONE
            answered = txn.get("t")
            assert answered is not None and answered.state is answered_at
            assert len(sent) == (0 if answered_at is TxnState.PREPARE_COMMIT else 1)
            await asyncio.sleep(0)  # the loop's next step
            done = txn.get("t")
            assert done is not None and done.state is TxnState.COMPLETE_COMMIT
            assert [set(marker.partitions) for marker in sent] == [set(partitions)]

    asyncio.run(scenario())


def test_a_local_transaction_is_finished_by_a_callback_with_its_markers_written_in_place() -> None:
    """With ``write_local_markers`` (TXN_MARKERS, a plain call), the step after the EndTxn answer
    is one callback, no task: PrepareCommit at the answer, markers and CompleteCommit after one
    loop step, and nothing went through the awaitable sender. A partition that refuses its marker
    in place (leadership moved since EndTxn) is tried again through the sender, as ``_finish`` does."""
    async def scenario() -> None:
        clock = Clock()
        sent: list[TxnMarker] = []
        written: list[TxnMarker] = []
        moved: set[TopicPartition] = set()

        async def send(marker: TxnMarker) -> Mapping[TopicPartition, ErrorCode]:
            sent.append(marker)
            return dict.fromkeys(marker.partitions, ErrorCode.NONE)

        def write_here(marker: TxnMarker) -> Mapping[TopicPartition, ErrorCode]:
            written.append(marker)
            return {tp: ErrorCode.NOT_LEADER_OR_FOLLOWER if tp in moved else ErrorCode.NONE
                    for tp in marker.partitions}

        async def new_id() -> int:
            return next(PRODUCER_IDS)

        txn = TransactionCoordinator(
            state_log=TopicStateLog(LogManager().get_or_create, lambda: clock.now), send_markers=send,
            new_producer_id=new_id, now_ms=lambda: clock.now, leads=lambda partition: True,
            is_local=lambda tp: True, write_local_markers=write_here, sleep=lambda seconds: asyncio.sleep(0))
        init = await txn.init_producer_id("t", 1_000)
        assert txn.add_partitions("t", init.producer_id, 0, [("a", 0), ("a", 1)]) == ErrorCode.NONE
        assert txn.end_transaction_now("t", init.producer_id, 0, True) == ErrorCode.NONE
        assert txn.get("t").state is TxnState.PREPARE_COMMIT  # type: ignore[union-attr]
        assert not txn._tasks and written == []  # a callback is due, no task
        await asyncio.sleep(0)
        assert txn.get("t").state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
        assert [m.partitions for m in written] == [(("a", 0), ("a", 1))] and sent == []

        moved.add(("a", 1))
        assert txn.add_partitions("t", init.producer_id, 0, [("a", 0), ("a", 1)]) == ErrorCode.NONE
        assert txn.end_transaction_now("t", init.producer_id, 0, False) == ErrorCode.NONE
        await asyncio.sleep(0)
        assert txn.get("t").state is TxnState.PREPARE_ABORT  # type: ignore[union-attr]
        await txn.drain()
        assert txn.get("t").state is TxnState.COMPLETE_ABORT  # type: ignore[union-attr]
        assert [m.partitions for m in sent] == [(("a", 1),)]

    asyncio.run(scenario())


def test_end_txn_now_declines_with_nothing_written_when_a_partition_is_on_another_broker() -> None:
    """The path from the frame cannot wait for a marker to another broker: ``end_transaction_now``
    says None before PrepareCommit is written, and the plain path (``end_transaction``) answers."""
    async def scenario() -> None:
        clock = Clock()
        log = TopicStateLog(LogManager().get_or_create, lambda: clock.now)
        txn = coordinator(clock, log)
        txn.is_local = lambda tp: tp[0] == "here"
        init = await txn.init_producer_id("t", 1_000)
        assert txn.add_partitions("t", init.producer_id, 0, [("here", 0), ("there", 0)]) == ErrorCode.NONE
        state_log = log.leader_log(log.topic, txn.partition_for("t"))
        before = state_log.log_end_offset
        assert txn.end_transaction_now("t", init.producer_id, 0, True) is None
        assert txn.get("t").state is TxnState.ONGOING and state_log.log_end_offset == before  # type: ignore[union-attr]
        # Refusals need no marker: answered in place all the same.
        assert txn.end_transaction_now("t", init.producer_id, 1, True) == ErrorCode.PRODUCER_FENCED
        assert await txn.end_transaction("t", init.producer_id, 0, True) == ErrorCode.NONE
        assert txn.get("t").state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]

    asyncio.run(scenario())
