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

A partition moves to another log dir (AlterReplicaLogDirs) through a future directory
(moves.py): :meth:`LogManager.start_move` makes it, the data plane copies into it, and
:meth:`LogManager.swap` puts it in place. Found at open, a ``-delete`` directory (a move's
leftover, or a deleted topic's) is queued for deletion and a ``-future`` one resumed, or, with no
current log beside it, made the current log (Kafka's recoverAbandonedFutureLogs).

A deleted partition's log (its topic deleted) is closed and its directory renamed
``<topic>-<partition>.<uuid>-delete`` at once, so the name is free for a topic made again, and
queued: :meth:`LogManager.remove_deleted` removes each queued directory ``file.delete.delay.ms``
(the broker's ``log.segment.delete.delay.ms``, Kafka's default 60 s) after it was queued, by this
manager's clock, off the caller's thread (Kafka's addLogToBeDeleted and its kafka-delete-logs task).

A log dir fails on its own (KIP-112, Kafka's LogDirFailureChannel): an I/O error while it is
opened (it cannot be made or read, a file in it cannot be read, a checkpoint in it is corrupt)
or while it serves (an append, a roll, a flush, a checkpoint, a read, a move) takes that dir
offline until the broker restarts, and the broker goes on with the others. Its logs are dropped
(their files closed as they are, nothing more written), and each of its partitions answers
KAFKA_STORAGE_ERROR (``offline_partitions``) instead of being made again elsewhere. Only when
every dir has failed does the broker stop (:class:`AllLogDirsFailed`, Kafka's fatal line). An
error on the loop is handled there (:meth:`LogManager.fail_dir`); one on the background writer's
thread is queued and handled on the loop (:meth:`LogManager.report_failure`,
:meth:`LogManager.handle_reported_failures`). A dir that is no longer a directory (a disk gone)
is offline too.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import attrs

from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.background import BackgroundWriter
from kafkapy.log.checkpoint import CheckpointCorrupt, fsync_directory, read_offsets, write_offsets
from kafkapy.log.memory import MemoryLog
from kafkapy.log.moves import (
    DELETE_SUFFIX,
    FutureLog,
    delete_dir_name,
    finish_copy,
    future_dir_name,
    parse_moved_dir,
    stray_dir_name,
)
from kafkapy.log.partition_metadata import InconsistentTopicId, kafka_uuid, read_partition_metadata
from kafkapy.log.segmented import SegmentedLog, now_ms
from kafkapy.log.segments import FileLog
from kafkapy.log.topic_config import LogConfig

__all__ = ["CLEAN_SHUTDOWN_FILE", "AllLogDirsFailed", "LogDirDescription", "LogManager",
           "MetaPropertiesMismatch", "check_meta_properties", "configured_log_dirs", "storage_error",
           "stored_broker_id"]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
MEMORY_LOG_DIR = "memory"  # the log dir DescribeLogDirs names for in-memory logs

TopicPartition = tuple[str, int]
_log = logging.getLogger(__name__)


class MetaPropertiesMismatch(ValueError):
    """A log dir belongs to another broker or cluster (Kafka's InconsistentBrokerIdException)."""


class AllLogDirsFailed(OSError):
    """Every log dir failed: the broker cannot serve a partition and stops (Kafka halts it)."""


# What takes a log dir offline while it is opened: the OS refusing (Kafka's IOException) or a
# checkpoint Kafka's readers refuse (their IOException, "Malformed line ...").
LOAD_FAILURES = (OSError, CheckpointCorrupt)


def configured_log_dirs(log_dirs: Sequence[str] | None, log_dir: str | None) -> list[str]:
    """The directories of ``log.dirs``, else ``log.dir``'s one, as Kafka's KafkaConfig.logDirs
    chooses; none: the logs are in memory."""
    return list(log_dirs or ([log_dir] if log_dir else []))


def read_meta_properties(path: Path) -> dict[str, str]:
    """The ``key=value`` lines of a meta.properties file (comments skipped), its bytes read as
    Java's Properties.load reads them (ISO 8859-1): every file is text, as it is to Kafka."""
    return dict(line.split("=", 1) for line in path.read_text(encoding="latin-1").splitlines()
                if "=" in line and not line.startswith("#"))


def stored_broker_id(directories: Sequence[str]) -> int | None:
    """The broker id the first of ``directories`` with a meta.properties naming one holds, as
    Kafka's MetaPropertiesEnsemble.nodeId finds it: a broker started with broker.id unset takes it
    (KafkaServer.getOrGenerateBrokerId) rather than a new id its own log dirs would refuse. A
    file that cannot be read is left for the LogManager, which takes that dir offline."""
    for directory in directories:
        try:
            found = read_meta_properties(Path(directory) / META_PROPERTIES)
        except (OSError, UnicodeDecodeError):
            continue
        stored = found.get("broker.id", found.get("node.id"))  # version 0's name, version 1's
        if stored is not None and stored.strip().lstrip("-").isdecimal():
            return int(stored.strip())  # str.strip takes more than int() does (a \x1f)
    return None


def storage_error(topic: str, partition: int) -> KafkaApiError:
    """What every request for a partition of an offline log dir gets (Kafka's HostedPartition.Offline)."""
    return KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR,
                         f"partition {topic}-{partition} is in an offline log dir")


@attrs.frozen
class LogDirDescription:
    """One DescribeLogDirs result entry: a directory and the size of each partition in it."""

    path: str
    partition_sizes: dict[TopicPartition, int]
    # The future replicas moving here: (bytes copied, how far behind the current log's end).
    futures: dict[TopicPartition, tuple[int, int]] = attrs.Factory(dict)
    online: bool = True


def check_meta_properties(directory: Path, broker_id: int, cluster_id: str | None) -> bool:
    """Whether ``directory`` has a meta.properties; MetaPropertiesMismatch when it names another
    broker, or another cluster than ``cluster_id`` (Kafka's InconsistentBrokerIdException and
    InconsistentClusterIdException)."""
    path = directory / META_PROPERTIES
    if not path.exists():
        return False
    found = read_meta_properties(path)
    if found.get("broker.id") not in (None, str(broker_id)):
        raise MetaPropertiesMismatch(
            f"{path} is broker {found['broker.id']}'s, not {broker_id}'s: to serve its "
            f"logs set broker.id={found['broker.id']}; for a new broker, empty the directory"
        )
    if cluster_id and found.get("cluster.id") not in (None, cluster_id):
        raise MetaPropertiesMismatch(f"{path} is cluster {found['cluster.id']}'s, not {cluster_id}'s")
    return True


def write_clean_shutdown(directory: Path, broker_epoch: int = -1) -> None:
    """``.kafka_cleanshutdown`` as Kafka's CleanShutdownFileHandler writes it: a JSON object with
    its version (0) and the broker epoch (-1 from a ZooKeeper-mode broker, as kafkapy's log dirs
    are), fsynced. Only its presence decides the next open; KRaft brokers read the epoch back."""
    fd = os.open(directory / CLEAN_SHUTDOWN_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, json.dumps({"version": 0, "brokerEpoch": broker_epoch},
                                separators=(",", ":")).encode())
        os.fsync(fd)
    finally:
        os.close(fd)


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
    if not topic or not partition.isdecimal():
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
        is_stray: Callable[[str, int, uuid.UUID], bool] | None = None,
    ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs or ()]
        self.lasting_topic_ids = lasting_topic_ids
        # Whether a partition directory holding a topic id is a stray (Kafka's
        # isStrayKraftReplica: its topic id and partition are not in the cluster's metadata, as a
        # deleted topic's log the broker had not removed yet): set aside at load, never opened.
        self.is_stray = is_stray
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.default_config = default_config or LogConfig()
        self.clock = clock
        self.logs: dict[TopicPartition, SegmentedLog] = {}  # changed only through _put and delete_partition
        self._partitions_of: dict[str, set[int]] = {}  # topic -> its partitions in ``logs``
        self._dir_of: dict[TopicPartition, Path] = {}
        self.futures: dict[TopicPartition, FutureLog] = {}
        # Kafka's preferredLogDirs: where a partition asked to move before it had a log here goes.
        self.preferred_dirs: dict[TopicPartition, Path] = {}
        self.offline_dirs: set[Path] = set()
        # The partitions whose log was in a dir that failed: KAFKA_STORAGE_ERROR until a restart,
        # never made again in another dir (their records are where they were).
        self.offline_partitions: dict[TopicPartition, Path] = {}
        # Dirs that failed at start without a listing of their partitions: while one is offline, a
        # log that is not new is not made elsewhere (Kafka's getOrCreateLog with isNew false).
        self.unlisted_offline: list[Path] = []
        # Failures the background writer's thread met, for the loop to handle (report_failure).
        self._reported: list[tuple[Path, str]] = []
        self._reported_lock = threading.Lock()
        self.failures_reported = False  # _reported is not empty (read on every partition lookup)
        # Called (from any thread) when a failure is reported; the owner wakes its loop with it.
        self.on_failure_reported: Callable[[], None] | None = None
        # Told (on the thread that failed the dir) each time partitions join offline_partitions,
        # so the broker can tell the controller (KIP-112's log dir event).
        self.on_offline: Callable[[], None] | None = None
        # fsyncs of rolled segments and snapshots, and the periodic checkpoints, off the loop
        # (kafkapy.log.background); in memory there is nothing to write.
        self.background = BackgroundWriter(on_failure=self.report_failure) if self.log_dirs else None
        # Kafka's logsToBeDeleted: (a -delete directory, when it was queued by ``clock``), oldest
        # first; each goes file.delete.delay.ms after it was queued (remove_deleted).
        self.to_delete: deque[tuple[Path, int]] = deque()
        # Told (on the thread that queued it) when a directory joins ``to_delete``, so the owner
        # can set its timer (the data plane's LogMaintenance).
        self.on_deletion_queued: Callable[[], None] | None = None
        found_futures: list[tuple[TopicPartition, Path, Path]] = []
        unusable: list[Path] = []  # dirs that could not even be made or read (Kafka's validation)
        causes: list[str] = []  # why each failed dir failed, for the one line when all did
        try:
            for directory in self.log_dirs:
                try:
                    problem = self._unusable(directory)
                    if problem is not None:
                        unusable.append(directory)
                        causes.append(problem)
                        self._drop_dir(directory)
                        continue
                    found_futures += self._open_dir(directory)
                except LOAD_FAILURES as exc:
                    _log.error("Error while loading log dir %s: %s", directory.absolute(), exc)
                    causes.append(str(exc))
                    self._drop_dir(directory)
            if self.log_dirs and not self.online_dirs():
                fatal = ("Shutdown broker because none of the specified log dirs from "
                         f"{', '.join(map(str, self.log_dirs))} can be created or validated"
                         if len(unusable) == len(self.log_dirs) else self._all_failed_message())
                raise AllLogDirsFailed(f"{fatal} ({'; '.join(causes)})")
            for key, directory, path in found_futures:
                if key not in self.logs and key in self.offline_partitions:
                    continue  # its current log is in a failed dir: the move waits for a restart
                self._adopt_future(key, directory, path)
        except BaseException:
            self._abandon()  # a refused dir: the logs opened before it are nobody's to close
            raise

    @property
    def in_memory(self) -> bool:
        return not self.log_dirs

    # -- opening ---------------------------------------------------------------------------------

    def _unusable(self, directory: Path) -> str | None:
        """Kafka's createAndValidateLogDirs: the dir is made if missing and must be a readable
        directory; one that is not is offline from the start (answers why)."""
        try:
            directory.mkdir(parents=True, exist_ok=True)
            if not directory.is_dir() or not os.access(directory, os.R_OK | os.X_OK):
                raise NotADirectoryError(f"{directory.absolute()} is not a readable log directory")
        except OSError as exc:
            _log.error("Failed to create or validate data directory %s: %s", directory.absolute(), exc)
            self.offline_dirs.add(directory)
            return str(exc)
        return None

    def _drop_dir(self, directory: Path) -> None:
        """A dir that failed while it was opened: offline, the logs already opened from it closed
        as they are, and every partition directory it holds (when it can still be listed)
        answering KAFKA_STORAGE_ERROR."""
        self.offline_dirs.add(directory)
        for key in [k for k, d in self._dir_of.items() if d == directory]:
            self._forget_offline(key, directory)
        try:
            names = [child.name for child in directory.iterdir() if child.is_dir()]
        except OSError:
            names = []
            self.unlisted_offline.append(directory)
        for name in names:
            found = parse_partition_dir(name)
            if found is not None and found not in self.logs:
                self.offline_partitions[found] = directory

    def _open_dir(self, directory: Path) -> list[tuple[TopicPartition, Path, Path]]:
        """Open the logs in ``directory``; answers the future directories found there."""
        directory.mkdir(parents=True, exist_ok=True)
        self._check_meta_properties(directory)
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        marker.unlink(missing_ok=True)
        recovery_points = read_offsets(directory / RECOVERY_POINT_CHECKPOINT)
        log_starts = read_offsets(directory / LOG_START_OFFSET_CHECKPOINT)
        cleaned = read_offsets(directory / CLEANER_OFFSET_CHECKPOINT)
        futures = []
        for child in sorted(directory.iterdir()):
            moved = parse_moved_dir(child.name) if child.is_dir() else None
            if moved is not None:
                topic, partition, suffix = moved
                if suffix == DELETE_SUFFIX:  # a move's old copy or a deleted topic's log: Kafka
                    self.to_delete.append((child, self.clock()))  # queues it at load, as here
                else:
                    futures.append(((topic, partition), directory, child))
                continue
            key = parse_partition_dir(child.name) if child.is_dir() else None
            if key is None:
                continue
            if self._set_aside_if_stray(directory, child, key):
                continue
            if key in self.logs:
                # Kafka's refusal too: a broker stopped between the two renames of a move's swap
                # leaves two current copies, and which to keep is the operator's choice.
                raise ValueError(f"partition {key[0]}-{key[1]} is in two log dirs, {self._dir_of[key]} "
                                 f"and {directory} (a move between log dirs was interrupted?): delete "
                                 f"one of the two directories")
            self._put(key, self._writing_in_background(FileLog(
                child,
                self.default_config,
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=log_starts.get(key, 0),
                clean_shutdown=clean and key in recovery_points,
                clock=self.clock,
            )))
            self._dir_of[key] = directory
            if key in cleaned:
                self.logs[key].cleaned_to = first_dirty_offset(self.logs[key], cleaned[key])
        return futures

    def _set_aside_if_stray(self, directory: Path, child: Path, key: TopicPartition) -> bool:
        """Rename a stray partition directory ``-stray`` as Kafka's log loading does (kept, not
        deleted, for the operator to look at); answers whether it was one. A log without a topic
        id is not judged here (a log dir an older kafkapy wrote: it takes its topic's id), nor one
        whose partition.metadata cannot be read (the loading says why)."""
        if self.is_stray is None:
            return False
        try:
            topic_id = read_partition_metadata(child)
        except (CheckpointCorrupt, OSError):
            return False
        if topic_id is None or not self.is_stray(key[0], key[1], topic_id):
            return False
        stray = directory / stray_dir_name(*key)
        os.replace(child, stray)
        fsync_directory(directory)
        _log.warning("Log in %s marked stray and renamed to %s: topic id %s has no partition %d in the "
                     "cluster's metadata", child.absolute(), stray.absolute(), kafka_uuid(topic_id), key[1])
        return True

    def _adopt_future(self, key: TopicPartition, directory: Path, path: Path) -> None:
        """A future directory found at open: its move resumes, or with no current log it becomes
        the current one (Kafka's recoverAbandonedFutureLogs)."""
        if key in self.futures:
            raise ValueError(f"partition {key[0]}-{key[1]} has two future directories: "
                             f"{self.futures[key].path} and {path}")
        if key in self.logs:
            self.futures[key] = FutureLog(key[0], key[1], directory, path, resumed=True)
            return
        _log.warning("%s has no current log: it becomes partition %s-%d's log", path, *key)
        current = directory / partition_dir_name(*key)
        os.replace(path, current)
        fsync_directory(directory)
        self._put(key, self._writing_in_background(FileLog(current, self.default_config, clock=self.clock)))
        self._dir_of[key] = directory

    def _check_meta_properties(self, directory: Path) -> None:
        path = directory / META_PROPERTIES
        if check_meta_properties(directory, self.broker_id, self.cluster_id):
            return
        lines = ["#", "#Written by kafkapy", "version=0", f"broker.id={self.broker_id}"]
        if self.cluster_id:
            lines.append(f"cluster.id={self.cluster_id}")
        path.write_text("\n".join(lines) + "\n")

    # -- partitions ------------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> SegmentedLog | None:
        return self.logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None,
                      topic_id: uuid.UUID | None = None, *, is_new: bool = True) -> SegmentedLog:
        """The partition's log, created empty (in the least-loaded log dir) the first time.

        A partition whose log was in a failed dir is KAFKA_STORAGE_ERROR; so is one that is not
        ``is_new`` while a dir that failed at start could not be listed (its log may be there).

        ``topic_id`` (KIP-516), when known, is recorded in the log (partition.metadata) as Kafka's
        LogManager.getOrCreateLog does; a log holding another one is InconsistentTopicId, unless
        topic ids do not outlive the broker (``lasting_topic_ids`` false: an in-memory store gives
        a topic a new id each run), when the log takes the new id."""
        key = (topic, partition)
        log = self.logs.get(key)
        if log is None and (key in self.offline_partitions or (self.unlisted_offline and not is_new)):
            raise storage_error(topic, partition)
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
            preferred = self.preferred_dirs.pop(key, None)
            online = preferred is not None and self.log_dir_online(preferred)
            directory = preferred if preferred is not None and online else self._least_loaded_dir()
            if directory is None:
                raise storage_error(topic, partition)
            try:
                log = self._writing_in_background(
                    FileLog(directory / partition_dir_name(topic, partition), config, clock=self.clock))
            except OSError as exc:  # Kafka: the dir goes offline, and the partition with it
                _log.error("Error while creating log for %s-%d in dir %s: %s", topic, partition,
                           directory.absolute(), exc)
                self.fail_dir(directory, exc)
                self.offline_partitions[key] = directory
                if self.on_offline is not None:
                    self.on_offline()
                raise storage_error(topic, partition) from None
            self._dir_of[key] = directory
        if topic_id is not None:
            log.assign_topic_id(topic_id)
        self._put(key, log)
        return log

    def _put(self, key: TopicPartition, log: SegmentedLog) -> None:
        self.logs[key] = log
        self._partitions_of.setdefault(key[0], set()).add(key[1])

    def _writing_in_background(self, log: FileLog) -> FileLog:
        log.background = self.background
        return log

    def _least_loaded_dir(self) -> Path | None:
        """The online dir holding the fewest partitions (Kafka's nextLogDirs); None when none is."""
        counts = {d: 0 for d in self.log_dirs if self.log_dir_online(d)}
        if not counts:
            return None
        for d in self._dir_of.values():
            if d in counts:
                counts[d] += 1
        return min(counts, key=lambda d: counts[d])

    # -- log dirs and moves between them ------------------------------------------------------

    def log_dir(self, path: str) -> Path | None:
        """The log dir ``path`` names: Kafka compares it with each one's absolute path."""
        for directory in self.log_dirs:
            if str(directory.absolute()) == path:
                return directory
        return None

    def log_dir_online(self, directory: Path) -> bool:
        """Not failed since the start, and still a directory (a disk gone is offline)."""
        return directory not in self.offline_dirs and directory.is_dir()

    def dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def prefer_dir(self, topic: str, partition: int, directory: Path) -> None:
        """Kafka's maybeUpdatePreferredLogDir: a log made later for the partition goes to
        ``directory`` (unless its current or future log is there already)."""
        key = (topic, partition)
        future = self.futures.get(key)
        if self._dir_of.get(key) != directory and (future is None or future.log_dir != directory):
            self.preferred_dirs[key] = directory

    def start_move(self, topic: str, partition: int, directory: Path) -> FutureLog | None:
        """Make the partition's future directory in ``directory``; answers it, or the one under
        way there already, or None when the log is in ``directory`` (a move elsewhere cancelled,
        as Kafka's futureReplicaDirChanged)."""
        key = (topic, partition)
        self.preferred_dirs.pop(key, None)
        future = self.futures.get(key)
        if future is not None:
            if future.log_dir == directory:
                return future
            self.cancel_move(topic, partition)
        if self._dir_of.get(key) == directory or key not in self.logs:
            return None
        path = directory / future_dir_name(topic, partition)
        path.mkdir()
        future = self.futures[key] = FutureLog(topic, partition, directory, path)
        return future

    def cancel_move(self, topic: str, partition: int) -> None:
        """Drop the partition's future directory; its copy (if one runs) stops at its next chunk."""
        future = self.futures.pop((topic, partition), None)
        if future is not None:
            future.stop.set()
            shutil.rmtree(future.path, ignore_errors=True)

    def mark_offline(self, directory: Path) -> None:
        """A disk error in ``directory`` (:meth:`fail_dir` without the cause)."""
        self.fail_dir(directory)

    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def _all_failed_message(self) -> str:
        return f"Shutdown broker because all log dirs in {', '.join(map(str, self.log_dirs))} have failed"

    def dir_containing(self, path: Path) -> Path | None:
        """The log dir ``path`` is in (or is), if any."""
        for directory in self.log_dirs:
            if path == directory or path.is_relative_to(directory):
                return directory
        return None

    def fail_dir(self, directory: Path, exc: BaseException | None = None) -> list[TopicPartition]:
        """Kafka's LogDirFailureChannel and LogManager.handleLogDirFailure, on the thread that
        owns the logs: ``directory`` goes offline until a restart; its logs are dropped, their
        files closed as they are (nothing flushed or checkpointed: a restart recovers them), and
        their partitions answer KAFKA_STORAGE_ERROR; moves into it stop (their future directory
        left as it is). Answers the partitions that went offline (none if it was offline already).
        Raises AllLogDirsFailed when no dir is left online."""
        if directory in self.offline_dirs:
            return []
        _log.error("Stopping serving logs in dir %s%s", directory.absolute(), f": {exc}" if exc else "")
        self.offline_dirs.add(directory)
        gone = [k for k, d in self._dir_of.items() if d == directory]
        for key in gone:
            self._forget_offline(key, directory)
        for key, future in list(self.futures.items()):
            if future.log_dir == directory or key in self.offline_partitions:
                future.stop.set()
                del self.futures[key]
        if gone:
            _log.warning("Logs for partitions %s are offline: log dir %s failed",
                         ", ".join(f"{t}-{p}" for t, p in gone), directory.absolute())
            if self.on_offline is not None:
                self.on_offline()
        if not self.online_dirs():
            raise AllLogDirsFailed(self._all_failed_message())
        return gone

    def _forget_offline(self, key: TopicPartition, directory: Path) -> None:
        log = self.logs.pop(key)
        partitions = self._partitions_of[key[0]]
        partitions.discard(key[1])
        if not partitions:
            del self._partitions_of[key[0]]
        del self._dir_of[key]
        self.offline_partitions[key] = directory
        if isinstance(log, FileLog):
            log.close_handlers()

    def report_failure(self, path: Path | None, what: str, exc: OSError) -> None:
        """An I/O error on another thread (the background writer's) about ``path``: queued for
        the loop (Kafka's failure channel), which handles it at :meth:`handle_reported_failures`."""
        directory = self.dir_containing(path) if path is not None else None
        if directory is None:
            return
        with self._reported_lock:
            self._reported.append((directory, f"{what}: {exc}"))
            self.failures_reported = True
        if self.on_failure_reported is not None:
            self.on_failure_reported()

    def handle_reported_failures(self) -> list[TopicPartition]:
        """Take the dirs the background writer found failing offline (on the owner's thread);
        answers the partitions that went offline. Raises AllLogDirsFailed as :meth:`fail_dir`."""
        with self._reported_lock:
            reported, self._reported = self._reported, []
            self.failures_reported = False
        gone: list[TopicPartition] = []
        for directory, reason in reported:
            if directory not in self.offline_dirs:
                _log.error("Error in log dir %s: %s", directory.absolute(), reason)
                gone += self.fail_dir(directory)
        return gone

    def swap(self, topic: str, partition: int) -> Path:
        """Kafka's replaceCurrentWithFutureLog, in one step of the loop that appends: the copy
        finished, the future directory renamed into place and the log continuing there, the old
        directory renamed ``-delete``. Answers the old directory (to delete, off the loop); the
        two dirs' checkpoints are the caller's next step (:meth:`checkpoint_dirs`)."""
        key = (topic, partition)
        future = self.futures[key]
        log = self.logs[key]
        assert isinstance(log, FileLog)
        finish_copy(log, future)
        source = self._dir_of[key]
        current = future.log_dir / partition_dir_name(topic, partition)
        os.replace(future.path, current)
        fsync_directory(future.log_dir)
        old = log.directory
        log.relocate(current)
        del self.futures[key]
        self._dir_of[key] = future.log_dir
        doomed = source / delete_dir_name(topic, partition)
        os.replace(old, doomed)
        fsync_directory(source)
        return doomed

    def checkpoint_dirs(self, *dirs: Path) -> None:
        """The recovery-point and log-start-offset checkpoints of ``dirs`` (after a move, as
        Kafka's replaceCurrentWithFutureLog writes the source dir's): a restart then trusts the
        moved log from its recovery point, not from 0."""
        for name, value, include in self._checkpoints()[:2]:
            self._write_checkpoint(name, value, include, dirs=list(dirs))

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Drop the partition's log (Kafka's asyncDelete): on disk its directory is renamed
        ``-delete`` now and queued for :meth:`remove_deleted`; answers whether there was a log."""
        self.cancel_move(topic, partition)
        self.preferred_dirs.pop((topic, partition), None)
        log = self.logs.pop((topic, partition), None)
        if log is None:
            return False
        partitions = self._partitions_of[topic]
        partitions.discard(partition)
        if not partitions:
            del self._partitions_of[topic]
        self._dir_of.pop((topic, partition), None)
        if isinstance(log, FileLog):
            doomed = log.directory.with_name(delete_dir_name(topic, partition))
            if log.delete(doomed):
                self.to_delete.append((doomed, self.clock()))
                _log.info("Log for partition %s-%d is renamed to %s and is scheduled for deletion",
                          topic, partition, doomed.absolute())
                if self.on_deletion_queued is not None:
                    self.on_deletion_queued()
        else:
            log.truncate_fully_and_start_at(0)
        return True

    @property
    def delete_delay_ms(self) -> int:
        """Kafka's currentDefaultConfig.fileDeleteDelayMs: the broker's log.segment.delete.delay.ms
        (a topic's own file.delete.delay.ms does not apply to its deleted logs, in Kafka too)."""
        return self.default_config.file_delete_delay_ms

    def next_deletion_ms(self) -> int | None:
        """When (by ``clock``) the oldest queued ``-delete`` directory is due; None with none."""
        return self.to_delete[0][1] + self.delete_delay_ms if self.to_delete else None

    def remove_deleted(self, now_ms: int | None = None) -> list[Path]:
        """Remove the queued ``-delete`` directories whose file.delete.delay.ms has passed (Kafka's
        deleteLogs), on the background writer when there is one (a gigabyte of segments takes a
        few hundred milliseconds to unlink); answers them."""
        now = self.clock() if now_ms is None else now_ms
        due = []
        while self.to_delete and self.to_delete[0][1] + self.delete_delay_ms <= now:
            due.append(self.to_delete.popleft()[0])
        for doomed in due:
            remove = functools.partial(shutil.rmtree, doomed, ignore_errors=True)
            if self.background is None:
                remove()
            else:
                self.background.submit(f"removing {doomed}", remove, doomed)
            _log.info("Deleted log in %s", doomed.absolute())
        return due

    def topics(self) -> list[str]:
        """The topics with a log here, sorted."""
        return sorted(self._partitions_of)

    def delete_topic(self, topic: str) -> list[int]:
        """Drop every partition log of ``topic``; answers the partitions that had one."""
        gone = sorted(self._partitions_of.get(topic, ()))
        for partition in gone:
            self.delete_partition(topic, partition)
        return gone

    def describe_log_dirs(self) -> list[LogDirDescription]:
        """DescribeLogDirs: every log dir with each partition's size in bytes, and the future
        replicas moving to it."""
        if self.in_memory:
            return [
                LogDirDescription(
                    MEMORY_LOG_DIR, {k: log.size_in_bytes for k, log in sorted(self.logs.items())}
                )
            ]
        return [
            LogDirDescription(
                str(directory.absolute()),
                {
                    k: log.size_in_bytes
                    for k, log in sorted(self.logs.items())
                    if self._dir_of[k] == directory
                },
                {
                    k: (future.size, max(self.logs[k].log_end_offset - future.log_end_offset, 0))
                    for k, future in sorted(self.futures.items())
                    if future.log_dir == directory
                },
                self.log_dir_online(directory),
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
        for partition in self._partitions_of.get(topic, ()):
            self.logs[topic, partition].set_config(config)

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

    # Each checkpoint's offsets are read when it is asked for. ``wait`` (the default): written
    # here, after whatever the background writer has pending, and an OSError is the caller's.
    # Without it (the periodic passes of kafkapy.dataplane.maintenance) the file is written on
    # the background writer, in order after what came before.

    def checkpoint_recovery_points(self, *, wait: bool = True) -> None:
        """recovery-point-offset-checkpoint (Kafka: every log.flush.offset.checkpoint.interval.ms)."""
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point, wait=wait)

    def checkpoint_log_start_offsets(self, *, wait: bool = True) -> None:
        """log-start-offset-checkpoint (every log.flush.start.offset.checkpoint.interval.ms)."""
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset, wait=wait)

    def checkpoint_high_watermarks(self, *, wait: bool = True) -> None:
        """replication-offset-checkpoint (every replica.high.watermark.checkpoint.interval.ms)."""
        self._write_checkpoint(REPLICATION_OFFSET_CHECKPOINT, lambda log: log.high_watermark, wait=wait)

    def checkpoint_cleaner_offsets(self, *, wait: bool = True) -> None:
        """cleaner-offset-checkpoint: where each compacted log is clean up to (Kafka's
        LogCleanerManager writes it after each cleaning), so a restart does not clean it again.
        A log clean to no further than its start has no entry, as one never cleaned."""
        self._write_checkpoint(CLEANER_OFFSET_CHECKPOINT, lambda log: log.cleaned_to,
                               lambda log: log.cleaned_to > log.log_start_offset, wait=wait)

    @staticmethod
    def _checkpoints() -> list[tuple[str, Callable[[SegmentedLog], int], Callable[[SegmentedLog], bool]]]:
        always: Callable[[SegmentedLog], bool] = lambda log: True  # noqa: E731
        return [
            (RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point, always),
            (LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset, always),
            (REPLICATION_OFFSET_CHECKPOINT, lambda log: log.high_watermark, always),
            (CLEANER_OFFSET_CHECKPOINT, lambda log: log.cleaned_to,
             lambda log: log.cleaned_to > log.log_start_offset),
        ]

    def _write_checkpoint(self, name: str, value: Callable[[SegmentedLog], int],
                          include: Callable[[SegmentedLog], bool] = lambda log: True,
                          dirs: list[Path] | None = None, *, wait: bool = True) -> None:
        background = None if wait else self.background
        if wait and self.background is not None:
            self.background.drain()  # an earlier checkpoint still pending must not land after this one
        for directory in self.log_dirs if dirs is None else dirs:
            if not self.log_dir_online(directory):
                continue
            keys = [k for k, d in self._dir_of.items() if d == directory and include(self.logs[k])]
            path, offsets = directory / name, {k: value(self.logs[k]) for k in keys}
            if background is not None:
                background.submit(f"writing {path}", functools.partial(write_offsets, path, offsets), path)
                continue
            try:
                write_offsets(path, offsets)
            except OSError as exc:  # Kafka's CheckpointFileWithFailureHandler: the dir goes offline
                self.report_failure(path, f"writing {path}", exc)

    def _abandon(self) -> None:
        """Close the logs an open that failed had opened, and the writer's thread; no checkpoint
        and no dir marked clean (the next start recovers them as after a crash)."""
        for log in self.logs.values():
            log.background = None
            try:
                log.close()
            except OSError as exc:  # the open's own failure is the one to report
                _log.warning("closing %s after a failed open: %s", log, exc)
        if self.background is not None:
            self.background.close()

    def close(self) -> None:
        """Flush and close every log, checkpoint, then mark each dir as cleanly shut down (a dir
        that fails meanwhile goes offline and gets no marker: its logs are recovered at the next
        start)."""
        if self.background is not None:
            self.background.drain()
        try:
            self.handle_reported_failures()
            for key, log in list(self.logs.items()):
                log.background = None  # its last flush and snapshot are written before the marker
                try:
                    log.close()
                except OSError as exc:
                    directory = self._dir_of.get(key)
                    if directory is None:
                        raise
                    self.fail_dir(directory, exc)
            self.checkpoint()  # after what the background writer had pending
            self.handle_reported_failures()
        except AllLogDirsFailed as exc:
            _log.error("%s", exc)
        for directory in self.log_dirs:
            if self.log_dir_online(directory):
                try:
                    write_clean_shutdown(directory)
                except OSError as exc:
                    _log.error("Error while writing the clean shutdown marker of %s: %s", directory, exc)
        if self.background is not None:
            self.background.close()
