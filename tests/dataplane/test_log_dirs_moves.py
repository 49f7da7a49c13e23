"""AlterReplicaLogDirs: a partition moved between the directories of log.dirs while kafka-python
produces, read back exactly once; Kafka's per-partition errors, one test a row; DescribeLogDirs'
future replica; a restart with a move's leftovers (``-future``, ``-delete``)."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkapy.dataplane import DataPlaneModule
from kafkapy.embedded import Broker
from kafkapy.errors import ErrorCode
from kafkapy.log.moves import future_dir_name
from kafkapy.log.segments import FileLog
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.store import MemoryStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_dataplane_wire import batch, create, partitions_of, produce

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_wire import KafkaSocket


def _dataplane(broker: Broker) -> DataPlaneModule:
    assert broker.runtime is not None
    return next(m for m in broker.runtime.modules if isinstance(m, DataPlaneModule))


def _alter(conn: KafkaSocket, moves: dict[tuple[str, int], str],
           version: int = 2) -> dict[tuple[str, int], int]:
    by_dir: dict[str, dict[str, list[int]]] = {}
    for (topic, partition), path in moves.items():
        by_dir.setdefault(path, {}).setdefault(topic, []).append(partition)
    body = {"dirs": [{"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                     for path, topics in by_dir.items()]}
    answer = conn.call(ApiKey.ALTER_REPLICA_LOG_DIRS, version, body).body
    return {(t["topic_name"], p["partition_index"]): p["error_code"]
            for t in answer["results"] for p in t["partitions"]}


def _described(conn: KafkaSocket) -> dict[str, Any]:
    """{log dir: (error, {(topic, partition, is_future): (size, offset_lag)})}."""
    results = conn.call(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None}).body["results"]
    return {r["log_dir"]: (r["error_code"], {(t["name"], p["partition_index"], p["is_future_key"]):
                                             (p["partition_size"], p["offset_lag"])
                                             for t in r["topics"] for p in t["partitions"]})
            for r in results}


def _wait(condition: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def two_dirs(tmp_path: Path) -> Iterator[tuple[Broker, Path, Path]]:
    a, b = tmp_path / "a", tmp_path / "b"
    with Broker({"broker.id": 1, "log.dirs": f"{a},{b}"}) as broker:
        yield broker, a, b


# --- the move, with real clients -----------------------------------------------------------------

def test_kafka_python_moves_a_partition_while_producing_every_record_once(
        two_dirs: tuple[Broker, Path, Path], tmp_path: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient

    broker, a, b = two_dirs
    create(broker, "moving", {0: (1,)}, config={"segment.bytes": "200000"})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all", linger_ms=5)
    sent: list[bytes] = []
    stop = threading.Event()

    def produce_all_along() -> None:
        while not stop.is_set():
            for _ in range(100):
                value = f"{len(sent):09d}".encode() * 50
                producer.send("moving", value, partition=0)
                sent.append(value)
            producer.flush()

    thread = threading.Thread(target=produce_all_along)
    thread.start()
    try:
        _wait(lambda: len(sent) > 3000, "a few MB in the log")
        source = next(d for d in (a, b) if (d / "moving-0").exists())
        target = b if source == a else a
        assert {k.partition: e.__name__ for k, e in
                admin.alter_replica_log_dirs({("moving", 0, 1): str(target)}).items()} == {0: "NoError"}
        _wait(lambda: (target / "moving-0").exists() and not (source / "moving-0").exists(), "the swap")
        time.sleep(0.5)  # appends go on into the moved log
    finally:
        stop.set()
        thread.join()
    producer.close()
    [entry] = admin.describe_log_dirs()
    dirs = {d["log_dir"]: {(t["name"], p["partition_index"]): p["is_future_key"]
                           for t in d["topics"] for p in t["partitions"]} for d in entry["log_dirs"]}
    assert dirs == {str(source): {}, str(target): {("moving", 0): False}}
    admin.close()
    # the -delete directory goes too (removed off the loop after the swap)
    _wait(lambda: [p.name for p in source.iterdir() if p.is_dir()] == [], "the old directory's removal")
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    consumer.assign([TopicPartition("moving", 0)])
    received: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(received) < len(sent) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            received += [m.value for m in records]
    received += [m.value for records in consumer.poll(timeout_ms=500).values() for m in records]
    consumer.close()
    assert len(received) == len(sent) and received == sent  # every record once, in order
    moved = target / "moving-0"
    assert len(list(moved.glob("*.log"))) > 3 and list(moved.glob("*.snapshot"))
    # The index files are the ones the segments' own rule writes: rebuilt from the .log files
    # alone elsewhere, they come out the same bytes.
    rebuilt = tmp_path / "rebuilt"
    rebuilt.mkdir()
    for log_file in moved.glob("*.log"):
        shutil.copyfile(log_file, rebuilt / log_file.name)
    log = FileLog(rebuilt)
    try:
        for suffix in (".log", ".index", ".timeindex"):
            for ours in sorted(moved.glob("*" + suffix)):
                assert ours.read_bytes() == (rebuilt / ours.name).read_bytes(), ours.name
    finally:
        log.close()


def test_the_moved_directory_is_the_old_one_byte_for_byte(two_dirs: tuple[Broker, Path, Path]) -> None:
    """With appends held, the swap leaves in the new dir exactly the old directory's files."""
    broker, a, b = two_dirs
    create(broker, "t", {0: (1,)}, config={"segment.bytes": "2000"})
    with KafkaSocket(broker.bootstrap_servers) as conn:
        for n in range(40):
            assert produce(conn, "t", {0: batch(b"v" * 100, str(n).encode())})[0]["error_code"] == 0
    logs = partitions_of(broker).logs
    source = logs.dir_of("t", 0)
    assert source is not None
    target = b if source == a else a
    before = {p.name: p.read_bytes() for p in (source / "t-0").iterdir()}
    assert {p.rsplit(".", 1)[-1] for p in before} >= {"log", "index", "timeindex", "metadata"}

    def move(_: object) -> Path:
        assert logs.start_move("t", 0, target) is not None
        return logs.swap("t", 0)  # the copy, all in this one step: no append in between

    doomed = broker.call_on_loop(move)
    assert doomed.parent == source and doomed.name.startswith("t-0.") and doomed.name.endswith("-delete")
    assert {p.name: p.read_bytes() for p in (target / "t-0").iterdir()} == before
    with KafkaSocket(broker.bootstrap_servers) as conn:
        assert produce(conn, "t", {0: batch(b"after")})[0]["base_offset"] == 80  # two records a batch
        described = _described(conn)
    assert described[str(target)][1][("t", 0, False)][0] == sum(len(v) for k, v in before.items()
                                                                if k.endswith(".log")) + len(batch(b"after"))


def test_describe_log_dirs_shows_the_future_replica_while_it_exists(
        two_dirs: tuple[Broker, Path, Path]) -> None:
    broker, a, b = two_dirs
    create(broker, "t", {0: (1,)})
    with KafkaSocket(broker.bootstrap_servers) as conn:
        produce(conn, "t", {0: batch(b"x", b"y", b"z")})
        logs = partitions_of(broker).logs
        source = logs.dir_of("t", 0)
        target = b if source == a else a
        future = broker.call_on_loop(lambda _: logs.start_move("t", 0, target))  # no copy yet
        assert future is not None and future.path.name.endswith("-future")
        described = _described(conn)
        assert described[str(target)] == (0, {("t", 0, True): (0, 3)})  # nothing copied: 3 offsets behind
        assert described[str(source)][1][("t", 0, False)][1] == 0
        handler = _dataplane(broker).log_dirs_handler
        broker.call_on_loop(lambda _: handler.start_mover(future))
        _wait(lambda: logs.dir_of("t", 0) == target, "the move")
        assert _described(conn)[str(target)][1] == {("t", 0, False): (len(batch(b"x", b"y", b"z")), 0)}


# --- the error table, one row a test -------------------------------------------------------------

def test_without_alter_on_the_cluster_every_partition_is_refused(tmp_path: Path) -> None:
    config = {"broker.id": 1, "log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}",
              "authorizer.class.name": "allowlist", "allowlist.rules": "*@*:DESCRIBE,WRITE,CREATE"}
    with Broker(config) as broker, KafkaSocket(broker.bootstrap_servers) as conn:
        create(broker, "t", {0: (1,), 1: (1,)})
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert _alter(conn, {("t", 0): str(tmp_path / "b"), ("t", 1): "/nowhere"}) == {
            ("t", 0): refused, ("t", 1): refused}


def test_a_path_not_in_log_dirs_is_log_dir_not_found(two_dirs: tuple[Broker, Path, Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    broker, a, _ = two_dirs
    create(broker, "t", {0: (1,)})
    monkeypatch.chdir(a.parent)
    with KafkaSocket(broker.bootstrap_servers) as conn:
        # Kafka compares the absolute paths: "a" (relative) and "a/" are not "<tmp>/a"
        assert _alter(conn, {("t", 0): str(a.parent / "c")}) == {("t", 0): ErrorCode.LOG_DIR_NOT_FOUND}
        assert _alter(conn, {("t", 0): "a"}, version=1) == {("t", 0): ErrorCode.LOG_DIR_NOT_FOUND}
        assert _alter(conn, {("t", 0): str(a) + "/"}) == {("t", 0): ErrorCode.LOG_DIR_NOT_FOUND}


def test_in_memory_logs_have_no_log_dir_to_move_to() -> None:
    """Kafka's nearest answer: no log dir is configured, so none is found."""
    with Broker({"broker.id": 1}) as broker, KafkaSocket(broker.bootstrap_servers) as conn:
        create(broker, "t", {0: (1,)})
        assert _alter(conn, {("t", 0): "memory", ("t", 1): "/tmp"}) == {
            ("t", 0): ErrorCode.LOG_DIR_NOT_FOUND, ("t", 1): ErrorCode.LOG_DIR_NOT_FOUND}


def test_an_offline_log_dir_is_kafka_storage_error(two_dirs: tuple[Broker, Path, Path]) -> None:
    broker, a, b = two_dirs
    create(broker, "t", {0: (1,)})
    with KafkaSocket(broker.bootstrap_servers) as conn:
        produce(conn, "t", {0: batch(b"x")})
        target = b if partitions_of(broker).logs.dir_of("t", 0) == a else a
        shutil.rmtree(target)
        target.write_text("the disk is gone")  # no longer a directory
        assert _alter(conn, {("t", 0): str(target)}) == {("t", 0): ErrorCode.KAFKA_STORAGE_ERROR}
        assert _described(conn)[str(target)] == (ErrorCode.KAFKA_STORAGE_ERROR, {})


def test_an_unknown_partition_is_remembered_for_when_it_is_made(two_dirs: tuple[Broker, Path, Path]) -> None:
    broker, a, b = two_dirs
    with KafkaSocket(broker.bootstrap_servers) as conn:
        for target in (a, b):  # whichever dir the least-loaded rule would not pick
            name = f"later-{target.name}"
            assert _alter(conn, {(name, 0): str(target)}) == {(name, 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            create(broker, name, {0: (1,)})
            assert produce(conn, name, {0: batch(b"x")})[0]["error_code"] == 0
            assert (target / f"{name}-0").is_dir()


def test_a_partition_led_elsewhere_is_replica_not_available(two_dirs: tuple[Broker, Path, Path]) -> None:
    broker, _, b = two_dirs
    create(broker, "elsewhere", {0: (2,)})
    with KafkaSocket(broker.bootstrap_servers) as conn:
        assert _alter(conn, {("elsewhere", 0): str(b)}) == {("elsewhere", 0): ErrorCode.REPLICA_NOT_AVAILABLE}
    assert partitions_of(broker).logs.preferred_dirs == {("elsewhere", 0): b}  # kept for later, as Kafka


def test_already_there_is_none_and_nothing_moves(two_dirs: tuple[Broker, Path, Path]) -> None:
    broker, _, _ = two_dirs
    create(broker, "t", {0: (1,)})
    with KafkaSocket(broker.bootstrap_servers) as conn:
        produce(conn, "t", {0: batch(b"x")})
        logs = partitions_of(broker).logs
        here = logs.dir_of("t", 0)
        assert _alter(conn, {("t", 0): str(here)}) == {("t", 0): ErrorCode.NONE}
        assert logs.futures == {} and [p.name for p in here.iterdir() if p.is_dir()] == ["t-0"]


def test_moving_back_cancels_the_move_under_way(two_dirs: tuple[Broker, Path, Path]) -> None:
    broker, a, b = two_dirs
    create(broker, "t", {0: (1,)})
    with KafkaSocket(broker.bootstrap_servers) as conn:
        produce(conn, "t", {0: batch(b"x")})
        logs = partitions_of(broker).logs
        source = logs.dir_of("t", 0)
        assert source is not None
        target = b if source == a else a
        future = broker.call_on_loop(lambda _: logs.start_move("t", 0, target))
        assert future is not None and future.path.exists()
        assert _alter(conn, {("t", 0): str(source)}) == {("t", 0): ErrorCode.NONE}
        assert logs.futures == {} and not future.path.exists() and logs.dir_of("t", 0) == source


def test_a_topic_name_too_long_for_the_future_directory_is_invalid(
        two_dirs: tuple[Broker, Path, Path]) -> None:
    broker, _, b = two_dirs
    name = "x" * 215  # a legal topic name, but "<name>-0.<32 hex>-future" passes 255 characters
    with KafkaSocket(broker.bootstrap_servers) as conn:
        assert _alter(conn, {(name, 0): str(b)}) == {(name, 0): ErrorCode.INVALID_TOPIC_EXCEPTION}
    assert len(future_dir_name(name, 0)) > 255


# --- restarts with a move's leftovers -----------------------------------------------------------

def test_a_restart_resumes_an_interrupted_move_and_deletes_a_finished_ones_leftover(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    config = {"broker.id": 1, "log.dirs": f"{a},{b}"}
    store = MemoryStore()
    batches = [batch(str(n).encode() * 300) for n in range(30)]
    with Broker(config, store=store) as broker:
        create(broker, "t", {0: (1,)}, config={"segment.bytes": "3000"})
        with KafkaSocket(broker.bootstrap_servers) as conn:
            for data in batches:
                assert produce(conn, "t", {0: data})[0]["error_code"] == 0
        source = partitions_of(broker).logs.dir_of("t", 0)
    assert source is not None
    target = b if source == a else a
    original = {p.name: p.read_bytes() for p in (source / "t-0").glob("*.log")}
    # What a stop mid-move leaves: a partial copy in the target (a segment short, the last one
    # cut short and then torn), and a finished move's old directory not yet deleted.
    future = target / future_dir_name("t", 0)
    future.mkdir()
    names = sorted(original)
    for name in names[:-2]:
        (future / name).write_bytes(original[name])
    half = original[names[-2]][: len(original[names[-2]]) // 2]
    (future / names[-2]).write_bytes(half[:-10] + b"\0" * 10)
    leftover = source / "t-7.0123456789abcdef0123456789abcdef-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"old")
    # the leftover goes file.delete.delay.ms after the start, as Kafka queues it at load
    with Broker({**config, "log.segment.delete.delay.ms": 0}, store=store) as broker:
        logs = partitions_of(broker).logs
        _wait(lambda: logs.dir_of("t", 0) == target, "the resumed move")
        _wait(lambda: not leftover.exists(), "the leftover removed")
        assert not future.exists() and not (source / "t-0").exists()
        assert {p.name: p.read_bytes() for p in (target / "t-0").glob("*.log")} == original
        with KafkaSocket(broker.bootstrap_servers) as conn:
            assert produce(conn, "t", {0: batch(b"next")})[0]["base_offset"] == 30
    read = [r.value for r in _records_after_restart(config, store)]
    assert read == [str(n).encode() * 300 for n in range(30)] + [b"next"]


def _records_after_restart(config: dict[str, Any], store: MemoryStore) -> list[Any]:
    with Broker(config, store=store) as broker:
        _wait(lambda: broker.runtime is not None and "t" in broker.runtime.cluster.topics, "the topic")
        return list(broker.records("t", 0))


def test_a_future_directory_without_a_current_log_becomes_the_log(tmp_path: Path) -> None:
    """Kafka's recoverAbandonedFutureLogs: the future replica is all there is, so it is kept."""
    a, b = tmp_path / "a", tmp_path / "b"
    config = {"broker.id": 1, "log.dirs": f"{a},{b}"}
    store = MemoryStore()
    with Broker(config, store=store) as broker:
        create(broker, "t", {0: (1,)})
        with KafkaSocket(broker.bootstrap_servers) as conn:
            produce(conn, "t", {0: batch(b"kept", b"too")})
        source = partitions_of(broker).logs.dir_of("t", 0)
    assert source is not None
    target = b if source == a else a
    (source / "t-0").rename(target / future_dir_name("t", 0))
    assert [r.value for r in _records_after_restart(config, store)] == [b"kept", b"too"]
    assert (target / "t-0").is_dir() and not list(target.glob("*-future"))


def test_two_current_copies_after_an_interrupted_swap_are_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    config = {"broker.id": 1, "log.dirs": f"{a},{b}"}
    store = MemoryStore()
    with Broker(config, store=store) as broker:
        create(broker, "t", {0: (1,)})
        with KafkaSocket(broker.bootstrap_servers) as conn:
            produce(conn, "t", {0: batch(b"x")})
        source = partitions_of(broker).logs.dir_of("t", 0)
    assert source is not None
    shutil.copytree(source / "t-0", (b if source == a else a) / "t-0")
    with pytest.raises(Exception, match="is in two log dirs") as refused:
        Broker(config, store=store).__enter__()
    assert "delete one of the two directories" in str(refused.value)


def test_a_move_cancelled_under_its_copy_or_by_deleting_the_topic_leaves_nothing_behind(
        two_dirs: tuple[Broker, Path, Path]) -> None:
    broker, a, b = two_dirs
    create(broker, "t", {0: (1,)})
    big = batch(*[b"x" * 10_000 for _ in range(100)])  # 1 MB a batch
    with KafkaSocket(broker.bootstrap_servers) as conn:
        for _ in range(8):
            assert produce(conn, "t", {0: big})[0]["error_code"] == 0
        logs = partitions_of(broker).logs
        source = logs.dir_of("t", 0)
        assert source is not None
        target = b if source == a else a
        # back to where it is, whether or not the copy is running yet: cancelled, dir still online
        assert _alter(conn, {("t", 0): str(target)}) == {("t", 0): ErrorCode.NONE}
        assert _alter(conn, {("t", 0): str(source)}) == {("t", 0): ErrorCode.NONE}
        _wait(lambda: not _dataplane(broker).log_dirs_handler._movers, "the mover to end")
        assert logs.dir_of("t", 0) == source and logs.futures == {} and logs.offline_dirs == set()
        assert [p.name for p in target.iterdir() if p.is_dir()] == []
        assert _described(conn)[str(target)] == (0, {})
        # a topic deleted mid-move takes its future directory along
        future = broker.call_on_loop(lambda _: logs.start_move("t", 0, target))
        assert future is not None and future.path.is_dir()
        broker.delete_topics("t")
        _wait(lambda: logs.get("t", 0) is None, "the topic's logs to go")
        assert not future.path.exists() and logs.futures == {}


def test_a_broker_stopped_mid_move_finishes_it_after_the_restart(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    config = {"broker.id": 1, "log.dirs": f"{a},{b}"}
    store = MemoryStore()
    values = [bytes([65 + n % 26]) * 10_000 for n in range(100)]
    with Broker(config, store=store) as broker:
        create(broker, "t", {0: (1,)})
        with KafkaSocket(broker.bootstrap_servers) as conn:
            for _ in range(40):  # 40 MB: the copy takes a while, the stop comes during it
                assert produce(conn, "t", {0: batch(*values)})[0]["error_code"] == 0
            source = partitions_of(broker).logs.dir_of("t", 0)
            assert source is not None
            target = b if source == a else a
            assert _alter(conn, {("t", 0): str(target)}) == {("t", 0): ErrorCode.NONE}
    # stopped: the move either finished or left its future directory, never two current copies
    assert [d for d in (a, b) if (d / "t-0").is_dir()] in ([source], [target])
    with Broker(config, store=store) as broker:
        _wait(lambda: partitions_of(broker).logs.dir_of("t", 0) == target, "the move")
        assert not list(target.glob("*-future")) and not (source / "t-0").exists()
        records = broker.records("t", 0)
        assert len(records) == 4000 and [r.value for r in records[:100]] == values


def test_a_disk_error_in_the_target_takes_that_dir_offline_and_the_log_stays(
        two_dirs: tuple[Broker, Path, Path]) -> None:
    """Kafka's LogDirFailureChannel: the target dir is offline until a restart; nothing is lost."""
    broker, a, b = two_dirs
    create(broker, "t", {0: (1,)})
    with KafkaSocket(broker.bootstrap_servers) as conn:
        produce(conn, "t", {0: batch(b"x", b"y")})
        logs = partitions_of(broker).logs
        source = logs.dir_of("t", 0)
        assert source is not None
        target = b if source == a else a
        future = broker.call_on_loop(lambda _: logs.start_move("t", 0, target))
        assert future is not None
        future.path.rmdir()
        future.path.write_bytes(b"")  # the future directory unwritable: a failing disk
        handler = _dataplane(broker).log_dirs_handler
        broker.call_on_loop(lambda _: handler.start_mover(future))
        _wait(lambda: not handler._movers, "the failed move to end")
        assert logs.offline_dirs == {target} and logs.futures == {} and logs.dir_of("t", 0) == source
        assert _described(conn)[str(target)] == (ErrorCode.KAFKA_STORAGE_ERROR, {})
        assert _alter(conn, {("t", 0): str(target)}) == {("t", 0): ErrorCode.KAFKA_STORAGE_ERROR}
        assert produce(conn, "t", {0: batch(b"z")})[0]["base_offset"] == 2
    assert [r.value for r in broker.records("t", 0)] == [b"x", b"y", b"z"]
