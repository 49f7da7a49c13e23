"""ElectLeaders (KIP-183, KIP-460): what an election of each kind does to one partition.

A partition's leader stays where the controller put it (kafkapy.server.leadership), so a
preferred replica that comes back leads again only through a preferred election: this one, or the
controller's auto rebalance. A result of NONE asks the controller's leadership for the election
(``services.elect_leaders``), which writes it with the next leader epoch. The outcomes and their
error codes are Kafka's controller's (KafkaController.processReplicaLeaderElection, with
PartitionLeaderElectionAlgorithms; ReplicationControlManager.electLeader answers the same):

* preferred: NOT_NEEDED while the first replica leads; else NONE if it is live and in the ISR;
  else PREFERRED_LEADER_NOT_AVAILABLE;
* unclean: NOT_NEEDED while a live broker leads; else NONE if a replica is live (the first live
  one in the ISR, or failing that the first live one: unclean); else ELIGIBLE_LEADERS_NOT_AVAILABLE.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence

from kafkapy.errors import ErrorCode
from kafkapy.server.services import NO_LEADER, Election

__all__ = ["ELECTION_MESSAGES", "ElectionType", "election_outcome"]


class ElectionType(enum.IntEnum):
    """ElectLeaders' election_type (v1+; v0 requests are preferred elections)."""

    PREFERRED = 0
    UNCLEAN = 1

    @property
    def election(self) -> Election:
        """The controller's election of this kind."""
        return Election.PREFERRED if self is ElectionType.PREFERRED else Election.UNCLEAN


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
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred replica is not live and in the ISR.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "No replica of the partition is live.",
}


def election_outcome(kind: ElectionType, replicas: Sequence[int], live: Collection[int],
                     leader: int, isr: Collection[int]) -> ErrorCode:
    """One partition's result from the leader it has (NO_LEADER when its stored leader is down)
    and its ISR. NONE means the controller is to write the leader the election makes."""
    if kind is ElectionType.PREFERRED:
        has_wanted = bool(replicas) and leader == replicas[0]
        electable = bool(replicas) and replicas[0] in live and replicas[0] in isr
    else:
        has_wanted = leader != NO_LEADER
        electable = any(replica in live for replica in replicas)
    return _OUTCOMES[kind, has_wanted, electable or has_wanted]
