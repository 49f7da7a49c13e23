"""The classic coordinator against a model of Kafka's rules: joins, syncs, heartbeats, leaves,
commits and timeouts in any order (hypothesis RuleBasedStateMachine), on a manual clock.

The model keeps what each client knows (its member id, generation, whether it leads) and what
Kafka promises: every JoinGroup/SyncGroup is answered exactly once; the members of a generation
agree on its leader and protocol (a static leader replaced in a Stable group leads it under its
new id), and only the leader sees the member list, which is the whole generation; Stable members
hold what the leader assigned them; a member's errors are the ones
Kafka gives for the state (UNKNOWN_MEMBER_ID for ids the group does not know, ILLEGAL_GENERATION
for a stale generation, REBALANCE_IN_PROGRESS for a sync while members rejoin); generations only
grow; and once every client falls silent for longer than any timeout, no request is left
unanswered and the group is Empty. The first STATIC clients are static members (KIP-345): a
restart forgets their member id, and their next join replaces the old one.
"""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.coordinator import ClassicCoordinator, GroupConfig, JoinRequest
from kafkapy.groups.group import JoinResult, SyncResult
from kafkapy.groups.offsets import OffsetEntry
from kafkapy.groups.state import TRANSITIONS, GroupState
from kafkapy.groups.timers import ManualScheduler, Timers

GROUP = "g"
CLIENTS = 4
SESSION_MS = 1000
REBALANCE_MS = 3000
INITIAL_DELAY_MS = 200
STATIC = 2  # clients 0 and 1 have a group.instance.id
STATIC_SESSION_MS = 4 * SESSION_MS  # longer than a rebalance, as static members' sessions usually are


def instance_of(index: int) -> str | None:
    return f"i{index}" if index < STATIC else None


def identity(member_id: str, instance_id: str | None) -> str:
    """What the model's leaders assign by: the instance id of a static member (it survives the
    member's replacement), else the member id."""
    return instance_id if instance_id is not None else member_id


@attrs.define
class Client:
    member_id: str = ""
    generation: int = -1
    leader: bool = False
    members: tuple[tuple[str, str | None], ...] = ()  # (member, instance), if it led its generation
    assignment: bytes | None = None
    joining: int | None = None  # outstanding request ids
    syncing: int | None = None


class CoordinatorModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualScheduler()
        counter = iter(range(1_000_000))
        self.coordinator = ClassicCoordinator(
            GroupConfig(initial_rebalance_delay_ms=INITIAL_DELAY_MS, min_session_timeout_ms=SESSION_MS,
                        max_session_timeout_ms=10 * SESSION_MS, new_member_join_timeout_ms=5 * SESSION_MS),
            Timers(self.clock.clock, self.clock.call_later), self._persist,
            new_member_id=lambda prefix: f"{prefix}-{next(counter)}")
        self.clients = [Client() for _ in range(CLIENTS)]
        self.answers: dict[int, list[Any]] = {}
        self.next_request = 0
        self.generation_seen = 0
        # generation -> (leader, protocol, member ids) as the join answers told them
        self.generations: dict[int, tuple[str, str | None, frozenset[str]]] = {}
        self.assigned: dict[int, dict[str, bytes]] = {}  # gen -> identity -> what its leader assigned

    def _persist(self, group_id: str, records: Any, done: Any) -> None:
        done(ErrorCode.NONE)

    def _request(self) -> tuple[int, Any]:
        request_id = self.next_request
        self.next_request += 1
        self.answers[request_id] = []
        return request_id, self.answers[request_id].append

    @property
    def group(self) -> Any:
        return self.coordinator.groups.get(GROUP)

    # --- client actions -----------------------------------------------------------------------

    def _join(self, index: int, member_id: str,
              protocols: tuple[tuple[str, bytes], ...] = (("range", b"r"), ("roundrobin", b"rr"))) -> None:
        client = self.clients[index]
        session_ms = SESSION_MS if instance_of(index) is None else STATIC_SESSION_MS
        request_id, respond = self._request()
        try:
            self.coordinator.join(JoinRequest(GROUP, member_id, instance_of(index), f"c{index}", "/127.0.0.1",
                                              session_ms,
                                              REBALANCE_MS, "consumer", protocols, True), respond)
        except KafkaApiError as exc:
            respond(JoinResult(exc.code, member_id=member_id))
        client.joining = request_id
        self._collect()

    @rule(index=st.integers(0, CLIENTS - 1))
    def join(self, index: int) -> None:
        """A client (re)joins with what it knows: no id, then the id it was given."""
        client = self.clients[index]
        if client.joining is not None:
            return
        self._join(index, client.member_id)

    @rule(index=st.integers(0, CLIENTS - 1), session=st.sampled_from([10, 100 * SESSION_MS]))
    def join_with_bad_session(self, index: int, session: int) -> None:
        client = self.clients[index]
        try:
            self.coordinator.join(JoinRequest(GROUP, client.member_id, None, "c", "/h", session, REBALANCE_MS,
                                              "consumer", (("range", b""),), True), lambda _: None)
            raise AssertionError("a session timeout out of bounds was accepted")
        except KafkaApiError as exc:
            assert exc.code == ErrorCode.INVALID_SESSION_TIMEOUT

    @rule(index=st.integers(0, CLIENTS - 1))
    def restart(self, index: int) -> None:
        """The client's process restarts: it forgets its member id (its requests in flight are
        still answered, to nobody). A static one's next join replaces its old member id."""
        self.clients[index] = Client()

    @rule(index=st.integers(0, CLIENTS - 1))
    def sync(self, index: int) -> None:
        client = self.clients[index]
        if client.syncing is not None or not client.member_id:
            return
        group = self.group
        state_before = group.state if group is not None else None
        known = group is not None and client.member_id in group.members
        assignments = [(m, identity(m, i).encode()) for m, i in client.members] if client.leader else []
        request_id, respond = self._request()
        try:
            self.coordinator.sync(GROUP, client.generation, client.member_id, None, None, None, assignments,
                                  respond)
        except KafkaApiError as exc:
            respond(SyncResult(exc.code))
        answers = self.answers[request_id]
        if answers and answers[0].error_code != ErrorCode.NONE:
            code = answers[0].error_code
            if not known:
                assert code == ErrorCode.UNKNOWN_MEMBER_ID
            elif client.generation != group.generation_id:
                assert code == ErrorCode.ILLEGAL_GENERATION
            elif state_before is GroupState.PREPARING_REBALANCE:
                assert code == ErrorCode.REBALANCE_IN_PROGRESS
        client.syncing = request_id
        self._collect()

    @rule(index=st.integers(0, CLIENTS - 1))
    def heartbeat(self, index: int) -> None:
        client = self.clients[index]
        group = self.group
        try:
            self.coordinator.heartbeat(GROUP, client.generation, client.member_id, None)
            code = ErrorCode.NONE
        except KafkaApiError as exc:
            code = exc.code
        if group is None or client.member_id not in group.members:
            assert code == ErrorCode.UNKNOWN_MEMBER_ID
        elif client.generation != group.generation_id:
            assert code == ErrorCode.ILLEGAL_GENERATION
        elif group.state is GroupState.PREPARING_REBALANCE:
            assert code == ErrorCode.REBALANCE_IN_PROGRESS
        else:
            assert code == ErrorCode.NONE
        self._collect()

    @rule(index=st.integers(0, CLIENTS - 1))
    def leave(self, index: int) -> None:
        client = self.clients[index]
        group = self.group
        known = group is not None and (client.member_id in group.members or
                                       client.member_id in group.pending_members)
        try:
            codes = self.coordinator.leave(GROUP, [(client.member_id, None)])
        except KafkaApiError as exc:
            assert exc.code == ErrorCode.UNKNOWN_MEMBER_ID and group is None
        else:
            assert codes == [ErrorCode.NONE if known else ErrorCode.UNKNOWN_MEMBER_ID]
        self._collect()
        self.clients[index] = Client(joining=client.joining, syncing=client.syncing)

    @rule(index=st.integers(0, CLIENTS - 1))
    def commit(self, index: int) -> None:
        client = self.clients[index]
        group = self.group
        outcome: list[ErrorCode] = []
        try:
            self.coordinator.commit_offsets(GROUP, client.generation, client.member_id, None,
                                            [OffsetEntry("t", 0, 5, -1, "")], outcome.append)
        except KafkaApiError as exc:
            outcome.append(exc.code)
        # Kafka 4.0's validateOffsetCommit, in its order (the member before the state)
        if group is None:
            expected = ErrorCode.NONE if client.generation < 0 else ErrorCode.GROUP_ID_NOT_FOUND
        elif client.generation < 0 and group.state is GroupState.EMPTY:
            expected = ErrorCode.NONE
        elif client.member_id not in group.members:
            expected = ErrorCode.UNKNOWN_MEMBER_ID
        elif client.generation != group.generation_id:
            expected = ErrorCode.ILLEGAL_GENERATION
        elif group.state is GroupState.COMPLETING_REBALANCE:
            expected = ErrorCode.REBALANCE_IN_PROGRESS
        else:
            expected = ErrorCode.NONE
        assert outcome == [expected]
        if outcome == [ErrorCode.NONE]:
            assert self.coordinator.offsets.get(GROUP, "t", 0) is not None

    @rule(ms=st.integers(0, 2 * SESSION_MS))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms / 1000)
        self._collect()

    @rule(steps=st.integers(1, 30), members=st.sets(st.integers(0, CLIENTS - 1), min_size=1))
    def play_by_the_rules(self, steps: int, members: set[int]) -> None:
        """Some clients behave as a consumer does, 100 ms at a time: join, sync what they were
        given, heartbeat, and rejoin when the coordinator says so (the way groups reach Stable)."""
        for _ in range(steps):
            self.advance(100)
            for index in sorted(members):
                client = self.clients[index]
                if client.joining is not None or client.syncing is not None:
                    continue
                if not client.member_id or client.generation < 0:
                    self.join(index)
                elif client.assignment is None:
                    self.sync(index)
                else:
                    try:
                        self.coordinator.heartbeat(GROUP, client.generation, client.member_id, None)
                    except KafkaApiError as exc:
                        if exc.code == ErrorCode.UNKNOWN_MEMBER_ID:
                            client.member_id, client.generation = "", -1
                        self.join(index)

    @precondition(lambda self: self.group is not None)
    @rule()
    def everyone_falls_silent(self) -> None:
        """Longer than every deadline with no client request: everything answered, group Empty."""
        for _ in range(4):
            self.clock.advance((REBALANCE_MS + 5 * SESSION_MS) / 1000)
            self._collect()
        assert all(answers for answers in self.answers.values()), "a request was never answered"
        assert self.group.state is GroupState.EMPTY
        assert not self.group.members

    # --- what the answers teach the clients --------------------------------------------------

    def _collect(self) -> None:
        for index, client in enumerate(self.clients):
            if client.joining is not None and self.answers[client.joining]:
                result: JoinResult = self.answers[client.joining][0]
                client.joining = None
                if result.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                    client.member_id = result.member_id
                elif result.error_code == ErrorCode.NONE:
                    self._joined(client, result)
                elif result.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    client.member_id, client.generation = "", -1
            if client.syncing is not None and self.answers[client.syncing]:
                synced: SyncResult = self.answers[client.syncing][0]
                client.syncing = None
                if synced.error_code == ErrorCode.NONE:
                    client.assignment = synced.assignment
                    assigned = self.assigned.get(client.generation)
                    who = identity(client.member_id, instance_of(index))
                    assert assigned is not None and synced.assignment == assigned.get(who, b"")
                elif synced.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    client.member_id, client.generation = "", -1
                else:  # REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION: rejoin
                    client.generation = -1

    def _joined(self, client: Client, result: JoinResult) -> None:
        client.member_id, client.generation = result.member_id, result.generation_id
        client.assignment = None  # until this generation's SyncGroup answers
        client.leader = result.leader == result.member_id
        client.members = tuple((m, i) for m, i, _ in result.members)
        known = self.generations.get(result.generation_id)
        if known is None:
            known = (result.leader, result.protocol_name, frozenset())
        leader, protocol, ids = known
        if result.skip_assignment:  # a static leader replaced in a Stable group: its new id leads
            leader = result.leader
        assert (leader, protocol) == (result.leader, result.protocol_name), "one generation, one leader"
        self.generations[result.generation_id] = (leader, protocol, ids | {result.member_id})
        if client.leader:
            assert result.member_id in {m for m, _ in client.members}
            if not result.skip_assignment:  # a replaced static leader keeps the generation's assignment
                self.assigned[result.generation_id] = {identity(m, i): identity(m, i).encode()
                                                       for m, i in client.members}
        else:
            assert not result.members, "only the leader sees the members"

    # --- invariants ---------------------------------------------------------------------------

    @invariant()
    def answered_at_most_once(self) -> None:
        assert all(len(answers) <= 1 for answers in self.answers.values())

    @invariant()
    def group_is_consistent(self) -> None:
        group = self.group
        if group is None:
            return
        assert group.generation_id >= self.generation_seen
        self.generation_seen = group.generation_id
        assert group.state in TRANSITIONS
        assert group.pending_sync <= set(group.members)
        if group.state is GroupState.EMPTY:
            assert not group.members and group.leader_id is None
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            assert group.leader_id in group.members
            assert all(m.awaiting_join is None for m in group.members.values())
            told = self.generations.get(group.generation_id)
            assert told is None or told[0] == group.leader_id
        if group.state is GroupState.STABLE:
            assigned = self.assigned.get(group.generation_id, {})
            for member in group.members.values():
                who = identity(member.member_id, member.group_instance_id)
                assert member.assignment == assigned.get(who, b"")


CoordinatorModel.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_coordinator_model = CoordinatorModel.TestCase
