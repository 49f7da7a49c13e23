"""The cluster faults' small parts against models: the outage registry (a Hypothesis state
machine: of the outages of one id, the latest still in force decides), the replica order a leader
move writes, a move asked of a broker that is not the controller; and examples/cluster_faults.py."""

from __future__ import annotations

import asyncio
import json

import pytest
from example_in_process import run_example
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.faults import CoordinatorOutage, CoordinatorOutages
from kafkapy.server.coordinator_outages import OUTAGE_ERRORS, find_coordinator_error
from kafkapy.server.leadership import led_by
from kafkapy.server.services import partition_leader

IDS = st.sampled_from(["a", "b", "c"])
ERRORS = st.sampled_from(list(OUTAGE_ERRORS))


class OutagesMachine(RuleBasedStateMachine):
    """Add and remove outages in any order; every look-up matches the model's answer."""

    handles = Bundle("handles")

    def __init__(self) -> None:
        super().__init__()
        self.outages = CoordinatorOutages()
        self.model: list[tuple[str | None, str | None, ErrorCode, CoordinatorOutage]] = []

    @rule(target=handles, group=st.none() | IDS, txn=st.none() | IDS, error=ERRORS)
    def add(self, group: str | None, txn: str | None, error: ErrorCode) -> CoordinatorOutage | None:
        if group is None and txn is None:
            with pytest.raises(ValueError):
                self.outages.add(group, txn, error)
            return None
        handle = self.outages.add(group, txn, error)
        self.model.append((group, txn, error, handle))
        return handle

    @rule(handle=handles)
    def remove(self, handle: CoordinatorOutage | None) -> None:
        if handle is None:
            return
        handle.remove()
        self.model = [entry for entry in self.model if entry[3] is not handle]
        assert handle.removed

    @rule()
    def clear(self) -> None:
        self.outages.clear()
        self.model = []

    @invariant()
    def look_ups_match_the_model(self) -> None:
        for key in ("a", "b", "c"):
            groups = [error for group, _, error, _ in self.model if group == key]
            txns = [error for _, txn, error, _ in self.model if txn == key]
            assert self.outages.group_outage(key) == (groups[-1] if groups else None)
            assert self.outages.transaction_outage(key) == (txns[-1] if txns else None)
        assert list(self.outages.outages) == [entry[3] for entry in self.model]


TestOutages = OutagesMachine.TestCase


def test_find_coordinator_answers_per_outage() -> None:
    assert find_coordinator_error(None) == ErrorCode.NONE
    assert find_coordinator_error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) == ErrorCode.NONE
    assert find_coordinator_error(ErrorCode.NOT_COORDINATOR) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert find_coordinator_error(ErrorCode.COORDINATOR_NOT_AVAILABLE) == ErrorCode.COORDINATOR_NOT_AVAILABLE


@given(replicas=st.lists(st.integers(0, 6), min_size=1, max_size=5, unique=True), to=st.integers(0, 6))
def test_a_move_makes_the_target_the_preferred_replica(replicas: list[int], to: int) -> None:
    moved = led_by(replicas, to)
    assert moved[0] == to and len(set(moved)) == len(moved)
    assert len(moved) == len(replicas)  # the replication factor stays
    others = [r for r in replicas if r != to]
    assert list(moved[1:]) == (others if to in replicas else replicas[1:])
    assert partition_leader(moved, set(replicas) | {to}) == to  # the leader rule then names it


def test_only_the_controller_moves_a_leader() -> None:
    with Broker(brokers=3) as cluster:
        cluster.seed({"t": {"partitions": 1}})
        runtimes = [m.runtime for m in cluster.brokers]
        controller_id = runtimes[0].cluster.controller_id  # type: ignore[union-attr]
        other = next(r for r in runtimes if r is not None and r.broker_id != controller_id)
        assert other.leadership is not None
        leader = other.cluster.leadership("t", 0)
        assert leader is not None
        to = next(r for r in (0, 1, 2) if r != leader[0])
        future = asyncio.run_coroutine_threadsafe(other.leadership.move_leader("t", 0, to), other.loop)
        with pytest.raises(KafkaApiError) as refused:
            future.result(timeout=10)
        assert refused.value.code == ErrorCode.NOT_CONTROLLER
        assert other.cluster.leadership("t", 0) == leader


def test_the_cluster_faults_example_moves_a_leader_and_expires_a_session() -> None:
    out = json.loads(run_example("cluster_faults.py"))
    assert out["move"]["to"] in (1, 2) and out["move"]["from"] != out["move"]["to"]
    assert out["move"]["leader_epoch"] == 1 and out["undelivered"] == 0
    assert out["stored"] == [[i, f"order-{i}", i] for i in range(10)]
    assert out["read"] == [f"order-{i}" for i in range(10)] and out["expired"] == 1
