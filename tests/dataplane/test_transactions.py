"""The data plane's half of transactions on the wire: transactional Produce, the TXN_MARKERS
capability and WriteTxnMarkers, read_committed Fetch (LSO, aborted list, long polls woken by
a marker), ListOffsets by isolation level, DescribeProducers, authorization, and a restart of
``kafkapy serve`` with log.dirs (SIGTERM and SIGKILL) that keeps all of it."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkapy.client import SimpleClient
from kafkapy.dataplane import DataPlaneModule
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import RecordBatch, build_record_batch
from kafkapy.server.modules import Module
from kafkapy.server.txn_markers import TXN_MARKERS, TxnMarker, TxnMarkerEvents, TxnMarkerWriter
from kafkapy.testing import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_produce_clients import TIMEOUT_S, _serve
from test_transactions_model import visible

# These tests drive the data plane's half of transactions alone (transactional batches, markers
# written as a coordinator would), with no coordinator that knows the transactions: KIP-890's
# verification, which would refuse them, is off (as in Kafka's own tests of the log side).
UNVERIFIED = {"broker.id": 1, "transaction.partition.verification.enable": False}
UNVERIFIED_SERVE = "transaction.partition.verification.enable=false"


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(UNVERIFIED) as running:
        yield running


def create(broker: Broker, topic: str, partitions: int = 1) -> None:
    assert broker.store is not None and broker.runtime is not None
    broker.store.create_topic(topic, {p: (1,) for p in range(partitions)})
    deadline = time.monotonic() + TIMEOUT_S
    while topic not in broker.runtime.cluster.topics:
        assert time.monotonic() < deadline
        time.sleep(0.001)


def init_producer_id(client: SimpleClient) -> int:
    answer = client.request(ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout_ms": 1, "producer_id": -1, "producer_epoch": -1})
    assert answer["error_code"] == ErrorCode.NONE
    return int(answer["producer_id"])


def produce(client: SimpleClient, topic: str, batch: bytes, *, transactional_id: str | None = None,
            partition: int = 0) -> dict[str, Any]:
    body = {"transactional_id": transactional_id, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}
    [answer] = client.request(ApiKey.PRODUCE, 9, body)["responses"]
    [partition_answer] = answer["partition_responses"]
    return dict(partition_answer)


def txn_batch(producer_id: int, values: list[bytes], sequence: int, *, epoch: int = 0,
              timestamp: int | None = None) -> bytes:
    return build_record_batch([{"value": v, "timestamp": timestamp} for v in values], producer_id=producer_id,
                              producer_epoch=epoch, base_sequence=sequence, is_transactional=True)


def write_markers(client: SimpleClient, topic: str, producer_id: int, *, commit: bool, partitions: list[int],
                  epoch: int = 0, coordinator_epoch: int = 0, version: int = 1) -> dict[int, int]:
    body = {"markers": [{"producer_id": producer_id, "producer_epoch": epoch, "transaction_result": commit,
                         "coordinator_epoch": coordinator_epoch,
                         "topics": [{"name": topic, "partition_indexes": partitions}]}]}
    [marker] = client.request(ApiKey.WRITE_TXN_MARKERS, version, body)["markers"]
    return {p["partition_index"]: p["error_code"] for t in marker["topics"] for p in t["partitions"]}


def fetch(client: SimpleClient, topic: str, *, isolation_level: int, offset: int = 0, max_wait_ms: int = 0,
          partition: int = 0, replica_id: int = -1) -> Any:
    body = {"replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    [answer] = client.request(ApiKey.FETCH, 12, body)["responses"]
    [partition_answer] = answer["partitions"]
    return partition_answer


def data_values(partition: Any) -> list[bytes | None]:
    """Every data record returned, as a read_uncommitted consumer sees them."""
    return [r.value for b in partition["records"].batches() if not b.is_control for r in b.record_list()]


def committed_values(partition: Any) -> list[bytes]:
    """What a read_committed consumer keeps (aborted transactions dropped, as Kafka's consumer does)."""
    return [value for _, value in visible(partition, 0, True)[0]]


def list_latest(client: SimpleClient, topic: str, isolation_level: int, *, timestamp: int = -1,
                replica_id: int = -1) -> int:
    body = {"replica_id": replica_id, "isolation_level": isolation_level, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": timestamp}]}]}
    [answer] = client.request(ApiKey.LIST_OFFSETS, 7, body)["topics"]
    return int(answer["partitions"][0]["offset"])


def test_an_open_transaction_holds_read_committed_back_until_its_commit(broker: Broker) -> None:
    create(broker, "t")
    with SimpleClient(broker.bootstrap_servers) as client:
        pid = init_producer_id(client)
        assert produce(client, "t", build_record_batch([{"value": b"before", "timestamp": 1000}]))[
            "base_offset"] == 0
        assert produce(client, "t", txn_batch(pid, [b"t1", b"t2"], 0, timestamp=2000),
                       transactional_id="tx")["base_offset"] == 1
        assert produce(client, "t", build_record_batch([{"value": b"after"}]))["base_offset"] == 3
        committed = fetch(client, "t", isolation_level=1)
        uncommitted = fetch(client, "t", isolation_level=0)
        assert (committed["high_watermark"], committed["last_stable_offset"]) == (4, 1)
        assert data_values(committed) == [b"before"]
        assert committed["aborted_transactions"] == []
        assert data_values(uncommitted) == [b"before", b"t1", b"t2", b"after"]
        assert uncommitted["aborted_transactions"] is None
        follower = fetch(client, "t", isolation_level=1, replica_id=1)  # Kafka's FetchIsolation.LOG_END
        assert data_values(follower) == data_values(uncommitted) and follower["aborted_transactions"] is None
        assert (list_latest(client, "t", 1), list_latest(client, "t", 0)) == (1, 4)
        # a follower (replica id 0+) or a debugging request (-2) is held to no isolation level:
        # the log end, as Kafka's ReplicaManager.fetchOffset answers them
        assert [list_latest(client, "t", 1, replica_id=r) for r in (1, -2)] == [4, 4]
        # by timestamp: nothing at or past what the isolation level may read (Kafka's
        # Partition.fetchOffsetForTimestamp)
        assert (list_latest(client, "t", 1, timestamp=1500), list_latest(client, "t", 0, timestamp=1500)) == (
            -1, 1)
        described = client.request(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": "t", "partition_indexes": [0]}]})["topics"][0]["partitions"][0]["active_producers"]
        assert [(p["producer_id"], p["current_txn_start_offset"]) for p in described] == [(pid, 1)]

        assert write_markers(client, "t", pid, commit=True, partitions=[0]) == {0: ErrorCode.NONE}
        committed = fetch(client, "t", isolation_level=1)
        assert (committed["high_watermark"], committed["last_stable_offset"]) == (5, 5)
        assert data_values(committed) == [b"before", b"t1", b"t2", b"after"]
        assert committed["aborted_transactions"] == []


def test_an_abort_is_listed_for_read_committed_consumers(broker: Broker) -> None:
    create(broker, "t")
    with SimpleClient(broker.bootstrap_servers) as client:
        pid = init_producer_id(client)
        produce(client, "t", txn_batch(pid, [b"gone"], 0), transactional_id="tx")
        produce(client, "t", build_record_batch([{"value": b"kept"}]))
        assert write_markers(client, "t", pid, commit=False, partitions=[0]) == {0: ErrorCode.NONE}
        committed = fetch(client, "t", isolation_level=1)
        assert committed["last_stable_offset"] == 3
        assert committed["aborted_transactions"] == [{"producer_id": pid, "first_offset": 0}]
        assert fetch(client, "t", isolation_level=1, offset=1)["aborted_transactions"] == [
            {"producer_id": pid, "first_offset": 0}]  # its marker at 2 is still in range
        assert fetch(client, "t", isolation_level=1, offset=3)["aborted_transactions"] == []
        # a timestamp lookup does not answer past what the isolation level may read
        assert list_latest(client, "t", 1, timestamp=0) == 0


def test_kafka_refuses_transactional_records_without_an_authorized_transactional_id(broker: Broker) -> None:
    create(broker, "t")
    with SimpleClient(broker.bootstrap_servers) as client:
        pid = init_producer_id(client)
        answer = produce(client, "t", txn_batch(pid, [b"x"], 0))
        assert (answer["error_code"], answer["base_offset"]) == (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
        assert fetch(client, "t", isolation_level=0)["high_watermark"] == 0
    # IDEMPOTENT_WRITE for InitProducerId (Kafka asks it of a producer without a transactional id)
    describe_only = {"broker.id": 1, "authorizer.class.name": "allowlist",
                     "allowlist.rules": "*@*:DESCRIBE,IDEMPOTENT_WRITE"}
    with Broker(describe_only) as strict:
        create(strict, "t")
        with SimpleClient(strict.bootstrap_servers) as client:
            pid = init_producer_id(client)
            answer = produce(client, "t", txn_batch(pid, [b"x"], 0), transactional_id="tx")
            assert answer["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            assert write_markers(client, "t", pid, commit=True, partitions=[0]) == {
                0: ErrorCode.CLUSTER_AUTHORIZATION_FAILED}


def produce_many(client: SimpleClient, topic: str, batches: dict[int, bytes], *, transactional_id: str | None,
                 version: int = 9, acks: int = -1) -> dict[int, tuple[int, int, str | None]]:
    """One Produce of a batch per partition: each partition's (error code, base offset, message)."""
    body = {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": b}
                                                              for p, b in batches.items()]}]}
    [answer] = client.request(ApiKey.PRODUCE, version, body)["responses"]
    return {p["index"]: (p["error_code"], p["base_offset"], p.get("error_message"))
            for p in answer["partition_responses"]}


def test_transactional_batches_of_two_producers_refuse_the_whole_request(broker: Broker) -> None:
    """Kafka's ReplicaManager.handleProduceAppend: transactional batches of more than one (producer
    id, epoch) in one Produce throw InvalidPidMappingException before anything is appended, so every
    partition is INVALID_PRODUCER_ID_MAPPING with its message, whatever KIP-890's switch says (it
    is off here). A second producer's idempotent batch beside a transactional one is no such case,
    nor is a transactional id on a request without transactional batches."""
    create(broker, "t", partitions=3)
    refused = (ErrorCode.INVALID_PRODUCER_ID_MAPPING, -1,
               "Transactional records contained more than one producer ID")
    with SimpleClient(broker.bootstrap_servers) as client:
        first, second = init_producer_id(client), init_producer_id(client)
        for version in (3, 9):
            two_ids = {0: txn_batch(first, [b"a"], 0), 1: txn_batch(second, [b"b"], 0)}
            said = refused if version >= 8 else (*refused[:2], None)  # no error_message before v8
            assert produce_many(client, "t", two_ids, transactional_id="tx", version=version) == {
                0: said, 1: said}
        two_epochs = {0: txn_batch(first, [b"a"], 0), 2: txn_batch(first, [b"b"], 0, epoch=1)}
        assert produce_many(client, "t", two_epochs, transactional_id="tx") == {0: refused, 2: refused}
        assert fetch(client, "t", isolation_level=0)["high_watermark"] == 0
        idempotent = build_record_batch([{"value": b"i"}], producer_id=second, producer_epoch=0,
                                        base_sequence=0)
        mixed = {0: txn_batch(first, [b"a"], 0), 1: idempotent}
        assert produce_many(client, "t", mixed, transactional_id="tx") == {
            0: (ErrorCode.NONE, 0, None), 1: (ErrorCode.NONE, 0, None)}
        assert produce_many(client, "t", {2: idempotent}, transactional_id="tx") == {
            2: (ErrorCode.NONE, 0, None)}


def test_markers_answer_each_partition_with_its_own_error(broker: Broker) -> None:
    create(broker, "t", partitions=2)
    with SimpleClient(broker.bootstrap_servers) as client:
        pid = init_producer_id(client)
        produce(client, "t", txn_batch(pid, [b"x"], 0), transactional_id="tx")
        assert write_markers(client, "t", pid, commit=True, partitions=[0, 1, 7], coordinator_epoch=2,
                             version=2) == {0: ErrorCode.NONE, 1: ErrorCode.NONE,
                                            7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert write_markers(client, "t", pid, commit=False, partitions=[0], coordinator_epoch=1) == {
            0: ErrorCode.TRANSACTION_COORDINATOR_FENCED}
        assert write_markers(client, "t", pid, commit=False, partitions=[0], epoch=1,
                             coordinator_epoch=2) == {0: ErrorCode.NONE}
        assert write_markers(client, "t", pid, commit=False, partitions=[0], epoch=0,
                             coordinator_epoch=2) == {0: ErrorCode.INVALID_PRODUCER_EPOCH}
        assert write_markers(client, "missing", pid, commit=True, partitions=[0]) == {
            0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert fetch(client, "t", isolation_level=0)["high_watermark"] == 3  # the data, two markers


def test_the_txn_markers_capability_is_the_data_plane(broker: Broker) -> None:
    create(broker, "t")
    runtime = broker.runtime
    assert runtime is not None
    [module] = [m for m in runtime.modules if isinstance(m, DataPlaneModule)]
    assert module.services.provider(TXN_MARKERS, Module) is module
    assert isinstance(module, TxnMarkerWriter) and isinstance(module, TxnMarkerEvents)
    told: list[tuple[TxnMarker, str, int]] = []
    stop = module.watch_txn_markers(lambda marker, topic, partition: told.append((marker, topic, partition)))
    with SimpleClient(broker.bootstrap_servers) as client:
        pid = init_producer_id(client)
        produce(client, "t", txn_batch(pid, [b"x"], 0), transactional_id="tx")
        marker = TxnMarker(pid, 0, False, 0, (("t", 0), ("nope", 0)))
        errors = broker._on_loop(lambda: module.write_markers([marker]))
        assert told == [(marker, "t", 0)]  # the partition written, not the refused one
        assert write_markers(client, "t", pid, commit=True, partitions=[0]) == {0: ErrorCode.NONE}
        assert [(m.committed, m.partitions) for m, _, _ in told[1:]] == [(True, (("t", 0),))]
        stop()
        write_markers(client, "t", pid, commit=True, partitions=[0])
        assert len(told) == 2
        assert errors == {(pid, "t", 0): ErrorCode.NONE,
                          (pid, "nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert fetch(client, "t", isolation_level=1)["aborted_transactions"] == [
            {"producer_id": pid, "first_offset": 0}]


# A wait far longer than any test: a Fetch answered within WOKEN_S was woken by what the test did,
# however slow the machine, and one that was not is still waiting then.
LONG_WAIT_MS, WOKEN_S = 120_000, 60


def test_a_read_committed_long_poll_is_woken_by_the_commit(broker: Broker) -> None:
    """The Fetch waits in the broker (observed, not slept for) before the commit's marker is written."""
    create(broker, "t")
    runtime = broker.runtime
    assert runtime is not None
    with SimpleClient(broker.bootstrap_servers) as client, SimpleClient(broker.bootstrap_servers) as other:
        pid = init_producer_id(client)
        produce(client, "t", txn_batch(pid, [b"x"], 0), transactional_id="tx")
        answers: list[Any] = []
        poll = threading.Thread(target=lambda: answers.append(
            fetch(client, "t", isolation_level=1, max_wait_ms=LONG_WAIT_MS)), daemon=True)
        poll.start()
        wait_until(lambda: any(c.admitted and c.busy for c in runtime.connections), what="the Fetch waiting")
        assert not answers  # read_committed: nothing to give before the open transaction ends
        write_markers(other, "t", pid, commit=True, partitions=[0])
        poll.join(WOKEN_S)
        assert not poll.is_alive(), "the commit did not wake the waiting Fetch"
    assert data_values(answers[0]) == [b"x"]


def test_a_non_transactional_write_in_an_open_transaction_is_invalid_txn_state(broker: Broker) -> None:
    create(broker, "t")
    with SimpleClient(broker.bootstrap_servers) as client:
        pid = init_producer_id(client)
        produce(client, "t", txn_batch(pid, [b"x"], 0), transactional_id="tx")
        plain = build_record_batch([{"value": b"y"}], producer_id=pid, producer_epoch=0, base_sequence=1)
        assert produce(client, "t", plain)["error_code"] == ErrorCode.INVALID_TXN_STATE


# --- a restart of kafkapy serve with log.dirs ------------------------------------------------


def _restartable_scenario(address: str) -> tuple[int, int]:
    """Producer A aborts, producer B stays open; both over rolled segments. Answers B's id and
    where its transaction began."""
    with SimpleClient(address) as client:
        deadline = time.monotonic() + TIMEOUT_S
        while produce(client, "tx", build_record_batch([{"value": b"p0"}]))["error_code"] != ErrorCode.NONE:
            assert time.monotonic() < deadline, "the topic was not created"
            time.sleep(0.05)
        a, b = init_producer_id(client), init_producer_id(client)
        for i in range(3):
            produce(client, "tx", txn_batch(a, [b"a%d" % i], i), transactional_id="ta")
            produce(client, "tx", build_record_batch([{"value": b"p%d" % (i + 1)}]))
        assert write_markers(client, "tx", a, commit=False, partitions=[0]) == {0: ErrorCode.NONE}
        b_first = produce(client, "tx", txn_batch(b, [b"b0"], 0), transactional_id="tb")["base_offset"]
        produce(client, "tx", build_record_batch([{"value": b"p4"}]))
        return b, b_first


def _after_auto_creation(client: SimpleClient) -> Any:
    """The first read_committed Fetch once the topic exists again: the in-memory metadata store
    starts empty, so the topic is auto-created and finds its log in log.dirs."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        client.request(ApiKey.METADATA, 9, {"topics": [{"name": "tx"}], "allow_auto_topic_creation": True,
                                            "include_cluster_authorized_operations": False,
                                            "include_topic_authorized_operations": False})
        answer = fetch(client, "tx", isolation_level=1)
        if answer["error_code"] == ErrorCode.NONE:
            return answer
        assert time.monotonic() < deadline, answer
        time.sleep(0.05)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "kill-9"])
def test_transactions_survive_a_restart_with_log_dirs(tmp_path: Path, how: signal.Signals) -> None:
    proc, address = _serve(tmp_path, "log.segment.bytes=200", UNVERIFIED_SERVE)
    try:
        b, b_first = _restartable_scenario(address)
        with SimpleClient(address) as client:
            before = fetch(client, "tx", isolation_level=1)
        proc.send_signal(how)
        proc.wait(TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(TIMEOUT_S)
    indexes = sorted((tmp_path / "tx-0").glob("*.txnindex"))
    assert len(indexes) == 1 and indexes[0].stat().st_size == 34  # Kafka's AbortedTxn entry
    proc, address = _serve(tmp_path, "log.segment.bytes=200", UNVERIFIED_SERVE)
    try:
        with SimpleClient(address) as client:
            after = _after_auto_creation(client)
            assert after["last_stable_offset"] == before["last_stable_offset"] == b_first
            assert after["aborted_transactions"] == before["aborted_transactions"] != []
            assert committed_values(after) == committed_values(before) == [b"p0", b"p1", b"p2", b"p3"]
            assert list_latest(client, "tx", 1) == b_first
            assert write_markers(client, "tx", b, commit=True, partitions=[0]) == {0: ErrorCode.NONE}
            done = fetch(client, "tx", isolation_level=1)
            assert done["last_stable_offset"] == done["high_watermark"]
            assert committed_values(done) == [b"p0", b"p1", b"p2", b"p3", b"b0", b"p4"]
    finally:
        proc.terminate()
        proc.wait(TIMEOUT_S)


def test_control_batches_carry_the_marker_for_consumers(broker: Broker) -> None:
    create(broker, "t")
    with SimpleClient(broker.bootstrap_servers) as client:
        pid = init_producer_id(client)
        produce(client, "t", txn_batch(pid, [b"x"], 0), transactional_id="tx")
        write_markers(client, "t", pid, commit=True, partitions=[0], coordinator_epoch=4)
        batches = list(fetch(client, "t", isolation_level=0)["records"].batches())
    marker = batches[-1]
    assert isinstance(marker, RecordBatch)
    assert (marker.is_control, marker.is_transactional, marker.producer_id, marker.base_sequence) == (
        True, True, pid, -1)
    [record] = marker.record_list()
    assert (record.key, record.value) == (b"\0\0\0\x01", b"\0\0\0\0\0\x04")  # COMMIT, coordinator epoch 4


def test_a_read_committed_fetch_past_the_lso_is_answered_at_once(broker: Broker) -> None:
    """Kafka's DelayedFetch (case F): a position past the end the isolation level may read (the
    LSO for read_committed) completes the fetch at once, with no records; at the LSO it waits."""
    create(broker, "t")
    with SimpleClient(broker.bootstrap_servers) as client:
        pid = init_producer_id(client)
        produce(client, "t", build_record_batch([{"value": b"before"}]))
        produce(client, "t", txn_batch(pid, [b"open"], 0), transactional_id="tx")  # offset 1: the LSO
        produce(client, "t", build_record_batch([{"value": b"after"}]))
        started = time.monotonic()
        past = fetch(client, "t", isolation_level=1, offset=2, max_wait_ms=3000)
        assert time.monotonic() - started < 1.5
        assert (past["error_code"], past["last_stable_offset"], data_values(past)) == (ErrorCode.NONE, 1, [])
        started = time.monotonic()
        at = fetch(client, "t", isolation_level=1, offset=1, max_wait_ms=600)
        assert time.monotonic() - started >= 0.5  # nothing committed to read: max_wait_ms
        assert data_values(at) == []
