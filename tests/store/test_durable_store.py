"""DurableStore: MemoryStore kept in a journal and a snapshot, read back equal after a reopen.

The model is the plain MemoryStore: a random sequence of store operations made on both, then the
durable one closed and opened again from its directory (and sometimes compacted on the way, with
a tiny snapshot threshold), must leave the two with the same state. The files' damage cases are
checked by hand: a torn last entry is cut, a corrupt entry with others after it is refused in
one line, and a compaction's leftovers are skipped.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kafkapy.assembly import default_module_keys, make_store
from kafkapy.server.config import BrokerConfig
from kafkapy.store import (
    AclResource,
    CorruptMetadata,
    MemoryStore,
    PartitionState,
    StoredAcl,
    StoreError,
)
from kafkapy.store.base import ENTITY_TYPES, NO_ACL_VERSION
from kafkapy.store.durable import DurableStore
from kafkapy.store.journal import JOURNAL_FILE, SNAPSHOT_FILE, MetadataJournal


def _state(store: Any) -> dict[str, Any]:
    """Everything a store's public reads say about its lasting state."""
    return {
        "cluster_id": store.cluster_id(),
        "topics": store.topics(),
        "partition_states": store.partition_states(),
        "configs": {kind: store.entity_configs(kind) for kind in ENTITY_TYPES},
        "features": store.finalized_features(),
        "acls": {resource: store.resource_acls(resource) for resource in store.acls()},
        "groups": {group: (store.owners(group), store.members(group), store.offsets(group))
                   for group in store.groups()},
    }


def _opened(directory: Path, **kwargs: Any) -> DurableStore:
    store = DurableStore(directory, **kwargs)
    store.start()
    return store


TOPICS = st.sampled_from(["a", "b", "c.d", "e_f"])
ENTITIES = st.sampled_from(["ips/1.2.3.4", "users/alice", "clients/c1", "users/alice/clients/c1",
                            "brokers/<default>", "brokers/1", "topics/a", "groups/g"])
CONFIGS = st.dictionaries(st.sampled_from(["x", "y", "retention.ms", "SCRAM-SHA-256"]),
                          st.text(min_size=0, max_size=8), max_size=3)
RESOURCES = st.builds(AclResource, st.sampled_from(["LITERAL", "PREFIXED"]),
                      st.sampled_from(["Topic", "Group", "Cluster"]),
                      st.sampled_from(["t", "kafka-cluster", "g*"]))
ACLS = st.frozensets(st.builds(StoredAcl, st.sampled_from(["User:alice", "User:bob"]),
                               st.sampled_from(["Allow", "Deny"]), st.sampled_from(["Read", "Write", "All"]),
                               st.sampled_from(["*", "10.0.0.1"])), max_size=3)
REPLICAS = st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True).map(tuple)


class ReopenMachine(RuleBasedStateMachine):
    """The same operations on a MemoryStore (the model) and a DurableStore; reopened at random."""

    directory: Path
    snapshot_bytes: int

    @initialize(snapshot_bytes=st.sampled_from([1, 300, 20 * 1024 * 1024]))
    def open_both(self, snapshot_bytes: int) -> None:
        self.snapshot_bytes = snapshot_bytes  # 1: a snapshot before every change; 20 MB: never
        self.durable = _opened(self.directory, snapshot_bytes=snapshot_bytes)
        self.model = MemoryStore(cluster_id=self.durable.cluster_id())

    def both(self, method: str, *args: Any) -> Any:
        """Call ``method`` on both; they must agree on the answer or on refusing it."""
        answers = []
        for store in (self.model, self.durable):
            try:
                answers.append(("ok", getattr(store, method)(*args)))
            except StoreError as exc:
                answers.append(("refused", type(exc)))
        assert answers[0] == answers[1], (method, args, answers)
        return answers[0][1]

    @rule(name=TOPICS, partitions=st.lists(REPLICAS, min_size=1, max_size=3), config=CONFIGS)
    def create_topic(self, name: str, partitions: list[tuple[int, ...]], config: dict[str, str]) -> None:
        self.both("create_topic", name, dict(enumerate(partitions)), uuid.uuid4(), config)

    @rule(name=TOPICS)
    def delete_topic(self, name: str) -> None:
        self.both("delete_topic", name)

    @rule(name=TOPICS, replicas=REPLICAS)
    def add_partition(self, name: str, replicas: tuple[int, ...]) -> None:
        count = len(self.model.topics().get(name, None).partitions) if name in self.model.topics() else 0
        self.both("add_partitions", name, {count: replicas})

    @rule(name=TOPICS, replicas=REPLICAS)
    def reassign(self, name: str, replicas: tuple[int, ...]) -> None:
        self.both("reassign_partitions", name, {0: replicas})

    @rule(name=TOPICS, partition=st.integers(0, 2), leader=st.integers(-1, 3), isr=REPLICAS)
    def write_partition_state(self, name: str, partition: int, leader: int, isr: tuple[int, ...]) -> None:
        found = self.model.partition_states().get((name, partition))
        epoch = -1 if found is None else found.partition_epoch
        leader_epoch = 0 if found is None else found.leader_epoch + 1
        self.both("set_partition_state", name, partition, PartitionState(leader, leader_epoch, isr), epoch)

    @rule(path=ENTITIES, config=CONFIGS)
    def set_entity_config(self, path: str, config: dict[str, str]) -> None:
        self.both("set_entity_config", path, config)

    @rule(features=st.dictionaries(st.sampled_from(["metadata.version", "group.version"]),
                                   st.integers(0, 30), max_size=2))
    def set_features(self, features: dict[str, int]) -> None:
        self.both("set_finalized_features", features, None)

    @rule(resource=RESOURCES, acls=ACLS)
    def set_acls(self, resource: AclResource, acls: frozenset[StoredAcl]) -> None:
        version = self.model.resource_acls(resource)[1]
        self.both("set_resource_acls", resource, acls, version)

    @rule(broker=st.integers(0, 3))
    def allocate_producer_ids(self, broker: int) -> None:
        self.both("allocate_producer_id_block", broker)

    @rule()
    def allocate_broker_id(self) -> None:
        self.both("allocate_broker_id", 1000)

    @rule(group=st.sampled_from(["g1", "g2"]), topic=TOPICS, partition=st.integers(0, 2),
          offset=st.integers(0, 10**12), owner=st.text(min_size=1, max_size=5),
          timeout=st.integers(1, 60000))
    def seed_001_nodes(self, group: str, topic: str, partition: int, offset: int, owner: str,
                       timeout: int) -> None:
        self.both("commit_offsets", group, {(topic, partition): offset})
        self.both("set_owners", group, {(topic, partition): owner})
        self.both("set_members", group, {owner: timeout})

    @precondition(lambda self: hasattr(self, "durable"))
    @rule()
    def reopen(self) -> None:
        self.durable.close()
        self.durable = _opened(self.directory, snapshot_bytes=self.snapshot_bytes)

    @invariant()
    def the_same_state(self) -> None:
        if hasattr(self, "durable"):
            assert _state(self.durable) == _state(self.model)

    def teardown(self) -> None:
        if hasattr(self, "durable"):
            self.durable.close()
            reopened = _opened(self.directory)  # the last word: read from the files alone
            try:
                assert _state(reopened) == _state(self.model)
                # The next producer-id block too: a restarted broker never hands out an id again.
                assert reopened.allocate_producer_id_block(9) == self.model.allocate_producer_id_block(9)
            finally:
                reopened.close()


@pytest.fixture
def reopen_machine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[type[ReopenMachine]]:
    class Machine(ReopenMachine):
        def __init__(self) -> None:
            super().__init__()
            self.directory = tmp_path_factory.mktemp("metadata")
    yield Machine


def test_a_reopened_store_equals_the_memory_model(reopen_machine: type[ReopenMachine]) -> None:
    runner = reopen_machine.TestCase
    runner.settings = settings(max_examples=60, stateful_step_count=30, deadline=None,
                               suppress_health_check=[HealthCheck.too_slow])
    runner().runTest()


# --- the files -----------------------------------------------------------------------------------

def _a_few_changes(directory: Path) -> dict[str, Any]:
    store = _opened(directory)
    try:
        store.create_topic("orders", {0: (1,), 1: (2,)}, config={"retention.ms": "1000"})
        store.set_entity_config("users/alice", {"producer_byte_rate": "1024"})
        store.set_finalized_features({"metadata.version": 21})
        return _state(store)
    finally:
        store.close()


@pytest.mark.parametrize("tail", ["torn", "zeros", "bad checksum"])
def test_a_torn_last_entry_is_cut(tmp_path: Path, caplog: pytest.LogCaptureFixture, tail: str) -> None:
    kept = _a_few_changes(tmp_path)
    journal = tmp_path / JOURNAL_FILE
    whole = journal.read_bytes()
    store = _opened(tmp_path)
    store.create_topic("torn", {0: (1,)})  # the change a crash tears
    store.close()
    damaged = {"torn": journal.read_bytes()[:len(whole) + 30], "zeros": whole + b"\x00" * 512,
               "bad checksum": whole + b'0badc0de {"change":"topic"}\n'}[tail]
    journal.write_bytes(damaged)
    with caplog.at_level(logging.WARNING, logger="kafkapy.store.journal"):
        store = _opened(tmp_path)
    try:
        assert _state(store) == kept
        assert journal.read_bytes() == whole  # cut where the torn entry began
        assert f"cut {len(damaged) - len(whole)} bytes of a write torn by a crash at byte {len(whole)}" in \
            caplog.text
        store.create_topic("after", {0: (1,)})  # and the journal goes on from there
    finally:
        store.close()
    reopened = _opened(tmp_path)
    assert set(reopened.topics()) == {"orders", "after"}
    reopened.close()


def test_a_corrupt_entry_in_the_middle_is_refused_in_one_line(tmp_path: Path) -> None:
    _a_few_changes(tmp_path)
    journal = tmp_path / JOURNAL_FILE
    lines = journal.read_bytes().splitlines(keepends=True)
    second = len(lines[0])
    damaged = bytearray(journal.read_bytes())
    damaged[second + 15] ^= 0x20  # a bit flipped in the second entry's JSON
    journal.write_bytes(bytes(damaged))
    with pytest.raises(CorruptMetadata) as refused:
        _opened(tmp_path)
    assert str(refused.value) == (f"{journal}: the entry at byte {second} is corrupt and entries follow "
                                  "it (a crash tears only the last): the journal was damaged")
    assert journal.read_bytes() == bytes(damaged)  # nothing cut: the operator decides


def test_a_gap_in_the_entries_is_refused(tmp_path: Path) -> None:
    _a_few_changes(tmp_path)
    journal = tmp_path / JOURNAL_FILE
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(lines[0] + b"".join(lines[2:]))
    with pytest.raises(CorruptMetadata, match=f"the entry at byte {len(lines[0])} is number 3, not 2: "
                                              "entries are missing"):
        _opened(tmp_path)


def test_a_damaged_snapshot_is_refused(tmp_path: Path) -> None:
    _a_few_changes(tmp_path)
    snapshot = tmp_path / SNAPSHOT_FILE
    snapshot.write_bytes(snapshot.read_bytes()[:-5])
    with pytest.raises(CorruptMetadata, match=r"is corrupt .*a snapshot is written whole, so it was damaged"):
        _opened(tmp_path)
    (tmp_path / SNAPSHOT_FILE).unlink()
    with pytest.raises(CorruptMetadata, match=f"a journal without its {SNAPSHOT_FILE}"):
        _opened(tmp_path)


def test_a_compactions_leftovers_are_skipped(tmp_path: Path) -> None:
    """A crash after the new snapshot was renamed in and before the journal was emptied leaves
    entries the snapshot holds: they are skipped, not applied twice or taken for damage."""
    store = _opened(tmp_path, snapshot_bytes=10**9)
    store.create_topic("orders", {0: (1,)})
    store.commit_offsets("g", {("orders", 0): 5})
    journal = tmp_path / JOURNAL_FILE
    before = journal.read_bytes()
    store._journal.snapshot_bytes = 1  # the next change compacts first
    store.commit_offsets("g", {("orders", 0): 6})
    after = journal.read_bytes()
    expected = _state(store)
    store.close()
    journal.write_bytes(before + after)  # as if the journal had not been emptied
    reopened = _opened(tmp_path)
    try:
        assert _state(reopened) == expected
    finally:
        reopened.close()


def test_n_changes_write_o_n_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each snapshot waits for the journal to grow to its own size: 2,000 topics with the smallest
    threshold take a handful of snapshots (doublings), not one per change."""
    snapshots: list[int] = []
    write = MetadataJournal._write_snapshot_file

    def counted(journal: MetadataJournal, *args: Any) -> None:
        write(journal, *args)
        snapshots.append(journal._last_snapshot_size)
    monkeypatch.setattr(MetadataJournal, "_write_snapshot_file", counted)
    store = _opened(tmp_path, snapshot_bytes=1)
    for index in range(2000):
        store.create_topic(f"topic-{index}", {0: (1,), 1: (2,)})
    store.close()
    written = sum(snapshots) + (tmp_path / JOURNAL_FILE).stat().st_size
    state = len((tmp_path / SNAPSHOT_FILE).read_bytes()) + (tmp_path / JOURNAL_FILE).stat().st_size
    assert len(snapshots) <= 16, len(snapshots)  # about log2(2,000 topics' bytes / the first one's)
    assert written < 4 * state, (written, state)  # each snapshot at most the bytes of changes before it
    reopened = _opened(tmp_path)
    assert len(reopened.topics()) == 2000
    reopened.close()


def test_one_directory_one_store(tmp_path: Path) -> None:
    store = _opened(tmp_path)
    try:
        with pytest.raises(StoreError, match=f"metadata.log.dir {tmp_path} is in use by another broker or "
                                             f"process \\(its {JOURNAL_FILE} is locked\\)"):
            _opened(tmp_path)
    finally:
        store.close()
    _opened(tmp_path).close()  # released with the last handle


def test_the_cluster_id_is_kept_and_held_to_cluster_id(tmp_path: Path) -> None:
    first = _opened(tmp_path)
    cluster_id = first.cluster_id()
    first.close()
    again = _opened(tmp_path, cluster_id=cluster_id)
    assert again.cluster_id() == cluster_id
    again.close()
    refusal = f"cluster.id 'other' does not match '{cluster_id}' stored in {tmp_path}"
    with pytest.raises(StoreError, match=refusal):
        _opened(tmp_path, cluster_id="other")


def test_a_store_not_started_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is not started"):
        DurableStore(tmp_path).create_topic("t", {0: (1,)})


def test_acls_removed_stay_removed(tmp_path: Path) -> None:
    resource = AclResource("LITERAL", "Topic", "t")
    store = _opened(tmp_path)
    version = store.set_resource_acls(resource, frozenset({StoredAcl("User:a", "Allow", "Read", "*")}),
                                      NO_ACL_VERSION)
    store.set_resource_acls(resource, frozenset(), version)
    store.close()
    reopened = _opened(tmp_path)
    assert reopened.acls() == {} and reopened.resource_acls(resource) == (frozenset(), NO_ACL_VERSION)
    reopened.close()


@pytest.mark.parametrize(("settings", "per_change"), [({}, False),
                                                      ({"log.flush.interval.messages": 1}, True)])
def test_the_journal_is_flushed_as_the_logs_flush_policy_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: dict[str, Any], per_change: bool) -> None:
    """Written before each change is made in any case (a killed process loses nothing); fsynced per
    change only with log.flush.interval.messages=1 (Kafka's metadata log's way), else on close."""
    # The broker's keys, as `kafkapy serve` reads them.
    store = make_store(BrokerConfig.build({"log.dirs": str(tmp_path), **settings},
                                          extra_keys=default_module_keys()))
    assert isinstance(store, DurableStore)
    store.start()
    syncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: syncs.append(fd) or real_fsync(fd))
    for index in range(5):
        store.create_topic(f"t{index}", {0: (1,)})
        assert (tmp_path / JOURNAL_FILE).stat().st_size > 0  # in the file before the call returned
    assert len(syncs) == (5 if per_change else 0)
    store.close()
    assert len(syncs) == (5 if per_change else 1)  # a clean stop leaves nothing unflushed
