"""What the control endpoint drives: the embedded Broker's test surface, as a Protocol.

The endpoint sits in the same layer as kafkapy.embedded, and the Broker starts the endpoint
(``Broker(control=...)``), so the endpoint names the Broker by this shape rather than by import
(which would make the two packages import each other). Every method here is one the Broker
already offers its Python tests; the endpoint adds no second way to do any of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kafkapy.errors import ErrorCode
from kafkapy.faults import FaultRules
from kafkapy.faults.cluster import LeaderMove
from kafkapy.faults.coordinators import CoordinatorOutage
from kafkapy.inspection import GroupView, Isolation, LogOffsets, StoredRecord, TransactionView
from kafkapy.observers.history import HistoryEntry
from kafkapy.seeding import TopicSeed
from kafkapy.server.clock import VirtualClock

__all__ = ["ControlMember", "ControlTarget"]


class ControlMember(Protocol):
    """One broker of the target (the target itself when it is a single broker)."""

    @property
    def runtime(self) -> object | None: ...  # None: this broker of a cluster is down

    @property
    def broker_id(self) -> int: ...

    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def faults(self) -> FaultRules: ...

    def history(self, *, connection: str | None = None, client_id: str | None = None,
                since: float | None = None) -> list[HistoryEntry]: ...


class ControlTarget(ControlMember, Protocol):
    """A broker or an in-process cluster (kafkapy.embedded.Broker), driven on its own loop."""

    @property
    def brokers(self) -> Sequence[ControlMember]: ...

    @property
    def is_cluster(self) -> bool: ...

    async def seed_async(self, data: Mapping[str, Any] | Sequence[TopicSeed]) -> None: ...

    async def reset_async(self) -> None: ...

    def snapshot(self) -> Any: ...  # an embedded.Snapshot, held by the endpoint by name

    async def restore_async(self, snapshot: Any) -> None: ...

    def records(self, topic: str, partition: int | None = None, from_offset: int = 0, *,
                isolation: Isolation | str = ...) -> list[StoredRecord]: ...

    def log_offsets(self, topic: str, partition: int | None = None) -> list[LogOffsets]: ...

    async def stop_broker_async(self, index: int) -> None: ...

    async def start_broker_async(self, index: int) -> None: ...

    # The clock and the cluster faults (kafkapy.server.clock, kafkapy.faults.cluster/coordinators).

    @property
    def clock(self) -> VirtualClock | None: ...  # None: the broker runs on real time

    async def move_leader_async(self, topic: str, partition: int, *, to: int) -> LeaderMove: ...

    async def move_coordinator_async(self, *, transactional_id: str | None = None, group: str | None = None,
                                     to: int) -> LeaderMove: ...

    def coordinator_unavailable(
            self, *, group: str | None = None, transactional_id: str | None = None,
            error: ErrorCode = ErrorCode.COORDINATOR_NOT_AVAILABLE) -> CoordinatorOutage: ...

    async def expire_session_async(self, group: str, *, member_id: str | None = None,
                                   client_id: str | None = None) -> list[str]: ...

    # The coordinators' state (kafkapy.inspection.groups, .transactions): frozen views.

    def groups(self, *group_ids: str) -> list[GroupView]: ...

    def group(self, group_id: str) -> GroupView | None: ...

    def transactions(self, *transactional_ids: str) -> list[TransactionView]: ...

    def transaction(self, transactional_id: str) -> TransactionView | None: ...
