"""What the control endpoint drives: the embedded Broker's test surface, as a Protocol.

The endpoint sits in the same layer as kafkapy.embedded, and the Broker starts the endpoint
(``Broker(control=...)``), so the endpoint names the Broker by this shape rather than by import
(which would make the two packages import each other). Every method here is one the Broker
already offers its Python tests; the endpoint adds no second way to do any of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kafkapy.faults import Faults
from kafkapy.inspection import StoredRecord
from kafkapy.observers.history import HistoryEntry
from kafkapy.seeding import TopicSeed

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
    def faults(self) -> Faults: ...

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

    def records(self, topic: str, partition: int | None = None,
                from_offset: int = 0) -> list[StoredRecord]: ...

    async def stop_broker_async(self, index: int) -> None: ...

    async def start_broker_async(self, index: int) -> None: ...
