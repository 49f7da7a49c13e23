"""KIP-848 consumer groups inside the group coordinator module: I/O glue around ConsumerGroups.

The groups module owns what touches the broker (which groups are ours, ACLs, the GroupLog); this
file owns what only consumer groups need from it:

* ConsumerGroupHeartbeat and ConsumerGroupDescribe, after the module's checks (authorization,
  NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS), answered by :class:`ConsumerGroupHandlers`
  once their records are in the GroupLog;
* the session and rebalance deadlines: one named timer on the module's ``Timers`` (the broker's
  clock, ``services.clock``), set to :meth:`ConsumerGroups.next_deadline` after every change;
* loading and unloading a partition's consumer groups, beside the classic coordinator's;
* the one group-id namespace, as Kafka 4.0's GroupMetadataManager keeps it: a heartbeat for a
  classic group is refused with GROUP_ID_NOT_FOUND unless it is a join; an Empty classic group is
  replaced (its offsets kept; the module's ``_claim_for_consumer``), one with members converted
  when ``group.consumer.migration.policy`` allows (migration.py). A classic JoinGroup for a
  consumer group with members makes a classic member of it (JoinGroup, SyncGroup, Heartbeat and
  LeaveGroup go to ``classic_*`` here); for an empty one the consumer group is deleted first and
  the classic group takes its place. A downgraded group's GroupMetadata record goes to the
  classic coordinator once written (``on_downgrade``);
* offsets of consumer groups: OffsetCommit v9+ and OffsetFetch v9+ checked against the member's
  epoch (Kafka's ``ConsumerGroup.validateOffsetCommit`` / ``validateOffsetFetch``), kept in the
  classic coordinator's OffsetStore like every group's;
* DescribeGroups, ListGroups and DeleteGroups rows for consumer groups;
* offset retention (retention.py): a consumer group's offsets of topics none of its members
  subscribes to expire ``offsets.retention.minutes`` after their commit, and an empty group whose
  offsets all went is deleted, as Kafka's ``cleanupGroupMetadata`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from typing import Any

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.consumer_group import (
    ClassicJoinAnswer,
    ConsumerGroup,
    ConsumerGroups,
    GroupState,
    TopicInfo,
)
from kafkapy.groups.consumer_handlers import (
    CONSUMER_GROUP_VERSIONS,
    ConsumerGroupHandlers,
    Persist,
    consumer_group_config,
)
from kafkapy.groups.group import JoinRequest
from kafkapy.groups.offsets import OffsetEntry, OffsetStore
from kafkapy.groups.records import (
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    GroupMetadataValue,
    GroupRecord,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kafkapy.groups.retention import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerGroupFacts,
    Expiry,
    expire_offsets,
    expiry_tombstones,
)
from kafkapy.groups.timers import Timers
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.auth import AUTHORIZED_OPERATIONS_OMITTED
from kafkapy.server.modules import ApiHandler, RequestContext

__all__ = ["CONSUMER", "ConsumerGroupService"]

CONSUMER = "consumer"  # ListGroups v5's group_type of a KIP-848 group
#: OffsetCommit's first version a consumer-protocol member must use (Kafka: "OffsetCommit version
#: 9 or above must be used by members using the modern group protocol").
MEMBER_EPOCH_COMMIT_VERSION = 9
NO_MEMBER_EPOCH = -1  # OffsetCommit/OffsetFetch from an admin or a consumer outside the group
_EXPIRY_TIMER = ("consumer-groups", "expiry")

#: The module's checks before a request touches a group: raise KafkaApiError to refuse.
CheckGroup = Callable[[RequestContext, str, str], None]


class ConsumerGroupService:
    def __init__(self, config: Mapping[str, Any], timers: Timers,
                 topics: Callable[[], Mapping[str, TopicInfo]], persist: Persist,
                 partition_for: Callable[[str], int], offsets: OffsetStore,
                 spawn: Callable[[Coroutine[Any, Any, Any]], object],
                 overrides: Callable[[str], tuple[int, int] | None] | None = None,
                 on_downgrade: Callable[[str, GroupMetadataValue, bool], None] | None = None) -> None:
        self.groups = ConsumerGroups(topics, consumer_group_config(config), overrides=overrides,
                                     wall_ms=timers.wall_ms)
        self.handlers = ConsumerGroupHandlers(self.groups, persist=persist, clock=timers.now_ms,
                                              on_downgrade=on_downgrade)
        self._timers = timers
        self._persist = persist
        self._partition_for = partition_for
        self._offsets = offsets
        self._spawn = spawn

    def apis(self, heartbeat: Callable[..., Any], describe: Callable[..., Any]) -> dict[int, ApiHandler]:
        return {ApiKey.CONSUMER_GROUP_HEARTBEAT: ApiHandler(CONSUMER_GROUP_VERSIONS, heartbeat),
                ApiKey.CONSUMER_GROUP_DESCRIBE: ApiHandler(CONSUMER_GROUP_VERSIONS, describe)}

    def get(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.groups.get(group_id)

    # -- ConsumerGroupHeartbeat / ConsumerGroupDescribe ------------------------------------------

    async def heartbeat(self, ctx: RequestContext, body: Mapping[str, Any],
                        upgrade: Sequence[GroupRecord] = ()) -> dict[str, Any]:
        """One heartbeat, after the module's checks passed (with the records of an online
        upgrade, written with it); the expiry timer follows it."""
        host = ctx.connection.client_address[0]
        answer = await self.handlers.heartbeat(body, ctx.api_version, client_id=ctx.client_id or "",
                                               client_host=f"/{host}", upgrade=upgrade)
        self.schedule_expiry()
        return answer

    # -- classic members of a consumer group (KIP-848's migration) --------------------------------

    async def classic_join(self, request: JoinRequest) -> ClassicJoinAnswer:
        try:
            return await self.handlers.classic_join(request)
        finally:
            self.schedule_expiry()

    async def classic_sync(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                           protocol_type: str | None, protocol_name: str | None) -> bytes:
        try:
            return await self.handlers.classic_sync(group_id, member_id, instance_id, generation_id,
                                                    protocol_type, protocol_name)
        finally:
            self.schedule_expiry()

    def classic_heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                          generation_id: int) -> ErrorCode:
        try:
            return self.handlers.classic_heartbeat(group_id, member_id, instance_id, generation_id)
        finally:
            self.schedule_expiry()

    async def classic_leave(self, group_id: str, leaving: Sequence[tuple[str, str | None]]
                            ) -> list[tuple[str, ErrorCode]]:
        try:
            return await self.handlers.classic_leave(group_id, leaving)
        except KafkaApiError as refusal:  # no members at all
            return [(member_id, ErrorCode(refusal.code)) for member_id, _ in leaving]
        finally:
            self.schedule_expiry()

    @staticmethod
    def refused_heartbeat(refusal: KafkaApiError) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": refusal.code, "error_message": refusal.message,
                "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}

    def describe(self, group_id: str, version: int) -> dict[str, Any]:
        described: dict[str, Any] = self.handlers.describe({"group_ids": [group_id]}, version)["groups"][0]
        return described

    @staticmethod
    def refused_describe(group_id: str, refusal: KafkaApiError) -> dict[str, Any]:
        return {"error_code": refusal.code, "error_message": refusal.message, "group_id": group_id,
                "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
                "members": [], "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}

    # -- timers -----------------------------------------------------------------------------------

    def schedule_expiry(self) -> None:
        """The one timer, at the earliest session or rebalance deadline (or none)."""
        deadline = self.groups.next_deadline()
        if deadline is None:
            self._timers.cancel(_EXPIRY_TIMER)
            return
        self._timers.set(_EXPIRY_TIMER, deadline - self._timers.now_ms(), self._expired)

    async def expire_sessions(self, group_id: str, member_ids: Collection[str]) -> None:
        """End these members' sessions now: they are fenced through the timeout's own path."""
        now = self._timers.now_ms()
        for member_id in member_ids:
            self.groups.end_session(group_id, member_id, now)
        try:
            await self.handlers.expire()
        finally:
            self.schedule_expiry()

    def _expired(self) -> None:
        async def expire() -> None:
            try:
                await self.handlers.expire()
            finally:
                self.schedule_expiry()
        self._spawn(expire())

    # -- loading ----------------------------------------------------------------------------------

    def load(self, records: Iterable[GroupRecord]) -> None:
        """A partition's consumer groups from its records; every member's session starts now."""
        self.groups.load(records, self._timers.now_ms())
        self.schedule_expiry()

    def unload(self, partition: int) -> None:
        for group_id in [g for g in self.groups.groups if self._partition_for(g) == partition]:
            del self.groups.groups[group_id]  # its timers lapse: expire() skips members it cannot find
        self.schedule_expiry()

    def forget_all(self) -> None:
        """Every consumer group gone (a broker reset); the expiry timer follows."""
        self.groups.clear()
        self.schedule_expiry()

    # -- the one namespace ------------------------------------------------------------------------

    async def delete(self, group_id: str, *, keep_offsets: bool = False) -> None:
        """DeleteGroups of a consumer group (its offsets and its records go), and the downgrade
        of an empty one when a classic member joins (``keep_offsets``: only its records go, as
        Kafka's maybeDeleteEmptyConsumerGroup, so the classic group carries on from its commits).
        It must be empty (NON_EMPTY_GROUP)."""
        group = self.groups.groups.get(group_id)
        if group is None:
            raise KafkaApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if group.members:
            raise KafkaApiError(ErrorCode.NON_EMPTY_GROUP, f"Group {group_id} is not empty.")
        # Kafka's createGroupTombstoneRecords order: target assignment, subscription metadata, epoch.
        records = [] if keep_offsets else [GroupRecord(OffsetCommitKey(group_id, t, p), None)
                                           for t, p in self._offsets.partitions(group_id)]
        records += [GroupRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id), None),
                    GroupRecord(ConsumerGroupPartitionMetadataKey(group_id), None),
                    GroupRecord(ConsumerGroupMetadataKey(group_id), None)]
        await self._persist(group_id, records)
        for record in records[-3:]:
            self.groups.replay(record)
        if not keep_offsets:
            self._offsets.drop_group(group_id)

    # -- offsets ----------------------------------------------------------------------------------

    def check_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int, version: int, *,
                     transactional: bool = False) -> None:
        """Kafka's ``ConsumerGroup.validateOffsetCommit``. A transactional commit (TxnOffsetCommit,
        whose versions have no OffsetCommit v9 to require) is held to the member and its epoch only."""
        if member_epoch < 0 and not group.members:
            return  # an admin, or a consumer that assigns its own partitions, on an empty group
        member = group.members.get(member_id)
        if member is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID,
                                f"Member {member_id} is not a member of group {group.group_id}.")
        if not transactional and not member.uses_classic_protocol and version < MEMBER_EPOCH_COMMIT_VERSION:
            raise KafkaApiError(ErrorCode.UNSUPPORTED_VERSION, "OffsetCommit version 9 or above must be used "
                                "by members using the modern group protocol")
        _check_member_epoch(member_epoch, member.member_epoch, member.uses_classic_protocol)

    def check_fetch(self, group: ConsumerGroup, member_id: str | None, member_epoch: int) -> None:
        """Kafka's ``ConsumerGroup.validateOffsetFetch``: a fetch naming a member must come from
        that member at its current epoch."""
        if member_epoch < 0 and member_id is None:
            return
        member = group.members.get(member_id or "")
        if member is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID,
                                f"Member {member_id} is not a member of group {group.group_id}.")
        _check_member_epoch(member_epoch, member.member_epoch, member.uses_classic_protocol)

    async def commit_offsets(self, group_id: str, entries: Sequence[OffsetEntry], now_ms: int) -> None:
        """Write the commits, then keep them (only what is in ``__consumer_offsets``)."""
        if not entries:
            return
        records = [GroupRecord(OffsetCommitKey(group_id, e.topic, e.partition),
                               OffsetCommitValue(
                                   e.offset, e.leader_epoch, e.metadata,
                                   now_ms if e.commit_timestamp is None else e.commit_timestamp))
                   for e in entries]
        await self._persist(group_id, records)
        for record in records:
            key, value = record.key, record.value
            assert isinstance(key, OffsetCommitKey) and isinstance(value, OffsetCommitValue)
            self._offsets.put(key, value)

    async def expire_offsets(self, loaded: Callable[[int], bool], now_ms: int, retention_ms: int) -> None:
        """One retention pass over the consumer groups of loaded partitions."""
        for group_id, group in list(self.groups.groups.items()):
            if not loaded(self._partition_for(group_id)):
                continue
            offsets = {(t, p): value for t, p in self._offsets.partitions(group_id)
                       if (value := self._offsets.get(group_id, t, p)) is not None}
            subscribed = frozenset().union(*(self.groups.resolve(m) for m in group.members.values()))
            expiry = expire_offsets(ConsumerGroupFacts(subscribed), offsets, now_ms, retention_ms)
            try:
                if expiry.expired:
                    await self._persist(group_id, expiry_tombstones(group_id, expiry))
                    for topic, partition in expiry.expired:
                        self._offsets.delete(group_id, topic, partition)
                if expiry.all_expired and not group.members:
                    await self.delete(group_id)
            except KafkaApiError:
                continue  # written next pass; a member that joined meanwhile keeps the group

    async def remove_offsets_of_topics(self, loaded: Callable[[int], bool], topics: Collection[str]) -> None:
        """The offsets of deleted ``topics`` go from the consumer groups of loaded partitions (Kafka's
        OffsetMetadataManager.onPartitionsDeleted: tombstones only; an empty group left without
        offsets goes at the next retention pass, as Kafka's cleanup removes it)."""
        for group_id in list(self.groups.groups):
            if not loaded(self._partition_for(group_id)):
                continue
            gone = tuple(tp for tp in self._offsets.partitions(group_id) if tp[0] in topics)
            if not gone:
                continue
            try:
                await self._persist(group_id, expiry_tombstones(group_id, Expiry(gone, False)))
            except KafkaApiError:
                continue  # not written (the partition moved, or a reset): kept, as Kafka keeps them
            for topic, partition in gone:
                self._offsets.delete(group_id, topic, partition)

    async def delete_offsets(self, group: ConsumerGroup, partitions: Sequence[tuple[str, int]]
                             ) -> dict[tuple[str, int], ErrorCode]:
        """OffsetDelete: not for a topic a member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC)."""
        subscribed = frozenset().union(*(self.groups.resolve(m) for m in group.members.values()))
        codes = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed else ErrorCode.NONE
                 for tp in partitions}
        gone = [tp for tp, code in codes.items()
                if code == ErrorCode.NONE and self._offsets.get(group.group_id, *tp) is not None]
        if gone:
            await self._persist(group.group_id, [GroupRecord(OffsetCommitKey(group.group_id, t, p), None)
                                                 for t, p in gone])
            for topic, partition in gone:
                self._offsets.delete(group.group_id, topic, partition)
        return codes

    # -- admin rows -------------------------------------------------------------------------------

    def described_as_classic(self, group: ConsumerGroup) -> dict[str, Any]:
        """DescribeGroups' row for a consumer group (Kafka's ``ConsumerGroup.asDescribedGroup``):
        protocol type "consumer", the assignor as protocol data. The members' metadata and
        assignment bytes are left empty: ConsumerGroupDescribe gives their partitions."""
        return {"group_id": group.group_id, "error_code": ErrorCode.NONE, "error_message": None,
                "group_state": group.state.value, "protocol_type": CONSUMER_PROTOCOL_TYPE,
                "protocol_data": self.groups.preferred_assignor(group.members.values()),
                "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                             "client_id": m.client_id, "client_host": m.client_host,
                             "member_metadata": b"", "member_assignment": b""}
                            for m in group.members.values()]}

    def listed(self, loaded: Callable[[int], bool], states: set[str],
               types: set[str]) -> list[dict[str, Any]]:
        """ListGroups' rows for the consumer groups of loaded partitions (filters lower-cased)."""
        if types and CONSUMER not in types:
            return []
        rows = []
        for group in self.groups.groups.values():
            if not loaded(self._partition_for(group.group_id)) or group.state is GroupState.DEAD:
                continue
            if states and group.state.value.lower() not in states:
                continue
            rows.append({"group_id": group.group_id, "protocol_type": CONSUMER_PROTOCOL_TYPE,
                         "group_state": group.state.value, "group_type": CONSUMER})
        return rows


def _check_member_epoch(received: int, expected: int, classic: bool = False) -> None:
    """Kafka's ``ConsumerGroup.validateMemberEpoch``: a classic member (KIP-848's migration) sends
    its member epoch as its generation, and a wrong one is ILLEGAL_GENERATION, as for a classic group."""
    if received != expected and classic:
        raise KafkaApiError(ErrorCode.ILLEGAL_GENERATION, f"The received generation id {received} does not "
                            f"match the expected member epoch {expected}.")
    if received != expected:
        raise KafkaApiError(ErrorCode.STALE_MEMBER_EPOCH, f"The received member epoch {received} does not "
                            f"match the expected member epoch {expected}.")

