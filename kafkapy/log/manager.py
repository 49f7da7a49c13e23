"""LogManager: a broker's partition logs, in memory or under ``log.dirs``.

With no ``log.dirs`` every partition gets a :class:`MemoryLog`. With
``log.dirs`` each directory is laid out as Kafka's LogManager lays it out:

- ``meta.properties`` (``version=0``, ``broker.id``, ``cluster.id``: the
  ZooKeeper-mode form), refused when it names another broker;
- one ``<topic>-<partition>`` directory per partition (a :class:`FileLog`),
  placed in the directory holding the fewest partitions, as Kafka places them,
  with its ``partition.metadata`` (the topic id) once the id is known;
- ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
  ``replication-offset-checkpoint`` (the high watermarks), written each on its
  own timer (the data plane's LogMaintenance), by :meth:`LogManager.checkpoint`
  and on close;
- ``cleaner-offset-checkpoint`` (where each compacted log is clean up to),
  written after each compaction pass and on close, read back on open;
- ``.kafka_cleanshutdown``, written last by a clean close and removed on open:
  without it, every log is checked from its recovery point.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs

from kafkapy.log.checkpoint import read_offsets, write_offsets
from kafkapy.log.memory import MemoryLog
from kafkapy.log.partition_metadata import InconsistentTopicId
from kafkapy.log.segmented import SegmentedLog, now_ms
from kafkapy.log.segments import FileLog
from kafkapy.log.topic_config import LogConfig

__all__ = ["CLEAN_SHUTDOWN_FILE", "LogDirDescription", "LogManager", "MetaPropertiesMismatch"]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
MEMORY_LOG_DIR = "memory"  # the log dir DescribeLogDirs names for in-memory logs

TopicPartition = tuple[str, int]


class MetaPropertiesMismatch(ValueError):
    """A log dir belongs to another broker or cluster (Kafka's InconsistentBrokerIdException)."""


@attrs.frozen
class LogDirDescription:
    """One DescribeLogDirs result entry: a directory and the size of each partition in it."""

    path: str
    partition_sizes: dict[TopicPartition, int]


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def first_dirty_offset(log: SegmentedLog, checkpointed: int) -> int:
    """Kafka's LogCleanerManager.cleanableOffsets: a checkpointed offset below the log start or
    past the log end is not to be trusted, and the whole log is dirty again."""
    if checkpointed < log.log_start_offset or checkpointed > log.log_end_offset:
        return log.log_start_offset
    return checkpointed


def parse_partition_dir(name: str) -> TopicPartition | None:
    """``<topic>-<partition>``; Kafka's ``-delete``/``-future``/``-stray`` directories are not partitions."""
    topic, _, partition = name.rpartition("-")
    if not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class LogManager:
    """Get-or-create partition logs, delete a topic's, describe sizes, keep the checkpoints."""

    def __init__(
        self,
        log_dirs: Iterable[Path | str] | None = None,
        *,
        broker_id: int = 0,
        cluster_id: str | None = None,
        default_config: LogConfig | None = None,
        clock: Callable[[], int] = now_ms,
        lasting_topic_ids: bool = True,
    ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs or ()]
        self.lasting_topic_ids = lasting_topic_ids
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.default_config = default_config or LogConfig()
        self.clock = clock
        self.logs: dict[TopicPartition, SegmentedLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        for directory in self.log_dirs:
            self._open_dir(directory)

    @property
    def in_memory(self) -> bool:
        return not self.log_dirs

    # -- opening ---------------------------------------------------------------------------------

    def _open_dir(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._check_meta_properties(directory)
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        marker.unlink(missing_ok=True)
        recovery_points = read_offsets(directory / RECOVERY_POINT_CHECKPOINT)
        log_starts = read_offsets(directory / LOG_START_OFFSET_CHECKPOINT)
        cleaned = read_offsets(directory / CLEANER_OFFSET_CHECKPOINT)
        for child in sorted(directory.iterdir()):
            key = parse_partition_dir(child.name) if child.is_dir() else None
            if key is None:
                continue
            if key in self.logs:
                raise ValueError(f"partition {key} is in two log dirs: {self._dir_of[key]} and {directory}")
            self.logs[key] = FileLog(
                child,
                self.default_config,
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=log_starts.get(key, 0),
                clean_shutdown=clean and key in recovery_points,
                clock=self.clock,
            )
            self._dir_of[key] = directory
            if key in cleaned:
                self.logs[key].cleaned_to = first_dirty_offset(self.logs[key], cleaned[key])

    def _check_meta_properties(self, directory: Path) -> None:
        path = directory / META_PROPERTIES
        if path.exists():
            found = dict(
                line.split("=", 1)
                for line in path.read_text().splitlines()
                if "=" in line and not line.startswith("#")
            )
            if found.get("broker.id") not in (None, str(self.broker_id)):
                raise MetaPropertiesMismatch(
                    f"{path} is broker {found['broker.id']}'s, not {self.broker_id}'s"
                )
            if self.cluster_id and found.get("cluster.id") not in (None, self.cluster_id):
                raise MetaPropertiesMismatch(
                    f"{path} is cluster {found['cluster.id']}'s, not {self.cluster_id}'s"
                )
            return
        lines = ["#", "#Written by kafkapy", "version=0", f"broker.id={self.broker_id}"]
        if self.cluster_id:
            lines.append(f"cluster.id={self.cluster_id}")
        path.write_text("\n".join(lines) + "\n")

    # -- partitions ------------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> SegmentedLog | None:
        return self.logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None,
                      topic_id: uuid.UUID | None = None) -> SegmentedLog:
        """The partition's log, created empty (in the least-loaded log dir) the first time.

        ``topic_id`` (KIP-516), when known, is recorded in the log (partition.metadata) as Kafka's
        LogManager.getOrCreateLog does; a log holding another one is InconsistentTopicId, unless
        topic ids do not outlive the broker (``lasting_topic_ids`` false: an in-memory store gives
        a topic a new id each run), when the log takes the new id."""
        key = (topic, partition)
        log = self.logs.get(key)
        if log is not None:
            if config is not None:
                log.set_config(config)
            if topic_id is not None and log.topic_id is not topic_id:
                if log.topic_id == topic_id:
                    log.topic_id = topic_id  # the caller's object: later checks are identity checks
                elif log.topic_id is not None and self.lasting_topic_ids:
                    raise InconsistentTopicId(topic, partition, topic_id, log.topic_id)
                else:
                    log.assign_topic_id(topic_id)
            return log
        config = config or self.default_config
        if self.in_memory:
            log = MemoryLog(config, clock=self.clock)
        else:
            counts = {d: 0 for d in self.log_dirs}
            for d in self._dir_of.values():
                counts[d] += 1
            directory = min(self.log_dirs, key=lambda d: counts[d])
            log = FileLog(directory / partition_dir_name(topic, partition), config, clock=self.clock)
            self._dir_of[key] = directory
        if topic_id is not None:
            log.assign_topic_id(topic_id)
        self.logs[key] = log
        return log

    def delete_partition(self, topic: str, partition: int) -> bool:
        log = self.logs.pop((topic, partition), None)
        if log is None:
            return False
        self._dir_of.pop((topic, partition), None)
        if isinstance(log, FileLog):
            log.delete()
        else:
            log.truncate_fully_and_start_at(0)
        return True

    def delete_topic(self, topic: str) -> list[int]:
        """Drop every partition log of ``topic``; answers the partitions that had one."""
        gone = sorted(p for t, p in self.logs if t == topic)
        for partition in gone:
            self.delete_partition(topic, partition)
        return gone

    def describe_log_dirs(self) -> list[LogDirDescription]:
        """DescribeLogDirs: every log dir with each partition's size in bytes."""
        if self.in_memory:
            return [
                LogDirDescription(
                    MEMORY_LOG_DIR, {k: log.size_in_bytes for k, log in sorted(self.logs.items())}
                )
            ]
        return [
            LogDirDescription(
                str(directory),
                {
                    k: log.size_in_bytes
                    for k, log in sorted(self.logs.items())
                    if self._dir_of[k] == directory
                },
            )
            for directory in self.log_dirs
        ]

    # -- maintenance -----------------------------------------------------------------------------

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Retention over every log with its own config; answers segments deleted."""
        return sum(log.apply_retention(now_ms) for log in self.logs.values())

    def compact(self, now_ms: int | None = None) -> int:
        """Compaction over every log whose cleanup.policy has compact; answers records removed."""
        return sum(log.compact(now_ms) for log in self.logs.values())

    def set_topic_config(self, topic: str, config: LogConfig) -> None:
        """A topic's configs changed (AlterConfigs): its logs obey them from the next append on."""
        for (name, _), log in self.logs.items():
            if name == topic:
                log.set_config(config)

    def flush_due(self, now_ms: int | None = None) -> int:
        """Kafka's flush scheduler: flush the logs whose flush.ms passed; answers how many."""
        now = self.clock() if now_ms is None else now_ms
        return sum(log.maybe_flush(now) for log in self.logs.values())

    def flush(self) -> None:
        for log in self.logs.values():
            log.flush()
        self.checkpoint()

    def checkpoint(self) -> None:
        """Write each log dir's recovery-point, log-start-offset, replication-offset and cleaner-offset
        checkpoints."""
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        self.checkpoint_cleaner_offsets()

    def checkpoint_recovery_points(self) -> None:
        """recovery-point-offset-checkpoint (Kafka: every log.flush.offset.checkpoint.interval.ms)."""
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        """log-start-offset-checkpoint (every log.flush.start.offset.checkpoint.interval.ms)."""
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset)

    def checkpoint_high_watermarks(self) -> None:
        """replication-offset-checkpoint (every replica.high.watermark.checkpoint.interval.ms)."""
        self._write_checkpoint(REPLICATION_OFFSET_CHECKPOINT, lambda log: log.high_watermark)

    def checkpoint_cleaner_offsets(self) -> None:
        """cleaner-offset-checkpoint: where each compacted log is clean up to (Kafka's
        LogCleanerManager writes it after each cleaning), so a restart does not clean it again.
        A log clean to no further than its start has no entry, as one never cleaned."""
        self._write_checkpoint(CLEANER_OFFSET_CHECKPOINT, lambda log: log.cleaned_to,
                               lambda log: log.cleaned_to > log.log_start_offset)

    def _write_checkpoint(self, name: str, value: Callable[[SegmentedLog], int],
                          include: Callable[[SegmentedLog], bool] = lambda log: True) -> None:
        for directory in self.log_dirs:
            keys = [k for k, d in self._dir_of.items() if d == directory and include(self.logs[k])]
            write_offsets(directory / name, {k: value(self.logs[k]) for k in keys})

    def close(self) -> None:
        """Flush and close every log, checkpoint, then mark each dir as cleanly shut down."""
        for log in self.logs.values():
            log.close()
        self.checkpoint()
        for directory in self.log_dirs:
            (directory / CLEAN_SHUTDOWN_FILE).touch()
