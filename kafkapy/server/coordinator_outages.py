"""The seam through which a coordinator is made unavailable on purpose (a test's cluster fault).

The faults module (kafkapy.faults.coordinators) keeps which group ids and transactional ids are
cut off and how, and provides the capability ``COORDINATOR_OUTAGES``; the group coordinator
(kafkapy.groups) and the transaction coordinator (kafkapy.transactions) consult it first on every
request about one id, and FindCoordinator consults it before it names a broker. The seam lives
here, below those modules, so that none of them imports another for it.

What an outage answers is one of the errors Kafka's coordinators answer while the id's partition
of ``__consumer_offsets`` or ``__transaction_state`` is not served:

=============================  ==========================  =================================
outage                         FindCoordinator             requests to the coordinator
=============================  ==========================  =================================
COORDINATOR_NOT_AVAILABLE      COORDINATOR_NOT_AVAILABLE   COORDINATOR_NOT_AVAILABLE (the
                                                           partition has no leader to write to)
NOT_COORDINATOR                COORDINATOR_NOT_AVAILABLE   NOT_COORDINATOR (the partition left
                                                           this broker, no successor yet)
COORDINATOR_LOAD_IN_PROGRESS   the coordinator             COORDINATOR_LOAD_IN_PROGRESS (the
                                                           partition is being loaded)
=============================  ==========================  =================================
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kafkapy.errors import ErrorCode

__all__ = ["COORDINATOR_OUTAGES", "OUTAGE_ERRORS", "CoordinatorOutageView", "find_coordinator_error"]

COORDINATOR_OUTAGES = "coordinator-outages"

# The errors an outage may answer with (the module's table), each with what FindCoordinator answers.
OUTAGE_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NONE,
}


def find_coordinator_error(outage: ErrorCode | None) -> ErrorCode:
    """What FindCoordinator answers for an id under ``outage`` (NONE: name the coordinator)."""
    return ErrorCode.NONE if outage is None else OUTAGE_ERRORS[outage]


@runtime_checkable
class CoordinatorOutageView(Protocol):
    """What the coordinators ask: the error requests about this id get now, or None."""

    def group_outage(self, group_id: str) -> ErrorCode | None: ...

    def transaction_outage(self, transactional_id: str) -> ErrorCode | None: ...
