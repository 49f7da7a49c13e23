"""The ZooKeeper metadata store (kazoo), at Kafka's own znode paths and JSON formats
(``kafkapy.store.znodes``); its watches and incremental readers are ``kafkapy.store.zk_watches``.

One ZooKeeperStore is one ZooKeeper session, normally one per broker. What it
registers (/brokers/ids/<id>, /controller, /consumers/coordinator) is ephemeral.
When the session is lost the store, once reconnected on a new session,
re-creates its broker registrations, re-runs its controller/coordinator
candidates and re-arms every watch, calling each once with the current state.

A chroot in ``zookeeper.connect`` (``host:port/kafka``) is created if it is
missing, as Kafka does.

Watch callbacks run on the store's own worker thread (one per store), one at
a time; a watch that hits a corrupt znode logs an error naming the path and
keeps watching. A list read (and so a watch on a list) skips a corrupt child
and logs it once per content (``_readable``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
)
from kazoo.retry import KazooRetry

from kafkapy.store.base import (
    ENTITY_TYPES,
    NO_ACL_VERSION,
    NO_PARTITION_EPOCH,
    AclResource,
    AclVersionConflict,
    BrokerRegistration,
    CorruptMetadata,
    FeatureEpochConflict,
    OfflineReplicas,
    PartitionState,
    PartitionStateConflict,
    PartitionStates,
    ProducerIdBlock,
    StoredAcl,
    StoreError,
    TopicAlreadyExists,
    TopicInfo,
    UnknownTopic,
    Watch,
    check_acl_resource,
    check_topic_name,
    desanitize,
    entity_type_of,
    new_cluster_id,
    next_producer_id_block,
    sanitize,
)
from kafkapy.store.memory import check_partitions, check_reassignment
from kafkapy.store.zk_watches import (
    ChangeWatch,
    PartitionStatesReader,
    StateWatch,
    Subscription,
    TopicsReader,
    WatchGroup,
)
from kafkapy.store.znodes import (
    ACL_CHANGE_PREFIX,
    BROKER_IDS,
    BROKER_SEQID,
    CHANGE_EXPIRATION_S,
    CHANGE_PREFIX,
    CLUSTER_ID,
    CONFIG,
    CONFIG_CHANGES,
    CONSUMERS,
    CONTROLLER,
    COORDINATOR,
    EXTENDED_ACL_CHANGES,
    FEATURE,
    LITERAL_ACL_CHANGES,
    LOG_DIR_EVENT_PREFIX,
    LOG_DIR_EVENTS,
    OFFLINE_REPLICAS,
    PRODUCER_ID_BLOCK,
    TOPIC_CONFIGS,
    TOPICS,
    acl_change,
    acl_path,
    acl_root,
    decode_broker,
    decode_offline_replicas,
    decode_producer_id_block,
    decode_topic,
    dumps,
    encode_acls,
    encode_broker,
    encode_log_dir_event,
    encode_offline_replicas,
    encode_partition_state,
    encode_producer_id_block,
    encode_topic,
    now_ms,
    partition_state_path,
    pascal_case,
)

__all__ = ["ZooKeeperStore", "parse_connect"]

log = logging.getLogger("kafkapy.store.zookeeper")
_T = TypeVar("_T")


# Kafka's persistent paths, created at startup as KafkaZkClient.createTopLevelPaths does.
_TOP_LEVEL = (BROKER_IDS, TOPICS, BROKER_SEQID, CONFIG_CHANGES, PRODUCER_ID_BLOCK, "/config/topics",
              "/config/clients", "/config/users", "/config/ips", "/config/brokers", LOG_DIR_EVENTS,
              OFFLINE_REPLICAS)
_DELETE_TREE_ATTEMPTS = 20  # each failed attempt means a concurrent write landed in the tree


def parse_connect(connect: str) -> tuple[str, str]:
    """``h1:p1,h2:p2/chroot`` -> (hosts, chroot); chroot is "" when absent. StoreError if invalid."""
    hosts, slash, rest = connect.strip().partition("/")
    if not hosts:
        raise StoreError(f"zookeeper.connect={connect!r} names no host")
    if not slash:
        return hosts, ""
    chroot = "/" + rest
    parts = rest.split("/")
    if rest == "" or any(p in ("", ".", "..") for p in parts) or any(ch < " " for ch in rest):
        raise StoreError(f"invalid ZooKeeper chroot {chroot!r} in zookeeper.connect={connect!r}")
    return hosts, chroot




_NOT_OURS = object()  # a resent write's conflict was someone else's doing


def _topic_creation(tx: TransactionRequest, topic: tuple[str, bytes], config: tuple[str, bytes],
                    config_version: int | None) -> None:
    """The topic's node and its config node together (the config node may be left over)."""
    tx.create(*topic)
    if config_version is None:
        tx.create(*config)
    else:
        tx.set_data(*config, version=config_version)


def _tree_deletion(tx: TransactionRequest, nodes: list[str]) -> None:
    """Deepest first, so each node is empty when its delete runs."""
    for node in sorted(nodes, key=lambda n: n.count("/"), reverse=True):
        tx.delete(node)


class _RepeatedReads:
    """The kazoo client, with requests sent again across a lost connection.

    Kafka's ZooKeeper client holds a request through a connection loss and sends it again once
    connected; a loaded machine drops a connection now and then (a missed ping) without the session
    ending. Reads and ``ensure_path`` may be sent twice safely, so they wait for the reconnection for
    up to a session timeout. Writes are sent again too, but a write that reached the server before
    the connection dropped makes its second sending fail (BadVersion for a compare-and-set,
    NodeExists for a create, NoNode for a delete). Such a failure after a resend is checked against
    the znode, as Kafka's controller checks a conditional update whose reply was lost: when the
    znode holds what was written (at the version the write would have made, and for an ephemeral
    node in this session) the write landed and counts as done. A sequential create sent twice may
    make two nodes (only config change notifications are sequential: a duplicate is harmless). A
    multi-op transaction is sent again through ``commit``, which tells its caller that it was, so
    the caller can tell its own landed transaction from someone else's.
    """

    def __init__(self, client: KazooClient, session_timeout_s: float) -> None:
        self.raw = client
        self._session_timeout_s = session_timeout_s

    def _repeat(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        retry = KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5, max_jitter=0.05,
                           deadline=self._session_timeout_s, ignore_expire=False)
        return retry(call, *args, **kwargs)

    def get(self, path: str, watch: Any = None) -> Any:
        return self._repeat(self.raw.get, path, watch=watch)

    def get_children(self, path: str, watch: Any = None) -> Any:
        return self._repeat(self.raw.get_children, path, watch=watch)

    def exists(self, path: str, watch: Any = None) -> Any:
        return self._repeat(self.raw.exists, path, watch=watch)

    def ensure_path(self, path: str) -> Any:
        return self._repeat(self.raw.ensure_path, path)

    def _write(self, send: Callable[[], Any], conflict: type[KazooException] | tuple[()],
               landed: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + self._session_timeout_s
        delay, resent = 0.05, False
        while True:
            try:
                return send()
            except conflict:
                if not resent:
                    raise
                outcome = landed()
                if outcome is _NOT_OURS:
                    raise
                return outcome
            except (ConnectionLoss, OperationTimeoutError):
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay, resent = min(delay * 2, 0.5), True

    def commit(self, build: Callable[[TransactionRequest], None]) -> tuple[list[Any], bool]:
        """Commit the transaction ``build`` fills, sent again (built afresh: kazoo commits a request
        once) across a lost connection; returns its results and whether it was sent more than once."""
        resent = False

        def send() -> list[Any]:
            nonlocal resent
            request = self.raw.transaction()
            build(request)
            try:
                return list(request.commit())
            except (ConnectionLoss, OperationTimeoutError):
                resent = True
                raise

        return self._write(send, (), lambda: _NOT_OURS), resent  # no conflict: the caller reads the results

    def set(self, path: str, value: bytes, version: int = -1) -> Any:
        def landed() -> Any:
            try:
                data, stat = self.get(path)
            except NoNodeError:
                return _NOT_OURS
            return stat if data == value and stat.version == version + 1 else _NOT_OURS

        return self._write(lambda: self.raw.set(path, value, version=version), BadVersionError, landed)

    def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False, sequence: bool = False,
               makepath: bool = False) -> Any:
        def landed() -> Any:
            try:
                data, stat = self.get(path)
            except NoNodeError:
                return _NOT_OURS
            ours = data == value and (not ephemeral or stat.ephemeralOwner == self.raw.client_id[0])
            return path if ours else _NOT_OURS

        def send() -> Any:
            return self.raw.create(path, value, ephemeral=ephemeral, sequence=sequence, makepath=makepath)

        return self._write(send, NodeExistsError, landed)

    def delete(self, path: str, version: int = -1) -> Any:
        return self._write(lambda: self.raw.delete(path, version=version), NoNodeError, lambda: True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


class ZooKeeperStore:
    def __init__(self, connect: str, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None, *, cluster_id: str | None = None) -> None:
        self.connect = connect
        self.hosts, self.chroot = parse_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        # Kafka: zookeeper.connection.timeout.ms defaults to zookeeper.session.timeout.ms.
        self.connection_timeout_ms = connection_timeout_ms if connection_timeout_ms is not None \
            else session_timeout_ms
        self._wanted_cluster_id = cluster_id
        self._cluster_id: str | None = None
        self._client: Any = None
        self._reads: Any = None  # _RepeatedReads over _client, once started
        self._lock = threading.Lock()
        self._registrations: dict[int, BrokerRegistration] = {}
        self._controller_candidates: set[int] = set()
        self._coordinator_candidates: set[int] = set()
        self._watches: list[StateWatch | ChangeWatch] = []
        self._state_watches: dict[str, StateWatch] = {}  # by full path
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._session_id: int | None = None
        # Connections dropped so far (a session's too): kazoo forgets every watch then, and the
        # incremental readers (TopicsReader, PartitionStatesReader) must read everything again to set them.
        self.connection_drops = 0
        self._closed = False
        self._last_purge: dict[str, float] = {}  # notification queue -> when last purged
        # path -> the content of a corrupt znode that list reads skip, as logged (once per content)
        self._skipped: dict[str, bytes] = {}

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._client is not None:
            return
        client = KazooClient(hosts=self.hosts, timeout=self.session_timeout_ms / 1000,
                             connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0})
        try:
            client.start(timeout=self.connection_timeout_ms / 1000)
        except Exception as exc:
            with contextlib.suppress(Exception):
                client.stop()
                client.close()
            raise StoreError(f"cannot connect to ZooKeeper at {self.hosts} "
                             f"within {self.connection_timeout_ms} ms "
                             f"(zookeeper.connect={self.connect!r}, zookeeper.connection.timeout.ms): "
                             f"{exc or type(exc).__name__}") from None
        if self.chroot:
            try:
                _RepeatedReads(client, self.session_timeout_ms / 1000).ensure_path(self.chroot)
            except Exception as exc:
                client.stop()
                client.close()
                raise StoreError(f"cannot create the ZooKeeper chroot {self.chroot!r} "
                                 f"(zookeeper.connect={self.connect!r}): "
                                 f"{type(exc).__name__} {exc}") from None
            client.chroot = self.chroot
        self._client = client
        self._reads = _RepeatedReads(client, self.session_timeout_ms / 1000)
        self._session_id = client.client_id[0]
        try:
            for path in _TOP_LEVEL:
                with self._errors(path):
                    self._reads.ensure_path(path)
            self.cluster_id()
        except BaseException:
            self._client = None
            client.stop()
            client.close()
            raise
        self._worker = threading.Thread(target=self._run, name=f"kafkapy-zk-store{self.chroot}", daemon=True)
        self._worker.start()
        client.add_listener(self._on_state)
        # Internal watches first: after a session loss they re-run the elections before users hear.
        for path in (CONTROLLER, COORDINATOR):
            self._watch_election(path)

    def keeps_metadata(self) -> bool:
        return True

    def close(self) -> None:
        """Close the session: every ephemeral node of this store goes at once."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            for watch in self._watches:
                watch.cancelled = True
            self._watches.clear()
            self._state_watches.clear()
        if self._worker is not None:
            self._queue.put(None)
            if self._worker is not threading.current_thread():
                self._worker.join(5)
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.remove_listener(self._on_state)
            with contextlib.suppress(Exception):
                self._client.stop()
                self._client.close()

    def __enter__(self) -> ZooKeeperStore:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def client(self) -> Any:
        """The kazoo client (tests and tools)."""
        return self._zk()

    # --- cluster and brokers -----------------------------------------------------------------
    def cluster_id(self) -> str:
        if self._cluster_id is not None:
            return self._cluster_id
        zk = self._zk()
        with self._errors(CLUSTER_ID):
            while True:
                try:
                    data, _ = zk.get(CLUSTER_ID)
                except NoNodeError:
                    wanted = self._wanted_cluster_id or new_cluster_id()
                    with contextlib.suppress(NodeExistsError):
                        zk.create(CLUSTER_ID, dumps({"version": "1", "id": wanted}), makepath=True)
                    continue
                obj = self._json(CLUSTER_ID, data)
                self._check_version(CLUSTER_ID, obj, ("1", 1), "version")
                found = obj.get("id")
                if not isinstance(found, str) or not found:
                    raise CorruptMetadata(self._full(CLUSTER_ID), "no cluster id")
                break
        if self._wanted_cluster_id and found != self._wanted_cluster_id:
            raise StoreError(f"cluster.id {self._wanted_cluster_id!r} does not match {found!r} "
                             f"stored at {self._full(CLUSTER_ID)}")
        self._cluster_id = found
        return found

    def allocate_broker_id(self, reserved_max: int) -> int:
        """Kafka's way: the new version of /brokers/seqid, above reserved.broker.max.id."""
        zk = self._zk()
        with self._errors(BROKER_SEQID):
            while True:
                try:
                    stat = zk.set(BROKER_SEQID, b"")
                    return int(stat.version) + reserved_max
                except NoNodeError:
                    with contextlib.suppress(NodeExistsError):
                        zk.create(BROKER_SEQID, b"", makepath=True)

    def register_broker(self, registration: BrokerRegistration) -> None:
        """Ephemeral /brokers/ids/<id>; also runs the broker for controller, as a Kafka broker does."""
        zk = self._zk()
        path = f"{BROKER_IDS}/{registration.broker_id}"
        with self._errors(path):
            try:
                zk.create(path, dumps(encode_broker(registration)), ephemeral=True, makepath=True)
            except NodeExistsError:
                raise StoreError(self._registered_already(zk, registration.broker_id, path)) from None
        with self._lock:
            self._registrations[registration.broker_id] = registration
        offline = f"{OFFLINE_REPLICAS}/{registration.broker_id}"
        with self._errors(offline), contextlib.suppress(NoNodeError):  # its dirs are open again
            zk.delete(offline)
        self.elect_controller(registration.broker_id)

    def _registered_already(self, zk: KazooClient, broker_id: int, path: str) -> str:
        """Why a registration found its znode taken, with who holds it: Kafka refuses the start too
        (NodeExistsException, naming the znode's session), and the usual holder on a developer's
        machine is the same broker killed a moment ago, whose ephemeral znode lasts until ZooKeeper
        expires its session."""
        message = f"broker id {broker_id} is already registered in this cluster ({self._full(path)} exists"
        try:
            data, stat = zk.get(path)
            holder = json.loads(data)
            endpoints = ",".join(holder.get("endpoints") or []) or "no endpoints"
            written = time.strftime("%H:%M:%S", time.localtime(int(holder["timestamp"]) / 1000))
            message += (f", written at {written} by a broker listening on {endpoints}, held by ZooKeeper "
                        f"session 0x{stat.ephemeralOwner:x}")
        except (KazooException, ValueError, TypeError, KeyError, AttributeError):
            pass  # gone meanwhile, or not Kafka's JSON: the path alone says enough
        return (message + "): another broker runs with this id, or one stopped without closing its "
                "session (kill -9) holds it until ZooKeeper expires that session, up to its "
                "zookeeper.session.timeout.ms (18000 by default) after it stopped")

    def unregister_broker(self, broker_id: int) -> None:
        with self._lock:
            self._registrations.pop(broker_id, None)
            self._controller_candidates.discard(broker_id)
            self._coordinator_candidates.discard(broker_id)
        if self._client is None or self._closed:
            return
        with self._errors(f"{BROKER_IDS}/{broker_id}"):
            self._delete_own(f"{BROKER_IDS}/{broker_id}")
        for path in (CONTROLLER, COORDINATOR):
            try:
                if self._read_holder(path, None) == broker_id:
                    with self._errors(path):
                        self._delete_own(path)
            except StoreError as exc:  # a broker that stops must not fail on a corrupt /controller
                log.error("unregistering broker %d: %s", broker_id, exc)

    def brokers(self) -> list[BrokerRegistration]:
        return self._read_brokers(None)

    def watch_brokers(self, callback: Callable[[list[BrokerRegistration]], None]) -> Watch:
        return self._watch_state(BROKER_IDS, lambda w: (self._read_brokers(w),), callback)

    def _read_brokers(self, watch: Any) -> list[BrokerRegistration]:
        zk = self._zk()
        with self._errors(BROKER_IDS):
            raw = []
            for child in sorted(zk.get_children(BROKER_IDS, watch=watch)):
                path = f"{BROKER_IDS}/{child}"
                try:
                    raw.append((path, zk.get(path, watch=watch)[0]))
                except NoNodeError:
                    continue
        result = []
        for path, data in raw:
            registration = self._readable(path, data, self._decode_broker)
            if registration is not None:
                result.append(registration)
        return sorted(result, key=lambda b: b.broker_id)

    def _decode_broker(self, path: str, data: bytes) -> BrokerRegistration:
        child = path.rpartition("/")[2]
        if not child.lstrip("-").isdecimal():
            raise CorruptMetadata(self._full(path), "not a broker id")
        return decode_broker(int(child), self._json(path, data), self._full(path))

    # --- offline replicas (KIP-112) -----------------------------------------------------------
    def set_offline_replicas(self, broker_id: int, replicas: Collection[tuple[str, int]]) -> None:
        """kafkapy's /kafkapy/offline_replicas/<id>, and, when the set grows, Kafka's
        /log_dir_event_notification/log_dir_event_<seq> for a Kafka controller's sake."""
        zk = self._zk()
        path = f"{OFFLINE_REPLICAS}/{broker_id}"
        found = frozenset(replicas)
        before = self.offline_replicas().get(broker_id, frozenset())
        if found == before:
            return
        with self._errors(path):
            if not found:
                with contextlib.suppress(NoNodeError):
                    zk.delete(path)
                return
            data = dumps(encode_offline_replicas(found))
            try:
                zk.set(path, data)
            except NoNodeError:
                zk.create(path, data, makepath=True)
        if not found <= before:
            with self._errors(LOG_DIR_EVENTS):
                zk.create(f"{LOG_DIR_EVENTS}/{LOG_DIR_EVENT_PREFIX}", dumps(encode_log_dir_event(broker_id)),
                          sequence=True, makepath=True)

    def offline_replicas(self) -> dict[int, frozenset[tuple[str, int]]]:
        return self._read_offline_replicas(None)

    def watch_log_dir_events(self, callback: Callable[[tuple[str, ...]], None]) -> Watch:
        """LogDirEventQueue: the notifications queued, on each change. Fired after the watch on
        the offline replicas for the same failure, since the broker writes its set first and
        ZooKeeper delivers one session's watch events in order."""
        return self._watch_state(LOG_DIR_EVENTS, lambda w: (self._read_log_dir_events(w),), callback)

    def _read_log_dir_events(self, watch: Any) -> tuple[str, ...]:
        with self._errors(LOG_DIR_EVENTS):
            try:
                children = self._zk().get_children(LOG_DIR_EVENTS, watch=watch)
            except NoNodeError:  # removed by hand since start: watched again once made
                self._zk().exists(LOG_DIR_EVENTS, watch=watch)
                return ()
        return tuple(sorted(child for child in children if child.startswith(LOG_DIR_EVENT_PREFIX)))

    def delete_log_dir_events(self, names: Collection[str]) -> None:
        """Kafka's KafkaZkClient.deleteLogDirEventNotifications: each named notification removed."""
        zk = self._zk()
        for name in names:
            path = f"{LOG_DIR_EVENTS}/{name}"
            with self._errors(path), contextlib.suppress(NoNodeError):
                zk.delete(path)

    def watch_offline_replicas(self, callback: Callable[[OfflineReplicas], None]) -> Watch:
        return self._watch_state(OFFLINE_REPLICAS, lambda w: (self._read_offline_replicas(w),), callback)

    def _read_offline_replicas(self, watch: Any) -> dict[int, frozenset[tuple[str, int]]]:
        zk = self._zk()
        raw = []
        with self._errors(OFFLINE_REPLICAS):
            try:
                children = zk.get_children(OFFLINE_REPLICAS, watch=watch)
            except NoNodeError:
                return {}
            for child in sorted(children):
                path = f"{OFFLINE_REPLICAS}/{child}"
                try:
                    raw.append((child, path, zk.get(path, watch=watch)[0]))
                except NoNodeError:
                    continue
        result: dict[int, frozenset[tuple[str, int]]] = {}
        for child, path, data in raw:
            if not child.isdecimal():
                continue
            found = self._readable(path, data, self._decode_offline_replicas)
            if found:
                result[int(child)] = found
        return result

    def _decode_offline_replicas(self, path: str, data: bytes) -> frozenset[tuple[str, int]]:
        return decode_offline_replicas(self._json(path, data), self._full(path))

    # --- controller --------------------------------------------------------------------------
    def elect_controller(self, broker_id: int) -> int:
        with self._lock:
            self._controller_candidates.add(broker_id)
        return self._elect(CONTROLLER, broker_id)

    def controller_id(self) -> int:
        return self._read_holder(CONTROLLER, None)

    def watch_controller(self, callback: Callable[[int], None]) -> Watch:
        return self._watch_state(CONTROLLER, lambda w: (self._read_holder(CONTROLLER, w),), callback)

    # --- client quota configs ----------------------------------------------------------------
    def entity_config(self, entity_path: str) -> dict[str, str]:
        entity_type_of(entity_path)
        path = f"{CONFIG}/{entity_path}"
        with self._errors(path):
            try:
                data, _ = self._zk().get(path)
            except NoNodeError:
                return {}
        return self._decode_config(path, data)

    def entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        if entity_type not in ENTITY_TYPES:
            raise StoreError(f"unknown entity type {entity_type!r} (known: {', '.join(ENTITY_TYPES)})")
        zk = self._zk()
        paths: list[str] = []
        root = f"{CONFIG}/{entity_type.split('/')[0]}"
        with self._errors(root):
            names = sorted(self._children(root))
            if entity_type == "users/clients":
                for user in names:
                    paths += [f"users/{user}/clients/{c}"
                              for c in sorted(self._children(f"{root}/{user}/clients"))]
            else:
                paths = [f"{entity_type}/{name}" for name in names]
            raw = []
            for entity_path in paths:
                with contextlib.suppress(NoNodeError):
                    raw.append((entity_path, zk.get(f"{CONFIG}/{entity_path}")[0]))
        result = {}
        for entity_path, data in raw:
            path = f"{CONFIG}/{entity_path}"
            config = self._readable(path, data, self._decode_config)
            if config:
                result[entity_path] = config
        return result

    def set_entity_config(self, entity_path: str, config: Mapping[str, str]) -> None:
        entity_type_of(entity_path)
        zk = self._zk()
        path = f"{CONFIG}/{entity_path}"
        with self._errors(path):
            if config:
                data = dumps({"version": 1, "config": {str(k): str(v) for k, v in config.items()}})
                try:
                    zk.set(path, data)
                except NoNodeError:
                    try:
                        zk.create(path, data, makepath=True)
                    except NodeExistsError:
                        zk.set(path, data)
            elif entity_path.startswith("topics/"):  # Kafka keeps a topic's node while the topic lives
                try:
                    zk.set(path, dumps({"version": 1, "config": {}}))
                except NoNodeError:
                    pass
            else:
                try:
                    zk.delete(path)
                except NoNodeError:
                    pass
                except NotEmptyError:  # users/<u> with clients/ under it: keep the node, empty its config
                    zk.set(path, dumps({"version": 1, "config": {}}))
            zk.create(f"{CONFIG_CHANGES}/{CHANGE_PREFIX}", dumps({"version": 2, "entity_path": entity_path}),
                      sequence=True, makepath=True)

    def watch_entity_configs(self, callback: Callable[[str], None]) -> Watch:
        """Called for each change notification posted after the watch was set (no initial call)."""
        watch = ChangeWatch(self, CONFIG_CHANGES, CHANGE_PREFIX, self._read_change, callback)
        watch.prime()
        self._zk()
        with self._lock:
            self._watches.append(watch)
        watch.refresh(force=False)
        return watch

    def _changes(self, changes: str, prefix: str, watch: Any) -> list[tuple[int, str]]:
        with self._errors(changes):
            try:
                children = self._zk().get_children(changes, watch=watch)
            except NoNodeError:
                self._zk().ensure_path(changes)
                children = self._zk().get_children(changes, watch=watch)
        result = []
        for child in children:
            suffix = child[len(prefix):]
            if child.startswith(prefix) and suffix.isdecimal():
                result.append((int(suffix), child))
        return sorted(result)

    def _purge_changes(self, changes: str, prefix: str) -> None:
        """Delete notifications older than 15 minutes, as Kafka's notification listener does
        (changeExpirationMs); at most once a minute per queue and store."""
        now = time.time()
        if now - self._last_purge.get(changes, 0.0) < 60:
            return
        self._last_purge[changes] = now
        zk = self._zk()
        with self._errors(changes):
            for _, node in self._changes(changes, prefix, None):
                path = f"{changes}/{node}"
                stat = zk.exists(path)
                if stat is None or stat.ctime / 1000 > now - CHANGE_EXPIRATION_S:
                    break  # sorted by sequence, so the rest are newer
                with contextlib.suppress(NoNodeError):
                    zk.delete(path)

    def _read_change(self, path: str) -> str | None:
        with self._errors(path):
            try:
                data, _ = self._zk().get(path)
            except NoNodeError:
                return None
        obj = self._json(path, data)
        self._check_version(path, obj, (2,), "version")
        entity_path = obj.get("entity_path")
        if not isinstance(entity_path, str):
            raise CorruptMetadata(self._full(path), "no entity_path")
        return entity_path

    def _decode_config(self, path: str, data: bytes) -> dict[str, str]:
        if not data:
            return {}  # a parent created on the way (users/<u> holding only clients/)
        obj = self._json(path, data)
        self._check_version(path, obj, (1,), "version")
        config = obj.get("config")
        if not isinstance(config, dict):
            raise CorruptMetadata(self._full(path), "no config object")
        return {str(k): str(v) for k, v in config.items()}

    # --- ACLs --------------------------------------------------------------------------------
    def acls(self) -> dict[AclResource, frozenset[StoredAcl]]:
        zk = self._zk()
        raw: list[tuple[AclResource, str, bytes]] = []
        for pattern_type in ("LITERAL", "PREFIXED"):
            root = acl_root(pattern_type)
            with self._errors(root):
                for resource_type in sorted(self._children(root)):
                    for name in sorted(self._children(f"{root}/{resource_type}")):
                        path = f"{root}/{resource_type}/{name}"
                        with contextlib.suppress(NoNodeError):
                            data = zk.get(path)[0]
                            raw.append((AclResource(pattern_type, resource_type, name), path, data))
        result = {}
        for resource, path, data in raw:
            acls = self._readable(path, data, self._decode_acls)
            if acls:
                result[resource] = acls
        return result

    def resource_acls(self, resource: AclResource) -> tuple[frozenset[StoredAcl], int]:
        check_acl_resource(resource)
        path = acl_path(resource)
        got = self._get_or_watch(path, None)
        if got is None:
            return frozenset(), NO_ACL_VERSION
        return self._decode_acls(path, got[0]), got[1]

    def set_resource_acls(self, resource: AclResource, acls: frozenset[StoredAcl],
                          expected_version: int) -> int:
        check_acl_resource(resource)
        zk = self._zk()
        path = acl_path(resource)
        data = encode_acls(acls)
        conflict = AclVersionConflict(f"the ACLs of {self._full(path)} changed since version "
                                      f"{expected_version}")
        with self._errors(path):
            try:
                if expected_version == NO_ACL_VERSION and acls:
                    zk.create(path, data, makepath=True)
                    version = 0
                elif expected_version == NO_ACL_VERSION:
                    if zk.exists(path) is not None:
                        raise conflict
                    return NO_ACL_VERSION
                elif acls:
                    version = int(zk.set(path, data, version=expected_version).version)
                else:
                    zk.delete(path, version=expected_version)
                    version = NO_ACL_VERSION
            except (NodeExistsError, BadVersionError, NoNodeError):
                raise conflict from None
            changes, note = acl_change(resource)
            zk.create(f"{changes}/{ACL_CHANGE_PREFIX}", note, sequence=True, makepath=True)
        return version

    def watch_acl_changes(self, callback: Callable[[AclResource], None]) -> Watch:
        """Called for each change notification posted after the watch was set (no initial call)."""
        watches = [ChangeWatch(self, changes, ACL_CHANGE_PREFIX, self._read_acl_change, callback)
                   for changes in (LITERAL_ACL_CHANGES, EXTENDED_ACL_CHANGES)]
        for watch in watches:
            watch.prime()
        with self._lock:
            self._watches.extend(watches)
        for watch in watches:
            watch.refresh(force=False)
        return WatchGroup(*watches)

    def _read_acl_change(self, path: str) -> AclResource | None:
        with self._errors(path):
            try:
                data, _ = self._zk().get(path)
            except NoNodeError:
                return None
        if path.startswith(LITERAL_ACL_CHANGES + "/"):
            resource_type, colon, name = self._text(path, data).partition(":")
            if not colon:
                raise CorruptMetadata(self._full(path), "expected ResourceType:ResourceName")
            return AclResource("LITERAL", pascal_case(resource_type), name)
        obj = self._json(path, data)
        self._check_version(path, obj, (1,), "version")
        fields = [obj.get(key) for key in ("resourceType", "name", "patternType")]
        if not all(isinstance(value, str) for value in fields):
            raise CorruptMetadata(self._full(path), "no resourceType, name or patternType")
        return AclResource(str(fields[2]).upper(), pascal_case(str(fields[0])), str(fields[1]))

    def _decode_acls(self, path: str, data: bytes) -> frozenset[StoredAcl]:
        if not data:
            return frozenset()  # Kafka reads an empty node as no ACLs
        obj = self._json(path, data)
        self._check_version(path, obj, (1,), "version")
        entries = obj.get("acls")
        if not isinstance(entries, list):
            raise CorruptMetadata(self._full(path), "no acls list")
        acls = set()
        for entry in entries:
            fields = [entry.get(key) if isinstance(entry, dict) else None
                      for key in ("principal", "permissionType", "operation", "host")]
            if not all(isinstance(value, str) for value in fields):
                raise CorruptMetadata(self._full(path), f"an ACL without principal, permissionType, "
                                                        f"operation or host: {entry!r}")
            acls.add(StoredAcl(*(str(value) for value in fields)))
        return frozenset(acls)

    # --- finalized features ------------------------------------------------------------------
    def finalized_features(self) -> tuple[int, dict[str, int]]:
        return self._read_features(None)

    def set_finalized_features(self, features: Mapping[str, int], expected_epoch: int | None = None) -> int:
        zk = self._zk()
        data = dumps({"version": 2, "status": 1,
                       "features": {str(k): {"max_version_level": int(v)} for k, v in features.items()}})
        with self._errors(FEATURE):
            if expected_epoch is None:
                while True:
                    try:
                        return int(zk.set(FEATURE, data).version)
                    except NoNodeError:
                        with contextlib.suppress(NodeExistsError):
                            zk.create(FEATURE, data)
                            return 0
            if expected_epoch < 0:
                try:
                    zk.create(FEATURE, data)
                    return 0
                except NodeExistsError:
                    pass
            else:
                try:
                    return int(zk.set(FEATURE, data, version=expected_epoch).version)
                except (BadVersionError, NoNodeError):
                    pass
        epoch, _ = self._read_features(None)
        raise FeatureEpochConflict(f"finalized features at {self._full(FEATURE)} are at epoch {epoch}, "
                                   f"not {expected_epoch}")

    def watch_features(self, callback: Callable[[int, dict[str, int]], None]) -> Watch:
        return self._watch_state(FEATURE, self._read_features, callback)

    def _read_features(self, watch: Any) -> tuple[int, dict[str, int]]:
        got = self._get_or_watch(FEATURE, watch)
        if got is None:
            return -1, {}
        data, version = got
        obj = self._json(FEATURE, data)
        self._check_version(FEATURE, obj, (1, 2), "version")
        features = obj.get("features")
        if not isinstance(features, dict) or obj.get("status") not in (0, 1):
            raise CorruptMetadata(self._full(FEATURE), "no features object or status")
        if obj["status"] == 0:  # FeatureZNodeStatus.Disabled: no finalized features
            return version, {}
        result = {}
        for name, levels in features.items():
            if not isinstance(levels, dict) or not isinstance(levels.get("max_version_level"), int):
                raise CorruptMetadata(self._full(FEATURE), f"feature {name!r} has no max_version_level")
            result[str(name)] = int(levels["max_version_level"])
        return version, result

    # --- topics ------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: Mapping[int, tuple[int, ...]],
                     topic_id: uuid.UUID | None = None, config: Mapping[str, str] | None = None) -> TopicInfo:
        check_topic_name(name)
        parts = check_partitions(name, partitions, 0)
        info = TopicInfo(name, topic_id or uuid.uuid4(), parts)
        path = f"{TOPICS}/{name}"
        config_path = f"{TOPIC_CONFIGS}/{name}"
        # Kafka writes the config node (always, {} when empty) before the topic's; here both go in
        # one transaction, so no broker ever sees the topic without its config.
        config_data = dumps({"version": 1, "config": {str(k): str(v) for k, v in (config or {}).items()}})
        topic_data = dumps(encode_topic(info))
        zk = self._zk()
        with self._errors(path):
            zk.ensure_path(TOPICS)
            zk.ensure_path(TOPIC_CONFIGS)
            while True:
                stale = zk.exists(config_path)  # left by a Kafka broker, or by a delete cut short
                results, resent = zk.commit(functools.partial(
                    _topic_creation, topic=(path, topic_data), config=(config_path, config_data),
                    config_version=None if stale is None else stale.version))
                failed = [r for r in results if isinstance(r, Exception)]
                if not failed:
                    return info
                if isinstance(results[0], NodeExistsError):
                    # A resend that meets this very topic (its id is new) met its own first sending.
                    if resent and self._topic_data(path) == topic_data:
                        return info
                    raise TopicAlreadyExists(f"topic {name!r} already exists")
                if not any(isinstance(r, (NodeExistsError, NoNodeError, BadVersionError)) for r in failed):
                    raise failed[0]
                # the config node changed between the look and the write: look again

    def delete_topic(self, name: str) -> None:
        path = f"{TOPICS}/{name}"
        with self._errors(path):
            # kazoo's recursive delete ignores a missing node: look first.
            if self._zk().exists(path) is None:
                raise UnknownTopic(f"topic {name!r} does not exist")
            self._delete_tree(path)
            # Kafka's controller removes the topic's config node with it (deleteTopicConfigs).
            with contextlib.suppress(NoNodeError):
                self._zk().delete(f"{TOPIC_CONFIGS}/{name}")

    def _topic_data(self, path: str) -> bytes | None:
        try:
            data: bytes = self._zk().get(path)[0]
        except NoNodeError:
            return None
        return data

    def _delete_tree(self, path: str) -> None:
        """Delete ``path`` and everything under it in one transaction. One at a time (kazoo's
        recursive delete), the partition states would go before the topic, the controller would
        see partitions without a state and write them again, and the topic's node would never be
        empty. A transaction that a concurrent write spoils is retried on the new tree."""
        zk = self._zk()
        for _ in range(_DELETE_TREE_ATTEMPTS):
            nodes: list[str] = []
            pending = [path]
            while pending:
                node = pending.pop()
                try:
                    children = zk.get_children(node)
                except NoNodeError:
                    continue
                nodes.append(node)
                pending += [f"{node}/{child}" for child in children]
            if not nodes:
                return  # also when a resent transaction had landed: the next look finds nothing
            results, _ = zk.commit(functools.partial(_tree_deletion, nodes=nodes))
            if not any(isinstance(r, Exception) for r in results):
                return
        raise StoreError(f"cannot delete {self._full(path)}: it kept changing under "
                         f"{_DELETE_TREE_ATTEMPTS} attempts")

    def add_partitions(self, name: str, partitions: Mapping[int, tuple[int, ...]]) -> TopicInfo:
        def added(old: TopicInfo) -> Mapping[int, tuple[int, ...]]:
            return check_partitions(name, partitions, len(old.partitions))
        return self._change_partitions(name, added)

    def reassign_partitions(self, name: str, partitions: Mapping[int, tuple[int, ...]]) -> TopicInfo:
        return self._change_partitions(name, lambda old: check_reassignment(old, partitions))

    def _change_partitions(self, name: str,
                           change: Callable[[TopicInfo], Mapping[int, tuple[int, ...]]]) -> TopicInfo:
        """The topic with ``change(old)``'s partitions written over its own, by compare-and-set:
        a topic changed meanwhile is read and checked again."""
        zk = self._zk()
        path = f"{TOPICS}/{name}"
        while True:
            with self._errors(path):
                try:
                    data, stat = zk.get(path)
                except NoNodeError:
                    raise UnknownTopic(f"topic {name!r} does not exist") from None
            old = decode_topic(name, self._json(path, data), self._full(path))
            info = TopicInfo(name, old.topic_id, {**old.partitions, **change(old)})
            with self._errors(path):
                try:
                    zk.set(path, dumps(encode_topic(info)), version=stat.version)
                    return info
                except BadVersionError:
                    continue  # changed meanwhile: check again against the new partitions
                except NoNodeError:
                    raise UnknownTopic(f"topic {name!r} does not exist") from None

    def topics(self) -> dict[str, TopicInfo]:
        return self._read_topics(None)

    def watch_topics(self, callback: Callable[[Mapping[str, TopicInfo]], None]) -> Watch:
        return self._watch_state(TOPICS, TopicsReader(self).compute, callback)

    def _read_topics(self, watch: Any) -> dict[str, TopicInfo]:
        zk = self._zk()
        with self._errors(TOPICS):
            raw = []
            for child in sorted(zk.get_children(TOPICS, watch=watch)):
                with contextlib.suppress(NoNodeError):
                    raw.append((child, zk.get(f"{TOPICS}/{child}", watch=watch)[0]))
        result = {}
        for name, data in raw:
            path = f"{TOPICS}/{name}"
            info = self._readable(path, data, self._decode_topic)
            if info is not None:
                result[name] = info
        return result

    def _decode_topic(self, path: str, data: bytes) -> TopicInfo:
        return decode_topic(path.rpartition("/")[2], self._json(path, data), self._full(path))

    # --- consumer coordinator (seed 001) -----------------------------------------------------
    def elect_coordinator(self, broker_id: int) -> int:
        with self._lock:
            self._coordinator_candidates.add(broker_id)
        return self._elect(COORDINATOR, broker_id)

    def coordinator_id(self) -> int:
        return self._read_holder(COORDINATOR, None)

    def watch_coordinator(self, callback: Callable[[int], None]) -> Watch:
        return self._watch_state(COORDINATOR, lambda w: (self._read_holder(COORDINATOR, w),), callback)

    def groups(self) -> list[str]:
        with self._errors(CONSUMERS):
            return sorted(g for g in self._children(CONSUMERS) if g != "coordinator")

    def owners(self, group: str) -> dict[tuple[str, int], str]:
        result = {}
        for (topic, partition), data in self._read_group_tree(group, "owners").items():
            path = f"{CONSUMERS}/{group}/owners/{topic}/{partition}"
            owner = self._readable(path, data, self._text)
            if owner is not None:
                result[(topic, partition)] = owner
        return result

    def set_owners(self, group: str, owners: Mapping[tuple[str, int], str]) -> None:
        zk = self._zk()
        root = f"{CONSUMERS}/{group}/owners"
        wanted = {(str(t), int(p)): str(o) for (t, p), o in owners.items()}
        current = self._read_group_tree(group, "owners")
        with self._errors(root):
            zk.ensure_path(root)
            for topic, partition in current.keys() - wanted.keys():
                with contextlib.suppress(NoNodeError):
                    zk.delete(f"{root}/{topic}/{partition}")
            for (topic, partition), owner in wanted.items():
                self._put(f"{root}/{topic}/{partition}", owner.encode())

    def members(self, group: str) -> dict[str, int]:
        zk = self._zk()
        root = f"{CONSUMERS}/{group}/members"
        result = {}
        with self._errors(root):
            for child in self._children(root):
                path = f"{root}/{child}"
                try:
                    data = zk.get(path)[0]
                except NoNodeError:
                    continue
                timeout = self._readable(path, data, self._session_timeout)
                if timeout is not None:
                    result[desanitize(child)] = timeout
        return result

    def _session_timeout(self, path: str, data: bytes) -> int:
        timeout = self._json(path, data).get("session_timeout_ms")
        if not isinstance(timeout, int) or isinstance(timeout, bool):
            raise CorruptMetadata(self._full(path), "session_timeout_ms is not an integer")
        return timeout

    def set_members(self, group: str, members: Mapping[str, int]) -> None:
        zk = self._zk()
        root = f"{CONSUMERS}/{group}/members"
        wanted = {sanitize(str(c)): int(t) for c, t in members.items()}
        with self._errors(root):
            zk.ensure_path(root)
            for child in set(self._children(root)) - wanted.keys():
                with contextlib.suppress(NoNodeError):
                    zk.delete(f"{root}/{child}")
            for child, timeout in wanted.items():
                self._put(f"{root}/{child}", dumps({"version": 1, "session_timeout_ms": timeout}))

    def offsets(self, group: str) -> dict[tuple[str, int], int]:
        result = {}
        for (topic, partition), data in self._read_group_tree(group, "offsets").items():
            path = f"{CONSUMERS}/{group}/offsets/{topic}/{partition}"
            offset = self._readable(path, data, self._offset)
            if offset is not None:
                result[(topic, partition)] = offset
        return result

    def _offset(self, path: str, data: bytes) -> int:
        try:
            return int(data.decode())
        except ValueError:  # UnicodeDecodeError included
            raise CorruptMetadata(self._full(path), f"offset {data!r} is not a decimal number") from None

    def commit_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        root = f"{CONSUMERS}/{group}/offsets"
        with self._errors(root):
            for (topic, partition), offset in offsets.items():
                self._put(f"{root}/{topic}/{int(partition)}", str(int(offset)).encode())

    def _read_group_tree(self, group: str, kind: str) -> dict[tuple[str, int], bytes]:
        zk = self._zk()
        root = f"{CONSUMERS}/{group}/{kind}"
        result = {}
        with self._errors(root):
            for topic in self._children(root):
                for partition in self._children(f"{root}/{topic}"):
                    path = f"{root}/{topic}/{partition}"
                    if not partition.isdecimal():
                        self._skip(path, b"", CorruptMetadata(self._full(path), "not a partition number"))
                        continue
                    with contextlib.suppress(NoNodeError):
                        result[(topic, int(partition))] = zk.get(path)[0]
        return result

    # --- producer ids ------------------------------------------------------------------------
    def allocate_producer_id_block(self, broker_id: int) -> ProducerIdBlock:
        """Kafka's ZkProducerIdManager: read the last block and its znode version, write the next
        block only if the version has not moved (another broker got one meanwhile: read again)."""
        zk = self._zk()
        with self._errors(PRODUCER_ID_BLOCK):
            while True:
                try:
                    data, stat = zk.get(PRODUCER_ID_BLOCK)
                except NoNodeError:
                    with contextlib.suppress(NodeExistsError):
                        zk.create(PRODUCER_ID_BLOCK, b"", makepath=True)
                    continue
                # Kafka creates the znode empty at startup: no block has been handed out yet.
                current = decode_producer_id_block(data, self._full(PRODUCER_ID_BLOCK)) if data else None
                block = next_producer_id_block(current, broker_id)
                try:
                    zk.set(PRODUCER_ID_BLOCK, dumps(encode_producer_id_block(block)), version=stat.version)
                except BadVersionError:
                    continue
                log.info("broker %d got producer ids %d to %d", broker_id, block.first_id, block.last_id)
                return block

    # --- partition states --------------------------------------------------------------------
    def partition_states(self) -> dict[tuple[str, int], PartitionState]:
        return dict(PartitionStatesReader(self).compute(None)[0])

    def set_partition_state(self, topic: str, partition: int, state: PartitionState,
                            expected_partition_epoch: int) -> PartitionState:
        """Kafka's controller writes a state with a conditional update on the znode's version
        (its zkVersion); here every writer does, so no write is lost and none based on a stale read
        lands. Parents are created without makepath, so a deleted topic is never brought back."""
        zk = self._zk()
        path = partition_state_path(topic, partition)
        data = dumps(encode_partition_state(state))
        with self._errors(path):
            if expected_partition_epoch != NO_PARTITION_EPOCH:
                try:
                    stat = zk.set(path, data, version=expected_partition_epoch)
                    return attrs.evolve(state, partition_epoch=int(stat.version))
                except BadVersionError:
                    pass
                except NoNodeError:
                    self._check_partition(topic, partition)
                raise self._state_conflict(topic, partition, expected_partition_epoch)
            self._check_partition(topic, partition)
            parents = (f"{TOPICS}/{topic}/partitions", f"{TOPICS}/{topic}/partitions/{partition}")
            while True:
                try:
                    zk.create(path, data)
                    return attrs.evolve(state, partition_epoch=0)
                except NodeExistsError:
                    raise self._state_conflict(topic, partition, expected_partition_epoch) from None
                except NoNodeError:
                    for parent in parents:
                        try:
                            zk.create(parent, b"")
                        except NodeExistsError:
                            pass
                        except NoNodeError:
                            raise UnknownTopic(f"topic {topic!r} does not exist") from None

    def _check_partition(self, topic: str, partition: int) -> None:
        path = f"{TOPICS}/{topic}"
        try:
            data, _ = self._zk().get(path)
        except NoNodeError:
            raise UnknownTopic(f"topic {topic!r} does not exist") from None
        if partition not in decode_topic(topic, self._json(path, data), self._full(path)).partitions:
            raise UnknownTopic(f"topic {topic!r} has no partition {partition}")

    def _state_conflict(self, topic: str, partition: int, expected: int) -> PartitionStateConflict:
        stat = self._zk().exists(partition_state_path(topic, partition))
        found = NO_PARTITION_EPOCH if stat is None else int(stat.version)
        return PartitionStateConflict(f"{self._full(partition_state_path(topic, partition))} is at "
                                      f"version {found}, not {expected}")

    def watch_partition_states(self, callback: Callable[[PartitionStates], None]) -> Watch:
        reader = PartitionStatesReader(self)
        return self._watch_state(f"{TOPICS}/*/partitions/*/state", reader.compute, callback)

    # --- internals ---------------------------------------------------------------------------
    def _zk(self) -> Any:
        if self._closed:
            raise StoreError("the metadata store is closed")
        if self._client is None:
            raise StoreError("the metadata store is not started (call start())")
        return self._reads

    def _connected(self) -> bool:
        return self._client is not None and not self._closed and bool(self._client.connected)

    def _full(self, path: str) -> str:
        return f"{self.chroot}{path}"

    @contextlib.contextmanager
    def _errors(self, path: str) -> Iterator[None]:
        """kazoo's exceptions as StoreError naming the path."""
        try:
            yield
        except KazooException as exc:
            raise StoreError(f"ZooKeeper operation on {self._full(path)} failed: "
                             f"{type(exc).__name__} {exc}".rstrip()) from None

    def _json(self, path: str, data: bytes) -> dict[str, Any]:
        try:
            obj = json.loads(data.decode())
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError; deep nesting
            raise CorruptMetadata(self._full(path), f"invalid JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise CorruptMetadata(self._full(path), "not a JSON object")
        return obj

    def _text(self, path: str, data: bytes) -> str:
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise CorruptMetadata(self._full(path), f"not UTF-8 ({exc})") from None

    def _readable(self, path: str, data: bytes, decode: Callable[[str, bytes], _T]) -> _T | None:
        """One child of a list read: its decoded value, or None when it is corrupt, so that one bad
        znode never hides the good ones. Skips are logged once per content of the znode, not on every
        re-read (watches re-read often)."""
        try:
            value = decode(path, data)
        except CorruptMetadata as exc:
            self._skip(path, data, exc)
            return None
        if self._skipped:
            with self._lock:
                self._skipped.pop(path, None)  # readable again: a new corruption is news
        return value

    def _skip(self, path: str, data: bytes, problem: CorruptMetadata) -> None:
        with self._lock:
            news = self._skipped.get(path) != data
            self._skipped[path] = data
        if news:
            log.error("skipping %s", problem)

    def _check_version(self, path: str, obj: Mapping[str, Any], known: tuple[Any, ...], key: str) -> None:
        if obj.get(key) not in known or isinstance(obj.get(key), bool):
            raise CorruptMetadata(self._full(path), f"unknown version {obj.get(key)!r} "
                                                    f"(known: {', '.join(map(str, known))})")

    def _children(self, path: str) -> list[str]:
        try:
            return list(self._zk().get_children(path))
        except NoNodeError:
            return []

    def _put(self, path: str, data: bytes) -> None:
        zk = self._zk()
        try:
            zk.set(path, data)
        except NoNodeError:
            try:
                zk.create(path, data, makepath=True)
            except NodeExistsError:
                zk.set(path, data)

    def _get_or_watch(self, path: str, watch: Any) -> tuple[bytes, int] | None:
        """(data, version), or None when absent; with ``watch``, a ZooKeeper watch is left either way."""
        zk = self._zk()
        with self._errors(path):
            while True:
                try:
                    data, stat = zk.get(path, watch=watch)
                    return data, int(stat.version)
                except NoNodeError:
                    if watch is None or zk.exists(path, watch=watch) is None:
                        return None

    def _read_holder(self, path: str, watch: Any) -> int:
        got = self._get_or_watch(path, watch)
        if got is None:
            return -1
        data = got[0]
        if path == COORDINATOR:
            try:
                return int(data.decode().strip())
            except ValueError:
                raise CorruptMetadata(self._full(path), f"{data!r} is not a broker id") from None
        obj = self._json(path, data)
        self._check_version(path, obj, (1, 2), "version")
        broker_id = obj.get("brokerid")
        if not isinstance(broker_id, int):
            raise CorruptMetadata(self._full(path), "no brokerid")
        return broker_id

    def _elect(self, path: str, broker_id: int) -> int:
        zk = self._zk()
        if path == COORDINATOR:
            data = str(broker_id).encode()
        else:
            data = dumps({"version": 1, "brokerid": broker_id, "timestamp": now_ms()})
        while True:
            with self._errors(path):
                try:
                    zk.create(path, data, ephemeral=True, makepath=True)
                    log.info("broker %d is now the %s", broker_id, "consumer coordinator"
                             if path == COORDINATOR else "controller")
                    return broker_id
                except NodeExistsError:
                    pass
            holder = self._read_holder(path, None)
            if holder != -1:
                return holder

    def _watch_election(self, path: str) -> None:
        self._watch_state(path, lambda w: (self._read_holder(path, w),),
                          lambda holder: self._reelect(path, holder))

    def _reelect(self, path: str, holder: int) -> None:
        """Internal watch: the holder is gone, so our best candidate runs (every store races)."""
        if holder != -1 or self._closed:
            return
        with self._lock:
            candidates = self._controller_candidates if path == CONTROLLER else self._coordinator_candidates
            best = min(candidates, default=None)
        if best is not None:
            self._elect(path, best)

    def _delete_own(self, path: str) -> None:
        """Delete an ephemeral node only if this session owns it."""
        zk = self._zk()
        stat = zk.exists(path)
        if stat is not None and stat.ephemeralOwner == zk.client_id[0]:
            with contextlib.suppress(NoNodeError):
                zk.delete(path, version=stat.version)

    def _watch_state(self, path: str, compute: Callable[[Any], tuple[Any, ...]],
                     callback: Callable[..., None]) -> Subscription:
        """Subscribe to the one StateWatch of ``path`` (created on first use)."""
        self._zk()
        name = self._full(path)
        with self._lock:
            watch = self._state_watches.get(name)
            if watch is None:
                watch = self._state_watches[name] = StateWatch(self, name, compute)
                self._watches.append(watch)
            subscription = Subscription(watch, callback)
            watch.subscribers.append(subscription)
        watch.start(subscription)
        return subscription

    def _unsubscribe(self, subscription: Subscription) -> None:
        watch = subscription.watch
        with self._lock:
            with contextlib.suppress(ValueError):
                watch.subscribers.remove(subscription)
            if not watch.subscribers and self._state_watches.get(watch.name) is watch:
                watch.cancelled = True  # its ZooKeeper watches fire once more, into nothing
                del self._state_watches[watch.name]
                self._watches.remove(watch)

    def _forget(self, watch: ChangeWatch) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._watches.remove(watch)

    def _submit(self, task: Callable[[], None]) -> None:
        if not self._closed:
            self._queue.put(task)

    def _run(self) -> None:
        while True:
            task = self._queue.get()
            if task is None or self._closed:
                return
            try:
                task()
            except Exception:
                log.exception("ZooKeeper store task failed (ignored)")

    def _on_state(self, state: Any) -> None:
        # kazoo calls this on its connection thread, which must not block: hand over to the worker.
        if state != KazooState.CONNECTED:  # counted before the reconnect's refresh is submitted
            self.connection_drops += 1
        if state == KazooState.CONNECTED:
            self._submit(self._reconnected)
        elif state == KazooState.LOST:
            log.warning("ZooKeeper session lost (%s); will re-register on a new session", self.connect)

    def _reconnected(self) -> None:
        if not self._connected():
            return
        session_id = self._client.client_id[0]
        new_session = session_id != self._session_id
        self._session_id = session_id
        if new_session:
            log.warning("new ZooKeeper session 0x%x: re-registering brokers %s and re-arming watches",
                        session_id, sorted(self._registrations))
            self._reregister()
        with self._lock:
            watches = list(self._watches)
        for watch in watches:
            watch.refresh(force=new_session)

    def _reregister(self) -> None:
        with self._lock:
            registrations = list(self._registrations.values())
        zk = self._client
        deadline = time.monotonic() + self.session_timeout_ms / 1000 * 2
        for registration in registrations:
            path = f"{BROKER_IDS}/{registration.broker_id}"
            while not self._closed:
                try:
                    zk.create(path, dumps(encode_broker(registration)), ephemeral=True, makepath=True)
                    break
                except NodeExistsError:
                    held = self._held_by_another(path, deadline)
                    if held is None:
                        break  # ours already
                    if held:
                        log.error("cannot re-register broker %d: %s is held by another session",
                                  registration.broker_id, self._full(path))
                        break
                except KazooException as exc:
                    log.error("cannot re-register broker %d at %s: %s", registration.broker_id,
                              self._full(path), exc)
                    break

    def _held_by_another(self, path: str, deadline: float) -> bool | None:
        """None if this session holds ``path``; else wait (woken by a ZooKeeper watch, not a poll)
        until it changes, typically the old session's node going, and say whether the deadline
        passed first."""
        zk = self._client
        changed = threading.Event()
        stat = zk.exists(path, watch=lambda event: changed.set())
        if stat is None:
            return False
        if stat.ephemeralOwner == zk.client_id[0]:
            return None
        return not changed.wait(max(0.0, deadline - time.monotonic()))


if TYPE_CHECKING:
    from kafkapy.store.base import MetadataStore

    def _implements_the_interface(store: ZooKeeperStore) -> MetadataStore:
        return store
