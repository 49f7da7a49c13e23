"""The coordinator against a model of Kafka's rules: init, add, end, timeouts, fencing, id
expiry, partitions that refuse their markers for a while, and restarts, in any order. State is
kept in real (memory) partition logs of __transaction_state, and a restart replays them into a
new coordinator."""

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
EXPIRATION = 100_000
COMPLETE = {True: TxnState.COMPLETE_COMMIT, False: TxnState.COMPLETE_ABORT}
PREPARE = {True: TxnState.PREPARE_COMMIT, False: TxnState.PREPARE_ABORT}
Written = tuple[int, int, bool, TopicPartition]  # one partition's marker


@attrs.define
class Model:
    producer_id: int
    epoch: int
    last_update_ms: int
    last_epoch: int = -1
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    timeout_ms: int = 0
    committing: bool = False  # what a PREPARE_* state is heading to


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
        self.unreachable: set[TopicPartition] = set()
        self.written: list[Written] = []  # markers the partitions took
        self.expected: set[Written] = set()  # markers the model says are due
        self.model: dict[str, Model] = {}
        self.coordinator = self._coordinator()

    def _coordinator(self) -> TransactionCoordinator:
        async def send(marker: TxnMarker) -> Mapping[TopicPartition, ErrorCode]:
            results = {}
            for tp in marker.partitions:
                if tp in self.unreachable:
                    results[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                else:
                    results[tp] = ErrorCode.NONE
                    self.written.append((marker.producer_id, marker.producer_epoch, marker.committed, tp))
            return results

        async def new_id() -> int:
            self.next_id += 1
            return self.next_id

        return TransactionCoordinator(
            # three records a slice: a restart's load of any partition longer than that goes on
            # in slices (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and must end in the same state
            state_log=TopicStateLog(self.logs.get_or_create, lambda: self.now, slice_records=3),
            send_markers=send,
            new_producer_id=new_id, now_ms=lambda: self.now, leads=lambda partition: True,
            config=CoordinatorConfig(partition_count=3, max_timeout_ms=MAX_TIMEOUT,
                                     transactional_id_expiration_ms=EXPIRATION),
            sleep=lambda seconds: asyncio.sleep(0))

    def teardown(self) -> None:
        self.coordinator.cancel()
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(work)

    # --- the model's transitions ----------------------------------------------------------------

    def _end_in_model(self, model: Model, commit: bool) -> None:
        """PREPARE_*, markers, and COMPLETE_* once every partition took its marker."""
        model.committing = commit
        model.last_update_ms = self.now
        self.expected |= {(model.producer_id, model.epoch, commit, tp) for tp in model.partitions}
        model.state = PREPARE[commit]
        self._complete_if_reachable(model)

    def _complete_if_reachable(self, model: Model) -> None:
        if model.state.is_completing and not model.partitions & self.unreachable:
            model.state, model.partitions = COMPLETE[model.committing], frozenset()
            model.last_epoch = model.epoch
            model.last_update_ms = self.now

    def _fence_in_model(self, model: Model) -> None:
        """The epoch goes up by one and the transaction is aborted under it."""
        model.epoch, model.last_epoch = model.epoch + 1, -1
        self._end_in_model(model, commit=False)

    # --- rules ----------------------------------------------------------------------------------

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
            assert (result.error, result.producer_epoch) == (ErrorCode.NONE, 0)
            self.model[transactional_id] = Model(result.producer_id, 0, self.now, timeout_ms=timeout)
            return Handle(transactional_id, result.producer_id, 0)
        if expected is not None and expected[0] != model.producer_id:
            assert result.error == ErrorCode.PRODUCER_FENCED
            return None
        if model.state.is_completing:
            assert result.error == ErrorCode.CONCURRENT_TRANSACTIONS
            return None
        if model.state is TxnState.ONGOING:
            assert result.error == ErrorCode.CONCURRENT_TRANSACTIONS
            self._fence_in_model(model)
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
        model.timeout_ms, model.last_update_ms = timeout, self.now
        return Handle(transactional_id, model.producer_id, new_epoch)

    def _refused(self, handle: Handle) -> ErrorCode | None:
        model = self.model.get(handle.transactional_id)
        if model is None or handle.producer_id != model.producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if handle.epoch != model.epoch:
            return ErrorCode.PRODUCER_FENCED
        return None

    @rule(handle=producers, partitions=st.sets(st.sampled_from(POOL), min_size=1))
    def add_partitions(self, handle: Handle | None, partitions: set[TopicPartition]) -> None:
        if handle is None:
            return
        code = self.coordinator.add_partitions(handle.transactional_id, handle.producer_id, handle.epoch,
                                               partitions)
        refused = self._refused(handle)
        if refused is not None:
            assert code == refused
            return
        model = self.model[handle.transactional_id]
        if model.state.is_completing:
            assert code == ErrorCode.CONCURRENT_TRANSACTIONS
            return
        assert code == ErrorCode.NONE
        if model.state is TxnState.ONGOING and partitions <= model.partitions:
            return  # nothing new: nothing is written
        if model.state is not TxnState.ONGOING:
            model.state, model.start_ms = TxnState.ONGOING, self.now
        model.partitions |= partitions
        model.last_update_ms = self.now

    @rule(handle=producers, partitions=st.sets(st.sampled_from(POOL), min_size=1))
    def verify_partitions(self, handle: Handle | None, partitions: set[TopicPartition]) -> None:
        if handle is None:
            return
        codes = self.coordinator.verify_partitions(handle.transactional_id, handle.producer_id, handle.epoch,
                                                   partitions)
        refused = self._refused(handle)
        model = self.model.get(handle.transactional_id)
        if refused is None and model is not None and model.state.is_completing:
            refused = ErrorCode.CONCURRENT_TRANSACTIONS
        assert codes == {tp: refused or (ErrorCode.NONE if model and tp in model.partitions else
                                         ErrorCode.TRANSACTION_ABORTABLE) for tp in partitions}

    @rule(handle=producers, commit=st.booleans())
    def end(self, handle: Handle | None, commit: bool) -> None:
        if handle is None:
            return
        code = self.run(self.coordinator.end_transaction(
            handle.transactional_id, handle.producer_id, handle.epoch, commit))
        refused = self._refused(handle)
        if refused is not None:
            assert code == refused
            return
        model = self.model[handle.transactional_id]
        if model.state is TxnState.ONGOING:
            assert code == ErrorCode.NONE
            self._end_in_model(model, commit)
        elif model.state is COMPLETE[commit]:
            assert code == ErrorCode.NONE  # a retry of the end that completed
        elif model.state is PREPARE[commit]:
            assert code == ErrorCode.CONCURRENT_TRANSACTIONS
        else:
            assert code == ErrorCode.INVALID_TXN_STATE

    @rule(partitions=st.sets(st.sampled_from(POOL)))
    def partitions_refuse_markers(self, partitions: set[TopicPartition]) -> None:
        """These partitions answer NOT_LEADER_OR_FOLLOWER to markers until all heal (so no
        background retry can succeed behind the model's back)."""
        self.unreachable |= partitions

    @rule()
    def partitions_heal(self) -> None:
        self.unreachable.clear()
        self.run(self.coordinator.drain())
        for model in self.model.values():
            self._complete_if_reachable(model)

    @rule(elapsed=st.sampled_from([10, 999, 1_000, 1_001, 5_001, MAX_TIMEOUT + 1, EXPIRATION,
                                   EXPIRATION + 1]))
    def time_passes(self, elapsed: int) -> None:
        self.now += elapsed
        aborted = self.run(self.coordinator.abort_timed_out())
        expected = []
        for transactional_id, model in sorted(self.model.items()):
            if model.state is TxnState.ONGOING and model.start_ms + model.timeout_ms < self.now:
                self._fence_in_model(model)
                expected.append(transactional_id)
        assert sorted(aborted) == expected

    @rule()
    def ids_expire(self) -> None:
        expired = self.run(self.coordinator.expire_transactional_ids())
        due = sorted(transactional_id for transactional_id, model in self.model.items()
                     if model.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
                     and model.last_update_ms + EXPIRATION <= self.now)
        assert sorted(expired) == due
        for transactional_id in due:
            del self.model[transactional_id]

    @rule()
    def restart(self) -> None:
        """A new coordinator over the same logs (a restart, or the partitions moving here); the
        old one's marker retries end with it."""
        self.coordinator.cancel()
        self.coordinator = self._coordinator()

        async def load() -> None:
            self.coordinator.load_led_partitions()  # resends the markers of PREPARE_* transactions
            await self.coordinator.wait_for_loads()
            await asyncio.sleep(0)  # those markers' tasks take their first (and, if reachable, only) step

        self.run(load())
        for model in self.model.values():
            model.last_epoch = -1  # kept in memory only, as in Kafka
            self._complete_if_reachable(model)

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
        assert {m.transactional_id for m in self.coordinator.list()[1]} == set(self.model)

    @invariant()
    def markers_match_model(self) -> None:
        """Every marker written was due; every due marker of a completed transaction was written."""
        written = set(self.written)
        assert written <= self.expected
        pending = {(m.producer_id, m.epoch, m.committing, tp) for m in self.model.values()
                   if m.state.is_completing for tp in m.partitions}
        assert self.expected - written <= pending


CoordinatorMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
TestCoordinator = CoordinatorMachine.TestCase
