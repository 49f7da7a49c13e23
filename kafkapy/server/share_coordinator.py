"""The seams between KIP-932's share coordinator (kafkapy.sharestate) and the modules that use it.

FindCoordinator (the groups module) answers key type SHARE with the broker leading the key's
``__share_group_state`` partition: the share coordinator module provides the capability
``SHARE_COORDINATOR`` answering that (``ShareCoordinatorLocator``). The seam lives here, below
both modules, as kafkapy.server.txn_coordinator does for transactions.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kafkapy.errors import ErrorCode
from kafkapy.store.base import BrokerRegistration

__all__ = ["SHARE_COORDINATOR", "ShareCoordinatorLocator"]

SHARE_COORDINATOR = "share-coordinator"


@runtime_checkable
class ShareCoordinatorLocator(Protocol):
    async def find_share_coordinator(self, key: str) -> tuple[ErrorCode, BrokerRegistration | None]:
        """(NONE, the broker leading the key's ``__share_group_state`` partition), or why there is
        none: INVALID_REQUEST for a key that is not ``group:topicId:partition``,
        COORDINATOR_NOT_AVAILABLE when the topic cannot be made or the partition has no leader."""
        ...
