"""The coordinator against a model of Kafka's rules: init, add, end, timeouts, fencing and
restarts in any order. State is kept in real (memory) partition logs of __transaction_state,
and a restart replays them into a new coordinator."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from kafkapy.errors import ErrorCode
from kafkapy.log import LogManager
from kafkapy.server.txn_markers import TxnMarker
from kafkapy.transactions.coordinator import CoordinatorConfig, TransactionCoordinator
from kafkapy.transactions.metadata import TopicPartition
from kafkapy.transactions.state import TxnState
from kafkapy.transactions.state_log import TopicStateLog

T = TypeVar("T")
IDS = ("alpha", "beta", "gamma")
POOL = [("orders", 0), ("orders", 1), ("audit", 0)]
MAX_TIMEOUT = 60_000


@attrs.define
class Model:
    producer_id: int
    epoch: int
    last_epoch: int = -1
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    timeout_ms: int = 0


@attrs.frozen
class Handle:
    """What a producer instance holds after InitProducerId."""

    transactional_id: str
    producer_id: int
    epoch: int


class CoordinatorMachine(RuleBasedStateMachine):
    producers = Bundle("producers")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.logs = LogManager()
        self.now = 1_700_000_000_000
        self.next_id = 1000
        self.markers: list[TxnMarker] = []
        self.expected_markers: list[tuple[int, int, bool, frozenset[TopicPartition]]] = []
        self.model: dict[str, Model] = {}
        self.coordinator = self._coordinator()

    def _coordinator(self) -> TransactionCoordinator:
        async def send(marker: TxnMarker) -> Mapping[TopicPartition, ErrorCode]:
            self.markers.append(marker)
            return dict.fromkeys(marker.partitions, ErrorCode.NONE)

        async def new_id() -> int:
            self.next_id += 1
            return self.next_id

        return TransactionCoordinator(
            state_log=TopicStateLog(self.logs.get_or_create, lambda: self.now), send_markers=send,
            new_producer_id=new_id, now_ms=lambda: self.now, leads=lambda partition: True,
            config=CoordinatorConfig(partition_count=3, max_timeout_ms=MAX_TIMEOUT))

    def teardown(self) -> None:
        self.loop.close()

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(work)

    def _abort_in_model(self, model: Model) -> None:
        """A fence: the epoch goes up by one and the transaction is aborted under it."""
        model.epoch += 1
        model.last_epoch = -1
        self.expected_markers.append((model.producer_id, model.epoch, False, model.partitions))
        model.last_epoch = model.epoch
        model.state, model.partitions = TxnState.COMPLETE_ABORT, frozenset()

    @rule(target=producers, transactional_id=st.sampled_from(IDS),
          timeout=st.sampled_from([1_000, 5_000, MAX_TIMEOUT, 0, MAX_TIMEOUT + 1]),
          bump=st.booleans(), data=st.data())
    def init(self, transactional_id: str, timeout: int, bump: bool, data: st.DataObject) -> Handle | None:
        model = self.model.get(transactional_id)
        expected = None
        if bump and model is not None:  # KIP-360: the client says which id and epoch it has
            expected = data.draw(st.sampled_from([(model.producer_id, model.epoch),
                                                  (model.producer_id, model.last_epoch),
                                                  (model.producer_id, model.epoch - 1), (1, 0)]))
        result = self.run(self.coordinator.init_producer_id(transactional_id, timeout, expected))
        if not 0 < timeout <= MAX_TIMEOUT:
            assert result.error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
            return None
        if model is None:
            assert result.error == ErrorCode.NONE
            self.model[transactional_id] = Model(result.producer_id, 0, timeout_ms=timeout)
            assert result.producer_epoch == 0
            return Handle(transactional_id, result.producer_id, 0)
        if expected is not None and expected[0] != model.producer_id:
            assert result.error == ErrorCode.PRODUCER_FENCED
            return None
        if model.state is TxnState.ONGOING:
            assert result.error == ErrorCode.CONCURRENT_TRANSACTIONS
            self._abort_in_model(model)
            return None
        if expected is None or expected[1] == model.epoch:
            new_epoch, last = model.epoch + 1, (-1 if expected is None else model.epoch)
        elif expected[1] == model.last_epoch:
            new_epoch, last = model.epoch, model.last_epoch  # a retried bump: the same answer again
        else:
            assert result.error == ErrorCode.PRODUCER_FENCED
            return None
        assert (result.error, result.producer_id, result.producer_epoch) == (
            ErrorCode.NONE, model.producer_id, new_epoch)
        model.epoch, model.last_epoch = new_epoch, last
        model.state, model.partitions, model.start_ms = TxnState.EMPTY, frozenset(), -1
        model.timeout_ms = timeout
        return Handle(transactional_id, model.producer_id, new_epoch)

    def _checked(self, handle: Handle) -> ErrorCode | None:
        model = self.model[handle.transactional_id]
        if handle.producer_id != model.producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if handle.epoch != model.epoch:
            return ErrorCode.PRODUCER_FENCED
        return None

    @rule(handle=producers, partitions=st.sets(st.sampled_from(POOL), min_size=1))
    def add_partitions(self, handle: Handle | None, partitions: set[TopicPartition]) -> None:
        if handle is None:
            return
        code = self.run(self.coordinator.add_partitions(
            handle.transactional_id, handle.producer_id, handle.epoch, partitions))
        refused = self._checked(handle)
        assert code == (refused or ErrorCode.NONE)
        if refused is None:
            model = self.model[handle.transactional_id]
            if model.state is not TxnState.ONGOING:
                model.state, model.start_ms = TxnState.ONGOING, self.now
            model.partitions |= partitions

    @rule(handle=producers, partitions=st.sets(st.sampled_from(POOL), min_size=1))
    def verify_partitions(self, handle: Handle | None, partitions: set[TopicPartition]) -> None:
        if handle is None:
            return
        codes = self.coordinator.verify_partitions(handle.transactional_id, handle.producer_id, handle.epoch,
                                                   partitions)
        refused = self._checked(handle)
        model = self.model[handle.transactional_id]
        assert codes == {tp: refused or (ErrorCode.NONE if tp in model.partitions else
                                         ErrorCode.TRANSACTION_ABORTABLE) for tp in partitions}

    @rule(handle=producers, commit=st.booleans())
    def end(self, handle: Handle | None, commit: bool) -> None:
        if handle is None:
            return
        code = self.run(self.coordinator.end_transaction(
            handle.transactional_id, handle.producer_id, handle.epoch, commit))
        refused = self._checked(handle)
        model = self.model[handle.transactional_id]
        if refused is not None:
            assert code == refused
        elif model.state is TxnState.ONGOING:
            assert code == ErrorCode.NONE
            self.expected_markers.append((model.producer_id, model.epoch, commit, model.partitions))
            model.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            model.partitions = frozenset()
            model.last_epoch = model.epoch
        elif model.state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            assert code == ErrorCode.NONE  # a retry of the end that completed
        else:
            assert code == ErrorCode.INVALID_TXN_STATE

    @rule(elapsed=st.sampled_from([10, 999, 1_001, 5_001, MAX_TIMEOUT + 1]))
    def time_passes(self, elapsed: int) -> None:
        self.now += elapsed
        aborted = self.run(self.coordinator.abort_timed_out())
        expected = []
        for transactional_id, model in sorted(self.model.items()):
            if model.state is TxnState.ONGOING and model.start_ms + model.timeout_ms < self.now:
                self._abort_in_model(model)
                expected.append(transactional_id)
        assert sorted(aborted) == expected

    @rule()
    def restart(self) -> None:
        """A new coordinator over the same logs (a restart, or the partitions moving here)."""
        self.coordinator = self._coordinator()
        for model in self.model.values():
            model.last_epoch = -1  # kept in memory only, as in Kafka

    @rule(handle=consumes(producers))
    def forget_producer(self, handle: Handle | None) -> None:
        """Keeps the bundle small; the producer instance goes away."""

    @invariant()
    def coordinator_matches_model(self) -> None:
        for transactional_id, model in self.model.items():
            found = self.coordinator.get(transactional_id)
            assert found is not None
            assert (found.producer_id, found.producer_epoch, found.state, found.partitions) == (
                model.producer_id, model.epoch, model.state, model.partitions)
            if model.state is TxnState.ONGOING:
                assert found.start_ms == model.start_ms
        described = {m.transactional_id for m in self.coordinator.list()}
        assert described == set(self.model)

    @invariant()
    def markers_match_model(self) -> None:
        sent = [(m.producer_id, m.producer_epoch, m.committed, frozenset(m.partitions)) for m in self.markers]
        assert sent == [marker for marker in self.expected_markers if marker[3]]


CoordinatorMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestCoordinator = CoordinatorMachine.TestCase
