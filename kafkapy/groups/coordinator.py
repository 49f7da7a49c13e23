"""The classic group coordinator: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, offsets, admin.

Theory of operation (Kafka's GroupCoordinator / GroupMetadataManager for classic groups). The
coordinator is synchronous and does no I/O: a request that must wait (a JoinGroup until the
rebalance completes, a SyncGroup until the leader's assignment is written) hands in a callback,
and the coordinator calls it when the answer is known. Deadlines run on ``Timers`` (timers.py);
writes go through ``persist`` (the broker's GroupLog behind it), whose completion callback is
where a decision takes effect, as Kafka applies an offset commit or an assignment only once it
is in ``__consumer_offsets``.

The timers, by name:

* ``("join", group)``: the rebalance's deadline. On an Empty group it is Kafka's
  InitialDelayedJoin: wait ``group.initial.rebalance.delay.ms`` for more members (all of it, even
  past a shorter rebalance timeout), again while members keep arriving, the extensions never
  past the rebalance timeout. Otherwise it is the largest member rebalance timeout; dynamic
  members that have not rejoined by then are removed (static ones stay, KIP-345). The join
  also completes as soon as every member (and every KIP-394 member id handed out) is back.
* ``("sync", group)``: the rebalance timeout again, for the SyncGroups of the new generation;
  members that never sync are removed and the group rebalances.
* ``("member", group, member)``: the session. Any request of the member's pushes it back. A
  member waiting in a JoinGroup or SyncGroup is kept alive (the rebalance deadlines bound it),
  except a new member, which gets ``new_member_join_timeout_ms`` (Kafka's 5 minutes) to come back.
* ``("pending", group, member)``: a member id handed out with MEMBER_ID_REQUIRED; it lapses after
  the session timeout if the member never joins with it.

Groups share one namespace with KIP-848 consumer groups: ``groups`` maps each id to its group,
and a classic request for a group of another type is refused with GROUP_ID_NOT_FOUND, as Kafka
does (``ClassicGroup.group_type`` says which).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.group import CLASSIC, ClassicGroup, JoinRequest, JoinResult, Member, SyncResult
from kafkapy.groups.offsets import OffsetEntry, OffsetStore
from kafkapy.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecord,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kafkapy.groups.retention import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroupFacts,
    Expiry,
    GroupFacts,
    StandaloneGroupFacts,
    expire_offsets,
    expiry_tombstones,
)
from kafkapy.groups.state import GroupState
from kafkapy.groups.timers import Timers

__all__ = ["ClassicCoordinator", "GroupConfig", "JoinRequest", "Persist"]

S = GroupState
UNKNOWN_MEMBER = ""  # JoinGroup's member_id on a first join
NO_GENERATION = -1  # OffsetCommit's generation from a consumer outside group management
FIRST_GROUP_ID_NOT_FOUND_COMMIT_VERSION = 9  # OffsetCommit for a group that does not exist

# persist(group id, records, done): write the records, then call done(NONE or the error).
Persist = Callable[[str, Sequence[GroupRecord], Callable[[ErrorCode], None]], None]


@attrs.frozen
class GroupConfig:
    """The coordinator's limits; defaults are Kafka's (the module reads them from the config)."""

    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    max_size: int = 2147483647  # group.max.size
    new_member_join_timeout_ms: int = 300000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes


def _default_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


class ClassicCoordinator:
    def __init__(self, config: GroupConfig, timers: Timers, persist: Persist, *,
                 partition_for: Callable[[str], int] = lambda group: 0,
                 new_member_id: Callable[[str], str] = _default_member_id,
                 log: logging.Logger | None = None,
                 other_type: Callable[[str], bool] = lambda group: False) -> None:
        self.config = config
        self.timers = timers
        self._persist = persist
        self._partition_for = partition_for
        self._new_member_id = new_member_id
        self._other_type = other_type  # the id names a group of another type (a KIP-848 group)
        self._log = log or logging.getLogger("kafkapy.groups")
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetStore()
        # Groups in their initial delay -> whether a member joined since the delay was set.
        self._new_members: dict[str, bool] = {}

    # --- lookups ------------------------------------------------------------------------------

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        """The group if it is classic; GROUP_ID_NOT_FOUND if the id belongs to another type."""
        group = self.groups.get(group_id)
        if group is None and self._other_type(group_id):
            raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a classic group.")
        if group is not None and group.group_type != CLASSIC:
            raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a classic group.")
        return group

    def _create_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, self._partition_for(group_id),
                             state_timestamp_ms=self.timers.wall_ms())
        self.groups[group_id] = group
        return group

    @staticmethod
    def _check_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> Member:
        """Kafka's validateMember: a static member's id must be the one its instance id holds
        (FENCED_INSTANCE_ID), and the member must be in the group (UNKNOWN_MEMBER_ID)."""
        if instance_id is not None:
            holder = group.static_member_id(instance_id)
            if holder is not None and holder != member_id:
                raise KafkaApiError(ErrorCode.FENCED_INSTANCE_ID,
                                    f"Static member {instance_id} is fenced by a newer member id.")
            if holder is None:
                raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID)
        member = group.members.get(member_id)
        if member is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    # --- JoinGroup ----------------------------------------------------------------------------

    def check_session_timeout(self, session_timeout_ms: int) -> None:
        """INVALID_SESSION_TIMEOUT outside group.min/max.session.timeout.ms: Kafka's
        GroupCoordinatorService refuses such a JoinGroup before it looks at any group."""
        config = self.config
        if not config.min_session_timeout_ms <= session_timeout_ms <= config.max_session_timeout_ms:
            raise KafkaApiError(ErrorCode.INVALID_SESSION_TIMEOUT,
                                f"The session timeout must be between group.min.session.timeout.ms "
                                f"({config.min_session_timeout_ms}) and group.max.session.timeout.ms "
                                f"({config.max_session_timeout_ms}).")

    def join(self, request: JoinRequest, respond: Callable[[JoinResult], None]) -> None:
        """Answer now (by raising KafkaApiError or calling ``respond``) or once the rebalance ends."""
        if not request.group_id:
            raise KafkaApiError(ErrorCode.INVALID_GROUP_ID)
        config = self.config
        self.check_session_timeout(request.session_timeout_ms)
        group = self.classic_group(request.group_id)
        if group is None:
            if request.member_id != UNKNOWN_MEMBER:
                raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID)
            if not (request.protocol_type and request.protocols):
                raise KafkaApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            group = self._create_group(request.group_id)
        if not group.can_admit(request.member_id, config.max_size):
            # the refused member is out of the group, as Kafka removes it (the join phase is not
            # retried here: its deadline, or the next member's move, completes it)
            refused = group.members.get(request.member_id)
            if refused is not None:
                self._remove_member(group, refused)
            if request.member_id in group.pending_members:
                group.pending_members.discard(request.member_id)
                self.timers.cancel(("pending", group.group_id, request.member_id))
            raise KafkaApiError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                f"The group has reached its maximum size ({config.max_size}).")
        if not group.supports(request.protocol_type, request.protocols):
            raise KafkaApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.state is S.DEAD:
            raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if request.member_id == UNKNOWN_MEMBER:
            self._join_new(group, request, respond)
        else:
            self._join_known(group, request, respond)

    def _join_new(self, group: ClassicGroup, request: JoinRequest,
                  respond: Callable[[JoinResult], None]) -> None:
        instance_id = request.group_instance_id
        member_id = self._new_member_id(instance_id if instance_id is not None else request.client_id)
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                self._replace_static(group, old_id, member_id, request, respond)
                return
        elif request.require_known_member_id:
            group.pending_members.add(member_id)
            self.timers.set(("pending", group.group_id, member_id), request.session_timeout_ms,
                            lambda: self._pending_expired(group, member_id))
            respond(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id))
            return
        self._add_and_rebalance(group, member_id, request, respond)

    def _join_known(self, group: ClassicGroup, request: JoinRequest,
                    respond: Callable[[JoinResult], None]) -> None:
        member_id = request.member_id
        if member_id in group.pending_members:
            self._add_and_rebalance(group, member_id, request, respond)
            return
        member = self._check_member(group, member_id, request.group_instance_id)
        same = member.matches(request.protocols)
        if group.state is S.PREPARING_REBALANCE:
            self._update_member(group, member, request, respond)
            self._try_complete_join(group)
        elif group.state is S.COMPLETING_REBALANCE and same:
            # It missed the join's answer: the same one again, for the current generation.
            self._touch(group, member)
            respond(self._join_result(group, member))
        elif group.state is S.STABLE and same and member_id != group.leader_id:
            self._touch(group, member)
            respond(self._join_result(group, member))
        else:  # new protocols, or the leader asking for a new assignment
            self._update_member(group, member, request, respond)
            self._prepare_rebalance(group)

    def _add_and_rebalance(self, group: ClassicGroup, member_id: str, request: JoinRequest,
                           respond: Callable[[JoinResult], None]) -> None:
        group.pending_members.discard(member_id)
        self.timers.cancel(("pending", group.group_id, member_id))
        member = Member(member_id, request.group_instance_id, request.client_id, request.client_host,
                        request.rebalance_timeout_ms, request.session_timeout_ms, request.protocol_type,
                        list(request.protocols), awaiting_join=respond, is_new=True)
        group.add(member)
        self._schedule_session(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group)

    def _update_member(self, group: ClassicGroup, member: Member, request: JoinRequest,
                       respond: Callable[[JoinResult], None]) -> None:
        if member.awaiting_join is not None:  # a retried join: the older request is answered
            member.awaiting_join(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.protocols = list(request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.awaiting_join = respond
        self._touch(group, member)

    def _replace_static(self, group: ClassicGroup, old_id: str, new_id: str, request: JoinRequest,
                        respond: Callable[[JoinResult], None]) -> None:
        """KIP-345: a static member back under a new id. The old id is fenced; a Stable group whose
        protocol would not change keeps its assignment and does not rebalance. The answer then
        names the leader: from JoinGroup v9 the real one, with the members and ``skip_assignment``
        for the leader (KIP-814); before, the leader as it was before the replacement and no
        members, so a rejoining leader takes itself for a follower and just syncs, as Kafka."""
        old = group.members[old_id]
        self.timers.cancel(("member", group.group_id, old_id))
        if old.awaiting_join is not None:
            old.awaiting_join(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
            old.awaiting_join = None
        if old.awaiting_sync is not None:
            old.awaiting_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
            old.awaiting_sync = None
        old_protocols = old.protocols
        old_leader = group.leader_id
        member = group.replace_static(old_id, new_id)
        member.protocols = list(request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.client_id, member.client_host = request.client_id, request.client_host
        if group.state is S.STABLE:
            if group.protocol_name is not None and group.select_protocol() == group.protocol_name:
                self._schedule_session(group, member, member.session_timeout_ms)
                if request.skip_assignment_supported:
                    result = self._join_result(group, member,
                                               skip_assignment=member.member_id == group.leader_id)
                else:  # before KIP-814 the old leader id keeps a rejoining leader from reassigning
                    result = JoinResult(ErrorCode.NONE, group.generation_id, group.protocol_type,
                                        group.protocol_name, old_leader or "", new_id)

                def stored(code: ErrorCode) -> None:
                    if code != ErrorCode.NONE:  # put the old member back, as Kafka reverts
                        if group.members.get(new_id) is member:
                            group.replace_static(new_id, old_id)
                            member.protocols = old_protocols
                        respond(JoinResult(code, member_id=UNKNOWN_MEMBER))
                        return
                    respond(result)
                self._store_group(group, stored)
                return
            member.awaiting_join = respond
            self._prepare_rebalance(group)
        elif group.state is S.COMPLETING_REBALANCE:
            member.awaiting_join = respond
            self._prepare_rebalance(group)
        else:  # PreparingRebalance: it waits with the others
            member.awaiting_join = respond
            self._touch(group, member)
            self._try_complete_join(group)

    def _join_result(self, group: ClassicGroup, member: Member, *,
                     skip_assignment: bool = False) -> JoinResult:
        leader = member.member_id == group.leader_id
        protocol = group.protocol_name
        members = tuple((m.member_id, m.group_instance_id, m.metadata_for(protocol or ""))
                        for m in group.members.values()) if leader else ()
        return JoinResult(ErrorCode.NONE, group.generation_id, group.protocol_type, protocol,
                          group.leader_id or "", member.member_id, members, skip_assignment)

    # --- rebalance ----------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self._prepare_rebalance(group)
        elif group.state is S.PREPARING_REBALANCE:
            self._note_new_member(group)
            self._try_complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.state is S.COMPLETING_REBALANCE:
            self._reset_sync(group, ErrorCode.REBALANCE_IN_PROGRESS)
        was_empty = group.state is S.EMPTY
        group.move_to(S.PREPARING_REBALANCE, self.timers.wall_ms())
        rebalance_timeout = group.max_rebalance_timeout_ms()
        if was_empty:
            # The whole configured delay, even past a shorter rebalance timeout, as Kafka waits.
            delay = self.config.initial_rebalance_delay_ms
            self._initial_delay(group, delay, max(rebalance_timeout - delay, 0))
        else:
            self.timers.set(("join", group.group_id), rebalance_timeout, lambda: self._complete_join(group))
            self._try_complete_join(group)

    def _initial_delay(self, group: ClassicGroup, delay_ms: int, remaining_ms: int) -> None:
        """InitialDelayedJoin: the join waits ``delay_ms``; if members arrived meanwhile it waits
        again (the configured delay, at most what is left of the rebalance timeout)."""
        group_key = ("join", group.group_id)
        self._new_members[group.group_id] = False

        def expired() -> None:
            if self._new_members.pop(group.group_id, False) and remaining_ms > 0:
                again = min(self.config.initial_rebalance_delay_ms, remaining_ms)
                self._initial_delay(group, again, max(remaining_ms - again, 0))
            else:
                self._complete_join(group)
        self.timers.set(group_key, delay_ms, expired)

    def _note_new_member(self, group: ClassicGroup) -> None:
        if group.group_id in self._new_members:
            self._new_members[group.group_id] = True

    def _try_complete_join(self, group: ClassicGroup) -> None:
        """A rebalance past its initial delay completes once everyone is back."""
        if group.state is S.PREPARING_REBALANCE and group.group_id not in self._new_members \
                and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """The join phase ends: the dynamic members that did not rejoin are removed, and the rest
        get the new generation (the leader with everyone's metadata), or the group is Empty.

        Static members (KIP-345) that did not rejoin stay, with their last metadata, as Kafka's
        completeClassicGroupJoin keeps them: a restarting static member is only lost when its
        session or the coming sync deadline runs out. If the leader did not rejoin, a member
        that did leads; if none did, the join waits another rebalance timeout."""
        if group.state is not S.PREPARING_REBALANCE:
            return
        self.timers.cancel(("join", group.group_id))
        self._new_members.pop(group.group_id, None)
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                self._log.info("group %s: member %s did not rejoin in time; removed", group.group_id,
                               member.member_id)
                self._remove_member(group, member)
        if group.members and not group.elect_joined_leader():
            self._log.info("group %s: no member rejoined; the join waits for the static members",
                           group.group_id)
            self.timers.set(("join", group.group_id), group.max_rebalance_timeout_ms(),
                            lambda: self._complete_join(group))
            return
        now = self.timers.wall_ms()
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.note_subscriptions()
            group.move_to(S.EMPTY, now)
            self._store_group(group, lambda code: None)
            return
        group.protocol_name = group.select_protocol()
        group.note_subscriptions()
        group.move_to(S.COMPLETING_REBALANCE, now)
        group.pending_sync = set(group.members)
        for member in list(group.members.values()):
            respond, member.awaiting_join = member.awaiting_join, None
            member.is_new = False
            self._schedule_session(group, member, member.session_timeout_ms)
            if respond is not None:
                respond(self._join_result(group, member))
        generation = group.generation_id
        self.timers.set(("sync", group.group_id), group.max_rebalance_timeout_ms(),
                        lambda: self._sync_expired(group, generation))

    def _sync_expired(self, group: ClassicGroup, generation: int) -> None:
        """Kafka's pending-sync timeout: members that never synced are removed, and the group
        rebalances without them."""
        if group.generation_id != generation or not group.pending_sync or \
                group.state not in (S.COMPLETING_REBALANCE, S.STABLE):
            return
        for member_id in list(group.pending_sync):
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member(group, member)
        self._prepare_rebalance(group)

    def _reset_sync(self, group: ClassicGroup, code: ErrorCode) -> None:
        self.timers.cancel(("sync", group.group_id))
        group.pending_sync.clear()
        for member in group.members.values():
            member.assignment = b""
            respond, member.awaiting_sync = member.awaiting_sync, None
            if respond is not None:
                respond(SyncResult(code))

    # --- sessions -----------------------------------------------------------------------------

    def _schedule_session(self, group: ClassicGroup, member: Member, timeout_ms: int) -> None:
        member_id = member.member_id
        self.timers.set(("member", group.group_id, member_id), timeout_ms,
                        lambda: self._session_expired(group, member_id))

    def _touch(self, group: ClassicGroup, member: Member) -> None:
        """A request from the member: its session starts again."""
        timeout = self.config.new_member_join_timeout_ms if member.is_new else member.session_timeout_ms
        self._schedule_session(group, member, timeout)

    def _session_expired(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None or self.groups.get(group.group_id) is not group:
            return
        waiting = (member.awaiting_join is not None and not member.is_new) or member.awaiting_sync is not None
        if waiting:  # bounded by the rebalance's own deadlines
            self._schedule_session(group, member, member.session_timeout_ms)
            return
        self._log.info("group %s: member %s's session expired", group.group_id, member_id)
        self._remove_member_and_update(group, member)

    def expire_sessions(self, group_id: str, member_ids: Iterable[str]) -> list[str]:
        """End these members' sessions now, as a timeout would (a test's fault, not Kafka's API):
        each is removed and the group rebalances. Unlike the timer, a member waiting in a
        JoinGroup or SyncGroup is removed too (its request is answered UNKNOWN_MEMBER_ID): the
        test asked for the session to end. Answers the member ids removed."""
        group = self.groups.get(group_id)
        if group is None:
            return []
        expired = []
        for member_id in member_ids:
            member = group.members.get(member_id)
            if member is not None:
                self._log.info("group %s: member %s's session was ended", group_id, member_id)
                self._remove_member_and_update(group, member)
                expired.append(member_id)
        return expired

    def _pending_expired(self, group: ClassicGroup, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._try_complete_join(group)

    def _remove_member(self, group: ClassicGroup, member: Member) -> None:
        self.timers.cancel(("member", group.group_id, member.member_id))
        if member.awaiting_join is not None:
            member.awaiting_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id))
            member.awaiting_join = None
        if member.awaiting_sync is not None:
            member.awaiting_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            member.awaiting_sync = None
        group.remove(member.member_id)

    def _remove_member_and_update(self, group: ClassicGroup, member: Member) -> None:
        self._remove_member(group, member)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        elif group.state is S.PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _member_of_generation(self, group_id: str, generation_id: int, member_id: str,
                              instance_id: str | None) -> tuple[ClassicGroup, Member]:
        """SyncGroup's and Heartbeat's first checks, in Kafka's order: a known member of a live
        group, at the group's generation."""
        group = self.classic_group(group_id)
        if group is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state is S.DEAD:
            raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        member = self._check_member(group, member_id, instance_id)
        if generation_id != group.generation_id:
            raise KafkaApiError(ErrorCode.ILLEGAL_GENERATION)
        return group, member

    # --- SyncGroup ----------------------------------------------------------------------------

    def sync(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None, assignments: Iterable[tuple[str, bytes]],
             respond: Callable[[SyncResult], None]) -> None:
        group, member = self._member_of_generation(group_id, generation_id, member_id, instance_id)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            raise KafkaApiError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.state is S.PREPARING_REBALANCE:
            raise KafkaApiError(ErrorCode.REBALANCE_IN_PROGRESS)
        self._touch(group, member)
        if group.state is S.STABLE:
            self._synced(group, member_id)
            respond(SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment))
            return
        # CompletingRebalance: wait for the leader's assignment to be written
        if member.awaiting_sync is not None:
            member.awaiting_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = respond
        self._synced(group, member_id)
        if member_id != group.leader_id:
            return
        given = dict(assignments)
        generation = group.generation_id
        planned = {mid: given.get(mid, b"") for mid in group.members}
        record = attrs.evolve(group.to_record(), members=tuple(
            attrs.evolve(m.to_record(group.protocol_name), assignment=planned[m.member_id])
            for m in group.members.values()))

        def stored(code: ErrorCode) -> None:
            if group.state is not S.COMPLETING_REBALANCE or group.generation_id != generation:
                return
            if code != ErrorCode.NONE:
                self._reset_sync(group, code)
                self._prepare_rebalance(group)
                return
            for m in group.members.values():
                m.assignment = planned.get(m.member_id, b"")
            group.move_to(S.STABLE, self.timers.wall_ms())
            for m in group.members.values():
                waiting, m.awaiting_sync = m.awaiting_sync, None
                if waiting is not None:
                    waiting(SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name,
                                       m.assignment))
        self._persist(group.group_id, [GroupRecord(GroupMetadataKey(group.group_id), record)], stored)

    def _synced(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timers.cancel(("sync", group.group_id))

    # --- Heartbeat, LeaveGroup ----------------------------------------------------------------

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> None:
        """Returns when the heartbeat is good; KafkaApiError says why not."""
        group, member = self._member_of_generation(group_id, generation_id, member_id, instance_id)
        self._touch(group, member)
        if group.state is S.PREPARING_REBALANCE:
            raise KafkaApiError(ErrorCode.REBALANCE_IN_PROGRESS)

    def leave(self, group_id: str, members: Sequence[tuple[str, str | None]]) -> list[ErrorCode]:
        """Each (member id, instance id) leaves; its own error per member. A static member may be
        named by instance id alone (an admin removing it)."""
        group = self.classic_group(group_id)
        if group is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state is S.DEAD:
            raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        codes: list[ErrorCode] = []
        left = False
        for member_id, instance_id in members:
            if instance_id is not None:
                holder = group.static_member_id(instance_id)
                if holder is None:
                    codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id != UNKNOWN_MEMBER and holder != member_id:
                    codes.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = holder
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.timers.cancel(("pending", group.group_id, member_id))
                codes.append(ErrorCode.NONE)
                left = True
                continue
            member = group.members.get(member_id)
            if member is None:
                codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            self._remove_member(group, member)
            codes.append(ErrorCode.NONE)
            left = True
        if left:
            if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
                self._prepare_rebalance(group)
            else:
                self._try_complete_join(group)
        return codes

    # --- offsets ------------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
                       offsets: Sequence[OffsetEntry], done: Callable[[ErrorCode], None], *,
                       version: int = FIRST_GROUP_ID_NOT_FOUND_COMMIT_VERSION) -> None:
        """Kafka's validateOffsetCommit checks, then the write; ``done`` gets the write's outcome.
        Per-partition checks (unknown topic, metadata size) are the caller's, before this.

        A group that does not exist is made for a commit outside group management (generation
        -1); a generation of a group that does not exist is ILLEGAL_GENERATION before v9 and
        GROUP_ID_NOT_FOUND from v9 (Kafka 4.0's OffsetMetadataManager)."""
        group = self.classic_group(group_id)
        if group is None:
            if generation_id >= 0:
                if version >= FIRST_GROUP_ID_NOT_FOUND_COMMIT_VERSION:
                    raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
                raise KafkaApiError(ErrorCode.ILLEGAL_GENERATION)
            group = self._create_group(group_id)  # a consumer outside group management
        member = self._check_commit(group, generation_id, member_id, instance_id)
        if member is not None and group.state in (S.STABLE, S.PREPARING_REBALANCE):
            self._touch(group, member)
        if not offsets:
            done(ErrorCode.NONE)
            return
        now = self.timers.wall_ms()
        records = [GroupRecord(OffsetCommitKey(group_id, e.topic, e.partition),
                               OffsetCommitValue(e.offset, e.leader_epoch, e.metadata,
                                                 now if e.commit_timestamp is None else e.commit_timestamp))
                   for e in offsets]

        def stored(code: ErrorCode) -> None:
            if code == ErrorCode.NONE:
                for record in records:
                    key, value = record.key, record.value
                    assert isinstance(key, OffsetCommitKey) and isinstance(value, OffsetCommitValue)
                    self.offsets.put(key, value)
            done(code)
        self._persist(group_id, records, stored)

    def _check_commit(self, group: ClassicGroup, generation_id: int, member_id: str,
                      instance_id: str | None, *, transactional: bool = False) -> Member | None:
        """Kafka 4.0's ClassicGroup.validateOffsetCommit, in its order: a Dead group is
        COORDINATOR_NOT_AVAILABLE; an Empty group takes generation -1 commits from anyone; a
        commit naming a member or a generation must come from a member (FENCED_INSTANCE_ID,
        UNKNOWN_MEMBER_ID) at the group's generation (ILLEGAL_GENERATION); one naming neither is
        UNKNOWN_MEMBER_ID once the group has members; and only then is a valid member's commit
        during CompletingRebalance REBALANCE_IN_PROGRESS. A ``transactional`` commit (TxnOffsetCommit)
        skips the last two. The member, if one committed."""
        if group.state is S.DEAD:
            raise KafkaApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and group.state is S.EMPTY:
            return None
        member: Member | None = None
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER or instance_id is not None:
            member = self._check_member(group, member_id, instance_id)
            if generation_id != group.generation_id:
                raise KafkaApiError(ErrorCode.ILLEGAL_GENERATION)
        elif not transactional and group.state is not S.EMPTY:
            raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID)
        if not transactional and group.state is S.COMPLETING_REBALANCE:
            raise KafkaApiError(ErrorCode.REBALANCE_IN_PROGRESS)
        return member

    def check_txn_offset_commit(self, group_id: str, generation_id: int, member_id: str,
                                instance_id: str | None) -> None:
        """Kafka 4.0's checks of a TxnOffsetCommit (validateTransactionalOffsetCommit): a group
        that does not exist yet is made for generation -1 (the producer's consumer may assign
        itself), else ILLEGAL_GENERATION; then OffsetCommit's checks, except that a commit naming
        no member is taken in any state (v0-2 cannot name one) and CompletingRebalance is no
        reason to refuse."""
        group = self.classic_group(group_id)
        if group is None:
            if generation_id >= 0:
                raise KafkaApiError(ErrorCode.ILLEGAL_GENERATION)
            group = self._create_group(group_id)
        self._check_commit(group, generation_id, member_id, instance_id, transactional=True)

    def delete_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]],
                       done: Callable[[dict[tuple[str, int], ErrorCode]], None]) -> None:
        """OffsetDelete (Kafka's validateOffsetDelete and isSubscribedToTopic): a group with
        members must be a consumer group (NON_EMPTY_GROUP); a topic its generation subscribed to
        is GROUP_SUBSCRIBED_TO_TOPIC, every topic if those subscriptions could not be read."""
        group = self.classic_group(group_id)
        if group is None or group.state is S.DEAD:
            raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND)
        if group.state is not S.EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise KafkaApiError(ErrorCode.NON_EMPTY_GROUP)
        codes = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if group.is_subscribed(tp[0]) else ErrorCode.NONE
                 for tp in partitions}
        gone = [tp for tp, code in codes.items()
                if code == ErrorCode.NONE and self.offsets.get(group_id, *tp) is not None]
        if not gone:
            done(codes)
            return
        records = [GroupRecord(OffsetCommitKey(group_id, t, p), None) for t, p in gone]

        def stored(code: ErrorCode) -> None:
            if code == ErrorCode.NONE:
                for topic, partition in gone:
                    self.offsets.delete(group_id, topic, partition)
            else:
                for tp in gone:
                    codes[tp] = code
            done(codes)
        self._persist(group_id, records, stored)

    # --- offset retention ---------------------------------------------------------------------

    def _retention_facts(self, group_id: str) -> GroupFacts:
        """What Kafka's offsetExpirationCondition looks at: standalone (no protocol type), or the
        classic group's state, when it entered it, and its members' subscriptions."""
        group = self.groups.get(group_id)
        if group is None or group.protocol_type is None:
            return StandaloneGroupFacts()
        empty = group.state is S.EMPTY
        if empty and group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            subscribed: frozenset[str] | None = frozenset()  # nobody left subscribes to anything
        else:
            subscribed = group.subscribed
        return ClassicGroupFacts(group.protocol_type, empty, group.state is S.STABLE,
                                 group.state_timestamp_ms if group.state_timestamp_ms >= 0 else None,
                                 subscribed)

    def expire_offsets(self, loaded: Callable[[int], bool], now_ms: int, retention_ms: int,
                       pending: Callable[[str, str, int], bool] = lambda group, topic, partition: False
                       ) -> None:
        """One retention pass over the classic and standalone groups of loaded partitions (Kafka's
        cleanupGroupMetadata): expired offsets get tombstones, and an Empty group left with no
        offsets goes too. ``now_ms`` is wall time, like the commit timestamps."""
        for group_id in sorted(set(self.offsets.groups()) | set(self.groups)):
            if not loaded(self._partition_for(group_id)) or self._other_type(group_id):
                continue
            offsets = {(t, p): value for t, p in self.offsets.partitions(group_id)
                       if (value := self.offsets.get(group_id, t, p)) is not None}
            held = [tp for tp in offsets if pending(group_id, *tp)]
            expiry = expire_offsets(self._retention_facts(group_id), offsets, now_ms, retention_ms,
                                    pending_transactional=held)
            self._remove_offsets(group_id, expiry.expired, expiry.all_expired, "expired")

    def remove_offsets_of_topics(self, loaded: Callable[[int], bool], topics: Collection[str],
                                 pending: Callable[[str], bool] = lambda group: False) -> None:
        """Kafka's handleDeletedPartitions: the offsets of deleted ``topics`` go from the classic
        and standalone groups of loaded partitions (a tombstone each), and an Empty group left
        with no offsets, committed or ``pending`` in a transaction, goes too."""
        for group_id in sorted(set(self.offsets.groups()) | set(self.groups)):
            if not loaded(self._partition_for(group_id)) or self._other_type(group_id):
                continue
            held = self.offsets.partitions(group_id)
            gone = tuple(sorted(tp for tp in held if tp[0] in topics))
            if gone:
                left = len(gone) < len(held) or pending(group_id)
                self._remove_offsets(group_id, gone, not left, "of deleted topics removed")

    def _remove_offsets(self, group_id: str, gone: tuple[tuple[str, int], ...], nothing_left: bool,
                        why: str) -> None:
        """Tombstones for ``gone``, and for the group too when it is Empty with ``nothing_left``
        (Kafka's cleanupGroupMetadata); applied once written (a failed write: the next pass)."""
        group = self.groups.get(group_id)
        drop_group = nothing_left and group is not None and group.state is S.EMPTY
        records = expiry_tombstones(group_id, Expiry(gone, nothing_left))
        if drop_group:
            records.append(GroupRecord(GroupMetadataKey(group_id), None))
        if not records:
            return

        def stored(code: ErrorCode) -> None:
            if code != ErrorCode.NONE:
                return
            for topic, partition in gone:
                self.offsets.delete(group_id, topic, partition)
            group = self.groups.get(group_id)
            if drop_group and group is not None and group.state is S.EMPTY:
                self._forget(group)
                self.offsets.drop_group(group_id)
            self._log.info("group %s: %d offset(s) %s%s", group_id, len(gone), why,
                           "; the empty group is gone" if drop_group else "")
        self._persist(group_id, records, stored)

    # --- admin: DeleteGroups ------------------------------------------------------------------

    def delete_group(self, group_id: str, done: Callable[[ErrorCode], None]) -> None:
        """Only an Empty group (NON_EMPTY_GROUP otherwise): tombstones for its offsets and its
        metadata, then it is Dead and forgotten."""
        group = self.classic_group(group_id)
        if group is None or group.state is S.DEAD:
            raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND)
        if group.state is not S.EMPTY:
            raise KafkaApiError(ErrorCode.NON_EMPTY_GROUP)
        records = [GroupRecord(OffsetCommitKey(group_id, t, p), None)
                   for t, p in self.offsets.partitions(group_id)]
        records.append(GroupRecord(GroupMetadataKey(group_id), None))

        def stored(code: ErrorCode) -> None:
            if code == ErrorCode.NONE and self.groups.get(group_id) is group:
                self._forget(group)
                self.offsets.drop_group(group_id)
            done(code)
        self._persist(group_id, records, stored)

    def forget_empty_group(self, group_id: str) -> bool:
        """Forget an Empty group whose metadata tombstone is written, keeping its offsets (a
        KIP-848 consumer group takes its id and them); False if it is gone or not Empty."""
        group = self.groups.get(group_id)
        if group is None or group.state is not S.EMPTY or group.members:
            return False
        self._forget(group)
        return True

    def release_for_upgrade(self, group_id: str) -> GroupMetadataValue:
        """A classic group with members is becoming a consumer group (KIP-848's online upgrade,
        whose records the caller writes): its waiting JoinGroups and SyncGroups are answered
        REBALANCE_IN_PROGRESS, so their members rejoin the consumer group, and it is forgotten,
        offsets kept. Answers the group as it was, for ``adopt`` to put back should the upgrade
        not be written."""
        group = self.groups[group_id]
        _answer_waiting(group, ErrorCode.REBALANCE_IN_PROGRESS)
        value = group.to_record()
        self._forget(group)
        return value

    def adopt(self, group_id: str, value: GroupMetadataValue, rebalance: bool = True) -> None:
        """A classic group with members from a written GroupMetadata value: a consumer group
        downgraded to classic (Kafka's convertToClassicGroup), or an upgrade that could not be
        written. It rebalances at once unless ``rebalance`` is False (a static member replacing the
        last consumer-protocol member keeps everyone's assignment). Its members' sessions start now."""
        group = self.groups.get(group_id)
        if group is not None:
            _answer_waiting(group, ErrorCode.REBALANCE_IN_PROGRESS)
            self._forget(group)
        group = self._create_group(group_id)
        self._restore(group, value)
        self._log.info("group %s: now a classic group of %d members%s", group_id, len(group.members),
                       "; rebalancing" if rebalance and group.members else "")
        if rebalance and group.members:
            self._prepare_rebalance(group)

    def _forget(self, group: ClassicGroup) -> None:
        group.move_to(S.DEAD, self.timers.wall_ms())
        self.timers.cancel(("join", group.group_id))
        self.timers.cancel(("sync", group.group_id))
        for member in list(group.members.values()):
            self._remove_member(group, member)
        for member_id in group.pending_members:
            self.timers.cancel(("pending", group.group_id, member_id))
        self._new_members.pop(group.group_id, None)
        del self.groups[group.group_id]

    def forget_all(self) -> None:
        """Every group, member, offset and group timer gone (a broker reset, whose caller empties
        the log as well). A JoinGroup or SyncGroup still waiting is answered UNKNOWN_MEMBER_ID, as
        when its member is removed; later requests of those clients meet a coordinator that does
        not know their group, and get Kafka's answers for that."""
        for group in list(self.groups.values()):
            self._forget(group)
        self.offsets.clear()
        self._new_members.clear()

    def _store_group(self, group: ClassicGroup, done: Callable[[ErrorCode], None]) -> None:
        record = GroupRecord(GroupMetadataKey(group.group_id), group.to_record())
        self._persist(group.group_id, [record], done)

    # --- loading and unloading a partition ----------------------------------------------------

    def load(self, partition: int, records: Iterable[GroupRecord]) -> None:
        """Rebuild the partition's groups from its records, later ones winning (Kafka's
        loadGroupsAndOffsets): offsets, then each group Empty or Stable with its members, whose
        sessions start now."""
        metadata: dict[str, GroupMetadataValue | None] = {}
        for record in records:
            key = record.key
            if isinstance(key, OffsetCommitKey):
                if record.value is None:
                    self.offsets.delete(key.group, key.topic, key.partition)
                elif isinstance(record.value, OffsetCommitValue):
                    self.offsets.put(key, record.value)
            elif isinstance(key, GroupMetadataKey):
                metadata[key.group] = record.value if isinstance(record.value, GroupMetadataValue) else None
            # KIP-848 consumer groups' records are that coordinator's to load (kafkapy.groups.consumer_group*)
        # A group's metadata tombstone forgets the group, not its offsets: those go only by their
        # own tombstones (Kafka's loader keeps them, as an Empty group's), so offsets committed
        # after a DeleteGroups or an expiry outlive the restart.
        for group_id in self.offsets.groups():
            if self._partition_for(group_id) == partition and metadata.get(group_id) is None \
                    and group_id not in self.groups and not self._other_type(group_id):
                self._create_group(group_id)
        for group_id, value in metadata.items():
            if value is None:
                continue
            group = self._create_group(group_id)
            self._restore(group, value)
            if len(group.members) > self.config.max_size:
                # group.max.size was lowered since it was written: the members rejoin, and only
                # as many as the limit allows are taken back (Kafka's onLoaded does the same)
                self._log.info("group %s: %d members over group.max.size %d; rebalancing", group_id,
                               len(group.members), self.config.max_size)
                self._prepare_rebalance(group)

    def _restore(self, group: ClassicGroup, value: GroupMetadataValue) -> None:
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.state_timestamp_ms = value.current_state_timestamp
        if not value.members:
            group.note_subscriptions()
            return
        for stored in value.members:
            member = Member(stored.member_id, stored.group_instance_id, stored.client_id, stored.client_host,
                            stored.rebalance_timeout_ms, stored.session_timeout_ms, value.protocol_type,
                            [(value.protocol or "", stored.subscription)], assignment=stored.assignment)
            group.add(member)
            self._schedule_session(group, member, member.session_timeout_ms)
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members))
        group.note_subscriptions()
        group.state = S.STABLE  # a loaded group with members resumes where it was written

    def answer_waiting_not_coordinator(self) -> None:
        """Every join and sync waiting on other members answered NOT_COORDINATOR (the broker is
        stopping; the groups stay as they are for whoever reads them last)."""
        for group in self.groups.values():
            _answer_waiting(group, ErrorCode.NOT_COORDINATOR)

    def unload(self, partition: int) -> None:
        """This broker no longer leads the partition: its groups go (waiting requests are answered
        NOT_COORDINATOR by the module, which drops them)."""
        for group in [g for g in self.groups.values() if g.partition == partition]:
            _answer_waiting(group, ErrorCode.NOT_COORDINATOR)
            self._forget(group)
        for group_id in [g for g in self.offsets.groups() if self._partition_for(g) == partition]:
            self.offsets.drop_group(group_id)


def _answer_waiting(group: ClassicGroup, code: ErrorCode) -> None:
    """Answer ``code`` to the group's members' waiting JoinGroup and SyncGroup requests."""
    for member in group.members.values():
        joining, member.awaiting_join = member.awaiting_join, None
        if joining is not None:
            joining(JoinResult(code, member_id=member.member_id))
        syncing, member.awaiting_sync = member.awaiting_sync, None
        if syncing is not None:
            syncing(SyncResult(code))
