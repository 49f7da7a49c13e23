"""What the group coordinator told each member, for judging the member's later requests.

Theory of operation
-------------------
Strict mode learns a member's generations and partitions the way the member does, from the
coordinator's answers: JoinGroup gives a classic member its generation, SyncGroup its partitions
(ConsumerProtocolAssignment bytes, when the group's protocol type is ``consumer``), and each
ConsumerGroupHeartbeat answer a KIP-848 member its epoch and, when it changed, its partitions.
Nothing of the coordinator's own logic is repeated: whether a generation is stale is what the
coordinator answered; strict mode only decides whether the client could have known better.

Two judgements (docs/testing.md, "Strict mode", gives the reasoning):

* A request answered ILLEGAL_GENERATION, FENCED_MEMBER_EPOCH or STALE_MEMBER_EPOCH is normal the
  first time for a generation the member once held: a rebalance moved on while it was busy, and
  the answer is how it learns. It is misuse when the member had already been told that generation
  was stale before it sent the request (it retried instead of rejoining), or when the generation
  is ahead of every one the coordinator ever gave it (it made one up). "Before" is by arrival
  order: each request gets a stamp as it arrives, each answer the stamp current when it was made.
* An accepted OffsetCommit (or TxnOffsetCommit) from a member at a generation (epoch) whose
  partitions are known, for a partition it may not commit then, is misuse: Kafka's coordinator
  does not check, and the commit silently moves another member's position. What it may commit
  at a generation: what it was given at that generation and at its previous one. A member revokes
  partitions during the generation that takes them away, committing them first: a cooperative
  classic member learns of the revocation from that generation's SyncGroup, and a KIP-848 member
  keeps them, at the same epoch, until it acknowledges the revocation (so its partitions at an
  epoch are every partition it was given while at that epoch).
  Commits outside group management (generation -1, no member id) are not judged, nor are members
  whose assignment this broker did not see (the group moved here from another coordinator).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from kafkapy.errors import DecodeError, ErrorCode
from kafkapy.protocol.schema import MessageSchema
from kafkapy.protocol.specs import standard_and_project_specs

__all__ = ["CONSUMER_PROTOCOL_TYPE", "STALE_CODES", "GroupWatch", "assigned_partitions"]

TopicPartition = tuple[str, int]
STALE_CODES = frozenset({ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_MEMBER_EPOCH,
                         ErrorCode.STALE_MEMBER_EPOCH})
CONSUMER_PROTOCOL_TYPE = "consumer"  # the Java consumer's (and every consumer client's) protocol type
GENERATIONS_KEPT = 4  # assignments remembered per member: enough for a commit racing a rebalance
_VERSION_SIZE = 2  # the int16 version in front of a ConsumerProtocolAssignment


@functools.cache
def _assignment_v0() -> Callable[[bytes, int, int], tuple[Mapping[str, Any], int]]:
    spec = next(s for s in standard_and_project_specs() if s.name == "ConsumerProtocolAssignment")
    decode: Callable[[bytes, int, int], tuple[Mapping[str, Any], int]] = \
        MessageSchema(spec, 0).compiled_codec()[0]
    return decode


def assigned_partitions(data: bytes) -> frozenset[TopicPartition] | None:
    """The partitions in a ConsumerProtocolAssignment, read at v0 (the prefix every version keeps);
    None when the bytes are not one. Empty bytes are no partitions (a member left without any)."""
    if not data:
        return frozenset()
    if len(data) < _VERSION_SIZE:
        return None
    try:
        body, _ = _assignment_v0()(data, _VERSION_SIZE, len(data))
    except DecodeError:
        return None
    return frozenset((topic["topic"], partition) for topic in body["assigned_partitions"] or ()
                     for partition in topic["partitions"] or ())


@attrs.define
class _Member:
    given: set[int] = attrs.Factory(set)  # generations (epochs) the coordinator answered it with
    told: dict[int, int] = attrs.Factory(dict)  # a generation it was told is stale -> stamp then
    owned: dict[int, frozenset[TopicPartition]] = attrs.Factory(dict)  # generation -> partitions
    current: frozenset[TopicPartition] = frozenset()  # KIP-848: the last assignment it was sent


class GroupWatch:
    """Per (group, member): what the coordinator told it (module docstring)."""

    def __init__(self) -> None:
        self._members: dict[tuple[str, str], _Member] = {}

    def _member(self, group: str, member: str) -> _Member:
        return self._members.setdefault((group, member), _Member())

    def joined(self, group: str, member: str, generation: int) -> None:
        """A JoinGroup answered without error."""
        self._member(group, member).given.add(generation)

    def synced(self, group: str, member: str, generation: int,
               partitions: frozenset[TopicPartition] | None) -> None:
        """A SyncGroup answered without error; ``partitions`` None when not a consumer's."""
        if partitions is not None:
            self._own(self._member(group, member), generation, partitions)

    def heartbeat(self, group: str, member: str, epoch: int,
                  partitions: frozenset[TopicPartition] | None) -> None:
        """A ConsumerGroupHeartbeat answered without error; ``partitions`` None when unchanged."""
        state = self._member(group, member)
        state.given.add(epoch)
        if partitions is not None:
            state.current = partitions
        self._own(state, epoch, state.owned.get(epoch, frozenset()) | state.current)

    @staticmethod
    def _own(state: _Member, generation: int, partitions: frozenset[TopicPartition]) -> None:
        state.owned[generation] = partitions
        while len(state.owned) > GENERATIONS_KEPT:
            del state.owned[min(state.owned)]

    def stale(self, group: str, member: str, generation: int, sent: int, now: int) -> str | None:
        """The request stamped ``sent`` carried ``generation`` and was answered as stale (stamp
        ``now``): why that is misuse, or None when it is the normal way to learn of a rebalance."""
        state = self._member(group, member)
        told = state.told.get(generation)
        if told is None:
            state.told[generation] = now
        if told is not None and told < sent:
            return f"it had been told generation {generation} was stale, and sent it again"
        if state.given and generation > max(state.given):
            given = ", ".join(str(g) for g in sorted(state.given))
            return f"the coordinator never gave it generation {generation} (it gave {given})"
        return None

    def latest(self, group: str, member: str) -> int | None:
        state = self._members.get((group, member))
        return max(state.given) if state is not None and state.given else None

    def unowned(self, group: str, member: str, generation: int, partitions: Iterable[TopicPartition]
                ) -> tuple[list[TopicPartition], frozenset[TopicPartition]]:
        """The ``partitions`` the member may not commit at ``generation``, and what it may
        (module docstring); nothing when its partitions at that generation are not known."""
        state = self._members.get((group, member))
        owned = state.owned.get(generation) if state is not None else None
        if state is None or owned is None:
            return [], frozenset()
        previous = [g for g in state.owned if g < generation]
        if previous:  # being revoked during this generation, so committed first
            owned = owned | state.owned[max(previous)]
        return sorted(p for p in partitions if p not in owned), owned

    def assignments(self, group: str) -> dict[str, frozenset[TopicPartition]]:
        """Each member's partitions at the latest generation it was given them, as strict mode
        judges its commits (what a test can check strict mode saw)."""
        return {member: state.owned[max(state.owned)] for (name, member), state in self._members.items()
                if name == group and state.owned}
