"""How the ZooKeeper store watches: one shared watch per kind of state, notification queues, and
the readers that read again only the znodes whose watches fired.

They run on the store's worker thread and know the store only through ``WatchedStore``, the few
calls a watch makes (read, report an error, queue the next refresh)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType

from kafkapy.store.base import CorruptMetadata, PartitionState, StoreError, TopicInfo, Watch
from kafkapy.store.persistent import PersistentMap
from kafkapy.store.znodes import TOPICS, decode_partition_state

__all__ = ["ChangeWatch", "PartitionStatesReader", "StateWatch", "Subscription", "TopicsReader",
           "WatchGroup", "WatchedStore"]

log = logging.getLogger("kafkapy.store.zookeeper")  # the store's logger: what operators filter on
_T = TypeVar("_T")


class WatchedStore(Protocol):
    """What a watch asks of its ZooKeeperStore."""

    connection_drops: int

    def _zk(self) -> Any: ...
    def _connected(self) -> bool: ...
    def _full(self, path: str) -> str: ...
    def _errors(self, path: str) -> AbstractContextManager[None]: ...
    def _json(self, path: str, data: bytes) -> dict[str, Any]: ...
    def _readable(self, path: str, data: bytes, decode: Callable[[str, bytes], _T]) -> _T | None: ...
    def _decode_topic(self, path: str, data: bytes) -> TopicInfo: ...
    def _submit(self, task: Callable[[], None]) -> None: ...
    def _unsubscribe(self, subscription: Subscription) -> None: ...
    def _forget(self, watch: ChangeWatch) -> None: ...
    def _changes(self, changes: str, prefix: str, watch: Any) -> list[tuple[int, str]]: ...
    def _purge_changes(self, changes: str, prefix: str) -> None: ...


class StateWatch:
    """One ZooKeeper watch on one kind of state (the brokers, the topics, /controller...), shared by
    every callback on it. ``compute(trigger)`` reads the state once per change, leaving ZooKeeper
    watches that call ``trigger``; the callbacks then run in the order they subscribed (the internal
    election first), each only after the ones before it have seen the state. So a watch set later
    (a request waiting for a topic) never sees a state before an earlier one (the broker's view)."""

    def __init__(self, store: WatchedStore, name: str, compute: Callable[[Any], tuple[Any, ...]]) -> None:
        self.store = store
        self.name = name
        self.compute = compute
        self.subscribers: list[Subscription] = []  # changed under the store's lock
        self.lock = threading.RLock()
        self.last: tuple[Any, ...] | None = None
        self.cancelled = False

    def trigger(self, event: Any) -> None:
        # EventType.NONE: kazoo dropped its watches on a connection loss; the reconnect refreshes.
        if not self.cancelled and getattr(event, "type", None) != EventType.NONE:
            self.store._submit(lambda: self.refresh(force=False))

    def start(self, subscription: Subscription) -> None:
        """A new subscriber's first call: the current state, without calling the others again."""
        with self.lock:
            if self.last is None:
                subscription.ready = True
                self.refresh(force=True)
            else:
                subscription.ready = True
                subscription.deliver(self.last)

    def refresh(self, force: bool) -> None:
        with self.lock:
            if self.cancelled:
                return
            try:
                state = self.compute(self.trigger)
            except CorruptMetadata as exc:
                log.error("watch on %s: %s", self.name, exc)
                return
            except StoreError as exc:
                if self.store._connected():
                    log.error("watch on %s: %s", self.name, exc)
                return  # not connected: the reconnect refreshes every watch
            if not force and state == self.last:
                return
            self.last = state
            for subscription in list(self.subscribers):
                if subscription.ready:
                    subscription.deliver(state)


class Subscription:
    """One ``watch_*`` call's callback on a shared StateWatch; ``cancel()`` unsubscribes it."""

    def __init__(self, watch: StateWatch, callback: Callable[..., None]) -> None:
        self.watch = watch
        self.callback = callback
        self.ready = False  # first called by StateWatch.start, never before
        self.cancelled = False

    def deliver(self, state: tuple[Any, ...]) -> None:
        if self.cancelled:
            return
        try:
            self.callback(*state)
        except Exception:
            log.exception("watch callback on %s failed (ignored)", self.watch.name)

    def cancel(self) -> None:
        self.cancelled = True
        self.watch.store._unsubscribe(self)


class ChangeWatch:
    """A notification queue (/config/changes, /kafka-acl-changes...): every notification with a
    higher sequence number than the last one seen. Notifications are persistent, so none is missed
    across a session loss. Each has its own ZooKeeper watch: what it has seen is its own.
    ``read(path)`` turns a notification into the callback's argument (None: nothing to report)."""

    def __init__(self, store: WatchedStore, changes: str, prefix: str, read: Callable[[str], Any],
                 callback: Callable[[Any], None]) -> None:
        self.store = store
        self.changes = changes
        self.prefix = prefix
        self.read = read
        self.name = store._full(changes)
        self.callback = callback
        self.lock = threading.RLock()
        self.cancelled = False
        self.seen = -1

    def cancel(self) -> None:
        self.cancelled = True
        self.store._forget(self)

    def trigger(self, event: Any) -> None:
        if not self.cancelled and getattr(event, "type", None) != EventType.NONE:
            self.store._submit(lambda: self.refresh(force=False))

    def prime(self) -> None:
        self.seen = max((seq for seq, _ in self.store._changes(self.changes, self.prefix, None)), default=-1)

    def refresh(self, force: bool) -> None:
        with self.lock:
            if self.cancelled:
                return
            try:
                queued = self.store._changes(self.changes, self.prefix, self.trigger)
                pending = [(seq, node) for seq, node in queued if seq > self.seen]
                for seq, node in pending:
                    path = f"{self.changes}/{node}"
                    try:
                        changed = self.read(path)
                    except CorruptMetadata as exc:
                        log.error("change notification: %s", exc)
                        self.seen = seq
                        continue
                    self.seen = seq  # only once read: a connection loss leaves it for the next round
                    if changed is None:
                        continue
                    try:
                        self.callback(changed)
                    except Exception:
                        log.exception("change notification watch callback failed (ignored)")
                self.store._purge_changes(self.changes, self.prefix)
            except StoreError as exc:
                if self.store._connected():
                    log.error("watch on %s: %s", self.name, exc)


class WatchGroup:
    """Several watches cancelled as one (the ACLs' two notification queues)."""

    def __init__(self, *watches: Watch) -> None:
        self.watches = watches

    def cancel(self) -> None:
        for watch in self.watches:
            watch.cancel()


class WatchedReader:
    """A reader that reads a node again only when its ZooKeeper watch fired: ``changed`` is the one
    bound method set as every watch (so kazoo keeps one per path and kind) and marks the node dirty;
    ``trigger`` asks for the next compute. A dropped connection drops every watch kazoo holds (each
    called with EventType.NONE): then the next compute reads everything again, setting them anew
    (ZooKeeperStore.connection_drops)."""

    dirty: set[str]  # paths whose watch fired since they were read
    trigger: Any

    def changed(self, event: Any) -> None:
        if getattr(event, "type", None) == EventType.NONE:
            return  # a dropped connection: ZooKeeperStore.connection_drops tells the next compute
        path = getattr(event, "path", None)
        if path:
            self.dirty.add(path)
        if self.trigger is not None:
            self.trigger(event)


class PartitionStatesReader(WatchedReader):
    """Every /brokers/topics/<t>/partitions/<p>/state, read incrementally for a watch: a node is
    read again only when its own ZooKeeper watch fired (a state znode's data watch; the child
    watch of /brokers/topics or of a topic's partitions node), or when it is new. A leader move of
    P partitions then costs P reads, not P times the number of topics; and after the first walk a
    compute visits only the nodes whose watches fired (``_fired``), not every topic's cached entry,
    so a topic's creation at N topics costs the same as at none. A new session has lost every
    watch: the caches are dropped and everything walked again. Without a watch (a one-off
    ``partition_states()``) everything is read, and nothing kept."""

    def __init__(self, store: WatchedStore) -> None:
        self.store = store
        self.states: dict[str, tuple[tuple[str, int], PartitionState | None]] = {}  # by state path
        self.lists: dict[str, list[str] | None] = {}  # listed path -> its children (None: absent)
        self.dirty: set[str] = set()  # paths whose watch fired since they were read
        self.session: int | None = None
        self.trigger: Any = None
        # What the watch delivers: each made from the last (kafkapy.store.base, "Snapshots").
        self.snapshot: PersistentMap[tuple[str, int], PartitionState] = PersistentMap()
        self.walked = False  # a first compute of this session walked everything: the next ones apply deltas
        self.drops = 0  # the store's connection_drops when the caches were filled

    def compute(self, trigger: Any) -> tuple[Mapping[tuple[str, int], PartitionState]]:
        store = self.store
        zk = store._zk()
        watching = trigger is not None
        self.trigger = trigger
        if watching and (zk.client_id[0] != self.session or store.connection_drops != self.drops):
            self.session = zk.client_id[0]
            self.drops = store.connection_drops
            self.states.clear()
            self.lists.clear()
            self.dirty.clear()
            self.walked = False
        if watching and self.walked:
            with store._errors(TOPICS):
                try:
                    changes, removed = self._fired()
                except BaseException:
                    self.walked = False  # half done: the next compute walks everything again
                    raise
            if changes or removed:
                self.snapshot = self.snapshot.update(changes, removed)
            return (self.snapshot,)
        result: dict[tuple[str, int], PartitionState] = {}
        seen_states: set[str] = set()
        seen_lists = {TOPICS}
        with store._errors(TOPICS):
            for topic in sorted(self._children(TOPICS, watching) or ()):
                root = f"{TOPICS}/{topic}/partitions"
                seen_lists.add(root)
                for child in self._children(root, watching) or ():  # absent until a first state
                    if not child.isdecimal():
                        continue
                    path = f"{root}/{child}/state"
                    seen_states.add(path)
                    entry = self.states.get(path) if watching else None
                    if entry is None or path in self.dirty:
                        self.dirty.discard(path)
                        entry = ((topic, int(child)), self._read(path, watching))
                        if watching:
                            self.states[path] = entry
                    key, state = entry
                    if state is not None:
                        result[key] = state
        if not watching:
            return (dict(sorted(result.items())),)
        for gone in self.states.keys() - seen_states:
            del self.states[gone]
        for gone in self.lists.keys() - seen_lists:
            del self.lists[gone]
        self.snapshot = self.snapshot.updated_to(result)
        self.walked = True
        return (self.snapshot,)

    def _fired(self) -> tuple[dict[tuple[str, int], PartitionState], set[tuple[str, int]]]:
        """After a first walk: only what the fired watches name. A new topic's partitions are
        listed and their states read; a partitions node whose watch fired is listed again (new
        partitions read, gone ones dropped); a state whose watch fired is read again."""
        changes: dict[tuple[str, int], PartitionState] = {}
        removed: set[tuple[str, int]] = set()

        def read_state(topic: str, child: str) -> None:
            path = f"{TOPICS}/{topic}/partitions/{child}/state"
            self.dirty.discard(path)
            key = (topic, int(child))
            state = self._read(path, True)
            self.states[path] = (key, state)
            if state is None:
                removed.add(key)
                changes.pop(key, None)
            else:
                changes[key] = state
                removed.discard(key)

        def drop_state(topic: str, child: str) -> None:
            path = f"{TOPICS}/{topic}/partitions/{child}/state"
            self.dirty.discard(path)
            self.states.pop(path, None)
            removed.add((topic, int(child)))
            changes.pop((topic, int(child)), None)

        def list_topic(topic: str) -> None:
            root = f"{TOPICS}/{topic}/partitions"
            before = set(self.lists.get(root) or ())
            after = set(self._children(root, True) or ())
            for child in sorted(after - before):
                if child.isdecimal():
                    read_state(topic, child)
            for child in before - after:
                if child.isdecimal():
                    drop_state(topic, child)

        if TOPICS in self.dirty:
            before = set(self.lists.get(TOPICS) or ())
            after = set(self._children(TOPICS, True) or ())
            for topic in sorted(after - before):
                list_topic(topic)
            for topic in before - after:
                for child in self.lists.pop(f"{TOPICS}/{topic}/partitions", None) or ():
                    if child.isdecimal():
                        drop_state(topic, child)
        topics = set(self.lists.get(TOPICS) or ())
        prefix = f"{TOPICS}/"
        for path in list(self.dirty):
            parts = path[len(prefix):].split("/") if path.startswith(prefix) else []
            if len(parts) == 2 and parts[1] == "partitions" and parts[0] in topics:
                list_topic(parts[0])  # listed again: its watch fired
            elif len(parts) == 4 and parts[1] == "partitions" and parts[3] == "state" and path in self.states:
                read_state(parts[0], parts[2])
            elif path != TOPICS:  # nothing kept there (a deleted topic's watches fire after its last read)
                self.dirty.discard(path)
            # (the list's watch, fired since it was listed above: the next compute lists it)
        return changes, removed

    def _children(self, path: str, watching: bool) -> list[str] | None:
        """The children of ``path`` (None when it does not exist), listed again only when its
        watch fired; while absent, an exists watch waits for its creation."""
        if watching and path in self.lists and path not in self.dirty:
            return self.lists[path]
        self.dirty.discard(path)
        zk = self.store._zk()
        watch = self.changed if watching else None
        children: list[str] | None
        while True:
            try:
                children = list(zk.get_children(path, watch=watch))
                break
            except NoNodeError:
                if not watching or zk.exists(path, watch=watch) is None:
                    children = None
                    break
        if watching:
            self.lists[path] = children
        return children

    def _read(self, path: str, watching: bool) -> PartitionState | None:
        zk = self.store._zk()
        watch = self.changed if watching else None
        while True:
            try:
                data, stat = zk.get(path, watch=watch)
                break
            except NoNodeError:
                # Absent: its creation fires the watch; created since the get: read it now.
                if not watching or zk.exists(path, watch=watch) is None:
                    return None
        return self.store._readable(path, data, lambda p, d: decode_partition_state(
            self.store._json(p, d), self.store._full(p), int(stat.version)))


class TopicsReader(WatchedReader):
    """Every /brokers/topics/<t>, read incrementally for the topics watch, as PartitionStatesReader reads
    the states: /brokers/topics is listed again only when its child watch fired, and a topic's
    znode read (and decoded) again only when its data watch fired or it is new, so a creation at N
    topics costs one listing and one read, not N reads, and no walk over the N topics. The
    snapshot delivered is the last one updated by those changes (kafkapy.store.base, "Snapshots").
    A new session has lost every watch: the cache is dropped and everything read again."""

    def __init__(self, store: WatchedStore) -> None:
        self.store = store
        self.read: dict[str, tuple[bytes, TopicInfo | None]] = {}  # by path: data, and its topic
        self.dirty: set[str] = set()  # paths whose watch fired since they were read
        self.session: int | None = None
        self.trigger: Any = None
        self.snapshot: PersistentMap[str, TopicInfo] = PersistentMap()
        self.names: set[str] | None = None  # the topics last listed (None: list them again)
        self.drops = 0  # the store's connection_drops when the caches were filled

    def compute(self, trigger: Any) -> tuple[Mapping[str, TopicInfo]]:
        store = self.store
        zk = store._zk()
        self.trigger = trigger
        if zk.client_id[0] != self.session or store.connection_drops != self.drops:
            self.session = zk.client_id[0]
            self.drops = store.connection_drops
            self.read.clear()
            self.dirty.clear()
            self.names = None
        with store._errors(TOPICS):
            try:
                changes, removed = self._fired()
            except BaseException:
                self.names = None  # half done: the next compute lists every topic again
                raise
        if changes or removed:
            self.snapshot = self.snapshot.update(changes, removed)
        return (self.snapshot,)

    def _fired(self) -> tuple[dict[str, TopicInfo], set[str]]:
        """What the fired watches changed: topics listed again if the list's watch fired (or on a
        first compute), and read again if new or their own watch fired."""
        store = self.store
        zk = store._zk()
        changes: dict[str, TopicInfo] = {}
        removed: set[str] = set()
        fresh: set[str] = set()
        if self.names is None or TOPICS in self.dirty:
            self.dirty.discard(TOPICS)
            listed = set(zk.get_children(TOPICS, watch=self.changed))
            if self.names is None:  # everything is read; what the last snapshot has beyond, goes
                removed.update(name for name in self.snapshot if name not in listed)
                fresh = set(listed)
            else:
                fresh = listed - self.names
                removed.update(self.names - listed)
            self.names = listed
        prefix = f"{TOPICS}/"
        for path in list(self.dirty):
            name = path[len(prefix):] if path.startswith(prefix) else ""
            if name in self.names:
                fresh.add(name)
            elif path != TOPICS:  # a deleted topic's data watch, fired after its last read
                self.dirty.discard(path)
            # (the list's watch, fired since it was listed above: the next compute lists it)
        for name in sorted(fresh):
            path = f"{prefix}{name}"
            self.dirty.discard(path)
            try:
                data = zk.get(path, watch=self.changed)[0]
            except NoNodeError:  # deleted since it was listed: the list's watch brings that
                self.read.pop(path, None)
                removed.add(name)
                continue
            entry = self.read.get(path)
            if entry is None or entry[0] != data:
                entry = self.read[path] = (data, store._readable(path, data, store._decode_topic))
            if entry[1] is None:
                removed.add(name)  # unreadable: skipped, as every list read skips it
            else:
                changes[name] = entry[1]
        for name in removed:
            self.read.pop(f"{prefix}{name}", None)
        return changes, removed
