"""Coordinator outages: a group id's or a transactional id's coordinator made unavailable.

``broker.coordinator_unavailable(group="g")`` (kafkapy.embedded) adds a ``CoordinatorOutage``
here and returns it as a handle: ``remove()`` ends it, and it is a context manager. While it
holds, FindCoordinator and the coordinator answer as Kafka's do while the id's partition is not
served (the table in kafkapy.server.coordinator_outages). The brokers of an in-process cluster
share one ``CoordinatorOutages``, as they share the coordinator's partition: any broker asked
answers the same.

The outages are a tuple replaced whole on every change, with the lookups rebuilt beside it, so
the loop thread reading them per request never sees half an update from a test's thread; a
request sent after ``add`` returns meets the outage. The coordinator itself is not touched: its
groups, members and timers go on, so members that cannot heartbeat for longer than their session
timeout are removed, as they are when a real coordinator moves and loads the group afresh.
"""

from __future__ import annotations

from types import TracebackType

from kafkapy.errors import ErrorCode
from kafkapy.server.coordinator_outages import OUTAGE_ERRORS

__all__ = ["CoordinatorOutage", "CoordinatorOutages"]


class CoordinatorOutage:
    """One outage: ``group_id`` and/or ``transactional_id`` answer ``error`` until ``remove()``."""

    def __init__(self, outages: CoordinatorOutages, group_id: str | None, transactional_id: str | None,
                 error: ErrorCode) -> None:
        self.group_id = group_id
        self.transactional_id = transactional_id
        self.error = error
        self.removed = False
        self._outages = outages

    def remove(self) -> None:
        """End the outage (again: nothing); the next request is answered as usual."""
        self._outages.remove(self)

    def __enter__(self) -> CoordinatorOutage:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.remove()

    def __repr__(self) -> str:
        return (f"CoordinatorOutage(group_id={self.group_id!r}, transactional_id={self.transactional_id!r}, "
                f"error={self.error.name}, removed={self.removed})")


class CoordinatorOutages:
    """The outages in force; implements kafkapy.server.coordinator_outages.CoordinatorOutageView.
    Of two outages of one id, the later one decides until it is removed."""

    def __init__(self) -> None:
        self.outages: tuple[CoordinatorOutage, ...] = ()
        self._groups: dict[str, ErrorCode] = {}
        self._transactions: dict[str, ErrorCode] = {}

    def add(self, group_id: str | None = None, transactional_id: str | None = None,
            error: ErrorCode = ErrorCode.COORDINATOR_NOT_AVAILABLE) -> CoordinatorOutage:
        if group_id is None and transactional_id is None:
            raise ValueError("an outage needs a group id or a transactional id")
        if error not in OUTAGE_ERRORS:
            names = ", ".join(code.name for code in OUTAGE_ERRORS)
            raise ValueError(f"an outage answers one of {names}, not {ErrorCode(error).name}")
        outage = CoordinatorOutage(self, group_id, transactional_id, ErrorCode(error))
        self._replace((*self.outages, outage))
        return outage

    def remove(self, outage: CoordinatorOutage) -> None:
        outage.removed = True
        if outage in self.outages:
            self._replace(tuple(o for o in self.outages if o is not outage))

    def clear(self) -> None:
        for outage in self.outages:
            outage.removed = True
        self._replace(())

    def _replace(self, outages: tuple[CoordinatorOutage, ...]) -> None:
        self._groups = {o.group_id: o.error for o in outages if o.group_id is not None}
        self._transactions = {o.transactional_id: o.error for o in outages if o.transactional_id is not None}
        self.outages = outages

    def group_outage(self, group_id: str) -> ErrorCode | None:
        return self._groups.get(group_id)

    def transaction_outage(self, transactional_id: str) -> ErrorCode | None:
        return self._transactions.get(transactional_id)
