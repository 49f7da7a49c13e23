"""The classic group's states and the moves between them, as a table.

Theory of operation (Kafka's GroupMetadata/ClassicGroupState): a group is born Empty. The first
join moves it to PreparingRebalance, where the coordinator collects every member's JoinGroup;
when all have joined (or the rebalance timeout runs out) it picks a protocol and a leader, bumps
the generation and moves to CompletingRebalance, where it waits for the leader's SyncGroup with
the assignment. That makes it Stable. Any change of membership (a join, a leave, a session that
expires) sends a Stable or CompletingRebalance group back to PreparingRebalance; a rebalance
that ends with nobody left makes it Empty again. Dead is the end: a deleted group, or one whose
partition this broker stopped leading.

The table is the only place the moves are written: ``transition`` refuses anything else, the docs
(docs/groups.md) show the same table, and the state-machine test walks it.
"""

from __future__ import annotations

import enum

__all__ = ["TRANSITIONS", "GroupState", "InvalidTransition", "transition"]


class GroupState(enum.Enum):
    """The names are the ones DescribeGroups and ListGroups answer with (Kafka's toString)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState

# target state -> the states it may be entered from (Kafka's validPreviousStates)
TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
}


class InvalidTransition(RuntimeError):
    """A move the table does not allow: a bug in the coordinator, never a client's doing."""


def transition(current: GroupState, target: GroupState) -> GroupState:
    """``target`` if the table allows the move from ``current``; InvalidTransition otherwise."""
    if current not in TRANSITIONS[target]:
        raise InvalidTransition(f"a group cannot move from {current.value} to {target.value}")
    return target
