"""ShareFetch (78) and ShareAcknowledge (79), v1-2: share sessions, acquisition, acknowledgements.

Theory of operation
-------------------
Each (group, topic id, partition) a group fetches has a share-partition (share_partition.py),
made on the group's first fetch of it at the offset ``share.auto.offset.reset`` names. A
ShareFetch belongs to its member's share session (sessions.py): it applies its piggy-backed
acknowledgements first, then, for each partition of the session, reads whole batches from the
partition's log (the data plane's, PARTITION_LOGS) from the first offset it could acquire,
acquires what is AVAILABLE in them (a group with ``share.isolation.level=read_committed``
reads only below the last stable offset and archives aborted and control batches unseen:
``acquire_from_log``, kafkapy.shares.isolation), and answers the batches holding acquired
records with their AcquiredRecords ranges. With nothing to acquire it waits up to
``max_wait_ms``, acquiring again each time it is woken, by an append to a partition or by
records coming back to one (released, lock expired, their member gone), as Kafka's
DelayedShareFetch does. A partition error (this broker does not lead it) answers at once and
names the leader (KIP-951).

Acquisition locks run on one timer (the broker's clock, so a VirtualClock drives them), set to the
earliest lock deadline after every change.

Persistence (KIP-932's share coordinator, kafkapy.sharestate, reached through its persister): a
share-partition is loaded on the first fetch that needs it under the partition's current leader
epoch. Its state is read from the coordinator (initialized at ``share.auto.offset.reset`` when none
is kept, then read again, which records this leader's epoch so an older leader's writes are
fenced), so a new leader, or a restarted broker, starts where the last persisted change left the
records. Every change Kafka persists is written as the whole window (``persisted_batches``):
acknowledgements before the ShareFetch or ShareAcknowledge that carried them is answered (their
error code is the write's when it fails), releases (lock expiry, a session closed, a member gone)
in the background. Writes to one share-partition go one at a time, each with the window as it is
then. A write that fails (fenced by a newer leader, or no coordinator in time) drops the
share-partition here, so the next fetch loads what is kept instead of serving a state ahead of it.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from kafkapy.dataplane.fetch import node_endpoints
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.groups.offset_reset import EARLIEST, LATEST, OffsetReset, parse_share_offset_reset
from kafkapy.groups.timers import Timers
from kafkapy.log.base import PartitionLog
from kafkapy.protocol import Request, fit_body
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.chunks import RecordChunks
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.modules import Answer, RequestContext
from kafkapy.server.services import BrokerServices
from kafkapy.server.wakeup import Wakeup
from kafkapy.shares.isolation import READ_COMMITTED, READ_UNCOMMITTED, batch_header, undeliverable
from kafkapy.shares.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession, ShareSessions, valid_member_id
from kafkapy.shares.share_partition import (
    AckBatch,
    Acquired,
    SharePartition,
    SharePartitionLimits,
    check_acknowledgements,
)
from kafkapy.sharestate.persister import SharePersister
from kafkapy.sharestate.state import UNINITIALIZED_START_OFFSET

__all__ = ["SHARE_ACKNOWLEDGE_VERSIONS", "SHARE_FETCH_VERSIONS", "ShareFetcher", "ShareKey", "ShareLogs",
           "acquire_from_log", "batch_spans"]

SHARE_FETCH_VERSIONS = VersionRange(1, 2)
SHARE_ACKNOWLEDGE_VERSIONS = VersionRange(1, 2)
NO_LEADER_EPOCH = -1
_LOCK_TIMER = ("share-groups", "locks")
# A v2 record batch's header: baseOffset int64, batchLength int32, ... lastOffsetDelta int32 at 23.
_BATCH_HEAD = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")
_LAST_DELTA_AT = 23
_LOG_OVERHEAD = 12  # baseOffset + batchLength
_NO_LIMIT = 2**31 - 1  # MaxRecords 0 or absent, MaxBytes' default
BATCH_OPTIMIZED = 0  # ShareFetch v2's ShareAcquireMode: 0 whole batches (v1's only way), 1 record limit
_LEADER_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})
# (group id, topic id, partition): by id, so a topic deleted and made again starts afresh
ShareKey = tuple[str, uuid.UUID, int]
#: The broker's authorizer, as (context, operation, resource type, name) -> allowed.
Allowed = Callable[[RequestContext, str, str, str], bool]


@runtime_checkable
class ShareLogs(Protocol):
    """What the data plane's partition registry offers a share fetch."""

    def leader_log(self, topic: str, partition: int) -> PartitionLog: ...
    def leadership(self, topic: str, partition: int) -> tuple[int, int]: ...
    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...
    def on_append(self, topic: str, partition: int, callback: Callable[[], None]) -> Callable[[], None]: ...


def batch_spans(chunks: Sequence[memoryview | bytes]) -> Iterator[tuple[int, int, memoryview]]:
    """(first offset, last offset, bytes) of each whole batch in a log read's chunks."""
    for chunk in chunks:
        view = memoryview(chunk)
        at = 0
        while at + _LAST_DELTA_AT + _LAST_DELTA.size <= len(view):
            base, length = _BATCH_HEAD.unpack_from(view, at)
            (delta,) = _LAST_DELTA.unpack_from(view, at + _LAST_DELTA_AT)
            end = at + _LOG_OVERHEAD + length
            if length <= 0 or end > len(view):
                return  # the log hands out whole, checked batches: a part of one is never acquired
            yield base, base + delta, view[at:end]
            at = end


def acquire_from_log(partition: SharePartition, log: PartitionLog, member_id: str, now_ms: int,
                     max_records: int, max_bytes: int, *, whole_batches: bool, read_committed: bool
                     ) -> tuple[list[Acquired], list[tuple[int, int, memoryview]], bool]:
    """Read whole batches from the partition's first acquirable offset and acquire from them: the
    acquired ranges, the batches read, and whether records were archived unseen.

    read_uncommitted reads up to the high watermark. read_committed reads up to the last stable
    offset, so an open transaction holds delivery at its first offset until it ends, and archives
    the aborted and control batches it reads (kafkapy.shares.isolation); when a read held nothing
    but those, it reads on from past them, so one fetch is not spent on a run of aborted batches."""
    archived = False
    while True:
        start = partition.next_available()
        limit = log.last_stable_offset if read_committed else log.high_watermark
        if start >= limit:
            return [], [], archived
        read = log.read(start, max_bytes, max_offset=limit, min_one_batch=True,
                        aborted_transactions=read_committed)
        spans = list(batch_spans(read.chunks))
        skipped: set[tuple[int, int]] = set()
        if read_committed:
            headers = [header for _, _, view in spans if (header := batch_header(view)) is not None]
            skipped = undeliverable(headers, read.aborted_transactions or ())
        acquired = partition.acquire(member_id, [(first, last) for first, last, _ in spans], now_ms,
                                     max_records, whole_batches=whole_batches, undeliverable=skipped)
        archived = archived or bool(skipped)
        if acquired or not skipped or partition.next_available() <= start:
            return acquired, spans, archived


@attrs.frozen
class _Limits:
    """What one ShareFetch may acquire: MaxRecords, MaxBytes, and whether batches go whole."""

    max_records: int
    max_bytes: int
    whole_batches: bool


class ShareFetcher:
    """The share sessions and share-partitions of one broker, and the two APIs over them."""

    def __init__(self, services: BrokerServices, timers: Timers, limits: SharePartitionLimits,
                 auto_offset_reset: str, allowed: Allowed) -> None:
        self.services = services
        self.timers = timers
        self.limits = limits
        self.auto_offset_reset = auto_offset_reset
        self._allowed = allowed
        # A group's own value of a GROUP config key (kafkapy.groups.group_configs), None when the
        # broker has none to give: the broker-wide settings above stand.
        self.group_setting: Callable[[str, str], Any] | None = None
        self._group_limits: dict[int, SharePartitionLimits] = {}
        self.sessions = ShareSessions()
        self.partitions: dict[ShareKey, SharePartition] = {}
        self._returned: dict[ShareKey, set[Wakeup]] = {}  # fetches waiting for records back
        self.logs: ShareLogs | None = None  # the data plane's, set once it has started
        # The share coordinator's persister, set at start when a share coordinator module runs;
        # without one, share-partitions live in memory only (made at share.auto.offset.reset).
        self.persister: SharePersister | None = None
        self._loaded: dict[ShareKey, tuple[int, int]] = {}  # -> (leader epoch, state epoch) loaded under
        self._key_locks: dict[ShareKey, asyncio.Lock] = {}  # one load or write at a time per key
        self._writes: set[asyncio.Task[None]] = set()  # background writes (releases)
        # Told of each share-partition whose state the coordinator now keeps (loaded or made):
        # the group's ShareGroupStatePartitionMetadata (kafkapy.shares.group_records).
        self.on_initialized: Callable[[ShareKey], None] | None = None

    def forget_all(self) -> None:
        self.sessions.clear()
        self.partitions.clear()
        self._loaded.clear()
        self.timers.cancel(_LOCK_TIMER)
        self.cancel_writes()

    def cancel_writes(self) -> None:
        """Background writes still under way stop (the broker stops, or forgets everything)."""
        for task in list(self._writes):
            task.cancel()

    def member_gone(self, group_id: str, member_id: str, *, end_session: bool) -> None:
        """A member left or was fenced: what it held goes back. A fenced member's share session
        ends too; one that left closes its own (a last ShareAcknowledge at epoch -1)."""
        if end_session:
            self.sessions.drop_member(group_id, member_id)
        now = self.timers.now_ms()
        for key, partition in self.partitions.items():
            if key[0] == group_id and partition.release_member(member_id, now):
                self._records_back(key)
                self._persist_later(key)
        self._schedule_locks()

    def reset_of(self, group_id: str) -> str:
        """Where the group starts on a partition it never consumed (share.auto.offset.reset)."""
        if self.group_setting is None:
            return self.auto_offset_reset
        reset: str = self.group_setting(group_id, "share.auto.offset.reset")
        return reset

    def limits_of(self, group_id: str) -> SharePartitionLimits:
        """The broker's share-partition limits with the group's share.record.lock.duration.ms."""
        if self.group_setting is None:
            return self.limits
        lock_ms = int(self.group_setting(group_id, "share.record.lock.duration.ms"))
        if lock_ms == self.limits.lock_duration_ms:
            return self.limits
        limits = self._group_limits.get(lock_ms)
        if limits is None:
            limits = self._group_limits[lock_ms] = attrs.evolve(self.limits, lock_duration_ms=lock_ms)
        return limits

    def isolation_of(self, group_id: str) -> str:
        """The group's share.isolation.level (Kafka has no broker-wide key: read_uncommitted)."""
        if self.group_setting is None:
            return READ_UNCOMMITTED
        level: str = self.group_setting(group_id, "share.isolation.level")
        return level

    def high_watermark(self, topic: str, index: int) -> int | None:
        """The partition's, when this broker leads it (for DescribeShareGroupOffsets' lag)."""
        if self.logs is None:
            return None
        try:
            return self.logs.leader_log(topic, index).high_watermark
        except KafkaApiError:
            return None

    # -- locks ------------------------------------------------------------------------------------

    def _schedule_locks(self) -> None:
        deadlines = [d for p in self.partitions.values() if (d := p.next_lock_deadline()) is not None]
        if not deadlines:
            self.timers.cancel(_LOCK_TIMER)
            return
        self.timers.set(_LOCK_TIMER, min(deadlines) - self.timers.now_ms(), self._locks_expired)

    def _locks_expired(self) -> None:
        now = self.timers.now_ms()
        for key, partition in self.partitions.items():
            if partition.expire_locks(now):
                self._records_back(key)
                self._persist_later(key)
        self._schedule_locks()

    def _records_back(self, key: ShareKey) -> None:
        for event in self._returned.get(key, ()):
            event.set()

    # -- ShareFetch -------------------------------------------------------------------------------

    async def share_fetch(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        version = ctx.api_version
        group_id, member_id, epoch = body.get("group_id"), body.get("member_id"), body["share_session_epoch"]
        topics = body.get("topics") or []
        renewing = version >= 2 and bool(body.get("is_renew_ack"))
        try:
            self._check_caller(ctx, group_id, member_id)
            if renewing:
                _check_renew_only(body)
            session = self._session_for(group_id, member_id, epoch,
                                        has_acks=any(p.get("acknowledgement_batches") for t in topics
                                                     for p in t["partitions"]),
                                        connection_id=ctx.connection.id)
        except KafkaApiError as refusal:
            if refusal.code == ErrorCode.SHARE_SESSION_LIMIT_REACHED:
                await self._idle(body["max_wait_ms"] / 1000)  # Kafka's IdleShareFetchTimerTask
            return _fetch_refused(refusal)
        assert group_id is not None and member_id is not None
        rows: dict[tuple[uuid.UUID, int], dict[str, Any]] = {}
        now = self.timers.now_ms()
        for topic in topics:
            for p in topic["partitions"]:
                key = (topic["topic_id"], p["partition_index"])
                row = rows[key] = self._row(key[1])
                if epoch != FINAL_EPOCH:
                    session.partitions.add(key)
                batches = p.get("acknowledgement_batches") or []
                if batches:
                    code, message = await self._acknowledge(ctx, group_id, member_id, key, batches, now,
                                                            renew_allowed=renewing)
                    row["acknowledge_error_code"], row["acknowledge_error_message"] = code, message
        for forgotten in body.get("forgotten_topics_data") or []:
            for index in forgotten["partitions"]:
                self._forget(session, (forgotten["topic_id"], index))
        if epoch == FINAL_EPOCH:
            self._close(session)
        elif not renewing:  # KIP-1222: a renewing fetch only acknowledges, so the locks it renewed hold
            asked = body.get("max_records", 0) if version >= 1 else 0
            max_records = asked if asked > 0 else _NO_LIMIT
            max_bytes = body.get("max_bytes", _NO_LIMIT)
            limits = _Limits(max_records, max_bytes,
                             body.get("share_acquire_mode", BATCH_OPTIMIZED) == BATCH_OPTIMIZED)
            await self._load_all(ctx, session, rows)
            fetched = self._acquire_all(ctx, session, rows, limits)
            if not fetched and not _errors(rows) and body["max_wait_ms"] > 0:
                await self._wait_and_acquire(ctx, session, rows, limits, body["max_wait_ms"] / 1000)
        self._schedule_locks()
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "acquisition_lock_timeout_ms": self.limits_of(group_id).lock_duration_ms,
                "responses": _by_topic(rows), "node_endpoints": self._leader_hints(ctx, rows)}

    def _check_caller(self, ctx: RequestContext, group_id: str | None, member_id: str | None) -> None:
        """Kafka's first checks of ShareFetch and ShareAcknowledge: READ on the group, then a member
        id of 1 to 36 characters."""
        if not self._allowed(ctx, "READ", "GROUP", group_id or ""):
            raise KafkaApiError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if not valid_member_id(member_id):
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, "Invalid member id in the request.")

    def _session_for(self, group_id: str | None, member_id: str | None, epoch: int, *,
                     has_acks: bool, may_open: bool = True, connection_id: str | None = None) -> ShareSession:
        """The request's share session (which only a ShareFetch, ``may_open``, opens, on the
        connection it came on)."""
        if not group_id or member_id is None:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, "A share request needs a group id.")
        if epoch == INITIAL_EPOCH:
            if not may_open:
                raise KafkaApiError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                    "A share session cannot be opened by ShareAcknowledge.")
            if has_acks:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                                    "Acknowledge data present on initial epoch of a share session.")
            session, replaced = self.sessions.open(group_id, member_id, connection_id)
            if replaced is not None:
                self._release(replaced)
            return session
        return self.sessions.continue_session(group_id, member_id, epoch)

    def _row(self, index: int) -> dict[str, Any]:
        return {"partition_index": index, "error_code": ErrorCode.NONE, "error_message": None,
                "acknowledge_error_code": ErrorCode.NONE, "acknowledge_error_message": None,
                "current_leader": {"leader_id": -1, "leader_epoch": NO_LEADER_EPOCH}, "records": b"",
                "acquired_records": []}

    def _reset_offset(self, group_id: str, log: PartitionLog) -> int:
        """Kafka's SharePartition.startOffsetDuringInitialization: the log start, the high
        watermark, or the first record written at or after now less the duration (a ListOffsets by
        timestamp read_uncommitted); OFFSET_NOT_AVAILABLE while there is none, so the partition
        starts once one is written (Kafka's answer, the next fetch trying again)."""
        try:
            reset = parse_share_offset_reset(self.reset_of(group_id))
        except ValueError:  # the broker checked it when it was set: a value stored by hand
            reset = OffsetReset(LATEST)
        if reset.kind == EARLIEST:
            return log.log_start_offset
        if reset.kind == LATEST:
            return log.high_watermark
        timestamp = reset.timestamp_ms(self.timers.wall_ms())
        found = log.offset_for_timestamp(timestamp)
        if found is None or found.offset >= log.high_watermark:
            raise KafkaApiError(ErrorCode.OFFSET_NOT_AVAILABLE, f"Offset for timestamp {timestamp} not "
                                "found: no record at or after it.")
        return found.offset

    def _share_partition(self, key: ShareKey, log: PartitionLog, leader_epoch: int) -> SharePartition | None:
        """The share-partition, loaded under ``leader_epoch``; None when it is not (the next
        fetch loads it). Without a persister it is made here at share.auto.offset.reset."""
        partition = self.partitions.get(key)
        if self.persister is not None:
            loaded = self._loaded.get(key)
            if partition is None or loaded is None or loaded[0] != leader_epoch:
                return None
        elif partition is None:
            partition = self.partitions[key] = SharePartition(self._reset_offset(key[0], log), self.limits)
        partition.limits = self.limits_of(key[0])  # the group's lock duration, as it is now
        partition.move_start(log.log_start_offset)
        return partition

    # -- persistence (the share coordinator) ------------------------------------------------------

    def _key_lock(self, key: ShareKey) -> asyncio.Lock:
        lock = self._key_locks.get(key)
        if lock is None:
            lock = self._key_locks[key] = asyncio.Lock()
        return lock

    async def _load_all(self, ctx: RequestContext, session: ShareSession,
                        rows: dict[tuple[uuid.UUID, int], dict[str, Any]]) -> None:
        """Load the session's share-partitions not loaded under their leader's current epoch; a
        partition that cannot be loaded answers the coordinator's error."""
        if self.persister is None or self.logs is None:
            return
        for topic_id, index in sorted(session.partitions, key=lambda k: (str(k[0]), k[1])):
            key = (session.group_id, topic_id, index)
            try:
                name, log = self._resolve(ctx, (topic_id, index))
                epoch = self.logs.leadership(name, index)[1]
                async with self._key_lock(key):
                    loaded = self._loaded.get(key)
                    if loaded is None or loaded[0] != epoch or key not in self.partitions:
                        await self._load(key, log, epoch)
            except KafkaApiError as refusal:
                row = rows.setdefault((topic_id, index), self._row(index))
                row["error_code"], row["error_message"] = refusal.code, refusal.message

    async def _load(self, key: ShareKey, log: PartitionLog, leader_epoch: int) -> None:
        """Kafka's SharePartition.initialize: the state the coordinator keeps, initialized at
        share.auto.offset.reset when it keeps none."""
        assert self.persister is not None
        self._loaded.pop(key, None)
        self.partitions.pop(key, None)
        state = await self.persister.read(key, leader_epoch)
        if state.start_offset == UNINITIALIZED_START_OFFSET:
            await self.persister.initialize(key, state.state_epoch, self._reset_offset(key[0], log))
            state = await self.persister.read(key, leader_epoch)
        self.partitions[key] = SharePartition.restored(state.start_offset, state.batches,
                                                       self.limits_of(key[0]))
        self._loaded[key] = (leader_epoch, state.state_epoch)
        if self.on_initialized is not None:
            self.on_initialized(key)

    async def _persist(self, key: ShareKey) -> None:
        """Write the share-partition's window; KafkaApiError when the coordinator refused it (the
        share-partition is dropped here then)."""
        if self.persister is None:
            return
        async with self._key_lock(key):
            partition, loaded = self.partitions.get(key), self._loaded.get(key)
            if partition is None or loaded is None:
                return
            leader_epoch, state_epoch = loaded
            try:
                await self.persister.write(key, state_epoch, leader_epoch, partition.start_offset,
                                           partition.persisted_batches())
            except KafkaApiError:
                if self.partitions.get(key) is partition:
                    del self.partitions[key]
                    self._loaded.pop(key, None)
                raise

    def forget_partition(self, key: ShareKey) -> None:
        """Its state changed at the coordinator (admin APIs): the next fetch loads it again."""
        self.partitions.pop(key, None)
        self._loaded.pop(key, None)

    def _persist_later(self, key: ShareKey) -> None:
        """A release (lock expiry, session closed, member gone): written in the background."""
        if self.persister is None:
            return
        task = self.services.loop.create_task(self._persist_quietly(key))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _persist_quietly(self, key: ShareKey) -> None:
        try:
            await self._persist(key)
        except KafkaApiError as refusal:
            self.services.log.info("share-partition %s not persisted: %s", key, refusal.code.name)

    def _resolve(self, ctx: RequestContext, key: tuple[uuid.UUID, int]) -> tuple[str, PartitionLog]:
        """The topic's name and the partition's log, or KafkaApiError with the partition's error."""
        logs = self.logs
        if logs is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "This broker serves no partition logs.")
        name = logs.topic_name(key[0])
        if name is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
        if not self._allowed(ctx, "READ", "TOPIC", name):
            raise KafkaApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        return name, logs.leader_log(name, key[1])

    def _acquire_all(self, ctx: RequestContext, session: ShareSession,
                     rows: dict[tuple[uuid.UUID, int], dict[str, Any]], limits: _Limits) -> int:
        """Acquire from each partition of the session; answers how many records were acquired."""
        max_records, max_bytes = limits.max_records, limits.max_bytes
        acquired_total = 0
        now = self.timers.now_ms()
        for key in sorted(session.partitions, key=lambda k: (str(k[0]), k[1])):
            if acquired_total >= max_records or max_bytes <= 0:
                break
            try:
                name, log = self._resolve(ctx, key)
                epoch = self._leader(name, key[1])["leader_epoch"]
                share_key = (session.group_id, *key)
                partition = self._share_partition(share_key, log, epoch)
                if partition is None:
                    continue
                acquired, spans, archived = acquire_from_log(
                    partition, log, session.member_id, now, max_records - acquired_total, max_bytes,
                    whole_batches=limits.whole_batches,
                    read_committed=self.isolation_of(session.group_id) == READ_COMMITTED)
                if archived:
                    self._persist_later(share_key)
            except KafkaApiError as refusal:
                row = rows.setdefault(key, self._row(key[1]))
                row["error_code"], row["error_message"] = refusal.code, refusal.message
                continue
            if not acquired:
                continue
            kept = [view for first, last, view in spans if _overlaps(first, last, acquired)]
            row = rows.setdefault(key, self._row(key[1]))
            row["records"] = RecordChunks(kept)
            row["acquired_records"] = [{"first_offset": a.first_offset, "last_offset": a.last_offset,
                                        "delivery_count": a.delivery_count} for a in acquired]
            row["current_leader"] = self._leader(name, key[1])
            acquired_total += sum(a.last_offset - a.first_offset + 1 for a in acquired)
            max_bytes -= row["records"].size
        return acquired_total

    def _leader_hints(self, ctx: RequestContext, rows: Mapping[tuple[uuid.UUID, int], dict[str, Any]]
                      ) -> list[dict[str, Any]]:
        """KIP-951, as Fetch does it: a partition refused for leadership names its leader now, and
        the response lists that broker's endpoint, so the client need not ask Metadata first."""
        leaders: set[int] = set()
        for (topic_id, index), row in rows.items():
            codes = {row.get("error_code"), row.get("acknowledge_error_code")}
            name = None if self.logs is None else self.logs.topic_name(topic_id)
            if name is None or not codes & _LEADER_ERRORS:
                continue
            try:
                row["current_leader"] = self._leader(name, index)
            except KafkaApiError:
                continue
            leaders.add(row["current_leader"]["leader_id"])
        return node_endpoints(self.services, ctx, leaders)

    def _leader(self, topic: str, index: int) -> dict[str, int]:
        assert self.logs is not None
        leader, epoch = self.logs.leadership(topic, index)
        return {"leader_id": leader, "leader_epoch": epoch}

    async def _wait_and_acquire(self, ctx: RequestContext, session: ShareSession,
                                rows: dict[tuple[uuid.UUID, int], dict[str, Any]], limits: _Limits,
                                max_wait: float) -> None:
        """Kafka's DelayedShareFetch: acquire again on each append to a session partition, each
        time records come back to one (released, lock expired), and on each change of the cluster
        view (a partition that moved to another leader or was deleted then answers its error at
        once), until some are acquired, a partition answers an error, or ``max_wait`` seconds
        passed."""
        loop = self.services.loop
        deadline = loop.time() + max_wait
        woken = Wakeup()
        removers: list[Callable[[], None]] = []
        keys: list[ShareKey] = []
        logs = self.logs
        for topic_id, index in session.partitions:
            name = None if logs is None else logs.topic_name(topic_id)
            if name is None or logs is None:
                continue
            removers.append(logs.on_append(name, index, woken.set))
            key = (session.group_id, topic_id, index)
            keys.append(key)
            self._returned.setdefault(key, set()).add(woken)
        removers.append(self.services.cluster.wake_on_change(loop, woken))
        removers.append(self.services.on_stop(woken.set))
        try:
            while (left := deadline - loop.time()) > 0:
                if not await woken.wait(left) or self.services.stopping:
                    return
                woken.clear()
                if self._acquire_all(ctx, session, rows, limits) or _errors(rows):
                    return
        finally:
            for remove in removers:
                remove()
            for key in keys:
                waiting = self._returned.get(key)
                if waiting is not None:
                    waiting.discard(woken)
                    if not waiting:
                        del self._returned[key]

    async def _idle(self, seconds: float) -> None:
        """Wait out a fetch's MaxWaitMs doing nothing (or until the broker stops), so a member
        refused a session does not come straight back."""
        woken = Wakeup()
        remove = self.services.on_stop(woken.set)
        try:
            await woken.wait(max(seconds, 0.0))
        finally:
            remove()

    def connection_closed(self, connection_id: str) -> None:
        """Kafka's ShareSessionCache on a disconnect: the sessions the connection opened end and
        their members' records go back now, not when their locks run out."""
        for session in self.sessions.closed_by(connection_id):
            self._release(session)
        self._schedule_locks()

    def _forget(self, session: ShareSession, key: tuple[uuid.UUID, int]) -> None:
        session.partitions.discard(key)
        self._release_partition(session, key)

    def _close(self, session: ShareSession) -> None:
        """Epoch -1: the session is gone (sessions.py removed it); what it held goes back."""
        self._release(session)

    def _release(self, session: ShareSession) -> None:
        for key in list(session.partitions):
            self._release_partition(session, key)

    def _release_partition(self, session: ShareSession, key: tuple[uuid.UUID, int]) -> None:
        share_key = (session.group_id, *key)
        partition = self.partitions.get(share_key)
        if partition is not None and partition.release_member(session.member_id, self.timers.now_ms()):
            self._records_back(share_key)
            self._persist_later(share_key)

    # -- acknowledgements -------------------------------------------------------------------------

    async def _acknowledge(self, ctx: RequestContext, group_id: str, member_id: str,
                           key: tuple[uuid.UUID, int], batches: Sequence[Mapping[str, Any]],
                           now: int, *, renew_allowed: bool) -> tuple[ErrorCode, str | None]:
        """One partition's acknowledgements, in Kafka's order (KafkaApis.handleAcknowledgements):
        the topic id, the batches' form (INVALID_REQUEST), the topic's READ and its leader, the
        share-partition this broker holds (UNKNOWN_TOPIC_OR_PARTITION when none), then all the
        batches or none of them; what changed is persisted before the answer, and the refusal, or
        the write's, is the partition's acknowledge error."""
        share_key = (group_id, *key)
        try:
            if self.logs is not None and self.logs.topic_name(key[0]) is None:
                raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
            acks = [AckBatch(b["first_offset"], b["last_offset"], tuple(b["acknowledge_types"] or ()))
                    for b in batches]
            check_acknowledgements(acks, renew_allowed=renew_allowed)
            name, _ = self._resolve(ctx, key)
            if not acks:
                return ErrorCode.NONE, None
            partition = self.partitions.get(share_key)
            loaded = self._loaded.get(share_key)
            if partition is None or (self.persister is not None and (
                    loaded is None or loaded[0] != self._leader(name, key[1])["leader_epoch"])):
                raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                    "The share group has no share-partition of it on this broker.")
            partition.limits = self.limits_of(group_id)
            partition.acknowledge_batches(member_id, acks, now)
        except KafkaApiError as refusal:
            return ErrorCode(refusal.code), refusal.message
        self._records_back(share_key)
        try:
            await self._persist(share_key)
        except KafkaApiError as refusal:
            return ErrorCode(refusal.code), refusal.message
        return ErrorCode.NONE, None

    async def share_acknowledge(self, ctx: RequestContext, request: Request) -> Answer:
        body = request.body
        group_id, member_id, epoch = body.get("group_id"), body.get("member_id"), body["share_session_epoch"]
        try:
            self._check_caller(ctx, group_id, member_id)
            session = self._session_for(group_id, member_id, epoch, has_acks=False, may_open=False)
        except KafkaApiError as refusal:
            return fit_body(ApiKey.SHARE_ACKNOWLEDGE, "response", ctx.api_version, {
                "throttle_time_ms": 0, "error_code": refusal.code, "error_message": refusal.message,
                "acquisition_lock_timeout_ms": self.limits_of(group_id or "").lock_duration_ms,
                "responses": [],
                "node_endpoints": []})
        assert group_id is not None and member_id is not None
        now = self.timers.now_ms()
        rows: dict[tuple[uuid.UUID, int], dict[str, Any]] = {}
        for topic in body.get("topics") or []:
            for p in topic["partitions"]:
                key = (topic["topic_id"], p["partition_index"])
                code, message = await self._acknowledge(
                    ctx, group_id, member_id, key, p.get("acknowledgement_batches") or [], now,
                    renew_allowed=ctx.api_version >= 2 and bool(body.get("is_renew_ack")))
                rows[key] = {"partition_index": key[1], "error_code": code, "error_message": message,
                             "current_leader": {"leader_id": -1, "leader_epoch": NO_LEADER_EPOCH}}
        if epoch == FINAL_EPOCH:
            self._close(session)
        self._schedule_locks()
        endpoints = self._leader_hints(ctx, rows)
        return fit_body(ApiKey.SHARE_ACKNOWLEDGE, "response", ctx.api_version, {
            "throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "acquisition_lock_timeout_ms": self.limits_of(group_id).lock_duration_ms,
            "responses": _by_topic(rows),
            "node_endpoints": endpoints})


def _check_renew_only(body: Mapping[str, Any]) -> None:
    """KIP-1222: a ShareFetch with IsRenewAck carries acknowledgements only, so its byte, record and
    wait limits must be 0 (KafkaApis: INVALID_REQUEST naming each that is not)."""
    wrong = [f"{field} must be set to 0" for field, name in (
        ("maxBytes", "max_bytes"), ("minBytes", "min_bytes"), ("maxRecords", "max_records"),
        ("maxWaitMs", "max_wait_ms")) if body.get(name)]
    if wrong:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, ", ".join(wrong) + ", if isRenewAck is true.")


def _errors(rows: Mapping[tuple[uuid.UUID, int], Mapping[str, Any]]) -> bool:
    """A partition answered an error: the fetch goes at once, as Fetch's does."""
    return any(row["error_code"] != ErrorCode.NONE for row in rows.values())


def _overlaps(first: int, last: int, acquired: Sequence[Acquired]) -> bool:
    return any(a.first_offset <= last and first <= a.last_offset for a in acquired)


def _by_topic(rows: Mapping[tuple[uuid.UUID, int], dict[str, Any]]) -> list[dict[str, Any]]:
    topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (topic_id, _), row in rows.items():
        topics.setdefault(topic_id, []).append(row)
    return [{"topic_id": topic_id, "partitions": partitions} for topic_id, partitions in topics.items()]


def _fetch_refused(refusal: KafkaApiError) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": refusal.code, "error_message": refusal.message,
            "acquisition_lock_timeout_ms": 0, "responses": [], "node_endpoints": []}
