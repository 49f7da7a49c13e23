"""The log dirs' background writer: fsyncs and checkpoint files, off the broker's loop.

An ``fsync`` here takes 5-15 ms (a checkpoint file is written, fsynced, renamed and its directory
fsynced: about 7 ms at the median, 16 ms at worst, measured on this machine's disk). On the loop
that is a stall for every connection of the broker. Kafka does this work on its scheduler threads
(``kafka-scheduler-N``): ``UnifiedLog.roll`` schedules the flush of the segment it closed
(``flush-log``) and the producer snapshot's fsync, and the checkpoint files are written by
scheduled tasks. kafkapy does the same on one thread per LogManager, in submission order, so a
checkpoint written later never lands before one written earlier.

What keeps this safe:

* the work is decided on the loop, only the writing happens here: a checkpoint's offsets are read
  when it is submitted, and a rolled segment's recovery point moves only once its fsync is done
  (``SegmentedLog._advance_recovery_point``), so no checkpoint names an offset not yet durable;
* an fsync goes through a duplicate of the file's descriptor, made when the work is submitted, so
  a segment closed, deleted or compacted meanwhile leaves this thread a valid descriptor of the
  file it had (fsync of a file since deleted is harmless);
* ``drain()`` waits for everything submitted: the LogManager drains before it closes the logs and
  writes the final checkpoints, and the on-demand ``checkpoint()`` drains, so a caller who asked
  sees the files.

A write that fails (the disk full, a directory moved away) is logged with its file and handed
to ``on_failure`` with the path it was about: the LogManager takes that path's log dir offline
(Kafka's LogDirFailureChannel, fed by its scheduler's tasks too), on the loop.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["DELETED_SUFFIX", "BackgroundWriter", "fsync_and_close", "fsync_path", "remove_file"]

DELETED_SUFFIX = ".deleted"  # Kafka's LogFileUtils.DELETED_FILE_SUFFIX

_log = logging.getLogger(__name__)


def fsync_and_close(descriptors: Iterable[int]) -> None:
    """fsync each descriptor, then close it (they are duplicates made for this). Every one is
    closed even when an fsync fails; the first failure is raised after."""
    failure: OSError | None = None
    for fd in descriptors:
        for step in (os.fsync, os.close):
            try:
                step(fd)
            except OSError as exc:
                failure = failure or exc
    if failure is not None:
        raise failure


def fsync_path(path: Path) -> None:
    """fsync a file or directory by name; one that is gone (deleted, moved) needs none."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_file(path: Path, background: BackgroundWriter | None) -> None:
    """Unlink ``path``; with a background writer, renamed ``<name>.deleted`` now (as Kafka's
    retention renames a segment's files) and unlinked there. A file left so by a stop is removed
    when its log opens again."""
    if background is None:
        path.unlink(missing_ok=True)
        return
    doomed = path.with_name(path.name + DELETED_SUFFIX)
    try:
        os.replace(path, doomed)
    except FileNotFoundError:
        return
    background.submit(f"removing {doomed}", lambda: doomed.unlink(missing_ok=True), doomed)


Failure = Callable[[Path | None, str, OSError], None]


class BackgroundWriter:
    """One thread running the submitted writes in order (Kafka's scheduler, for the log dirs)."""

    def __init__(self, name: str = "kafkapy-log-writer", *, on_failure: Failure | None = None) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._closed = False
        self.on_failure = on_failure  # told of each OSError, with the path the work was about

    def submit(self, what: str, work: Callable[[], object], path: Path | None = None) -> None:
        """Run ``work`` after everything submitted before it (here and now once closed); ``what``
        names it in a failure's log line, ``path`` is the file or directory it writes."""
        if self._closed:
            self._run(what, work, path)
            return
        self._executor.submit(self._run, what, work, path)

    def _run(self, what: str, work: Callable[[], object], path: Path | None) -> None:
        try:
            work()
        except OSError as exc:
            _log.warning("background write failed (%s): %s", what, exc)
            if self.on_failure is not None:
                self.on_failure(path, what, exc)
        except Exception:  # a defect: nobody reads the future, so say it here or it is never seen
            _log.exception("background write failed (%s)", what)

    def drain(self) -> None:
        """Wait until everything submitted so far is written."""
        if not self._closed:
            self._executor.submit(lambda: None).result()

    def close(self) -> None:
        """Write what is pending, then stop the thread."""
        self._closed = True
        self._executor.shutdown(wait=True)
