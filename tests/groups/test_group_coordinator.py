"""The coordinator's timers and rules, one at a time, on a manual clock (Kafka's behaviour for
each: initial delay, rebalance timeout, session expiry, sync timeout, KIP-394 member ids that
lapse, group.max.size, the protocol vote, a write that fails)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.coordinator import ClassicCoordinator, GroupConfig, JoinRequest
from kafkapy.groups.group import ClassicGroup, JoinResult, SyncResult
from kafkapy.groups.offsets import OffsetEntry
from kafkapy.groups.state import GroupState
from kafkapy.groups.timers import ManualScheduler, Timers

SESSION_MS = 1000
REBALANCE_MS = 5000


class Harness:
    def __init__(self, **config: Any) -> None:
        self.clock = ManualScheduler()
        self.write_error = ErrorCode.NONE
        self.written: list[Any] = []
        ids = iter(range(1000))
        self.coordinator = ClassicCoordinator(
            GroupConfig(**{"initial_rebalance_delay_ms": 0, "min_session_timeout_ms": 100, **config}),
            Timers(self.clock.clock, self.clock.call_later), self._persist,
            new_member_id=lambda prefix: f"{prefix}-{next(ids)}")

    def _persist(self, group: str, records: Any, done: Callable[[ErrorCode], None]) -> None:
        self.written.extend(records)
        done(self.write_error)

    def join(self, member_id: str = "", protocols: tuple[tuple[str, bytes], ...] = (("range", b"m"),),
             instance: str | None = None, known_required: bool = False,
             skip_supported: bool = True) -> list[JoinResult]:
        answers: list[JoinResult] = []
        self.coordinator.join(JoinRequest("g", member_id, instance, "c", "/h", SESSION_MS, REBALANCE_MS,
                                          "consumer", protocols, known_required, skip_supported),
                              answers.append)
        return answers

    def sync(self, result: JoinResult, assignments: dict[str, bytes] | None = None) -> list[SyncResult]:
        answers: list[SyncResult] = []
        self.coordinator.sync("g", result.generation_id, result.member_id, None, None, None,
                              list((assignments or {}).items()), answers.append)
        return answers

    def advance(self, ms: int) -> None:
        self.clock.advance(ms / 1000)

    def heartbeats(self, ms: int, *members: JoinResult) -> None:
        """``ms`` pass while ``members`` heartbeat every 100 ms (answers ignored)."""
        for _ in range(ms // 100):
            self.advance(100)
            for member in members:
                try:
                    self.coordinator.heartbeat("g", member.generation_id, member.member_id, None)
                except KafkaApiError:
                    pass

    @property
    def group(self) -> Any:
        return self.coordinator.groups["g"]


def test_initial_delay_waits_for_more_members_then_completes() -> None:
    h = Harness(initial_rebalance_delay_ms=300)
    a = h.join()
    h.advance(200)
    assert a == [] and h.group.state is GroupState.PREPARING_REBALANCE
    b = h.join()  # arrives during the delay: at its end (300) the join waits another 300
    h.advance(350)
    assert a == b == []
    h.advance(50)
    assert [r.error_code for r in a + b] == [ErrorCode.NONE, ErrorCode.NONE]
    assert a[0].generation_id == b[0].generation_id == 1
    assert h.group.state is GroupState.COMPLETING_REBALANCE


def test_initial_delay_never_exceeds_the_rebalance_timeout() -> None:
    h = Harness(initial_rebalance_delay_ms=4000)
    a = h.join()
    h.advance(3000)
    h.join()  # at 4000 the join would wait 4000 more, but only 1000 of the 5000 ms are left
    h.advance(1999)
    assert a == []
    h.advance(1)
    assert a and a[0].error_code == ErrorCode.NONE


def test_the_first_initial_delay_is_whole_even_past_a_shorter_rebalance_timeout() -> None:
    """Kafka's prepareRebalance waits group.initial.rebalance.delay.ms on an Empty group whatever
    the members' rebalance timeout (5000 here); only the extensions are bounded by it."""
    h = Harness(initial_rebalance_delay_ms=6000)
    a = h.join()
    h.advance(5999)
    assert a == [] and h.group.state is GroupState.PREPARING_REBALANCE
    h.advance(1)
    assert a and a[0].error_code == ErrorCode.NONE


def two_members(h: Harness) -> tuple[JoinResult, JoinResult]:
    first = h.join()
    h.advance(0)
    (a,) = first
    b_answers = h.join()
    a_answers = h.join(a.member_id)
    h.advance(0)
    (a2,), (b2,) = a_answers, b_answers
    return a2, b2


def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    h = Harness()
    leader, follower = two_members(h)
    h.sync(follower)
    h.sync(leader, {leader.member_id: b"x", follower.member_id: b"y"})
    assert h.group.state is GroupState.STABLE
    rejoin = h.join(leader.member_id, protocols=(("range", b"changed"),))
    assert h.group.state is GroupState.PREPARING_REBALANCE and rejoin == []
    h.heartbeats(REBALANCE_MS - 100, follower)  # alive, but it does not rejoin
    assert rejoin == []
    h.advance(100)
    assert rejoin[0].error_code == ErrorCode.NONE and rejoin[0].generation_id == leader.generation_id + 1
    assert list(h.group.members) == [leader.member_id]


def test_session_expiry_removes_a_silent_member_and_rebalances() -> None:
    h = Harness()
    leader, follower = two_members(h)
    h.sync(follower)
    h.sync(leader, {})
    for _ in range(5):  # the leader heartbeats, the follower is silent
        h.advance(SESSION_MS // 2)
        try:
            h.coordinator.heartbeat("g", leader.generation_id, leader.member_id, None)
        except KafkaApiError as exc:
            assert exc.code == ErrorCode.REBALANCE_IN_PROGRESS
            break
    assert follower.member_id not in h.group.members
    assert h.group.state is GroupState.PREPARING_REBALANCE


def test_sync_timeout_removes_members_that_never_sync() -> None:
    h = Harness()
    leader, follower = two_members(h)
    synced = h.sync(leader, {})
    assert synced and h.group.state is GroupState.STABLE
    h.heartbeats(REBALANCE_MS, leader, follower)
    assert follower.member_id not in h.group.members
    assert h.group.state is GroupState.PREPARING_REBALANCE


def test_member_id_required_then_lapses() -> None:
    h = Harness()
    (first,) = h.join(known_required=True)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id in h.group.pending_members
    h.advance(SESSION_MS)
    assert not h.group.pending_members
    with pytest.raises(KafkaApiError) as refused:
        h.join(first.member_id)
    assert refused.value.code == ErrorCode.UNKNOWN_MEMBER_ID


def test_group_max_size() -> None:
    h = Harness(max_size=1)
    answers = h.join()
    h.advance(0)
    (a,) = answers
    with pytest.raises(KafkaApiError) as refused:
        h.join()
    assert refused.value.code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert a.error_code == ErrorCode.NONE


def test_protocol_vote_picks_the_common_first_choice() -> None:
    h = Harness()
    a = h.join(protocols=(("roundrobin", b""), ("range", b"")))
    h.advance(0)
    b = h.join(protocols=(("range", b""), ("sticky", b"")))
    h.join(a[0].member_id, protocols=(("range", b""), ("roundrobin", b"")))
    h.advance(0)
    assert b[0].protocol_name == "range"
    with pytest.raises(KafkaApiError) as refused:
        h.join(protocols=(("sticky", b""),))
    assert refused.value.code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_a_failed_assignment_write_sends_the_group_back_to_rebalance() -> None:
    h = Harness()
    answers = h.join()
    h.advance(0)
    (a,) = answers
    h.write_error = ErrorCode.NOT_COORDINATOR
    answers = h.sync(a, {a.member_id: b"x"})
    assert answers == [SyncResult(ErrorCode.NOT_COORDINATOR)]
    assert h.group.state is GroupState.PREPARING_REBALANCE


def test_static_member_replacement_keeps_a_stable_group() -> None:
    h = Harness()
    answers = h.join(instance="i1")
    h.advance(0)
    (a,) = answers
    h.sync(a, {a.member_id: b"mine"})
    written = len(h.written)
    (again,) = h.join(instance="i1")
    assert again.error_code == ErrorCode.NONE and again.generation_id == a.generation_id
    assert again.skip_assignment and h.group.state is GroupState.STABLE
    assert len(h.written) == written + 1, "the replacement is written"
    with pytest.raises(KafkaApiError) as fenced:
        h.coordinator.heartbeat("g", a.generation_id, a.member_id, "i1")
    assert fenced.value.code == ErrorCode.FENCED_INSTANCE_ID
    (synced,) = h.sync(again)
    assert synced.assignment == b"mine"


def test_a_static_leaders_rejoin_before_join_group_v9_names_the_old_leader() -> None:
    """Without KIP-814's skip_assignment (JoinGroup v5-8), Kafka answers a static leader's
    replacement with the leader id from before it and no members: the client takes itself for a
    follower, sends no assignment, and syncs the one it had."""
    h = Harness()
    leader, _ = static_pair(h, "i-leader", "i-follower")
    (again,) = h.join(instance="i-leader", skip_supported=False)
    assert again.error_code == ErrorCode.NONE and again.generation_id == leader.generation_id
    assert again.member_id != leader.member_id and again.leader == leader.member_id
    assert again.members == () and not again.skip_assignment
    assert h.group.state is GroupState.STABLE and h.group.leader_id == again.member_id
    (synced,) = h.sync(again)
    assert synced.assignment == b"L"
    (follower_again,) = h.join(instance="i-follower", skip_supported=False)  # a follower: the leader
    assert follower_again.leader == again.member_id and follower_again.members == ()


def test_a_classic_request_for_another_type_of_group_is_refused() -> None:
    """Groups share one namespace with KIP-848 consumer groups: JoinGroup, SyncGroup, Heartbeat,
    LeaveGroup and OffsetCommit for a group of another type get GROUP_ID_NOT_FOUND, as Kafka."""
    h = Harness()
    h.coordinator.groups["g"] = ClassicGroup("g", 0, group_type="consumer")
    calls: list[Callable[[], object]] = [
        lambda: h.join(),
        lambda: h.coordinator.sync("g", 1, "m", None, None, None, [], lambda _: None),
        lambda: h.coordinator.heartbeat("g", 1, "m", None),
        lambda: h.coordinator.leave("g", [("m", None)]),
        lambda: h.coordinator.commit_offsets("g", 1, "m", None, [], lambda _: None),
    ]
    for call in calls:
        with pytest.raises(KafkaApiError) as refused:
            call()
        assert refused.value.code == ErrorCode.GROUP_ID_NOT_FOUND


def static_pair(h: Harness, leader_instance: str | None, follower_instance: str | None
                ) -> tuple[JoinResult, JoinResult]:
    """A Stable group of two, either of them static."""
    first = h.join(instance=leader_instance)
    h.advance(0)
    (a,) = first
    b_answers = h.join(instance=follower_instance)
    a_answers = h.join(a.member_id, instance=leader_instance)
    h.advance(0)
    (leader,), (follower,) = a_answers, b_answers
    h.sync(follower)
    h.sync(leader, {leader.member_id: b"L", follower.member_id: b"F"})
    assert h.group.state is GroupState.STABLE
    return leader, follower


def test_a_static_member_that_misses_the_join_deadline_stays() -> None:
    """KIP-345 (Kafka's completeClassicGroupJoin): only dynamic members that did not rejoin are
    removed; a static one stays in the new generation with its last metadata, and may still
    rejoin and sync for it."""
    h = Harness()
    leader, follower = static_pair(h, None, "i-follower")
    rejoin = h.join(leader.member_id, protocols=(("range", b"changed"),))
    h.heartbeats(REBALANCE_MS, follower)  # the static follower is alive but does not rejoin
    (joined,) = rejoin
    assert joined.error_code == ErrorCode.NONE and joined.generation_id == leader.generation_id + 1
    assert h.group.state is GroupState.COMPLETING_REBALANCE
    assert [m for m, _, _ in joined.members] == [leader.member_id, follower.member_id]
    (back,) = h.join(follower.member_id, instance="i-follower")  # the same metadata: this generation
    assert back.generation_id == joined.generation_id and back.leader == leader.member_id
    waiting = h.sync(back)
    h.sync(joined, {leader.member_id: b"L2", follower.member_id: b"F2"})
    assert waiting == [SyncResult(ErrorCode.NONE, "consumer", "range", b"F2")]


def test_a_static_leader_that_misses_the_join_deadline_hands_over_to_one_that_rejoined() -> None:
    h = Harness()
    leader, follower = static_pair(h, "i-leader", None)
    rejoin = h.join(follower.member_id, protocols=(("range", b"changed"),))
    h.heartbeats(REBALANCE_MS, leader)
    (joined,) = rejoin
    assert joined.leader == follower.member_id and h.group.leader_id == follower.member_id
    assert {m for m, _, _ in joined.members} == {leader.member_id, follower.member_id}


def test_when_no_member_rejoins_the_join_waits_for_the_static_ones() -> None:
    """Nobody rejoined and only static members are left: the join waits another rebalance
    timeout (their sessions bound it), as Kafka's maybeElectNewJoinedLeader failing does."""
    h = Harness()
    leader, _ = static_pair(h, "i-leader", "i-follower")
    h.coordinator.leave("g", [("", "i-follower")])  # a rebalance the leader does not rejoin
    assert h.group.state is GroupState.PREPARING_REBALANCE
    h.heartbeats(REBALANCE_MS, leader)
    assert h.group.state is GroupState.PREPARING_REBALANCE and list(h.group.members) == [leader.member_id]
    rejoin = h.join(leader.member_id, instance="i-leader")
    (joined,) = rejoin
    assert joined.error_code == ErrorCode.NONE and joined.generation_id == leader.generation_id + 1


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: the topics, no user data."""
    encoded = b"".join(len(t).to_bytes(2, "big") + t.encode() for t in topics)
    return b"\x00\x00" + len(topics).to_bytes(4, "big") + encoded + b"\xff\xff\xff\xff"


def offset_delete(h: Harness, *topics: str) -> dict[tuple[str, int], ErrorCode]:
    answers: list[dict[tuple[str, int], ErrorCode]] = []
    h.coordinator.delete_offsets("g", [(t, 0) for t in topics], answers.append)
    (codes,) = answers
    return codes


def test_offset_delete_goes_by_the_generations_subscriptions() -> None:
    """Kafka's isSubscribedToTopic reads the topics computed when the generation began: a member
    that rejoins subscribed to other topics changes nothing until the next generation."""
    h = Harness()
    on_a = (("range", subscription("a")),)
    first = h.join(protocols=on_a)
    h.advance(0)
    b_answers = h.join(protocols=on_a)
    a_answers = h.join(first[0].member_id, protocols=on_a)
    (leader,), (follower,) = a_answers, b_answers
    h.sync(follower)
    h.sync(leader, {})
    on_b = (("range", subscription("b")),)
    h.join(follower.member_id, protocols=on_b)  # rebalancing towards b
    assert h.group.state is GroupState.PREPARING_REBALANCE
    assert offset_delete(h, "a", "b") == {("a", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
                                          ("b", 0): ErrorCode.NONE}
    h.join(leader.member_id, protocols=on_b)
    assert h.group.state is GroupState.COMPLETING_REBALANCE
    assert offset_delete(h, "a", "b") == {("a", 0): ErrorCode.NONE,
                                          ("b", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC}


def test_offset_delete_in_a_consumer_group_whose_subscriptions_do_not_parse() -> None:
    """Kafka cannot tell what such a group consumes, so every topic counts as subscribed
    (GROUP_SUBSCRIBED_TO_TOPIC per partition), where only a group of another protocol type is
    NON_EMPTY_GROUP."""
    h = Harness()
    answers = h.join(protocols=(("range", b"\x00"),))
    h.advance(0)
    h.sync(answers[0], {})
    assert offset_delete(h, "a", "b") == {("a", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
                                          ("b", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC}


def test_transactional_commits_are_checked_as_kafka_checks_them() -> None:
    """TxnOffsetCommit runs OffsetCommit's member and generation checks, but a commit naming no
    member passes in a group with members, and CompletingRebalance is no refusal (Kafka 4.0's
    validateOffsetCommit with isTransactional)."""
    h = Harness()
    answers = h.join()
    h.advance(0)
    (a,) = answers
    assert h.group.state is GroupState.COMPLETING_REBALANCE

    def refusal(generation: int, member_id: str, check: Callable[..., object]) -> ErrorCode:
        try:
            check("g", generation, member_id, None)
        except KafkaApiError as exc:
            return exc.code
        return ErrorCode.NONE

    def commit(group: str, generation: int, member_id: str, instance: str | None) -> None:
        h.coordinator.commit_offsets(group, generation, member_id, instance, [], lambda _: None)
    txn = h.coordinator.check_txn_offset_commit
    assert refusal(a.generation_id, a.member_id, txn) == ErrorCode.NONE
    assert refusal(a.generation_id, a.member_id, commit) == ErrorCode.REBALANCE_IN_PROGRESS
    assert refusal(-1, "", txn) == ErrorCode.NONE
    assert refusal(-1, "", commit) == ErrorCode.UNKNOWN_MEMBER_ID
    assert refusal(-1, a.member_id, txn) == ErrorCode.ILLEGAL_GENERATION
    assert refusal(a.generation_id, "stranger", txn) == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_loaded_group_over_group_max_size_rebalances_down_to_it() -> None:
    """group.max.size lowered across a restart: Kafka's onLoaded rebalances a group that is over
    it, and the join takes back only as many members as the limit allows."""
    before = Harness()
    leader, follower = static_pair(before, None, None)
    after = Harness(max_size=1)
    after.coordinator.load(0, before.written)
    assert after.group.state is GroupState.PREPARING_REBALANCE
    rejoined = after.join(leader.member_id)
    with pytest.raises(KafkaApiError) as refused:
        after.join(follower.member_id)
    assert refused.value.code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert list(after.group.members) == [leader.member_id], "the refused member is removed"
    after.advance(REBALANCE_MS)  # the join's deadline completes it
    assert rejoined[0].error_code == ErrorCode.NONE and rejoined[0].members == (
        (leader.member_id, None, b"m"),)
    assert after.group.state is GroupState.COMPLETING_REBALANCE


def test_offsets_committed_after_a_deletion_outlive_a_reload() -> None:
    """DeleteGroups writes tombstones for the group and its offsets; a later commit outside group
    management makes the group again, with no metadata record of its own. Reloaded, the offsets
    are there (Kafka deletes offsets only by their own tombstones), the deleted ones are not."""
    before = Harness()
    codes: list[ErrorCode] = []
    before.coordinator.commit_offsets("g", -1, "", None, [OffsetEntry("t", 0, 5, -1, "")], codes.append)
    before.coordinator.delete_group("g", codes.append)
    before.coordinator.commit_offsets("g", -1, "", None, [OffsetEntry("t", 1, 7, -1, "")], codes.append)
    assert codes == [ErrorCode.NONE] * 3
    after = Harness()
    after.coordinator.load(0, before.written)
    committed = {(topic, partition): value.offset
                 for topic, partition, value in after.coordinator.offsets.committed("g", None) if value}
    assert committed == {("t", 1): 7}
    assert after.group.state is GroupState.EMPTY

