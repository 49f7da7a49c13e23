"""The leader-epoch cache: which leader epoch started at which offset.

Kafka's LeaderEpochFileCache. Each batch carries the partition leader epoch it
was written under; the first batch of a new, higher epoch records
``epoch -> base offset``. OffsetForLeaderEpoch asks for the end offset of an
epoch, i.e. the start offset of the next known epoch (or the log end offset
for the latest one), which is how a follower or a consumer detects
truncated history. Truncation at either end of the log trims the cache.
"""

from __future__ import annotations

import bisect
from pathlib import Path

from kafkapy.log.base import NO_OFFSET, UNDEFINED_EPOCH, EpochEndOffset
from kafkapy.log.checkpoint import CheckpointCorrupt, java_integer, read_checkpoint, write_checkpoint

__all__ = ["LEADER_EPOCH_CHECKPOINT", "LeaderEpochCache"]

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"  # Kafka's file name, in each partition directory


class LeaderEpochCache:
    """Epoch start offsets in epoch order (both strictly increasing)."""

    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries or ():
            self.assign(epoch, start)

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` if it is newer than every known epoch."""
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return False
        # An older epoch that claims to start at or after this one is history a new leader overwrote.
        while self._starts and self._starts[-1] >= start_offset:
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch an offset was written in (ListOffsets' leader_epoch)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, epoch: int, log_end_offset: int) -> EpochEndOffset:
        """Kafka's endOffsetFor: the largest known epoch <= ``epoch`` and where the next one starts."""
        if epoch == UNDEFINED_EPOCH:
            return EpochEndOffset(UNDEFINED_EPOCH, NO_OFFSET)
        if self._epochs and self._epochs[-1] == epoch:
            return EpochEndOffset(epoch, log_end_offset)
        higher = bisect.bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return EpochEndOffset(UNDEFINED_EPOCH, NO_OFFSET)
        if higher == 0:
            return EpochEndOffset(epoch, self._starts[0])
        return EpochEndOffset(self._epochs[higher - 1], self._starts[higher])

    def truncate_from_end(self, end_offset: int) -> bool:
        """The log now ends at ``end_offset``: forget epochs that started at or after it; answers
        whether any went."""
        changed = False
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()
            changed = True
        return changed

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log now starts at ``start_offset``: the epoch covering it starts there; answers
        whether the entries changed."""
        i = bisect.bisect_right(self._starts, start_offset) - 1
        if i < 0 or (i == 0 and self._starts[0] == start_offset):
            return False
        del self._epochs[:i]
        del self._starts[:i]
        self._starts[0] = start_offset
        return True

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()

    # -- the leader-epoch-checkpoint file ------------------------------------------------

    def write(self, directory: Path) -> None:
        write_checkpoint(directory / LEADER_EPOCH_CHECKPOINT, self.entries)

    @classmethod
    def read(cls, directory: Path) -> LeaderEpochCache:
        rows = read_checkpoint(directory / LEADER_EPOCH_CHECKPOINT, 2)
        try:
            return cls([(java_integer(epoch, 32), java_integer(start, 64)) for epoch, start in rows])
        except ValueError:
            raise CheckpointCorrupt(
                f"{directory / LEADER_EPOCH_CHECKPOINT}: entries are not numbers"
            ) from None
