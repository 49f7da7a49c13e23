"""DescribeLogDirs and AlterReplicaLogDirs: the directories of ``log.dirs`` and moves between them.

AlterReplicaLogDirs answers as Kafka's ReplicaManager.alterReplicaLogDirs, per partition and in
its order of checks:

========================================================  ===============================
the partition's future directory name passes 255 bytes    INVALID_TOPIC_EXCEPTION
the path is no log dir's absolute path (every path when   LOG_DIR_NOT_FOUND
logs are in memory: no log dir is configured)
the log dir is offline, or the partition's log was in a   KAFKA_STORAGE_ERROR
dir that failed (Kafka's HostedPartition.Offline)
no such partition                                         UNKNOWN_TOPIC_OR_PARTITION
a partition with no log here, led by another broker       REPLICA_NOT_AVAILABLE
already there, or now moving there                        NONE
========================================================  ===============================

without ALTER on the cluster every partition is CLUSTER_AUTHORIZATION_FAILED. Before the
partition checks the path is remembered as the partition's preferred dir (Kafka's
maybeUpdatePreferredLogDir), so a partition asked for before this broker has its log gets it
there; a move under way to another dir is cancelled first.

A move (kafkapy.log.moves) runs as one task per partition: copy passes in a thread while
producers append, until a pass copies less than ``CATCH_UP_BYTES``; then the swap, in one step
of the loop, under the LogHome's lock. Meanwhile DescribeLogDirs lists the future replica in
the target dir (``is_future_key``, ``offset_lag`` its distance from the current log's end).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkapy.dataplane.partitions import Partitions
from kafkapy.errors import ErrorCode, KafkaApiError
from kafkapy.log.moves import CopyPlan, FutureLog, copy_pass, future_dir_name_length
from kafkapy.log.segments import FileLog
from kafkapy.protocol import Request
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.codec import body_fitter
from kafkapy.protocol.versions import VersionRange
from kafkapy.server.auth import CLUSTER_RESOURCE
from kafkapy.server.modules import Answer, RequestContext

__all__ = ["ALTER_REPLICA_LOG_DIRS_VERSIONS", "CATCH_UP_BYTES", "DESCRIBE_LOG_DIRS_VERSIONS", "LogDirs"]

ALTER_REPLICA_LOG_DIRS_VERSIONS = VersionRange(0, 2)  # v0 is v1's layout (v1: throttling after the answer)
DESCRIBE_LOG_DIRS_VERSIONS = VersionRange(0, 5)  # v0 is v1's layout (v1: throttling after the answer)
CATCH_UP_BYTES = 1 << 20  # a copy pass moving less ends the catch-up; the swap copies the rest
MAX_PASSES = 100  # producers outrunning the copy this long: the swap copies what is left
MAX_NAME_LENGTH = 255  # a directory name's limit (Kafka's check, KAFKA-4893)
MEMORY_LOG_DIR = "memory"
_log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Allowed = Callable[[RequestContext, str, str, str], bool]


class LogDirs:
    """The two log-dir APIs over the data plane's partitions, and the moves under way."""

    def __init__(self, partitions: Partitions, allowed: Allowed) -> None:
        self.partitions = partitions
        self._allowed = allowed
        self._movers: dict[TopicPartition, asyncio.Task[None]] = {}
        self.last_swap_seconds: float | None = None  # how long the last swap held the loop

    @property
    def _lock(self) -> threading.Lock:
        return self.partitions.home.lock

    # --- AlterReplicaLogDirs ----------------------------------------------------------------

    def alter(self, ctx: RequestContext, request: Request) -> Answer:
        asked: dict[TopicPartition, str] = {}  # Kafka's map: a partition asked twice, the last wins
        for directory in request.body.get("dirs") or []:
            for topic in directory.get("topics") or []:
                for index in topic.get("partitions") or []:
                    asked[topic["name"], index] = directory["path"]
        if self._allowed(ctx, "ALTER", "CLUSTER", CLUSTER_RESOURCE):
            errors = {key: self.alter_one(*key, path) for key, path in asked.items()}
        else:
            errors = dict.fromkeys(asked, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), code in errors.items():
            by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": code})
        return body_fitter(ApiKey.ALTER_REPLICA_LOG_DIRS, "response", ctx.api_version)(
            {"throttle_time_ms": 0,
             "results": [{"topic_name": t, "partitions": p} for t, p in by_topic.items()]})

    def alter_one(self, topic: str, partition: int, path: str) -> ErrorCode:
        """One partition's move to the log dir ``path``; the code Kafka answers for it."""
        if future_dir_name_length(topic, partition) > MAX_NAME_LENGTH:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        logs = self.partitions.logs
        directory = None if logs.in_memory else logs.log_dir(path)
        if directory is None:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if not logs.log_dir_online(directory) or (topic, partition) in logs.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR  # the target offline, or the partition's own dir
        future = logs.futures.get((topic, partition))
        if future is not None and future.log_dir != directory:
            logs.cancel_move(topic, partition)
        logs.prefer_dir(topic, partition, directory)
        try:
            if logs.get(topic, partition) is None or self.partitions.topic_id(topic) is None:
                self.partitions.leader_log(topic, partition)  # made in the preferred dir if led here
            else:
                self.partitions.leadership(topic, partition)  # a log here: this broker hosts it
        except KafkaApiError as exc:
            # Kafka keeps REPLICA_NOT_AVAILABLE (not NOT_LEADER_OR_FOLLOWER) for this API.
            not_here = exc.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            return ErrorCode.REPLICA_NOT_AVAILABLE if not_here else exc.code
        try:
            future = logs.start_move(topic, partition, directory)
        except OSError as exc:
            _log.error("cannot move %s-%d to %s: %s", topic, partition, directory, exc)
            self.partitions.fail_dir(directory, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR
        if future is not None:
            self.start_mover(future)
        return ErrorCode.NONE

    # --- the moves -------------------------------------------------------------------------

    def start_mover(self, future: FutureLog) -> None:
        """Run the move of ``future`` unless it runs already."""
        key = (future.topic, future.partition)
        running = self._movers.get(key)
        if running is not None and not running.done():
            if self.partitions.logs.futures.get(key) is future:
                return
        task = asyncio.get_running_loop().create_task(self._move(future))
        self._movers[key] = task

    def resume(self) -> None:
        """The moves found under way at start (``-future`` directories) go on."""
        for future in list(self.partitions.logs.futures.values()):
            self.start_mover(future)

    async def stop(self) -> None:
        """Stop the copies at their next chunk, leaving each future directory for the restart."""
        for key in self._movers:
            future = self.partitions.logs.futures.get(key)
            if future is not None:
                future.stop.set()
        await asyncio.gather(*self._movers.values(), return_exceptions=True)
        self._movers.clear()

    async def _move(self, future: FutureLog) -> None:
        logs = self.partitions.logs
        key = (future.topic, future.partition)
        log = logs.get(*key)
        if not isinstance(log, FileLog):
            logs.cancel_move(*key)
            return
        log.cleaning_paused = True  # Kafka's abortAndPauseCleaning: the copy is of the files as they are
        try:
            for _ in range(MAX_PASSES):
                plan = CopyPlan.of(log, future.path)
                copied = await asyncio.to_thread(copy_pass, future, plan)
                if future.stop.is_set() or logs.futures.get(key) is not future:
                    return
                future.size, future.log_end_offset = plan.size, plan.log_end_offset
                # a truncation during the pass: the next one starts over
                if copied < CATCH_UP_BYTES and log.rewrites == plan.rewrites:
                    break
            with self._lock:
                started = time.perf_counter()
                doomed = logs.swap(*key)
                self.last_swap_seconds = time.perf_counter() - started
            _log.info("moved %s-%d to %s (the swap held appends for %.1f ms)", *key, future.log_dir,
                      self.last_swap_seconds * 1000)
            await asyncio.sleep(0)  # appends waiting for the swap go first
            with self._lock:
                logs.checkpoint_dirs(doomed.parent, future.log_dir)
            await asyncio.to_thread(shutil.rmtree, doomed, True)
        except InterruptedError:
            return
        except OSError as exc:
            if future.stop.is_set() or logs.futures.get(key) is not future:
                return  # cancelled under the copy: its directory went away, not the disk
            _log.error("moving %s-%d to %s failed: %s", *key, future.log_dir, exc)
            failed = logs.dir_containing(Path(exc.filename)) if exc.filename else None
            if logs.futures.get(key) is future:
                logs.cancel_move(*key)
            if failed is not None:  # Kafka's LogDirFailureChannel: the target's, or the source's
                self.partitions.fail_dir(failed, exc)
        finally:
            if logs.futures.get(key) is not future and future.path.exists():
                # cancelled while its thread wrote there: what the cancel's removal raced with
                shutil.rmtree(future.path, ignore_errors=True)
            log.cleaning_paused = key in logs.futures
            if self._movers.get(key) is asyncio.current_task():
                del self._movers[key]

    # --- DescribeLogDirs ---------------------------------------------------------------------

    def describe(self, ctx: RequestContext, request: Request) -> Answer:
        """The partitions this broker leads, per log dir (one "memory" dir for in-memory logs),
        with the future replicas of moves under way; an offline dir is KAFKA_STORAGE_ERROR."""
        fit = body_fitter(ApiKey.DESCRIBE_LOG_DIRS, "response", ctx.api_version)
        if not self._allowed(ctx, "DESCRIBE", "CLUSTER", CLUSTER_RESOURCE):
            return fit({"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        "results": []})
        wanted = request.body.get("topics")
        asked = None if wanted is None else {(t["topic"], p) for t in wanted
                                             for p in t.get("partitions") or []}
        results = []
        for described in self.partitions.logs.describe_log_dirs():
            if not described.online:
                results.append({"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "log_dir": described.path,
                                "topics": [], "total_bytes": -1, "usable_bytes": -1, "is_cordoned": False})
                continue
            by_topic: dict[str, list[dict[str, Any]]] = {}
            entries = [(key, size, 0, False) for key, size in described.partition_sizes.items()]
            entries += [(key, size, lag, True) for key, (size, lag) in described.futures.items()]
            for (topic, index), size, lag, future in entries:
                if asked is not None and (topic, index) not in asked:
                    continue
                if not future and not self._hosted(topic, index):
                    continue  # shared memory logs of partitions other brokers lead
                by_topic.setdefault(topic, []).append({"partition_index": index, "partition_size": size,
                                                       "offset_lag": lag, "is_future_key": future})
            total = usable = -1
            if described.path != MEMORY_LOG_DIR:
                usage = shutil.disk_usage(described.path)
                total, usable = usage.total, usage.free
            results.append({"error_code": ErrorCode.NONE, "log_dir": described.path,
                            "topics": [{"name": t, "partitions": p} for t, p in sorted(by_topic.items())],
                            "total_bytes": total, "usable_bytes": usable, "is_cordoned": False})
        return fit({"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results})

    def _hosted(self, topic: str, index: int) -> bool:
        try:
            self.partitions.leader_log(topic, index)
        except KafkaApiError:
            return False
        return True

