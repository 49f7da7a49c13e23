"""A failing log dir (KIP-112): the broker takes that dir offline and keeps serving the others.

The failures are real ones from the OS, not simulated: a tmpfs mounted as one log dir and filled
(ENOSPC on the append that needs a new page, and on a checkpoint written there), a segment's
descriptor replaced by one of a directory (EISDIR on the read), a log dir that is a file, a
corrupt checkpoint (what Kafka's checkpoint reader refuses with an IOException). Real clients
(kafka-python) produce and consume the good dir's partitions meanwhile; each API then answers
KAFKA_STORAGE_ERROR for the bad dir's partitions as Kafka's ReplicaManager does, and a restart
with the dir fixed finds every acknowledged record.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.log.segments import FileLog, FileSegment
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.store import MemoryStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_dataplane_wire import batch, create, list_offset, partitions_of, produce

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket

STORAGE = ErrorCode.KAFKA_STORAGE_ERROR


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "4m") -> Iterator[Path]:
    """A small tmpfs mounted at ``path`` (skips where mounting is not allowed)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until its file system has no space left."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        chunk = b"\0" * 65536
        while True:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        for size in (4096, 512, 1):  # the last partial page too
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


def wait_for(condition: Any, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def fetch_error(conn: KafkaSocket, topic: str, partition: int, version: int = 12, *, offset: int = 0,
                max_wait_ms: int = 0) -> int:
    body = {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
            "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                        "current_leader_epoch": -1, "log_start_offset": -1,
                                                        "last_fetched_epoch": -1,
                                                        "partition_max_bytes": 1 << 20}]}]}
    [answer] = conn.call(ApiKey.FETCH, version, body).body["responses"]
    [data] = answer["partitions"]
    return int(data["error_code"])


def epoch_error(conn: KafkaSocket, topic: str, partition: int) -> int:
    body = {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
        {"partition": partition, "current_leader_epoch": -1, "leader_epoch": 0}]}]}
    [answer] = conn.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body).body["topics"]
    return int(answer["partitions"][0]["error_code"])


def delete_records_error(conn: KafkaSocket, topic: str, partition: int) -> int:
    body = {"topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": 0}]}],
            "timeout_ms": 5000}
    [answer] = conn.call(ApiKey.DELETE_RECORDS, 2, body).body["topics"]
    return int(answer["partitions"][0]["error_code"])


def described(conn: KafkaSocket) -> dict[str, tuple[int, set[tuple[str, int]]]]:
    """{log dir: (error, {(topic, partition)})}."""
    results = conn.call(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None}).body["results"]
    return {r["log_dir"]: (r["error_code"], {(t["name"], p["partition_index"])
                                             for t in r["topics"] for p in t["partitions"]})
            for r in results}


def alter_error(conn: KafkaSocket, topic: str, partition: int, path: Path) -> int:
    body = {"dirs": [{"path": str(path), "topics": [{"name": topic, "partitions": [partition]}]}]}
    [answer] = conn.call(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, body).body["results"]
    return int(answer["partitions"][0]["error_code"])


def topic_back(broker: Broker, name: str) -> None:
    wait_for(lambda: broker.runtime is not None and name in broker.runtime.cluster.topics, f"topic {name}")


def values_after_restart(config: dict[str, Any], store: MemoryStore, topic: str,
                         *partitions: int) -> list[list[bytes | None]]:
    """What each of ``partitions`` holds once the broker starts again on the same dirs."""
    with Broker(config, store=store) as again:
        topic_back(again, topic)
        return [[r.value for r in again.records(topic, p)] for p in partitions]


def split(broker: Broker, topic: str, good: Path, bad: Path) -> tuple[int, int]:
    """(a partition of ``topic`` in ``good``, one in ``bad``), their logs made by a produce each."""
    with KafkaSocket(broker.bootstrap_servers) as conn:
        for p in (0, 1):
            assert produce(conn, topic, {p: batch(b"first")})[p]["error_code"] == 0
    logs = partitions_of(broker).logs
    where = {logs.dir_of(topic, p): p for p in (0, 1)}
    assert set(where) == {good, bad}, "the least-loaded rule puts one partition in each dir"
    return where[good], where[bad]


# --- at run time: a full disk ---------------------------------------------------------------------

def test_a_full_disk_takes_its_dir_offline_and_the_other_dir_keeps_serving(tmp_path: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import KafkaStorageError

    good, bad = tmp_path / "good", tmp_path / "bad"
    store = MemoryStore()
    config = {"broker.id": 1, "log.dirs": f"{good},{bad}"}
    with tmpfs(bad):
        with Broker(config, store=store) as broker:
            create(broker, "t", {0: (1,), 1: (1,)})
            ok, failing = split(broker, "t", good, bad)
            acked: dict[int, list[bytes]] = {ok: [b"first"], failing: [b"first"]}
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all", retries=0,
                                     linger_ms=0, api_version=(2, 5))
            try:
                for i in range(20):
                    for p in (ok, failing):
                        value = b"before-%d" % i
                        producer.send("t", value=value, partition=p).get(timeout=10)
                        acked[p].append(value)
                filler = fill(bad)
                # The append that needs a page the disk no longer has: the request in flight gets
                # KAFKA_STORAGE_ERROR, and the dir is offline from then on.
                with pytest.raises(KafkaStorageError):
                    producer.send("t", value=b"x" * 20000, partition=failing).get(timeout=10)
                assert partitions_of(broker).logs.offline_dirs == {bad}
                with pytest.raises(KafkaStorageError):
                    producer.send("t", value=b"small", partition=failing).get(timeout=10)
                for i in range(20):  # the good dir's partition goes on
                    value = b"after-%d" % i
                    producer.send("t", value=value, partition=ok).get(timeout=10)
                    acked[ok].append(value)
            finally:
                producer.close()
            consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                                     enable_auto_commit=False, consumer_timeout_ms=5000, api_version=(2, 5))
            try:
                consumer.assign([TopicPartition("t", ok)])
                read = [m.value for m in consumer]
            finally:
                consumer.close()
            assert read == acked[ok]

            with KafkaSocket(broker.bootstrap_servers) as conn:
                # every API for the bad dir's partition, as Kafka's ReplicaManager answers it
                both = produce(conn, "t", {failing: batch(b"y"), ok: batch(b"z")})  # one request
                assert both[failing]["error_code"] == STORAGE and both[failing]["base_offset"] == -1
                assert (both[ok]["error_code"], both[ok]["base_offset"]) == (ErrorCode.NONE, len(acked[ok]))
                acked[ok].append(b"z")
                assert fetch_error(conn, "t", failing) == STORAGE
                assert fetch_error(conn, "t", failing, version=4) == ErrorCode.NOT_LEADER_OR_FOLLOWER
                assert fetch_error(conn, "t", ok) == ErrorCode.NONE
                assert list_offset(conn, "t", failing, -1)["error_code"] == STORAGE
                assert list_offset(conn, "t", ok, -1)["offset"] == len(acked[ok])
                assert epoch_error(conn, "t", failing) == STORAGE
                assert delete_records_error(conn, "t", failing) == STORAGE
                # DescribeLogDirs: the offline dir with its error and no partitions
                dirs = described(conn)
                assert dirs[str(bad)] == (STORAGE, set())
                assert dirs[str(good)] == (ErrorCode.NONE, {("t", ok)})
                # AlterReplicaLogDirs to the offline dir, or of a partition in it
                assert alter_error(conn, "t", ok, bad) == STORAGE
                assert alter_error(conn, "t", failing, good) == STORAGE
                # new partitions go to the dir still online
                create(broker, "later", {0: (1,), 1: (1,)})
                for p in (0, 1):
                    assert produce(conn, "later", {p: batch(b"new")})[p]["error_code"] == 0
                    assert partitions_of(broker).logs.dir_of("later", p) == good
        assert not (bad / ".kafka_cleanshutdown").exists()  # its logs are recovered at the next start
        filler.unlink()  # the disk has room again
        with Broker(config, store=store) as again:
            topic_back(again, "t")
            for p in (ok, failing):
                assert [r.value for r in again.records("t", p)] == acked[p]
            with KafkaSocket(again.bootstrap_servers) as conn:
                back = produce(conn, "t", {failing: batch(b"back")})[failing]
                assert back["base_offset"] == len(acked[failing])


@pytest.mark.parametrize("version", [3, 9])
def test_one_request_to_both_dirs_is_answered_per_partition(tmp_path: Path, version: int) -> None:
    """The failing partition's answer is KAFKA_STORAGE_ERROR, the other's its offset, in one answer."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    store = MemoryStore()
    config = {"broker.id": 1, "log.dirs": f"{good},{bad}"}
    with tmpfs(bad):
        with Broker(config, store=store) as broker:
            create(broker, "t", {0: (1,), 1: (1,)})
            ok, failing = split(broker, "t", good, bad)
            filler = fill(bad)
            with KafkaSocket(broker.bootstrap_servers) as conn:
                answered = produce(conn, "t", {failing: batch(b"x" * 20000), ok: batch(b"second")},
                                   version=version)
                assert answered[failing]["error_code"] == STORAGE and answered[failing]["base_offset"] == -1
                assert (answered[ok]["error_code"], answered[ok]["base_offset"]) == (ErrorCode.NONE, 1)
                answered = produce(conn, "t", {ok: batch(b"third"), failing: batch(b"y")}, version=version)
                assert answered[failing]["error_code"] == STORAGE and answered[ok]["base_offset"] == 2
        filler.unlink()
        assert values_after_restart(config, store, "t", ok, failing) == [
            [b"first", b"second", b"third"], [b"first"]]


def test_a_checkpoint_the_background_writer_cannot_write_takes_its_dir_offline(tmp_path: Path) -> None:
    """Kafka's CheckpointFileWithFailureHandler.write: the dir goes offline, the broker goes on."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    with tmpfs(bad), Broker({"broker.id": 1, "log.dirs": f"{good},{bad}"}) as broker:
        create(broker, "t", {0: (1,), 1: (1,)})
        ok, failing = split(broker, "t", good, bad)
        fill(bad)
        logs = partitions_of(broker).logs
        broker.call_on_loop(lambda _: logs.checkpoint_recovery_points(wait=False))
        wait_for(lambda: bad in logs.offline_dirs, "the bad dir to go offline")
        with KafkaSocket(broker.bootstrap_servers) as conn:
            assert produce(conn, "t", {failing: batch(b"y")})[failing]["error_code"] == STORAGE
            assert produce(conn, "t", {ok: batch(b"z")})[ok]["base_offset"] == 1
        assert (good / "recovery-point-offset-checkpoint").exists()


def test_a_fetch_waiting_on_a_partition_of_the_failed_dir_is_answered_at_once(tmp_path: Path) -> None:
    """Kafka's DelayedFetch completes when its partition goes offline."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    with tmpfs(bad), Broker({"broker.id": 1, "log.dirs": f"{good},{bad}"}) as broker:
        create(broker, "t", {0: (1,), 1: (1,)})
        _, failing = split(broker, "t", good, bad)
        fill(bad)
        answered: dict[str, Any] = {}

        def wait_at_the_end() -> None:
            with KafkaSocket(broker.bootstrap_servers) as conn:
                answered["error"] = fetch_error(conn, "t", failing, offset=1, max_wait_ms=20_000)
                answered["at"] = time.monotonic()

        waiting = threading.Thread(target=wait_at_the_end)
        waiting.start()
        wait_for(lambda: partitions_of(broker).has_waiters("t", failing), "the fetch to wait")
        started = time.monotonic()
        with KafkaSocket(broker.bootstrap_servers) as conn:
            assert produce(conn, "t", {failing: batch(b"x" * 20000)})[failing]["error_code"] == STORAGE
        waiting.join(20)
        assert answered["error"] == STORAGE and answered["at"] - started < 5


def test_the_last_log_dir_failing_stops_the_broker(tmp_path: Path) -> None:
    """Kafka halts the broker when no log dir is left; kafkapy stops it with Kafka's line."""
    only = tmp_path / "only"
    with tmpfs(only), Broker({"broker.id": 1, "log.dirs": str(only)}) as broker:
        create(broker, "t", {0: (1,)})
        with KafkaSocket(broker.bootstrap_servers) as conn:
            assert produce(conn, "t", {0: batch(b"first")})[0]["error_code"] == ErrorCode.NONE
            fill(only)
            assert produce(conn, "t", {0: batch(b"x" * 20000)})[0]["error_code"] == STORAGE
        runtime = broker.runtime
        assert runtime is not None
        wait_for(runtime.failed.is_set, "the broker to stop")
        assert runtime.failure == f"Shutdown broker because all log dirs in {only} have failed"


# --- at run time: a read --------------------------------------------------------------------------

def test_a_read_error_takes_the_dir_offline_and_nothing_is_lost(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    store = MemoryStore()
    config = {"broker.id": 1, "log.dirs": f"{good},{bad}"}
    with Broker(config, store=store) as broker:
        create(broker, "t", {0: (1,), 1: (1,)})
        ok, failing = split(broker, "t", good, bad)
        log = partitions_of(broker).logs.get("t", failing)
        assert isinstance(log, FileLog)
        segment = log.segments[0]
        assert isinstance(segment, FileSegment)
        # the segment's descriptor now names a directory: the OS answers the read EISDIR
        directory_fd = os.open(bad, os.O_RDONLY)
        os.dup2(directory_fd, segment._fd)
        os.close(directory_fd)
        with KafkaSocket(broker.bootstrap_servers) as conn:
            assert fetch_error(conn, "t", failing) == STORAGE
            assert partitions_of(broker).logs.offline_dirs == {bad}
            assert fetch_error(conn, "t", ok) == ErrorCode.NONE
            assert produce(conn, "t", {ok: batch(b"second")})[ok]["base_offset"] == 1
            assert produce(conn, "t", {failing: batch(b"second")})[failing]["error_code"] == STORAGE
    assert values_after_restart(config, store, "t", ok, failing) == [[b"first", b"second"], [b"first"]]


# --- at start -------------------------------------------------------------------------------------

def test_a_log_dir_with_a_corrupt_checkpoint_is_offline_and_the_broker_starts(tmp_path: Path) -> None:
    """Kafka refuses the checkpoint (its reader's IOException) and takes that dir offline."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    store = MemoryStore()
    config = {"broker.id": 1, "log.dirs": f"{good},{bad}"}
    with Broker(config, store=store) as broker:
        create(broker, "t", {0: (1,), 1: (1,)})
        ok, failing = split(broker, "t", good, bad)
    checkpoint = bad / "recovery-point-offset-checkpoint"
    kept = checkpoint.read_bytes()
    checkpoint.write_text("7\n1\nt 1 1\n")  # a version Kafka does not read
    with Broker(config, store=store) as broker, KafkaSocket(broker.bootstrap_servers) as conn:
        topic_back(broker, "t")
        assert partitions_of(broker).logs.offline_dirs == {bad}
        assert produce(conn, "t", {failing: batch(b"y")})[failing]["error_code"] == STORAGE
        assert fetch_error(conn, "t", failing) == STORAGE
        assert produce(conn, "t", {ok: batch(b"second")})[ok]["base_offset"] == 1
        assert described(conn)[str(bad)] == (STORAGE, set())
    checkpoint.write_bytes(kept)
    assert values_after_restart(config, store, "t", ok, failing) == [[b"first", b"second"], [b"first"]]


def test_a_log_dir_that_is_not_a_directory_is_offline_and_new_partitions_go_elsewhere(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    bad.write_text("not a directory")
    with Broker({"broker.id": 1, "log.dirs": f"{good},{bad}"}) as broker:
        create(broker, "t", {0: (1,), 1: (1,), 2: (1,)})
        with KafkaSocket(broker.bootstrap_servers) as conn:
            for p in (0, 1, 2):
                assert produce(conn, "t", {p: batch(b"v")})[p]["error_code"] == 0
            assert {partitions_of(broker).logs.dir_of("t", p) for p in (0, 1, 2)} == {good}
            assert described(conn)[str(bad)] == (STORAGE, set())


def test_a_partition_of_a_dir_gone_at_start_is_not_made_again_elsewhere(tmp_path: Path) -> None:
    """Kafka's getOrCreateLog: while a dir is offline, only a new partition's log is made. A dir
    that cannot even be listed may hold any partition that existed before: those answer
    KAFKA_STORAGE_ERROR rather than start again, empty, in the other dir (which would leave the
    partition in two dirs once the disk is back, and the broker refusing to start)."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    store = MemoryStore()
    config = {"broker.id": 1, "log.dirs": f"{good},{bad}"}
    with Broker(config, store=store) as broker:
        create(broker, "t", {0: (1,), 1: (1,)})
        ok, failing = split(broker, "t", good, bad)
    aside = tmp_path / "bad-aside"
    bad.rename(aside)
    bad.write_text("")  # the disk gone: a file where the dir was
    with Broker(config, store=store) as broker, KafkaSocket(broker.bootstrap_servers) as conn:
        topic_back(broker, "t")
        assert produce(conn, "t", {failing: batch(b"lost?")})[failing]["error_code"] == STORAGE
        assert fetch_error(conn, "t", failing) == STORAGE
        assert produce(conn, "t", {ok: batch(b"second")})[ok]["base_offset"] == 1
        create(broker, "later", {0: (1,)})  # made after the start: new, so made in the dir online
        assert produce(conn, "later", {0: batch(b"new")})[0]["error_code"] == ErrorCode.NONE
    assert not (good / f"t-{failing}").exists()
    bad.unlink()
    aside.rename(bad)
    assert values_after_restart(config, store, "t", ok, failing) == [[b"first", b"second"], [b"first"]]


def test_every_log_dir_failing_stops_the_broker_with_kafkas_line(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("not a directory")
    b.write_text("not a directory either")
    with pytest.raises(Exception) as refused:  # the metadata's dir (the first) is checked first, as in KRaft
        with Broker({"broker.id": 1, "log.dirs": f"{a},{b}"}):
            pass
    assert f"Encountered I/O error in metadata log directory {a}. Cannot continue." in str(refused.value)
    metadata = {"metadata.log.dir": str(tmp_path / "metadata")}  # the log dirs alone failing
    with pytest.raises(Exception) as refused:
        with Broker({"broker.id": 1, "log.dirs": f"{a},{b}", **metadata}):
            pass
    assert (f"Shutdown broker because none of the specified log dirs from {a}, {b} can be created or "
            "validated") in str(refused.value)
    b.unlink()
    (b / "t-0").mkdir(parents=True)
    (b / "t-0" / "partition.metadata").write_text("version: 9\n")
    with pytest.raises(Exception) as refused:
        with Broker({"broker.id": 1, "log.dirs": f"{a},{b}", **metadata}):
            pass
    assert f"Shutdown broker because all log dirs in {a}, {b} have failed" in str(refused.value)
    assert "partition.metadata" in str(refused.value)
