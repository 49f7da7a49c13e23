"""LogManager: partition logs in memory or under log.dirs, checkpoints, clean and unclean restarts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fd_guard import open_descriptors
from storage_helpers import batch_at, joined

from kafkapy.log import LogConfig, MemoryLog
from kafkapy.log.checkpoint import read_checkpoint, read_offsets
from kafkapy.log.manager import CLEAN_SHUTDOWN_FILE, LogManager, MetaPropertiesMismatch
from kafkapy.log.segments import FileLog, segment_name


def test_memory_manager_gets_or_creates_and_describes() -> None:
    logs = LogManager()
    log = logs.get_or_create("orders", 0)
    assert isinstance(log, MemoryLog) and logs.get_or_create("orders", 0) is log
    log.append(batch_at(log, 2))
    logs.get_or_create("orders", 1)
    [described] = logs.describe_log_dirs()
    assert described.path == "memory"
    assert described.partition_sizes == {("orders", 0): log.size_in_bytes, ("orders", 1): 0}
    assert logs.delete_topic("orders") == [0, 1] and logs.get("orders", 0) is None


def test_log_dirs_layout_checkpoints_and_clean_restart(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    logs = LogManager(dirs, broker_id=3, cluster_id="c1")
    written: dict[tuple[str, int], bytes] = {}
    for partition in range(4):
        log = logs.get_or_create("orders", partition, LogConfig(segment_bytes=500))
        assert isinstance(log, FileLog)
        data = b""
        for _ in range(5):
            batch = batch_at(log, 2, value_size=100)
            data += batch
            log.append(batch)
        written[("orders", partition)] = data
    log.delete_records_before(3)
    # partitions spread over the dirs, two each
    assert sorted(p.name for p in dirs[0].iterdir() if p.is_dir()) == ["orders-0", "orders-2"]
    assert sorted(p.name for p in dirs[1].iterdir() if p.is_dir()) == ["orders-1", "orders-3"]
    assert [sorted(d.partition_sizes) for d in logs.describe_log_dirs()] == [
        [("orders", 0), ("orders", 2)],
        [("orders", 1), ("orders", 3)],
    ]
    logs.close()
    for directory in dirs:
        names = {p.name for p in directory.iterdir()}
        assert {
            "meta.properties",
            "recovery-point-offset-checkpoint",
            "log-start-offset-checkpoint",
            "replication-offset-checkpoint",
            CLEAN_SHUTDOWN_FILE,
        } <= names
        assert "broker.id=3" in (directory / "meta.properties").read_text()
    assert read_offsets(dirs[1] / "recovery-point-offset-checkpoint") == {
        ("orders", 1): 10,
        ("orders", 3): 10,
    }
    assert read_offsets(dirs[1] / "log-start-offset-checkpoint") == {("orders", 1): 0, ("orders", 3): 3}
    assert read_checkpoint(dirs[1] / "replication-offset-checkpoint", 3) == [
        ["orders", "1", "10"],
        ["orders", "3", "10"],
    ]
    assert (dirs[0] / "orders-0" / segment_name(0, ".log")).exists()

    again = LogManager(dirs, broker_id=3, cluster_id="c1")
    assert not (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()  # the marker is consumed by opening
    for key, data in written.items():
        log = again.get(*key)
        assert log is not None and log.log_end_offset == 10
        assert joined(log.read(log.log_start_offset, 1 << 20).chunks) == (
            data if key[1] != 3 else data[len(data) // 5 :]
        )
    assert again.get("orders", 3).log_start_offset == 3  # type: ignore[union-attr]
    assert again.delete_topic("orders") == [0, 1, 2, 3]
    assert not (dirs[0] / "orders-0").exists()
    again.close()


def test_unclean_restart_recovers_torn_tails(tmp_path: Path) -> None:
    logs = LogManager([tmp_path])
    log = logs.get_or_create("t", 0)
    for _ in range(4):
        log.append(batch_at(log, 2, value_size=50))
    logs.checkpoint()  # recovery point 0: nothing was flushed
    good = joined(log.read(0, 1 << 20).chunks)
    segment = tmp_path / "t-0" / segment_name(0, ".log")
    with open(segment, "ab") as torn:
        torn.write(bytes(batch_at(log, 2))[:30])  # a crash while writing the next batch
    for crashed in log.segments:  # the crashed process's descriptors, released without any flush
        crashed.close()
    again = LogManager([tmp_path])  # no .kafka_cleanshutdown: recovery runs
    recovered = again.get("t", 0)
    assert recovered is not None and recovered.log_end_offset == 8
    assert joined(recovered.read(0, 1 << 20).chunks) == good
    again.close()


def test_meta_properties_of_another_broker_is_refused(tmp_path: Path) -> None:
    LogManager([tmp_path], broker_id=1).close()
    with pytest.raises(MetaPropertiesMismatch) as refused:
        LogManager([tmp_path], broker_id=2)
    # what to do, as Kafka's InconsistentBrokerIdException says (keep the data: its id; or start anew)
    assert str(refused.value) == (f"{tmp_path / 'meta.properties'} is broker 1's, not 2's: to serve its "
                                  f"logs set broker.id=1; for a new broker, empty the directory")


def test_a_refused_open_closes_the_logs_it_had_opened(tmp_path: Path) -> None:
    """Two current copies of a partition (an interrupted move's swap) are refused at open; the
    logs of the dir read before the refusal are closed, not left to the collector."""
    first = LogManager([tmp_path / "a"], cluster_id="c1")
    for partition in range(3):
        first.get_or_create("orders", partition).append(batch_at(first.get("orders", partition), 2))
    first.close()
    shutil.copytree(tmp_path / "a" / "orders-0", tmp_path / "b" / "orders-0")
    before = set(open_descriptors().values())
    with pytest.raises(ValueError, match="is in two log dirs"):
        LogManager([tmp_path / "a", tmp_path / "b"], cluster_id="c1")
    opened = [t for t in open_descriptors().values() if t.startswith(str(tmp_path)) and t not in before]
    assert opened == []


def test_topic_configs_and_the_flush_scheduler_hook(tmp_path: Path) -> None:
    clock = [0]
    logs = LogManager([tmp_path], clock=lambda: clock[0])
    log = logs.get_or_create("t", 0)
    other = logs.get_or_create("u", 0)
    logs.set_topic_config("t", LogConfig(flush_ms=1_000, segment_bytes=1))
    assert log.config.flush_ms == 1_000 and other.config.flush_ms == LogConfig().flush_ms
    log.append(batch_at(log, 2))
    other.append(batch_at(other, 2))
    assert logs.flush_due() == 0 and log.recovery_point == 0
    clock[0] = 1_000
    assert logs.flush_due() == 1 and log.recovery_point == 2 and other.recovery_point == 0
    assert logs.flush_due() == 0  # nothing new to flush
    logs.close()


def test_a_broker_without_broker_id_takes_the_one_its_log_dirs_hold(tmp_path: Path) -> None:
    """broker.id unset (-1) over log dirs a broker wrote: Kafka's getOrGenerateBrokerId takes the id
    in their meta.properties before generating one, where a new id had the dirs refuse the start."""
    from kafkapy import Broker

    (tmp_path / "meta.properties").write_text("#\nversion=0\nbroker.id=7\n")
    with Broker({"log.dirs": str(tmp_path)}) as broker:
        assert broker.broker_id == 7
    with Broker({"log.dirs": f"{tmp_path / 'empty'},{tmp_path}"}) as broker:  # the first dir naming one
        assert broker.broker_id == 7


def test_a_restart_on_zookeeper_without_broker_id_keeps_its_id(zk_connect: str, tmp_path: Path) -> None:
    """The user's case: Kafka's server.properties without broker.id, on ZooKeeper. The first start
    takes the next id of /brokers/seqid; the restart had the id after it and its dirs refused it."""
    from kafkapy import Broker

    settings = {"zookeeper.connect": zk_connect, "log.dirs": str(tmp_path)}
    with Broker(settings) as first:
        generated = first.broker_id
    with Broker(settings) as again:
        assert again.broker_id == generated > 1000
