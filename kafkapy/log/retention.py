"""Which old segments retention deletes: Kafka's UnifiedLog.deleteOldSegments, as a pure function.

Retention removes whole segments, oldest first, and stops at the first that
must stay. It never takes the active segment (Kafka rolls it first when it
would; kafkapy leaves it, so the newest records are kept until the next roll)
nor a segment holding offsets at or past the high watermark. Three reasons,
the last two only with ``cleanup.policy`` containing ``delete``:

- the log start offset (DeleteRecords) passed the next segment's base offset;
- ``retention.bytes``: dropping the segment still leaves at least that much;
- ``retention.ms``: the segment's largest timestamp is older than that.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import attrs

from kafkapy.log.topic_config import LogConfig

__all__ = ["SegmentFacts", "deletable_segments"]


@attrs.frozen
class SegmentFacts:
    """What retention needs to know of a segment."""

    base_offset: int
    size: int
    largest_timestamp: int  # the max batch timestamp, or the last write without timestamps


def deletable_segments(
    segments: Sequence[SegmentFacts],
    config: LogConfig,
    now_ms: int,
    log_start_offset: int,
    high_watermark: int,
) -> int:
    """How many of the oldest segments to delete; the last segment (the active one) never counts."""
    remaining = sum(segment.size for segment in segments)
    count = 0
    for segment, following in itertools.pairwise(segments):
        if following.base_offset > high_watermark:
            break
        start_breached = following.base_offset <= log_start_offset
        size_breached = (
            config.deletes
            and config.retention_bytes >= 0
            and remaining - segment.size >= config.retention_bytes
        )
        time_breached = (
            config.deletes
            and config.retention_ms >= 0
            and now_ms - segment.largest_timestamp > config.retention_ms
        )
        if not (start_breached or size_breached or time_breached):
            break
        remaining -= segment.size
        count += 1
    return count
