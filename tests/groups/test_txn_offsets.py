"""TxnOffsetCommit on the wire (kafkapy.groups.txn_offsets): Kafka's checks, the offsets pending
until the transaction's marker (UNSTABLE_OFFSET_COMMIT for require_stable meanwhile), a commit
making them the group's and an abort dropping them, and all of it rebuilt from
``__consumer_offsets`` after a restart with log.dirs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.coordinator import ClassicCoordinator, GroupConfig
from kafkapy.groups.module import CoordinatorKeyType
from kafkapy.groups.partitioning import OFFSETS_TOPIC, offsets_partition_for
from kafkapy.groups.persistence import OpenTxnRecords
from kafkapy.groups.records import GroupRecord, OffsetCommitKey, OffsetCommitValue
from kafkapy.groups.timers import ManualScheduler, Timers
from kafkapy.groups.txn_offsets import TxnOffsetCommits
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.server.txn_markers import TxnMarker
from kafkapy.store import MemoryStore
from kafkapy.testing import wait_until

Partition = tuple[str, int]
CONFIG = {"broker.id": 1, "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3}


def ready(client: SimpleClient, group: str, transactional_id: str) -> None:
    """Both coordinators found (their topics made) and answering."""
    def found(key_type: int, key: str) -> bool:
        answer = client.request(ApiKey.FIND_COORDINATOR, 3, {"key": key, "key_type": key_type})
        return bool(answer["error_code"] == ErrorCode.NONE)
    wait_until(lambda: found(CoordinatorKeyType.GROUP, group), what="a group coordinator")
    wait_until(lambda: found(CoordinatorKeyType.TRANSACTION, transactional_id), what="a txn coordinator")


def init(client: SimpleClient, transactional_id: str) -> tuple[int, int]:
    answers: list[Any] = []

    def answered() -> bool:
        answers.append(client.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": transactional_id, "transaction_timeout_ms": 60_000,
            "producer_id": -1, "producer_epoch": -1}))
        return bool(answers[-1]["error_code"] == ErrorCode.NONE)
    wait_until(answered, what="a producer id")
    return answers[-1]["producer_id"], answers[-1]["producer_epoch"]


def add_offsets(client: SimpleClient, transactional_id: str, producer: tuple[int, int], group: str) -> int:
    return int(client.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {
        "transactional_id": transactional_id, "producer_id": producer[0], "producer_epoch": producer[1],
        "group_id": group})["error_code"])


def txn_commit(client: SimpleClient, transactional_id: str, producer: tuple[int, int], group: str,
               offsets: dict[tuple[str, int], int], version: int = 3, **extra: Any) -> dict[Partition, int]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                             "committed_leader_epoch": -1, "committed_metadata": "m"})
    body = client.request(ApiKey.TXN_OFFSET_COMMIT, version, {
        "transactional_id": transactional_id, "group_id": group, "producer_id": producer[0],
        "producer_epoch": producer[1],
        "topics": [{"name": t, "partitions": p} for t, p in topics.items()],
        **extra})
    return {(t["name"], p["partition_index"]): p["error_code"]
            for t in body["topics"] for p in t["partitions"]}


def end(client: SimpleClient, transactional_id: str, producer: tuple[int, int], commit: bool) -> int:
    return int(client.request(ApiKey.END_TXN, 3, {
        "transactional_id": transactional_id, "producer_id": producer[0], "producer_epoch": producer[1],
        "committed": commit})["error_code"])


def fetch(client: SimpleClient, group: str, require_stable: bool = False) -> dict[Partition, tuple[int, int]]:
    """(offset, error) per partition of topic t (partitions 0 and 1)."""
    body = client.request(ApiKey.OFFSET_FETCH, 7, {
        "group_id": group, "topics": [{"name": "t", "partition_indexes": [0, 1]}],
        "require_stable": require_stable})
    return {("t", p["partition_index"]): (p["committed_offset"], p["error_code"])
            for t in body["topics"] for p in t["partitions"]}


@pytest.fixture
def client() -> Iterator[SimpleClient]:
    with Broker(CONFIG) as broker, SimpleClient(broker.bootstrap_servers) as simple:
        simple.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "t", "num_partitions": 2,
                                                             "replication_factor": 1}], "timeout_ms": 5000})
        ready(simple, "g", "tx")
        yield simple


def test_offsets_wait_for_the_commit_marker(client: SimpleClient) -> None:
    producer = init(client, "tx")
    assert add_offsets(client, "tx", producer, "g") == ErrorCode.NONE
    assert txn_commit(client, "tx", producer, "g", {("t", 0): 5, ("t", 1): 7}) == {
        ("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
    assert fetch(client, "g") == {("t", 0): (-1, ErrorCode.NONE), ("t", 1): (-1, ErrorCode.NONE)}
    assert fetch(client, "g", require_stable=True) == {
        ("t", 0): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT), ("t", 1): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)}
    assert end(client, "tx", producer, commit=True) == ErrorCode.NONE
    wait_until(lambda: fetch(client, "g", require_stable=True) == {
        ("t", 0): (5, ErrorCode.NONE), ("t", 1): (7, ErrorCode.NONE)}, what="the committed offsets")


def test_an_aborted_transactions_offsets_are_dropped(client: SimpleClient) -> None:
    producer = init(client, "tx")
    add_offsets(client, "tx", producer, "g")
    txn_commit(client, "tx", producer, "g", {("t", 0): 5})
    assert end(client, "tx", producer, commit=True) == ErrorCode.NONE
    wait_until(lambda: fetch(client, "g", require_stable=True)[("t", 0)] == (5, ErrorCode.NONE),
               what="the first commit")
    add_offsets(client, "tx", producer, "g")
    txn_commit(client, "tx", producer, "g", {("t", 0): 9})
    assert end(client, "tx", producer, commit=False) == ErrorCode.NONE
    wait_until(lambda: fetch(client, "g", require_stable=True)[("t", 0)] == (5, ErrorCode.NONE),
               what="the abort's marker")


def test_the_offsets_partition_must_be_in_the_transaction(client: SimpleClient) -> None:
    producer = init(client, "tx")
    assert txn_commit(client, "tx", producer, "g", {("t", 0): 5}, version=4) == {
        ("t", 0): ErrorCode.TRANSACTION_ABORTABLE}
    assert txn_commit(client, "tx", producer, "g", {("t", 0): 5}, version=3) == {
        ("t", 0): ErrorCode.INVALID_TXN_STATE}  # v3 lacks TRANSACTION_ABORTABLE (KIP-890)
    assert fetch(client, "g", require_stable=True)[("t", 0)] == (-1, ErrorCode.NONE)


def test_verification_is_not_asked_once_the_transaction_is_open_in_the_offsets_partition() -> None:
    """KIP-890 part 1 (ReplicaManager.maybeStartTransactionVerificationForPartition): the transaction
    coordinator is asked only while the producer has no transaction open in the group's offsets
    partition. Cut off after the first commit, it would answer COORDINATOR_LOAD_IN_PROGRESS if asked."""
    with Broker(CONFIG) as broker, SimpleClient(broker.bootstrap_servers) as client:
        client.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "t", "num_partitions": 2,
                                                             "replication_factor": 1}], "timeout_ms": 5000})
        ready(client, "g", "tx")
        producer = init(client, "tx")
        assert add_offsets(client, "tx", producer, "g") == ErrorCode.NONE
        assert txn_commit(client, "tx", producer, "g", {("t", 0): 5}) == {("t", 0): ErrorCode.NONE}
        with broker.coordinator_unavailable(transactional_id="tx",
                                            error=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            assert txn_commit(client, "tx", producer, "g", {("t", 1): 7}) == {("t", 1): ErrorCode.NONE}
        assert end(client, "tx", producer, commit=True) == ErrorCode.NONE
        wait_until(lambda: fetch(client, "g", require_stable=True) == {
            ("t", 0): (5, ErrorCode.NONE), ("t", 1): (7, ErrorCode.NONE)}, what="both commits")


def test_verification_off_takes_a_commit_the_coordinator_would_refuse(client: SimpleClient) -> None:
    """transaction.partition.verification.enable=false (dynamic): a commit without AddOffsetsToTxn
    is taken unverified and left pending (the hanging transaction KIP-890 is there to prevent)."""
    producer = init(client, "tx")
    assert txn_commit(client, "tx", producer, "h", {("t", 0): 9}, version=4) == {
        ("t", 0): ErrorCode.TRANSACTION_ABORTABLE}
    altered = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": 4, "resource_name": "", "configs": [{
            "name": "transaction.partition.verification.enable", "config_operation": 0,
            "value": "false"}]}], "validate_only": False})
    assert altered["responses"][0]["error_code"] == ErrorCode.NONE
    assert txn_commit(client, "tx", producer, "h", {("t", 0): 9}, version=4) == {("t", 0): ErrorCode.NONE}
    assert fetch(client, "h", require_stable=True)[("t", 0)] == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)


def test_fenced_producers_unknown_partitions_and_members(client: SimpleClient) -> None:
    old = init(client, "tx")
    add_offsets(client, "tx", old, "g")
    new = init(client, "tx")  # bumps the epoch: the old producer is fenced
    assert new[1] > old[1]
    assert txn_commit(client, "tx", old, "g", {("t", 0): 1}) == {("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    add_offsets(client, "tx", new, "g")
    assert txn_commit(client, "tx", new, "g", {("t", 0): 1, ("t", 9): 1, ("nope", 0): 1}) == {
        ("t", 0): ErrorCode.NONE, ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    # Kafka 4.0's validateOffsetCommit: an Empty group takes any generation -1 commit; a
    # generation names a member, which must exist; a generation of no group is ILLEGAL_GENERATION.
    assert txn_commit(client, "tx", new, "g", {("t", 0): 2}, generation_id=-1, member_id="stranger") == {
        ("t", 0): ErrorCode.NONE}
    assert txn_commit(client, "tx", new, "g", {("t", 0): 2}, generation_id=3) == {
        ("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    fresh = next(g for g in (f"fresh{i}" for i in range(100))
                 if offsets_partition_for(g, 3) == offsets_partition_for("g", 3))  # in the transaction
    assert txn_commit(client, "tx", new, fresh, {("t", 0): 2}, generation_id=3, member_id="m") == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert txn_commit(client, "tx", new, "", {("t", 0): 2}) == {  # Kafka refuses the empty id first
        ("t", 0): ErrorCode.INVALID_GROUP_ID}
    elsewhere = next(g for g in (f"g{i}" for i in range(100))
                     if offsets_partition_for(g, 3) != offsets_partition_for("g", 3))
    ready(client, elsewhere, "tx")
    assert txn_commit(client, "tx", new, elsewhere, {("t", 0): 2}, version=4) == {
        ("t", 0): ErrorCode.TRANSACTION_ABORTABLE}  # its offsets partition is not in the transaction


def test_a_classic_groups_member_and_generation_as_kafka_4_checks_them(client: SimpleClient) -> None:
    """KIP-447's checks against a classic group, as Kafka's group coordinator of KIP-848 and Kafka 4
    (OffsetMetadataManager.validateTransactionalOffsetCommit, ClassicGroup.validateOffsetCommit):
    an unknown group is made only by a commit without a generation (one with a generation is from
    a generation that is gone: ILLEGAL_GENERATION); a commit naming a generation, a member or an
    instance id must be a current member's at the group's generation; naming none is taken."""
    producer = init(client, "tx")
    assert add_offsets(client, "tx", producer, "c") == ErrorCode.NONE
    for generation in (0, 4):
        assert txn_commit(client, "tx", producer, "c", {("t", 0): 1}, generation_id=generation) == {
            ("t", 0): ErrorCode.ILLEGAL_GENERATION}
    listed = client.request(ApiKey.LIST_GROUPS, 4, {"states_filter": []})["groups"]
    assert "c" not in [g["group_id"] for g in listed]  # not made
    body = {"group_id": "c", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "group_instance_id": "i1", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]}
    joined = client.request(ApiKey.JOIN_GROUP, 7, body)
    assert joined["error_code"] == ErrorCode.NONE, joined
    member, generation = joined["member_id"], joined["generation_id"]
    synced = client.request(ApiKey.SYNC_GROUP, 5, {
        "group_id": "c", "generation_id": generation, "member_id": member, "group_instance_id": "i1",
        "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": member, "assignment": b""}]})
    assert synced["error_code"] == ErrorCode.NONE

    def commit(generation_id: int, member_id: str, instance_id: str | None) -> int:
        codes = txn_commit(client, "tx", producer, "c", {("t", 0): 5}, generation_id=generation_id,
                           member_id=member_id, group_instance_id=instance_id)
        return codes[("t", 0)]

    assert commit(generation, member, "i1") == ErrorCode.NONE
    assert commit(generation, member, None) == ErrorCode.NONE
    assert commit(-1, "", None) == ErrorCode.NONE  # names nobody (as v0-v2 cannot)
    assert commit(-1, member, None) == ErrorCode.ILLEGAL_GENERATION
    assert commit(generation + 1, member, None) == ErrorCode.ILLEGAL_GENERATION
    assert commit(generation, "", None) == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(generation, member, "i2") == ErrorCode.UNKNOWN_MEMBER_ID  # no such static member
    assert commit(generation, "other", "i1") == ErrorCode.FENCED_INSTANCE_ID


def test_too_long_metadata_is_judged_after_the_transaction_and_the_member(client: SimpleClient) -> None:
    """Kafka 4's group coordinator looks at each partition's metadata only once the transaction is
    verified and the member checked: a refused request is refused for every partition."""
    producer = init(client, "tx")

    def commit(**extra: Any) -> dict[Partition, int]:
        partitions = [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                       "committed_metadata": "m" * 5000},
                      {"partition_index": 1, "committed_offset": 1, "committed_leader_epoch": -1,
                       "committed_metadata": "m"}]
        body = client.request(ApiKey.TXN_OFFSET_COMMIT, 4, {
            "transactional_id": "tx", "group_id": "g", "producer_id": producer[0],
            "producer_epoch": producer[1], "topics": [{"name": "t", "partitions": partitions}], **extra})
        return {(t["name"], p["partition_index"]): p["error_code"]
                for t in body["topics"] for p in t["partitions"]}

    assert commit() == {("t", 0): ErrorCode.TRANSACTION_ABORTABLE, ("t", 1): ErrorCode.TRANSACTION_ABORTABLE}
    assert add_offsets(client, "tx", producer, "g") == ErrorCode.NONE
    assert commit(generation_id=2, member_id="m") == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION, ("t", 1): ErrorCode.ILLEGAL_GENERATION}
    assert commit() == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE, ("t", 1): ErrorCode.NONE}


def test_a_kip848_consumer_groups_member_commits_in_a_transaction(client: SimpleClient) -> None:
    """A consume-transform-produce loop on a KIP-848 consumer sends TxnOffsetCommit with the
    member's id and epoch: Kafka checks them against the consumer group (a stale epoch is
    ILLEGAL_GENERATION, an unknown member UNKNOWN_MEMBER_ID), the group is not "not classic"."""
    answer = client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": "g", "member_id": "m1", "member_epoch": 0, "instance_id": None, "rack_id": None,
        "rebalance_timeout_ms": 10000, "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": []})
    assert answer["error_code"] == ErrorCode.NONE, answer
    epoch = answer["member_epoch"]
    producer = init(client, "tx")
    assert add_offsets(client, "tx", producer, "g") == ErrorCode.NONE
    member = {"generation_id": epoch, "member_id": "m1"}
    assert txn_commit(client, "tx", producer, "g", {("t", 0): 7}, **member) == {("t", 0): ErrorCode.NONE}
    assert txn_commit(client, "tx", producer, "g", {("t", 0): 8}, generation_id=epoch + 1,
                      member_id="m1") == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert txn_commit(client, "tx", producer, "g", {("t", 0): 8}, generation_id=epoch,
                      member_id="stranger") == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert end(client, "tx", producer, commit=True) == ErrorCode.NONE
    wait_until(lambda: fetch(client, "g")[("t", 0)] == (7, ErrorCode.NONE), what="the committed offset")


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_every_version_commits(client: SimpleClient, version: int) -> None:
    producer = init(client, "tx")
    add_offsets(client, "tx", producer, "g")
    assert txn_commit(client, "tx", producer, "g", {("t", 1): 40 + version}, version=version) == {
        ("t", 1): ErrorCode.NONE}
    assert end(client, "tx", producer, commit=True) == ErrorCode.NONE
    wait_until(lambda: fetch(client, "g")[("t", 1)] == (40 + version, ErrorCode.NONE), what="the offset")


def test_an_empty_group_id_and_a_loading_coordinator_as_kafka_answers_them() -> None:
    """An empty group id is INVALID_GROUP_ID (after the per-partition checks); a coordinator still
    loading is COORDINATOR_LOAD_IN_PROGRESS from v2 on and COORDINATOR_NOT_AVAILABLE to v0-v1,
    whose clients (before KAFKA-7296) did not know the loading error here."""
    with Broker(CONFIG) as broker, SimpleClient(broker.bootstrap_servers) as client:
        client.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "t", "num_partitions": 2,
                                                             "replication_factor": 1}], "timeout_ms": 5000})
        ready(client, "g", "tx")
        producer = init(client, "tx")
        assert txn_commit(client, "tx", producer, "", {("t", 0): 1, ("t", 9): 1}) == {
            ("t", 0): ErrorCode.INVALID_GROUP_ID, ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        with broker.coordinator_unavailable(group="g", error=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            for version in range(4):
                loading = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                code = loading if version >= 2 else ErrorCode.COORDINATOR_NOT_AVAILABLE
                assert txn_commit(client, "tx", producer, "g", {("t", 0): 1}, version=version) == {
                    ("t", 0): code}


def test_authorization_in_kafkas_order() -> None:
    config = {**CONFIG, "authorizer.class.name": "allowlist", "allowlist.rules": "*@*:DESCRIBE"}
    with Broker(config) as broker, SimpleClient(broker.bootstrap_servers) as client:
        assert txn_commit(client, "tx", (1, 0), "g", {("t", 0): 1}) == {
            ("t", 0): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    config["allowlist.rules"] = "*@*:WRITE"  # WRITE on the transactional id, no READ on the group
    with Broker(config) as broker, SimpleClient(broker.bootstrap_servers) as client:
        assert txn_commit(client, "tx", (1, 0), "g", {("t", 0): 1}) == {
            ("t", 0): ErrorCode.GROUP_AUTHORIZATION_FAILED}


def test_a_restart_replays_committed_aborted_and_open_transactions(tmp_path: Path) -> None:
    config = {**CONFIG, "log.dirs": str(tmp_path)}
    with Broker(config) as broker, SimpleClient(broker.bootstrap_servers) as client:
        client.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "t", "num_partitions": 2,
                                                             "replication_factor": 1}], "timeout_ms": 5000})
        ready(client, "g", "tx")
        producer = init(client, "tx")
        add_offsets(client, "tx", producer, "g")
        txn_commit(client, "tx", producer, "g", {("t", 0): 3})
        end(client, "tx", producer, commit=True)
        add_offsets(client, "tx", producer, "g")
        txn_commit(client, "tx", producer, "g", {("t", 0): 4})
        end(client, "tx", producer, commit=False)
        add_offsets(client, "tx", producer, "g")
        txn_commit(client, "tx", producer, "g", {("t", 1): 8})  # left open across the restart
        wait_until(lambda: fetch(client, "g")[("t", 0)] == (3, ErrorCode.NONE), what="the markers")
    with Broker(config) as broker, SimpleClient(broker.bootstrap_servers) as client:
        ready(client, "g", "tx")
        wait_until(lambda: fetch(client, "g", require_stable=True) == {
            ("t", 0): (3, ErrorCode.NONE), ("t", 1): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)},
            what="the replayed offsets")
        assert end(client, "tx", producer, commit=True) == ErrorCode.NONE
        wait_until(lambda: fetch(client, "g", require_stable=True)[("t", 1)] == (8, ErrorCode.NONE),
                   what="the open transaction's commit after the restart")


# --- the markers, without a broker: TxnOffsetCommits' bookkeeping on its own -----------------------

class _Partitions:
    """partition_for of a GroupLog: every group in partition 0 but "elsewhere" (partition 1)."""

    partition_count = 2

    def partition_for(self, group_id: str) -> int:
        return 1 if group_id == "elsewhere" else 0


def _commits(states: dict[int, str]) -> TxnOffsetCommits:
    clock = ManualScheduler()
    coordinator = ClassicCoordinator(GroupConfig(initial_rebalance_delay_ms=0),
                                     Timers(clock.clock, clock.call_later), lambda *_: None,
                                     partition_for=_Partitions().partition_for)
    return TxnOffsetCommits(
        coordinator=coordinator, group_log=lambda: _Partitions(),  # type: ignore[arg-type,return-value]
        check_coordinator=lambda _: None, check_member=coordinator.check_txn_offset_commit,
        allowed=lambda *_: True, partition_exists=lambda *_: True,
        verifier=lambda: None, is_loaded=lambda p: states.get(p) == "loaded",
        is_loading=lambda p: states.get(p) == "loading", max_metadata_bytes=4096)


def _offset(group: str, offset: int) -> GroupRecord:
    return GroupRecord(OffsetCommitKey(group, "t", 0), OffsetCommitValue(offset, -1, "", 0))


def _marker(producer_id: int, committed: bool) -> TxnMarker:
    return TxnMarker(producer_id, 0, committed, 0, ((OFFSETS_TOPIC, 0),))


def test_a_marker_ends_only_its_producers_offsets_in_its_partition() -> None:
    commits = _commits({0: "loaded", 1: "loaded"})
    commits.pending.add(7, [_offset("g", 5), _offset("elsewhere", 6)])
    commits.pending.add(8, [_offset("h", 9)])
    commits.on_marker(_marker(7, committed=True), OFFSETS_TOPIC, 0)
    offsets = commits.coordinator.offsets
    assert offsets.get("g", "t", 0) == OffsetCommitValue(5, -1, "", 0)
    assert offsets.get("elsewhere", "t", 0) is None and commits.pending.is_pending("elsewhere", "t", 0)
    assert commits.pending.is_pending("h", "t", 0)
    commits.on_marker(_marker(8, committed=False), OFFSETS_TOPIC, 0)
    assert offsets.get("h", "t", 0) is None and not commits.pending.is_pending("h", "t", 0)
    commits.on_marker(_marker(7, committed=True), "other-topic", 1)  # not ours: nothing happens
    assert commits.pending.is_pending("elsewhere", "t", 0)


def test_a_marker_written_while_the_partition_loads_ends_what_the_replay_found_open() -> None:
    states = {0: "loading"}
    commits = _commits(states)
    commits.on_marker(_marker(7, committed=True), OFFSETS_TOPIC, 0)
    commits.on_marker(_marker(9, committed=True), OFFSETS_TOPIC, 0)  # a producer with nothing here
    states[0] = "loaded"
    commits.load(0, [OpenTxnRecords(7, (_offset("g", 5),)), OpenTxnRecords(8, (_offset("h", 1),))])
    assert commits.coordinator.offsets.get("g", "t", 0) == OffsetCommitValue(5, -1, "", 0)
    assert commits.pending.is_pending("h", "t", 0) and not commits.pending.is_pending("g", "t", 0)


def test_a_transaction_coordinator_on_another_broker_is_asked() -> None:
    """The group's coordinator is broker 2, the producer's transaction coordinator broker 1: the
    offsets partition's membership in the transaction is asked of broker 1 with a verify-only
    AddPartitionsToTxn (Kafka 3.6+), so a TxnOffsetCommit before AddOffsetsToTxn is refused there
    too (it was taken unverified), and one after it is taken."""
    store = MemoryStore()
    config = {"offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1}
    with Broker({**config, "broker.id": 1}, store=store) as first:
        store.create_topic("__transaction_state", {0: (1,)}, config={"cleanup.policy": "compact"})
        store.create_topic("__consumer_offsets", {0: (2,)}, config={"cleanup.policy": "compact"})
        store.create_topic("t", {0: (1,)})
        with Broker({**config, "broker.id": 2}, store=store) as second, \
                SimpleClient(first.bootstrap_servers) as coordinator, \
                SimpleClient(second.bootstrap_servers) as group_coordinator:
            wait_until(lambda: len(second.runtime.cluster.brokers) == 2,  # type: ignore[union-attr]
                       what="both brokers")
            ready(coordinator, "g", "tx")
            ready(group_coordinator, "g", "tx")
            producer = init(coordinator, "tx")
            offsets = {("t", 0): 5}
            assert txn_commit(group_coordinator, "tx", producer, "g", offsets, version=4) == {
                ("t", 0): ErrorCode.TRANSACTION_ABORTABLE}
            assert txn_commit(group_coordinator, "tx", producer, "g", offsets, version=2) == {
                ("t", 0): ErrorCode.INVALID_TXN_STATE}
            assert add_offsets(coordinator, "tx", producer, "g") == ErrorCode.NONE
            assert txn_commit(group_coordinator, "tx", producer, "g", offsets, version=4) == {
                ("t", 0): ErrorCode.NONE}
