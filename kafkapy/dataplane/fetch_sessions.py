"""KIP-227 fetch sessions: a consumer names its partitions once, then sends only what changed.

Theory of operation
-------------------
A Fetch request carries ``session_id`` and ``session_epoch``. What the broker does with them is
the table ``TRANSITIONS`` below, keyed by (is a session id given, the kind of epoch):

- epoch -1 (FINAL) or 0 (INITIAL) is a *full* fetch: the request lists every partition. A session
  id given with it is closed first. FINAL asks for no session (a sessionless fetch, answered with
  session id 0); INITIAL opens a new one, if the cache has (or can make) room, and the response
  carries its id. Forgotten topics mean nothing in a full fetch.
- any other epoch is *incremental*: the session must exist (else FETCH_SESSION_ID_NOT_FOUND) and
  the epoch must be the one the broker expects next (else INVALID_FETCH_SESSION_EPOCH); a session
  opened with topic ids must go on with them (else FETCH_SESSION_TOPIC_ID_ERROR). The request's
  partitions are added to the session or update its fetch positions, the forgotten ones leave,
  the expected epoch moves on (1, 2, ... Int32.MAX, then 1 again), and the response lists only
  partitions with something new: records, an error, a diverging epoch, a preferred read replica,
  a changed high watermark or log start offset. A session left with no partitions is closed,
  and that fetch answered sessionless.
  Partitions that returned records move to the end of the session so that the next response
  starts with the others (Kafka's fairness rule).

The cache holds at most ``max.incremental.fetch.session.cache.slots`` (Kafka's default, 1000)
sessions. A new session takes a free slot; in a full cache it evicts the least recently used
session if that one went unused for 120 s (Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS),
else the least valuable session, ordered by (privileged: a follower's, number of partitions,
id), when the new one is worth more (more partitions, or privileged over not). Only a session
that had lived 120 s when it was last used can go that way, so new consumers do not evict each
other in turn; a privileged newcomer may also evict any session that is not privileged, and a
consumer's request never evicts a follower's session. Otherwise no session is made: the response
says session id 0 and the client goes on with full fetches, as against Kafka.
"""

from __future__ import annotations

import enum
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from kafkapy.errors import ErrorCode

__all__ = [
    "DEFAULT_CACHE_SLOTS",
    "EVICTION_MS",
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "TRANSITIONS",
    "EpochKind",
    "FetchContext",
    "FetchSession",
    "FetchSessionCache",
    "PartitionKey",
    "SessionPartition",
    "Step",
    "next_epoch",
]

INITIAL_EPOCH = 0  # FetchMetadata.INITIAL_EPOCH: open a session with a full fetch
FINAL_EPOCH = -1  # FetchMetadata.FINAL_EPOCH: a full fetch, no session
NO_SESSION = 0  # FetchMetadata.INVALID_SESSION_ID
DEFAULT_CACHE_SLOTS = 1000  # Kafka's max.incremental.fetch.session.cache.slots
EVICTION_MS = 120_000  # Kafka's KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
_INT32_MAX = 2**31 - 1

# A partition as the request names it: the topic's name (Fetch v4-v12) or its id (v13+).
PartitionKey = tuple[str | uuid.UUID, int]


class EpochKind(enum.Enum):
    FINAL = "final"
    INITIAL = "initial"
    NEXT = "next"  # anything else: an incremental fetch


class Step(enum.Enum):
    CLOSE_GIVEN = "close the session the request names"
    SESSIONLESS = "answer every partition, no session"
    NEW_SESSION = "answer every partition, open a session"
    INCREMENTAL = "update the session, answer what changed"


# (a session id given, epoch kind) -> steps, in order.
TRANSITIONS: Mapping[tuple[bool, EpochKind], tuple[Step, ...]] = {
    (False, EpochKind.FINAL): (Step.SESSIONLESS,),
    (False, EpochKind.INITIAL): (Step.NEW_SESSION,),
    (False, EpochKind.NEXT): (Step.INCREMENTAL,),  # session 0 is never found
    (True, EpochKind.FINAL): (Step.CLOSE_GIVEN, Step.SESSIONLESS),
    (True, EpochKind.INITIAL): (Step.CLOSE_GIVEN, Step.NEW_SESSION),
    (True, EpochKind.NEXT): (Step.INCREMENTAL,),
}


def epoch_kind(epoch: int) -> EpochKind:
    return EpochKind.FINAL if epoch == FINAL_EPOCH else EpochKind.INITIAL if epoch == INITIAL_EPOCH \
        else EpochKind.NEXT


def next_epoch(epoch: int) -> int:
    """FetchMetadata.nextEpoch: 1 after INITIAL, wraps from Int32.MAX to 1."""
    return 1 if epoch >= _INT32_MAX or epoch < 1 else epoch + 1


@attrs.define
class SessionPartition:
    """One partition of a fetch: what the request says about it (and, in a session, the last
    high watermark and log start offset the client was told)."""

    key: PartitionKey
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    last_fetched_epoch: int = -1
    reported_high_watermark: int = -1
    reported_log_start_offset: int = -1

    def update_from(self, request: SessionPartition) -> None:
        self.fetch_offset = request.fetch_offset
        self.max_bytes = request.max_bytes
        self.current_leader_epoch = request.current_leader_epoch
        self.log_start_offset = request.log_start_offset
        self.last_fetched_epoch = request.last_fetched_epoch

    def must_respond(self, data: Mapping[str, Any], records_size: int) -> bool:
        """Whether an incremental response lists this partition (Kafka's maybeUpdateResponseData:
        records, an error, a diverging epoch or a preferred read replica, which the client must
        act on, or a new high watermark or log start offset); remembers what it reports."""
        changed = (records_size > 0 or data.get("error_code", 0) != ErrorCode.NONE
                   or "diverging_epoch" in data or data.get("preferred_read_replica", -1) >= 0)
        high_watermark = data.get("high_watermark", -1)
        log_start_offset = data.get("log_start_offset", -1)
        if high_watermark != self.reported_high_watermark:
            self.reported_high_watermark = high_watermark
            changed = True
        if log_start_offset != self.reported_log_start_offset:
            self.reported_log_start_offset = log_start_offset
            changed = True
        return changed


@attrs.define(eq=False)
class FetchSession:
    id: int
    privileged: bool
    uses_topic_ids: bool
    created_ms: int
    last_used_ms: int
    epoch: int  # the epoch the next incremental request must carry
    partitions: dict[PartitionKey, SessionPartition] = attrs.field(factory=dict)  # in session order

    def value(self) -> tuple[bool, int, int]:
        """What eviction compares (Kafka's EvictableKey): privileged, then size, then id."""
        return self.privileged, len(self.partitions), self.id


@attrs.define(eq=False)
class FetchContext:
    """What one Fetch request reads and how its response is shaped (Kafka's FetchContext)."""

    cache: FetchSessionCache
    partitions: list[SessionPartition]  # what to read, in order
    error: ErrorCode = ErrorCode.NONE  # a top-level error: answer nothing else
    session: FetchSession | None = None  # the incremental session
    open_session: bool = False  # a full fetch that asks for a session
    privileged: bool = False
    uses_topic_ids: bool = False

    def respond(self, results: Sequence[tuple[SessionPartition, dict[str, Any], int]]
                ) -> tuple[int, list[tuple[SessionPartition, dict[str, Any]]]]:
        """(session id for the response, the partitions it lists), given each read partition's
        (partition, response data, records size), in ``partitions`` order."""
        if self.error != ErrorCode.NONE:
            return NO_SESSION, []
        session = self.session
        if session is not None:
            listed = [(p, data) for p, data, size in results if p.must_respond(data, size)]
            for p, _, size in results:  # fairness: those that returned records go last
                if size > 0 and p.key in session.partitions:
                    session.partitions[p.key] = session.partitions.pop(p.key)
            return session.id, listed
        session_id = NO_SESSION
        if self.open_session:
            for p, data, size in results:
                p.must_respond(data, size)  # the session starts knowing what the client was told
            created = self.cache.create(self.privileged, self.uses_topic_ids, self.partitions)
            session_id = created.id if created is not None else NO_SESSION
        return session_id, [(p, data) for p, data, _ in results]


class FetchSessionCache:
    """The broker's fetch sessions (Kafka's FetchSessionCache), shared by every connection."""

    def __init__(self, max_slots: int = DEFAULT_CACHE_SLOTS, eviction_ms: int = EVICTION_MS,
                 clock_ms: Callable[[], int] | None = None, rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._clock_ms = clock_ms or (lambda: 0)
        self._random = rng or random.Random()
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def new_context(self, session_id: int, epoch: int, fetch: Iterable[SessionPartition],
                    forgotten: Iterable[PartitionKey], *, uses_topic_ids: bool,
                    privileged: bool = False) -> FetchContext:
        """The context of one request (Fetch v7+; older versions are sessionless: FINAL, id 0)."""
        requested = list(fetch)
        context = FetchContext(self, requested, privileged=privileged, uses_topic_ids=uses_topic_ids)
        for step in TRANSITIONS[(session_id != NO_SESSION, epoch_kind(epoch))]:
            if step is Step.CLOSE_GIVEN:
                self.sessions.pop(session_id, None)
            elif step is Step.NEW_SESSION:
                context.open_session = True
            elif step is Step.INCREMENTAL:
                self._incremental(context, session_id, epoch, requested, forgotten)
        return context

    def _incremental(self, context: FetchContext, session_id: int, epoch: int,
                     requested: list[SessionPartition], forgotten: Iterable[PartitionKey]) -> None:
        session = self.sessions.get(session_id)
        if session is None:
            context.error = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        elif session.epoch != epoch:
            context.error = ErrorCode.INVALID_FETCH_SESSION_EPOCH
        elif session.uses_topic_ids != context.uses_topic_ids:
            context.error = ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        if context.error != ErrorCode.NONE:
            context.partitions = []
            return
        assert session is not None
        for partition in requested:
            cached = session.partitions.get(partition.key)
            if cached is None:
                session.partitions[partition.key] = partition
            else:
                cached.update_from(partition)
        for key in forgotten:
            session.partitions.pop(key, None)
        if not session.partitions:
            del self.sessions[session.id]  # nothing left: this fetch is sessionless
            return
        session.last_used_ms = self._clock_ms()
        session.epoch = next_epoch(session.epoch)
        context.session = session
        context.partitions = list(session.partitions.values())

    def create(self, privileged: bool, uses_topic_ids: bool,
               partitions: Sequence[SessionPartition]) -> FetchSession | None:
        """A new session holding ``partitions``, or None when the cache has no room for it."""
        now = self._clock_ms()
        if len(self.sessions) >= self.max_slots and not self._evict_for(privileged, len(partitions), now):
            return None
        session_id = self._random.randint(1, _INT32_MAX)
        while session_id in self.sessions:
            session_id = self._random.randint(1, _INT32_MAX)
        session = FetchSession(session_id, privileged, uses_topic_ids, now, now, next_epoch(INITIAL_EPOCH),
                               {p.key: p for p in partitions})
        self.sessions[session_id] = session
        return session

    def _evict_for(self, privileged: bool, size: int, now: int) -> bool:
        """Kafka's tryEvict: the least recently used session if it went unused for ``eviction_ms``;
        else the least valuable evictable one, if the newcomer is worth more. Worth is (privileged,
        size, id) with the newcomer's id counted as 0, so a tie keeps the session. Evictable: a
        session that had lived ``eviction_ms`` when last used (a new one is safe from other new
        ones) and, for a privileged newcomer, any that is not privileged."""
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stale.last_used_ms > self.eviction_ms:
            victim: FetchSession | None = stale
        else:
            candidates = [s for s in self.sessions.values() if (privileged and not s.privileged)
                          or s.last_used_ms - s.created_ms > self.eviction_ms]
            victim = min(candidates, key=FetchSession.value, default=None)
            if victim is not None and (privileged, size, 0) < victim.value():
                victim = None
        if victim is None:
            return False
        del self.sessions[victim.id]
        self.evictions += 1
        return True
