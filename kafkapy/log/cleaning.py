"""A compaction in three steps, so that its work can leave the broker's loop (Kafka's cleaner thread).

Cleaning a log is Python work on every record of its rolled segments: 25 MB of records take about
0.7 s here, and on the loop every connection of the broker waits that long. Kafka's cleaner runs
on its own threads and swaps the cleaned segments in under the log's lock. kafkapy does the same:

1. **plan** (``SegmentedLog.plan_compaction``, on the loop): which segments are cleanable (not
   the active one, not past the last stable offset, old enough by ``min.compaction.lag.ms``), the
   aborted transactions among them and the active producers' last records, all read now; each
   segment is given as a :class:`SegmentView`, its batches' positions copied and its bytes read
   through its own handle (a duplicate file descriptor, or the list of buffers it had), so nothing
   the loop does meanwhile changes what the cleaning reads;
2. **clean** (:meth:`CompactionPlan.clean`, anywhere: the log cleaner's thread): the offset map
   and each segment's cleaned batches, from the views alone;
3. **finish** (``SegmentedLog.finish_compaction``, on the loop): if the log still holds the same
   segments at the same sizes, was neither truncated nor rewritten since (``rewrites``), and is not
   paused for a move, the cleaned segments replace them; otherwise the result is dropped and the
   next pass cleans again from what is there, as Kafka's cleaner aborts on a truncation.

``SegmentedLog.compact`` runs the three in a row: the on-demand pass tests call, and the plain
path the threaded one is held equal to (tests/log/test_cleaning.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence

import attrs

from kafkapy.errors import DecodeError
from kafkapy.log.compaction import (
    CleanedSegment,
    LastRecord,
    TransactionWalk,
    build_offset_map,
    clean_batches,
)
from kafkapy.log.txn_index import AbortedTxn
from kafkapy.protocol.records import RecordBatch

__all__ = ["CompactionPlan", "SegmentView", "file_reader"]


def file_reader(fd: int) -> tuple[Callable[[int, int], bytes], Callable[[], None]]:
    """Reads of [start, end) through a duplicate of ``fd``, and what closes it."""
    own = os.dup(fd)

    def read(start: int, end: int) -> bytes:
        data = os.pread(own, end - start, start)
        if len(data) != end - start:
            raise OSError(f"{end - start} bytes expected at {start}, {len(data)} read")
        return data
    return read, lambda: os.close(own)


@attrs.frozen(eq=False)
class SegmentView:
    """A rolled segment as the plan saw it: its batches' byte ranges and a reader of its own."""

    segment: object  # the Segment itself, compared by identity when the plan finishes
    size: int
    ranges: Sequence[tuple[int, int]]  # each batch's [start, end)
    read: Callable[[int, int], bytes | memoryview]
    release: Callable[[], None]
    # What the cleaner's thread can do for the swap ahead (files: write and fsync the cleaned
    # segment beside the old one), and how to undo it when the result is dropped.
    prepare: Callable[[bytes], object] = lambda data: None
    discard: Callable[[object], None] = lambda prepared: None

    def batches(self) -> Iterator[RecordBatch]:
        for start, end in self.ranges:
            yield RecordBatch(self.read(start, end))


@attrs.define(eq=False)
class CompactionPlan:
    """What one cleaning of one log works from (step 1), and its result once cleaned (step 2)."""

    views: list[SegmentView]
    end: int  # the first offset not cleaned (the next segment's base): the log is clean below it
    aborted: list[AbortedTxn]
    last_records: Mapping[int, LastRecord]
    now_ms: int
    delete_retention_ms: int
    rewrites: int  # the log's count of rewrites when planned
    cleaned: list[CleanedSegment] | None = None
    prepared: list[object] = attrs.Factory(list)  # per view, what ``prepare`` made (or None)

    def clean(self, stop: Callable[[], bool] = lambda: False) -> bool:
        """Step 2: every segment's cleaned batches; False, with nothing kept, when ``stop`` says
        so between segments (the broker is stopping), or when a segment no longer reads as it did
        (truncated in place meanwhile: the log changed, so step 3 would drop the result anyway)."""
        try:
            offset_map = build_offset_map((b for view in self.views for b in view.batches()),
                                          TransactionWalk(self.aborted))
            walk = TransactionWalk(self.aborted)
            cleaned = []
            for view in self.views:
                if stop():
                    self.discard()
                    return False
                result = clean_batches(view.batches(), offset_map, now_ms=self.now_ms,
                                       delete_retention_ms=self.delete_retention_ms, walk=walk,
                                       last_records=self.last_records, round_end=self.end)
                cleaned.append(result)
                self.prepared.append(view.prepare(result.data) if result.changed else None)
            self.cleaned = cleaned
            return True
        except (OSError, DecodeError):
            self.discard()
            return False
        finally:
            self.release()

    def discard(self) -> None:
        """Undo what was prepared for a swap that will not happen."""
        for view, prepared in zip(self.views, self.prepared, strict=False):
            if prepared is not None:
                view.discard(prepared)
        self.prepared = []
        self.cleaned = None

    def release(self) -> None:
        """Close the views' own handles (once cleaned, or when the plan is dropped)."""
        for view in self.views:
            view.release()
        self.views = [attrs.evolve(view, read=_released, release=_nothing) for view in self.views]


def _released(start: int, end: int) -> bytes:
    raise RuntimeError("the plan's segment views were released")


def _nothing() -> None:
    pass
