"""A deleted topic's logs leave the disk as Kafka's do.

Kafka's broker, told a topic was deleted, renames each of its partition directories
``<topic>-<partition>.<uuid>-delete`` at once (the partition stops being served and its name is
free) and removes them ``file.delete.delay.ms`` later (the broker's log.segment.delete.delay.ms,
60 s by default); a ``-delete`` directory found at start is removed that long after the start.
kafkapy dropped a deleted topic's logs only when a topic of the same name was next used, so a
long-running broker whose users delete topics kept their files.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from kafkapy import Broker, VirtualClock
from kafkapy.log import LogManager
from kafkapy.log.topic_config import LogConfig
from tests.dataplane.test_stray_logs import TIMEOUT_S, create_topic, delete_topic, produce_one, read_all

DELAY_S = 60  # Kafka's default log.segment.delete.delay.ms, in seconds


def _wait_until(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _doomed(log_dir: Path, topic: str) -> list[Path]:
    return sorted(log_dir.glob(f"{topic}-*.*-delete"))


def test_a_deleted_topics_logs_are_renamed_at_once_and_removed_after_the_delay(tmp_path: Path) -> None:
    clock = VirtualClock()
    config = {"log.dirs": str(tmp_path), "broker.id": 1, "auto.create.topics.enable": False}
    with Broker(config, clock=clock) as broker:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, "orders", partitions=2)
        assert produce_one(bootstrap, "orders", b"old", partition=0) == []
        assert produce_one(bootstrap, "orders", b"old", partition=1) == []
        delete_topic(bootstrap, "orders")
        # No one uses the name again: the deletion alone renames both directories.
        _wait_until(lambda: len(_doomed(tmp_path, "orders")) == 2, "the logs renamed -delete")
        assert not (tmp_path / "orders-0").exists() and not (tmp_path / "orders-1").exists()
        # The name is free at once: a topic made again under it is written and read before the
        # old directories go, and holds only its own records.
        create_topic(bootstrap, "orders")
        assert produce_one(bootstrap, "orders", b"new") == []
        assert read_all(bootstrap, "orders") == [b"new"]
        clock.advance(DELAY_S - 1)
        time.sleep(0.5)  # a removal wrongly due would have run by now
        assert len(_doomed(tmp_path, "orders")) == 2
        clock.advance(1)
        _wait_until(lambda: not _doomed(tmp_path, "orders"), "the -delete directories removed")
        assert read_all(bootstrap, "orders") == [b"new"]
        assert (tmp_path / "orders-0").is_dir()


def test_a_restart_removes_leftover_delete_directories_after_the_delay(tmp_path: Path) -> None:
    config = {"log.dirs": str(tmp_path), "broker.id": 1, "auto.create.topics.enable": False}
    with Broker(config) as broker:
        create_topic(broker.bootstrap_servers, "orders")
        assert produce_one(broker.bootstrap_servers, "orders", b"old") == []
        delete_topic(broker.bootstrap_servers, "orders")
        _wait_until(lambda: len(_doomed(tmp_path, "orders")) == 1, "the log renamed -delete")
    (leftover,) = _doomed(tmp_path, "orders")  # stopped within the delay: still on disk
    clock = VirtualClock()
    with Broker(config, clock=clock):
        time.sleep(0.5)
        assert leftover.is_dir()  # Kafka queues it at load: it goes a delay after the start
        clock.advance(DELAY_S)
        _wait_until(lambda: not leftover.exists(), "the leftover -delete directory removed")


def test_log_segment_delete_delay_ms_sets_the_delay(tmp_path: Path) -> None:
    """The broker's log.segment.delete.delay.ms (file.delete.delay.ms's broker default) is the
    delay, as Kafka's LogManager reads it; 0 removes at once."""
    config = {"log.dirs": str(tmp_path), "broker.id": 1, "log.segment.delete.delay.ms": 0}
    with Broker(config) as broker:
        create_topic(broker.bootstrap_servers, "orders")
        assert produce_one(broker.bootstrap_servers, "orders", b"old") == []
        delete_topic(broker.bootstrap_servers, "orders")
        _wait_until(lambda: not (tmp_path / "orders-0").exists() and not _doomed(tmp_path, "orders"),
                    "the log removed")


def test_the_log_manager_queues_in_deletion_order(tmp_path: Path) -> None:
    """Each directory goes its own delay after it was queued, by the manager's clock."""
    now = [1_000]
    logs = LogManager([tmp_path], default_config=LogConfig(file_delete_delay_ms=100), clock=lambda: now[0])
    try:
        for topic in ("a", "b"):
            logs.get_or_create(topic, 0)
        logs.delete_topic("a")
        now[0] += 50
        logs.delete_topic("b")
        assert [path.name.split(".")[0] for path, _ in logs.to_delete] == ["a-0", "b-0"]
        assert logs.next_deletion_ms() == 1_100
        now[0] = 1_099
        assert logs.remove_deleted() == []
        now[0] = 1_100
        assert [p.name.split(".")[0] for p in logs.remove_deleted()] == ["a-0"]
        assert logs.next_deletion_ms() == 1_150
        now[0] = 1_150
        assert [p.name.split(".")[0] for p in logs.remove_deleted()] == ["b-0"]
        assert logs.next_deletion_ms() is None
    finally:
        logs.close()
    assert not _doomed(tmp_path, "a") and not _doomed(tmp_path, "b")


def test_on_zookeeper_a_deleted_topics_logs_are_renamed_at_once(tmp_path: Path, zk_connect: str) -> None:
    """The deletion is learnt from ZooKeeper's topics watch as from the durable store's."""
    prefix = f"deleted-{tmp_path.name}"[:60]  # the ZooKeeper server outlives this test
    config = {"log.dirs": str(tmp_path), "broker.id": 1, "zookeeper.connect": zk_connect,
              "zookeeper.session.timeout.ms": 6000, "log.segment.delete.delay.ms": 0}
    with Broker(config) as broker:
        create_topic(broker.bootstrap_servers, prefix)
        assert produce_one(broker.bootstrap_servers, prefix, b"old") == []
        assert (tmp_path / f"{prefix}-0").is_dir()
        delete_topic(broker.bootstrap_servers, prefix)
        _wait_until(lambda: not (tmp_path / f"{prefix}-0").exists() and not _doomed(tmp_path, prefix),
                    "the log removed")
