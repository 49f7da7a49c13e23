"""One KIP-848 member's way from what it owns to its target assignment: revoke first, then assign.

Theory of operation. The group computes a *target* per member at an *assignment epoch*; a member
moves towards it one heartbeat at a time, and a partition is never given to its new owner while the
old owner may still be using it:

1. Partitions the member holds that are not in its target are *revoked*. The member keeps its epoch
   and stays in UNREVOKED_PARTITIONS, with only the partitions it keeps, until a heartbeat's owned
   partitions no longer list any of the revoked ones (a heartbeat without owned partitions proves
   nothing, so the member is assumed to still hold them).
2. Then the member moves to the target epoch and is given the target partitions that are *free*:
   that no other member holds, either assigned or still pending revocation. Those some other member
   still holds keep it in UNRELEASED_PARTITIONS until a later heartbeat finds them free.
3. With nothing to revoke and nothing held back it is STABLE at the target epoch.

This is Kafka's ``CurrentAssignmentBuilder``. Its decisions are the table ``NEXT_STATE``: from the
member's state and what the reconciliation found (``Step``) to the next state; the epoch rule is
``EPOCH_RULE``. The group keeps, per partition, the epoch of the member that holds it
(``partition_epoch``, -1 when free); that map is what makes step 2 safe.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Final

import attrs

from kafkapy.groups.assignors import Assignment, TopicId, freeze
from kafkapy.groups.records import ClassicMemberMetadata

__all__ = ["EPOCH_RULE", "NEXT_STATE", "NO_OWNER", "ConsumerMember", "MemberState", "Step", "reconcile"]

#: ``partition_epoch``'s answer for a partition no member holds.
NO_OWNER: Final = -1


class MemberState(enum.IntEnum):
    """Kafka's ``MemberState``; the values are the byte in ConsumerGroupCurrentMemberAssignmentValue."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2


class Step(enum.Enum):
    """What one reconciliation found."""

    STILL_REVOKING = "the member still owns partitions it was asked to revoke"
    REVOKE = "the member holds partitions outside its target and must revoke them first"
    AWAIT_RELEASE = "some target partitions are still held by other members"
    RECONCILED = "the member holds its whole target"


_S = MemberState
#: (state, step) -> next state. A pair that is missing cannot happen: STILL_REVOKING is only ever
#: found in UNREVOKED_PARTITIONS.
NEXT_STATE: Final[Mapping[tuple[MemberState, Step], MemberState]] = {
    (_S.STABLE, Step.REVOKE): _S.UNREVOKED_PARTITIONS,
    (_S.STABLE, Step.AWAIT_RELEASE): _S.UNRELEASED_PARTITIONS,
    (_S.STABLE, Step.RECONCILED): _S.STABLE,
    (_S.UNREVOKED_PARTITIONS, Step.STILL_REVOKING): _S.UNREVOKED_PARTITIONS,
    (_S.UNREVOKED_PARTITIONS, Step.REVOKE): _S.UNREVOKED_PARTITIONS,
    (_S.UNREVOKED_PARTITIONS, Step.AWAIT_RELEASE): _S.UNRELEASED_PARTITIONS,
    (_S.UNREVOKED_PARTITIONS, Step.RECONCILED): _S.STABLE,
    (_S.UNRELEASED_PARTITIONS, Step.REVOKE): _S.UNREVOKED_PARTITIONS,
    (_S.UNRELEASED_PARTITIONS, Step.AWAIT_RELEASE): _S.UNRELEASED_PARTITIONS,
    (_S.UNRELEASED_PARTITIONS, Step.RECONCILED): _S.STABLE,
}

#: Which epoch the member has after a step. "keep": its own (a revoking member is not moved on
#: until it has let go); "target": the assignment epoch. A member that has just acknowledged a
#: revocation and must revoke again moves to its epoch + 1 (Kafka's rule), so the new revocation
#: is told apart from the old.
EPOCH_RULE: Final[Mapping[Step, str]] = {
    Step.STILL_REVOKING: "keep",
    Step.REVOKE: "keep",
    Step.AWAIT_RELEASE: "target",
    Step.RECONCILED: "target",
}


@attrs.frozen
class ConsumerMember:
    """A member as the group knows it: what it asked for and where its reconciliation is."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = attrs.field(factory=dict, hash=False)
    pending_revocation: Assignment = attrs.field(factory=dict, hash=False)
    # Set for a member that joined with JoinGroup (KIP-848's migration): its session timeout and
    # the protocols it offered; None for a ConsumerGroupHeartbeat member.
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch

    def with_epoch(self, epoch: int) -> ConsumerMember:
        """Kafka's ``updateMemberEpoch``: the epoch it had becomes the previous one, so a member
        whose response was lost may still heartbeat once with it."""
        return attrs.evolve(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    if owned is None:
        return True
    return any(partitions.get(topic, frozenset()) & parts for topic, parts in owned.items())


def reconcile(member: ConsumerMember, assignment_epoch: int, target: Assignment,
              partition_epoch: Callable[[TopicId, int], int], owned: Assignment | None) -> ConsumerMember:
    """The member after one heartbeat: ``owned`` is what the heartbeat says it holds (``None``
    when the heartbeat did not say), ``partition_epoch`` the group's holder-epoch map."""
    if member.is_reconciled_to(assignment_epoch):
        return member
    base_epoch = member.member_epoch
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member  # Step.STILL_REVOKING: nothing moves until the member lets go
        base_epoch += 1

    keep: dict[TopicId, set[int]] = {}
    revoke: dict[TopicId, set[int]] = {}
    gain: dict[TopicId, set[int]] = {}
    held_back = False
    for topic in set(target) | set(member.assigned):
        wanted = target.get(topic, frozenset())
        had = member.assigned.get(topic, frozenset())
        keep[topic] = set(had & wanted)
        revoke[topic] = set(had - wanted)
        free = {p for p in wanted - had if partition_epoch(topic, p) == NO_OWNER}
        held_back = held_back or len(free) < len(wanted - had)
        gain[topic] = free
    revoking = freeze(revoke)

    if revoking and _owns_any(owned, revoking):
        step = Step.REVOKE
        assigned, pending = freeze(keep), revoking
    else:
        step = Step.AWAIT_RELEASE if held_back else Step.RECONCILED
        assigned = freeze({t: keep.get(t, set()) | gain.get(t, set()) for t in keep.keys() | gain})
        pending = {}
    epoch = base_epoch if EPOCH_RULE[step] == "keep" else assignment_epoch
    return attrs.evolve(member.with_epoch(epoch), state=NEXT_STATE[member.state, step], assigned=assigned,
                        pending_revocation=pending)
