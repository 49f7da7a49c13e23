"""ElectLeaders (KIP-183, KIP-460): what an election of each kind does to one partition.

kafkapy's leader is a partition's first live replica (kafkapy.server.services.partition_leader), so
the preferred replica leads whenever it is up: a preferred election is needed only while the
controller has yet to write a move back to it, and an unclean one only while no replica leads.
The outcomes and their error codes are Kafka's controller's (ReplicationControlManager.electLeader).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence

from kafkapy.errors import ErrorCode
from kafkapy.server.services import NO_LEADER

__all__ = ["ELECTION_MESSAGES", "ElectionType", "election_outcome"]


class ElectionType(enum.IntEnum):
    """ElectLeaders' election_type (v1+; v0 requests are preferred elections)."""

    PREFERRED = 0
    UNCLEAN = 1


# (kind, the partition already has the leader this kind wants, a replica this kind may elect is up)
# -> the partition's result. A leader already there wins over availability, as in Kafka.
_OUTCOMES: dict[tuple[ElectionType, bool, bool], ErrorCode] = {
    (ElectionType.PREFERRED, True, True): ErrorCode.ELECTION_NOT_NEEDED,
    (ElectionType.PREFERRED, False, True): ErrorCode.NONE,
    (ElectionType.PREFERRED, False, False): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
    (ElectionType.UNCLEAN, True, True): ErrorCode.ELECTION_NOT_NEEDED,
    (ElectionType.UNCLEAN, False, True): ErrorCode.NONE,
    (ElectionType.UNCLEAN, False, False): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
}


ELECTION_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.ELECTION_NOT_NEEDED: "The partition already has the leader this election would make.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred replica is not live.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "No replica of the partition is live.",
}


def election_outcome(kind: ElectionType, replicas: Sequence[int], live: Collection[int],
                     leader: int) -> ErrorCode:
    """One partition's result. NONE means the controller's next write makes the leader the
    election asks for (the preferred replica, or the first live one)."""
    if kind is ElectionType.PREFERRED:
        has_wanted = bool(replicas) and leader == replicas[0]
        electable = bool(replicas) and replicas[0] in live
    else:
        has_wanted = leader != NO_LEADER
        electable = any(replica in live for replica in replicas)
    return _OUTCOMES[kind, has_wanted, electable or has_wanted]
