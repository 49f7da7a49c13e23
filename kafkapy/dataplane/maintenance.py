"""Log maintenance at run time: Kafka's retention check, log cleaner, producer-id expiry, flush
scheduler and checkpoint writers, on one periodic timer.

Kafka runs retention (``LogManager.cleanupLogs``) every ``log.retention.check.interval.ms`` on the
logs that do not compact, its log cleaner threads wake every ``log.cleaner.backoff.ms`` to compact
the dirtiest compacted log and then apply retention to the compacted ones (so with the cleaner
disabled a compacted log's segments are never deleted, in Kafka and here),
and each log forgets the idempotent producers idle for ``producer.id.expiration.ms`` every
``producer.id.expiration.check.interval.ms``. Its LogManager also flushes the logs whose
``flush.ms`` passed every ``log.flush.scheduler.interval.ms``, writes each log dir's
recovery-point-offset-checkpoint every ``log.flush.offset.checkpoint.interval.ms`` and its
log-start-offset-checkpoint every ``log.flush.start.offset.checkpoint.interval.ms``, and its
ReplicaManager the replication-offset-checkpoint (high watermarks) every
``replica.high.watermark.checkpoint.interval.ms``. kafkapy does all of them from one timer on the
broker's loop, at the shortest of the periods (so no other polling loop exists); each pass runs
only when its own period has passed by the services' clock, which a virtual clock may replace.
So after a crash the checkpoints on disk are at most one period old, as Kafka's.

A deleted topic's logs (renamed ``-delete`` at once by the LogManager) are removed
``file.delete.delay.ms`` after, by a timer of their own set for the oldest one due (Kafka's
kafka-delete-logs task, which reschedules itself for the head of its queue); the removal itself
runs on the log manager's background writer, never on the loop.

Compaction picks a log, as Kafka's cleaner does, when its dirty ratio (the bytes a cleaning could
reach past the last clean, over those plus the clean bytes) is above ``min.cleanable.dirty.ratio``,
or when ``max.compaction.lag.ms`` says a dirty segment waited too long and there is something to
clean.

``apply_retention()``/``compact()`` run a pass on demand (the embedded Broker's ``logs``), and
answer per partition what they removed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import threading
from collections.abc import Callable, Mapping

from kafkapy.log import LogManager
from kafkapy.log.cleaning import CompactionPlan
from kafkapy.log.producer_state import ProducerStateManager
from kafkapy.log.segmented import SegmentedLog
from kafkapy.server.clock import VirtualTimeLoop
from kafkapy.server.config import ConfigKey
from kafkapy.validators import AtLeast

__all__ = ["MAINTENANCE_CONFIG_KEYS", "LogMaintenance"]

TopicPartition = tuple[str, int]
_log = logging.getLogger(__name__)


MAINTENANCE_CONFIG_KEYS = (
    ConfigKey("log.retention.check.interval.ms", "long", 300_000,
              "How often retention deletes old segments (Kafka's default, 5 minutes).", AtLeast(1)),
    ConfigKey("log.cleaner.enable", "boolean", True,
              "Compact topics whose cleanup.policy has compact (Kafka's default: true)."),
    ConfigKey("log.cleaner.backoff.ms", "long", 15_000,
              "How often the cleaner looks for a log to compact (Kafka's default, 15 seconds).",
              AtLeast(1)),
    ConfigKey("producer.id.expiration.check.interval.ms", "int", 600_000,
              "How often idle idempotent producers are forgotten (Kafka's default, 10 minutes).",
              AtLeast(1)),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", "int", 60_000,
              "How often each log dir's recovery-point-offset-checkpoint is written (Kafka's default, "
              "1 minute).", AtLeast(1)),
    ConfigKey("log.flush.start.offset.checkpoint.interval.ms", "int", 60_000,
              "How often each log dir's log-start-offset-checkpoint is written (Kafka's default, "
              "1 minute).", AtLeast(1)),
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", "long", 5_000,
              "How often each log dir's replication-offset-checkpoint (high watermarks) is written "
              "(Kafka's default, 5 seconds).", AtLeast(1)),
)
LONG_MAX = (1 << 63) - 1


def dirty_ratio(log: SegmentedLog, cleaned_to: int, now_ms: int | None = None) -> float:
    """Kafka's LogToClean.cleanableRatio: the cleanable bytes (from ``cleaned_to`` up to the first
    segment a cleaning may not touch: the active one, the one holding the last stable offset, a
    dirty one younger than min.compaction.lag.ms) over those plus the clean bytes below."""
    return log.cleaning_need(now_ms, first_dirty=cleaned_to).ratio


class LogMaintenance:
    """Retention and compaction over a LogManager's logs, periodic and on demand."""

    def __init__(self, logs: Callable[[], LogManager], *, lock: threading.Lock,
                 maintains: Callable[[TopicPartition], bool] = lambda key: True,
                 retention_check_interval_ms: int,
                 cleaner_enable: bool, cleaner_backoff_ms: int, clock: Callable[[], float],
                 producers: Callable[[], Mapping[TopicPartition, ProducerStateManager]] = dict,
                 producer_expiration_check_ms: int = 600_000,
                 flush_scheduler_interval_ms: int = LONG_MAX,
                 recovery_point_checkpoint_ms: int = 60_000,
                 log_start_checkpoint_ms: int = 60_000,
                 high_watermark_checkpoint_ms: int = 5_000,
                 storage_failed: Callable[[str, int, OSError], object] | None = None) -> None:
        self._logs = logs
        # An OSError on a log (retention's deletes, a compaction's swap, a flush): its log dir goes
        # offline (Partitions.storage_failed), called once the LogHome's lock is let go.
        self._storage_failed = storage_failed
        self._lock = lock  # the LogHome's: brokers of one in-process cluster share in-memory logs
        # Which logs are this broker's to clean: all of its own log dirs; of shared in-memory logs,
        # those it leads (appended to on its loop only), so brokers never clean each other's.
        self._maintains = maintains
        self.retention_check_interval_ms = retention_check_interval_ms
        self.cleaner_enable = cleaner_enable
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self._clock = clock  # seconds (the services' clock)
        self._producers = producers  # each partition's producer table (the LogHome's)
        self.producer_expiration_check_ms = producer_expiration_check_ms
        self._timer: asyncio.TimerHandle | None = None
        self._deletion_timer: asyncio.TimerHandle | None = None  # schedule_deletions'
        # The periodic passes: (period in ms, what runs); Kafka's scheduled tasks, one row each.
        self._passes: list[tuple[int, Callable[[], object]]] = [
            (retention_check_interval_ms, self._retention_pass),
            (producer_expiration_check_ms, self.expire_producers),
            (flush_scheduler_interval_ms, self.flush_due),
            # The checkpoint files are written on the log manager's background writer (as Kafka's
            # scheduler threads write them): a pass reads the offsets and does not wait, unless
            # the clock is virtual (``start``), where a test that advanced it finds them written.
            (recovery_point_checkpoint_ms, lambda: self.checkpoint_recovery_points(wait=self._wait)),
            (log_start_checkpoint_ms, lambda: self.checkpoint_log_start_offsets(wait=self._wait)),
            (high_watermark_checkpoint_ms, lambda: self.checkpoint_high_watermarks(wait=self._wait)),
        ]
        if cleaner_enable:
            self._passes.append((cleaner_backoff_ms, self._cleaner_pass))
        self._wait = True
        # Kafka's log cleaner thread (log.cleaner.threads, 1 by default): a periodic pass plans
        # each due log's cleaning on the loop, cleans it here, and swaps it in on the loop
        # (kafkapy.log.cleaning). The logs being cleaned are not planned again meanwhile.
        self._cleaner: concurrent.futures.ThreadPoolExecutor | None = None
        self._cleaning: set[TopicPartition] = set()
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._next_due: list[float] = [0.0] * len(self._passes)

    # -- on demand ----------------------------------------------------------------------------

    def _mine(self) -> list[tuple[TopicPartition, SegmentedLog]]:
        return [(key, log) for key, log in list(self._logs().logs.items()) if self._maintains(key)]

    def apply_retention(self, now_ms: int | None = None, *,
                        compacted: bool | None = None) -> dict[TopicPartition, int]:
        """Delete what each log's retention allows; answers segments deleted per partition.
        ``compacted``: only the logs whose cleanup.policy has compact (True) or lacks it (False)."""
        removed: dict[TopicPartition, int] = {}
        failed: list[tuple[TopicPartition, OSError]] = []
        with self._lock:
            for key, log in self._mine():
                if compacted is not None and log.config.compacts != compacted:
                    continue
                if compacted and key in self._cleaning:
                    continue  # Kafka's deletableLogs skips a log the cleaner is working on
                try:
                    count = log.apply_retention(now_ms)
                except OSError as exc:
                    failed.append((key, exc))
                    continue
                if count:
                    removed[key] = count
        self._failed(failed)
        return removed

    def _failed(self, failed: list[tuple[TopicPartition, OSError]]) -> None:
        """The logs whose I/O failed during a pass: their dirs go offline (or, with no one to
        tell, the first failure is the pass's)."""
        for (topic, partition), exc in failed:
            if self._storage_failed is None:
                raise exc
            self._storage_failed(topic, partition, exc)

    def _retention_pass(self) -> None:
        """The retention timer's pass (Kafka's LogManager.cleanupLogs): the logs that do not
        compact; the cleaner's pass applies retention to those that do."""
        self.apply_retention(compacted=False)

    def compact(self, now_ms: int | None = None, *, only_dirty: bool = False,
                wait: bool = True) -> dict[TopicPartition, int]:
        """Compact every compacted log (or, ``only_dirty``, those the cleaner would pick); answers
        records removed per partition. ``wait``: return once the cleaner-offset-checkpoint is written."""
        removed: dict[TopicPartition, int] = {}
        cleaned = False
        failed: list[tuple[TopicPartition, OSError]] = []
        with self._lock:
            for key, log in self._mine():
                if not log.config.compacts:
                    continue
                if only_dirty and not self._due(log, now_ms):
                    continue
                before = log.cleaned_to
                try:
                    count = log.compact(now_ms)  # cleaned_to: not past min.compaction.lag.ms or the LSO
                except OSError as exc:
                    failed.append((key, exc))
                    continue
                cleaned |= log.cleaned_to != before
                if count:
                    removed[key] = count
            if cleaned:  # Kafka's doneCleaning: the cleaner-offset-checkpoint follows each cleaning
                self._logs().checkpoint_cleaner_offsets(wait=wait)
        self._failed(failed)
        return removed

    def _cleaner_pass(self) -> None:
        """The periodic cleaning: in place on a virtual clock (a test that advanced it finds the
        logs cleaned), else on the cleaner's thread."""
        if self._wait or self._loop is None:
            self.compact(only_dirty=True)
            self.apply_retention(compacted=True)
            return
        loop = self._loop
        with self._lock:
            for key, log in self._mine():
                if key in self._cleaning or not log.config.compacts or not self._due(log, None):
                    continue
                plan = log.plan_compaction()
                if plan is None:
                    continue
                if self._cleaner is None:
                    self._cleaner = concurrent.futures.ThreadPoolExecutor(
                        1, thread_name_prefix="kafkapy-log-cleaner")
                self._cleaning.add(key)
                cleaning = self._cleaner.submit(plan.clean, lambda: self._stopping)
                cleaning.add_done_callback(functools.partial(self._cleaned, loop, key, log, plan))
        # Kafka's cleaner thread applies retention to the compacted logs it is not cleaning
        # (LogCleaner.cleanFilthiestLog's deletableLogs), every backoff.
        self.apply_retention(compacted=True)

    def _cleaned(self, loop: asyncio.AbstractEventLoop, key: TopicPartition, log: SegmentedLog,
                 plan: CompactionPlan, cleaning: concurrent.futures.Future[bool]) -> None:
        """On the cleaner's thread (or wherever it was cancelled): hand the result to the loop."""
        if self._stopping or cleaning.cancelled():
            plan.release()  # its views' file handles, if it never ran
            plan.discard()  # the cleaned files it wrote, if it did
            return
        try:
            loop.call_soon_threadsafe(self._swap_in, key, log, plan, cleaning)
        except RuntimeError:  # the loop closed meanwhile
            pass

    def _swap_in(self, key: TopicPartition, log: SegmentedLog, plan: CompactionPlan,
                 cleaning: concurrent.futures.Future[bool]) -> None:
        """On the loop: the cleaned segments in place, if the log still is as planned."""
        self._cleaning.discard(key)
        failure = cleaning.exception()
        if failure is not None:
            _log.warning("cleaning %s-%d failed: %s", *key, failure)
            plan.discard()
            return
        with self._lock:
            if self._stopping or self._logs().logs.get(key) is not log or not self._maintains(key):
                plan.discard()
                return  # stopped, the partition gone, or (shared in-memory logs) led elsewhere now
            before = log.cleaned_to
            failed: list[tuple[TopicPartition, OSError]] = []
            try:
                log.finish_compaction(plan)
            except OSError as exc:
                failed.append((key, exc))
            else:
                if log.cleaned_to != before:  # Kafka's doneCleaning: the checkpoint follows each cleaning
                    self._logs().checkpoint_cleaner_offsets(wait=False)
        self._failed(failed)

    def expire_producers(self, now_ms: int | None = None) -> dict[TopicPartition, list[int]]:
        """Forget the producers idle for producer.id.expiration.ms (no open transaction, last
        batch that old by the logs' clock); answers the producer ids forgotten per partition."""
        removed: dict[TopicPartition, list[int]] = {}
        now = self._logs().clock() if now_ms is None else now_ms
        with self._lock:
            for key, state in list(self._producers().items()):
                if self._maintains(key):
                    gone = state.remove_expired(now)
                    if gone:
                        removed[key] = gone
        return removed

    def _due(self, log: SegmentedLog, now_ms: int | None) -> bool:
        # Dirty from cleaned_to, which cleaner-offset-checkpoint carries across a restart.
        return log.cleaning_need(now_ms).due(log.config.min_cleanable_dirty_ratio)

    def flush_due(self) -> int:
        """Kafka's flush scheduler: flush the logs whose flush.ms passed; answers how many."""
        now = self._logs().clock()
        flushed = 0
        failed: list[tuple[TopicPartition, OSError]] = []
        with self._lock:
            for key, log in list(self._logs().logs.items()):
                try:
                    flushed += log.maybe_flush(now)
                except OSError as exc:
                    failed.append((key, exc))
        self._failed(failed)
        return flushed

    def checkpoint_recovery_points(self, *, wait: bool = True) -> None:
        with self._lock:
            self._logs().checkpoint_recovery_points(wait=wait)

    def checkpoint_log_start_offsets(self, *, wait: bool = True) -> None:
        with self._lock:
            self._logs().checkpoint_log_start_offsets(wait=wait)

    def checkpoint_high_watermarks(self, *, wait: bool = True) -> None:
        with self._lock:
            self._logs().checkpoint_high_watermarks(wait=wait)

    def set_cleaner_backoff_ms(self, backoff_ms: int) -> None:
        """A new log.cleaner.backoff.ms (dynamic, as Kafka's LogCleaner reconfigures): the next
        cleaner pass is due at most that long from now."""
        if backoff_ms == self.cleaner_backoff_ms:
            return
        self.cleaner_backoff_ms = backoff_ms
        for i, (_, run) in enumerate(self._passes):
            if run == self._cleaner_pass:
                self._passes[i] = (backoff_ms, run)
                self._next_due[i] = min(self._next_due[i], self._clock() + backoff_ms / 1000)
        if self._timer is not None and self._loop is not None:
            self._timer.cancel()
            self._schedule(self._loop)

    def remove_deleted_logs(self) -> None:
        """Remove the deleted logs whose file.delete.delay.ms has passed, then wait for the next."""
        self._deletion_timer = None
        with self._lock:
            self._logs().remove_deleted()
        self.schedule_deletions()

    def schedule_deletions(self) -> None:
        """Set the deletion timer for the oldest queued ``-delete`` directory (on the loop: at
        start, for those found at load, and by the LogManager when it queues one)."""
        if self._loop is None or self._stopping:
            return
        if self._deletion_timer is not None:
            self._deletion_timer.cancel()
            self._deletion_timer = None
        logs = self._logs()
        due_ms = logs.next_deletion_ms()
        if due_ms is not None:
            delay_s = max(due_ms - logs.clock(), 0) / 1000
            self._deletion_timer = self._loop.call_later(delay_s, self.remove_deleted_logs)

    # -- the timer ----------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._wait = isinstance(loop, VirtualTimeLoop)
        self._loop = loop
        now = self._clock()
        self._next_due = [now + period / 1000 for period, _ in self._passes]
        self._schedule(loop)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._deletion_timer is not None:
            self._deletion_timer.cancel()
            self._deletion_timer = None
        self._stopping = True  # a cleaning under way stops at its next segment, its result dropped
        if self._cleaner is not None:
            self._cleaner.shutdown(wait=False, cancel_futures=True)
            self._cleaner = None

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        wake = min(self._next_due)
        self._timer = loop.call_later(max(wake - self._clock(), 0.0), self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        """One wake-up: whichever passes are due run, then the next wake-up is set."""
        now = self._clock()
        try:
            for i, (period, run) in enumerate(self._passes):
                if now >= self._next_due[i]:
                    self._next_due[i] = now + period / 1000
                    try:
                        run()
                    except Exception:  # a failed pass (a disk error) is logged; the others still run
                        _log.exception("log maintenance failed")
        finally:
            self._schedule(loop)
