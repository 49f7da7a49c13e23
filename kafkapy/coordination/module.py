"""The broker-side consumer coordinator of seed 001 (the pre-0.9 draft), as a broker module.

Every broker serves ClusterMetadata (1000). One broker, elected through the store at
/consumers/coordinator, is the coordinator: it accepts RegisterConsumer (1001), pings every
registered consumer over the consumer's own connection (Ping, 1002), and rebalances groups by
sending StopFetcher (1003) and StartFetcher (1004) to all of a group's consumers. See
docs/coordination.md for the whole design, the error codes and the configuration.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from kafkapy.coordination.assignment import (
    Subscription,
    SubscriptionError,
    parse_label,
    partition_label,
    range_assign,
    thread_ids,
)
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.config import ConfigKey
from kafkapy.server.modules import ApiHandler, Module, RequestContext
from kafkapy.store.base import BrokerRegistration, TopicInfo, Watch
from kafkapy.store.znodes import group_id_problem
from kafkapy.validators import AtLeast

if TYPE_CHECKING:
    from kafkapy.protocol import Request, Response
    from kafkapy.server.connection import ConnectionInfo, KafkaConnection
    from kafkapy.server.services import BrokerServices

__all__ = ["CoordinationModule", "group_id_problem"]

log = logging.getLogger(__name__)


FEATURE = "kafkapy.coordinator"
NO_OFFSET = -1  # StartFetcher offset when nothing is committed: the consumer applies auto_offset_reset
_ATTRIBUTE = "kafkapy.coordination.member"



def _not_negative(value: Any) -> str | None:
    return None if value >= 0 else "must be at least 0"


CONFIG_KEYS = (
    ConfigKey("coordinator.rebalance.threads", "int", 2,
              "Rebalance handlers (asyncio tasks); a group is always handled by the same one.", AtLeast(1)),
    ConfigKey("coordinator.min.session.timeout.ms", "int", 6000,
              "Smallest session_timeout_ms a consumer may register with (else INVALID_SESSION_TIMEOUT).",
              AtLeast(1)),
    ConfigKey("coordinator.max.ping.retries", "int", 1,
              "A consumer is dead once more than this many pings in a row got no answer.", _not_negative),
    ConfigKey("coordinator.offset.commit.interval.ms", "int", 5000,
              "How often consumed offsets reported by consumers are written to the store.", AtLeast(1)),
    ConfigKey("coordinator.rebalance.max.retries", "int", 4,
              "Rebalance attempts after the first that timed out before giving up.", _not_negative),
    ConfigKey("coordinator.rebalance.backoff.ms", "int", 2000,
              "Wait between rebalance attempts.", _not_negative),
)


class RebalanceFailed(Exception):
    """A consumer did not answer StopFetcher/StartFetcher in time (or its connection went)."""


@attrs.define(eq=False)
class Member:
    group: str
    consumer_id: str
    connection: KafkaConnection
    info: ConnectionInfo
    subscription: Subscription
    auto_commit: bool
    auto_offset_reset: str
    session_timeout_ms: int
    alive: bool = True
    ping_failures: int = 0
    pinger: asyncio.Task[None] | None = None
    # What the consumer was last told in a StartFetcher: thread id -> [(topic, partition)]
    started: dict[str, list[tuple[str, int]]] | None = None

    @property
    def reply_timeout(self) -> float:
        """Seed 001: every coordinator request is answered within 2/3 of the session timeout."""
        return self.session_timeout_ms * 2 / 3000


@attrs.define(eq=False)
class Group:
    name: str
    members: dict[str, Member] = attrs.field(factory=dict)
    offsets: dict[tuple[str, int], int] = attrs.field(factory=dict)
    dirty: bool = False  # offsets not yet committed to the store
    pending: bool = False  # a rebalance is queued (the seed's rebalance bit)
    handler: int = 0
    # The subscribed (topic, partition count) the last rebalance computed, to spot topic changes.
    topology: frozenset[tuple[str, int]] = frozenset()
    # After an election: known consumers not yet re-registered -> loop time they count as dead.
    awaiting: dict[str, float] = attrs.field(factory=dict)
    timer: asyncio.TimerHandle | None = None
    recorded: dict[str, int] | None = None  # the membership last written to the store
    # The members of the rebalance attempt under way, and what tells it one of them left.
    attempt: frozenset[Member] = frozenset()
    abort: asyncio.Event = attrs.field(factory=asyncio.Event)


class CoordinationModule(Module):
    """Seed 001's consumer coordinator. Not enabled by default: ``kafkapy.modules=coordination``."""

    name = "coordination"
    config_keys = CONFIG_KEYS
    features = {FEATURE: (1, 1)}

    def __init__(self, services: BrokerServices) -> None:
        super().__init__(services)
        self.coordinator_id = -1
        self.active = False  # this broker is the coordinator
        self.groups: dict[str, Group] = {}
        self.topics: Mapping[str, TopicInfo] = {}
        self._watches: list[Watch] = []
        self._queues: list[asyncio.Queue[str]] = []
        self._tasks: list[asyncio.Task[None]] = []  # rebalance handlers and the committer
        self._electing: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()  # set once an elected coordinator has read the known groups
        self._stopping = False
        self._background: set[asyncio.Task[Any]] = set()

    def apis(self) -> Mapping[int, ApiHandler]:
        return {
            ApiKey.CLUSTER_METADATA: ApiHandler(VersionRange(0, 0), self.cluster_metadata, FEATURE, 1),
            ApiKey.REGISTER_CONSUMER: ApiHandler(VersionRange(0, 0), self.register_consumer, FEATURE, 1),
        }

    # --- lifecycle and election ----------------------------------------------------------------

    async def start(self) -> None:
        store = self.services.store
        self.topics = await asyncio.to_thread(store.topics)
        topics_changed = self._threadsafe(self._topics_changed)
        self._watches.append(await asyncio.to_thread(store.watch_topics, topics_changed))
        await asyncio.to_thread(store.elect_coordinator, self.services.broker_id)
        self._watches.append(await asyncio.to_thread(store.watch_coordinator,
                                                     self._threadsafe(self._coordinator_changed)))

    async def stop(self) -> None:
        self._stopping = True
        for watch in self._watches:
            watch.cancel()
        self._watches.clear()
        if self._electing is not None:
            self._electing.cancel()
        await self._resign(commit=True)

    def _threadsafe(self, callback: Callable[..., None]) -> Callable[..., None]:
        loop = self.services.loop

        def call(*args: Any) -> None:
            try:
                loop.call_soon_threadsafe(callback, *args)
            except RuntimeError:  # the loop is closed: the broker is gone
                pass

        return call

    def _coordinator_changed(self, coordinator_id: int) -> None:
        if self._stopping:
            return
        self.coordinator_id = coordinator_id
        me = self.services.broker_id
        if coordinator_id == -1 and (self._electing is None or self._electing.done()):
            # The holder resigned: run again (the store picks one winner).
            self._electing = self.services.loop.create_task(self._elect())
        elif coordinator_id == me and not self.active:
            self._become_coordinator()
        elif coordinator_id != me and self.active:
            self._spawn(self._resign(commit=True))

    async def _elect(self) -> None:
        try:
            await asyncio.to_thread(self.services.store.elect_coordinator, self.services.broker_id)
        except Exception:
            log.exception("broker %d: coordinator election failed", self.services.broker_id)

    def _become_coordinator(self) -> None:
        log.info("broker %d is the consumer coordinator", self.services.broker_id)
        self.active = True
        loop = self.services.loop
        threads = self.services.config["coordinator.rebalance.threads"]
        self._queues = [asyncio.Queue() for _ in range(threads)]
        self._tasks = [loop.create_task(self._rebalance_handler(queue)) for queue in self._queues]
        self._tasks.append(loop.create_task(self._committer()))
        self._ready = asyncio.Event()
        self._tasks.append(loop.create_task(self._recover(self._ready)))

    async def _recover(self, ready: asyncio.Event) -> None:
        """Seed 001, coordinator step 2: read the groups' last membership from the store and wait
        for those consumers to re-register before rebalancing. A consumer not back within its own
        session timeout (counted from now) is taken for dead, so no group waits forever."""
        store = self.services.store
        try:
            for name in await asyncio.to_thread(store.groups):
                members = await asyncio.to_thread(store.members, name)
                if not members or not self.active:
                    continue
                offsets = await asyncio.to_thread(store.offsets, name)
                now = self.services.loop.time()
                group = Group(name, offsets=offsets, handler=zlib.crc32(name.encode()) % len(self._queues),
                              awaiting={cid: now + timeout / 1000 for cid, timeout in members.items()},
                              recorded=members)
                self.groups[name] = group
                self._arm(group)
                log.info("group %s: waiting for %d known consumers to re-register", name, len(members))
        except Exception:
            log.exception("broker %d: reading the known consumer groups failed", self.services.broker_id)
        finally:
            ready.set()

    def _arm(self, group: Group) -> None:
        """Time the wait out at the earliest deadline of a consumer still awaited."""
        if group.timer is not None:
            group.timer.cancel()
            group.timer = None
        if group.awaiting:
            group.timer = self.services.loop.call_at(min(group.awaiting.values()), self._expire, group)

    def _expire(self, group: Group) -> None:
        group.timer = None
        now = self.services.loop.time()
        for consumer_id, deadline in list(group.awaiting.items()):
            if deadline <= now:
                del group.awaiting[consumer_id]
                log.info("group %s: known consumer %s did not re-register within its session timeout; "
                         "taken for dead", group.name, consumer_id)
        self._arm(group)
        if not group.awaiting and group.members:
            self._trigger(group)

    def _returned(self, group: Group, consumer_id: str) -> None:
        """A consumer registered: it is no longer awaited (the wait may be over)."""
        if group.awaiting.pop(consumer_id, None) is not None:
            self._expire(group)  # also drops whoever expired meanwhile, and re-arms

    async def _resign(self, commit: bool) -> None:
        """Stop coordinating: drop every consumer (closing its connection; it re-discovers)."""
        was_active, self.active = self.active, False
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        self._ready.set()  # registrations waiting for the recovery see that this broker resigned
        for group in self.groups.values():
            if group.timer is not None:
                group.timer.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        if commit and was_active:
            await self._commit_all()
        for group in self.groups.values():
            for member in list(group.members.values()):
                self._drop(member, close=True)
        self.groups.clear()
        if was_active:
            log.info("broker %d is no longer the consumer coordinator", self.services.broker_id)

    def _spawn(self, coroutine: Any) -> None:
        task = self.services.loop.create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- ClusterMetadata -----------------------------------------------------------------------

    def _brokers(self, listener: str) -> list[dict[str, Any]]:
        brokers = []
        for broker in sorted(self.services.cluster.brokers, key=lambda b: b.broker_id):
            endpoint = broker.endpoint(listener) or (broker.endpoints[0] if broker.endpoints else None)
            if endpoint is not None:
                brokers.append({"id": broker.broker_id, "host": endpoint.host, "port": endpoint.port})
        return brokers

    def cluster_metadata(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        coordinator = self.coordinator_id
        brokers: list[BrokerRegistration] = self.services.cluster.brokers
        if coordinator not in {b.broker_id for b in brokers}:
            coordinator = -1
        return {"error_code": ErrorCode.NONE if coordinator >= 0 else ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "coordinator_id": coordinator, "brokers_info": self._brokers(ctx.connection.listener)}

    # --- RegisterConsumer ----------------------------------------------------------------------

    async def register_consumer(self, ctx: RequestContext, request: Request) -> Mapping[str, Any]:
        body = request.body
        group_id, consumer_id = body["group_id"], body["consumer_id"]
        if not self.active:
            return {"error_code": ErrorCode.NOT_COORDINATOR}
        if not self._ready.is_set():  # just elected: the known groups are being read
            await self._ready.wait()
            if not self.active:
                return {"error_code": ErrorCode.NOT_COORDINATOR}
        problem = group_id_problem(group_id)
        if problem is not None:
            log.info("%s: RegisterConsumer %r refused: group id %s", ctx.connection.id, group_id, problem)
            return {"error_code": ErrorCode.INVALID_GROUP_ID}
        if not consumer_id:
            return {"error_code": ErrorCode.INVALID_REQUEST}
        if body["session_timeout_ms"] < self.services.config["coordinator.min.session.timeout.ms"]:
            return {"error_code": ErrorCode.INVALID_SESSION_TIMEOUT}
        try:
            subscription = Subscription.parse(body["topic_count"])
        except SubscriptionError as exc:
            log.info("%s: RegisterConsumer %s/%s refused: %s", ctx.connection.id, group_id, consumer_id, exc)
            return {"error_code": ErrorCode.INVALID_REQUEST}
        connection = self.services.connection_for(ctx.connection)
        if connection is None:  # closed meanwhile
            return {"error_code": ErrorCode.INVALID_REQUEST}
        group = self.groups.get(group_id)
        holder = group.members.get(consumer_id) if group is not None else None
        if holder is not None and holder.alive and holder.info is not ctx.connection:
            return {"error_code": ErrorCode.FENCED_INSTANCE_ID}
        if group is None:
            offsets = await asyncio.to_thread(self.services.store.offsets, group_id)
            if not self.active:
                return {"error_code": ErrorCode.NOT_COORDINATOR}
            group = self.groups.get(group_id)
            if group is None:
                group = Group(group_id, offsets=offsets,
                              handler=zlib.crc32(group_id.encode()) % len(self._queues))
                self.groups[group_id] = group
            if (other := group.members.get(consumer_id)) is not None and other.alive \
                    and other.info is not ctx.connection:
                return {"error_code": ErrorCode.FENCED_INSTANCE_ID}
        # Accepted. Seed 001 has one consumer per connection (pinged and rebalanced through it):
        # a registration as another consumer, or in another group, moves it, and the group it
        # leaves is rebalanced. Only now: a refused registration changes nothing.
        previous = ctx.connection.attributes.get(_ATTRIBUTE)
        if isinstance(previous, Member) and previous is not holder:
            self._drop(previous, close=False)
        if holder is not None:
            self._drop(holder, close=False, rebalance=False)
        member = Member(group_id, consumer_id, connection, ctx.connection, subscription, body["auto_commit"],
                        body["auto_offset_reset"], body["session_timeout_ms"])
        group.members[consumer_id] = member
        ctx.connection.attributes[_ATTRIBUTE] = member
        member.pinger = self.services.loop.create_task(self._pinger(member))
        log.info("consumer %s registered in group %s (%s)", consumer_id, group_id, ctx.connection.id)
        # Queued now, the rebalance's StopFetcher leaves after this response on the same connection.
        # (After an election, only once the last known consumer is back: see _recover.)
        self._returned(group, consumer_id)
        self._trigger(group)
        return {"error_code": ErrorCode.NONE}

    def on_close(self, connection: ConnectionInfo) -> None:
        member = connection.attributes.get(_ATTRIBUTE)
        if isinstance(member, Member):
            self._drop(member, close=False)

    def _drop(self, member: Member, close: bool, rebalance: bool = True) -> None:
        """The seed's handleConsumerFailure: stop pinging, close, unregister, rebalance the rest."""
        if not member.alive:
            return
        member.alive = False
        if member.pinger is not None and member.pinger is not asyncio.current_task():
            member.pinger.cancel()
        if member.info.attributes.get(_ATTRIBUTE) is member:
            del member.info.attributes[_ATTRIBUTE]
        if close:
            member.connection.close()
        group = self.groups.get(member.group)
        if group is not None and group.members.get(member.consumer_id) is member:
            del group.members[member.consumer_id]
            if rebalance and self.active:
                if member in group.attempt:  # seed 001, handleConsumerFailure 4: it fails directly
                    group.abort.set()
                self._trigger(group)

    # --- failure detection ---------------------------------------------------------------------

    async def _pinger(self, member: Member) -> None:
        """Ping every session_timeout/3; an answer is due within 2/3 of it. More than
        coordinator.max.ping.retries failures in a row: the consumer is dead."""
        loop = self.services.loop
        interval = member.session_timeout_ms / 3000
        retries = self.services.config["coordinator.max.ping.retries"]
        next_ping = loop.time() + interval
        while member.alive:
            await asyncio.sleep(max(0.0, next_ping - loop.time()))
            if not member.alive:
                return
            next_ping = loop.time() + interval
            try:
                response = await member.connection.request(
                    ApiKey.PING, 0, {"consumer_id": member.consumer_id, "num_retries": member.ping_failures},
                    member.reply_timeout)
            except ConnectionError:
                self._drop(member, close=False)
                return
            except Exception as exc:
                member.ping_failures += 1
                log.info("consumer %s/%s: ping %d failed: %s", member.group, member.consumer_id,
                         member.ping_failures, exc)
                if member.ping_failures > retries:
                    log.warning("consumer %s/%s is dead (%d pings unanswered)", member.group,
                                member.consumer_id, member.ping_failures)
                    self._drop(member, close=True)
                    return
                next_ping = loop.time()  # the retry goes at once
                continue
            member.ping_failures = 0
            self._record_offsets(member, response)

    def _record_offsets(self, member: Member, response: Response) -> None:
        infos = response.body.get("offset_info")
        group = self.groups.get(member.group)
        if not infos or group is None or group.members.get(member.consumer_id) is not member:
            return
        for info in infos:
            try:
                key = (info["topic"], parse_label(info["partition"]))
            except ValueError:
                continue
            if group.offsets.get(key) != info["offset"]:
                group.offsets[key] = info["offset"]
                group.dirty = True

    async def _committer(self) -> None:
        interval = self.services.config["coordinator.offset.commit.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            await self._commit_all()

    async def _commit_all(self) -> None:
        for group in list(self.groups.values()):
            await self._commit(group)

    async def _commit(self, group: Group) -> None:
        if not group.dirty:
            return
        group.dirty = False
        offsets = dict(group.offsets)
        try:
            await asyncio.to_thread(self.services.store.commit_offsets, group.name, offsets)
        except Exception:
            group.dirty = True
            log.exception("committing offsets of group %s failed", group.name)

    # --- topic changes -------------------------------------------------------------------------

    def _topics_changed(self, topics: Mapping[str, TopicInfo]) -> None:
        self.topics = topics
        if not self.active:
            return
        for group in self.groups.values():
            if group.members and self._topology(group) != group.topology:
                self._trigger(group)

    def _subscribed(self, group: Group) -> dict[str, dict[str, int]]:
        """consumer id -> {topic: streams} over the topics that exist now."""
        return {cid: m.subscription.topic_streams(self.topics) for cid, m in sorted(group.members.items())}

    def _topology(self, group: Group) -> frozenset[tuple[str, int]]:
        topics = {t for streams in self._subscribed(group).values() for t in streams}
        return frozenset((t, len(self.topics[t].partitions)) for t in topics if t in self.topics)

    # --- rebalancing ---------------------------------------------------------------------------

    def _trigger(self, group: Group) -> None:
        if group.pending or not self.active or group.awaiting:
            return
        group.pending = True
        self._queues[group.handler].put_nowait(group.name)

    async def _rebalance_handler(self, queue: asyncio.Queue[str]) -> None:
        config = self.services.config
        while True:
            name = await queue.get()
            group = self.groups.get(name)
            if group is None:
                continue
            attempts = config["coordinator.rebalance.max.retries"] + 1
            for attempt in range(attempts):
                group.pending = False
                try:
                    await self._rebalance(group)
                    break
                except RebalanceFailed as exc:
                    if group.pending:  # membership changed meanwhile: the queued rebalance takes over
                        break
                    if attempt + 1 == attempts:
                        log.error("rebalance of group %s failed after %d attempts: %s", name, attempts, exc)
                        break
                    log.info("rebalance of group %s failed (%s); retrying", name, exc)
                    await asyncio.sleep(config["coordinator.rebalance.backoff.ms"] / 1000)
                    if group.pending:
                        break
                except Exception:
                    log.exception("rebalance of group %s failed", name)
                    break

    def assignment(self, group: Group) -> dict[tuple[str, int], str]:
        """Range assignment per subscribed topic: (topic, partition) -> consumer thread id."""
        threads: dict[str, list[str]] = {}
        for consumer_id, streams in self._subscribed(group).items():
            for topic, count in streams.items():
                threads.setdefault(topic, []).extend(thread_ids(consumer_id, count))
        result: dict[tuple[str, int], str] = {}
        for topic in sorted(threads):
            for partition, thread in range_assign(self.topics[topic].partitions, threads[topic]).items():
                result[(topic, partition)] = thread
        return result

    @staticmethod
    def _portions(assignment: Mapping[tuple[str, int], str]) -> dict[str, dict[str, list[tuple[str, int]]]]:
        """Every member's share in one pass: consumer id -> thread id -> sorted (topic, partition).
        A thread id ``<id>-<n>`` names its consumer unambiguously (everything before the last dash),
        dashes in ids or not. One pass, not one per member: groups hold thousands (seed 001)."""
        portions: dict[str, dict[str, list[tuple[str, int]]]] = {}
        for key, thread in sorted(assignment.items()):
            portions.setdefault(thread.rpartition("-")[0], {}).setdefault(thread, []).append(key)
        return portions

    async def _rebalance(self, group: Group) -> None:
        members = [m for _, m in sorted(group.members.items())]
        group.attempt, group.abort = frozenset(members), asyncio.Event()
        try:
            await self._attempt(group, members)
        finally:
            group.attempt = frozenset()

    async def _attempt(self, group: Group, members: list[Member]) -> None:
        store = self.services.store
        group.topology = self._topology(group)
        assignment = self.assignment(group)
        shares = self._portions(assignment)
        portions = {m.consumer_id: shares.get(m.consumer_id, {}) for m in members}
        owners = await asyncio.to_thread(store.owners, group.name)
        if owners == assignment and all(m.started == portions[m.consumer_id] for m in members):
            log.debug("group %s: ownership unchanged, no rebalance", group.name)
            await self._record_members(group, members)  # a member owning nothing may have left
            return
        log.info("rebalancing group %s: %d consumers, %d partitions", group.name, len(members),
                 len(assignment))
        # 1. stop every consumer's fetchers; their answers carry the offsets consumed so far
        stops = await self._ask_all(group, members,
                                    lambda m: (ApiKey.STOP_FETCHER, {"consumer_id": m.consumer_id}))
        for member, response in zip(members, stops):
            member.started = None
            self._record_offsets(member, response)
        # 2. commit them
        group.dirty = True
        await self._commit(group)
        # 3. start every consumer on its new partitions
        topics = self.topics

        def start_request(member: Member) -> tuple[int, Mapping[str, Any]]:
            ownership = [{"consumer_thread_id": thread, "assigned_parts": [
                {"topic": t, "partition": partition_label(self._leader(topics, t, p), p),
                 "offset": group.offsets.get((t, p), NO_OFFSET)} for t, p in parts]}
                for thread, parts in portions[member.consumer_id].items()]
            return ApiKey.START_FETCHER, {"consumer_id": member.consumer_id, "ownership_info": ownership,
                                   "brokers_info": self._brokers(member.info.listener)}

        await self._ask_all(group, members, start_request)
        for member in members:
            member.started = portions[member.consumer_id]
        # 4. record the new ownership, and who took part: a new coordinator waits for them
        await asyncio.to_thread(store.set_owners, group.name, assignment)
        await self._record_members(group, members)
        log.info("group %s rebalanced: %d consumers, %d partitions", group.name, len(members),
                 len(assignment))
        if log.isEnabledFor(logging.DEBUG):  # the full map is a pass over the group: only on demand
            log.debug("group %s assignment: %s", group.name,
                      {m.consumer_id: sorted(k for p in portions[m.consumer_id].values() for k in p)
                       for m in members})

    async def _record_members(self, group: Group, members: Sequence[Member]) -> None:
        membership = {m.consumer_id: m.session_timeout_ms for m in members}
        if membership != group.recorded:
            await asyncio.to_thread(self.services.store.set_members, group.name, membership)
            group.recorded = membership

    @staticmethod
    def _leader(topics: Mapping[str, TopicInfo], topic: str, partition: int) -> int:
        info = topics.get(topic)
        replicas = info.partitions.get(partition, ()) if info is not None else ()
        return replicas[0] if replicas else -1

    async def _ask_all(self, group: Group, members: Sequence[Member],
                       make: Callable[[Member], tuple[int, Mapping[str, Any]]]) -> list[Response]:
        """Send one request to each consumer and wait for every answer (each within 2/3 of its
        session timeout); RebalanceFailed as soon as one does not come or reports an error, or a
        member of the attempt leaves (the seed's handleConsumerFailure step 4). The requests still
        out are given up then: their answers, if they come, are dropped."""

        async def ask(member: Member) -> Response:
            if not member.alive:
                raise RebalanceFailed(f"consumer {member.consumer_id} left")
            api_key, body = make(member)
            try:
                response = await member.connection.request(api_key, 0, body, member.reply_timeout)
            except (ConnectionError, TimeoutError) as exc:
                raise RebalanceFailed(f"consumer {member.consumer_id}: {exc}") from None
            except Exception as exc:
                raise RebalanceFailed(f"consumer {member.consumer_id}: bad answer: {exc}") from None
            if response.body.get("error_code", 0) != ErrorCode.NONE:
                raise RebalanceFailed(f"consumer {member.consumer_id} answered error "
                                      f"{response.body['error_code']}")
            return response

        if group.abort.is_set():
            raise RebalanceFailed("a consumer left during the rebalance")
        loop = self.services.loop
        asks = [loop.create_task(ask(m)) for m in members]
        aborted = loop.create_task(group.abort.wait())
        try:
            waiting: set[asyncio.Future[Any]] = {*asks, aborted}
            while waiting - {aborted}:
                done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if aborted in done:
                    raise RebalanceFailed("a consumer left during the rebalance")
                for task in done:
                    error = task.exception()
                    if error is not None:
                        raise error if isinstance(error, RebalanceFailed) else RebalanceFailed(str(error))
            return [task.result() for task in asks]
        finally:
            for task in (*asks, aborted):
                if not task.done():
                    task.cancel()
                    # It may still end with an error rather than cancelled (the answer's wait_for
                    # completing in the same step): seen then, never "exception never retrieved".
                    task.add_done_callback(_seen)
                elif not task.cancelled():
                    task.exception()  # seen: several may have failed at once


def _seen(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
