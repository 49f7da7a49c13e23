"""The faults module: gives the broker a ``Faults`` registry (capability ``faults``).

It serves no API and installs nothing until a rule is added (kafkapy.faults.injector), so it is
enabled by default at no cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from kafkapy.faults.injector import Faults
from kafkapy.server.modules import Module

if TYPE_CHECKING:
    from kafkapy.server.services import BrokerServices

__all__ = ["FAULTS_CAPABILITY", "FaultsModule"]

FAULTS_CAPABILITY = "faults"


class FaultsModule(Module):
    name = "faults"
    provides: ClassVar[tuple[str, ...]] = (FAULTS_CAPABILITY,)

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self.faults = Faults(services)

    async def stop(self) -> None:
        self.faults.clear()  # stalled requests go on, so the connections can close
