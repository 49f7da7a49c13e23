"""The coordinator on the wire, through a real Broker and kafkapy's codec: InitProducerId with a
transactional id, AddPartitionsToTxn (client and KIP-890 forms), AddOffsetsToTxn, EndTxn,
fencing with the error each version gets, Describe/ListTransactions, FindCoordinator's half,
and the state surviving a restart with log.dirs.

The transactions module is a default one; ``markers_on`` reads the control batches the data
plane wrote into the partitions."""

from __future__ import annotations

import asyncio
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkapy.acls.model import AclOperation, AclPermissionType, PatternType, ResourceType
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.groups.partitioning import offsets_partition_for
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.store import MemoryStore
from kafkapy.transactions import TRANSACTION_STATE_TOPIC, TransactionsModule

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket

_COMMIT = 1  # the control record key's type for COMMIT (ABORT is 0), Kafka's ControlRecordType


Marker = tuple[int, int, bool]  # producer id, epoch, committed


def markers_on(broker: Broker, *partitions: tuple[str, int]) -> dict[tuple[str, int], list[Marker]]:
    """Per partition, the markers written to it, in order. Read with ``broker.records``, on the
    broker's loop: a commit answered to a client whose partitions are all on this broker is
    completed (markers, CompleteCommit) in the loop step after the answer, so a look at the logs
    from another thread without the loop could come between the two."""
    return {tp: [(record.producer_id, record.producer_epoch,
                  struct.unpack_from(">hh", record.key or b"")[1] == _COMMIT)
                 for record in broker.records(*tp) if record.is_control] for tp in partitions}


def module_of(broker: Broker) -> TransactionsModule:
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, TransactionsModule))


def find_coordinator(broker: Broker, transactional_id: str) -> tuple[ErrorCode, int | None]:
    loop = broker._loop
    assert loop is not None
    code, node = asyncio.run_coroutine_threadsafe(
        module_of(broker).find_transaction_coordinator(transactional_id), loop).result(10)
    return code, None if node is None else node.broker_id


def coordinator_ready(broker: Broker, transactional_id: str = "tx") -> None:
    deadline = time.monotonic() + 10
    while find_coordinator(broker, transactional_id) != (ErrorCode.NONE, broker.broker_id):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def make_broker(store: MemoryStore, log_dirs: Path | None = None) -> Broker:
    config: dict[str, Any] = {"broker.id": 1, "transaction.state.log.num.partitions": 5}
    if log_dirs is not None:
        config["log.dirs"] = str(log_dirs)
    return Broker(config, store=store)


@pytest.fixture
def broker() -> Iterator[Broker]:
    store = MemoryStore()
    with make_broker(store) as b:
        store.create_topic("orders", {0: (1,), 1: (1,)})
        offsets = b.runtime.config.get("offsets.topic.num.partitions", 50)  # type: ignore[union-attr]
        store.create_topic("__consumer_offsets", {p: (1,) for p in range(offsets)})  # the groups module's
        coordinator_ready(b)
        yield b


def init(conn: KafkaSocket, transactional_id: str, version: int = 4, timeout_ms: int = 60_000,
         producer_id: int = -1, epoch: int = -1) -> tuple[int, int, int]:
    body = conn.call(ApiKey.INIT_PRODUCER_ID, version, {
        "transactional_id": transactional_id, "transaction_timeout_ms": timeout_ms,
        "producer_id": producer_id, "producer_epoch": epoch}).body
    return body["error_code"], body["producer_id"], body["producer_epoch"]


def add(conn: KafkaSocket, transactional_id: str, producer_id: int, epoch: int,
        partitions: dict[str, list[int]], version: int = 3) -> dict[tuple[str, int], int]:
    topics = [{"name": t, "partitions": p} for t, p in partitions.items()]
    body = conn.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, {
        "v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": producer_id,
        "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": topics}).body
    return {(t["name"], p["partition_index"]): p["partition_error_code"]
            for t in body["results_by_topic_v3_and_below"] for p in t["results_by_partition"]}


def end(conn: KafkaSocket, transactional_id: str, producer_id: int, epoch: int, commit: bool,
        version: int = 3) -> int:
    return int(conn.call(ApiKey.END_TXN, version, {
        "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": epoch,
        "committed": commit}).body["error_code"])


def describe(conn: KafkaSocket, *ids: str) -> list[dict[str, Any]]:
    body = conn.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": list(ids)}).body
    return list(body["transaction_states"])


def test_find_coordinator_creates_the_compacted_state_topic() -> None:
    store = MemoryStore()
    with make_broker(store) as b:
        assert find_coordinator(b, "") == (ErrorCode.INVALID_REQUEST, None)
        assert TRANSACTION_STATE_TOPIC not in store.topics()
        # The first ask makes the topic and answers once it is there (no retry needed).
        code, coordinator = find_coordinator(b, "tx")
        assert (code, coordinator) == (ErrorCode.NONE, b.broker_id)
        assert len(store.topics()[TRANSACTION_STATE_TOPIC].partitions) == 5
        assert store.entity_config(f"topics/{TRANSACTION_STATE_TOPIC}")["cleanup.policy"] == "compact"


def test_a_committed_transaction(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        code, pid, epoch = init(conn, "tx")
        assert (code, epoch) == (ErrorCode.NONE, 0)
        assert add(conn, "tx", pid, epoch, {"orders": [0, 1]}) == {("orders", 0): 0, ("orders", 1): 0}
        offsets = conn.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, {
            "transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch, "group_id": "g"}).body
        assert offsets["error_code"] == ErrorCode.NONE
        [state] = describe(conn, "tx")
        group_partition = offsets_partition_for("g", broker.runtime.config.get(  # type: ignore[union-attr]
            "offsets.topic.num.partitions", 50))
        assert state["transaction_state"] == "Ongoing" and state["producer_id"] == pid
        assert (state["producer_epoch"], state["transaction_timeout_ms"]) == (epoch, 60_000)
        started = state["transaction_start_time_ms"]
        assert started > 0
        assert {t["topic"]: t["partitions"] for t in state["topics"]} == {
            "orders": [0, 1], "__consumer_offsets": [group_partition]}
        assert end(conn, "tx", pid, epoch, commit=True) == ErrorCode.NONE
        marked = [("orders", 0), ("orders", 1), ("__consumer_offsets", group_partition)]
        assert markers_on(broker, *marked) == {tp: [(pid, epoch, True)] for tp in marked}
        [state] = describe(conn, "tx")
        # Kafka keeps a completed transaction's start time; only InitProducerId (Empty) clears it.
        assert (state["transaction_state"], state["topics"], state["transaction_start_time_ms"]) == (
            "CompleteCommit", [], started)
        assert end(conn, "tx", pid, epoch, commit=True) == ErrorCode.NONE  # a retry
        assert end(conn, "tx", pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE
        assert init(conn, "tx", timeout_ms=30_000) == (ErrorCode.NONE, pid, epoch + 1)
        [state] = describe(conn, "tx")
        fields = ("transaction_state", "transaction_start_time_ms", "transaction_timeout_ms",
                  "producer_epoch")
        assert [state[f] for f in fields] == ["Empty", -1, 30_000, epoch + 1]


def test_unknown_partitions_and_bad_requests(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        assert init(conn, "")[0] == ErrorCode.INVALID_REQUEST
        assert init(conn, "tx", timeout_ms=900_001)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        _, pid, epoch = init(conn, "tx")
        assert add(conn, "tx", pid, epoch, {"orders": [0, 7]}) == {
            ("orders", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
            ("orders", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert add(conn, "tx", pid + 1, epoch, {"orders": [0]}) == {
            ("orders", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
        assert end(conn, "tx", pid, epoch, commit=True) == ErrorCode.INVALID_TXN_STATE  # nothing began
        assert describe(conn, "nobody")[0]["error_code"] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_add_partitions_answers_every_failed_partition_with_its_own_code(broker: Broker) -> None:
    """Kafka's KafkaApis checks each partition: not writable (an internal topic counts as such for a
    client) is TOPIC_AUTHORIZATION_FAILED, else unknown is UNKNOWN_TOPIC_OR_PARTITION; only the
    partitions that passed are OPERATION_NOT_ATTEMPTED. The brokers' batched form (v4+) is not
    authorized per topic but still checked for unknown partitions, verify-only or not."""
    with KafkaSocket(broker.bootstrap_servers) as conn:
        _, pid, epoch = init(conn, "tx")
        assert add(conn, "tx", pid, epoch, {"__consumer_offsets": [0], "orders": [0, 7], "nope": [0]}) == {
            ("__consumer_offsets", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            ("orders", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
            ("orders", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

        def batched(verify_only: bool, partitions: dict[str, list[int]]) -> dict[tuple[str, int], int]:
            body = conn.call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, {"transactions": [
                {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch,
                 "verify_only": verify_only,
                 "topics": [{"name": t, "partitions": p} for t, p in partitions.items()]}]}).body
            [result] = body["results_by_transaction"]
            return {(t["name"], p["partition_index"]): p["partition_error_code"]
                    for t in result["topic_results"] for p in t["results_by_partition"]}

        assert batched(True, {"orders": [0, 7]}) == {
            ("orders", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
            ("orders", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert batched(False, {"__consumer_offsets": [0]}) == {("__consumer_offsets", 0): ErrorCode.NONE}
        assert batched(True, {"__consumer_offsets": [0], "orders": [0]}) == {
            ("__consumer_offsets", 0): ErrorCode.NONE, ("orders", 0): ErrorCode.TRANSACTION_ABORTABLE}


def test_a_second_producer_fences_the_first(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        _, pid, epoch = init(conn, "tx")
        add(conn, "tx", pid, epoch, {"orders": [0]})
        # The new instance: the ongoing transaction is aborted under a bumped epoch first.
        assert init(conn, "tx")[0] == ErrorCode.CONCURRENT_TRANSACTIONS
        assert markers_on(broker, ("orders", 0)) == {("orders", 0): [(pid, epoch + 1, False)]}
        code, new_pid, new_epoch = init(conn, "tx")
        assert (code, new_pid, new_epoch) == (ErrorCode.NONE, pid, epoch + 2)
        # The old instance is fenced; old request versions get INVALID_PRODUCER_EPOCH (KIP-588).
        assert add(conn, "tx", pid, epoch, {"orders": [0]}, version=2) == {
            ("orders", 0): ErrorCode.PRODUCER_FENCED}
        assert add(conn, "tx", pid, epoch, {"orders": [0]}, version=1) == {
            ("orders", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
        assert end(conn, "tx", pid, epoch, True, version=2) == ErrorCode.PRODUCER_FENCED
        assert end(conn, "tx", pid, epoch, True, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
        # KIP-360: the current producer asks for a bump with its id and epoch; a stale one is fenced.
        assert init(conn, "tx", producer_id=pid, epoch=new_epoch) == (ErrorCode.NONE, pid, new_epoch + 1)
        assert init(conn, "tx", producer_id=pid, epoch=epoch)[0] == ErrorCode.PRODUCER_FENCED
        stale_v3 = init(conn, "tx", version=3, producer_id=pid, epoch=epoch)
        assert stale_v3[0] == ErrorCode.INVALID_PRODUCER_EPOCH


def test_init_producer_id_with_half_a_producer_id_and_epoch_is_an_invalid_request(broker: Broker) -> None:
    """Kafka's KafkaApis: a producer id without an epoch, or an epoch without a producer id, is
    INVALID_REQUEST before the coordinator looks. Taken as a KIP-360 retry, (id, -1) was handed the
    current epoch unbumped, so a second instance got the first one's epoch without fencing it."""
    with KafkaSocket(broker.bootstrap_servers) as conn:
        code, pid, epoch = init(conn, "tx")
        assert code == ErrorCode.NONE
        assert init(conn, "tx", producer_id=pid, epoch=-1) == (ErrorCode.INVALID_REQUEST, -1, -1)
        assert init(conn, "tx", producer_id=-1, epoch=epoch) == (ErrorCode.INVALID_REQUEST, -1, -1)
        assert init(conn, "tx", version=3, producer_id=pid, epoch=-1)[0] == ErrorCode.INVALID_REQUEST
        # nothing changed: the next instance gets the next epoch
        assert init(conn, "tx") == (ErrorCode.NONE, pid, epoch + 1)


@pytest.mark.parametrize("version", [4, 5])  # v5: the same form, TRANSACTION_ABORTABLE known to the sender
def test_verify_only_batched_form(broker: Broker, version: int) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        _, pid, epoch = init(conn, "tx")
        add(conn, "tx", pid, epoch, {"orders": [0]})
        body = conn.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, {"transactions": [
            {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch, "verify_only": True,
             "topics": [{"name": "orders", "partitions": [0, 1]}]},
            {"transactional_id": "other", "producer_id": 5, "producer_epoch": 0, "verify_only": True,
             "topics": [{"name": "orders", "partitions": [0]}]}]}).body
        assert body["error_code"] == ErrorCode.NONE
        results = {r["transactional_id"]: {(t["name"], p["partition_index"]): p["partition_error_code"]
                                           for t in r["topic_results"] for p in t["results_by_partition"]}
                   for r in body["results_by_transaction"]}
        assert results == {"tx": {("orders", 0): ErrorCode.NONE,
                                  ("orders", 1): ErrorCode.TRANSACTION_ABORTABLE},
                           "other": {("orders", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}}


def test_list_transactions_filters(broker: Broker) -> None:
    with KafkaSocket(broker.bootstrap_servers) as conn:
        _, pid_a, epoch_a = init(conn, "a")
        _, pid_b, _ = init(conn, "b")
        add(conn, "a", pid_a, epoch_a, {"orders": [0]})

        def listed(**body: Any) -> tuple[list[tuple[str, str]], list[str]]:
            answer = conn.call(ApiKey.LIST_TRANSACTIONS, 2, {"state_filters": [], "producer_id_filters": [],
                                                             "duration_filter": -1, **body}).body
            assert answer["error_code"] == ErrorCode.NONE
            return ([(s["transactional_id"], s["transaction_state"]) for s in answer["transaction_states"]],
                    answer["unknown_state_filters"])

        assert listed() == ([("a", "Ongoing"), ("b", "Empty")], [])
        assert listed(state_filters=["Ongoing", "Bogus"]) == ([("a", "Ongoing")], ["Bogus"])
        assert listed(state_filters=["Bogus"]) == ([], ["Bogus"])
        assert listed(producer_id_filters=[pid_b]) == ([("b", "Empty")], [])
        assert listed(transactional_id_pattern="a.*") == ([("a", "Ongoing")], [])
        # Kafka's rule: an id with no transaction has start -1, long ago.
        assert listed(duration_filter=3_600_000) == ([("b", "Empty")], [])
        # "a{4294967296}" failed the handler (OverflowError); lookaround only a backtracking engine runs
        for pattern in ("(", "a{4294967296}", "(?=a).*"):
            bad = conn.call(ApiKey.LIST_TRANSACTIONS, 2, {"transactional_id_pattern": pattern}).body
            assert bad["error_code"] == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_state_survives_a_restart_with_log_dirs(tmp_path: Path) -> None:
    store = MemoryStore()
    with make_broker(store, tmp_path) as first:
        store.create_topic("orders", {0: (1,), 1: (1,)})
        coordinator_ready(first)
        with KafkaSocket(first.bootstrap_servers) as conn:
            _, pid, epoch = init(conn, "kept")
            add(conn, "kept", pid, epoch, {"orders": [1]})
            _, done_pid, done_epoch = init(conn, "done")
            add(conn, "done", done_pid, done_epoch, {"orders": [0]})
            assert end(conn, "done", done_pid, done_epoch, commit=False) == ErrorCode.NONE
            before = describe(conn, "kept", "done")
    with make_broker(store, tmp_path) as second:
        coordinator_ready(second)
        with KafkaSocket(second.bootstrap_servers) as conn:
            after = describe(conn, "kept", "done")
            assert after == before
            assert [s["transaction_state"] for s in after] == ["Ongoing", "CompleteAbort"]
            # The transaction carries on where it was.
            assert end(conn, "kept", pid, epoch, commit=True) == ErrorCode.NONE


def test_timed_out_transactions_are_aborted_by_the_coordinator() -> None:
    store = MemoryStore()
    config = {"broker.id": 1, "transaction.state.log.num.partitions": 5,
              "transaction.abort.timed.out.transaction.cleanup.interval.ms": 50}
    with Broker(config, store=store) as b:
        store.create_topic("orders", {0: (1,)})
        coordinator_ready(b)
        with KafkaSocket(b.bootstrap_servers) as conn:
            _, pid, epoch = init(conn, "slow", timeout_ms=100)
            add(conn, "slow", pid, epoch, {"orders": [0]})
            deadline = time.monotonic() + 10
            while describe(conn, "slow")[0]["transaction_state"] != "CompleteAbort":
                assert time.monotonic() < deadline
                time.sleep(0.02)
            assert markers_on(b, ("orders", 0)) == {("orders", 0): [(pid, epoch + 1, False)]}
            assert end(conn, "slow", pid, epoch, commit=True) == ErrorCode.PRODUCER_FENCED


def test_acls_as_kafka_checks_them() -> None:
    """WRITE on the transactional id for the producer's requests, READ on the group for
    AddOffsetsToTxn, CLUSTER_ACTION for the brokers' batched AddPartitionsToTxn, DESCRIBE to see one."""
    store = MemoryStore()
    config = {"broker.id": 1, "transaction.state.log.num.partitions": 5, "authorizer.class.name": "allowlist",
              "allowlist.rules": "*@*:DESCRIBE"}
    with Broker(config, store=store) as readonly:
        store.create_topic("orders", {0: (1,)})
        coordinator_ready(readonly)
        with KafkaSocket(readonly.bootstrap_servers) as conn:
            assert init(conn, "tx")[0] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            assert add(conn, "tx", 1, 0, {"orders": [0]}) == {
                ("orders", 0): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
            assert end(conn, "tx", 1, 0, True) == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            batched = conn.call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, {"transactions": []}).body
            assert batched["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            assert describe(conn, "tx")[0]["error_code"] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    config["allowlist.rules"] = "*@*:WRITE"  # implies DESCRIBE, not READ
    with Broker(config, store=MemoryStore()) as writer:
        coordinator_ready(writer)
        with KafkaSocket(writer.bootstrap_servers) as conn:
            code, pid, epoch = init(conn, "tx")
            assert code == ErrorCode.NONE
            offsets = conn.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, {
                "transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch, "group_id": "g"}).body
            assert offsets["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_describe_transactions_shows_only_the_topics_the_principal_may_describe() -> None:
    """Kafka's KafkaApis drops from each described transaction the topics without DESCRIBE."""
    store = MemoryStore()
    config = {"broker.id": 1, "transaction.state.log.num.partitions": 5, "authorizer.class.name": "acl",
              "allow.everyone.if.no.acl.found": "true"}
    with Broker(config, store=store) as b:
        store.create_topic("orders", {0: (1,)})
        store.create_topic("secret", {0: (1,), 1: (1,)})
        coordinator_ready(b)
        with KafkaSocket(b.bootstrap_servers) as conn:
            _, pid, epoch = init(conn, "tx")
            assert add(conn, "tx", pid, epoch, {"orders": [0], "secret": [0, 1]}) == {
                ("orders", 0): ErrorCode.NONE, ("secret", 0): ErrorCode.NONE, ("secret", 1): ErrorCode.NONE}
            [state] = describe(conn, "tx")
            assert [t["topic"] for t in state["topics"]] == ["orders", "secret"]
            deny = {"resource_type": ResourceType.TOPIC, "resource_name": "secret",
                    "resource_pattern_type": PatternType.LITERAL, "principal": "User:ANONYMOUS", "host": "*",
                    "operation": AclOperation.DESCRIBE, "permission_type": AclPermissionType.DENY}
            created = conn.call(ApiKey.CREATE_ACLS, 3, {"creations": [deny]}).body
            assert created["results"][0]["error_code"] == ErrorCode.NONE
            [state] = describe(conn, "tx")
            assert (state["error_code"], state["transaction_state"]) == (ErrorCode.NONE, "Ongoing")
            assert state["topics"] == [{"topic": "orders", "partitions": [0]}]
