"""KIP-227 fetch sessions (kafkapy.dataplane.fetch_sessions) against a model: a Hypothesis
RuleBasedStateMachine sends full and incremental fetches, right and wrong epochs, unknown ids,
forgotten partitions, lets time pass and fills a small cache, and checks each answer."""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkapy.dataplane.fetch_sessions import (
    TRANSITIONS,
    EpochKind,
    FetchSessionCache,
    SessionPartition,
    Step,
    next_epoch,
)
from kafkapy.errors import ErrorCode

KEYS = [("t", p) for p in range(4)]
SLOTS = 3
EVICTION_MS = 1000


class ModelSession:
    def __init__(self, session_id: int, keys: list[tuple[str, int]], now: int,
                 reported: dict[Any, int]) -> None:
        self.id = session_id
        self.keys = list(keys)  # session order
        self.epoch = 1
        self.created = now
        self.last_used = now
        self.reported = dict(reported)  # key -> high watermark the client was told


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.cache = FetchSessionCache(SLOTS, EVICTION_MS, clock_ms=lambda: self.now)
        self.model: dict[int, ModelSession] = {}
        self.high_watermarks = dict.fromkeys(KEYS, 0)

    def results(self, partitions: list[SessionPartition]
                ) -> list[tuple[SessionPartition, dict[str, Any], int]]:
        return [(p, {"error_code": ErrorCode.NONE, "high_watermark": self.high_watermarks[p.key],
                     "log_start_offset": 0}, 0) for p in partitions]

    def known_id(self, data: st.DataObject) -> int:
        return data.draw(st.sampled_from([*self.model, 0, 12345]))

    @rule(data=st.data(), epoch=st.sampled_from([0, -1]), keys=st.lists(st.sampled_from(KEYS), unique=True))
    def full_fetch(self, data: st.DataObject, epoch: int, keys: list[tuple[str, int]]) -> None:
        session_id = self.known_id(data)
        context = self.cache.new_context(session_id, epoch, [SessionPartition(k, 0, 100) for k in keys], [],
                                         uses_topic_ids=False)
        self.model.pop(session_id, None)  # a full fetch closes the session it names
        answered_id, listed = context.respond(self.results(context.partitions))
        assert context.error == ErrorCode.NONE
        assert [p.key for p, _ in listed] == keys
        if epoch == -1:
            assert answered_id == 0
            return
        if len(self.model) >= SLOTS:
            stale = min(self.model.values(), key=lambda s: (s.last_used, s.id))
            if self.now - stale.last_used > EVICTION_MS:
                del self.model[stale.id]
            else:  # only a session that had lived EVICTION_MS when last used, and only for more partitions
                aged = [s for s in self.model.values() if s.last_used - s.created > EVICTION_MS]
                victim = min(aged, key=lambda s: (len(s.keys), s.id), default=None)
                if victim is not None and len(keys) > len(victim.keys):
                    del self.model[victim.id]
        if len(self.model) >= SLOTS:
            assert answered_id == 0
            return
        assert answered_id != 0 and answered_id not in self.model
        self.model[answered_id] = ModelSession(answered_id, keys, self.now,
                                               {k: self.high_watermarks[k] for k in keys})

    @rule(data=st.data(), right_epoch=st.booleans(), added=st.lists(st.sampled_from(KEYS), unique=True),
          forgotten=st.lists(st.sampled_from(KEYS), unique=True))
    def incremental_fetch(self, data: st.DataObject, right_epoch: bool, added: list[tuple[str, int]],
                          forgotten: list[tuple[str, int]]) -> None:
        session_id = self.known_id(data)
        session = self.model.get(session_id)
        epoch = session.epoch if session is not None and right_epoch else data.draw(st.integers(1, 50))
        context = self.cache.new_context(session_id, epoch, [SessionPartition(k, 1, 100) for k in added],
                                         forgotten, uses_topic_ids=False)
        answered_id, listed = context.respond(self.results(context.partitions))
        if session is None:
            assert context.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and listed == []
            return
        if epoch != session.epoch:
            assert context.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH and listed == []
            return
        assert context.error == ErrorCode.NONE
        session.keys += [k for k in added if k not in session.keys]
        session.keys = [k for k in session.keys if k not in forgotten]
        for k in forgotten:  # added again later, it is new to the session: always listed then
            session.reported.pop(k, None)
        if not session.keys:  # emptied: closed, and this fetch answered sessionless
            del self.model[session_id]
            assert answered_id == 0
            return
        changed = [k for k in session.keys if session.reported.get(k, -1) != self.high_watermarks[k]]
        assert answered_id == session_id
        assert [p.key for p, _ in listed] == changed
        for k in changed:
            session.reported[k] = self.high_watermarks[k]
        session.epoch = next_epoch(session.epoch)
        session.last_used = self.now

    @rule(key=st.sampled_from(KEYS))
    def append(self, key: tuple[str, int]) -> None:
        self.high_watermarks[key] += 1

    @rule(ms=st.integers(1, 2 * EVICTION_MS))
    def time_passes(self, ms: int) -> None:
        self.now += ms

    @invariant()
    def the_cache_holds_the_model_sessions(self) -> None:
        assert len(self.cache.sessions) <= SLOTS
        assert set(self.cache.sessions) == set(self.model)
        for session_id, session in self.model.items():
            assert self.cache.sessions[session_id].epoch == session.epoch
            assert list(self.cache.sessions[session_id].partitions) == session.keys


TestSessions = SessionMachine.TestCase
TestSessions.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)


def test_the_table_covers_every_request_kind() -> None:
    assert set(TRANSITIONS) == {(given, kind) for given in (False, True) for kind in EpochKind}
    answers = (Step.SESSIONLESS, Step.NEW_SESSION, Step.INCREMENTAL)
    assert all(steps[-1] in answers for steps in TRANSITIONS.values())


def test_epochs_wrap_from_int32_max_to_one() -> None:
    assert [next_epoch(e) for e in (0, 1, 2**31 - 1)] == [1, 2, 1]


def test_a_default_cache_has_kafkas_slots_and_keeps_new_sessions() -> None:
    """Kafka's FetchSessionCache: 1000 slots; a session is safe from eviction by a bigger one until
    it had lived 120 s when last used, and a newcomer only as big never evicts (a tie keeps)."""
    now = [0]
    cache = FetchSessionCache(clock_ms=lambda: now[0])
    one = [SessionPartition(("t", 0), 0, 1)]
    two = [SessionPartition(("t", p), 0, 1) for p in range(2)]
    for _ in range(1000):
        assert cache.create(False, False, one) is not None
    assert len(cache.sessions) == 1000
    assert cache.create(False, False, two) is None  # each session is new: none evicted
    assert cache.eviction_ms == 120_000
    now[0] = cache.eviction_ms + 1  # every session used again now, as its consumer fetches
    for session in list(cache.sessions.values()):
        context = cache.new_context(session.id, session.epoch, [], [], uses_topic_ids=False)
        assert context.error == ErrorCode.NONE
    assert cache.create(False, False, []) is None  # smaller than every session: no room
    assert cache.create(False, False, one) is None  # worth as much: the session stays
    assert cache.create(False, False, two) is not None  # worth more, and the session had lived 120 s
    assert len(cache.sessions) == 1000 and cache.evictions == 1


def test_a_privileged_newcomer_evicts_a_new_consumer_session_and_a_consumer_never_a_followers() -> None:
    cache = FetchSessionCache(2, clock_ms=lambda: 0)
    consumer = cache.create(False, False, [SessionPartition(("t", 0), 0, 1)])
    follower = cache.create(True, False, [SessionPartition(("t", 1), 0, 1)])
    assert consumer is not None and follower is not None
    big = [SessionPartition(("t", p), 0, 1) for p in range(3)]
    assert cache.create(False, False, big) is None
    assert cache.create(True, False, []) is not None  # a follower's: the consumer's session goes
    assert consumer.id not in cache.sessions and follower.id in cache.sessions


def test_an_incremental_response_lists_what_the_client_must_act_on_even_with_nothing_new() -> None:
    """Kafka's CachedPartition.maybeUpdateResponseData: a diverging epoch (the fetcher must
    truncate) and a preferred read replica (the consumer must go there) are always listed."""
    cache = FetchSessionCache(clock_ms=lambda: 0)
    key = ("t", 0)
    session = cache.create(False, False, [SessionPartition(key, 0, 100)])
    assert session is not None
    same = {"error_code": ErrorCode.NONE, "high_watermark": 5, "log_start_offset": 0}
    cached = session.partitions[key]
    assert cached.must_respond(same, 0)  # the first high watermark told
    assert not cached.must_respond(same, 0)  # nothing new
    assert cached.must_respond({**same, "diverging_epoch": {"epoch": 0, "end_offset": 2}}, 0)
    assert cached.must_respond({**same, "preferred_read_replica": 2}, 0)
    assert not cached.must_respond({**same, "preferred_read_replica": -1}, 0)
