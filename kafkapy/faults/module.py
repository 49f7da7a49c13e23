"""The faults module: gives the broker a ``Faults`` registry (capability ``faults``) and the
coordinator outages the coordinators consult (capability ``coordinator-outages``,
kafkapy.faults.coordinators).

It serves no API and installs nothing until a rule is added (kafkapy.faults.injector), so it is
enabled by default at no cost; with no outage, a coordinator's look-up is one empty dict's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from kafkapy.errors import ErrorCode
from kafkapy.faults.coordinators import CoordinatorOutages
from kafkapy.faults.injector import Faults
from kafkapy.server.coordinator_outages import COORDINATOR_OUTAGES
from kafkapy.server.modules import Module

if TYPE_CHECKING:
    from kafkapy.server.services import BrokerServices

__all__ = ["FAULTS_CAPABILITY", "FaultsModule"]

FAULTS_CAPABILITY = "faults"


class FaultsModule(Module):
    name = "faults"
    provides: ClassVar[tuple[str, ...]] = (FAULTS_CAPABILITY, COORDINATOR_OUTAGES)

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self.faults = Faults(services)
        # Replaced by the one an in-process cluster's brokers share (kafkapy.embedded).
        self.coordinator_outages = CoordinatorOutages()

    def group_outage(self, group_id: str) -> ErrorCode | None:
        return self.coordinator_outages.group_outage(group_id)

    def transaction_outage(self, transactional_id: str) -> ErrorCode | None:
        return self.coordinator_outages.transaction_outage(transactional_id)

    async def stop(self) -> None:
        self.faults.clear()  # stalled requests go on, so the connections can close
