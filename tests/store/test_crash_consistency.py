"""A `kafkapy serve` killed (SIGKILL) at any moment loses nothing it acknowledged.

Kafka's promise for its metadata log, and the durable store's (kafkapy.store.durable): whatever a
client was told of survives a process kill at any moment, and the broker always starts again (a
torn last entry is cut). A client thread sends a random stream of metadata changes through
kafkapy's SimpleClient (topics with configs made and deleted under a few names, partitions added,
topic and cluster-default broker configs, client quotas, SCRAM users, ACLs, InitProducerId, group
offset commits) while a confluent-kafka idempotent producer writes with acks=all; each answered
change is recorded. The broker is killed at a random moment, or the moment a snapshot compaction
is under way (the snapshot threshold is 1 byte, so compactions come every few changes), and
started again: it must start, and every acknowledged change must be there (the one in flight may
be either way), producer ids never repeat, leader epochs never go back, acknowledged records are
read back. ``CRASH_SOAK_ROUNDS`` (an environment variable) runs more rounds by hand.

A broker killed while it adopts an older kafkapy's log dirs finishes adopting at its next start.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkapy.acls.model import AclOperation, AclPermissionType, PatternType, ResourceType
from kafkapy.client import SimpleClient
from kafkapy.commands.configs import BROKER_RESOURCE, TOPIC_RESOURCE
from kafkapy.configs.topics import DYNAMIC_DEFAULT_BROKER_CONFIG, DYNAMIC_TOPIC_CONFIG
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.sasl.scram import MECHANISMS
from kafkapy.store.journal import SNAPSHOT_FILE
from tests.server.test_log_dir_adoption import write_logs
from tests.store.test_durable_serve import TIMEOUT_S, Serve

NAMES = ("t0", "t1", "t2", "t3")  # few names, so topics are deleted and made again under them
LEDGER, GROUP = "ledger", "crash-group"
TOPIC_KEYS = {"retention.ms": ("3600000", "7200000"), "max.message.bytes": ("100000", "200000")}
BROKER_KEYS = {"log.retention.ms": ("3600000", "7200000"), "message.max.bytes": ("1000000", "2000000")}
CLIENTS, USERS, PRINCIPALS = ("c0", "c1"), ("u0", "u1"), ("User:p0", "User:p1")
SHA_256 = MECHANISMS["SCRAM-SHA-256"].code
ALL_ACLS = {"resource_type_filter": ResourceType.ANY, "resource_name_filter": None,
            "pattern_type_filter": PatternType.ANY, "principal_filter": None, "host_filter": None,
            "operation": AclOperation.ANY, "permission_type": AclPermissionType.ANY}
SNAPSHOT_TMP = SNAPSHOT_FILE + ".tmp"
ADOPTED_TOPICS = 300  # enough that a kill at the first one comes before the last
# A compaction every few changes; no topic made again by a producer that still writes to it.
SETTINGS = ("metadata.log.max.record.bytes.between.snapshots=1", "auto.create.topics.enable=false")
# The metadata changes the broker is asked for; the state it must then hold, flattened.
State = dict[str, Any]


COORDINATOR_NOT_READY = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                         ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


def _group_request(client: SimpleClient, api_key: ApiKey, version: int, body: dict[str, Any],
                   error: Callable[[Any], int]) -> Any:
    """A group coordinator's request, sent again while the coordinator is not ready (it is made
    and loaded on first use, as Kafka's clients find it with FindCoordinator)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        client.request(ApiKey.FIND_COORDINATOR, 1, {"key": GROUP, "key_type": 0})
        answer = client.request(api_key, version, body)
        if error(answer) not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)


def _metadata(client: SimpleClient) -> Any:
    """Every topic, with ids and leader epochs (Metadata v12)."""
    return client.request(ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False})


def _new_producer_id(client: SimpleClient) -> int:
    answer = client.request(ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})
    _ok(answer.error_code, "InitProducerId")
    return int(answer.producer_id)


def _ok(code: int, what: str) -> None:
    if code != ErrorCode.NONE:
        raise AssertionError(f"{what}: {ErrorCode(code).name}")


class Workload:
    """The random stream of changes (one at a time) and what was acknowledged of it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.state: State = {}  # acknowledged: key -> value (absent: none)
        self.pending: tuple[str, Any] | None = None  # the change sent and not yet answered
        self.producer_ids: list[int] = []
        self.committed: int | None = None
        self.pending_commit: int | None = None
        self.produced: set[bytes] = set()  # acknowledged with acks=all
        self.operations = 0
        self.kills_in_snapshot = 0  # kills while a snapshot's .tmp file was being written
        self.torn_cuts = 0  # starts that cut a torn journal entry
        self.kills_in_start = 0  # kills of a broker still starting
        self.lock = threading.Lock()

    # --- the client thread -----------------------------------------------------------------------

    def run(self, bootstrap: str, stop: threading.Event, run_id: int) -> None:
        """Changes until ``stop`` or until the broker is gone (its connection closes)."""
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 0, "message.timeout.ms": 60000})

        def delivered(err: Any, message: Any) -> None:
            if err is None and not stop.is_set():
                with self.lock:
                    self.produced.add(message.value())

        try:
            with SimpleClient(bootstrap, timeout=TIMEOUT_S) as client:
                while not stop.is_set():
                    producer.produce(LEDGER, f"{run_id}-{self.operations}".encode(), partition=0,
                                     on_delivery=delivered)
                    topics = sorted(k[6:] for k in self.state if k.startswith("topic:"))
                    if topics:  # logs under the names made again: a deleted topic's may outlive a kill
                        producer.produce(self.rng.choice(topics), b"x", partition=0)
                    producer.poll(0)
                    self._one_change(client)
        except (OSError, EOFError, ConnectionError, Exception) as exc:  # the broker was killed
            if not stop.is_set():
                raise AssertionError(f"a change failed before the kill: {exc!r}") from exc
        finally:
            producer.poll(0)

    def _one_change(self, client: SimpleClient) -> None:
        kind = self.rng.choice((self._topic, self._topic, self._partitions, self._topic_config,
                                self._broker_config, self._quota, self._user, self._acl,
                                self._producer_id, self._commit))
        kind(client)
        self.operations += 1

    def _send(self, key: str, value: Any, call: Callable[[], None]) -> None:
        with self.lock:
            self.pending = (key, value)
        call()
        with self.lock:
            if value is None:
                self.state.pop(key, None)
            else:
                self.state[key] = value
            self.pending = None

    def _topic(self, client: SimpleClient) -> None:
        name = self.rng.choice(NAMES)
        key = f"topic:{name}"
        if key in self.state:
            def delete() -> None:
                answer = client.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": [name], "timeout_ms": 30000})
                _ok(answer.responses[0].error_code, f"DeleteTopics {name}")
            self._send(key, None, delete)
            return
        count = self.rng.randint(1, 3)
        configs = {k: self.rng.choice(v) for k, v in TOPIC_KEYS.items() if self.rng.random() < 0.5}

        def create() -> None:
            answer = client.request(ApiKey.CREATE_TOPICS, 5, {
                "topics": [{"name": name, "num_partitions": count, "replication_factor": 1, "assignments": [],
                            "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "timeout_ms": 30000, "validate_only": False})
            _ok(answer.topics[0].error_code, f"CreateTopics {name}")
        self._send(key, (count, tuple(sorted(configs.items()))), create)

    def _some_topic(self) -> str | None:
        """The key of a topic the broker holds, at random (None: it holds none)."""
        topics = sorted(k for k in self.state if k.startswith("topic:"))
        return self.rng.choice(topics) if topics else None

    def _partitions(self, client: SimpleClient) -> None:
        if (key := self._some_topic()) is None:
            return
        count, configs = self.state[key]

        def grow() -> None:
            answer = client.request(ApiKey.CREATE_PARTITIONS, 1, {
                "topics": [{"name": key[6:], "count": count + 1, "assignments": None}],
                "timeout_ms": 30000, "validate_only": False})
            _ok(answer.results[0].error_code, f"CreatePartitions {key}")
        self._send(key, (count + 1, configs), grow)

    def _topic_config(self, client: SimpleClient) -> None:
        if (key := self._some_topic()) is None:
            return
        count, configs = self.state[key]
        name = self.rng.choice(sorted(TOPIC_KEYS))
        value = None if self.rng.random() < 0.3 else self.rng.choice(TOPIC_KEYS[name])
        after = {**dict(configs), name: value}
        after = {k: v for k, v in after.items() if v is not None}

        def alter() -> None:
            answer = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
                "resource_type": TOPIC_RESOURCE, "resource_name": key[6:],
                "configs": [{"name": name, "config_operation": 1 if value is None else 0, "value": value}]}],
                "validate_only": False})
            _ok(answer.responses[0].error_code, f"IncrementalAlterConfigs {key}")
        self._send(key, (count, tuple(sorted(after.items()))), alter)

    def _broker_config(self, client: SimpleClient) -> None:
        name = self.rng.choice(sorted(BROKER_KEYS))
        value = None if self.rng.random() < 0.3 else self.rng.choice(BROKER_KEYS[name])

        def alter() -> None:
            answer = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
                "resource_type": BROKER_RESOURCE, "resource_name": "",
                "configs": [{"name": name, "config_operation": 1 if value is None else 0, "value": value}]}],
                "validate_only": False})
            _ok(answer.responses[0].error_code, f"IncrementalAlterConfigs broker {name}")
        self._send(f"broker:{name}", value, alter)

    def _quota(self, client: SimpleClient) -> None:
        name = self.rng.choice(CLIENTS)
        value = None if self.rng.random() < 0.3 else float(self.rng.choice((1024, 2048, 4096)))

        def alter() -> None:
            answer = client.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [{
                "entity": [{"entity_type": "client-id", "entity_name": name}],
                "ops": [{"key": "producer_byte_rate", "value": value or 0.0, "remove": value is None}]}],
                "validate_only": False})
            _ok(answer.entries[0].error_code, f"AlterClientQuotas {name}")
        self._send(f"quota:{name}", value, alter)

    def _user(self, client: SimpleClient) -> None:
        name = self.rng.choice(USERS)
        iterations = None if f"user:{name}" in self.state and self.rng.random() < 0.4 else \
            self.rng.choice((4096, 8192))

        def alter() -> None:
            if iterations is None:
                body: dict[str, Any] = {"deletions": [{"name": name, "mechanism": SHA_256}], "upsertions": []}
            else:
                body = {"deletions": [], "upsertions": [{
                    "name": name, "mechanism": SHA_256, "iterations": iterations, "salt": os.urandom(16),
                    "salted_password": os.urandom(32)}]}
            answer = client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, body)
            _ok(answer.results[0].error_code, f"AlterUserScramCredentials {name}")
        self._send(f"user:{name}", iterations, alter)

    def _acl(self, client: SimpleClient) -> None:
        principal = self.rng.choice(PRINCIPALS)
        key = f"acl:{principal}"
        binding = {"resource_type": ResourceType.TOPIC, "resource_name": LEDGER,
                   "resource_pattern_type": PatternType.LITERAL, "principal": principal, "host": "*",
                   "operation": AclOperation.READ, "permission_type": AclPermissionType.ALLOW}
        if key in self.state:
            def delete() -> None:
                answer = client.request(ApiKey.DELETE_ACLS, 2, {"filters": [{
                    "resource_type_filter": ResourceType.TOPIC, "resource_name_filter": LEDGER,
                    "pattern_type_filter": PatternType.LITERAL, "principal_filter": principal,
                    "host_filter": "*",
                    "operation": AclOperation.READ, "permission_type": AclPermissionType.ALLOW}]})
                _ok(answer.filter_results[0].error_code, f"DeleteAcls {principal}")
            self._send(key, None, delete)
        else:
            def create() -> None:
                answer = client.request(ApiKey.CREATE_ACLS, 2, {"creations": [binding]})
                _ok(answer.results[0].error_code, f"CreateAcls {principal}")
            self._send(key, True, create)

    def _producer_id(self, client: SimpleClient) -> None:
        producer_id = _new_producer_id(client)
        with self.lock:
            assert producer_id not in self.producer_ids, producer_id
            self.producer_ids.append(producer_id)

    def _commit(self, client: SimpleClient) -> None:
        offset = (self.committed or 0) + 1
        with self.lock:
            self.pending_commit = offset
        answer = _group_request(client, ApiKey.OFFSET_COMMIT, 2, {
            "group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
            "topics": [{"name": LEDGER, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                        "committed_metadata": ""}]}]},
            lambda answer: answer.topics[0].partitions[0].error_code)
        _ok(answer.topics[0].partitions[0].error_code, "OffsetCommit")
        with self.lock:
            self.committed, self.pending_commit = offset, None


# --- what the restarted broker holds ---------------------------------------------------------------

def observe(client: SimpleClient) -> State:
    """The broker's state, flattened as Workload.state is."""
    state: State = {}
    metadata = _metadata(client)
    names = sorted(t.name for t in metadata.topics if t.name in NAMES)
    counts = {t.name: len(t.partitions) for t in metadata.topics}
    resources = [{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configuration_keys": None}
                 for name in names]
    resources.append({"resource_type": BROKER_RESOURCE, "resource_name": "", "configuration_keys": None})
    described = client.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": resources, "include_synonyms": False,
                                                            "include_documentation": False})
    for result in described.results:
        _ok(result.error_code, f"DescribeConfigs {result.resource_name}")
        if result.resource_type == TOPIC_RESOURCE:
            overrides = tuple(sorted((c.name, c.value) for c in result.configs
                                     if c.config_source == DYNAMIC_TOPIC_CONFIG and c.name in TOPIC_KEYS))
            state[f"topic:{result.resource_name}"] = (counts[result.resource_name], overrides)
        else:
            state.update((f"broker:{c.name}", c.value) for c in result.configs
                         if c.config_source == DYNAMIC_DEFAULT_BROKER_CONFIG and c.name in BROKER_KEYS)
    quotas = client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})
    for entry in quotas.entries:
        for value in entry["values"]:
            if value.key == "producer_byte_rate":
                state[f"quota:{entry.entity[0].entity_name}"] = value.value
    users = client.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
    for user in users.results:
        if user.error_code == ErrorCode.NONE and user.credential_infos:
            state[f"user:{user.user}"] = user.credential_infos[0].iterations
    acls = client.request(ApiKey.DESCRIBE_ACLS, 2, ALL_ACLS)
    _ok(acls.error_code, "DescribeAcls")
    for resource in acls.resources:
        for acl in resource.acls:
            state[f"acl:{acl.principal}"] = True
    return state


def leader_epochs(client: SimpleClient) -> dict[tuple[str, int], int]:
    return {(str(t.topic_id), p.partition_index): p.leader_epoch
            for t in _metadata(client).topics for p in t.partitions}


def committed_offset(client: SimpleClient) -> int:
    answer = _group_request(client, ApiKey.OFFSET_FETCH, 6, {
        "group_id": GROUP, "topics": [{"name": LEDGER, "partition_indexes": [0]}], "require_stable": False},
        lambda answer: answer.error_code)
    return int(answer.topics[0].partitions[0].committed_offset)


def read_ledger(bootstrap: str, wanted: set[bytes]) -> list[bytes]:
    """The ledger's records, read until each of ``wanted`` is (or the timeout)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-reader",
                         "enable.auto.commit": False})
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(LEDGER, 0, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while not wanted <= set(values) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        # What came after the last wanted record, if anything: not waited for.
    finally:
        consumer.close()
    return values


def check_and_adopt(work: Workload, bootstrap: str, epochs: dict[tuple[str, int], int]) -> None:
    """The restarted broker holds every acknowledged change (the pending one either way); the
    workload then goes on from what it holds."""
    with SimpleClient(bootstrap, timeout=TIMEOUT_S) as client:
        seen = observe(client)
        pending = work.pending
        for key in set(work.state) | set(seen) | ({pending[0]} if pending else set()):
            allowed = [work.state.get(key)]
            if pending is not None and pending[0] == key:
                allowed.append(pending[1])
            assert seen.get(key) in allowed, f"{key}: {seen.get(key)!r}, acknowledged {allowed}"
        work.state, work.pending = seen, None
        offset = committed_offset(client)
        assert offset in (work.committed if work.committed is not None else -1, work.pending_commit), \
            (offset, work.committed, work.pending_commit)
        work.committed = None if offset < 0 else offset
        work.pending_commit = None
        producer_id = _new_producer_id(client)
        assert all(producer_id > before for before in work.producer_ids), \
            (producer_id, work.producer_ids[-3:])
        work.producer_ids.append(producer_id)
        now = leader_epochs(client)
    went_back = {key: (epoch, now[key]) for key, epoch in epochs.items() if key in now and now[key] < epoch}
    assert not went_back, went_back
    epochs.update(now)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "message.timeout.ms": 15000})
    failed: list[str] = []
    for name in sorted(k[6:] for k in work.state if k.startswith("topic:")):
        for partition in range(work.state[f"topic:{name}"][0]):
            producer.produce(name, b"after the restart", partition=partition,
                             on_delivery=lambda err, m: failed.append(f"{m.topic()}-{m.partition()}: {err}")
                             if err is not None else None)
    assert producer.flush(TIMEOUT_S) == 0
    assert not failed, failed
    values = read_ledger(bootstrap, work.produced)
    assert work.produced <= set(values), sorted(work.produced - set(values))[:5]
    assert len(values) == len(set(values)), "a record written twice by an idempotent producer"


def one_round(work: Workload, log_dir: Path, run_id: int, epochs: dict[tuple[str, int], int],
              during_snapshot: bool) -> None:
    """Start the broker, check it, change things, kill it (at random or as a snapshot is written)."""
    served = Serve(log_dir, *SETTINGS)
    try:
        bootstrap = served.bootstrap()
        work.torn_cuts += any("torn by a crash" in line for line in served.stderr)
        if run_id == 0:
            with SimpleClient(bootstrap, timeout=TIMEOUT_S) as client:
                answer = client.request(ApiKey.CREATE_TOPICS, 5, {"topics": [{
                    "name": LEDGER, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                    "configs": []}], "timeout_ms": 30000, "validate_only": False})
                _ok(answer.topics[0].error_code, "CreateTopics ledger")
        else:
            try:
                check_and_adopt(work, bootstrap, epochs)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nthe broker's log:\n{''.join(served.stderr[-30:])}") from None
        stop = threading.Event()
        thread = threading.Thread(target=work.run, args=(bootstrap, stop, run_id), daemon=True)
        thread.start()
        tmp = log_dir / SNAPSHOT_TMP
        deadline = time.monotonic() + (5.0 if during_snapshot else work.rng.uniform(0.05, 1.5))
        while time.monotonic() < deadline and thread.is_alive():
            if during_snapshot and tmp.exists():
                break
            time.sleep(0 if during_snapshot else 0.01)
        assert thread.is_alive(), "the client thread stopped before the kill"
        with work.lock:  # the pending change stays pending: the kill may beat its write
            stop.set()
            served.kill()
            work.kills_in_snapshot += tmp.exists()
        thread.join(TIMEOUT_S)
    finally:
        served.kill()


def test_a_kill_at_any_moment_loses_nothing_acknowledged(tmp_path: Path) -> None:
    seed = int(os.environ.get("CRASH_SEED", "25"))
    rounds = int(os.environ.get("CRASH_SOAK_ROUNDS", "6"))
    work = Workload(random.Random(seed))
    epochs: dict[tuple[str, int], int] = {}
    for run_id in range(rounds):
        if run_id % 3 == 0:  # a start killed too: the first (files half made), or in its replay
            served = Serve(tmp_path, *SETTINGS)
            time.sleep(work.rng.uniform(0.0, 1.0))
            served.kill()
            work.kills_in_start += 1
        one_round(work, tmp_path, run_id, epochs, during_snapshot=run_id % 2 == 1)
    served = Serve(tmp_path, *SETTINGS)
    try:
        check_and_adopt(work, served.bootstrap(), epochs)
    finally:
        served.kill()
    print(f"crash soak: seed {seed}, {rounds + work.kills_in_start} kills ({work.kills_in_start} while "
          f"starting), {work.operations} operations, "
          f"{len(work.produced)} records acknowledged, {work.kills_in_snapshot} kills during a snapshot, "
          f"{work.torn_cuts} torn entries cut")


def test_a_kill_during_adoption_is_finished_by_the_next_start(tmp_path: Path) -> None:
    """Log dirs an older kafkapy wrote (partition logs with their topic ids, no metadata files)
    are adopted topic by topic; a broker killed in the middle, three times (after the first topic
    it adopts, then after a few more), adopts the rest at its next start."""
    ids = {f"old-{index:03d}": uuid.uuid4() for index in range(ADOPTED_TOPICS)}
    write_logs(tmp_path, 1, {(topic, 0): topic_id for topic, topic_id in ids.items()})
    rng = random.Random(int(os.environ.get("CRASH_SEED", "25")))
    for adopted in (1, rng.randint(2, 20), rng.randint(2, 20)):
        served = Serve(tmp_path, "broker.id=1", *SETTINGS)
        try:
            for _ in range(adopted):
                assert served.wait_for("Adopted topic old-"), "".join(served.stderr)
        finally:
            served.kill()
        time.sleep(0.2)  # the reader thread's last lines
        assert not any("topics adopted from log dirs" in line for line in served.stderr), \
            "the kill came after the adoption: nothing was left to finish"
    served = Serve(tmp_path, "broker.id=1", *SETTINGS)
    try:
        with SimpleClient(served.bootstrap(), timeout=TIMEOUT_S) as client:
            metadata = _metadata(client)
    finally:
        served.kill()
    assert {t.name: t.topic_id for t in metadata.topics if t.name.startswith("old-")} == ids
    assert not list(tmp_path.glob("*-stray"))  # no log of theirs was taken for a stray
