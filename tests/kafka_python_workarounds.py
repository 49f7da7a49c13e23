"""A workaround for a kafka-python 3.0.x group bug, shared by every test that runs its consumers
in a group (tests/ is on sys.path through its conftest)."""

from __future__ import annotations

from typing import Any

__all__ = ["keep_pending_join_needed"]


def keep_pending_join_needed(coordinator: Any) -> None:
    """Work around a kafka-python 3.0.x bug that strands a rejoin the leader starts itself.

    A poll(timeout_ms) whose timer runs out during a JoinGroup -> SyncGroup round leaves the round
    in flight (``coordinator._join_task``) for the next poll to await; but the next poll awaits it
    only if ``need_rejoin()`` still holds. For a rejoin the leader starts itself (its topic
    metadata changed since it assigned) that is the metadata-snapshot check alone: it does not set
    ``rejoin_needed``, and once the round has run the assignor the snapshots match again. So when
    the SyncGroup answer comes after the poll gave up, no poll ever awaits the round: the member
    stays REBALANCING with heartbeats off (switched off before the JoinGroup, on again only when a
    poll completes the round), never applies its assignment, and its session runs out; its
    LeaveGroup at close then gets UNKNOWN_MEMBER_ID. Kafka's Java consumer has no such hole: its
    rejoinNeededOrPending() is ``rejoinNeeded || joinFuture != null``, and its metadata check sets
    rejoinNeeded. This does the same: while a round is in flight the rejoin stays needed (kafka-python
    clears the flag itself when the round completes)."""
    if getattr(coordinator, "_join_task", None) is not None:
        coordinator.request_rejoin()
