"""Share sessions (KIP-932): what a member fetches from, and the epoch its requests carry.

A ShareFetch with epoch 0 opens the member's session (replacing any it had); every later
ShareFetch or ShareAcknowledge carries the next epoch (1, 2, ..., wrapping to 1 after the int32
maximum, as Kafka's ShareRequestMetadata.nextEpoch does); epoch -1 closes it. A request at an
epoch other than the expected one gets INVALID_SHARE_SESSION_EPOCH, one for a session the broker
does not hold SHARE_SESSION_NOT_FOUND. Sessions are keyed by (group id, member id).

A session belongs to the connection whose ShareFetch opened it (Kafka 4.2's ShareSessionCache):
when that connection closes the session goes, and what its member holds goes back at once, as if
the member had closed it (``ShareSessions.closed_by``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "MAX_MEMBER_ID_LENGTH", "ShareSession", "ShareSessions",
           "next_epoch", "valid_member_id"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_INT32_MAX = 2**31 - 1
#: A UUID's string form: the longest member id Kafka's share APIs take (KafkaApis.isMemberIdValid).
MAX_MEMBER_ID_LENGTH = 36

PartitionKey = tuple[uuid.UUID, int]


def valid_member_id(member_id: str | None) -> bool:
    """What ShareGroupHeartbeat, ShareFetch and ShareAcknowledge refuse as INVALID_REQUEST
    ("Invalid member id in the request.") before anything else but the group's authorization."""
    return bool(member_id) and len(member_id or "") <= MAX_MEMBER_ID_LENGTH


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= _INT32_MAX or epoch < INITIAL_EPOCH else epoch + 1


@attrs.define
class ShareSession:
    group_id: str
    member_id: str
    expected_epoch: int = 1
    partitions: set[PartitionKey] = attrs.field(factory=set)
    connection_id: str | None = None  # the connection that opened it


class ShareSessions:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        #: group.share.max.share.sessions: Kafka's default; more is SHARE_SESSION_LIMIT_REACHED.
        self.max_sessions = max_sessions

    def open(self, group_id: str, member_id: str, connection_id: str | None = None
             ) -> tuple[ShareSession, ShareSession | None]:
        """A new session (epoch 0) on ``connection_id``, and the one it replaces, if any;
        SHARE_SESSION_LIMIT_REACHED when the broker holds ``max_sessions`` others (Kafka's
        ShareSessionCache.maybeCreateSession: a member's own session is removed first)."""
        replaced = self.sessions.get((group_id, member_id))
        if replaced is None and len(self.sessions) >= self.max_sessions:
            raise KafkaApiError(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                                "The limit of share sessions has been reached.")
        session = self.sessions[(group_id, member_id)] = ShareSession(group_id, member_id,
                                                                      connection_id=connection_id)
        return session, replaced

    def closed_by(self, connection_id: str) -> list[ShareSession]:
        """The connection closed: the sessions it opened go (one another connection opened since,
        for the same member, stays)."""
        gone = [key for key, session in self.sessions.items() if session.connection_id == connection_id]
        return [self.sessions.pop(key) for key in gone]

    def continue_session(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a request at ``epoch`` (not 0) belongs to; with -1 it is also removed."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise KafkaApiError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"The share session for member "
                                f"{member_id} of group {group_id} was not found.")
        if epoch == FINAL_EPOCH:
            del self.sessions[(group_id, member_id)]
            return session
        if epoch != session.expected_epoch:
            raise KafkaApiError(ErrorCode.INVALID_SHARE_SESSION_EPOCH, f"The share session epoch "
                                f"{epoch} is not the expected {session.expected_epoch}.")
        session.expected_epoch = next_epoch(epoch)
        return session

    def drop_member(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def of_group(self, group_id: str) -> Iterable[ShareSession]:
        return [s for (g, _), s in self.sessions.items() if g == group_id]

    def clear(self) -> None:
        self.sessions.clear()
