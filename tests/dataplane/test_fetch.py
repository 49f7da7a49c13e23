"""Fetch on the wire (kafkapy.dataplane.fetch): every version v4 to the newest, byte limits,
errors per partition, long-polling woken by appends, and KIP-227 sessions."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fetch_seeding import ResponseRecorder, on_loop, seeded
from raw_frames import exchange

from kafkapy.client import SimpleClient
from kafkapy.dataplane.fetch import FETCH_VERSIONS, FIRST_RECORD_BATCH_VERSION
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.protocol import encode_request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.records import build_record_batch
from kafkapy.server.fastpaths import FastPaths
from kafkapy.testing import wait_until

VERSIONS = range(FIRST_RECORD_BATCH_VERSION, FETCH_VERSIONS.high + 1)  # v0-v3: test_legacy_formats.py
NEWEST = FETCH_VERSIONS.high


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"broker.id": 1}) as running:
        yield running


def create(broker: Broker, topic: str, partitions: int = 1, leader: int | None = None) -> uuid.UUID:
    topic_id = on_loop(broker, lambda: seeded(broker).create_topic(topic, partitions, leader))
    wait_until(lambda: topic in seeded(broker).services.cluster.topics, what=f"{topic} in the cluster view")
    return topic_id


def append(broker: Broker, topic: str, values: list[bytes], partition: int = 0) -> int:
    return on_loop(broker, lambda: seeded(broker).append(topic, partition, [(None, v) for v in values]))


def fetch(client: SimpleClient, version: int, partitions: list[dict[str, Any]], *, topic: str = "t",
          topic_id: uuid.UUID | None = None, **fields: Any) -> Any:
    name = {"topic_id": topic_id} if version >= 13 else {"topic": topic}
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{**name, "partitions": [{"partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
                                                 **p} for p in partitions]}],
            **fields}
    return client.request(ApiKey.FETCH, version, body)


def values(partition: Any) -> list[bytes | None]:
    return [record.value for batch in partition["records"] for record in batch]


@pytest.mark.parametrize("version", VERSIONS)
def test_fetch_reads_the_stored_batches_at_every_version(broker: Broker, version: int) -> None:
    topic_id = create(broker, "t")
    append(broker, "t", [b"a", b"b"])
    append(broker, "t", [b"c"])
    with SimpleClient(broker.bootstrap_servers) as client:
        response = fetch(client, version, [{"partition": 0, "fetch_offset": 0}], topic_id=topic_id)
        later = fetch(client, version, [{"partition": 0, "fetch_offset": 2}], topic_id=topic_id)
    [topic] = response["responses"]
    assert topic["topic_id" if version >= 13 else "topic"] == (topic_id if version >= 13 else "t")
    [partition] = topic["partitions"]
    assert partition["error_code"] == ErrorCode.NONE
    assert (partition["high_watermark"], partition["last_stable_offset"]) == (3, 3)
    assert partition.get("log_start_offset", 0) == 0  # from v5
    assert values(partition) == [b"a", b"b", b"c"]
    assert partition.get("preferred_read_replica", -1) == -1  # from v11
    assert values(later["responses"][0]["partitions"][0]) == [b"c"]


def test_the_first_batch_goes_whole_and_later_ones_only_while_they_fit(broker: Broker) -> None:
    create(broker, "t", partitions=2)
    big = b"x" * 5000
    append(broker, "t", [big], partition=0)
    append(broker, "t", [big], partition=0)
    append(broker, "t", [b"small"], partition=1)
    both = [{"partition": 0, "fetch_offset": 0}, {"partition": 1, "fetch_offset": 0}]
    with SimpleClient(broker.bootstrap_servers) as client:
        tiny = fetch(client, 12, both, max_bytes=100)  # response limit below one batch
        per_partition = fetch(client, 12, [{**p, "partition_max_bytes": 50} for p in both])
        roomy = fetch(client, 12, both, max_bytes=12000)
    first, second = tiny["responses"][0]["partitions"]
    assert values(first) == [big] and values(second) == []  # the first batch whole, nothing after it
    first, second = per_partition["responses"][0]["partitions"]
    assert values(first) == [big] and values(second) == []  # only the first partition's goes whole
    first, second = roomy["responses"][0]["partitions"]
    assert values(first) == [big, big] and values(second) == [b"small"]


def test_errors_are_per_partition(broker: Broker) -> None:
    topic_id = create(broker, "t", partitions=2)
    create(broker, "elsewhere", leader=2)
    append(broker, "t", [b"a"])
    with SimpleClient(broker.bootstrap_servers) as client:
        response = client.request(ApiKey.FETCH, 12, {
            "max_wait_ms": 5000, "min_bytes": 1000, "max_bytes": 1 << 20, "session_epoch": -1, "topics": [
                {"topic": "t", "partitions": [
                    {"partition": 0, "fetch_offset": 7, "partition_max_bytes": 1000},
                    {"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1000,
                     "current_leader_epoch": 3},
                    {"partition": 9, "fetch_offset": 0, "partition_max_bytes": 1000}]},
                {"topic": "elsewhere", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                       "partition_max_bytes": 1000}]}]})
        unknown_id = fetch(client, 13, [{"partition": 0, "fetch_offset": 0}], topic_id=uuid.uuid4())
        moved = fetch(client, NEWEST, [{"partition": 0, "fetch_offset": 0}],
                      topic_id=seeded(broker).topic_id("elsewhere"))
    codes = [p["error_code"] for topic in response["responses"] for p in topic["partitions"]]
    assert codes == [ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.UNKNOWN_LEADER_EPOCH,
                     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER]
    assert response["responses"][0]["partitions"][0]["high_watermark"] == -1
    assert unknown_id["responses"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
    [partition] = moved["responses"][0]["partitions"]
    assert partition["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # KIP-951: the leader Metadata would name; broker 2 is not live, so none (as Kafka's offline -1)
    assert partition["current_leader"] == {"leader_id": -1, "leader_epoch": 0}
    assert topic_id != seeded(broker).topic_id("elsewhere")


def test_a_waiting_fetch_wakes_when_data_is_appended(broker: Broker) -> None:
    create(broker, "t")
    append(broker, "t", [b"old"])
    module = seeded(broker)
    answered: dict[str, Any] = {}

    def consume() -> None:
        with SimpleClient(broker.bootstrap_servers, timeout=30) as client:
            answered["response"] = fetch(client, 12, [{"partition": 0, "fetch_offset": 1}],
                                         max_wait_ms=20000)
            answered["at"] = time.monotonic()

    consumer = threading.Thread(target=consume)
    consumer.start()
    wait_until(lambda: module.has_waiters("t", 0), what="the fetch waiting on the partition")
    appended_at = time.monotonic()
    append(broker, "t", [b"new"])
    consumer.join(30)
    latency = answered["at"] - appended_at
    print(f"long-poll wake-up latency: {latency * 1000:.2f} ms")
    assert values(answered["response"]["responses"][0]["partitions"][0]) == [b"new"]
    assert latency < 5  # woken by the append, far inside max_wait_ms (20 s)
    assert not module.has_waiters("t", 0)  # the callback was removed


def _fetch_in_thread(bootstrap: str, topic: str, answered: dict[str, Any], version: int = 12,
                     current_leader_epoch: int = -1) -> threading.Thread:
    """A fetch of ``topic``-0 at offset 0 with a 20 s max_wait_ms, from another thread."""
    def consume() -> None:
        with SimpleClient(bootstrap, timeout=30) as client:
            asked = {"partition": 0, "fetch_offset": 0, "current_leader_epoch": current_leader_epoch}
            answered["response"] = fetch(client, version, [asked], topic=topic, max_wait_ms=20_000)
            answered["at"] = time.monotonic()

    consumer = threading.Thread(target=consume)
    consumer.start()
    return consumer


def test_a_waiting_fetch_answers_at_once_when_its_topic_is_deleted(broker: Broker) -> None:
    """Kafka's DelayedFetch completes early when a partition it waits on is gone."""
    create(broker, "gone")
    answered: dict[str, Any] = {}
    consumer = _fetch_in_thread(broker.bootstrap_servers, "gone", answered)
    wait_until(lambda: seeded(broker).has_waiters("gone", 0), what="the fetch waiting on the partition")
    deleted_at = time.monotonic()
    broker.delete_topics("gone")
    consumer.join(30)
    [partition] = answered["response"]["responses"][0]["partitions"]
    assert partition["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert answered["at"] - deleted_at < 5  # not the 20 s of max_wait_ms


@pytest.mark.parametrize(("version", "knows_epoch", "error"), [
    (10, False, ErrorCode.NOT_LEADER_OR_FOLLOWER),  # before KIP-392 a consumer reads from leaders only
    (12, True, ErrorCode.FENCED_LEADER_EPOCH),  # a follower may serve it, but its epoch is past
])
def test_a_waiting_fetch_answers_at_once_when_its_partition_moves(version: int, knows_epoch: bool,
                                                                  error: ErrorCode) -> None:
    """...and when the partition moved to another leader: the consumer learns it without waiting
    out max_wait_ms. The answer names the new leader (KIP-951) if the controller's write of the
    partition state reached this broker first, else none yet (-1, Kafka's LeaderAndIsr answer for
    a partition between leaders), and the client asks Metadata. From v11 a former leader, now a
    follower holding the log, may go on serving a consumer (Kafka's fetchOnlyLeader is false for
    them): what tells the consumer is the leader epoch it sends, as real clients do."""
    with Broker(brokers=2) as cluster:
        first, second = cluster.brokers
        assert first.runtime is not None and first.store is not None
        first.store.create_topic("moving", {0: (first.runtime.broker_id, second.runtime.broker_id)})
        wait_until(lambda: "moving" in seeded(first).services.cluster.topics
                   and seeded(first).services.cluster.leadership("moving", 0) is not None,
                   what="moving in the cluster view with a leader")
        answered: dict[str, Any] = {}
        epoch = seeded(first).services.cluster.leadership("moving", 0)[1] if knows_epoch else -1
        consumer = _fetch_in_thread(first.bootstrap_servers, "moving", answered, version, epoch)
        wait_until(lambda: seeded(first).has_waiters("moving", 0), what="the fetch waiting on the partition")
        moved_at = time.monotonic()
        move = cluster.move_leader("moving", 0, to=second.runtime.broker_id)
        consumer.join(30)
        [partition] = answered["response"]["responses"][0]["partitions"]
        assert partition["error_code"] == error
        if version >= 12:  # current_leader is a tagged field from v12
            assert partition["current_leader"] in ({"leader_id": second.runtime.broker_id,
                                                    "leader_epoch": move.leader_epoch},
                                                   {"leader_id": -1, "leader_epoch": -1})
        assert answered["at"] - moved_at < 5


def test_a_fetch_with_nothing_to_read_waits_max_wait_ms(broker: Broker) -> None:
    create(broker, "t")
    with SimpleClient(broker.bootstrap_servers) as client:
        started = time.monotonic()
        response = fetch(client, NEWEST, [{"partition": 0, "fetch_offset": 0}], max_wait_ms=300,
                         topic_id=seeded(broker).topic_id("t"))
        waited = time.monotonic() - started
        immediate = fetch(client, NEWEST, [{"partition": 0, "fetch_offset": 0}], max_wait_ms=0,
                          topic_id=seeded(broker).topic_id("t"))
    assert waited >= 0.3
    assert values(response["responses"][0]["partitions"][0]) == []
    assert values(immediate["responses"][0]["partitions"][0]) == []


def test_a_partition_refused_before_any_read_neither_hurries_nor_holds_the_answer(broker: Broker) -> None:
    """Kafka's handleFetchRequest answers an unknown topic (or topic id) before reading, and only
    what is read decides when the answer goes: with another partition to wait for, the request
    waits max_wait_ms as it would without the unknown one; with nothing else, it is answered at
    once. (A consumer still assigned a deleted topic's partition does not spin on it.)"""
    create(broker, "t")
    with SimpleClient(broker.bootstrap_servers) as client:
        asked = [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 100}]
        body = {"replica_id": -1, "max_wait_ms": 400, "min_bytes": 1, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": "t", "partitions": asked}, {"topic": "gone", "partitions": asked}]}
        started = time.monotonic()
        both = client.request(ApiKey.FETCH, 12, body)
        waited = time.monotonic() - started
        body["topics"] = body["topics"][1:]
        body["max_wait_ms"] = 10_000
        started = time.monotonic()
        alone = client.request(ApiKey.FETCH, 12, body)
        alone_waited = time.monotonic() - started
        unknown_id = fetch(client, NEWEST, [{"partition": 0, "fetch_offset": 0}], topic_id=uuid.uuid4(),
                           max_wait_ms=10_000)
    assert waited >= 0.4
    assert [p["error_code"] for t in both["responses"] for p in t["partitions"]] == [
        ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert alone["responses"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert alone_waited < 5
    assert unknown_id["responses"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID


def test_a_diverging_epoch_is_answered_at_once(broker: Broker) -> None:
    """Kafka's ReplicaManager.fetchMessages answers at once when a partition found a diverging
    epoch, as for an error: the fetcher must truncate, and nothing it waits for would come."""
    topic_id = create(broker, "t")
    append(broker, "t", [b"a", b"b"])  # epoch 0 ends at the log end, 2
    with SimpleClient(broker.bootstrap_servers) as client:
        started = time.monotonic()
        response = fetch(client, NEWEST, [{"partition": 0, "fetch_offset": 3, "last_fetched_epoch": 0}],
                         max_wait_ms=10_000, topic_id=topic_id)
        waited = time.monotonic() - started
    [partition] = response["responses"][0]["partitions"]
    assert partition["error_code"] == ErrorCode.NONE
    assert partition["diverging_epoch"] == {"epoch": 0, "end_offset": 2}
    assert waited < 5  # not the 10 s of max_wait_ms


def test_isolation_levels_read_the_same_records_until_transactions_land(broker: Broker) -> None:
    create(broker, "t")
    append(broker, "t", [b"a"])
    with SimpleClient(broker.bootstrap_servers) as client:
        committed = fetch(client, 12, [{"partition": 0, "fetch_offset": 0}], isolation_level=1)
        uncommitted = fetch(client, 12, [{"partition": 0, "fetch_offset": 0}], isolation_level=0)
    assert values(committed["responses"][0]["partitions"][0]) == values(
        uncommitted["responses"][0]["partitions"][0]) == [b"a"]
    assert committed["responses"][0]["partitions"][0]["aborted_transactions"] == []
    assert uncommitted["responses"][0]["partitions"][0]["aborted_transactions"] is None


def test_sessions_on_the_wire(broker: Broker) -> None:
    create(broker, "t", partitions=2)
    append(broker, "t", [b"a"], partition=0)
    both = [{"partition": 0, "fetch_offset": 0}, {"partition": 1, "fetch_offset": 0}]
    with SimpleClient(broker.bootstrap_servers) as client:
        full = fetch(client, 12, both, session_epoch=0)
        session_id = full["session_id"]
        assert session_id != 0 and full["error_code"] == ErrorCode.NONE
        assert len(full["responses"][0]["partitions"]) == 2
        # Incremental: partition 0 moved on, nothing changed anywhere: nothing listed.
        quiet = fetch(client, 12, [{"partition": 0, "fetch_offset": 1}], session_id=session_id,
                      session_epoch=1)
        assert quiet["session_id"] == session_id and quiet["responses"] == []
        append(broker, "t", [b"b"], partition=1)
        changed = fetch(client, 12, [], session_id=session_id, session_epoch=2)
        [partition] = changed["responses"][0]["partitions"]
        assert partition["partition_index"] == 1 and values(partition) == [b"b"]
        stale = fetch(client, 12, [], session_id=session_id, session_epoch=2)
        assert stale["error_code"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        missing = fetch(client, 12, [], session_id=session_id + 1, session_epoch=1)
        assert missing["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        closed = fetch(client, 12, both, session_id=session_id, session_epoch=-1)
        assert closed["session_id"] == 0 and len(closed["responses"][0]["partitions"]) == 2
        gone = fetch(client, 12, [], session_id=session_id, session_epoch=3)
        assert gone["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def raw_exchange(broker: Broker, frames: list[bytes]) -> list[bytes]:
    """Send request frames on one socket and return the response frames, byte for byte."""
    with socket.create_connection(host_port(broker), timeout=10) as sock:
        return [exchange(sock, frame) for frame in frames]


def host_port(broker: Broker) -> tuple[str, int]:
    host, _, port = broker.bootstrap_servers.rpartition(":")
    return host, int(port)


def test_chunked_responses_answer_byte_for_byte_as_the_plain_path() -> None:
    topic_id = uuid.uuid4()
    frames = []
    for version in VERSIONS:
        name = {"topic_id": topic_id} if version >= 13 else {"topic": "t"}
        frames.append(encode_request(ApiKey.FETCH, version, version, "c", {
            "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "session_epoch": -1,
            "topics": [{**name, "partitions": [
                {"partition": p, "fetch_offset": 0, "partition_max_bytes": 300} for p in (0, 1, 2)]}]}))
    answers = []

    for fast_paths in (FastPaths(), FastPaths(chunked_responses=False)):
        with Broker({"broker.id": 1}, fast_paths=fast_paths) as running:
            module = seeded(running)
            wait_until(lambda: module.services.broker_id >= 0, what="the broker id")  # noqa: B023
            on_loop(running, lambda: module.create_topic("t", 3, topic_id=topic_id))  # noqa: B023
            wait_until(lambda: "t" in module.services.cluster.topics, what="t")  # noqa: B023
            on_loop(running, lambda: [module.append("t", i % 2, [(b"k", b"v" * (40 * i))],  # noqa: B023
                                                    base_timestamp=1000) for i in range(6)])
            answers.append(raw_exchange(running, frames))
    assert answers[0] == answers[1]
    assert len(answers[0]) == len(VERSIONS)


def test_observers_see_the_records_of_a_chunked_response() -> None:
    with Broker({"broker.id": 1, "observer.class.names": "fetch_seeding.ResponseRecorder"}) as running:
        create(running, "t")
        append(running, "t", [b"seen"])
        with SimpleClient(running.bootstrap_servers) as client:
            answer = fetch(client, 12, [{"partition": 0, "fetch_offset": 0}])
    [(body, version)] = [(b, v) for b, v in ResponseRecorder.responses if b is not None and "responses" in b]
    records = body["responses"][0]["partitions"][0]["records"]
    assert version == 12 and isinstance(records, bytes)
    assert records == bytes(answer["responses"][0]["partitions"][0]["records"].raw)


def test_a_batch_from_kafka_python_builder_is_served_whole(broker: Broker) -> None:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    create(broker, "t")
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=1, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=1000 + i, key=b"k", value=b"v%d" % i, headers=[("h", b"1")])
    append(broker, "t", [b"first"])
    on_loop(broker, lambda: seeded(broker).append_batch("t", 0, builder.build()))
    with SimpleClient(broker.bootstrap_servers) as client:
        response = fetch(client, 11, [{"partition": 0, "fetch_offset": 1}])
    [batch] = list(response["responses"][0]["partitions"][0]["records"])
    assert [(r.offset, r.value) for r in batch] == [(1, b"v0"), (2, b"v1"), (3, b"v2")]
    assert build_record_batch  # the other builder, used by append()


@contextlib.contextmanager
def _long_polling(broker: Broker) -> Iterator[socket.socket]:
    """A raw connection whose Fetch of "t"-0 (made here) waits, for up to a minute, until the
    block ends and closes it."""
    create(broker, "t")
    frame = encode_request(ApiKey.FETCH, 12, 1, "c", {
        "max_wait_ms": 60_000, "min_bytes": 1, "max_bytes": 1 << 20, "session_epoch": -1,
        "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                   "partition_max_bytes": 1 << 20}]}]})
    with socket.create_connection(host_port(broker), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        wait_until(lambda: seeded(broker).has_waiters("t", 0), what="the fetch waiting on the partition")
        yield sock


def test_a_client_that_goes_away_ends_its_long_poll(broker: Broker) -> None:
    """The waiting Fetch of a closed connection stops waiting at once (its answer has nowhere to
    go), instead of holding a task until max_wait_ms: nothing is left pending at shutdown."""
    module = seeded(broker)
    with _long_polling(broker):
        pass
    wait_until(lambda: not module.has_waiters("t", 0), timeout=5,
               what="the closed connection's fetch to stop waiting")


def test_a_long_poll_woken_as_its_client_goes_away_still_ends(broker: Broker) -> None:
    """The connection closes in the loop step where an append (with nothing the fetch wants)
    wakes its Fetch: the worker's cancellation must still end the wait. Python 3.11's
    ``asyncio.wait_for`` swallowed it here, and the Fetch waited another ``max_wait_ms``."""
    module = seeded(broker)
    with _long_polling(broker):
        assert broker.runtime is not None
        connections = list(broker.runtime.connections)

        def wake_and_drop() -> None:
            module.module.partitions.appended("t", 0)
            for connection in connections:
                assert connection.transport is not None
                connection.transport.abort()

        on_loop(broker, wake_and_drop)
        wait_until(lambda: not module.has_waiters("t", 0), timeout=5,
                   what="the dropped connection's fetch to stop waiting")


def test_a_waiting_fetch_is_answered_when_the_broker_stops() -> None:
    """A consumer long-polling as a test ends its broker: the Fetch answers what it has at once
    (nothing here) rather than holding the stop for the shutdown's grace and then closing the
    socket under it, so ``with Broker()`` ends without waiting on the clients left polling."""
    answered: dict[str, Any] = {}
    with Broker({"broker.id": 1}) as broker:
        create(broker, "t")
        consumer = _fetch_in_thread(broker.bootstrap_servers, "t", answered)
        wait_until(lambda: seeded(broker).has_waiters("t", 0), what="the fetch waiting on the partition")
    consumer.join(30)
    assert not consumer.is_alive()
    [partition] = answered["response"]["responses"][0]["partitions"]
    assert partition["error_code"] == ErrorCode.NONE
    assert partition["high_watermark"] == 0 and not partition["records"]


@pytest.mark.parametrize("version", [4, 12, 13])
def test_a_partition_named_twice_is_answered_once_and_topics_keep_the_request_order(
        broker: Broker, version: int) -> None:
    """Kafka's FetchRequest.fetchData is a LinkedHashMap: a partition named again keeps its first
    place and takes the later fetch_offset; FetchResponse.toMessage puts a topic's partitions in
    one entry only when they come one after another in that order."""
    ids = {name: create(broker, name, partitions=2) for name in ("a", "b")}
    for name in ids:
        append(broker, name, [b"0", b"1"], partition=0)
        append(broker, name, [b"2"], partition=0)
        append(broker, name, [b"x"], partition=1)
    key = "topic_id" if version >= 13 else "topic"

    def named(name: str, *partitions: dict[str, Any]) -> dict[str, Any]:
        return {key: ids[name] if version >= 13 else name,
                "partitions": [{"partition_max_bytes": 1 << 20, "current_leader_epoch": -1, **p}
                               for p in partitions]}

    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [named("a", {"partition": 0, "fetch_offset": 0}),
                       named("b", {"partition": 0, "fetch_offset": 0}),
                       named("a", {"partition": 1, "fetch_offset": 0}, {"partition": 0, "fetch_offset": 2})]}
    with SimpleClient(broker.bootstrap_servers) as client:
        response = client.request(ApiKey.FETCH, version, body)
    answered = [(topic[key], [(p["partition_index"], values(p)) for p in topic["partitions"]])
                for topic in response["responses"]]
    a, b = (ids["a"], ids["b"]) if version >= 13 else ("a", "b")
    assert answered == [(a, [(0, [b"2"])]), (b, [(0, [b"0", b"1", b"2"])]), (a, [(1, [b"x"])])]


def test_a_position_in_an_older_segment_answers_without_waiting_for_min_bytes() -> None:
    """Kafka's DelayedFetch (case F): a fetch whose position is in an older segment than the high
    watermark completes at once (Kafka read only to that segment's end), min_bytes or not; one
    within the last segment waits for min_bytes as ever."""
    with Broker({"broker.id": 1, "log.segment.bytes": 200}) as broker:
        create(broker, "t")
        for n in range(6):  # about 80 bytes a batch: several segments
            append(broker, "t", [b"%d" % n * 10])
        log = on_loop(broker, lambda: seeded(broker).module.partitions.leader_log("t", 0))
        assert log.segment_base(0) < log.segment_base(log.high_watermark - 1)
        with SimpleClient(broker.bootstrap_servers) as client:
            started = time.monotonic()
            behind = fetch(client, 12, [{"partition": 0, "fetch_offset": 0}], max_wait_ms=3000,
                           min_bytes=1 << 20)
            assert time.monotonic() - started < 1.5
            assert values(behind["responses"][0]["partitions"][0])
            last = log.high_watermark - 1
            started = time.monotonic()
            fetch(client, 12, [{"partition": 0, "fetch_offset": last}], max_wait_ms=600, min_bytes=1 << 20)
            assert time.monotonic() - started >= 0.5
