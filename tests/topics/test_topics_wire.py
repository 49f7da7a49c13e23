"""CreateTopics, DeleteTopics, CreatePartitions and Metadata over raw sockets: every version the
broker serves, and Kafka's error codes."""

from __future__ import annotations

import random
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.embedded import Broker
from kafkapy.log.topic_config import TOPIC_CONFIGS
from kafkapy.protocol import catalogue
from kafkapy.store import MemoryStore
from kafkapy.topics import assign_replicas, partition_label, placement_for_new_partitions
from kafkapy.topics.assignment import rack_alternated

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, METADATA = 19, 20, 37, 3
ZERO = uuid.UUID(int=0)
TIMEOUT_MS = 5000


@pytest.fixture
def broker() -> Iterator[Broker]:
    # Metadata for a missing topic must not create it here (tests/dataplane covers auto-creation)
    with Broker({"broker.id": 1, "auto.create.topics.enable": False}) as b:
        yield b


@pytest.fixture
def conn(broker: Broker) -> Iterator[KafkaSocket]:
    with KafkaSocket(broker.bootstrap_servers) as s:
        yield s


def topic(name: str, partitions: int = -1, factor: int = -1,
          assignments: list[tuple[int, list[int]]] | None = None) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": factor,
            "assignments": [{"partition_index": p, "broker_ids": b} for p, b in assignments or []],
            "configs": []}


def create(conn: KafkaSocket, *topics: dict[str, Any], version: int = 7, validate_only: bool = False,
           timeout_ms: int = TIMEOUT_MS) -> list[dict[str, Any]]:
    body = {"topics": list(topics), "timeout_ms": timeout_ms, "validate_only": validate_only}
    result: list[dict[str, Any]] = conn.call(CREATE_TOPICS, version, body).body["topics"]
    return result


def codes(results: list[dict[str, Any]]) -> dict[str, int]:
    return {r["name"]: r["error_code"] for r in results}


def grow(conn: KafkaSocket, name: str, count: int, assignments: list[list[int]] | None = None,
         version: int = 3, validate_only: bool = False) -> dict[str, Any]:
    listed = None if assignments is None else [{"broker_ids": b} for b in assignments]
    body = {"topics": [{"name": name, "count": count, "assignments": listed}],
            "timeout_ms": TIMEOUT_MS, "validate_only": validate_only}
    results = conn.call(CREATE_PARTITIONS, version, body).body["results"]
    assert len(results) == 1
    result: dict[str, Any] = results[0]
    return result


def delete(conn: KafkaSocket, *names: str, version: int = 5) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"timeout_ms": TIMEOUT_MS}
    if version >= 6:
        body["topics"] = [{"name": n, "topic_id": ZERO} for n in names]
    else:
        body["topic_names"] = list(names)
    result: list[dict[str, Any]] = conn.call(DELETE_TOPICS, version, body).body["responses"]
    return result


def metadata(conn: KafkaSocket, version: int = 12, names: list[str] | None = None) -> dict[str, Any]:
    wanted: Any = None if names is None else [{"name": n, "topic_id": ZERO} for n in names]
    if version == 0 and names is None:
        wanted = []
    return {t["name"]: t for t in conn.call(METADATA, version, {"topics": wanted}).body["topics"]}


def test_served_versions_are_the_catalogues(broker: Broker) -> None:
    assert broker.runtime is not None
    served = broker.runtime.dispatcher.served_versions()
    for key in (CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS):
        versions = catalogue()[key].versions
        assert served[key] == (versions.low, versions.high)


@pytest.mark.parametrize("version", range(0, 8))
def test_create_topics_at_every_version(conn: KafkaSocket, version: int) -> None:
    [result] = create(conn, topic(f"t{version}", 2, 1), version=version)
    assert result["error_code"] == 0
    if version >= 5:
        assert (result["num_partitions"], result["replication_factor"]) == (2, 1)
        # v5+ reports the new topic's configs as DescribeConfigs would: every one, all defaults here
        assert [c["name"] for c in result["configs"]] == sorted(k.name for k in TOPIC_CONFIGS)
        assert {c["config_source"] for c in result["configs"]} == {5}  # DEFAULT_CONFIG
    if version >= 7:
        assert result["topic_id"] != ZERO
        assert metadata(conn)[f"t{version}"]["topic_id"] == result["topic_id"]
    [again] = create(conn, topic(f"t{version}", 2, 1), version=version)
    assert again["error_code"] == 36
    if version >= 1:
        assert again["error_message"] == f"Topic 't{version}' already exists."


def test_create_topics_errors(conn: KafkaSocket) -> None:
    results = create(conn, topic("bad name"), topic("x" * 250), topic(".."), topic("zero", 0, 1),
                     topic("negative", -2, 1), topic("wide", 1, 2), topic("nofactor", 1, 0),
                     topic("dup"), topic("dup"),
                     topic("both", 2, -1, [(0, [1])]), topic("gap", -1, -1, [(0, [1]), (2, [1])]),
                     topic("stranger", -1, -1, [(0, [9])]), topic("twice", -1, -1, [(0, [1, 1])]))
    assert [(r["name"], r["error_code"]) for r in results] == [
        ("bad name", 17), ("x" * 250, 17), ("..", 17), ("zero", 37), ("negative", 37), ("wide", 38),
        ("nofactor", 38), ("dup", 42), ("dup", 42), ("both", 42), ("gap", 39), ("stranger", 39),
        ("twice", 39)]
    assert results[5]["error_message"] == "Replication factor: 2 larger than available brokers: 1."
    assert all(r["topic_id"] == ZERO for r in results)
    assert metadata(conn) == {}


def test_create_topics_collision_and_explicit_assignment(conn: KafkaSocket) -> None:
    assert codes(create(conn, topic("a.b", -1, -1, [(0, [1]), (1, [1])]))) == {"a.b": 0}
    assert codes(create(conn, topic("a_b"))) == {"a_b": 17}
    described = metadata(conn)["a.b"]
    assert [(p["partition_index"], p["replica_nodes"]) for p in described["partitions"]] == [
        (0, [1]), (1, [1])]


def test_validate_only_and_zero_timeout(broker: Broker, conn: KafkaSocket) -> None:
    assert codes(create(conn, topic("dry", 3, 1), validate_only=True)) == {"dry": 0}
    assert metadata(conn) == {}
    # Kafka answers REQUEST_TIMED_OUT when it was not asked to wait: the creation goes on.
    assert codes(create(conn, topic("later", 3, 1), timeout_ms=0)) == {"later": 7}
    assert broker.store is not None
    assert set(broker.store.topics()) == {"later"}


def test_defaults_come_from_the_config() -> None:
    with Broker({"broker.id": 2, "num.partitions": 4}) as other, \
            KafkaSocket(other.bootstrap_servers) as c:
        [result] = create(c, topic("defaulted"))
        assert (result["error_code"], result["num_partitions"], result["replication_factor"]) == (0, 4, 1)


@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions_at_every_version(conn: KafkaSocket, version: int) -> None:
    create(conn, topic("grow", 2, 1))
    assert grow(conn, "grow", 3, version=version)["error_code"] == 0
    assert grow(conn, "grow", 5, [[1], [1]], version=version)["error_code"] == 0
    assert len(metadata(conn)["grow"]["partitions"]) == 5
    same = grow(conn, "grow", 5, version=version)
    assert (same["error_code"], same["error_message"]) == (37, "Topic already has 5 partitions.")
    assert grow(conn, "grow", 2, version=version)["error_code"] == 37
    assert grow(conn, "missing", 2, version=version)["error_code"] == 3
    assert grow(conn, "grow", 7, [[1]], version=version)["error_code"] == 39  # too few assignments
    assert grow(conn, "grow", 6, [[9]], version=version)["error_code"] == 39  # unknown broker
    assert grow(conn, "grow", 6, [[1, 1]], version=version)["error_code"] == 39  # duplicate broker
    assert grow(conn, "grow", 9, version=version, validate_only=True)["error_code"] == 0
    assert len(metadata(conn)["grow"]["partitions"]) == 5


def test_create_partitions_duplicates(conn: KafkaSocket) -> None:
    create(conn, topic("d", 1, 1))
    body = {"topics": [{"name": "d", "count": 2, "assignments": None}] * 2, "timeout_ms": TIMEOUT_MS,
            "validate_only": False}
    results = conn.call(CREATE_PARTITIONS, 3, body).body["results"]
    assert [(r["name"], r["error_code"]) for r in results] == [("d", 42)]


@pytest.mark.parametrize("version", range(0, 7))
def test_delete_topics_at_every_version(conn: KafkaSocket, version: int) -> None:
    create(conn, topic("gone"), topic("kept"))
    results = delete(conn, "gone", "never", version=version)
    assert codes(results) == {"gone": 0, "never": 3}
    assert set(metadata(conn)) == {"kept"}


def test_delete_topics_by_id(conn: KafkaSocket) -> None:
    [created] = create(conn, topic("byid"))
    unknown = uuid.uuid4()
    body = {"topics": [{"name": None, "topic_id": created["topic_id"]}, {"name": None, "topic_id": unknown},
                       {"name": "byid", "topic_id": created["topic_id"]}], "timeout_ms": TIMEOUT_MS}
    results = conn.call(DELETE_TOPICS, 6, body).body["responses"]
    assert [(r["name"], r["topic_id"], r["error_code"]) for r in results] == [
        ("byid", created["topic_id"], 0), (None, unknown, 100), ("byid", created["topic_id"], 42)]
    assert metadata(conn) == {}


@pytest.mark.parametrize("version", range(0, 14))
def test_metadata_lists_topics_at_every_version(conn: KafkaSocket, version: int) -> None:
    [created] = create(conn, topic("m", 2, 1))
    listed = metadata(conn, version)
    assert set(listed) == {"m"}
    assert [(p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"], p["error_code"])
            for p in listed["m"]["partitions"]] == [(0, 1, [1], [1], 0), (1, 1, [1], [1], 0)]
    if version >= 10:
        assert listed["m"]["topic_id"] == created["topic_id"]
    if version >= 1:
        asked = metadata(conn, version, ["m", "unknown"])
        assert (asked["m"]["error_code"], asked["unknown"]["error_code"]) == (0, 3)
        assert metadata(conn, version, []) == {}


def test_metadata_by_topic_id(conn: KafkaSocket) -> None:
    [created] = create(conn, topic("viaid"))
    body = {"topics": [{"name": None, "topic_id": created["topic_id"]}]}
    [found] = conn.call(METADATA, 12, body).body["topics"]
    assert (found["name"], found["error_code"], len(found["partitions"])) == ("viaid", 0, 1)


def test_authorization() -> None:
    config = {"broker.id": 1, "authorizer.class.name": "allowlist", "allowlist.rules": "*@*:DESCRIBE"}
    with Broker(config) as b, KafkaSocket(b.bootstrap_servers) as c:
        assert codes(create(c, topic("nope"))) == {"nope": 29}
        assert b.store is not None
        b.store.create_topic("there", {0: (1,)})
        assert grow(c, "there", 2)["error_code"] == 29
        assert codes(delete(c, "there")) == {"there": 29}


# --- a two-broker cluster ----------------------------------------------------------------------

def test_two_brokers_share_topics_and_only_the_controller_applies() -> None:
    store = MemoryStore()
    with Broker({"broker.id": 1}, store=store) as first, \
            Broker({"broker.id": 2}, store=store.peer()) as second:
        assert first.runtime is not None and second.runtime is not None
        assert first.runtime.cluster.controller_id == 1
        with KafkaSocket(second.bootstrap_servers) as c:
            [refused] = create(c, topic("elsewhere", 1, 1))
            assert refused["error_code"] == 41
            assert grow(c, "elsewhere", 2)["error_code"] == 41
            assert codes(delete(c, "elsewhere")) == {"elsewhere": 41}
        with KafkaSocket(first.bootstrap_servers) as c:
            assert codes(create(c, topic("spread", 4, 2))) == {"spread": 0}
            assert codes(create(c, topic("toowide", 1, 3))) == {"toowide": 38}
        with KafkaSocket(first.bootstrap_servers) as a, KafkaSocket(second.bootstrap_servers) as b:
            seen_a, seen_b = metadata(a), metadata(b)
            assert seen_a == seen_b
            parts = seen_a["spread"]["partitions"]
            assert sorted(tuple(sorted(p["replica_nodes"])) for p in parts) == [(1, 2)] * 4
            assert sorted(p["leader_id"] for p in parts) == [1, 1, 2, 2]  # leaders spread round-robin
    # broker 2 is gone: partitions it led fall back to broker 1, which is the only ISR member
    with Broker({"broker.id": 1}, store=store) as alone, KafkaSocket(alone.bootstrap_servers) as c:
        parts = metadata(c)["spread"]["partitions"]
        assert {(p["leader_id"], tuple(p["isr_nodes"]), tuple(p["offline_replicas"])) for p in parts} == {
            (1, (1,), (2,))}


def test_leader_not_available_when_no_replica_is_live(conn: KafkaSocket, broker: Broker) -> None:
    assert broker.store is not None
    broker.store.create_topic("orphan", {0: (8, 9)})
    [part] = metadata(conn)["orphan"]["partitions"]
    assert (part["error_code"], part["leader_id"], part["isr_nodes"], part["offline_replicas"]) == (
        5, -1, [], [8, 9])


# --- placement -------------------------------------------------------------------------------

def test_round_robin_matches_kafkas_example() -> None:
    # AdminUtils' doc example: 5 brokers, 10 partitions, replication factor 3, start index 0.
    placed = assign_replicas(range(5), 10, 3, start_index=0)
    assert placed[0] == (0, 1, 2)
    assert placed[4] == (4, 0, 1)
    assert placed[5] == (0, 2, 3)
    assert placed[9] == (4, 1, 2)


RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_aware_placement_matches_kafkas_example() -> None:
    # AdminRackAwareTest's example: six brokers in three racks, seven partitions, three replicas.
    assert rack_alternated(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert assign_replicas(RACKS, 7, 3, start_index=0, racks=RACKS) == {
        0: (0, 3, 1), 1: (3, 1, 5), 2: (1, 5, 4), 3: (5, 4, 2), 4: (4, 2, 0), 5: (2, 0, 3), 6: (0, 4, 2)}


@given(partitions=st.integers(1, 30), factor=st.integers(1, 6), start=st.integers(-1, 5),
       racks=st.lists(st.sampled_from("abc"), min_size=6, max_size=6))
def test_rack_aware_placement_spreads_every_partition_over_the_racks(
        partitions: int, factor: int, start: int, racks: list[str]) -> None:
    """Kafka's rule: a partition's replicas take a new rack until every rack has one, and
    distinct brokers; leaders go round the rack-alternated list."""
    rack_of = dict(enumerate(racks))
    placed = assign_replicas(rack_of, partitions, factor, start_index=start, racks=rack_of)
    for replicas in placed.values():
        assert len(set(replicas)) == factor
        assert len({rack_of[b] for b in replicas}) == min(factor, len(set(racks)))


def test_brokers_without_a_rack_are_placed_round_robin() -> None:
    some = {0: "a", 1: None, 2: "b"}
    unaware = assign_replicas(some, 3, 2, start_index=0)
    assert assign_replicas(some, 3, 2, start_index=0, racks=some) == unaware


def test_a_cluster_with_racks_places_replicas_across_them() -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    with Broker(brokers=6, racks=[RACKS[b] for b in range(6)]) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("spread", 12, 3)])["spread"].result(20)
        topic = admin.list_topics("spread", timeout=20).topics["spread"]
    for partition in topic.partitions.values():
        assert len({RACKS[b] for b in partition.replicas}) == 3, partition.replicas


def test_new_partitions_continue_the_round_robin() -> None:
    existing = assign_replicas([1, 2, 3], 3, 2, start_index=1)
    added = placement_for_new_partitions([1, 2, 3], existing, 5)
    assert added == {3: assign_replicas([1, 2, 3], 5, 2, start_index=1)[3],
                     4: assign_replicas([1, 2, 3], 5, 2, start_index=1)[4]}


def test_an_embedded_broker_leaves_the_global_random_state_alone() -> None:
    """A test that seeds ``random`` gets the same numbers whether or not its broker makes topics
    (the random start of Kafka's placement draws from the broker's own generator)."""
    random.seed(7)
    state = random.getstate()
    assign_replicas([1, 2, 3], 6, 2)
    assert random.getstate() == state
    with Broker(brokers=3) as cluster:
        random.seed(7)
        state = random.getstate()
        cluster.seed({"placed": {"partitions": 6, "replication_factor": 2}})
        assert random.getstate() == state


def test_partition_label() -> None:
    assert partition_label(3, 0) == "3-0"
    assert partition_label(1001, 12) == "1001-12"
